"""cgroupfs against the real cgroup v1 cpuset hierarchy (as root) and emulated v1/v2 trees.

Most tests run on all three backends with the same assertions, which is what keeps the
emulation honest: where the kernel gives a different answer, the test for the real one
fails. Real cgroups are made under a per-run prefix and scrubbed after every test with
plain system calls (not the code under test), frozen processes thawed first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pbsplug.testing import CPUSET_ROOT_LOCK, _machine_lock
from pbsplug_cpuset.cgroupfs import CgroupError, Cpusets, _proc_stat, detect
from pbsplug_cpuset.nodemask import format_list

CPUSET_MOUNT = Path("/sys/fs/cgroup/cpuset")
FREEZER_MOUNT = Path("/sys/fs/cgroup/freezer")
PREFIX = f"pbsplug_test_{os.getpid()}"
JOB = f"{PREFIX}/12.host"
ALL_CPUS = sorted(os.sched_getaffinity(0))
LAST_CPU = [ALL_CPUS[-1]]


def _v1_mount(point: Path, subsystem: str) -> bool:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[1] == str(point) and fields[2] == "cgroup":
            return subsystem in fields[3].split(",")
    return False


def _real_v1_problem() -> str | None:
    if os.geteuid() != 0:
        return "real cpusets need root"
    if not _v1_mount(CPUSET_MOUNT, "cpuset"):
        return f"{CPUSET_MOUNT} is not a cgroup v1 cpuset mount"
    return None


REAL_V1_PROBLEM = _real_v1_problem()
needs_two_cpus = pytest.mark.skipif(len(ALL_CPUS) < 2, reason="needs two CPUs to tell sets apart")


def _until(condition: Callable[[], object], timeout: float = 10.0) -> bool:
    """Poll ``condition``; ``timeout`` is only a bound so that a broken test ends."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _allowed_cpus(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"/proc/{pid}/status has no Cpus_allowed_list")


def _dead(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is None or stat[0] in ("Z", "X")


def _scrub(top: Path, timeout: float = 10.0) -> None:
    """Kill and remove a real test hierarchy with plain system calls, leaves first."""
    deadline = time.monotonic() + timeout
    while top.exists():
        for dirpath, _dirs, _files in os.walk(top, topdown=False):
            try:
                pids = (Path(dirpath) / "cgroup.procs").read_text().split()
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.rmdir(dirpath)
            except OSError:
                pass
        if time.monotonic() > deadline:
            raise AssertionError(f"test cgroup {top} could not be removed: remove it by hand")
        time.sleep(0.02)


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start processes in their own process group; the whole group dies at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*argv: str, stdin: int | None = None) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, stdin=stdin, start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=10)


def _cpusets(kind: str, tmp_path: Path, alone: bool = False) -> Iterator[Cpusets]:
    """`kind`'s cpusets. The real v1 root is the machine's (`make test` runs several
    pytests at once): a real-v1 test holds its lock (`pbsplug.testing.CPUSET_ROOT_LOCK`)
    shared, and whole when `alone`, for a test that makes its prefix mem_exclusive there."""
    if kind == "real-v1":
        if REAL_V1_PROBLEM:
            pytest.skip(REAL_V1_PROBLEM)
        with _machine_lock(CPUSET_ROOT_LOCK, shared=not alone):
            cpusets = detect(CPUSET_MOUNT.parent, version="1")
            try:
                yield cpusets
            finally:
                _scrub(CPUSET_MOUNT / PREFIX)
    elif kind == "real-v2":
        if os.geteuid() != 0:
            pytest.skip("real cgroups need root (CI runs as root)")
        try:
            cpusets = detect(CPUSET_MOUNT.parent, version="2")
        except CgroupError as exc:
            pytest.skip(f"no cgroup v2 hierarchy with the cpuset controller here ({exc})")
        try:
            yield cpusets
        finally:
            _scrub(cpusets.root / PREFIX)
    else:
        yield detect(tmp_path, version=kind[-1], emulate=True)


