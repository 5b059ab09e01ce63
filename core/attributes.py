"""Attributes and object types that plugins add to the server's objects.

A plugin implements the `register_attributes` hook and calls `AttributeRegistry.add` (and
`add_object_type` for a new kind of object, such as multisched's ``sched``). The engine's qmgr,
pbsnodes and the event objects then treat them like built-in attributes: typed, defaulted,
settable only by who may set them, and checked by the plugin's validator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import values

#: Object types every engine has; plugins may add more.
BUILTIN_OBJECT_TYPES = ("server", "queue", "node", "hook", "job", "resv", "sched")
#: Who may set an attribute (PBS's permission classes), least privileged first.
SETTERS = ("user", "operator", "manager", "server")
VALUE_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,), "long": (int,), "float": (float, int), "string": (str,),
    "string_array": (list,), "size": (str, int), "duration": (str, int), "time": (int,),
}


@dataclass(frozen=True)
class AttributeDef:
    """An attribute of an object type.

    `type` is a PBS value type (boolean, long, float, string, string_array, size, duration,
    time). `set_by` is the least privileged class that may set it: user, operator, manager,
    or server (read-only to everybody; only the engine and hooks set it). `validator` returns
    an error text for a bad value, or None.
    """

    object_type: str
    name: str
    type: str
    default: Any = None
    set_by: str = "manager"
    read_by: str = "user"
    validator: Callable[[Any], str | None] | None = None
    doc: str = ""
    plugin: str = ""

    def check(self, value: Any) -> str | None:
        """None when `value` fits, else why not (the text qmgr prints)."""
        if not isinstance(value, VALUE_TYPES[self.type]) or (
                self.type != "boolean" and isinstance(value, bool)):
            return f"illegal value for {self.name}: expected a {self.type}"
        if self.validator is not None:
            return self.validator(value)
        return None


@dataclass(frozen=True)
class ObjectTypeDef:
    """A kind of object a plugin adds (created, listed and deleted with qmgr)."""

    name: str
    doc: str = ""
    max_name_length: int | None = None
    plugin: str = ""


@dataclass
class AttributeRegistry:
    """What the plugins registered, keyed by object type and attribute name."""

    object_types: dict[str, ObjectTypeDef] = field(default_factory=dict)
    attributes: dict[tuple[str, str], AttributeDef] = field(default_factory=dict)
    _plugin: str = ""

    def add_object_type(self, name: str, doc: str = "", max_name_length: int | None = None
                        ) -> ObjectTypeDef:
        if name in self.object_types:
            raise ValueError(f"object type {name!r} is already registered by "
                             f"{self.object_types[name].plugin or 'pbsplug'}")
        otype = ObjectTypeDef(name, doc, max_name_length, self._plugin)
        self.object_types[name] = otype
        return otype

    def add(self, object_type: str, name: str, type: str, default: Any = None, *,
            set_by: str = "manager", read_by: str = "user",
            validator: Callable[[Any], str | None] | None = None, doc: str = ""
            ) -> AttributeDef:
        """Register one attribute; errors say what is wrong with the registration."""
        try:  # (PBS's rule for a name: a hook could not set one that breaks it)
            values.attribute_name(name, object_type)
        except values.BadValue as exc:
            raise ValueError(f"attribute {values.shown(name)}: {exc.why}") from None
        if object_type not in BUILTIN_OBJECT_TYPES and object_type not in self.object_types:
            raise ValueError(f"attribute {name!r}: unknown object type {object_type!r}")
        if type not in VALUE_TYPES:
            raise ValueError(f"attribute {name!r}: type {type!r} is not one of "
                             f"{', '.join(VALUE_TYPES)}")
        for who in (set_by, read_by):
            if who not in SETTERS:
                raise ValueError(f"attribute {name!r}: {who!r} is not one of {', '.join(SETTERS)}")
        key = (object_type, name)
        if key in self.attributes:
            raise ValueError(f"attribute {object_type}.{name} is already registered by "
                             f"{self.attributes[key].plugin or 'pbsplug'}")
        attr = AttributeDef(object_type, name, type, default, set_by, read_by, validator, doc,
                            self._plugin)
        if default is not None and (problem := attr.check(default)):
            raise ValueError(f"attribute {object_type}.{name}: default {default!r}: {problem}")
        self.attributes[key] = attr
        return attr

    def for_type(self, object_type: str) -> dict[str, AttributeDef]:
        return {n: a for (t, n), a in self.attributes.items() if t == object_type}
