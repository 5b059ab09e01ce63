"""The queues' and the server's ``resources_assigned``, as OpenPBS 23.06's server keeps them
(checked on a running PBS with qstat -Qf and -Bf): what the running jobs' ``Resource_List``
asks for, summed per queue and in all, of ``ncpus``, ``nodect``, ``mem`` and ``vmem`` and of
the custom resources whose flag has ``q``. A suspended job's are given back (a resume takes
them again). A resource once assigned in a queue since the server started stays listed,
at 0 when no running job holds any, and a size is written in the smallest unit it was
assigned in so far (``10mb`` then ``1gb`` running: ``1034mb``; the ``10mb`` job over:
``1024mb``; none: ``0mb``), as PBS's running total writes them.

PBS adds and takes away at each start and end; the engine sums its running jobs when asked
(one read of the running rows), remembering only which names, in which units, each queue
has shown since the server started: nothing to go wrong across a crash or a restart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..units import parse_size
from ..values import SIZE_SHIFTS

#: The built-in resources a running job's request counts in (OpenPBS 23.06's, checked:
#: ``ncpus``, ``nodect``, ``mem``, ``vmem``).
BUILTIN = frozenset({"ncpus", "nodect", "mem", "vmem"})
SIZES = frozenset({"mem", "vmem"})
_SIZE = re.compile(r"^\s*[0-9]+\s*([kmgtp]?)[bw]?\s*$", re.IGNORECASE)
_SCALES = {shift: scale for scale, shift in SIZE_SHIFTS.items()}
#: All queues together: the server's own.
SERVER = ""


def _shift(value: Any) -> int:
    """The unit of a size, as a shift (kilo at the least: PBS's running total never goes
    below it)."""
    m = _SIZE.match(str(value))
    return max(SIZE_SHIFTS[m.group(1).lower()], 10) if m else 10


class Assigned:
    """What each queue (and the server, `SERVER`) has shown in ``resources_assigned`` since
    the server started: its names, and each size's smallest unit."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, int]] = {}

    def note(self, queue: str, res: Mapping[str, Any], names: frozenset[str]) -> None:
        """A job of `queue` asking for `res` runs (started, resumed, or found running)."""
        for where in (queue, SERVER):
            seen = self.seen.setdefault(where, {})
            for name in names & res.keys():
                shift = _shift(res[name]) if name in SIZES else 0
                seen[name] = min(seen.get(name, shift), shift)

    def forget(self, queue: str) -> None:
        """The queue is gone: one made again of its name starts with nothing listed."""
        self.seen.pop(queue, None)

    def amounts(self, running: Iterable[Mapping[str, Any]], custom: Mapping[str, str]
                ) -> dict[str, dict[str, Any]]:
        """Each queue's ``resources_assigned`` (the server's under `SERVER`) from the
        `running` jobs' attributes (neither suspended nor finished); `custom`: the custom
        resources that count, by name, with their types."""
        names = BUILTIN | custom.keys()
        sizes = SIZES | {n for n, t in custom.items() if t == "size"}
        totals: dict[str, dict[str, int]] = {}
        for attrs in running:
            res = attrs.get("Resource_List")
            if not isinstance(res, Mapping):
                continue
            queue = str(attrs.get("queue") or "")
            self.note(queue, res, frozenset(names))
            for where in (queue, SERVER):
                total = totals.setdefault(where, {})
                for name in names & res.keys():
                    try:
                        amount = parse_size(res[name]) if name in sizes else int(
                            float(res[name]))
                    except (TypeError, ValueError):
                        continue  # (a value the request checks would have refused)
                    total[name] = total.get(name, 0) + amount
        out: dict[str, dict[str, Any]] = {}
        for where, seen in self.seen.items():
            total = totals.get(where, {})
            shown: dict[str, Any] = {}
            for name, shift in sorted(seen.items()):
                amount = total.get(name, 0)
                if name in sizes:
                    shift = max(shift, 10)
                    shown[name] = f"{-(-amount >> shift)}{_SCALES[shift]}b"
                else:
                    shown[name] = amount
            out[where] = shown
        return out
