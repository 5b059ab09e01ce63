"""The hook runner: PBS's chain semantics, with each hook isolated from the caller.

`Runner.fire(event)` runs the event's chain and returns an `Outcome`: accepted or not, by which
hook, PBS's message, the error kind, which fail_action applies, what the event's consequence
is, every hook run with its duration, and the changes the hooks made, as plain data.

Chain semantics (pbs-behavior.md §1.3): the enabled plugins whose ``events`` name the event
run in ascending ``order``, ties broken by plugin name (PBS breaks them by creation order,
which a plugin system does not have). The first reject, exception or alarm stops the chain. A
hook that calls neither accept() nor reject() accepts. fail_action applies only after an
exception or an alarm, never after a plain reject. On an exception or alarm no change of the
event applies (``Outcome.changes`` is empty); after a reject they do, as in PBS.

Where a hook runs (its ``isolation`` attribute; `HookAttributes.mode_for`):

* ``process`` (the default for every event, and always for ``user = pbsuser``):
  the runner forks the calling process, which has already imported the plugins, and runs
  the hook in the child. Consecutive process-mode hooks share one child, which reports each
  hook's start and end (with its changes and log records) over a pipe, so every failure is
  attributed to the hook that caused it. At ``alarm`` seconds the child raises
  `HookAlarm` (a KeyboardInterrupt, as PBS does) in the hook, which may still catch it and
  reject; a hook that has not ended ``alarm_grace`` seconds later is killed with SIGKILL.
  A child seen stopped (SIGSTOP, SIGTSTP...: a pbsuser hook's process is its owner's to
  stop) is killed at once, the error of the hook it ran: the caller does not wait for it.
  A pbsuser hook's process group is killed so when one of its programs is seen stopped
  (looked for every `GROUP_TICK` seconds), which the hook would wait for.
  Exceptions, sys.exit(), a killed or crashed interpreter and endless loops that swallow
  BaseException all end as an error or an alarm of that hook; the caller goes on. The child
  reports in JSON (never pickle) and dies with its caller (PR_SET_PDEATHSIG); a report that
  is not what the child sends is that hook's error. `Runner.cancel` (a stopping server)
  kills a running child at once.
  Before any hook code runs, the child keeps nothing of its caller's but stdin, stdout,
  stderr and its report pipe (`_keep_only_stdio`), whoever it runs as: not the server's
  database, its listening socket, its clients' connections, its log and lock files. A hook
  that starts a helper that outlives it (os.fork, a daemonising library), or that writes to,
  closes or accept()s on descriptors it takes for its own, then reaches nothing of the
  server's, as in PBS's fresh ``pbs_python``. stdin is /dev/null; stdout and stderr stay the
  caller's, so a hook's print() goes where it goes in process (a terminal, a daemon's output
  file), not to the server's log.
* ``inprocess`` (an opt-in, ``isolation = "inprocess"``, for hooks the site trusts): the
  hook runs in the caller, with the alarm raised by SIGALRM when the caller is the main
  thread. The alarm covers what the runner makes of what the hook left too (its exception's
  message, its changes' check: its objects' methods run there), whatever they make of it,
  and the taking of its changes and its job action as plain data (`_take`): the outcome is
  made of that data, never of the event, whose objects may be the hook's own by then.
  Fast, but a hook that swallows BaseException, blocks in C code, segfaults or calls
  os._exit takes the caller with it.

In both modes a change that cannot be stored as the engine stores attributes (JSON with
string keys: no object, set or NaN) is the hook's error, and is not left on the objects;
a vnode a hook added is checked through the value rules when it ends (`_take`, the same
code in a hook's process and in the caller).

Forking needs a process whose other threads hold no locks the child needs: a caller with
threads should fire process-mode events from a single-threaded helper process.
"""

from __future__ import annotations

import copy
import fcntl
import itertools
import json
import logging
import math
import os
import pwd
import re
import resource
import select
import signal
import stat
import struct
import sys
import threading
import time
import traceback
import types
from collections import deque
from collections.abc import Callable, Collection, Generator, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .events import (
    EVENTS,
    IGNORE,
    PBS_OBJECT,
    PBSE_HOOKERROR,
    Event,
    HookAlarm,
    HookExit,
    launch_problem,
    message_text,
    type_name,
)
from .hookattrs import FAIL_ACTIONS, HookAttributes
from .jsontext import JsonError
from .jsontext import kind as json_kind
from .jsontext import loads as json_loads
from .objects import RESOURCE_ATTRIBUTES, Vnode, plain

if TYPE_CHECKING:
    from .plugins import PluginSet

log = logging.getLogger("pbsplug.runner")
_T = TypeVar("_T")

try:
    # signal.signal wraps this C function and converts the handler it returns to an enum,
    # which for a Python function costs a caught ValueError: swapping the SIGALRM handler
    # around an in-process chain took ~10 us, a third of an event through 5 no-op hooks
    # (benchmarks/bench_events.py). Same call, same semantics, without the conversion.
    from _signal import signal as _set_handler
except ImportError:  # pragma: no cover - a Python without the _signal module
    _set_handler = signal.signal


def _find_prctl() -> Callable[[int, int], int] | None:
    """prctl(2) through ctypes, or None where there is none."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl.argtypes = (ctypes.c_int, ctypes.c_ulong)
    except (ImportError, OSError, AttributeError):  # pragma: no cover - not Linux
        return None
    return prctl


# prctl(PR_SET_PDEATHSIG) for forked hooks, looked up once here, not in every child
_PRCTL = _find_prctl()
_PR_SET_PDEATHSIG = 1

ACCEPT, REJECT, ERROR, ALARM = "accept", "reject", "error", "alarm"
PROCEED = "proceed"
#: The longest message of a hook's (its reject's text, its exception) the runner keeps:
#: the requester reads it, a job's comment holds it (PBS's 4096-character strings), the
#: log and the trace write it.
MESSAGE_MAX = 2000
#: The longest traceback of a hook's exception written to the log.
TRACEBACK_MAX = 16000
#: The most log text one hook run sends back from its process; what it logs past that is
#: counted in one line, not written (a hook logging in a loop fills no disk through the
#: server, and its report stays small).
LOG_MAX = 1 << 20
#: The largest report a hook's process may send (its changes and log records); a larger
#: one is that hook's error, read no further.
REPORT_MAX = 64 << 20
#: Seconds between two looks at `Runner.cancel` while a process-mode hook runs.
CANCEL_TICK = 0.1
#: The error message of a hook whose process the caller's `cancel` had killed (a server
#: stopping): the caller's doing, not the hook's. Only text: any hook can reject with it, or
#: raise an exception that reads so; what tells a cancelled run is `HookRun.cancelled`,
#: which only the runner's cancel sets. Its outcome has no fail_action, and the runner logs
#: the hook as stopped, not as an exception.
CANCELLED = "the server is stopping: the hook's process was killed"
#: Seconds between two looks for a stopped process in a pbsuser hook's process group.
GROUP_TICK = 1.0


#: Hooks whose logger the runner set to DEBUG (their ``debug`` attribute).
_debug_loggers: set[str] = set()


@dataclass(frozen=True)
class HookEntry:
    """One plugin's hook for one event, ready to run."""

    name: str
    function: Callable[..., Any]
    attrs: HookAttributes
    config: Mapping[str, Any]
    mode: str

    @cached_property  # looked up on every hook call: getLogger takes a lock
    def logger(self) -> logging.Logger:
        """``pbsplug.hook.<name>``; with the hook's ``debug`` attribute it logs debug
        records too, whatever the level of the engine's ``pbsplug.hook`` logger."""
        logger = logging.getLogger(f"pbsplug.hook.{self.name}")
        if self.attrs.debug:
            logger.setLevel(logging.DEBUG)
            _debug_loggers.add(self.name)
        elif self.name in _debug_loggers:  # debug was switched off: back to the default
            logger.setLevel(logging.NOTSET)
            _debug_loggers.discard(self.name)
        return logger


