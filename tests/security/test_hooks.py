"""The failure matrix of hooks on a real server (issue 17): a hook that segfaults, calls
os._exit, swallows every exception past its alarm, blocks in C, or makes a change that cannot
be stored, on queuejob, runjob, execjob_begin (a host event) and periodic. The requests come
from an unprivileged user (`attacker`), who can make the hooks run but must not be able to
take the server down through them.

Each case checks PBS's message and consequence (pbs-behavior.md §1.3-1.4), that nothing
invalid was stored, that another user's job is intact, that the server answers with the same
pid, and that `pbsplug server stop` stops it while the failing hook keeps failing.
"""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest

from pbsplug.testing import until

EXC = "request rejected as filter hook 'bad' encountered an exception. Please inform Admin"
ALARM = "request rejected as filter hook 'bad' got an alarm call. Please inform Admin"
#: Each way to fail, and what the requester is told.
KINDS = {"segfault": EXC, "exit": EXC, "swallow": ALARM, "cblock": ALARM, "invalid": EXC}

BAD = """
import ctypes
import os
import signal
import time
from pathlib import Path

from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(events=("queuejob", "runjob", "execjob_begin", "periodic"),
                         alarm=2, freq=1, fail_action=("offline_vnodes",))
CONTROL = Path({control!r})


def _fail(event, invalid):
    # How to fail on this event: the test writes it into CONTROL/<event>.
    try:
        kind = (CONTROL / event.type).read_text().strip()
    except FileNotFoundError:
        return
    if kind == "segfault":
        ctypes.string_at(0)
    elif kind == "exit":
        os._exit(3)
    elif kind == "swallow":
        while True:
            try:
                time.sleep(1)
            except BaseException:
                pass
    elif kind == "cblock":  # in C, deaf to SIGALRM: only SIGKILL ends it
        signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR1, signal.SIGALRM}})
        signal.sigwait({{signal.SIGUSR1}})
    elif kind == "invalid":
        invalid(event)


def _job_values(event):
    event.job.Resource_List["walltime"] = "not-a-walltime"  # refused by the setter, or:
    event.job.Resource_List[1] = "a key that is not a string"


def _runjob_values(event):
    event.job.Execution_Time = "not-a-time"
    event.job.project = {{1: object()}}


def _comment(event):
    event.job.comment = {{1: "not a comment"}}


def _vnodes(event):
    for vnode in event.vnode_list.values():
        vnode.comment = {{1: "not a comment"}}


@hookimpl
def queuejob(event):
    _fail(event, _job_values)


@hookimpl
def runjob(event):
    _fail(event, _runjob_values)


@hookimpl
def execjob_begin(event):
    _fail(event, _comment)


@hookimpl
def periodic(event):
    _fail(event, _vnodes)
"""


@pytest.fixture
def bad_engine(dists, local_engine, control):
    dists.add("bad", BAD.format(control=str(control)))
    return local_engine("[plugins.bad]\nenabled = true\n", env=dists.env())


def qsub(attacker, engine, *args: str):
    return attacker.pbs(engine, "qsub", *args, "--", "/bin/true", cwd=engine.work)


