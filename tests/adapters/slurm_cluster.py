"""A real Slurm 22.05 (Debian's packages) on this machine: munged, slurmctld and one slurmd per
node (``slurmd -N``), after the tested recipe ../shared/reference/slurm-local. Used by the
Slurm tests' session fixture and by benchmarks/bench_slurm.py.

Everything lives under `ROOT` with its own slurm.conf (``SLURM_CONF``), so the machine's
/etc/slurm is not touched. Every process started is recorded and stopped by its pid.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path("/tmp/pbsplug-slurm")
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
BINARIES = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sbatch",
            "/usr/bin/scontrol")
#: The nodes: n1, n2 in partition debug (the default), n3, n4 in gpu, all four in all; n3, n4
#: also in `HIDDEN_PARTITION` and `GROUP_PARTITION`, which a plain squeue or sinfo of a user
#: other than root and SlurmUser does not show (nor their jobs).
NODES = ("n1", "n2", "n3", "n4")
#: A partition with Hidden=YES.
HIDDEN_PARTITION = "secret"
#: A partition with AllowGroups=`ALLOWED_GROUP`, a group with no member on Debian (root is
#: not in it; Slurm lets root and SlurmUser use the partition all the same).
GROUP_PARTITION = "staffonly"
ALLOWED_GROUP = "staff"
FIRST_PORT = 17101


def install_packages() -> str | None:
    """Debian's Slurm and munge installed (about 10 s); why not, or None."""
    if all(Path(b).exists() for b in BINARIES):
        return None
    if os.geteuid() != 0:
        return "Slurm is not installed and installing it needs root"
    if shutil.which("apt-get") is None:
        return "Slurm is not installed and there is no apt-get to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES],
                          capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update"], capture_output=True, env=env, timeout=300)
        done = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends",
                               *PACKAGES], capture_output=True, text=True, env=env,
                              timeout=600)
    if done.returncode != 0:
        return "apt-get install failed: " + " ".join(done.stderr.split()[-30:])
    return None


def base_conf(root: Path = ROOT, extra: str = "", power: bool = False,
              slurm_user: str = "root") -> str:
    """slurm.conf for four nodes on this host; `power`: n3, n4 start powered down (CLOUD);
    `slurm_user`: the user slurmctld runs as, and its programs (`SlurmCluster.own_folders`
    gives it the folders it writes)."""
    host = socket.gethostname().split(".")[0]
    nodes = (f"NodeName=n[1-4] NodeHostname={host} NodeAddr=127.0.0.1 "
             f"Port=[{FIRST_PORT}-{FIRST_PORT + 3}] CPUs=2 RealMemory=1000 State=UNKNOWN")
    if power:
        nodes = (f"NodeName=n[1-2] NodeHostname={host} NodeAddr=127.0.0.1 "
                 f"Port=[{FIRST_PORT}-{FIRST_PORT + 1}] CPUs=2 RealMemory=1000 State=UNKNOWN\n"
                 f"NodeName=n[3-4] NodeHostname={host} NodeAddr=127.0.0.1 "
                 f"Port=[{FIRST_PORT + 2}-{FIRST_PORT + 3}] CPUs=2 RealMemory=1000 "
                 "State=CLOUD")
    return f"""# slurm.conf of the pbsplug tests (tests/adapters/slurm_cluster.py)
ClusterName=pbsplugci
SlurmctldHost={host}
SlurmUser={slurm_user}
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=cred_expire=10
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=nohold_on_prolog_fail,batch_sched_delay=0,bf_interval=1
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=600
MailProg=/bin/true
SlurmdParameters=config_overrides
PrivateData=cloud
{extra}
{nodes}
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=n[3-4] MaxTime=INFINITE State=UP
PartitionName=all Nodes=n[1-4] MaxTime=INFINITE State=UP
PartitionName={HIDDEN_PARTITION} Nodes=n[3-4] MaxTime=INFINITE State=UP Hidden=YES
PartitionName={GROUP_PARTITION} Nodes=n[3-4] MaxTime=INFINITE State=UP AllowGroups={ALLOWED_GROUP}
"""


