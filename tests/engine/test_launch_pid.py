"""execjob_launch's ``event.pid``: the job's shepherd exists while the launch hooks run, the
job is its child, and a refused launch (or a server that dies first) leaves nothing behind."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pbsplug.engine import executor
from pbsplug.engine.client import Client

from .conftest import accounting_records, ignored_signals, until
from .test_server import plugin


def gone(pid: int) -> bool:
    """The process has ended (reaped, or a zombie its new parent has yet to reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def holding_hook(dists, name: str, hold: str, seen: Path) -> str:
    """A plugin (its site section) whose execjob_launch runs `hold` (one statement on
    `event`: what holds the shepherd where the test wants it), then writes the shepherd's
    pid and start into `seen`, which `shepherd_seen` reads back."""
    return plugin(dists, name, f"""
        import os, signal

        @hookimpl
        def execjob_launch(event):
            {hold}
            with open(f"/proc/{{event.pid}}/stat") as f:
                start = f.read().rsplit(")", 1)[1].split()[19]
            open({str(seen)!r}, "w").write(f"{{event.pid}} {{start}}")
        """, ("execjob_launch",))


def shepherd_seen(seen: Path) -> tuple[int, float]:
    """The shepherd's pid and start, as `holding_hook` wrote them."""
    pid, start = seen.read_text().split()
    return int(pid), float(start)


@pytest.mark.parametrize("isolation", ["process", "inprocess"])
def test_the_launch_hook_sees_the_process_that_becomes_the_jobs_parent(
        dists, make_engine, engine_root, isolation):
    seen = engine_root / "seen.json"
    engine = make_engine(plugin(dists, "confine", f"""
        import json, os

        @hookimpl
        def execjob_launch(event):
            pid = event.pid
            try:
                event.pid = 1
                writable = True
            except AttributeError:
                writable = False
            with open(f"/proc/{{pid}}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            json.dump({{"pid": pid, "int": type(pid) is int, "state": state,
                        "writable": writable, "hook": os.getpid()}},
                      open({str(seen)!r}, "w"))
        """, ("execjob_launch",), isolation=isolation))
    job_id = engine.submit("echo $PPID\n", Job_Name="ppid")
    assert engine.wait(job_id)["Exit_status"] == 0
    hook = json.loads(seen.read_text())
    assert hook["int"] and hook["state"] != "Z" and not hook["writable"]
    assert hook["hook"] != hook["pid"]
    parent = (engine.work / f"ppid.o{job_id.split('.')[0]}").read_text().strip()
    assert int(parent) == hook["pid"]
    assert gone(hook["pid"])  # the shepherd ended with its job


def test_a_refused_launch_leaves_no_process_behind(dists, make_engine, engine_root):
    pid_file, abort_file = engine_root / "pid", engine_root / "abort.json"
    engine = make_engine(plugin(dists, "refuse", f"""
        import json, os

        @hookimpl
        def execjob_launch(event):
            open({str(pid_file)!r}, "w").write(str(event.pid))
            if event.job.Job_Name == "broken":
                raise RuntimeError("broken hook")
            event.reject("not here")

        @hookimpl
        def execjob_abort(event):
            pid = int(open({str(pid_file)!r}).read())
            try:
                os.kill(pid, 0)
                alive = True
            except ProcessLookupError:
                alive = False
            seq = event.job.id.split(".")[0]
            status = os.path.join({str(engine_root / "jobs")!r}, seq + ".status")
            json.dump({{"alive": alive, "status": os.path.exists(status),
                        "shepherd": os.path.exists(status[:-len(".status")] + ".shepherd")}},
                      open({str(abort_file)!r}, "w"))
        """, ("execjob_launch", "execjob_abort")))
    for name, comment in (("refused", "not here"), ("broken", None)):
        job_id = engine.submit("touch ran\n", Job_Name=name)
        attrs = engine.wait(job_id)
        assert attrs["comment"].startswith("Job deleted by execjob_launch hook: ")
        if comment:
            assert attrs["comment"].endswith(comment)
        # Gone (and reaped) before execjob_abort, which may remove a cgroup it was put in.
        assert json.loads(abort_file.read_text()) == {
            "alive": False, "status": False, "shepherd": False}
        assert not Path(f"/proc/{pid_file.read_text()}").exists()
        assert not (engine.work / "ran").exists()


@pytest.mark.parametrize("isolation", ["process", "inprocess"])
def test_a_server_that_dies_during_the_launch_hooks_leaves_no_shepherd(
        dists, make_engine, engine_root, isolation):
    """In-process, the server's death closes the pipe; in process mode the hook's child
    still holds it, and the shepherd notices that its parent is gone."""
    seen, once = engine_root / "seen.json", engine_root / "once"
    engine = make_engine(plugin(dists, "slow", f"""
        import json, os, time

        @hookimpl
        def execjob_launch(event):
            if os.path.exists({str(once)!r}):
                return
            open({str(once)!r}, "w").close()
            json.dump({{"pid": event.pid, "hook": os.getpid()}}, open({str(seen)!r}, "w"))
            time.sleep(60)
        """, ("execjob_launch",), alarm=120, isolation=isolation))
    job_id = engine.submit("echo ran\n", Job_Name="again")
    hook = until(lambda: seen.exists() and seen.read_text() and json.loads(seen.read_text()),
                 what="the launch hook to run")
    engine.kill()
    try:
        # (it looks at its parent every second; left, it would wait for the hook's 60 s)
        until(lambda: gone(hook["pid"]), what="the shepherd to exit")
    finally:
        if isolation == "process":  # the orphaned hook child would sleep on
            os.kill(hook["hook"], signal.SIGKILL)
    # Recovery rule 3: it never started, so it is queued again and runs.
    engine.start()
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == 0
    assert (engine.work / f"again.o{job_id.split('.')[0]}").read_text() == "ran\n"


def test_a_launch_hook_that_kills_the_shepherd_fails_the_start_and_the_job_runs_again(
        dists, make_engine, engine_root):
    """PBS runs the launch hooks in the process that becomes the job, before it tells the
    MoM the job is going (OpenPBS's start_exec.c): a hook that kills that process fails the
    start, which the MoM retries (JOB_EXEC_RETRY): execjob_abort runs, and the server
    requeues a job on its first run whatever its Rerunable (req_jobobit.c). Nothing of the
    job ran. Here a launch hook SIGKILLs ``event.pid``, the shepherd, on the first run:
    the job was lost (Exit_status -4, not rerunnable) or could not start (-1, a broken
    pipe), by a race, and no execjob_abort ran."""
    once, aborted = engine_root / "killed", engine_root / "aborted"
    engine = make_engine(plugin(dists, "killer", f"""
        import os, signal

        @hookimpl
        def execjob_launch(event):
            if not os.path.exists({str(once)!r}):
                open({str(once)!r}, "w").close()
                os.kill(event.pid, signal.SIGKILL)

        @hookimpl
        def execjob_abort(event):
            open({str(aborted)!r}, "a").write(event.job.id + "\\n")
        """, ("execjob_launch", "execjob_abort")))
    job_id = engine.submit("echo ran\n", Job_Name="killed", Rerunable=False)
    attrs = engine.wait(job_id)
    assert aborted.read_text() == f"{job_id}\n"
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs.get("comment")
    assert (engine.work / f"killed.o{job_id.split('.')[0]}").read_text() == "ran\n"


def test_a_job_whose_every_start_fails_is_held_after_twenty_runs(dists, make_engine,
                                                                  engine_root):
    """A launch hook that kills ``event.pid`` at every start: each is a failed start
    (execjob_abort, requeued whatever Rerunable), counted in run_count, and the job is
    held after 20 as any job that fails to start (`lifecycle.MAX_RUN_COUNT`). It ended
    at its first start, lost (-4) or not started (-1)."""
    aborted = engine_root / "aborted"
    engine = make_engine(plugin(dists, "killer", f"""
        import os, signal

        @hookimpl
        def execjob_launch(event):
            os.kill(event.pid, signal.SIGKILL)

        @hookimpl
        def execjob_abort(event):
            open({str(aborted)!r}, "a").write(event.job.id + "\\n")
        """, ("execjob_launch", "execjob_abort")))
    job_id = engine.submit("echo ran\n", Job_Name="killed", Rerunable=False)
    attrs = engine.wait(job_id, "HF", timeout=120)
    assert (attrs["job_state"], attrs.get("Hold_Types"), attrs["run_count"]) == ("H", "s", 21), (
        attrs.get("comment"))
    assert attrs["comment"] == "job held, too many failed attempts to run"
    assert aborted.read_text() == f"{job_id}\n" * 21
    assert not (engine.work / f"killed.o{job_id.split('.')[0]}").exists()


def _stalled_first_run(dists, make_engine, engine_root):
    """An engine whose launch hook stops the shepherd (SIGSTOP) at the first run only, and
    an execjob_abort hook noting each job it ran for in `aborted`; a job (not rerunnable)
    running there: the engine, the job's id, `aborted`, and the stopped shepherd's (pid,
    start)."""
    seen, aborted = engine_root / "shepherd", engine_root / "aborted"
    engine = make_engine(holding_hook(
        dists, "stall", f"os.path.exists({str(seen)!r}) or "
                        "os.kill(event.pid, signal.SIGSTOP)", seen) + plugin(
        dists, "abort", f"""
        @hookimpl
        def execjob_abort(event):
            open({str(aborted)!r}, "a").write(event.job.id + "\\n")
        """, ("execjob_abort",)))
    job_id = engine.submit("echo ran\n", Job_Name="stalled", Rerunable=False)
    engine.wait(job_id, "R")
    return engine, job_id, aborted, shepherd_seen(seen)


def test_a_shepherd_killed_before_it_records_the_job_fails_the_start_and_the_job_runs_again(
        dists, make_engine, engine_root):
    """A launch hook's SIGKILL to ``event.pid`` may land after the server sent the shepherd
    the job: the server then finds the shepherd gone with no record of the job, whose
    process never got its word and ran nothing. That is a failed start too (execjob_abort,
    requeued whatever Rerunable); the job was lost (Exit_status -4, not rerunnable) and no
    execjob_abort ran. Here the first run's launch hook stops the shepherd, and the test
    kills it once the job runs (sent to the shepherd, which never read it)."""
    engine, job_id, aborted, (pid, start) = _stalled_first_run(dists, make_engine,
                                                                engine_root)
    try:
        assert executor.signal_if_same(pid, start, signal.SIGKILL)
        attrs = engine.wait(job_id)
        assert aborted.read_text() == f"{job_id}\n"
        assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs.get("comment")
        assert (engine.work / f"stalled.o{job_id.split('.')[0]}").read_text() == "ran\n"
        assert f"job failed to start: its shepherd (pid {pid}) ended before it started" in (
            engine.log())
    finally:
        executor.signal_if_same(pid, start, signal.SIGKILL)


@pytest.mark.parametrize("how", ["qdel", "qrerun -W force"])
def test_a_job_being_ended_whose_shepherd_dies_while_the_server_is_down_ends_so(
        how, dists, make_engine, engine_root):
    """A job being ended (deaf to SIGTERM, its kill_delay far off) whose shepherd is
    killed while the server is stopped: the next start finds it lost, and it ends as its
    run was being ended, as a lost job does while the server runs (`_lost_over`): a
    qdel'ed one deleted (its D written at the qdel), a forced qrerun's requeued though not
    rerunnable. The first was requeued (rerunnable) and ran again after its D record; the
    second finished -4, lost and not rerunnable."""
    seen, mark = engine_root / "shepherd", engine_root / "ran"
    engine = make_engine(holding_hook(dists, "seen", "pass", seen))
    assert engine.pbs("qmgr", "-c", "set queue workq kill_delay = 600").returncode == 0
    job_id = engine.submit(f"[ -e {mark} ] && exit 0\ntrap '' TERM\ntouch {mark}\n"
                           "sleep 300\n", Job_Name="deaf", Rerunable=how == "qdel")
    until(mark.exists, what="the job to run")
    pid, start = shepherd_seen(seen)
    try:
        engine.pbs(*how.split(), job_id, check=True)
        engine.stop()
        assert executor.signal_if_same(pid, start, signal.SIGKILL)
        until(lambda: gone(pid), what="the shepherd to end")
        engine.start()
        attrs = engine.wait(job_id)
        records = accounting_records(engine)
        counted = (records.count(f";D;{job_id};"), records.count(f";R;{job_id};"))
        if how == "qdel":
            assert attrs["comment"].startswith("Job deleted at request of root@"), (
                attrs["comment"])
            assert (attrs["run_count"], counted) == (1, (1, 0))
        else:
            assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs["comment"]
            assert counted == (0, 1)
    finally:
        executor.signal_if_same(pid, start, signal.SIGKILL)


def test_a_shepherd_killed_before_it_records_the_job_while_the_server_is_down_fails_the_start(
        dists, make_engine, engine_root):
    """As the server finds a shepherd gone before it recorded its job while it runs, so at
    its next start: a failed start (execjob_abort, requeued whatever Rerunable), not a job
    lost after a server restart (a non-rerunnable one ended -4, though nothing of it ran)."""
    engine, job_id, aborted, (pid, start) = _stalled_first_run(dists, make_engine,
                                                                engine_root)
    try:
        engine.stop()
        assert executor.signal_if_same(pid, start, signal.SIGKILL)
        until(lambda: gone(pid), what="the shepherd to end")
        engine.start()
        attrs = engine.wait(job_id)
        assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs.get("comment")
        assert aborted.read_text() == f"{job_id}\n"
        assert (engine.work / f"stalled.o{job_id.split('.')[0]}").read_text() == "ran\n"
        assert f"job failed to start: its shepherd (pid {pid}) ended before it started" in (
            engine.log())
    finally:
        executor.signal_if_same(pid, start, signal.SIGKILL)


def test_a_job_deleted_before_its_shepherd_recorded_it_ends_deleted_and_never_runs(
        dists, make_engine, engine_root):
    """A shepherd that has not recorded its job's group yet (it waits for room on a full
    disk; here a launch hook stopped it, which holds it there for as long as the test
    needs) gets a qdel's SIGKILL itself: the job ends deleted and never runs. The SIGKILL
    was sent nowhere, and the job stayed R, to run whole once the shepherd went on. qsig
    with another signal, or suspend, is refused then (PBS's MoM refuses them to a job not
    running yet); it was taken, sending nothing."""
    seen = engine_root / "shepherd"
    engine = make_engine(holding_hook(dists, "stall", "os.kill(event.pid, signal.SIGSTOP)",
                                      seen))
    assert engine.pbs("qmgr", "-c", "set queue workq kill_delay = 0").returncode == 0
    job_id = engine.submit("touch ran\n", Job_Name="stalled")
    engine.wait(job_id, "R")
    pid, start = shepherd_seen(seen)
    try:
        for how in (("-s", "TERM"), ("-s", "suspend")):
            refused = engine.pbs("qsig", *how, job_id)
            assert refused.returncode != 0, f"qsig {how[1]} was taken"
            assert "Request invalid for state of job" in refused.stderr
        assert engine.job(job_id)["job_state"] == "R"
        assert engine.pbs("qdel", job_id).returncode == 0
        attrs = engine.wait(job_id)
        assert attrs["comment"].startswith("Job deleted at request of ")
        assert gone(pid)
        assert not (engine.work / "ran").exists()
    finally:  # (the old code left the shepherd stopped)
        executor.signal_if_same(pid, start, signal.SIGKILL)


def test_a_job_deleted_before_its_shepherd_recorded_it_gets_its_sigterm_once_it_has(
        dists, make_engine, engine_root):
    """A qdel's SIGTERM to a job whose shepherd had not recorded its group yet (a loaded
    machine; here a launch hook stops the shepherd until the test lets it go on) was sent
    nowhere: the job ran to its SIGKILL after kill_delay (the demo's deleted job ended
    265, not 271, under load). It is sent at the first poll that finds the record."""
    seen = engine_root / "shepherd"
    engine = make_engine(holding_hook(dists, "stall", "os.kill(event.pid, signal.SIGSTOP)",
                                      seen))
    assert engine.pbs("qmgr", "-c", "set queue workq kill_delay = 600").returncode == 0
    job_id = engine.submit(f"touch {engine.work}/ran\nexec sleep 300\n", Job_Name="late")
    engine.wait(job_id, "R")
    pid, start = shepherd_seen(seen)
    try:
        assert engine.pbs("qdel", job_id).returncode == 0
        assert executor.signal_if_same(pid, start, signal.SIGCONT)
        # (a hang guard far inside the kill_delay, whose SIGKILL the old code waited for)
        attrs = engine.wait(job_id, timeout=120)
        assert attrs["comment"].startswith("Job deleted at request of "), attrs["comment"]
        assert attrs["Exit_status"] == 271, attrs["Exit_status"]
    finally:
        executor.signal_if_same(pid, start, signal.SIGKILL)


def test_a_large_start_to_a_stopped_shepherd_does_not_hold_the_server(
        dists, make_engine, engine_root):
    """The job's command went to its shepherd down a pipe, with blocking writes: one over
    the pipe's 64 KiB (here a launch hook adds a 100,000-byte variable) to a shepherd the
    hook had stopped (at the first run only) held the server's loop until the shepherd
    went on, and no client was answered. The server answers meanwhile; the job, R, runs
    whole once the shepherd goes on, with the variable."""
    seen = engine_root / "shepherd"
    engine = make_engine(holding_hook(
        dists, "stall", 'event.env["BIG"] = "x" * 100000; '
                        f"os.path.exists({str(seen)!r}) or "
                        "os.kill(event.pid, signal.SIGSTOP)", seen))
    job_id = engine.submit('echo "${#BIG}"\n', Job_Name="big")
    until(lambda: seen.exists() and seen.read_text(), what="the launch hook to run")
    pid, start = shepherd_seen(seen)
    try:
        # (a hang guard: the old server never answered while the shepherd stayed stopped)
        patient = Client(engine.home, timeout=30)
        until(lambda: patient("stat_jobs", ids=[job_id])[job_id]["job_state"] == "R",
              what="the job to run")
        assert executor.signal_if_same(pid, start, signal.SIGCONT)
        attrs = engine.wait(job_id)
        assert attrs["Exit_status"] == 0, attrs.get("comment")
        assert (engine.work / f"big.o{job_id.split('.')[0]}").read_text() == "100000\n"
    finally:
        executor.signal_if_same(pid, start, signal.SIGKILL)


def test_the_room_a_killed_shepherd_had_for_its_record_goes_with_the_jobs_files(
        dists, make_engine, engine_root):
    """A shepherd has the room for its record (``<seq>.shepherd.tmp`` in jobs/) before it
    starts the job; killed while it waits there (a qdel's SIGKILL: it waited for room on
    a full disk), that file went with nothing: one a job, in the server's jobs/ for ever.
    Here the hook makes that name a FIFO, which holds the shepherd at the reservation as a
    full disk would, for as long as the test needs."""
    jobs, seen = engine_root / "jobs", engine_root / "shepherd"
    engine = make_engine(holding_hook(
        dists, "reserve", f"os.mkfifo(os.path.join({str(jobs)!r}, "
                          f"event.job.id.split('.')[0] + '.shepherd.tmp'))", seen))
    assert engine.pbs("qmgr", "-c", "set queue workq kill_delay = 0").returncode == 0
    job_id = engine.submit("touch ran\n", Job_Name="reserved")
    engine.wait(job_id, "R")
    pid, start = shepherd_seen(seen)
    reserved = jobs / f"{job_id.split('.')[0]}.shepherd.tmp"
    try:
        assert reserved.exists()
        assert engine.pbs("qdel", job_id).returncode == 0
        assert engine.wait(job_id)["comment"].startswith("Job deleted at request of ")
        assert gone(pid)
        assert not reserved.exists(), "the shepherd's reserved record was left in jobs/"
        assert not (engine.work / "ran").exists()
    finally:
        executor.signal_if_same(pid, start, signal.SIGKILL)


def test_signals_wait_for_a_shepherds_record_only_just_after_the_jobs_start(
        tmp_path, monkeypatch):
    """A launch waits for its shepherd's record (its job's group) up to RECORD_WAIT seconds
    after the job's start, in all: past that, the shepherd waits for room on a full disk.
    Each qsig or qdel to such a job (its owner's, as often as they like) held the server's
    loop 2 s again. A launch read back by a restarted server waits for none. Told by its
    sleeps, not by a clock."""
    me = os.getpid()
    launch = executor.Launch(me, executor.process_start(me), 0, str(tmp_path / "1.status"),
                             str(tmp_path / "tmp1"), executor.boot_id())
    assert launch.alive()  # (a live shepherd that has not recorded its job)

    def record(_seconds: float) -> None:  # the shepherd records it while the server waits
        (tmp_path / "1.shepherd").write_text(json.dumps(
            {"shepherd": me, "started": launch.started, "pgid": 4321, "boot": launch.boot}))

    monkeypatch.setattr(executor.time, "sleep", record)
    launch.sent_at = executor.time.monotonic()  # just started: waited for
    assert launch.resolve(wait=2.0) == 4321

    (tmp_path / "1.shepherd").unlink()

    def waited(seconds: float) -> None:
        raise AssertionError(f"waited {seconds} s for a record that is not coming")

    monkeypatch.setattr(executor.time, "sleep", waited)
    launch.pgid, launch.sent_at = 0, executor.time.monotonic() - executor.RECORD_WAIT - 1
    assert launch.resolve(wait=2.0) == 0
    assert executor.Launch(**launch.to_dict()).resolve(wait=2.0) == 0


def test_executor_prepare_then_start_or_cancel(tmp_path):
    pending = executor.prepare(tmp_path / "1.status", tmp_path / "tmp1", None)
    assert not gone(pending.pid)
    pending.cancel()
    assert not Path(f"/proc/{pending.pid}").exists()  # reaped, not a zombie
    assert not (tmp_path / "1.status").exists() and not (tmp_path / "1.shepherd").exists()
    pending.cancel()  # twice is harmless

    pending = executor.prepare(tmp_path / "2.status", tmp_path / "tmp2", None)
    launch = pending.start(["/bin/sh", "-c", "echo $PPID; exit 4"], {"PATH": "/bin"},
                           str(tmp_path), str(tmp_path / "out"), None)
    assert launch.shepherd == pending.pid
    os.waitpid(pending.pid, 0)  # the shepherd is this process's child
    assert executor.JobExit.read(tmp_path / "2.status").exit_status == 4
    assert (tmp_path / "out").read_text() == f"{pending.pid}\n"
    assert executor.Launch.recorded(tmp_path / "2.status", tmp_path / "tmp2").shepherd == (
        pending.pid)
    pending.cancel()  # a no-op once started
    with pytest.raises(RuntimeError):
        pending.start(["true"], {}, "/", str(tmp_path / "out"), None)


@pytest.mark.parametrize("memfd", ["memfd", "ENOSYS", "EINVAL", "EPERM", "missing"])
def test_a_start_never_waits_for_its_shepherd_to_read(tmp_path, monkeypatch, memfd,
                                                      open_fds):
    """`PendingLaunch.start` to a stopped shepherd, with a command over a pipe's 64 KiB (a
    100,000-byte variable), returns (it wrote down the pipe and waited for the shepherd to
    read); the shepherd, let go on, runs it whole. Where the kernel has no memfd (before
    Linux 3.17, a flag it does not know, a seccomp filter, a Python without it), the
    request file is one made in the jobs folder, unlinked at once. The server keeps no
    descriptor of it, nor anything in the folder."""
    if memfd == "missing":
        monkeypatch.delattr(os, "memfd_create")
    elif memfd != "memfd":
        code = getattr(errno, memfd)

        def refused(name, flags=0):
            raise OSError(code, os.strerror(code))
        monkeypatch.setattr(os, "memfd_create", refused)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    held = open_fds()
    pending = executor.prepare(jobs / "1.status", tmp_path / "tmp1", None)

    def hung(_sig, _frame):
        raise AssertionError("start waited for the stopped shepherd")

    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)  # (a hang guard: the old start never returned)
    try:
        os.kill(pending.pid, signal.SIGSTOP)
        until(lambda: Path(f"/proc/{pending.pid}/stat").read_text().rsplit(")", 1)[1]
              .split()[0] == "T", what="the shepherd to stop")
        pending.start(["/bin/sh", "-c", 'echo "${#BIG}"'], {"PATH": "/bin", "BIG": "x" * 100000},
                      str(tmp_path), str(tmp_path / "out"), None)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
        os.kill(pending.pid, signal.SIGCONT)
        _, status = os.waitpid(pending.pid, 0)
    assert os.WIFEXITED(status) and executor.JobExit.read(jobs / "1.status").exit_status == 0
    assert (tmp_path / "out").read_text() == "100000\n"
    assert open_fds() == held
    assert sorted(p.name for p in jobs.iterdir()) == ["1.shepherd", "1.status"]


