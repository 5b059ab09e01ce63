"""A full disk under the server's home is an error, not an exit (issue 17): changes are
refused with PBS's System error (15010) and the reason, reads and running jobs go on, a job
that ends meanwhile is recorded once there is room, and writes resume then.

The home is a small tmpfs mounted for the test (root only): filled for real, then emptied.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pbsplug import PluginInfo, hookimpl, lifecycle
from pbsplug.engine import executor
from pbsplug.engine.errors import PBSE_SYSTEM, PbsError
from pbsplug.engine.home import LOG_JOB, Home, ServerLog
from pbsplug.engine.testing import LocalEngine, make_root, remove_root, until
from pbsplug.testing import missing

from .conftest import jobs_left_killed


def _small_tmpfs(options: str) -> Iterator[Path]:
    """A tmpfs mounted with `options` (root only), for a fixture; unmounted afterwards."""
    if os.geteuid() != 0:
        missing("needs root to mount a small tmpfs")
    if shutil.which("mount") is None:
        missing("needs mount (Debian package mount) to make a small file system")
    root = make_root()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"{options},mode=0755", "tmpfs",
                           str(root)], capture_output=True, text=True)
    if done.returncode != 0:
        remove_root(root)
        missing(f"cannot mount a tmpfs on {root}: {done.stderr.strip()}")
    yield root
    subprocess.run(["pkill", "-KILL", "-f", f"{root}/"], check=False)
    subprocess.run(["umount", "-l", str(root)], check=False)
    remove_root(root)


@pytest.fixture
def small_home():
    """A 16 MiB tmpfs as a server home."""
    yield from _small_tmpfs("size=16m")


def _fill(path: Path) -> None:
    """Write to `path` until the file system has no room left."""
    chunk = b"\0" * (1 << 16)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError:
                break
        while True:  # the last partial page
            try:
                os.write(fd, b"\0" * 512)
            except OSError:
                break
    finally:
        os.close(fd)


#: How long a test waits for what the server and its jobs do in their own time: generous,
#: as a loaded machine (the whole suite beside other work, on 2 cpus) is slow.
PATIENCE = 180.0


def _holds(path: Path, text: str) -> bool:
    try:
        return text in path.read_text()
    except FileNotFoundError:
        return False


def test_full_disk_refuses_changes_and_keeps_serving(small_home, dists):
    """The running job ends when the test says so (a file off the tmpfs), after the disk is
    full and the refusals and reads are checked: it slept 3 s, and on a loaded machine it
    could end before the disk was full, which the test then waited for in vain."""
    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # jobs' output off the tmpfs
    work.chmod(0o777)
    go = work / "go"
    engine = LocalEngine(small_home, env=dists.env())
    engine.work = work
    engine.start()
    try:
        held = engine.submit("true\n", Hold_Types="u")
        running = engine.submit(f"touch {work}/started\nwhile [ ! -e {go} ]; do sleep 0.1; "
                                "done\necho done\n", Job_Name="long")
        # (its shepherd has then had the room for its record: a job R whose shepherd had
        # not yet, under load, started only once there was room again, after the test)
        until(lambda: (work / "started").exists(), timeout=PATIENCE, what="the job to run")

        _fill(small_home / "fill")
        refused = None
        for _ in range(500):  # SQLite reuses what room its WAL already has, then asks for more
            try:
                engine.submit("true\n", Hold_Types="u")
            except PbsError as err:
                refused = err
                break
        assert refused is not None, "no submission was refused on a full disk"
        assert refused.code == PBSE_SYSTEM
        assert refused.message.startswith("System error: ")
        assert "full" in refused.message or "I/O" in refused.message, refused.message
        # A qmgr change is refused with the same error, and nothing of it is kept.
        try:
            answer = engine.client("qmgr", text="set server comment = full")
            assert answer["code"] != 0 and "System error" in "".join(answer["errors"]), answer
        except PbsError as err:
            assert err.code == PBSE_SYSTEM, err
        # Reads go on.
        assert engine.job(held)["job_state"] == "H"
        assert engine.pbs("qstat", "-f", running).returncode == 0
        # The running job ends while the disk is full: its shepherd waits for room to write
        # its status, and the server keeps the job running meanwhile.
        assert engine.job(running)["job_state"] == "R"
        go.touch()
        seq = running.split(".")[0]
        # (Its status is written whole when its last sample, which it removes first, held
        # the page the status needs: since beec044 that happened whenever a sample had
        # been written before the disk filled, and the test waited for the .tmp in vain.)
        until(lambda: any((small_home / "jobs" / f"{seq}.{end}").exists()
                          for end in ("status.tmp", "status")), timeout=PATIENCE,
              what="the job to end and its shepherd to try writing its status on the full "
                   "disk")
        until(lambda: _holds(work / f"long.o{seq}", "done"), timeout=PATIENCE,
              what=f"the job's output, 'done' in {work}/long.o{seq}")
        assert engine.job(running)["job_state"] == "R"
        assert engine.home.server_pid() is not None

        (small_home / "fill").unlink()  # room again
        attrs = until(lambda: (a := engine.job(running))["job_state"] == "F" and a,
                      timeout=PATIENCE, what="the job's end recorded once there is room")
        assert attrs["Exit_status"] == 0, attrs
        assert engine.log().count(f";Job;{running};Exit_status=") == 1  # recorded once
        assert (work / f"long.o{seq}").read_text() == "done\n"
        assert engine.client("qmgr", text="set server comment = room")["code"] == 0
        server = next(iter(engine.client("stat_server").values()))
        assert server["comment"] == "room"
        again = engine.submit("true\n")
        attrs = until(lambda: (a := engine.job(again))["job_state"] == "F" and a,
                      timeout=PATIENCE, what="a job submitted once there is room, to end")
        assert attrs["Exit_status"] == 0, attrs
        assert engine.home.server_pid() is not None
    finally:
        go.touch()  # (the job ends, whatever failed)
        engine.stop()
        shutil.rmtree(work, ignore_errors=True)


class _Ended:
    """``ended()``: whether the test's shepherd, `pid`, has ended (reaped then, by that
    call); `seen`, whether any call has said so."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen = False

    def __call__(self) -> bool:
        ended = os.waitpid(self.pid, os.WNOHANG)[0] == self.pid
        self.seen = self.seen or ended
        return ended


def _start_job(pending: executor.PendingLaunch, work: Path) -> _Ended:
    """Start `pending`'s job, which writes "ran" to `work`/ran and exits 3; its shepherd's
    `_Ended`."""
    pending.start(["/bin/sh", "-c", f"echo ran > {work}/ran; exit 3"], {"PATH": "/bin"},
                  str(work), str(work / "out"), None)
    return _Ended(pending.pid)


def _end_shepherd(pid: int) -> None:
    """Kill and reap the test's shepherd, unless the test reaped it: its pid may be another
    process's since (a SIGKILL by that number could end anyone's). While not reaped, it
    is ours, even ended (a zombie's pid is given to no one)."""
    try:
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return  # (it had ended: reaped now)
    except ChildProcessError:
        return  # (reaped by the test)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def test_a_job_whose_shepherd_finds_the_disk_full_starts_once_there_is_room(small_home):
    """A shepherd records its job (the job's process group, for the server's signals) in
    the server's home as the job starts. On a full disk that write raised: the shepherd
    killed its job and ended, and the server found the job lost (seen under load, when the
    disk filled between the server's R and the shepherd's record). It waits for room before
    it starts the job now, and the job runs whole once there is room."""
    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))
    jobs = small_home / "jobs"
    pending = executor.prepare(jobs / "1.status", work / "tmp1", None)
    try:
        _fill(small_home / "fill")
        shepherd_ended = _start_job(pending, work)

        until(lambda: (jobs / "1.shepherd.tmp").exists() or shepherd_ended(),
              timeout=PATIENCE, what="the shepherd to try to record its job")
        assert not shepherd_ended.seen, "the shepherd ended on the full disk"
        assert not (work / "ran").exists()  # (it waits before the job starts)
        (small_home / "fill").unlink()  # room again
        until(shepherd_ended, timeout=PATIENCE, what="the job to run and its shepherd to end")
        status = executor.JobExit.read(jobs / "1.status")
        assert status is not None, "the shepherd ended with no status: its job was lost"
        assert status.exit_status == 3
        assert (work / "ran").read_text() == "ran\n"
        assert executor.Launch.recorded(jobs / "1.status", work / "tmp1").shepherd == (
            pending.pid)
    finally:
        _end_shepherd(pending.pid)
        shutil.rmtree(work, ignore_errors=True)


def test_a_sigkill_ends_a_shepherd_that_waits_for_room_and_its_job_never_runs(small_home):
    """A shepherd waiting for room for its record has not recorded the job's group, which
    the server signals: a qdel's SIGKILL (after kill_delay) was sent nowhere, and the job
    ran whole once there was room, deleted as it was. The SIGKILL ends the shepherd now
    (any other signal is not sent: PBS's MoM refuses them to a job not running yet)."""
    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))
    jobs = small_home / "jobs"
    pending = executor.prepare(jobs / "1.status", work / "tmp1", None)
    try:
        _fill(small_home / "fill")
        launch = pending.start(["/bin/sh", "-c", f"echo ran > {work}/ran"],
                               {"PATH": "/bin"}, str(work), str(work / "out"), None)
        until(lambda: (jobs / "1.shepherd.tmp").exists(), timeout=PATIENCE,
              what="the shepherd to try to record its job")
        assert not executor.signal_launch(launch, signal.SIGTERM)
        assert os.waitpid(pending.pid, os.WNOHANG) == (0, 0)  # (still waiting for room)
        assert executor.signal_launch(launch, signal.SIGKILL), "the SIGKILL was sent nowhere"
        _, status = os.waitpid(pending.pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        (small_home / "fill").unlink()  # room again: nothing is left to start the job
        # (the job would have been the shepherd's child, in its session)
        assert not [pid for pid, proc in executor.processes().items()
                    if proc.session == pending.pid]
        assert not (work / "ran").exists()
        assert executor.JobExit.read(jobs / "1.status") is None
    finally:
        _end_shepherd(pending.pid)
        shutil.rmtree(work, ignore_errors=True)


def test_a_shepherd_waiting_for_room_gives_up_when_its_server_is_gone(small_home):
    """A shepherd waiting for room for its record, whose server then died: a server started
    again finds no record (and no stored launch, if the disk was full when it started the
    job) and queues the job again, or finds its shepherd gone; this shepherd went on once
    there was room, and ran the job untracked, beside its next run (in the same files).
    It gives up now, starting nothing. The "server" here is a child of the test's, which
    ends once the shepherd waits; the room comes back after."""
    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))
    jobs = small_home / "jobs"
    _fill(small_home / "fill")
    told, tell = os.pipe()
    server = os.fork()
    if server == 0:  # the server: starts the job, and dies once its shepherd waits
        try:
            os.close(told)
            pending = executor.prepare(jobs / "1.status", work / "tmp1", None)
            pending.start(["/bin/sh", "-c", f"echo ran > {work}/ran"], {"PATH": "/bin"},
                          str(work), str(work / "out"), None)
            os.write(tell, f"{pending.pid} {pending.started}".encode())
            until(lambda: (jobs / "1.shepherd.tmp").exists(), timeout=PATIENCE,
                  what="the shepherd to try to record its job")
        finally:
            os._exit(0)
    os.close(tell)
    try:
        with os.fdopen(told) as f:
            pid, started = f.read().split()
        assert os.waitpid(server, 0)[1] == 0  # the server is gone; then there is room
        (small_home / "fill").unlink()
        until(lambda: executor.process_start(int(pid)) != float(started), timeout=PATIENCE,
              what="the shepherd to end")
        assert not (work / "ran").exists(), "the job ran with its server gone"
        assert executor.JobExit.read(jobs / "1.status") is None
    finally:
        executor.signal_if_same(int(pid), float(started), signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)


