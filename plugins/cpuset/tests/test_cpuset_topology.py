"""Reading the NUMA layout from sysfs: this machine's, and machines described by fake_sysfs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pbsplug_cpuset.fake_sysfs import DEFAULT_MEM_KB, write_sysfs
from pbsplug_cpuset.nodemask import decode_mask, parse_list
from pbsplug_cpuset.topology import NumaNode, Topology, TopologyError, read_topology

SYSTEM = Path("sys/devices/system")
REAL = Path("/") / SYSTEM


def assert_consistent(topo: Topology) -> None:
    """What holds on any machine: siblings agree, nodes partition their CPUs."""
    online = set(topo.cpus)
    assert set(topo.siblings) == set(topo.packages) == online
    for cpu, threads in topo.siblings.items():
        assert cpu in threads
        assert list(threads) == sorted(threads)
        for other in threads:
            assert topo.siblings[other] == threads
            assert topo.packages[other] == topo.packages[cpu]
    seen: set[int] = set()
    for node_id, node in topo.nodes.items():
        assert node.id == node_id
        assert set(node.cpus) <= online
        assert not seen & set(node.cpus)
        seen |= set(node.cpus)
        for cpu in node.cpus:
            assert topo.node_of(cpu) == node_id
    first = topo.first_threads()
    assert len(first) == len(set(topo.siblings.values()))
    assert all(topo.siblings[cpu][0] == cpu for cpu in first)


# -- this machine ------------------------------------------------------------------------------


@pytest.mark.skipif(not (REAL / "cpu/online").exists(), reason="no sysfs here")
def test_this_machine() -> None:
    topo = read_topology("/")
    assert_consistent(topo)
    assert topo.cpus == tuple(parse_list((REAL / "cpu/online").read_text()))
    assert len(topo.cpus) == os.cpu_count()
    assert set(os.sched_getaffinity(0)) <= set(topo.cpus)
    assert topo.nodes and topo.memory_nodes
    assert all(topo.nodes[n].mem_bytes > 0 for n in topo.memory_nodes)
    if (REAL / "node").is_dir():
        assert sorted(topo.nodes) == parse_list((REAL / "node/online").read_text())
        assert {c for node in topo.nodes.values() for c in node.cpus} == set(topo.cpus)
    assert set(topo.first_threads()) <= set(topo.cpus)


@pytest.mark.skipif(not (REAL / "cpu/cpu0/topology").is_dir(), reason="no CPU topology here")
def test_fake_files_have_the_real_kernels_formats(tmp_path: Path) -> None:
    """Every file the fake writes that this kernel also has holds the same kind of value."""
    write_sysfs(tmp_path, {0: "0-3"}, threads_per_core=2)
    fake = tmp_path / SYSTEM
    pairs = [(fake / "cpu/cpu0/topology" / f.name, REAL / "cpu/cpu0/topology" / f.name)
             for f in (fake / "cpu/cpu0/topology").iterdir()]
    pairs += [(fake / "cpu" / name, REAL / "cpu" / name)
              for name in ("online", "offline", "possible", "present")]
    if (REAL / "node/node0").is_dir():
        pairs += [(fake / "node/node0" / name, REAL / "node/node0" / name)
                  for name in ("cpulist", "cpumap", "meminfo", "distance")]
        pairs += [(fake / "node/online", REAL / "node/online")]
    compared = 0
    for fake_file, real_file in pairs:
        if not real_file.exists():
            continue
        compared += 1
        assert kind(fake_file) == kind(real_file), (fake_file.name, real_file.read_text())
    assert compared
    real_meminfo = (Path("/proc/meminfo").read_text().splitlines() or [""])[0]
    fake_meminfo = (tmp_path / "proc/meminfo").read_text().splitlines()[0]
    assert re.sub(r"\d+", "N", real_meminfo).split() == re.sub(r"\d+", "N", fake_meminfo).split()


def kind(path: Path) -> str:
    """The shape of a sysfs value, by file name and content."""
    text = path.read_text()
    assert text.endswith("\n"), path
    name = path.name
    if name.endswith("_list") or name in ("cpulist", "online", "offline", "possible", "present"):
        parse_list(text)
        return "list"
    if name in ("cpumap", "thread_siblings", "core_siblings", "core_cpus", "package_cpus",
                "die_cpus", "cluster_cpus"):
        decode_mask(text)
        return "mask" + ("," if "," in text else "")
    if name == "meminfo":  # numbers are right-aligned in a column: its spaces vary with them
        return " ".join(re.sub(r"\d+", "N", text.splitlines()[0]).split())
    if name == "distance":
        return "numbers" if all(w.isdigit() for w in text.split()) else text
    return "int" if re.fullmatch(r"-?\d+\n", text) else text


# -- machines described by files ---------------------------------------------------------------


def test_two_numa_nodes_of_four_cpus_with_two_threads_per_core(tmp_path: Path) -> None:
    topo = read_topology(write_sysfs(tmp_path, {0: "0-3", 1: "4-7"}, threads_per_core=2))
    assert_consistent(topo)
    assert topo.cpus == tuple(range(8))
    assert topo.nodes == {
        0: NumaNode(0, (0, 1, 2, 3), DEFAULT_MEM_KB * 1024),
        1: NumaNode(1, (4, 5, 6, 7), DEFAULT_MEM_KB * 1024),
    }
    assert topo.siblings == {0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3),
                             4: (4, 5), 5: (4, 5), 6: (6, 7), 7: (6, 7)}
    assert topo.packages == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}
    assert topo.first_threads() == [0, 2, 4, 6]
    assert topo.first_threads([1, 2, 3, 7]) == [1, 2, 7]  # the lowest *given* thread per core
    assert topo.first_threads([]) == []
    assert topo.node_of(5) == 1
    assert topo.memory_nodes == (0, 1)


def test_split_smt_layout_and_packages(tmp_path: Path) -> None:
    """x86's usual numbering: the second threads come after all the first ones."""
    root = write_sysfs(tmp_path, {0: "0-3,8-11", 1: "4-7,12-15"}, threads_per_core=2,
                       smt_layout="split", cpus_per_package=16)
    topo = read_topology(root)
    assert_consistent(topo)
    assert topo.siblings[0] == (0, 8)
    assert topo.siblings[12] == (4, 12)
    assert topo.first_threads() == list(range(8))
    assert set(topo.packages.values()) == {0}
    core_ids = {(root / SYSTEM / f"cpu/cpu{c}/topology/core_id").read_text() for c in range(8)}
    assert len(core_ids) == 8


