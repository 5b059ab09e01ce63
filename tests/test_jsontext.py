"""`pbsplug.jsontext`: JSON another party wrote, read as json.loads reads it, or refused in
one line naming what was read and what is wrong."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbsplug import jsontext
from pbsplug.jsontext import MAX_CONTAINERS, MAX_DEPTH, JsonError, loads


@pytest.mark.parametrize("data", [
    b'{"a": 1, "b": [2.5, -3, 1e300], "c": null, "d": "\\u00e9", "e": true}',
    b'\xef\xbb\xbf{"a": 1}', '{"a": 1}'.encode("utf-16"), '{"a": 1}'.encode("utf-16-le"),
    '{"a": 1}'.encode("utf-32-be"), bytearray(b"[1]"), '{"\u00e9": "\ud800"}', " 7 ",
    b'{"x": %s}' % (b"9" * 1000), b"-%s" % (b"9" * 1000),
])
def test_what_json_loads_reads_is_read_alike(data):
    assert loads(data, "it") == json.loads(data)


@pytest.mark.parametrize("data, why", [
    (b"[" * 100_000, "arrays or objects nested too deeply"),
    ("[" * 100_000, "arrays or objects nested too deeply"),
    (b"[1, %s]" % (b"9" * 1001), "a number of 1,001 digits (at most 1,000)"),
    (b"-%s" % (b"9" * 5000), "a number of 5,000 digits (at most 1,000)"),
    (b"[NaN]", "NaN is not a JSON number"),
    (b"Infinity", "Infinity is not a JSON number"),
    (b"[-1e400]", "a number past a float's range (-1e400)"),
    (b'{"a": {"b": 1, "b": 1}}', 'the key "b" twice in one object'),
    (b'{"a": "\xff"}', "not UTF-8 text (byte 0xff at offset 7)"),
    (b'"\xed\xa0\x80"', "not UTF-8 text (byte 0xed at offset 1)"),  # (a lone surrogate)
    (b'\xef\xbb\xbf{"a": "\xff"}', "not UTF-8-SIG text (byte 0xff at offset 10)"),  # (a BOM)
    ('["\ud800"]'.encode("utf-16", "surrogatepass"), "not UTF-16 text (byte 0x00 at offset 6)"),
    (b"{x", "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
            "(char 1)"),
    (b"", "not JSON: Expecting value: line 1 column 1 (char 0)"),
    (b"[1] x", "not JSON: Extra data: line 1 column 5 (char 4)"),
])
def test_what_json_loads_fails_on_or_takes_wrongly_is_named(data, why):
    with pytest.raises(JsonError) as err:
        loads(data, "sinfo --json")
    assert (str(err.value), err.value.why) == (f"sinfo --json: {why}", why)
    assert isinstance(err.value, ValueError)


def test_the_type_and_the_size_are_the_callers():
    with pytest.raises(JsonError, match="^the record: a JSON array, not an object$"):
        loads(b"[1]", "the record", expect=dict)
    with pytest.raises(JsonError, match="^the record: a JSON null, not an array$"):
        loads("null", "the record", expect=list)
    with pytest.raises(JsonError, match=r"^the record: 11 bytes \(at most 10\)$"):
        loads(b"[" + b" " * 9 + b"]", "the record", max_bytes=10)
    assert loads(b"[" + b" " * 8 + b"]", "the record", expect=list, max_bytes=10) == []


def test_the_error_is_pickled_whole():
    """A plugin's worker process (multiprocessing, concurrent.futures) sends its caller the
    error it raised pickled: JsonError's own arguments, not ValueError's one line."""
    import pickle

    with pytest.raises(JsonError) as err:
        loads("[1,\n2", "the report")
    again = pickle.loads(pickle.dumps(err.value))
    assert (type(again), str(again), again.what, again.why, again.line) == (
        JsonError, str(err.value), "the report", err.value.why, 2)


@pytest.mark.parametrize("text, line", [
    ('{"a": "' + "9" * 2000 + '",\n "b": ' + "9" * 1001 + "}", 2),  # (not the string's digits)
    ('[1,\n2,\nNaN]', 3),
    ('["\\"1e999",\n\n -Infinity]', 3),  # (a string holding a quote, then a refused number)
    ("[1e400,\n 1e999]", 1),  # (the first refused, as the decoder reads them)
])
def test_a_refused_numbers_line_is_named(text, line):
    """A number refused names its line (kernel API 1.12), the one the decoder refused, not
    a digit string's before it: a site's `.CF` error points at it."""
    with pytest.raises(JsonError) as err:
        loads(text, "a.CF")
    assert err.value.line == line, err.value


def test_a_refusals_line_scan_reads_each_character_once():
    """The scan for a refused number's line ran on every refusal of the parse hooks (a key
    twice too), over the whole text, and from each quote of a string not closed again: a
    request of a key twice then 400 KB of escaped quotes held the root server's loop for
    minutes (8 MB: days). A key twice has no line; the scan is linear. (A hang guard, not a
    bound: the old scan took about 500 s here.)"""
    import signal

    def hung(_sig, _frame):
        raise AssertionError("the line scan went back over the text")

    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with pytest.raises(JsonError) as err:
            loads(('{"x": {"a": 1, "a": 1},\n "y": "' + '\\"' * 200_000).encode(), "req")
        assert (err.value.why, err.value.line) == ('the key "a" twice in one object', None)
        with pytest.raises(JsonError) as err:
            loads('["' + '\\"' * 200_000 + '",\n\n 1e999]', "req")
        assert err.value.line == 3
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def _nested(levels: int) -> str:
    return '{"a": ' * (levels - 1) + "[1]" + "}" * (levels - 1)


@pytest.mark.parametrize("levels", [101, 600, 900])
def test_nesting_the_decoder_reads_but_a_copy_cannot_is_refused(levels):
    """600 or 900 levels read (one stack frame a level), then a copy or a comparison of the
    value recursed past the interpreter's limit, in the reader's caller."""
    with pytest.raises(JsonError) as err:
        loads(_nested(levels).encode(), "the report", expect=dict)
    assert err.value.why == "arrays or objects nested more than 100 levels deep"


def test_the_depth_is_the_callers_and_brackets_in_strings_are_text():
    assert loads(_nested(100), "it") == json.loads(_nested(100))
    assert loads(json.dumps({"a": "[{" * 5000, "b": [[1]]}), "it") == {"a": "[{" * 5000,
                                                                       "b": [[1]]}
    with pytest.raises(JsonError, match="^it: arrays or objects nested more than 2 levels "
                                        "deep$"):
        loads('{"a": "[[[", "b": [[1]]}', "it", max_depth=2)
    assert loads("[[1], {}]", "it", max_depth=2) == [[1], {}]
    assert loads(_nested(900), "it", max_depth=1000) == json.loads(_nested(900))


def _branching(levels: int, side: int = 1) -> str:
    """`levels` deep or more, each level with arrays `side` deep beside the next: no long
    run of brackets, even once the innermost ones are taken away `side` times."""
    beside = "[" * side + "1" + "]" * side
    return f"[{beside}, " * (levels - 1) + "[1]" + "]" * (levels - 1)


def _depth(value: object) -> int:
    inner = value.values() if isinstance(value, dict) else value
    if not isinstance(value, (dict, list)):
        return 0
    return 1 + max((_depth(item) for item in inner), default=0)


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000, b"[" * 100_000 + b"]" * 100_000, _branching(100_000),
    '{"a": ' * 99_999 + "[1]" + "}" * 99_999, _branching(150), _branching(150).encode("utf-16"),
], ids=["str", "bytes", "branching", "objects", "branching 150", "utf-16"])
def test_nesting_past_the_limit_is_refused_before_decoding(text):
    """Counted from the text's brackets, not walked after decoding (which cost a big report
    a third to a half of what json.loads costs): nested 100,000 deep, its pairs closed,
    it was the decoder's RecursionError ("nested too deeply"); now it is said as any
    nesting past the limit is."""
    with pytest.raises(JsonError) as err:
        loads(text, "the report")
    assert err.value.why == "arrays or objects nested more than 100 levels deep"


@pytest.mark.parametrize("text, levels", [
    ('["\\"[[[", [[1]]]', 3),              # an escaped quote: the string goes on
    ('["\\\\", [[1]]]', 3),              # an escaped backslash: the string ends
    ('["\\\\\\"[[", "]]]\\\\"]', 1),  # both, brackets in strings only
    ('{"\\u005b\\"": "[", "[": [{"": ""}]}', 3),
    ('["\ud800", [[1]]]', 3),               # (a str's lone surrogate)
    (_branching(40), 40), ('{"a": ' * 39 + "[1]" + "}" * 39, 40),
    (_branching(40, side=12), 51), (_branching(3, side=30), 32),
])
def test_the_depth_counted_is_the_values(text, levels):
    """`levels`: how deep the value is; each text read at that limit and refused at one
    less, in UTF-8 and UTF-16 bytes and as a str."""
    assert _depth(json.loads(text)) == levels
    lone = "\ud800" in text  # (a str's alone: no encoding's text)
    for data in (text,) if lone else (text, text.encode(), text.encode("utf-16")):
        assert loads(data, "it", max_depth=levels) == json.loads(text)
        with pytest.raises(JsonError, match=f"nested more than {levels - 1} levels deep$"):
            loads(data, "it", max_depth=levels - 1)


_MANY = ", ".join(["[]"] * 200)  # (past max_depth's brackets: read as a big document is)


@pytest.mark.parametrize("number, why", [
    ("9" * 1001, "a number of 1,001 digits (at most 1,000)"),
    ("-" + "9" * 5000, "a number of 5,000 digits (at most 1,000)"),
    ("1e400", "a number past a float's range (1e400)"),
    ("-2.5E+309", "a number past a float's range (-2.5E+309)"),
    ("1" + "0" * 309 + ".5", "a number past a float's range (1" + "0" * 39 + "...)"),
    ("NaN", "NaN is not a JSON number"),
])
def test_a_big_documents_numbers_are_refused_as_a_small_ones(number, why):
    """A big document's numbers are read without a Python call for each when none can be
    long or past a float's range (no run of 309 digits, no exponent): these must not be."""
    for text in (f"[{_MANY}, {number}]", f'{{"a": [{_MANY}], "b": {{"c": [{number}]}}}}'):
        with pytest.raises(JsonError) as err:
            loads(text.encode(), "the report")
        assert err.value.why == why


