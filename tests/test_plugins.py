"""Discovery and enablement, against distributions installed on sys.path."""

import sys

import pytest

from pbsplug import (
    KERNEL_API,
    PluginInfo,
    PluginLoadError,
    Setting,
    default_home,
    hookimpl,
    load_plugins,
)
from pbsplug.siteconfig import PluginSite, SiteConfig, parse_site

#: This kernel's API version, and the next minor one (which it does not offer).
_API = f"{KERNEL_API[0]}.{KERNEL_API[1]}"
_NEXT = f"{KERNEL_API[0]}.{KERNEL_API[1] + 1}"

NOOP = """
from pbsplug import hookimpl
IMPORTED = True
@hookimpl
def queuejob(event):
    pass
"""


@pytest.fixture
def installed(dists, monkeypatch):
    """Install distributions on sys.path for this test; forget their modules afterwards."""
    monkeypatch.syspath_prepend(str(dists.root))
    before = set(sys.modules)
    yield dists
    for name in set(sys.modules) - before:
        if name.startswith("pbsplug_"):
            del sys.modules[name]


def site(tmp_path, text=""):
    return parse_site(__import__("tomllib").loads(text), tmp_path / "site.toml")


def load(tmp_path, text="", **kw):
    kw.setdefault("env", {})
    return load_plugins(site(tmp_path, text), **kw)


def test_installed_plugins_stay_off_and_unimported(installed, tmp_path):
    installed.add("alpha", NOOP)
    plugins = load(tmp_path)
    rec = plugins.get("alpha")
    assert rec.status == "disabled" and rec.plugin is None
    assert "pbsplug_alpha" not in sys.modules
    assert rec.dist == "pbsplug-alpha" and rec.version == "1.0"


def test_site_enables_and_registers(installed, tmp_path):
    installed.add("alpha", NOOP)
    installed.add("beta", NOOP)
    plugins = load(tmp_path, "[plugins.alpha]\nenabled = true\norder = 7\n")
    assert plugins.get("alpha").status == "enabled"
    assert plugins.get("alpha").attributes.order == 7
    assert plugins.get("beta").status == "disabled"
    assert [i.plugin_name for i in plugins.hook.queuejob.get_hookimpls()] == ["alpha"]


def test_enable_all_installed_but_the_site_can_still_disable(installed, tmp_path):
    installed.add("alpha", NOOP)
    installed.add("beta", NOOP)
    plugins = load(tmp_path, "enable_all_installed = true\n[plugins.beta]\nenabled = false\n")
    assert plugins.get("alpha").status == "enabled"
    assert plugins.get("beta").status == "disabled"


def test_allowlist_and_denylist_apply_before_import(installed, tmp_path):
    for name in ("alpha", "beta", "gamma"):
        installed.add(name, NOOP)
    text = "enable_all_installed = true\n"
    plugins = load(tmp_path, text, env={"PBSPLUG_LOAD_PLUGINS": "alpha,gamma",
                                        "PBSPLUG_DISABLE_PLUGINS": "gamma"})
    assert [plugins.get(n).status for n in ("alpha", "beta", "gamma")] == [
        "enabled", "blocked", "blocked"]
    assert "pbsplug_beta" not in sys.modules and "pbsplug_gamma" not in sys.modules
    assert "PBSPLUG_DISABLE_PLUGINS" in plugins.get("gamma").error
    none = load(tmp_path, text, env={"PBSPLUG_LOAD_PLUGINS": ""})
    assert {r.status for r in none.records.values()} == {"blocked"}