@pytest.fixture(params=["real-v1", "real-v2", "emulated-v1", "emulated-v2"])
def cs(request: pytest.FixtureRequest, tmp_path: Path, spawn: object) -> Iterator[Cpusets]:
    """Every backend: what the plugin relies on behaves the same on each."""
    yield from _cpusets(request.param, tmp_path)


@pytest.fixture(params=["real-v1", "emulated-v1"])
def v1(request: pytest.FixtureRequest, tmp_path: Path, spawn: object) -> Iterator[Cpusets]:
    yield from _cpusets(request.param, tmp_path)


@pytest.fixture(params=["real-v2", "emulated-v2"])
def v2(request: pytest.FixtureRequest, tmp_path: Path, spawn: object) -> Iterator[Cpusets]:
    """cgroup v2: the real one where it is mounted with the cpuset controller (CI's v2
    mount has none: that case skips saying so), and the emulated tree everywhere."""
    yield from _cpusets(request.param, tmp_path)


@pytest.fixture(params=["real-v1", "emulated-v1"])
def v1_alone(request: pytest.FixtureRequest, tmp_path: Path, spawn: object) -> Iterator[Cpusets]:
    """`v1` with no other test's real cpuset beside it: `_cpusets`' `alone`."""
    yield from _cpusets(request.param, tmp_path, alone=True)


@pytest.fixture
def real_v1(tmp_path: Path, spawn: object) -> Iterator[Cpusets]:
    yield from _cpusets("real-v1", tmp_path)


@pytest.fixture
def freezer(real_v1: Cpusets) -> Iterator[Path]:
    """A v1 freezer cgroup: its frozen processes survive SIGKILL and keep a cpuset busy."""
    if not _v1_mount(FREEZER_MOUNT, "freezer"):
        pytest.skip(f"{FREEZER_MOUNT} is not a cgroup v1 freezer mount")
    path = FREEZER_MOUNT / PREFIX
    path.mkdir()
    try:
        yield path
    finally:
        (path / "freezer.state").write_text("THAWED")
        _scrub(path)


def _job(cs: Cpusets, cpus: list[int] = LAST_CPU, name: str = JOB) -> Path:
    cs.ensure_parent(PREFIX)
    return cs.create(name, cpus, [0])


def _shell_with_a_child(cs: Cpusets, spawn: Callable[..., subprocess.Popen[bytes]]
                        ) -> subprocess.Popen[bytes]:
    """A shell in the job's cpuset once it has started a child there (a ``sleep``)."""
    _job(cs)
    shell = spawn("sh", "-c", "read go; sleep 60 & wait", stdin=subprocess.PIPE)
    cs.attach(JOB, shell.pid)
    shell.stdin.write(b"go\n")
    shell.stdin.flush()
    assert _until(lambda: len(cs.pids(JOB)) == 2), f"the child never showed: {cs.pids(JOB)}"
    return shell


# -- building and reading --------------------------------------------------------------------


def test_create_writes_the_lists_and_read_returns_them(cs: Cpusets) -> None:
    path = _job(cs)
    assert path == cs.root / PREFIX / "12.host"
    assert (path / "cpuset.cpus").read_text().strip() == format_list(LAST_CPU)
    assert (path / "cpuset.mems").read_text().strip() == "0"
    assert cs.read(JOB) == (LAST_CPU, [0])
    assert cs.exists(JOB)
    assert cs.pids(JOB) == []


@needs_two_cpus
def test_create_reuses_an_existing_cpuset_and_rewrites_it(cs: Cpusets) -> None:
    _job(cs, cpus=ALL_CPUS)
    _job(cs, cpus=[ALL_CPUS[0]])
    assert cs.read(JOB) == ([ALL_CPUS[0]], [0])


def test_ensure_parent_is_idempotent_and_gives_the_prefix_the_machine(cs: Cpusets) -> None:
    first = cs.ensure_parent(PREFIX)
    _job(cs)
    assert cs.ensure_parent(PREFIX) == first == cs.root / PREFIX
    assert cs.read(PREFIX) == cs.read("")
    assert cs.children(PREFIX) == ["12.host"]