def _wchan_names_nanosleep() -> bool:
    """Whether /proc/<pid>/wchan names the nanosleep a sleeping process is in, here."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        for _ in range(200):  # (10 s at most, for sleep(1) to start sleeping)
            if "nanosleep" in Path(f"/proc/{sleeper.pid}/wchan").read_text():
                return True
            time.sleep(0.05)
        return False
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.fixture
def few_inodes():
    """A tmpfs with room for 64 files and folders, whatever their size."""
    yield from _small_tmpfs("size=16m,nr_inodes=64")


def test_a_shepherd_that_finds_no_inode_left_waits_for_one(few_inodes):
    """A file system out of inodes refuses a new file (ENOSPC at its open), with room for
    bytes left: the shepherd waited for room to write its reserved record, but not to
    create it, so it raised, and the job was lost (as on a full disk before 9b79e09)."""
    if not _wchan_names_nanosleep():
        missing("needs /proc/<pid>/wchan to name a sleeping process's nanosleep")
    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))
    jobs = few_inodes / "jobs"
    jobs.mkdir()
    pending = executor.prepare(jobs / "1.status", work / "tmp1", None)
    try:
        made = []
        while True:  # every inode taken
            try:
                (few_inodes / f"f{len(made)}").touch()
            except OSError:
                break
            made.append(few_inodes / f"f{len(made)}")
        shepherd_ended = _start_job(pending, work)

        def waits() -> bool:  # (its sleep between two tries: a nanosleep)
            with contextlib.suppress(OSError):
                return "nanosleep" in Path(f"/proc/{pending.pid}/wchan").read_text()
            return False

        until(lambda: shepherd_ended() or waits(), timeout=PATIENCE,
              what="the shepherd to wait for an inode, or end")
        assert not shepherd_ended.seen, "the shepherd ended with no inode left"
        assert not (work / "ran").exists()
        for path in made:  # inodes again
            path.unlink()
        until(shepherd_ended, timeout=PATIENCE, what="the job to run and its shepherd to end")
        assert executor.JobExit.read(jobs / "1.status").exit_status == 3
        assert (work / "ran").read_text() == "ran\n"
    finally:
        _end_shepherd(pending.pid)
        shutil.rmtree(work, ignore_errors=True)


def test_the_server_log_counts_lines_it_cannot_write(tmp_path):
    """A log line that cannot be written is counted, not raised; the next line written says
    how many were lost and why. /dev/full stands in for a full disk."""
    if not os.path.exists("/dev/full"):
        missing("needs /dev/full to fail writes with ENOSPC")
    home = Home(tmp_path)
    home.logs.mkdir()
    log = ServerLog(home, "host")
    day = time.strftime("%Y%m%d")
    (home.logs / day).symlink_to("/dev/full")
    log(LOG_JOB, "Job", "1.host", "first")
    log(LOG_JOB, "Job", "2.host", "second\nthird")
    assert log.lost == 3
    (home.logs / day).unlink()
    log(LOG_JOB, "Job", "4.host", "fourth")
    if time.strftime("%Y%m%d") != day:
        pytest.skip("midnight passed during the test: the lines went to another day's file")
    lines = (home.logs / day).read_text().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].endswith(";0001;Server@host;Server;host;3 log lines lost: No space left "
                             "on device"), lines[0]
    assert lines[1].endswith(";0008;Server@host;Job;4.host;fourth")
    assert log.lost == 0
    log.close()


def test_a_job_past_its_walltime_is_killed_on_a_full_disk(small_home, pbsplug_plugins,
                                                           monkeypatch):
    """The server leaves PBS's walltime note for the job's shepherd in a file of its home:
    on a full disk that write raised, before the job was signalled, in every poll (each
    one failed there, 20 a second): the job ran on past its walltime, and no other job's end
    or limit was looked at. The note is lost now; the job is killed all the same. Its kill
    is written before the note (one that cannot be written is kept in memory: the tests of
    `_killed_unwritten`), so the disk is made full after that write: the job ended
    Exit_status 271 when the kill came first and its write failed."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records, poll_until
    from .owner_hooks import gone

    now = [time.time()]
    eng = Engine(Home(small_home), plugins=pbsplug_plugins, clock=lambda: now[0])
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id = eng.req_submit(root, {"Resource_List": {"walltime": "00:01:00"}},
                                "exec sleep 300\n")
        poll_until(eng, lambda: job_id in eng.launches, "the job to run")
        pid = until(eng.launches[job_id].resolve, timeout=PATIENCE,
                    what="the job's process group to be recorded")
        real = executor.tell_job
        told: list[bool] = []

        def full_first(launch, note):  # (the disk full as the note is left)
            _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
            told.append(real(launch, note))
            return told[-1]

        monkeypatch.setattr(executor, "tell_job", full_first)
        now[0] += 120  # (past its walltime)
        eng.poll()
        assert told == [False], "the note was left on a full disk"
        assert job_id in eng.kills
        until(lambda: gone(pid), timeout=PATIENCE,
              what="the job to be killed for its walltime on the full disk")
        (small_home / "fill").unlink()  # room again
        poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
        assert eng.store.job(job_id)["Exit_status"] == -29
        assert accounting_records(eng).count(f";E;{job_id};") == 1
    finally:
        eng.runner.reap()
        eng.close()


def test_an_end_after_pbsuser_end_hooks_is_recorded_once_there_is_room(small_home, dists):
    """A job's pbsuser end hooks run while the server serves; when they are over, its end
    (its record, F) could not be written on a full disk: it was logged and the job left E
    until the server's next start. It is tried again at later polls now, once there is room,
    its end hooks not run again."""
    from .test_server import plugin

    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # off the tmpfs
    work.chmod(0o777)
    site = plugin(dists, "slow", f"""
        import os
        import time
        from pathlib import Path

        @hookimpl
        def execjob_epilogue(event):
            open({str(work / "seen")!r}, "a").write("execjob_epilogue\\n")
            open({str(work / "waits")!r}, "w").close()
            while not Path({str(work / "go")!r}).exists():
                time.sleep(0.05)

        @hookimpl
        def execjob_end(event):
            open({str(work / "seen")!r}, "a").write("execjob_end\\n")
            open({str(work / "end.pid")!r}, "w").write(str(os.getpid()))
        """, ("execjob_epilogue", "execjob_end"), user="pbsuser", alarm=600)
    engine = LocalEngine(small_home, site, env=dists.env())
    engine.work = work
    engine.start()
    try:
        job_id = engine.submit("exit 7\n")
        until((work / "waits").exists, timeout=PATIENCE, what="the job's epilogue to wait")
        assert (engine.job(job_id)["job_state"], engine.job(job_id)["substate"]) == ("E", 57)
        _fill(small_home / "fill")
        for _ in range(500):  # (until the database has no room left either)
            try:
                engine.submit("true\n", Hold_Types="u")
            except PbsError:
                break
        else:
            raise AssertionError("no submission was refused on a full disk")
        (work / "go").touch()
        # Its execjob_end's process gone (reaped): the server has had the chain's end, and
        # tried to write the job's end.
        until(lambda: _holds(work / "end.pid", "") and (work / "end.pid").read_text() and
              not Path(f"/proc/{(work / 'end.pid').read_text()}").exists(),
              timeout=PATIENCE, what="the end hooks to be over")
        assert engine.job(job_id)["job_state"] == "E"
        (small_home / "fill").unlink()  # room again
        attrs = until(lambda: (a := engine.job(job_id))["job_state"] == "F" and a,
                      timeout=PATIENCE, what="the job's end recorded once there is room")
        assert attrs["Exit_status"] == 7, attrs
        assert (work / "seen").read_text() == "execjob_epilogue\nexecjob_end\n"  # once
        assert engine.log().count(f";Job;{job_id};Exit_status=") == 1
    finally:
        (work / "go").touch()
        engine.stop()
        shutil.rmtree(work, ignore_errors=True)


def _full(small_home: Path, submit) -> None:
    """Fill `small_home` and submit until a submission is refused: the database has no
    room left either (SQLite reuses what room its WAL has first)."""
    _fill(small_home / "fill")
    for _ in range(500):
        try:
            submit()
        except PbsError as err:
            assert err.code == PBSE_SYSTEM, err
            return
    raise AssertionError("no submission was refused on a full disk")


def _full_after(monkeypatch, small_home: Path, eng, owner, name: str):
    """`owner.name` made to fill `small_home` right after each call returns, as another
    process takes the room: what it wrote stands, and the writes after it fail. Returns
    the real one, to put back."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    real = getattr(owner, name)

    def full_after_it(*args, **kwargs):
        result = real(*args, **kwargs)
        _full(small_home, lambda: eng.req_submit(Caller(0, ROLE_MANAGER), {"Hold_Types": "u"},
                                                 "true\n"))
        return result

    monkeypatch.setattr(owner, name, full_after_it)
    return real


def _full_first(monkeypatch, small_home: Path, eng, name: str) -> None:
    """`eng.name` made to fill `small_home` before its first call goes on, as another
    process takes the room: its writes and those after it fail. Put back at that call."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    real = getattr(eng, name)

    def full_first(*args, **kwargs):
        monkeypatch.setattr(eng, name, real)
        _full(small_home, lambda: eng.req_submit(Caller(0, ROLE_MANAGER), {"Hold_Types": "u"},
                                                 "true\n"))
        return real(*args, **kwargs)

    monkeypatch.setattr(eng, name, full_first)

def test_a_qdel_after_one_refused_in_the_prologue_runs_execjob_abort(small_home, dists):
    """A qdel in a job's pbsuser prologue stops the chain, then writes the deletion: on a
    full disk that write failed, the qdel was refused, and the job stayed R with no launch
    and no chain. The next qdel dropped it (`_drop`): no execjob_abort, no end hooks, so
    what its execjob_begin hooks made on the host stayed. It ends now as a qdel in its
    prologue ends it: execjob_abort, then its end hooks and its E record, one D."""
    from .conftest import accounting_records
    from .owner_hooks import gone, holding_plugin, started

    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # off the tmpfs
    work.chmod(0o777)
    made, seen = work / "made", work / "seen"
    site = holding_plugin(dists, work, f"""
        def saw(event):
            open({str(seen)!r}, "a").write(event.type + "\\n")

        @hookimpl
        def execjob_begin(event):
            os.mkdir({str(made)!r})  # (as a cpuset, or a job's folder)
            saw(event)

        @hookimpl
        def execjob_prologue(event):
            saw(event)
            hold_first()

        @hookimpl
        def execjob_abort(event):
            os.rmdir({str(made)!r})
            saw(event)

        @hookimpl
        def execjob_end(event):
            saw(event)
        """, ("execjob_begin", "execjob_prologue", "execjob_abort", "execjob_end"))
    engine = LocalEngine(small_home, site, env=dists.env())
    engine.work = work
    engine.start()
    try:
        job_id = engine.submit(Job_Name="slow")
        pid = started(work, "the prologue to start")
        _full(small_home, lambda: engine.submit("true\n", Hold_Types="u"))
        [answer] = engine.client("delete", ids=[job_id])
        assert answer.get("error", {}).get("code") == PBSE_SYSTEM, answer
        until(lambda: gone(pid), timeout=PATIENCE, what="the hook's process to be killed")
        attrs = engine.job(job_id)
        assert (attrs["job_state"], attrs["substate"]) == ("R", 41)
        assert made.is_dir()
        (small_home / "fill").unlink()  # room again
        assert [a.get("error") for a in engine.client("delete", ids=[job_id])] == [None]
        attrs = engine.wait(job_id, timeout=PATIENCE)
        assert attrs["comment"].startswith("Job deleted at request of root@"), attrs
        assert seen.read_text().split() == ["execjob_begin", "execjob_prologue",
                                            "execjob_abort", "execjob_end"]
        assert not made.exists()  # (its execjob_abort undid it)
        records = [line.split(";")[1] for line in accounting_records(engine).splitlines()
                   if f";{job_id};" in line]
        assert records == ["Q", "S", "D", "E"], records
    finally:
        (work / "go").touch()
        engine.stop()
        shutil.rmtree(work, ignore_errors=True)