@pytest.mark.parametrize("code", ["ENOMEM", "EMFILE", "ENFILE"])
def test_a_memfd_refused_for_want_of_memory_or_descriptors_is_no_start(tmp_path, monkeypatch,
                                                                      code, open_fds):
    """Only a kernel with no memfd is a reason for the request file in the jobs folder: a
    memfd refused for want of memory or descriptors is the start's failure
    (`StartRequestError`, an OSError with its errno), with no shepherd made and nothing
    left open or in the folder. Any error took the fallback, which then ran short of
    the same."""
    number = getattr(errno, code)

    def refused(name, flags=0):
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(os, "memfd_create", refused)
    forked: list[int] = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forked.append(1) or real_fork())
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    held = open_fds()
    with pytest.raises(OSError) as failed:  # (`executor.StartRequestError`)
        executor.prepare(jobs / "1.status", tmp_path / "tmp1", None)
    assert failed.value.errno == number
    assert str(failed.value) == ("its start request could not be made (memfd_create): "
                                 f"{os.strerror(number)}")
    assert (forked, list(jobs.iterdir())) == ([], [])
    assert open_fds() == held


@pytest.mark.parametrize("fails", ["fork", "pipe"])
def test_a_shepherd_that_cannot_be_made_leaves_no_descriptor(tmp_path, monkeypatch, fails,
                                                             open_fds):
    """A fork that fails (no process left for the server's user) left the request file and
    the pipe's two ends open in the server, a job's start after another."""
    def refused(*args):
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, fails, refused)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    held = open_fds()
    with pytest.raises(executor.ShepherdError) as failed:  # (the server requeues the job)
        executor.prepare(jobs / "1.status", tmp_path / "tmp1", None)
    assert open_fds() == held
    assert failed.value.errno == errno.EAGAIN
    assert str(failed.value) == (f"its shepherd could not be made ({fails}): "
                                 "Resource temporarily unavailable")