@dataclass
class HookRun:
    """One hook run, as the trace records it."""

    hook: str
    event: str
    order: int
    mode: str
    duration: float            # seconds
    outcome: str               # accept, reject, error or alarm
    message: str | None = None
    started: float = 0.0       # wall-clock time
    # Given up by the runner for its caller's `cancel` (a server stopping; message
    # `CANCELLED`): set only there, never from what a hook or its process reports.
    cancelled: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Outcome:
    """What firing an event came to."""

    event: str
    accepted: bool
    kind: str = ACCEPT                 # accept, reject, error or alarm
    hook: str | None = None            # the hook that stopped the chain
    message: str | None = None         # what the requester sees (PBS's text)
    detail: str | None = None          # the hook's own message, or the error
    code: int | None = None            # 15136 (PBSE_HOOKERROR) when not accepted
    fail_action: tuple[str, ...] = ()
    consequence: str = PROCEED         # proceed, refuse, requeue, delete, ignore, keep_queued
    runs: list[HookRun] = field(default_factory=list)
    changes: dict[str, Any] = field(default_factory=dict)
    job_action: str | None = None      # rerun or delete, from job.rerun() / job.delete()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["fail_action"] = list(self.fail_action)
        return out


def consequence(event: str, kind: str, job_action: str | None) -> str:
    """What a request comes to after its chain (pbs-behavior.md §1.4)."""
    spec = EVENTS[event]
    if kind == ACCEPT:
        return PROCEED
    base = spec.on_reject if kind == REJECT else spec.on_error
    if spec.host and kind == REJECT and job_action and base != IGNORE:
        return "requeue" if job_action == "rerun" else "delete"
    return base


def client_message(event: str, kind: str, hook: str, detail: str | None) -> str:
    if kind == REJECT:
        return detail or f"{event} request rejected by '{hook}'"
    if kind == ALARM:
        return f"request rejected as filter hook '{hook}' got an alarm call. Please inform Admin"
    return (f"request rejected as filter hook '{hook}' encountered an exception. "
            "Please inform Admin")


# -- running one hook -------------------------------------------------------------------------

#: Whether a hook is running under its alarm: an alarm that fires between hooks finds no
#: hook to stop and is ignored.
_in_hook = False
#: Forks made through Python in this process (os.fork, multiprocessing...), counted in each
#: copy: a hook after which it changed is running in a copy (`_leave_forked_copy`). A
#: counter costs no system call; two getpid() per hook were a tenth of an in-process event.
_forks = 0


def _count_fork() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_count_fork)


class AlarmClock:
    """SIGALRM's timer over one chain. Each hook gets its alarm from its own start; the timer
    is only re-armed when what is left of it differs from that by more than `SLACK` (a chain
    of quick hooks costs two system calls, not two per hook), and `disarm` ends it."""

    SLACK = 0.01  # seconds; PBS's alarms are whole seconds

    def __init__(self) -> None:
        self.deadline: float | None = None

    def arm(self, seconds: float) -> None:
        now = time.perf_counter()
        if self.deadline is not None and abs(self.deadline - now - seconds) <= self.SLACK:
            return
        signal.setitimer(signal.ITIMER_REAL, seconds)
        self.deadline = now + seconds

    def disarm(self) -> None:
        if self.deadline is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self.deadline = None


#: Alarms raised in hooks so far: one that came while the runner showed or checked what a
#: hook left (its code too: an exception's ``__str__``, a key's ``__repr__``), even one a
#: stand-in took for the hook's error, ends that hook as an alarm (`_alarm_came`).
_alarms = 0


def _raise_alarm(signum: int, frame: types.FrameType | None) -> None:
    global _alarms
    if _in_hook:
        _alarms += 1
        raise HookAlarm()


def _alarm_came(since: int) -> None:
    """Raise `HookAlarm` if the hook's alarm came since `_alarms` was `since`, whatever the
    code it interrupted made of it: none of the hook's code runs after its alarm."""
    if _alarms != since:
        raise HookAlarm()


def unstorable(value: Any, where: str = "") -> str | None:
    """Why `value` cannot be stored as the engine stores every attribute (JSON with string
    keys), or None. A hook's change that fails this is that hook's error: nothing a hook sets
    reaches the database, or another process, unless it can be stored and read back. What
    passes is what `plain` copies as plain data: the value's own type decides (a subclass of
    str, int, float, dict, list or tuple, read by the base type's methods), never isinstance
    (a ``__class__`` of the hook's) nor a set of types (a metaclass's ``__hash__``); no other
    mapping or sequence. The hook's objects are named without their own methods' say
    (`_shown`, `message_text`): a repr that raises, SystemExit too, is a stand-in naming the
    type."""
    kind = type(value)
    if value is None or issubclass(kind, (str, int)):
        return None
    if issubclass(kind, float):
        return None if math.isfinite(value) else \
            f"{where or 'value'}: {_shown(value)} is not a number"
    if issubclass(kind, dict):
        for key, item in dict.items(value):
            if not issubclass(type(key), str):
                return f"{where or 'value'}: key {_shown(key)} is not a string"
            name = message_text(key) or ""  # (a str subclass's __format__ is the hook's)
            why = unstorable(item, f"{where}.{name}" if where else name)
            if why:
                return why
        return None
    if issubclass(kind, (list, tuple)):
        items = list.__iter__(value) if issubclass(kind, list) else tuple.__iter__(value)
        for index, item in enumerate(items):
            why = unstorable(item, f"{where}[{index}]")
            if why:
                return why
        return None
    return f"{where or 'value'}: a value of type {type_name(value)} cannot be stored"


#: What `Event.take_changes` gives, by key: one object's changes, or a map of vnodes'.
_OBJECT_CHANGES = ("job", "vnode", "resv")
_VNODE_CHANGES = ("vnode_list", "vnode_list_fail")
_JOB_ACTIONS = ("rerun", "delete")
#: A map of jobs (exechost_periodic's ``job_list``): each job's job.rerun() or job.delete().
_JOB_LIST = "job_list"


def _take(event: Event) -> tuple[dict[str, Any], str | None, str | None]:
    """What the hook that just ended changed, taken from `event` (its record then starts
    afresh) as plain data of the exact types, with the job's action: (changes, action,
    None), or ({}, None, why they cannot be stored). Both modes take a hook's changes here,
    under its alarm (`_run_hook`): the event's objects, and their records, may be the
    hook's own by now (a job of its own whose ``action`` raises SystemExit, a record whose
    ``clear()`` never returns), and nothing of them reaches the caller but this data. A
    vnode the hook added is checked through the value rules, as the caller checks one a
    hook's process reports (`Event.apply_changes`): a value set on it once added, or one
    added past ``vnode_list``'s own check, is the hook's error in either mode."""
    changes = Event.take_changes(event)  # (the class's own: not one the hook set on the event)
    job = event.job
    action = job.action if job is not None else None
    why = unstorable(changes) or unstorable(action, "job action")
    if why is not None:
        return {}, None, why
    changes, action = plain(changes), plain(action)
    recorded = changes.get("job", {}).get("_action") if type(changes.get("job")) is dict \
        else None
    for given in (recorded, action):
        if given is not None and given not in _JOB_ACTIONS:
            return {}, None, f"job action {_shown(given)} is neither rerun nor delete"
    for key, value in changes.items():
        if key in _OBJECT_CHANGES and type(value) is not dict:
            return {}, None, f"{key}: not a mapping of attributes"
        if key == _JOB_LIST:
            if type(value) is not dict:
                return {}, None, f"{key}: not a mapping of jobs"
            for name, asked in value.items():
                if type(asked) is not dict or set(asked) != {"_action"} or \
                        asked["_action"] not in _JOB_ACTIONS:
                    return {}, None, f"{key}[{name}]: not a job.rerun() or job.delete()"
            continue
        if key not in _VNODE_CHANGES:
            continue
        if type(value) is not dict:
            return {}, None, f"{key}: not a mapping of vnodes"
        for name, attrs in value.items():
            if type(attrs) is not dict:
                return {}, None, f"{key}[{name}]: not a mapping of attributes"
            if attrs.get("_new"):
                made = Vnode(name, {k: v for k, v in attrs.items() if k not in ("_new", "name")})
                try:
                    made.check_values()
                except (ValueError, TypeError) as exc:
                    return {}, None, f"{key}[{name}]: {message_text(exc)}"
                value[name] = {**made.to_dict(), "_new": True}
    return changes, action or recorded, None


