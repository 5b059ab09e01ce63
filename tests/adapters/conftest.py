"""A real OpenPBS for the adapter's tests, built and started with the tested recipe in
../shared/reference/openpbs-local (build.sh is idempotent: 0.1 s once built).

Without root, the recipe or a PBS that builds and starts, the tests fail under CI
(``CI=true``) and skip elsewhere, saying why."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pbsplug.engine.testing import PBSPLUG, LocalEngine, make_root, remove_root
from pbsplug.testing import until

from .slurm_cluster import ROOT as SLURM_ROOT
from .slurm_cluster import SlurmCluster

RECIPE = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "openpbs-local"
WRAPPERS = Path("/run/openpbs-local/bin")
#: A cpuset hierarchy for PBS's MoM: the recipe's namespace remounts /sys, so the cpuset
#: plugin's test mounts the cgroup v1 cpuset controller here before PBS starts (a mount made
#: later does not reach the MoM's mount namespace).
CPUSET_ROOT = Path("/run/pbsplug-cgroup")
MOM_HOOKS = Path("/var/spool/pbs/mom_priv/hooks")
#: core/adapters, where PBS's hook scripts and Slurm's programs import worker_client from.
ADAPTERS = str(Path(__file__).resolve().parents[2] / "core" / "adapters")


def worker_client():
    """core/adapters/worker_client.py imported as the scripts import it (by its own name,
    from its folder), not as part of pbsplug."""
    import sys

    sys.path.insert(0, ADAPTERS)
    try:
        import worker_client as module
    finally:
        sys.path.remove(ADAPTERS)
    return module


def _unavailable(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"real OpenPBS needed under CI: {why}", pytrace=False)
    pytest.skip(f"needs a real OpenPBS: {why}")


def _tail(text: str) -> str:
    return "\n".join(text.splitlines()[-15:])


class RealPbs:
    """The running PBS: its commands through the recipe's namespace wrappers."""

    #: Why the MoM has no cpuset hierarchy at CPUSET_ROOT, or None.
    cpuset_problem: str | None = None

    def __init__(self) -> None:
        self.env = {**os.environ, "PATH": f"{WRAPPERS}:{os.environ.get('PATH', '')}"}
        self.env.pop("PBSPLUG_SITE", None)

    #: Where the commands run, so where PBS writes the jobs' output and error files (the
    #: submission folder): a folder of the session's, sticky and open to all as /tmp is
    #: (the second user's jobs write there too), removed at its end (`real_pbs`).
    work = Path("/tmp")

    def run(self, *argv: str, input: str | None = None, check: bool = True,
            cwd: str | Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
        done = subprocess.run(list(argv), capture_output=True, text=True, input=input,
                              env=env or self.env, cwd=cwd or self.work, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{argv} failed ({done.returncode}): {done.stderr}"
                                 f"{done.stdout}")
        return done

    def qmgr(self, directive: str, check: bool = True) -> str:
        return self.run("qmgr", "-c", directive, check=check).stdout

    def pbsplug(self, site: Path, *args: str, check: bool = True,
                path: Path | None = None) -> subprocess.CompletedProcess:
        """``pbsplug --site SITE ARGS``; `path`: a folder of plugin distributions to add."""
        env = {**self.env, "PBSPLUG_HOME": str(site.parent)}
        if path is not None:
            env["PYTHONPATH"] = str(path)
        return self.run(PBSPLUG, "--site", str(site), *args, check=check, env=env)

    def qsub(self, script: str, *options: str) -> str:
        return self.run("qsub", *options, input=script).stdout.strip()

    def job(self, job_id: str) -> dict[str, Any]:
        out = self.run("qstat", "-xf", "-F", "json", job_id).stdout
        return json.loads(out)["Jobs"][job_id]

    def wait(self, job_id: str, states: str = "F", timeout: float = 90) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            attrs = self.job(job_id)
            if attrs["job_state"] in states:
                return attrs
            assert time.monotonic() < deadline, f"{job_id} stayed {attrs['job_state']}: " \
                                                f"{attrs.get('comment')}"
            time.sleep(0.3)

    def node(self, name: str = "") -> dict[str, Any]:
        nodes = json.loads(self.run("pbsnodes", "-a", "-F", "json").stdout)["nodes"]
        return nodes[name] if name else next(iter(nodes.values()))

    def hooks(self) -> str:
        return self.qmgr("list hook")

    def wait_mom_hooks(self, names: list[str], timeout: float = 30) -> None:
        """PBS pushes hook files to the MoM asynchronously (the recipe's pitfall 11)."""
        deadline = time.monotonic() + timeout
        while not all((MOM_HOOKS / f"{n}.CF").exists() and (MOM_HOOKS / f"{n}.PY").exists()
                      for n in names):
            assert time.monotonic() < deadline, f"hook files of {names} never reached the MoM"
            time.sleep(0.2)
        time.sleep(1.0)  # the .HK (attributes) follows the .PY and .CF

    def forget_jobs(self) -> None:
        """Delete every job left by a test (qdel -W force, as the recipe's pitfall 15 says)."""
        out = self.run("qselect", check=False).stdout.split()
        if out:
            self.run("qdel", "-W", "force", *out, check=False)

    def resvs(self) -> list[str]:
        """The reservations PBS lists (pbs_rstat's ids)."""
        out = self.run("pbs_rstat", check=False).stdout
        return [line.split()[0] for line in out.splitlines()
                if re.match(r"[RSM]\d+\.", line)]

    def forget_resvs(self, timeout: float = 90) -> None:
        """Delete every reservation left by a test and wait until PBS lists none: one
        deleted lingers a while without its queue (seen for minutes after pbs_rdel of a
        confirmed one whose job had been deleted), and while listed it keeps its vnodes
        from the power plugin (a reservation to come needs them awake)."""
        left = self.resvs()
        if left:
            self.run("pbs_rdel", *left, check=False)
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            time.sleep(1)
            left = self.resvs()
        assert not left, f"PBS still lists the reservations {left} {timeout:.0f} s after " \
                         "pbs_rdel"

    def forget_history(self) -> None:
        """Purge the finished jobs' history (the recipe enables it). It outlives restarts,
        and a server that once took its job numbers up from lower again (a probe's qterm,
        a crash) refuses every qsub whose number a kept job has: `Job with requested ID
        already exists` (qsub exit 161; seen on this shared PBS)."""
        out = self.run("qselect", "-x", "-s", "F", check=False).stdout.split()
        for start in range(0, len(out), 200):
            self.run("qdel", "-x", "-W", "force", *out[start:start + 200], check=False)

    def clean_hooks(self) -> None:
        """Hooks survive restarts (pitfall 16): remove every pbsplug hook."""
        for line in self.hooks().splitlines():
            if line.startswith("Hook pbsplug_"):
                self.qmgr(f"delete hook {line.split()[1]}", check=False)
        deadline = time.monotonic() + 20
        while list(MOM_HOOKS.glob("pbsplug_*")) and time.monotonic() < deadline:
            time.sleep(0.2)


def _mount_cpuset() -> str | None:
    """Mount the cpuset controller (cgroup v1) at CPUSET_ROOT/cpuset; why not, or None."""
    target = CPUSET_ROOT / "cpuset"
    if subprocess.run(["mountpoint", "-q", str(target)]).returncode == 0:
        return None
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "cgroup", "-o", "cpuset", "cpuset", str(target)],
                          capture_output=True, text=True)
    return None if done.returncode == 0 else f"mount of a cpuset hierarchy failed: " \
                                               f"{done.stderr.strip()}"