@pytest.mark.parametrize("source,error", [
    ("raise RuntimeError('boom')", "import failed: RuntimeError: boom at "),
    ("import sys\nsys.exit(3)", "import failed: SystemExit: 3"),
    ("import does_not_exist_anywhere", "ModuleNotFoundError"),
    ("from pbsplug import absolute_path_v99",
     "cannot import name 'absolute_path_v99' from 'pbsplug'"),
    ("from pbsplug import absolute_path_v99",
     f"(this pbsplug offers kernel API {_API}: the plugin may need a newer one)"),
    ("import pbsplug.no_such_room", f"(this pbsplug offers kernel API {_API}: the plugin"),
    (NOOP + "\nplugin_info = 42\n", "plugin_info is not a pbsplug.PluginInfo"),
    ("from pbsplug import PluginInfo\nplugin_info = PluginInfo(api='2.0')",
     f"needs kernel API 2.0, this pbsplug offers {_API}"),
    (f"from pbsplug import PluginInfo\nplugin_info = PluginInfo(api='{_NEXT}')",
     f"needs kernel API {_NEXT}, this pbsplug offers {_API}"),
    ("from pbsplug import PluginInfo\nplugin_info = PluginInfo(api='one')",
     "is not a version like '1.0'"),
    ("from pbsplug import hookimpl\n@hookimpl\ndef queuejobb(event): pass",
     "implements hooks no spec declares: queuejobb"),
    ("from pbsplug import hookimpl\n@hookimpl\ndef queuejob(event, extra): pass",
     "cannot register: hook queuejob(event, extra) takes extra, which its spec "
     "queuejob(event) does not have"),
    ("from pbsplug import hookimpl\n@hookimpl\ndef queuejob(ev): pass",
     "cannot register: hook queuejob(ev) takes ev, which its spec queuejob(event)"),
    ("from pbsplug import hookimpl, PluginInfo\nplugin_info = PluginInfo(sim_safe=('queuejb',))"
     "\n@hookimpl\ndef queuejob(event): pass",
     "bad plugin_info: sim_safe names 'queuejb', which is no hook (check the spelling"),
    ("from pbsplug import hookimpl, PluginInfo\nplugin_info = PluginInfo(sim_safe=('runjob',))"
     "\n@hookimpl\ndef queuejob(event): pass",
     "bad plugin_info: sim_safe names runjob, which the plugin does not implement"),
    ("from pbsplug import hookimpl, PluginInfo\nplugin_info = PluginInfo(sim_safe=('queuejob'))"
     "\n@hookimpl\ndef queuejob(event): pass",
     "bad plugin_info: sim_safe must be a tuple of hook names, not 'queuejob'"),
    ("from pbsplug import hookimpl, PluginInfo, Setting\n"
     "plugin_info = PluginInfo(config={'n': Setting(int, '600')})\n"
     "@hookimpl\ndef queuejob(event): pass",
     "bad plugin_info: the default of config key 'n', '600', breaks its own Setting: "
     "expected an integer"),
    ("from pbsplug import hookimpl, PluginInfo, Setting\n"
     "plugin_info = PluginInfo(config={'m': Setting(str, 'x', check=lambda v: 'not a mode')})\n"
     "@hookimpl\ndef queuejob(event): pass",
     "bad plugin_info: the default of config key 'm', 'x', breaks its own Setting: not a mode"),
    # A state folder a replay could not move into its own work folder (kernel API 1.13).
    ("from pbsplug import hookimpl, PluginInfo, Setting\n"
     "plugin_info = PluginInfo(config={'d': Setting(str, '/var/d', state_folder=True)})\n"
     "@hookimpl\ndef queuejob(event): pass",
     "bad plugin_info: config key 'd' is a state_folder: it must be a str whose default is "
     "empty (read as the pbsplug home's hooks/tmp, which a replay makes its own work "
     "folder), not str '/var/d'"),
    ("from pbsplug import hookimpl, PluginInfo, Setting\n"
     "plugin_info = PluginInfo(config={'d': Setting(list, [], state_folder=True)})\n"
     "@hookimpl\ndef queuejob(event): pass",
     "config key 'd' is a state_folder: it must be a str whose default is empty"),
    ("from pbsplug import hookimpl, PluginInfo\nplugin_info = PluginInfo(events=('runjob',))\n"
     "@hookimpl\ndef queuejob(event): pass",
     "events runjob are enabled but the plugin implements no hook for them"),
    ("from pbsplug import hookimpl, PluginInfo\n"
     "plugin_info = PluginInfo(fail_action=('offline_vnodes',))\n"
     "@hookimpl\ndef queuejob(event): pass",
     "Can't set hook fail_action value to 'offline_vnodes'"),
])
def test_a_broken_plugin_is_reported_and_skipped(installed, tmp_path, source, error):
    installed.add("broken", source, version="2.5")
    installed.add("good", NOOP)
    plugins = load(tmp_path, "enable_all_installed = true\n")
    broken = plugins.get("broken")
    assert broken.status == "failed" and error in broken.error
    text = broken.failure_text()
    assert "plugin 'broken' pbsplug-broken 2.5 failed:" in text
    assert "pbsplug plugins disable broken" in text
    assert plugins.get("good").status == "enabled"
    assert [i.plugin_name for i in plugins.hook.queuejob.get_hookimpls()] == ["good"]