@pytest.mark.parametrize("numbers", [
    "1e5, -2.5E-3, 1E+2", "9" * 1000, "-" + "9" * 309, "1" + "0" * 308 + ".5",
    '"0e1 1E2 ' + "7" * 400 + '", 0.5, -0, 12',
])
def test_a_big_documents_numbers_are_read_as_json_loads_reads_them(numbers):
    text = f"[{_MANY}, {numbers}]"
    assert loads(text, "it") == json.loads(text)
    assert loads(text.encode("utf-16"), "it") == json.loads(text)


def test_a_limit_past_any_depth_costs_nothing_for_it():
    """The scan looked for a run of `max_depth` brackets; of 10**12, a terabyte's."""
    text = "[" * 300 + "]" * 300
    assert loads(text, "it", max_depth=10**12) == json.loads(text)
    with pytest.raises(JsonError, match=r"^it: 2,002 arrays and objects \(at most 10\)$"):
        loads("[" + "[]," * 2000 + "[]]", "it", max_depth=10**12, max_containers=10)


def test_more_arrays_and_objects_than_the_limit_are_refused_before_decoding():
    """60 MB of ``[],`` (a pbsuser hook's report may be 64 MiB) took the root server's
    reader 2.8 GB: each costs it 60 to 260 bytes for 2 to 7 of text."""
    with pytest.raises(JsonError) as err:
        loads(b"[" + b"{}," * MAX_CONTAINERS + b"{}]", "the report", expect=list)
    assert str(err.value) == "the report: 1,000,002 arrays and objects (at most 1,000,000)"
    with pytest.raises(JsonError, match=r"^it: 1,002 arrays and objects \(at most 1,000\)$"):
        loads("[" + "[]," * 1000 + "[]]", "it", max_containers=1000)
    assert loads("[" + "[]," * 998 + "[]]", "it", max_containers=1000) == [[]] * 999


