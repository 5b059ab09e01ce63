"""qselect, qsig (signals, suspend and resume), qorder, qmsg, qstart/qstop/qenable/qdisable
and qterm on the local engine, as OpenPBS 23.06 answers them (checked:
tests/adapters/test_pbs_control_parity.py); and each refused to a user on another's job."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from .conftest import until


def _qsub(engine, *args: str, script: str | None = None) -> str:
    if script is not None:
        return engine.pbs("qsub", *args, input=script, check=True).stdout.strip()
    return engine.pbs("qsub", *args, check=True).stdout.strip()


def _lines(done) -> list[str]:
    return done.stdout.split()


def _process_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _session(engine, job_id: str) -> int:
    return int(until(lambda: engine.job(job_id).get("session_id"), timeout=30,
                     what="the job's session id"))


def test_qselect_selects_by_each_option_in_queue_order(engine):
    running = _qsub(engine, "-N", "runner", "-A", "acct", "-P", "proj", "-p", "5", "-r", "n",
                    "-l", "walltime=01:00:00", "--", "/bin/sleep", "300")
    held = _qsub(engine, "-h", "-N", "heldone", "--", "/bin/true")
    waiting = _qsub(engine, "-a", "203001010000", "--", "/bin/true")
    done = _qsub(engine, "--", "/bin/true")
    engine.wait(running, "R")
    engine.wait(done)
    assert _lines(engine.pbs("qselect")) == [running, held, waiting]
    cases = {("-s", "R"): [running], ("-s", "HW"): [held, waiting], ("-N", "heldone"): [held],
             ("-A", "acct"): [running], ("-P", "proj"): [running], ("-p", "5"): [running],
             ("-p", ".lt.5"): [held, waiting], ("-r", "n"): [running],
             ("-h", "u"): [held], ("-h", "n"): [running, waiting],
             ("-l", "walltime.gt.0"): [running], ("-l", "walltime.lt.1:00:00"): [held, waiting],
             ("-l", "ncpus.eq.1"): [running, held, waiting],
             ("-a", ".gt.202901010000"): [waiting], ("-q", "workq"): [running, held, waiting],
             ("-u", "root"): [running, held, waiting], ("-u", "nosuchuser"): [],
             ("-x", "-s", "F"): [done]}
    for args, expected in cases.items():
        answer = engine.pbs("qselect", *args)
        assert (answer.returncode, _lines(answer)) == (0, expected), args
    engine.pbs("qdel", "-W", "force", running, held, waiting, check=True)


def test_qselect_refuses_what_openpbs_refuses(engine):
    usage = engine.pbs("qselect", "extra")
    assert (usage.returncode, usage.stderr.splitlines()[0]) == (
        2, "usage: qselect [-a [op]date_time] [-A account_string] [-c [op]interval]")
    for args, status, first in (
            (("-s", "r"), 2, "qselect: illegal -s value"),
            (("-h", "nu"), 2, "qselect: illegal -h value"),
            (("-r", "N"), 2, "qselect: illegal -r value"),
            (("-a", "gt.2029"), 2, "qselect: illegal -a value"),
            (("-u", ""), 2, "qselect: illegal -u value"),
            (("-l", "ncpus=1"), 2, "qselect: illegal -l value"),
            (("-l", "nosuch.eq.1"), 187, "qselect: Unknown resource Resource_List.nosuch"),
            (("-l", "ncpus.gt.abc"), 166,
             "qselect: Illegal attribute or resource value Resource_List.ncpus"),
            (("-p", "gt.0"), 166, "qselect: Illegal attribute or resource value"),
            (("-N", ""), 166, "qselect: Illegal attribute or resource value Job_Name"),
            (("-q", "nosuch"), 170, "qselect: Unknown queue destination")):
        answer = engine.pbs("qselect", *args)
        assert (answer.returncode, answer.stdout, answer.stderr.splitlines()[0]) == (
            status, "", first), args
    assert engine.pbs("qselect", "-l", "ncpus=1").stderr.splitlines()[1] == \
        "resource_list: ncpus=1"


def test_qorder_swaps_two_jobs_places_and_the_scheduler_follows(engine):
    engine.pbs("qmgr", "-c", "set node " + next(iter(engine.nodes())) +
               " resources_available.ncpus = 1", check=True)
    for name in list(engine.nodes())[1:]:
        engine.pbs("qmgr", "-c", f"delete node {name}", check=True)
    blocker = _qsub(engine, "--", "/bin/sleep", "300")
    engine.wait(blocker, "R")
    first = _qsub(engine, "-N", "first", "--", "/bin/sleep", "300")
    second = _qsub(engine, "-N", "second", "--", "/bin/sleep", "300")
    assert _lines(engine.pbs("qselect", "-s", "Q")) == [first, second]
    swapped = engine.pbs("qorder", first, second)
    assert (swapped.returncode, swapped.stderr) == (0, "")
    assert _lines(engine.pbs("qselect", "-s", "Q")) == [second, first]
    running = engine.pbs("qorder", blocker, first)
    assert (running.returncode, running.stderr) == (
        168, f"qorder: Request invalid for state of job {blocker} or {first}\n")
    unknown = engine.pbs("qorder", first, "99999")
    host = first.split(".", 1)[1]
    assert (unknown.returncode, unknown.stderr) == (
        153, f"qorder: Unknown Job Id {first} or 99999.{host}\n")
    engine.pbs("qdel", blocker, check=True)
    engine.wait(second, "R")  # (the one now first in the queue)
    assert engine.job(first)["job_state"] == "Q"
    engine.pbs("qdel", "-W", "force", first, second, check=True)


def test_qsig_sends_a_signal_to_the_jobs_processes(engine):
    # (SIGUSR1 ends a shell that has not set its trap yet: sent once the trap is set)
    marker, trapped = engine.work / "got-usr1", engine.work / "trapped"
    script = (f"trap 'echo usr1 > {marker}' USR1\n"
              f"touch {trapped}\n"
              "i=0; while [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done\n")
    job_id = _qsub(engine, script=script)
    engine.wait(job_id, "R")
    until(trapped.exists, timeout=30, what="the job's trap set")
    sent = engine.pbs("qsig", "-s", "SIGUSR1", job_id)
    assert (sent.returncode, sent.stderr) == (0, "")
    until(marker.exists, timeout=30, what="the job's trap of SIGUSR1")
    for name in ("nosig", "usr1", "sigusr1", "SIGRTMIN", "-3", ""):  # (as PBS's: capitals)
        bad = engine.pbs("qsig", "-s", name, job_id)
        assert (bad.returncode, bad.stderr) == (
            165, f"qsig: Unknown/illegal signal name {job_id}\n"), name
    for number in ("0", "99"):  # (any number is taken; one no signal has sends nothing)
        assert engine.pbs("qsig", "-s", number, job_id).returncode == 0
    assert engine.job(job_id)["job_state"] == "R"
    held = _qsub(engine, "-h", "--", "/bin/true")
    refused = engine.pbs("qsig", "-s", "USR1", held)
    assert (refused.returncode, refused.stderr) == (
        168, f"qsig: Request invalid for state of job {held}\n")
    engine.pbs("qsig", "-s", "KILL", job_id, check=True)
    assert engine.wait(job_id)["Exit_status"] == 256 + 9
    finished = engine.pbs("qsig", job_id)
    assert (finished.returncode, finished.stderr) == (35, "qsig: Job has finished\n")


def test_qsig_suspend_stops_the_job_frees_its_cpus_and_its_walltime(engine):
    # (120 short sleeps: a suspended loop makes no progress, as one long sleep would. A
    # walltime of 8 s: the suspend comes before it, on a loaded machine too, which took
    # 2.8 s of the 4 it had)
    submitted = time.monotonic()  # (before the job exists: its whole run comes after)
    job_id = _qsub(engine, "-l", "walltime=00:00:08", script=(
        "i=0; while [ $i -lt 120 ]; do sleep 0.1; i=$((i+1)); done\n"))
    engine.wait(job_id, "R")
    pgid = _session(engine, job_id)
    assert engine.pbs("qsig", "-s", "suspend", job_id).returncode == 0
    stopped = time.monotonic()  # (the server has it suspended from before this)
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["substate"]) == ("S", 43)
    until(lambda: _process_state(pgid) == "T", timeout=10, what="the job's process stopped")
    assert not any(job_id in str(n.get("jobs", "")) for n in engine.nodes().values())
    again = engine.pbs("qsig", "-s", "suspend", job_id)
    assert (again.returncode, again.stderr) == (
        168, f"qsig: Request invalid for state of job {job_id}\n")
    assert _lines(engine.pbs("qselect", "-s", "S")) == [job_id]
    time.sleep(9)  # past its walltime while suspended: not killed for it
    assert engine.job(job_id)["job_state"] == "S"
    resumed = time.monotonic()  # (and until after this)
    assert engine.pbs("qsig", "-s", "resume", job_id).returncode == 0
    assert engine.job(job_id)["job_state"] == "R"
    until(lambda: _process_state(pgid) != "T", timeout=10, what="the job's process woken")
    ended = engine.wait(job_id)
    finished = time.monotonic()  # (after its end)
    assert ended["Exit_status"] == -29  # (12 s of its loop over a walltime of 8: killed)
    used = sum(int(p) * 60 ** i for i, p in enumerate(
        reversed(ended["resources_used"]["walltime"].split(":"))))
    # Its run lies within submitted..finished and was suspended for all of stopped..resumed
    # (9 s and more): its walltime leaves that out (+1: it is counted in whole seconds).
    # Counted in, the walltime would be over this bound by those 9 s less the round trips
    # before its start and after its end.
    assert used <= (finished - submitted) - (resumed - stopped) + 1


def test_a_suspended_job_is_adopted_after_a_restart_and_qdel_ends_it(engine):
    job_id = _qsub(engine, "--", "/bin/sleep", "300")
    engine.wait(job_id, "R")
    pgid = _session(engine, job_id)
    engine.pbs("qsig", "-s", "suspend", job_id, check=True)
    engine.stop()
    engine.start()
    assert engine.job(job_id)["job_state"] == "S"
    assert _process_state(pgid) == "T"
    assert "Running:1 " in engine.pbs("qstat", "-Qf", check=True).stdout  # (as PBS counts it)
    engine.pbs("qsig", "-s", "resume", job_id, check=True)
    engine.pbs("qsig", "-s", "suspend", job_id, check=True)
    engine.pbs("qdel", job_id, check=True)
    assert engine.wait(job_id, timeout=30)["Exit_status"] == 256 + 15


def test_suspend_stops_a_process_that_left_the_jobs_process_group(engine, tmp_path):
    """SIGSTOP went to the job's process group and its top process: a process the job moved
    to another group of its session (setpgid, as any process may) ran on while the job was
    S, on the cpus given to others."""
    pid_file = tmp_path / "hopped"
    script = tmp_path / "hop.py"
    script.write_text("import os, time\n"
                      "child = os.fork()\n"
                      "if child == 0:\n"
                      "    os.setpgid(0, 0)\n"
                      f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                      "    time.sleep(1000)\n"
                      "time.sleep(1000)\n")
    job_id = _qsub(engine, "--", "/usr/bin/python3", str(script))
    engine.wait(job_id, "R")
    hopped = int(until(lambda: pid_file.exists() and pid_file.read_text(), timeout=30,
                       what="the process that left the group"))
    assert os.getpgid(hopped) == hopped
    engine.pbs("qsig", "-s", "suspend", job_id, check=True)
    until(lambda: _process_state(hopped) == "T", what="the process stopped")
    engine.pbs("qsig", "-s", "resume", job_id, check=True)
    until(lambda: _process_state(hopped) != "T", what="the process woken")
    engine.pbs("qdel", job_id, check=True)
    engine.wait(job_id, timeout=30)


def test_a_restart_stops_or_wakes_a_job_as_its_stored_state_says(engine):
    """A server killed between storing a suspend (or a resume) and its signal: once
    restarted, the job is stopped (or running) as its stored state says; it was left
    running while S, its cpus given to others (or stopped while R)."""
    job_id = _qsub(engine, "--", "/bin/sleep", "300")
    engine.wait(job_id, "R")
    pgid = _session(engine, job_id)
    engine.pbs("qsig", "-s", "suspend", job_id, check=True)
    engine.kill()
    os.killpg(pgid, signal.SIGCONT)  # (as if the SIGSTOP had never been sent)
    until(lambda: _process_state(pgid) != "T", what="the job running again")
    engine.start()
    assert engine.job(job_id)["job_state"] == "S"
    until(lambda: _process_state(pgid) == "T", what="the job stopped again")
    engine.pbs("qsig", "-s", "resume", job_id, check=True)
    engine.kill()
    os.killpg(pgid, signal.SIGSTOP)  # (as if the SIGCONT had never been sent)
    until(lambda: _process_state(pgid) == "T", what="the job stopped")
    engine.start()
    assert engine.job(job_id)["job_state"] == "R"
    until(lambda: _process_state(pgid) != "T", what="the job woken again")
    engine.pbs("qdel", job_id, check=True)
    assert engine.wait(job_id, timeout=30)["Exit_status"] == 256 + 15


def test_qmsg_appends_to_the_running_jobs_files(engine):
    job_id = _qsub(engine, "-o", str(engine.work / "out"), "-e", str(engine.work / "err"),
                   "--", "/bin/sleep", "300")
    engine.wait(job_id, "R")
    for args in (("hello there",), ("-O", "to the output"), ("-E", "-O", "both")):
        done = engine.pbs("qmsg", *args, job_id)
        assert (done.returncode, done.stderr) == (0, ""), args
    assert (engine.work / "err").read_text() == "hello there\nboth\n"
    assert (engine.work / "out").read_text() == "to the output\nboth\n"
    empty = engine.pbs("qmsg", "", job_id)
    assert (empty.returncode, empty.stderr) == (
        156, f"qmsg: Server returned error 15004 for job {job_id}\n")
    held = _qsub(engine, "-h", "--", "/bin/true")
    refused = engine.pbs("qmsg", "hi", held)
    assert (refused.returncode, refused.stderr) == (
        168, f"qmsg: Request invalid for state of job {held}\n")
    engine.pbs("qdel", "-W", "force", job_id, held, check=True)


def test_qmsg_never_follows_a_link_its_owner_planted(engine, attacker):
    folder = Path("/tmp") / f"pbsplug-qmsg-{os.getpid()}"
    folder.mkdir(mode=0o755)
    os.chown(folder, attacker.uid, attacker.gid)
    victim = engine.work / "victim"
    victim.write_text("root's\n")
    try:
        done = attacker.pbs(engine, "qsub", "-e", str(folder / "err"), "--", "/bin/sleep",
                            "300", cwd=folder)
        job_id = done.stdout.strip()
        assert job_id, done.stderr
        engine.wait(job_id, "R")
        until((folder / "err").exists, timeout=30, what="the job's error file")
        attacker.python("import os, sys; os.unlink(sys.argv[1]); os.symlink(sys.argv[2], "
                        "sys.argv[1])", str(folder / "err"), str(victim))
        refused = attacker.pbs(engine, "qmsg", "planted", job_id)
        assert refused.returncode == 168, refused.stderr
        assert "symbolic link" in refused.stderr
        assert victim.read_text() == "root's\n"
        engine.pbs("qdel", "-W", "force", job_id, check=True)
    finally:
        for entry in folder.iterdir():
            entry.unlink()
        folder.rmdir()


def test_queue_commands_start_stop_enable_and_disable(engine):
    assert engine.pbs("qstop", "workq").returncode == 0
    job_id = _qsub(engine, "--", "/bin/true")
    time.sleep(1)  # (cycles run: a stopped queue's job stays)
    assert engine.job(job_id)["job_state"] == "Q"
    assert engine.client("stat_queues", names=["workq"])["workq"]["started"] is False
    assert engine.pbs("qstart", "workq").returncode == 0
    engine.wait(job_id)
    assert engine.pbs("qdisable", "workq").returncode == 0
    refused = engine.pbs("qsub", "--", "/bin/true")
    assert (refused.returncode, refused.stderr) == (173, "qsub: Queue is not enabled\n")
    assert engine.pbs("qenable", "workq").returncode == 0
    unknown = engine.pbs("qstop", "nosuch")
    assert (unknown.returncode, unknown.stderr) == (2, "qstop: Unknown queue nosuch\n")
    usage = engine.pbs("qstart")
    assert (usage.returncode, usage.stderr) == (
        1, "Usage: qstart [queue][@server] ...\n       qstart --version\n")


def test_each_command_refuses_a_user_on_anothers_job(engine, attacker):
    running = _qsub(engine, "--", "/bin/sleep", "300")
    held = _qsub(engine, "-h", "--", "/bin/true")
    engine.wait(running, "R")
    mine = attacker.pbs(engine, "qsub", "-h", "--", "/bin/true").stdout.strip()
    for args, status, line in (
            (("qsig", "-s", "USR1", running), 159, f"qsig: Unauthorized Request  {running}"),
            (("qsig", "-s", "suspend", running), 159,
             f"qsig: Unauthorized Request  {running}"),
            (("qmsg", "hi", running), 159, f"qmsg: Unauthorized Request  {running}"),
            (("qorder", held, mine), 159, f"qorder: Unauthorized Request  {held} or {mine}"),
            (("qstop", "workq"), 2, "qstop: Unauthorized Request  workq"),
            (("qstart", "workq"), 2, "qstart: Unauthorized Request  workq"),
            (("qdisable", "workq"), 2, "qdisable: Unauthorized Request  workq"),
            (("qenable", "workq"), 2, "qenable: Unauthorized Request  workq"),
            (("qterm",), 2, "qterm: Unauthorized Request  ")):
        done = attacker.pbs(engine, *args)
        assert (done.returncode, done.stderr) == (status, line + "\n"), args
    assert engine.job(running)["job_state"] == "R"
    assert engine.client("stat_queues", names=["workq"])["workq"]["started"] is True
    assert engine.client("status")["pid"] == engine.home.server_pid()
    own = attacker.pbs(engine, "qsig", "-s", "suspend", mine)  # (not running: who first)
    assert own.returncode == 159
    engine.pbs("qdel", "-W", "force", running, held, mine, check=True)


def test_qterm_quick_leaves_jobs_running_and_the_next_start_adopts_them(engine):
    job_id = _qsub(engine, "--", "/bin/sleep", "300")
    engine.wait(job_id, "R")
    pgid = _session(engine, job_id)
    done = engine.pbs("qterm")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    until(lambda: engine.home.server_pid() is None, timeout=30, what="the server's end")
    assert _process_state(pgid) in ("S", "R")
    engine.start()
    assert engine.job(job_id)["job_state"] == "R"
    engine.pbs("qdel", "-W", "force", job_id, check=True)


def test_qterm_immediate_requeues_rerunnable_jobs_and_ends_the_others(engine):
    again = _qsub(engine, "--", "/bin/sleep", "300")
    once = _qsub(engine, "-r", "n", "--", "/bin/sleep", "300")
    engine.wait(again, "R")
    engine.wait(once, "R")
    done = engine.pbs("qterm", "-t", "immediate")
    assert (done.returncode, done.stderr) == (0, "")
    until(lambda: engine.home.server_pid() is None, timeout=60, what="the server's end")
    engine.start()
    assert engine.job(once)["job_state"] == "F"
    attrs = engine.wait(again, "R")  # (requeued, then run again)
    assert attrs["run_count"] == 2
    engine.pbs("qdel", "-W", "force", again, check=True)


def test_qorder_of_jobs_of_two_queues_swaps_their_queues(engine):
    engine.pbs("qmgr", "-c", "create queue q2 queue_type=execution,enabled=true,started=true",
               check=True)
    first = _qsub(engine, "-h", "--", "/bin/true")
    second = _qsub(engine, "-h", "-q", "q2", "--", "/bin/true")
    assert engine.pbs("qorder", first, second).returncode == 0
    assert (engine.job(first)["queue"], engine.job(second)["queue"]) == ("q2", "workq")
    engine.pbs("qdel", first, second, check=True)


def test_a_resume_waits_for_the_cpus_another_job_took(engine):
    first_vnode = next(iter(engine.nodes()))
    engine.pbs("qmgr", "-c", f"set node {first_vnode} resources_available.ncpus = 1",
               check=True)
    for name in list(engine.nodes())[1:]:
        engine.pbs("qmgr", "-c", f"delete node {name}", check=True)
    suspended = _qsub(engine, "--", "/bin/sleep", "300")
    engine.wait(suspended, "R")
    engine.pbs("qsig", "-s", "suspend", suspended, check=True)
    other = _qsub(engine, "--", "/bin/sleep", "300")
    engine.wait(other, "R")  # (on the cpus the suspended job let go)
    assert engine.pbs("qsig", "-s", "resume", suspended).returncode == 0
    attrs = engine.job(suspended)
    assert (attrs["job_state"], attrs["substate"], attrs["comment"]) == (
        "S", 45, "Not Running: Not enough free nodes available")
    engine.pbs("qdel", "-W", "force", other, check=True)
    engine.wait(suspended, "R")
    assert engine.job(suspended)["substate"] == 42
    engine.pbs("qdel", "-W", "force", suspended, check=True)


def test_qorder_across_queues_moves_neither_job_when_one_cannot_move(engine, attacker):
    engine.pbs("qmgr", "-c", "create queue q2 queue_type=execution,enabled=true,started=true",
               check=True)
    first = attacker.pbs(engine, "qsub", "-h", "--", "/bin/true").stdout.strip()
    second = attacker.pbs(engine, "qsub", "-h", "-q", "q2", "--", "/bin/true").stdout.strip()
    engine.pbs("qmgr", "-c", "set queue workq acl_user_enable = true", check=True)
    engine.pbs("qmgr", "-c", "set queue workq acl_users = root", check=True)
    refused = attacker.pbs(engine, "qorder", first, second)
    assert refused.returncode == 159, refused.stderr
    assert (engine.job(first)["queue"], engine.job(second)["queue"]) == ("workq", "q2")
    engine.pbs("qdel", first, second, check=True)
