"""The local engine with real processes: jobs' lives, hook consequences, restarts."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pbsplug import events
from pbsplug.engine import executor
from pbsplug.engine.errors import PbsError
from pbsplug.engine.store import Store

from .conftest import PBSPLUG, shepherds_gone, until


def plugin(dists, name: str, body: str, events: tuple[str, ...], **attrs) -> str:
    """Install a plugin distribution whose module is `body`; returns its site section."""
    info = ", ".join([f"events={events!r}"] + [f"{k}={v!r}" for k, v in attrs.items()])
    dists.add(name, f"from pbsplug import PluginInfo, hookimpl\n"
                    f"plugin_info = PluginInfo({info})\n{textwrap.dedent(body)}")
    return f"[plugins.{name}]\nenabled = true\n"


def test_a_job_runs_with_pbs_environment_and_output(engine):
    job_id = engine.submit("echo $PBS_JOBID $PBS_JOBNAME $PBS_QUEUE $NCPUS $OMP_NUM_THREADS\n"
                           "echo $PBS_O_QUEUE $PBS_O_HOST\n"
                           "cat $PBS_NODEFILE; test -d $TMPDIR && echo tmp ok\n"
                           "echo err >&2; exit 3\n",
                           Job_Name="hello", Resource_List={"select": "1:ncpus=2"})
    assert job_id.startswith("0.")
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == 3
    seq = job_id.split(".")[0]
    out = (engine.work / f"hello.o{seq}").read_text().splitlines()
    assert out[0] == f"{job_id} hello workq 2 2"
    assert out[1] == f"workq {socket.gethostname().split('.')[0]}"  # the server adds these
    assert attrs["Variable_List"]["PBS_O_QUEUE"] == "workq"
    assert out[-1] == "tmp ok"
    assert (engine.work / f"hello.e{seq}").read_text() == "err\n"
    assert attrs["resources_used"]["ncpus"] == 2
    assert attrs["exec_vnode"].startswith("(") and ":ncpus=2)" in attrs["exec_vnode"]
    assert "Job Queued at request of" in engine.log()


def test_join_oe_and_a_command_job(engine):
    job_id = engine.client("submit", attrs={
        "Join_Path": "oe", "Output_Path": f"localhost:{engine.work}/joined.out",
        "Variable_List": {"PBS_O_WORKDIR": str(engine.work)}},
        argv=["/bin/sh", "-c", "echo out; echo err >&2"])
    assert engine.wait(job_id)["Exit_status"] == 0
    assert sorted((engine.work / "joined.out").read_text().split()) == ["err", "out"]


def test_a_missing_program_fails_the_job_with_a_reason(engine):
    job_id = engine.client("submit", attrs={"Variable_List": {"PBS_O_WORKDIR": str(
        engine.work)}}, argv=["/no/such/program"])
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == -1
    out = (engine.work / f"STDIN.e{job_id.split('.')[0]}").read_text()
    assert "the job could not start" in out and "/no/such/program" in out


def test_what_a_job_leaves_running_in_its_session_ends_with_it(engine):
    """As PBS's MoM does: a command the script put in the background ran on after the job
    ended, untracked, past any walltime and on a vnode given to the next job."""
    marker = engine.work / "left.pid"
    job_id = engine.submit(f"sleep 600 &\necho $! > {marker}\nexit 0\n")
    assert engine.wait(job_id)["Exit_status"] == 0
    pid = int(marker.read_text())

    def gone() -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # killed, not reaped
        except FileNotFoundError:
            return True

    until(gone, 10, f"the job's background process {pid} outlived the job")


def test_a_tmpdir_set_aside_is_swept_by_the_server(engine):
    """What a job's end could not remove in its half second is renamed .leftover-* in tmp/
    and removed by the server a slice a poll (a process left by the job could grow it
    faster than it went, and stalled the server)."""
    leftover = engine.home.tmp / f"{executor.LEFTOVER}test"
    for n in range(20):
        (leftover / f"d{n}").mkdir(parents=True)
        for m in range(100):
            (leftover / f"d{n}" / f"f{m}").touch()
    job_id = engine.submit("true\n")  # a job's end looks for leftovers at once
    assert engine.wait(job_id)["Exit_status"] == 0
    until(lambda: not leftover.exists(), 60, "the server to sweep the leftover TMPDIR")
    assert not (engine.home.tmp / f"pbs.{job_id}").exists()


def test_walltime_is_enforced(engine):
    """As OpenPBS 23.06 ends such a job (checked): Exit_status -29 (JOB_EXEC_KILL_WALLTIME)
    whatever the signal did, and its MoM's note in the job's error file, in seconds
    (``=>> PBS: job killed: walltime 14 exceeded limit 2``). pbsplug gave 271 and wrote
    nothing."""
    job_id = engine.submit("echo started >&2; sleep 30\n", Job_Name="over",
                           Resource_List={"walltime": "00:00:01"})
    attrs = engine.wait(job_id, timeout=60)
    assert attrs["Exit_status"] == -29
    assert attrs["comment"].startswith("job killed: walltime 00:00:0")
    assert "exceeded limit 00:00:01" in attrs["comment"]
    used = int(attrs["comment"].split()[3].rsplit(":", 1)[1])  # (the comment's seconds)
    err = (engine.work / f"over.e{job_id.split('.')[0]}").read_text()
    assert err == f"started\n=>> PBS: job killed: walltime {used} exceeded limit 1\n"


def test_a_job_that_traps_sigterm_killed_for_its_walltime_still_gets_minus_29(engine):
    """PBS's Exit_status for a walltime kill is the kill's, not the exit code of a job
    that caught the SIGTERM and exited on its own; joined output gets the note too."""
    job_id = engine.submit("trap 'exit 0' TERM\nsleep 30 & wait\n", Job_Name="trapper",
                           Join_Path="oe", Resource_List={"walltime": "00:00:01"})
    attrs = engine.wait(job_id, timeout=60)
    assert attrs["Exit_status"] == -29
    out = (engine.work / f"trapper.o{job_id.split('.')[0]}").read_text()
    assert out.startswith("=>> PBS: job killed: walltime ") and out.endswith(
        " exceeded limit 1\n")


def test_cput_is_each_processs_rlimit_as_pbs_sets_it(engine):
    """OpenPBS 23.06's MoM sets RLIMIT_CPU to cput (the smaller of cput and pcput) on the
    job's processes: ``qsub -l cput=00:00:02 -- sh -c 'while :; do :; done'`` was killed by
    the kernel after 2 s of CPU, Exit_status 265 and nothing in its error file (checked).
    pbsplug let it run on."""
    job_id = engine.pbs("qsub", "-N", "spin", "-l", "cput=00:00:02", "--", "/bin/sh", "-c",
                        "ulimit -t; while :; do :; done", check=True).stdout.strip()
    attrs = engine.wait(job_id, timeout=120)
    assert attrs["Exit_status"] == 256 + signal.SIGKILL
    assert (engine.work / f"spin.o{job_id.split('.')[0]}").read_text() == "2\n"


def test_a_job_whose_processes_together_pass_cput_is_killed_with_minus_28(engine):
    """Processes each below cput (so no RLIMIT_CPU ends them) whose CPU time together
    passes it: PBS's MoM kills the job at a sample, Exit_status -28
    (JOB_EXEC_KILL_CPUT) and its note in the error file, as for a walltime. The shepherd
    samples the job's session; the server reads the sample."""
    burn = (f"{sys.executable} -c 'import time\nt = time.process_time()\n"
            "while time.process_time() - t < 1: pass'")
    job_id = engine.submit(f"for i in $(seq 100); do {burn}; done\n", Job_Name="many",
                           Resource_List={"cput": "00:00:03"})
    attrs = engine.wait(job_id, timeout=300)
    assert attrs["Exit_status"] == -28
    assert re.fullmatch(r"job killed: cput 00:00:\d\d exceeded limit 00:00:03",
                        attrs["comment"])
    used = int(attrs["comment"].split()[3].rsplit(":", 1)[1])
    assert used > 3
    err = (engine.work / f"many.e{job_id.split('.')[0]}").read_text()
    assert err == f"=>> PBS: job killed: cput {used} exceeded limit 3\n"


