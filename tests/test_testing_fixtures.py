"""pbsplug.testing's fixtures take the arguments docs/plugin-authors.md names."""

import os
import re
import subprocess
import sys

import pytest

from pbsplug import Job, Placement, PluginInfo, Setting, Vnode, clock, default_home, hookimpl
from pbsplug.testing import site_toml


def test_local_engine_takes_the_site_config_as_site_toml(local_engine):
    engine = local_engine(site_toml="trace_file = \"trace.jsonl\"\n", env=None)
    assert (engine.root / "site.toml").read_text() == "trace_file = \"trace.jsonl\"\n"
    job_id = engine.submit("true\n")
    assert engine.wait(job_id)["Exit_status"] == 0


def test_site_toml_enables_the_plugin_with_its_attributes_and_config():
    text = site_toml("my_policy", {"key": 1}, freq=1)
    assert "[plugins.my_policy]" in text and "enabled = true" in text
    assert "freq = 1" in text and "key = 1" in text


class _Timed:
    """A plugin whose hooks write the kernel's time under the pbsplug home, and whose
    placement leaves out n1."""

    plugin_info = PluginInfo(events=("execjob_begin", "execjob_end"),
                             config={"threshold": Setting(int)})

    @hookimpl
    def execjob_begin(self, event):
        folder = default_home() / "hooks" / "tmp"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "begin").write_text(str(clock.now()))

    @hookimpl
    def execjob_end(self, event):
        (default_home() / "hooks" / "tmp" / "end").write_text(str(clock.now()))

    @hookimpl
    def sched_node_placement(self, placement):
        return placement.fit([v for v in placement.candidates if v.name != "n1"])


def test_register_plugin_without_check_returns_the_failed_record(register_plugin):
    record = register_plugin(_Timed(), "my_policy", config={"threshold": "3"}, check=False)
    assert record.status == "failed"
    assert "plugins.my_policy.config.threshold" in record.error
    assert "expected an integer" in record.error


def test_register_plugin_again_loads_the_plugin_again(register_plugin, pbsplug_plugins):
    """A name registered again is the plugin loaded with the new configuration, its record
    a new one. Before, the second one was enabled with the first one's configuration error
    still on its record."""
    assert register_plugin(_Timed(), "my_policy", config={"threshold": "3"},
                           check=False).status == "failed"
    again = register_plugin(_Timed(), "my_policy", config={"threshold": 3})
    assert (again.status, again.error, again.config) == ("enabled", None, {"threshold": 3})
    assert pbsplug_plugins.get("my_policy") is again


#: A pytest run of two tests: the first registers plugin modules, whose configure (and, for
#: the toy, an in-process hook) binds names in them; the second, later in the same process,
#: finds those names as they were at import.
_KEPT = """
import pbsplug_cpuset
import pbsplug_multisched
import pbsplug_power
import toyplug

MODULES = [toyplug, pbsplug_cpuset, pbsplug_multisched, pbsplug_power]
AT_IMPORT = [dict(vars(m)) for m in MODULES]


def test_registered(register_plugin, fire_event, tmp_path):
    register_plugin(toyplug, "toy", config={"n": 2})
    assert fire_event("queuejob", {"job": {"id": "1.s"}}, mode="inprocess").accepted
    assert (toyplug._config, toyplug._seen) == ({"n": 2}, "1.s")
    register_plugin(pbsplug_cpuset, "cpuset", config={"cgroup_root": str(tmp_path)})
    register_plugin(pbsplug_multisched, "multisched", config={"state_dir": str(tmp_path)})
    register_plugin(pbsplug_power, "power", config={"state_dir": str(tmp_path)})
    assert all(m._config is not None for m in MODULES)


def test_a_later_test_finds_them_as_at_import():
    left = {m.__name__: sorted(k for k, v in names.items() if vars(m).get(k) is not v)
            for m, names in zip(MODULES, AT_IMPORT)}
    assert not any(left.values()), f"left bound by an earlier test: {left}"
"""

_TOY = """
from pbsplug import PluginInfo, Setting, hookimpl

plugin_info = PluginInfo(events=("queuejob",), config={"n": Setting(int, 1)})
_config = None
_seen = None


@hookimpl
def configure(config):
    global _config
    _config = config


@hookimpl
def queuejob(event):
    global _seen
    _seen = event.job.id
"""


def test_register_plugin_puts_back_what_a_plugin_module_bound(tmp_path):
    """A module outlives its test: the configuration its configure kept (the cpuset, power
    and multisched plugins keep theirs as _config) was still there in every later test of
    the same pytest, and one that ran the plugin's code without registering it ran it
    under that test's folders."""
    (tmp_path / "toyplug.py").write_text(_TOY)
    (tmp_path / "test_kept.py").write_text(_KEPT)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(tmp_path / "test_kept.py")], capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


