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
