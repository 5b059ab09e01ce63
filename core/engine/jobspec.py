"""qsub: a command line and a script's ``#PBS`` directives, turned into the job to queue.

`parse_qsub` reads qsub's options as PBS reads them and returns a `JobRequest`: the job
attributes the server should store (PBS's names, as ``pbsplug.Job.to_dict()`` holds them), the
script, or the command of a ``qsub -- command args`` job. It does no I/O except reading the
script file it is given (or calling ``read_script`` for a script on standard input).

PBS checks a submission in two passes, and so does this module:

1. *Option syntax*, as each option is read (``-a``, ``-r``, ``-l`` and ``-W`` syntax, unknown
   options, misplaced operands). On the command line a failure prints the message and qsub's
   usage and exits 2; in a ``#PBS`` directive it prints the message, then
   ``qsub: directive error: <the directive's options>`` and exits 1.
2. *Attribute values*, once the command line, the directives and the defaults are merged:
   ``qsub: illegal -N value`` (usage, exit 2), ``qsub: Job name is too long`` (exit 2), and for
   a resource ``qsub: Illegal attribute or resource value Resource_List.walltime`` (PBSE_BADATVAL,
   15014; qsub exits with that code, so the shell sees 15014 % 256 = 166).

Precedence is PBS's: command-line options beat directives, directives beat the server's
``default_qsub_arguments``; within one level the last occurrence wins, except ``-l``, where a
directive (or default) adds a resource only if nothing before it named that resource.

Where the local engine departs from PBS it says so: X11 forwarding (``-X``) is refused with
PBSE_NOSUP (15029).
"""

from __future__ import annotations

import os
import re
import stat
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import values
from . import arrays, jobid

# -- PBS's error numbers (pbs_error.h) ------------------------------------------------------------
PBSE_IVALREQ = 15004     # Invalid request: a malformed command line
PBSE_BADATVAL = 15014    # Illegal attribute or resource value
PBSE_NOSUP = 15029       # No support for requested service
PBSE_BADSCRIPT = 15042   # qsub cannot access the script file
PBSE_JOBNBIG = 15173     # Job name is too long

#: The longest job name PBS accepts (PBS_MAXJOBNAME).
PBS_MAXJOBNAME = 236

#: qsub's usage text, printed after an option error (then qsub exits 2).
USAGE = (
    "usage: qsub [-a date_time] [-A account_string] [-c interval]\n"
    "\t[-C directive_prefix] [-e path] [-f ] [-h ] [-I [-X]] [-j oe|eo] [-J X-Y[:Z]]\n"
    "\t[-k keep] [-l resource_list] [-m mail_options] [-M user_list]\n"
    "\t[-N jobname] [-o path] [-p priority] [-P project] [-q queue] [-r y|n]\n"
    "\t[-R o|e|oe] [-S path] [-u user_list] [-W otherattributes=value...]\n"
    "\t[-v variable_list] [-V ] [-z] [script | -- command [arg1 ...]]\n"
    "       qsub --version"
)

#: The default directive prefix, used when neither ``-C`` nor $PBS_DPREFIX says otherwise.
DEFAULT_PREFIX = "#PBS"

#: Options that take an argument, and flags (qsub's getopt string on Linux).
_WITH_ARG = frozenset("aAcCeJjklmMNopPqrRSuvW")
_FLAGS = frozenset("fhIVXz")

# Precedence of where an option came from (PBS: CMDLINE, CMDLINE-1, CMDLINE-2).
_DEFAULTS, _DIRECTIVE, _CMDLINE = 1, 2, 3

#: Types of the resources PBS defines (the kernel's table, `pbsplug.values`); a custom
#: resource is a string unless `resource_types` says otherwise.
RESOURCE_TYPES = values.RESOURCE_TYPES

#: The dependency types of ``-W depend=`` (``on`` takes a count, the others job ids).
DEPEND_TYPES = values.DEPEND_TYPES

_NAME_CHARS = re.compile(r"^[A-Za-z0-9_.+-]+\Z")
_PROJECT_FORBIDDEN = set('/[]";:|<>+,?*')


class JobSpecError(Exception):
    """A submission qsub refuses: PBS's message, error number and exit status.

    ``message`` is what qsub prints on standard error (one or more lines, each starting with
    ``qsub:``); ``usage`` says whether qsub prints `USAGE` after it; ``status`` is qsub's exit
    status. ``str()`` gives the message without its leading ``qsub: `` so that a caller that
    prints ``f"qsub: {exc}"`` prints PBS's text; ``stderr`` is everything qsub would print.
    """

    def __init__(self, message: str, code: int, *, status: int = 2, usage: bool = False):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.usage = usage

    def __str__(self) -> str:
        return self.message.removeprefix("qsub: ")

    @property
    def stderr(self) -> str:
        return f"{self.message}\n{USAGE}" if self.usage else self.message


