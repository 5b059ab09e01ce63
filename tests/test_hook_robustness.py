"""One bad plugin against the runner, found by a hostile review: what a hook hands back
(objects it made, values of its own types, a forged report, a flood of log lines, a very
long message), a hook that forks and lets the copy come back, and one that raises
KeyboardInterrupt itself. Each is that hook's error, or stored as plain checked data;
the caller goes on."""

from __future__ import annotations

import enum
import importlib
import json
import logging
import os
import signal
import time

import pytest

from pbsplug import Event, PluginInfo, PluginSet, Runner, Vnode, hookimpl
from pbsplug.runner import LOG_MAX, MESSAGE_MAX
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
    """``run(body, event="execjob_begin", data=BEGIN, mode=None, **site attributes)`` ->
    (outcome, event)."""

    def fire(body, event="execjob_begin", data=None, mode=None, **attributes):
        plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
        plugins.site.plugins["bad"] = PluginSite("bad", enabled=True, attributes=attributes)
        record = plugins.add("bad", Hook(body, (event,)))
        assert record.status == "enabled", record.error
        ev = Event.from_dict(event, json.loads(json.dumps(data if data is not None else BEGIN)))
        return Runner(plugins, mode=mode, alarm_grace=0.5).fire(ev), ev

    return fire


def contained(run, body, mode):
    """``run(body)`` on a queuejob event in `mode`, and fail the test when anything the
    hook did left the runner (as the old runner let it out), named by its type's own name:
    pytest, showing the hook's object, would run its code outside. -> (outcome, event)."""
    try:
        return run(body, "queuejob", {"job": {"id": "1.s"}}, mode)
    except BaseException as exc:  # noqa: BLE001 - what the old runner let out
        escaped = vars(type)["__name__"].__get__(type(exc))
    raise AssertionError(f"{escaped} left the runner")


def plain_types(value) -> set[str]:
    """The types in `value` that are not exactly str, int, float, bool, None, dict, list."""
    kind = type(value)
    found = set() if kind in (str, int, float, bool, type(None), dict, list) else {
        vars(type)["__name__"].__get__(kind)}  # (not its metaclass's say: `_Unnamed`)
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


# -- attribute names ---------------------------------------------------------------------------

QUEUED = {"job": {"id": "1.s"}}
BAD_NAMES = ["a b\nc", "x=y", "Resource_List.ncpus", "1st", "é", "n" * 257]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("how", ["job", "vnode", "made vnode"])
def test_an_attribute_name_pbs_would_not_take_is_the_hooks_error(run, mode, name, how):
    """An unknown attribute name went through as a plugin's own, whatever it held: a
    queuejob hook's ``setattr(job, "a b\\nc", 1)`` was stored by the local engine (a
    line break in qstat -f's ``name = value``). A name is a letter, then letters, digits
    and underscores; another is the hook's error, one line naming it, nothing kept."""

    def body(ev):
        if how == "job":
            setattr(ev.job, name, 1)
        elif how == "vnode":
            setattr(ev.vnode_list["n1"], name, 1)
        else:
            ev.vnode_list["made"] = Vnode("made", {name: 1})

    out, _ = run(body, "queuejob" if how == "job" else "exechost_startup",
                 QUEUED if how == "job" else {"vnode_list": {"n1": {"state": "free"}}}, mode)
    assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
    kind = "job" if how == "job" else "vnode"
    assert out.detail.startswith("BadValue: ") and "\n" not in out.detail, out.detail
    assert out.detail.endswith(f"not a {kind} attribute name (a letter, then letters, "
                               "digits or _)")
    assert len(out.detail) < 200

    def good(ev):
        ev.job.my_plugin_attr_2 = "kept"

    out, _ = run(good, "queuejob", QUEUED, mode)
    assert out.accepted and out.changes["job"] == {"my_plugin_attr_2": "kept"}


@pytest.mark.parametrize("mode", MODES)
def test_a_bad_name_is_named_in_one_line_where_the_guard_refuses_too(run, mode):
    """A name the event does not let the hook write was named as it came: the refusal
    was two lines. The name is checked first."""
    for body in (lambda ev: setattr(ev.job, "a b\nc", 1),
                 lambda ev: ev.job.Resource_List.__setitem__("a b\nc", 1)):
        out, _ = run(body, mode=mode)
        assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
        assert out.detail.startswith("BadValue: ") and "\n" not in out.detail, out.detail


def test_a_bad_attribute_name_in_a_hooks_report_is_refused(run):
    """A process-mode hook that wrote the name into its report itself: refused in the
    caller as a bad value is."""
    out, ev = run(lambda ev: ev.job._changes.__setitem__("a b\nc", 1), "queuejob", QUEUED,
                  "process")
    assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
    assert out.detail.startswith("the hook's process reported a change that is refused: ")
    assert "a b\nc" not in ev.job


