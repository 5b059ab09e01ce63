"""The objects an event carries: Job, Vnode, Queue, Server, Reservation.

Attributes use PBS's names (``job.Job_Name``, ``job.Resource_List["walltime"]``,
``vnode.resources_available["ncpus"]``), as a PBS hook reads them. An unset attribute reads as
``None``, as in PBS. Values are plain data (str, int, float, bool, lists and dicts of them) so
that an object, and every change a hook makes to it, crosses a process boundary unchanged.

Two mechanisms make hooks safe to run anywhere:

* a *guard* decides, per event, which attributes a hook may write (the runner installs it);
  a write that PBS would refuse raises `AttributeReadOnly`, which fails the hook;
* every write is recorded, so `changes()` returns exactly what the hook changed and
  `apply_changes()` replays it on a copy in another process.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from . import values
from .units import parse_duration, parse_size

#: Attributes whose value is a mapping of resource name to value. (A job's ``schedselect``
#: is a select string, as PBS's.)
RESOURCE_ATTRIBUTES = frozenset({
    "Resource_List", "resources_used", "resources_available", "resources_assigned",
    "resources_max", "resources_min", "resources_default", "estimated",
})

#: Resource mappings whose values `pbsplug.values` checks when set (the others are derived).
CHECKED_RESOURCES = frozenset({
    "Resource_List", "resources_used", "resources_available", "resources_default",
    "resources_max", "resources_min",
})

Guard = Callable[["PbsObject", str], None]


class AttributeReadOnly(AttributeError):
    """A hook wrote an attribute that this event does not let it change."""


def plain(value: Any) -> Any:
    """`value` as plain data of the exact types: a subclass of str, int or float (a
    ``(str, Enum)`` member, a str with methods of its own) becomes the base value, a dict
    or list subclass (a tuple too) a dict or list of plain values, read by dict's and
    list's own methods. What is not plain data is left as it is, for the runner's check
    (`pbsplug.runner.unstorable`). A hook's value is stored so: the caller never holds an
    object of the hook's (``str(member)`` of a ``(str, Enum)`` is ``'State.OFFLINE'``, not
    its value), in either isolation mode. The value's own type decides, never isinstance
    (which reads a ``__class__`` of the hook's) nor a set of types (a metaclass's
    ``__hash__`` or ``__eq__``): no code of the hook's runs here but a dict key's hash."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, int):  # (bool is exact above: it has no subclasses)
        return int.__int__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    if issubclass(kind, dict):
        return {plain(k): plain(v) for k, v in dict.items(value)}
    if issubclass(kind, list):
        return [plain(v) for v in list.__iter__(value)]
    if issubclass(kind, tuple):
        return [plain(v) for v in tuple.__iter__(value)]
    return value


