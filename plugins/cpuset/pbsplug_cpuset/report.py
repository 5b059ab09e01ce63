"""What the execution host tells the scheduler, as vnode attributes (seed 002, section 5:
pbs_mom's free-node mask and list of stuck cpusets, which pbs_sched asked for each cycle).

- ``cpuset_free_mask``: the host's free-node mask, hexadecimal, bit N set when logical node
  N has CPUs no cpuset holds (the same value on every vnode of the host);
- ``cpuset_stuck``: the stuck cpusets holding this vnode, ``<job id>@<since>`` separated by
  commas (since: seconds since the epoch when the cpuset could first not be removed).

Both are read-only to everybody but the hooks; they are refreshed when a job's cpuset is made
or removed and at every exechost_periodic.
"""

from __future__ import annotations

from collections.abc import Mapping

FREE_MASK = "cpuset_free_mask"
STUCK = "cpuset_stuck"


def format_stuck(stuck: Mapping[str, float]) -> str:
    """``{job id: since}`` as the attribute's text, oldest first."""
    return ",".join(f"{job}@{int(since)}" for job, since in
                    sorted(stuck.items(), key=lambda item: (item[1], item[0])))


def parse_stuck(text: str | None) -> dict[str, float]:
    """The attribute's text as ``{job id: since}``; entries that do not parse are left out
    (the attribute is the hook's own, so they come only from a hand edit)."""
    out: dict[str, float] = {}
    for entry in (text or "").split(","):
        job, sep, since = entry.strip().rpartition("@")
        if sep and job:
            try:
                out[job] = float(since)
            except ValueError:
                continue
    return out


def register(registry) -> None:
    """The two vnode attributes (set only by the server and hooks)."""
    registry.add("node", FREE_MASK, "string", set_by="server",
                 doc="cpuset: the host's free-node mask (hex, bit N = logical node N free)")
    registry.add("node", STUCK, "string", set_by="server",
                 doc="cpuset: stuck cpusets holding this vnode, <job id>@<since>,...")