@pytest.mark.parametrize("text, containers", [
    ('["[{", "\\\\", "\\"[{", "[\\\\", []]', 2),
    ('{"a\\\\\\"{": "\\\\\\\\", "[": [{}]}', 3),
    ('"' + "[{" * 1000 + '"', 0),
])
def test_brackets_in_strings_are_not_counted(text, containers):
    assert loads(text, "it", max_containers=containers) == json.loads(text)
    if containers:
        with pytest.raises(JsonError, match=f"^it: {containers} arrays and objects"):
            loads(text, "it", max_containers=containers - 1)


def test_a_typical_document_is_read_as_before():
    """A 2,000-node ``sinfo --json`` holds 12,000 arrays and objects."""
    nodes = [{"name": f"n{i}", "state": ["IDLE"], "cpus": {"set": True, "number": 8},
              "gres": "[{x", "features": [], "partitions": ["p"]} for i in range(2000)]
    text = json.dumps({"meta": {"plugin": {}}, "nodes": nodes})
    assert loads(text, "sinfo --json") == json.loads(text)
    assert loads(text, "sinfo --json", max_containers=10_004) == json.loads(text)
    with pytest.raises(JsonError, match=r"^sinfo --json: 10,004 arrays and objects \(at most"):
        loads(text, "sinfo --json", max_containers=10_003)


