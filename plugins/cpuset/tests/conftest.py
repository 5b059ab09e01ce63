"""A process no SIGKILL ends until the test lets it: the real way a cpuset gets stuck."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

FREEZER = Path("/sys/fs/cgroup/freezer")


@pytest.fixture
def frozen():
    """``frozen(pid=None) -> pid``: process `pid` (else a new ``sleep``) frozen by the
    cgroup v1 freezer. A frozen task
    takes SIGKILL but does not die (it waits in the kernel, state D) until it is thawed,
    as a job's process writing a core file to a hung NFS server would; ``frozen.thaw()``
    lets it go. Needs root and the v1 freezer; skips saying so otherwise."""
    if os.geteuid() != 0 or not (FREEZER / "cgroup.procs").exists():
        pytest.skip("needs root and the cgroup v1 freezer at /sys/fs/cgroup/freezer to "
                    "make a process SIGKILL cannot end")
    group = FREEZER / f"pbsplug_test_{os.getpid()}"
    group.mkdir(exist_ok=True)
    procs: list[subprocess.Popen] = []

    def make(pid: int | None = None) -> int:
        if pid is None:
            proc = subprocess.Popen(["sleep", "300"])
            procs.append(proc)
            pid = proc.pid
        (group / "cgroup.procs").write_text(str(pid))
        (group / "freezer.state").write_text("FROZEN")
        deadline = time.monotonic() + 10
        while (group / "freezer.state").read_text().strip() != "FROZEN":
            assert time.monotonic() < deadline, "the freezer did not freeze the process"
            time.sleep(0.01)
        return pid

    def thaw() -> None:
        (group / "freezer.state").write_text("THAWED")

    make.thaw = thaw
    yield make
    thaw()
    for proc in procs:
        proc.kill()
        proc.wait()
    for _ in range(100):
        try:
            group.rmdir()
            break
        except OSError:
            time.sleep(0.05)