def essentials(attrs: dict) -> tuple:
    return tuple(attrs.get(k) for k in ("job_state", "Hold_Types", "Job_Owner", "queue",
                                        "Resource_List", "Job_Name"))


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_failing_hook_is_that_hooks_error_and_the_server_goes_on(kind, bad_engine, control,
                                                                   attacker):
    engine = bad_engine
    message = KINDS[kind]
    pid = engine.home.server_pid()
    others = engine.submit("sleep 1000\n", Job_Name="others", Hold_Types="u")
    before = essentials(engine.job(others))
    node = next(iter(engine.nodes()))
    node_before = engine.nodes()[node]
    files_before = sorted(p.name for p in engine.work.iterdir())

    # queuejob: the submission is refused with PBS's message, nothing is stored
    (control / "queuejob").write_text(kind)
    done = qsub(attacker, engine)
    assert (done.returncode, done.stderr) == (15136 % 256, f"qsub: {message}\n")
    assert list(engine.client("stat_jobs", history=True)) == [others]
    (control / "queuejob").unlink()

    # runjob: the job stays queued with PBS's comment
    (control / "runjob").write_text(kind)
    done = qsub(attacker, engine)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    until(lambda: engine.job(job_id).get("comment") == f"Not Running: PBS Error: {message}",
          timeout=60, what="the runjob failure")
    attrs = engine.job(job_id)
    assert attrs["job_state"] == "Q" and "Execution_Time" not in attrs
    assert "project" not in attrs and attrs["Resource_List"].get("walltime") is None
    assert attacker.pbs(engine, "qdel", job_id).returncode == 0
    (control / "runjob").unlink()

    # execjob_begin (a host event): requeued, the node offlined by fail_action
    (control / "execjob_begin").write_text(kind)
    done = qsub(attacker, engine)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    comment = f"Job requeued by execjob_begin hook: {message}"
    until(lambda: engine.job(job_id).get("comment") == comment, timeout=60,
          what="the execjob_begin failure")
    assert engine.job(job_id)["job_state"] == "Q"
    vnode = engine.nodes()[node]
    assert "offline" in vnode["state"].split(",")
    assert vnode["comment"] == "offlined by hook 'bad' due to hook error"
    assert attacker.pbs(engine, "qdel", job_id).returncode == 0
    (control / "execjob_begin").unlink()

    # periodic: logged, nothing it changed applies; it keeps failing every second
    (control / "periodic").write_text(kind)
    what = "encountered an exception" if message == EXC else "got an alarm call"
    until(lambda: f"periodic hook 'bad' {what}" in engine.log(), timeout=60,
          what="the periodic failure")
    nodes = engine.nodes()
    assert all(isinstance(n.get("comment", ""), str) for n in nodes.values())
    assert nodes[node]["resources_available"] == node_before["resources_available"]

    # the same server answers, another user's job is intact, no file was made (a core)
    assert engine.home.server_pid() == pid
    assert sorted(p.name for p in engine.work.iterdir()) == files_before
    assert not list(engine.root.glob("core*"))
    assert essentials(engine.job(others)) == before
    assert engine.pbs("qstat").returncode == 0

    # and `server stop` stops it while the periodic hook still fails
    done = engine.pbs("server", "stop")
    assert done.returncode == 0, done.stderr
    assert engine.home.server_pid() is None


HANG = """
import os
import time
from pathlib import Path

from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(events=("periodic",), alarm=600, freq=1)


@hookimpl
def periodic(event):
    Path({started!r}).write_text(str(os.getpid()))
    while True:
        try:
            time.sleep(1)
        except BaseException:
            pass
"""


@pytest.mark.parametrize("how", ["server stop", "SIGTERM"])
def test_a_hook_that_swallows_everything_does_not_hold_the_server_up(how, dists,
                                                                     local_engine, tmp_path):
    """Its alarm (600 s) is far away: the stopping server kills the hook's process."""
    started = tmp_path / "started"
    dists.add("hang", textwrap.dedent(HANG.format(started=str(started))))
    engine = local_engine("[plugins.hang]\nenabled = true\n", env=dists.env())
    pid = engine.home.server_pid()
    until(started.exists, what="the hook to start")
    if how == "server stop":
        done = engine.pbs("server", "stop")
        assert done.returncode == 0, done.stderr
    else:
        os.kill(pid, 15)
        until(lambda: engine.home.server_pid() is None, timeout=60,
              what="the server to stop")
    assert "periodic hook 'hang' was stopped: the server is stopping" in engine.log()
    with pytest.raises(ProcessLookupError):  # the hook's process went with it
        os.kill(int(started.read_text()), 0)


SLOW_PROLOGUE = """
import subprocess
import time
from pathlib import Path

from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(events=("execjob_prologue",), user="pbsuser", alarm=600)


@hookimpl
def execjob_prologue(event):
    # A prologue that takes its time, in a job's first run only: until the test says go,
    # in its own process or (WAIT_IN_PROGRAM) in a program it runs.
    work = Path(event.job.Variable_List["PBS_O_WORKDIR"])
    try:
        (work / f"{event.job.id}.first").open("x").close()
    except FileExistsError:
        return
    if event.job.Variable_List.get("WAIT_IN_PROGRAM"):
        subprocess.run(["/bin/sh", "-c", 'while [ ! -e "$0/go" ]; do sleep 0.05; done',
                        str(work)], check=True)
    while not (work / "go").exists():
        time.sleep(0.05)
"""