def test_a_shepherd_killed_before_it_records_its_job_leaves_no_job_to_run(tmp_path,
                                                                           monkeypatch):
    """A qdel's SIGKILL reaches a shepherd that has not recorded its job yet (it waited for
    room), which may have just forked the job's process: that process ran the job all the
    same, untracked (the server kills the shepherd's session, but an interactive job makes
    a session of its own). It waits for the shepherd's word that the job is recorded now,
    and ends when the shepherd is gone. Here the shepherd is killed as it would write the
    record (the wrapper goes with the shepherd, forked from this process), once the job's
    process has run the job's command or waits for that word (reading a pipe)."""
    def killed(self: object, data: dict) -> None:
        child = data["pgid"]
        for _ in range(600):  # (30 s at most: a kernel whose wchan names nothing)
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
                waits = Path(f"/proc/{child}/wchan").read_text()
            except OSError:
                break
            proc = executor._proc(child)
            if proc is None or proc.gone or command.startswith(b"/bin/sh") or "pipe" in waits:
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(executor._Reserved, "write", killed)
    pending = executor.prepare(tmp_path / "1.status", tmp_path / "tmp1", None)
    try:
        pending.start(["/bin/sh", "-c", f"echo ran > {tmp_path}/ran"], {"PATH": "/bin"},
                      str(tmp_path), str(tmp_path / "out"), None)
        until(lambda: gone(pending.pid), 180, "the shepherd to be killed")
        # (not reaped yet: no other process has its number, the job's session's)
        until(lambda: not [pid for pid, proc in executor.processes().items()
                           if proc.session == pending.pid and pid != pending.pid], 60,
              "the job's process to end")
        assert not (tmp_path / "ran").exists(), "the job ran with its shepherd gone"
    finally:
        os.kill(pending.pid, signal.SIGKILL)
        os.waitpid(pending.pid, 0)


