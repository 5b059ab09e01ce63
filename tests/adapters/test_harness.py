"""The real PBS's fixtures themselves (conftest.py): what they start keeps no descriptor
of the pytest that started it. Runs without PBS."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from . import conftest
from .conftest import shared_with


def test_shared_with_names_the_files_a_process_was_handed(tmp_path):
    lock = tmp_path / "lock"
    with open(lock, "w") as held:
        handed = subprocess.Popen(["sleep", "60"], pass_fds=[held.fileno()])
        clean = subprocess.Popen(["sleep", "60"])
        try:
            assert shared_with([handed.pid]) == [f"{handed.pid}: {lock}"]
            assert shared_with([clean.pid]) == []
        finally:
            for proc in (handed, clean):
                proc.kill()
                proc.wait()


def test_a_recipe_step_hands_its_daemons_no_descriptor_of_pytest(tmp_path, monkeypatch):
    """As under ``flock LOCK pytest``: a descriptor this process inherited (inheritable,
    as flock's is) must not reach a daemon the recipe starts (pbs_sched kept the lock)."""
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    pid_file = tmp_path / "daemon.pid"
    (recipe / "start.sh").write_text(
        f"setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $! > {pid_file}\n")
    monkeypatch.setattr(conftest, "RECIPE", recipe)
    lock = tmp_path / "lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    os.set_inheritable(fd, True)
    try:
        conftest._step("start.sh", 30)
        deadline = time.monotonic() + 10
        while not pid_file.read_text().strip():
            assert time.monotonic() < deadline, "the step's daemon never started"
            time.sleep(0.05)
        daemon = int(pid_file.read_text())
        try:
            assert os.path.exists(f"/proc/{daemon}")
            assert shared_with([daemon]) == []
        finally:
            os.kill(daemon, signal.SIGKILL)
    finally:
        os.close(fd)
