"""qselect, qsig, qorder, qmsg, the queue commands and qterm answer as OpenPBS 23.06's do:
the same standard output, standard error and exit status for each command line of a
table, run on the real PBS (conftest.py) and on a local engine in the same session, as
test_pbs_job_parity.py does for the other job commands (its jobs, names and helpers).

Each side makes a running job (``sleep``), a finished one and two held ones, named
``{run}``, ``{done}``, ``{held}`` and ``{held2}``; in the answers, each side's ids become
those names and its host ``HOST``. Rows run as root, or as a second Unix user ("user").
No row stops a server or a queue for good: qterm and the queue commands are asked only
what they refuse. The real PBS is shared: its jobs are deleted after the table."""

from __future__ import annotations

import socket

from .conftest import assert_agree, forget_both
from .test_pbs_job_parity import _engine, _mapped, _real
from .test_pbs_parity import _pbs_host

#: (the command line, as whom: "" root, "user" the second user).
ROWS: list[tuple[str, str]] = [
    # qselect
    ("qselect", ""),
    ("qselect", "user"),
    ("qselect -s R", ""),
    ("qselect -s H", ""),
    ("qselect -s QW", ""),
    ("qselect -s F", ""),
    ("qselect -N runner", ""),
    ("qselect -N nosuch", ""),
    ("qselect -u root", ""),
    ("qselect -u nosuchuser", ""),
    ("qselect -q workq", ""),
    ("qselect -q @{host}", ""),
    ("qselect -q nosuch", ""),
    ("qselect -l ncpus.gt.0", ""),
    ("qselect -l ncpus.eq.1", ""),
    ("qselect -l walltime.gt.0", ""),
    ("qselect -l mem.lt.1gb", ""),
    ("qselect -l mem.gt.1mb", ""),
    ("qselect -l arch.eq.linux", ""),
    ("qselect -l ncpus=1", ""),
    ("qselect -l ncpus.xx.1", ""),
    ("qselect -l nosuch.eq.1", ""),
    ("qselect -l ncpus.gt.abc", ""),
    ("qselect -p 5", ""),
    ("qselect -p .lt.5", ""),
    ("qselect -p gt.0", ""),
    ("qselect -p abc", ""),
    ("qselect -h u", ""),
    ("qselect -h n", ""),
    ("qselect -h x", ""),
    ("qselect -h nu", ""),
    ("qselect -r n", ""),
    ("qselect -r y", ""),
    ("qselect -r x", ""),
    ("qselect -A acct", ""),
    ("qselect -A ''", ""),
    ("qselect -N ''", ""),
    ("qselect -P proj", ""),
    ("qselect -c u", ""),
    ("qselect -c n", ""),
    ("qselect -c 5", ""),
    ("qselect -a bad", ""),
    ("qselect -a gt.202901010000", ""),
    ("qselect -a .gt.202901010000", ""),
    ("qselect -s Z", ""),
    ("qselect -s r", ""),
    ("qselect -u ''", ""),
    ("qselect extra", ""),
    ("qselect -s R -u root -N runner", ""),
    # qsig
    ("qsig -s USR1 {held}", ""),
    ("qsig -s suspend {held}", ""),
    ("qsig -s resume {run}", ""),
    ("qsig -s USR1 {done}", ""),
    ("qsig {done}", ""),
    ("qsig -s USR1 99999", ""),
    ("qsig abc", ""),
    ("qsig", ""),
    ("qsig -s USR1 {held} 99999 {held2}", ""),
    ("qsig -s suspend {run}", "user"),
    ("qsig -s resume {run}", "user"),
    ("qsig -s USR1 {done}", "user"),
    # qorder
    ("qorder {held} {run}", ""),
    ("qorder {held} {done}", ""),
    ("qorder {held} 99999", ""),
    ("qorder {held}", ""),
    ("qorder", ""),
    ("qorder {held} {held2} {run}", ""),
    ("qorder abc {held}", ""),
    ("qorder {held} {held2}", "user"),
    ("qorder {held} {held}", ""),
    # qmsg
    ("qmsg hello {held}", ""),
    ("qmsg hello {done}", ""),
    ("qmsg hello 99999", ""),
    ("qmsg '' {run}", ""),
    ("qmsg hello", ""),
    ("qmsg", ""),
    ("qmsg hello {done}", "user"),
    # qstart, qstop, qenable, qdisable
    ("qstop nosuch", ""),
    ("qstart", ""),
    ("qstop", ""),
    ("qenable", ""),
    ("qdisable", ""),
    ("qenable -Z", ""),
    ("qdisable nosuch", ""),
    ("qstart 'bad name!'", ""),
    ("qstop workq", "user"),
    ("qstart workq", "user"),
    ("qenable workq", "user"),
    ("qdisable workq", "user"),
    ("qstop nosuch", "user"),
    # qterm (only what it refuses)
    ("qterm -t bad", ""),
    ("qterm", "user"),
    ("qterm -t immediate", "user"),
]

#: Rows where the engine answers otherwise on purpose, and why.
DIFFERENT: dict[str, str] = {}


def _jobs_real(pbs) -> dict[str, str]:
    jobs = {"run": pbs.qsub("sleep 1000\n", "-N", "runner", "-A", "acct", "-P", "proj",
                            "-p", "5", "-r", "n", "-l", "walltime=01:00:00"),
            "done": pbs.qsub("true\n"), "held": pbs.qsub("true\n", "-h"),
            "held2": pbs.qsub("true\n", "-h")}
    pbs.wait(jobs["done"])
    pbs.wait(jobs["run"], "R")
    return jobs


def _jobs_engine(local) -> dict[str, str]:
    def qsub(*args: str) -> str:
        return local.pbs("qsub", *args, check=True).stdout.strip()

    jobs = {"run": qsub("-N", "runner", "-A", "acct", "-P", "proj", "-p", "5", "-r", "n",
                        "-l", "walltime=01:00:00", "--", "/bin/sleep", "1000"),
            "done": qsub("--", "/bin/true"), "held": qsub("-h", "--", "/bin/true"),
            "held2": qsub("-h", "--", "/bin/true")}
    local.wait(jobs["done"])
    local.wait(jobs["run"], "R")
    return jobs


def test_control_commands_answer_as_openpbs(pbs, local, attacker, unix_user):
    pbs_host = _pbs_host(pbs)
    engine_host = socket.gethostname().split(".")[0]
    differences, agreed = [], []
    try:
        real_jobs = _jobs_real(pbs)
        mine_jobs = _jobs_engine(local)
        for line, user in ROWS:
            real = _real(pbs, line.format(host=pbs_host, **real_jobs), user, unix_user)
            mine = _engine(local, line.format(host=engine_host, **mine_jobs), user, attacker)
            real, mine = _mapped(real, real_jobs, pbs_host), _mapped(mine, mine_jobs, engine_host)
            label = f"[{user or 'root'}] {line!r}"
            if real != mine and line not in DIFFERENT:
                differences.append(f"{label}\n  pbs:    {real!r}\n  engine: {mine!r}")
            if real == mine and line in DIFFERENT:
                agreed.append(label)
    finally:
        forget_both(pbs, local)
    assert_agree(differences, len(ROWS))
    assert not agreed, f"rows in DIFFERENT that now agree: {agreed}"