def test_a_jobs_process_killed_before_its_shepherds_word_is_the_jobs_end(tmp_path,
                                                                         monkeypatch):
    """The job's process waits for its shepherd's word (the job recorded) on a pipe: killed
    before it read it (the OOM killer, root), the shepherd's word went to a pipe with no
    reader, and SIGPIPE (the shepherd's default) ended the shepherd: the job lost, with no
    status. The shepherd reports its end now."""
    real = executor._Reserved.write

    def job_killed_first(self: executor._Reserved, data: dict) -> None:
        os.kill(data["pgid"], signal.SIGKILL)
        for _ in range(600):  # (the job's process a zombie, its pipe's end closed)
            proc = executor._proc(data["pgid"])
            if proc is None or proc.gone:
                break
            time.sleep(0.05)
        real(self, data)

    monkeypatch.setattr(executor._Reserved, "write", job_killed_first)
    pending = executor.prepare(tmp_path / "1.status", tmp_path / "tmp1", None)
    pending.start(["/bin/true"], {"PATH": "/bin"}, str(tmp_path), str(tmp_path / "out"), None)
    _, status = os.waitpid(pending.pid, 0)
    assert os.WIFEXITED(status), f"the shepherd was killed by signal {os.WTERMSIG(status)}"
    assert executor.JobExit.read(tmp_path / "1.status").exit_status == 256 + signal.SIGKILL


