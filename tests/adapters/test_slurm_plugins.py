"""The project's plugins, unchanged, inside a real Slurm (conftest.py starts it), each end to
end: installed with ``pbsplug slurm install --apply``, seen by real sbatch jobs."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pbsplug.testing import CPUSET_ROOT_LOCK, _machine_lock, site_toml, until

from .conftest import Installed
from .slurm_cluster import SlurmCluster

OUT = Path("/tmp/pbsplug-slurm/out")


def _out_dir() -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    os.chmod(OUT, 0o1777)
    return OUT


def _as(user: str, cluster: SlurmCluster, *options: str, script: str) -> str:
    out = cluster.run("/usr/bin/sbatch", "--parsable", *options, input=script, user=user,
                      cwd="/tmp").stdout
    return out.strip().split(";")[0]


def test_mjf_files_in_prolog_and_epilog_and_variables_through_task_prolog(
        slurm: Installed, unix_user: str, tmp_path):
    cluster = slurm.cluster
    base = slurm.top / "mjf"
    config = {"machinefeatures_dir": str(base / "machine"),
              "jobfeatures_dir": str(base / "job"), "hs06_per_cpu": 10.0}
    out = slurm.install(site_toml("mjf", config, freq=2))
    assert "mjf: exechost_startup: HealthCheckProgram" in out
    assert "mjf: execjob_launch: TaskProlog, before each task" in out
    text = cluster.conf.read_text()
    assert "HealthCheckInterval=2" in text and f"TaskProlog={slurm.dir}/task_prolog" in text
    host = os.uname().nodename.split(".")[0]
    machine = base / "machine" / host
    deadline_job = cluster.sbatch("-J", "wait", "-o", "/dev/null", script="#!/bin/sh\n")
    cluster.wait_done(deadline_job)
    cluster.wait_job(deadline_job, lambda j: (machine / "total_cpu").exists(), timeout=30,
                     what="followed by $MACHINEFEATURES from HealthCheckProgram")
    outdir = _out_dir()
    job = _as(unix_user, cluster, "-J", "mjf", "-n", "2", "-t", "10",
              "-o", f"{outdir}/mjf-%j.out",
              script="#!/bin/sh\nid -un\necho MF=$MACHINEFEATURES\necho JF=$JOBFEATURES\n"
                     "cat $JOBFEATURES/allocated_cpu $JOBFEATURES/wall_limit_secs\n"
                     "cat $MACHINEFEATURES/hs06\n")
    assert cluster.wait_done(job)["job_state"] == "COMPLETED"
    lines = Path(f"{outdir}/mjf-{job}.out").read_text().split()
    assert lines[0] == unix_user
    assert lines[1] == f"MF={machine}"
    assert lines[2] == f"JF={base / 'job' / job}"
    assert lines[3:5] == ["2", "600"]  # -n 2, -t 10 minutes
    assert float(lines[5]) == 20.0  # 2 CPUs per node x 10
    cluster.wait_job(job, lambda j: not (base / "job" / job).exists(), timeout=30,
                     what="followed by its $JOBFEATURES removed in the Epilog")


def test_task_prolog_asked_by_anything_but_a_slurm_task_is_refused(slurm: Installed,
                                                                   unix_user: str):
    """The task worker's socket is open to every user: it acts only for a task process of
    the job's own user, whatever the request says."""
    cluster = slurm.cluster
    base = slurm.top / "mjf"
    slurm.install(site_toml("mjf", {"machinefeatures_dir": str(base / "machine"),
                                    "jobfeatures_dir": str(base / "job")}))
    job = cluster.sbatch("-J", "root-job", "-o", "/dev/null",
                         script="#!/bin/sh\nsleep 30\n")
    cluster.wait_job(job, lambda j: j["job_state"] == "RUNNING", what="running")
    # RUNNING comes before the node's Prolog, which starts the task worker.
    program = (slurm.dir / "task_prolog").read_text()
    sock = Path(program.split("task_main(")[1].split("'")[1])
    until(sock.exists, 60, "the task worker")
    # The user runs the TaskProlog program by hand, claiming root's running job.
    done = cluster.run(str(slurm.dir / "task_prolog"), check=False, user=unix_user,
                       cwd="/tmp", env={"SLURM_JOB_ID": job, "SLURMD_NODENAME": "n1"})
    assert done.returncode == 1
    assert "not asked by a Slurm task" in done.stderr
    assert "export" not in done.stdout
    assert "refused: its parent" in slurm.log_text()