def _mom_sees(path: Path) -> bool:
    moms = subprocess.run(["pgrep", "-x", "pbs_mom"], capture_output=True, text=True)
    for pid in moms.stdout.split():
        try:
            return f" {path} " in Path(f"/proc/{pid}/mountinfo").read_text()
        except OSError:
            continue
    return False


#: PBS's long-lived processes (start.sh starts them; they outlive the session).
DAEMONS = ("pbs_comm", "pbs_server.bin", "pbs_sched", "pbs_mom", "pbs_ds_monitor", "postgres")


def _step(step: str, limit: float) -> None:
    # No descriptor of this process but the pipes reaches the recipe, so none reaches the
    # daemons it starts, which keep what they are given for good: a `flock` lock this
    # pytest runs under would be held by pbs_sched until PBS stops (`shared_with`).
    try:
        done = subprocess.run(["bash", str(RECIPE / step)], capture_output=True, text=True,
                              timeout=limit, stdin=subprocess.DEVNULL, close_fds=True)
    except subprocess.TimeoutExpired:
        _unavailable(f"{step} took longer than {limit} s")
    if done.returncode != 0:
        _unavailable(f"{step} failed:\n{_tail(done.stdout + done.stderr)}")


def shared_with(pids: list[int]) -> list[str]:
    """The files this process has open that one of `pids` holds too, as ``pid: path``,
    standard streams left out on both sides (pytest's capture files are a child's):
    descriptors those processes were handed when started."""
    def files(pid: int | str) -> dict[tuple[int, int], str]:
        out = {}
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return out
        for fd in fds:
            link = f"/proc/{pid}/fd/{fd}"
            try:
                st = os.stat(link)
                path = os.readlink(link)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and int(fd) > 2:
                out[(st.st_dev, st.st_ino)] = path
        return out

    mine = files("self")
    return [f"{pid}: {path}" for pid in pids for key, path in files(pid).items()
            if key in mine]


