"""A sysfs tree for a described machine, so tests and the demo run on hosts they are not on.

It is faithful to what x86-64 Linux writes: the same files, formats and trailing newlines.
Where the kernel's behaviour shapes what a reader sees, the fake follows it:

- an offline CPU leaves its node's ``cpulist`` and its siblings' lists, loses its
  ``topology`` directory and keeps ``cpu<N>/online`` = 0 (cpu0 has no ``online`` file: it
  cannot be taken offline on x86);
- masks (``cpumap``, ``thread_siblings``...) are cpumasks as the kernel prints them: hex,
  ``ceil(nr_cpu_ids / 4)`` digits, in comma-separated 32-bit words;
- a memory-only node has an empty ``cpulist`` and is absent from ``has_cpu``.

Threads of a core: with ``smt_layout="consecutive"`` (the default) a node's CPUs, in
ascending order, form cores of ``threads_per_core`` consecutive ids (0,1 2,3 ...), as on
POWER; with ``"split"`` the node's first half are the first threads and the second half the
second (0,4 1,5 ... for 8 CPUs and 2 threads), the usual x86 enumeration.
"""

from __future__ import annotations

from pathlib import Path

from .nodemask import encode_mask, format_list, parse_list

__all__ = ["DEFAULT_MEM_KB", "write_sysfs"]

DEFAULT_MEM_KB = 4 * 1024 * 1024  # 4 GiB per node unless mem_kb says otherwise


def _cpumask(ids: list[int], nr_cpu_ids: int) -> str:
    """``ids`` as the kernel prints a cpumask: hex in 32-bit words, most significant first."""
    digits = encode_mask(ids, nr_cpu_ids)
    head = len(digits) % 8 or 8
    words = [digits[:head]] + [digits[i : i + 8] for i in range(head, len(digits), 8)]
    return ",".join(words)


def _write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content + "\n")


def _cores(cpus: list[int], threads_per_core: int, smt_layout: str) -> list[tuple[int, ...]]:
    n = len(cpus) // threads_per_core
    if smt_layout == "consecutive":
        return [tuple(cpus[c * threads_per_core : (c + 1) * threads_per_core]) for c in range(n)]
    return [tuple(cpus[t * n + c] for t in range(threads_per_core)) for c in range(n)]


