"""The configuration, checked when the plugin loads: each bad value a one-line error naming
the key and what was wrong."""

from __future__ import annotations

import pytest

import pbsplug_mjf as plugin


@pytest.mark.parametrize(("values", "error"), [
    # A rating the plugin would write as 'inf' (refused by every reader, its own included),
    # or as 0 (never: a rating is absent when unknown).
    ({"hs06": float("inf")}, "hs06 = Infinity: expected a number >= 0.001 and <= 1e+09"),
    ({"hs06": float("nan")}, "hs06 = NaN: expected a number >= 0.001"),
    ({"hs06": 1e308}, "hs06 = 1e+308: expected a number >= 0.001 and <= 1e+09"),
    ({"hs06": 0.0001}, "hs06 = 0.0001: expected a number >= 0.001"),
    ({"hs06_per_cpu": 1e308}, "hs06_per_cpu = 1e+308: expected a number >= 0.001 and "
                              "<= 1e+06"),
    ({"hs06_per_cpu": float("inf")}, "hs06_per_cpu = Infinity: expected a number"),
    ({"hs06_per_cpu": 0.0001}, "hs06_per_cpu = 0.0001: expected a number >= 0.001"),
    ({"grace_secs": -1}, "grace_secs = -1: expected an integer >= 0"),
    # '..' after a link names two folders: the one made and the one written to
    ({"jobfeatures_dir": "/run/x/../jobfeatures"}, "jobfeatures_dir = \"/run/x/../jobfeatures\""
                                                   ": expected a path without '..'"),
    ({"grace_secs_job": 10**12}, "grace_secs_job = 1000000000000: expected at most "
                                 "315360000 (ten years)"),
    # PBS's own resources that are not sizes: every job would be refused, or counted wrong.
    ({"scratch_resource": "walltime"}, "scratch_resource = \"walltime\": walltime is a "
                                       "duration resource; expected a size resource"),
    ({"scratch_resource": "ncpus"}, "scratch_resource = \"ncpus\": ncpus is a long resource"),
    ({"scratch_resource": "my scratch"}, "scratch_resource = \"my scratch\": expected a "
                                         "resource name"),
    ({"scratch_path": "scratch"}, "scratch_path = \"scratch\": expected an absolute path"),
    ({"scratch_path": "/scratch/../tmp"}, "scratch_path = \"/scratch/../tmp\": expected a "
                                          "path without '..'"),
])
def test_a_bad_value_is_refused_at_load_naming_the_key(register_plugin, config, values,
                                                       error):
    record = register_plugin(plugin, "mjf", config={**config, **values}, check=False)
    assert record.status == "failed"
    text = record.failure_text()
    assert f"plugins.mjf.config.{error}" in text, text
    assert "\n" not in text


@pytest.mark.parametrize("values", [
    {"hs06": 0.001}, {"hs06": 1e9}, {"hs06_per_cpu": 1e6}, {"grace_secs": 315360000},
    {"scratch_resource": "scratch"},  # a custom resource: its type is the server's to say
    {"scratch_resource": "mem"}, {"scratch_path": "/nonexistent"},  # a host's own business
])
def test_good_values_load(register_plugin, config, values):
    assert register_plugin(plugin, "mjf", config={**config, **values}).status == "enabled"