class Resources(dict[str, Any]):
    """A resource mapping (``Resource_List``, ``resources_available``...) that records writes.

    Setting a key to ``None`` unsets it, as in PBS.
    """

    __slots__ = ("_owner", "_attr")
    _owner: PbsObject
    _attr: str

    def __init__(self, owner: PbsObject, attr: str, values: Mapping[str, Any] | None = None):
        dict.__init__(self, values or {})  # (made by the million in a replay: no super())
        _SET_OWNER(self, owner)
        _SET_ATTR(self, attr)

    def __setattr__(self, key: str, value: Any) -> None:
        """The object and attribute each write is recorded for are the mapping's own for
        good: a hook's ``mapping._owner = other_vnode`` had a write to this vnode's mapping
        recorded on the other (stored here, reported there), and ``mapping._attr = ...``
        under another attribute, guarded and checked as that one."""
        if key in Resources.__slots__:
            raise AttributeError(f"'Resources' object attribute '{key}' is read-only")
        object.__setattr__(self, key, value)  # (no other: AttributeError, as any slotted)

    def __delattr__(self, key: str) -> None:
        if key in Resources.__slots__:
            raise AttributeError(f"'Resources' object attribute '{key}' is read-only")
        object.__delattr__(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        values.resource_name(key, self._attr)  # (first: the guard's refusal names it too)
        self._owner._check_write(f"{self._attr}.{key}", self._attr)
        if value is not None and self._attr in CHECKED_RESOURCES:
            # A bad value raises here, inside the hook: the hook fails, nothing is stored.
            value = values.resource_value(key, value, attr=self._attr)
        value = plain(value)
        if value is None:
            super().pop(key, None)
        else:
            super().__setitem__(key, value)
        self._owner._record_resource(self._attr, key, value)

    def __delitem__(self, key: str) -> None:
        self[key] = None

    def __getitem__(self, key: str) -> Any:
        # PBS returns None for a resource that is not set.
        return super().get(key)

    def pop(self, key: str, *default: Any) -> Any:
        value = super().get(key, *default) if default else super().__getitem__(key)
        self[key] = None
        return value

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return super().get(key)

    def clear(self) -> None:
        for key in list(self):
            self[key] = None

    def seconds(self, key: str) -> int | None:
        """A duration resource (walltime, cput) in seconds, or None when unset."""
        value = super().get(key)
        return None if value is None else parse_duration(value)

    def bytes(self, key: str) -> int | None:
        """A size resource (mem, vmem) in bytes, or None when unset."""
        value = super().get(key)
        return None if value is None else parse_size(value)

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return (dict, (dict(self),))  # plain dict across pickling


#: `Resources`'s slots, set in C (its `Resources.__setattr__` refuses them).
_SET_OWNER = Resources.__dict__["_owner"].__set__
_SET_ATTR = Resources.__dict__["_attr"].__set__


def _fill(obj: PbsObject, name: str, attrs: dict[str, Any]) -> None:
    """Set a new object's `PbsObject` slots (`PbsObject.__init__`, `_rebuild`): its name,
    `attrs` (its own dict, whose resource mappings become `Resources`), no change and no
    guard yet."""
    object.__setattr__(obj, "_name", name)
    object.__setattr__(obj, "_changes", {})
    object.__setattr__(obj, "_guard", None)
    #: In a hook's event (a guard set): the dict and list attributes it read, each as
    #: it was before the hook changed anything in place (`settle`).
    object.__setattr__(obj, "_read", None)
    # `_wrap` for each key, with the few resource mappings found by a set operation
    # (objects are made by the million in a replay).
    for key in RESOURCE_ATTRIBUTES.intersection(attrs):
        attrs[key] = Resources(obj, key, attrs[key])
    object.__setattr__(obj, "_attrs", attrs)


def _rebuild(cls: type[PbsObject], name: str, attrs: dict[str, Any]) -> Any:
    """An unpickled object: what __init__ would make, without its per-key work (a scheduler
    process unpickles thousands of jobs per cycle)."""
    obj = cls.__new__(cls)
    _fill(obj, name, attrs)
    for slot, value in cls._fresh_slots:
        object.__setattr__(obj, slot, value)
    return obj


class PbsObject:
    """Common base: a bag of PBS attributes with a name, a write guard and a change record."""

    kind = "object"
    #: Attributes no hook may ever write.
    always_readonly: frozenset[str] = frozenset()
    #: Attributes a hook may change but never unset (None).
    required: frozenset[str] = frozenset()

    __slots__ = ("_name", "_attrs", "_changes", "_guard", "_read")
    #: A subclass's own slots, each with the value its __init__ gives it (for `_rebuild`).
    _fresh_slots: tuple[tuple[str, Any], ...] = ()

    def __init__(self, name: str, attrs: Mapping[str, Any] | None = None):
        _fill(self, name, dict(attrs) if attrs else {})

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """Pickled as (type, name, plain attributes) and rebuilt by `_rebuild`, so that
        resources read as `Resources` again (a scheduler process gets its snapshot so)."""
        return (_rebuild, (type(self), self._name, {
            k: dict(v) if isinstance(v, Resources) else v for k, v in self._attrs.items()}))

    # -- attribute access -------------------------------------------------------------------
    def _wrap(self, key: str, value: Any) -> Any:
        if key in RESOURCE_ATTRIBUTES:
            return Resources(self, key, value)
        return value

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        if key in RESOURCE_ATTRIBUTES:
            # Reading an unset resource attribute gives an empty, writable mapping.
            res = self._attrs.get(key)
            if res is None:
                res = self._attrs[key] = Resources(self, key)
            return res
        value = self._attrs.get(key)
        if self._guard is not None and type(value) in (dict, list):
            # A hook changes such a value in place (``job.Variable_List["X"] = "y"``, as in
            # PBS): it gets a copy of its own, whose changes `settle` records as a write,
            # guarded and checked as one, when the hook ends (never the caller's data).
            read = self._read
            if read is None:
                read = {}
                object.__setattr__(self, "_read", read)
            if key not in read:
                read[key] = value
                value = self._attrs[key] = copy.deepcopy(value)
        return value

    def settle(self) -> None:
        """Record what a hook changed in place in the dict and list attributes it read
        (`__getattr__`) as if it had assigned them: through the event's guard and the
        value rules, raising as the assignment would (the hook's error)."""
        read = self._read
        if not read:
            return
        for key, before in list(read.items()):
            current = self._attrs.get(key)
            if current != before:
                setattr(self, key, copy.deepcopy(current))
                read[key] = self._attrs.get(key)  # (the hooks after it compare with this)
                if key in self._attrs:  # their copy to change
                    self._attrs[key] = copy.deepcopy(self._attrs[key])

    def __setattr__(self, key: str, value: Any) -> None:
        if key.startswith("_"):
            object.__setattr__(self, key, value)
            return
        values.attribute_name(key, self.kind)  # (first: the guard's refusal names it too)
        self._check_write(key, key)
        if value is None and key in self.required:
            raise ValueError(f"{self.kind} attribute '{key}' cannot be unset")
        # PBS's types refuse a bad value when it is set (a hook's exception), so nothing
        # invalid reaches the server.
        value = plain(values.object_value(self.kind, key, value))
        old = self._attrs.pop(key, None)
        if value is not None:
            self._attrs[key] = self._wrap(key, dict(value) if key in RESOURCE_ATTRIBUTES
                                          else value)
        if key in RESOURCE_ATTRIBUTES and (isinstance(value, dict) or old):
            # A whole mapping replaces the old one, and an unset one is an empty one: the
            # record unsets (None) what it left out, so that a replay entry by entry
            # (another process's copy, a stored row) drops it too, and entries set after
            # an unset join no old ones there.
            record = dict.fromkeys(old or (), None)
            record.update(value or {})
            self._changes[key] = record
        else:
            self._changes[key] = value

    def _check_write(self, what: str, attr: str) -> None:
        if attr in self.always_readonly or attr == "name":
            raise AttributeReadOnly(f"{self.kind} attribute '{what}' is read-only")
        if self._guard is not None:
            self._guard(self, attr)

    def _record_resource(self, attr: str, key: str, value: Any) -> None:
        current = self._changes.get(attr)
        if isinstance(current, dict):
            current[key] = value
        elif attr in self._changes and current is None:
            self._changes[attr] = {key: value}
        else:
            self._changes.setdefault(attr, {})[key] = value

    @property
    def name(self) -> str:
        return self._name

    def get(self, key: str, default: Any = None) -> Any:
        value = self._attrs.get(key)
        return default if value is None else value

    def __contains__(self, key: str) -> bool:
        return key in self._attrs

    def __iter__(self) -> Iterator[str]:
        return iter(self._attrs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r})"

    def __eq__(self, other: object) -> bool:
        return (type(other) is type(self) and other._name == self._name
                and other.to_dict() == self.to_dict())

    __hash__ = None  # type: ignore[assignment]

    # -- plain data -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Every attribute as plain data (resource mappings as plain dicts)."""
        return {k: dict(v) if isinstance(v, Resources) else v for k, v in self._attrs.items()}

    def changes(self) -> dict[str, Any]:
        """What hooks changed since the object was made (or since `take_changes`), as plain
        data (`plain`): a value of a hook's own type in the record (set past the setters,
        a str subclass, an int enum) reaches the caller as its base value, not as the hook's
        object, whose methods would run in the caller."""
        return {plain(k): plain(v) for k, v in self._changes.items()}

    def take_changes(self) -> dict[str, Any]:
        """The changes so far, then start a fresh record (used to stream changes per hook)."""
        changes = self.changes()
        self._changes.clear()
        return changes

    def apply_changes(self, changes: Mapping[str, Any]) -> None:
        """Replay `changes()` from a copy of this object (a hook's process), through this
        object's guard and the value rules, as the hook's own writes went: what another
        process reports is checked again, never trusted (a hook that got round the guard
        in its process, or forged its report, gets `AttributeReadOnly` or `BadValue`)."""
        for key, value in changes.items():
            if not isinstance(key, str):
                raise TypeError(f"{self.kind} attribute name {key!r} is not a string")
            if key in RESOURCE_ATTRIBUTES and isinstance(value, dict):
                res = getattr(self, key)  # (an unset one reads as an empty mapping)
                for rkey, rvalue in value.items():
                    res[rkey] = rvalue
            else:
                setattr(self, key, value)

    def own_values(self) -> None:
        """Its dict and list values made its own (deep copies; resource mappings are its
        own already): a caller's object for an in-process hook shares none of the caller's
        data, so that a hook writing into one past the setters and their copy on read
        (``dict.__setitem__`` on a value it dug out) changes nothing of the caller's."""
        attrs = self._attrs
        for key, value in attrs.items():
            if type(value) in (dict, list):
                attrs[key] = copy.deepcopy(value)

    def check_values(self) -> None:
        """Every attribute through the value rules, as if a hook had set each one (an object
        a hook made itself and adds to an event, `Vnode(name, attrs)`): a bad value raises
        `BadValue`, and the values are kept as the rules store them."""
        for key in list(self._attrs):
            if not isinstance(key, str):
                raise TypeError(f"{self.kind} attribute name {key!r} is not a string")
            value = self._attrs[key]
            checked = plain(values.object_value(
                self.kind, key, dict(value) if isinstance(value, Resources) else value))
            if isinstance(checked, dict) and key in RESOURCE_ATTRIBUTES:
                checked = {k: v for k, v in checked.items() if v is not None}
            if checked is None:
                del self._attrs[key]
            else:
                self._attrs[key] = self._wrap(key, checked)