def test_a_running_jobs_resources_used_are_shown_and_stored_as_it_runs(engine):
    """PBS's MoM reports a running job's use at its samples: qstat -f shows
    resources_used (cput, mem, vmem, ncpus, walltime) and qstat's Time Use column its
    cput while the job runs. pbsplug had none until the job ended."""
    script = (f"{sys.executable} -c 'import time\nheld = bytearray(64 << 20)\n"
              "t = time.process_time()\nwhile time.process_time() - t < 3: pass\n"
              "time.sleep(300)'\n")
    job_id = engine.submit(script, Resource_List={"select": "1:ncpus=1"})

    def shown() -> dict:
        full = engine.pbs("qstat", "-f", job_id, check=True).stdout
        return dict(re.findall(r"^    resources_used\.(\w+) = (\S+)$", full, re.M))

    until(lambda: shown().get("cput", "00:00:00") >= "00:00:03", 120,
          "resources_used.cput of the running job")
    used = shown()
    assert set(used) == {"cput", "mem", "ncpus", "vmem", "walltime"}
    assert int(used["mem"].removesuffix("kb")) > 64 << 10  # its 64 mb are counted
    assert int(used["vmem"].removesuffix("kb")) >= int(used["mem"].removesuffix("kb"))
    assert used["ncpus"] == "1" and used["walltime"] >= "00:00:03"
    row = engine.pbs("qstat", job_id, check=True).stdout.splitlines()[-1].split()
    assert row[3] >= "00:00:03" and row[4] == "R"  # Time Use, S
    # In the store too (one transaction for all the running jobs, every 10 s), so hooks
    # and a restarted server see it.
    def stored() -> dict:
        store = Store(engine.home.db)
        try:
            return (store.job(job_id) or {}).get("resources_used") or {}
        finally:
            store.close()

    until(lambda: stored().get("cput", "00:00:00") >= "00:00:03", 120,
          "resources_used saved in the store")
    engine.client("delete", ids=[job_id])
    ended = engine.wait(job_id)["resources_used"]
    assert ended["cput"] >= "00:00:03" and set(ended) == set(used)


