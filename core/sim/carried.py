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

#: A resource mapping's slots, read in C (``__get__``; AttributeError when a hook deleted
#: one): the object and the attribute each write there is recorded for.
_OWNER: Any = Resources.__dict__["_owner"].__get__
_ATTR: Any = Resources.__dict__["_attr"].__get__


class Carried(Generic[_Object]):
    """One object as it was made, and `unchanged`: whether it still holds exactly that. Each
    attribute value is a scalar of an exact builtin type, or a list, dict or `Resources` of
    such scalars (keys of exact str); `of` gives None for an object holding anything else
    (made afresh for each event then)."""

    __slots__ = ("obj", "_kind", "_name", "_attrs", "_sources", "_lengths", "_mappings",
                 "_flat", "_keys", "_values", "_inner")

    obj: _Object
    _kind: type[PbsObject]
    _name: str
    _attrs: dict[str, Any]
    _sources: tuple[Collection[Any], ...]
    _lengths: list[int]
    _mappings: list[tuple[Resources, str]]
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
        dict and list value; each resource mapping's type, object and attribute), by
        identity; False when one is not plain data. (What it reads is the caller's new
        object, so its types may be looked up in a set.)"""
        obj = self.obj
        attrs = self._attrs = obj._attrs
        keys, values = list(attrs), list[Any](attrs.values())
        sources: list[Collection[Any]] = [attrs, attrs.values()]
        mappings: list[tuple[Resources, str]] = []
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
                if kind is Resources:
                    attr = _ATTR(value)
                    if _OWNER(value) is not obj or type(attr) is not str or attr != keys[i]:
                        return False
                    mappings.append((value, attr))
                sources += (dict.keys(value), dict.values(value))
                inner[i] = (kind, ks, vs)
            else:
                return False
        self._sources, self._mappings = tuple(sources), mappings
        self._lengths = [*map(len, sources)]  # (C's own len of a dict, a view, a list)
        self._flat = [*chain.from_iterable(self._sources)]
        self._keys, self._values, self._inner = keys, values, inner
        return True

    def _same(self) -> bool:
        """Whether the object holds exactly what `_take` noted (one identity per value),
        and each resource mapping is of its type, object and attribute (its slots read in
        C; one a hook deleted raises AttributeError)."""
        sources, obj = self._sources, self.obj
        if [*map(len, sources)] != self._lengths or \
                not all(map(is_, [*chain.from_iterable(sources)], self._flat)):
            return False
        for mapping, attr in self._mappings:  # (a loop: two or three, cheaper than maps)
            if type(mapping) is not Resources or _OWNER(mapping) is not obj or \
                    _ATTR(mapping) is not attr:
                return False
        return True

    def unchanged(self) -> bool:
        """Whether the object holds what it held: the same objects in the same places, in
        every attribute and in each dict and list value (one identity per value, in C),
        and each resource mapping of its type, of this object and of its attribute (a
        write there is recorded for the object and attribute its slots name). What a
        hook's reads alone change is no change (`_read_alone`). Each dict and list is as
        long as it was (the last item of one list moved to the front of the next leaves
        every value in its place taken end to end). A slot of the object's, or of a
        mapping's, that a hook deleted (``object.__delattr__``) is a change, never the
        caller's error: one bad hook never stops the server."""
        obj = self.obj
        try:
            if type(obj) is not self._kind or obj._attrs is not self._attrs or \
                    obj._name is not self._name or \
                    (self._kind is Job and obj._action is not None):  # type: ignore[attr-defined]
                return False
            sources = self._sources  # (`_same`, inline: thousands of vnodes a run)
            if [*map(len, sources)] == self._lengths and \
                    all(map(is_, [*chain.from_iterable(sources)], self._flat)):
                for mapping, attr in self._mappings:
                    if type(mapping) is not Resources or _OWNER(mapping) is not obj or \
                            _ATTR(mapping) is not attr:
                        return False
                return True
            return self._read_alone() and self._same()
        except AttributeError:  # (a slot only, deleted: the rest is C's, on exact types)
            return False

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
        empty mapping of the object's own for that attribute, added. When so, the object
        is put back as it was (the lists and dicts noted, no mapping added: `_same` then
        checks them), as the engine's next new object: the hook's copies, which it may
        keep and change at a later event, and the mappings it got, are no part of it
        (a list the hook kept from one run and changed at the next was that run's, and
        an assignment of it there stored the change)."""
        obj, attrs = self.obj, self._attrs
        keys, values = list(attrs), list[Any](attrs.values())
        known = len(self._keys)
        if len(keys) < known or not all(map(is_, keys, self._keys)):
            return False
        for key, value in zip(keys[known:], values[known:], strict=True):
            if type(key) is not str or key not in RESOURCE_ATTRIBUTES or \
                    type(value) is not Resources or dict.__len__(value) or \
                    _OWNER(value) is not obj or type(_ATTR(value)) is not str or \
                    _ATTR(value) != key:
                return False
        inner, originals, copied = self._inner, self._values, []
        for i, (value, was) in enumerate(zip(values, originals, strict=False)):
            if value is was:
                continue
            held = inner.get(i)
            if held is None or held[0] is Resources or type(value) is not held[0]:
                return False  # (a read copies no scalar and no resource mapping)
            _, ks, vs = held
            value = cast(Any, value)  # (``type(value) is`` a type made it an object to mypy)
            if ks is None:
                now = list(value)
            else:
                now = list(dict.keys(value))
                if len(now) != len(ks) or not all(map(is_, now, ks)):
                    return False
                now = list(dict.values(value))
            if len(now) != len(vs) or not all(map(is_, now, vs)):
                return False
            copied.append(i)
        for i in copied:
            attrs[keys[i]] = originals[i]
        for key in keys[known:]:
            del attrs[key]
        return True