#: The job's owner submits a job and SIGSTOPs its prologue (sys.argv[1]: "hook", the
#: hook's process, found as the server's child of their uid; "program", the program it
#: runs, that process's child): both are theirs, the hook runs as them. It stops it once
#: the hook has begun (its mark made): stopped sooner, before the process has said it
#: starts the hook, the hook fails "before the hook ran"; and the program once it runs sh:
#: stopped between its fork and its exec, it bears the hook's process's name. Prints the
#: job's id and the pid it stopped.
_STOP_THE_PROLOGUE = """\
import os, signal, subprocess, sys, time
from pathlib import Path
program = sys.argv[1] == 'program'
job = subprocess.run(['pbsplug', 'qsub', *(['-v', 'WAIT_IN_PROGRAM=1'] if program else []),
                      '--', '/bin/true'], capture_output=True, text=True,
                     check=True).stdout.strip()
server = parent = Path(os.environ['PBSPLUG_HOME'], 'server.pid').read_text().split()[0]
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    if not Path(f'{job}.first').exists():
        time.sleep(0.02)
        continue
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            name, stat = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)
            stat, name = stat.split(), name.split('(', 1)[1]
            uid = Path(f'/proc/{pid}/status').read_text().split('Uid:')[1].split()[0]
        except (OSError, IndexError, ValueError):
            continue
        if stat[1] == parent and int(uid) == os.getuid():
            if program:
                parent, program = pid, False  # the hook's process: now its child
                break
            if parent != server and name != 'sh':
                continue  # (the program forked, not sh yet)
            os.kill(int(pid), signal.SIGSTOP)
            print(job, pid)
            raise SystemExit(0)
    time.sleep(0.02)
raise SystemExit('no prologue of mine started')
"""

#: What the server logs, for each thing the owner stopped.
_STOPPED = {
    "hook": "the hook's process was stopped by SIGSTOP (a process of job {job}'s owner "
            "{user}, who may signal it) while the hook ran; killed",
    "program": "a program the hook ran (sh, pid {pid}) was stopped (a process of job {job}'s "
               "owner {user}, who may signal it) while the hook ran; the hook's process "
               "group was killed"}


