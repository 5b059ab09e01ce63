"""Chain semantics and isolation, with real forked processes and real signals."""

import contextlib
import faulthandler
import json
import logging
import os
import pwd
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pbsplug import Event, HookAlarm, PluginInfo, PluginSet, Runner, hookimpl
from pbsplug.runner import CANCELLED
from pbsplug.siteconfig import PluginSite, SiteConfig
from pbsplug.testing import until

BEGIN = {"job": {"id": "7.srv", "Job_Owner": "root@h", "euser": "root"},
         "vnode_list": {"n1": {"state": "free"}, "n2": {"state": "free"}}}


class Hook:
    """A plugin whose execjob_begin / queuejob / runjob run `body(event)`."""

    def __init__(self, body=None, **info):
        self.body = body or (lambda event: None)
        self.plugin_info = PluginInfo(**info)

    @hookimpl
    def execjob_begin(self, event):
        self.body(event)

    @hookimpl
    def queuejob(self, event):
        self.body(event)


@pytest.fixture
def chain(tmp_path):
    """``chain({name: Hook(...)}, mode=None, **site attributes)`` -> a Runner."""

    def make(hooks, mode=None, alarm_grace=0.5, **attributes):
        plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
        for name, hook in hooks.items():
            plugins.site.plugins[name] = PluginSite(name, enabled=True,
                                                    attributes=dict(attributes))
            record = plugins.add(name, hook)
            assert record.status == "enabled", record.error
        return Runner(plugins, mode=mode, alarm_grace=alarm_grace)

    return make


@pytest.fixture
def left_children():
    """``left_children()`` -> this process's children made since the test began and not yet
    reaped (zombies included: each thread's /proc children list). Not ``waitpid(-1)``: a
    process running tests beside others (a pytest-xdist worker) may hold another test's child.
    """
    def children() -> set[int]:
        return {int(pid) for task in Path("/proc/self/task").iterdir()
                for pid in (task / "children").read_text().split()}

    before = children()
    return lambda: children() - before


def begin():
    return Event.from_dict("execjob_begin", json.loads(json.dumps(BEGIN)))


def queuejob():
    return Event.from_dict("queuejob", {"job": {"id": "1.srv"}})


def trail(event):
    event.job.comment = (event.job.comment or "") + event.hook_name


MODES = ["inprocess", "process"]


@pytest.mark.parametrize("mode", MODES)
def test_ascending_order_ties_by_name_and_changes_seen_by_later_hooks(chain, mode):
    runner = chain({"c": Hook(trail, order=5), "b": Hook(trail, order=5),
                    "a": Hook(trail, order=9), "d": Hook(trail, order=1)}, mode=mode)
    out = runner.fire(begin())
    assert out.accepted and out.kind == "accept" and out.code is None
    assert [r.hook for r in out.runs] == ["d", "b", "c", "a"]
    assert out.changes["job"]["comment"] == "dbca"
    assert all(r.mode == mode for r in out.runs)


def test_no_hook_means_accepted(chain):
    out = chain({}).fire(begin())
    assert out.accepted and out.runs == [] and out.consequence == "proceed"


@pytest.mark.parametrize("mode", MODES)
def test_first_reject_stops_the_chain_and_keeps_changes(chain, mode):
    def reject(event):
        trail(event)
        event.reject()

    runner = chain({"a": Hook(trail, order=1), "b": Hook(reject, order=2),
                    "c": Hook(trail, order=3)}, mode=mode)
    out = runner.fire(begin())
    assert not out.accepted and out.kind == "reject" and out.hook == "b"
    assert [r.hook for r in out.runs] == ["a", "b"]
    assert out.message == "execjob_begin request rejected by 'b'"
    assert out.code == 15136
    assert out.changes["job"]["comment"] == "ab"  # changes survive a reject, as in PBS
    assert out.consequence == "requeue"


@pytest.mark.parametrize("mode", MODES)
def test_reject_message_and_no_fail_action_on_plain_reject(chain, mode):
    runner = chain({"h": Hook(lambda e: e.reject("no licence"), events=("execjob_begin",),
                              fail_action=("offline_vnodes",))}, mode=mode)
    out = runner.fire(begin())
    assert out.message == "no licence" and out.fail_action == ()


def boom(event):
    event.job.comment = "half-done"
    raise ValueError("disk full")


@pytest.mark.parametrize("mode", MODES)
def test_exception_is_an_error_with_fail_action(chain, mode, caplog):
    runner = chain({"h": Hook(boom, events=("execjob_begin",),
                              fail_action=("offline_vnodes", "scheduler_restart_cycle"))},
                   mode=mode)
    with caplog.at_level(logging.ERROR):
        out = runner.fire(begin())
    assert out.kind == "error" and out.hook == "h"
    assert out.message == ("request rejected as filter hook 'h' encountered an exception. "
                           "Please inform Admin")
    assert out.detail == "ValueError: disk full"
    assert out.fail_action == ("offline_vnodes", "scheduler_restart_cycle")
    assert out.changes == {}  # nothing of a failed chain applies
    assert out.consequence == "requeue"
    assert "execjob_begin hook 'h' encountered an exception, request rejected" in caplog.text
    assert "disk full" in caplog.text


def test_fail_action_only_where_the_event_allows_it(chain):
    class EndToo(Hook):
        @hookimpl
        def execjob_end(self, event):
            raise RuntimeError("x")

    runner = chain({"h": EndToo(events=("execjob_begin", "execjob_end"),
                                fail_action=("offline_vnodes",))})
    out = runner.fire(Event.from_dict("execjob_end", BEGIN))
    assert out.kind == "error" and out.fail_action == () and out.consequence == "ignore"


def test_inprocess_alarm(chain):
    slept = []  # the hook's sleep ran to its end: the alarm did not cut it

    def slow(event):
        time.sleep(5)
        slept.append(True)

    runner = chain({"slow": Hook(slow, events=("queuejob",))}, alarm=1, mode="inprocess")
    out = runner.fire(queuejob())
    assert not slept
    assert out.kind == "alarm"
    assert out.message == ("request rejected as filter hook 'slow' got an alarm call. "
                           "Please inform Admin")
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.default_int_handler,
                                                None) or callable(signal.getsignal(signal.SIGALRM))


def test_a_hook_may_catch_its_alarm_and_reject(chain):
    # PBS's cray_atom turns the alarm's KeyboardInterrupt into a plain reject at execjob_end.
    def patient(event):
        try:
            time.sleep(5)
        except KeyboardInterrupt:
            event.reject("gave up waiting")

    for mode in MODES:
        out = chain({"p": Hook(patient, events=("execjob_begin",))}, alarm=1,
                    mode=mode).fire(begin())
        assert (out.kind, out.detail, out.fail_action) == ("reject", "gave up waiting", ())


def swallow_everything(event):
    for _ in range(2400):  # two minutes; a runner that did not kill it sees it end
        try:
            time.sleep(0.05)
        except BaseException:
            pass


def block_in_c(event):
    import ctypes

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # C code that never sees it
    ctypes.CDLL(None).sleep(30)


@pytest.mark.parametrize("body", [swallow_everything, block_in_c])
def test_process_mode_kills_a_hook_that_ignores_its_alarm(chain, body, left_children):
    runner = chain({"ok": Hook(trail, order=1),
                    "stuck": Hook(body, order=2, events=("execjob_begin",),
                                  fail_action=("offline_vnodes",)),
                    "never": Hook(trail, order=3)}, alarm=1, mode="process")
    out = runner.fire(begin())
    assert out.kind == "alarm" and out.hook == "stuck"
    assert "killed" in out.detail
    assert out.fail_action == ("offline_vnodes",)
    assert [r.hook for r in out.runs] == ["ok", "stuck"]
    assert left_children() == set()  # no zombie left behind