def unprivileged_commands(folder: Path, user: str = "nobody",
                          as_user: tuple[str, ...] = ("squeue",)) -> Path:
    """`folder` made a --bin-dir whose `as_user` commands (squeue; scontrol too for a test
    that reads only jobs with it) run /usr/bin's as `user` (no group of root's), and whose
    other Slurm commands are /usr/bin's: Slurm 22.05 shows root and SlurmUser the jobs of
    hidden partitions and of partitions their groups may not use whether squeue or
    scontrol is given ``-a`` or not, a user such as this one only with it."""
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    folder.mkdir(parents=True, exist_ok=True)
    group = grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
    for name in ("scontrol", "scancel", "sinfo", "sbatch", "squeue"):
        (folder / name).unlink(missing_ok=True)
        if name not in as_user:
            (folder / name).symlink_to(f"/usr/bin/{name}")
            continue
        (folder / name).write_text(f'#!/bin/sh\nexec {setpriv} --reuid={user} '
                                   f'--regid={group} --clear-groups /usr/bin/{name} "$@"\n')
        (folder / name).chmod(0o755)
    return folder


def hidden_jobs(cluster: SlurmCluster) -> tuple[str, str]:
    """Two jobs the partitions hide from a plain user: one running in HIDDEN_PARTITION on
    n3, and one suspended in GROUP_PARTITION on n4 (their ids)."""
    sleeper = "#!/bin/sh\nsleep 600\n"
    hidden = cluster.sbatch("-p", HIDDEN_PARTITION, "-w", "n3", "-n", "1", "-o", "/dev/null",
                            script=sleeper)
    grouped = cluster.sbatch("-p", GROUP_PARTITION, "-w", "n4", "-n", "1", "-o",
                             "/dev/null", script=sleeper)
    for job in (hidden, grouped):
        cluster.wait_job(job, lambda j: j["job_state"] == "RUNNING", 60, "running")
    cluster.run("scontrol", "suspend", grouped)
    cluster.wait_job(grouped, lambda j: j["job_state"] == "SUSPENDED", 60, "suspended")
    return hidden, grouped