def test_a_job_named_twice_after_a_refused_prologue_qdel_is_taken_as_the_first(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """``qdel 7 7.server`` of a job in its pbsuser prologue, the first spelling's deletion
    unwritten (a full disk): the second spelling, room there again, found the job R with
    no launch and no chain and dropped it (`_drop`) with no execjob_abort. It is taken as
    the first now: execjob_abort runs, and the job ends deleted."""
    from pbsplug import PluginInfo, hookimpl
    from pbsplug.engine.server import Engine


    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # off the tmpfs
    work.chmod(0o777)
    go, aborted = work / "go", work / "aborted"

    class Held:
        plugin_info = PluginInfo(events=("execjob_prologue", "execjob_abort"))

        @hookimpl
        def execjob_prologue(self, event):
            while not go.exists():
                time.sleep(0.05)

        @hookimpl
        def execjob_abort(self, event):
            aborted.write_text(event.job.id)

    register_plugin(Held(), "slow", user="pbsuser", alarm=600)
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root, job_id = _in_its_prologue(eng)
        _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
        real = eng._delete

        def room_after_the_first(*args, **kwargs):  # (as another process frees room)
            try:
                return real(*args, **kwargs)
            finally:
                (small_home / "fill").unlink(missing_ok=True)

        monkeypatch.setattr(eng, "_delete", room_after_the_first)
        first, second = eng.req_delete(root, [job_id, job_id.split(".")[0]])
        assert first["error"]["code"] == PBSE_SYSTEM, first
        assert second.get("error") is None, second
        attrs = eng.store.job(job_id)
        assert attrs["job_state"] == "F"
        assert attrs["comment"].startswith("Job deleted at request of root@"), attrs
        assert aborted.read_text() == job_id
    finally:
        go.touch()
        eng.runner.reap()
        eng.close()
        shutil.rmtree(work, ignore_errors=True)


def test_a_forced_qdel_named_twice_in_the_end_hooks_on_a_full_disk_is_refused_twice(
        small_home, dists):
    """``qdel -W force 7 7.server`` while the job's pbsuser end hooks run, on a full disk:
    the first spelling's deletion could not be written (15010), but the job was marked
    answered for the request before the write, so the second was answered as deleted,
    nothing written. Marked once written now: the second is refused as the first, and a
    forced qdel once there is room deletes the job, one D record."""
    from .conftest import accounting_records
    from .test_server import plugin

    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # off the tmpfs
    work.chmod(0o777)
    site = plugin(dists, "slow", f"""
        import time
        from pathlib import Path

        @hookimpl
        def execjob_epilogue(event):
            open({str(work / "waits")!r}, "w").close()
            while not Path({str(work / "go")!r}).exists():
                time.sleep(0.05)
        """, ("execjob_epilogue",), user="pbsuser", alarm=600)
    engine = LocalEngine(small_home, site, env=dists.env())
    engine.work = work
    engine.start()
    try:
        job_id = engine.submit("exit 7\n")
        until((work / "waits").exists, timeout=PATIENCE, what="the job's epilogue to wait")
        _full(small_home, lambda: engine.submit("true\n", Hold_Types="u"))
        answers = engine.client("delete", ids=[job_id, job_id.split(".")[0]], force=True)
        assert [(a.get("error") or {}).get("code") for a in answers] == [PBSE_SYSTEM] * 2, \
            answers
        (small_home / "fill").unlink()  # room again
        assert [a.get("error") for a in engine.client("delete", ids=[job_id],
                                                      force=True)] == [None]
        (work / "go").touch()
        attrs = engine.wait(job_id, timeout=PATIENCE)
        assert attrs["Exit_status"] == 7, attrs
        assert accounting_records(engine).count(f";D;{job_id};") == 1
    finally:
        (work / "go").touch()
        engine.stop()
        shutil.rmtree(work, ignore_errors=True)


def _noting_ends(seen: Path):
    """A plugin whose root execjob_abort and execjob_end hooks note their event in `seen`:
    those run in the server's request, as its other end hooks do."""
    from pbsplug import PluginInfo, hookimpl

    class Seen:
        plugin_info = PluginInfo(events=("execjob_abort", "execjob_end"))

        @hookimpl
        def execjob_abort(self, event):
            with open(seen, "a") as out:
                out.write("execjob_abort\n")

        @hookimpl
        def execjob_end(self, event):
            with open(seen, "a") as out:
                out.write("execjob_end\n")

    return Seen()


def _prologue_held_in_a_work_folder(register_plugin) -> tuple[Path, Path]:
    """`_prologue_held` in a new work folder off the tmpfs, open to the hook's user: the
    folder and its ``seen``."""
    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))
    work.chmod(0o777)
    return work, _prologue_held(work, register_plugin)


def _in_its_prologue(eng) -> tuple[object, str]:
    """root's caller and a job submitted by root, once its held prologue chain runs."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    from .test_poll import poll_until

    root = Caller(0, ROLE_MANAGER)
    job_id = eng.req_submit(root, {"Job_Name": "slow"}, "true\n")
    poll_until(eng, lambda: job_id in eng.chains, "the prologue chain to start")
    return root, job_id


def _prologue_held(work: Path, register_plugin) -> Path:
    """A pbsuser execjob_prologue hook that waits for ``work/go``, and root's execjob_abort
    and execjob_end hooks that note their event in ``work/seen`` (returned)."""
    from pbsplug import PluginInfo, hookimpl

    go, seen = work / "go", work / "seen"

    class Held:
        plugin_info = PluginInfo(events=("execjob_prologue",))

        @hookimpl
        def execjob_prologue(self, event):
            while not go.exists():
                time.sleep(0.05)

    register_plugin(Held(), "slow", user="pbsuser", alarm=600)
    register_plugin(_noting_ends(seen), "seen")
    return seen


def _logged(eng, monkeypatch) -> list[str]:
    """The messages `eng` logs from now on, whether its log file takes them or not (a full
    disk): the server's own log, read as it is called."""
    said: list[str] = []
    real = eng.log

    class Recorded:
        def __getattr__(self, name):
            return getattr(real, name)

        def __call__(self, kind, obj_type, name, message):
            said.append(f"{name};{message}")
            real(kind, obj_type, name, message)

    monkeypatch.setattr(eng, "log", Recorded())
    return said


