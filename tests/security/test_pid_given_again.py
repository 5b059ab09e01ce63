"""`root_process_with_pid` gives a root process a pid an attacker's process had, through
ns_last_pid, which every process of the machine forks from (the tests run in several
processes at once, `make test`): the count of pids goes back to where it was after it,
so no process forked next gets a pid that ended since, which a test beside it may still
hold and kill at its clean-up (a command of another test's was killed by SIGKILL)."""

from __future__ import annotations

import subprocess

import pytest

from .conftest import root_process_with_pid


def _ended() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.usefixtures("needs_root")
def test_the_next_pid_comes_after_every_pid_given_before():
    given = _ended()
    since = [_ended() for _ in range(5)]  # (ended: the kernel would give them again)
    victim = root_process_with_pid(given)
    try:
        assert victim.pid == given
        after = _ended()
    finally:
        victim.kill()
        victim.wait()
    assert not given < after <= max(since), f"pid {after} given again (ended since {given}: " \
                                             f"{since})"
