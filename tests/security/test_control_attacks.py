"""Attacks on the job-control commands and job arrays (qdel of subjob ranges, qstat -t,
qmsg) by an unprivileged user: none may hold the server, nor make it use memory or time out
of proportion to what the user keeps."""

from __future__ import annotations

from .conftest import qsub


def test_qdel_of_a_huge_subjob_range_costs_what_the_array_holds(engine, attacker):
    # A range is checked against the array's own indices, never walked: 10**14 indices
    # held the server (one loop step each) for days.
    array = qsub(attacker, engine, "-h", "-J", "0-3", "--", "/bin/true")
    number = array.split("[")[0]
    done = attacker.pbs(engine, "qdel", f"{number}[2-99999999999999]")
    assert (done.returncode, done.stderr) == (0, "")
    assert engine.job(array)["array_indices_remaining"] == "0-1"
    # A step of 0 names no subjob (it is no range), as any other id of no job.
    zero = attacker.pbs(engine, "qdel", f"{number}[0-3:0]")
    assert zero.returncode == 153
    assert zero.stderr.startswith(f"qdel: Unknown Job Id {number}[0-3:0]")
    assert engine.job(array)["array_indices_remaining"] == "0-1"
