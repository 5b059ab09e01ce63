"""``pbsplug tracejob``: one job's lines from the engine's server log and accounting log,
in time order, as OpenPBS 23.06's tracejob prints them (checked):

```

Job: 3.host

12/05/2026 15:50:36  S    Job Queued at request of root@host, owner = root@host, ...
12/05/2026 15:50:36  A    user=root group=root project=_pbs_project_default ...
```

``S`` marks a server log line, ``A`` an accounting record (its key=value part). The engine
has no MoM logs, and its `default` scheduler logs into the server log, so ``-l`` and ``-m``
leave nothing out. Standard library only: the command starts without the kernel.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

USAGE = """\
USAGE: tracejob [-a|s|l|m|v] [-w size] [-p path] [-n days] [-f filter_type] job_identifier...
   -a : leave out the accounting log
   -s : leave out the server log
   -l, -m : accepted (the engine has no scheduler or MoM log of its own to read)
   -v : accepted (every log tracejob cannot read is reported)
   -c count : a message seen count times or more is printed once, at its latest [15]
   -z : print every message (or, given twice, filter again)
   -f type : leave out server log lines of this event type (error, system, admin, job,
        job_usage, security, sched, debug, debug2, resv, debug3, debug4, force, or a
        number); may be given more than once
   -n days : look at the logs of this many days, today's included [1]; at most 36500
   -p path : the engine's home [$PBSPLUG_HOME or its default]
   -w cols : wrap messages at this width [the terminal's; none when not a terminal]
"""

#: -f's names for the server log's event types (its second field, in hex).
FILTERS = {"error": 0x0001, "system": 0x0002, "admin": 0x0004, "job": 0x0008,
           "job_usage": 0x0010, "security": 0x0020, "sched": 0x0040, "debug": 0x0080,
           "debug2": 0x0100, "resv": 0x0200, "debug3": 0x0400, "debug4": 0x0800,
           "force": 0x8000}
#: A message seen this many times is printed once, at its latest (PBS's default; -c).
EXCESSIVE = 15
#: Where the message starts on a line: the date (19), two blanks, the source, four blanks.
INDENT = 26
_STAMP = re.compile(r"^(\d\d)/(\d\d)/(\d{4}) (\d\d:\d\d:\d\d)\Z", re.ASCII)
#: A log line longer than this is cut when read (the engine writes none so long).
MAX_LINE = 1 << 20
#: The most days -n looks back: a hundred years of daily logs. PBS's tracejob takes any
#: number and tries each day's file (``-n 99999999`` ran for minutes; checked).
MAX_DAYS = 36_500


class Usage(Exception):
    """Bad options: the usage goes to standard output and the exit status is 1, as PBS's."""


class Refused(Exception):
    """An option's value tracejob will not act on: one line, exit status 1."""


@dataclass
class Options:
    ids: list[str]
    home: Path
    days: int = 1
    filters: int = 0
    accounting: bool = True
    server: bool = True
    verbose: bool = False
    width: int | None = None
    excessive: bool = True
    count: int = EXCESSIVE


@dataclass(frozen=True)
class Entry:
    when: tuple[str, str, str, str]  # (year, month, day, time): sorts in time order
    stamp: str
    source: str
    message: str


def parse(args: list[str], home: Path, width: int | None) -> Options:
    """tracejob's options (getopt), or Usage, or Refused (-n past `MAX_DAYS`). `width`:
    the terminal's, None when standard output is not one (no wrapping then, as PBS's)."""
    import getopt

    try:
        opts, ids = getopt.getopt(args, "asc:f:lmn:p:vw:z")
    except getopt.GetoptError as exc:
        opt = exc.opt
        what = (f"invalid option -- '{opt}'" if exc.msg.endswith("not recognized") else
                f"option requires an argument -- '{opt}'")
        raise Usage(what) from None
    o = Options(ids=ids, home=home, width=width)
    for opt, value in opts:
        if opt in ("-n", "-c", "-w"):
            if not re.fullmatch(r"-?\d{1,9}", value, re.ASCII):
                raise Usage(None)
            number = int(value)
            if opt == "-n":
                if number > MAX_DAYS:  # (0 and less look at no log, as PBS's)
                    raise Refused(f"-n {value}: more days than {MAX_DAYS} (a hundred "
                                  f"years of logs)")
                o.days = number
            elif opt == "-c":
                o.count = number
            else:
                o.width = number
        elif opt == "-f":
            o.filters |= _filter(value)
        elif opt == "-p":
            o.home = Path(value)
        elif opt == "-a":
            o.accounting = False
        elif opt == "-s":
            o.server = False
        elif opt == "-v":
            o.verbose = True
        elif opt == "-z":
            o.excessive = not o.excessive
    if not ids:
        raise Usage(None)
    return o


def _filter(value: str) -> int:
    if value in FILTERS:
        return FILTERS[value]
    try:
        number = int(value, 0)
    except ValueError:
        raise Usage(None) from None
    if not 0 < number <= 0xFFFF:
        raise Usage(None)
    return number


def full_id(job_id: str, host: str) -> str | None:
    """`12`, `12.host`, `12@host` or `12.host@host` as the engine names the job in its
    logs (`12.host`), or None when it is not a job id."""
    m = re.fullmatch(r"(\d+)(\[\d*\])?(\.[^@\s;]+)?(@[^@\s;]+)?", job_id, re.ASCII)
    if m is None:
        return None
    return f"{m.group(1)}{m.group(2) or ''}{m.group(3) or '.' + host}"


def _day_files(folder: Path, days: int, now: float) -> list[Path]:
    return [folder / time.strftime("%Y%m%d", time.localtime(now - 86400 * back))
            for back in range(days - 1, -1, -1)]


def _lines(path: Path, problems: list[str]) -> Iterator[str]:
    """The lines of one log file, opened through no link; a problem other than a missing
    file is noted."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY |
                     os.O_NONBLOCK)
    except FileNotFoundError:
        return
    except OSError as exc:
        problems.append(f"{path}: {exc.strerror}")
        return
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            problems.append(f"{path}: not a plain file")
            return
        while raw := file.readline(MAX_LINE):
            yield raw.decode("utf-8", "replace").rstrip("\r\n")


def _when(stamp: str) -> tuple[str, str, str, str] | None:
    m = _STAMP.match(stamp)
    return None if m is None else (m.group(3), m.group(1), m.group(2), m.group(4))


def entries(o: Options, job_id: str, now: float, problems: list[str]) -> list[Entry]:
    """The job's server log lines (less the filtered types) and accounting records."""
    found: list[Entry] = []
    if o.server:
        for path in _day_files(o.home / "server_logs", o.days, now):
            for line in _lines(path, problems):
                parts = line.split(";", 5)
                if len(parts) < 6 or parts[4] != job_id:
                    continue
                when = _when(parts[0])
                try:
                    kind = int(parts[1], 16)
                except ValueError:
                    continue
                if when is None or kind & o.filters:
                    continue
                found.append(Entry(when, parts[0], "S", parts[5]))
    if o.accounting:
        for path in _day_files(o.home / "server_priv" / "accounting", o.days, now):
            for line in _lines(path, problems):
                parts = line.split(";", 3)
                if len(parts) < 4 or parts[2] != job_id:
                    continue
                when = _when(parts[0])
                if when is not None:
                    found.append(Entry(when, parts[0], "A", parts[3]))
    found.sort(key=lambda e: e.when)  # (stable: a second's lines keep their order)
    return found


def without_excessive(found: list[Entry], count: int) -> list[Entry]:
    """A message (and source) seen `count` times or more is kept at its latest only."""
    total: dict[tuple[str, str], int] = {}
    for e in found:
        total[(e.source, e.message)] = total.get((e.source, e.message), 0) + 1
    left = dict(total)
    kept = []
    for e in found:
        key = (e.source, e.message)
        left[key] -= 1
        if 0 < count <= total[key] and left[key] > 0:
            continue  # (an earlier one of an excessive message)
        kept.append(e)
    return kept


def line_of(e: Entry, width: int | None) -> str:
    """`e` as tracejob prints it, its message wrapped at blanks to `width` columns under
    itself (no wrapping without a width)."""
    head = f"{e.stamp}  {e.source}    "
    if width is None or width <= INDENT:
        return head + e.message
    out, line = [], head
    for word in e.message.split(" "):
        if len(line) > INDENT and len(line) + 1 + len(word) > width:
            out.append(line)
            line = " " * INDENT + word
        else:
            line = line + word if len(line) == INDENT else f"{line} {word}"
    out.append(line.rstrip() if line.strip() else line)
    return "\n".join(out)


def main(args: list[str], home: Path, host: str) -> int:
    width = None
    if sys.stdout.isatty():
        try:
            width = os.get_terminal_size().columns
        except OSError:
            width = 80
    try:
        o = parse(args, home, width)
    except Usage as exc:
        if exc.args and exc.args[0]:
            print(f"tracejob: {exc.args[0]}", file=sys.stderr)
        sys.stdout.write(USAGE)
        return 1
    except Refused as exc:
        print(f"tracejob: {exc}", file=sys.stderr)
        return 1
    status = 0
    now = time.time()
    for given in o.ids:
        job_id = full_id(given, host)
        problems: list[str] = []
        found = entries(o, job_id, now, problems) if job_id is not None else []
        for problem in problems:  # (a log tracejob may not read: say so, always)
            print(f"tracejob: {problem}", file=sys.stderr)
        if o.excessive:
            found = without_excessive(found, o.count)
        if not found:
            days = "day" if o.days == 1 else "days"
            print(f"\ntracejob: Couldn't find Job Id {job_id or given} in logs of past "
                  f"{o.days} {days}\n", file=sys.stderr)
            status = 1
            continue
        print(f"\nJob: {job_id}\n")
        for e in found:
            print(line_of(e, o.width))
    return status