class SlurmCluster:
    """A running Slurm under `root`; its commands run with ``SLURM_CONF`` set."""

    def __init__(self, root: Path = ROOT):
        self.root = root
        self.conf = root / "etc" / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        for key in ("PBSPLUG_SITE", "PBSPLUG_HOME", "SLURM_JOB_ID"):
            self.env.pop(key, None)
        self.pids: dict[str, int] = {}

    # -- processes -----------------------------------------------------------------------------
    def write_conf(self, text: str) -> None:
        """slurm.conf replaced whole (a new file renamed over it): a daemon reading it while
        it was rewritten in place found it empty and stopped (`fatal: Unable to process
        configuration file`), and its node was unusable for the tests after."""
        self.conf.parent.mkdir(parents=True, exist_ok=True)
        part = self.conf.with_name(f".{self.conf.name}.part")
        part.write_text(text)
        part.chmod(0o644)
        os.replace(part, self.conf)

    def _spawn(self, name: str, argv: list[str]) -> int:
        """Start a daemon in the foreground (-D) of its own session, as a grandchild that the
        shell in between leaves behind: not a child of the test process, whose own children
        (a hook's forked process) the runner's tests account for with waitpid(-1)."""
        log = self.root / "log" / f"{name}.out"
        shell = subprocess.run(
            ["/bin/sh", "-c", 'log=$1; shift; setsid "$@" </dev/null >>"$log" 2>&1 & echo $!',
             "sh", str(log), *argv], capture_output=True, text=True, env=self.env, check=True)
        pid = int(shell.stdout.split()[-1])
        self.pids[name] = pid
        return pid

    def start(self, nodes: tuple[str, ...] = NODES, timeout: float = 60) -> None:
        shutil.rmtree(self.root / "state", ignore_errors=True)  # no job or reservation kept
        # slurmctld -c numbers jobs from 1 again: a file an earlier run's job N left
        # (the tests' ran-N marks, ok-N.out) would stand for this run's job N
        for left in [*self.root.glob("ran-*"), *self.root.glob("ok-*.out")]:
            left.unlink(missing_ok=True)
        for sub in ("state", "run", "log", "etc"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self._fresh_spools()
        run_munge = Path("/run/munge")
        if not (run_munge / "munge.socket.2").exists() or not self._munge_answers():
            run_munge.mkdir(parents=True, exist_ok=True)
            shutil.chown(run_munge, "munge", "munge")
            self._spawn("munged", ["setpriv", "--reuid=munge", "--regid=munge",
                                   "--init-groups", "/usr/sbin/munged", "-F"])
            deadline = time.monotonic() + 10
            while not self._munge_answers():
                if time.monotonic() > deadline:
                    raise RuntimeError("munged did not start: " + self.log_tail("munged.out"))
                time.sleep(0.1)
        self._spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-c", "-f", str(self.conf)])
        for node in nodes:
            self.start_slurmd(node)
        self.wait_nodes(nodes, ("idle",), timeout)

    def start_slurmd(self, node: str, boot: bool = False) -> int:
        argv = ["/usr/sbin/slurmd", "-D", "-N", node, "-f", str(self.conf)]
        return self._spawn(f"slurmd-{node}", argv[:1] + (["-b"] if boot else []) + argv[1:])

    def reset(self) -> None:
        """Every slurmd and slurmctld stopped, and started again with a clean state
        (``slurmctld -c``): after a test that powered nodes down."""
        for name in [n for n in self.pids if n.startswith("slurmd")]:
            self.stop_process(name)
        self.stop_slurmds_by_pidfile()
        self.stop_process("slurmctld", wait=30)
        self._fresh_spools()
        self._spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-c", "-f", str(self.conf)])
        for node in NODES:
            self.start_slurmd(node)
        self.wait_nodes(NODES, ("idle",), 60)

    def _fresh_spools(self) -> None:
        """Each slurmd's spool folder made empty, before a ``slurmctld -c`` start: slurmd
        keeps the job ids whose credentials it saw (``cred_state``), one whose job's
        slurmstepd died while the cluster was down with no expiry, and runs no Prolog for
        a job whose id it has cached; numbered from 1 again, a task of this run given
        that id on that node ran without its Prolog (no execjob_begin, no task worker: its
        TaskProlog failed), and test_every_task_of_a_job_array... timed out."""
        for node in NODES:
            spool = self.root / "spool" / node
            shutil.rmtree(spool, ignore_errors=True)
            spool.mkdir(parents=True, exist_ok=True)

    def own_folders(self, user: str) -> None:
        """slurmctld's folders (state, pid and log files) given to `user`, its SlurmUser
        (slurmctld started as root runs as SlurmUser once it has read slurm.conf)."""
        for sub in ("state", "run", "log"):
            folder = self.root / sub
            folder.mkdir(parents=True, exist_ok=True)
            shutil.chown(folder, user, user)
        for name in ("log/slurmctld.log", "run/slurmctld.pid"):
            if (self.root / name).exists():
                shutil.chown(self.root / name, user, user)

    def _munge_answers(self) -> bool:
        try:
            munge = subprocess.run(["munge", "-n"], capture_output=True, timeout=5)
            return munge.returncode == 0 and subprocess.run(
                ["unmunge"], input=munge.stdout, capture_output=True, timeout=5
            ).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    def stop_process(self, name: str, wait: float = 10) -> None:
        pid = self.pids.pop(name, None)
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:
                if not Path(f"/proc/{pid}").exists():
                    return
            time.sleep(0.1)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def stop(self) -> None:
        for name in [n for n in self.pids if n.startswith("slurmd")]:
            self.stop_process(name)
        self.stop_slurmds_by_pidfile()
        self.stop_process("slurmctld")
        self.stop_process("munged")

    def stop_slurmds_by_pidfile(self) -> None:
        """slurmd processes the power test's ResumeProgram started (not our children)."""
        for pidfile in (self.root / "run").glob("slurmd-*.pid"):
            try:
                pid = int(pidfile.read_text().split()[0])
                if b"slurmd" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError, IndexError):
                pass

    def log_tail(self, name: str, lines: int = 20) -> str:
        try:
            text = (self.root / "log" / name).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # -- commands ------------------------------------------------------------------------------
    def run(self, *argv: str, check: bool = True, input: str | None = None,
            env: dict[str, str] | None = None, timeout: float = 60, **kw: Any
            ) -> subprocess.CompletedProcess:
        done = subprocess.run(list(argv), capture_output=True, text=True, input=input,
                              env=env or self.env, timeout=timeout, **kw)
        if check and done.returncode != 0:
            raise AssertionError(f"{argv} failed ({done.returncode}): {done.stderr}"
                                 f"{done.stdout}")
        return done

    def reconfigure(self) -> None:
        self.run("/usr/bin/scontrol", "reconfigure")

    def restart_controller(self) -> None:
        """slurmctld stopped and started again, keeping its jobs: 22.05 takes a changed
        PrologSlurmctld, EpilogSlurmctld or power-saving program only at its start."""
        self.stop_process("slurmctld", wait=30)
        self._spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-f", str(self.conf)])
        deadline = time.monotonic() + 30
        while self.run("/usr/bin/scontrol", "ping", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise AssertionError("slurmctld did not come back: "
                                     + self.log_tail("slurmctld.log"))
            time.sleep(0.2)

    def sbatch(self, *options: str, script: str = "#!/bin/sh\nhostname\n") -> str:
        out = self.run("/usr/bin/sbatch", "--parsable", *options, input=script,
                       cwd=str(self.root)).stdout
        return out.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, Any]:
        """The job as ``squeue --json`` has it (22.05's ignores -j: filtered here)."""
        out = self.run("/usr/bin/squeue", "--json").stdout
        for job in json.loads(out)["jobs"]:
            if str(job["job_id"]) == str(job_id):
                return job
        raise AssertionError(f"squeue does not know job {job_id}")

    def node(self, name: str) -> dict[str, Any]:
        """The node as ``sinfo --json`` has it (22.05's ignores -n: filtered here)."""
        out = self.run("/usr/bin/sinfo", "--json").stdout
        for node in json.loads(out)["nodes"]:
            if node["name"] == name:
                return node
        raise AssertionError(f"sinfo does not know node {name}")

    def node_states(self) -> dict[str, str]:
        out = self.run("/usr/bin/sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout
        return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)

    def wait_nodes(self, nodes: tuple[str, ...], states: tuple[str, ...],
                   timeout: float = 60) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            have = self.node_states()
            if all(have.get(n) in states for n in nodes):
                return have
            if time.monotonic() > deadline:
                raise AssertionError(f"nodes {nodes} not {states}: {have}\n"
                                     + self.log_tail("slurmctld.log"))
            time.sleep(0.2)

    def wait_job(self, job_id: str, until, timeout: float = 60,
                 what: str = "") -> dict[str, Any]:
        """Poll the job until `until(job)` is true."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if until(job):
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} never {what}: state {job['job_state']}, "
                                     f"reason {job.get('state_reason')}, restarts "
                                     f"{job.get('restart_cnt')}")
            time.sleep(0.2)

    def wait_done(self, job_id: str, timeout: float = 60) -> dict[str, Any]:
        return self.wait_job(job_id, lambda j: j["job_state"] in (
            "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"),
            timeout, "ended")

    def resume_all(self) -> None:
        """Every drained node back in service."""
        for name, state in self.node_states().items():
            if "drain" in state or "down" in state:
                self.run("/usr/bin/scontrol", "update", f"nodename={name}", "state=resume",
                         check=False)

    def cancel_all(self) -> None:
        # (by %F, an array's base id, which cancels its every task, else the job's id: %i
        # names a pending array's leftover tasks 7_[2-5%1], which scancel does not take, and
        # 22.05 refuses an array task's own id, %A's, "invalid JobId")
        out = sorted(set(self.run("/usr/bin/squeue", "-h", "-o", "%F",
                                  check=False).stdout.split()))
        if out:
            self.run("/usr/bin/scancel", *out, check=False)
            deadline = time.monotonic() + 30
            while self.run("/usr/bin/squeue", "-h", "-t", "R,CG,CF,PD", "-o", "%i",
                           check=False).stdout.strip() and time.monotonic() < deadline:
                time.sleep(0.2)