def _illegal(letter: str) -> JobSpecError:
    """``qsub: illegal -X value``: PBS prints its usage after it and exits 2."""
    return JobSpecError(f"qsub: illegal -{letter} value", PBSE_BADATVAL, status=2, usage=True)


def _bad_resource(name: str) -> JobSpecError:
    # qsub exits with the error number itself, which the shell sees modulo 256.
    return JobSpecError(f"qsub: Illegal attribute or resource value Resource_List.{name}",
                        PBSE_BADATVAL, status=PBSE_BADATVAL % 256)


class _OptionError(Exception):
    """An option-syntax error (pass 1); where it came from decides how it is reported."""

    def __init__(self, message: str, code: int = PBSE_BADATVAL, *, extra: str = ""):
        super().__init__(message)
        self.message = message
        self.code = code
        self.extra = extra    # PBS's parse-error detail for -l, printed after the message


@dataclass
class JobRequest:
    """What qsub sends the server.

    ``attrs``: the job's attributes (``Job_Name``, ``Resource_List``, ``Variable_List``, ...).
    ``script``: the job script, or None for a ``qsub -- command args`` job, whose command is
    ``argv``. ``server``: the server named in ``-q queue@server``, if any. ``quiet``: ``-z``
    (do not print the job id). ``block``: ``-W block=true`` (wait for the job and exit with
    its exit status). ``interactive``: ``-I`` (`pbsplug.engine.interactive`).
    """

    attrs: dict[str, Any]
    script: str | None = None
    argv: list[str] | None = None
    server: str | None = None
    quiet: bool = False
    block: bool = False
    interactive: bool = False


def _default_read_script() -> str:
    return sys.stdin.read()


# -- option parsing -------------------------------------------------------------------------------

def _getopt(args: Sequence[str]) -> tuple[list[tuple[str, str | None]], list[str], bool]:
    """qsub's getopt: options up to the first operand or ``--``; returns (options, operands,
    whether ``--`` ended the options)."""
    opts: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return opts, list(args[i + 1:]), True
        if not arg.startswith("-") or arg == "-":
            break
        j = 1
        while j < len(arg):
            letter = arg[j]
            if letter in _WITH_ARG:
                if j + 1 < len(arg):
                    value = arg[j + 1:]
                elif i + 1 < len(args):
                    i += 1
                    value = args[i]
                else:
                    raise _OptionError(f"qsub: option requires an argument -- '{letter}'",
                                       PBSE_IVALREQ)
                opts.append((letter, value))
                break
            if letter not in _FLAGS:
                raise _OptionError(f"qsub: invalid option -- '{letter}'", PBSE_IVALREQ)
            opts.append((letter, None))
            j += 1
        i += 1
    return opts, list(args[i:]), False


def _split_directive(text: str) -> list[str]:
    """A directive's words, as qsub splits them: whitespace separates, quotes group,
    a backslash escapes the next character."""
    words: list[str] = []
    word: list[str] = []
    in_word = False
    i = 0
    while i < len(text):
        c = text[i]
        if c in "\"'":
            end = text.find(c, i + 1)
            if end < 0:
                raise JobSpecError(f"qsub: unmatched {c}", PBSE_BADATVAL, status=1)
            word.append(text[i + 1:end])
            in_word = True
            i = end + 1
            continue
        if c == "\\" and i + 1 < len(text):
            word.append(text[i + 1])
            in_word = True
            i += 2
            continue
        if c.isspace():
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
        else:
            word.append(c)
            in_word = True
        i += 1
    if in_word:
        words.append("".join(word))
    return words


def _resource_items(text: str) -> list[tuple[str, str]]:
    """``-l`` items, parsed as PBS's set_resources: ``name=value`` separated by commas, a
    quoted value may hold commas; a name without ``=`` has the empty value."""
    items: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        start = i
        while i < n and text[i] not in "=,":
            i += 1
        if i == start:
            raise _OptionError("qsub: illegal -l value")
        name = text[start:i].split()[0] if text[start:i].strip() else ""
        value = ""
        if i < n and text[i] == "=":
            i += 1
            while i < n and text[i].isspace():
                i += 1
            chars: list[str] = []
            quote = ""
            while i < n:
                c = text[i]
                if not c.isprintable() and not c.isspace():
                    raise _OptionError("qsub: illegal -l value",
                                       extra=_parse_error("illegal character", text, i))
                if quote:
                    if c == quote:
                        quote = ""
                    elif c == "&":
                        raise _OptionError("qsub: illegal -l value",
                                           extra=_parse_error("illegal character", text, i))
                    else:
                        chars.append(c)
                elif c in "\"'":
                    quote = c
                elif c == "," or c.isspace():
                    break
                elif c == "&":
                    raise _OptionError("qsub: illegal -l value",
                                       extra=_parse_error("illegal character", text, i))
                else:
                    chars.append(c)
                i += 1
            if quote:
                raise _OptionError("qsub: illegal -l value",
                                   extra=_parse_error("no closing quote", text, i))
            value = "".join(chars)
        items.append((name, value))
        if i < n and text[i] == ",":
            i += 1
            if i == n:
                raise _OptionError("qsub: illegal -l value")
    return items


