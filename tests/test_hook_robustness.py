"""One bad plugin against the runner, found by a hostile review: what a hook hands back
(objects it made, values of its own types, a forged report, a flood of log lines, a very
long message), a hook that forks and lets the copy come back, and one that raises
KeyboardInterrupt itself. Each is that hook's error, or stored as plain checked data;
the caller goes on."""

from __future__ import annotations

import json

import pytest

from pbsplug import Event, PluginInfo, PluginSet, Runner, Vnode, hookimpl
from pbsplug.siteconfig import PluginSite, SiteConfig

BEGIN = {"job": {"id": "7.srv", "Job_Owner": "root@h", "euser": "root"},
         "vnode_list": {"n1": {"state": "free", "resources_available": {"ncpus": 2}}}}
MODES = ["inprocess", "process"]


class Hook:
    """A plugin whose events in `events` run `body(event)`."""

    def __init__(self, body, events=("execjob_begin",)):
        self.body = body
        self.plugin_info = PluginInfo(events=events)

    @hookimpl
    def execjob_begin(self, event):
        self.body(event)

    @hookimpl
    def exechost_startup(self, event):
        self.body(event)

    @hookimpl
    def execjob_launch(self, event):
        self.body(event)

    @hookimpl
    def queuejob(self, event):
        self.body(event)

    @hookimpl
    def execjob_end(self, event):
        self.body(event)


@pytest.fixture
def run(tmp_path):
    """``run(body, event="execjob_begin", data=BEGIN, mode=None)`` -> (outcome, event)."""

    def fire(body, event="execjob_begin", data=None, mode=None):
        plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
        plugins.site.plugins["bad"] = PluginSite("bad", enabled=True)
        record = plugins.add("bad", Hook(body, (event,)))
        assert record.status == "enabled", record.error
        ev = Event.from_dict(event, json.loads(json.dumps(data if data is not None else BEGIN)))
        return Runner(plugins, mode=mode, alarm_grace=0.5).fire(ev), ev

    return fire


def plain_types(value) -> set[str]:
    """The types in `value` that are not exactly str, int, float, bool, None, dict, list."""
    kind = type(value)
    found = set() if kind in (str, int, float, bool, type(None), dict, list) else {kind.__name__}
    if kind is dict:
        for key, item in value.items():
            found |= plain_types(key) | plain_types(item)
    elif kind is list:
        for item in value:
            found |= plain_types(item)
    return found


# -- a vnode the hook made ----------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("event, name", [("exechost_startup", "made"),
                                         ("exechost_startup", "n1"),
                                         ("execjob_begin", "n1")])
def test_a_vnode_a_hook_makes_is_checked_as_its_writes_are(run, mode, event, name):
    """``event.vnode_list[name] = Vnode(name, {...})`` took the values as they were: the
    engine stored ``ncpus: 'lots'`` and ``state: 'sideways'`` (a scheduling cycle failed,
    then the host was set aside, offline, its ncpus dropped). Now as ``vnode.state = ...``:
    a bad value is the hook's error, and nothing is stored."""
    data = {"vnode_list": {"n1": {"state": "free"}}} if event == "exechost_startup" else None

    def body(ev):
        ev.vnode_list[name] = Vnode(name, {"resources_available": {"ncpus": "lots"}})

    out, _ = run(body, event, data, mode)
    assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
    assert out.detail == ("BadValue: resources_available.ncpus: 'lots' is not an integer")

    def good(ev):
        ev.vnode_list[name] = Vnode(name, {"resources_available": {"ncpus": "4", "mem": 1024},
                                           "state": "offline"})

    out, _ = run(good, event, data, mode)
    assert out.accepted, out.detail
    made = out.changes["vnode_list"][name]
    assert made["resources_available"] == {"ncpus": 4, "mem": "1024b"}
    assert made["state"] == "offline"