def test_the_jobs_process_holds_no_descriptor_of_the_shepherds_record(tmp_path, monkeypatch):
    """The shepherd has the room for its record (root's ``<seq>.shepherd.tmp``, which the
    server reads the job's process group from) before it forks the job: the job's process
    held it open for writing, as its owner, until its exec (the record itself, once put in
    place). What it holds is looked at just before its output is opened (the shepherd is
    forked from this process: the wrapper goes with it)."""
    held = tmp_path / "held"
    real = executor.open_output

    def open_output(path: str, name: str) -> int:
        fds = Path("/proc/self/fd")
        held.write_text("\n".join(os.readlink(fds / fd) for fd in os.listdir(fds)
                                  if (fds / fd).exists()))
        return real(path, name)

    monkeypatch.setattr(executor, "open_output", open_output)
    pending = executor.prepare(tmp_path / "1.status", tmp_path / "tmp1", None)
    pending.start(["/bin/true"], {"PATH": "/bin"}, str(tmp_path), str(tmp_path / "out"), None)
    os.waitpid(pending.pid, 0)
    assert executor.JobExit.read(tmp_path / "1.status").exit_status == 0
    assert held.read_text()  # (it looked)
    # (by either name: the shepherd may have put it in place, the one the server reads)
    assert not [name for name in held.read_text().splitlines()
                if name.startswith(str(tmp_path / "1.shepherd"))]


