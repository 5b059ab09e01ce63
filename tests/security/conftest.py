"""Fixtures the security tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def control(tmp_path) -> Path:
    """A folder through which a test tells a test plugin's hooks what to do."""
    path = tmp_path / "control"
    path.mkdir()
    return path


@pytest.fixture
def engine(local_engine):
    """A started server (pbsplug.testing's `local_engine`), no plugin enabled."""
    return local_engine()


def qsub(attacker, engine, *args: str) -> str:
    """The attacker's ``qsub`` from the submission folder; the job's id."""
    done = attacker.pbs(engine, "qsub", *args, cwd=engine.work)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
