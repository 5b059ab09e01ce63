"""Which CPUs and memory nodes a job's cpuset gets (PBS's cgroups hook rules), on machines
described by sysfs files."""

from __future__ import annotations

import pytest

from pbsplug_cpuset.assign import AssignError, Rules, assign, numa_of, usable_cpus
from pbsplug_cpuset.fake_sysfs import write_sysfs
from pbsplug_cpuset.topology import read_topology


@pytest.fixture
def two_sockets(tmp_path):
    """Two NUMA nodes of four cores with two threads each (x86 numbering: 0-3 and 8-11 are
    node 0's first and second threads), plus a memory-only node 2."""
    write_sysfs(tmp_path, {0: "0-3,8-11", 1: "4-7,12-15", 2: ""}, threads_per_core=2,
                smt_layout="split", mem_kb={0: 8 << 20, 1: 8 << 20, 2: 16 << 20})
    return read_topology(tmp_path)


def test_numa_vnodes_take_the_lowest_free_first_threads_of_their_node(two_sockets):
    cpus, mems = assign(two_sockets, Rules(), {"h[1]": 2})
    assert cpus == [4, 5]
    assert mems == [1, 2]  # its node, and the memory-only node


def test_the_rest_of_a_host_held_whole_adds_no_cpus(two_sockets):
    """An exclhost job's exec_vnode lists the host's other vnodes with no resources, as PBS
    does (``(h[0]:ncpus=2)+(h)+(h[1])``): they come as 0 CPUs and add none."""
    cpus, mems = assign(two_sockets, Rules(), {"h[0]": 2, "h": 0, "h[1]": 0})
    assert (cpus, mems) == ([0, 1], [0, 2])


def test_cpus_other_cpusets_hold_are_skipped(two_sockets):
    cpus, _ = assign(two_sockets, Rules(), {"h[0]": 2}, held=[0, 2])
    assert cpus == [1, 3]


def test_use_hyperthreads_gives_every_thread(two_sockets):
    assert usable_cpus(two_sockets, Rules())[0] == [0, 1, 2, 3]
    assert usable_cpus(two_sockets, Rules(use_hyperthreads=True))[0] == [0, 1, 2, 3, 8, 9,
                                                                         10, 11]
    cpus, _ = assign(two_sockets, Rules(use_hyperthreads=True), {"h[0]": 6})
    assert cpus == [0, 1, 2, 3, 8, 9]


def test_exclude_cpus_are_never_given(two_sockets):
    rules = Rules(exclude_cpus=frozenset({0, 1}))
    cpus, _ = assign(two_sockets, rules, {"h[0]": 2})
    assert cpus == [2, 3]
    with pytest.raises(AssignError, match=r"vnode h\[0\] \(NUMA node 0\) has 2 free CPUs, "
                                          "the job was given 3"):
        assign(two_sockets, rules, {"h[0]": 3})


def test_a_numa_vnode_never_borrows_from_another_node(two_sockets):
    with pytest.raises(AssignError, match="has 4 free CPUs, the job was given 5"):
        assign(two_sockets, Rules(), {"h[0]": 5})


def test_vnode_numa_binds_site_vnodes(two_sockets):
    rules = Rules(vnode_numa={"left": 0, "right": 1, "ghost": 7})
    assert numa_of("right", two_sockets, rules) == 1
    assert numa_of("other", two_sockets, rules) is None
    assert numa_of("h[9]", two_sockets, rules) is None  # no node 9: the whole host
    assert numa_of("h[\u0661]", two_sockets, rules) is None  # ASCII digits only: not node 1
    assert assign(two_sockets, rules, {"right": 1})[0] == [4]
    with pytest.raises(AssignError, match="NUMA node 7, which this host does not have"):
        assign(two_sockets, rules, {"ghost": 1})


@pytest.mark.parametrize("placement_type, held, expected", [
    ("load_balanced", [0], [4, 5]),     # node 1 has more free CPUs
    ("load_packed", [0], [1, 2]),       # node 0 has fewer that still fit
    ("job_balanced", [4], [0, 1]),      # node 1 has a job
])
def test_whole_host_vnodes_choose_the_node_by_placement_type(two_sockets, placement_type,
                                                             held, expected):
    jobs_per_node = {two_sockets.node_of(held[0]): 1}
    cpus, _ = assign(two_sockets, Rules(placement_type=placement_type), {"host": 2}, held=held,
                     jobs_per_node=jobs_per_node)
    assert cpus == expected


def test_a_job_no_node_can_hold_spans_the_host(two_sockets):
    cpus, mems = assign(two_sockets, Rules(), {"host": 6}, held=[0])
    assert cpus == [1, 2, 3, 4, 5, 6]
    assert mems == [0, 1, 2]
    with pytest.raises(AssignError, match="this host has 7 free CPUs, the job was given 8"):
        assign(two_sockets, Rules(), {"host": 8}, held=[0])


def test_without_mem_fences_every_memory_node(two_sockets):
    _, mems = assign(two_sockets, Rules(mem_fences=False), {"h[0]": 1})
    assert mems == [0, 1, 2]


def test_this_machine(tmp_path):
    """The real sysfs: a one-CPU job gets the first usable CPU of some node."""
    topology = read_topology("/")
    usable = usable_cpus(topology, Rules())
    cpus, mems = assign(topology, Rules(), {"host": 1})
    assert len(cpus) == 1 and any(cpus[0] == node_cpus[0] for node_cpus in usable.values())
    assert set(mems) <= set(topology.nodes)