def test_an_attached_process_is_identified_through_one_descriptor_of_its_proc_folder(
        monkeypatch):
    """pbs_attach checks a process's owner and records its start time. Both are read through
    one descriptor of /proc/<pid>, bound to that process: a process that ends between the
    two reads (its pid free for another) is no process, never the owner of one and the start
    time of another."""
    child = subprocess.Popen(["sleep", "60"])
    try:
        assert executor.process_identity(child.pid) == (
            os.getuid(), executor.process_start(child.pid))
        real_open = os.open

        def ends_in_between(path, flags, mode=0o777, *, dir_fd=None):
            if dir_fd is not None:  # the owner is read; the process ends before its stat
                child.kill()
                child.wait()
            return real_open(path, flags, mode, dir_fd=dir_fd)

        monkeypatch.setattr(os, "open", ends_in_between)
        assert executor.process_identity(child.pid) is None
    finally:
        child.kill()
        child.wait()
    monkeypatch.undo()
    assert executor.process_identity(child.pid) is None  # reaped
    assert executor.process_identity(-1) is None


def test_a_process_is_signalled_only_while_it_is_the_one_recorded():
    """Root signals an attached process (or a job's leftover) only while it is the process
    recorded, through a pidfd opened before its start time is checked: a kill by pid after
    the check could reach another process given the pid in between."""
    child = subprocess.Popen(["sleep", "60"])
    started = executor.process_start(child.pid)
    try:
        assert not executor.signal_if_same(child.pid, started + 1, signal.SIGTERM)
        assert child.poll() is None  # another start time: another process, left alone
        assert executor.signal_if_same(child.pid, started, signal.SIGTERM)
        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()
    assert not executor.signal_if_same(child.pid, started, signal.SIGTERM)  # gone