class Job(PbsObject):
    """A job. ``id`` is its identifier (``123.server``); other attributes use PBS's names:
    ``Job_Name``, ``Job_Owner`` (``user@host``), ``euser``, ``egroup``, ``queue``,
    ``job_state`` (Q, R, H, E, ...), ``Resource_List`` (select, place, walltime, ncpus, mem),
    ``exec_vnode``, ``exec_host``, ``run_count``, ``comment``, ``Variable_List``,
    ``Hold_Types``, ``Rerunable``, ``Exit_status``, ``resources_used``, ``estimated``, ...

    ``rerun()`` and ``delete()`` ask the execution host to requeue or delete the job when the
    hook ends; PBS allows them only in execution-host events.
    """

    kind = "job"
    always_readonly = frozenset({"id"})
    __slots__ = ("_action", "_action_allowed")
    _fresh_slots = (("_action", None), ("_action_allowed", True))

    def __init__(self, job_id: str, attrs: Mapping[str, Any] | None = None):
        if attrs and "id" in attrs:
            attrs = {k: v for k, v in attrs.items() if k != "id"}
        super().__init__(job_id, attrs)  # (which copies them: not twice for every job)
        object.__setattr__(self, "_action", None)
        object.__setattr__(self, "_action_allowed", True)

    @property
    def id(self) -> str:
        return self._name

    def rerun(self) -> None:
        """Requeue the job once the hook ends (execution-host events only); a
        ``delete()`` on the same job wins."""
        self._set_action("rerun")

    def delete(self) -> None:
        """Delete the job once the hook ends (execution-host events only)."""
        self._set_action("delete")

    def _set_action(self, action: str) -> None:
        if not self._action_allowed:
            raise AttributeReadOnly(f"job.{action}() is allowed only in execution-host events")
        if self._action == "delete":
            return  # a delete() wins over a rerun(), before or after it, as in PBS's MoM
        object.__setattr__(self, "_action", action)
        self._changes["_action"] = action

    @property
    def action(self) -> str | None:
        """``rerun``, ``delete`` or None: what a hook asked for with rerun() or delete()."""
        return self._action

    def apply_changes(self, changes: Mapping[str, Any]) -> None:
        changes = dict(changes)
        action = changes.pop("_action", None)
        super().apply_changes(changes)
        if action:
            if action not in ("rerun", "delete"):
                raise ValueError(f"job action {action!r} is neither rerun nor delete")
            self._set_action(action)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self._name, **super().to_dict()}