def quietly(die):
    """Crash without pytest's faulthandler dumping the child's stack into the test log."""

    def body(event):
        faulthandler.disable()
        die()

    return body


@pytest.mark.parametrize("die,detail", [
    (lambda: os._exit(3), "exited with status 3 while the hook ran"),
    (lambda: os.kill(os.getpid(), signal.SIGKILL), "killed by SIGKILL while the hook ran"),
    (lambda: os.kill(os.getpid(), signal.SIGSEGV), "killed by SIGSEGV while the hook ran"),
    (os.abort, "killed by SIGABRT"),
])
def test_process_mode_survives_a_dying_interpreter(chain, die, detail):
    runner = chain({"a": Hook(trail, order=1), "dies": Hook(quietly(die), order=2)},
                   mode="process")
    out = runner.fire(begin())
    assert out.kind == "error" and out.hook == "dies" and detail in out.detail
    assert out.message.endswith("encountered an exception. Please inform Admin")
    assert [r.outcome for r in out.runs] == ["accept", "error"]


@pytest.mark.parametrize("mode", MODES)
def test_sys_exit_is_an_error(chain, mode):
    out = chain({"x": Hook(lambda e: __import__("sys").exit(0))}, mode=mode).fire(begin())
    assert out.kind == "error" and "called sys.exit(0)" in out.detail


@pytest.mark.parametrize("mode", MODES)
def test_a_hook_that_neither_accepts_nor_rejects_accepts(chain, mode):
    def swallow(event):
        try:
            event.reject("first")
        except SystemExit:
            pass  # swallowed, but the decision stands

    assert chain({"q": Hook(lambda e: None)}, mode=mode).fire(begin()).accepted
    out = chain({"s": Hook(swallow)}, mode=mode).fire(begin())
    assert out.kind == "reject" and out.detail == "first"
    out = chain({"a": Hook(lambda e: e.accept())}, mode=mode).fire(begin())
    assert out.accepted


def test_mixed_modes_share_changes_both_ways(chain, tmp_path):
    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    for name, order, isolation in (("a", 1, "process"), ("b", 2, "inprocess"),
                                   ("c", 3, "process")):
        plugins.site.plugins[name] = PluginSite(name, enabled=True,
                                                attributes={"isolation": isolation})
        plugins.add(name, Hook(trail, order=order))
    out = Runner(plugins).fire(begin())
    assert [(r.hook, r.mode) for r in out.runs] == [("a", "process"), ("b", "inprocess"),
                                                    ("c", "process")]
    assert out.changes["job"]["comment"] == "abc"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("given", [{"ncpus": 4}, {}])
def test_a_whole_resource_assignment_drops_what_it_leaves_out(chain, mode, given):
    """`job.Resource_List = {...}` replaces the mapping in either isolation: the keys it
    leaves out go, in the outcome's changes and in the event a later hook reads."""
    def replace(event):
        event.job.Resource_List = dict(given)

    def look(event):  # (a process-mode hook's notes come back as its changes)
        event.job.comment = ",".join(sorted(event.job.Resource_List)) or "-"

    runner = chain({"a": Hook(replace, order=1), "b": Hook(look, order=2)}, mode=mode)
    event = Event.from_dict("queuejob", {"job": {
        "id": "1.srv", "Resource_List": {"ncpus": 1, "walltime": "01:00:00", "mem": "1gb"}}})
    out = runner.fire(event)
    assert out.accepted
    assert out.changes["job"]["comment"] == (",".join(given) or "-")
    assert dict(event.job.Resource_List) == given
    assert out.changes["job"]["Resource_List"] == {
        "ncpus": None, "walltime": None, "mem": None, **given}

def test_vnode_changes_and_logs_come_back_from_the_child(chain, caplog):
    def offline(event):
        event.vnode_list["n2"].state = "offline"
        event.vnode_list["n2"].comment = "bad dimm"
        event.logger.warning("took %s offline", "n2")

    with caplog.at_level(logging.INFO):
        out = chain({"o": Hook(offline)}, mode="process").fire(begin())
    assert out.changes == {"vnode_list": {"n2": {"state": "offline", "comment": "bad dimm"}}}
    assert ("pbsplug.hook.o", logging.WARNING, "took n2 offline") in caplog.record_tuples


def test_hook_config_is_per_hook(tmp_path):
    from pbsplug import Setting

    seen = {}

    class Conf(Hook):
        def __init__(self, name):
            super().__init__(lambda e: seen.__setitem__(name, dict(e.hook_config)),
                             config={"level": Setting(int, 1)})

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    plugins.site.plugins["x"] = PluginSite("x", enabled=True, config={"level": 5})
    plugins.site.plugins["y"] = PluginSite("y", enabled=True)
    plugins.add("x", Conf("x"))
    plugins.add("y", Conf("y"))
    Runner(plugins, mode="inprocess").fire(begin())
    assert seen == {"x": {"level": 5}, "y": {"level": 1}}


def test_runjob_accepting_hook_must_not_change_the_job(tmp_path):
    class Run:
        def __init__(self, body):
            self.body = body

        @hookimpl
        def runjob(self, event):
            self.body(event)

    def run(body):
        plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
        plugins.add("r", Run(body), enable=True)
        return Runner(plugins).fire(Event.from_dict("runjob", {"job": {"id": "1.s"}}))

    def hold_and_accept(event):
        event.job.Hold_Types = "u"

    def hold_and_reject(event):
        event.job.Hold_Types = "u"
        event.reject("license server down")

    out = run(hold_and_accept)
    assert out.kind == "reject"
    assert out.message == "cannot modify job after runjob request has been accepted"
    out = run(hold_and_reject)
    assert out.kind == "reject" and out.changes == {"job": {"Hold_Types": "u"}}
    assert out.consequence == "keep_queued"
    out = run(lambda e: setattr(e.job, "comment", "x"))
    assert out.kind == "error" and "'comment' is read-only" in out.detail


