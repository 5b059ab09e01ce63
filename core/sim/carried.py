"""An event's object that a replay carries again to a later event while nothing changed it
(`Carried`): a periodic hook gets every vnode, and every queued job, at each of thousands of
runs, and the engine makes them afresh for each event; carrying the same object keeps what
a hook keeps of it by identity (the power plugin's views) and costs no new object. An object
carried starts the next event as a new one would (`again`): no change recorded and no read
noted, whatever its hook did to them at the last. The check
runs none of a hook's code (core/objects.py, `plain`, `attrs_after`): it compares objects
by identity and reads types with `type`, never `==`, a hash or an ``isinstance``."""

from __future__ import annotations

from collections.abc import Collection
from itertools import chain
from operator import is_
from typing import Any, Generic, TypeVar, cast

from ..objects import RESOURCE_ATTRIBUTES, Job, PbsObject, Resources

_Object = TypeVar("_Object", bound=PbsObject)


#: The exact types of the scalars an object may hold and still be carried.
_LEAVES = frozenset({str, int, float, bool, type(None)})


class Carried(Generic[_Object]):
    """One object as it was made (or last found unchanged), and `unchanged`: whether it
    still holds exactly that. Each attribute value is a scalar of an exact builtin type,
    or a list, dict or `Resources` of such scalars (keys of exact str); `of` gives None
    for an object holding anything else (made afresh for each event then)."""

    __slots__ = ("obj", "_kind", "_name", "_attrs", "_sources", "_lengths", "_flat", "_keys",
                 "_values", "_inner")

    obj: _Object
    _kind: type[PbsObject]
    _name: str
    _attrs: dict[str, Any]
    _sources: tuple[Collection[Any], ...]
    _lengths: list[int]
    _flat: list[Any]
    _keys: list[Any]
    _values: list[Any]
    _inner: dict[int, tuple[type, list[Any] | None, list[Any]]]

    @classmethod
    def of(cls, obj: _Object) -> Carried[_Object] | None:
        """`obj` (made by the caller, so of its types) as it is now."""
        carried = cls.__new__(cls)
        carried.obj = obj
        carried._kind = type(obj)
        carried._name = obj._name
        return carried if carried._take() else None

    def _take(self) -> bool:
        """Note the object's values (its attributes' keys and values, and those of each
        dict and list value), by identity; False when one is not plain data. (What it
        reads is the caller's: a new object, or one `_read_alone` found holding the
        objects noted before, so its types may be looked up in a set.)"""
        attrs = self._attrs = self.obj._attrs
        keys, values = list(attrs), list[Any](attrs.values())
        sources: list[Collection[Any]] = [attrs, attrs.values()]
        inner: dict[int, tuple[type, list[Any] | None, list[Any]]] = {}
        if not _LEAVES.issuperset(map(type, keys)):
            return False
        for i, value in enumerate(values):
            kind = type(value)
            if kind in _LEAVES:
                continue
            if kind is list:
                items = list(value)
                if not _LEAVES.issuperset(map(type, items)):
                    return False
                sources.append(value)
                inner[i] = (kind, None, items)
            elif kind is Resources or kind is dict:
                ks, vs = list(dict.keys(value)), list(dict.values(value))
                if not _LEAVES.issuperset(map(type, vs)) or \
                        not _LEAVES.issuperset(map(type, ks)):
                    return False
                sources += (dict.keys(value), dict.values(value))
                inner[i] = (kind, ks, vs)
            else:
                return False
        self._sources = tuple(sources)
        self._lengths = [*map(len, sources)]  # (C's own len of a dict, a view, a list)
        self._flat = [*chain.from_iterable(self._sources)]
        self._keys, self._values, self._inner = keys, values, inner
        return True

    def unchanged(self) -> bool:
        """Whether the object holds what it held: the same objects in the same places, in
        every attribute and in each dict and list value (one identity per value, in C).
        What a hook's reads alone change is no change (`_read_alone`). Each dict and list
        is as long as it was (the last item of one list moved to the front of the next
        leaves every value in its place taken end to end)."""
        obj = self.obj
        if type(obj) is not self._kind or obj._attrs is not self._attrs or \
                obj._name is not self._name or \
                (self._kind is Job and obj._action is not None):  # type: ignore[attr-defined]
            return False
        sources = self._sources
        if [*map(len, sources)] == self._lengths and \
                all(map(is_, [*chain.from_iterable(sources)], self._flat)):
            return True
        return self._read_alone() and self._take()

    def again(self) -> _Object | None:
        """The object for a new event when it is `unchanged`, else None: with no change
        recorded and no read noted (`PbsObject._changes`, ``_read``), and its own slots
        as a new one has them (`PbsObject._fresh_slots`), as the engine's new object for
        each event. What a hook left there at an earlier event is no part of the next: a
        change recorded on an object it took out of its event (which no one took), or a
        list it read then, which `PbsObject.settle` would compare again at the next event
        (a change the hook made to that list through a reference it kept, to an object
        no server reads again, was taken for a write of the later event)."""
        if not self.unchanged():
            return None
        obj = self.obj
        setattr_ = object.__setattr__
        setattr_(obj, "_changes", {})
        setattr_(obj, "_read", None)
        for slot, value in self._kind._fresh_slots:
            setattr_(obj, slot, value)
        return obj

    def _read_alone(self) -> bool:
        """Whether what changed is only what a hook's reads do (`PbsObject.__getattr__`):
        a dict or list attribute read in a hook's event is its copy (the same scalars in
        a new list or dict, of the same type), and an unset resource attribute read is an
        empty mapping added, which the object then keeps (`Vnode.resources_used` reads
        as that empty mapping either way; ``"resources_used" in vnode`` is then true)."""
        attrs = self._attrs
        keys, values = list(attrs), list[Any](attrs.values())
        known = len(self._keys)
        if len(keys) < known or not all(map(is_, keys, self._keys)):
            return False
        for key, value in zip(keys[known:], values[known:], strict=True):
            if type(key) is not str or key not in RESOURCE_ATTRIBUTES or \
                    type(value) is not Resources or dict.__len__(value):
                return False
        inner = self._inner
        for i, (value, was) in enumerate(zip(values, self._values, strict=False)):
            held = inner.get(i)
            if held is None:
                if value is not was:
                    return False
                continue
            kind, ks, vs = held
            if type(value) is not kind:
                return False
            value = cast(Any, value)  # (``type(value) is kind`` made it an object to mypy)
            if ks is None:
                now = list(value)
            else:
                now = list(dict.keys(value))
                if len(now) != len(ks) or not all(map(is_, now, ks)):
                    return False
                now = list(dict.values(value))
            if len(now) != len(vs) or not all(map(is_, now, vs)):
                return False
        return True