@pytest.mark.parametrize("text, why", [
    ('["[[[[' + "\\" * 5, "Unterminated string starting at"),  # (a lone one last)
    ('["[[[[\\"]', "Unterminated string starting at"),
])
def test_a_string_not_closed_is_the_decoders_to_name(text, why):
    """The count's pass takes a string not closed to the text's end (one pass, linear)."""
    with pytest.raises(JsonError, match=f"^it: not JSON: {why}"):
        loads(text, "it", max_containers=1)


def test_plugins_have_it_as_pbsplug_jsontext_at_kernel_api_1_10():
    """Public API (a plugin's `pbsplug.jsontext.loads` after `import pbsplug` alone), in a
    fresh interpreter: here the runner has imported it already."""
    import subprocess
    import sys

    code = ("import pbsplug; assert 'jsontext' in pbsplug.__all__; "
            "print(pbsplug.KERNEL_API >= (1, 10), pbsplug.jsontext.loads('[1]', 'it'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "True [1]\n", "")


# A differential fuzz: `loads` against a plain reference (json.loads with hooks that refuse
# what `loads` must refuse, and a recursive walk of what it read for depth and count), over
# generated documents and text around them. (Run once against the jsontext before its scan,
# c0a60c2, too, with no difference in what either read or refused: not kept, as it needs
# the repository's history.)

class _Refused(Exception):
    pass


def _reference_int(text: str) -> int:
    if len(text.lstrip("-")) > 1000:
        raise _Refused(text)
    return int(text)


def _reference_float(text: str) -> float:
    if math.isinf(value := float(text)):
        raise _Refused(text)
    return value


def _reference_constant(name: str) -> None:
    raise _Refused(name)


def _reference_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise _Refused(pairs)
    return dict(pairs)


def _reference_shape(value: object, depth: int = 1) -> tuple[int, int]:
    """How deep `value` is and how many arrays and objects it holds, walked recursively."""
    if not isinstance(value, (dict, list)):
        return 0, 0
    deepest, count = depth, 1
    for item in value.values() if isinstance(value, dict) else value:
        inner, more = _reference_shape(item, depth + 1)
        deepest, count = max(deepest, inner), count + more
    return deepest, count


def _reference_value(data: str | bytes | bytearray) -> tuple[object] | None:
    """(the value,) json.loads reads from `data` and `loads` must read too, at limits past
    its depth and count; None for data `loads` must refuse whatever its limits."""
    if not isinstance(data, str):
        try:
            data = data.decode(json.detect_encoding(data))
        except UnicodeDecodeError:
            return None
    try:
        return (json.loads(data, parse_int=_reference_int, parse_float=_reference_float,
                           parse_constant=_reference_constant,
                           object_pairs_hook=_reference_object),)
    except (_Refused, ValueError, RecursionError):
        return None


def _outcome(module: Any, data: str | bytes | bytearray, max_depth: int,
             max_containers: int) -> str:
    """What `module.loads` made of `data`: "refused" (in one line), or the value's repr
    (which tells -0.0 from 0.0)."""
    try:
        value = module.loads(data, "it", max_depth=max_depth, max_containers=max_containers)
    except module.JsonError as exc:
        assert exc.why and "\n" not in str(exc), repr(str(exc))
        return "refused"
    return repr(value)


class _Text(str):
    """Text put into a generated document as it is (a number JSON writers do not write)."""


class _Object(list[tuple[str, object]]):
    """An object's (key, value) pairs, in order, a key perhaps twice."""


_CHARS = st.sampled_from('ab[]{}"\\/:, \t\n\x00\x1f0e9\u00e9\u2028\U0001f600\ud800\udc00')
_STRINGS = st.text(_CHARS, max_size=8) | st.sampled_from([
    "[" * 300, "\\" * 301 + '"[{', "{" * 2000 + '\\"', "\u00e9\U0001f600" * 500])
#: Numbers at the edges of what is refused, and those JSON writers do not write.
_EDGES = st.sampled_from([
    "-0", "-0.0", "0e0", "1E400", "-1e400", "1e-400", "-1e-400", "1.0e+1000", "1e308",
    "1.7976931348623158e308", "1.7976931348623159e308", "9" * 1000, "-" + "9" * 1000,
    "9" * 1001, "-" + "9" * 1001, "1." + "3" * 1001, "0." + "0" * 1001 + "1",
    "9" * 308 + ".9", "9" * 309, "-" + "9" * 309 + ".5", "2" + "0" * 308 + ".0", "NaN",
    "Infinity", "-Infinity",
]).map(_Text)
_NUMBERS = st.one_of(_EDGES, st.integers(-(10**25), 10**25), _EDGES,
                     st.integers(-(10**1002), 10**1002), _EDGES,
                     st.floats(allow_nan=False, allow_infinity=False))
_SCALARS = st.one_of(st.none(), st.booleans(), _NUMBERS, _STRINGS, _NUMBERS)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.lists(st.tuples(st.sampled_from(["a", "b", "[", '"', "\\"]) | _STRINGS, inner),
             max_size=4).map(_Object)), max_leaves=12)