def test_without_pidfds_a_process_is_still_signalled_after_its_check(monkeypatch):
    """Review: where the kernel refuses pidfd_open (before Linux 5.3, a seccomp filter),
    nothing was signalled at all: a job's leftovers ran on."""
    import errno

    def refused(pid, flags=0):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", refused)
    child = subprocess.Popen(["sleep", "60"])
    try:
        started = executor.process_start(child.pid)
        assert not executor.signal_if_same(child.pid, started + 1, signal.SIGTERM)
        assert executor.signal_if_same(child.pid, started, signal.SIGTERM)
        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()


def test_a_launch_from_another_boot_is_not_alive_even_when_its_pid_and_start_match(
        tmp_path):
    """`Launch.alive` compared the recorded start time alone: after a reboot the shepherd's
    pid names some other process, which may have started at the same clock tick since its
    boot, and the server adopted the job again (its kill and signals check the boot). Here
    a `sleep` stands for that process: its pid and start, recorded in another boot."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        started = executor.process_start(other.pid)
        assert started is not None

        def launch(boot: str) -> executor.Launch:
            return executor.Launch(other.pid, started, 0, str(tmp_path / "1.status"),
                                   str(tmp_path), boot)

        assert executor.boot_id()  # (this test needs a boot id to tell boots apart)
        assert launch(executor.boot_id()).alive()
        assert not launch("a boot before this one").alive()
        assert launch("").alive()  # (no boot recorded: the start time alone)
    finally:
        other.kill()
        other.wait()


def test_a_sigterm_before_the_jobs_process_takes_it_waits_for_it(tmp_path, monkeypatch):
    """The job's process took SIGTERM as its first step, but had the shepherd's SIG_IGN
    from its fork until then: a qdel's SIGTERM sent in between (the shepherd had recorded
    the job, the server read the record, this process had not run yet: a loaded machine)
    was lost, and the job stayed R for its whole kill_delay (the last CI's one failure).
    The shepherd forks it with the signal blocked, so it waits. Here the job's process is
    made slow to take it, and the group is signalled once the record is there."""
    real = executor._wait_for_word

    def slow(*args):  # (in the job's process: the window a loaded machine makes)
        time.sleep(1.0)
        real(*args)

    monkeypatch.setattr(executor, "_wait_for_word", slow)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    pending = executor.prepare(jobs / "1.status", tmp_path / "tmp1", None)
    pending.start(["/bin/sleep", "30"], {"PATH": "/bin"}, str(tmp_path), str(tmp_path / "out"),
                  None)
    try:
        recorded = until(lambda: executor.Launch.recorded(jobs / "1.status", tmp_path / "tmp1"),
                         what="the shepherd's record")
        os.killpg(recorded.pgid, signal.SIGTERM)
        _, status = os.waitpid(pending.pid, 0)  # (a hang guard: the job's 30 s)
        assert executor.JobExit.read(jobs / "1.status").exit_status == 256 + signal.SIGTERM
    finally:
        if executor.process_start(pending.pid):
            os.kill(pending.pid, signal.SIGKILL)


def test_a_sigterm_while_the_jobs_process_waits_for_the_shepherds_word_ends_it():
    """A qdel's SIGTERM may reach the job's process as soon as the server reads the
    shepherd's record, before that process has read the shepherd's word: it still had the
    shepherd's SIG_IGN then, the signal was lost, and the job ran on to its SIGKILL after
    kill_delay (a deleted job ended 265, not 271, under load). `_wait_for_word` takes them
    as the job does before it waits."""
    recorded, go = os.pipe()
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # (as the shepherd has it)
    try:
        pid = os.fork()
        if pid == 0:
            try:
                os.close(go)
                executor._wait_for_word(recorded)
            finally:
                os._exit(3)  # (the word came: it should have been killed before)
    finally:
        signal.signal(signal.SIGTERM, before)
    os.close(recorded)
    try:
        until(lambda: ignored_signals(pid) is not None and not ignored_signals(pid) & (
            1 << (signal.SIGTERM - 1)), what="the job's process to take SIGTERM")
        os.kill(pid, signal.SIGTERM)
        time.sleep(0.2)  # (not a timing check: the word comes after, as it may)
        try:
            os.write(go, b"\0")
        except BrokenPipeError:
            pass  # (it is gone already)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status
    finally:
        os.close(go)


_MOVING_JOB = """\
import os, signal, sys, time
to_top, to_other, told = map(int, sys.argv[1:4])
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # (a SIGTERM sent stays pending)
os.setpgid(0, 0)  # the job's group: its top process's pid
top = os.getpid()
other = os.fork()
if other == 0:  # in a group of its own, until told to join the job's
    os.setpgid(0, 0)
    os.read(to_other, 1)
    os.setpgid(0, top)
    os.write(told, b"j")
    while True:
        time.sleep(60)
with __import__("contextlib").suppress(OSError):
    os.setpgid(other, other)
if os.fork() == 0:  # stays in the job's group
    while True:
        time.sleep(60)
os.write(told, f"{top} {other}\\n".encode())
os.read(to_top, 1)  # told to leave the job's group, for the other's
os.setpgid(0, other)
os.write(told, b"l")
while True:
    time.sleep(60)
"""


@pytest.fixture
def moving_job(tmp_path):
    """A job's processes made to move between groups when told to: its top process (the
    group's number; its shepherd here the process the test starts, in a session of its
    own), a process of the job's group, and `other` in a group of its own. Each blocks
    SIGTERM, so that one sent stays pending. Yields (launch, top, other, move): move("top")
    has the top process leave its group for the other's, move("other") has the other join
    the job's group; each returns once it has."""
    to_top, tell_top = os.pipe()
    to_other, tell_other = os.pipe()
    told, hear = os.pipe()
    shepherd = subprocess.Popen(
        ["python3", "-c", "import os, sys, time\n"
         "if os.fork() == 0:\n"
         f"    os.execv(sys.executable, [sys.executable, '-c', {_MOVING_JOB!r}, *sys.argv[1:]])\n"
         "while True:\n"
         "    time.sleep(60)\n", str(to_top), str(to_other), str(hear)],
        pass_fds=(to_top, to_other, hear), start_new_session=True)
    for fd in (to_top, to_other, hear):
        os.close(fd)
    reply = os.fdopen(told, "rb", buffering=0)

    def move(who: str) -> None:
        os.write(tell_top if who == "top" else tell_other, b"x")
        assert reply.read(1) == (b"l" if who == "top" else b"j")  # (a hang guard: none)

    try:
        top, other = map(int, reply.readline().split())
        launch = executor.Launch(shepherd.pid, executor.process_start(shepherd.pid) or 0.0,
                                 top, str(tmp_path / "1.status"), str(tmp_path),
                                 executor.boot_id())
        yield launch, top, other, move
    finally:
        for pid, proc in executor.processes().items():
            if proc.session == shepherd.pid:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        shepherd.wait()
        reply.close()
        os.close(tell_top)
        os.close(tell_other)