def test_children_lists_directories_only(cs: Cpusets) -> None:
    _job(cs)
    cs.create(f"{PREFIX}/13.host", LAST_CPU, [0])
    assert cs.children(PREFIX) == ["12.host", "13.host"]
    assert cs.children(f"{PREFIX}/nothing") == []
    assert not cs.exists(f"{PREFIX}/nothing")


def test_names_stay_inside_the_root(cs: Cpusets) -> None:
    with pytest.raises(CgroupError, match="relative"):
        cs.create("../elsewhere", LAST_CPU, [0])
    with pytest.raises(CgroupError, match="refusing to kill"):
        cs.kill("")
    with pytest.raises(CgroupError, match="refusing to remove"):
        cs.remove("")


def test_cpus_the_machine_lacks_are_refused(cs: Cpusets) -> None:
    cs.ensure_parent(PREFIX)
    with pytest.raises(CgroupError, match=r"12\.host/cpuset\.cpus: cannot write '4095'"):
        cs.create(JOB, [4095], [0])


@needs_two_cpus
def test_cpus_outside_the_parent(cs: Cpusets) -> None:
    """v1 refuses them (EACCES); v2 accepts and grants only what the parent has."""
    first, last = [ALL_CPUS[0]], LAST_CPU
    if cs.version == 1:
        _job(cs, cpus=first)
        with pytest.raises(CgroupError, match=r"Permission denied: the CPUs must .* within "
                                              r"the parent's .*12\.host/cpuset\.cpus is '"):
            cs.create(f"{JOB}/step", last, [0])
    else:
        cs.ensure_parent(JOB)
        cs.create(JOB, first, [0])
        cs.create(f"{JOB}/step", last, [0])
        assert cs.read(f"{JOB}/step") == (first, [0])
        cs.create(JOB, ALL_CPUS, [0])  # widening the parent grants what the step asked
        assert cs.read(f"{JOB}/step") == (last, [0])


# -- processes -------------------------------------------------------------------------------


def test_attach_confines_the_process_and_moves_it(cs: Cpusets, spawn) -> None:
    _job(cs)
    proc = spawn("sleep", "60")
    cs.attach(JOB, proc.pid)
    assert cs.pids(JOB) == [proc.pid]
    if not cs.emulated:
        assert _allowed_cpus(proc.pid) == format_list(LAST_CPU)
    other = f"{PREFIX}/13.host"
    cs.create(other, LAST_CPU, [0])
    cs.attach(other, proc.pid)
    assert cs.pids(JOB) == []
    assert cs.pids(other) == [proc.pid]
    assert proc.poll() is None


def test_children_of_an_attached_process_are_in_the_cpuset(cs: Cpusets, spawn) -> None:
    shell = _shell_with_a_child(cs, spawn)
    child = next(pid for pid in cs.pids(JOB) if pid != shell.pid)
    assert _proc_stat(child)[1] == shell.pid
    if not cs.emulated:
        assert _allowed_cpus(child) == format_list(LAST_CPU)


def test_pids_include_child_cgroups_and_skip_zombies(cs: Cpusets, spawn) -> None:
    cs.ensure_parent(JOB)
    cs.create(JOB, LAST_CPU, [0])
    step = cs.create(f"{JOB}/step", LAST_CPU, [0])
    assert step == cs.path(f"{JOB}/step")
    live, zombie = spawn("sleep", "60"), spawn("sleep", "60")
    cs.attach(f"{JOB}/step", live.pid)
    cs.attach(f"{JOB}/step", zombie.pid)
    assert cs.pids(JOB) == sorted([live.pid, zombie.pid])
    os.kill(zombie.pid, signal.SIGKILL)  # not reaped: it stays a zombie
    assert _until(lambda: _proc_stat(zombie.pid)[0] == "Z")
    assert cs.pids(JOB) == [live.pid]
    assert cs.pids(f"{PREFIX}/nothing") == []


