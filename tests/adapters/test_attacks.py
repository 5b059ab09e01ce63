"""The adapters against a local unprivileged user (`attacker`): what reaches a root worker
from a user's socket, job or environment. No Slurm or PBS here: the workers are started by
hand, as the programs would start them."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pbsplug.adapters import slurm, slurm_bridge
from pbsplug.plugins import load_plugins
from pbsplug.siteconfig import load_site
from pbsplug.testing import missing, until

from .conftest import ADAPTERS
from .conftest import worker_client as worker_client_module

LAUNCH_AND_END = """
from pbsplug import PluginInfo, hookimpl
plugin_info = PluginInfo(api="1.0", events=("execjob_launch", "execjob_end"))
MARK = {mark!r}
@hookimpl
def execjob_launch(event):
    pass
@hookimpl
def execjob_end(event):
    with open(MARK, "a") as fh:
        fh.write(event.job.id + "\\n")
"""
#: Sends argv[2] (JSON) to the socket at argv[1] and prints the answer.
SEND = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(120)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode())
s.shutdown(socket.SHUT_WR)
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.decode(errors="replace"))
"""


@pytest.fixture
def task_worker(dists, tmp_path):
    """A Slurm install's task worker (public socket, the real bridge) with a plugin that
    notes every execjob_end it runs; (socket, mark file)."""
    if os.geteuid() != 0:
        missing("needs root: the task worker runs as root")
    mark = tmp_path / "ends"
    plugins = dists.enabled("attacked", LAUNCH_AND_END.format(mark=str(mark)), tmp_path)
    run = Path("/run") / f"pbsplug-attack-{os.getpid()}"
    p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)], bin_dir="/nowhere",
                   slurm_conf="", state_dir=str(tmp_path / "state"), log_file="",
                   run_dir=str(run), native=False)
    config = tmp_path / slurm.TASK_CONFIG_NAME
    config.write_text(p.extra_files[slurm.TASK_CONFIG_NAME])
    sock = Path(f"{run}-task") / "task.sock"
    proc = subprocess.Popen([sys.executable, "-m", "pbsplug.adapters.worker", str(sock),
                             str(config)], start_new_session=True)
    try:
        until(sock.exists, 60, "the task worker's socket")
        yield sock, mark
    finally:  # (its whole group: its serving process takes the place of a first one killed)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(sock.parent, ignore_errors=True)


@pytest.mark.parametrize("script,env,argv", [
    ("epilog", {"SLURM_JOB_ID": "77", "SLURM_JOB_USER": "root", "SLURMD_NODENAME": "n1"}, []),
    ("prolog", {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": "n1"}, []),
    ("suspend", {}, ["n1"]),
    ("resume", {"SLURM_RESUME_FILE": "/etc/shadow"}, ["n1"]),
    ("health_check", {"SLURMD_NODENAME": "n1"}, []),
])
def test_the_task_workers_socket_runs_no_other_script(task_worker, attacker, script, env,
                                                      argv):
    """Every local user can reach the task worker's socket: a request there for any script
    but TaskProlog (an Epilog for another user's job, a SuspendProgram for any node) is
    refused, never run as root with the sender's environment."""
    sock, mark = task_worker
    done = attacker.python(SEND, str(sock), json.dumps({"script": script, "env": env,
                                                        "argv": argv}))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer == {"exit": 1, "stdout": "",
                      "error": "pbsplug: the task worker serves TaskProlog alone"}
    assert not mark.exists(), "root ran the plugin's execjob_end for the attacker"


def test_a_public_bridge_refuses_other_scripts_in_one_line(dists, tmp_path):
    sys.path.insert(0, str(dists.root))
    dists.add("attacked", LAUNCH_AND_END.format(mark=str(tmp_path / "ends")))
    site = tmp_path / "site.toml"
    site.write_text("[plugins.attacked]\nenabled = true\n")
    try:
        plugins = load_plugins(load_site(site), env={})
        p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)],
                       bin_dir="/nowhere", slurm_conf="", state_dir=str(tmp_path / "state"),
                       log_file="", run_dir="/run/x", native=False)
        ctx = slurm_bridge.load(json.loads(p.extra_files[slurm.TASK_CONFIG_NAME]))
    finally:
        sys.path.remove(str(dists.root))
    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_USER": "root", "SLURMD_NODENAME": "n1"}
    answer = slurm_bridge.dispatch(ctx, {"script": "epilog", "env": env,
                                         "_peer": [1, 1000, 1000]})
    assert answer == {"exit": 1, "stdout": "",
                      "error": "pbsplug: the task worker serves TaskProlog alone"}
    assert not (tmp_path / "ends").exists()


#: As the attacker: a socket at argv[1] that answers every connection with a forged "all
#: is well", and notes what it was sent in argv[2].
PLANTED = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(8)
print("listening", flush=True)
while True:
    conn, _ = s.accept()
    conn.settimeout(5)
    try:
        got = conn.recv(65536)
    except OSError:
        got = b""
    with open(sys.argv[2], "ab") as fh:
        fh.write(got + b"\\n")
    conn.sendall(b'{"kind": "accept", "changes": {}, "logs": []}')
    conn.close()
"""


@pytest.fixture
def user_folder(attacker):
    """A folder of the attacker's in /tmp (mode 0777), where an admin put the workers'
    sockets (--run-dir /tmp/...)."""
    folder = Path(f"/tmp/pbsplug-attack-{os.getpid()}-run")
    shutil.rmtree(folder, ignore_errors=True)
    done = attacker.python("import os, sys; os.mkdir(sys.argv[1]); os.chmod(sys.argv[1], 0o777)",
                           str(folder))
    assert done.returncode == 0, done.stderr
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_socket_a_user_planted_where_the_worker_listens_is_told_nothing(user_folder,
                                                                         attacker, tmp_path):
    """Root's scripts (the Slurm programs, PBS's hook) asked whatever listened at the
    worker's socket name: in a folder a user can write, the user's own socket got every
    event's data and its answer was taken (exit 0: the job ran unchecked)."""
    if os.geteuid() != 0:
        missing("needs root: the scripts that ask the worker run as root")
    sock = user_folder / "slurm-x.sock"
    seen = user_folder / "seen"
    runuser = shutil.which("runuser") or "runuser"
    planted = subprocess.Popen([runuser, "-u", attacker.user, "--", f"{attacker.venv}/bin/python",
                                "-c", PLANTED, str(sock), str(seen)], stdout=subprocess.PIPE,
                               text=True, cwd="/tmp", env={"PATH": "/usr/bin:/bin"})
    try:
        assert planted.stdout.readline().strip() == "listening"
        client = worker_client_module()
        answer = client.ask(sys.executable, str(tmp_path / "none.json"), str(sock),
                            b'{"secret": "the job\'s environment"}')
        assert answer is None  # no worker there: the script runs the event itself
    finally:
        planted.kill()
        planted.wait()
    assert not seen.exists() or b"secret" not in seen.read_bytes()