def test_a_deletion_written_whose_end_was_not_writes_no_second_d_record(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """A qdel in a job's pbsuser prologue whose deletion was written (its D record, its
    execjob_abort) but whose end then was not (the disk full again): the job stayed R with
    no launch, and the next qdel recorded the deletion again (a second 'Job to be deleted'
    and a second D record) and ran execjob_abort again. It finishes the job now, its end
    hooks run, as the deletion written already left it: one D, one execjob_abort."""
    from pbsplug.engine.server import Engine


    work, seen = _prologue_held_in_a_work_folder(register_plugin)
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root, job_id = _in_its_prologue(eng)
        real = _full_after(monkeypatch, small_home, eng, eng, "_record_deletion")
        [first] = eng.req_delete(root, [job_id])
        assert first["error"]["code"] == PBSE_SYSTEM, first
        attrs = eng.store.job(job_id)
        assert (attrs["job_state"], attrs["substate"]) == ("R", 41), attrs
        monkeypatch.setattr(eng, "_record_deletion", real)
        (small_home / "fill").unlink()  # room again
        said = _logged(eng, monkeypatch)
        [second] = eng.req_delete(root, [job_id])
        assert second.get("error") is None, second
        attrs = eng.store.job(job_id)
        assert attrs["job_state"] == "F", attrs
        assert attrs["comment"].startswith("Job deleted at request of root@"), attrs
        assert not [s for s in said if "Job to be deleted" in s], said
        records = "".join(p.read_text() for p in eng.home.accounting.iterdir())
        assert records.count(f";D;{job_id};") == 1, records
        assert records.count(f";E;{job_id};") == 1, records
        ran = seen.read_text().split()
        assert ran.count("execjob_abort") == 1, ran
        assert ran[-1] == "execjob_end", ran
    finally:
        (work / "go").touch()
        eng.runner.reap()
        eng.close()
        shutil.rmtree(work, ignore_errors=True)


def test_a_refused_qdel_does_not_log_the_deletion(small_home, pbsplug_plugins,
                                                  register_plugin, monkeypatch):
    """'Job to be deleted at request of <user>@<host>' was logged before the deletion was
    written: a qdel refused for a full disk logged it too, and again at the next try. It is
    logged once the deletion is written: once, for the qdel that deleted the job."""
    from pbsplug.engine.server import Engine


    work, seen = _prologue_held_in_a_work_folder(register_plugin)
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root, job_id = _in_its_prologue(eng)
        _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
        said = _logged(eng, monkeypatch)
        [first] = eng.req_delete(root, [job_id])
        assert first["error"]["code"] == PBSE_SYSTEM, first
        assert not [s for s in said if "Job to be deleted" in s], said
        (small_home / "fill").unlink()  # room again
        [second] = eng.req_delete(root, [job_id])
        assert second.get("error") is None, second
        assert [s for s in said if "Job to be deleted" in s] == [
            f"{job_id};Job to be deleted at request of root@{eng.host}"], said
        assert eng.store.job(job_id)["job_state"] == "F"
        assert seen.read_text().split() == ["execjob_abort", "execjob_end"]
    finally:
        (work / "go").touch()
        eng.runner.reap()
        eng.close()
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.parametrize("free, made", [(0, "0.nodes"), (2, "pbs.0.")])
def test_a_start_short_of_inodes_is_a_failed_start_and_runs_once_there_are(
        few_inodes, pbsplug_plugins, monkeypatch, free, made):
    """No inode left under the server's home (ENOSPC at a file's or folder's creation, a
    transient shortage, as a full disk): the job's nodefile in jobs/ (`free` 0) could not
    be made, and the job ended F ('Job could not start', Exit_status -1) as a job that
    can never start does. It is a failed start now, requeued (run_count counts the try),
    and runs once there are inodes. Its TMPDIR (`free` 2: its nodefile's and script's
    made) is PBS's rule: the MoM aborts a job whose TMPDIR it cannot make, whatever the
    error (JOB_EXEC_FAIL1), and so does the server."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .test_poll import poll_until

    eng = Engine(Home(few_inodes), plugins=pbsplug_plugins)
    taken: list[Path] = []
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id = eng.req_submit(root, {"Hold_Types": "u", "Rerunable": False}, "true\n")
        while True:  # every inode taken
            try:
                (few_inodes / f"f{len(taken)}").touch()
            except OSError:
                break
            taken.append(few_inodes / f"f{len(taken)}")
        for path in taken[len(taken) - free:]:
            path.unlink()
        del taken[len(taken) - free:]
        said = _logged(eng, monkeypatch)
        eng.req_release(root, [job_id])
        poll_until(eng, lambda: any("start" in s for s in said if s.startswith(job_id)),
                   "the job's start to fail")
        failed = [s for s in said if s.startswith(f"{job_id};")]
        if made.startswith("pbs."):  # (its TMPDIR: the job's end)
            assert [s for s in failed if s.startswith(
                f"{job_id};could not start: [Errno 28] No space left on device")], failed
            poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the end")
            attrs = eng.store.job(job_id)
            assert (attrs["Exit_status"], attrs["run_count"]) == (-1, 1), attrs
            assert attrs["comment"].startswith("Job could not start"), attrs
            return
        assert not [s for s in failed if "could not start" in s], failed
        assert [s for s in failed if s.startswith(
            f"{job_id};job failed to start: its files could not be made: No space left on "
            f"device ({made}")], failed
        for path in taken:  # inodes again
            path.unlink()
        taken.clear()
        poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
        attrs = eng.store.job(job_id)
        assert attrs["Exit_status"] == 0, attrs.get("comment")
        assert attrs["run_count"] >= 2, attrs
    finally:
        for path in taken:
            path.unlink(missing_ok=True)
        eng.runner.reap()
        eng.close()


def test_a_failed_start_whose_requeue_cannot_be_written_is_requeued_once_there_is_room(
        small_home, pbsplug_plugins, monkeypatch):
    """The disk fills as a job starts: its R state is written, then its nodefile cannot be
    (ENOSPC), a failed start; its requeue's write failed too ('database or disk is full'),
    which failed the scheduling cycle, lost the 'job starts paused' line, and left the job R
    with no launch, its cpus held, until a qdel or a restart. The requeue is kept and tried
    again at later polls now (after a one-row write finds room: the R record of the run is
    written once): once there is room the job is requeued and runs."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .test_poll import poll_until

    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id = eng.req_submit(root, {"Hold_Types": "u"}, "true\n")
        _full_first(monkeypatch, small_home, eng, "_job_command")  # (as another takes it)
        said = _logged(eng, monkeypatch)
        eng.req_release(root, [job_id])
        poll_until(eng, lambda: any("job failed to start" in s for s in said),
                   "the job's start to fail")
        for _ in range(3):  # (polls on the full disk: the requeue waits)
            eng.poll()
        attrs = eng.store.job(job_id)
        assert attrs["job_state"] == "R", attrs
        assert [s for s in said if "job starts paused for" in s], said
        (small_home / "fill").unlink()  # room again
        poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
        attrs = eng.store.job(job_id)
        assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs
        assert not [s for s in said if "scheduling cycle failed" in s], said
        assert len([s for s in said if s.startswith(f"{job_id};Job requeued: it failed "
                                                    "to start")]) == 1, said
        records = "".join(p.read_text() for p in eng.home.accounting.iterdir())
        assert records.count(f";R;{job_id};") == 1, records
        assert records.count(f";S;{job_id};") == 2, records
    finally:
        eng.runner.reap()
        eng.close()


def test_a_refused_launch_whose_requeue_cannot_be_written_is_requeued_once_there_is_room(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """As a failed start's: an execjob_launch hook's job.rerun() and reject requeue the job
    (its execjob_abort run), and that requeue's write failing on a full disk failed the cycle
    and left the job R with no launch. It is tried again at later polls, execjob_abort not
    run again."""
    from pbsplug import PluginInfo, hookimpl
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .test_poll import poll_until

    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # off the tmpfs
    once, seen = work / "once", work / "seen"

    class Refuses:
        plugin_info = PluginInfo(events=("execjob_launch", "execjob_abort"))

        @hookimpl
        def execjob_launch(self, event):
            if not once.exists():
                once.touch()
                event.job.rerun()
                event.reject("not now")

        @hookimpl
        def execjob_abort(self, event):
            with open(seen, "a") as out:
                out.write("execjob_abort\n")

    register_plugin(Refuses(), "refuses")
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id = eng.req_submit(root, {"Hold_Types": "u"}, "true\n")
        _full_first(monkeypatch, small_home, eng, "_refused_start")  # (as another takes it)
        said = _logged(eng, monkeypatch)
        eng.req_release(root, [job_id])
        poll_until(eng, lambda: any("execjob_launch hook refused" in s for s in said),
                   "the job's launch to be refused")
        for _ in range(3):  # (polls on the full disk: the requeue waits)
            eng.poll()
        assert eng.store.job(job_id)["job_state"] == "R"
        (small_home / "fill").unlink()  # room again
        poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
        attrs = eng.store.job(job_id)
        assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs
        assert not [s for s in said if "scheduling cycle failed" in s], said
        records = "".join(p.read_text() for p in eng.home.accounting.iterdir())
        assert records.count(f";R;{job_id};") == 1, records
        assert seen.read_text() == "execjob_abort\n"
    finally:
        eng.runner.reap()
        eng.close()
        shutil.rmtree(work, ignore_errors=True)


class _LaunchRequeues:
    """An execjob_launch hook whose first call requeues its job (`job.rerun()`, a reject):
    its execjob_abort runs, then its requeue."""

    def __init__(self, once: Path) -> None:
        self.once = once

    plugin_info = PluginInfo(events=("execjob_launch",))

    @hookimpl
    def execjob_launch(self, event):
        if not self.once.exists():
            self.once.touch()
            event.job.rerun()
            event.reject("not now")


@pytest.mark.parametrize("refused_by", ["launch_hook", "failed_start"])
def test_a_qdel_of_a_start_whose_requeue_waits_for_room_runs_no_second_execjob_abort(
        small_home, pbsplug_plugins, register_plugin, monkeypatch, refused_by):
    """A start an execjob_launch hook requeued, or that failed (its nodefile not made),
    ran execjob_abort, then its requeue could not be written (a full disk): the job stayed
    R with no launch. A qdel of it ran execjob_abort again (`_abort_deleted`), as for a job
    stopped in its prologue. It runs once a run now (`aborts_run`), then the end hooks,
    one D record."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records
    from .test_poll import poll_until

    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # off the tmpfs
    seen = work / "seen"
    if refused_by == "launch_hook":
        register_plugin(_LaunchRequeues(work / "once"), "requeues")
    register_plugin(_noting_ends(seen), "seen")
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id = eng.req_submit(root, {"Hold_Types": "u"}, "true\n")
        _full_first(monkeypatch, small_home, eng, "_refused_start" if refused_by ==
                    "launch_hook" else "_job_command")  # (as another process takes it)
        eng.req_release(root, [job_id])
        poll_until(eng, lambda: job_id in eng.unwritten, "the requeue to be kept")
        assert seen.read_text().split() == ["execjob_abort"]
        (small_home / "fill").unlink()  # room again, the kept requeue not tried yet
        [deleted] = eng.req_delete(root, [job_id])
        assert deleted.get("error") is None, deleted
        assert eng.store.job(job_id)["job_state"] == "F"
        assert seen.read_text().split() == ["execjob_abort", "execjob_end"]
        assert accounting_records(eng).count(f";D;{job_id};") == 1
        assert job_id not in eng.aborts_run
    finally:
        eng.runner.reap()
        eng.close()
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.parametrize(("full_after", "aborts"), [("_abort_deleted", 1),
                                                     ("_record_deletion", 2)])
def test_a_deletion_written_whose_end_was_not_ends_deleted_at_a_restart(
        small_home, pbsplug_plugins, register_plugin, monkeypatch, full_after, aborts):
    """A qdel in a job's pbsuser prologue whose deletion was written (its D record, its
    execjob_abort) but whose end then was not (the disk full again), and the server closed
    before another qdel: its next start found the job R with no launch and requeued it as
    one that had not started, and a job its user deleted ran again. It ends deleted at the
    start now, as the next qdel would end it: its end hooks run, one D, one execjob_abort;
    or two, the disk full before the abort's mark was cleared: the start cannot know it
    ran, and runs it again (abort hooks are cleanup)."""
    from pbsplug.engine.server import Engine


    work, seen = _prologue_held_in_a_work_folder(register_plugin)
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    again = None
    try:
        root, job_id = _in_its_prologue(eng)
        _full_after(monkeypatch, small_home, eng, eng, full_after)
        [first] = eng.req_delete(root, [job_id])
        assert first["error"]["code"] == PBSE_SYSTEM, first
        assert eng.store.job(job_id)["job_state"] == "R"
        eng.runner.reap()
        eng.close()
        (small_home / "fill").unlink()  # room again
        again = Engine(Home(small_home), plugins=pbsplug_plugins)
        attrs = again.store.job(job_id)
        assert attrs["job_state"] == "F", attrs
        assert attrs["comment"] == f"Job deleted at request of root@{again.host}", attrs
        assert attrs["run_count"] == 1, attrs
        records = [line.split(";")[1] for line in "".join(
            p.read_text() for p in sorted(again.home.accounting.iterdir())).splitlines()
            if f";{job_id};" in line]
        assert records == ["Q", "S", "D", "E"], records
        ran = seen.read_text().split()  # (its end hooks again, as the next qdel runs them)
        assert ran.count("execjob_abort") == aborts, ran
        assert ran[-1] == "execjob_end", ran
    finally:
        (work / "go").touch()
        _closed(eng, again)
        shutil.rmtree(work, ignore_errors=True)


class _Killed(BaseException):
    """The server killed (SIGKILL, a crash, a power cut) at that point: nothing of the
    request after it runs, nothing catches it."""


def _killed_before_the_abort(monkeypatch, eng):
    """`eng` killed as its next execjob_abort is about to fire: what was written stands.
    Returns the real `_event`, to put back."""
    real = eng._event

    def killed_at_the_abort(event, *args, **kwargs):
        if event == "execjob_abort":
            raise _Killed
        return real(event, *args, **kwargs)

    monkeypatch.setattr(eng, "_event", killed_at_the_abort)
    return real


@pytest.mark.parametrize("then", ["restart", "qdel"])
def test_a_server_killed_between_a_prologue_deletion_and_its_abort_runs_the_abort(
        small_home, pbsplug_plugins, register_plugin, monkeypatch, then):
    """A server killed between a prologue qdel's deletion (its mark, its D record) and the
    job's execjob_abort: the mark was taken as the abort run, so its next start (or the
    next qdel) ended the job with no execjob_abort, and what its execjob_begin hooks made
    on the host stayed. The deletion's write now says the abort is to come: it runs once,
    and the job ends deleted, one D record, one 'Job to be deleted'."""
    from pbsplug.engine.server import Engine


    work, seen = _prologue_held_in_a_work_folder(register_plugin)
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    again = None
    try:
        root, job_id = _in_its_prologue(eng)
        real = _killed_before_the_abort(monkeypatch, eng)
        with pytest.raises(_Killed):
            eng.req_delete(root, [job_id])
        assert not seen.exists(), seen.read_text()
        if then == "restart":
            eng.runner.reap()
            eng.close()
            again = Engine(Home(small_home), plugins=pbsplug_plugins)
        else:
            monkeypatch.setattr(eng, "_event", real)
            again, eng = eng, None
            said = _logged(again, monkeypatch)
            [answer] = again.req_delete(root, [job_id])
            assert answer.get("error") is None, answer
            assert not [s for s in said if "Job to be deleted" in s], said
        attrs = again.store.job(job_id)
        assert attrs["job_state"] == "F", attrs
        assert attrs["comment"] == f"Job deleted at request of root@{again.host}", attrs
        records = [line.split(";")[1] for line in "".join(
            p.read_text() for p in sorted(again.home.accounting.iterdir())).splitlines()
            if f";{job_id};" in line]
        assert records == ["Q", "S", "D", "E"], records
        assert seen.read_text().split() == ["execjob_abort", "execjob_end"]
    finally:
        (work / "go").touch()
        _closed(eng, again)
        shutil.rmtree(work, ignore_errors=True)


def test_a_qdel_of_a_running_job_refused_for_a_full_disk_logs_and_writes_nothing(
        small_home, pbsplug_plugins, monkeypatch):
    """A qdel of a running job logged 'Job to be deleted' and wrote its D record before it
    wrote the kill: on a full disk that write failed and the qdel was refused (15010), the
    job signalled all the same, and the next qdel logged and wrote them again, two D
    records for one deletion. The deletion and its kill are written first now: a refused
    qdel logs, writes and signals nothing, and the one that deletes the job does it once."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .test_poll import poll_until

    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id = eng.req_submit(root, {}, "exec sleep 300\n")
        poll_until(eng, lambda: job_id in eng.launches, "the job to run")
        _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
        said = _logged(eng, monkeypatch)
        written: list[str] = []
        real = eng.accounting.deleted
        monkeypatch.setattr(eng.accounting, "deleted", lambda job, who: (
            written.append(job), real(job, who)))
        [first] = eng.req_delete(root, [job_id])
        assert first["error"]["code"] == PBSE_SYSTEM, first
        assert not [s for s in said if "Job to be deleted" in s], said
        assert written == [], "a refused qdel wrote a D record"
        assert job_id not in eng.kills, "a refused qdel killed the job"
        (small_home / "fill").unlink()  # room again
        [second] = eng.req_delete(root, [job_id])
        assert second.get("error") is None, second
        poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
        attrs = eng.store.job(job_id)
        assert attrs["comment"].startswith("Job deleted at request of root@"), attrs
        assert [s for s in said if "Job to be deleted" in s] == [
            f"{job_id};Job to be deleted at request of root@{eng.host}"], said
        assert written == [job_id]
        records = "".join(p.read_text() for p in eng.home.accounting.iterdir())
        assert records.count(f";D;{job_id};") == 1, records
    finally:
        eng.runner.reap()
        eng.close()


def test_an_array_qdel_refused_for_a_full_disk_logs_and_writes_nothing(
        small_home, pbsplug_plugins, monkeypatch):
    """``qdel 12[]`` logged 'Job to be deleted' and wrote the array's D record before it
    wrote the array's deletion: refused for a full disk (15010), the next qdel logged and
    wrote them again. They come once the deletion is written now."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        array = eng.req_submit(root, {"Hold_Types": "u", "array_indices_submitted": "1-3"},
                               "true\n")
        _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
        said = _logged(eng, monkeypatch)
        written: list[str] = []
        real = eng.accounting.deleted
        monkeypatch.setattr(eng.accounting, "deleted", lambda job, who: (
            written.append(job), real(job, who)))
        [first] = eng.req_delete(root, [array])
        assert first["error"]["code"] == PBSE_SYSTEM, first
        assert not [s for s in said if "Job to be deleted" in s], said
        assert written == [], "a refused qdel wrote a D record"
        (small_home / "fill").unlink()  # room again
        [second] = eng.req_delete(root, [array])
        assert second.get("error") is None, second
        assert eng.store.job(array)["job_state"] == "F"
        assert [s for s in said if "Job to be deleted" in s] == [
            f"{array};Job to be deleted at request of root@{eng.host}"], said
        assert written == [array]
    finally:
        eng.runner.reap()
        eng.close()


@pytest.mark.parametrize("purge", [False, True], ids=["qdel", "qdel-x"])
def test_an_array_qdel_refused_after_its_deletion_is_written_finishes_when_tried_again(
        small_home, pbsplug_plugins, monkeypatch, purge):
    """``qdel [-x] 12[]`` writes the array's deletion, then logs and writes its D, then
    kills its running subjobs: the disk full after the deletion's write refused the qdel
    (15010) with the array's D written and its running subjob left running (with -x, the
    -x's own write failed before any subjob was reached). Tried again once there is room,
    the qdel wrote the array's D again. Now the -x is in the deletion's write, and the
    retry kills what was left, writing no second D for the array nor logging it again."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records, poll_until

    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        array = eng.req_submit(root, {"array_indices_submitted": "1-2"}, "exec sleep 300\n")
        sub = array.replace("[]", "[1]")
        poll_until(eng, lambda: sub in eng.launches, "subjob 1 running")
        real = eng.arrays.delete

        def full_after(*args, **kwargs):
            subs = real(*args, **kwargs)
            _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
            return subs

        said = _logged(eng, monkeypatch)
        monkeypatch.setattr(eng.arrays, "delete", full_after)
        [first] = eng.req_delete(root, [array], purge=purge)
        assert first["error"]["code"] == PBSE_SYSTEM, first
        assert sub in eng.launches and sub not in eng.kills, "a refused qdel killed"
        monkeypatch.setattr(eng.arrays, "delete", real)
        (small_home / "fill").unlink()  # room again
        running = [job for job, attrs in eng.store.subjobs(array).items()
                   if attrs.get("job_state") == "R"]
        assert sub in running, running
        [second] = eng.req_delete(root, [array], purge=purge)
        assert second.get("error") is None, second
        assert all(job in eng.kills for job in running), (running, eng.kills)
        if purge:  # (its history gone once it is over)
            poll_until(eng, lambda: eng.store.job(array) is None, "the array purged")
        else:
            poll_until(eng, lambda: eng.store.job(array)["job_state"] == "F",
                       "the array over")
        records = accounting_records(eng)
        assert records.count(f";D;{array};") == 1, records
        for job in running:
            assert records.count(f";D;{job};") == 1, (job, records)
            assert records.count(f";E;{job};") == 1, (job, records)
        assert [s for s in said if s.startswith(f"{array};Job to be deleted")] == [
            f"{array};Job to be deleted at request of root@{eng.host}"], said
    finally:
        eng.runner.reap()
        eng.close()


