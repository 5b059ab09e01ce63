"""JSON that another party wrote, read with limits: a request to the server from any local
user, a hook process's report (a pbsuser hook runs its job's owner's programs), a batch
system command's output. `loads` reads it, or raises `JsonError`: one line naming what was
read and what is wrong with it, never Python's RecursionError or its words about int().

It refuses what `json.loads` fails on in Python's words, or takes wrongly: arrays or
objects nested deeper than the interpreter's stack (json.loads raised RecursionError, which
callers did not catch), an integer of more than `MAX_DIGITS` digits (int() of thousands is
slow; past 4300 it is Python's ValueError), ``NaN``, ``Infinity`` and a number past a
float's range (``1e400``, read as infinity: no JSON writer can write them back), a key twice
in one object (json.loads kept the last one silently), bytes that are not valid text in the
encoding found (UTF-8, -16 or -32, as json.loads detects it), more than `max_bytes`, and a
document of another type than `expect`.

More than `max_containers` arrays and objects in one document (`MAX_CONTAINERS` unless the
caller says) are refused before it is decoded: each costs the reader 60 to 260 bytes for
the 2 to 7 of its text, and a hook's report of 60 MB of ``[],`` took the root server
2.8 GB and 40 s (a pbsuser hook's report is its job owner's). They are counted only when
the text has more brackets than that (a typical document has far fewer), then exactly,
its strings left out, by a regular expression that reads the text once whatever its
strings hold, and copies nothing.

Nesting deeper than `max_depth` (`MAX_DEPTH` unless the caller says) is refused too: the
decoder reads about a thousand levels, one stack frame each, but what is read is then
copied, compared or written out, at one or two frames a level, and a value 600 deep read
well and raised RecursionError there, in the reader's caller. The check walks the value
without recursion, and only when the text has more brackets than `max_depth` (no document
with fewer can be deeper): a typical request or hook report is not walked.

Public for plugins since kernel API 1.10 (`pbsplug.jsontext`). One decoder is made once,
here: making one for each call costs more than a small document's decoding (the server
reads one per request).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["MAX_CONTAINERS", "MAX_DEPTH", "MAX_DIGITS", "JsonError", "kind", "loads"]

#: The most digits of an integer read. No value pbsplug or a batch system writes has more
#: than 20.
MAX_DIGITS = 1000

#: The deepest arrays and objects read by default. pbsplug's own documents, PBS's and
#: Slurm's are under 10 levels deep.
MAX_DEPTH = 100

#: The most arrays and objects one document holds by default. A request or a hook's report
#: holds tens to thousands; a 2,000-node ``sinfo --json`` holds 12,000. A million of them
#: cost the reader 60 to 260 MB.
MAX_CONTAINERS = 1_000_000


class JsonError(ValueError):
    """JSON that cannot be read: `what` was read, `why` it cannot be (one line each);
    `line`: the line of the text where the decoder stopped, for text that is not JSON
    (None for the other refusals)."""

    def __init__(self, what: str, why: str, line: int | None = None):
        super().__init__(f"{what}: {why}")
        self.what, self.why, self.line = what, why, line


def _int(text: str) -> int:
    count = len(text) - text.startswith("-")
    if count > MAX_DIGITS:
        raise ValueError(f"a number of {count:,} digits (at most {MAX_DIGITS:,})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"a number past a float's range ({_cut(text)})")
    return value


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {json.dumps(_cut(key))} twice in one object")
            seen.add(key)
    return data


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant,
                            object_pairs_hook=_object)


#: A JSON string whole (its brackets are text); one not closed runs to the text's end.
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)'
#: Text of a JSON document up to its next ``[`` or ``{`` outside strings. The loops are
#: possessive, never giving back: the text is read once, whatever its strings hold.
_BETWEEN = rf'[^"\[{{]*+(?:{_STRING}[^"\[{{]*+)*+'
#: The arrays and objects counted in one match (one call in Python per so many).
_RUN = 4096
_RUNS = re.compile(rf"(?:{_BETWEEN}[\[{{]){{{_RUN}}}+", re.S)
_ONE = re.compile(rf"{_BETWEEN}[\[{{]", re.S)


def _containers(text: str) -> int:
    """How many arrays and objects `text` holds: its ``[`` and ``{`` outside strings,
    counted without a copy of the text."""
    count = pos = 0
    while match := _RUNS.match(text, pos):
        count, pos = count + _RUN, match.end()
    while match := _ONE.match(text, pos):
        count, pos = count + 1, match.end()
    return count


def _too_deep(value: Any, limit: int) -> bool:
    """Whether `value` has arrays or objects nested more than `limit` levels deep, walked
    without recursion."""
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        if depth > limit:
            return True
        for inner in (item.values() if type(item) is dict else item):
            if type(inner) is dict or type(inner) is list:
                push((inner, depth + 1))
    return False


def kind(value: Any) -> str:
    """A value's JSON type, for messages: object, array, string, number, boolean or null."""
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            type(None): "null"}.get(type(value), "number")


def loads(data: str | bytes | bytearray, what: str, *, expect: type | None = None,
          max_bytes: int | None = None, max_depth: int = MAX_DEPTH,
          max_containers: int = MAX_CONTAINERS) -> Any:
    """The JSON document `data`, or `JsonError` naming `what` and what is wrong (module
    docstring). `expect`: dict or list, the type the document must be. `max_bytes`: the
    most bytes (characters, for a str) read; a caller that reads from a pipe or socket
    bounds its read too. `max_depth`: the deepest arrays and objects read (1: no array or
    object inside another). `max_containers`: the most arrays and objects in all."""
    if max_bytes is not None and len(data) > max_bytes:
        raise JsonError(what, f"{len(data):,} bytes (at most {max_bytes:,})")
    if not isinstance(data, str):
        encoding = json.detect_encoding(data)
        try:
            data = data.decode(encoding)
        except UnicodeDecodeError as exc:
            raise JsonError(what, f"not {encoding.upper()} text (byte "
                                  f"{exc.object[exc.start]:#04x} at offset {exc.start:,})"
                            ) from None
    brackets = data.count("[") + data.count("{")
    if brackets > max_containers:
        count = _containers(data)
        if count > max_containers:
            raise JsonError(what, f"{count:,} arrays and objects (at most {max_containers:,})")
    try:
        value = _DECODER.decode(data)
    except json.JSONDecodeError as exc:
        raise JsonError(what, f"not JSON: {exc}", exc.lineno) from None
    except RecursionError:
        raise JsonError(what, "arrays or objects nested too deeply") from None
    except ValueError as exc:  # (the parse_* hooks above: their words)
        raise JsonError(what, str(exc)) from None
    if (type(value) is dict or type(value) is list) and \
            brackets > max_depth and _too_deep(value, max_depth):
        raise JsonError(what, f"arrays or objects nested more than {max_depth:,} levels deep")
    if expect is not None and not isinstance(value, expect):
        expected = _EXPECTED.get(expect) or f"a {expect.__name__}"
        raise JsonError(what, f"a JSON {kind(value)}, not {expected}")
    return value


_EXPECTED: dict[type, str] = {dict: "an object", list: "an array", str: "a string"}
