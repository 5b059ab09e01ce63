"""What the tests of a job's ``user = pbsuser`` hooks share (test_owner_prologue.py,
test_owner_preterm.py, test_owner_epilogue.py): a hook that holds its first run until the
test lets it go, the checks made while it holds, and the ways the server goes meanwhile."""

from __future__ import annotations

import textwrap
from pathlib import Path

from .conftest import until
from .test_server import plugin

#: How a test ends the server while a hook holds (`server_goes`).
SERVER_GOES = ["killed", "stopped", "qterm -t immediate"]


def holding_plugin(dists, root: Path, hooks: str, events: tuple[str, ...], **attrs) -> str:
    """Install the plugin "slow", whose hooks (`hooks`, their source) run as pbsuser with a
    600 s alarm and may call ``hold_first()``: its first call, in any hook's process, writes
    that process's pid to `root`/started and returns True once `root`/go exists; a later
    call returns False at once. Returns its site section."""
    return plugin(dists, "slow", f"""
import os
import time
from pathlib import Path


def hold_first():
    try:
        with open({str(root / "started")!r}, "x") as started:
            started.write(str(os.getpid()))
    except FileExistsError:
        return False
    while not Path({str(root / "go")!r}).exists():
        time.sleep(0.05)
    return True
""" + textwrap.dedent(hooks), events, user="pbsuser", alarm=600, **attrs)


def started(root: Path, what: str = "the hook to start") -> int:
    """The pid of the hook's process that holds (`holding_plugin`), once it has written it."""
    until(lambda: (root / "started").exists() and (root / "started").read_text(), what=what)
    return int((root / "started").read_text())


def gone(pid: int) -> bool:
    """Whether process `pid` has ended (no process, or a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def takes_a_job(engine, client) -> None:
    """The server takes a job (held) and shows it while a hook holds: the client's timeout
    is a hang guard (the hook's alarm is 600 s away; the server that ran the chain in its
    loop answered nothing before)."""
    other = client("submit", attrs={"Hold_Types": "u", "Variable_List": {
        "PBS_O_WORKDIR": str(engine.work)}}, script="true\n")
    assert client("stat_jobs", ids=[other])[other]["job_state"] == "H"


def server_goes(engine, how: str, hook_pid: int) -> None:
    """End the server as `how` (in SERVER_GOES) says, and wait for the holding hook's
    process, `hook_pid`, to go with it."""
    if how == "killed":
        engine.kill()
    elif how == "stopped":
        engine.stop()
    else:
        engine.pbs(*how.split(), check=True)
        until(lambda: engine.home.server_pid() is None, what="the server to stop")
    until(lambda: gone(hook_pid), what="the hook's process to go with the server")