def test_a_jobs_mem_is_its_own_not_the_shepherds(engine):
    """resources_used.mem was wait4's ru_maxrss of the process forked from the server,
    which holds the server's image until its exec: /bin/true reported about 37 MB. It is
    the job's own now, sampled as PBS's MoM samples it (OpenPBS 23.06 reported 0kb for
    /bin/true, checked), and a job that holds 64 MB for seconds reports them."""
    status = Path(f"/proc/{engine.home.server_pid()}/status").read_text()
    server_kb = int(re.search(r"^VmRSS:\s+(\d+) kB$", status, re.M).group(1))
    true = engine.pbs("qsub", "--", "/bin/true", check=True).stdout.strip()
    held = engine.submit(f"{sys.executable} -c 'import time\nheld = bytearray(64 << 20)\n"
                         "time.sleep(3)'\n")

    def mem_kb(job_id: str) -> int:
        return int(engine.wait(job_id)["resources_used"]["mem"].removesuffix("kb"))

    assert mem_kb(true) * 4 < server_kb  # well below the shepherd's (the server's) image
    assert mem_kb(held) >= 64 << 10


def test_qdel_of_a_running_job_kills_it_and_of_a_finished_one_is_refused(engine):
    job_id = engine.submit("sleep 30\n")
    engine.wait(job_id, "R")
    assert engine.client("delete", ids=[job_id]) == [{"id": job_id}]
    attrs = engine.wait(job_id)
    assert attrs["comment"].startswith("Job deleted at request of root@")
    again = engine.client("delete", ids=[job_id, "99"])
    assert again[0]["error"]["code"] == 15139
    assert again[1]["error"] == {"code": 15001, "message": "Unknown Job Id",
                                 "obj": f"99.{job_id.split('.', 1)[1]}"}