def _gone(pid: str) -> bool:
    """Whether process `pid` has ended (a zombie that its new parent has not reaped yet
    too)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("what", list(_STOPPED))
def test_a_pbsuser_hook_its_owner_stops_does_not_hold_the_server(what, dists, local_engine,
                                                                 attacker):
    # A pbsuser hook's process, and what it runs, are the job owner's: they may SIGSTOP
    # either, and the server's one loop waited for the hook until its alarm (600 s here;
    # 30 s by default) plus the grace, answering no one, for each event of each of their
    # jobs. A stopped hook's process is killed as soon as it is seen, so is a pbsuser
    # hook's process group once a process of it is seen stopped; the hook fails.
    from pbsplug.engine.client import Client

    dists.add("slow", SLOW_PROLOGUE)
    engine = local_engine("[plugins.slow]\nenabled = true\n", env=dists.env())
    done = attacker.python(_STOP_THE_PROLOGUE, what, home=engine, cwd=engine.work,
                           timeout=120)
    assert done.returncode == 0, done.stderr
    job_id, pid = done.stdout.split()
    try:
        # The hook is not let go: an answer now is one the server gave without waiting for
        # it (a client's 20 s, a hang guard: the hook's alarm is 600 s away).
        answer = Client(engine.home, timeout=20)("stat_jobs", ids=[job_id])
        assert job_id in answer
        # (The server answers while a pbsuser prologue runs, so it may answer before its
        # next look at the hook's processes: the kill is waited for before the go.)
        until(lambda: _gone(pid), what="the stopped process to be killed")
        assert not (engine.work / "go").exists()
    finally:
        (engine.work / "go").touch()
        if not _gone(pid):
            os.kill(int(pid), signal.SIGCONT)
    line = _STOPPED[what].format(job=job_id, user=attacker.user, pid=pid)
    # (logged when the server next steps the chain: after the kill, maybe after the go)
    until(lambda: f"execjob_prologue hook 'slow' encountered an exception: {line}"
          in engine.log(), what=f"the hook's error in the server's log: {line}")
    attrs = engine.wait(job_id)  # requeued; run again, it ends
    assert attrs["Exit_status"] == 0, attrs.get("comment")


@pytest.mark.parametrize("event, shown", [("execjob_prologue", ("R", 41)),
                                          ("execjob_epilogue", ("E", 57))])
def test_a_pbsuser_hook_its_owner_makes_slow_does_not_hold_the_server(event, shown, dists,
                                                                     local_engine, attacker):
    # The job's owner makes their pbsuser prologue or epilogue slow (the hook waits for a
    # file of theirs; a program of theirs could sleep as well): the server answered no one
    # until the hook ended or met its alarm (600 s here; 30 s by default), for each of
    # their jobs. The chain now runs while the server serves, the job R (substate 41) or
    # E (substate 57) meanwhile.
    from pbsplug.engine.client import Client

    dists.add("slow", SLOW_PROLOGUE.replace("execjob_prologue", event))  # (the same hook)
    engine = local_engine("[plugins.slow]\nenabled = true\n", env=dists.env())
    done = attacker.pbs(engine, "qsub", "--", "/bin/true", cwd=engine.work)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    until((engine.work / f"{job_id}.first").exists, what=f"the owner's {event} to start")
    try:
        # Answered while the hook waits: the clients' 20 s are a hang guard (the hook's
        # alarm is 600 s away).
        client = Client(engine.home, timeout=20)
        attrs = client("stat_jobs", ids=[job_id])[job_id]
        assert (attrs["job_state"], attrs["substate"]) == shown
        other = client("submit", attrs={"Hold_Types": "u"}, script="true\n")
        assert client("stat_jobs", ids=[other])[other]["job_state"] == "H"
        assert not (engine.work / "go").exists()
    finally:
        (engine.work / "go").touch()
    attrs = engine.wait(job_id)  # the prologue accepted: the job ran; or its end went on
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 1), attrs.get("comment")


def test_a_pbsuser_preterm_its_owner_makes_slow_does_not_hold_the_server(dists, local_engine,
                                                                         attacker):
    # The job's owner qdels their job and makes its pbsuser preterm slow: the server
    # answered no one until the hook ended or met its alarm. The chain now runs while the
    # server serves; the qdel is answered when it is over.
    import threading

    from pbsplug.engine.client import Client

    dists.add("slow", SLOW_PROLOGUE.replace("execjob_prologue", "execjob_preterm"))
    engine = local_engine("[plugins.slow]\nenabled = true\n", env=dists.env())
    done = attacker.pbs(engine, "qsub", "--", "/bin/sleep", "60", cwd=engine.work)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    engine.wait(job_id, "R")
    qdel: list = []
    thread = threading.Thread(target=lambda: qdel.append(
        attacker.pbs(engine, "qdel", job_id, cwd=engine.work)))
    thread.start()
    until((engine.work / f"{job_id}.first").exists, what="the owner's preterm to start")
    try:
        # Answered while the hook waits: the clients' 20 s are a hang guard (the hook's
        # alarm is 600 s away).
        client = Client(engine.home, timeout=20)
        assert client("stat_jobs", ids=[job_id])[job_id]["job_state"] == "R"
        other = client("submit", attrs={"Hold_Types": "u"}, script="true\n")
        assert client("stat_jobs", ids=[other])[other]["job_state"] == "H"
        assert not qdel and not (engine.work / "go").exists()
    finally:
        (engine.work / "go").touch()
        thread.join(60)
    assert qdel[0].returncode == 0, qdel[0].stderr
    attrs = engine.wait(job_id)  # the preterm accepted: the job was killed
    assert attrs["comment"].startswith(f"Job deleted at request of {attacker.user}@")


@pytest.mark.parametrize("named", ["[]", "[1-2]"])
def test_a_pbsuser_preterm_its_owner_makes_slow_in_an_array_does_not_hold_the_server(
        named, dists, local_engine, attacker):
    # The owner qdels their array (``12[]``, or a range of it) and makes its subjobs'
    # pbsuser preterm slow: each running subjob's chain ran in the server's loop, one
    # after another, and the server answered no one meanwhile. They now run while the
    # server serves; the qdel is answered when they are all over.
    import threading

    from pbsplug.engine.client import Client

    dists.add("slow", SLOW_PROLOGUE.replace("execjob_prologue", "execjob_preterm"))
    engine = local_engine("[plugins.slow]\nenabled = true\n", env=dists.env())
    done = attacker.pbs(engine, "qsub", "-J", "1-2", "--", "/bin/sleep", "60",
                        cwd=engine.work)
    assert done.returncode == 0, done.stderr
    array_id = done.stdout.strip()
    subjobs = [array_id.replace("[]", f"[{i}]") for i in (1, 2)]
    for sub in subjobs:
        engine.wait(sub, "R")
    qdel: list = []
    thread = threading.Thread(target=lambda: qdel.append(
        attacker.pbs(engine, "qdel", array_id.replace("[]", named), cwd=engine.work)))
    thread.start()
    until(lambda: all((engine.work / f"{sub}.first").exists() for sub in subjobs),
          what="both subjobs' preterms to start")  # (one at a time, in the loop, before)
    try:
        # Answered while the hooks wait: the client's 20 s are a hang guard (the hooks'
        # alarm is 600 s away).
        client = Client(engine.home, timeout=20)
        assert client("stat_jobs", ids=[subjobs[0]])[subjobs[0]]["job_state"] == "R"
        assert not qdel and not (engine.work / "go").exists()
    finally:
        (engine.work / "go").touch()
        thread.join(60)
    assert (qdel[0].returncode, qdel[0].stderr) == (0, "")
    for sub in subjobs:
        attrs = engine.wait(sub)  # the preterms accepted: the subjobs were killed
        assert attrs["comment"].startswith(f"Job deleted at request of {attacker.user}@")


SLOW_START_AND_END = """
import time
from pathlib import Path

