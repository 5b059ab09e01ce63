"""A value ending in a line break is not the value without it. A pattern anchored with
``$`` also matches before a last line break, so ``12\\n`` read as job 12 and ``ncpus\\n`` as
a resource's name; each parser of outside text below now refuses the line break."""

from __future__ import annotations

import pytest

from pbsplug import scaffold, units
from pbsplug.cli import qcommands
from pbsplug.engine import arrays, jobid, jobspec, tracejob
from pbsplug.sim import traces


def _refused(parse, text: str) -> bool:
    """Whether `parse` refuses `text`: by an exception or by giving None (a check that
    gives nothing back refuses by an exception alone)."""
    try:
        return parse(text) is None and parse is not jobspec.check_job_name
    except (ValueError, jobspec.JobSpecError, traces._Bad, qcommands._Illegal):
        return True


CASES = {
    "job id": (jobid.parse, "12"),
    "subjob id": (arrays.named, "12[3]"),
    "array range": (arrays.parse_spec, "1-3"),
    "select resource name": (units.parse_select, "1:ncpus=2:mem=1gb"),
    "job name": (jobspec.check_job_name, "job"),
    "tracejob stamp": (tracejob._when, "01/02/2026 10:00:00"),
    "sacct time": (lambda t: traces._slurm_duration(t, "Timelimit"), "1:00"),
    "qselect -c": (lambda t: qcommands._select_criteria([("-c", t)]), "n"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_value_is_read_without_a_line_break_and_refused_with_one(name):
    parse, good = CASES[name]
    assert not _refused(parse, good), f"{name}: {good!r} should be read"
    bad = good + "\n" if name != "select resource name" else good.replace("mem", "mem\n")
    assert _refused(parse, bad), f"{name}: {bad!r} was read as if it had no line break"


def test_a_plugin_name_with_a_line_break_makes_no_folder(tmp_path):
    with pytest.raises(ValueError, match="must match"):
        scaffold.new_plugin("tidy\n", tmp_path)
    assert list(tmp_path.iterdir()) == []
