"""qstat's listings other than -f (-a and its kin, -p, -E, -q) and pbsnodes' host listing
print on the local engine what OpenPBS 23.06 prints for the same jobs, compared line by
line where the output holds nothing of the machine's (a held job's line, the headers).

Each side makes the jobs of test_pbs_job_parity.py (one running, one finished, one held:
``{run}``, ``{done}``, ``{held}``); the held one asks for ``select=2:ncpus=1:mem=3gb``
and ``place=free``. Job ids differ in length between the two servers, so a row's padding
after an id does too: runs of blanks are compared as one."""

from __future__ import annotations

import re
import shlex
import socket

from pbsplug.engine.testing import LocalEngine

from .conftest import RealPbs, assert_agree, forget_both
from .test_pbs_job_parity import _ids
from .test_pbs_parity import _pbs_host

HELD = ("-h", "-l", "select=2:ncpus=1:mem=3gb", "-l", "place=free")
#: Command lines whose whole output is compared (blanks squeezed).
ROWS = [
    "qstat -a {held}", "qstat -an {held}", "qstat -as {held}", "qstat -an1 {held}",
    "qstat -as1 {held}", "qstat -asn1 {held}", "qstat -aw {held}", "qstat -anw {held}",
    "qstat -T {held}", "qstat -Tw {held}", "qstat -G {held}", "qstat -M {held}",
    "qstat -p {held}", "qstat -pw {held}", "qstat -i {held}", "qstat -r {held}",
    "qstat -H {held}", "qstat -u root {held}", "qstat -E 99999 {held}",
    "qstat -a 99999 {held}", "qstat -p 99999 {held}", "qstat -q workq", "qstat -q -G workq",
    "qstat -aw -Q workq",
]


def _squeezed(text: str) -> str:
    return re.sub(r" +", " ", text)


def _jobs(submit) -> dict[str, str]:
    return {"run": submit("sleep 1000\n"), "done": submit("true\n"),
            "held": submit("true\n", *HELD)}


def test_qstat_listings_match_openpbs(pbs: RealPbs, local: LocalEngine):
    pbs_host = _pbs_host(pbs)
    engine_host = socket.gethostname().split(".")[0]

    def engine_submit(script: str, *opts: str) -> str:
        return local.pbs("qsub", *opts, input=script, check=True).stdout.strip()

    differences = []
    try:
        real_jobs = _jobs(pbs.qsub)
        mine_jobs = _jobs(engine_submit)
        pbs.wait(real_jobs["done"])
        pbs.wait(real_jobs["run"], "R")
        local.wait(mine_jobs["done"])
        local.wait(mine_jobs["run"], "R")
        for line in ROWS:
            real = pbs.run(*shlex.split(line.format(**real_jobs)), check=False)
            mine = local.pbs(*shlex.split(line.format(**mine_jobs)))
            real_out = (real.returncode, _squeezed(_ids(real.stdout, real_jobs, pbs_host)),
                        _squeezed(_ids(real.stderr, real_jobs, pbs_host)))
            mine_out = (mine.returncode,
                        _squeezed(_ids(mine.stdout, mine_jobs, engine_host)),
                        _squeezed(_ids(mine.stderr, mine_jobs, engine_host)))
            if real_out != mine_out:
                differences.append(f"{line!r}\n  pbs:    {real_out!r}\n  engine: {mine_out!r}")
    finally:
        forget_both(pbs, local)
    assert_agree(differences, len(ROWS))
