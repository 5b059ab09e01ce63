"""Attacks on the job-control commands and job arrays (qdel of subjob ranges, qstat -t,
qmsg) by an unprivileged user: none may hold the server, nor make it use memory or time out
of proportion to what the user keeps."""

from __future__ import annotations

import json

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


def test_qstat_t_f_of_an_array_does_not_multiply_its_environment_unbounded(engine, attacker):
    # Each subjob shows its array's environment: 1 MiB of it and 100 indices made a 100 MiB
    # answer (10,000 indices: 10 GiB in the root server's memory) from one submission.
    # One answer carries at most MAX_SHOWN_ENV bytes of subjobs' environments.
    from pbsplug.engine.subjobs import MAX_SHOWN_ENV

    done = attacker.python(
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "from pbsplug.engine.client import Client\n"
        "from pbsplug.engine.home import Home\n"
        "c = Client(Home(Path(os.environ['PBSPLUG_HOME'])))\n"
        "env = {f'V{i}': 'x' * 100_000 for i in range(10)}\n"
        "job = c('submit', attrs={'Variable_List': env, 'Hold_Types': 'u',\n"
        "                         'array_indices_submitted': '1-100'}, script='true\\n')\n"
        "jobs = c('stat_jobs', ids=[job], subjobs=True)\n"
        "sizes = [sum(len(k) + len(v) for k, v in a.get('Variable_List', {}).items())\n"
        "         for j, a in jobs.items() if a.get('array_id')]\n"
        "print(json.dumps([len(sizes), sum(sizes), sum(s > 0 for s in sizes)]))\n",
        home=engine)
    assert done.returncode == 0, done.stderr
    count, total, with_env = json.loads(done.stdout)
    assert count == 100
    assert 0 < total <= MAX_SHOWN_ENV
    assert 0 < with_env < 100