STEPMARK = """
from pbsplug import PluginInfo, hookimpl
plugin_info = PluginInfo(api="1.0", events=("execjob_launch",))
@hookimpl
def execjob_launch(event):
    with open({mark!r}, "a") as fh:
        fh.write(f"{{event.job.id}} {{','.join(event.vnode_list)}} "
                 f"said={{event.env.get('SLURM_JOB_ID')}},{{event.env.get('SLURMD_NODENAME')}}\\n")
"""
#: TaskProlog with what a job's owner can make of its environment (LD_PRELOAD runs their
#: code in it): SLURM_JOB_ID and SLURMD_NODENAME of their choice, then pbsplug's program
#: in the same process.
FORGE = """#!/bin/sh
if [ -n "$FORGE_JOB" ]; then
  export SLURM_JOB_ID="$FORGE_JOB" SLURMD_NODENAME="$FORGE_NODE"
fi
exec {program}
"""


def test_task_prolog_acts_for_the_tasks_own_job_and_node_whatever_its_environment_says(
        slurm: Installed, dists, unix_user: str):
    """A user's task named, through TaskProlog's environment, another of their running jobs
    and that job's node: the hook ran for that job on that node (the task put in its
    cpuset, the node drained by an error with offline_vnodes). The job and node are now
    those of the task's step, as its slurmstepd (root's) says."""
    cluster = slurm.cluster
    mark = _out_dir() / f"stepmark-{slurm.top.name}"
    mark.unlink(missing_ok=True)
    dists.add("stepmark", STEPMARK.format(mark=str(mark)))
    slurm.install(site_toml("stepmark"))
    forge = slurm.top / "forge-task-prolog"
    forge.write_text(FORGE.format(program=slurm.dir / "task_prolog"))
    forge.chmod(0o755)
    text = cluster.conf.read_text()
    assert f"TaskProlog={slurm.dir}/task_prolog\n" in text
    cluster.write_conf(text.replace(f"TaskProlog={slurm.dir}/task_prolog\n",
                                    f"TaskProlog={forge}\n"))
    cluster.reconfigure()
    other = _as(unix_user, cluster, "-J", "other", "-p", "debug", "-w", "n2", "-o",
                "/dev/null", script="#!/bin/sh\nsleep 120\n")
    cluster.wait_job(other, lambda j: j["job_state"] == "RUNNING", what="running")
    until(lambda: mark.exists() and f"{other} n2 " in mark.read_text(), 60,
          "the other job's own TaskProlog")
    job = _as(unix_user, cluster, "-J", "forger", "-p", "debug", "-w", "n1", "-o", "/dev/null",
              f"--export=ALL,FORGE_JOB={other},FORGE_NODE=n2", script="#!/bin/sh\ntrue\n")
    assert cluster.wait_done(job)["job_state"] == "COMPLETED"
    # the other job's own task, then the forger's: the forged environment reached the hook,
    # and the job and node are the forger's task's own
    assert mark.read_text().splitlines() == [f"{other} n2 said={other},n2",
                                             f"{job} n1 said={other},n2"]
    assert f"its environment names job {other} on n2, its step's slurmstepd job {job} on n1" \
        in slurm.log_text()


@pytest.fixture
def atom(tmp_path):
    from pbsplug_cray_atom.fake import FakeAtom

    service = FakeAtom(tmp_path / "atomd.sock").start()
    yield service
    service.stop()


def test_cray_atom_tells_the_service_of_each_job_start_and_end(slurm: Installed,
                                                               atom):
    cluster = slurm.cluster
    slurm.install(site_toml("cray_atom", {"unix_socket_file": str(atom.socket_path)}))
    job = cluster.sbatch("-J", "atom", "--exclusive", "-o", "/dev/null")
    assert cluster.wait_done(job)["job_state"] == "COMPLETED"
    cluster.wait_job(job, lambda j: any(r.method == "DELETE" for r in atom.requests),
                     what="DELETEd from ATOM")
    posts = [r for r in atom.requests if r.method == "POST"]
    assert len(posts) == 1 and str(posts[0].body["jobid"]) == job
    assert posts[0].body["exclusive"] is True
    assert atom.jobs == {}