def _parse_error(what: str, text: str, offset: int) -> str:
    # PBS's pbs_prt_parse_err: after the message, the kind of error, the value, and a caret
    # under the offending character.
    return f"\n {what}:\n{text}\n{' ' * offset}^"


def _unquoted(text: str, split_at: str = "") -> list[str] | None:
    """`text` cut at each character of `split_at` outside quotes, with the quotes removed
    (what is between them kept as it is); None when a quote is never closed."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    for c in text:
        if quote:
            if c == quote:
                quote = ""
            else:
                current.append(c)
        elif c in "\"'":
            quote = c
        elif c in split_at:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    if quote:
        return None
    parts.append("".join(current))
    return parts


def _split_w(text: str) -> list[tuple[str, str]]:
    """``-W name=value[,name=value]``: a value runs to the last comma before the next
    ``name=``, so ``depend=afterok:1,afterany:2`` is one value. Quotes group."""
    text = text.lstrip()
    parts = _unquoted(text, split_at=",") if text else None
    if parts is None:
        raise _OptionError("qsub: illegal -W value")
    items: list[tuple[str, str]] = []
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip()
        if sep and key and not any(ch.isspace() for ch in key):
            items.append((key, value))
        elif items:
            # A comma inside a value (depend=afterok:1,afterany:2).
            items[-1] = (items[-1][0], f"{items[-1][1]},{part}")
        else:
            raise _OptionError("qsub: illegal -W value")
    return items


def cvtdate(text: str, now: float | None = None) -> int:
    """Seconds since the epoch for qsub's ``-a [[[[CC]YY]MM]DD]hhmm[.SS]`` (local time).

    An omitted part is the current one, unless the time it gives has passed: then the next
    larger part moves on (``-a 0900`` at 10:00 is 09:00 tomorrow). A two-digit year below 69
    is 20YY. Raises ValueError for anything else.
    """
    value = str(text)
    seconds = 0
    if "." in value:
        value, _, frac = value.partition(".")
        if len(frac) != 2 or not values.digits(frac) or int(frac) > 59:
            raise ValueError(f"bad seconds in {text!r}")
        seconds = int(frac)
    if not values.digits(value) or len(value) not in (4, 6, 8, 10, 12):
        raise ValueError(f"{text!r} is not [[[[CC]YY]MM]DD]hhmm[.SS]")
    local = time.localtime(time.time() if now is None else now)
    year, month, day = local.tm_year, local.tm_mon, local.tm_mday
    given_year = given_month = given_day = False
    digits = value
    if len(digits) == 12:
        year = int(digits[:2]) * 100 + int(digits[2:4])
        digits, given_year = digits[4:], True
    elif len(digits) == 10:
        yy = int(digits[:2])
        year = (1900 if yy > 68 else 2000) + yy
        digits, given_year = digits[2:], True
    if len(digits) == 8:
        month = int(digits[:2])
        if not 1 <= month <= 12:
            raise ValueError(f"bad month in {text!r}")
        if not given_year and month < local.tm_mon:
            year += 1
        digits, given_month = digits[2:], True
    if len(digits) == 6:
        day = int(digits[:2])
        if not 1 <= day <= 31:
            raise ValueError(f"bad day in {text!r}")
        if not given_month and day < local.tm_mday:
            month += 1
        digits, given_day = digits[2:], True
    hour, minute = int(digits[:2]), int(digits[2:4])
    if hour > 23 or minute > 59:
        raise ValueError(f"bad time of day in {text!r}")
    if not given_day and (hour, minute) <= (local.tm_hour, local.tm_min):
        day += 1
    # mktime normalises an overflowing day or month, as PBS relies on it to.
    return int(time.mktime((year, month, day, hour, minute, seconds, 0, 0, -1)))


# -- the submission being built -------------------------------------------------------------------

@dataclass
class _Pending:
    """Raw option values with where they came from, before pass 2 checks them."""

    values: dict[str, tuple[Any, int, str]] = field(default_factory=dict)
    resources: dict[str, tuple[str, int]] = field(default_factory=dict)
    w_attrs: dict[str, tuple[str, int]] = field(default_factory=dict)
    variables: tuple[dict[str, str], int] | None = None
    whole_env: int = 0
    destination: tuple[str, int] | None = None
    prefix: str | None = None
    quiet: bool = False
    block: tuple[bool, int] | None = None
    interactive: bool = False

    def set(self, attr: str, value: Any, level: int, letter: str) -> None:
        old = self.values.get(attr)
        if old is None or level >= old[1]:
            self.values[attr] = (value, level, letter)


class _Parser:
    def __init__(self, env: Mapping[str, str], now: float | None):
        self.env = env
        self.now = now
        self.pending = _Pending()

    def apply(self, opts: list[tuple[str, str | None]], level: int) -> None:
        for letter, value in opts:
            self.option(letter, value, level)

    def option(self, letter: str, value: str | None, level: int) -> None:
        p = self.pending
        v = value or ""
        if letter == "a":
            try:
                p.set("Execution_Time", cvtdate(v, self.now), level, "a")
            except ValueError:
                raise _OptionError("qsub: illegal -a value") from None
        elif letter == "A":
            p.set("Account_Name", v, level, "A")
        elif letter == "P":
            p.set("project", v, level, "P")
        elif letter == "c":
            if v.strip() == "u":
                raise _OptionError("qsub: illegal -c value")
            p.set("Checkpoint", v.lstrip(), level, "c")
        elif letter == "C":
            if level == _CMDLINE:     # -C cannot be a directive
                p.prefix = v
        elif letter == "e":
            p.set("Error_Path", v, level, "e")
        elif letter == "o":
            p.set("Output_Path", v, level, "o")
        elif letter == "h":
            p.set("Hold_Types", "u", level, "h")
        elif letter == "f":
            pass    # qsub's background daemon: nothing to do here
        elif letter == "I":
            p.interactive = True
        elif letter == "X":
            # X11 forwarding: the engine's interactive jobs have none.
            raise _unsupported("-X (X11 forwarding)")
        elif letter == "J":
            # X-Y[:Z][%max], as OpenPBS 23.06's qsub reads it (checked, `arrays.parse_spec`);
            # ``1-3%``, or an index past 2^31 - 1, passes here and its server refuses it
            # (15014), as PBS's does.
            try:
                spec = arrays.parse_spec(v)
            except arrays.ServerRefuses:
                p.set("array_indices_submitted", v, level, "J")
            except ValueError:
                raise _OptionError("qsub: illegal -J value") from None
            else:
                p.set("array_indices_submitted", spec.submitted, level, "J")
                if spec.max_run is not None:
                    p.set("max_run_subjobs", spec.max_run, level, "J")
        elif letter == "j":
            p.set("Join_Path", v, level, "j")
        elif letter == "k":
            p.set("Keep_Files", v, level, "k")
        elif letter == "l":
            for name, val in _resource_items(v):
                if level == _CMDLINE or name not in p.resources:
                    p.resources[name] = (val, level)
        elif letter == "m":
            p.set("Mail_Points", v.lstrip(), level, "m")
        elif letter == "M":
            p.set("Mail_Users", v, level, "M")
        elif letter == "N":
            p.set("Job_Name", v, level, "N")
        elif letter == "p":
            p.set("Priority", v.lstrip(), level, "p")
        elif letter == "q":
            if p.destination is None or level >= p.destination[1]:
                p.destination = (v, level)
        elif letter == "r":
            if v not in ("y", "n"):
                raise _OptionError("qsub: illegal -r value")
            p.set("Rerunable", v == "y", level, "r")
        elif letter == "R":
            p.set("Remove_Files", v, level, "R")
        elif letter == "S":
            p.set("Shell_Path_List", v, level, "S")
        elif letter == "u":
            raise _unsupported("-u (a job runs as the user who submits it)")
        elif letter == "v":
            if p.variables is None or level >= p.variables[1]:
                p.variables = (_expand_varlist(v, self.env), level)
        elif letter == "V":
            p.whole_env = max(p.whole_env, level)
        elif letter == "W":
            self.w_option(v, level)
        elif letter == "z":
            p.quiet = True

    def w_option(self, text: str, level: int) -> None:
        p = self.pending
        for key, value in _split_w(text):
            if key == "interactive":
                if value.lower() not in ("true", "false"):
                    raise _OptionError("qsub: illegal -W value")
                p.interactive = value.lower() == "true"
            elif key == "block":
                if value.lower() not in ("true", "false"):
                    raise _OptionError("qsub: illegal -W value")
                if p.block is None or level >= p.block[1]:
                    p.block = (value.lower() == "true", level)
            elif key == "pwd":
                raise _OptionError("qsub: illegal -W value")
            elif key == "group_list":
                raise _unsupported("-W group_list (a job runs with its owner's primary group)")
            elif key in ("stagein", "stageout"):
                raise _unsupported(f"-W {key} (no file staging on one machine)")
            elif key == "sandbox" and value.upper() == "PRIVATE":
                raise _unsupported("-W sandbox=PRIVATE (a job runs in its owner's home)")
            else:
                old = p.w_attrs.get(key)
                if old is None or level >= old[1]:
                    p.w_attrs[key] = (value, level)


def _unsupported(what: str) -> JobSpecError:
    """An option the local engine cannot honour: refused with 15029, never ignored."""
    return JobSpecError(f"qsub: {what} is not supported by the pbsplug local engine",
                        PBSE_NOSUP, status=1)


def _expand_varlist(text: str, env: Mapping[str, str]) -> dict[str, str]:
    """``-v VAR[=value],...``: a name alone takes its value from qsub's environment; a value
    may be quoted to hold commas; PBS_O_* names are qsub's own and are ignored."""
    out: dict[str, str] = {}
    for token in _comma_tokens(text):
        if not token:
            continue
        name, sep, raw = token.partition("=")
        name = name.strip()
        if not name:
            raise JobSpecError("qsub: cannot send environment with the job", PBSE_BADATVAL,
                               status=1)
        if name.startswith("PBS_O_"):
            continue
        if not sep:
            if name not in env:
                raise JobSpecError("qsub: cannot send environment with the job",
                                   PBSE_BADATVAL, status=1)
            out[name] = env[name]
            continue
        value = _unquoted(raw)
        if value is None:
            raise JobSpecError("qsub: cannot send environment with the job", PBSE_BADATVAL,
                               status=1)
        out[name] = value[0]
    return out


