"""Standing reservations' recurrence rules (``pbs_rsub -r``): the iCalendar RRULE parts
OpenPBS 23.06 takes, expanded with the standard library.

OpenPBS 23.06 (checked; it reads the rule with libical) takes ``FREQ`` (SECONDLY to YEARLY)
with exactly one of ``COUNT`` and ``UNTIL``, and ``INTERVAL``, ``BYDAY`` (``MO,WE``, or
``1MO`` in a MONTHLY or YEARLY rule), ``BYHOUR``, ``BYMONTH`` and ``WKST``; names and values
in any case, a trailing ``;``. It refuses ``BYSECOND``, ``BYMINUTE``, ``BYMONTHDAY``,
``BYYEARDAY``, ``BYWEEKNO``, ``BYSETPOS``, a negative ``BYDAY``, any other part, an
``RRULE:`` prefix, a blank, ``COUNT`` or ``INTERVAL`` below 1, both ``COUNT`` and ``UNTIL``
(``Undefined iCalendar syntax``, 15133) and neither (15134). An occurrence lasts at most its
FREQ's unit (1 s, 1 min, 1 h, 24 h, 7 days, 30 days; YEARLY 30 * 365 days, PBS's figure:
15126-15132) and no longer than the shortest gap between two occurrences (15133).

The first occurrence is the reservation's own start (DTSTART); the others are what the rule
makes after it, in the wall-clock time of ``PBS_TZID`` (an hour that a clock change skips
is the hour after). python-dateutil's ``rrule`` would do the expansion; this subset is
small enough to write here, with no dependency a site must install.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

PBSE_BAD_RRULE_SYNTAX = 15133
PBSE_BAD_RRULE_SYNTAX2 = 15134
PBSE_BAD_TZ = 15135
SYNTAX = "Undefined iCalendar syntax"
SYNTAX2 = "Undefined iCalendar syntax. A valid COUNT or UNTIL is required"

#: FREQ -> (the longest an occurrence may last, seconds; its error code; its unit's words).
FREQS = {
    "SECONDLY": (1, 15132, "1 second"), "MINUTELY": (60, 15131, "1 minute"),
    "HOURLY": (3600, 15130, "1 hour"), "DAILY": (86400, 15129, "24 hours"),
    "WEEKLY": (7 * 86400, 15128, "1 week"), "MONTHLY": (30 * 86400, 15127, "1 month"),
    "YEARLY": (30 * 365 * 86400, 15126, "1 year"),
}
DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
#: Occurrences a rule may make: a SECONDLY rule UNTIL the year 9999 would make billions.
MAX_OCCURRENCES = 100_000
#: Seconds, minutes, hours or days a rule's occurrences may take to find, at most.
MAX_STEPS = 1_000_000
_REFUSED = {"BYSECOND", "BYMINUTE", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYSETPOS"}
_DAY = re.compile(r"\+?([0-9]{1,2})?(MO|TU|WE|TH|FR|SA|SU)")
_UNTIL = re.compile(r"([0-9]{8})(?:T([0-9]{6})(Z?))?")


class RuleError(ValueError):
    """A rule PBS refuses: its code and words."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class Rule:
    freq: str
    interval: int = 1
    count: int | None = None
    until: datetime | None = None  # (naive wall-clock time, or aware when it ended in Z)
    byday: list[tuple[int | None, int]] = field(default_factory=list)
    byhour: list[int] = field(default_factory=list)
    bymonth: list[int] = field(default_factory=list)
    wkst: int = 0


def zone(name: object) -> ZoneInfo:
    """PBS_TZID's zone (`RuleError` 15135 for one not known here)."""
    try:
        if not isinstance(name, str) or not name or name.startswith("/") or ".." in name:
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise RuleError(PBSE_BAD_TZ, "Unrecognized PBS_TZID environment variable") from None


def _number(text: str, low: int, high: int) -> int:
    # (ASCII digits: `isdigit` takes ``²``, which int() refuses; a rule holds too few
    # characters for int()'s limit of 4300 digits)
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
        raise RuleError(PBSE_BAD_RRULE_SYNTAX, SYNTAX)
    return int(text)