def test_cpus_per_package_splits_a_node(tmp_path: Path) -> None:
    topo = read_topology(write_sysfs(tmp_path, {0: "0-7"}, threads_per_core=2,
                                     cpus_per_package=4))
    assert topo.packages == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}


def test_memory_only_and_memoryless_nodes(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path, {0: "0-3", 1: "", 2: "4-5"}, mem_kb={1: 1024, 2: 0})
    topo = read_topology(root)
    assert_consistent(topo)
    assert topo.nodes[1] == NumaNode(1, (), 1024 * 1024)
    assert topo.nodes[2] == NumaNode(2, (4, 5), 0)
    assert topo.memory_nodes == (0, 1)
    assert (root / SYSTEM / "node/node1/cpulist").read_text() == "\n"
    assert (root / SYSTEM / "node/has_cpu").read_text() == "0,2\n"
    assert (root / SYSTEM / "node/has_memory").read_text() == "0-1\n"


def test_offline_cpus_are_dropped_everywhere(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path, {0: "0-3", 1: "4-7"}, threads_per_core=2, offline="3,4-5")
    topo = read_topology(root)
    assert_consistent(topo)
    assert topo.cpus == (0, 1, 2, 6, 7)
    assert topo.nodes[0].cpus == (0, 1, 2)
    assert topo.nodes[1].cpus == (6, 7)
    assert topo.siblings[2] == (2,)
    assert topo.first_threads() == [0, 2, 6]
    with pytest.raises(ValueError, match="CPU 3 is in no NUMA node"):
        topo.node_of(3)
    with pytest.raises(ValueError, match="CPUs 3-4 are not online"):
        topo.first_threads([2, 3, 4])
    # as the kernel does: the offline CPU keeps only its online file
    assert (root / SYSTEM / "cpu/offline").read_text() == "3-5\n"
    assert (root / SYSTEM / "cpu/cpu3/online").read_text() == "0\n"
    assert not (root / SYSTEM / "cpu/cpu3/topology").exists()