class Vnode(PbsObject):
    """A vnode: ``state``, ``sharing``, ``resources_available``, ``resources_assigned``,
    ``comment``, ``last_state_change_time``, ``last_used_time``, ``partition``... and any
    attribute a plugin registers. ``state`` is PBS's comma-separated state list, for example
    ``free``, ``offline``, ``job-busy`` or ``offline,job-busy``."""

    kind = "vnode"
    #: No attribute of the Python object's own (``vnode._x = 1`` raises AttributeError):
    #: everything a vnode holds is in its slots, which a replay compares to carry an
    #: unchanged object to a later event (core/sim/carried.py).
    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self._name, **super().to_dict()}

    @property
    def states(self) -> frozenset[str]:
        """The vnode's states as a set: ``{"offline", "job-busy"}``."""
        text = self._attrs.get("state") or ""
        if type(text) is not str:  # (not made through the value rules)
            return frozenset(s for s in str(text).split(",") if s)
        states = _STATES.get(text)
        if states is None:
            if len(_STATES) >= 1024:  # (a few dozen texts are ever seen)
                _STATES.clear()
            states = _STATES[text] = frozenset(s for s in text.split(",") if s)
        return states


#: Each vnode state text seen, as `Vnode.states` gives it (a scheduler's cycle and a power
#: hook ask a thousand vnodes a run).
_STATES: dict[str, frozenset[str]] = {}