@contextlib.contextmanager
def resetting_socket(path: Path) -> Iterator[list[bytes]]:
    """A UNIX socket listening at `path` (its folder there already) that resets every
    connection once the request has come: closed with it unread, as a worker that leaves
    with a connection unaccepted does. Yields the first byte of each request, as they
    come."""
    import socket
    import threading

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    listener.settimeout(0.2)  # (to see `done`: no time is asserted)
    done, resets = threading.Event(), []

    def reset_each() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(60)
                resets.append(conn.recv(1, socket.MSG_PEEK))

    resetter = threading.Thread(target=reset_each, daemon=True)
    resetter.start()
    try:
        yield resets
    finally:
        done.set()
        resetter.join(60)
        listener.close()


def _daemons() -> list[int]:
    found = subprocess.run(["pgrep", "-x", "|".join(DAEMONS)], capture_output=True,
                           text=True)
    return [int(pid) for pid in found.stdout.split()]


@pytest.fixture(scope="session")
def built_pbs() -> Path:
    """OpenPBS built and installed (/opt/pbs); its ``pbs_python``."""
    if os.geteuid() != 0:
        _unavailable("the recipe builds and starts PBS as root")
    if not (RECIPE / "build.sh").exists():
        _unavailable(f"the recipe is not at {RECIPE}")
    _step("build.sh", 1200)
    return Path("/opt/pbs/bin/pbs_python")


@pytest.fixture(scope="session")
def real_pbs(built_pbs) -> Iterator[RealPbs]:
    RealPbs.cpuset_problem = _mount_cpuset()
    if RealPbs.cpuset_problem is None and subprocess.run(
            ["ip", "netns", "pids", "openpbs"], capture_output=True).returncode == 0 and (
            not _mom_sees(CPUSET_ROOT / "cpuset")):
        subprocess.run(["bash", str(RECIPE / "stop.sh")], capture_output=True, timeout=300)
    _step("start.sh", 300)
    held = shared_with(_daemons())
    assert not held, f"PBS's daemons hold files this pytest has open (a lock it runs " \
                     f"under?), and will until PBS stops: {held}; run stop.sh"
    pbs = RealPbs()
    pbs.work = Path(tempfile.mkdtemp(prefix="pbsplug-pbs-jobs-"))
    pbs.work.chmod(0o1777)
    pbs.clean_hooks()
    pbs.forget_jobs()
    pbs.forget_history()
    try:
        yield pbs
    finally:
        pbs.clean_hooks()
        pbs.forget_jobs()
        subprocess.run(["bash", str(RECIPE / "stop.sh")], capture_output=True, timeout=300)
        shutil.rmtree(pbs.work, ignore_errors=True)


