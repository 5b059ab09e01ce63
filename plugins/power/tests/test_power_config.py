"""The seed's JSON configuration, read with PBS_power's rules."""

from __future__ import annotations

import json

import pytest

from pbsplug import PluginLoadError, load_site, plugin_config
from pbsplug_power.config import DEFAULTS, PowerConfigError, power_config


def test_defaults_are_pbs_s():
    config = power_config({})
    assert (config.ramp, config.on_off, config.node_idle_limit, config.min_node_down_delay,
            config.max_jobs_analyze_limit, config.max_concurrent_nodes) == (
        False, False, 1800, 1800, 100, 10)
    assert config.mode is None


def test_the_seeds_sample_file():
    config = power_config({"power_ramp_rate_enable": "True", "power_on_off_enable": "False",
                           "node_idle_limit": "1000", "min_node_down_delay": "600",
                           "max_jobs_analyze_limit": "80"})
    assert (config.mode, config.node_idle_limit, config.min_node_down_delay,
            config.max_jobs_analyze_limit, config.max_concurrent_nodes) == (
        "ramp", 1000, 600, 80, 10)


@pytest.mark.parametrize("value", ["0", "-5", 0, -1, " -5 "])
def test_a_value_of_zero_or_less_falls_back_to_its_default(value):
    assert power_config({"node_idle_limit": value}).node_idle_limit == DEFAULTS[
        "node_idle_limit"]


@pytest.mark.parametrize(("key", "value", "message"), [
    ("node_idle_limit", "30m", "node_idle_limit: '30m' is not an integer"),
    ("max_concurrent_nodes", "2.5", "max_concurrent_nodes: '2.5' is not an integer"),
    ("min_node_down_delay", True, "min_node_down_delay: True is not an integer"),
    ("power_on_off_enable", "yes", "power_on_off_enable: 'yes' is not True or False"),
    # digits int() reads too: Arabic-Indic, with Python's separators
    ("node_idle_limit", "\u0661\u0668\u0660\u0660",
     "node_idle_limit: '\u0661\u0668\u0660\u0660' is not an integer"),
    ("min_node_down_delay", "1_800", "min_node_down_delay: '1_800' is not an integer"),
    ("max_concurrent_nodes", 2.0, "max_concurrent_nodes: 2.0 is not an integer"),
])
def test_a_value_pbs_refuses_is_named(key, value, message):
    with pytest.raises(PowerConfigError, match=message):
        power_config({key: value})


@pytest.mark.parametrize(("key", "value", "bound"), [
    ("timeout", 1e300, "<= 86400"),  # subprocess.run: OverflowError, not a DriverError
    ("boot_timeout", 10**400, "<= 315360000"),  # float(): OverflowError at every run
    ("boot_delay", 10**400, "<= 315360000"),  # and in the scheduler's availability hook
    ("shutdown_delay", 10**400, "<= 315360000"),
], ids=["timeout", "boot_timeout", "boot_delay", "shutdown_delay"])
def test_a_duration_past_what_the_clock_can_add_is_refused_at_load(tmp_path, key, value,
                                                                   bound):
    """A JSON .CF file holds any integer: such a value passed the load and raised
    OverflowError (a traceback) where the hook turned it into a float."""
    cf = tmp_path / "PBS_power.CF"
    cf.write_text(json.dumps({key: value}))
    site = tmp_path / "site.toml"
    site.write_text('[plugins.power]\nenabled = true\nconfig_file = "PBS_power.CF"\n')
    with pytest.raises(PluginLoadError) as err:
        plugin_config("power", load_site(site))
    assert str(cf) in str(err.value) and key in str(err.value) and bound in str(err.value)