def test_hold_and_release(engine):
    job_id = engine.submit("true\n", Hold_Types="u")
    time.sleep(0.3)
    assert engine.job(job_id)["job_state"] == "H"
    engine.client("release", ids=[job_id])
    assert engine.wait(job_id)["Exit_status"] == 0


def test_qstat_f_substate_is_pbss_for_each_state(engine):
    """substate was 10 for held and waiting jobs alike, and 92 for every finished job; it
    is PBS's for each state (as OpenPBS 23.06 shows them: checked), in qstat -f and to
    hooks."""
    running = engine.submit("sleep 300\n")
    engine.wait(running, "R")
    jobs = {
        "queued": (engine.submit(Resource_List={"select": "1:ncpus=99999"}), 10),
        "held": (engine.submit(Hold_Types="u"), 20),
        "depend": (engine.submit(depend=f"afterok:{running}"), 22),
        "waiting": (engine.submit(Execution_Time=int(time.time()) + 86400), 30),
        "running": (running, 42),
    }
    for what, script, substate in (("finished", "true\n", 92), ("failed", "exit 3\n", 93)):
        jobs[what] = (engine.submit(script), substate)
        engine.wait(jobs[what][0])
    deleted = engine.submit(Hold_Types="u")
    engine.client("delete", ids=[deleted])
    jobs["deleted"] = (deleted, 91)
    killed = engine.submit("sleep 300\n")
    engine.wait(killed, "R")
    engine.client("delete", ids=[killed])
    engine.wait(killed)
    jobs["deleted running"] = (killed, 91)
    shown = {what: int(re.search(r"^    substate = (\d+)$", engine.pbs(
        "qstat", "-xf", job_id).stdout, re.M).group(1)) for what, (job_id, _) in jobs.items()}
    assert shown == {what: substate for what, (_, substate) in jobs.items()}
    engine.client("release", ids=[jobs["held"][0]])  # a release: queued again
    assert engine.job(jobs["held"][0])["substate"] in (10, 42, 92)
    engine.client("delete", ids=[running])
    engine.wait(running)


def test_unknown_queue_and_bad_resources_are_refused(engine):
    with pytest.raises(PbsError) as err:
        engine.submit(queue="nosuch")
    assert (err.value.code, err.value.message, err.value.obj) == (15018, "Unknown queue",
                                                                  "nosuch")
    with pytest.raises(PbsError) as err:
        engine.submit(Resource_List={"walltime": "ten minutes"})
    assert err.value.code == 15014
    assert err.value.message == "Illegal attribute or resource value Resource_List.walltime"
    assert engine.client("stat_jobs") == {}  # nothing half-made


def test_queuejob_may_refuse_or_change_a_submission(dists, make_engine):
    engine = make_engine(plugin(dists, "gate", """
        @hookimpl
        def queuejob(event):
            if event.job.Job_Name == "bad":
                event.reject("no bad jobs here")
            event.job.Resource_List["walltime"] = "00:10:00"
        """, ("queuejob",)))
    with pytest.raises(PbsError) as err:
        engine.submit(Job_Name="bad")
    assert (err.value.code, err.value.message) == (15136, "no bad jobs here")
    job_id = engine.submit(Job_Name="good")
    assert engine.wait(job_id)["Resource_List"]["walltime"] == "00:10:00"
    assert engine.client("stat_jobs", history=True).keys() == {job_id}


def test_runjob_reject_keeps_the_job_queued_with_pbs_comment(dists, make_engine):
    engine = make_engine(plugin(dists, "norun", """
        @hookimpl
        def runjob(event):
            event.reject("not today")
        """, ("runjob",)))
    job_id = engine.submit()
    deadline = time.monotonic() + 10
    while engine.job(job_id).get("comment") != "Not Running: PBS Error: not today":
        assert time.monotonic() < deadline, engine.job(job_id)
        time.sleep(0.05)
    assert engine.job(job_id)["job_state"] == "Q"


