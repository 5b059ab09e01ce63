"""The configuration of seed 000: keys, defaults, PBS's own .CF file, and every bad value
refused with an error that names it."""

from __future__ import annotations

import json

import pytest

import pbsplug_cray_atom as plugin
from pbsplug import PluginLoadError, load_plugins, load_site, plugin_config


def test_defaults_are_the_seeds(register_plugin):
    record = register_plugin(plugin, "cray_atom")
    assert dict(record.config) == {"post_timeout": 30.0, "delete_timeout": 30.0,
                                   "unix_socket_file": "/var/run/atomd/atomd.sock"}
    attrs = record.attributes
    assert (attrs.events, attrs.order, attrs.alarm, attrs.fail_action, attrs.user,
            attrs.type) == (("execjob_begin", "execjob_end"), 100, 300, ("offline_vnodes",),
                            "pbsadmin", "pbs")


def test_off_until_the_site_enables_it(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text("")
    assert load_plugins(load_site(site)).get("cray_atom").status == "disabled"
    site.write_text("[plugins.cray_atom]\nenabled = true\n")
    assert load_plugins(load_site(site)).get("cray_atom").status == "enabled"


def test_pbs_cray_atom_cf_works_unchanged(tmp_path):
    """PBS's own PBS_cray_atom.CF, as shipped and as a site edits it (integers for floats)."""
    cf = tmp_path / "PBS_cray_atom.CF"
    cf.write_text('{\n"post_timeout": 10,\n"delete_timeout": 2.5,\n'
                  '"unix_socket_file": "/run/atomd/atomd.sock"\n}\n')
    site = tmp_path / "site.toml"
    site.write_text('[plugins.cray_atom]\nenabled = true\nconfig_file = "PBS_cray_atom.CF"\n')
    assert plugin_config("cray_atom", load_site(site)) == {
        "post_timeout": 10.0, "delete_timeout": 2.5, "unix_socket_file": "/run/atomd/atomd.sock"}


@pytest.mark.parametrize("config,key,expected", [
    ({"post_timeout": "30"}, "post_timeout", "a number > 0"),
    ({"post_timeout": 0}, "post_timeout", "a number > 0"),
    ({"delete_timeout": -1.5}, "delete_timeout", "a number > 0"),
    ({"delete_timeout": True}, "delete_timeout", "a number > 0"),
    ({"unix_socket_file": 7}, "unix_socket_file", "a string"),
    ({"unix_socket_file": "atomd.sock"}, "unix_socket_file", "an absolute path"),
    ({"unix_socket_file": "/run/x/../atomd.sock"}, "unix_socket_file", "a path without '..'"),
    ({"version_uri": "/rm/v2"}, "version_uri", "unknown key"),
    ({"post_timout": 30}, "post_timout", "unknown key"),
])
def test_bad_values_are_refused_by_name(register_plugin, config, key, expected):
    record = register_plugin(plugin, "cray_atom", config=config, check=False)
    assert record.status == "failed"
    assert key in record.error and expected in record.error, record.error


@pytest.mark.parametrize("key", ["post_timeout", "delete_timeout"])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300, 86400.5])
def test_a_timeout_must_be_finite_and_at_most_the_default_alarm(register_plugin, key, value):
    """inf passes "> 0", and requests cannot wait that long (OverflowError, so every POST
    was the hook's error and every job was requeued): refused at load, naming the key."""
    record = register_plugin(plugin, "cray_atom", config={key: value}, check=False)
    assert record.status == "failed"
    assert key in record.error and "a number > 0 and <= 86400" in record.error, record.error
    assert len(record.error.strip().splitlines()) == 1, record.error


def test_the_largest_timeout_is_accepted(register_plugin):
    record = register_plugin(plugin, "cray_atom", config={"post_timeout": 86400,
                                                          "delete_timeout": 900.0})
    assert (record.config["post_timeout"], record.config["delete_timeout"]) == (86400.0, 900.0)


@pytest.mark.parametrize("key,site_text,cf_text", [
    ("post_timeout", "[plugins.cray_atom.config]\npost_timeout = inf\n", None),
    ("post_timeout", "[plugins.cray_atom.config]\npost_timeout = +inf\n", None),
    ("post_timeout", "[plugins.cray_atom.config]\npost_timeout = nan\n", None),
    # Python's json reads Infinity; the .CF reader (pbsplug.jsontext) refuses it as JSON,
    # naming the file
    ("not valid JSON: Infinity is not a JSON number", 'config_file = "PBS_cray_atom.CF"\n',
     '{"post_timeout": 30, "delete_timeout": Infinity}'),
])
def test_an_infinite_timeout_is_refused_naming_the_file_and_key(tmp_path, key, site_text,
                                                                cf_text):
    site = tmp_path / "site.toml"
    named = site
    if cf_text is not None:
        named = tmp_path / "PBS_cray_atom.CF"
        named.write_text(cf_text)
    site.write_text("[plugins.cray_atom]\nenabled = true\n" + site_text)
    with pytest.raises(PluginLoadError) as err:
        plugin_config("cray_atom", load_site(site))
    assert str(named) in str(err.value) and key in str(err.value), err.value
    assert cf_text is not None or "<= 86400" in str(err.value), err.value
    assert len(str(err.value).splitlines()) == 1, err.value


def test_a_bad_cf_file_names_the_file_and_the_key(tmp_path):
    cf = tmp_path / "PBS_cray_atom.CF"
    cf.write_text(json.dumps({"post_timeout": -3, "unix_socket_file": "/x.sock"}))
    site = tmp_path / "site.toml"
    site.write_text('[plugins.cray_atom]\nenabled = true\nconfig_file = "PBS_cray_atom.CF"\n')
    with pytest.raises(PluginLoadError) as err:
        plugin_config("cray_atom", load_site(site))
    assert str(cf) in str(err.value) and "post_timeout" in str(err.value)
    assert "-3" in str(err.value)