def test_job_actions_decide_the_consequence(tmp_path):
    class Launch:
        def __init__(self, body):
            self.body = body

        @hookimpl
        def execjob_launch(self, event):
            self.body(event)

        @hookimpl
        def execjob_begin(self, event):
            self.body(event)

        @hookimpl
        def execjob_epilogue(self, event):
            self.body(event)

    def run(event_name, body):
        plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
        plugins.add("l", Launch(body), enable=True)
        data = dict(BEGIN, progname="/bin/sh", argv=["sh"], env={}) if (
            event_name == "execjob_launch") else BEGIN
        return Runner(plugins).fire(Event.from_dict(event_name, data))

    def rerun(event):
        event.job.rerun()
        event.reject("try elsewhere")

    def delete(event):
        event.job.delete()
        event.reject()

    assert run("execjob_launch", lambda e: e.reject()).consequence == "delete"
    out = run("execjob_launch", rerun)
    assert (out.consequence, out.job_action) == ("requeue", "rerun")
    assert run("execjob_begin", delete).consequence == "delete"
    out = run("execjob_epilogue", rerun)
    assert (out.consequence, out.job_action) == ("ignore", "rerun")


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_exechost_periodic_job_list_actions_reach_the_outcome(tmp_path, mode):
    """job.rerun()/job.delete() on jobs of exechost_periodic's job_list are in the outcome
    (``changes["job_list"]``), from the hook's process too; they were taken and dropped."""
    class Periodic:
        plugin_info = PluginInfo(events=("exechost_periodic",))

        @hookimpl
        def exechost_periodic(self, event):
            event.job_list["1.s"].rerun()
            event.job_list["2.s"].delete()
            event.reject("asked")

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    plugins.site.plugins["p"] = PluginSite("p", enabled=True, attributes={"isolation": mode})
    plugins.add("p", Periodic())
    out = Runner(plugins).fire(Event.from_dict("exechost_periodic", {
        "vnode_list": {}, "job_list": {j: {"job_state": "R"} for j in ("1.s", "2.s", "3.s")}}))
    assert out.kind == "reject"
    assert out.changes == {"job_list": {"1.s": {"_action": "rerun"},
                                        "2.s": {"_action": "delete"}}}


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_a_job_delete_wins_over_a_job_rerun(tmp_path, mode):
    """job.delete() and job.rerun() on one job, in one plugin in either order or in two:
    the delete, as PBS's MoM sends it (OpenPBS 23.06, measured). The last call won."""
    class Deletes:
        plugin_info = PluginInfo(events=("exechost_periodic",), order=1)

        @hookimpl
        def exechost_periodic(self, event):
            event.job_list["1.s"].delete()
            event.job_list["2.s"].delete()
            event.job_list["2.s"].rerun()

    class Reruns:
        plugin_info = PluginInfo(events=("exechost_periodic",), order=2)

        @hookimpl
        def exechost_periodic(self, event):
            event.job_list["1.s"].rerun()

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    for name, made in (("d", Deletes()), ("r", Reruns())):
        plugins.site.plugins[name] = PluginSite(name, enabled=True,
                                                attributes={"isolation": mode})
        plugins.add(name, made)
    out = Runner(plugins).fire(Event.from_dict("exechost_periodic", {
        "vnode_list": {}, "job_list": {j: {"job_state": "R"} for j in ("1.s", "2.s")}}))
    assert out.changes == {"job_list": {"1.s": {"_action": "delete"},
                                        "2.s": {"_action": "delete"}}}


def test_trace_records_every_run(chain, tmp_path):
    runner = chain({"a": Hook(trail, order=1), "b": Hook(lambda e: e.reject("no"), order=2)})
    runner.trace_file = tmp_path / "trace.jsonl"
    runner.fire(begin())
    runner.fire(begin())
    lines = [json.loads(x) for x in runner.trace_file.read_text().splitlines()]
    assert [(x["hook"], x["outcome"]) for x in lines] == [("a", "accept"), ("b", "reject")] * 2
    assert set(lines[0]) == {"hook", "event", "order", "mode", "duration", "outcome",
                             "message", "started", "cancelled"}
    assert len(runner.trace) == 4 and lines[1]["message"] == "no"


def test_inprocess_from_another_thread_has_no_alarm_but_works(chain):
    runner = chain({"a": Hook(trail)}, mode="inprocess")
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("out", runner.fire(begin())))
    thread.start()
    thread.join()
    assert result["out"].accepted and result["out"].changes["job"]["comment"] == "a"


def test_hook_alarm_is_a_keyboard_interrupt():
    assert issubclass(HookAlarm, KeyboardInterrupt)


@pytest.mark.usefixtures("needs_root")
def test_pbsuser_hooks_run_as_the_job_owner(tmp_path):
    owner = pwd.getpwnam("nobody")

    class AsUser:
        plugin_info = PluginInfo(events=("execjob_prologue",), user="pbsuser")

        @hookimpl
        def execjob_prologue(self, event):
            event.job.comment = f"{os.getuid()}:{os.getgid()}"

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    rec = plugins.add("asuser", AsUser(), enable=True)
    assert rec.attributes.user == "pbsuser"
    runner = Runner(plugins)
    assert runner.chain("execjob_prologue")[0].mode == "process"
    out = runner.fire(Event.from_dict("execjob_prologue", {
        "job": {"id": "1.s", "euser": "nobody"}, "vnode_list": {}}))
    assert out.accepted, out.detail
    assert out.changes["job"]["comment"] == f"{owner.pw_uid}:{owner.pw_gid}"
    assert os.getuid() == 0  # the caller is untouched


@pytest.mark.parametrize("mode", MODES)
def test_debug_keeps_each_runs_input_and_output(chain, tmp_path, mode):
    runner = chain({"a": Hook(trail, order=1), "b": Hook(trail, order=2)}, mode=mode,
                   debug=True)
    runner.debug_dir = tmp_path / "hooks" / "tmp"
    out = runner.fire(begin())
    assert [r.hook for r in out.runs] == ["a", "b"]
    files = sorted(p.name for p in runner.debug_dir.iterdir())
    assert len(files) == 4 and all(f.startswith("hook_execjob_begin_") for f in files)
    b_in = json.loads(next(runner.debug_dir.glob("hook_execjob_begin_b_*.in")).read_text())
    b_out = json.loads(next(runner.debug_dir.glob("hook_execjob_begin_b_*.out")).read_text())
    assert b_in["objects"]["job"]["comment"] == "a"  # what b saw
    assert (b_out["outcome"], b_out["objects"]["job"]["comment"]) == ("accept", "ab")


def test_hook_output_is_neither_lost_nor_repeated(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_runner import Hook, begin
from pbsplug import PluginSet, Runner
from pbsplug.siteconfig import SiteConfig
print("before", end="")   # unflushed when the runner forks
plugins = PluginSet(SiteConfig(path=None))
plugins.add("p", Hook(lambda e: print("from the hook")), enable=True)
Runner(plugins, mode="process").fire(begin())
print("after")
""")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60)
    assert result.stdout == "beforefrom the hook\nafter\n", result.stderr


# -- issue 17: a hook's change that cannot be stored, and a stopping caller ---------------------

#: Changes to an attribute the kernel's value rules do not type (one a plugin registers, say):
#: PBS's own attributes refuse such values in their setters already (`pbsplug.values`), so
#: what reaches the runner's own check is what no rule types.
UNSTORABLE = [
    ("an object", lambda event: setattr(event.job, "site_attr", object()),
     "job.site_attr: a value of type object cannot be stored"),
    ("a non-str key", lambda event: setattr(event.job, "site_attr", {1: "x"}),
     "job.site_attr: key 1 is not a string"),
    ("a NaN", lambda event: setattr(event.job, "site_attr", float("nan")),
     "job.site_attr: nan is not a number"),
    ("a set in a list", lambda event: setattr(event.job, "site_attr", [{1, 2}]),
     "job.site_attr[0]: a value of type set cannot be stored"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("what", "body", "why"), UNSTORABLE, ids=[u[0] for u in UNSTORABLE])
def test_a_change_that_cannot_be_stored_is_that_hooks_error(chain, mode, what, body, why):
    after = []
    runner = chain({"a": Hook(body, order=1), "b": Hook(after.append, order=2)}, mode=mode)
    event = queuejob()
    out = runner.fire(event)
    assert (out.accepted, out.kind, out.hook) == (False, "error", "a")
    assert out.detail == f"the hook's change cannot be stored: {why}"
    assert out.message == ("request rejected as filter hook 'a' encountered an exception. "
                           "Please inform Admin")
    assert out.changes == {} and after == []
    # nothing of it is left on the event's job either (a caller that stores the job)
    json.dumps(event.job.to_dict(), allow_nan=False)


@pytest.mark.parametrize("mode", MODES)
def test_storable_changes_still_apply(chain, mode):
    def body(event):
        event.job.comment = "fine"
        event.job.Resource_List["walltime"] = "00:10:00"
        event.job.Variable_List = {"A": "1", "B": "x"}
        event.job.site_attr = ["x", 2, 3.5, None, True, {"k": [1]}]

    out = chain({"a": Hook(body)}, mode=mode).fire(queuejob())
    assert out.accepted
    assert out.changes["job"]["comment"] == "fine"
    assert out.changes["job"]["Variable_List"] == {"A": "1", "B": "x"}
    assert out.changes["job"]["site_attr"] == ["x", 2, 3.5, None, True, {"k": [1]}]


def test_the_child_reports_in_json_never_pickle(chain, monkeypatch):
    """The root parent never unpickles what a hook's process sent."""
    import pickle

    def refuse(*args, **kwargs):
        raise AssertionError("pickle.loads called")

    monkeypatch.setattr(pickle, "loads", refuse)
    out = chain({"a": Hook(trail)}, mode="process").fire(begin())
    assert out.accepted and out.changes["job"]["comment"] == "a"


def test_a_stopping_caller_kills_a_running_hook_process(tmp_path):
    """`Runner.cancel` answering true ends a process-mode hook at once, as an error, however
    far away its alarm is; the hook's process is gone."""
    pidfile = tmp_path / "pid"

    def swallow(event):
        pidfile.write_text(str(os.getpid()))
        while True:
            try:
                time.sleep(1)
            except BaseException:  # noqa: BLE001 - the point of the test
                pass

    plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
    plugins.site.plugins["a"] = PluginSite("a", enabled=True, attributes={"alarm": 600})
    assert plugins.add("a", Hook(swallow)).status == "enabled"
    runner = Runner(plugins, cancel=pidfile.exists)
    out = runner.fire(queuejob())
    assert (out.kind, out.hook) == ("error", "a")
    assert out.detail == "the server is stopping: the hook's process was killed"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)