def parse(text: object) -> Rule:
    """The rule, or `RuleError` as OpenPBS 23.06 refuses it."""
    if not isinstance(text, str) or len(text) > 1024:
        raise RuleError(PBSE_BAD_RRULE_SYNTAX, SYNTAX)
    parts = text.split(";")
    if parts and parts[-1] == "":
        parts.pop()  # (a trailing ';' is taken)
    seen: dict[str, str] = {}
    for part in parts:
        name, eq, value = part.partition("=")
        name, value = name.upper(), value.upper()
        if not eq or not value or name in seen or name in _REFUSED or name not in (
                "FREQ", "COUNT", "UNTIL", "INTERVAL", "BYDAY", "BYHOUR", "BYMONTH", "WKST"):
            raise RuleError(PBSE_BAD_RRULE_SYNTAX, SYNTAX)
        seen[name] = value
    if seen.get("FREQ") not in FREQS:
        raise RuleError(PBSE_BAD_RRULE_SYNTAX, SYNTAX)
    rule = Rule(seen["FREQ"])
    if "COUNT" in seen and "UNTIL" in seen:
        raise RuleError(PBSE_BAD_RRULE_SYNTAX, SYNTAX)
    if "COUNT" in seen:
        rule.count = _number(seen["COUNT"], 1, MAX_OCCURRENCES)
    elif "UNTIL" in seen:
        found = _UNTIL.fullmatch(seen["UNTIL"])
        try:
            if not found:
                raise ValueError(seen["UNTIL"])
            until = datetime.strptime(found.group(1) + (found.group(2) or "000000"),
                                      "%Y%m%d%H%M%S")
        except ValueError:
            raise RuleError(PBSE_BAD_RRULE_SYNTAX, SYNTAX) from None
        rule.until = until.replace(tzinfo=ZoneInfo("UTC")) if found.group(3) else until
    else:
        raise RuleError(PBSE_BAD_RRULE_SYNTAX2, SYNTAX2)
    if "INTERVAL" in seen:
        rule.interval = _number(seen["INTERVAL"], 1, 10_000)
    if "WKST" in seen:
        if seen["WKST"] not in DAYS:
            raise RuleError(PBSE_BAD_RRULE_SYNTAX, SYNTAX)
        rule.wkst = DAYS.index(seen["WKST"])
    for day in seen.get("BYDAY", "").split(",") if "BYDAY" in seen else ():
        found = _DAY.fullmatch(day)
        ordinal = int(found.group(1)) if found and found.group(1) else None
        if not found or ordinal == 0 or (ordinal is not None and (
                rule.freq not in ("MONTHLY", "YEARLY") or ordinal > 53)):
            raise RuleError(PBSE_BAD_RRULE_SYNTAX, SYNTAX)
        rule.byday.append((ordinal, DAYS.index(found.group(2))))
    if "BYHOUR" in seen:
        rule.byhour = sorted({_number(h, 0, 23) for h in seen["BYHOUR"].split(",")})
    if "BYMONTH" in seen:
        rule.bymonth = sorted({_number(m, 1, 12) for m in seen["BYMONTH"].split(",")})
    return rule


def _days_of(year: int, month: int | None, byday: list[tuple[int | None, int]],
             known: dict[tuple[int, int], list[int]]) -> list[tuple[int, int, int]]:
    """The dates of a month (or, `month` None, of a year) that `byday` names: every such
    weekday, or its n-th (``1MO``). Which days of a period those are depends only on the
    weekday it starts on and its length, kept in `known` (one rule's): each period looked
    at the weekday of each of its days once for each of the rule's days, so that a raw
    MONTHLY rule of 247 ``6MO`` (none in any month) held the one-threaded server 257 s,
    walking every month up to the year 9999."""
    first = date(year, month or 1, 1)
    length = calendar.monthrange(year, month)[1] if month else 365 + calendar.isleap(year)
    key = (first.weekday(), length)
    offsets = known.get(key)
    if offsets is None:
        days: set[int] = set()
        for ordinal, weekday in byday:
            day = (weekday - key[0]) % 7
            if ordinal is None:
                days.update(range(day, length, 7))
            elif day + 7 * (ordinal - 1) < length:
                days.add(day + 7 * (ordinal - 1))
        offsets = known[key] = sorted(days)
    base = first.toordinal()
    return [(d.year, d.month, d.day) for d in (date.fromordinal(base + o) for o in offsets)]