def _stopped(pid: int) -> bool:
    return (executor._proc(pid) or executor.Proc("?", 0, 0, 0, 0, 0, 0)).state == "T"


def _term_pending(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    pending = int(re.search(r"^ShdPnd:\s*(\S+)", status, re.M).group(1), 16)
    return bool(pending & 1 << (signal.SIGTERM - 1))


def test_suspend_stops_a_process_that_joins_the_jobs_group_once_its_top_is_stopped(
        moving_job, monkeypatch):
    """Review: the session's processes were sent SIGSTOP only when not in the job's group,
    as read after the group was sent it: a process of the job outside the group at that
    send that joined it once the top process showed stopped (setpgid) was sent none, and
    ran on through every suspend (62 in 100). Suspend and resume reach every process of
    the job, whatever group it is in (`executor.signal_whole`); here it joins just after
    the group's send."""
    launch, top, other, move = moving_job
    real = executor._signal_group

    def then_joined(pidfd, pgid, sig):
        sent = real(pidfd, pgid, sig)
        move("other")
        return sent

    monkeypatch.setattr(executor, "_signal_group", then_joined)
    assert executor.signal_whole(launch, signal.SIGSTOP)
    assert os.getpgid(other) == top
    until(lambda: _stopped(top) and _stopped(other), timeout=10,
          what="the job's top process and the process that joined its group stopped")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGSTOP])
def test_a_top_process_that_leaves_its_group_before_the_groups_signal_is_sent_it(
        moving_job, monkeypatch, sig):
    """Review: the top process's group was read before the group was signalled: a top
    process that left it in between was taken for signalled with the group, and sent
    nothing (`executor.signal_whole` then skipped it as signalled). Its group is read
    after the group's send (`executor.signal_launch`)."""
    launch, top, other, move = moving_job
    real = executor._signal_group

    def left_first(pidfd, pgid, sig):
        move("top")
        return real(pidfd, pgid, sig)

    monkeypatch.setattr(executor, "_signal_group", left_first)
    assert executor.signal_whole(launch, sig)
    assert os.getpgid(top) == other
    if sig == signal.SIGTERM:
        assert _term_pending(top)  # (blocked: pending once sent)
    else:
        until(lambda: _stopped(top), timeout=10, what="the top process stopped")