# -- values of the hook's own types ------------------------------------------------------------

class State(str, enum.Enum):
    OFFLINE = "offline"


class Count(int, enum.Enum):
    FOUR = 4


class Odd(str):
    """A str that cannot be compared, hashed or shown."""

    def __eq__(self, other):
        raise RuntimeError("no ==")

    def __hash__(self):
        raise RuntimeError("no hash")

    def __str__(self):
        raise RuntimeError("no str")

    __format__ = __repr__ = __str__


@pytest.mark.parametrize("mode", MODES)
def test_a_hooks_values_of_its_own_types_are_stored_as_plain_data(run, mode):
    """In process, the caller got the hook's own objects: a ``(str, Enum)`` state that the
    engine read with ``str()`` as ``'State.OFFLINE'``, a str whose ``==`` raises. Now every
    value set is plain data of the exact types, in both modes."""

    def body(ev):
        vnode = ev.vnode_list["n1"]
        vnode.state = State.OFFLINE
        vnode.comment = Odd("checked")
        vnode.resources_available["ncpus"] = Count.FOUR
        ev.job.resources_used["ncpus"] = Count.FOUR
        ev.job.Variable_List = {"K": State.OFFLINE}

    out, ev = run(body, mode=mode)
    assert out.accepted, out.detail
    assert plain_types(out.changes) == set(), out.changes
    assert out.changes["vnode_list"]["n1"]["state"] == "offline"
    assert str(out.changes["vnode_list"]["n1"]["state"]) == "offline"
    assert out.changes["job"]["Variable_List"] == {"K": "offline"}
    assert plain_types(ev.job.to_dict()) == set() and plain_types(ev.vnode_list["n1"].to_dict()) \
        == set()


@pytest.mark.parametrize("mode", MODES)
def test_a_message_of_a_str_subclass_does_not_fail_the_caller(run, mode):
    """``event.reject(Odd(...))``: the runner formatted the hook's object and raised in
    the caller (in process: the event failed with no hook named)."""
    out, _ = run(lambda ev: ev.reject(Odd("not today")), "queuejob", {"job": {"id": "1.s"}},
                 mode)
    assert (out.kind, out.hook, out.message) == ("reject", "bad", "not today")
    assert type(out.message) is str


# -- what the hook's process reports -------------------------------------------------------------

FORGED = {
    "a read-only attribute past the guard":
        lambda ev: (object.__setattr__(ev.job, "_guard", None),
                    setattr(ev.job, "job_state", "F")),
    "the change record itself": lambda ev: ev.job._changes.__setitem__("euser", "root"),
    # (the process's own check of its changes, `_take`, replaced there: its report is forged)
    "an action that is none": lambda ev: setattr(
        importlib.import_module("pbsplug.runner"), "_take",
        lambda event: ({"job": {"_action": "wipe"}}, None, None)),
    "a bad value past the rules":
        lambda ev: ev.vnode_list["n1"]._changes.__setitem__("state", "sideways"),
}


@pytest.mark.parametrize("how", FORGED)
def test_what_a_hooks_process_reports_is_checked_again(run, how):
    """The parent replayed the child's report without the event's guard: a hook that got
    round it in its process (or wrote its own report) had the server store job_state,
    euser or exec_vnode. Its report now goes through the guards and the value rules."""
    out, ev = run(FORGED[how], mode="process")
    assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
    assert out.detail.startswith("the hook's process reported a change that is refused: ")
    assert ev.job.job_state is None and ev.job.euser == "root" and ev.job.action is None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("what, body", [
    ("env None", lambda ev: setattr(ev, "env", None)),
    ("argv text", lambda ev: setattr(ev, "argv", "rm -rf /")),
    ("env value", lambda ev: ev.env.__setitem__("X", 3)),
    ("env name", lambda ev: ev.env.__setitem__("A=B", "x")),
    ("NUL", lambda ev: ev.argv.append("a\0b")),
    ("progname", lambda ev: setattr(ev, "progname", b"/bin/sh")),
])
def test_a_launch_that_cannot_start_a_process_is_the_hooks_error(run, mode, what, body):
    """execjob_launch's argv and env were taken as they came: ``env = None`` failed the
    runner in the caller (no hook named), ``argv = "text"`` ran its letters, a NUL failed
    the job's start. Each is the hook's error now."""
    data = {"job": {"id": "1.s"}, "progname": "/bin/sh", "argv": ["/bin/sh", "x"],
            "env": {"HOME": "/"}}
    out, _ = run(body, "execjob_launch", data, mode)
    assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
    assert out.detail.startswith("the hook's change cannot be stored: event.")

    def fine(ev):
        ev.env["X"] = Odd("y")
        ev.argv = [State.OFFLINE]

    def then_fails(ev):
        body(ev)
        raise RuntimeError("and then")

    out, _ = run(then_fails, "execjob_launch", data, mode)
    assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
    assert out.detail == "RuntimeError: and then"

    out, _ = run(fine, "execjob_launch", data, mode)
    assert out.accepted and out.changes["env"] == {"HOME": "/", "X": "y"}
    assert plain_types(out.changes) == set()


