"""End to end on the local engine.

- Real cpusets (root, cgroup v1's cpuset hierarchy): a job's processes are confined to its
  CPUs, and a really stuck cpuset (a process the freezer holds, which SIGKILL cannot end)
  goes through the retry, the report, the offline and the return to service.
- Octants and starvation on a described machine (a sysfs tree of eight one-CPU NUMA nodes and
  an emulated cgroup tree): a mixed workload in which no small job straddles, and a large job
  that starves behind small ones runs within a bounded time.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from pbsplug.testing import CPUSET_ROOT_LOCK, _machine_lock, site_toml, until
from pbsplug_cpuset.fake_sysfs import write_sysfs

CPUSET = Path("/sys/fs/cgroup/cpuset")
MESSAGE = "Hook cpuset: Unable to clean up one or more cgroups"


def site(**config) -> str:
    return site_toml("cpuset", config, freq=1)


def real_cpusets() -> None:
    if os.geteuid() != 0:
        pytest.skip("real cpusets need root (CI runs as root)")
    mounts = Path("/proc/self/mounts").read_text().split("\n")
    if not any(f" {CPUSET} cgroup " in f" {line} " and "cpuset" in line for line in mounts):
        pytest.skip(f"{CPUSET} is not a cgroup v1 cpuset mount")


@pytest.fixture
def real(tmp_path):
    """The site values for real cpusets under a prefix of this test's own, removed after;
    `CPUSET_ROOT_LOCK` held shared meanwhile."""
    real_cpusets()
    prefix = f"pbsplug_e2e_{os.getpid()}"
    with _machine_lock(CPUSET_ROOT_LOCK, shared=True):
        yield {"cgroup_prefix": prefix, "state_dir": str(tmp_path / "state"),
               "kill_timeout": 0.5}
        top = CPUSET / prefix
        for path in sorted(top.glob("*"), reverse=True):
            if path.is_dir():
                for _ in range(50):
                    try:
                        path.rmdir()
                        break
                    except OSError:
                        time.sleep(0.1)
        if top.is_dir():
            top.rmdir()


def allowed(text: str) -> list[int]:
    """The CPUs of a ``Cpus_allowed_list:`` line."""
    match = re.search(r"Cpus_allowed_list:\s*(\S+)", text)
    assert match, text
    out = []
    for part in match.group(1).split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def test_a_jobs_processes_are_confined_to_its_cpus(local_engine, real, tmp_path):
    engine = local_engine(site(**real))
    node = next(iter(engine.nodes()))
    ncpus = engine.nodes()[node]["resources_available"]["ncpus"]
    report = tmp_path / "report"
    # The job and a child it starts report what they may run on, while the job runs.
    script = (f"grep Cpus_allowed_list /proc/self/status > {report}.top\n"
              f"sh -c 'grep Cpus_allowed_list /proc/self/status' > {report}.child\n"
              f"cat /proc/self/cgroup > {report}.cgroup\n")
    first = engine.submit(script, Resource_List={"select": "1:ncpus=1"})
    attrs = engine.wait(first)
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    cpus = allowed((report.parent / "report.top").read_text())
    assert len(cpus) == 1, "a one-CPU job may run on one CPU only"
    assert allowed((report.parent / "report.child").read_text()) == cpus
    assert f"cpuset:/{real['cgroup_prefix']}/{first}" in (
        report.parent / "report.cgroup").read_text()
    # The cpuset is gone once the job is.
    assert not (CPUSET / real["cgroup_prefix"] / first).exists()
    if ncpus >= 2:  # two jobs at once get different CPUs
        held = tmp_path / "held"
        a = engine.submit(f"grep Cpus_allowed_list /proc/self/status > {held}.a; sleep 2\n",
                          Resource_List={"select": "1:ncpus=1"})
        b = engine.submit(f"grep Cpus_allowed_list /proc/self/status > {held}.b; sleep 2\n",
                          Resource_List={"select": "1:ncpus=1"})
        engine.wait(a)
        engine.wait(b)
        assert set(allowed(Path(f"{held}.a").read_text())).isdisjoint(
            allowed(Path(f"{held}.b").read_text()))


def test_a_really_stuck_cpuset_is_retried_reported_offlined_and_returned(
        local_engine, real, tmp_path, frozen):
    engine = local_engine(site(offline_stuck_after=0, online_nodes_min_delay=0, **real))
    node = next(iter(engine.nodes()))
    pidfile = tmp_path / "child.pid"
    # The job leaves a child behind, which the test freezes: SIGKILL cannot end it. The job
    # ends once it is frozen (after a second, on a machine busy with other tests, the child
    # was killed before the freezer had it).
    here = {"select": f"1:ncpus=1:vnode={node}"}  # the machine may have several NUMA vnodes
    job_id = engine.submit(f"sleep 300 & echo $! > {pidfile}\n"
                           f"while [ ! -e {pidfile}.frozen ]; do sleep 0.05; done\n",
                           Resource_List=here)
    until(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=30)
    child = frozen(int(pidfile.read_text()))
    Path(f"{pidfile}.frozen").touch()
    try:
        engine.wait(job_id)
        stuck = until(lambda: engine.nodes()[node].get("cpuset_stuck"), timeout=30)
        assert stuck.startswith(f"{job_id}@")
        attrs = engine.nodes()[node]
        assert set(attrs["state"].split(",")) == {"busy", "offline"}
        assert attrs["comment"] == MESSAGE
        assert (CPUSET / real["cgroup_prefix"] / job_id).is_dir()
        # A job queued meanwhile does not start on the stuck vnode.
        waiting = engine.submit("true\n", Resource_List=here)
        time.sleep(2)
        assert engine.job(waiting)["job_state"] == "Q"
        log = engine.log()
        assert re.search(rf"cpuset {real['cgroup_prefix']}/{re.escape(job_id)} is stuck: 1 "
                         rf"process\(es\) outlived the kill \({child}\)", log), log[-2000:]
    finally:
        frozen.thaw()
    # Thawed, the child dies; the next exechost_periodic reclaims the cpuset, and the vnode
    # returns to service: the waiting job runs.
    until(lambda: not engine.nodes()[node].get("cpuset_stuck"), timeout=30)
    attrs = engine.nodes()[node]
    assert "offline" not in attrs["state"] and "busy" not in attrs["state"]
    assert not attrs.get("comment")
    assert engine.wait(waiting, timeout=30)["Exit_status"] == 0
    assert not (CPUSET / real["cgroup_prefix"] / job_id).exists()
    assert f"stuck cpuset {real['cgroup_prefix']}/{job_id} reclaimed" in engine.log()


# -- octants and starvation on a described machine ------------------------------------------

OCTANTS = {"n0": 0, "n1": 1, "n2": 2, "n3": 3, "n4": 4, "n5": 5, "n6": 6, "n7": 7}


@pytest.fixture
def octant_engine(local_engine, tmp_path):
    """Eight one-CPU vnodes n0..n7, each a NUMA node of a described machine, in two octants
    of four; an emulated cgroup tree; starvation after 4 s."""
    write_sysfs(tmp_path / "sys", {n: str(n) for n in range(8)})
    (tmp_path / "cg").mkdir()
    engine = local_engine(site(
        emulate=True, cgroup_version="1", cgroup_root=str(tmp_path / "cg"),
        sysfs_root=str(tmp_path / "sys"), state_dir=str(tmp_path / "state"),
        vnode_numa=OCTANTS, octants=["0-3", "4-7"], starve_after=4))
    defaults = list(engine.nodes())
    for name in OCTANTS:
        engine.pbs("qmgr", "-c", f"create node {name} resources_available.ncpus=1",
                   check=True)
    for name in defaults:
        engine.pbs("qmgr", "-c", f"delete node {name}", check=True)
    return engine


def octant(vnode: str) -> int:
    return int(vnode[1:]) // 4


def test_no_small_job_straddles_and_a_starved_large_job_runs_in_bounded_time(octant_engine):
    engine = octant_engine
    small = []
    for i in range(16):  # one to three nodes each, a second or two
        nodes = 1 + i % 3
        small.append(engine.submit(f"sleep {1 + i % 2}\n", Resource_List={
            "select": f"{nodes}:ncpus=1", "walltime": "00:00:10"}))
    large = engine.submit("sleep 1\n", Resource_List={"select": "6:ncpus=1",
                                                       "walltime": "00:00:10"})
    submitted = time.time()
    later, comments = [], set()
    # A steady stream of small jobs behind it, enough to keep six nodes from ever being
    # free at once, kept up until the large job starts (or for a minute).
    while engine.job(large)["job_state"] == "Q" and time.time() - submitted < 60:
        later.append(engine.submit("sleep 1\n", Resource_List={
            "select": f"{1 + len(later) % 2}:ncpus=1", "walltime": "00:00:10"}))
        comments.add(engine.job(large).get("comment") or "")
        time.sleep(0.2)
    attrs = engine.wait(large, timeout=120)
    assert attrs["Exit_status"] == 0
    # It starved (queued past starve_after), became the top job the scheduler drains for,
    # and started while the stream still flowed, in bounded time.
    assert any(c.startswith("Not Running: Job is a top job and will run at")
               for c in comments), comments
    started = attrs["stime"]
    assert started - submitted < 50
    done = [engine.wait(j, timeout=120) for j in small + later]
    for a in done:  # no small job straddles
        vnodes = re.findall(r"\((n\d)", a["exec_vnode"])
        assert len({octant(v) for v in vnodes}) == 1, (a["exec_vnode"], "straddles")
    # A large job goes wherever the nodes are.
    assert len(re.findall(r"\((n\d)", attrs["exec_vnode"])) == 6
