"""Numbers on the command line (hostile review): typer read an ``int`` option with int()
(``--last 1_0`` was 10) and a ``float`` with float() (``--timeout nan``, ``inf``). The
kernel's commands and the plugins' read them with `pbsplug.cli_count` and
`pbsplug.cli_seconds` (kernel API 1.7): ASCII digits only, one line naming the option."""

from __future__ import annotations

import importlib.metadata

import pytest

import pbsplug
from pbsplug.cli import main
from pbsplug.testing import missing

PLUGINS = {ep.name for ep in importlib.metadata.entry_points(group="pbsplug")}

COUNTS = [
    ["hooks", "trace", "--last"],
    ["sim", "run", "trace.swf", "--limit"],
    ["sim", "run", "trace.swf", "--nodes"],
    ["sim", "run", "trace.swf", "--cpus-per-node"],
    ["sim", "compare", "trace.swf", "--limit"],
    ["mjf", "drain", "--in"],
    ["mjf", "serve", "--bind", "127.0.0.1:0", "--max-age"],
]
SECONDS = [
    ["server", "stop", "--timeout"],
    ["slurm", "periodic", "--every"],
    ["cray_atom", "check", "--timeout"],
]


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("PBSPLUG_HOME", str(tmp_path))
    monkeypatch.delenv("PBSPLUG_SITE", raising=False)


def refused(argv, capsys) -> str:
    """The one error line of a usage error (exit 2)."""
    if argv[0] in ("mjf", "cray_atom") and argv[0] not in PLUGINS:
        missing(f"plugin {argv[0]} is not installed")
    assert main(argv) == 2
    lines = [line.strip(" │╭╮╰╯─") for line in capsys.readouterr().err.splitlines()]
    errors = [line for line in lines if line.startswith("Error: ")]
    assert len(errors) == 1, lines
    return errors[0]


@pytest.mark.parametrize("command", COUNTS, ids=" ".join)
@pytest.mark.parametrize("text", ["1_0", "٣", "-1", "+1", "1.0", "1e3", "0x10", "", "9" * 30])
def test_a_count_is_ascii_digits(command, text, capsys):
    line = refused([*command, text], capsys)
    option = command[-1]
    assert line.startswith(f"Error: Invalid value for '{option}': {text!r} is ")
    assert ("is more than 9223372036854775807" if text == "9" * 30
            else "is not a whole number (digits 0-9)") in line


@pytest.mark.parametrize("command", SECONDS, ids=" ".join)
@pytest.mark.parametrize("text", ["1_0", "nan", "inf", "-inf", "1e400", "-1", "٣", "0x1",
                                  "x" * 1000])
def test_seconds_are_a_finite_number(command, text, capsys):
    line = refused([*command, text], capsys)
    assert line.startswith(f"Error: Invalid value for '{command[-1]}': ")
    assert line.endswith("is not a number of seconds >= 0") and len(line) < 300


def test_the_parsers_read_what_pbs_reads():
    assert pbsplug.cli_count("0042") == 42 and pbsplug.cli_count(" 7 ") == 7
    assert pbsplug.cli_count(20) == 20  # (a default)
    assert pbsplug.cli_seconds("2.5") == 2.5 and pbsplug.cli_seconds("1e3") == 1000.0
    assert pbsplug.cli_seconds(".5") == 0.5 and pbsplug.cli_seconds("-0") == 0.0
    assert pbsplug.cli_seconds(30.0) == 30.0
    assert pbsplug.KERNEL_API >= (1, 7)


def test_a_good_count_still_runs_the_command(capsys):
    assert main(["hooks", "trace", "--last", "3"]) == 0
    assert "No hook has run yet" in capsys.readouterr().out


def test_slurm_periodic_refuses_a_wait_sleep_cannot_take(capsys):
    """cli_seconds takes any finite number: '--every 1e10' ran the event once, then ended
    in time.sleep's OverflowError traceback. The wait is at most ten years, said before
    anything runs."""
    assert main(["slurm", "periodic", "--every", "1e10"]) == 2
    assert capsys.readouterr().err == ("pbsplug: error: --every 1e+10: expected at most "
                                       "315360000 seconds (ten years)\n")