# -- long messages, floods -----------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("body", [
    lambda ev: ev.reject("x" * 10_000_000 + "\x1b[2J\ud800"),
    lambda ev: (_ for _ in ()).throw(RuntimeError("y" * 10_000_000)),
], ids=["reject", "exception"])
def test_a_hooks_message_is_kept_short_and_printable(run, mode, body, caplog):
    """A reject of 10 MB became a runjob's ``Not Running: PBS Error: ...`` comment (past
    PBS's 4096 characters: the job set aside), the requester's reply and a 10 MB log and
    trace line; a terminal escape or a lone surrogate went with it."""
    caplog.set_level(logging.ERROR)
    out, _ = run(body, "queuejob", {"job": {"id": "1.s"}}, mode)
    assert out.hook == "bad" and not out.accepted
    assert len(out.detail) <= MESSAGE_MAX and out.detail.endswith("...")
    assert "\x1b" not in out.detail
    out.detail.encode("utf-8")
    assert sum(len(r.getMessage()) for r in caplog.records) < 100_000


def test_a_hook_that_floods_the_log_sends_a_bounded_report(run, caplog):
    """A hook logging in a loop sent every line to the server (100 MB for a million lines,
    read by a caller that copied its whole buffer at each chunk: the hook ran out its alarm
    and the server's memory grew); loggers named per job were made in the server for good.
    Now one run sends at most LOG_MAX characters and says how many lines it left out."""
    lines = 50_000

    def body(ev):
        for n in range(lines):
            logging.getLogger(f"flood.job{n}").warning("line %d %s", n, "z" * 100)
            ev.logger.warning("")

    caplog.set_level(logging.WARNING)
    out, _ = run(body, "queuejob", {"job": {"id": "1.s"}}, "process")
    assert out.accepted, out.detail
    texts = [r.getMessage() for r in caplog.records]
    assert sum(map(len, texts)) <= LOG_MAX + 1000
    assert texts[-1].endswith(f"left out: it logged more than {LOG_MAX} characters in one run")
    assert not [name for name in logging.Logger.manager.loggerDict if name.startswith("flood")]
    assert {r.name for r in caplog.records} == {"pbsplug.hook.bad"}


# -- a hook that forks, a hook that interrupts -----------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_a_forked_copy_that_comes_back_from_the_hook_leaves(run, mode, tmp_path):
    """A hook that forked and forgot os._exit in the copy: in process, the copy came back
    into the caller (in a server: a second server on the same socket and database); in a
    process-mode hook it reported as the hook's process too. It leaves at the hook's end
    now, with sys.exit's code."""

    def body(ev):
        child = os.fork()
        if child == 0:
            raise SystemExit(7)
        ev.job.comment = str(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))

    out, _ = run(body, mode=mode)
    with open(tmp_path / "after", "a") as fh:  # only the caller runs this line
        fh.write(f"{os.getpid()}\n")
    assert out.accepted, out.detail
    assert out.changes["job"]["comment"] == "7"
    assert (tmp_path / "after").read_text() == f"{os.getpid()}\n"


@pytest.mark.parametrize("mode", MODES)
def test_a_forked_copy_leaves_with_its_code_whatever_its_exit_says(run, mode):
    """The copy's sys.exit code was read through the hook's SystemExit subclass: a code
    property that raised left the copy's way out (a later look let it leave, with 0)."""

    def body(ev):
        child = os.fork()
        if child == 0:
            raise _ExitProperty(2)
        ev.job.comment = str(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))

    out, _ = run(body, mode=mode)
    assert out.accepted, out.detail
    assert out.changes["job"]["comment"] == "2"


def test_a_keyboard_interrupt_the_hook_raises_is_its_error_in_a_server(run):
    """In process, a hook that raised KeyboardInterrupt itself stopped the server (its loop
    catches Exception). Where SIGINT has the caller's own handler, as in the server, no ^C
    can raise it: it is the hook's error. (A real ^C in a program that keeps Python's
    handler still ends the program.)"""

    def interrupt(ev):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        out, _ = run(interrupt, "queuejob", {"job": {"id": "1.s"}}, "inprocess")
    except KeyboardInterrupt:
        pytest.fail("the hook's KeyboardInterrupt reached the caller")
    finally:
        signal.signal(signal.SIGINT, old)
    assert (out.kind, out.hook, out.detail) == ("error", "bad",
                                                "KeyboardInterrupt raised by the hook")
    with pytest.raises(KeyboardInterrupt):
        run(interrupt, "queuejob", {"job": {"id": "1.s"}}, "inprocess")


