"""A queue's and the server's ``resources_assigned`` on the local engine against OpenPBS
23.06's, step by step, in a queue made for the test on each side (a queue lists what was
assigned in it since its server started: workq's depend on what ran before): none before
a job runs; two jobs running (``mem=10mb`` and ``mem=1gb``, one cpu each); one of them
suspended, then resumed; both deleted. The queue's lines are compared whole; the server's
only while the two run (the shared PBS's lists what other tests ran too)."""

from __future__ import annotations

from collections.abc import Callable

from pbsplug.engine.testing import LocalEngine

from .conftest import RealPbs

QUEUE = "assignedq"


def _assigned(text: str) -> dict[str, str]:
    return dict(line.strip().removeprefix("resources_assigned.").split(" = ", 1)
                for line in text.splitlines() if "resources_assigned." in line)


def _steps(run: Callable[..., str], wait: Callable[[str, str], object]) -> list:
    """The same commands on one side: what qstat -Qf (and -Bf, while both run) shows."""
    run("qmgr", "-c", f"create queue {QUEUE} queue_type=execution,enabled=true,started=true")
    seen = [_assigned(run("qstat", "-Qf", QUEUE))]
    jobs = [run("qsub", "-q", QUEUE, "-l", f"select=1:ncpus=1:mem={mem}", "--", "/bin/sleep",
                "60") for mem in ("10mb", "1gb")]
    for job in jobs:
        wait(job, "R")
    seen.append(_assigned(run("qstat", "-Qf", QUEUE)))
    server = _assigned(run("qstat", "-Bf"))
    seen.append({k: server.get(k) for k in seen[-1]})  # (as much as its queue holds)
    run("qsig", "-s", "suspend", jobs[0])
    wait(jobs[0], "S")
    seen.append(_assigned(run("qstat", "-Qf", QUEUE)))
    run("qsig", "-s", "resume", jobs[0])
    wait(jobs[0], "R")
    seen.append(_assigned(run("qstat", "-Qf", QUEUE)))
    run("qdel", *jobs)
    for job in jobs:
        wait(job, "F")
    seen.append(_assigned(run("qstat", "-Qf", QUEUE)))
    return seen


def test_a_queues_resources_assigned_as_openpbs(pbs: RealPbs, local: LocalEngine):
    try:
        real = _steps(lambda *a: pbs.run(*a).stdout.strip(),
                      lambda j, s: pbs.wait(j, s))
    finally:
        left = pbs.run("qselect", "-x", "-q", QUEUE, check=False).stdout.split()
        if left:
            pbs.run("qdel", "-x", "-W", "force", *left, check=False)
        pbs.qmgr(f"delete queue {QUEUE}", check=False)
    mine = _steps(lambda *a: local.pbs(*a, check=True).stdout.strip(),
                  lambda j, s: local.wait(j, s))
    assert real[1].get("mem") == "1034mb"  # (the test asks what it means to)
    assert mine == real