from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(events=("execjob_prologue", "execjob_epilogue"), user="pbsuser",
                         alarm=600)


def _wait(event, mark):
    work = Path(event.job.Variable_List["PBS_O_WORKDIR"])
    (work / f"{event.job.id}.{mark}").touch()
    while not (work / "go").exists():
        time.sleep(0.05)


@hookimpl
def execjob_prologue(event):
    _wait(event, "first")


@hookimpl
def execjob_epilogue(event):
    _wait(event, "end")
"""


def test_the_slow_pbsuser_epilogue_of_a_job_deleted_at_its_start_does_not_hold_the_server(
        dists, local_engine, attacker):
    # The job's owner qdels their job while its pbsuser prologue runs, and makes its
    # pbsuser epilogue slow: the server ran that epilogue in its loop, and answered no one,
    # the qdel first, until it ended or met its alarm. It now runs while the server serves.
    from pbsplug.engine.client import Client

    dists.add("slow", SLOW_START_AND_END)
    engine = local_engine("[plugins.slow]\nenabled = true\n", env=dists.env())
    done = attacker.pbs(engine, "qsub", "--", "/bin/true", cwd=engine.work)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    until((engine.work / f"{job_id}.first").exists, what="the owner's prologue to start")
    try:
        # (20 s: hang guards; the hook's alarm is 600 s away)
        done = attacker.pbs(engine, "qdel", job_id, cwd=engine.work, timeout=20)
        assert done.returncode == 0, done.stderr
        until((engine.work / f"{job_id}.end").exists, what="the owner's epilogue to start")
        client = Client(engine.home, timeout=20)
        attrs = client("stat_jobs", ids=[job_id])[job_id]
        assert (attrs["job_state"], attrs["substate"]) == ("E", 57)
        other = client("submit", attrs={"Hold_Types": "u"}, script="true\n")
        assert client("stat_jobs", ids=[other])[other]["job_state"] == "H"
        assert not (engine.work / "go").exists()
    finally:
        (engine.work / "go").touch()
    attrs = engine.wait(job_id)
    assert attrs["comment"].startswith(f"Job deleted at request of {attacker.user}@")


FORGER = """
import json
import os
import struct
from pathlib import Path