#: Separators: JSON's whitespace, and what json.loads refuses as whitespace.
_SPACES = st.sampled_from(["", " ", "\t", "\r\n", " \n\t\r ", "\x0c", "\u00a0", "\x0b"])
_ENCODINGS = [None, "utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32",
              "utf-32-le", "utf-32-be"]


def _dump(value: object, draw: Any) -> str:
    """`value` as JSON text, the whitespace around its brackets and separators drawn."""
    def space() -> str:
        return draw(_SPACES) if draw(st.integers(0, 9)) == 0 else ""

    if isinstance(value, _Text):
        return str(value)
    if isinstance(value, _Object):
        return "{" + space() + ",".join(
            space() + json.dumps(key, ensure_ascii=draw(st.booleans())) + space() + ":" +
            space() + _dump(item, draw) + space() for key, item in value) + "}"
    if isinstance(value, list):
        return "[" + space() + ",".join(space() + _dump(item, draw) + space()
                                        for item in value) + "]"
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


@st.composite
def _documents(draw: Any) -> str:
    """A generated document (or a few numbers), perhaps nested in a chain of arrays and
    objects about the default limit deep, each array of it perhaps with a branch beside."""
    numbers = st.lists(_EDGES, min_size=1, max_size=2) | st.lists(_NUMBERS, max_size=3)
    text = _dump(draw(numbers | _VALUES), draw)
    chain = draw(st.sampled_from([0, 0, 0, 1, 9, 10, 11, 50, 98, 99, 100, 101, 130]))
    if chain:
        kinds = draw(st.lists(st.sampled_from(["[", '{"k":', '{"[":', '{"\\"[":']),
                              min_size=1, max_size=3))
        beside = draw(st.sampled_from(["", "[[1]],", '"]]",', "{},"]))
        opened = [kinds[level % len(kinds)] for level in range(chain)]
        text = ("".join(("[" + beside if opens == "[" else opens) for opens in opened) + text +
                "".join("]" if opens == "[" else "}" for opens in reversed(opened)))
    return text