def test_a_reservation_end_that_failed_half_way_fires_resv_end_and_writes_its_record_once(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """A reservation's end fires its resv_end hooks, writes its record, then drops its jobs
    and stores its end: a job's drop that could not be written (the disk full) left the
    reservation RUNNING, and the next poll's end fired resv_end and wrote the reservation's
    k record again. Tried again once there is room, it does the rest only: one resv_end,
    one k, its job's D once."""
    from pbsplug import PluginInfo, hookimpl
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records, poll_until

    class EndSeen:
        plugin_info = PluginInfo(events=("resv_end",))
        ran: list[str] = []

        @hookimpl
        def resv_end(self, event):
            self.ran.append(event.resv.name)

    seen = EndSeen()
    register_plugin(seen, "endseen", isolation="inprocess", alarm=10)
    now = [time.time()]
    eng = Engine(Home(small_home), plugins=pbsplug_plugins, clock=lambda: now[0])
    try:
        root = Caller(0, ROLE_MANAGER)
        start = int(now[0]) + 60
        resv = eng.req_resv_submit(root, {"Resource_List": {}, "reserve_start": start,
                                          "reserve_end": start + 60})["id"]
        poll_until(eng, lambda: eng.store.get("resv", resv)["reserve_state"] ==
                   "RESV_CONFIRMED", "the reservation's confirmation")
        job_id = eng.req_submit(root, {"queue": resv.split(".")[0], "Hold_Types": "u"},
                                "true\n")
        now[0] = start + 1
        poll_until(eng, lambda: eng.store.get("resv", resv)["reserve_state"] ==
                   "RESV_RUNNING", "the reservation's beginning")
        real = _full_after(monkeypatch, small_home, eng, eng.accounting, "resv_finished")
        now[0] = start + 61
        with pytest.raises(PbsError) as failed:
            eng.resvs.poll(now[0])
        assert failed.value.code == PBSE_SYSTEM, failed.value
        assert eng.store.get("resv", resv)["reserve_state"] == "RESV_RUNNING"
        assert eng.store.job(job_id)["job_state"] == "H"
        monkeypatch.setattr(eng.accounting, "resv_finished", real)
        (small_home / "fill").unlink()  # room again
        eng.resvs.poll(now[0])
        assert eng.store.get("resv", resv) is None
        assert eng.store.job(job_id)["job_state"] == "F"
        assert seen.ran == [resv]
        records = accounting_records(eng)
        assert records.count(f";k;{resv};") == 1, records
        assert records.count(f";D;{job_id};") == 1, records
    finally:
        eng.runner.reap()
        eng.close()


def _resv_end_seen(register_plugin) -> list[str]:
    """The reservations a resv_end hook (in process) is fired for, in order."""
    from pbsplug import PluginInfo, hookimpl

    class EndSeen:
        plugin_info = PluginInfo(events=("resv_end",))
        ran: list[str] = []

        @hookimpl
        def resv_end(self, event):
            self.ran.append(event.resv.name)

    seen = EndSeen()
    register_plugin(seen, "endseen", isolation="inprocess", alarm=10)
    return seen.ran


def _killed_then_full(eng, small_home, root, monkeypatch) -> list[str]:
    """`eng._kill` fills the disk after its first kill (as another process takes the room):
    the jobs it was called for, in order."""
    calls: list[str] = []
    real = eng._kill

    def kill_then_full(job_id, *args, **kwargs):
        calls.append(job_id)
        real(job_id, *args, **kwargs)
        if len(calls) == 1:
            _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))

    monkeypatch.setattr(eng, "_kill", kill_then_full)
    return calls