def write_sysfs(
    root: Path,
    nodes: dict[int, str],
    *,
    mem_kb: dict[int, int] | None = None,
    threads_per_core: int = 1,
    cpus_per_package: int | None = None,
    offline: str = "",
    smt_layout: str = "consecutive",
    numa: bool = True,
) -> Path:
    """Write ``<root>/sys/devices/system/{cpu,node}`` and ``<root>/proc/meminfo``; return root.

    ``nodes`` maps each NUMA node to its CPUs as a list string ("0-3"; "" for a memory-only
    node), offline ones included. ``mem_kb`` gives a node's memory (default 4 GiB each).
    ``cpus_per_package``: CPUs (threads) per socket, cores taken in order of their lowest CPU;
    default one package per node that has CPUs. ``offline`` lists CPUs that are present but
    offline. ``numa=False`` writes no ``node`` directory, as a kernel built without NUMA.
    Raises ValueError naming the inconsistent argument.
    """
    if threads_per_core < 1:
        raise ValueError(f"threads_per_core={threads_per_core}: a core has at least 1 thread")
    if smt_layout not in ("consecutive", "split"):
        raise ValueError(f"smt_layout={smt_layout!r}: expected 'consecutive' or 'split'")
    if cpus_per_package is not None and (
        cpus_per_package < 1 or cpus_per_package % threads_per_core
    ):
        raise ValueError(
            f"cpus_per_package={cpus_per_package}: expected a positive multiple of "
            f"threads_per_core ({threads_per_core})"
        )
    if not nodes:
        raise ValueError("nodes is empty: a machine has at least one NUMA node")
    if any(n < 0 for n in nodes):
        raise ValueError(f"nodes has negative node ids: {sorted(n for n in nodes if n < 0)}")
    memory = {n: DEFAULT_MEM_KB for n in nodes}
    if mem_kb:
        unknown = sorted(set(mem_kb) - set(nodes))
        if unknown:
            raise ValueError(f"mem_kb names nodes {unknown}, which are not in nodes")
        if any(kb < 0 for kb in mem_kb.values()):
            raise ValueError(f"mem_kb has a negative size: {mem_kb}")
        memory.update(mem_kb)

    node_cpus: dict[int, list[int]] = {}
    node_of: dict[int, int] = {}
    for node, text in sorted(nodes.items()):
        node_cpus[node] = parse_list(text)
        for cpu in node_cpus[node]:
            if cpu in node_of:
                raise ValueError(f"CPU {cpu} is in both node {node_of[cpu]} and node {node}")
            node_of[cpu] = node
        if len(node_cpus[node]) % threads_per_core:
            raise ValueError(
                f"node {node} has {len(node_cpus[node])} CPUs ({text!r}), not a multiple of "
                f"threads_per_core={threads_per_core}"
            )
    if not node_of:
        raise ValueError("nodes holds no CPU: a machine runs on at least one")
    down = set(parse_list(offline))
    if down - set(node_of):
        raise ValueError(f"offline={offline!r} names CPUs that no node has: "
                         f"{format_list(down - set(node_of))}")
    present = sorted(node_of)
    up = [c for c in present if c not in down]
    if not up:
        raise ValueError(f"offline={offline!r} takes every CPU offline; one must stay online")
    nr_cpu_ids = present[-1] + 1  # possible CPUs: 0 up to the highest present

    cores = [core for node in sorted(node_cpus)
             for core in _cores(node_cpus[node], threads_per_core, smt_layout)]
    cores.sort(key=min)
    if cpus_per_package is None:
        with_cpus = [n for n in sorted(node_cpus) if node_cpus[n]]
        package_of_core = [with_cpus.index(node_of[core[0]]) for core in cores]
    else:
        per_package = cpus_per_package // threads_per_core
        package_of_core = [i // per_package for i in range(len(cores))]

    system = root / "sys/devices/system"
    cpu_dir = system / "cpu"
    _write(cpu_dir / "possible", f"0-{nr_cpu_ids - 1}" if nr_cpu_ids > 1 else "0")
    _write(cpu_dir / "present", format_list(present))
    _write(cpu_dir / "online", format_list(up))
    _write(cpu_dir / "offline", format_list(down))
    _write(cpu_dir / "kernel_max", "8191")  # NR_CPUS - 1 of a distribution kernel

    def listed(ids: list[int]) -> tuple[str, str]:
        alive = [c for c in ids if c not in down]
        return format_list(alive), _cpumask(alive, nr_cpu_ids)

    packages: dict[int, list[int]] = {}
    core_ids: list[int] = []  # a core's number within its package
    for core, package in zip(cores, package_of_core, strict=True):
        members = packages.setdefault(package, [])
        core_ids.append(len(members) // threads_per_core)
        members.extend(core)
    package_files = {package: listed(sorted(members)) for package, members in packages.items()}

    for core, package, core_id in zip(cores, package_of_core, core_ids, strict=True):
        for cpu in core:
            here = cpu_dir / f"cpu{cpu}"
            here.mkdir(parents=True, exist_ok=True)
            if cpu != 0:
                _write(here / "online", "0" if cpu in down else "1")
            if cpu in down:
                continue
            topo = here / "topology"
            thread_list, thread_mask = listed(list(core))
            package_list, package_mask = package_files[package]
            for name, value in {
                "physical_package_id": str(package),
                "die_id": "0",
                "core_id": str(core_id),
                "thread_siblings_list": thread_list,
                "thread_siblings": thread_mask,
                "core_cpus_list": thread_list,
                "core_cpus": thread_mask,
                "core_siblings_list": package_list,
                "core_siblings": package_mask,
                "die_cpus_list": package_list,
                "die_cpus": package_mask,
                "package_cpus_list": package_list,
                "package_cpus": package_mask,
            }.items():
                _write(topo / name, value)
            link = here / f"node{node_of[cpu]}"
            if numa and not link.is_symlink():
                link.symlink_to(f"../../node/node{node_of[cpu]}")

    meminfo = [f"{'MemTotal:':<15} {sum(memory.values()):>8} kB",
               f"{'MemFree:':<15} {sum(memory.values()):>8} kB",
               f"{'MemAvailable:':<15} {sum(memory.values()):>8} kB"]
    _write(root / "proc/meminfo", "\n".join(meminfo))
    if not numa:
        return root

    node_dir = system / "node"
    ids = sorted(nodes)
    _write(node_dir / "possible", format_list(ids))
    _write(node_dir / "online", format_list(ids))
    _write(node_dir / "has_cpu", format_list(n for n in ids if listed(node_cpus[n])[0]))
    _write(node_dir / "has_memory", format_list(n for n in ids if memory[n]))
    _write(node_dir / "has_normal_memory", format_list(n for n in ids if memory[n]))
    for node in ids:
        here = node_dir / f"node{node}"
        cpulist, cpumap = listed(node_cpus[node])
        _write(here / "cpulist", cpulist)
        _write(here / "cpumap", cpumap)
        _write(here / "distance", " ".join("10" if n == node else "20" for n in ids))
        kb = memory[node]
        _write(here / "meminfo", "\n".join(
            f"Node {node} {key + ':':<15} {value:>8} kB"
            for key, value in (("MemTotal", kb), ("MemFree", kb), ("MemUsed", 0))))
    return root