def forget_both(pbs: RealPbs, local: LocalEngine) -> None:
    """After a parity test: every job left on the real PBS (qdel -W force) and on the
    module's local engine deleted."""
    pbs.forget_jobs()
    pbs.forget_resvs()
    assert local.client is not None
    left = [i for i, a in local.client("stat_jobs").items() if a["job_state"] != "F"]
    if left:
        local.client("delete", ids=left, force=True)


def assert_agree(differences: list[str], total: int, what: str = "rows") -> None:
    """A parity table's verdict: every difference listed, against how many were asked."""
    assert not differences, f"{len(differences)} of {total} {what} differ:\n" + \
        "\n".join(differences)


@pytest.fixture(scope="module")
def local() -> Iterator[LocalEngine]:
    """A local engine beside the real PBS, one for a test module (the parity tables ask
    both the same)."""
    root = make_root()
    eng = LocalEngine(root).start()
    yield eng
    eng.stop()
    remove_root(root)


@pytest.fixture
def pbs(real_pbs: RealPbs) -> Iterator[RealPbs]:
    """The real PBS with no pbsplug hook and no job, before and after the test."""
    real_pbs.clean_hooks()
    real_pbs.forget_jobs()
    node = real_pbs.node()
    if "offline" in node.get("state", ""):
        real_pbs.run("pbsnodes", "-r", "-C", "", next(iter(json.loads(real_pbs.run(
            "pbsnodes", "-a", "-F", "json").stdout)["nodes"])), check=False)
    yield real_pbs
    real_pbs.clean_hooks()
    real_pbs.forget_jobs()


@pytest.fixture
def operator(pbs: RealPbs, local: LocalEngine, unix_user: str) -> Iterator[str]:
    """The second user made an operator of the real PBS and of the module's local engine
    (each server's ``operators`` set to ``user@*``), and each server's ``operators`` put
    back as it was afterwards, whatever happens: the real PBS is shared."""
    def kept(print_server: str) -> list[str]:  # (`print server` writes a list as = and +=)
        return [line for line in print_server.splitlines()
                if line.startswith("set server operators ")]

    def qmgr_pbs(text: str) -> None:
        pbs.qmgr(text)

    def qmgr_local(text: str) -> None:
        local.pbs("qmgr", "-c", text, check=True)

    sides = ((qmgr_pbs, kept(pbs.qmgr("print server"))),
             (qmgr_local, kept(local.pbs("qmgr", "-c", "print server", check=True).stdout)))
    try:
        for qmgr, _ in sides:
            qmgr(f"set server operators = {unix_user}@*")
        yield unix_user
    finally:
        problems = []
        for qmgr, lines in sides:
            for text in ("unset server operators", *lines):
                try:
                    qmgr(text)
                except AssertionError as exc:
                    problems.append(str(exc))
        assert not problems, f"operators not put back: {problems}"


# -- Slurm ------------------------------------------------------------------------------------

#: Where the tests' own plugin notes what it saw.
SLURMTEST_LOG = SLURM_ROOT / "slurmtest.log"

def _slurm_unavailable(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"real Slurm needed under CI: {why}", pytrace=False)
    pytest.skip(f"needs a real Slurm: {why}")