from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(events=("execjob_prologue", "execjob_epilogue"), user="pbsuser",
                         alarm=20)
#: The runner's text for a hook it gave up for the server's stop (runner.CANCELLED).
STOPPED = "the server is stopping: the hook's process was killed"


def _report_pipe():
    # The write end of the hook's report pipe: the process is the job owner's, its
    # descriptors theirs to find.
    for name in os.listdir("/proc/self/fd"):
        try:
            held = os.readlink(f"/proc/self/fd/{{name}}")
            flags = Path(f"/proc/self/fdinfo/{{name}}").read_text().split("flags:")[1]
        except (OSError, IndexError):
            continue
        if held.startswith("pipe:") and int(flags.split()[0], 8) & os.O_ACCMODE == os.O_WRONLY:
            return int(name)
    raise RuntimeError("no report pipe")


def _forge(event):
    # In the job's first run of each event: the hook's own report, written by the owner's
    # process, says the server's stop gave the hook up (FORGE: as an error, a reject, or
    # with a flag of its own that says so); then the process leaves.
    how = event.job.Variable_List.get("FORGE")
    try:
        (Path(event.job.Variable_List["PBS_O_WORKDIR"]) / f"{{event.type}}.forged").open(
            "x").close()
    except FileExistsError:
        return
    done = ["done", 0, "reject" if how == "reject" else "error", STOPPED, 0.0, {{}}, []]
    fd = _report_pipe()
    for message in (done + ([True] if how == "flag" else []), ["end"]):
        data = json.dumps(message).encode()
        os.write(fd, struct.pack("!I", len(data)) + data)
    os._exit(0)


@hookimpl
def execjob_prologue(event):
    if event.job.Variable_List.get("WHICH") == "execjob_prologue":
        _forge(event)


@hookimpl
def execjob_epilogue(event):
    if event.job.Variable_List.get("WHICH") == "execjob_epilogue":
        _forge(event)
"""

#: What each forged report is judged as, in the server's log.
_FORGED = {
    "error": "{event} hook 'forger' encountered an exception: the server is stopping: "
             "the hook's process was killed",
    "reject": "{event} request rejected by 'forger': the server is stopping: the hook's "
              "process was killed",
    "flag": "{event} hook 'forger' encountered an exception: the hook's process sent a "
            "malformed report (too many values to unpack (expected 7)); killed"}


@pytest.mark.parametrize("how", list(_FORGED))
@pytest.mark.parametrize("event", ["execjob_prologue", "execjob_epilogue"])
def test_a_pbsuser_hooks_report_that_says_the_stop_gave_it_up_is_its_own(
        event, how, dists, local_engine, attacker):
    # A pbsuser hook's process is its owner's, its report pipe theirs to write: a report
    # that reads as the runner's for a hook the server's stop gave up (its text, or a flag
    # of its own) must be that hook's reject or error, the server not stopping: a prologue
    # taken for the stop's would leave its job requeued with its run not counted, an
    # epilogue's its job E (substate 57), its end left to a next start. Only the runner's
    # own kill sets HookRun.cancelled.
    dists.add("forger", FORGER.format())
    engine = local_engine("[plugins.forger]\nenabled = true\n", env=dists.env())
    pid = engine.home.server_pid()
    done = attacker.pbs(engine, "qsub", "-v", f"WHICH={event},FORGE={how}", "--",
                        "/bin/true", cwd=engine.work)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    attrs = engine.wait(job_id)  # (a prologue's: requeued, then run again to its end)
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    assert (engine.work / f"{event}.forged").exists()  # (the forgery was made)
    assert attrs.get("run_count") == (2 if event == "execjob_prologue" else 1), attrs
    log = engine.log()
    line = _FORGED[how].format(event=event)
    assert line in log, log
    assert "was stopped" not in log and "server is stopping;" not in log, log
    assert engine.home.server_pid() == pid