#: Two tests: the first patches a plugin module's name with monkeypatch, then registers
#: the module (register_plugin asked for before monkeypatch); the second finds the name as
#: it was at import.
_PATCHED = """
import toyplug


def test_patched(register_plugin, monkeypatch):
    monkeypatch.setattr(toyplug, "_seen", "patched")
    register_plugin(toyplug, "toy")


def test_a_later_test_finds_it_as_at_import():
    assert toyplug._seen is None
"""


def test_register_plugin_leaves_a_monkeypatch_of_the_module_undone(tmp_path):
    """register_plugin keeps a module's names as they were when it was registered: a name
    the test had patched before with monkeypatch, whose own undo came first (a fixture
    asked for later is undone earlier), was patched again by register_plugin's, for every
    later test."""
    (tmp_path / "toyplug.py").write_text(_TOY)
    (tmp_path / "test_patched.py").write_text(_PATCHED)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(tmp_path / "test_patched.py")], capture_output=True,
                            text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_a_tests_clock_and_home_reach_a_forked_hook(register_plugin, fire_event, tmp_path,
                                                    monkeypatch):
    # docs/plugin-authors.md, Testing: the clock a test sets and its PBSPLUG_HOME.
    monkeypatch.setenv("PBSPLUG_HOME", str(tmp_path))
    register_plugin(_Timed(), "my_policy", config={"threshold": 3})
    with clock.use(lambda: 1000.0):
        assert fire_event("execjob_begin", {"job": {"id": "1.s"}}, mode="process").accepted
    with clock.use(lambda: 1250.0):
        assert fire_event("execjob_end", {"job": {"id": "1.s"}}, mode="process").accepted
    assert (tmp_path / "hooks" / "tmp" / "begin").read_text() == "1000.0"
    assert (tmp_path / "hooks" / "tmp" / "end").read_text() == "1250.0"


def test_a_scheduler_hook_is_called_through_the_plugin_set(register_plugin, pbsplug_plugins):
    register_plugin(_Timed(), "my_policy", config={"threshold": 3})
    placement = Placement("default", 0.0, Job("1.s", {}), [Vnode("n1"), Vnode("n2")],
                          fit=lambda vnodes: [vnodes[0].name])   # one chunk, first fit
    assert pbsplug_plugins.hook.sched_node_placement(placement=placement) == ["n2"]


def test_an_outcome_says_what_stopped_the_chain(register_plugin, fire_event):
    class Strict:
        @hookimpl
        def execjob_end(self, event):
            event.job.Exit_status = 3            # read-only here: the hook's error

    register_plugin(Strict(), "strict")
    outcome = fire_event("execjob_end", {"job": {"id": "1.s"}}, mode="process")
    assert (outcome.accepted, outcome.kind, outcome.hook, outcome.code) == (
        False, "error", "strict", 15136)
    assert outcome.message == ("request rejected as filter hook 'strict' encountered an "
                               "exception. Please inform Admin")
    assert "Exit_status" in outcome.detail and [r.outcome for r in outcome.runs] == ["error"]


def test_local_engine_pbs_returns_the_commands_process(local_engine):
    engine = local_engine()
    job_id = engine.submit("true\n", Hold_Types="u")
    done = engine.pbs("qalter", "-l", "walltime=bad", job_id)
    assert done.returncode != 0 and done.stderr.startswith("qalter: ")
    with pytest.raises(AssertionError, match="qalter"):
        engine.pbs("qalter", "-l", "walltime=bad", job_id, check=True)
    assert engine.pbs("qrls", job_id, check=True).returncode == 0
    assert engine.wait(job_id)["Exit_status"] == 0
    assert all(isinstance(attrs, dict) for attrs in engine.nodes().values())


def test_a_folder_of_its_own_inside_the_unsafe_folder(unsafe_folder):
    from pbsplug import safedirs

    if unsafe_folder.kind == "world-writable":   # sticky: root's folder in it is root's alone
        assert safedirs.ensure_folder(unsafe_folder.path / "mine", "state_dir").is_dir()
    else:
        with pytest.raises(safedirs.UnsafeFolder, match=re.escape(unsafe_folder.problem)):
            safedirs.ensure_folder(unsafe_folder.path / "mine", "state_dir")
    with pytest.raises(safedirs.UnsafeFolder):
        safedirs.ensure_folder(unsafe_folder.path, "state_dir")