def test_a_copy_forked_below_python_leaves_at_the_chains_end(run, tmp_path):
    """fork() called through C (ctypes, an extension) runs no at-fork handler, so the
    per-hook check cannot see it: the copy still must not return into the caller."""
    import ctypes

    libc_fork = ctypes.CDLL(None, use_errno=True).fork

    def body(ev):
        child = libc_fork()
        if child == 0:
            return  # the copy comes back out of the hook
        ev.job.comment = str(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))

    out, _ = run(body, mode="inprocess")
    with open(tmp_path / "after", "a") as fh:  # only the caller runs this line
        fh.write(f"{os.getpid()}\n")
    assert out.accepted, out.detail
    assert out.changes["job"]["comment"] == "0"
    assert (tmp_path / "after").read_text() == f"{os.getpid()}\n"


def test_the_forked_copy_check_costs_no_system_call_per_hook(tmp_path, monkeypatch):
    """The check after each hook was two getpid() calls: 10 system calls in a 5-hook
    in-process event, about a tenth of its cost (benchmarks/bench_events.py). A fork
    through Python is counted instead; getpid() runs twice per chain, not per hook."""
    plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
    for n in range(5):
        plugins.site.plugins[f"ok{n}"] = PluginSite(f"ok{n}", enabled=True)
        assert plugins.add(f"ok{n}", Hook(lambda ev: None, ("queuejob",))).status == "enabled"
    runner = Runner(plugins, mode="inprocess")
    runner.fire(Event.from_dict("queuejob", {"job": {"id": "1.s"}}))  # (the chain built)
    calls = []
    real = os.getpid
    monkeypatch.setattr(os, "getpid", lambda: calls.append(1) or real())
    out = runner.fire(Event.from_dict("queuejob", {"job": {"id": "1.s"}}))
    assert out.accepted and len(out.runs) == 5
    assert len(calls) <= 2


@pytest.mark.parametrize("mode", MODES)
def test_a_launch_given_with_odd_entries_is_not_the_hooks_error(run, mode):
    """A task's environment is its owner's to shape (TaskProlog reads it from /proc: an
    entry ``=x`` there is a variable of no name). The whole launch was checked after each
    hook, so a hook that set one variable (mjf's $MACHINEFEATURES) failed for the entry it
    was given, and its fail_action took the node. What the hook was given and left as it
    was is not its error; what it sets is checked, and the error names the variable."""
    data = {"job": {"id": "1.s"}, "progname": "/bin/sh", "argv": ["/bin/sh", "a\0b"],
            "env": {"": "x", "HOME": "/", "BAD": "a\0b"}}

    def sets_one(ev):
        ev.env["MACHINEFEATURES"] = "/etc/mjf"

    out, _ = run(sets_one, "execjob_launch", data, mode)
    assert out.accepted, out.detail
    assert out.changes["env"] == {"": "x", "HOME": "/", "BAD": "a\0b",
                                  "MACHINEFEATURES": "/etc/mjf"}
    out, _ = run(lambda ev: None, "execjob_launch", data, mode)
    assert out.accepted, out.detail

    def sets_a_bad_one(ev):
        ev.env["HOME"] = "/x\0y"

    out, _ = run(sets_a_bad_one, "execjob_launch", data, mode)
    assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
    assert out.detail == ("the hook's change cannot be stored: event.env['HOME']: not a "
                          "string without NUL")
    out, _ = run(lambda ev: ev.env.__setitem__("A=B", "x"), "execjob_launch", data, mode)
    assert out.detail == ("the hook's change cannot be stored: event.env: 'A=B' is not a "
                          "variable name (text, no '=', no NUL)")


# -- an exception that cannot be shown -----------------------------------------------------------

class _Exiting(Exception):
    def __str__(self):
        raise SystemExit(3)


class _Interrupting(Exception):
    def __str__(self):
        raise KeyboardInterrupt


class _Numbered(Exception):
    def __str__(self):
        return 42


class _Formatted(str):
    """A str whose formatting raises SystemExit (what `__str__` may return: str() takes a
    str subclass)."""

    def __format__(self, spec):
        raise SystemExit(4)


class _Subclassed(Exception):
    def __str__(self):
        return _Formatted("disk full")


class _Noted(Exception):
    """Its ``__notes__`` (read by the traceback's formatting) raises SystemExit."""

    @property
    def __notes__(self):
        raise SystemExit(5)


class _Named(type):
    @property
    def __name__(cls):
        raise SystemExit(6)


class _Nameless(Exception, metaclass=_Named):
    def __str__(self):
        raise SystemExit(7)