def test_cray_atom_a_failed_post_drains_the_node_and_requeues_the_job(slurm: Installed,
                                                                      atom):
    cluster = slurm.cluster
    slurm.install(site_toml("cray_atom", {"unix_socket_file": str(atom.socket_path)}))
    atom.script("POST", 503, {"status": 503, "detail": "node health check failed"})
    job = cluster.sbatch("-J", "atom", "-w", "n2", "-o", "/dev/null")
    cluster.wait_job(job, lambda j: j["restart_cnt"] >= 1, what="requeued")
    assert cluster.node("n2")["reason"] == "offlined by hook 'cray_atom' due to hook error"
    assert "node health check failed" in slurm.log_text()


CPUSET_ROOT = Path("/sys/fs/cgroup")


def test_cpuset_a_cpuset_per_job_from_the_prolog_with_the_task_in_it(slurm: Installed,
                                                                     unix_user: str):
    """A machine whose cgroup v1 cpuset hierarchy is mounted (this CI's is): Slurm runs no
    task/cgroup here (TaskPlugin=task/none), so the plugin's cpuset is the job's."""
    if not (CPUSET_ROOT / "cpuset" / "cpuset.cpus").exists():
        if os.environ.get("CI") == "true":
            pytest.fail("cgroup v1's cpuset hierarchy is not mounted at /sys/fs/cgroup/cpuset")
        pytest.skip("needs cgroup v1's cpuset hierarchy at /sys/fs/cgroup/cpuset")
    cluster = slurm.cluster
    prefix = f"pbsplug_slurmtest_{os.getpid()}"
    slurm.install(site_toml("cpuset", {"cgroup_root": str(CPUSET_ROOT), "cgroup_version": "1",
                                       "cgroup_prefix": prefix,
                                       "state_dir": str(slurm.top / "cpuset-state")}))
    # (the real cpuset root's lock, shared: another pytest's test may make its prefix
    # mem_exclusive there, which no cpuset beside it survives)
    with _machine_lock(CPUSET_ROOT_LOCK, shared=True):
        outdir = _out_dir()
        try:
            job = _as(unix_user, cluster, "-J", "cpuset", "-n", "1", "-w", "n1",
                      "-o", f"{outdir}/cpuset-%j.out",
                      script="#!/bin/sh\ncat /proc/self/cpuset\n"
                             "cat /sys/fs/cgroup/cpuset$(cat /proc/self/cpuset)/cpuset.cpus\n")
            assert cluster.wait_done(job)["job_state"] == "COMPLETED", slurm.log_text()
            lines = Path(f"{outdir}/cpuset-{job}.out").read_text().split()
            assert lines[0] == f"/{prefix}/{job}"
            assert len(lines[1].replace("-", ",").split(",")) == 1  # one CPU: -n 1
            until(lambda: not (CPUSET_ROOT / "cpuset" / prefix / job).exists(), 30,
                  "the job's cpuset removed by the Epilog")
        finally:
            subprocess.run(["rmdir", str(CPUSET_ROOT / "cpuset" / prefix)], capture_output=True)


ATTACK = r"""
import json, socket, sys, threading
path, idle_count = sys.argv[1], int(sys.argv[2])

def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s

def answer(s):
    s.settimeout(120)
    chunks = []
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as exc:
        return f"socket error: {exc}"
    try:
        return json.loads(b"".join(chunks))["error"]
    except (ValueError, KeyError, TypeError):
        return "no answer"

huge = connect()  # first: it gets one of this user's slots at once

def flood():
    try:
        huge.sendall(b'{"script": "' + b"x" * (1 << 20) + b'"}')
        huge.shutdown(socket.SHUT_WR)
    except OSError:
        pass

threading.Thread(target=flood, daemon=True).start()
slow = connect()
slow.sendall(b'{"scr')  # and never the rest
idle = [connect() for _ in range(idle_count)]  # sending nothing
print("holding", flush=True)
sys.stdin.read()  # until the test closes it: its task has run
out = {"huge": answer(huge), "slow": answer(slow), "idle": [answer(s) for s in idle]}
print(json.dumps(out), flush=True)
"""


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    """What `proc` wrote to its stdout up to its first line break, or by `timeout` seconds
    (a hang guard: a bare readline waits for ever on a process that writes nothing)."""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    got = b""
    while b"\n" not in got:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        got += chunk
    return got.decode(errors="replace")