def test_offline_cpus_are_dropped_even_where_a_file_still_lists_them(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path, {0: "0-3"}, threads_per_core=2, offline="3")
    (root / SYSTEM / "node/node0/cpulist").write_text("0-3\n")
    (root / SYSTEM / "cpu/cpu2/topology/thread_siblings_list").write_text("2-3\n")
    topo = read_topology(root)
    assert topo.nodes[0].cpus == (0, 1, 2)
    assert topo.siblings[2] == (2,)


def test_kernel_without_numa(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path, {0: "0-3", 1: "4-5"}, mem_kb={0: 1000, 1: 24}, numa=False,
                       offline="5")
    assert not (root / SYSTEM / "node").exists()
    topo = read_topology(root)
    assert_consistent(topo)
    assert topo.nodes == {0: NumaNode(0, (0, 1, 2, 3, 4), 1024 * 1024)}
    assert topo.memory_nodes == (0,)


def test_cpu_without_topology_directory_is_its_own_core(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path, {0: "0-3"}, threads_per_core=2)
    for f in (root / SYSTEM / "cpu/cpu1/topology").iterdir():
        f.unlink()
    (root / SYSTEM / "cpu/cpu1/topology").rmdir()
    topo = read_topology(root)
    assert topo.siblings[1] == (1,)
    assert topo.packages[1] == 0
    assert topo.siblings[0] == (0, 1)  # cpu0's own file still says so


def test_package_id_minus_one_means_one_package(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path, {0: "0-1"})
    for cpu in (0, 1):
        (root / SYSTEM / f"cpu/cpu{cpu}/topology/physical_package_id").write_text("-1\n")
    assert read_topology(root).packages == {0: 0, 1: 0}


def test_root_may_be_a_string(tmp_path: Path) -> None:
    assert read_topology(str(write_sysfs(tmp_path, {0: "0"}))).cpus == (0,)


# -- what the reader refuses -------------------------------------------------------------------


def corrupt(root: Path, relative: str, content: str | None) -> Path:
    path = root / relative
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    return path


@pytest.mark.parametrize(
    ("relative", "content", "message"),
    [
        (f"{SYSTEM}/cpu/online", "0-x\n", r"holds '0-x\\n', not a CPU or node list"),
        (f"{SYSTEM}/cpu/online", None, "cannot read"),
        (f"{SYSTEM}/node/online", "zero\n", "holds 'zero\\\\n'"),
        (f"{SYSTEM}/node/node1/cpulist", "4-\n", r"holds '4-\\n'"),
        (f"{SYSTEM}/node/node1/meminfo", "Node 1 MemFree: 5 kB\n",
         r"no 'Node 1 MemTotal: <n> kB' line \(first line: 'Node 1 MemFree: 5 kB'\)"),
        (f"{SYSTEM}/node/node1/meminfo", "Node 0 MemTotal: 5 kB\n", "no 'Node 1 MemTotal"),
        (f"{SYSTEM}/node/node1/meminfo", "", r"first line: ''"),
        (f"{SYSTEM}/cpu/cpu2/topology/physical_package_id", "one\n", "not a whole number"),
        (f"{SYSTEM}/cpu/cpu2/topology/physical_package_id", "-2\n", "holds -2, not a package"),
        (f"{SYSTEM}/cpu/cpu2/topology/physical_package_id", None, "cannot read"),
        (f"{SYSTEM}/cpu/cpu2/topology/thread_siblings_list", "0-1\n",
         "does not list CPU 2 itself"),
        (f"{SYSTEM}/cpu/cpu2/topology/thread_siblings_list", "2;3\n", "not a CPU or node list"),
    ],
)
def test_unparseable_files_are_named(tmp_path: Path, relative: str, content: str | None,
                                     message: str) -> None:
    root = write_sysfs(tmp_path, {0: "0-3", 1: "4-7"}, threads_per_core=2)
    path = corrupt(root, relative, content)
    with pytest.raises(TopologyError, match=message) as err:
        read_topology(root)
    assert str(path) in str(err.value)
    assert isinstance(err.value, ValueError)


def test_node_listed_online_without_its_directory(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path, {0: "0-1"})
    (root / SYSTEM / "node/online").write_text("0-1\n")
    with pytest.raises(TopologyError, match="cannot read .*node1/cpulist"):
        read_topology(root)