def test_a_hook_stopped_by_its_caller_is_neither_judged_nor_logged_as_an_error(
        tmp_path, caplog):
    """A hook `Runner.cancel` gave up was logged as the hook's exception (``hook 'a'
    encountered an exception, request rejected: the server is stopping...``, an ERROR),
    and its fail_action was the caller's to apply: the stop is the caller's doing."""
    pidfile = tmp_path / "pid"

    def wait(event):
        pidfile.write_text(str(os.getpid()))
        time.sleep(600)

    plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
    plugins.site.plugins["a"] = PluginSite("a", enabled=True, attributes={
        "alarm": 600, "fail_action": "offline_vnodes"})
    assert plugins.add("a", Hook(wait)).status == "enabled"
    caplog.set_level(logging.INFO, logger="pbsplug.runner")
    out = Runner(plugins, cancel=pidfile.exists).fire(begin())
    assert (out.kind, out.hook, out.detail) == ("error", "a", CANCELLED)
    assert out.fail_action == () and out.runs[-1].cancelled
    lines = [(r.levelname, r.getMessage()) for r in caplog.records
             if r.name == "pbsplug.runner"]
    assert lines == [("WARNING", "execjob_begin hook 'a' was stopped: the server is "
                                 "stopping")], lines


@pytest.mark.parametrize("mode", ["process", "inprocess"])
def test_a_hook_whose_error_reads_as_the_stop_is_judged_as_its_own(mode, tmp_path, caplog):
    """The runner took a run whose message was `CANCELLED` for one its cancel gave up: a
    hook raising an exception that reads so ("<type>: <message>") had no fail_action and
    was logged as stopped, its caller never stopping. Only `HookRun.cancelled` says so."""
    stopping = type("the server is stopping", (Exception,), {})

    def fail(event):
        raise stopping("the hook's process was killed")

    plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
    plugins.site.plugins["a"] = PluginSite("a", enabled=True, attributes={
        "fail_action": "offline_vnodes", "isolation": mode})
    assert plugins.add("a", Hook(fail)).status == "enabled"
    caplog.set_level(logging.INFO, logger="pbsplug.runner")
    out = Runner(plugins, cancel=lambda: False).fire(begin())
    assert (out.kind, out.detail, out.fail_action) == ("error", CANCELLED, ("offline_vnodes",))
    assert not out.runs[-1].cancelled
    lines = [r.getMessage() for r in caplog.records if r.name == "pbsplug.runner"]
    assert not any("was stopped" in line for line in lines), lines


def test_every_event_runs_its_hooks_in_a_process_by_default(chain):
    """No hook can take its caller down by default: server events too run in a child."""
    pids = []
    runner = chain({"a": Hook(lambda event: pids.append(os.getpid()) or os._exit(3))})
    out = runner.fire(queuejob())
    assert [r.mode for r in out.runs] == ["process"]
    assert (out.kind, out.detail) == ("error", "the hook's process exited with status 3 "
                                                "while the hook ran")
    assert pids == []  # it ran elsewhere


@pytest.mark.usefixtures("needs_root")
def test_a_pbsuser_hook_keeps_none_of_the_callers_files(tmp_path):
    """A hook running as the job owner must not hold the server's database, socket or logs
    open: only stdio and its report pipe."""
    secret = open(tmp_path / "server.db", "w")  # noqa: SIM115 - held open across the fire
    held = secret.fileno()

    class AsUser:
        plugin_info = PluginInfo(events=("execjob_prologue",), user="pbsuser")

        @hookimpl
        def execjob_prologue(self, event):
            event.job.comment = ",".join(sorted(os.listdir("/proc/self/fd"), key=int))

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    plugins.add("asuser", AsUser(), enable=True)
    try:
        out = Runner(plugins).fire(Event.from_dict("execjob_prologue", {
            "job": {"id": "1.s", "euser": "nobody"}, "vnode_list": {}}))
    finally:
        secret.close()
    assert out.accepted, out.detail
    fds = [int(f) for f in out.changes["job"]["comment"].split(",")]
    assert held not in fds
    assert len([f for f in fds if f > 2]) == 2  # the report pipe, and listdir's own


def _held_by_the_hook(event):
    """The hook's descriptors, as /proc says, in the job's comment."""
    held = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            held[name] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # listdir's own, closed already
    event.job.comment = json.dumps(held)


def test_any_hooks_process_keeps_only_stdio_and_its_report_pipe(chain, tmp_path):
    """Root or not, a forked hook holds none of the caller's files (a server's database,
    sockets, logs) before it runs: stdin is /dev/null, stdout and stderr the caller's."""
    import socket

    secret = open(tmp_path / "server.db", "w")  # noqa: SIM115 - held open across the fire
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(tmp_path / "sock"))
    listening.listen()
    try:
        out = chain({"a": Hook(_held_by_the_hook)}, mode="process").fire(queuejob())
    finally:
        secret.close()
        listening.close()
    assert out.accepted, out.detail
    held = {int(fd): what for fd, what in json.loads(out.changes["job"]["comment"]).items()}
    assert held[0] == "/dev/null"
    assert (held[1], held[2]) == (os.readlink("/proc/self/fd/1"), os.readlink("/proc/self/fd/2"))
    above = [what for fd, what in held.items() if fd > 2]
    assert len(above) == 1 and above[0].startswith("pipe:"), held