def test_a_link_a_user_planted_for_the_workers_lock_is_not_followed(user_folder, attacker,
                                                                    tmp_path):
    """The lock beside the socket was opened by root through whatever the name was: a link
    there made root create (or append to) any file."""
    if os.geteuid() != 0:
        missing("needs root: the scripts that start the worker run as root")
    target = tmp_path / "made-by-root"
    sock = user_folder / "slurm-x.sock"
    done = attacker.python("import os, sys; os.symlink(sys.argv[1], sys.argv[2])",
                           str(target), f"{sock}.lock")
    assert done.returncode == 0, done.stderr
    client = worker_client_module()
    assert client.start(sys.executable, str(tmp_path / "none.json"), str(sock)) is None
    assert not target.exists()


def test_a_worker_refuses_a_folder_a_user_can_write(user_folder, attacker, tmp_path):
    """The worker made its socket in the folder it was given: one a user owns it chmodded to
    0700 and listened in, the user still able to replace the socket or plant links. The
    refusal names the folder, its owner and its mode."""
    if os.geteuid() != 0:
        missing("needs root: the worker runs as root")
    config = tmp_path / "w.json"
    config.write_text(json.dumps({"loader": "json:loads", "dispatcher": "json:dumps"}))
    done = subprocess.run([sys.executable, "-m", "pbsplug.adapters.worker",
                           str(user_folder / "w.sock"), str(config)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"pbsplug worker: refusing the worker's folder {user_folder}: {user_folder} is owned "
        f"by uid {attacker.uid} ({attacker.user}), mode 0777, so another user could plant ")
    assert done.stderr.endswith(": no worker there\n") and done.stderr.count("\n") == 1
    assert not (user_folder / "w.sock").exists()
    assert user_folder.stat().st_mode & 0o777 == 0o777  # left as it was


@pytest.fixture
def sticky_with_link(attacker, tmp_path):
    """A root folder in /tmp that everyone may write, sticky as /tmp is, where the attacker
    put a link ``run`` to a folder of root's: (the sticky folder, the link's target)."""
    if os.geteuid() != 0:
        missing("needs root: the scripts that start the worker run as root")
    sticky = Path(f"/tmp/pbsplug-attack-{os.getpid()}-sticky")
    shutil.rmtree(sticky, ignore_errors=True)
    sticky.mkdir()
    sticky.chmod(0o1777)
    target = tmp_path / "target"
    target.mkdir()
    done = attacker.python("import os, sys; os.symlink(sys.argv[1], sys.argv[2])",
                           str(target), str(sticky / "run"))
    assert done.returncode == 0, done.stderr
    yield sticky, target
    shutil.rmtree(sticky, ignore_errors=True)


def test_the_workers_folder_is_not_made_through_a_link_a_user_planted(sticky_with_link,
                                                                      attacker, tmp_path,
                                                                      capfd):
    """The folder was made (``mkdir -p``) before it was checked: through a user's link on
    the way (a --run-dir under a sticky folder), root made folders where the link led."""
    sticky, target = sticky_with_link
    sock = sticky / "run" / "pbsplug" / "slurm-x.sock"
    client = worker_client_module()
    assert client.start(sys.executable, str(tmp_path / "none.json"), str(sock)) is None
    assert not (target / "pbsplug").exists()
    assert capfd.readouterr().err == (
        f"pbsplug: refusing the worker's folder {sock.parent}: {sticky / 'run'} is a link "
        f"owned by uid {attacker.uid} ({attacker.user}), so another user could plant a "
        "socket or a link in it: no worker started there, the event runs without one\n")
    config = tmp_path / "w.json"
    config.write_text(json.dumps({"loader": "json:loads", "dispatcher": "json:dumps"}))
    done = subprocess.run([sys.executable, "-m", "pbsplug.adapters.worker", str(sock),
                           str(config)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith(f"pbsplug worker: refusing the worker's folder "
                                  f"{sock.parent}: {sticky / 'run'} is a link owned by uid "
                                  f"{attacker.uid} ({attacker.user}), so another user")
    assert not (target / "pbsplug").exists()


#: Folders as an admin may lay them out (`d`: the folder; `p`: the test's folder).
LAYOUTS = [
    "mkdir -m 0700 {d}",
    "mkdir -m 0755 {d}",
    "mkdir -m 0775 {d}",
    "mkdir -m 0777 {d}",
    "mkdir -m 1777 {d}",
    "mkdir -m 1777 {p}/s && mkdir -m 0700 {p}/s/d && ln -s {p}/s/d {d}",
    "mkdir -m 0777 {d}.real && ln -s {d}.real {d}",
    "mkdir -m 0700 {d}.real && ln -s {d}.real {d}",  # the folder itself a root link
    "mkdir -m 0777 {p}/open && mkdir -m 0700 {p}/open/run && ln -s {p}/open/run {d}",
    "mkdir -m 0777 {p}/open && mkdir -m 0700 {p}/open/run && ln -s open/run {p}/l "
    "&& ln -s {p}/l {d}",
    "mkdir -m 0700 {p}/x && chown nobody {p}/x && ln -s {p}/x {d}",
    "mkdir -m 0700 {p}/y && ln -s {p}/y {d} && chown -h nobody {d}",
    "mkdir -m 0700 {d} && chown nobody {d}",
    "mkdir -m 0770 {d} && chgrp nogroup {d}",
    "mkdir -m 0700 {p}/l2 && ln -s {p}/l2 {p}/l1 && ln -s {p}/l1 {d}",
    "true",  # not made yet
]


@pytest.mark.parametrize("make", LAYOUTS + [
    "mkdir -m 0777 {p}/open && mkdir -m 0700 {p}/open/d && ln -s {p}/open/d {d}",
    "mkdir -m 1777 {p}/open && mkdir -m 0700 {p}/open/d && ln -s {p}/open/d {d}",
])
def test_the_workers_client_keeps_the_rule_of_safedirs(tmp_path, make):
    """The hook scripts' client cannot import pbsplug (pbs_python, Slurm's programs), so it
    carries its own copy of `pbsplug.safedirs.folder_problem`: the same answer and words
    for each folder, and for a folder below it."""
    from pbsplug import safedirs

    if os.geteuid() != 0 and ("chown" in make or "chgrp" in make):
        missing("needs root: chown")
    folder = tmp_path / "d"
    subprocess.run(["sh", "-c", make.format(d=folder, p=tmp_path)], check=True)
    client = worker_client_module()
    for path in (folder, folder / "sub"):
        assert client.folder_problem(str(path)) == safedirs.folder_problem(path)
    assert safedirs.folder_problem(tmp_path) is None


@pytest.mark.parametrize("make,safe", [
    ("mkdir -m 0700 {d}", True),
    ("mkdir -m 0755 {d}", True),
    ("mkdir -m 0775 {d}", False),
    ("mkdir -m 0777 {d}", False),
    ("mkdir -m 0777 {d}.real && ln -s {d}.real {d}", False),
    ("mkdir -m 0700 {d}.real && ln -s {d}.real {d}", True),  # root's link, as /var/run
    ("mkdir -m 0777 {p}/open && mkdir -m 0700 {p}/open/run && ln -s {p}/open/run {d}", False),
    ("mkdir -m 0777 {p}/open && mkdir -m 0700 {p}/open/d", None),  # below a folder all write
])
def test_safe_folder(tmp_path, make, safe):
    folder = tmp_path / "d"
    subprocess.run(["sh", "-c", make.format(d=folder, p=tmp_path)], check=True)
    client = worker_client_module()
    if safe is None:
        folder = tmp_path / "open" / "d"
        safe = False
    assert (client.folder_problem(str(folder)) is None) is safe


def test_a_start_makes_the_levels_above_a_workers_folder_passable_by_every_user(tmp_path):
    """The private worker's folder is 0700, but the levels a start makes above it are
    0755 whatever the umask (slurmd's may be 077): the public task worker's folder beside
    it, under the same parent, is reached by every job's TaskProlog. Made 0700, the first
    start on a fresh /run shut every user out of the task worker."""
    client = worker_client_module()
    top = tmp_path / "run"
    old = os.umask(0o077)
    try:
        assert client._make_folder(str(top / "pbsplug" / "slurm"), 0o700) is None
    finally:
        os.umask(old)
    assert [oct(stat.S_IMODE(os.stat(p).st_mode)) for p in (
        top, top / "pbsplug", top / "pbsplug" / "slurm")] == ["0o755", "0o755", "0o700"]


#: The client's answer for the folder argv[2], loaded by path from argv[1] as the scripts do.
CLIENT_PROBLEM = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
sys.path.insert(0, sys.argv[1])
import worker_client
print(worker_client.folder_problem(sys.argv[2]))
"""


def test_a_run_dir_written_with_two_leading_slashes_is_checked(tmp_path):
    """POSIX keeps a leading ``//`` (os.path.abspath too), and ``os.path.dirname('//')`` is
    ``//``: the client walked up to "/" forever, so a ``--run-dir //run/pbsplug`` had every
    Slurm program and PBS hook that looks for a worker fill memory and hang. It answers as
    `pbsplug.safedirs` does for the same folder."""
    from pbsplug import safedirs

    for folder in (f"/{tmp_path}/d", "//"):
        done = subprocess.run([sys.executable, "-c", CLIENT_PROBLEM, ADAPTERS, folder],
                              capture_output=True, text=True, timeout=120)
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == f"{safedirs.folder_problem(folder)}\n"


LAUNCH_MARK = """
from pbsplug import PluginInfo, hookimpl
plugin_info = PluginInfo(api="1.0", events=("execjob_launch",))
@hookimpl
def execjob_launch(event):
    with open({mark!r}, "a") as fh:
        fh.write(event.job.id + " " + ",".join(event.vnode_list) + "\\n")
"""
#: A stand-in for a step's slurmstepd (its title is argv[0]): it listens where slurmstepd
#: does (argv[1], "" for nowhere), forks a task process (a fork of it, as slurmstepd's
#: are) that starts the asker (`sleep`) with the environment argv[2] (JSON), prints the
#: asker's and the task's pids, and waits.
STEPD = """
import json, os, socket, subprocess, sys, time
if sys.argv[1]:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sys.argv[1])
    listener.listen(1)
task = os.fork()
if task == 0:
    asker = subprocess.Popen(["sleep", "300"], env=json.loads(sys.argv[2]))
    print(asker.pid, os.getpid(), flush=True)
    asker.wait()
    os._exit(0)
os.waitpid(task, 0)
"""


class _Jobs:
    """Slurm's reading of this user's two running jobs: 5 on n1 and n2, 6 on n3."""

    def __init__(self, user: str):
        self.user = user

    def job_and_nodes(self, job_id, names):
        nodes = {"5": "(n1:ncpus=2)+(n2:ncpus=1)", "6": "(n3:ncpus=1)"}[job_id]
        return ({"id": job_id, "euser": self.user, "Job_Owner": self.user,
                 "exec_vnode": nodes}, {n: {"state": "job-busy"} for n in names})


def _task_prolog(dists, tmp_path, name: str, mark: Path, listens: str,
                 env: dict[str, str], meanwhile=None, slurm_reading=None) -> dict:
    """The task worker's answer to a TaskProlog asked by a task of a stand-in slurmstepd
    (root's, titled for step 5.0, listening as ``<listens>_5.0`` in a spool folder, or
    nowhere), its asker's environment `env`; with plugin `name` noting what it ran in
    `mark`. `meanwhile(spool, (asker, task))` runs once the step listens, before the
    question; `slurm_reading(user, (asker, task))` stands for Slurm's reading of the jobs
    (default `_Jobs`)."""
    import pwd

    if os.geteuid() != 0:
        missing("needs root: the task's slurmstepd is root's")
    dists.add(name, LAUNCH_MARK.format(mark=str(mark)))
    site = tmp_path / "site.toml"
    site.write_text(f"[plugins.{name}]\nenabled = true\n")
    sys.path.insert(0, str(dists.root))
    try:
        plugins = load_plugins(load_site(site), env={})
        p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)],
                       bin_dir="/nowhere", slurm_conf="", state_dir=str(tmp_path / "state"),
                       log_file="", run_dir="/run/x", native=False)
        config = json.loads(p.extra_files[slurm.TASK_CONFIG_NAME])
        # The stand-in slurmstepd and its task are this interpreter.
        config["slurmstepd"] = os.path.realpath(sys.executable)
        ctx = slurm_bridge.load(config)
    finally:
        sys.path.remove(str(dists.root))
    spool = tmp_path / "spool"
    spool.mkdir()
    listen = str(spool / f"{listens}_5.0") if listens else ""
    stepd = subprocess.Popen(["slurmstepd: [5.0]", "-c", STEPD, listen, json.dumps(env)],
                             executable=sys.executable, stdout=subprocess.PIPE, text=True)
    pids = [int(pid) for pid in stepd.stdout.readline().split()]  # (the asker, the task)
    user = pwd.getpwuid(os.getuid()).pw_name
    ctx.slurm = slurm_reading(user, pids) if slurm_reading else _Jobs(user)
    try:
        # read once it runs sleep: before its exec, its environment is still its parent's
        until(lambda: f"SLURM_JOB_ID={env['SLURM_JOB_ID']}".encode() in Path(
            f"/proc/{pids[0]}/environ").read_bytes(), 30, "the asker's exec")
        if meanwhile is not None:
            meanwhile(spool, pids)
        return slurm_bridge.dispatch(ctx, {"script": "task_prolog", "env": {},
                                           "_peer": [pids[0], os.getuid(), os.getgid()]})
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        stepd.kill()
        stepd.wait()


@pytest.mark.parametrize("listens,job,node,served", [
    ("n1", "5", "n1", "5 n1"),   # what slurmstepd gives the task
    ("n1", "5", "n2", "5 n1"),   # another node of the job: the step's own is taken
    ("n1", "6", "n3", "5 n1"),   # another job of the user's, on its node: the step's
    ("", "5", "n2", "5 n2"),     # no socket of the step's found: the environment's node,
    ("", "6", "n3", None)])      # ... one of the step's job's, and no other
def test_task_prolog_acts_only_for_the_job_and_node_of_the_asking_tasks_step(
        dists, tmp_path, listens, job, node, served):
    """TaskProlog's environment is the task owner's (LD_PRELOAD runs their code in it), and
    its SLURM_JOB_ID and SLURMD_NODENAME named the job and node the hook acts for: another
    of the user's jobs and one of its nodes passed the checks (the hook put the task in
    that job's cpuset, or drained that node). The job is the one the task's slurmstepd
    (root's) runs, by its title, and the node the one its socket in SlurmdSpoolDir names
    (``<node>_<job>.<step>``); only without that socket is the environment's node taken,
    if it is one of the job's."""
    mark = tmp_path / "launched"
    name = f"launchmark_{listens or 'none'}_{job}_{node}"  # each case's mark
    answer = _task_prolog(dists, tmp_path, name, mark, listens,
                          {"SLURM_JOB_ID": job, "SLURMD_NODENAME": node})
    if served:
        assert answer["exit"] == 0, answer
        assert mark.read_text() == f"{served}\n"
    else:
        assert answer == {"exit": 1, "stdout": "",
                          "error": f"pbsplug TaskProlog: node {node} is not one of job 5's"}
        assert not mark.exists()


#: Any local user's forgery of /proc/net/unix, which prints a socket's path as it is: a
#: socket bound to a name holding a line break and, after it, a line of its own giving
#: the inode of the step's socket (found there by its name, argv[1]) and another node's
#: socket name (argv[2]); names tried (in the folder argv[3]) until that line comes first.
FORGE_SOCKET_LINE = """
import socket, sys
lines = [line.split() for line in open("/proc/net/unix").read().splitlines()[1:]]
ino = next(f[6] for f in lines if len(f) == 8 and f[7].endswith(sys.argv[1]))
kept = []
for n in range(500):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(f"{sys.argv[3]}/{n}\\n0: 00000002 00000000 00010000 0001 01 {ino} {sys.argv[2]}")
    kept.append(s)
    lines = [line.split() for line in open("/proc/net/unix").read().splitlines()[1:]]
    at = [i for i, f in enumerate(lines) if len(f) == 8 and f[6] == ino]
    if at and lines[at[0]][7] == sys.argv[2]:
        print("forged", flush=True)
        sys.stdin.read()  # (until the test is done)
        break
else:
    print("not first", flush=True)
"""


@pytest.mark.parametrize("forged,served", [
    ("n2", "5 n1"),   # another node of the job's: the hook would act on it
    ("n3", "5 n1")])  # a node not the job's: the task would be refused
def test_task_prolog_takes_the_steps_node_whatever_another_user_writes_in_proc_net_unix(
        dists, tmp_path, shared_tmp, attacker, forged, served):
    """/proc/net/unix, every user's to read, prints a socket's path as it is, line breaks
    and all: any local user could add a line of their own giving the inode of another
    user's step's socket and another node's name, and the task worker took the node from
    the first line with that inode: the hook acted for that user's job on another of its
    nodes, or the task was refused (one of no job's). The node is now what the kernel says
    the step's sockets are bound to (sock_diag), never a line of that file."""
    folder = shared_tmp / "forge"
    folder.mkdir()
    os.chown(folder, attacker.uid, attacker.gid)
    forging: list[subprocess.Popen] = []

    def forge(spool: Path, pids: list[int]) -> None:
        forger = subprocess.Popen(
            ["runuser", "-u", attacker.user, "--", "/usr/bin/python3", "-c",
             FORGE_SOCKET_LINE, "/n1_5.0", f"{forged}_5.0", str(folder)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/tmp")
        forging.append(forger)
        assert forger.stdout.readline() == "forged\n"  # (the attacker's line comes first)

    mark = tmp_path / "launched"
    try:
        answer = _task_prolog(dists, tmp_path, f"launchmark_forged_{forged}", mark, "n1",
                              {"SLURM_JOB_ID": "5", "SLURMD_NODENAME": "n1"}, forge)
    finally:
        for forger in forging:
            forger.stdin.close()
            forger.wait(60)
    assert answer["exit"] == 0, answer
    assert mark.read_text() == f"{served}\n"


class _TaskKilledMeanwhile(_Jobs):
    """`_Jobs`, and while Slurm is asked (scontrol: milliseconds, a controller's answer)
    the task process is killed, as its owner may kill it, and gone (reaped by its step)."""

    def __init__(self, user: str, pids: list[int]):
        super().__init__(user)
        self.task = pids[1]

    def job_and_nodes(self, job_id, names):
        os.kill(self.task, signal.SIGKILL)
        until(lambda: not os.path.exists(f"/proc/{self.task}"), 30, "the task reaped")
        return super().job_and_nodes(job_id, names)


def test_task_prolog_gives_the_hook_no_pid_whose_task_ended_after_the_checks(dists,
                                                                              tmp_path):
    """event.pid is the task process, checked (a Slurm task of the asker's, in the step's
    job) before Slurm is asked about the job; its owner may kill it meanwhile, and its pid
    may then be another process's (any user's, root's), which the hook put in the job's
    cpuset and the Epilog killed with the job's processes. The task must be the same
    process, of the same step, when the hook gets its pid; otherwise refused."""
    mark = tmp_path / "launched"
    answer = _task_prolog(dists, tmp_path, "launchmark_task_killed", mark, "n1",
                          {"SLURM_JOB_ID": "5", "SLURMD_NODENAME": "n1"},
                          slurm_reading=_TaskKilledMeanwhile)
    assert answer == {"exit": 1, "stdout": "",
                      "error": "pbsplug TaskProlog: the task ended while it was asked for"}
    assert not mark.exists()

def test_task_prolog_prints_only_export_and_unset_lines_slurmstepd_reads_as_meant():
    """slurmstepd reads TaskProlog's output line by line (``export``, ``unset``, ``print``):
    a name from the task's environment (its owner's) with a line break in it made a line of
    its own; names of other letters or a leading digit are none a shell takes."""
    before = {"KEEP": "1", "GONE": "1", "X\nprint forged": "1", "\u00c9T\u00c9": "1"}
    after = {"KEEP": "1", "NEW": "v", "1ST": "v", "\u00c9": "v", "NUL": "a\0b",
             "BRK": "a\nprint forged"}
    assert slurm_bridge.export_lines("5", before, after) == "export NEW=v\nunset GONE\n"


def test_a_worker_that_cannot_start_is_not_waited_for(tmp_path):
    """A worker that ends at start (a plugin that cannot load, a config that is not JSON)
    held every script that tried to start one for the whole `WORKER_START`, and each event
    paid it again. Here `WORKER_START` is an hour: only the worker's end lets `start` go."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    sock = tmp_path / "run" / "w.sock"
    code = (f"import sys; sys.path.insert(0, {ADAPTERS!r}); import worker_client; "
            "worker_client.WORKER_START = 3600.0; "
            f"print(worker_client.start({sys.executable!r}, {str(bad)!r}, {str(sock)!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "None\n", "")


class _Hosts:
    """Slurm's hostlist for the power programs (one node per name)."""

    def hostnames(self, text):
        return text.split(",")


def _power_ctx(state_dir: Path):
    class Runner:
        def fire(self, event):
            raise AssertionError("fired")

    return slurm_bridge.Context({"state_dir": str(state_dir)}, Runner(), _Hosts())


def test_the_power_programs_refuse_a_state_folder_a_user_can_write(user_folder, attacker,
                                                                   tmp_path):
    """The power programs' lock was opened, and their records written through a fixed
    temporary name, by whatever was there: in a state folder a user can write (a
    --state-dir under /tmp), links there had root create and overwrite any file, and a
    forged record told root which nodes it had powered off."""
    if os.geteuid() != 0:
        missing("needs root: the power programs run as root")
    made, victim = tmp_path / "made-by-root", tmp_path / "victim"
    victim.write_text("root's\n")
    plant = ("import os, sys; os.symlink(sys.argv[1], sys.argv[3] + '/power.lock'); "
             "os.symlink(sys.argv[2], sys.argv[3] + '/.power_off.json.tmp')")
    done = attacker.python(plant, str(made), str(victim), str(user_folder))
    assert done.returncode == 0, done.stderr
    answer = slurm_bridge.dispatch(_power_ctx(user_folder),
                                   {"script": "suspend", "env": {}, "argv": ["n1"]})
    assert answer == {"exit": 1, "stdout": "", "error": (
        f"pbsplug suspend: refusing the state folder (--state-dir) {user_folder}: "
        f"{user_folder} is owned by uid {attacker.uid} ({attacker.user}), mode 0777, so "
        "another user could plant or change what is in it; make it and every folder above "
        "it root's and writable by no one else (a folder above it may be sticky, as /tmp "
        "is), or choose another folder")}
    assert not made.exists() and victim.read_text() == "root's\n"


def test_a_power_record_another_user_could_write_is_not_acted_on(attacker, tmp_path):
    """A record another user can write (0666) said which nodes root had powered off: a
    SuspendProgram for them then did nothing. Refused, the program exits 1."""
    if os.geteuid() != 0:
        missing("needs root: the power programs run as root")
    state = Path(f"/tmp/pbsplug-attack-{os.getpid()}-state")
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(mode=0o755)
    try:
        record = state / "power_off.json"
        record.write_text("{}")
        record.chmod(0o666)
        done = attacker.python("import sys; open(sys.argv[1], 'w').write('{\"n1\": 1}')",
                               str(record))
        assert done.returncode == 0, done.stderr
        answer = slurm_bridge.dispatch(_power_ctx(state),
                                       {"script": "suspend", "env": {}, "argv": ["n1"]})
        assert answer == {"exit": 1, "stdout": "", "error": (
            f"pbsplug suspend: refusing {record}: writable by others (owner uid 0 (root), "
            "mode 0666), so another user could have written it; remove it")}
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_no_other_user_can_hold_the_power_programs_lock(attacker):
    """The lock was 0644: any user could open it and hold it (flock needs only a read),
    and every power program then waited for them."""
    if os.geteuid() != 0:
        missing("needs root: the power programs run as root")
    state = Path(f"/tmp/pbsplug-attack-{os.getpid()}-state")
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(mode=0o755)
    try:
        (state / "power_off.json").write_text('{"n1": 1}')
        answer = slurm_bridge.dispatch(_power_ctx(state),
                                       {"script": "suspend", "env": {}, "argv": ["n1"]})
        assert answer["exit"] == 0, answer
        done = attacker.python("import sys; open(sys.argv[1])", str(state / "power.lock"))
        assert "PermissionError" in done.stderr
        assert (state / "power.lock").stat().st_mode & 0o777 == 0o600
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_health_check_refuses_a_state_folder_a_user_can_write(user_folder, attacker,
                                                              tmp_path):
    """HealthCheckProgram read and wrote its mark of slurmd's start (``started/<node>``)
    through whatever was there: in a state folder a user can write, a link there had root
    overwrite any file with the start time, and a planted mark kept exechost_startup from
    running after slurmd's restart."""
    if os.geteuid() != 0:
        missing("needs root: HealthCheckProgram runs as root")
    victim = tmp_path / "victim"
    victim.write_text("root's\n")
    plant = ("import os, sys; os.mkdir(sys.argv[2] + '/started'); "
             "os.symlink(sys.argv[1], sys.argv[2] + '/started/n1')")
    done = attacker.python(plant, str(victim), str(user_folder))
    assert done.returncode == 0, done.stderr
    fired = []

    class Slurm:
        def nodes(self, names):
            return {"n1": {"slurmd_start_time": "2026-11-24T02:00:00"}}

    class Runner:
        def fire(self, event):
            fired.append(event.type)
            return type("Out", (), {"accepted": True, "kind": "accept", "changes": {},
                                    "hook": "h"})()

    ctx = slurm_bridge.Context({"state_dir": str(user_folder)}, Runner(), Slurm())
    answer = slurm_bridge.dispatch(ctx, {"script": "health_check",
                                         "env": {"SLURMD_NODENAME": "n1"}})
    assert answer == {"exit": 1, "stdout": "", "error": (
        f"pbsplug health_check: refusing the state folder (--state-dir) {user_folder}/started:"
        f" {user_folder} is owned by uid {attacker.uid} ({attacker.user}), mode 0777, so "
        "another user could plant or change what is in it; make it and every folder above "
        "it root's and writable by no one else (a folder above it may be sticky, as /tmp "
        "is), or choose another folder")}
    assert victim.read_text() == "root's\n" and fired == []


#: As root: the Slurm bridge's log file at argv[1], and one line logged.
LOG_ONCE = """
import logging, sys
from pbsplug.adapters import slurm_bridge
slurm_bridge._log_to(sys.argv[1])
logging.getLogger("pbsplug.slurm").error("written by root")
"""


def test_the_log_file_is_not_opened_through_a_link_a_user_planted(user_folder, attacker,
                                                                   tmp_path):
    """The log file was opened (FileHandler) through whatever was at its name: with a
    --log-file in a folder a user can write, a link there had root append to any file.
    Refused in one line on stderr (Slurm's log, where a program runs the events itself);
    the events run without the log file."""
    if os.geteuid() != 0:
        missing("needs root: the bridge logs as root")
    victim = tmp_path / "victim"
    victim.write_text("root's\n")
    log = user_folder / "pbsplug-slurm.log"
    done = attacker.python("import os, sys; os.symlink(sys.argv[1], sys.argv[2])",
                           str(victim), str(log))
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-c", LOG_ONCE, str(log)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "root's\n"
    assert done.stderr == (
        f"pbsplug: no log file: refusing the log file's folder (--log-file) {user_folder}: "
        f"{user_folder} is owned by uid {attacker.uid} ({attacker.user}), mode 0777, so "
        "another user could plant or change what is in it; make it and every folder above "
        "it root's and writable by no one else (a folder above it may be sticky, as /tmp "
        "is), or choose another folder\n"
        "written by root\n")  # logging's last resort: stderr
    good = tmp_path / "logs" / "pbsplug-slurm.log"
    done = subprocess.run([sys.executable, "-c", LOG_ONCE, str(good)], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert good.read_text().endswith(" pbsplug.slurm ERROR: written by root\n")


#: As root: the task worker's bridge logging to argv[1], asked for TaskProlog by the
#: process argv[2] (of uid argv[3]), as the worker's socket would say it.
ASKED_BY = """
import sys
from pbsplug.adapters import slurm_bridge
slurm_bridge._log_to(sys.argv[1])
ctx = slurm_bridge.Context({"public": True, "slurmstepd": "/usr/sbin/slurmstepd"}, None, None)
print(slurm_bridge.dispatch(ctx, {"script": "task_prolog", "env": {},
                                  "_peer": [int(sys.argv[2]), int(sys.argv[3]), 0]}))
"""


def test_no_local_user_writes_a_line_of_their_own_in_the_bridges_log(attacker, shared_tmp,
                                                                      tmp_path):
    """The task worker logs why it refuses a request, naming what it read of the asking
    process (its parent's program, the task's environment): any local user chooses those.
    A program at a path holding a line break, asking through a child, wrote a line of the
    user's own in root's log (a forged record, with a time and a level). Every record is
    one line: a line break or other control character in it is shown escaped."""
    if os.geteuid() != 0:
        missing("needs root: the bridge logs as root")
    folder = shared_tmp / "mine"
    folder.mkdir()
    os.chown(folder, attacker.uid, attacker.gid)
    forged = "2026-12-05 21:00:00,000 1 pbsplug.slurm INFO: job 9 accepted"
    program = folder / f"sh\n{forged}"
    done = attacker.python("import shutil, sys; shutil.copy('/bin/sh', sys.argv[1])",
                           str(program))
    assert done.returncode == 0, done.stderr
    parent = subprocess.Popen(["runuser", "-u", attacker.user, "--", str(program), "-c",
                               "sleep 300 & echo $$ $!; read x; kill $!"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd="/tmp")
    try:
        program_pid, asker = (int(pid) for pid in parent.stdout.readline().split())
        log = tmp_path / "logs" / "pbsplug-slurm.log"
        done = subprocess.run([sys.executable, "-c", ASKED_BY, str(log), str(asker),
                               str(attacker.uid)], capture_output=True, text=True,
                              timeout=120)
    finally:
        parent.stdin.close()
        parent.wait(60)
    assert (done.returncode, done.stderr) == (0, "")
    assert "not asked by a Slurm task" in done.stdout
    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].endswith(f"(uid {attacker.uid}) refused: its parent {program_pid} is not a "
                             f"Slurm task of that user ({program}, uid {attacker.uid})"
                             .replace("\n", "\\n"))


@pytest.fixture
def syslog_socket(tmp_path):
    """A datagram socket where syslog(3) sends (/dev/log), for this test's processes: bound
    there when the machine has none (and removed after), else bind-mounted over it in a
    mount namespace of their own (`run`); (socket, run) where run(argv) gives the argv
    that runs `argv` so."""
    import socket

    if os.geteuid() != 0:
        missing("needs root: /dev/log is root's")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dev_log = Path("/dev/log")
    if os.path.lexists(dev_log):  # a syslog daemon's: not taken from it
        if shutil.which("unshare") is None:
            missing("needs unshare (util-linux) to stand in for this machine's syslog")
        path = tmp_path / "log"
        sock.bind(str(path))

        def run(argv: list[str]) -> list[str]:
            return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                    'mount --bind "$0" /dev/log && exec "$@"', str(path), *argv]
    else:
        sock.bind(str(dev_log))
        path = dev_log

        def run(argv: list[str]) -> list[str]:
            return argv
    inode = os.stat(path).st_ino
    sock.settimeout(1)
    try:
        yield sock, run
    finally:
        sock.close()
        if path == dev_log and os.path.lexists(dev_log) and os.lstat(dev_log).st_ino == inode:
            dev_log.unlink()


def test_a_log_file_refusal_in_a_worker_reaches_syslog(user_folder, dists, tmp_path,
                                                       syslog_socket):
    """A worker (started with stderr on /dev/null, as the programs start it) that refuses
    the log file said why on stderr alone: nobody saw it, and the events ran with no log.
    The refusal goes to syslog too (daemon.err, as pbsplug-slurm)."""
    sock, run = syslog_socket
    plugins = dists.enabled("attacked", LAUNCH_AND_END.format(mark=str(tmp_path / "ends")),
                            tmp_path)
    log = user_folder / "pbsplug-slurm.log"
    workers = Path("/run") / f"pbsplug-syslog-{os.getpid()}"
    p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)], bin_dir="/nowhere",
                   slurm_conf="", state_dir=str(tmp_path / "state"), log_file=str(log),
                   run_dir=str(workers), native=False)
    config = tmp_path / slurm.CONFIG_NAME
    config.write_text(p.config_text)
    worker = subprocess.Popen(run([sys.executable, "-m", "pbsplug.adapters.worker",
                                   str(workers / "w.sock"), str(config)]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, start_new_session=True)

    def worker_line() -> str:  # (other processes log there too: theirs are passed over)
        try:
            line = sock.recv(65536).decode(errors="replace")
        except TimeoutError:
            return ""
        return line if f"[{worker.pid}]" in line else ""

    try:
        line = until(worker_line, 60, "the worker's line in syslog")
        until((workers / "w.sock").exists, 60, "the worker's socket")
    finally:
        worker.kill()
        worker.wait()
        shutil.rmtree(workers, ignore_errors=True)
    assert line.startswith("<27>")  # daemon.err
    assert line.split(": ", 1)[0].endswith(f" {slurm_bridge.SYSLOG_IDENT}[{worker.pid}]")
    assert line.split(": ", 1)[1] == (
        f"pbsplug: no log file: refusing the log file's folder (--log-file) {user_folder}: "
        f"{user_folder} is owned by uid {user_folder.stat().st_uid} "
        f"({pwd.getpwuid(user_folder.stat().st_uid).pw_name}), mode 0777, so another user "
        "could plant or change what is in it; make it and every folder above it root's and "
        "writable by no one else (a folder above it may be sticky, as /tmp is), or choose "
        "another folder")
    assert not log.exists()


def test_the_log_file_opens_in_a_log_folder_its_group_may_write(tmp_path):
    """Ubuntu's /var/log is root:syslog 0775: 6627018 held the log's folder to the whole
    rule, so the default --log-file /var/log/pbsplug-slurm.log was refused there and the
    events ran with no log at all (the worker's stderr goes nowhere). A root folder its
    group may write is taken for the log; a file there that is a link, another user's, or
    another name of a file of root's (a hard link) is not appended to, and a folder
    everyone may write is still refused."""
    if os.geteuid() != 0:
        missing("needs root: the bridge logs as root, and chgrp")
    logs = tmp_path / "var-log"
    logs.mkdir()
    os.chown(logs, 0, grp.getgrnam("nogroup").gr_gid)
    logs.chmod(0o775)
    log = logs / "pbsplug-slurm.log"
    done = subprocess.run([sys.executable, "-c", LOG_ONCE, str(log)], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert log.read_text().endswith(" pbsplug.slurm ERROR: written by root\n")
    victim = tmp_path / "victim"
    victim.write_text("root's\n")
    log.unlink()
    os.link(victim, log)
    done = subprocess.run([sys.executable, "-c", LOG_ONCE, str(log)], capture_output=True,
                          text=True, timeout=120)
    assert done.stderr == (f"pbsplug: no log file: refusing {log}: it has other names (hard "
                           "links); remove it\nwritten by root\n")
    assert victim.read_text() == "root's\n"
    log.unlink()
    logs.chmod(0o777)
    done = subprocess.run([sys.executable, "-c", LOG_ONCE, str(log)], capture_output=True,
                          text=True, timeout=120)
    assert done.stderr.startswith(f"pbsplug: no log file: refusing the log file's folder "
                                  f"(--log-file) {logs}: {logs} is writable by everyone")
    assert not log.exists()


def test_install_refuses_a_folder_below_one_a_user_can_write(user_folder, attacker, dists,
                                                             tmp_path):
    """Install checked its folder alone: made (root's, 0755) in a folder a user can write
    (--dir /tmp/...), it passed, and the user could rename it and put programs of their
    own where slurm.conf points, which slurmd runs as root."""
    if os.geteuid() != 0:
        missing("needs root: install writes what slurmd runs as root")
    plugins = dists.enabled("attacked", LAUNCH_AND_END.format(mark=str(tmp_path / "ends")),
                            tmp_path)
    p = slurm.plan(plugins, user_folder / "programs", dirs=[str(dists.root)],
                   bin_dir="/nowhere", slurm_conf="", state_dir=str(tmp_path / "state"),
                   log_file="", run_dir="/run/x", native=False)
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.write_programs(p)
    assert str(caught.value) == (
        f"refusing the programs' folder (--dir) {user_folder}/programs: {user_folder} is "
        f"owned by uid {attacker.uid} ({attacker.user}), mode 0777, so another user could "
        "plant or change what is in it; make it and every folder above it root's and "
        "writable by no one else (a folder above it may be sticky, as /tmp is), or choose "
        "another folder (slurmd runs its programs as root)")
    assert not (user_folder / "programs").exists()


READS_THE_JOB = """
from pbsplug import PluginInfo, hookimpl
plugin_info = PluginInfo(api="1.0", events=("execjob_begin", "execjob_end"))
@hookimpl
def execjob_begin(event):
    event.job.Resource_List["ncpus"]
@hookimpl
def execjob_end(event):
    event.job.Resource_List["ncpus"]
"""
#: Slurm's reading of job 5 and node n1 (``-o show job 5``: the name its commands act on
#: job 5 by, `Slurm.alone`); scontrol's other commands noted in argv[0]'s log.
SCONTROL = """#!/bin/sh
case "$*" in
"-o -d") cat {answer} {node};;
"-o -d show job 5"|"-o show job 5") cat {answer};;
*) echo "$*" >> {log};;
esac
"""
OWNERS_JOB = ("JobId=5 JobName={name} UserId=pbsplugtu(1001) GroupId=users(100) "
              "Account=(null) JobState=RUNNING Reason=None Requeue=1 Restarts=0 "
              "TimeLimit=01:00:00 SubmitTime=2026-11-24T02:25:12 "
              "EligibleTime=2026-11-24T02:25:12 StartTime=2026-11-24T02:25:13 Partition=all "
              "NodeList=n1 NumNodes=1 NumCPUs=1 JOB_GRES=(null) Nodes=n1 CPU_IDs=0 Mem=0 "
              "GRES= MinCPUsNode=1 MinMemoryNode=0 OverSubscribe=OK Comment={comment} "
              "WorkDir=/tmp\n")
NODE_LINE = "NodeName=n1 CPUAlloc=1 CPUTot=2 RealMemory=1000 State=MIXED\n"


@pytest.mark.parametrize("name,comment", [
    ("job", "hi NumCPUs=64"),                         # a key twice
    ("x\nUserId=root(0) NumCPUs=64", "(null)"),       # a record of its own
])
@pytest.mark.parametrize("script", ["prolog", "epilog", "prolog_slurmctld"])
def test_a_jobs_own_text_does_not_drain_its_node(dists, tmp_path, script, name, comment):
    """scontrol -o does not quote values: a job whose name or comment (its owner's, set
    at submission or any time later with scontrol update) reads as Slurm's keys or records
    is not read, so that no hook sees what Slurm did not say. The Prolog and the Epilog
    then exited 1, and a failed Prolog or Epilog drains the node: any user could drain
    every node their jobs were sent to; PrologSlurmctld exited 1, and Slurm requeued the
    job to fail again, for ever. The job is Slurm's to hold, not the node: the Prologs
    requeue it held (the node stays in service), the Epilog logs it."""
    plugins = dists.enabled("readsjob", READS_THE_JOB, tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    answer, node, log = tmp_path / "answer", tmp_path / "node", tmp_path / "scontrol.log"
    answer.write_text(OWNERS_JOB.format(name=name, comment=comment))
    node.write_text(NODE_LINE)
    (bin_dir / "scontrol").write_text(SCONTROL.format(answer=answer, node=node, log=log))
    (bin_dir / "scontrol").chmod(0o755)
    p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)],
                   bin_dir=str(bin_dir), slurm_conf="", state_dir=str(tmp_path / "state"),
                   log_file="", run_dir="/run/x", native=False)
    sys.path.insert(0, str(dists.root))
    try:
        ctx = slurm_bridge.load(p.config)
        reply = slurm_bridge.dispatch(ctx, {"script": script, "env": {
            "SLURM_JOB_ID": "5", "SLURM_JOB_USER": "pbsplugtu", "SLURMD_NODENAME": "n1",
            "SLURM_JOB_EXIT_CODE": "0"}})
    finally:
        sys.path.remove(str(dists.root))
    assert reply["exit"] == 0, reply  # exit 1: Slurm drains n1
    done = log.read_text().splitlines() if log.exists() else []
    assert not [line for line in done if "nodename=" in line], done
    if script == "epilog":
        assert done == []
    else:
        assert done[-1] == "requeuehold 5", done
        what = {"prolog": "Prolog", "prolog_slurmctld": "PrologSlurmctld"}[script]
        assert done[0].startswith(f"update jobid=5 comment=pbsplug {what}: scontrol show job")


def test_a_job_that_cannot_be_requeued_for_its_text_is_cancelled():
    """A --no-requeue job (or an srun one) whose text makes its reading a refused one is
    cancelled, as a rejected one is; the node still stays in service."""
    from pbsplug.adapters.slurm_read import JobTextError, SlurmError

    class Slurm:
        done: list[str] = []

        def update(self, *args):
            self.done.append(" ".join(args))

        def requeue_hold(self, job_id):
            raise SlurmError(f"scontrol requeuehold {job_id}: exit status 1: not requeueable")

        def job_state(self, job_id):
            return "RUNNING"

        def cancel(self, job_id):
            self.done.append(f"scancel {job_id}")

    ctx = slurm_bridge.Context({}, None, Slurm())
    answer = slurm_bridge._held_for_its_text(ctx, "5", JobTextError("forged"), "Prolog")
    assert answer == {"exit": 0, "stdout": "", "error": ""}
    assert Slurm.done == ["jobid=5 comment=pbsplug Prolog: forged", "scancel 5"]