def test_attach_errors_say_what_to_do(cs: Cpusets, spawn) -> None:
    proc = spawn("sleep", "60")
    cs.ensure_parent(PREFIX)
    with pytest.raises(CgroupError, match=r"no such cgroup: create\(\) it"):
        cs.attach(JOB, proc.pid)
    cs.create(JOB, LAST_CPU, [0])
    gone = spawn("true")
    gone.wait()
    with pytest.raises(CgroupError, match=f"No such process: no process {gone.pid}"):
        cs.attach(JOB, gone.pid)
    if cs.version == 1:
        cs.create(JOB, [], [])
        with pytest.raises(CgroupError, match=r"No space left .* cpuset\.cpus or cpuset\.mems "
                                              "is empty"):
            cs.attach(JOB, proc.pid)
    else:
        with pytest.raises(CgroupError, match="only in leaf cgroups"):
            cs.attach(PREFIX, proc.pid)


def test_kill_kills_the_whole_tree(cs: Cpusets, spawn) -> None:
    shell = _shell_with_a_child(cs, spawn)
    pids = cs.pids(JOB)
    cs.kill(JOB)
    # Children go first, so the shell may see its child die and exit before its own SIGKILL
    # lands: only "everything is gone" is certain (else `sleep 60` would hold it a minute).
    shell.wait(timeout=10)
    assert _until(lambda: all(_dead(pid) for pid in pids))
    assert cs.pids(JOB) == []