def test_a_caller_started_without_stdio_lends_its_files_to_no_hook(tmp_path):
    """A caller started with 0, 1 and 2 closed has its own files there (its database at 0,
    here, and the report pipe at 1 and 2): the hook gets /dev/null for all three, not the
    database, and its report pipe still works."""
    import subprocess
    import sys

    script = tmp_path / "run.py"
    result = tmp_path / "held.json"
    script.write_text(f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from pathlib import Path
from test_runner import Hook, _held_by_the_hook, queuejob
from pbsplug import PluginSet, Runner
from pbsplug.siteconfig import SiteConfig
db = open({str(tmp_path / "server.db")!r}, "w")   # fd 0: the other two are the pipe's
assert db.fileno() == 0 and sys.stdout is None
plugins = PluginSet(SiteConfig(path=None))
def hook(event):
    print("to nowhere")
    _held_by_the_hook(event)
plugins.add("p", Hook(hook), enable=True)
out = Runner(plugins, mode="process").fire(queuejob())
Path({str(result)!r}).write_text(out.changes["job"]["comment"] if out.accepted else
                                  "error: " + str(out.detail))
""")
    subprocess.run(["sh", "-c", 'exec "$0" "$1" <&- >&- 2>&-', sys.executable, str(script)],
                   check=True, timeout=60)
    text = result.read_text()
    assert not text.startswith("error"), text
    held = {int(fd): what for fd, what in json.loads(text).items()}
    assert [held[0], held[1], held[2]] == ["/dev/null"] * 3, held
    above = [what for fd, what in held.items() if fd > 2]
    assert len(above) == 1 and above[0].startswith("pipe:"), held


def test_a_hook_process_dies_with_its_caller(tmp_path):
    """A caller killed with SIGKILL (a crashed server) takes its hook's process along, even
    one that swallows every signal it can."""
    import subprocess
    import sys

    pidfile = tmp_path / "pid"
    script = f"""
import os, time
from pathlib import Path
from pbsplug import Event, PluginInfo, PluginSet, Runner, hookimpl
from pbsplug.siteconfig import PluginSite, SiteConfig

class Swallow:
    plugin_info = PluginInfo(events=("queuejob",), alarm=600)

    @hookimpl
    def queuejob(self, event):
        Path({str(pidfile)!r}).write_text(str(os.getpid()))
        while True:
            try:
                time.sleep(1)
            except BaseException:
                pass

plugins = PluginSet(SiteConfig(path=Path({str(tmp_path / 's.toml')!r})))
plugins.add("swallow", Swallow(), enable=True)
Runner(plugins).fire(Event.from_dict("queuejob", {{"job": {{"id": "1.s"}}}}))
"""
    caller = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists():
            assert time.monotonic() < deadline and caller.poll() is None, "no hook ran"
            time.sleep(0.05)
        hook = int(pidfile.read_text())
        caller.kill()
        caller.wait()
        deadline = time.monotonic() + 30
        while _alive(hook):
            assert time.monotonic() < deadline, "the hook's process outlived its caller"
            time.sleep(0.05)
    finally:
        caller.kill()
        caller.wait()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_an_unstorable_value_leaves_the_others_in_process(chain):
    """In process the hook's objects are the caller's: only the value that cannot be stored
    goes, not the whole mapping it was put in; a resource the rules refuse never gets in."""
    def body(event):
        event.job.Resource_List["ncpus"] = 4
        event.job.site_map = {"ok": 1}
        event.job.site_map["bad"] = {1, 2}
        event.job.site_map = dict(event.job.site_map)

    event = Event.from_dict("queuejob", {"job": {"id": "1.srv",
                                                 "Resource_List": {"mem": "1gb"}}})
    out = chain({"a": Hook(body)}, mode="inprocess").fire(event)
    assert (out.kind, out.detail) == ("error", "the hook's change cannot be stored: "
                                      "job.site_map.bad: a value of type set cannot be stored")
    assert event.job.to_dict()["Resource_List"] == {"mem": "1gb", "ncpus": 4}
    assert event.job.to_dict()["site_map"] == {"ok": 1}

    def bad_resource(event):
        event.job.Resource_List["walltime"] = "00:01:00"
        event.job.Resource_List["ncpus"] = {1, 2}

    event = Event.from_dict("queuejob", {"job": {"id": "2.srv"}})
    out = chain({"b": Hook(bad_resource)}, mode="inprocess").fire(event)
    assert out.kind == "error" and out.detail.startswith("BadValue: Resource_List.ncpus")
    assert event.job.to_dict()["Resource_List"] == {"walltime": "00:01:00"}


def test_reap_later_leaves_the_exit_to_the_next_fork(chain, left_children):
    """The engine's runner does not wait for a child that reported its end; the next fork
    (or `reap`) collects it, and nothing is left after."""
    runner = chain({"a": Hook(trail)}, mode="process")
    runner.reap_later = True
    assert runner.fire(begin()).accepted
    first = list(runner._leaving)
    assert len(first) == 1
    assert runner.fire(begin()).accepted
    assert runner._leaving != first  # the first one was collected by the second fork
    runner.reap()
    assert runner._leaving == []
    assert left_children() == set()


@pytest.mark.parametrize("report", [
    ("done", 5, "accept", None, 0.0, {}, []),
    ("done", 0, "maybe", None, 0.0, {}, []),
    ("start", -1),
    ("start", "0"),
    ("done", 0, "accept", None, 0.0, {"job": {"comment": "x"}}, [[1, 2]]),
])
def test_a_malformed_report_is_the_hooks_error(chain, monkeypatch, report):
    """What a hook's process sends is checked: a report the runner's child would never send
    ends as that hook's error, not the caller's."""
    from pbsplug import runner as runner_module

    def forged(batch, event, fd):
        runner_module._send(fd, ("start", 0))
        runner_module._send(fd, report)
        time.sleep(30)

    monkeypatch.setattr(runner_module, "_child_main", forged)  # the fork inherits it
    out = chain({"a": Hook(trail)}, mode="process", alarm=20).fire(queuejob())
    assert (out.kind, out.hook) == ("error", "a"), out.detail
    assert out.detail.startswith("the hook's process sent a malformed report")


_DONE = b'["done", 0, "accept", null, '


def _forge_report(monkeypatch, report: bytes) -> None:
    """Have the hook's process send `report` as its raw bytes (after a start, for a done
    report), as another program could write them (a pbsuser hook's process is its
    owner's)."""
    import struct

    from pbsplug import runner as runner_module

    def forged(batch, event, fd):
        if report.startswith(_DONE):
            runner_module._send(fd, ("start", 0))
        data = struct.pack("!I", len(report)) + report
        while data:
            data = data[os.write(fd, data):]
        time.sleep(30)

    monkeypatch.setattr(runner_module, "_child_main", forged)  # the fork inherits it


@pytest.mark.parametrize("report, why", [
    # json.loads' RecursionError went through the runner to its caller (the server's loop),
    # and the child was left running.
    (b"[" * 100_000, "arrays or objects nested too deeply"),
    (_DONE + b"0.0, {}, [" + b"[" * 100_000, "arrays or objects nested too deeply"),
    # Python's words, and the type alone: "malformed report (ValueError)".
    (b'["start", %s]' % (b"9" * 5000), "a number of 5,000 digits (at most 1,000)"),
    (b'["start", "\xff"]', "not UTF-8 text (byte 0xff at offset 11)"),
    (b'{"start": 0}', "a JSON object, not an array"),
    # A duration that is no number was taken, and written to the trace as it came.
    (_DONE + b"NaN, {}, []]", "NaN is not a JSON number"),
    (_DONE + b"1e400, {}, []]", "a number past a float's range (1e400)"),
    (_DONE + b'"x", {}, []]', "duration 'x'"),
    (_DONE + b"0.0, {}, [], 1]", "too many values to unpack (expected 7)"),
    (_DONE + b'0.0, {"job": {"comment": "a", "comment": "b"}}, []]',
     'the key "comment" twice in one object'),
    (_DONE + b'0.0, {}, [["x", 20, ["not", "text"], null]]]',
     "log record 0: not [name, level, text, object]"),
    # 60 MB of them (64 MiB may come) took the root server's reader 2.8 GB.
    (_DONE + b'0.0, {"job": {"a": [' + b"[]," * 1_000_000 + b"[]]}}, []]",
     "1,000,006 arrays and objects (at most 1,000,000)"),
])
def test_a_report_that_is_not_what_the_child_sends_is_named(chain, monkeypatch, report, why):
    """A hook process's report, as bytes another program could write (a pbsuser hook's
    process is its owner's): the hook's error says what was wrong with it, in one line."""
    _forge_report(monkeypatch, report)
    out = chain({"a": Hook(trail)}, mode="process", alarm=20).fire(queuejob())
    assert (out.kind, out.hook) == ("error", "a"), out.detail
    assert out.detail == f"the hook's process sent a malformed report ({why}); killed"


@pytest.mark.parametrize("changes, event", [
    (b'{"job": {"a": %s}}', queuejob), (b'{"vnode_list": {"n1": %s}}', begin)])
def test_a_change_nested_deeper_than_its_copy_reaches_is_refused(chain, monkeypatch, changes,
                                                                 event):
    """A change nested 600 deep reads as JSON (one frame a level) but its copy onto the
    event recursed further: RecursionError went through the runner to its caller. The
    report's reader now refuses it (jsontext's max_depth), before any copy."""
    deep = b'{"a": ' * 600 + b"1" + b"}" * 600
    _forge_report(monkeypatch, _DONE + b"0.0, " + changes % deep + b", []]")
    out = chain({"a": Hook(trail)}, mode="process", alarm=20).fire(event())
    assert (out.kind, out.hook, out.detail) == ("error", "a", (
        "the hook's process sent a malformed report (arrays or objects nested more than 100 "
        "levels deep); killed"))


@pytest.mark.parametrize("where", ["json_loads", "_check_records"])
@pytest.mark.parametrize("error", [MemoryError, RecursionError])
def test_a_report_whose_reading_fails_in_the_caller_is_the_hooks_error(chain, monkeypatch,
                                                                        where, error,
                                                                        left_children):
    """The caller short of memory for a large report (a pbsuser hook's process may send
    REPORT_MAX bytes), or out of stack, as it reads it: the error went through the runner
    to its caller (the server's loop). It is the hook's error now (PBS's outcome for an
    exception in a hook), its process killed."""
    from pbsplug import runner as runner_module

    def fails(*args, **kwargs):
        raise error()

    monkeypatch.setattr(runner_module, where, fails)
    after = []
    out = chain({"a": Hook(trail, order=1), "b": Hook(after.append, order=2)},
                mode="process", alarm=20).fire(queuejob())
    assert (out.accepted, out.kind, out.hook, out.changes) == (False, "error", "a", {})
    assert out.detail == f"the hook's report could not be read ({error.__name__}); killed"
    assert out.message == ("request rejected as filter hook 'a' encountered an exception. "
                           "Please inform Admin")
    assert after == []
    assert left_children() == set()  # killed and reaped


def _as_owner(tmp_path, alarm):
    """A Runner with one pbsuser execjob_prologue hook 'a' that sets the job's comment."""
    class AsUser:
        plugin_info = PluginInfo(events=("execjob_prologue",), user="pbsuser", alarm=alarm)

        @hookimpl
        def execjob_prologue(self, event):
            event.job.comment = "ran"

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    assert plugins.add("a", AsUser(), enable=True).status == "enabled"
    return Runner(plugins, alarm_grace=0.5)


def _stop_here(pid_file: Path) -> None:
    """In a hook's process: leave its pid in `pid_file`, and stop."""
    pid_file.write_text(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGSTOP)


@contextlib.contextmanager
def _resumed_if_waited_for(resume):
    """A hang guard for a stopped hook's process: if the block has not ended 30 s on,
    `resume()` sends it SIGCONT (it then goes on as if never stopped). The runner is to
    kill it within a second or two of its stop."""
    done = threading.Event()

    def guard():
        if not done.wait(30):
            resume()

    thread = threading.Thread(target=guard)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def test_a_hook_process_stopped_before_its_first_start_is_killed_at_once(tmp_path,
                                                                         monkeypatch,
                                                                         left_children):
    """A pbsuser hook's owner may SIGSTOP the child before it reports "start": it is killed
    as soon as it is seen stopped, not at its deadline (the first hook's alarm plus the
    grace), and that hook is an error."""
    import pbsplug.runner as runner_module

    pid_file = tmp_path / "pid"
    monkeypatch.setattr(runner_module, "_become_job_owner", lambda event: _stop_here(pid_file))
    with _resumed_if_waited_for(lambda: os.kill(int(pid_file.read_text()), signal.SIGCONT)):
        out = _as_owner(tmp_path, alarm=3600).fire(Event.from_dict("execjob_prologue", {
            "job": {"id": "1.s", "euser": "nobody"}, "vnode_list": {}}))
    assert (out.kind, out.hook) == ("error", "a"), out.detail
    assert out.detail.startswith("the hook's process was stopped by SIGSTOP"), out.detail
    assert out.detail.endswith(" before the hook ran; killed"), out.detail
    assert left_children() == set()  # killed and reaped


def test_a_hook_process_stopped_while_its_hook_runs_is_killed_at_once(chain, tmp_path,
                                                                      left_children):
    """A hook's process seen stopped while its hook runs is killed then, not at its alarm
    plus the grace (the caller, a server's one loop, waited that long, for every event:
    a pbsuser hook's process is its owner's to stop). The hook is an error."""
    pid_file = tmp_path / "pid"

    def stop(event):
        _stop_here(pid_file)
        event.job.comment = "went on"

    with _resumed_if_waited_for(lambda: os.kill(int(pid_file.read_text()), signal.SIGCONT)):
        out = chain({"a": Hook(stop)}, mode="process", alarm=3600).fire(queuejob())
    assert (out.kind, out.hook, out.changes) == ("error", "a", {}), out.detail
    assert out.detail == "the hook's process was stopped by SIGSTOP while the hook ran; killed"
    assert out.consequence == "refuse"
    assert left_children() == set()  # killed and reaped


def _children_groups_resumed():
    """SIGCONT to the process group of each child of this process (a hook's process)."""
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1]
            if int(parent) == os.getpid():
                os.killpg(int(name), signal.SIGCONT)
        except (OSError, IndexError):
            pass