@pytest.fixture(scope="session")
def real_slurm():
    """Slurm 22.05 from Debian's packages: munged, slurmctld and four slurmd as nodes n1-n4
    in partitions debug (n1, n2; the default), gpu (n3, n4) and all, and n3, n4 in a hidden
    partition and one only a group may use too, under /tmp/pbsplug-slurm
    (tests/adapters/slurm_cluster.py). One cluster for the whole session."""
    from .slurm_cluster import base_conf, install_packages

    if os.geteuid() != 0:
        _slurm_unavailable("the tests start munged, slurmctld and slurmd as root")
    why = install_packages()
    if why is not None:
        _slurm_unavailable(why)
    cluster = SlurmCluster()
    cluster.write_conf(base_conf(cluster.root))
    try:
        cluster.start()
    except (OSError, RuntimeError, AssertionError) as exc:
        cluster.stop()
        _slurm_unavailable(f"Slurm did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.cancel_all()
        cluster.stop()


class Installed:
    """pbsplug installed into the test's Slurm, with its folders."""

    def __init__(self, cluster: SlurmCluster, tmp: Path, dists):
        self.cluster = cluster
        # Under the cluster's folder, not pytest's (0700): the job's user runs TaskProlog and
        # reads its launch file.
        self.top = cluster.root / "t" / tmp.name
        shutil.rmtree(self.top, ignore_errors=True)  # an earlier session's, of the same name
        self.top.mkdir(parents=True, exist_ok=True)
        for folder in (self.top, self.top.parent):
            os.chmod(folder, 0o755)
        self.dir = self.top / "programs"
        self.state = self.top / "state"
        self.log = tmp / "pbsplug-slurm.log"
        self.run_dir = Path("/run/pbsplug-test") / tmp.name
        for folder in (self.run_dir, Path(f"{self.run_dir}-task")):  # an earlier session's
            shutil.rmtree(folder, ignore_errors=True)
        self.dists = dists
        self.home = tmp / "home"
        self.home.mkdir(exist_ok=True)
        self.restart = False  # whether slurmctld must restart to forget the programs

    def pbsplug(self, site_text: str | None, *args: str, check: bool = True
                ) -> subprocess.CompletedProcess:
        site = self.home / "site.toml"
        if site_text is not None:
            site.write_text(site_text)
        env = {**self.cluster.env, "PBSPLUG_HOME": str(self.home),
               "PYTHONPATH": str(self.dists.root)}
        return self.cluster.run(PBSPLUG, "--site", str(site), "slurm", *args, env=env,
                                check=check)

    def options(self) -> list[str]:
        return ["--dir", str(self.dir), "--slurm-conf", str(self.cluster.conf),
                "--state-dir", str(self.state), "--log-file", str(self.log),
                "--run-dir", str(self.run_dir), "--site-dir", str(self.dists.root)]

    def install(self, site_text: str) -> str:
        out = self.pbsplug(site_text, "install", "--apply", *self.options()).stdout
        self.restart = True
        self.cluster.restart_controller()  # 22.05: controller scripts are read at start
        self.cluster.reconfigure()
        return out

    def log_text(self) -> str:
        try:
            return self.log.read_text()
        except OSError:
            return ""

    def stop_workers(self) -> None:
        """The workers the programs started for this test (their argv names its run dir).
        Looked for again until none is left: a task worker's first process forks another
        serving process when its serving one is killed (worker._supervise), and a serving
        process whose first process is killed takes its place and forks one, which a kill
        of the other a moment later may not catch."""
        def none_left() -> bool:  # (those found are killed)
            found = False
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    argv = (proc / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"pbsplug.adapters.worker" in argv and any(
                        a.startswith(str(self.run_dir).encode()) for a in argv):
                    found = True
                    try:
                        os.kill(int(proc.name), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            return not found

        until(none_left, 30, "this test's pbsplug workers to end")


@pytest.fixture
def slurm(real_slurm, tmp_path, dists):
    """The real Slurm with no pbsplug line in slurm.conf, no job, every node in service,
    before and after the test."""
    real_slurm.cancel_all()
    real_slurm.resume_all()
    SLURMTEST_LOG.unlink(missing_ok=True)
    installed = Installed(real_slurm, tmp_path, dists)
    yield installed
    real_slurm.cancel_all()
    installed.pbsplug(None, "uninstall", "--dir", str(installed.dir), "--slurm-conf",
                      str(real_slurm.conf), check=False)
    if installed.restart:
        real_slurm.restart_controller()
    real_slurm.reconfigure()
    installed.stop_workers()
    real_slurm.resume_all()
