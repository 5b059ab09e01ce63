"""Job arrays' commands answer as OpenPBS 23.06's do: the same standard output, standard
error and exit status for each command of a table, run on the real PBS (conftest.py) and on
a local engine in the same session, as test_pbs_job_parity.py does for single jobs (its
`_real`, `_engine` and `_ids`).

Each side first submits the same held array, ``-J 1-6``; a command names its number
``{num}``, and in the answers each side's array and subjob ids become ``{num}[...]``, its
host ``HOST``, and runs of blanks one blank (a table's id column is as wide as the ids).
The rows run in order: a qdel changes what the next rows see. qsub rows are those PBS's qsub
or server refuses (none queues a job).

A running array (`test_a_running_arrays_subjobs_show_as_openpbs`): its finished subjob is X
to qstat (F once the array is over), its subjob not begun carries its comment and Exit_status,
which is 1 after a subjob exited 3, and it ends with its last subjob's, 0."""

from __future__ import annotations

import json
import re
import socket
import time

from pbsplug.engine.testing import LocalEngine

from .conftest import WRAPPERS, RealPbs, assert_agree, forget_both
from .test_pbs_job_parity import _engine, _real
from .test_pbs_parity import _norm, _pbs_host

ROWS: list[str] = [
    "qsub -J 5 -- /bin/true", "qsub -J 1-1 -- /bin/true", "qsub -J 1-10:0 -- /bin/true",
    "qsub -J 1-3,5 -- /bin/true", "qsub -r n -J 1-3 -- /bin/true",
    "qsub -J 0-10000 -- /bin/true",
    "qstat {num}[7]", "qstat -t {num}[]", "qstat -J", "qstat -Jt",
    "qhold {num}[2]", "qrls {num}[2]", "qalter -N x {num}[2]", "qdel {num}[11]",
    "qdel {num}[2]", "qdel {num}[2]", "qdel {num}[4-5]", "qdel {num}[4-5]",
    "qstat -t {num}[]", "qrerun {num}[3]", "qrerun {num}[]",
    "qsub -W depend=afterok:{num}[3] -- /bin/true",
    "qsub -W depend=afterany:{num}[2-3] -- /bin/true",
    "qalter -W max_run_subjobs=1 {num}[]",
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
        forget_both(pbs, local)
    assert_agree(differences, len(ROWS))


#: Limits with arrays: (as the second user, command); `{last}` is the id the last qsub
#: printed on that side. An array counts as its subjobs and is refused whole (a queue's
#: max_queuable counts it as one job); a user's
#: qmove is checked in the destination (a manager's is not on PBS: see docs/engine.md).
LIMIT_ROWS: list[tuple[bool, str]] = [
    (False, "qmgr -c 'set server max_queued = [u:PBS_GENERIC=10]'"),
    (False, "qsub -h -J 0-99 -- /bin/true"), (False, "qsub -h -J 1-6 -- /bin/true"),
    (False, "qsub -h -J 1-5 -- /bin/true"), (False, "qsub -h -J 1-4 -- /bin/true"),
    (False, "qsub -h -- /bin/true"),
    (False, "qmgr -c 'unset server max_queued'"),
    (False, "qmgr -c 'set server max_queued_res.ncpus = [u:PBS_GENERIC=12]'"),
    (False, "qsub -h -J 1-3 -- /bin/true"), (False, "qsub -h -J 1-2 -- /bin/true"),
    (False, "qmgr -c 'unset server max_queued_res.ncpus'"),
    (False, "qmgr -c 'set queue workq max_queued = [u:PBS_GENERIC=13]'"),
    (False, "qsub -h -J 1-2 -- /bin/true"),
    (False, "qmgr -c 'unset queue workq max_queued'"),
    (False, "qmgr -c 'set queue workq queued_jobs_threshold = [u:PBS_GENERIC=2]'"),
    (False, "qsub -J 1-3 -- /bin/true"),
    (False, "qmgr -c 'unset queue workq queued_jobs_threshold'"),
    (False, "qmgr -c 'set queue workq max_queuable = 4'"),  # (3 arrays there: rows)
    (False, "qsub -h -J 1-4 -- /bin/true"), (False, "qsub -h -- /bin/true"),
    (False, "qmgr -c 'unset queue workq max_queuable'"),
    (False, "qmgr -c 'create queue arrq queue_type=execution,enabled=true,started=true'"),
    (False, "qmgr -c 'set queue arrq max_queued = [u:PBS_GENERIC=3]'"),
    (True, "qsub -h -J 1-4 -- /bin/true"), (True, "qmove arrq {last}"),
    (True, "qsub -h -J 1-3 -- /bin/true"), (True, "qmove arrq {last}"),
    (True, "qsub -h -- /bin/true"), (True, "qmove arrq {last}"),
    # the thresholds count held and waiting jobs; a manager's qmove passes every limit
    (False, "qmgr -c 'create queue thq queue_type=execution,enabled=true,started=true'"),
    (False, "qmgr -c 'set queue thq queued_jobs_threshold = [o:PBS_ALL=1]'"),
    (False, "qsub -h -q thq -- /bin/true"), (False, "qsub -h -q thq -- /bin/true"),
    (False, "qsub -a 203001010000 -q thq -- /bin/true"),
    (True, "qsub -h -- /bin/true"), (True, "qmove thq {last}"), (False, "qmove thq {last}"),
    (True, "qsub -h -J 1-2 -- /bin/true"), (False, "qmove arrq {last}"),
]
#: What is put back on both sides, whatever happened.
LIMIT_UNDO = ("unset server max_queued", "unset server max_queued_res.ncpus",
              "unset queue workq max_queued", "unset queue workq queued_jobs_threshold",
              "unset queue workq max_queuable")


def _any_ids(text: str, host: str) -> str:
    text = _norm(text, host)
    return re.sub(r"\b\d+(?=(?:\[\d*\])?\.HOST)", "{num}", re.sub(" +", " ", text))


def _rows_agree(pbs: RealPbs, local: LocalEngine, rows: list[tuple[bool, str]], unix_user,
                attacker, last_refused: bool) -> list[str]:
    """Run each (as the second user, command) row on both sides, in order; the rows where
    they differ. `{last}` is the id the last qsub printed on that side: every qsub's (an
    empty one when it was refused) if `last_refused`, else the last both sides queued."""
    hosts = {"pbs": _pbs_host(pbs), "engine": socket.gethostname().split(".")[0]}
    differences = []
    last = {"pbs": "", "engine": ""}
    for user, line in rows:
        got = _real(pbs, line.format(last=last["pbs"]), "u" if user else "", unix_user)
        ours = _engine(local, line.format(last=last["engine"]), "u" if user else "",
                       attacker)
        if line.startswith("qsub") and (last_refused or got[0] == ours[0] == 0):
            last = {"pbs": got[1].strip(), "engine": ours[1].strip()}
        got = (got[0], _any_ids(got[1], hosts["pbs"]), _any_ids(got[2], hosts["pbs"]))
        ours = (ours[0], _any_ids(ours[1], hosts["engine"]), _any_ids(ours[2], hosts["engine"]))
        if got != ours:
            differences.append(f"{line!r}\n  pbs:    {got!r}\n  engine: {ours!r}")
    return differences


def test_arrays_count_as_their_subjobs_against_the_limits_as_openpbs(
        pbs: RealPbs, local: LocalEngine, attacker, unix_user):
    try:
        differences = _rows_agree(pbs, local, LIMIT_ROWS, unix_user, attacker,
                                  last_refused=True)
    finally:
        forget_both(pbs, local)
        for text in LIMIT_UNDO:
            pbs.qmgr(text, check=False)
            local.pbs("qmgr", "-c", text)
        time.sleep(1)  # (PBS's qdel -W force is done when its history is written)
        for queue in ("arrq", "thq"):
            pbs.qmgr(f"delete queue {queue}", check=False)
            local.pbs("qmgr", "-c", f"delete queue {queue}")
    assert_agree(differences, len(LIMIT_ROWS))


#: A queue's max_array_size beside the server's (as root: a manager's qmove passes it).
SIZE_ROWS: list[str] = [
    "qmgr -c 'set server max_array_size = 10'", "qmgr -c 'set queue workq max_array_size = 3'",
    "qmgr -c 'list queue workq max_array_size'",
    "qsub -h -J 1-3 -- /bin/true", "qsub -h -J 1-4 -- /bin/true",
    "qmgr -c 'set server max_array_size = 3'", "qmgr -c 'set queue workq max_array_size = 10'",
    "qsub -h -J 1-5 -- /bin/true", "qmgr -c 'unset server max_array_size'",
    "qmgr -c 'set queue workq max_array_size = 0'", "qsub -h -J 1-2 -- /bin/true",
    "qmgr -c 'set queue workq max_array_size = -1'", "qsub -h -J 1-2 -- /bin/true",
    "qmgr -c 'set queue workq max_array_size = 16777217'", "qsub -h -J 1-2 -- /bin/true",
    "qmgr -c 'unset queue workq max_array_size'",
    "qmgr -c 'create queue arrq2 queue_type=execution,enabled=true,started=true,"
    "max_array_size=2'",
    "qsub -q arrq2 -h -J 1-5 -- /bin/true", "qsub -h -J 1-5 -- /bin/true",
    "qmove arrq2 {last}",
]


def test_a_queues_max_array_size_answers_as_openpbs(pbs: RealPbs, local: LocalEngine,
                                                    attacker, unix_user):
    try:
        differences = _rows_agree(pbs, local, [(False, line) for line in SIZE_ROWS],
                                  unix_user, attacker, last_refused=False)
    finally:
        forget_both(pbs, local)
        for text in ("unset server max_array_size", "unset queue workq max_array_size"):
            pbs.qmgr(text, check=False)
            local.pbs("qmgr", "-c", text)
        time.sleep(1)  # (PBS's qdel -W force is done when its history is written)
        pbs.qmgr("delete queue arrq2", check=False)
        local.pbs("qmgr", "-c", "delete queue arrq2")
    assert_agree(differences, len(SIZE_ROWS))


#: Subjob 1 exits 3 at once; the others wait (a minute at most) for ``go`` in the folder
#: they were submitted from.
_FIRST_FAILS = ('if [ "$PBS_ARRAY_INDEX" = 1 ]; then exit 3; fi\n'
                'for i in $(seq 600); do [ -e "$PBS_O_WORKDIR/go" ] && exit 0; sleep 0.1; done\n')
#: While subjob 1 is over, 2 runs and 3 waits (``%1``); then once the array is over.
RUNNING_ROWS = ["qstat {num}[1]", "qstat -x {num}[1]", "qstat -t {num}[]", "qstat -x {num}[]"]
OVER_ROWS = ["qstat {num}[1]", "qstat -x {num}[1]", "qstat -xt {num}[]",
             # (one id to PBS's qdel: `Job has finished {num}[1-3]`, `{num}[1,3]`)
             "qdel {num}[1] {num}[2] {num}[3]", "qdel {num}[3] {num}[1]",
             "qdel -x {num}[1] {num}[2]"]


def test_a_running_arrays_subjobs_show_as_openpbs(pbs: RealPbs, local: LocalEngine):
    """A finished subjob of a running array is X (F once the array is over), a subjob not
    begun shows the array's comment, and the array ends with Exit_status 0 though a subjob
    exited 3: its last subjob's."""
    hosts = {"pbs": _pbs_host(pbs), "engine": socket.gethostname().split(".")[0]}
    sides = {"pbs": (lambda line: _real(pbs, line, "", "")),
             "engine": (lambda line: _engine(local, line, "", None))}
    folders = {"pbs": pbs.work, "engine": local.work}
    differences: list[str] = []
    num: dict[str, str] = {}
    total = 0

    def table(side: str, out: str) -> str:
        # (a running subjob's Time Use: 0 until PBS's MoM first reports its use, the
        # engine's report comes with its start; docs/engine.md)
        return out.replace(" 00:00:00 R ", " 0 R ")

    def compare(line: str, shown=table) -> None:
        nonlocal total
        total += 1
        got = {}
        for side, run in sides.items():
            code, out, err = run(line.format(num=num[side]))
            got[side] = (code, _ids(shown(side, out), num[side], hosts[side]),
                         _ids(err, num[side], hosts[side]))
        if got["pbs"] != got["engine"]:
            differences.append(f"{line!r}\n  pbs:    {got['pbs']!r}\n  engine: "
                               f"{got['engine']!r}")

    def attrs(out: str) -> dict:
        return next(iter(json.loads(out)["Jobs"].values()))

    def state(side: str, out: str) -> str:
        return str(attrs(out)["job_state"])

    def array_comment(side: str, out: str) -> str:
        found, array = attrs(out), sides[side](f"qstat -f -F json {num[side]}[]")[1]
        return f"{found['job_state']} {found.get('comment') == attrs(array)['comment']}"

    def exit_only(side: str, out: str) -> str:
        found = attrs(out)
        return f"{found['job_state']} {found.get('Exit_status')}"

    def exit_status(side: str, out: str) -> str:
        found = attrs(out)
        return f"{found['job_state']} {found.get('Exit_status')} {found.get('substate')}"

    try:
        for folder in folders.values():
            (folder / "go").unlink(missing_ok=True)
        ids = {"pbs": pbs.qsub(_FIRST_FAILS, "-J", "1-3%1"),
               "engine": local.pbs("qsub", "-J", "1-3%1", input=_FIRST_FAILS,
                                   check=True).stdout.strip()}
        num.update((side, job_id.split("[")[0]) for side, job_id in ids.items())
        pbs.wait(ids["pbs"].replace("[]", "[2]"), "R")
        local.wait(ids["engine"].replace("[]", "[2]"), "R")
        for line in RUNNING_ROWS:
            compare(line)
        compare("qstat -f -F json {num}[1]", state)
        compare("qstat -f -F json {num}[3]", array_comment)
        compare("qstat -f -F json {num}[]", exit_only)  # (1: its last subjob's failed)
        compare("qstat -f -F json {num}[3]", exit_only)
        for folder in folders.values():
            (folder / "go").touch()
        pbs.wait(ids["pbs"], "F")
        local.wait(ids["engine"], "F")
        for line in OVER_ROWS:
            compare(line)
        compare("qstat -xf -F json {num}[1]", state)
        compare("qstat -xf -F json {num}[]", exit_status)
    finally:
        for folder in folders.values():
            (folder / "go").unlink(missing_ok=True)
        forget_both(pbs, local)
    assert_agree(differences, total)


class _AsUser:
    """The real PBS and the local engine asked alike as the second user (root's deleted
    jobs end otherwise on PBS: Exit_status 0): each side's array number, the folder its
    jobs were submitted from, and the rows where the two answer differently."""

    def __init__(self, pbs: RealPbs, local: LocalEngine, unix_user: str, attacker):
        self.pbs, self.local, self.unix_user, self.attacker = pbs, local, unix_user, attacker
        self.hosts = {"pbs": _pbs_host(pbs), "engine": socket.gethostname().split(".")[0]}
        self.folders = {"pbs": pbs.work, "engine": local.work}
        self.num: dict[str, str] = {}
        self.differences: list[str] = []
        self.total = 0

    def qsub(self, script: str, *options: str) -> dict[str, str]:
        """The same array submitted on both sides; `script` names ``{folder}``, the
        submission folder of its side. Each side's array id."""
        ids = {}
        for side, folder in self.folders.items():
            (folder / "go").unlink(missing_ok=True)
            text = script.format(folder=folder)
            if side == "pbs":
                done = self.pbs.run(str(WRAPPERS / "pbs-ns"), "runuser", "-u", self.unix_user,
                                    "--", "/opt/pbs/bin/qsub", *options, input=text)
            else:
                done = self.attacker.pbs(self.local, "qsub", *options, input=text,
                                         cwd=self.local.work)
                assert done.returncode == 0, done.stderr
            ids[side] = done.stdout.strip()
            self.num[side] = ids[side].split("[")[0]
        return ids

    def qmgr(self, text: str, check: bool = True) -> None:
        """A qmgr directive on both sides, as root."""
        self.pbs.qmgr(text, check=check)
        self.local.pbs("qmgr", "-c", text, check=check)

    def go(self) -> None:
        for folder in self.folders.values():
            (folder / "go").touch()

    def run(self, side: str, line: str) -> tuple[int, str, str]:
        line = line.format(num=self.num[side])
        if side == "pbs":
            return _real(self.pbs, line, "u", self.unix_user)
        return _engine(self.local, line, "u", self.attacker)

    def compare(self, line: str, shown=None) -> None:
        """Row `line` on both sides: its exit status, output (through `shown(side, out)`
        when given) and errors, ids and hosts named alike."""
        self.total += 1
        got = {}
        for side in self.folders:
            code, out, err = self.run(side, line)
            out = shown(side, out) if shown is not None and code == 0 else out
            got[side] = (code, _ids(out.replace(" 00:00:00 R ", " 0 R "), self.num[side],
                                    self.hosts[side]), _ids(err, self.num[side], self.hosts[side]))
        if got["pbs"] != got["engine"]:
            self.differences.append(f"{line!r}\n  pbs:    {got['pbs']!r}\n  engine: "
                                    f"{got['engine']!r}")

    def array(self, side: str) -> dict:
        return _json_job(self.run(side, "qstat -xf -F json {num}[]")[1])

    def gone(self, side: str, out: str) -> str:
        """A subjob without a run of its own (deleted before it began, or purged): its
        state, substate, comment and Exit_status, and whether its stime and obittime are
        its array's (both PBS's, measured)."""
        sub, array = _json_job(out), self.array(side)
        return (f"{sub['job_state']} {sub.get('substate')} {sub.get('comment')} "
                f"{sub.get('Exit_status')} stime={sub.get('stime') == array.get('stime')} "
                f"obittime={'obittime' in sub and sub['obittime'] == array.get('obittime')}")

    def wait_all(self, ids: dict[str, str], states: str = "F") -> None:
        self.pbs.wait(ids["pbs"], states)
        self.local.wait(ids["engine"], states)


def _json_job(out: str) -> dict:
    return next(iter(json.loads(out)["Jobs"].values()))


def _array_end(side: str, out: str, exiting: bool = True) -> str:
    """An array's state, substate, Exit_status, comment (its time left out) and
    array_state_count; without the count's Exiting when not `exiting`."""
    attrs = _json_job(out)
    count = attrs.get("array_state_count", "")
    if not exiting:
        count = re.sub(r"Exiting:-?\d+ ", "", count)
    comment = re.sub(r" at .*\d\d:\d\d", " at WHEN", attrs.get("comment", ""))
    return (f"{attrs['job_state']} {attrs.get('substate')} {attrs.get('Exit_status')} "
            f"{comment} {count}")


#: Each subjob waits (a minute at most) for ``go`` in its submission folder.
_WAIT_GO = 'for i in $(seq 600); do [ -e {folder}/go ] && exit 0; sleep 0.1; done\n'


def test_a_subjob_deleted_before_it_began_shows_as_openpbs(pbs: RealPbs, local: LocalEngine,
                                                           attacker, unix_user):
    """`qdel 12[3]` of `-J 1-3%1` while 12[1] runs: 12[3] is X with its array's stime
    and substate, `Subjob finished`, Expired in the array's count; once the array is over
    F with its array's substate, Exit_status and obittime, and the array `and finished`."""
    both = _AsUser(pbs, local, unix_user, attacker)
    try:
        ids = both.qsub(_WAIT_GO, "-J", "1-3%1")
        both.wait_all({side: i.replace("[]", "[1]") for side, i in ids.items()}, "R")
        for line in ("qdel {num}[3]", "qstat -t {num}[]", "qstat {num}[3]",
                     "qstat -x {num}[3]"):
            both.compare(line)
        both.compare("qstat -f -F json {num}[3]", both.gone)
        both.compare("qstat -f -F json {num}[]", _array_end)
        both.go()
        both.wait_all(ids)
        for line in ("qstat -xt {num}[]", "qstat {num}[3]"):
            both.compare(line)
        both.compare("qstat -xf -F json {num}[3]", both.gone)
        both.compare("qstat -xf -F json {num}[]", _array_end)
    finally:
        for folder in both.folders.values():
            (folder / "go").unlink(missing_ok=True)
        forget_both(pbs, local)
    assert_agree(both.differences, both.total)


#: Subjob 1 exits 0 at once; the others sleep (two minutes at most) until killed.
_SLEEPS = '[ "$PBS_ARRAY_INDEX" = 1 ] && exit 0\nexec sleep 120\n'


def test_a_purged_last_subjob_ends_its_array_as_openpbs(pbs: RealPbs, local: LocalEngine,
                                                        attacker, unix_user):
    """`qdel -x 12[2]` of `-J 1-2%1`'s running last subjob (a sleep, which the SIGTERM
    ends): the array ends with it, `and terminated`, Exit_status 1; 12[2] shows as an
    index gone (91, Exit_status 1, its array's stime and obittime). PBS's count says
    `Exiting:-1` there; pbsplug's 0 (docs/engine.md): the row leaves Exiting out.

    OpenPBS does not always say so: now and then (once in three runs of a shell loop,
    and in a CI run with Exit_status 1 too) it ends the subjob and its array `failed`,
    93, as if the subjob had failed rather than been deleted. That is a race inside
    OpenPBS (the obit against the deletion's mark), so its 93 `failed` is read here as
    the 91 `terminated` it usually says; pbsplug's side must say 91 `terminated`."""
    both = _AsUser(pbs, local, unix_user, attacker)

    def usual(side: str, text: str) -> str:
        if side != "pbs":
            return text
        return re.sub(r"^F 93 ", "F 91 ", text).replace("and failed ", "and terminated ")

    try:
        ids = both.qsub(_SLEEPS, "-J", "1-2%1")
        both.wait_all({side: i.replace("[]", "[2]") for side, i in ids.items()}, "R")
        both.compare("qdel -x {num}[2]")
        both.wait_all(ids)
        both.compare("qstat -xt {num}[]")
        both.compare("qstat -xf -F json {num}[2]",
                     lambda side, out: usual(side, both.gone(side, out)))
        both.compare("qstat -xf -F json {num}[]",
                     lambda side, out: usual(side, _array_end(side, out, exiting=False)))
    finally:
        forget_both(pbs, local)
    assert_agree(both.differences, both.total)


#: Subjob 1 exits 0 at once; the others ignore SIGTERM and wait (a minute at most) for
#: ``go`` in their submission folder.
_DEAF = ('[ "$PBS_ARRAY_INDEX" = 1 ] && exit 0\ntrap "" TERM\n'
         'for i in $(seq 600); do [ -e {folder}/go ] && exit 0; sleep 0.1; done\n')


def test_qdel_x_of_a_running_array_purges_as_openpbs(pbs: RealPbs, local: LocalEngine,
                                                     attacker, unix_user):
    """`qdel -x 12[]` of `-J 1-3` with 12[1] over and 12[2], 12[3] running (deaf to
    SIGTERM, the queue's kill_delay 120 s: they end when told, at ``go``): 12[1]'s history
    goes at once (it shows as an index gone: X, its array's substate 70), the running
    ones' at their ends, and the array's once it is over: then `qstat -xt 12[]` is
    `Unknown Job Id` (measured on OpenPBS 23.06.06)."""
    both = _AsUser(pbs, local, unix_user, attacker)
    try:
        both.qmgr("set queue workq kill_delay = 120")
        ids = both.qsub(_DEAF, "-J", "1-3")
        both.wait_all({side: i.replace("[]", "[3]") for side, i in ids.items()}, "R")
        both.compare("qdel -x {num}[]")
        both.compare("qstat -xf -F json {num}[1]", both.gone)
        both.compare("qstat -xt {num}[]")
        both.go()
        for side in both.folders:
            deadline = time.monotonic() + 90  # (a hang guard)
            while both.run(side, "qstat -x {num}[]")[0] == 0:
                assert time.monotonic() < deadline, f"{side}: {ids[side]} never purged"
                time.sleep(0.5)
        both.compare("qstat -xt {num}[]")
        both.compare("qstat -x {num}[2]")
    finally:
        for folder in both.folders.values():
            (folder / "go").unlink(missing_ok=True)
        forget_both(pbs, local)
        both.qmgr("unset queue workq kill_delay", check=False)
    assert_agree(both.differences, both.total)


#: qrerun of a begun array (-J 1-2, scheduling off, its subjobs run with qrun: [1] exits 3,
#: [2] runs) whose [2] is not rerunnable (the array ``qalter -r n`` before it ran), or is
#: suspended; then of the not rerunnable one, suspended too. Exit statuses and messages only:
#: PBS requeued [1] before refusing, pbsplug's refusal changes nothing (docs/engine.md).
QRERUN_ROWS = ["qrerun {num}[]", "qrerun {num}[2]", "qrerun {num}[1]"]


def test_qrerun_of_an_array_not_rerunnable_or_suspended_answers_as_openpbs(
        pbs: RealPbs, local: LocalEngine):
    hosts = {"pbs": _pbs_host(pbs), "engine": socket.gethostname().split(".")[0]}
    sides = {"pbs": (lambda line: _real(pbs, line, "", "")),
             "engine": (lambda line: _engine(local, line, "", None))}
    waits = {"pbs": pbs.wait, "engine": local.wait}
    differences: list[str] = []
    total = 0
    try:
        for run in sides.values():
            assert run("qmgr -c 'set server scheduling = false'")[0] == 0
        for case in ("not rerunnable", "suspended", "both"):
            num = {}
            for side, run in sides.items():
                code, out, err = run("qsub -J 1-2 -- /bin/sh -c "
                                     "'[ $PBS_ARRAY_INDEX = 1 ] && exit 3; sleep 600'")
                assert code == 0, err
                num[side] = out.strip().split("[")[0]
                server = out.strip().split(".", 1)[1]
                if case != "suspended":
                    assert run(f"qalter -r n {num[side]}[]")[0] == 0
                assert run(f"qrun {num[side]}[1]")[0] == 0
                waits[side](f"{num[side]}[1].{server}", "X")
                assert run(f"qrun {num[side]}[2]")[0] == 0
                waits[side](f"{num[side]}[2].{server}", "R")
                if case != "not rerunnable":
                    assert run(f"qsig -s suspend {num[side]}[2]")[0] == 0
                    waits[side](f"{num[side]}[2].{server}", "S")
            for line in QRERUN_ROWS:
                total += 1
                got = {side: (lambda r: (r[0], _ids(r[1], num[side], hosts[side]),
                                         _ids(r[2], num[side], hosts[side])))(
                    run(line.format(num=num[side]))) for side, run in sides.items()}
                if got["pbs"] != got["engine"]:
                    differences.append(f"{case}: {line!r}\n  pbs:    {got['pbs']!r}\n"
                                       f"  engine: {got['engine']!r}")
            forget_both(pbs, local)
    finally:
        for run in sides.values():
            run("qmgr -c 'set server scheduling = true'")
        forget_both(pbs, local)
    assert_agree(differences, total)