@pytest.mark.usefixtures("needs_root")
def test_a_pbsuser_hooks_program_seen_stopped_kills_the_hooks_process_group(tmp_path,
                                                                            left_children):
    """A program a pbsuser hook runs is its owner's to stop too, and the hook then waits
    for it: the hook's process group is killed once one of its processes is seen stopped,
    the hook's error, not at the hook's alarm plus the grace."""
    class AsUser:
        plugin_info = PluginInfo(events=("execjob_prologue",), user="pbsuser", alarm=3600)

        @hookimpl
        def execjob_prologue(self, event):
            subprocess.run(["/bin/sh", "-c", "kill -STOP $$"], check=True)
            event.job.comment = "went on"

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    assert plugins.add("a", AsUser(), enable=True).status == "enabled"
    with _resumed_if_waited_for(_children_groups_resumed):
        out = Runner(plugins, alarm_grace=0.5).fire(Event.from_dict("execjob_prologue", {
            "job": {"id": "1.s", "euser": "nobody"}, "vnode_list": {}}))
    assert (out.kind, out.hook, out.changes) == ("error", "a", {}), out.detail
    found = re.fullmatch(r"a program the hook ran \(sh, pid (\d+)\) was stopped \(a process "
                         r"of job 1\.s's owner nobody, who may signal it\) while the hook "
                         r"ran; the hook's process group was killed", out.detail)
    assert found, out.detail

    def gone(pid):  # (or a zombie its new parent has not reaped yet)
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True

    until(lambda: gone(found[1]), what="the stopped program to be killed")
    assert left_children() == set()  # the hook's process: killed and reaped


