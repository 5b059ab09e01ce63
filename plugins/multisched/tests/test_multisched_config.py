"""The configuration, checked when the plugin loads: each bad value a one-line error naming
the key and what was wrong."""

from __future__ import annotations

import pytest

import pbsplug_multisched as plugin


@pytest.mark.parametrize(("values", "error"), [
    # Written by each scheduler's process, read by the status command's: a relative folder
    # is a different one for each (their working folders), and the status shows no cycle.
    ({"state_dir": "records"}, "state_dir = \"records\": expected an absolute path"),
    # checked level by level as written: '..' after a link names another folder
    ({"state_dir": "/var/x/../records"}, "state_dir = \"/var/x/../records\": expected a path "
                                         "without '..'"),
    # No program to run: the status ran its first argument, or "-c", and said it could not.
    ({"qmgr": []}, "qmgr = []: expected the qmgr program and its arguments"),
    ({"qmgr": ["", "-c"]}, "qmgr = [\"\", \"-c\"]: expected the qmgr program and its "
                           "arguments"),
])
def test_a_bad_value_is_refused_at_load_naming_the_key(register_plugin, values, error):
    record = register_plugin(plugin, "multisched", config=values, check=False)
    assert record.status == "failed"
    text = record.failure_text()
    assert f"plugins.multisched.config.{error}" in text, text
    assert "\n" not in text


@pytest.mark.parametrize("values", [{"state_dir": ""}, {"state_dir": "/records"},
                                    {"qmgr": ["qmgr"]}])
def test_good_values_load(register_plugin, values):
    # (register_plugin puts back the configuration the loaded plugin keeps: this one names
    # no real folder)
    assert register_plugin(plugin, "multisched", config=values).status == "enabled"
    assert plugin._config is not None and plugin._config["state_dir"] == values.get(
        "state_dir", "")