def _kill_group(proc: subprocess.Popen) -> str:
    """Kill `proc`'s process group (it leads one: ``start_new_session``), the processes it
    started as another user too, reap it, and say how it ended and what it wrote to stderr.
    Only while `proc` is not reaped: until then (a zombie too) its number is its group's;
    once reaped (it ended on its cue), the number may be another process's group."""
    if proc.returncode is not None:
        return f"exit status {proc.returncode}"
    with contextlib.suppress(ProcessLookupError):  # (all of them ended already)
        os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    return f"exit status {proc.returncode}, stderr {err[-2000:]!r}"


def test_the_task_workers_socket_holds_against_a_flooding_user(slurm: Installed, attacker,
                                                               tmp_path):
    """Every local user can reach the task worker, and each request costs a root fork: a
    user opening many connections, sending slowly or sending a huge request is held to its
    own few slots, answered with one line, and logged, while another user's task still gets
    its TaskProlog answer."""
    import shutil

    from pbsplug.adapters import worker

    cluster = slurm.cluster
    base = slurm.top / "mjf"
    slurm.install(site_toml("mjf", {"machinefeatures_dir": str(base / "machine"),
                                    "jobfeatures_dir": str(base / "job")}, freq=2))
    machine = base / "machine" / os.uname().nodename.split(".")[0]
    until((machine / "total_cpu").exists, 60, "$MACHINEFEATURES from HealthCheckProgram")
    job = cluster.sbatch("-J", "holder", "-w", "n1", "-o", "/dev/null",
                         script="#!/bin/sh\nsleep 300\n")
    cluster.wait_job(job, lambda j: j["job_state"] == "RUNNING", what="running")
    program = (slurm.dir / "task_prolog").read_text()
    sock = Path(program.split("task_main(")[1].split("'")[1])
    until(sock.exists, 60, "the task worker")
    idle = worker.MAX_RUNNING_PER_UID + worker.MAX_WAITING_PER_UID + 20
    runuser = shutil.which("runuser") or "runuser"
    attack = subprocess.Popen(  # (the leader of a group of its own: killed whole on failure)
        [runuser, "-u", attacker.user, "--", f"{attacker.venv}/bin/python", "-c", ATTACK,
         str(sock), str(idle)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True,
        text=True, cwd="/tmp", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    try:
        first = _first_line(attack, 120)
        if first.strip() != "holding":
            pytest.fail(f"the attacker did not start: {first!r}; {_kill_group(attack)}")
        # Another user's task, while the attacker holds every connection it could open.
        task = cluster.run("/usr/bin/srun", "-w", "n2", "/usr/bin/printenv",
                           "MACHINEFEATURES", user="nobody", cwd="/tmp", check=False,
                           timeout=120)
        try:  # stdin closed, the attacker's cue: it reads its answers and ends
            out, err = attack.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            pytest.fail("the attacker did not end within 300 s of its cue; "
                        f"{_kill_group(attack)}")
        out = first + out
    finally:  # whatever failed: none of the attacker's processes outlives the test
        _kill_group(attack)
    assert task.returncode == 0, (task.stderr, out, slurm.log_text()[-3000:])
    assert task.stdout.strip() == str(machine)  # TaskProlog's answer reached the task
    assert attack.returncode == 0, err
    seen = json.loads(out.splitlines()[-1])
    limit = worker.MAX_PUBLIC_REQUEST
    assert seen["huge"] in (f"pbsplug worker: refused: request over {limit} bytes",
                            "socket error: [Errno 104] Connection reset by peer")
    assert seen["slow"] == "pbsplug worker: refused: request not sent within 10 s"
    busy = [a for a in seen["idle"] if "refused: busy" in a]
    assert len(busy) >= 20  # over this user's slots and waiting places: refused at once
    assert all(a.startswith("pbsplug worker: refused: ") for a in seen["idle"]), seen["idle"]
    text = slurm.log_text()
    assert f"request from uid {attacker.uid} refused: request over {limit} bytes" in text
    assert f"request from uid {attacker.uid} refused: request not sent within 10 s" in text
    assert f"request from uid {attacker.uid} refused: busy" in text
    assert text.count("refused: busy") <= 2  # once a minute per uid and reason