@pytest.mark.usefixtures("needs_root")
def test_a_stopped_programs_name_brings_no_line_break_into_the_hooks_error(tmp_path):
    """The owner names the programs a pbsuser hook runs (prctl's PR_SET_NAME takes line
    breaks, tabs and carriage returns): the error that names one seen stopped has none of
    them (it is logged, and a line break in it began a line of the server's log)."""
    import ctypes

    import pbsplug.runner as runner_module

    class AsUser:
        plugin_info = PluginInfo(events=("execjob_prologue",), user="pbsuser", alarm=3600)

        @hookimpl
        def execjob_prologue(self, event):
            pid = os.fork()
            if pid == 0:  # (its /proc/self/comm is root's: prctl, PR_SET_NAME)
                name = ctypes.create_string_buffer(b"x\nforged\rz\t\xc2\x9b")
                runner_module._PRCTL(15, ctypes.addressof(name))
                os.kill(os.getpid(), signal.SIGSTOP)
                os._exit(0)
            os.waitpid(pid, 0)

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    assert plugins.add("a", AsUser(), enable=True).status == "enabled"
    with _resumed_if_waited_for(_children_groups_resumed):
        out = Runner(plugins, alarm_grace=0.5).fire(Event.from_dict("execjob_prologue", {
            "job": {"id": "1.s", "euser": "nobody"}, "vnode_list": {}}))
    assert (out.kind, out.hook) == ("error", "a"), out.detail
    assert out.detail.startswith("a program the hook ran (x?forged?z??, pid "), out.detail