def _candidates(rule: Rule, first: datetime) -> Iterator[datetime]:
    """Wall-clock times the rule makes, period by period, in order (some may be before
    `first`); ends once past the year 9999."""
    hours = rule.byhour if rule.freq in ("DAILY", "WEEKLY", "MONTHLY", "YEARLY") else []

    def at(dates: list[tuple[int, int, int]]) -> list[datetime]:
        out = []
        for y, m, d in dates:
            for hour in hours or [first.hour]:
                out.append(datetime(y, m, d, hour, first.minute, first.second))
        return sorted(out)

    step = rule.interval
    known: dict[tuple[int, int], list[int]] = {}  # (`_days_of`)
    if rule.freq == "YEARLY":
        for year in range(first.year, 10000, step):
            if rule.byday:
                dates = [d for m in rule.bymonth for d in _days_of(year, m, rule.byday, known)] \
                    if rule.bymonth else _days_of(year, None, rule.byday, known)
            else:
                dates = [(year, m, first.day) for m in rule.bymonth or [first.month]
                         if first.day <= calendar.monthrange(year, m)[1]]
            yield from at(sorted(dates))
    elif rule.freq == "MONTHLY":
        index = first.year * 12 + first.month - 1
        while index // 12 < 10000:
            year, month = divmod(index, 12)
            month += 1
            if not rule.bymonth or month in rule.bymonth:
                if rule.byday:
                    dates = _days_of(year, month, rule.byday, known)
                else:
                    dates = [(year, month, first.day)] if \
                        first.day <= calendar.monthrange(year, month)[1] else []
                yield from at(dates)
            index += step
    elif rule.freq == "WEEKLY":
        week = first.date() - timedelta(days=(first.weekday() - rule.wkst) % 7)
        days = {d for _, d in rule.byday} if rule.byday else {first.weekday()}
        offsets = sorted((d - rule.wkst) % 7 for d in days)  # (from the week's first day)
        looked = 0  # days: BYMONTH=2 makes nothing in most weeks (4 s to the year 9999)
        while week.year < 10000:
            if looked >= MAX_STEPS:
                raise RuleError(PBSE_BAD_RRULE_SYNTAX, f"{SYNTAX}: its occurrences take "
                                f"more than {MAX_STEPS} days to find")
            looked += 7
            dates = []
            for offset in offsets:
                try:
                    day = week + timedelta(days=offset)
                except OverflowError:  # (the year 9999's last week: no day after it)
                    break
                if not rule.bymonth or day.month in rule.bymonth:
                    dates.append((day.year, day.month, day.day))
            yield from at(dates)
            try:
                week += timedelta(weeks=step)
            except OverflowError:
                return
    else:
        unit = {"DAILY": timedelta(days=1), "HOURLY": timedelta(hours=1),
                "MINUTELY": timedelta(minutes=1), "SECONDLY": timedelta(seconds=1)}[rule.freq]
        moment = first
        weekdays = {d for _, d in rule.byday}
        for _ in range(MAX_STEPS):  # (SECONDLY;BYMONTH=2 in December: millions of seconds)
            if moment.year >= 10000:
                return
            keep = (not rule.bymonth or moment.month in rule.bymonth) and (
                not weekdays or moment.weekday() in weekdays)
            if rule.freq == "DAILY":
                if keep:
                    yield from at([(moment.year, moment.month, moment.day)])
            elif keep and (not rule.byhour or moment.hour in rule.byhour):
                yield moment
            try:
                moment += unit * step
            except OverflowError:
                return
        units = {"DAILY": "days", "HOURLY": "hours", "MINUTELY": "minutes"}
        raise RuleError(PBSE_BAD_RRULE_SYNTAX, f"{SYNTAX}: its occurrences take more than "
                        f"{MAX_STEPS} {units.get(rule.freq, 'seconds')} to find")


def occurrences(rule: Rule, start: int, tz: ZoneInfo) -> list[int]:
    """The occurrences' starts (epoch seconds): `start` first, then the rule's after it."""
    first = datetime.fromtimestamp(start, tz).replace(tzinfo=None)
    until = None
    if rule.until is not None:
        until = rule.until.timestamp() if rule.until.tzinfo is not None else \
            rule.until.replace(tzinfo=tz).timestamp()
    out = [start]
    limit = rule.count if rule.count is not None else MAX_OCCURRENCES + 1
    for moment in _candidates(rule, first):
        if len(out) >= limit:
            break
        if moment <= first:
            continue
        when = int(moment.replace(tzinfo=tz).timestamp())
        if until is not None and when > until:
            break
        if when > out[-1]:  # (a clock change may fold two wall-clock times into one)
            out.append(when)
    if len(out) > MAX_OCCURRENCES:
        raise RuleError(PBSE_BAD_RRULE_SYNTAX, f"{SYNTAX}: more than {MAX_OCCURRENCES} "
                        "occurrences")
    return out


def checked(text: object, start: int, duration: int, tz_name: object) -> tuple[Rule, list[int]]:
    """The rule and its occurrences' starts, or `RuleError` as OpenPBS 23.06 refuses them:
    the rule, the zone, then the duration against FREQ and the gaps."""
    rule = parse(text)
    tz = zone(tz_name)
    starts = occurrences(rule, start, tz)
    longest, code, unit = FREQS[rule.freq]
    if duration > longest:
        raise RuleError(code, f"{rule.freq} recurrence duration cannot exceed {unit}")
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False) if b > a]
    if len(starts) > 1 and gaps and duration > min(gaps):
        raise RuleError(PBSE_BAD_RRULE_SYNTAX, SYNTAX)
    return rule, starts