def test_execjob_begin_reject_requeues_and_holds_after_twenty_runs(dists, make_engine):
    engine = make_engine(plugin(dists, "nobegin", """
        @hookimpl
        def execjob_begin(event):
            event.reject("host not ready")
        """, ("execjob_begin",)))
    job_id = engine.submit()
    attrs = engine.wait(job_id, "H", timeout=60)
    assert attrs["comment"] == "job held, too many failed attempts to run"
    assert attrs["Hold_Types"] == "s" and attrs["run_count"] == 21
    assert "execjob_begin hook refused the job (reject): host not ready" in engine.log()


def test_execjob_begin_error_offlines_the_vnodes_with_fail_action(dists, make_engine):
    engine = make_engine(plugin(dists, "broken", """
        @hookimpl
        def execjob_begin(event):
            raise RuntimeError("boom")
        """, ("execjob_begin",), fail_action="offline_vnodes"))
    job_id = engine.submit()
    deadline = time.monotonic() + 20
    while True:
        nodes = engine.client("stat_nodes")
        if any("offline" in n["state"] for n in nodes.values()):
            break
        assert time.monotonic() < deadline, nodes
        time.sleep(0.05)
    node = next(n for n in nodes.values() if "offline" in n["state"])
    assert node["comment"] == "offlined by hook 'broken' due to hook error"
    attrs = engine.job(job_id)
    assert attrs["job_state"] == "Q" and attrs["run_count"] == 1


def test_execjob_launch_changes_argv_and_env_and_a_reject_deletes(dists, make_engine):
    engine = make_engine(plugin(dists, "wrap", """
        @hookimpl
        def execjob_launch(event):
            if event.job.Job_Name == "refuse":
                event.reject("launch refused")
            event.env["WRAPPED"] = "yes"
            event.argv = ["/bin/sh", "-c", "echo wrapped=$WRAPPED"]
        """, ("execjob_launch",)))
    job_id = engine.submit("echo original\n", Job_Name="w")
    assert engine.wait(job_id)["Exit_status"] == 0
    assert (engine.work / f"w.o{job_id.split('.')[0]}").read_text() == "wrapped=yes\n"
    refused = engine.submit(Job_Name="refuse")
    attrs = engine.wait(refused)
    assert attrs["comment"] == "Job deleted by execjob_launch hook: launch refused"


def test_execjob_preterm_reject_refuses_qdel(dists, make_engine):
    engine = make_engine(plugin(dists, "keep", """
        @hookimpl
        def execjob_preterm(event):
            event.reject("checkpoint first")
        """, ("execjob_preterm",)))
    job_id = engine.submit("sleep 30\n")
    engine.wait(job_id, "R")
    result = engine.client("delete", ids=[job_id])
    assert result[0]["error"]["message"] == "checkpoint first"
    assert engine.job(job_id)["job_state"] == "R"
    assert engine.client("delete", ids=[job_id], force=True) == [{"id": job_id}]
    engine.wait(job_id)


def test_end_hooks_and_jobobit_see_the_job(dists, make_engine, engine_root):
    record = engine_root / "seen"
    engine = make_engine(plugin(dists, "watch", f"""
        def seen(name, job):
            used = job.resources_used or {{}}
            open({str(record)!r}, "a").write(
                f"{{name}} {{job.Exit_status}} {{sorted(used)}} {{used.get('walltime')}}\\n")

        @hookimpl
        def execjob_epilogue(event):
            seen("epilogue", event.job)
            event.job.resources_used["vmem"] = "7kb"  # (a site's own figure: it stays)

        @hookimpl
        def execjob_end(event):
            seen("end", event.job)

        @hookimpl
        def jobobit(event):
            seen("obit", event.job)
        """, ("execjob_epilogue", "execjob_end", "jobobit")))
    job_id = engine.submit("sleep 1; exit 4\n")
    attrs = engine.wait(job_id)
    # The end hooks see the Exit_status and resources_used PBS's MoM sets before them.
    lines = record.read_text().splitlines()
    assert [line.split()[:2] for line in lines] == [["epilogue", "4"], ["end", "4"],
                                                    ["obit", "4"]], lines
    measured = "['cput', 'mem', 'ncpus', 'vmem', 'walltime']"
    assert all(measured in line for line in lines), lines
    walltimes = {line.rsplit(" ", 1)[1] for line in lines}
    assert walltimes == {attrs["resources_used"]["walltime"]}, (walltimes, attrs)
    assert attrs["resources_used"]["vmem"] == "7kb"  # the epilogue's value, not the host's


