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
2.8 GB and 40 s (a pbsuser hook's report is its job owner's).

Nesting deeper than `max_depth` (`MAX_DEPTH` unless the caller says) is refused before it
is decoded too: the decoder reads about a thousand levels, one stack frame each, but what
is read is then copied, compared or written out, at one or two frames a level, and a value
600 deep read well and raised RecursionError there, in the reader's caller.

Both are read from the text's brackets outside its strings (`_shape`), only when it has
more brackets than one of the limits (no document with fewer can be past it): a typical
request is not scanned. The scan is a few passes of bytes methods over the text (C loops,
over copies no bigger than it), whatever its strings hold; a walk of the decoded value
instead cost a big report a third to a half of what json.loads costs. A document that is
scanned has its numbers read without a Python call each when none can be refused
(`_plain_numbers`). benchmarks/bench_events.py measures both.

Public for plugins since kernel API 1.10 (`pbsplug.jsontext`). One decoder is made once,
here: making one for each call costs more than a small document's decoding (the server
reads one per request).
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
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
    `line`: the line of the text where the decoder stopped, for text that is not JSON or
    a number refused (None for the other refusals)."""

    def __init__(self, what: str, why: str, line: int | None = None):
        super().__init__(f"{what}: {why}")
        self.what, self.why, self.line = what, why, line

    def __reduce__(self) -> tuple[Any, ...]:
        # (pickled, as a worker process sends it: ValueError's args are the one line only)
        return type(self), (self.what, self.why, self.line), self.__dict__


class _NumberRefused(ValueError):
    """A number the parse_* hooks refuse: its line is found (`_refused_number_line`)."""


def _int(text: str) -> int:
    count = len(text) - text.startswith("-")
    if count > MAX_DIGITS:
        raise _NumberRefused(f"a number of {count:,} digits (at most {MAX_DIGITS:,})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NumberRefused(f"a number past a float's range ({_cut(text)})")
    return value


def _constant(name: str) -> Any:
    raise _NumberRefused(f"{name} is not a JSON number")


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
#: `_DECODER` without a Python call for each number: for a text whose numbers are all read
#: alike by int() and float() (`_plain_numbers`).
_PLAIN = json.JSONDecoder(parse_constant=_constant, object_pairs_hook=_object)
_DIGITS = bytes.maketrans(b"123456789", b"000000000")


def _plain_numbers(text: bytes | bytearray) -> bool:
    """Whether `text` (UTF-8) has no run of 309 digits and no digit before an ``e`` or
    ``E``, in strings too: then each number in it has no exponent and fewer than 309
    digits before its point, and is finite, and under `MAX_DIGITS` digits."""
    digits = text.translate(_DIGITS)
    return not (b"0" * 309 in digits or b"0e" in digits or b"0E" in digits)


#: Every byte but JSON's brackets and quote: deleted by `_shape`, ``{`` and ``}`` made
#: ``[`` and ``]`` (only how deep and how many count, not which).
_NOT_BRACKETS = bytes(set(range(256)) - set(b'"[]{}'))
_FOLD = bytes.maketrans(b"{}", b"[]")
#: The passes `_shape` makes before it reads what is left level by level: a typical
#: document is fewer levels deep, and is read in that many passes.
_PASSES = 10
#: A bracket's step in depth, by its byte.
_STEP = tuple(1 if byte == ord("[") else -1 if byte == ord("]") else 0 for byte in range(256))


def _shape(text: bytes | bytearray, limit: int) -> tuple[int, bool]:
    """How many arrays and objects the JSON text `text` (UTF-8: its brackets, quotes and
    backslashes are its ASCII bytes) holds, and whether they are nested more than `limit`
    levels deep: its brackets outside strings, read in a few passes of bytes methods
    (C loops over the text, no Python call per character) over copies no bigger than
    it. Exact for JSON; for text that is not, the decoder says what is wrong (its
    brackets do not pair up, say)."""
    if b"\\" in text:  # (escapes: a \" is no string's end; JSON has none outside strings)
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = text.translate(_FOLD, _NOT_BRACKETS)
    # The quotes that are left pair up as strings' ends: an empty string, or a closing
    # quote next to an opening one, goes whole without moving a bracket in or out of a
    # string; what is left of the strings then goes with the odd parts between quotes (a
    # string not closed runs to the end, as the decoder reads it).
    marks = marks.replace(b'""', b"")
    if b'"' in marks:
        marks = b"".join(marks.split(b'"')[::2])
    count = marks.count(b"[")
    if count != len(marks) - count:  # (a bracket not closed, or one too many)
        return count, False
    done = 0  # each pass takes the innermost arrays and objects away, a level of all
    while marks and done < min(limit, _PASSES):
        # (what is left is `done` levels or more above a bracket: so many opened in a row
        # more is deeper than `limit`, without the passes a long chain would cost)
        run = limit + 1 - done  # (never longer than the text: a caller's limit may be huge)
        if run <= len(marks) and b"[" * run in marks:
            return count, True
        inner = marks.replace(b"[]", b"")
        if len(inner) == len(marks):  # (``][``: not JSON)
            return count, False
        marks, done = inner, done + 1
    if not marks:
        return count, False
    # Deeper than most documents: what is left, level by level in one pass (C loops too),
    # not a pass a level, which a document of many deep branches would cost.
    return count, done + max(accumulate(map(_STEP.__getitem__, marks))) > limit


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
    raw: bytes | bytearray | None = None
    if not isinstance(data, str):
        encoding = json.detect_encoding(data)
        raw = data if encoding == "utf-8" else None
        try:
            data = data.decode(encoding)
        except UnicodeDecodeError as exc:  # (UTF-8-SIG's offset is past the BOM it cut)
            raise JsonError(what, f"not {encoding.upper()} text (byte "
                                  f"{exc.object[exc.start]:#04x} at offset "
                                  f"{exc.start + len(data) - len(exc.object):,})") from None
    brackets = data.count("[") + data.count("{")
    if brackets > max_containers or brackets > max_depth:  # (else neither can be past)
        if raw is None:  # (surrogatepass: a lone surrogate of a str; only ASCII counts)
            raw = data.encode("utf-8", "surrogatepass")
        count, deep = _shape(raw, max_depth)
        if count > max_containers:
            raise JsonError(what, f"{count:,} arrays and objects (at most {max_containers:,})")
        if deep:
            raise JsonError(what,
                            f"arrays or objects nested more than {max_depth:,} levels deep")
        # (a big document: the numbers' hooks cost it a fifth of json.loads or more)
        decoder = _PLAIN if _plain_numbers(raw) else _DECODER
    else:
        decoder = _DECODER
    try:
        value = decoder.decode(data)
    except json.JSONDecodeError as exc:
        raise JsonError(what, f"not JSON: {exc}", exc.lineno) from None
    except RecursionError:
        raise JsonError(what, "arrays or objects nested too deeply") from None
    except _NumberRefused as exc:  # (the parse_* hooks above: their words, and its line)
        raise JsonError(what, str(exc), _refused_number_line(data)) from None
    except ValueError as exc:  # (a key twice, `_object`: its words)
        raise JsonError(what, str(exc)) from None
    if expect is not None and not isinstance(value, expect):
        expected = _EXPECTED.get(expect) or f"a {expect.__name__}"
        raise JsonError(what, f"a JSON {kind(value)}, not {expected}")
    return value


_EXPECTED: dict[type, str] = {dict: "an object", list: "an array", str: "a string"}


#: A JSON string (one not closed runs to the text's end: each character is read once, never
#: again from each quote inside it) or a number's token: what `_refused_number_line` reads.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|-?[0-9][0-9.eE+-]*|NaN|-?Infinity')


def _refused_number_line(text: str) -> int | None:
    """The line of the first number outside the strings of `text` that the parse_* hooks
    refuse (too many digits, past a float's range, NaN or Infinity): the decoder read the
    text in order and raised at the first. Only on an error's path."""
    for token in _TOKEN.finditer(text):
        number = token[0]
        if number[0] == '"':
            continue
        try:
            if number.lstrip("-")[0] in "NI":
                _constant(number)
            (_int if number.lstrip("-").isdigit() else _float)(number)
        except ValueError:
            return text.count("\n", 0, token.start()) + 1
    return None