@pytest.mark.parametrize("source", ["import does_not_exist_anywhere",
                                    "raise ImportError('its own')",
                                    "from collections import no_such_name"])
def test_an_import_error_not_about_pbsplug_names_no_kernel_api(installed, tmp_path, source):
    installed.add("broken", source)
    broken = load(tmp_path, "enable_all_installed = true\n").get("broken")
    assert broken.status == "failed" and "import failed: " in broken.error
    assert "kernel API" not in broken.error


def test_strict_mode_makes_failures_fatal(installed, tmp_path):
    installed.add("broken", "raise RuntimeError('boom')")
    with pytest.raises(PluginLoadError, match="plugin 'broken'.*boom"):
        load(tmp_path, "enable_all_installed = true\n", strict=True)
    with pytest.raises(PluginLoadError):
        load(tmp_path, "enable_all_installed = true\n", env={"PBSPLUG_STRICT_PLUGINS": "1"})
    with pytest.raises(PluginLoadError):
        load(tmp_path, "enable_all_installed = true\nstrict_plugins = true\n")


def test_plugin_configuration_is_validated(installed, tmp_path):
    installed.add("conf", """
from pbsplug import PluginInfo, Setting, hookimpl
plugin_info = PluginInfo(config={"timeout": Setting(float, 30.0, gt=0)})
@hookimpl
def queuejob(event):
    pass
""")
    ok = load(tmp_path, "[plugins.conf]\nenabled = true\n[plugins.conf.config]\ntimeout = 5\n")
    assert ok.get("conf").config == {"timeout": 5.0}
    bad = load(tmp_path, "[plugins.conf]\nenabled = true\n[plugins.conf.config]\n"
                         "timeout = -1\nretries = 2\n")
    error = bad.get("conf").error
    assert "plugins.conf.config.timeout = -1: expected a number > 0" in error
    assert "plugins.conf.config.retries = 2: unknown key" in error
    cf = tmp_path / "conf.CF"
    cf.write_text('{"timeout": "soon"}')
    from_cf = load(tmp_path, f'[plugins.conf]\nenabled = true\nconfig_file = "{cf}"\n')
    assert f'{cf}: timeout = "soon": expected a number' in from_cf.get("conf").error



def test_a_path_setting_is_checked_at_load(installed, tmp_path):
    """A plugin's path setting with the kernel's check: a bad value fails the plugin with
    one line naming the key, from the site's TOML or a .CF file."""
    installed.add("paths", """
from pbsplug import PluginInfo, Setting, absolute_path, absolute_path_or_empty, hookimpl
plugin_info = PluginInfo(api="1.9", config={
    "root": Setting(str, "/sys", check=absolute_path),
    "state_dir": Setting(str, "", check=absolute_path_or_empty)})
@hookimpl
def queuejob(event):
    pass
""")
    head = "[plugins.paths]\nenabled = true\n"
    ok = load(tmp_path, head + '[plugins.paths.config]\nstate_dir = "/var/x"\n')
    assert ok.get("paths").status == "enabled", ok.get("paths").error
    assert ok.get("paths").config == {"root": "/sys", "state_dir": "/var/x"}
    bad = load(tmp_path, head + '[plugins.paths.config]\nroot = "sys"\n').get("paths")
    assert bad.status == "failed"
    assert bad.error == (f'bad configuration: {tmp_path / "site.toml"} [plugins.paths.config]: '
                         'plugins.paths.config.root = "sys": expected an absolute path')
    cf = tmp_path / "paths.CF"
    cf.write_text('{"state_dir": "/var/../etc"}')
    bad = load(tmp_path, head + f'config_file = "{cf}"\n').get("paths")
    assert bad.error == (f"bad configuration: {cf}: state_dir = \"/var/../etc\": expected a "
                         "path without '..'")