def test_a_reservation_end_tried_again_writes_its_running_jobs_d_and_kills_it_once(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """A reservation's end writes a running job's D record, then kills it: a write after
    that refused (the disk full) left the reservation RUNNING, and the end tried again
    wrote the job's D again and killed it again, two D records for one deletion. Tried
    again, it does the rest only: one resv_end, one k, one D, one kill."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records, poll_until

    ran = _resv_end_seen(register_plugin)
    now = [time.time()]
    eng = Engine(Home(small_home), plugins=pbsplug_plugins, clock=lambda: now[0])
    try:
        root = Caller(0, ROLE_MANAGER)
        start = int(now[0]) + 60
        resv = eng.req_resv_submit(root, {"Resource_List": {"select": "1:ncpus=1"},
                                          "reserve_start": start, "reserve_end": start + 60})["id"]
        poll_until(eng, lambda: eng.store.get("resv", resv)["reserve_state"] ==
                   "RESV_CONFIRMED", "the reservation's confirmation")
        job_id = eng.req_submit(root, {"queue": resv.split(".")[0]}, "exec sleep 300\n")
        now[0] = start + 1
        poll_until(eng, lambda: job_id in eng.launches, "the job to run")
        kills = _killed_then_full(eng, small_home, root, monkeypatch)
        now[0] = start + 61
        with pytest.raises(PbsError) as failed:
            eng.resvs.poll(now[0])
        assert failed.value.code == PBSE_SYSTEM, failed.value
        assert eng.store.get("resv", resv)["reserve_state"] == "RESV_RUNNING"
        assert kills == [job_id]
        (small_home / "fill").unlink()  # room again
        eng.resvs.poll(now[0])
        assert eng.store.get("resv", resv)["reserve_state"] == "RESV_BEING_DELETED"
        assert ran == [resv]
        records = accounting_records(eng)
        assert records.count(f";k;{resv};") == 1, records
        assert records.count(f";D;{job_id};") == 1, records
        assert kills == [job_id], "the end tried again killed the job again"
        poll_until(eng, lambda: eng.store.get("resv", resv) is None, "the reservation's end")
        assert eng.store.job(job_id)["comment"] == \
            f"Job deleted: reservation {resv} reservation period ended"
    finally:
        eng.runner.reap()
        eng.close()


def test_an_occurrence_end_tried_again_fires_resv_end_and_kills_its_jobs_once(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """The end of one occurrence of a standing reservation fires resv_end, kills its
    running jobs, then stores the next occurrence: a write after its hooks refused (the
    disk full) left the occurrence RUNNING, and the next poll fired resv_end again and
    killed the jobs again. Tried again, it does the rest only, as a reservation's end."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import poll_until

    ran = _resv_end_seen(register_plugin)
    now = [time.time()]
    eng = Engine(Home(small_home), plugins=pbsplug_plugins, clock=lambda: now[0])
    try:
        root = Caller(0, ROLE_MANAGER)
        start = int(now[0]) + 60
        resv = eng.req_resv_submit(root, {
            "reserve_start": start, "reserve_duration": 6,
            "reserve_rrule": "FREQ=MINUTELY;COUNT=2", "Variable_List": {"PBS_TZID": "UTC"},
            "Resource_List": {"select": "1:ncpus=1"}})["id"]
        poll_until(eng, lambda: eng.store.get("resv", resv)["reserve_state"] ==
                   "RESV_CONFIRMED", "the reservation's confirmation")
        job_id = eng.req_submit(root, {"queue": resv.split(".")[0]}, "exec sleep 300\n")
        now[0] = start + 1
        poll_until(eng, lambda: job_id in eng.launches, "the job to run")
        kills = _killed_then_full(eng, small_home, root, monkeypatch)
        now[0] = start + 7  # the first occurrence is over
        with pytest.raises(PbsError) as failed:
            eng.resvs.poll(now[0])
        assert failed.value.code == PBSE_SYSTEM, failed.value
        got = eng.store.get("resv", resv)
        assert (got["reserve_state"], got["reserve_index"]) == ("RESV_RUNNING", 1)
        assert kills == [job_id]
        (small_home / "fill").unlink()  # room again
        eng.resvs.poll(now[0])
        got = eng.store.get("resv", resv)
        assert (got["reserve_state"], got["reserve_index"]) == ("RESV_CONFIRMED", 2)
        assert ran == [resv], "the occurrence's end tried again fired resv_end again"
        assert kills == [job_id], "the occurrence's end tried again killed the job again"
        assert not eng.resvs.ending
    finally:
        eng.runner.reap()
        eng.close()


@pytest.mark.parametrize("occurrence", [False, True], ids=["end", "occurrence"])
def test_a_reservation_end_whose_kill_cannot_be_written_signals_nothing(
        small_home, pbsplug_plugins, monkeypatch, occurrence):
    """A reservation's end (or an occurrence's) sent a running job its SIGTERM, then wrote
    its kill: on a full disk that write failed, and a job that ended of the SIGTERM before
    the end was tried again ended with its D record but not the reservation's end reason.
    The kill is written first now, as a qdel's: the end refused signals nothing, the job
    runs on, and tried again once there is room it ends with the reservation's end
    reason: one k, one D (an occurrence's end writes neither), one E."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records, poll_until
    from .owner_hooks import gone

    now = [time.time()]
    eng = Engine(Home(small_home), plugins=pbsplug_plugins, clock=lambda: now[0])
    try:
        root = Caller(0, ROLE_MANAGER)
        start = int(now[0]) + 60
        window = {"reserve_duration": 6, "reserve_rrule": "FREQ=MINUTELY;COUNT=2",
                  "Variable_List": {"PBS_TZID": "UTC"}} if occurrence else \
            {"reserve_end": start + 60}
        resv = eng.req_resv_submit(root, {"Resource_List": {"select": "1:ncpus=1"},
                                          "reserve_start": start, **window})["id"]
        poll_until(eng, lambda: eng.store.get("resv", resv)["reserve_state"] ==
                   "RESV_CONFIRMED", "the reservation's confirmation")
        job_id = eng.req_submit(root, {"queue": resv.split(".")[0]}, "exec sleep 300\n")
        now[0] = start + 1
        poll_until(eng, lambda: job_id in eng.launches, "the job to run")
        pid = until(eng.launches[job_id].resolve, timeout=PATIENCE,
                    what="the job's process group to be recorded")
        # (the disk full right after what an end does before its kill: its D, or its hooks)
        owner, name = (eng.resvs, "_ended_once") if occurrence else (eng.accounting, "deleted")
        real = _full_after(monkeypatch, small_home, eng, owner, name)
        now[0] = start + (7 if occurrence else 61)
        with pytest.raises(PbsError) as failed:
            eng.resvs.poll(now[0])
        assert failed.value.code == PBSE_SYSTEM, failed.value
        assert job_id not in eng.kills, "the job was signalled before its kill was written"
        assert not gone(pid), "the job was signalled before its kill was written"
        monkeypatch.setattr(owner, name, real)
        (small_home / "fill").unlink()  # room again
        poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
        why = "occurrence 1 ended" if occurrence else "reservation period ended"
        assert eng.store.job(job_id)["comment"] == f"Job deleted: reservation {resv} {why}"
        records = accounting_records(eng)
        assert [records.count(f";{kind};{resv};") for kind in "kK"] == \
            [0 if occurrence else 1, 0], records
        assert [records.count(f";{kind};{job_id};") for kind in "DE"] == \
            [0 if occurrence else 1, 1], records
    finally:
        eng.runner.reap()
        eng.close()


def _resv_hooks_seen(register_plugin) -> list[tuple[str, str]]:
    """The resv_begin and resv_end hooks (in process) fired, in order: (event, reservation)."""
    from pbsplug import PluginInfo, hookimpl

    class Seen:
        plugin_info = PluginInfo(events=("resv_begin", "resv_end"))
        ran: list[tuple[str, str]] = []

        @hookimpl
        def resv_begin(self, event):
            self.ran.append(("begin", event.resv.name))

        @hookimpl
        def resv_end(self, event):
            self.ran.append(("end", event.resv.name))

    seen = Seen()
    register_plugin(seen, "resvseen", isolation="inprocess", alarm=10)
    return seen.ran


def test_a_refused_rdel_whose_hooks_and_record_were_done_is_finished_by_the_poll(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """A pbs_rdel of a confirmed reservation fired resv_end and wrote its k record, then a
    write was refused (the disk full): the rdel was refused, the reservation stayed
    confirmed, and nothing finished its end: it began, ran its window, and its real end
    fired no resv_end and wrote no k record (the half-done end found in `ending`). The
    server finishes such an end at its next poll once there is room, ahead of its window:
    one resv_end and one k, and no window run."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records, poll_until

    ran = _resv_hooks_seen(register_plugin)
    now = [time.time()]
    eng = Engine(Home(small_home), plugins=pbsplug_plugins, clock=lambda: now[0])
    try:
        root = Caller(0, ROLE_MANAGER)
        start = int(now[0]) + 60
        resv = eng.req_resv_submit(root, {"Resource_List": {}, "reserve_start": start,
                                          "reserve_end": start + 60})["id"]
        poll_until(eng, lambda: eng.store.get("resv", resv)["reserve_state"] ==
                   "RESV_CONFIRMED", "the reservation's confirmation")
        job_id = eng.req_submit(root, {"queue": resv.split(".")[0], "Hold_Types": "u"},
                                "true\n")
        real = _full_after(monkeypatch, small_home, eng, eng.accounting, "resv_deleted")
        [answer] = eng.req_resv_delete(root, [resv])
        assert answer["error"]["code"] == PBSE_SYSTEM, answer
        assert eng.store.get("resv", resv)["reserve_state"] == "RESV_CONFIRMED"
        monkeypatch.setattr(eng.accounting, "resv_deleted", real)
        (small_home / "fill").unlink()  # room again
        eng.resvs.poll(now[0])  # (ahead of its window)
        assert eng.store.get("resv", resv) is None, "the rdel's end was not finished"
        assert eng.store.job(job_id)["job_state"] == "F"
        assert not eng.resvs.ending
        now[0] = start + 61  # (its window would have run: nothing of it does)
        eng.resvs.poll(now[0])
        assert ran == [("end", resv)], ran
        records = accounting_records(eng)
        assert records.count(f";k;{resv};") == 1, records
        assert records.count(f";D;{job_id};") == 1, records
    finally:
        eng.runner.reap()
        eng.close()


def test_an_end_that_failed_half_way_takes_no_new_window_and_is_finished_by_the_poll(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """A reservation's period end fired resv_end and wrote its k record, then a write was
    refused (the disk full): a pbs_ralter -E before the poll tried it again moved its end
    on, and the window it ran on had no resv_end or record at its end (the half-done end
    found in `ending`). A window of a reservation whose end is under way is refused, as a
    deleted one's: the next poll finishes the end, one resv_end and one k."""
    from pbsplug.engine.errors import PBSE_BADSTATE
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records, poll_until

    ran = _resv_hooks_seen(register_plugin)
    now = [time.time()]
    eng = Engine(Home(small_home), plugins=pbsplug_plugins, clock=lambda: now[0])
    try:
        root = Caller(0, ROLE_MANAGER)
        start = int(now[0]) + 60
        resv = eng.req_resv_submit(root, {"Resource_List": {}, "reserve_start": start,
                                          "reserve_end": start + 60})["id"]
        poll_until(eng, lambda: eng.store.get("resv", resv)["reserve_state"] ==
                   "RESV_CONFIRMED", "the reservation's confirmation")
        now[0] = start + 1
        poll_until(eng, lambda: eng.store.get("resv", resv)["reserve_state"] ==
                   "RESV_RUNNING", "the reservation's beginning")
        real = _full_after(monkeypatch, small_home, eng, eng.accounting, "resv_finished")
        now[0] = start + 61
        with pytest.raises(PbsError) as failed:
            eng.resvs.poll(now[0])
        assert failed.value.code == PBSE_SYSTEM, failed.value
        monkeypatch.setattr(eng.accounting, "resv_finished", real)
        (small_home / "fill").unlink()  # room again
        with pytest.raises(PbsError) as refused:
            eng.req_resv_alter(root, resv, {"reserve_end": start + 600})
        assert refused.value.code == PBSE_BADSTATE, refused.value
        assert eng.req_resv_alter(root, resv, {"Reserve_Name": "late"})["id"] == resv
        eng.resvs.poll(now[0])
        assert eng.store.get("resv", resv) is None
        assert ran == [("begin", resv), ("end", resv)], ran
        records = accounting_records(eng)
        assert records.count(f";k;{resv};") == 1, records
    finally:
        eng.runner.reap()
        eng.close()


def test_a_qdel_x_in_the_prologue_whose_purge_could_not_be_written_still_runs_execjob_abort(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """A qdel -x in a job's pbsuser prologue wrote the deletion's mark and its D record,
    then the -x in a write of its own: on a disk full right after the D, that write
    failed, the qdel was refused with no execjob_abort run, and the next qdel took the
    mark for an abort run: what the job's execjob_begin hooks made stayed. The -x is
    kept in the mark's own write now: execjob_abort runs once, and the job ends."""
    from pbsplug.engine.server import Engine


    work, seen = _prologue_held_in_a_work_folder(register_plugin)
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root, job_id = _in_its_prologue(eng)
        real = _full_after(monkeypatch, small_home, eng, eng.accounting, "deleted")
        [first] = eng.req_delete(root, [job_id], purge=True)
        assert first["error"]["code"] == PBSE_SYSTEM, first
        monkeypatch.setattr(eng.accounting, "deleted", real)
        (small_home / "fill").unlink()  # room again
        [second] = eng.req_delete(root, [job_id], purge=True)
        assert second.get("error") is None, second
        ran = seen.read_text().split()  # (its end hooks again: its end was not written)
        assert ran.count("execjob_abort") == 1 and ran[-1] == "execjob_end", ran
        assert eng.store.job(job_id) is None  # (its -x: its history gone at its end)
    finally:
        (work / "go").touch()
        eng.runner.reap()
        eng.close()
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.parametrize("event, delete", [("execjob_begin", True), ("execjob_prologue", True),
                                           ("execjob_launch", True), ("execjob_launch", False)])
def test_a_start_a_hook_ends_whose_end_cannot_be_written_ends_once_there_is_room(
        small_home, pbsplug_plugins, register_plugin, monkeypatch, event, delete):
    """A start hook's job.delete() (or a plain execjob_launch reject) ends the job: that
    end's write failing on a full disk failed the cycle and left the job R with no launch,
    its cpus held. It is kept and written at a later poll, once there is room: one E
    record (an execjob_begin's job never ran: one A, no S), the job's execjob_abort and
    end hooks not run again."""
    from pbsplug import PluginInfo, hookimpl
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .test_poll import poll_until

    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # off the tmpfs
    seen = work / "seen"

    def saw(name):
        with open(seen, "a") as out:
            out.write(f"{name}\n")

    def refuse(self, event):
        if delete:
            event.job.delete()
        event.reject("not this one")

    def execjob_abort(self, event):
        saw("execjob_abort")

    def execjob_end(self, event):
        saw("execjob_end")

    refuse.__name__ = event
    ends = type("Ends", (), {
        "plugin_info": PluginInfo(events=(event, "execjob_abort", "execjob_end")),
        event: hookimpl(refuse), "execjob_abort": hookimpl(execjob_abort),
        "execjob_end": hookimpl(execjob_end)})
    register_plugin(ends(), "ends")
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id = eng.req_submit(root, {"Hold_Types": "u"}, "true\n")
        _full_first(monkeypatch, small_home, eng, "_refused_start")  # (as another takes it)
        said = _logged(eng, monkeypatch)
        eng.req_release(root, [job_id])
        poll_until(eng, lambda: any(f"{event} hook refused" in s for s in said),
                   "the job's start to be refused")
        for _ in range(3):  # (polls on the full disk: the end waits)
            eng.poll()
        assert eng.store.job(job_id)["job_state"] == "R"
        assert [s for s in said if "job end not recorded yet" in s], said
        (small_home / "fill").unlink()  # room again
        poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
        assert not [s for s in said if "scheduling cycle failed" in s], said
        assert [s for s in said if "job end recorded" in s], said
        records = "".join(p.read_text() for p in eng.home.accounting.iterdir())
        kinds = [line.split(";")[1] for line in records.splitlines()
                 if line.split(";")[2] == job_id]
        assert kinds == (["Q", "A"] if event == "execjob_begin" else ["Q", "S", "E"]), records
        assert seen.read_text() == "execjob_abort\nexecjob_end\n"
    finally:
        eng.runner.reap()
        eng.close()
        shutil.rmtree(work, ignore_errors=True)


def test_a_begin_refusal_whose_requeue_was_not_written_is_requeued_with_no_r_at_a_restart(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """A start its execjob_begin hooks refused (no S), its requeue waiting for room (the
    disk full), then the server killed: the restart found it R with no launch and requeued
    it as a run that had begun, an R with no S before it, and lowered its run_count. It is
    requeued with no R (the start's own write marked the run not begun), the refused try
    still counted: Q, then the S and E of the run after the restart, run_count 2."""
    from pbsplug import PluginInfo, hookimpl
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .test_poll import poll_until

    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # off the tmpfs
    refuse = work / "refuse"
    refuse.touch()

    class Refuses:
        plugin_info = PluginInfo(events=("execjob_begin",))

        @hookimpl
        def execjob_begin(self, event):
            if refuse.exists():
                event.reject("not this one")

    register_plugin(Refuses(), "refuses")
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    again = None
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id = eng.req_submit(root, {"Hold_Types": "u"}, "true\n")
        _full_first(monkeypatch, small_home, eng, "_refused_start")  # (as another takes it)
        eng.req_release(root, [job_id])
        poll_until(eng, lambda: job_id in eng.unwritten, "the requeue to be kept")
        assert eng.store.job(job_id)["job_state"] == "R"
        eng.runner.reap()
        eng.close()  # (the server killed: nothing of it runs again)
        monkeypatch.undo()
        refuse.unlink()
        (small_home / "fill").unlink()  # room again
        again = Engine(Home(small_home), plugins=pbsplug_plugins)
        poll_until(again, lambda: again.store.job(job_id)["job_state"] == "F", "its end")
        records = "".join(p.read_text() for p in again.home.accounting.iterdir())
        kinds = [line.split(";")[1] for line in records.splitlines()
                 if line.split(";")[2] == job_id]
        assert kinds == ["Q", "S", "E"], records
        assert again.store.job(job_id)["run_count"] == 2
    finally:
        _closed(eng, again)
        shutil.rmtree(work, ignore_errors=True)


def test_a_start_that_can_never_work_whose_end_cannot_be_written_ends_once_there_is_room(
        small_home, pbsplug_plugins, register_plugin, monkeypatch):
    """A start that can never work (here its TMPDIR cannot be made: tmp/ open to others,
    as a home before tmp/ was closed) ends the job from the scheduling cycle: that end's
    write failing on a full disk failed the cycle ('scheduling cycle failed'), and the job
    was left R with no launch, its cpus held, until a qdel or a restart. It is kept and
    written at a later poll now, once there is room, as a start a hook ends: the cycle
    goes on (the job queued after it starts), one E record, its end hooks run once."""
    from pbsplug import PluginInfo, hookimpl
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .test_poll import poll_until

    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # off the tmpfs
    seen = work / "seen"

    class Seen:
        plugin_info = PluginInfo(events=("execjob_abort", "execjob_end"))

        @hookimpl
        def execjob_abort(self, event):
            with open(seen, "a") as out:
                out.write(f"execjob_abort {event.job.id}\n")

        @hookimpl
        def execjob_end(self, event):
            with open(seen, "a") as out:
                out.write(f"execjob_end {event.job.id}\n")

    register_plugin(Seen(), "seen")
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    tmp = eng.home.tmp
    try:
        root = Caller(0, ROLE_MANAGER)
        never = eng.req_submit(root, {"Hold_Types": "u"}, "true\n")
        after = eng.req_submit(root, {"Hold_Types": "u"}, "true\n")
        real_command, real_end = eng._job_command, eng._could_not_start

        def tmp_open_for_it(job_id, attrs):  # (its TMPDIR's parent is not private then)
            if job_id == never:
                tmp.chmod(0o1777)
            return real_command(job_id, attrs)

        def full_for_its_end(*args, **kwargs):  # (as another process takes the room)
            tmp.chmod(0o700)
            _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
            try:
                return real_end(*args, **kwargs)
            finally:  # (and frees it: the jobs after it start in this cycle)
                (small_home / "fill").unlink()

        monkeypatch.setattr(eng, "_job_command", tmp_open_for_it)
        monkeypatch.setattr(eng, "_could_not_start", full_for_its_end)
        said = _logged(eng, monkeypatch)
        eng.req_release(root, [never, after])
        poll_until(eng, lambda: any(s.startswith(f"{never};could not start") for s in said),
                   "the job's start to fail for good")
        assert [s for s in said if s.startswith(f"{never};job end not recorded yet")], said
        assert eng.store.job(after)["job_state"] in ("R", "E", "F")  # (in the same cycle)
        poll_until(eng, lambda: eng.store.job(after)["job_state"] == "F", "the next job's end")
        poll_until(eng, lambda: eng.store.job(never)["job_state"] == "F", "the job's end")
        assert not [s for s in said if "scheduling cycle failed" in s], said
        assert [s for s in said if s == f"{never};job end recorded"], said
        attrs = eng.store.job(never)
        assert attrs["Exit_status"] == -1, attrs
        assert attrs["comment"].startswith("Job could not start: "), attrs
        assert eng.store.job(after)["Exit_status"] == 0
        records = "".join(p.read_text() for p in eng.home.accounting.iterdir())
        assert records.count(f";E;{never};") == 1, records
        assert seen.read_text().splitlines().count(f"execjob_end {never}") == 1
        assert f"execjob_abort {never}" not in seen.read_text()
    finally:
        tmp.chmod(0o700)
        eng.runner.reap()
        eng.close()
        shutil.rmtree(work, ignore_errors=True)


def _released_to_a_full_end(eng, monkeypatch, small_home) -> tuple[str, object]:
    """A held job released, the disk to be full once its end hooks have run: its id, and
    the real `_end_hooks_from` (to put back for room again)."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    root = Caller(0, ROLE_MANAGER)
    job_id = eng.req_submit(root, {"Hold_Types": "u"}, "true\n")
    real = _full_after(monkeypatch, small_home, eng, eng, "_end_hooks_from")
    eng.req_release(root, [job_id])
    return job_id, real


class _BeginDeletes:
    """An execjob_begin hook that deletes its job (its end hooks run, then its end)."""
    plugin_info = PluginInfo(events=("execjob_begin",))

    @hookimpl
    def execjob_begin(self, event):
        event.job.delete()
        event.reject("not this one")


@pytest.mark.parametrize("ended_by", ["qdel", "hook"])
def test_end_hooks_whose_end_could_not_be_written_do_not_run_again_at_the_next_qdel(
        small_home, pbsplug_plugins, register_plugin, monkeypatch, ended_by):
    """A job's end hooks ran, then its end could not be written (a full disk): a qdel in
    its pbsuser prologue (`ended_by` qdel: refused then, 15010), or a start hook's
    job.delete() (hook: the end kept). The next qdel, once there is room, ran its end hooks
    again (and, after a hook's end, its execjob_abort again, after its end hooks). It ends
    the job as they left it now: each ran once, one D record, one E record (none after a
    begin hook's job.delete(): that start never ran, no S, so the qdel's D is its record,
    as a queued job's qdel)."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .test_poll import poll_until

    work = Path(tempfile.mkdtemp(prefix="pbw", dir="/tmp"))  # off the tmpfs
    work.chmod(0o777)
    if ended_by == "qdel":
        seen = _prologue_held(work, register_plugin)
    else:
        seen = work / "seen"
        register_plugin(_BeginDeletes(), "deletes")
        register_plugin(_noting_ends(seen), "seen")
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id, real = _released_to_a_full_end(eng, monkeypatch, small_home)
        if ended_by == "qdel":
            poll_until(eng, lambda: job_id in eng.chains, "the prologue chain to start")
            [first] = eng.req_delete(root, [job_id])
            assert first["error"]["code"] == PBSE_SYSTEM, first
        else:
            poll_until(eng, lambda: job_id in eng.unwritten, "the job's end to be kept")
        assert seen.read_text().split() == ["execjob_abort", "execjob_end"]
        assert eng.store.job(job_id)["job_state"] == "R"
        monkeypatch.setattr(eng, "_end_hooks_from", real)
        (small_home / "fill").unlink()  # room again
        [second] = eng.req_delete(root, [job_id])
        assert second.get("error") is None, second
        attrs = eng.store.job(job_id)
        assert attrs["job_state"] == "F", attrs
        assert attrs["comment"].startswith("Job deleted at request of root@"), attrs
        assert seen.read_text().split() == ["execjob_abort", "execjob_end"]
        records = "".join(p.read_text() for p in eng.home.accounting.iterdir())
        ends = 1 if ended_by == "qdel" else 0
        assert records.count(f";D;{job_id};") == 1, records
        assert records.count(f";E;{job_id};") == ends, records
        assert records.count(f";S;{job_id};") == ends, records
        eng.poll()  # (the kept end, a hook's: the job ended, nothing is written again)
        assert job_id not in eng.unwritten and job_id not in eng.ends_run
        records = "".join(p.read_text() for p in eng.home.accounting.iterdir())
        assert records.count(f";E;{job_id};") == ends, records
        assert records.count(f";A;{job_id};") == 0, records
    finally:
        (work / "go").touch()
        eng.runner.reap()
        eng.close()
        shutil.rmtree(work, ignore_errors=True)


def _running_on_a_full_disk(eng, small_home, job_attrs: dict,
                            script: str | None = None) -> tuple[str, int]:
    """A job (`script`, else `exec sleep 300`, with `job_attrs`) running under `eng`, then
    the disk full, the database too: its id and process group."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    from .conftest import poll_until

    root = Caller(0, ROLE_MANAGER)
    job_id = eng.req_submit(root, job_attrs, script or "exec sleep 300\n")
    poll_until(eng, lambda: job_id in eng.launches, "the job to run")
    pid = until(eng.launches[job_id].resolve, timeout=PATIENCE,
                what="the job's process group to be recorded")
    _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
    return job_id, pid


def _closed(*engines) -> None:
    """Each engine made (not None) closed, its hooks' processes reaped."""
    for engine in engines:
        if engine is not None:
            engine.runner.reap()
            engine.close()


def _not_killed(eng, job_id: str, pid: int) -> None:
    """Nothing of a kill: no SIGTERM (the job runs on), no SIGKILL due, no end reason."""
    from .owner_hooks import gone

    assert job_id not in eng.kills, "the job was signalled before its kill was written"
    assert not gone(pid), "the job was signalled before its kill was written"
    assert (eng.store.runtime(job_id) or {}).get("end_reason") is None
    assert eng.store.job(job_id)["job_state"] == "R"


def _polled(eng, monkeypatch) -> list[str]:
    """The jobs `eng` polls from now on (`_poll_job`), in order: what a wait waited for."""
    polled: list[str] = []
    real = eng._poll_job

    def poll_job(job_id, *args, **kwargs):
        polled.append(job_id)
        return real(job_id, *args, **kwargs)

    monkeypatch.setattr(eng, "_poll_job", poll_job)
    return polled


def _ended_for_its_limit(eng, small_home: Path, job_id: str, limit: str,
                         exit_status: int) -> None:
    """Room made, the job (killed for its `limit` on a full disk) ends so: its limit's
    comment, `exit_status`, one E record."""
    from .conftest import accounting_records, poll_until

    (small_home / "fill").unlink(missing_ok=True)  # room again
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
    attrs = eng.store.job(job_id)
    assert attrs["Exit_status"] == exit_status, attrs
    assert attrs["comment"].startswith(f"job killed: {limit} "), attrs
    assert accounting_records(eng).count(f";E;{job_id};") == 1
    assert job_id not in eng.limit_kills


def _killed_unwritten(eng, said: list[str], job_id: str, limit: str) -> None:
    """The job killed for its `limit` (logged), its kill kept in memory as it cannot be
    written (said once in the log), nothing of it in the store yet."""
    assert job_id in eng.kills, "the job was not signalled on the full disk"
    assert [s for s in said if f"{limit} kill is not written yet" in s] == [
        f"{job_id};its {limit} kill is not written yet: System error: database or disk is "
        "full; the job is killed all the same, the kill written at a later poll"], said
    assert [s for s in said if f"job killed: {limit}" in s], said
    assert eng.limit_kills[job_id]["exit_status"] == lifecycle.KILLED_OVER[limit]
    assert (eng.store.runtime(job_id) or {}).get("end_reason") is None


def _ended_on_the_full_disk(eng, job_id: str, pid: int) -> None:
    """The job's processes ended of their kill with the disk still full: its end waits
    for room (its shepherd's record of it too), its kill kept in memory meanwhile."""
    from .owner_hooks import gone

    until(lambda: gone(pid), timeout=PATIENCE, what="the job to be killed on the full disk")
    eng.poll()
    eng.poll()
    assert eng.store.job(job_id)["job_state"] == "R"
    assert job_id in eng.limit_kills


@pytest.mark.parametrize("room", ["as_it_runs", "after_its_end"])
def test_a_walltime_kill_that_cannot_be_written_signals_the_job_all_the_same(
        small_home, pbsplug_plugins, monkeypatch, room):
    """A walltime kill is enforced whatever the server can write, as PBS's MoM enforces
    it on its host. A job past its walltime was sent its SIGTERM, and put in `kills`,
    before its kill (its end reason, -29) was written: on a full disk that write failed,
    and the job ended of the signal without its walltime's reason (Exit_status 271); then
    the kill was written first, and refused, the job ran on past its walltime until there
    was room. Now the kill is kept in memory, the job signalled at once, and the kill
    written at a later poll: while the job runs (`as_it_runs`: it ignores SIGTERM, and
    its SIGKILL after kill_delay ends it), or as its end is recorded (`after_its_end`: it
    ended of the SIGTERM with the disk still full). It ends killed for its walltime: its
    comment, -29, one E record."""
    from pbsplug.engine.server import KILL_DELAY, Engine

    now = [time.time()]
    eng = Engine(Home(small_home), plugins=pbsplug_plugins, clock=lambda: now[0])
    try:
        script = "trap '' TERM\nexec sleep 300\n" if room == "as_it_runs" else None
        job_id, pid = _running_on_a_full_disk(
            eng, small_home, {"Resource_List": {"walltime": "00:01:00"}}, script)
        said = _logged(eng, monkeypatch)
        now[0] += 120  # (past its walltime)
        eng.poll()
        eng.poll()
        _killed_unwritten(eng, said, job_id, "walltime")
        if room == "as_it_runs":
            (small_home / "fill").unlink()
            eng.poll()
            assert job_id not in eng.limit_kills
            runtime = eng.store.runtime(job_id)  # (written as the job runs)
            assert runtime["exit_status"] == -29, runtime
            assert runtime["end_reason"].startswith("job killed: walltime "), runtime
            assert eng.store.job(job_id)["job_state"] == "R"
            now[0] += KILL_DELAY + 1  # (its SIGKILL due)
        else:
            _ended_on_the_full_disk(eng, job_id, pid)
        _ended_for_its_limit(eng, small_home, job_id, "walltime", -29)
    finally:
        eng.runner.reap()
        eng.close()


@pytest.mark.parametrize("then", ["qdel", "qrerun"])
def test_a_qdel_or_qrerun_after_a_limit_kill_not_written_follows_it(
        small_home, pbsplug_plugins, monkeypatch, then):
    """A job killed for its walltime on a full disk, its kill kept in memory, then, room
    made, deleted or requeued before the kill is written: the qdel's kill is written with
    it, as when it was written first (the job ends with the deletion's comment and -29,
    as OpenPBS does); a qrerun's requeue stands, and the kill is never the next run's.
    Signalled only once its kill was written, the job ended of the qdel with 271."""
    from pbsplug.engine.server import KILL_DELAY, ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records, poll_until

    now = [time.time()]
    eng = Engine(Home(small_home), plugins=pbsplug_plugins, clock=lambda: now[0])
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id, _ = _running_on_a_full_disk(
            eng, small_home, {"Resource_List": {"walltime": "00:01:00"}},
            "trap '' TERM\nexec sleep 300\n")
        now[0] += 120  # (past its walltime)
        eng.poll()
        assert (eng.store.runtime(job_id) or {}).get("end_reason") is None
        (small_home / "fill").unlink()  # room again, no poll yet
        if then == "qdel":
            eng.req_delete(root, [job_id])
        else:
            eng.req_rerun(root, [job_id])
        assert job_id not in eng.limit_kills
        now[0] += KILL_DELAY + 1  # (its SIGKILL due)
        if then == "qdel":
            poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
            attrs = eng.store.job(job_id)
            assert attrs["Exit_status"] == -29, attrs
            assert attrs["comment"].startswith("Job deleted at request of "), attrs
            assert accounting_records(eng).count(f";E;{job_id};") == 1
            return
        poll_until(eng, lambda: eng.store.job(job_id)["run_count"] == 2 and
                   job_id in eng.launches, "the job requeued and run again")
        assert (eng.store.runtime(job_id) or {}).get("end_reason") is None
        eng.req_delete(root, [job_id])
        now[0] += KILL_DELAY + 1
        poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
        assert eng.store.job(job_id)["Exit_status"] != -29
    finally:
        eng.runner.reap()
        eng.close()


def test_a_cput_kill_that_cannot_be_written_signals_the_job_all_the_same(
        small_home, pbsplug_plugins, monkeypatch):
    """As a walltime kill: a job whose processes together passed its cput was signalled
    before its kill was written, and the write refused on a full disk failed the whole
    poll; then, written first, the job ran on past its cput until there was room. Now it
    is killed at once, its kill kept in memory; its end found with the disk still full
    waits for room, and the job ends with -28, one E record."""
    import sys

    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import poll_until

    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        burn = (f"{sys.executable} -c 'import time\nt = time.process_time()\n"
                "while time.process_time() - t < 1.5: pass'")
        job_id = eng.req_submit(root, {"Resource_List": {"cput": "00:00:02"}},
                                f"{burn}\n{burn}\nexec sleep 300\n")
        poll_until(eng, lambda: job_id in eng.launches, "the job to run")
        pid = until(eng.launches[job_id].resolve, timeout=PATIENCE,
                    what="the job's process group to be recorded")
        real = executor.Usage.read
        filled: list[bool] = []

        def full_once_over(status_file, seen=None):  # (the disk full as the sample is read)
            used, stamp = real(status_file, seen)
            if used is not None and used.cput > 2 and not filled:
                _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
                filled.append(True)
            return used, stamp

        monkeypatch.setattr(executor.Usage, "read", full_once_over)
        said = _logged(eng, monkeypatch)
        poll_until(eng, lambda: filled, "a sample past the job's cput")
        _killed_unwritten(eng, said, job_id, "cput")
        _ended_on_the_full_disk(eng, job_id, pid)
        _ended_for_its_limit(eng, small_home, job_id, "cput", -28)
    finally:
        eng.runner.reap()
        eng.close()


def test_a_qrerun_whose_kill_cannot_be_written_is_refused_and_its_retry_works(
        small_home, pbsplug_plugins):
    """A qrerun signalled the job before it wrote the kill (its requeue): refused for a
    full disk (15010), its job got the SIGTERM all the same and ended of it, finished
    where it was to be requeued. Written first now: the qrerun refused does nothing, the
    job runs on, and a qrerun once there is room requeues it (one R record) to run again."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records, poll_until

    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id, pid = _running_on_a_full_disk(eng, small_home, {})
        with pytest.raises(PbsError) as refused:
            eng.req_rerun(root, [job_id])
        assert refused.value.code == PBSE_SYSTEM, refused.value
        _not_killed(eng, job_id, pid)
        (small_home / "fill").unlink()  # room again
        eng.req_rerun(root, [job_id])
        poll_until(eng, lambda: eng.store.job(job_id)["run_count"] == 2,
                   "the job requeued and run again")
        assert accounting_records(eng).count(f";R;{job_id};") == 1
    finally:
        jobs_left_killed(eng)
        eng.runner.reap()
        eng.close()


@pytest.mark.parametrize("full", ["before_it", "at_its_kill"])
def test_an_array_qrerun_is_written_whole_or_not_at_all(small_home, pbsplug_plugins,
                                                        monkeypatch, full):
    """qrerun of an array requeued its finished subjobs (their R records too) in a write of
    their own, then wrote each running one's kill: the disk full in between (another
    process taking the room: `at_its_kill`) refused the qrerun (15010) half done, its
    finished subjob requeued, its running one not. It is written in one transaction now:
    whole (the finished one requeued with one R record, the running one killed to be
    requeued), or, the disk full `before_it`, not at all (15010, nothing changed, no R
    record, the running subjob not signalled), and then whole once there is room."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    from .conftest import accounting_records, poll_until

    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        array = eng.req_submit(root, {"array_indices_submitted": "1-2"},
                               '[ "$PBS_ARRAY_INDEX" = 1 ] && exit 0\nexec sleep 300\n')
        done, running = array.replace("[]", "[1]"), array.replace("[]", "[2]")
        poll_until(eng, lambda: running in eng.launches and
                   (eng.store.job(done) or {}).get("job_state") == "F",
                   "the first subjob to end and the second to run")
        pid = until(eng.launches[running].resolve, timeout=PATIENCE,
                    what="the running subjob's process group to be recorded")
        if full == "before_it":
            _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
            with pytest.raises(PbsError) as refused:
                eng.req_rerun(root, [array])
            assert refused.value.code == PBSE_SYSTEM, refused.value
            assert eng.store.job(done)["job_state"] == "F"
            assert f";R;{done};" not in accounting_records(eng)
            _not_killed(eng, running, pid)
            (small_home / "fill").unlink()  # room again
        else:
            _full_first(monkeypatch, small_home, eng, "_kill")
        eng.req_rerun(root, [array])
        assert eng.store.job(done)["job_state"] == "Q", eng.store.job(done)
        assert accounting_records(eng).count(f";R;{done};") == 1
        assert eng.store.runtime(running)["end_reason"] == "requeue"
        assert running in eng.kills
    finally:
        jobs_left_killed(eng)
        eng.runner.reap()
        eng.close()


def test_a_qterm_immediate_whose_kill_cannot_be_written_leaves_the_job_running(
        small_home, pbsplug_plugins, monkeypatch):
    """qterm -t immediate on a full disk: its first kill that cannot be written fails the
    request (15010) and the server stops all the same (test_poll). That job was sent its
    SIGTERM first, nothing written: it died with the server's stop, to be found ended, not
    requeued. Now it is sent nothing and runs on, for the next start to adopt, as after
    ``qterm -t quick``; and it is not waited for: never signalled, it kept the wait going
    to its end (5 s, the server serving nothing) with nothing to wait for."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine

    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        job_id, pid = _running_on_a_full_disk(eng, small_home, {})
        polled = _polled(eng, monkeypatch)
        with pytest.raises(PbsError) as refused:
            eng.control.terminate(Caller(0, ROLE_MANAGER), "immediate")
        assert refused.value.code == PBSE_SYSTEM, refused.value
        assert eng.stopping
        _not_killed(eng, job_id, pid)
        assert polled == [], "the job left running was waited for"
    finally:
        jobs_left_killed(eng)
        eng.runner.reap()
        eng.close()


def test_a_qterm_immediate_tries_every_job_past_a_kill_it_cannot_write(
        small_home, pbsplug_plugins, monkeypatch):
    """qterm -t immediate stopped at the first kill it could not write: the jobs after it
    were left alone, not killed though their kills could be written (room again, as here,
    after the first). It tries each now: the first refused runs on, for the next start to
    adopt, logged in one line naming it; the next is killed and requeued (one R record);
    the request is still refused (15010) and the server stops. Only the killed one is
    waited for: the refused one, never signalled, kept the wait going to the longest
    kill_delay and 5 s though the killed one had ended."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine
    from pbsplug.engine.store import StoreWriteError

    from .conftest import accounting_records, poll_until

    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        root = Caller(0, ROLE_MANAGER)
        refused = eng.req_submit(root, {}, "exec sleep 300\n")  # (the first one tried)
        poll_until(eng, lambda: refused in eng.launches, "the first job to run")
        pid = until(eng.launches[refused].resolve, timeout=PATIENCE,
                    what="the first job's process group to be recorded")
        killed, _ = _running_on_a_full_disk(eng, small_home, {})
        assert list(eng.launches) == [refused, killed]
        real = eng._kill

        def room_after_a_refusal(job_id, *args, **kwargs):
            try:
                return real(job_id, *args, **kwargs)
            except StoreWriteError:
                (small_home / "fill").unlink(missing_ok=True)  # room for the next one
                raise

        monkeypatch.setattr(eng, "_kill", room_after_a_refusal)
        said = _logged(eng, monkeypatch)
        polled = _polled(eng, monkeypatch)
        with pytest.raises(PbsError) as answer:
            eng.control.terminate(root, "immediate")
        assert answer.value.code == PBSE_SYSTEM, answer.value
        assert eng.stopping
        _not_killed(eng, refused, pid)
        assert set(polled) == {killed}, polled
        assert killed not in eng.launches  # (its end recorded: the wait's end)
        assert len([s for s in said if s.startswith(f"{refused};")]) == 1, said
        assert not [s for s in said if s.startswith(f"{killed};") and "not written" in s]
        assert eng.store.job(killed)["job_state"] == "Q", eng.store.job(killed)
        assert accounting_records(eng).count(f";R;{killed};") == 1
    finally:
        jobs_left_killed(eng)
        eng.runner.reap()
        eng.close()


@pytest.mark.parametrize("by", ["qdel", "walltime"])
def test_a_qterm_immediate_refused_for_a_job_being_killed_keeps_its_kill(
        small_home, pbsplug_plugins, monkeypatch, by):
    """qterm -t immediate on a full disk, for a job being killed already, deaf to SIGTERM,
    its SIGKILL due: by a qdel (its kill written) or over its walltime (its kill kept in
    memory, `limit_kills`). Its shutdown kill cannot be written, and the log said it runs
    on, to be adopted at the next start. The kill it had stands: it is waited for, sent its
    SIGKILL, and the log says so. The next start, with room, ends it as the qdel asked (F,
    the deletion's comment); the walltime kill, never written, is lost with the stop (as
    the log line says): it ends F of its SIGKILL (265), with no walltime comment."""
    from pbsplug.engine.server import KILL_DELAY, ROLE_MANAGER, Caller, Engine

    from .conftest import poll_until
    from .owner_hooks import gone

    now = [time.time()]
    eng = Engine(Home(small_home), plugins=pbsplug_plugins, clock=lambda: now[0])
    again, closed = None, False
    try:
        root = Caller(0, ROLE_MANAGER)
        job_id = eng.req_submit(root, {"Resource_List": {"walltime": "00:01:00"}},
                                "trap '' TERM\nexec sleep 300\n")
        poll_until(eng, lambda: job_id in eng.launches, "the job to run")
        pid = until(eng.launches[job_id].resolve, timeout=PATIENCE,
                    what="the job's process group to be recorded")
        if by == "qdel":
            eng.req_delete(root, [job_id])
        _full(small_home, lambda: eng.req_submit(root, {"Hold_Types": "u"}, "true\n"))
        if by == "walltime":
            now[0] += 120  # (past its walltime)
            eng.poll()
            assert job_id in eng.limit_kills
        assert job_id in eng.kills
        now[0] += KILL_DELAY + 1  # (its SIGKILL due)
        said = _logged(eng, monkeypatch)
        polled = _polled(eng, monkeypatch)
        with pytest.raises(PbsError) as answer:
            eng.control.terminate(root, "immediate")
        assert answer.value.code == PBSE_SYSTEM, answer.value
        lines = [s for s in said if s.startswith(f"{job_id};its kill at server shutdown")]
        assert len(lines) == 1 and "the kill it had stands" in lines[0], lines
        assert "runs on" not in lines[0], lines
        assert ("(its limit's reason only if written by then)" in lines[0]) == (
            by == "walltime"), lines
        assert job_id in polled and job_id not in eng.kills  # (waited for, its SIGKILL sent)
        until(lambda: gone(pid), timeout=PATIENCE, what="the job to end of its SIGKILL")
        _closed(eng)
        closed = True
        (small_home / "fill").unlink()  # room again: the next start
        again = Engine(Home(small_home), plugins=pbsplug_plugins)
        poll_until(again, lambda: again.store.job(job_id)["job_state"] == "F", "its end")
        attrs = again.store.job(job_id)
        if by == "qdel":
            assert attrs["comment"].startswith("Job deleted at request of "), attrs
        else:
            assert attrs["Exit_status"] == 265 and "walltime" not in attrs["comment"], attrs
    finally:
        for engine in (eng, again):
            if engine is not None:
                jobs_left_killed(engine)
        _closed(again, None if closed else eng)


@pytest.mark.parametrize("over_by", ["drop", "requeue"])
def test_what_a_run_left_in_memory_goes_with_the_run(small_home, pbsplug_plugins,
                                                      register_plugin, monkeypatch, over_by):
    """A start hook's job.delete() on a full disk: the end hooks ran, the end is kept
    (`ends_run`). Once there is room, the run is over by another way before the kept end is
    tried again: its reservation's end drops it (`_drop`), or it is requeued (`_requeue`,
    as a qrerun of its array does). What this server kept of that run went on: a later run
    of the job would have ended as the old one's hooks left it, its own end hooks not run."""
    from pbsplug.engine.server import Engine

    from .test_poll import poll_until

    register_plugin(_BeginDeletes(), "deletes")
    eng = Engine(Home(small_home), plugins=pbsplug_plugins)
    try:
        job_id, real = _released_to_a_full_end(eng, monkeypatch, small_home)
        poll_until(eng, lambda: job_id in eng.unwritten, "the job's end to be kept")
        assert job_id in eng.ends_run
        monkeypatch.setattr(eng, "_end_hooks_from", real)
        (small_home / "fill").unlink()  # room again, the kept end not tried yet
        attrs = eng.store.job(job_id)
        if over_by == "drop":
            eng._drop(job_id, attrs, "its reservation ended", requestor="root@server")
        else:
            eng._requeue(job_id, attrs, "Job requeued")
        assert job_id not in eng.ends_run and job_id not in eng.aborts_run
    finally:
        eng.runner.reap()
        eng.close()