def _merge(total: dict[str, Any], changes: Mapping[str, Any]) -> None:
    """One hook's `_take` added to the chain's `total` so far, as one record over the whole
    chain would hold them: an attribute's later value replaces the earlier, a resource
    mapping's entries are merged, a vnode added again replaces what was there."""
    for key, value in changes.items():
        if key in _OBJECT_CHANGES:
            _merge_attrs(total.setdefault(key, {}), value)
        elif key == _JOB_LIST:  # (each job's job.delete(), else its job.rerun())
            jobs = total.setdefault(key, {})
            for name, asked in value.items():
                _merge_attrs(jobs.setdefault(name, {}), asked)
        elif key in _VNODE_CHANGES:
            vnodes = total.setdefault(key, {})
            for name, attrs in value.items():
                if attrs.get("_new") or name not in vnodes:
                    vnodes[name] = attrs
                else:
                    _merge_attrs(vnodes[name], attrs)
        else:  # (progname, argv, env: whole)
            total[key] = value


def _merge_attrs(total: dict[str, Any], changes: Mapping[str, Any]) -> None:
    """`_merge` for one object. On a vnode the chain added (``_new``: every attribute), a
    change is made on its attributes, as its own `to_dict` would show it after it."""
    new = bool(total.get("_new"))
    for attr, value in changes.items():
        old = total.get(attr)
        if attr in RESOURCE_ATTRIBUTES and type(old) is dict and type(value) is dict:
            old.update(value)
            if new:
                total[attr] = {k: v for k, v in old.items() if v is not None}
        elif new and value is None:
            total.pop(attr, None)
        elif attr == "_action" and old == "delete":
            pass  # (a job.delete() wins over a job.rerun(), as in PBS's MoM)
        else:
            total[attr] = value