@pytest.mark.parametrize("name, ok", [("conf.CF", True), ("conf.json", True),
                                      ("conf.ini", True), ("conf.txt", True), ("conf.xml", True),
                                      ("conf.py", True), ("conf.yaml", False),
                                      ("conf.cf", False), ("conf", False)])
def test_a_config_file_has_one_of_pbs_suffixes(installed, tmp_path, name, ok):
    """PBS imports a hook config file only with .json .py .txt .xml .ini; PBS's own stored
    <hook>.CF is read as is."""
    installed.add("conf", """
from pbsplug import PluginInfo, Setting, hookimpl
plugin_info = PluginInfo(config={"timeout": Setting(float, 30.0, gt=0)})
@hookimpl
def queuejob(event):
    pass
""")
    cf = tmp_path / name
    cf.write_text('{"timeout": 5}')
    record = load(tmp_path, f'[plugins.conf]\nenabled = true\nconfig_file = "{cf}"\n'
                  ).get("conf")
    if ok:
        assert record.config == {"timeout": 5.0}, record.error
    else:
        assert record.error == (f"bad configuration: {cf} contains an invalid suffix, should "
                                "be one of: .json .py .txt .xml .ini")


def test_a_plugins_own_check_sees_the_whole_configuration(installed, tmp_path):
    installed.add("pair", """
from pbsplug import PluginInfo, Setting, hookimpl
def both(config):
    if config["low"] > config["high"]:
        yield "low", f"must not exceed high ({config['high']})"
plugin_info = PluginInfo(config={"low": Setting(int, 1), "high": Setting(int, 10)},
                         check_config=both)
@hookimpl
def queuejob(event):
    pass
""")
    ok = load(tmp_path, "[plugins.pair]\nenabled = true\n[plugins.pair.config]\nlow = 5\n")
    assert ok.get("pair").config == {"low": 5, "high": 10}
    bad = load(tmp_path, "[plugins.pair]\nenabled = true\n[plugins.pair.config]\nlow = 50\n")
    assert bad.get("pair").status == "failed"
    assert "plugins.pair.config.low = 50: must not exceed high (10)" in bad.get("pair").error
    typed = load(tmp_path, '[plugins.pair]\nenabled = true\n[plugins.pair.config]\nlow = "x"\n')
    assert "low = \"x\": expected an integer" in typed.get("pair").error  # typed first


def test_two_distributions_claiming_one_name(installed, tmp_path):
    installed.add("alpha", NOOP)
    info = installed.root / "other_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other-dist\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pbsplug]\nalpha = pbsplug_alpha\n")
    plugins = load(tmp_path, "enable_all_installed = true\n")
    assert plugins.get("alpha").status == "failed"
    assert "two distributions provide plugin 'alpha'" in plugins.get("alpha").error


def test_attribute_registration_failure_is_isolated(installed, tmp_path):
    installed.add("attrs", """
from pbsplug import hookimpl
@hookimpl
def register_attributes(registry):
    registry.add("node", "poweroff_eligible", "boolean", False)
""")
    installed.add("badattrs", """
from pbsplug import hookimpl
@hookimpl
def register_attributes(registry):
    registry.add("node", "x", "colour")
""")
    plugins = load(tmp_path, "enable_all_installed = true\n")
    registry = plugins.attribute_registry()
    assert ("node", "poweroff_eligible") in registry.attributes
    assert registry.attributes[("node", "poweroff_eligible")].plugin == "attrs"
    assert plugins.get("badattrs").status == "failed"
    assert "type 'colour' is not one of" in plugins.get("badattrs").error