#: Pieces of text that move where a scan of the brackets may think a string is.
_PIECES = st.sampled_from([
    "[", "]", "{", "}", '"', "\\", '\\"', "\\\\", "\\u005b", "\\u0022", "\\u005c", ":", ",",
    "0", "-", "e", ".", "1e400", "NaN", " ", "\x0c", "\u00a0", '"["', '"\\\\"', '"\\"["',
    '"[\\\\\\"["', "[[[", "]]]", "\ud83d", "\ude00"])


@st.composite
def _texts(draw: Any) -> str:
    """A generated document with pieces put in, taken out or moved: most are not JSON."""
    text = draw(_documents())
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        change = draw(st.sampled_from(["put", "cut", "split"]))
        if change == "put":
            text = text[:at] + draw(_PIECES) + text[at:]
        elif change == "cut":
            text = text[:at] + text[at + draw(st.integers(1, 3)):]
        else:
            text = text[at:] + text[:at]
    return text


def _check_alike(text: str) -> None:
    """`loads` reads `text` (a str, or bytes in each encoding) as the reference does, at the
    default limits, at 0 and 1, and at limits at
    the document's own depth and count and under them; and beside 101 empty arrays, past
    the default depth's brackets (scanned, its numbers read without a call each)."""
    beside = "[" + "[], " * 101 + text + "]"
    for encoding, whole in itertools.product(_ENCODINGS, (text, beside)):
        data: str | bytes | bytearray = whole
        if encoding is not None:  # (UTF-8 bytes of the bare text as a bytearray)
            raw = whole.encode(encoding, "surrogatepass")
            data = bytearray(raw) if encoding == "utf-8" and whole is text else raw
        expected = _reference_value(data)
        deepest, count = _reference_shape(expected[0]) if expected else (50, 50)
        for max_depth, max_containers in (
                (MAX_DEPTH, MAX_CONTAINERS), (0, MAX_CONTAINERS), (1, MAX_CONTAINERS),
                (MAX_DEPTH, 0), (MAX_DEPTH, 1), (deepest, MAX_CONTAINERS),
                (max(0, deepest - 1), MAX_CONTAINERS), (MAX_DEPTH, count),
                (MAX_DEPTH, max(0, count - 1)), (deepest, count),
                (max(0, deepest - 2), max(0, count - 2))):
            reference = ("refused" if expected is None or deepest > max_depth or
                         count > max_containers else repr(expected[0]))
            now = _outcome(jsontext, data, max_depth, max_containers)
            assert now == reference, (data, max_depth, max_containers, now, reference)


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=_documents())
def test_documents_are_read_or_refused_as_the_reference_does(text):
    _check_alike(text)


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=_texts())
def test_text_about_documents_is_read_or_refused_as_the_reference_does(text):
    _check_alike(text)