def test_a_server_killed_with_sigkill_loses_nothing(engine):
    running = engine.submit("sleep 2; echo survived\n", Job_Name="long")
    engine.wait(running, "R")
    queued = [engine.submit("true\n", Hold_Types="u") for _ in range(3)]
    engine.kill()
    time.sleep(2.5)  # the job ends while no server runs
    engine.start()
    attrs = engine.wait(running)
    assert attrs["Exit_status"] == 0
    assert (engine.work / f"long.o{running.split('.')[0]}").read_text() == "survived\n"
    assert [engine.job(j)["job_state"] for j in queued] == ["H", "H", "H"]


def test_a_running_job_is_adopted_after_a_restart(engine):
    job_id = engine.submit("sleep 3\n")
    engine.wait(job_id, "R")
    engine.kill()
    engine.start()
    assert "job adopted again after a server restart" in engine.log()
    assert engine.wait(job_id, timeout=30)["Exit_status"] == 0


def test_a_job_whose_shepherd_died_is_requeued_or_failed(engine):
    rerun = engine.submit("sleep 30\n")
    once = engine.submit("sleep 30\n", Rerunable=False)
    engine.wait(rerun, "R")
    engine.wait(once, "R")
    engine.kill()
    shepherds_gone(engine, [rerun, once])
    time.sleep(0.3)
    engine.start()
    assert "Job requeued after a server restart: its shepherd is gone" in engine.log()
    until(lambda: engine.job(rerun)["run_count"] == 2, what="the rerun")  # ran again
    attrs = engine.wait(once)
    assert attrs["Exit_status"] == -4  # PBS's JOB_EXEC_INITABT
    assert attrs["comment"].startswith("Job failed after a server restart")


def test_a_second_server_in_the_same_home_is_refused(engine):
    done = engine.pbs("server", "start")
    assert done.returncode == 2
    assert "a server already runs in" in done.stderr


def test_qmove_fires_movejob_which_may_refuse(dists, make_engine):
    engine = make_engine(plugin(dists, "mover", """
        @hookimpl
        def movejob(event):
            if event.job.queue == "closed":
                event.reject(f"not from {event.src_queue.name}")
        """, ("movejob",)))
    engine.pbs("qmgr", "-c", "create queue other queue_type = Execution, enabled = True",
               check=True)
    engine.pbs("qmgr", "-c", "create queue closed queue_type = Execution, enabled = True",
               check=True)
    job_id = engine.submit("true\n", Hold_Types="u")
    assert engine.pbs("qmove", "other", job_id).returncode == 0
    assert engine.job(job_id)["queue"] == "other"
    refused = engine.pbs("qmove", "closed", job_id)
    assert (refused.returncode, refused.stderr) == (15136 % 256,
                                                    f"qmove: not from other {job_id}\n")
    unknown = engine.pbs("qmove", "nowhere", job_id)
    assert unknown.stderr == f"qmove: Unknown queue {job_id}\n"
    assert engine.job(job_id)["queue"] == "other"