@pytest.mark.parametrize("name", ["a b\nc", "1st", "dot.ted", "x" * 300, "state=free"])
def test_an_attribute_name_pbs_could_not_hold_is_refused_at_registration(name):
    """A hook may set only names of PBS's rule (values.attribute_name): a plugin that
    registered another had an attribute nothing could ever set, and qmgr and qstat print
    it as it is (a line break in a name breaks their output)."""
    from pbsplug import AttributeRegistry

    with pytest.raises(ValueError, match=r"^attribute .*: not a node attribute name \(a "
                                         r"letter, then letters, digits or _\)$"):
        AttributeRegistry().add("node", name, "string")
    assert AttributeRegistry().add("node", "cpuset_free_mask", "string").name == \
        "cpuset_free_mask"


def test_site_table_for_a_plugin_not_installed_is_reported(installed, tmp_path):
    plugins = load(tmp_path, "[plugins.ghost]\nenabled = true\n")
    assert any("no installed plugin is named 'ghost'" in p for p in plugins.config_issues())


def test_plugin_set_add_for_objects(tmp_path):
    from pbsplug import PluginSet, hookimpl

    class Obj:
        @hookimpl
        def runjob(self, event):
            pass

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    rec = plugins.add("obj", Obj(), enable=True)
    assert rec.status == "enabled" and rec.hooks == ("runjob",)
    assert rec.attributes.events == ("runjob",)


@pytest.mark.parametrize("first", ["enabled", "failed"])
def test_plugin_set_add_of_a_name_again_loads_the_plugin_again(tmp_path, first):
    """The second add replaces the first, as a plugin loaded again with another
    configuration. It took the first one's record: after a failed add, the second one was
    enabled with the first one's error on it; after an enabled one, pluggy refused the
    name ('cannot register: Plugin name already registered') and the plugin was failed
    and out of the plugin manager."""
    from pbsplug import PluginInfo, PluginSet, Setting, hookimpl

    class Obj:
        plugin_info = PluginInfo(config={"n": Setting(int, 1)})

        @hookimpl
        def runjob(self, event):
            pass

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    plugins.site.plugins["obj"] = PluginSite("obj", enabled=True, config={
        "n": 2 if first == "enabled" else "x"})
    old = Obj()
    assert plugins.add("obj", old).status == first
    plugins.site.plugins["obj"] = PluginSite("obj", enabled=True, config={"n": 3})
    new = Obj()
    rec = plugins.add("obj", new)
    assert (rec.status, rec.error, rec.config) == ("enabled", None, {"n": 3})
    assert plugins.get("obj") is rec and rec.plugin is new
    assert plugins.pm.get_plugin("obj") is new and not plugins.pm.is_registered(old)


def test_a_failed_add_of_an_object_added_under_another_name_leaves_that_one(tmp_path):
    """pluggy takes one object under one name: a second add of it, under another name,
    fails, and the first stays registered, as its record says. The failure unregistered
    the object, taking the first name's hooks away while its record still said enabled."""
    from pbsplug import PluginSet, hookimpl

    class Obj:
        @hookimpl
        def runjob(self, event):
            pass

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    obj = Obj()
    assert plugins.add("a", obj, enable=True).status == "enabled"
    assert plugins.add("b", obj, enable=True).status == "failed"
    assert plugins.get("a").status == "enabled" and plugins.pm.get_plugin("a") is obj


