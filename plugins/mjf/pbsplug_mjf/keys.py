"""The keys of HSF-TN-2016-02 and how their values are written and read.

One file per key, named in ``[a-z0-9_]``, holding the value and one newline. Times and sizes
are integers (seconds, bytes); only the two HS06 ratings may be decimals; ``job_id`` is
printable ASCII without whitespace. A key whose value is unknown is absent, never 0.
"""

from __future__ import annotations

import math
import re

MACHINE_KEYS = ("total_cpu", "hs06", "shutdowntime", "grace_secs")
JOB_KEYS = ("allocated_cpu", "hs06_job", "shutdowntime_job", "grace_secs_job", "jobstart_secs",
            "job_id", "wall_limit_secs", "cpu_limit_secs", "max_rss_bytes", "max_swap_bytes",
            "scratch_limit_bytes")
#: Keys whose value may change while a job runs: readers fetch them again on every read.
DYNAMIC_KEYS = frozenset({"shutdowntime", "shutdowntime_job"})
DECIMAL_KEYS = frozenset({"hs06", "hs06_job"})
TEXT_KEYS = frozenset({"job_id"})

KEY_NAME = re.compile(r"[a-z0-9_]+")
_INTEGER = re.compile(r"-?[0-9]+")  # glideinWMS accepts exactly ^-?[0-9]+$
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_PRINTABLE = re.compile(r"[!-~]+")

Value = int | float | str


def format_value(key: str, value: Value) -> str:
    """The file's content for `key`: the value and one newline. Refuses a value the note does
    not allow (a float time, a job id with a space), so no reader is ever handed one."""
    if key in DECIMAL_KEYS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key}: {value!r} is not a number")
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an int beyond any float
            finite = False
        if not finite:
            raise ValueError(f"{key}: {value!r} is not a finite rating")
        text = f"{value:.3f}".rstrip("0").rstrip(".")
        if value <= 0 or text in ("0", "-0"):  # absent, never 0: a rating is > 0
            raise ValueError(f"{key}: {value!r} is not a rating > 0 to three decimals")
    elif key in TEXT_KEYS:
        text = str(value)
        if not _PRINTABLE.fullmatch(text):
            raise ValueError(f"{key}: {value!r} is not printable ASCII without whitespace")
    else:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{key}: {value!r} is not an integer")
        text = str(value)
    return text + "\n"


def parse_value(key: str, text: str) -> Value:
    """A key's typed value from its file's content (surrounding whitespace ignored).
    `ValueError` names the key and the text when it is not what the note defines."""
    text = text.strip()
    if key in TEXT_KEYS:
        if not _PRINTABLE.fullmatch(text):
            raise ValueError(f"{key}: {text!r} is not printable ASCII without whitespace")
        return text
    if key in DECIMAL_KEYS:
        if not _DECIMAL.fullmatch(text):
            raise ValueError(f"{key}: {text!r} is not a decimal number")
        return float(text)
    if not _INTEGER.fullmatch(text):
        raise ValueError(f"{key}: {text!r} is not an integer")
    return int(text)