def test_pbs_attach_fires_execjob_attach_and_the_process_ends_with_the_job(
        dists, make_engine, engine_root):
    engine = make_engine(plugin(dists, "attach", """
        @hookimpl
        def execjob_attach(event):
            if event.job.Job_Name == "private":
                event.reject("no attaching here")
        """, ("execjob_attach",)))
    job_id = engine.submit("sleep 60\n", Job_Name="open")
    engine.wait(job_id, "R")
    helper = subprocess.Popen(
        [PBSPLUG, "pbs_attach", "-j", job_id, "sleep", "120"], env=engine.env(),
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while "process" not in engine.log().split(job_id)[-1] or "attached" not in engine.log():
        assert time.monotonic() < deadline and helper.poll() is None, helper.stderr.read()
        time.sleep(0.05)
    engine.client("delete", ids=[job_id])
    assert helper.wait(timeout=30) == -signal.SIGTERM  # it ended with the job
    private = engine.submit("sleep 60\n", Job_Name="private")
    engine.wait(private, "R")
    refused = engine.pbs("pbs_attach", "-j", private, "true")
    assert (refused.returncode, refused.stderr) == (
        15136 % 256, f"pbs_attach: no attaching here {private}\n")
    engine.client("delete", ids=[private], force=True)


def test_a_job_the_server_died_starting_is_requeued_even_if_not_rerunnable(engine):
    job_id = engine.submit("true\n", Rerunable=False, Hold_Types="u")
    engine.kill()
    store = Store(engine.home.db)  # as if killed between runjob and the shepherd's fork
    with store.transaction() as st:
        st.put_job(job_id, {**store.job(job_id), "job_state": "R", "Hold_Types": "n",
                            "run_count": 1, "exec_vnode": "(x:ncpus=1)"})
    store.close()
    engine.start()
    assert f"{job_id};Job requeued after a server restart: it had not started" in engine.log()
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 1)  # it ran once, at last


def test_what_hooks_log_goes_to_server_logs_once(dists, make_engine):
    """In-process (queuejob) and forked (execjob_begin) hooks alike: info and up by default,
    debug too for a hook with ``debug = true``; each line once, as PBS's hook log lines."""
    body = """
        @hookimpl
        def queuejob(event):
            event.logger.info("queued %s", event.job.Job_Name)
            event.logger.debug("queuejob detail")
            event.logjobmsg("node_power_off", "launch: 100% queued")

        @hookimpl
        def execjob_begin(event):
            event.logger.warning("begin %s", event.job.Job_Name)
            event.logger.debug("begin detail")
            event.logjobmsg(event.job.id, "begin, as the job")
        """
    site = (plugin(dists, "quiet", body, ("queuejob", "execjob_begin"))
            + plugin(dists, "loud", body, ("queuejob", "execjob_begin")) + "debug = true\n")
    engine = make_engine(site)
    job_id = engine.submit(Job_Name="logged")
    engine.wait(job_id)
    host = socket.gethostname().split(".")[0]
    text = engine.log()
    for name in ("quiet", "loud"):
        assert text.count(f";0080;Server@{host};Hook;{name};queued logged\n") == 1
        assert text.count(f";0002;Server@{host};Hook;{name};begin logged\n") == 1
    assert text.count(f";0100;Server@{host};Hook;loud;queuejob detail\n") == 1
    assert text.count(f";0100;Server@{host};Hook;loud;begin detail\n") == 1
    assert ";Hook;quiet;queuejob detail" not in text and ";Hook;quiet;begin detail" not in text
    # Event.logjobmsg: under the job (or the id given), event class 0008, as pbs.logjobmsg.
    assert text.count(f";0008;Server@{host};Job;node_power_off;launch: 100% queued\n") == 2
    assert text.count(";0008;Server@" + host + ";Job;" + job_id + ";begin, as the job\n") == 2


def test_the_engine_spells_the_log_object_key_as_the_kernel_does():
    from pbsplug.engine import home

    assert home.PBS_OBJECT == events.PBS_OBJECT


def test_a_plugins_server_flag_is_true_while_it_is_enabled_and_nobody_sets_it(dists,
                                                                              make_engine):
    """PluginInfo.server_flags (seed 004: enabling PBS_power sets the read-only server
    attribute power_provisioning; disabling it clears it)."""
    site = plugin(dists, "watts", "@hookimpl\ndef periodic(event):\n    pass\n",
                  ("periodic",), server_flags=("power_provisioning",))
    engine = make_engine(site)
    assert "power_provisioning = True" in engine.pbs("qstat", "-Bf").stdout
    refused = engine.pbs("qmgr", "-c", "set server power_provisioning = false")
    assert refused.returncode != 0 and "power_provisioning" in refused.stderr
    assert "power_provisioning = True" in engine.pbs("qstat", "-Bf").stdout
    assert engine.pbs("qmgr", "-c", "set hook watts enabled = false").returncode == 0
    assert "power_provisioning = True" not in engine.pbs("qstat", "-Bf").stdout