class Queue(PbsObject):
    """A queue: ``queue_type``, ``enabled``, ``started``, ``Priority``, ``resources_default``,
    ``partition``, ..."""

    kind = "queue"
    __slots__ = ()  # (no attribute of the Python object's own, as a vnode's)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self._name, **super().to_dict()}


def is_route_queue(queue: Mapping[str, Any] | PbsObject) -> bool:
    """Whether a queue's attributes (a `Queue` or a stored row) make it a route queue
    (``queue_type`` Route, stored as qmgr writes it): it runs no job, it routes them."""
    return str(queue.get("queue_type") or "").lower().startswith("r")


class Server(PbsObject):
    """The server: ``scheduling``, ``scheduler_iteration``, ``managers``, ``operators``,
    ``resources_default``, ``job_sort_formula``, ``power_provisioning``, ..."""

    kind = "server"
    __slots__ = ()  # (no attribute of the Python object's own, as a vnode's)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self._name, **super().to_dict()}


class Reservation(PbsObject):
    """An advance reservation: ``resvid`` (its name), ``Reserve_Name``, ``reserve_start``,
    ``reserve_end``, ``reserve_duration``, ``reserve_state``, ``Resource_List``,
    ``resv_nodes``, ``queue``, ``partition``, ..."""

    kind = "resv"
    __slots__ = ()  # (no attribute of the Python object's own, as a vnode's)
    #: What the server and its scheduler own (PBS's hooks may not set them either): a
    #: resvsub hook that set reserve_state or queue ran a reservation nobody confirmed and
    #: took another queue's jobs at its end.
    always_readonly = frozenset({"resvid", "partition", "reserve_state", "reserve_substate",
                                 "queue", "resv_nodes", "Reserve_Owner", "euser", "egroup",
                                 "server", "ctime", "mtime"})
    #: What a reservation cannot be without: a hook may change them, never unset them.
    required = frozenset({"reserve_start", "reserve_end", "reserve_duration"})

    @property
    def resvid(self) -> str:
        return self._name

    def to_dict(self) -> dict[str, Any]:
        return {"resvid": self._name, **super().to_dict()}


OBJECT_TYPES: dict[str, type[PbsObject]] = {
    "job": Job, "vnode": Vnode, "queue": Queue, "server": Server, "resv": Reservation,
}


def apply_to_attrs(attrs: dict[str, Any], changes: Mapping[str, Any]) -> None:
    """A hook's recorded `changes` (an outcome's ``changes["job"]``: plain data) applied
    to a plain attribute dict in place, as `PbsObject.apply_changes` replays them on an
    object and as its `to_dict` would then show it: an attribute set to None unset, a
    resource mapping changed entry by entry (a None entry unsets one), other attributes
    whole. Names starting with ``_`` (the runner's own, such as ``_action``) are left
    out."""
    for name, value in changes.items():
        if name.startswith("_"):
            continue
        if value is None:
            attrs.pop(name, None)
        elif name in RESOURCE_ATTRIBUTES and type(value) is dict:
            old = attrs.get(name)
            merged = {**(old if isinstance(old, dict) else {}), **value}
            attrs[name] = {k: v for k, v in merged.items() if v is not None}
        else:
            attrs[name] = value


def attrs_after(before: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`apply_to_attrs` on deep copies: what an object made of the attributes `before`
    holds after the writes `changes` records, in a new dict of its own. A request's
    caller reads this, never the event's object after its hooks: an in-process hook may
    have put an object of its own there past the record, whose methods (``__eq__``) would
    run in the caller with no alarm."""
    attrs = copy.deepcopy(dict(before))
    apply_to_attrs(attrs, copy.deepcopy(dict(changes)))
    return attrs


_Object = TypeVar("_Object", bound=PbsObject)


def object_from_dict(cls: type[_Object], data: Mapping[str, Any],
                     name: str | None = None) -> _Object:
    """Build an object from plain data, its name from ``name``, else ``id`` / ``name`` /
    ``resvid`` in the data. A missing name is a `ValueError` that says which key to add."""
    data = dict(data)
    key = {"job": "id", "resv": "resvid"}.get(cls.kind, "name")
    obj_name = data.pop(key, None) or name
    if not obj_name:
        raise ValueError(f"a {cls.kind} needs '{key}'")
    if not isinstance(obj_name, str):
        raise ValueError(f"a {cls.kind}'s '{key}' must be a string, not {obj_name!r}")
    return cls(obj_name, data)