def _debug_objects(given: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A debug hook's view of the objects (`Runner._steps`): `given`, the event's objects as
    its caller gave them, with the chain's `changes` so far (plain data, `_take`) merged as
    `_merge` merges them; the marks (``_new``, ``_action``) and unset values left out."""
    def shown(attrs: Any) -> Any:
        if type(attrs) is not dict:
            return attrs
        return {k: shown(v) for k, v in attrs.items()
                if v is not None and not (type(k) is str and k.startswith("_"))}

    total = copy.deepcopy(given)  # (`_merge` changes what it is given, and keeps parts)
    _merge(total, copy.deepcopy(changes))
    for key, value in total.items():
        if key in _OBJECT_CHANGES:
            total[key] = shown(value)
        elif key in _VNODE_CHANGES + (_JOB_LIST,) and type(value) is dict:
            total[key] = {name: shown(attrs) for name, attrs in value.items()}
    return total


def _changed_objects(event: Event) -> Iterable[tuple[str, Any]]:
    """(label, object) of every object of `event` the hooks changed (a replay's periodic
    event carries a thousand vnodes, few of them changed: no label is made for the
    others)."""
    for key in ("job", "vnode", "resv"):
        obj = getattr(event, key, None)
        if obj is not None and getattr(obj, "_changes", None):
            yield key, obj
    for key in ("vnode_list", "vnode_list_fail"):
        for name, vnode in (getattr(event, key, None) or {}).items():
            if getattr(vnode, "_changes", None):
                yield f"{key}[{name}]", vnode


def _check_changes(event: Event) -> str | None:
    """Why a change the hooks made to `event` cannot be stored, or None. An object that
    cannot be stored is also taken out of the event, so that no caller ever stores it."""
    why = None
    for label, obj in _changed_objects(event):
        changes = obj._changes
        for key, value in list(changes.items()):
            unreadable = False
            try:
                problem = (f"{label}: attribute name {_shown(key)} is not a string"
                           if not issubclass(type(key), str)
                           else unstorable(value, f"{label}.{message_text(key) or ''}"))
            except HookAlarm:
                raise
            except BaseException as exc:  # noqa: BLE001 - the hook's object stopped its check
                if issubclass(type(exc), KeyboardInterrupt) and _interrupt_may_be_real():
                    raise
                name = (message_text(key) if issubclass(type(key), str) else _shown(key))
                problem = (f"{label}.{name}: a value of type {type_name(value)} cannot be "
                           f"read ({type_name(exc)} raised)")
                unreadable = True
            if not problem:
                continue
            why = why or problem
            current = obj._attrs.get(key)
            if not unreadable and issubclass(type(value), dict) and \
                    issubclass(type(current), dict):
                # A resource mapping: drop only the entries the hook set that cannot be
                # stored, not the whole mapping (bypassing its change record).
                for sub, item in list(dict.items(value)):
                    if not issubclass(type(sub), str) or unstorable(item):
                        dict.pop(current, sub, None)
                        dict.pop(value, sub, None)
                if not dict.__len__(value):
                    changes.pop(key, None)
            else:
                changes.pop(key, None)
                obj._attrs.pop(key, None)  # the hook's value, not a stored one: drop it
    if event.type == "execjob_launch":
        seen = event._launch_seen  # (what the hooks before it left, or the caller gave)
        problem = launch_problem(event.progname, event.argv, event.env,
                                 (seen[0], seen[1], dict(seen[2])))
        if problem:
            why = why or problem
            event.progname, event.argv, event.env = seen[0], list(seen[1]), dict(seen[2])
        else:  # (a subclass's value is the hook's object: the caller gets plain text)
            event.progname, event.argv, event.env = (
                plain(event.progname), plain(event.argv), plain(event.env))
    return why


def _message(text: str | None) -> str | None:
    """A hook's message as the runner keeps it: valid UTF-8 without control characters but
    tabs and line breaks (it may end in a job's comment), at most `MESSAGE_MAX` long."""
    if text is None:
        return None
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = _CONTROL.sub("?", text)
    return text if len(text) <= MESSAGE_MAX else text[:MESSAGE_MAX - 3] + "..."


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... ({len(text) - 2 * half} characters left out) ...\n{text[-half:]}"


def call_hook(entry: HookEntry, event: Event, alarm: AlarmClock | None
              ) -> tuple[str, str | None, dict[str, Any], str | None]:
    """Run one hook on `event` here; (outcome, message, changes, job action): what the hook
    changed (after an accept or a reject, else nothing) as plain data taken under its alarm
    (`_take`), and ``rerun``, ``delete`` or None. With `alarm`, SIGALRM interrupts the hook
    after its alarm (the caller has installed the handler and disarms the clock)."""
    kind = event.type  # (read before the hook: it may put an object of its own there)
    kind = kind if type(kind) is str else "?"
    event.hook_name = entry.name
    event.hook_config = entry.config
    event.logger = entry.logger
    event._decision = None
    forks = _forks
    global _in_hook
    try:
        if alarm is not None:
            alarm.arm(entry.attrs.alarm)
        _in_hook = True
        try:
            # What the hook left is shown and checked under its alarm too: its exception's
            # __str__, a changed key's __repr__... are its code, which may never return.
            outcome, message, logged, changes, action = _run_hook(entry, event, forks)
        finally:  # (a fork in what showing its failure ran: its __str__...)
            _in_hook = False
            if _forks != forks:
                _leave_forked_copy()
    except HookAlarm:
        return (ALARM, f"hook '{entry.name}' got an alarm call after {entry.attrs.alarm} s",
                {}, None)
    if logged is not None:
        entry.logger.error("%s hook '%s' encountered an exception, request rejected: %s",
                           kind, entry.name, logged)
    return outcome, message, changes, action


def _run_hook(entry: HookEntry, event: Event, forks: int
              ) -> tuple[str, str | None, str | None, dict[str, Any], str | None]:
    """`call_hook`'s run of the hook and its judgement, under the hook's alarm: (outcome,
    message, what to log as its error or None, its changes, its job action). `forks` is
    `_forks` before the hook ran."""
    job = event.job
    before = dict(job._changes) if event.type == "runjob" and job is not None else None
    try:
        try:
            try:
                entry.function(event)
            except HookExit:
                pass
            event.settle()  # its changes in place: still the hook's (a refusal, its error)
        finally:
            if _forks != forks:  # (here, where its sys.exit's code is still on its way out)
                _leave_forked_copy()
        alarms = _alarms
        why = _check_changes(event)  # (what its objects' methods raise is its error)
        _alarm_came(alarms)
        if why is not None:
            return (ERROR, _message(f"the hook's change cannot be stored: {why}"),
                    f"its change cannot be stored: {why}", {}, None)
        # (annotated: the checker keeps the None set above, not seeing the hook's accept()
        # or reject() set it, and took the reject below for dead code it did not check)
        decision: tuple[str, str | None] | None = event._decision
        outcome: str = ACCEPT
        message: str | None = None
        if decision is not None and decision[0] == REJECT:
            outcome, message = REJECT, _message(message_text(decision[1]))
        elif before is not None and job is not None and job._changes != before:
            outcome, message = REJECT, "cannot modify job after runjob request has been accepted"
        # What it changed, taken as plain data here, still under its alarm (`_take`):
        # nothing the runner reads of the event after this line is the hook's.
        alarms = _alarms
        try:
            changes, action, why = _take(event)
        except HookAlarm:
            raise
        except BaseException as exc:  # noqa: BLE001 - the hook's object stopped the taking
            if issubclass(type(exc), KeyboardInterrupt) and _interrupt_may_be_real():
                raise
            what = _message(f"the hook's changes cannot be read ({type_name(exc)} raised)")
            return ERROR, what, what, {}, None
        _alarm_came(alarms)
        if why is not None:
            return (ERROR, _message(f"the hook's change cannot be stored: {why}"),
                    f"its change cannot be stored: {why}", {}, None)
        return outcome, message, None, changes, action
    except HookAlarm:
        raise
    except SystemExit as exc:  # (its code read from the slot: a subclass's is the hook's)
        code = _EXIT_CODE.__get__(exc)
        return (ERROR, _message(f"hook '{entry.name}' called sys.exit({_shown(code)})"), None,
                {}, None)
    except KeyboardInterrupt:
        if _interrupt_may_be_real():
            raise
        # No ^C raises it here (SIGINT has a handler of the caller's, or none): the hook
        # raised it itself, and it is the hook's error, not the end of the caller.
        what = "KeyboardInterrupt raised by the hook"
        return ERROR, what, what, {}, None
    except BaseException as exc:  # noqa: BLE001 - any failure of a hook is the hook's error
        # Whatever showing it raises (the hook's __str__, __notes__, type name: SystemExit
        # too) is the hook's: a stand-in naming its type (it left the runner, in process
        # into the caller's loop). Its alarm ends the showing: a stand-in took it.
        alarms = _alarms
        what = _message(f"{type_name(exc)}: {message_text(exc)}") or ""
        _alarm_came(alarms)
        try:
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        except BaseException:  # noqa: BLE001 - an exception that cannot even be formatted
            tb = [f"{type_name(exc)} (its traceback cannot be shown)"]
        _alarm_came(alarms)
        # The first line says it all (a command shows only that); the traceback follows.
        return ERROR, what, (f"{what.splitlines()[0] if what else what}\n"
                             f"{_cut(''.join(tb).rstrip(), TRACEBACK_MAX)}"), {}, None


def _leave_forked_copy() -> None:
    """A hook forked, and the copy came back out of the hook (no os._exit): it must not go
    on as the caller (a second server on the same socket and database) nor report as the
    hook's process. It leaves now, with sys.exit's code if it was leaving so. (A fork below
    Python, which counts nothing in `_forks`, is caught at the end of the chain: `fire`.)"""
    exc = sys.exc_info()[1]
    # (its code read from the slot, its type from the object: a subclass's code property,
    # its __class__, are the hook's code, which raised here and left the copy running)
    code = _EXIT_CODE.__get__(exc) if issubclass(type(exc), SystemExit) else (
        1 if exc is not None else 0)
    os._exit(code if type(code) is int and 0 <= code <= 255 else 1)


def _interrupt_may_be_real() -> bool:
    """Whether a KeyboardInterrupt may come from a ^C: SIGINT still has Python's default
    handler, which raises it."""
    try:
        return signal.getsignal(signal.SIGINT) is signal.default_int_handler
    except ValueError:  # pragma: no cover - not the main interpreter
        return True


#: SystemExit's code as the exception holds it (`call_hook`).
_EXIT_CODE = vars(SystemExit)["code"]


def _shown(value: Any) -> str:
    """`repr(value)` as exact text, or a stand-in naming its type when that fails, whatever
    it raises; `HookAlarm` if the hook's alarm came meanwhile."""
    alarms = _alarms
    try:
        text = str.__str__(repr(value))
    except BaseException:  # noqa: BLE001 - the hook's object: its error, any
        text = f"<{type_name(value)}>"
    _alarm_came(alarms)  # (the hook's alarm came in its __repr__, which may have caught it)
    return text


# -- the process boundary ---------------------------------------------------------------------

def _send(fd: int, message: tuple[Any, ...]) -> None:
    # JSON, not pickle: the parent (root) never unpickles what a hook's process sent, and
    # a change that is not plain data cannot travel (call_hook has refused it already).
    data = json.dumps(message, allow_nan=False).encode()
    view = memoryview(struct.pack("!I", len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _Capture(logging.Handler):
    """Collects the log records a hook emits in a child, to be re-emitted by the parent."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, int, str, tuple[str, str] | None]] = []
        self.size = 0      # characters of log text taken in this hook run
        self.dropped = 0   # lines past `LOG_MAX`

    def emit(self, record: logging.LogRecord) -> None:
        if self.size > LOG_MAX:
            self.dropped += 1
            return
        # The object a line is logged against (`Event.logjobmsg`) travels with it.
        obj = getattr(record, PBS_OBJECT, None)
        try:
            text = record.getMessage()
        except Exception:  # a bad log call must not fail the hook
            text = message_text(record.msg) or ""
        if type(text) is not str:
            text = message_text(text) or ""
        self.size += len(text) + 64  # (a line's own cost: empty lines are no free flood)
        if self.size > LOG_MAX:
            self.dropped += 1
            return
        if obj is not None:
            obj = tuple(message_text(o) or "" for o in obj) if isinstance(obj, tuple) \
                and len(obj) == 2 else None
        self.records.append((message_text(record.name) or "", int(record.levelno), text, obj))

    def take(self, hook: str = "") -> list[tuple[str, int, str, tuple[str, str] | None]]:
        out, self.records = self.records, []
        if self.dropped:
            out.append((f"pbsplug.hook.{hook}" if hook else "pbsplug.runner", logging.WARNING,
                        f"{self.dropped} more log lines of hook '{hook}' left out: it logged "
                        f"more than {LOG_MAX} characters in one run", None))
        self.size = self.dropped = 0
        return out


def _become_job_owner(event: Event) -> None:
    """user = pbsuser: run as the job's owner (only possible when the runner is root). Its
    stdout and stderr become /dev/null first: the caller's (a root server's own log file)
    are not the owner's to write, nor to hand to a program the hook runs as the owner."""
    if os.geteuid() != 0 or event.job is None:
        return
    parent = os.getppid()
    owner = event.job.euser or str(event.job.Job_Owner or "").split("@")[0]
    if not owner:
        raise RuntimeError("user = pbsuser, but the job has no euser or Job_Owner")
    pw = pwd.getpwnam(owner)
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        if fd != null:
            os.dup2(null, fd)
    if null > 2:
        os.close(null)
    os.initgroups(pw.pw_name, pw.pw_gid)
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    # The kernel clears the parent-death signal when the uid changes: set it again, or a
    # server killed with SIGKILL leaves the owner's hook running.
    _die_with_parent(parent)


def _die_with_parent(parent: int) -> None:
    """Linux: the child gets SIGKILL when the process that forked it dies (a server killed
    with SIGKILL must not leave a hook that swallows every signal running for ever)."""
    if _PRCTL is not None:
        try:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except OSError:
            pass
    if os.getppid() != parent:  # it died before prctl: go now
        os._exit(0)


try:
    _DEV_NULL: int | None = os.stat(os.devnull).st_rdev
except OSError:  # pragma: no cover - a root without /dev/null
    _DEV_NULL = None


def _stdio_plan() -> tuple[tuple[int, ...], int]:
    """What a hook's process is to make of the caller's stdio, decided in the caller before
    it forks (a first call in a fresh child costs tens of microseconds of copied pages;
    here, a few): which of 0-2 it points at /dev/null, and the number up to which it closes
    every other descriptor. stdin goes, unless it is /dev/null already (a daemon's): a hook
    never reads the caller's terminal. stdout and stderr stay (a hook's print() goes where
    the caller's goes), unless closed, or unless the interpreter started without them
    (``sys.__stdout__`` is None): the number is then a file the caller opened later."""
    to_null = []
    for fd, stream in ((0, None), (1, sys.__stdout__), (2, sys.__stderr__)):
        try:
            st = os.fstat(fd)
        except OSError:
            to_null.append(fd)
            continue
        if fd == 0:
            if not stat.S_ISCHR(st.st_mode) or st.st_rdev != _DEV_NULL:
                to_null.append(fd)
        elif stream is None:
            to_null.append(fd)
    return tuple(to_null), os.sysconf("SC_OPEN_MAX")


def _open_null() -> int:
    """/dev/null for a hook's process, opened by the caller (closed again once it has
    forked); -1 if it cannot be, and the numbers it was for stay closed in the child."""
    try:
        return os.open(os.devnull, os.O_RDWR)  # (the lowest free: 0-2 if one is closed)
    except OSError:
        return -1


def _keep_only_stdio(report: int, to_null: tuple[int, ...], null: int, top: int) -> int:
    """In a hook's process, before any hook code runs: close every descriptor of the
    caller's but stdin, stdout, stderr and the report pipe `report`, and point the stdio
    numbers `to_null` at `null` (`_stdio_plan`). Returns the report pipe's number, moved
    above 2 if a caller without stdio had it there. Root or not, a hook's process holds
    none of the server's files: a helper it leaves running would keep the server's socket
    and its clients' connections open, and a write to a descriptor it takes for its own
    would land in the database. (Linux closes the ranges in one system call each.)"""
    if report <= 2:
        moved = fcntl.fcntl(report, fcntl.F_DUPFD_CLOEXEC, 3)
        os.close(report)
        report = moved
    for fd in to_null:
        if fd == null:
            os.set_inheritable(fd, True)  # what the hook runs gets it as its stdio
        elif null >= 0:
            os.dup2(null, fd)
        else:
            os.closerange(fd, fd + 1)  # (open or not: no error)
    os.closerange(3, report)  # (with /dev/null's own number, unless one of 0-2)
    os.closerange(report + 1, max(report + 1, top))
    return report


def _child_main(batch: list[HookEntry], event: Event, fd: int) -> None:
    # A session (and so a process group) of its own: a hook that signals its group
    # (os.killpg(0, ...), "stop what I started") reaches its own processes, not the server;
    # no controlling terminal (a root caller's, whose input a pbsuser hook's program could
    # push keys into with TIOCSTI); and a process another hook left in the caller's session
    # cannot join this one's group (setpgid asks only for the same session), stop there,
    # and have the runner kill this hook for it.
    os.setsid()
    # A hook that crashes leaves no core file (root's, in whatever folder the caller is in).
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, _raise_alarm)
    # The caller's wakeup fd (asyncio's) is closed in this process: no SIGALRM may write
    # its byte into whatever the hook opens under that number.
    signal.set_wakeup_fd(-1)
    capture = _Capture()
    # Every record goes back to the parent, which logs it once through its own handlers;
    # levels stay the parent's, so the child logs what the parent would.
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):
            logger.handlers = []
    root = logging.getLogger()
    root.handlers = [capture]
    event.take_changes()  # only the hooks' own changes travel back
    clock = AlarmClock()  # the child leaves by os._exit: nothing to disarm
    if batch[0].attrs.user == "pbsuser":
        try:
            _become_job_owner(event)
        except Exception as exc:
            _send(fd, ("start", 0))
            _send(fd, ("done", 0, ERROR, f"cannot run as the job owner: {exc}", 0.0, {},
                       capture.take()))
            return
    for index, entry in enumerate(batch):
        _send(fd, ("start", index))
        t0 = time.perf_counter()
        try:  # (its changes taken and checked as in process: `_take`)
            outcome, message, changes, _ = call_hook(entry, event, clock)
        except KeyboardInterrupt:
            outcome, message, changes = ERROR, "interrupted", {}
        duration = time.perf_counter() - t0
        _send(fd, ("done", index, outcome, message, duration, changes, capture.take(entry.name)))
        if outcome != ACCEPT:
            break
    _send(fd, ("end",))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"the hook's process was killed by {_signal_name(os.WTERMSIG(status))}"
    return f"the hook's process exited with status {os.waitstatus_to_exitcode(status)}"


def _stopped_by(status: int, entry: HookEntry, event: Event) -> str:
    """Why a stopped hook's process was killed (`status` from waitpid with WUNTRACED): the
    signal, and for a pbsuser hook whose process it is, as the job's owner may stop it."""
    return (f"the hook's process was stopped by {_signal_name(os.WSTOPSIG(status))}"
            + _owners(entry, event))


def _stopped_in_group(member: tuple[int, str], entry: HookEntry, event: Event) -> str:
    """Why a pbsuser hook's process group was killed: `member` (pid, name) was stopped."""
    name = _NAME_CONTROL.sub("?", member[1])  # (the owner names their programs)
    return f"a program the hook ran ({name}, pid {member[0]}) was stopped" + _owners(entry, event)


#: What a program's name may not bring into the hook's error: any control character, line
#: breaks and tabs too (`_CONTROL` keeps those, for a hook's own message), and C1's.
_NAME_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _killed(group: bool) -> str:
    return "the hook's process group was killed" if group else "killed"


def _kill(pid: int, group: bool) -> None:
    """SIGKILL to a hook's process `pid`, and with `group` to its process group first."""
    if group:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # (the hook left the group its process made: the process is killed below)
    os.kill(pid, signal.SIGKILL)


def _owners(entry: HookEntry, event: Event) -> str:
    """For a pbsuser hook's process, whose job and owner it is."""
    job = event.job
    if entry.attrs.user != "pbsuser" or job is None or os.geteuid() != 0:
        return ""
    owner = job.euser or str(job.Job_Owner or "").split("@")[0]
    return f" (a process of job {job.id}'s owner {owner}, who may signal it)"


def _stopped_member(group: int) -> tuple[int, str] | None:
    """A process of process group `group` but its leader that is stopped (by a signal, or
    by a tracer): its pid and name, or None. From /proc: no call lists a group's members."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    leader = str(group)
    wanted = leader.encode()
    for name in names:
        if not name.isdigit() or name == leader:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue  # ended meanwhile
        head, _, tail = data.rpartition(b")")
        fields = tail.split()  # state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == wanted and fields[0] in (b"T", b"t"):
            return int(name), head.partition(b"(")[2].decode(errors="replace")
    return None


# -- the runner -------------------------------------------------------------------------------

class Runner:
    """Runs events through the enabled plugins' hooks.

    `plugins` is a `pbsplug.PluginSet`. `mode` forces every hook into one isolation mode
    (tests, benchmarks). `trace_file`, when set, gets one JSON line per hook run.
    """

    def __init__(self, plugins: PluginSet, *, mode: str | None = None,
                 trace_file: str | os.PathLike[str] | None = None, trace_size: int = 1000,
                 alarm_grace: float = 1.0, debug_dir: str | os.PathLike[str] | None = None,
                 cancel: Callable[[], bool] | None = None, reap_later: bool = False):
        self.plugins = plugins
        self.mode = mode
        self.alarm_grace = alarm_grace
        #: Asked while a process-mode hook runs: when it answers true (the server is
        #: stopping), the hook's process is killed and the hook ends as an error.
        self.cancel = cancel
        #: Do not wait for a child that reported its end to exit (it costs a process's
        #: teardown per fork): it is reaped at the next fork, or by the caller's own
        #: ``waitpid(-1)`` (the engine's server reaps its children every poll).
        self.reap_later = reap_later
        #: Where hooks with ``debug = true`` leave ``hook_<event>_<hook>_<pid>_<n>.in`` / ``.out``
        #: (PBS keeps them in hooks/tmp); without it, they go to the hook's log at INFO.
        self.debug_dir = Path(debug_dir) if debug_dir else None
        self._debug_count = itertools.count(1)
        self.trace: deque[HookRun] = deque(maxlen=trace_size)
        self.trace_file = Path(trace_file) if trace_file else None
        self._chains: dict[str, list[HookEntry]] = {}
        #: Children that reported their end and are exiting: reaped at the next fork.
        self._leaving: list[int] = []

    def chain(self, event: str) -> list[HookEntry]:
        """The hooks that run for `event`, in run order."""
        chain = self._chains.get(event)
        if chain is None:
            if event not in EVENTS:
                raise ValueError(f"unknown event {event!r}; events are: {', '.join(EVENTS)}")
            chain = []
            for impl in getattr(self.plugins.pm.hook, event).get_hookimpls():
                record = self.plugins.get(impl.plugin_name)
                attrs = record.attributes if record is not None else HookAttributes(
                    events=(event,))
                # (None not reached: a record gets its attributes before its plugin is registered)
                if attrs is None or record is not None and (
                        not attrs.enabled or event not in attrs.events):
                    continue
                mode = self.mode or attrs.mode_for(event)
                if attrs.user == "pbsuser":
                    mode = "process"
                chain.append(HookEntry(impl.plugin_name, impl.function, attrs,
                                       record.config if record is not None else {}, mode))
            chain.sort(key=lambda e: (e.attrs.order, e.name))
            for entry in chain:  # set a debug hook's level here, not only in a forked child
                entry.logger  # noqa: B018 - the cached property sets the level
            self._chains[event] = chain
        return chain

    def fire(self, event: Event, hooks: Collection[str] | None = None) -> Outcome:
        """Run `event` through its chain; see the module docs for the semantics.

        `hooks` limits the chain to those hooks: a periodic hook runs alone, at its own
        ``freq``."""
        return _wait_through(self._steps(event, hooks))

    def start(self, event: Event, hooks: Collection[str] | None = None) -> Pending:
        """Start `event`'s chain without waiting for it: what `fire` does, a step at a time,
        driven by the caller's own loop (`Pending`). The chain's in-process hooks run here
        and in the steps, as `fire` runs them; its hooks' processes are waited for by the
        caller."""
        return Pending(self._steps(event, hooks))

    def _steps(self, event: Event, hooks: Collection[str] | None
               ) -> Generator[tuple[int, float, int], bool, Outcome]:
        """`fire`'s chain as a generator: it yields ``(fd, timeout, pid)`` while a hook's
        process `pid` runs, and is sent whether `fd` became readable (else `timeout` passed);
        it returns the outcome."""
        kind = event.type  # (read before any hook: one may put an object of its own there)
        chain = self.chain(kind)
        if hooks is not None:
            chain = [e for e in chain if e.name in hooks]
        runs: list[HookRun] = []
        # What the hooks changed, as plain data taken after each (`_take`, `_merge`): the
        # outcome is made of it, never of the event, which may hold a hook's objects.
        changes: dict[str, Any] = {}
        # A debug hook's .in/.out show the event's objects as the caller gave them (read
        # here, before any hook ran: the caller's own) with `changes` merged in: never the
        # event after a hook, whose objects may be the hook's own, whose code (to_dict,
        # __str__ through json's default) would run here with no alarm.
        given = event.to_dict() if any(e.attrs.debug for e in chain) else {}
        action: str | None = None
        i = 0
        clock = None
        old_handler = None
        pid = os.getpid()  # (a copy forked below Python by a hook leaves at the chain's end)
        main = threading.current_thread() is threading.main_thread()
        try:
            while i < len(chain):
                entry = chain[i]
                debug_id = self._debug_in(entry, kind, given, changes) \
                    if entry.attrs.debug else None
                if entry.mode == "inprocess":
                    # (the SIGALRM handler is set for a run of in-process hooks and put back
                    # before the chain waits for a hook's process: a started chain may wait
                    # while its caller fires other chains)
                    if main and clock is None:
                        clock = AlarmClock()
                        old_handler = _set_handler(signal.SIGALRM, _raise_alarm)
                    started = time.time()
                    t0 = time.perf_counter()
                    outcome, message, taken, taken_action = call_hook(entry, event, clock)
                    runs.append(HookRun(entry.name, kind, entry.attrs.order, entry.mode,
                                        time.perf_counter() - t0, outcome, message, started))
                    _merge(changes, taken)
                    action = taken_action or action
                    i += 1
                else:
                    # Consecutive process-mode hooks share a child; a pbsuser hook (another
                    # uid) or a debug hook (its own .in/.out) gets one of its own.
                    j = i + 1
                    while (j < len(chain) and chain[j].mode == "process"
                           and not entry.attrs.debug and not chain[j].attrs.debug
                           and (chain[j].attrs.user == "pbsuser") == (
                               entry.attrs.user == "pbsuser")):
                        j += 1
                    if clock is not None:
                        clock.disarm()
                        _set_handler(signal.SIGALRM, old_handler)
                        clock = None
                    batch_runs = yield from self._run_forked(chain[i:j], event)
                    runs.extend(batch_runs)
                    i += len(batch_runs)
                    if batch_runs and batch_runs[-1].outcome in (ACCEPT, REJECT):
                        # (replayed on the caller's copy, through the guards and the rules)
                        _merge(changes, event.take_changes())
                        action = (event.job.action if event.job is not None else None) or action
                if debug_id is not None:
                    self._debug_out(entry, given, changes, runs[-1], debug_id)
                if runs and runs[-1].outcome != ACCEPT:
                    break
        finally:
            if os.getpid() != pid:
                _leave_forked_copy()
            if clock is not None:
                clock.disarm()
                _set_handler(signal.SIGALRM, old_handler)
        return self._outcome(kind, chain, runs, changes, action)

    def _debug_in(self, entry: HookEntry, kind: str, given: dict[str, Any],
                  changes: dict[str, Any]) -> str:
        debug_id = f"hook_{kind}_{entry.name}_{os.getpid()}_{next(self._debug_count)}"
        data = {"event": kind, "hook": entry.name, "hook_config": dict(entry.config),
                "objects": _debug_objects(given, changes)}
        self._debug_write(entry, f"{debug_id}.in", data)
        return debug_id

    def _debug_out(self, entry: HookEntry, given: dict[str, Any], changes: dict[str, Any],
                   run: HookRun, debug_id: str) -> None:
        """The run's end: its outcome, and the objects as the chain keeps them after it (a
        failed hook's changes are not kept, as in the outcome)."""
        data = {"outcome": run.outcome, "message": run.message, "duration": run.duration,
                "objects": _debug_objects(given, changes)}
        self._debug_write(entry, f"{debug_id}.out", data)

    def _debug_write(self, entry: HookEntry, name: str, data: dict[str, Any]) -> None:
        text = json.dumps(data, indent=1, default=str)
        if self.debug_dir is None:
            entry.logger.info("debug %s: %s", name, text)
            return
        try:
            self.debug_dir.mkdir(parents=True, exist_ok=True)
            (self.debug_dir / name).write_text(text + "\n")
        except OSError as exc:
            entry.logger.warning("debug: cannot write %s in %s: %s", name, self.debug_dir, exc)

    def _outcome(self, kind: str, chain: list[HookEntry], runs: list[HookRun],
                 changes: dict[str, Any], action: str | None) -> Outcome:
        """The chain's outcome, made of plain data only: the hooks' `changes` and job
        `action` as each was taken under its hook's alarm (`_take`); nothing of the event,
        whose objects may be a hook's own by now (a job whose ``action`` never returns).
        A failed hook's changes are not kept."""
        failed = bool(runs) and runs[-1].outcome in (ERROR, ALARM)
        if failed:
            changes, action = {}, None
        out = Outcome(kind, True, runs=runs, changes=changes, job_action=action)
        if runs and runs[-1].outcome != ACCEPT:
            last = runs[-1]
            entry = next(e for e in chain if e.name == last.hook)
            out.accepted = False
            out.kind = last.outcome
            out.hook = last.hook
            out.detail = last.message
            out.code = PBSE_HOOKERROR
            out.message = client_message(kind, last.outcome, last.hook, last.message)
            if last.cancelled:
                # The caller's stop, not the hook's doing: not judged (no fail_action), and
                # said as such, not as the hook's exception.
                log.warning("%s hook '%s' was stopped: the server is stopping", kind,
                            last.hook)
            elif last.outcome in (ERROR, ALARM):
                out.fail_action = tuple(a for a in entry.attrs.fail_action
                                        if kind in FAIL_ACTIONS[a])
                (log.error if last.outcome == ERROR else log.warning)(
                    "%s hook '%s' %s, request rejected: %s", kind, last.hook,
                    "encountered an exception" if last.outcome == ERROR else "got an alarm call",
                    last.message)
            else:
                log.info("%s", out.message if out.message.endswith(f"'{last.hook}'")
                         else f"{kind} request rejected by '{last.hook}': {out.message}")
            out.consequence = consequence(kind, out.kind, out.job_action)
        self._record(runs)
        return out

    def _record(self, runs: Iterable[HookRun]) -> None:
        runs = list(runs)
        self.trace.extend(runs)
        if self.trace_file is not None and runs:
            lines = "".join(json.dumps(r.to_dict()) + "\n" for r in runs)
            try:
                with open(self.trace_file, "a") as fh:
                    fh.write(lines)
            except OSError:
                pass  # a trace that cannot be written (a full disk) must not fail the event

    # -- process mode -----------------------------------------------------------------------------
    def reap(self) -> None:
        """Collect the hook processes that ended since the last fork; one that reported its
        end but still runs is killed (all it had left to do was exit)."""
        leaving, self._leaving = self._leaving, []
        for pid in leaving:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            except (ChildProcessError, ProcessLookupError):
                pass  # the caller reaped it already (a server's waitpid(-1))

    def _run_forked(self, batch: list[HookEntry], event: Event
                    ) -> Generator[tuple[int, float, int], bool, list[HookRun]]:
        self.reap()
        # Flush first, so that the child neither repeats nor loses buffered output.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):
                pass
        to_null, top = _stdio_plan()  # (before the pipe: which of 0-2 are closed)
        read_fd, write_fd = os.pipe()
        null = _open_null() if to_null else -1
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            if null >= 0:
                os.close(null)
            raise
        if pid == 0:  # the child: run the hooks, report, and leave without cleanup
            try:
                _die_with_parent(parent)
                os.close(read_fd)
                write_fd = _keep_only_stdio(write_fd, to_null, null, top)  # before any hook
                _child_main(batch, event, write_fd)
            except BaseException:  # noqa: BLE001 - whatever happens, the child exits here
                pass
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except BaseException:  # noqa: BLE001
                        pass
                os._exit(0)
        os.close(write_fd)
        if null >= 0:
            os.close(null)
        try:
            return (yield from self._collect_steps(batch, event, pid, read_fd))
        except BaseException:
            # The caller was interrupted (^C, its own alarm) or gave the chain up
            # (`Pending.cancel`): the child must not outlive it, nor a program a pbsuser
            # hook ran in the group the child made.
            try:
                _kill(pid, batch[0].attrs.user == "pbsuser" and os.geteuid() == 0)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            raise
        finally:
            os.close(read_fd)

    def _collect(self, batch: list[HookEntry], event: Event, pid: int, fd: int
                 ) -> list[HookRun]:
        """The runs of the hook process `pid` reports on `fd`, waited for here."""
        return _wait_through(self._collect_steps(batch, event, pid, fd))

    def _collect_steps(self, batch: list[HookEntry], event: Event, pid: int, fd: int
                       ) -> Generator[tuple[int, float, int], bool, list[HookRun]]:
        runs: list[HookRun] = []
        buf = bytearray()  # (bytes += chunk copied the whole report at every chunk)
        current: int | None = None
        started = wall = 0.0
        # Every wait on the child has a deadline: a child that is stopped (a pbsuser hook's
        # owner may SIGSTOP it) or stays alive after its reports must not hold the caller.
        # Before a hook's "start": its alarm plus the grace; after a "done": the grace.
        deadline = time.monotonic() + batch[0].attrs.alarm + self.alarm_grace
        late = False  # killed between hooks, at a deadline or stopped
        stopped: str | None = None  # why, when killed because it was stopped
        exited: int | None = None
        tick = 1.0 if self.cancel is None else CANCEL_TICK
        # A program a pbsuser hook runs is its owner's to stop too, and the hook then
        # waits for it: its process group (the hook's process made one) is looked at.
        watch_group = batch[0].attrs.user == "pbsuser" and os.geteuid() == 0
        next_look = time.monotonic() + GROUP_TICK
        group_stopped = False  # what was stopped is a process of the hook's group
        while True:
            timeout = max(0.0, min(tick, deadline - time.monotonic()))
            ready = yield fd, timeout, pid  # (`fire` selects; `Pending` its caller's loop)
            if ready and time.monotonic() >= deadline:
                ready = False  # a child that keeps writing does not put its deadline off
            if not ready and self.cancel is not None and self.cancel():
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                if current is None and len(runs) == len(batch):
                    return runs  # every hook had ended: the child was only leaving
                entry = batch[current if current is not None else len(runs)]
                runs.append(HookRun(entry.name, event.type, entry.attrs.order, entry.mode,
                                    time.perf_counter() - started if current is not None
                                    else 0.0, ERROR, CANCELLED, wall, cancelled=True))
                return runs
            if not ready:
                # (One reading: with two, a deadline passing between them found no hook
                # started in the branch for a running one.)
                overdue = time.monotonic() >= deadline
                if not overdue:
                    # A stopped child (SIGSTOP, which a pbsuser hook's owner may send it)
                    # would hold the caller, a server's one loop, until the deadline:
                    # it is killed at once, and the hook it ran fails.
                    done, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
                    if done and os.WIFSTOPPED(status):
                        stopped = _stopped_by(status, batch[0], event)
                    elif done:
                        exited = status
                        buf += _read_available(fd)  # parse what is left, then finish
                    elif watch_group and time.monotonic() >= next_look:
                        member = _stopped_member(pid)
                        next_look = time.monotonic() + GROUP_TICK
                        if member is None:
                            continue
                        stopped = _stopped_in_group(member, batch[0], event)
                        group_stopped = True
                    else:
                        continue
                if exited is None and current is None:
                    # Between hooks (before the first "start", after a "done"): kill and
                    # reap; the outcomes reported stand, a hook never started is an error.
                    try:
                        _kill(pid, group_stopped)
                        exited = os.waitpid(pid, 0)[1]
                    except (ProcessLookupError, ChildProcessError):
                        exited = signal.SIGKILL  # reaped by the caller already
                    late = True
                    buf += _read_available(fd)
                elif exited is None and current is not None:
                    entry = batch[current]
                    _kill(pid, group_stopped)
                    os.waitpid(pid, 0)
                    runs.append(HookRun(
                        entry.name, event.type, entry.attrs.order, entry.mode,
                        time.perf_counter() - started, ERROR if stopped else ALARM,
                        f"{stopped} while the hook ran; {_killed(group_stopped)}" if stopped else
                        f"hook '{entry.name}' did not end within its alarm of "
                        f"{entry.attrs.alarm} s (+{self.alarm_grace:g} s grace); killed", wall))
                    return runs
            else:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                buf += chunk
            try:
                while len(buf) >= 4:
                    (size,) = struct.unpack("!I", buf[:4])
                    if size > REPORT_MAX:
                        raise ValueError(f"a report of {size:,} bytes (at most {REPORT_MAX:,})")
                    if len(buf) < 4 + size:
                        break
                    # (a pbsuser hook's process is its owner's: JSON read with limits)
                    message = json_loads(buf[4:4 + size], "the report", expect=list)
                    del buf[:4 + size]
                    if message[0] == "start":
                        if current is not None or message[1] != len(runs):
                            raise ValueError(f"start of hook {message[1]!r} out of turn")
                        current = _index(message[1], batch)
                        started, wall = time.perf_counter(), time.time()
                        deadline = time.monotonic() + batch[current].attrs.alarm + self.alarm_grace
                    elif message[0] == "done":
                        _, index, outcome, text, duration, changes, records = message
                        if index != current:
                            raise ValueError(f"done of hook {index!r} out of turn")
                        entry = batch[_index(index, batch)]
                        if outcome not in (ACCEPT, REJECT, ERROR, ALARM):
                            raise ValueError(f"outcome {_cut(repr(outcome), 80)}")
                        if type(duration) not in (int, float) or not duration >= 0:
                            raise ValueError(f"duration {_cut(repr(duration), 80)}")
                        text = _message(message_text(text))  # (JSON: a number... shown)
                        _check_records(records)
                        loggers = logging.Logger.manager.loggerDict
                        for name, level, msg, obj in records:
                            # A logger this process has (the hook's, a plugin module's):
                            # another name (one per job, say) would be a logger made here
                            # for good at each event, so its lines go under the hook's.
                            logger = loggers.get(name)
                            if not isinstance(logger, logging.Logger):
                                logger = entry.logger
                            logger.log(level, "%s", msg,
                                       extra={PBS_OBJECT: tuple(obj)} if obj else None)
                        if changes:
                            try:  # (through the guards and the value rules again)
                                event.apply_changes(changes)
                            except (ValueError, TypeError, AttributeError) as exc:
                                raise _Refused(exc) from None
                            except RecursionError:  # (a value nested deeply, copied)
                                raise _Refused("a value nested too deeply") from None
                        runs.append(HookRun(entry.name, event.type, entry.attrs.order, entry.mode,
                                            duration, outcome, text, wall))
                        current, deadline = None, time.monotonic() + self.alarm_grace
                        if outcome == ACCEPT and len(runs) < len(batch):  # the next one starts
                            deadline += batch[len(runs)].attrs.alarm
                    elif message[0] == "end":
                        if exited is None and self.reap_later:  # leaving: reaped at the next fork
                            self._leaving.append(pid)
                        elif exited is None:
                            os.waitpid(pid, 0)
                        return runs
            except (ValueError, TypeError, IndexError, KeyError, AttributeError,
                    _Refused, RecursionError, MemoryError) as exc:
                # Not what _child_main sends: the hook's process is not to be trusted. Or
                # this process could not read it (short of memory for a large report, out
                # of stack): that too is the hook's error, never the caller's (a server's
                # loop), as PBS makes an exception in a hook.
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
                entry = batch[current if current is not None and 0 <= current < len(batch)
                              else min(len(runs), len(batch) - 1)]
                why = (f"the hook's process reported a change that is refused: "
                       f"{_message(message_text(exc.args[0]))}" if isinstance(exc, _Refused)
                       else f"the hook's report could not be read ({type(exc).__name__})"
                       if isinstance(exc, (RecursionError, MemoryError))
                       else f"the hook's process sent a malformed report "
                            f"({_malformed(exc)})")
                runs.append(HookRun(entry.name, event.type, entry.attrs.order, entry.mode,
                                    0.0, ERROR, f"{why}; killed", wall))
                return runs
            if exited is not None:
                break
        status = exited if exited is not None else os.waitpid(pid, 0)[1]
        if current is not None:
            entry = batch[current]
            runs.append(HookRun(entry.name, event.type, entry.attrs.order, entry.mode,
                                time.perf_counter() - started, ERROR,
                                f"{_describe_status(status)} while the hook ran", wall))
        elif not runs or runs[-1].outcome == ACCEPT and len(runs) < len(batch):
            entry = batch[len(runs)]
            why = (f"{stopped} before the hook ran; {_killed(group_stopped)}" if stopped
                   else "the hook's process did not start the hook in time; killed" if late
                   else f"{_describe_status(status)} before the hook ran")
            runs.append(HookRun(entry.name, event.type, entry.attrs.order, entry.mode, 0.0,
                                ERROR, why, wall))
        return runs


def _wait_through(steps: Generator[tuple[int, float, int], bool, _T]) -> _T:
    """Drive `Runner._steps` (or a part of it) to its end, waiting here on each hook
    process's pipe: what `fire` does."""
    try:
        fd, timeout, _ = next(steps)
        while True:
            ready, _, _ = select.select([fd], [], [], timeout)
            fd, timeout, _ = steps.send(bool(ready))
    except StopIteration as done:
        return done.value


class Pending:
    """A chain `Runner.start` started: its caller's loop waits on `fd` (readable) or until
    `due`, then calls `step`; `outcome` is set once the chain ended. It is what `fire` does,
    the same hooks, deadlines and consequences, without holding the caller meanwhile."""

    def __init__(self, steps: Generator[tuple[int, float, int], bool, Outcome]):
        self._steps = steps
        self._pid = os.getpid()
        self.outcome: Outcome | None = None
        #: What is waited for: the hook process's report pipe, its pid, and when to step
        #: anyway (a tick or a deadline of the hook's).
        self.fd = -1
        self.pid = 0
        self.due = 0.0
        self._go(None)

    def _go(self, ready: bool | None) -> None:
        try:
            wait = next(self._steps) if ready is None else self._steps.send(ready)
        except StopIteration as done:
            self.outcome, self.fd, self.pid = done.value, -1, 0
        else:
            self.fd, timeout, self.pid = wait
            self.due = time.monotonic() + timeout
        if os.getpid() != self._pid:  # (a copy a hook forked below Python: not the caller)
            _leave_forked_copy()

    def ready(self) -> bool:
        """Whether `step` has something to do: the chain is over, the hook's process wrote
        (or ended), or `due` passed."""
        return (self.outcome is not None or time.monotonic() >= self.due
                or bool(select.select([self.fd], [], [], 0)[0]))

    def step(self) -> Outcome | None:
        """Go on if the hook's process wrote (or ended) or `due` passed; the outcome once
        the chain ended, else None."""
        if self.outcome is None:
            ready = bool(select.select([self.fd], [], [], 0)[0])
            if ready or time.monotonic() >= self.due:
                self._go(ready)
        return self.outcome

    def cancel(self) -> None:
        """Give the chain up: the hook's process (its group, for a pbsuser hook) is killed
        and reaped; no outcome."""
        if self.outcome is None:
            self._steps.close()
            self.fd, self.pid = -1, 0


class _Refused(Exception):
    """A hook process's report of a change the guards or the value rules refuse."""


def _index(value: Any, batch: list[HookEntry]) -> int:
    """A hook's index in a child's report, checked."""
    if type(value) is not int or not 0 <= value < len(batch):
        raise ValueError(f"hook index {_cut(repr(value), 80)}")
    return value


def _check_records(records: Any) -> None:
    """The log records in a child's report are what `_Capture.take` sends: (logger name,
    level, text, None or the object's (kind, name)), else ValueError naming the first that
    is not (the parent formats and writes them)."""
    if type(records) is not list:
        raise ValueError(f"log records: a JSON {json_kind(records)}")
    for i, record in enumerate(records):
        if not (type(record) is list and len(record) == 4 and type(record[0]) is str
                and type(record[1]) is int and type(record[2]) is str and (
                    record[3] is None or type(record[3]) is list and len(record[3]) == 2
                    and all(type(o) is str for o in record[3]))):
            raise ValueError(f"log record {i}: not [name, level, text, object]")


def _malformed(exc: BaseException) -> str:
    """What was wrong with a child's report, in one line: the runner's own words
    (ValueError), else the kind of error its unpacking met."""
    if isinstance(exc, JsonError):
        return exc.why
    if type(exc) is ValueError:
        return _message(" ".join(str(exc).split())) or "ValueError"
    return type(exc).__name__


def _read_available(fd: int) -> bytearray:
    data = bytearray()
    while select.select([fd], [], [], 0)[0] and len(data) <= REPORT_MAX:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    return data
