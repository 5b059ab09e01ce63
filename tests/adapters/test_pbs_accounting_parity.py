"""The local engine's accounting log against OpenPBS 23.06's: the same small workload on
the real PBS (conftest.py) and on a local engine (a job run to its end; an array run to its
end (its own Q, S and E) and one of its subjobs; a held array deleted; a held job altered, then
deleted; a running job rerun, then deleted; a reservation deleted, a held job in its queue
deleted first; and apart, a running job suspended, resumed, then deleted), and for each job
and reservation the same record types in the same order, each record with the same keys in
the same order.

Resources are compared by name under ``Resource_List``; under ``resources_used`` only as a
group: PBS's MoM measures ``cpupercent``, the engine does not (docs/engine.md)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from pbsplug.engine.testing import LocalEngine, until

from .conftest import RealPbs

PBS_ACCOUNTING = Path("/var/spool/pbs/server_priv/accounting")
_LINE = re.compile(r"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;([A-Za-z]);([^;]+);(.*)$")
_PAIR = re.compile(r'([^\s=]+)=("(?:[^"\\]|\\["\\]|\\(?!["\\]))*"|\S*)')


def _keys(body: str) -> tuple[str, ...]:
    out: list[str] = []
    for key, _ in _PAIR.findall(body):
        key = "resources_used.*" if key.startswith("resources_used.") else key
        if key not in out:
            out.append(key)
    return tuple(out)


def _records(text: str) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """Each job's or reservation's (type, keys) in the order written."""
    out: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            out.setdefault(m.group(2), []).append((m.group(1), _keys(m.group(3))))
    return out


def _when(seconds: int) -> str:
    return time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + seconds))


def _running(job: Callable[[str], dict], job_id: str) -> None:
    """Wait until the job runs as its server's MoM reports it: a session and a first
    report of its use. PBS writes the S record then, and a z record with resources_used
    only once its MoM has reported any: a qrerun or a suspend before that writes neither,
    on PBS's side alone (the engine's first report comes with the start)."""
    until(lambda: job(job_id).get("session_id") and "resources_used" in job(job_id),
          timeout=60, what=f"{job_id} running with its use reported")


def _workload(run: Callable[..., str], wait: Callable[[str, str], object],
              job: Callable[[str], dict]) -> dict[str, str]:
    """The same commands on one side; its ids by role."""
    ids = {"done": run("qsub", "-N", "acct", "-l", "walltime=00:01:00", "--", "/bin/true")}
    ids["array"] = run("qsub", "-J", "1-2", "--", "/bin/true")
    ids["subjob"] = ids["array"].replace("[]", "[1]")
    ids["held array"] = run("qsub", "-h", "-J", "1-2", "--", "/bin/true")
    run("qdel", ids["held array"])
    ids["held"] = run("qsub", "-h", "--", "/bin/true")
    run("qalter", "-N", "renamed", "-l", "walltime=00:02:00", ids["held"])
    run("qdel", ids["held"])
    ids["rerun"] = run("qsub", "--", "/bin/sleep", "60")
    wait(ids["rerun"], "R")
    _running(job, ids["rerun"])
    run("qrerun", ids["rerun"])
    until(lambda: int(job(ids["rerun"]).get("run_count", 0)) >= 2, timeout=60,
          what="the job's second run")
    wait(ids["rerun"], "R")
    _running(job, ids["rerun"])
    run("qdel", ids["rerun"])
    wait(ids["done"], "F")
    wait(ids["array"], "F")
    wait(ids["rerun"], "F")
    ids["resv"] = run("pbs_rsub", "-R", _when(600), "-E", _when(700)).split()[0]
    time.sleep(2)  # (confirmed by then on both sides: the Y record is awaited below)
    # (its Q names the reservation: resvname and resvID after queue)
    ids["in resv"] = run("qsub", "-h", "-q", ids["resv"].split(".")[0], "--", "/bin/true")
    run("qdel", ids["in resv"])
    run("pbs_rdel", ids["resv"])
    return ids


def _suspended(run: Callable[..., str], wait: Callable[[str, str], object],
               job: Callable[[str], dict]) -> dict[str, str]:
    ids = {"suspended": run("qsub", "--", "/bin/sleep", "60")}
    wait(ids["suspended"], "R")
    _running(job, ids["suspended"])
    run("qsig", "-s", "suspend", ids["suspended"])
    wait(ids["suspended"], "S")
    run("qsig", "-s", "resume", ids["suspended"])
    wait(ids["suspended"], "R")
    run("qdel", ids["suspended"])
    wait(ids["suspended"], "F")
    return ids


def _resv_ended(run: Callable[..., str], wait: Callable[[str, str], object],
                job: Callable[[str], dict]) -> dict[str, str]:
    """A reservation whose period ends with a held job in its queue: its k, then the job's
    D (requestor the server's user)."""
    ids = {"resv": run("pbs_rsub", "-R", _when(3), "-E", _when(8)).split()[0]}
    time.sleep(2)  # (confirmed by then on both sides)
    ids["in ended resv"] = run("qsub", "-h", "-q", ids["resv"].split(".")[0], "--",
                               "/bin/true")
    wait(ids["in ended resv"], "F")
    return ids


def test_the_engine_writes_pbs_record_types_and_keys(pbs: RealPbs, local: LocalEngine):
    _compare(pbs, local, _workload, "resv")


def test_a_reservations_end_writes_pbs_records(pbs: RealPbs, local: LocalEngine):
    _compare(pbs, local, _resv_ended, "resv")


def test_suspend_and_resume_write_pbs_records(pbs: RealPbs, local: LocalEngine):
    """z (the run's use so far) and r (nothing), as OpenPBS 23.06's qsig writes them."""
    _compare(pbs, local, _suspended, "suspended")


def _compare(pbs: RealPbs, local: LocalEngine, workload: Callable[..., dict[str, str]],
             last: str) -> None:
    today = PBS_ACCOUNTING / time.strftime("%Y%m%d")
    offset = today.stat().st_size if today.exists() else 0

    def real_run(*argv: str) -> str:
        return pbs.run(*argv).stdout.strip()

    real = workload(real_run, lambda j, s: pbs.wait(j, s), pbs.job)

    def local_run(*argv: str) -> str:
        return local.pbs(*argv, check=True).stdout.strip()

    mine = workload(local_run, lambda j, s: local.wait(j, s), local.job)

    def real_text() -> str:
        with open(today, "rb") as file:
            file.seek(offset)
            return file.read().decode("utf-8", "replace")

    def local_text() -> str:
        return "".join(p.read_text() for p in sorted(local.home.accounting.iterdir()))

    end = "k" if last == "resv" else "E"
    until(lambda: [k for k, _ in _records(real_text()).get(real[last], [])][-1:] == [end],
          what=f"PBS's {end} record")
    theirs, ours = _records(real_text()), _records(local_text())
    for role in real:
        assert theirs.get(real[role]), f"PBS wrote no record of its {role} {real[role]}"
        assert ours.get(mine[role]) == theirs[real[role]], role
