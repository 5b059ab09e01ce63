"""The kernel's clock: what plugins read instead of time.time(), set by the simulator."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

from pbsplug import clock

PLUGINS = Path(__file__).resolve().parent.parent / "plugins"


def test_wall_time_by_default_and_a_source_while_in_use():
    assert abs(clock.now() - time.time()) < 60
    with clock.use(lambda: 1000.0):
        assert clock.now() == 1000.0
        with clock.use(lambda: 2000.0):
            assert clock.now() == 2000.0
        assert clock.now() == 1000.0
    assert clock.now() > 1_600_000_000


def test_set_source_refuses_what_is_not_callable_and_none_is_wall_time():
    with pytest.raises(TypeError, match="must be callable, not int"):
        clock.set_source(5)
    clock.set_source(lambda: 7.0)
    try:
        assert clock.now() == 7.0
    finally:
        clock.set_source(None)
    assert clock.now() > 1_600_000_000


def test_the_previous_source_comes_back_when_the_block_raises():
    with pytest.raises(RuntimeError), clock.use(lambda: 3.0):
        raise RuntimeError("inside")
    assert clock.now() > 1_600_000_000


def test_a_plugin_decides_on_the_kernel_clock(tmp_path):
    """The power plugin's simulated driver boots a host in virtual seconds."""
    from pbsplug_power.simulated import Simulated

    virtual = [1000.0]
    with clock.use(lambda: virtual[0]):
        driver = Simulated({"state_dir": str(tmp_path), "boot_delay": 300,
                            "shutdown_delay": 60})
        driver.power_off(["n1"])
        virtual[0] += 59
        assert driver.status(["n1"]) == {"n1": "on"}       # still shutting down
        virtual[0] += 1
        assert driver.status(["n1"]) == {"n1": "off"}
        driver.power_on(["n1"])
        virtual[0] += 299
        assert driver.status(["n1"]) == {"n1": "on"}       # booting
        virtual[0] += 1
        assert driver.status(["n1"]) == {"n1": "ready"}


def _wall_clock_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Attribute) and node.attr in ("time", "time_ns")
                and isinstance(node.value, ast.Name) and node.value.id == "time"):
            found.append(f"{path.relative_to(PLUGINS)}:{node.lineno}")
        if (isinstance(node, ast.ImportFrom) and node.module == "time"
                and any(a.name in ("time", "time_ns") for a in node.names)):
            found.append(f"{path.relative_to(PLUGINS)}:{node.lineno}")
    return found


def test_no_plugin_reads_the_wall_clock():
    """Plugins read pbsplug.clock, so the simulator's virtual time reaches every decision.

    The stand-in services (fake.py, fake_capmc.py) are separate programs playing a real
    device, not plugin code: they keep wall time."""
    sources = [p for p in PLUGINS.glob("*/pbsplug_*/**/*.py")
               if p.name not in ("fake.py", "fake_capmc.py")]
    assert len(sources) > 20
    assert [hit for p in sources for hit in _wall_clock_reads(p)] == []
