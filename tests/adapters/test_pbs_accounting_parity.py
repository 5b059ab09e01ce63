"""The local engine's accounting log against OpenPBS 23.06's: the same small workload on
the real PBS (conftest.py) and on a local engine (a job run to its end; a held job altered,
then deleted; a running job rerun, suspended, resumed, then deleted; a reservation deleted), and for each job and reservation the same
record types in the same order, each record with the same keys in the same order.

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


def _workload(run: Callable[..., str], wait: Callable[[str, str], object],
              run_count: Callable[[str], int]) -> dict[str, str]:
    """The same commands on one side; its ids by role."""
    ids = {"done": run("qsub", "-N", "acct", "-l", "walltime=00:01:00", "--", "/bin/true")}
    ids["held"] = run("qsub", "-h", "--", "/bin/true")
    run("qalter", "-N", "renamed", "-l", "walltime=00:02:00", ids["held"])
    run("qdel", ids["held"])
    ids["rerun"] = run("qsub", "--", "/bin/sleep", "60")
    wait(ids["rerun"], "R")
    run("qrerun", ids["rerun"])
    until(lambda: run_count(ids["rerun"]) >= 2, timeout=60, what="the job's second run")
    wait(ids["rerun"], "R")
    run("qsig", "-s", "suspend", ids["rerun"])
    wait(ids["rerun"], "S")
    run("qsig", "-s", "resume", ids["rerun"])
    wait(ids["rerun"], "R")
    run("qdel", ids["rerun"])
    wait(ids["done"], "F")
    wait(ids["rerun"], "F")
    ids["resv"] = run("pbs_rsub", "-R", _when(600), "-E", _when(700)).split()[0]
    time.sleep(2)  # (confirmed by then on both sides: the Y record is awaited below)
    run("pbs_rdel", ids["resv"])
    return ids


def test_the_engine_writes_pbs_record_types_and_keys(pbs: RealPbs, local: LocalEngine):
    today = PBS_ACCOUNTING / time.strftime("%Y%m%d")
    offset = today.stat().st_size if today.exists() else 0

    def real_run(*argv: str) -> str:
        return pbs.run(*argv).stdout.strip()

    def real_count(job_id: str) -> int:
        return int(pbs.job(job_id).get("run_count", 0))

    real = _workload(real_run, lambda j, s: pbs.wait(j, s),
                     real_count)

    def local_run(*argv: str) -> str:
        return local.pbs(*argv, check=True).stdout.strip()

    def local_count(job_id: str) -> int:
        return int(local.job(job_id).get("run_count", 0))

    mine = _workload(local_run, lambda j, s: local.wait(j, s), local_count)

    def real_text() -> str:
        with open(today, "rb") as file:
            file.seek(offset)
            return file.read().decode("utf-8", "replace")

    def local_text() -> str:
        return "".join(p.read_text() for p in sorted(local.home.accounting.iterdir()))

    until(lambda: [k for k, _ in _records(real_text()).get(real["resv"], [])][-1:] == ["k"],
          what="PBS's k record")
    theirs, ours = _records(real_text()), _records(local_text())
    for role in real:
        assert theirs.get(real[role]), f"PBS wrote no record of its {role} {real[role]}"
        assert ours.get(mine[role]) == theirs[real[role]], role
