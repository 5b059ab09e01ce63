"""Job arrays (qsub -J), as OpenPBS 23.06 keeps them (checked on the real PBS: ids, states,
attributes, messages, exit statuses, the subjobs' environment and file names)."""

from __future__ import annotations

import pytest

from pbsplug.engine import arrays


@pytest.mark.parametrize(("given", "remaining"), [
    ([4, 6], "4-6:2"), ([8, 10], "8,10"), ([], "-"), ([1, 2, 3, 5], "1-3,5")])
def test_remaining_indices_are_written_as_pbs_writes_them(given, remaining):
    step = 2 if given == [4, 6] else 1
    assert arrays.format_indices(given, step) == remaining
    assert arrays.parse_indices(remaining) == sorted(given)


@pytest.mark.parametrize("bad", ["5", "3-1", "1-1", "1-10:0", "1-3,5", "a-b", "1-3:", "-1-3"])
def test_qsub_refuses_a_range_pbs_refuses(engine, bad):
    done = engine.pbs("qsub", "-J", bad, "--", "/bin/true")
    assert done.returncode == 2
    assert done.stderr.startswith("qsub: illegal -J value\nusage: qsub")


def test_qsub_refuses_a_non_rerunnable_array(engine):
    done = engine.pbs("qsub", "-r", "n", "-J", "1-3", "--", "/bin/true")
    assert done.returncode == 2
    assert done.stderr.startswith("qsub:  cannot submit non-rerunable Array Job\nusage:")


def test_an_array_past_max_array_size_is_refused(engine):
    done = engine.pbs("qsub", "-J", "0-10000", "--", "/bin/true")
    assert (done.returncode, done.stderr) == (
        3, "qsub: Array job exceeds server or queue size limit\n")
    engine.pbs("qmgr", "-c", "set server max_array_size = 3", check=True)
    assert engine.pbs("qsub", "-J", "1-4", "--", "/bin/true").returncode == 3
    assert engine.pbs("qsub", "-h", "-J", "1-3", "--", "/bin/true").returncode == 0


def test_an_array_is_one_row_with_pbs_attributes(engine):
    job_id = engine.pbs("qsub", "-h", "-N", "arr", "-J", "0-6:2%2", "--", "/bin/true",
                        check=True).stdout.strip()
    number = job_id.split("[")[0]
    assert job_id == f"{number}[].{engine.client('status')['server']}"
    attrs = engine.job(job_id)
    assert attrs["array"] is True
    assert attrs["array_indices_submitted"] == "0-6:2"
    assert attrs["array_indices_remaining"] == "0-6:2"
    assert attrs["array_state_count"] == "Queued:4 Running:0 Exiting:0 Expired:0"
    assert attrs["max_run_subjobs"] == 2
    assert attrs["Output_Path"].endswith(f"/arr.o{number}.^array_index^")
    assert attrs["job_state"] == "H"
    sub = engine.job(arrays.subjob_id(job_id, 4))
    assert (sub["array_id"], sub["array_index"], sub["job_state"]) == (job_id, 4, "Q")
    assert sub["Output_Path"].endswith(f"/arr.o{number}.4")
    unknown = engine.pbs("qstat", f"{number}[3]")
    assert (unknown.returncode, unknown.stderr) == (
        153, f"qstat: Unknown Job Id {number}[3].{job_id.split('.', 1)[1]}\n")
    assert engine.pbs("qstat", number).returncode == 153