def _comma_tokens(text: str) -> list[str]:
    """Split at commas outside quotes; a backslash keeps the next character."""
    tokens: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            current.append(text[i + 1])
            i += 2
            continue
        if c in "\"'":
            quote = "" if quote == c else (quote or c)
        if c == "," and not quote:
            tokens.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    tokens.append("".join(current))
    return tokens


# -- scripts and directives -----------------------------------------------------------------------

def is_executable_line(line: str) -> bool:
    """PBS's rule for the line that ends the directives: anything but a blank line, a
    comment, a ``#!`` line or a line starting with ``:``."""
    if line.startswith(":") or line.startswith("#!"):
        return False
    stripped = line.lstrip()
    return bool(stripped) and not stripped.startswith("#")


def directives(script: str, prefix: str = DEFAULT_PREFIX) -> list[str]:
    """The text after the prefix of each directive, read until the first executable line
    (directives after it are ignored); a directive ending in a backslash continues on the
    next line. An empty prefix means no directives."""
    found: list[str] = []
    if not prefix:
        return found
    lines = script.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith(prefix):
            text = stripped[len(prefix):]
            while text.endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text[:-1] + lines[i]
            found.append(text)
        elif is_executable_line(line):
            break
        i += 1
    return found


def _read_script_file(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError as exc:
        # perror("qsub: script file:") -> "qsub: script file:: <strerror>"
        raise JobSpecError(f"qsub: script file:: {os.strerror(exc.errno or 0)}",
                           PBSE_BADSCRIPT, status=1) from None
    if not stat.S_ISREG(st.st_mode):
        raise JobSpecError("qsub: script not a file", PBSE_BADSCRIPT, status=1)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise JobSpecError(f"qsub: opening script file:: {os.strerror(exc.errno or 0)}",
                           PBSE_BADSCRIPT, status=8) from None
    return data.decode("utf-8", errors="replace")


# -- pass 2: attribute values ---------------------------------------------------------------------

def parse_umask(value: Any) -> int:
    """The job's ``umask`` attribute (``-W umask=NNN``) as a number: one to four octal digits,
    by the kernel's rule (`pbsplug.values`; a JSON number's digits are octal too: 22 is 022).
    ValueError if not."""
    return int(values.JOB_ATTRIBUTES["umask"].check(value, "umask"), 8)


def check_job_name(name: str) -> None:
    """A job name: at most 236 characters, each a letter, digit or one of ``- _ + .``
    (PBS's rule for names given to qsub, whose first character may be a digit)."""
    if len(name) > PBS_MAXJOBNAME:
        # PBS prints "qsub: Job " + "name is too long"; no usage follows.
        raise JobSpecError("qsub: Job name is too long", PBSE_JOBNBIG, status=2)
    if not name or not _NAME_CHARS.match(name):
        raise _illegal("N")


def resource_value(name: str, value: Any, kind: str | None = None) -> Any:
    """A resource value as the job stores it (`pbsplug.values.resource_value`: long -> int,
    duration -> ``HH:MM:SS``, size -> ``4gb``, ...). qsub does not know the server's custom
    resources, so an unknown one is a string here; the server refuses it if undefined.
    Raises ValueError for a value of the wrong type."""
    return values.resource_value(name, value, kind or RESOURCE_TYPES.get(name, "string"))


_check_at_list = values.check_at_list
_check_keep = values.check_keep
_check_mail_points = values.check_mail_points
_check_checkpoint = values.check_checkpoint


def _depend(value: str, server: str | None) -> str:
    """Check a dependency list and complete bare job ids with the server's name."""
    items = values.depend_items(value)
    if items is None:
        raise _illegal("W")
    if server:  # (``12``, ``12@server``: `jobid.full_id`; another server's as given)
        items = [(kind, args if kind == "on" else
                  [jobid.full_id(job, server) or job for job in args])
                 for kind, args in items]
    return ",".join(f"{kind}:{':'.join(args)}" for kind, args in items)


def _path(value: str, letter: str, *, cwd: str, host: str, env: Mapping[str, str],
          qalter: bool = False) -> str:
    """``[host:]path`` -> ``host:/absolute/path``: a relative path is relative to qsub's
    directory, or with a host, to the user's home directory (qalter refuses that one, as
    OpenPBS 23.06's does: ``illegal -e value``). A host that does not resolve is
    ``illegal -o value``, as OpenPBS 23.06's qsub and qalter say (checked); one that does
    but is not this machine is refused: the local engine writes a job's files here."""
    m = re.match(r"^([^/:]+):(.*)\Z", value)
    where, path = (m.group(1), m.group(2)) if m else (None, value)
    if not path or (qalter and where is not None and not os.path.isabs(path)):
        raise _illegal(letter)
    if where is not None and not jobid.names_this_host(where, (host, *jobid.host_names())):
        import socket

        try:
            socket.getaddrinfo(where, None)
        except (OSError, UnicodeError):
            raise _illegal(letter) from None
        raise _unsupported(f"-{letter} {value} (another host: the engine writes a job's "
                           "files on this host)")
    if not os.path.isabs(path):
        base = cwd if where is None else env.get("HOME") or cwd
        path = os.path.join(base, path)
    return f"{where or host}:{path}"


def _check_destination(dest: str) -> tuple[str | None, str | None]:
    queue, at, server = dest.partition("@")
    bad = (at and not server) or "@" in server or any(c.isspace() for c in dest)
    if bad:
        raise JobSpecError(f"qsub: illegally formed destination: {dest}", PBSE_BADATVAL,
                           status=2)
    return queue or None, server or None


def _verify(pending: _Pending, *, cwd: str, host: str, env: Mapping[str, str],
            server: str | None, resource_types: Mapping[str, str],
            qalter: bool = False) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for attr, (value, _level, letter) in pending.values.items():
        if attr == "Job_Name":
            check_job_name(value)
        elif attr in ("Output_Path", "Error_Path"):
            value = _path(value, letter, cwd=cwd, host=host, env=env, qalter=qalter)
        elif attr == "Join_Path":
            if value not in ("oe", "eo", "n"):
                raise _illegal("j")
        elif attr == "Keep_Files":
            if not _check_keep(value):
                raise _illegal("k")
        elif attr == "Mail_Points":
            if not _check_mail_points(value):
                raise _illegal("m")
        elif attr == "Mail_Users":
            if not _check_at_list(value, one_without_host=False):
                raise _illegal("M")
        elif attr == "Priority":
            if not re.fullmatch(r"[+-]?[0-9]+", value) or values.past(value.lstrip("+-"), 1024) \
                    or not -1024 <= int(value) <= 1023:
                raise _illegal("p")  # (its length first: int() refuses 4300 digits and more)
            value = int(value)
        elif attr == "Checkpoint":
            if not _check_checkpoint(value):
                raise _illegal("c")
        elif attr == "Remove_Files":
            if not value or set(value) - set("oe"):
                raise _illegal("R")
        elif attr in ("Shell_Path_List", "User_List"):
            if not _check_at_list(value, one_without_host=True):
                raise _illegal(letter)
        elif attr == "project" and not qalter:  # (qalter's: the server's 15014, as PBS's)
            if not value or set(value) & _PROJECT_FORBIDDEN:
                raise _illegal("P")
        attrs[attr] = value
    for key, (value, _level) in pending.w_attrs.items():
        if key == "depend":
            value = _depend(value, server)
        elif key == "group_list":
            if not _check_at_list(value, one_without_host=True):
                raise _illegal("W")
        elif key == "sandbox":
            if value.upper() not in ("HOME", "O_WORKDIR", "PRIVATE"):
                raise _illegal("W")
        elif key == "umask":
            try:
                parse_umask(value)
            except ValueError:
                raise _illegal("W") from None
        elif key == "run_count":
            if not values.digits(value):
                raise _illegal("W")
            # (past a long, sent as written for the server's 15014: int() refuses 4300
            # digits and more)
            value = value if values.past(value, values.LONG_MAX) else int(value)
        elif key in ("stagein", "stageout"):
            if not all(re.fullmatch(r"[^@,]+@[^:,]+:.+", f) for f in value.split(",")):
                raise _illegal("W")
        elif key == "release_nodes_on_stageout":
            if value.lower() not in ("true", "false"):
                raise _illegal("W")
            value = value.lower() == "true"
        attrs[key] = value
    resources: dict[str, Any] = {}
    for name, (value, _level) in pending.resources.items():
        try:
            resources[name] = resource_value(name, value, resource_types.get(name))
        except ValueError:
            raise _bad_resource(name) from None
    if resources:
        attrs["Resource_List"] = resources
    return attrs


# -- the entry point ------------------------------------------------------------------------------

def _report(err: _OptionError, *, directive: list[str] | None) -> JobSpecError:
    message = err.message + err.extra
    if directive is None:
        return JobSpecError(message, err.code, status=2, usage=True)
    # PBS prints the option's own message, then the whole directive, and exits 1.
    return JobSpecError(f"{message}\nqsub: directive error: {' '.join(directive)}",
                        err.code, status=1)


def parse_qsub(argv: Sequence[str], *, cwd: str, env: Mapping[str, str], user: str,
               host: str, read_script: Callable[[], str] | None = None,
               server: str | None = None, now: float | None = None,
               default_args: Sequence[str] = (),
               resource_types: Mapping[str, str] | None = None,
               system: str | None = None) -> JobRequest:
    """Read ``qsub`` arguments (without the command name) into the job to submit.

    ``cwd``, ``env``, ``user`` and ``host`` describe the submitter: relative paths and
    PBS_O_WORKDIR use ``cwd``; PBS_O_* and ``-v``/``-V`` read ``env``; Job_Owner is
    ``user@host``. ``read_script`` returns the script when none is named (qsub reads standard
    input). ``server`` completes bare job ids in ``-W depend``; ``now`` fixes the clock for
    ``-a``; ``default_args`` are the server's default_qsub_arguments (lowest precedence);
    ``resource_types`` types custom resources (long, float, size, duration, boolean, string).

    Raises `JobSpecError` with PBS's message, error number and exit status.
    """
    argv = list(argv)
    types = dict(resource_types or {})
    parser = _Parser(env, now)
    pending = parser.pending
    try:
        opts, operands, ddash = _getopt(argv)
        parser.apply(opts, _CMDLINE)
    except _OptionError as err:
        raise _report(err, directive=None) from None
    if ddash and not operands:
        raise JobSpecError("qsub: a command must follow --", PBSE_IVALREQ, usage=True)
    if not ddash and len(operands) > 1:
        raise JobSpecError(f"qsub: the script ({operands[0]}) must be the last argument",
                           PBSE_IVALREQ, usage=True)

    script: str | None = None
    command: list[str] | None = None
    if ddash:
        command = operands
        pending.set("Job_Name", "STDIN", 0, "N")
    else:
        path = operands[0] if operands else "-"
        if path == "-":
            pending.set("Job_Name", "STDIN", 0, "N")
            # (qsub -I reads no script: its standard input is the job's terminal)
            script = "" if pending.interactive and not operands else (
                read_script or _default_read_script)()
        else:
            full = path if os.path.isabs(path) else os.path.join(cwd, path)
            script = _read_script_file(full)
            pending.set("Job_Name", os.path.basename(path)[:PBS_MAXJOBNAME], 0, "N")
        if pending.prefix is not None:
            prefix = pending.prefix
        else:
            prefix = env.get("PBS_DPREFIX", DEFAULT_PREFIX)
        for text in directives(script, prefix):
            words = _split_directive(text)
            try:
                d_opts, d_operands, d_ddash = _getopt(words)
                if d_operands or d_ddash:
                    raise _OptionError("")
                parser.apply(d_opts, _DIRECTIVE)
            except _OptionError as err:
                if not err.message:
                    raise JobSpecError(f"qsub: directive error: {' '.join(words)}",
                                       PBSE_BADATVAL, status=1) from None
                raise _report(err, directive=words) from None
    if default_args:
        try:
            d_opts, _, _ = _getopt(list(default_args))
            parser.apply(d_opts, _DEFAULTS)
        except _OptionError as err:
            raise JobSpecError(f"{err.message}\nqsub: illegal default_qsub_arguments",
                               err.code, status=1) from None

    queue, dest_server = (None, None)
    if pending.destination is not None:
        queue, dest_server = _check_destination(pending.destination[0])

    attrs = _verify(pending, cwd=cwd, host=host, env=env, server=server,
                    resource_types=types)
    res = attrs.get("Resource_List") or {}
    if res.get("place") is not None and res.get("select") is None and \
            not values.CHUNK_RESOURCES & res.keys() and res.get("nodes") is None:
        # (OpenPBS 23.06's qsub, status 7; beside a host-level resource its server's 15109
        # speaks instead)
        raise JobSpecError('qsub: Cannot have "place" without "select"', PBSE_IVALREQ,
                           status=7)
    # qsub's defaults for what the command line and the directives left unset.
    for name, default in (("Checkpoint", "u"), ("Hold_Types", "n"), ("Join_Path", "n"),
                          ("Keep_Files", "n"), ("Mail_Points", "a"), ("Priority", 0),
                          ("Rerunable", True)):
        attrs.setdefault(name, default)
    if attrs.get("array_indices_submitted") is not None and not attrs["Rerunable"]:
        # (OpenPBS 23.06's qsub, its words with their two blanks, checked)
        raise JobSpecError("qsub:  cannot submit non-rerunable Array Job", PBSE_BADATVAL,
                           status=2, usage=True)
    if queue:
        attrs["queue"] = queue
    attrs["Job_Owner"] = f"{user}@{host}"
    attrs["Variable_List"] = job_variables(
        env, cwd=cwd, host=host, extra=pending.variables[0] if pending.variables else None,
        whole_env=bool(pending.whole_env), system=system)
    attrs["Submit_arguments"] = " ".join(argv)
    return JobRequest(attrs=_ordered(attrs), script=script, argv=command, server=dest_server,
                      quiet=pending.quiet, block=bool(pending.block and pending.block[0]),
                      interactive=pending.interactive)


#: qalter's options (OpenPBS 23.06's qalter: its getopt string); -h, -l and -N the command
#: reads itself, the others `qalter_attributes`.
QALTER_OPTIONS = "a:A:c:e:h:j:k:l:m:M:N:o:p:P:r:R:S:u:W:"


def qalter_attributes(opts: Sequence[tuple[str, str]], *, cwd: str, env: Mapping[str, str],
                      host: str, server: str | None = None) -> dict[str, Any]:
    """The job attributes qalter's options ask for (but -h, -l and -N), read and checked as
    qsub reads and checks the same options (`_Parser`, then `_verify`: one set of checks
    for both commands), the last of an option counting. Where OpenPBS 23.06's qalter
    differs from its qsub, it does here too (checked): a relative path after a host
    (``-e host:rel``) is illegal, ``-P``'s value is the server's to check, and ``-W
    block`` or ``interactive`` come back as attributes (the command refuses them as
    PBS's server does). Raises `JobSpecError` (its lines start ``qsub:``: the command says
    its own name)."""
    parser = _Parser(env, now=None)
    try:
        for letter, value in opts:
            if letter != "W":
                parser.option(letter, value, _CMDLINE)
                continue
            for key, item in _split_w(value):
                if key in ("block", "interactive"):  # (a job's: PBS's server says 15014)
                    parser.pending.w_attrs[key] = (item, _CMDLINE)
                else:
                    parser.w_option(f"{key}={item}", _CMDLINE)
    except _OptionError as err:
        raise _report(err, directive=None) from None
    return _verify(parser.pending, cwd=cwd, host=host, env=env, server=server,
                   resource_types={}, qalter=True)


def job_variables(env: Mapping[str, str], *, cwd: str, host: str,
                  extra: Mapping[str, str] | None = None, whole_env: bool = False,
                  system: str | None = None) -> dict[str, str]:
    """The Variable_List qsub sends: PBS_O_HOME (``/`` without $HOME), PBS_O_LANG,
    PBS_O_LOGNAME, PBS_O_PATH, PBS_O_MAIL, PBS_O_SHELL and PBS_O_TZ from the environment
    (each only if set), PBS_O_WORKDIR, PBS_O_SYSTEM (``uname -s``) and PBS_O_HOST; then the
    ``-v`` variables, then with ``-V`` the whole environment except PBS_O_* names.
    PBS_O_QUEUE is the server's to add (`server_variables`)."""
    out: dict[str, str] = {"PBS_O_HOME": env.get("HOME") or "/"}
    for name in ("LANG", "LOGNAME", "PATH", "MAIL", "SHELL", "TZ"):
        if env.get(name) is not None:
            out[f"PBS_O_{name}"] = env[name]
    out["PBS_O_WORKDIR"] = cwd
    out["PBS_O_SYSTEM"] = system or os.uname().sysname
    out["PBS_O_HOST"] = host
    for name, value in (extra or {}).items():
        out[name] = value
    if whole_env:
        for name, value in env.items():
            if not name.startswith("PBS_O_"):
                out[name] = value
    return out


def server_variables(queue: str, host: str) -> dict[str, str]:
    """What the PBS server adds to a queued job's Variable_List: PBS_O_QUEUE, the queue it
    was submitted to (and PBS_O_HOST, which it requires qsub to have sent)."""
    return {"PBS_O_QUEUE": queue, "PBS_O_HOST": host}


_ORDER = ("Job_Name", "Job_Owner", "queue", "Account_Name", "Checkpoint", "depend",
          "Error_Path", "Execution_Time", "group_list", "Hold_Types", "Join_Path",
          "Keep_Files", "Mail_Points", "Mail_Users", "Output_Path", "Priority", "Rerunable",
          "Resource_List", "Shell_Path_List", "User_List", "Variable_List",
          "Submit_arguments", "project")


def _ordered(attrs: dict[str, Any]) -> dict[str, Any]:
    out = {k: attrs[k] for k in _ORDER if k in attrs}
    out.update((k, v) for k, v in attrs.items() if k not in out)
    return out


__all__ = [
    "DEFAULT_PREFIX", "DEPEND_TYPES", "PBSE_BADATVAL", "PBSE_BADSCRIPT", "PBSE_IVALREQ",
    "PBSE_JOBNBIG", "PBSE_NOSUP", "PBS_MAXJOBNAME", "RESOURCE_TYPES", "USAGE", "JobRequest",
    "JobSpecError", "QALTER_OPTIONS", "check_job_name", "cvtdate", "directives",
    "is_executable_line", "job_variables", "parse_qsub", "parse_umask", "qalter_attributes",
    "resource_value", "server_variables",
]