@pytest.mark.usefixtures("needs_root")
def test_a_pbsuser_hook_has_no_controlling_terminal(tmp_path):
    """A root caller with a terminal (`server start -f`, `pbsplug event`): a pbsuser hook,
    or a program of the owner's it runs, opened /dev/tty (its caller's terminal: its
    process group was in the caller's session) and, where the kernel allows TIOCSTI
    (dev.tty.legacy_tiocsti), pushed keys into root's input, for root's shell to read once
    the caller ends. The hook's process has a session of its own, without a terminal.
    Checked: fails with setpgid(0, 0) in the hook's process in place of setsid() (the
    terminal opened, and root read what the hook typed)."""
    import fcntl
    import pty
    import select
    import termios

    class AsUser:
        plugin_info = PluginInfo(events=("execjob_prologue",), user="pbsuser", alarm=30)

        @hookimpl
        def execjob_prologue(self, event):
            try:
                fd = os.open("/dev/tty", os.O_RDWR)
            except OSError:
                event.job.comment = "no terminal"
                return
            event.job.comment = "opened"
            with contextlib.suppress(OSError):  # (refused where TIOCSTI is not allowed)
                for char in b"id # typed by the hook\n":
                    fcntl.ioctl(fd, termios.TIOCSTI, bytes([char]))

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    assert plugins.add("a", AsUser(), enable=True).status == "enabled"
    pid, master = pty.fork()
    if pid == 0:  # the caller, with the pty as its controlling terminal
        code = 1
        try:
            out = Runner(plugins, alarm_grace=0.5).fire(Event.from_dict(
                "execjob_prologue", {"job": {"id": "1.s", "euser": "nobody"},
                                     "vnode_list": {}}))
            ready, _, _ = select.select([0], [], [], 1)
            typed = os.read(0, 200) if ready else b""
            os.write(1, json.dumps({"kind": out.kind, "changes": out.changes,
                                    "typed": typed.decode(errors="replace")}).encode()
                     + b"\n")
            code = 0
        finally:
            os._exit(code)
    data = b""
    try:
        deadline = time.monotonic() + 60  # a hang guard
        while not data.endswith(b"}\r\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # (the caller ended: EIO)
                    break
                if not chunk:
                    break
                data += chunk
    finally:
        os.close(master)
        os.waitpid(pid, 0)
    report = json.loads(data.splitlines()[-1])
    assert report == {"kind": "accept", "changes": {"job": {"comment": "no terminal"}},
                      "typed": ""}, data


def _lurk(runner: int, skip: int) -> None:
    """In a forked copy of a pbsuser hook's process, as its owner: leave for a group of its
    own (in the session its hook's process was in), wait for the next hook's process the
    caller forks, join that one's process group (setpgid asks only for the same session,
    not the same uid) and stop there; or end, when it may not join. Never returns."""
    os.setpgid(0, 0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for name in filter(str.isdigit, os.listdir("/proc")):
            if int(name) in (skip, os.getpid()):
                continue
            try:
                fields = Path(f"/proc/{name}/stat").read_bytes().rpartition(b")")[2].split()
                if int(fields[1]) != runner or fields[2] != name.encode():
                    continue
            except (OSError, IndexError):
                continue
            try:
                os.setpgid(0, int(name))
            except OSError:
                os._exit(0)
            os.kill(os.getpid(), signal.SIGSTOP)
            os._exit(0)
        time.sleep(0.02)
    os._exit(0)


@pytest.mark.usefixtures("needs_root")
def test_another_owners_process_cannot_stop_in_a_pbsuser_hooks_group(tmp_path):
    """Job owner nobody's pbsuser hook leaves a process behind (a program of theirs it runs
    may: nothing kills it). When job owner daemon's hook runs, that process joins its
    process group and SIGSTOPs itself: the runner's /proc scan saw a stopped process in the
    group, killed daemon's hook and failed it, naming daemon as the owner who stopped it.
    A hook's process makes a session of its own (it made a group in the caller's session):
    another session's process cannot join its group. Checked: fails with setpgid(0, 0) in
    the hook's process in place of setsid()."""
    runner = os.getpid()
    lurker = 0

    class AsUser:
        plugin_info = PluginInfo(events=("execjob_prologue",), user="pbsuser", alarm=30)

        @hookimpl
        def execjob_prologue(self, event):
            if event.job.euser == "nobody":  # the attacker's job: leave a process behind
                hook = os.getpid()
                pid = os.fork()
                if pid == 0:
                    _lurk(runner, hook)
                event.job.comment = str(pid)
                return
            # daemon's job: a prologue that runs until the process left behind has ended
            # (it could not join), or for 3 s once it is in this group (three looks of the
            # runner's); 20 s at most (a hang guard)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                state = _state(str(lurker))
                if state is None or state[0] == "Z":
                    break
                if state[1] == os.getpgrp():
                    time.sleep(3)
                    break
                time.sleep(0.05)
            event.job.comment = "ran"

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    assert plugins.add("a", AsUser(), enable=True).status == "enabled"
    first = Runner(plugins, alarm_grace=0.5).fire(Event.from_dict("execjob_prologue", {
        "job": {"id": "1.s", "euser": "nobody"}, "vnode_list": {}}))
    assert first.kind == "accept", first.detail
    lurker = int(first.changes["job"]["comment"])
    try:
        out = Runner(plugins, alarm_grace=0.5).fire(Event.from_dict("execjob_prologue", {
            "job": {"id": "2.s", "euser": "daemon"}, "vnode_list": {}}))
        assert (out.kind, out.changes.get("job")) == ("accept", {"comment": "ran"}), \
            out.detail
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(lurker, signal.SIGKILL)


def _state(pid: str) -> tuple[str, int] | None:
    """Process `pid`'s state letter and process group, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()
        return fields[0].decode(), int(fields[2])
    except (OSError, IndexError, ValueError):
        return None
def test_a_hook_process_slow_before_its_first_start_is_killed_at_its_deadline(
        tmp_path, monkeypatch, left_children):
    """A child that takes longer than the first hook's alarm plus the grace to report
    "start" is killed then; that hook is an error."""
    import pbsplug.runner as runner_module

    monkeypatch.setattr(runner_module, "_become_job_owner", lambda event: time.sleep(120))
    out = _as_owner(tmp_path, alarm=1).fire(Event.from_dict("execjob_prologue", {
        "job": {"id": "1.s", "euser": "nobody"}, "vnode_list": {}}))
    assert (out.kind, out.hook) == ("error", "a"), out.detail
    assert "did not start" in out.detail
    assert left_children() == set()  # killed and reaped


def test_a_hook_process_stuck_after_its_last_report_is_killed(chain, monkeypatch, tmp_path,
                                                              left_children):
    """After the last "done" the child has the grace to end; then it is killed and the
    outcomes its hooks reported stand."""
    import pbsplug.runner as runner_module

    send = runner_module._send
    survived = tmp_path / "survived"  # the child, not killed, ends after two minutes

    def stuck(fd, message):
        if message[0] == "end":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM})
            for _ in range(120):
                time.sleep(1)
            survived.touch()
        send(fd, message)

    monkeypatch.setattr(runner_module, "_send", stuck)
    runner = chain({"a": Hook(trail, order=1), "b": Hook(trail, order=2)}, alarm=30,
                   mode="process")
    out = runner.fire(begin())
    assert out.accepted, out.detail
    assert out.changes["job"]["comment"] == "ab"
    assert not survived.exists()
    assert left_children() == set()


@pytest.mark.parametrize("steps", range(8))
def test_a_deadline_passing_while_no_hook_has_started_is_no_crash(tmp_path, monkeypatch, steps):
    """A hook's process that never starts its hook is killed at its deadline, wherever the
    deadline passes in the wait: the clock here moves on by a step at every reading (time
    passes between any two), the deadline `steps` and a half steps after the reading it is
    set from, so that over the cases it passes between each two readings of the wait's
    first rounds. With two
    readings to tell "past the deadline before a hook started" from "past a running hook's
    alarm", a deadline passing between them indexed the batch with None: a TypeError in the
    caller."""
    import subprocess

    import pbsplug.runner as runner_module
    from pbsplug.hookattrs import HookAttributes

    runner = Runner(PluginSet(SiteConfig(path=tmp_path / "s.toml")), alarm_grace=0.5,
                    cancel=lambda: False)
    entry = runner_module.HookEntry("a", lambda event: None, HookAttributes(alarm=1), {},
                                    "process")
    step = (entry.attrs.alarm + runner.alarm_grace) / (steps + 0.5)
    now = [0.0]

    class Clock:
        perf_counter = staticmethod(time.perf_counter)
        time = staticmethod(time.time)

        @staticmethod
        def monotonic():
            now[0] += step
            return now[0]

    child = subprocess.Popen(["sleep", "60"])  # a hook's process that never reports
    read_fd, write_fd = os.pipe()
    try:
        monkeypatch.setattr(runner_module, "time", Clock)
        runs = runner._collect([entry], queuejob(), child.pid, read_fd)
    finally:
        monkeypatch.undo()
        child.kill()
        child.wait()
        os.close(read_fd)
        os.close(write_fd)
    assert [(r.hook, r.outcome) for r in runs] == [("a", "error")]
    assert runs[0].message == "the hook's process did not start the hook in time; killed"


def test_a_started_chain_runs_while_its_caller_goes_on(chain, tmp_path):
    # Runner.start: what fire does, with the wait on the hook's process left to the
    # caller's loop (a server's): a hook that waits holds no one. The step that finds the
    # hook still waiting returns at once; the outcome and the hook's changes are fire's.
    go = tmp_path / "go"

    def wait_then_change(event):
        (tmp_path / "started").write_text(str(os.getpid()))
        while not go.exists():
            time.sleep(0.02)
        event.job.comment = "set"

    runner = chain({"a": Hook(wait_then_change), "b": Hook(trail, order=2)},
                   mode="process", alarm=600)
    event = begin()
    pending = runner.start(event)
    assert pending.outcome is None and pending.pid > 0 and pending.fd >= 0
    until((tmp_path / "started").exists, what="the hook to start")
    assert pending.step() is None  # (no wait: the hook still waits for go)
    go.touch()
    outcome = until(pending.step, what="the chain to end")
    assert outcome.accepted and [r.hook for r in outcome.runs] == ["a", "b"]
    assert event.job.comment == "setb"


def test_a_started_chain_given_up_kills_its_hooks_process(chain, tmp_path):
    def wait(event):
        (tmp_path / "started").write_text(str(os.getpid()))
        time.sleep(600)

    runner = chain({"a": Hook(wait)}, mode="process", alarm=600)
    pending = runner.start(begin())
    until(lambda: (tmp_path / "started").exists() and (tmp_path / "started").read_text(),
          what="the hook to start")
    pid = int((tmp_path / "started").read_text())
    pending.cancel()
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pid, 0)
    assert pending.outcome is None


@pytest.mark.usefixtures("needs_root")
def test_a_pbsuser_hook_dies_with_its_caller_killed(tmp_path):
    """A caller killed with SIGKILL (a server's crash) takes its hooks' processes with it
    (the parent-death signal); the kernel clears that signal when a pbsuser hook's process
    changes uid, so the owner's hook ran on, to its alarm or for ever. Checked: fails with
    the signal not set again after the change of uid (the hook still there)."""
    nobody = pwd.getpwnam("nobody").pw_uid

    class Sleeps:
        plugin_info = PluginInfo(events=("execjob_prologue",), user="pbsuser", alarm=600)

        @hookimpl
        def execjob_prologue(self, event):
            time.sleep(600)

    plugins = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    assert plugins.add("a", Sleeps(), enable=True).status == "enabled"
    caller = os.fork()
    if caller == 0:  # the caller, killed below while its hook sleeps
        try:
            Runner(plugins).fire(Event.from_dict("execjob_prologue", {
                "job": {"id": "1.s", "euser": "nobody"}, "vnode_list": {}}))
        finally:
            os._exit(0)

    def hook_of_caller():
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                status = Path(f"/proc/{name}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":\t", 1) for line in status.splitlines()
                          if ":\t" in line)
            if (fields.get("PPid", "").strip() == str(caller)
                    and fields.get("Uid", "").split()[:1] == [str(nobody)]):
                return int(name)
        return None

    try:
        hook = until(hook_of_caller, what="the hook's process, as nobody")
    finally:
        os.kill(caller, signal.SIGKILL)
        os.waitpid(caller, 0)

    def gone():
        try:
            return Path(f"/proc/{hook}/stat").read_text().split()[2] == "Z" or None
        except OSError:
            return True

    try:
        until(gone, what="the hook's process to die with its caller")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(hook, signal.SIGKILL)