def test_attribute_registry_follows_plugins_added_after_it(tmp_path):
    """A plugin added after a first `attribute_registry()` has its attributes registered;
    one added again (replaced) has its old attributes gone, and one that then fails has
    none. The registry was computed once: the later plugins' register_attributes were
    never called, and the replaced or failed one's attributes stayed."""
    from pbsplug import PluginSet, hookimpl

    class Flags:
        def __init__(self, name: str, fails: bool = False):
            self.name, self.fails = name, fails

        @hookimpl
        def register_attributes(self, registry):
            registry.add("node", self.name, "boolean", False)

        @hookimpl
        def configure(self):
            if self.fails:
                raise RuntimeError("no")

    def names() -> dict[str, str]:
        return {name: attr.plugin for (otype, name), attr in
                plugins.attribute_registry().attributes.items() if otype == "node"}

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    plugins.add("first", Flags("first_flag"), enable=True)
    assert names() == {"first_flag": "first"}
    plugins.add("second", Flags("second_flag"), enable=True)
    assert names() == {"first_flag": "first", "second_flag": "second"}
    plugins.add("first", Flags("other_flag"), enable=True)
    assert names() == {"other_flag": "first", "second_flag": "second"}
    assert plugins.add("second", Flags("third_flag", fails=True), enable=True).status == \
        "failed"
    assert names() == {"other_flag": "first"}

def test_plugin_config_for_commands(installed, tmp_path):
    from pbsplug import plugin_config

    installed.add("conf2", """
from pbsplug import PluginInfo, Setting, hookimpl
plugin_info = PluginInfo(config={"path": Setting(str, "/var/run/x.sock")})
@hookimpl
def queuejob(event):
    pass
""")
    assert plugin_config("conf2", site(tmp_path)) == {"path": "/var/run/x.sock"}
    assert plugin_config("conf2", site(tmp_path, '[plugins.conf2.config]\npath = "/s"\n')) == {
        "path": "/s"}
    with pytest.raises(PluginLoadError, match="plugin 'ghost'.*not installed"):
        plugin_config("ghost", site(tmp_path))
    with pytest.raises(PluginLoadError, match="unknown key"):
        plugin_config("conf2", site(tmp_path, "[plugins.conf2.config]\nbogus = 1\n"))


class FolderAtHome:
    """A plugin that resolves its state folder as its configure runs: the site's, else
    ``<home>/hooks/tmp`` under the pbsplug home of that moment (as the power plugin does).
    With `state_folder` false, its key is not marked one."""

    def __init__(self, state_folder: bool = True):
        self.plugin_info = PluginInfo(api="1.13", config={
            "state_dir": Setting(str, "", state_folder=state_folder)})
        self.folders: list[str] = []

    @hookimpl
    def configure(self, config):
        self.folders.append(config["state_dir"] or str(default_home() / "hooks" / "tmp"))


def test_a_replays_private_state_folders_configure_every_plugin_with_one_under_its_home(
        tmp_path, monkeypatch):
    """`private_state_folders` configures again, under the home of the block (a replay's
    work folder), every enabled plugin that has a state folder, its value left empty by
    the site too, and again under the home after it with its config back: a plugin whose
    empty folder its first configure resolved under the home it was loaded in kept that
    folder through the replay (only a plugin whose folder the site set was configured
    again). A plugin with no state folder is left alone."""
    from pbsplug.plugins import PluginSet

    monkeypatch.setenv("PBSPLUG_HOME", str(tmp_path / "live"))
    plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
    made = {}
    for name, config, state_folder in (("empty", {}, True), ("none", {}, False),
                                       ("set", {"state_dir": "/var/s"}, True)):
        plugin = made[name] = FolderAtHome(state_folder)
        plugins.site.plugins[name] = PluginSite(name, enabled=True, config=config)
        assert plugins.add(name, plugin).status == "enabled"
    live = str(tmp_path / "live" / "hooks" / "tmp")
    replay = str(tmp_path / "replay" / "hooks" / "tmp")
    monkeypatch.setenv("PBSPLUG_HOME", str(tmp_path / "replay"))
    with plugins.private_state_folders() as set_aside:
        assert set_aside == {("set", "state_dir"): "/var/s"}
        assert made["empty"].folders == [live, replay]
        assert made["set"].folders == ["/var/s", replay]
        assert plugins.get("empty").config == plugins.get("set").config == {"state_dir": ""}
        monkeypatch.setenv("PBSPLUG_HOME", str(tmp_path / "live"))
    assert made["empty"].folders == [live, replay, live]
    assert made["set"].folders == ["/var/s", replay, "/var/s"]
    assert plugins.get("set").config == {"state_dir": "/var/s"}
    assert made["none"].folders == [live]