def test_kill_uses_cgroup_kill_where_the_kernel_has_it(cs: Cpusets, spawn,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _job(cs)
    proc = spawn("sleep", "60")
    cs.attach(JOB, proc.pid)
    written: list[str] = []
    real_write = cs._kernel.write
    monkeypatch.setattr(cs._kernel, "write",
                        lambda path, value: (written.append(path.name), real_write(path, value)))
    cs.kill(JOB)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert written == (["cgroup.kill"] if cs.version == 2 else [])


def test_remove_kills_and_removes_leaves_first(cs: Cpusets, spawn) -> None:
    cs.ensure_parent(JOB)
    cs.create(f"{JOB}/step", LAST_CPU, [0])
    proc = spawn("sleep", "60")
    cs.attach(f"{JOB}/step", proc.pid)
    assert cs.remove(JOB, timeout=10) is True
    assert not cs.exists(JOB)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert cs.children(PREFIX) == []
    assert cs.remove(JOB) is True  # already gone


def test_rmdir_is_refused_with_ebusy_while_a_live_process_or_child_remains(
        cs: Cpusets, spawn) -> None:
    path = _job(cs)
    proc = spawn("sleep", "60")
    cs.attach(JOB, proc.pid)
    with pytest.raises(OSError) as busy:
        cs._kernel.rmdir(path)
    assert busy.value.errno == 16  # EBUSY, not ENOTEMPTY
    with pytest.raises(OSError) as parent_busy:
        cs._kernel.rmdir(cs.path(PREFIX))
    assert parent_busy.value.errno == 16
    os.kill(proc.pid, signal.SIGKILL)
    assert _until(lambda: _dead(proc.pid))  # a zombie does not hold the cgroup
    cs._kernel.rmdir(path)
    assert not path.exists()


def test_rename_marks_an_orphan_on_v1_only(cs: Cpusets, spawn) -> None:
    _job(cs)
    proc = spawn("sleep", "60")
    cs.attach(JOB, proc.pid)
    if cs.version == 2:
        with pytest.raises(CgroupError, match="Operation not permitted: cgroup v2 cannot rename"):
            cs.rename(JOB, f"{JOB}.orphan")
        return
    cs.rename(JOB, f"{JOB}.orphan")
    assert cs.children(PREFIX) == ["12.host.orphan"]
    assert cs.pids(f"{JOB}.orphan") == [proc.pid]
    cs.create(JOB, LAST_CPU, [0])
    with pytest.raises(CgroupError, match="already exists"):
        cs.rename(JOB, f"{JOB}.orphan")
    assert cs.remove(f"{JOB}.orphan") is True
    assert proc.wait(timeout=10) == -signal.SIGKILL


# -- v1 flags and v2 rules -------------------------------------------------------------------


def test_v1_flags_are_written_and_v2_ignores_them(cs: Cpusets) -> None:
    path = _job(cs)
    cs.create(JOB, LAST_CPU, [0], mem_hardwall=True, memory_spread_page=True)
    if cs.version == 2:
        assert not list(path.glob("cpuset.mem_*")) + list(path.glob("cpuset.memory_*"))
        return
    flags = ("cpuset.mem_exclusive", "cpuset.mem_hardwall", "cpuset.memory_spread_page")
    assert [(path / f).read_text().strip() for f in flags] == ["0", "1", "1"]
    cs.create(JOB, LAST_CPU, [0])
    assert [(path / f).read_text().strip() for f in flags] == ["0", "0", "0"]


def test_v1_mem_exclusive_needs_an_exclusive_parent_and_disjoint_siblings(
        v1_alone: Cpusets) -> None:
    cs = v1_alone
    cs.ensure_parent(PREFIX)
    with pytest.raises(CgroupError, match=r"ensure_parent\(prefix, mem_exclusive=True\)"):
        cs.create(JOB, LAST_CPU, [0], mem_exclusive=True)
    if [c for c in cs.children("") if c != PREFIX]:
        # Another cpuset beside the test's (a real PBS's pbs_jobs, run beside these tests
        # in CI) shares the memory nodes: the kernel refuses an exclusive prefix, and the
        # refusal is named so (it skipped here, and CI counted nothing).
        with pytest.raises(CgroupError, match=r"cpuset\.mem_exclusive: cannot write '1': "
                                              "Invalid argument: a sibling cpuset shares"):
            cs.ensure_parent(PREFIX, mem_exclusive=True)
        return
    cs.ensure_parent(PREFIX, mem_exclusive=True)
    path = cs.create(JOB, LAST_CPU, [0], mem_exclusive=True)
    assert (path / "cpuset.mem_exclusive").read_text().strip() == "1"
    with pytest.raises(CgroupError, match=r"13\.host/cpuset\.mems: cannot write '0': Invalid "
                                          "argument: .* cannot share memory nodes"):
        cs.create(f"{PREFIX}/13.host", LAST_CPU, [0])


def test_v2_needs_cpuset_in_the_parents_subtree_control(v2: Cpusets, spawn) -> None:
    cs = v2
    with pytest.raises(CgroupError, match=r"cpuset\.mems: cannot write '0': No such file .* "
                                          r"ensure_parent\(\) writes \+cpuset"):
        cs.create("loose", LAST_CPU, [0])
    _job(cs)
    assert (cs.root / "cgroup.subtree_control").read_text().split() == ["cpuset"]
    assert (cs.path(PREFIX) / "cgroup.subtree_control").read_text().split() == ["cpuset"]
    proc = spawn("sleep", "60")
    cs.attach(JOB, proc.pid)
    with pytest.raises(CgroupError, match="holds processes"):
        cs.ensure_parent(JOB)  # no controllers for children of a cgroup with processes


def test_v2_cgroup_kill_and_events(v2: Cpusets, spawn) -> None:
    cs = v2
    cs.ensure_parent(JOB)
    cs.create(f"{JOB}/step", LAST_CPU, [0])
    proc = spawn("sleep", "60")
    cs.attach(f"{JOB}/step", proc.pid)
    events = cs.path(JOB) / "cgroup.events"
    assert "populated 1" in cs._kernel.read(events)
    with pytest.raises(OSError) as not_one:
        cs._kernel.write(cs.path(JOB) / "cgroup.kill", "2")
    assert not_one.value.errno == 34  # ERANGE: only "1" is accepted
    cs._kernel.write(cs.path(JOB) / "cgroup.kill", "1")  # the whole subtree
    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert "populated 0" in cs._kernel.read(events)


# -- the really stuck cpuset -----------------------------------------------------------------


def test_a_frozen_process_keeps_the_cpuset_until_thawed(real_v1: Cpusets, freezer: Path,
                                                        spawn) -> None:
    cs = real_v1
    _job(cs)
    proc = spawn("sleep", "60")
    cs.attach(JOB, proc.pid)
    (freezer / "cgroup.procs").write_text(str(proc.pid))
    (freezer / "freezer.state").write_text("FROZEN")
    assert _until(lambda: (freezer / "freezer.state").read_text().strip() == "FROZEN")

    assert cs.remove(JOB, timeout=0.5, interval=0.05) is False
    assert cs.exists(JOB)
    assert cs.pids(JOB) == [proc.pid]
    assert proc.poll() is None

    (freezer / "freezer.state").write_text("THAWED")
    assert cs.remove(JOB, timeout=10) is True
    assert not cs.exists(JOB)
    assert proc.wait(timeout=10) == -signal.SIGKILL


# -- detect ----------------------------------------------------------------------------------


def test_detect_refuses_a_plain_directory_without_emulate(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match=f"no cpuset hierarchy .* at {tmp_path}: .* is not a "
                                          "mount point.* emulate=True"):
        detect(tmp_path)


def test_detect_refuses_a_missing_path(tmp_path: Path) -> None:
    for emulate in (False, True):
        with pytest.raises(CgroupError, match=f"{tmp_path}/nothing does not exist"):
            detect(tmp_path / "nothing", emulate=emulate)


def test_detect_refuses_an_unknown_version(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match="use 'auto', '1' or '2'"):
        detect(tmp_path, version="3", emulate=True)


@pytest.mark.skipif(REAL_V1_PROBLEM is not None, reason=str(REAL_V1_PROBLEM))
def test_detect_finds_v1_on_this_machine() -> None:
    found = detect()
    assert (found.root, found.version, found.emulated) == (CPUSET_MOUNT, 1, False)
    assert detect(CPUSET_MOUNT).root == CPUSET_MOUNT  # the cpuset mount itself
    with pytest.raises(CgroupError, match="real cgroup filesystem.* drop emulate"):
        detect(CPUSET_MOUNT, emulate=True)


def test_detect_reads_the_mount_table(tmp_path: Path) -> None:
    base = tmp_path / "cg roup"
    (base / "unified").mkdir(parents=True)
    (base / "cpuset").mkdir()
    (base / "unified" / "cgroup.controllers").write_text("cpu memory\n")
    escaped = str(base).replace(" ", "\\040")
    mounts = tmp_path / "mounts"
    mounts.write_text(f"cgroup2 {escaped}/unified cgroup2 rw,relatime 0 0\n")
    with pytest.raises(CgroupError, match="unified is cgroup2 with controllers 'cpu memory'"):
        detect(base, mounts=mounts)
    (base / "unified" / "cgroup.controllers").write_text("cpuset cpu memory\n")
    assert (detect(base, mounts=mounts).root, detect(base, mounts=mounts).version) == (
        base / "unified", 2)
    mounts.write_text(mounts.read_text()
                      + f"cgroup {escaped}/cpuset cgroup rw,relatime,cpuset 0 0\n")
    assert detect(base, mounts=mounts).version == 1  # auto prefers v1
    assert detect(base, version="2", mounts=mounts).version == 2
    with pytest.raises(CgroupError, match="no cgroup v1 cpuset hierarchy .* is missing"):
        detect(base / "unified", version="1", mounts=mounts)


def test_detect_emulated_layouts(tmp_path: Path) -> None:
    v2 = detect(tmp_path, emulate=True, cpus=[0, 1, 2, 3], mems=[0, 1])
    assert (v2.root, v2.version, v2.emulated) == (tmp_path, 2, True)
    assert v2.read("") == ([0, 1, 2, 3], [0, 1])
    assert not (tmp_path / "cpuset.cpus").exists()  # the v2 root has only the effective lists

    v1_dir = tmp_path / "v1"
    v1_dir.mkdir()
    v1 = detect(v1_dir, version="1", emulate=True, cpus=[0, 1])
    assert (v1.root, v1.version) == (v1_dir / "cpuset", 1)
    assert v1.read("") == ([0, 1], [0])
    again = detect(v1_dir, emulate=True, cpus=[5])  # auto: <mount>/cpuset exists
    assert (again.root, again.version) == (v1_dir / "cpuset", 1)
    assert again.read("") == ([0, 1], [0])  # an existing root is kept as it is
    assert detect(v1_dir / "cpuset", emulate=True).version == 1  # the cpuset root itself
