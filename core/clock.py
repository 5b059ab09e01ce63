"""The kernel's clock: the one time every plugin reads.

A plugin asks ``pbsplug.clock.now()`` for the current time, never ``time.time()``: the local
engine and the adapters leave the clock on wall time, and the simulator sets it to its
virtual time, so the same plugin code decides the same way in both. Durations a plugin waits
for on a real host (a process to leave a cgroup, a socket's timeout) are not the clock's
business: those stay on ``time.monotonic()``, and a hook that needs them is not one the
simulator fires.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Source = Callable[[], float]

_source: Source = time.time


def now() -> float:
    """The current time, in seconds since the epoch (virtual seconds in the simulator)."""
    return _source()


def set_source(source: Source | None) -> None:
    """Make `source` the clock every plugin reads; None puts wall time back.

    For an engine or a simulator, which owns the process's notion of now."""
    global _source
    if source is not None and not callable(source):
        raise TypeError(f"a clock source must be callable, not {type(source).__name__}")
    _source = time.time if source is None else source


@contextmanager
def use(source: Source) -> Iterator[None]:
    """Read the time from `source` inside the block, and the previous source after it."""
    previous = _source
    set_source(source)
    try:
        yield
    finally:
        set_source(previous)