def test_kernel_without_numa_needs_proc_meminfo(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path, {0: "0-1"}, numa=False)
    (root / "proc/meminfo").write_text("MemFree: 10 kB\n")
    with pytest.raises(TopologyError, match="proc/meminfo has no 'MemTotal: <n> kB' line"):
        read_topology(root)
    (root / "proc/meminfo").unlink()
    with pytest.raises(TopologyError, match="cannot read .*proc/meminfo"):
        read_topology(root)


def test_missing_sysfs(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot read .*cpu/online"):
        read_topology(tmp_path)


# -- the fake tree itself ----------------------------------------------------------------------


def test_fake_tree_files(tmp_path: Path) -> None:
    root = write_sysfs(tmp_path, {0: "0-3", 1: "4-7"}, threads_per_core=2, offline="6",
                       mem_kb={0: 16318512, 1: 8})
    system = root / SYSTEM
    assert (system / "cpu/online").read_text() == "0-5,7\n"
    assert (system / "cpu/possible").read_text() == "0-7\n"
    assert (system / "cpu/present").read_text() == "0-7\n"
    assert not (system / "cpu/cpu0/online").exists()  # x86: cpu0 cannot go offline
    assert (system / "cpu/cpu1/online").read_text() == "1\n"
    assert (system / "node/node0/cpumap").read_text() == "0f\n"
    assert (system / "node/node1/cpumap").read_text() == "b0\n"
    assert (system / "node/node1/cpulist").read_text() == "4-5,7\n"
    assert (system / "node/node0/distance").read_text() == "10 20\n"
    assert (system / "node/node0/meminfo").read_text().splitlines()[0] == (
        "Node 0 MemTotal:       16318512 kB"
    )
    topo0 = system / "cpu/cpu7/topology"
    assert (topo0 / "thread_siblings_list").read_text() == "7\n"
    assert (topo0 / "thread_siblings").read_text() == "80\n"
    assert (topo0 / "core_siblings_list").read_text() == "4-5,7\n"
    assert (topo0 / "core_id").read_text() == "1\n"
    assert (system / "cpu/cpu4/node1").resolve() == (system / "node/node1").resolve()
    assert (root / "proc/meminfo").read_text().splitlines()[0] == "MemTotal:       16318520 kB"
    write_sysfs(root, {0: "0-3", 1: "4-7"}, threads_per_core=2, offline="6")  # rewritable


def test_fake_cpumaps_come_in_32_bit_words(tmp_path: Path) -> None:
    system = write_sysfs(tmp_path, {0: "0-31", 1: "32-39"}) / SYSTEM
    assert (system / "node/node1/cpumap").read_text() == "ff,00000000\n"
    assert decode_mask((system / "node/node0/cpumap").read_text()) == list(range(32))


@pytest.mark.parametrize(
    ("nodes", "options", "message"),
    [
        ({}, {}, "nodes is empty"),
        ({0: ""}, {}, "nodes holds no CPU"),
        ({-1: "0"}, {}, r"negative node ids: \[-1\]"),
        ({0: "0-3", 1: "3-4"}, {}, "CPU 3 is in both node 0 and node 1"),
        ({0: "0-2"}, {"threads_per_core": 2}, r"node 0 has 3 CPUs \('0-2'\), not a multiple"),
        ({0: "0-3"}, {"threads_per_core": 0}, "threads_per_core=0"),
        ({0: "0-3"}, {"offline": "4"}, "offline='4' names CPUs that no node has: 4"),
        ({0: "0-3"}, {"offline": "0-3"}, "takes every CPU offline"),
        ({0: "0-3"}, {"mem_kb": {1: 5}}, r"mem_kb names nodes \[1\]"),
        ({0: "0-3"}, {"mem_kb": {0: -5}}, "negative size"),
        ({0: "0-3"}, {"threads_per_core": 2, "cpus_per_package": 3}, "cpus_per_package=3"),
        ({0: "0-3"}, {"cpus_per_package": 0}, "cpus_per_package=0"),
        ({0: "0-3"}, {"smt_layout": "zigzag"}, "smt_layout='zigzag'"),
        ({0: "0-x"}, {}, "is not a list of ids"),
    ],
)
def test_fake_tree_refuses_an_impossible_machine(tmp_path: Path, nodes: dict[int, str],
                                                 options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        write_sysfs(tmp_path, nodes, **options)
