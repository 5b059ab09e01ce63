"""A job's process that makes a session of its own, made as the unprivileged `attacker`:
``setsid`` in the job's script, or a daemon's double fork (fork, setsid, fork, the middle
process exits). The engine found a job's processes by their session (its shepherd's, and
an interactive job's own): such a process was out of reach of the walltime's kill, of
qdel, of suspend and resume, of the sweep at the job's end, and of the job's cput. It ran
on for ever, as its owner, untracked. The shepherd is now its job's subreaper, and a job's
processes are its descendants too. Each docstring says what the engine did before."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from pbsplug.testing import until

from .conftest import qsub

#: How each attack leaves the job's session: ``setsid`` from the script (its process is
#: the script's child while the script runs), and a daemon's double fork (the process that
#: made the session exits at once, so the one left is an orphan).
ESCAPES = {
    "setsid": "setsid {command} &\n",
    "double fork": ("/usr/bin/python3 -c 'import os, sys\n"
                    "if os.fork() == 0:\n"
                    "    os.setsid()\n"
                    "    if os.fork() == 0:\n"
                    "        os.execvp(sys.argv[1], sys.argv[1:])\n"
                    "    os._exit(0)\n"
                    "os.wait()' {command}\n"),
}


@pytest.fixture(params=list(ESCAPES))
def escape(request) -> str:
    return request.param


def mark() -> str:
    """A number of seconds no other process sleeps for: the escaped ``sleep`` is found by
    it (the attacker's processes of other tests may run at the same time)."""
    return str(random.randrange(10**8, 10**9))


def job_script(engine, escape: str, command: str, then: str = "sleep 300\n") -> str:
    """A job script that leaves `command` running in a session of its own, then `then`."""
    path = engine.work / f"escape{len(list(engine.work.glob('escape*')))}.sh"
    path.write_text(ESCAPES[escape].format(command=command) + then)
    path.chmod(0o644)
    return str(path)


def escaped(uid: int, seconds: str, anything: bool = False) -> list[int]:
    """The live processes of `uid` running ``sleep <seconds>`` (zombies aside); with
    `anything`, those running any command whose last argument is `seconds`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")[:-1]
            if (os.stat(f"/proc/{name}").st_uid == uid and state(int(name)) != "Z" and (
                    argv[-1:] == [seconds.encode()] if anything
                    else argv == [b"sleep", seconds.encode()])):
                found.append(int(name))
        except (OSError, IndexError):
            continue
    return found


def state(pid: int) -> str:
    """A process's state letter (R, S, T, Z, ...) from /proc; "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def started_escape(attacker, seconds: str) -> int:
    """The escaped process, once it runs (in a session the job made)."""
    (pid,) = until(lambda: escaped(attacker.uid, seconds), timeout=30,
                   what="the escaped process to run")
    return pid


def none_left(attacker, seconds: str) -> None:
    until(lambda: not escaped(attacker.uid, seconds), timeout=15,
          what="the escaped process to be killed")


@pytest.fixture
def leftovers(attacker):
    """The marks of this test's escaped processes; any still running after it is killed."""
    marks: list[str] = []
    yield marks
    for seconds in marks:
        for pid in escaped(attacker.uid, seconds, anything=True):
            os.kill(pid, signal.SIGKILL)


def test_an_escaped_process_is_killed_at_the_walltime(engine, attacker, escape, leftovers):
    """Past the job's walltime its group was killed and its shepherd killed what was left
    of its session: the escaped process ran on."""
    seconds = mark()
    leftovers.append(seconds)
    job_id = qsub(attacker, engine, "-r", "n", "-l", "walltime=00:00:02",
                  job_script(engine, escape, f"sleep {seconds}"))
    started_escape(attacker, seconds)
    attrs = engine.wait(job_id, timeout=60)
    assert attrs["Exit_status"] == -29, attrs.get("comment")
    none_left(attacker, seconds)


def test_an_escaped_process_is_killed_by_qdel(engine, attacker, escape, leftovers):
    """qdel ended the job's group; the escaped process ran on."""
    seconds = mark()
    leftovers.append(seconds)
    job_id = qsub(attacker, engine, "-r", "n", job_script(engine, escape, f"sleep {seconds}"))
    started_escape(attacker, seconds)
    done = attacker.pbs(engine, "qdel", job_id)
    assert done.returncode == 0, done.stderr
    engine.wait(job_id, timeout=60)
    none_left(attacker, seconds)


def test_an_escaped_process_gets_qdels_sigterm_before_its_sigkill(engine, attacker, escape,
                                                                  leftovers):
    """qdel's SIGTERM went to the job's group and top process only: a process that made a
    session of its own never had the chance to end cleanly, only the SIGKILL at the job's
    end. It now gets the SIGTERM too, as a PBS MoM sends it to the job's session: it
    writes a file when it gets it, while the job's script, ignoring it, waits for the
    SIGKILL after kill_delay (10 s)."""
    seconds = mark()
    leftovers.append(seconds)
    folder = Path(tempfile.mkdtemp(prefix="pbsplug-term-"))
    try:
        os.chown(folder, attacker.uid, attacker.gid)
        got = folder / "got"
        trap = ("/usr/bin/python3 -c 'import signal, sys, time\n"
                "def term(*_):\n"
                "    open(sys.argv[1], \"w\").write(\"TERM\")\n"
                "    sys.exit(0)\n"
                "signal.signal(signal.SIGTERM, term)\n"
                "open(sys.argv[1] + \".ready\", \"w\").close()\n"
                f"time.sleep(600)' {got} {seconds}")
        # The job's script ignores SIGTERM and lives on to the SIGKILL after kill_delay
        # (its end would kill the rest of the job at once, as PBS's MoM does, before the
        # escaped process's handler could run).
        # (Its trap set, it says so: a SIGTERM before would end the script, and the job's
        # end kill the escaped process before its handler ran.)
        trapped = folder / "trapped"
        job_id = qsub(attacker, engine, "-r", "n", job_script(
            engine, escape, trap, then=f"trap '' TERM\ntouch {trapped}\nsleep 300\n"))
        # (its handler set: a SIGTERM before it would end it without a word)
        until(lambda: (folder / "got.ready").exists(), timeout=30,
              what="the escaped process to catch SIGTERM")
        until(trapped.exists, timeout=30, what="the job's script to ignore SIGTERM")
        engine.wait(job_id, "R")
        engine.pbs("qdel", job_id, check=True)
        until(got.exists, timeout=30, what="the escaped process's SIGTERM")
        engine.wait(job_id, timeout=60)
        assert got.read_text() == "TERM"
        until(lambda: not escaped(attacker.uid, seconds, anything=True), timeout=15,
              what="the escaped process to end")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_an_escaped_process_is_killed_at_the_jobs_end(engine, attacker, escape, leftovers):
    """The job's end killed what it left in its session only: a process that made a session
    of its own ran on past it, on cpus given to the next job."""
    seconds = mark()
    leftovers.append(seconds)
    job_id = qsub(attacker, engine, "-r", "n", job_script(
        engine, escape, f"sleep {seconds}",
        then=f"while ! pgrep -u {attacker.uid} -fx 'sleep {seconds}' >/dev/null; do "
             "sleep 0.1; done\nexit 0\n"))
    attrs = engine.wait(job_id, timeout=60)
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    none_left(attacker, seconds)


def test_suspend_and_resume_reach_an_escaped_process(engine, attacker, escape, leftovers):
    """qsig -s suspend stopped the job's session; the escaped process ran on while the job
    was S, on cpus given to others."""
    seconds = mark()
    leftovers.append(seconds)
    job_id = qsub(attacker, engine, "-r", "n", job_script(engine, escape, f"sleep {seconds}"))
    pid = started_escape(attacker, seconds)
    engine.wait(job_id, "R")
    engine.pbs("qsig", "-s", "suspend", job_id, check=True)
    until(lambda: state(pid) == "T", timeout=15, what="the escaped process to stop")
    engine.pbs("qsig", "-s", "resume", job_id, check=True)
    until(lambda: state(pid) == "S", timeout=15, what="the escaped process to go on")
    engine.pbs("qdel", job_id, check=True)
    engine.wait(job_id, timeout=60)
    none_left(attacker, seconds)


def test_an_adopted_job_still_reaches_its_escaped_process(engine, attacker, leftovers):
    """A job adopted after the server's restart (its shepherd outlives the server): suspend
    and qdel reach its escaped process as before the restart."""
    seconds = mark()
    leftovers.append(seconds)
    job_id = qsub(attacker, engine, "-r", "n",
                  job_script(engine, "double fork", f"sleep {seconds}"))
    pid = started_escape(attacker, seconds)
    engine.wait(job_id, "R")
    engine.kill()
    engine.start()
    assert engine.job(job_id)["job_state"] == "R"
    engine.pbs("qsig", "-s", "suspend", job_id, check=True)
    until(lambda: state(pid) == "T", timeout=15, what="the escaped process to stop")
    engine.pbs("qdel", job_id, check=True)
    engine.wait(job_id, timeout=60)
    none_left(attacker, seconds)


def test_an_escaped_process_counts_in_the_jobs_cput(engine, attacker, escape, leftovers):
    """resources_used.cput summed the processes of the job's session: one that made a
    session of its own worked uncounted (and unbounded by cput). The job waits until its
    escaped loop has used 3 s of CPU (its /proc says), then ends."""
    loop = engine.work / "loop.py"
    loop.write_text("import sys\nwhile True:\n    pass\n")
    loop.chmod(0o644)
    seconds = mark()  # (the loop's last argument: found by it)
    leftovers.append(seconds)
    wait = (f"/usr/bin/python3 -c 'import os, time\n"
            "while True:\n"
            "    for name in filter(str.isdigit, os.listdir(\"/proc\")):\n"
            "        try:\n"
            "            if open(f\"/proc/{name}/cmdline\", \"rb\").read().endswith("
            f"b\"{seconds}\\0\"):\n"
            "                fields = open(f\"/proc/{name}/stat\").read().rsplit(\")\", 1)"
            "[1].split()\n"
            "                if int(fields[11]) + int(fields[12]) >= 3 * "
            "os.sysconf(\"SC_CLK_TCK\"):\n"
            "                    raise SystemExit(0)\n"
            "        except OSError:\n"
            "            pass\n"
            "    time.sleep(0.1)'\n")
    job_id = qsub(attacker, engine, "-r", "n", job_script(
        engine, escape, f"/usr/bin/python3 {loop} {seconds}", then=wait))
    attrs = engine.wait(job_id, timeout=120)
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    hours, minutes, secs = map(int, attrs["resources_used"]["cput"].split(":"))
    assert hours * 3600 + minutes * 60 + secs >= 3, attrs["resources_used"]
    until(lambda: not escaped(attacker.uid, seconds, anything=True), timeout=15,
          what="the escaped loop to be killed")


def test_an_escaped_process_of_a_job_whose_shepherd_was_killed_is_killed(
        engine, attacker, leftovers):
    """A shepherd killed (it is root's: by root, or the kernel's OOM killer) loses its job;
    the server killed what was left in the shepherd's session, but an escaped process, an
    orphan of init's once the shepherd is gone, ran on. The shepherd records the job's
    processes at each sample of its use, and those are killed too."""
    seconds = mark()
    leftovers.append(seconds)
    job_id = qsub(attacker, engine, "-r", "n",
                  job_script(engine, "double fork", f"sleep {seconds}"))
    pid = started_escape(attacker, seconds)
    seq = job_id.split(".")[0]
    usage = engine.home.jobs / f"{seq}.usage"

    def recorded() -> bool:
        try:
            return pid in [p for p, _ in json.loads(usage.read_text())["processes"]]
        except (OSError, ValueError, KeyError):
            return False

    until(recorded, timeout=30, what="a sample that records the escaped process")
    shepherd = json.loads((engine.home.jobs / f"{seq}.shepherd").read_text())["shepherd"]
    os.kill(shepherd, signal.SIGKILL)
    attrs = engine.wait(job_id, timeout=60)
    assert attrs["Exit_status"] == -4, attrs.get("comment")
    none_left(attacker, seconds)


def test_a_process_that_forks_and_exits_in_a_loop_is_killed_at_the_jobs_end(
        engine, attacker, tmp_path):
    """A process that forks, makes a session of its own and exits, over and over, is
    never where a scan of /proc saw it, and was never in the job's session. It holds a FIFO
    open (every one of its forks does): once none is left, the test reads its end."""
    fifo = engine.work / "hopper.fifo"
    os.mkfifo(fifo, 0o666)
    fifo.chmod(0o666)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        hopper = ("import os, sys, time\n"
                  "os.write(3, b'1')\n"
                  "end = time.time() + 90\n"  # (one the kill missed ends after all)
                  "while time.time() < end:\n"
                  "    if os.fork():\n"
                  "        os._exit(0)\n"
                  "    os.setsid()\n")
        job_id = qsub(attacker, engine, "-r", "n", job_script(
            engine, "setsid", f"/usr/bin/python3 -c \"{hopper}\" 3>{fifo}",
            then="sleep 2\nexit 0\n"))
        until(lambda: _read(reader) == b"1", timeout=30, what="the loop to start")
        attrs = engine.wait(job_id, timeout=60)
        assert attrs["Exit_status"] == 0, attrs.get("comment")
        until(lambda: _read(reader) == b"", timeout=15, what="every process of the loop "
              "to be killed")
    finally:
        os.close(reader)


def _read(fd: int) -> bytes | None:
    """What the FIFO gives: its bytes, b"" once no writer is left, None while one is."""
    try:
        return os.read(fd, 16)
    except BlockingIOError:
        return None


#: A process whose main thread exits (the thread alone: SYS_exit) while another thread runs
#: on: its /proc/<pid>/stat says Z, as a zombie's does, until its last thread ends. It
#: writes its pid to argv[1] first.
HEADLESS = ("import ctypes, os, sys, threading, time\n"
            "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
            "threading.Thread(target=time.sleep, args=(300,)).start()\n"
            "ctypes.CDLL(None).syscall({'x86_64': 60, 'aarch64': 93}[os.uname().machine], 0)\n")


def _threads(pid: int) -> int:
    """How many threads process `pid` has still running (its exited main thread aside)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    return sum(state(int(tid)) not in ("", "Z", "X") for tid in tasks if tid != str(pid)) + (
        state(pid) not in ("", "Z", "X"))


@pytest.mark.parametrize("end", ["the job's end", "qdel"])
def test_a_process_whose_main_thread_exited_is_killed(engine, attacker, escape, end):
    """A process whose main thread has exited reads as a zombie (state Z) while its other
    threads run on: the kill rounds took it for ended, never signalled it, and its
    shepherd's tree for empty; it ran on, as its owner, past the job's end (the same at
    qdel, its walltime, suspend)."""
    pid_file = engine.work / f"headless-{escape.replace(' ', '-')}-{end.split()[-1]}"
    command = f"/usr/bin/python3 -c \"{HEADLESS}\" {pid_file}"
    then = (f"while [ ! -s {pid_file} ]; do sleep 0.1; done\nsleep 1\n"
            + ("exit 0\n" if end == "the job's end" else "sleep 300\n"))
    job_id = qsub(attacker, engine, "-r", "n", job_script(engine, escape, command, then))
    pid = int(until(lambda: pid_file.exists() and pid_file.read_text(), timeout=30,
                    what="the process to start"))
    try:
        until(lambda: state(pid) == "Z" and _threads(pid) == 1, timeout=30,
              what="its main thread to exit")
        if end == "qdel":
            engine.pbs("qdel", job_id, check=True)
        engine.wait(job_id, timeout=60)
        until(lambda: _threads(pid) == 0, timeout=15, what="the process to be killed")
    finally:
        if _threads(pid):
            os.kill(pid, signal.SIGKILL)
