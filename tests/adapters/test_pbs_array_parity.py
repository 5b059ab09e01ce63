"""Job arrays' commands answer as OpenPBS 23.06's do: the same standard output, standard
error and exit status for each command of a table, run on the real PBS (conftest.py) and on
a local engine in the same session, as test_pbs_job_parity.py does for single jobs (its
`_real`, `_engine` and `_ids`).

Each side first submits the same held array, ``-J 1-6``; a command names its number
``{num}``, and in the answers each side's array and subjob ids become ``{num}[...]``, its
host ``HOST``, and runs of blanks one blank (a table's id column is as wide as the ids).
The rows run in order: a qdel changes what the next rows see. qsub rows are those PBS's qsub
or server refuses (none queues a job)."""

from __future__ import annotations

import re
import socket

from pbsplug.engine.testing import LocalEngine

from .conftest import RealPbs
from .test_pbs_job_parity import _engine, _real
from .test_pbs_parity import _norm, _pbs_host

ROWS: list[str] = [
    "qsub -J 5 -- /bin/true", "qsub -J 1-1 -- /bin/true", "qsub -J 1-10:0 -- /bin/true",
    "qsub -J 1-3,5 -- /bin/true", "qsub -r n -J 1-3 -- /bin/true",
    "qsub -J 0-10000 -- /bin/true",
    "qstat {num}[7]", "qstat -t {num}[]", "qstat -J", "qstat -Jt",
    "qhold {num}[2]", "qrls {num}[2]", "qalter -N x {num}[2]", "qdel {num}[11]",
    "qdel {num}[2]", "qdel {num}[2]", "qdel {num}[4-5]", "qdel {num}[4-5]",
    "qstat -t {num}[]", "qrerun {num}[3]", "qalter -W max_run_subjobs=1 {num}[]",
    "qdel {num}[1-20:2]", "qstat -t {num}[]", "qstat -f {num}[6]",
]


def _ids(text: str, number: str, host: str) -> str:
    text = re.sub(rf"\b{number}(?=[\[.])", "{num}", text)
    return re.sub(" +", " ", _norm(text, host))


def test_array_commands_answer_as_openpbs(pbs: RealPbs, local: LocalEngine, attacker,
                                          unix_user):
    pbs_host = _pbs_host(pbs)
    engine_host = socket.gethostname().split(".")[0]
    differences = []
    try:
        real = {"num": pbs.qsub("true\n", "-h", "-J", "1-6").split("[")[0]}
        mine = {"num": local.pbs("qsub", "-h", "-J", "1-6", input="true\n",
                                 check=True).stdout.split("[")[0]}
        for line in ROWS:
            got = _real(pbs, line.format(**real), "", unix_user)
            ours = _engine(local, line.format(**mine), "", attacker)
            got = (got[0], _ids(got[1], real["num"], pbs_host),
                   _ids(got[2], real["num"], pbs_host))
            ours = (ours[0], _ids(ours[1], mine["num"], engine_host),
                    _ids(ours[2], mine["num"], engine_host))
            if line == "qstat -f {num}[6]":  # (the attributes of one held subjob: the
                got, ours = got[:1], ours[:1]  # server's own differ; its exit status only)
            if got != ours:
                differences.append(f"{line!r}\n  pbs:    {got!r}\n  engine: {ours!r}")
    finally:
        pbs.forget_jobs()
        assert local.client is not None
        left = [i for i, a in local.client("stat_jobs").items() if a["job_state"] != "F"]
        if left:
            local.client("delete", ids=left, force=True)
    assert not differences, f"{len(differences)} of {len(ROWS)} rows differ:\n" + \
        "\n".join(differences)