class _ExitCode:
    def __repr__(self):
        raise SystemExit(8)


class _ExitProperty(SystemExit):
    @property
    def code(self):
        raise SystemExit(9)


UNSHOWN = {
    "__str__ raises SystemExit": (_Exiting, "_Exiting: <_Exiting that cannot be shown>"),
    "__str__ raises KeyboardInterrupt":
        (_Interrupting, "_Interrupting: <_Interrupting that cannot be shown>"),
    "__str__ returns an int": (_Numbered, "_Numbered: <_Numbered that cannot be shown>"),
    "__str__ returns a str subclass": (_Subclassed, "_Subclassed: disk full"),
    "__notes__ raises SystemExit": (_Noted, "_Noted: "),
    "its type's name raises SystemExit":
        (_Nameless, "_Nameless: <_Nameless that cannot be shown>"),
    "sys.exit with a code whose repr raises":
        (lambda: SystemExit(_ExitCode()), "hook 'bad' called sys.exit(<_ExitCode>)"),
    "a SystemExit whose code raises": (lambda: _ExitProperty(2), "hook 'bad' called sys.exit(2)"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", UNSHOWN)
def test_an_exception_that_cannot_be_shown_is_the_hooks_error(run, mode, case):
    """A hook's exception was shown with str(), guarded against Exception alone: one whose
    ``__str__`` raised SystemExit (or whose formatting ran the hook's code: a str subclass,
    its ``__notes__``, its type's name) left the runner, in process into the caller's loop.
    It is the hook's error, its message a stand-in naming the exception's type."""
    exc, detail = UNSHOWN[case]

    def body(ev):
        raise exc()

    out, _ = contained(run, body, mode)
    assert (out.kind, out.hook, out.detail) == ("error", "bad", detail)
    assert type(out.detail) is str


# -- a change that cannot be shown -------------------------------------------------------------

class _ExitNaN(float):
    def __repr__(self):
        raise SystemExit(10)


class _Unnamed(metaclass=_Named):
    """A value whose type's name raises SystemExit."""


UNSHOWN_CHANGES = {
    "an attribute name whose repr raises SystemExit": (
        lambda ev: ev.job._changes.__setitem__(_ExitCode(), 1),
        "job: attribute name <_ExitCode> is not a string"),
    "a mapping key whose repr raises SystemExit": (
        lambda ev: setattr(ev.job, "site_map", {_ExitCode(): 1}),
        "job.site_map: key <_ExitCode> is not a string"),
    "a NaN whose repr raises SystemExit": (
        lambda ev: ev.job._changes.__setitem__("site_x", _ExitNaN("nan")),
        "job.site_x: <_ExitNaN> is not a number"),
    "a value whose type's name raises SystemExit": (
        lambda ev: setattr(ev.job, "site_x", _Unnamed()),
        "job.site_x: a value of type _Unnamed cannot be stored"),
    "an attribute name of a str that formats itself": (
        lambda ev: ev.job._changes.__setitem__(_Formatted("site_x"), {1: 1}),
        "job.site_x: key 1 is not a string"),
    "a mapping key of a str that formats itself": (
        lambda ev: ev.job._changes.__setitem__("site_map", {_Formatted("k"): float("nan")}),
        "job.site_map.k: nan is not a number"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", UNSHOWN_CHANGES)
def test_a_change_that_cannot_be_shown_is_the_hooks_error(run, mode, case):
    """A change that cannot be stored was named with repr() and format(), unguarded: an
    attribute name, a mapping's key or a NaN whose repr raised SystemExit, a type whose name
    did, a str subclass whose __format__ did, left the runner (in process into the caller's
    loop; a process-mode hook's process exited with status 0, nothing said). It is the
    hook's error, naming what with a stand-in for the repr, and is not kept."""
    body, why = UNSHOWN_CHANGES[case]
    out, ev = contained(run, body, mode)
    assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
    assert out.detail == f"the hook's change cannot be stored: {why}"
    assert type(out.detail) is str
    assert plain_types(ev.job.to_dict()) == set() and plain_types(ev.job._changes) == set()


# -- showing what a hook left takes its alarm's time -------------------------------------------

def _dawdle(ended, caught):
    """The hook's code that does not end by itself: 20 s of short sleeps (a hang guard: a
    runner that does not cut it sees it end, and `ended` says so). With `caught`, what
    interrupts it is turned into SystemExit, which a stand-in takes for a failure to show."""
    try:
        for _ in range(400):
            time.sleep(0.05)
    except BaseException:
        if caught:
            raise SystemExit(11) from None
        raise
    ended.append(True)
    return "at last"


def _slow(ended, caught=False, base=object):
    """An object of a class whose __str__ and __repr__ `_dawdle`."""

    class Slow(base):
        def __str__(self):
            return _dawdle(ended, caught)

        __repr__ = __str__

    return Slow()


def _raising(exc):
    raise exc


SLOW = {
    "an exception whose __str__ does not end":
        lambda ended: _raising(_slow(ended, base=Exception)),
    "an exception whose __str__ turns its alarm into SystemExit":
        lambda ended: _raising(_slow(ended, True, base=Exception)),
    "sys.exit with a code whose repr does not end":
        lambda ended: _raising(SystemExit(_slow(ended))),
    "an attribute name whose repr does not end": lambda ended: None,
    "attribute names whose repr turns its alarm into SystemExit": lambda ended: None,
    # (event.reject's message was made text with the alarm taken by its stand-in: the
    # alarm became a reject, and the hook's changes were kept)
    "a reject whose message does not end": lambda ended: None,
    "a hand-set decision whose message does not end": lambda ended: None,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", SLOW)
def test_what_a_hook_left_is_shown_within_its_alarm(run, mode, case):
    """The hook's alarm stopped at its last line: its exception's message, its sys.exit
    code and its changes were shown after it, with the hook's own methods (``__str__``,
    ``__repr__``), so one that never returned held an in-process caller for ever (a process-
    mode hook's process was killed at its alarm and grace). They are shown under the hook's
    alarm, which ends it as an alarm, even when the stand-in for a message took it."""
    ended = []

    def body(ev):
        if "attribute name" in case:
            caught = "SystemExit" in case
            ev.job._changes[_slow(ended, caught)] = 1
            ev.job._changes[_slow(ended, caught)] = 2
        elif "reject" in case:
            ev.job.comment = "kept?"
            ev.reject(_slow(ended))
        elif "decision" in case:
            ev.job.comment = "kept?"
            ev._decision = ("reject", _slow(ended))
        SLOW[case](ended)

    out, _ = run(body, "queuejob", {"job": {"id": "1.s"}}, mode, alarm=1)
    assert not ended, "the hook's code ran to its end: its alarm did not cut it"
    assert (out.kind, out.hook, out.changes) == ("alarm", "bad", {})
    assert "alarm" in out.detail


# -- what a failed hook left -----------------------------------------------------------------

class _ExitingDict(dict):
    """A mapping whose every reading raises SystemExit."""

    def items(self):
        raise SystemExit(12)

    def keys(self):
        raise SystemExit(13)

    def __iter__(self):
        raise SystemExit(14)


class _ExitingClass:
    @property
    def __class__(self):  # (read by isinstance)
        raise SystemExit(15)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("value, why", [  # (in pytest.param: pytest reads a bare value's class)
    pytest.param(_ExitingDict(a=float("nan")), "job.site_x.a: nan is not a number",
                 id="a dict whose reading raises"),
    pytest.param(_ExitingClass(), "job.site_x: a value of type _ExitingClass cannot be stored",
                 id="an object whose class raises")])
def test_what_a_failed_hook_left_does_not_fail_the_caller(run, mode, value, why):
    """A hook's own object in its change record, whose methods raise SystemExit, failed the
    check (the hook's error), then failed the runner's last reading of the event's changes,
    which let only an Exception go: in process it left fire into the caller's loop. The
    check goes by the value's own type now, read by dict's own methods (none of the hook's
    runs: `test_a_value_whose_type_lies_neither_fools_nor_fails_the_check`); what fails it
    is a change that cannot be stored, not the hook's sys.exit."""
    out, _ = contained(run, lambda ev: ev.job._changes.__setitem__("site_x", value), mode)
    assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
    assert out.detail == f"the hook's change cannot be stored: {why}"


def test_a_change_of_the_hooks_own_type_reaches_the_caller_as_plain_data(run):
    """In process, a change set past the attribute's setter kept the hook's own object (a str
    or int subclass passed the check as it is): the caller got it in `outcome.changes`, and
    its methods ran later in the caller's loop. A process-mode hook's came back plain."""

    class Name(str):
        pass

    def body(ev):
        ev.job._changes["comment"] = Odd("x")
        ev.job._changes[Name("Priority")] = Count.FOUR
        ev.job._changes["Variable_List"] = {Name("K"): [Odd("v"), Count.FOUR]}

    out, _ = run(body, "queuejob", {"job": {"id": "1.s"}}, "inprocess")
    assert out.accepted, out.detail
    assert plain_types(out.changes) == set()
    assert out.changes["job"] == {"comment": "x", "Priority": 4,
                                  "Variable_List": {"K": ["v", 4]}}


class _LoopingDict(dict):
    """A change record whose reading does not end (a hang guard: `_dawdle`)."""

    def __init__(self, ended, *args):
        super().__init__(*args)
        self.ended = ended

    def items(self):
        _dawdle(self.ended, False)
        return super().items()

    def keys(self):
        _dawdle(self.ended, False)
        return super().keys()


@pytest.mark.parametrize("how", ["raises", "runs past its alarm"])
def test_what_a_failed_hook_left_is_not_read(run, how):
    """After an in-process hook's error or alarm the runner read what it left (to drop it)
    after its alarm had ended: a change record of its own whose reading never returned held
    the caller for ever. A failed hook's changes are not kept: they are not read either."""
    ended = []

    def body(ev):
        object.__setattr__(ev.job, "_changes", _LoopingDict(ended, {"comment": "x"}))
        if how == "raises":
            raise RuntimeError("and then")
        _dawdle([], False)

    out, _ = run(body, "queuejob", {"job": {"id": "1.s"}}, "inprocess", alarm=1)
    assert not ended, "the hook's record was read to its end, after its alarm"
    assert (out.kind, out.hook, out.changes) == (
        ("error", "bad", {}) if how == "raises" else ("alarm", "bad", {}))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("decision", [3, None, b"no", ["x"]])
def test_a_hand_set_decision_that_is_no_text_is_the_hooks_error(run, mode, decision):
    """``event._decision = ("reject", 3)`` failed as ``AttributeError: ...`` (the message
    formatted as text); its message is shown as text now."""
    out, _ = run(lambda ev: setattr(ev, "_decision", ("reject", decision)), "queuejob",
                 {"job": {"id": "1.s"}}, mode)
    assert (out.kind, out.hook) == ("reject", "bad"), out.detail
    assert out.detail == (None if decision is None else str(decision))


# -- what an accepted hook left is taken under its alarm ---------------------------------------

class _ClearExit(dict):
    """A change record whose clearing raises SystemExit."""

    def clear(self):
        raise SystemExit(16)


class _ClearLoop(dict):
    """A change record whose clearing does not end (a hang guard: `_dawdle`)."""

    ended: list = []

    def clear(self):
        _dawdle(self.ended, False)


class _ImpostorJob:
    """A job of the hook's own, put on the event in the caller's job's place."""

    _changes: dict = {}
    _read = None
    ended: list = []
    hangs = False

    @property
    def action(self):
        if self.hangs:
            _dawdle(self.ended, False)
        raise SystemExit(17)


ACCEPTED_LEFT = {
    "a change record whose clear() raises SystemExit": "error",
    "a change record whose clear() does not end": "alarm",
    "a job of its own whose action raises SystemExit": "error",
    "a job of its own whose action does not end": "alarm",
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", ACCEPTED_LEFT)
def test_what_an_accepted_hook_left_is_taken_within_its_alarm(run, mode, case):
    """An in-process hook that accepted left its changes and its job's action to be read
    by the runner after its alarm, in the caller: a change record of its own whose clear()
    raised SystemExit, or a job of its own put on the event whose ``action`` did, left the
    runner; one that never returned held the caller for ever. They are taken as plain data
    under the hook's alarm, in either mode: what they raise is the hook's error, a reading
    that does not end its alarm."""
    ended = []

    def body(ev):
        if "record" in case:
            record = (_ClearExit if "raises" in case else _ClearLoop)({"comment": "x"})
            record.ended = ended
            object.__setattr__(ev.job, "_changes", record)
        else:
            job = _ImpostorJob()
            job.ended, job.hangs = ended, "does not end" in case
            ev.job = job

    out, _ = contained(run, body, mode) if ACCEPTED_LEFT[case] == "error" else \
        run(body, "queuejob", {"job": {"id": "1.s"}}, mode, alarm=1)
    assert not ended, "the hook's object was read to its end, after its alarm"
    assert (out.kind, out.hook, out.changes, out.job_action) == (
        ACCEPTED_LEFT[case], "bad", {}, None)
    if ACCEPTED_LEFT[case] == "error":
        assert out.detail == "the hook's changes cannot be read (SystemExit raised)"


class _LiarStr:
    """A value whose __class__ says it is a str (read by isinstance)."""

    __class__ = str  # type: ignore[assignment]


class _HashExit(type):
    def __hash__(cls):
        raise SystemExit(18)


class _EqExit(type):
    def __eq__(cls, other):  # (and so no __hash__: unhashable)
        raise SystemExit(19)


class _HashlessStr(str, metaclass=_HashExit):
    """A str whose type cannot be hashed without SystemExit."""


class _EqlessStr(str, metaclass=_EqExit):
    """A str whose type cannot be compared (nor hashed)."""


FOOLING = {
    "a value whose __class__ says str":
        (_LiarStr, "the hook's change cannot be stored: job.site_x: a value of type "
                   "_LiarStr cannot be stored"),
    "a str whose type's hash raises SystemExit": (lambda: _HashlessStr("x"), None),
    "a str whose type's == raises SystemExit": (lambda: _EqlessStr("x"), None),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", FOOLING)
def test_a_value_whose_type_lies_neither_fools_nor_fails_the_check(run, mode, case):
    """The check and the plain copy of a hook's value asked isinstance (which reads the
    value's __class__: a class saying ``str`` passed as text, and str's own method then
    raised TypeError in the caller) and looked its type up in a set (a metaclass's
    __hash__ or __eq__ raised SystemExit out of the runner). They go by the value's own
    type, and compare or hash none of the hook's objects: what is text is stored as plain
    text, what is not is the hook's error."""
    make, why = FOOLING[case]
    out, _ = contained(run, lambda ev: ev.job._changes.__setitem__("site_x", make()), mode)
    if why is None:
        assert out.accepted, out.detail
        assert out.changes == {"job": {"site_x": "x"}}
        assert plain_types(out.changes) == set()
    else:
        assert (out.kind, out.hook, out.changes, out.detail) == ("error", "bad", {}, why)


ADDED = {
    "values changed once added": lambda ev, vn: vn._attrs.__setitem__("state", "sideways"),
    "added past the list's check": lambda ev, vn: (
        dict.__setitem__(ev.vnode_list, "n2", Vnode("n2", {"state": "sideways"})),
        ev.vnode_list.added.add("n2")),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", ADDED)
def test_a_vnode_a_hook_added_is_checked_in_either_mode(run, mode, case):
    """A vnode an exechost_startup hook added was checked as the list took it, and then
    handed on as it was left: in process (the simulator's) a state the hook set on it
    afterwards, or one added past the list's check, reached the caller unchecked, and
    values of the hook's own types were not made plain (a process-mode hook's was checked
    again by the caller). Both modes check it through the value rules, one line the same."""

    def body(ev):
        vn = Vnode("n2", {"state": "free"})
        ev.vnode_list["n2"] = vn
        ADDED[case](ev, vn)

    out, _ = run(body, "exechost_startup", {"vnode_list": {"n1": {"state": "free"}}}, mode)
    assert (out.kind, out.hook, out.changes) == ("error", "bad", {})
    assert out.detail.startswith("the hook's change cannot be stored: vnode_list[n2]: state: ")
    assert "\n" not in out.detail

    def odd(ev):
        vn = Vnode("n2", {"state": "free"})
        ev.vnode_list["n2"] = vn
        vn._attrs["comment"] = Odd("kept")  # (a str of its own, past the setter)

    out, _ = run(odd, "exechost_startup", {"vnode_list": {"n1": {"state": "free"}}}, mode)
    assert out.accepted, out.detail
    assert plain_types(out.changes) == set()
    assert out.changes["vnode_list"]["n2"]["comment"] == "kept"


class _ExitingText:
    """A value whose text (json's ``default=str``) raises SystemExit."""

    def __str__(self):
        raise SystemExit(16)


class _Exiting:
    """A stand-in for the event's job whose every reading raises SystemExit."""

    def __getattr__(self, name):
        raise SystemExit(17)


@pytest.mark.parametrize("case", ["a value of its own kept past the record",
                                  "an object of its own as the event's job"])
def test_a_debug_hooks_files_read_no_object_of_the_hook(run, case, caplog):
    """With ``debug = true``, the runner wrote the event's objects after the hook with
    ``event.to_dict()`` and ``json.dumps(default=str)`` in the caller, past the hook's
    alarm: an in-process hook's own object there ran its code in the caller (SystemExit
    left fire; a hang held it). The .in/.out are made of plain data only: the objects as
    the caller gave them, with the changes taken under the hook's alarm (`_take`)."""

    def body(ev):
        ev.job.comment = "seen"
        if case.startswith("a value"):
            ev.job._attrs["site_x"] = _ExitingText()  # (past the record: not a change)
        else:
            ev.settle()
            object.__setattr__(ev, "job", _Exiting())

    caplog.set_level(logging.INFO, logger="pbsplug.hook")
    try:
        out, _ = run(body, "queuejob", {"job": {"id": "1.s"}}, "inprocess", debug=True)
    except BaseException as exc:  # noqa: BLE001 - what the old runner let out
        raise AssertionError(f"{type(exc).__name__} left the runner") from None
    shown = [r.getMessage() for r in caplog.records if r.getMessage().startswith("debug ")]
    assert len(shown) == 2, shown
    done = json.loads(shown[1].split(": ", 1)[1])
    if case.startswith("a value"):  # (not a change: the hook is accepted)
        assert out.accepted, out.detail
        assert done["objects"]["job"] == {"id": "1.s", "comment": "seen"}, done
    else:  # (its job read under its alarm, `_take`: the hook's error, nothing kept)
        assert (out.kind, out.detail) == ("error", "hook 'bad' called sys.exit(17)")
        assert done["objects"]["job"] == {"id": "1.s"}, done
