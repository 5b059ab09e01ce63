"""Reservations, and what a vnode shows of them and of its jobs, as OpenPBS 23.06 shows them:
the same steps on the real PBS (conftest.py) and on a local engine in the same session, as
test_pbs_parity.py does for qmgr (its `_norm` and design), each step's standard output
compared.

The local engine is given one vnode like PBS's (its auto vnodes offline, ``rv`` with as many
CPUs). Normalised, and only this: each side's host name (``HOST``), its vnode's name
(``VNODE``), the ids of its reservations and jobs (``{R1}``, ``{Q1}`` for a reservation's
queue, ``{J1}``...), the times pbs_rstat prints (``TIME``: the two sides submit a second
apart), and the run of blanks in pbs_rstat's table (its columns are as wide as PBS's, the ids
are not). pbsnodes is compared on its ``state``, ``jobs``, ``resv`` and ``comment`` lines
(the vnodes' resources differ), and on its ``resources_assigned.ncpus`` (0 when the engine
leaves it out). The server logs are compared on the lines a qhold or a qrls writes. Also
compared: qstat -Q's line of a reservation's queue (made at pbs_rsub, disabled),
pbs_ralter's answers (taken and refused) and pbs_rsub -r's (standing reservations' rules
taken and refused, and one confirmed, with pbs_rstat -f and -S).

`DIFFERENT` holds the steps expected to differ, each with its reason (docs/engine.md); a
step there that comes to agree fails, so that it leaves the table.

The real PBS is shared: its scheduling is put back on, its vnode's comment unset, the
reservations and jobs deleted (qdel -W force) whatever happens."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from pbsplug.engine.testing import PBSPLUG, LocalEngine

from .conftest import RealPbs
from .test_pbs_parity import _norm, _pbs_host

#: The local engine's vnode, made like the real PBS's.
VNODE = "rv"
#: Where the real PBS's server writes its log.
PBS_LOGS = Path("/var/spool/pbs/server_logs")
#: Steps whose outputs still differ, and why. Each is expected to differ.
DIFFERENT: dict[str, str] = {}


class Side:
    """One server of the comparison: its commands, vnode and host, and the ids it made."""

    def __init__(self, run: Callable[..., tuple[int, str, str]], vnode: str, host: str,
                 run_tz: Callable[..., tuple[int, str, str]]):
        self.run, self.vnode, self.host = run, vnode, host
        #: `run` with PBS_TZID=UTC (pbs_rsub -r wants it).
        self.run_tz = run_tz
        self.ids: dict[str, str] = {}

    def out(self, *argv: str) -> str:
        code, stdout, stderr = self.run(*argv)
        assert code == 0, f"{argv}: {code} {stderr}"
        return stdout

    def named(self, label: str, job_or_resv: str) -> str:
        self.ids[label] = job_or_resv
        return job_or_resv

    def norm(self, text: str) -> str:
        for label, full in sorted(self.ids.items(), key=lambda kv: -len(kv[1])):
            text = re.sub(rf"(?<![\w.]){re.escape(full)}(?![\w])", "{" + label + "}", text)
            if full[:1] in ("R", "S"):  # (its queue)
                text = re.sub(rf"\b{re.escape(full.split('.')[0])}\b",
                              "{Q" + label[1:] + "}", text)
        text = re.sub(rf"(?<=[(+]){re.escape(self.vnode)}(?=[:)])", "VNODE", text)  # resv_nodes
        return _norm(text, self.host)

    def rstat(self, *args: str) -> str:
        text = self.norm(self.out("pbs_rstat", *args))
        text = re.sub(r"^(reserve_start|reserve_end|ctime|mtime) = .*$", r"\1 = TIME", text,
                      flags=re.M)
        text = re.sub(r"(Today|\w{3}( \w{3} \d\d)?( \d{4})?) \d\d:\d\d", "TIME", text)
        return re.sub(r" +", " ", text) if not args or args[0] == "-S" else text

    def vnode_lines(self) -> str:
        shown = self.out("pbsnodes", "-v", self.vnode)  # (the vnode, not its host)
        return self.norm("\n".join(line.strip() for line in shown.splitlines()
                                   if line.strip().split(" ")[0] in
                                   ("state", "jobs", "resv", "comment")))

    def attempt(self, *argv: str) -> str:
        """A command's exit status, standard output and error, normalised."""
        code, stdout, stderr = self.run(*argv)
        return f"{code}\n{self.norm(stdout)}\n{self.norm(stderr)}"

    def assigned(self) -> str:
        """The vnode's resources_assigned.ncpus (0 when not listed: the engine leaves out
        a zero PBS lists, docs/engine.md's departures)."""
        shown = self.out("pbsnodes", "-v", self.vnode)
        found = re.search(r"^\s*resources_assigned\.ncpus = (\S+)", shown, re.M)
        return found.group(1) if found else "0"

    def queue_line(self, label: str) -> str:
        """qstat -Q's line of a reservation's queue (its name, counts, Ena, Str)."""
        queue = self.ids[label].split(".")[0]
        rows = [line for line in self.out("qstat", "-Q").splitlines()
                if line.split()[:1] == [queue]]
        return re.sub(r" +", " ", self.norm("\n".join(rows)))

    def standing(self, label: str, rule: str, duration: str, start: str) -> str:
        """pbs_rsub -r `rule`: its exit status and words; one made is named `label`."""
        code, stdout, stderr = self.run_tz("pbs_rsub", "-r", rule, "-R", start, "-D", duration,
                                           "-l", "select=1:ncpus=1")
        if code == 0:
            self.named(label, stdout.split()[0])
        return f"{code}\n{self.norm(stdout)}\n{self.norm(stderr)}"

    def state(self, resv: str) -> str:
        code, text, _ = self.run("pbs_rstat", "-f", resv)
        found = re.search(r"^reserve_state = (\S+)", text, re.M)
        return found.group(1) if code == 0 and found else ""


def _until(check: Callable[[], object], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def _real_side(pbs: RealPbs) -> Side:
    def run(*argv: str) -> tuple[int, str, str]:
        done = pbs.run(*argv, check=False, input="")
        return done.returncode, done.stdout, done.stderr

    def run_tz(*argv: str) -> tuple[int, str, str]:
        done = pbs.run(*argv, check=False, input="", env={**pbs.env, "PBS_TZID": "UTC"})
        return done.returncode, done.stdout, done.stderr

    nodes = json.loads(pbs.run("pbsnodes", "-a", "-F", "json").stdout)["nodes"]
    return Side(run, next(iter(nodes)), _pbs_host(pbs), run_tz)


def _local_side(local: LocalEngine, ncpus: int) -> Side:
    def run(*argv: str) -> tuple[int, str, str]:
        done = local.pbs(*argv, input="")
        return done.returncode, done.stdout, done.stderr

    assert local.client is not None
    for name in local.client("stat_nodes"):
        if name != VNODE:
            local.client("node_state", names=[name], offline=True)
    if VNODE not in local.client("stat_nodes"):
        local.pbs("qmgr", "-c", f"create node {VNODE} resources_available.ncpus = {ncpus}",
                  check=True)
    def run_tz(*argv: str) -> tuple[int, str, str]:
        done = subprocess.run([PBSPLUG, *argv], capture_output=True, text=True, input="",
                              env={**local.env(), "PBS_TZID": "UTC"}, cwd=local.work,
                              timeout=120)
        return done.returncode, done.stdout, done.stderr

    return Side(run, VNODE, local.client("status")["server"].split(".")[0], run_tz)


def _no_jobs(sides: tuple[Side, ...]) -> None:
    """Wait until no job is left on either side's vnode (a reservation asks for all of it)."""
    for side in sides:
        _until(lambda s=side: "jobs = " not in s.out("pbsnodes", "-v", s.vnode),
               "the jobs to go")


def _log_lines(text: str, side: Side, job: str) -> list[str]:
    """The message of each line a qhold or qrls of `job` wrote in a server log."""
    return [side.norm(line.split(";", 5)[5]) for line in text.splitlines()
            if line.count(";") >= 5 and line.split(";")[4] == side.ids[job] and
            line.split(";", 5)[5].startswith("Holds ")]


def _when(seconds: int) -> str:
    """pbs_rsub's -R or -E `seconds` from now, its day given (``hhmm`` alone in the current
    minute is tomorrow's, for PBS as for the engine)."""
    return time.strftime("%d%H%M.%S", time.localtime(time.time() + seconds))


def test_reservations_and_vnodes_show_as_openpbs(pbs, local):
    real = _real_side(pbs)
    ncpus = int(json.loads(pbs.run("pbsnodes", "-a", "-F", "json").stdout)["nodes"][
        real.vnode]["resources_available"]["ncpus"])
    mine = _local_side(local, ncpus)
    sides = (real, mine)
    steps: list[tuple[str, str, str]] = []

    def compare(label: str, show: Callable[[Side], str]) -> None:
        steps.append((label, show(real), show(mine)))

    try:
        # A vnode's comment set, then unset with -C "".
        for side in sides:
            side.out("pbsnodes", "-C", "under repair", side.vnode)
        compare("pbsnodes -C 'under repair'", Side.vnode_lines)
        for side in sides:
            side.out("pbsnodes", "-C", "", side.vnode)
        compare("pbsnodes -C ''", Side.vnode_lines)

        # jobs: one entry a CPU, a freed CPU to the next job.
        for side in sides:
            for label in ("J1", "J2"):
                job = side.named(label, side.out("qsub", "-l", "select=1:ncpus=1", "--",
                                                 "/bin/sleep", "1000").strip())
                _until(lambda s=side, j=job: "job_state = R" in s.out("qstat", "-f", j),
                       f"{job} to run")
        compare("two jobs of one CPU", Side.vnode_lines)
        for side in sides:
            side.out("qdel", side.ids["J1"])
            _until(lambda s=side: s.ids["J1"] not in s.out("pbsnodes", "-a", s.vnode),
                   "the first job's end")
            job = side.named("J3", side.out("qsub", "-l", "select=1:ncpus=1", "--",
                                            "/bin/sleep", "1000").strip())
            _until(lambda s=side, j=job: "job_state = R" in s.out("qstat", "-f", j),
                   f"{job} to run")
        compare("a freed CPU to the next job", Side.vnode_lines)
        for side in sides:
            side.out("qdel", side.ids["J2"], side.ids["J3"])
        _no_jobs(sides)

        # qhold and qrls, as the server logs them.
        for side in sides:
            held = side.named("J4", side.out("qsub", "-h", "--", "/bin/sleep", "1000").strip())
            for argv in (("qhold", "-h", "o"), ("qhold", "-h", "uos"), ("qrls", "-h", "os"),
                         ("qrls",)):
                side.out(*argv, held)
            side.out("qdel", held)
        _no_jobs(sides)
        pbs_log = "".join(p.read_text(errors="replace") for p in sorted(PBS_LOGS.iterdir())[-2:])
        steps.append(("qhold and qrls in the server log", "\n".join(_log_lines(
            pbs_log, real, "J4")), "\n".join(_log_lines(local.log(), mine, "J4"))))

        # A reservation of every CPU: unconfirmed, confirmed, running, with a job in it.
        for side in sides:
            side.out("qmgr", "-c", "set server scheduling = False")
        start, end = _when(25), _when(75)
        for side in sides:
            side.named("R1", side.out("pbs_rsub", "-l", f"select=1:ncpus={ncpus}", "-R", start,
                                      "-E", end).split()[0])
        for args in (("-f",), ("-B",), ("-S",), ()):
            compare(f"pbs_rstat {' '.join(args)} (unconfirmed)", lambda s, a=args: s.rstat(*a))
        compare("pbsnodes (unconfirmed)", Side.vnode_lines)
        compare("qstat -Q: its queue, made at once, disabled", lambda s: s.queue_line("R1"))
        for argv in (("-N", "renamed"), ()):
            compare(f"pbs_ralter {' '.join(argv)} (unconfirmed)",
                    lambda s, a=argv: s.attempt("pbs_ralter", *a, s.ids["R1"]))
        for argv in (("-l", "ncpus=1"), ("-W", "nosuch"), ("-R", "197001010000")):
            compare(f"pbs_ralter {' '.join(argv)} (refused)",
                    lambda s, a=argv: s.attempt("pbs_ralter", *a, s.ids["R1"]))
        compare("pbs_ralter of an unknown reservation",
                lambda s: s.attempt("pbs_ralter", "-D", "60", "R999999"))
        for side in sides:
            side.out("qmgr", "-c", "set server scheduling = True")
            _until(lambda s=side: s.state(s.ids["R1"]) == "RESV_CONFIRMED", "confirmation")
        for side in sides:
            side.out("pbs_ralter", "-D", "00:01:00", side.ids["R1"])
            _until(lambda s=side: "reserve_duration = 60\n" in s.out("pbs_rstat", "-f",
                                                                    s.ids["R1"]),
                   "the new duration")
        for args in (("-f",), ("-B",), ()):
            compare(f"pbs_rstat {' '.join(args)} (confirmed)", lambda s, a=args: s.rstat(*a))
        compare("pbsnodes (confirmed)", Side.vnode_lines)
        compare("resources_assigned (confirmed)", Side.assigned)
        compare("qstat -Q: its queue (confirmed)", lambda s: s.queue_line("R1"))
        for side in sides:
            _until(lambda s=side: s.state(s.ids["R1"]) == "RESV_RUNNING", "the start", 120)
        compare("pbs_rstat -f (running)", lambda s: s.rstat("-f"))
        compare("pbsnodes (running)", Side.vnode_lines)
        compare("resources_assigned (running)", Side.assigned)
        for side in sides:
            job = side.named("J5", side.out("qsub", "-q", side.ids["R1"].split(".")[0], "-l",
                                            f"select=1:ncpus={ncpus}", "--", "/bin/sleep",
                                            "1000").strip())
            _until(lambda s=side, j=job: "job_state = R" in s.out("qstat", "-f", j),
                   f"{job} to run")
        compare("pbsnodes (a job on every CPU of the reservation)", Side.vnode_lines)
        compare("resources_assigned (a job on every CPU of the reservation)", Side.assigned)
        compare("pbs_ralter -R of a running reservation with a job",
                lambda s: s.attempt("pbs_ralter", "-R", _when(40), s.ids["R1"]))
        for side in sides:
            side.out("pbs_rdel", side.ids["R1"])
            _until(lambda s=side: s.ids["R1"] not in s.out("pbs_rstat", "-B"),
                   "the reservation to go")
        _no_jobs(sides)

        # One that asks for place=excl makes its vnode resv-exclusive.
        for side in sides:
            side.named("R2", side.out("pbs_rsub", "-l", "select=1:ncpus=1", "-l", "place=excl",
                                      "-R", _when(8), "-D", "60").split()[0])
        for side in sides:
            _until(lambda s=side: s.state(s.ids["R2"]) == "RESV_RUNNING", "the start", 120)
        compare("pbsnodes (running, place=excl)", Side.vnode_lines)
        # Standing reservations: the rules taken and refused, and one made and confirmed.
        start = _when(3600)
        for k, (rule, duration) in enumerate((
                ("FREQ=DAILY", "30"), ("FREQ=MONTHLY;BYMONTHDAY=1;COUNT=2", "30"),
                ("FREQ=WEEKLY;BYDAY=-1FR;COUNT=2", "30"), ("FREQ=SECONDLY;COUNT=2", "30"),
                ("FREQ=DAILY;COUNT=2", "25:00:00"), ("FREQ=HOURLY;INTERVAL=0;COUNT=2", "30"),
                ("freq=weekly;byday=mo,we;count=4;", "00:30:00"))):
            compare(f"pbs_rsub -r {rule} -D {duration}",
                    lambda s, r=rule, d=duration, n=k: s.standing(f"S{n}", r, d, start))
        for side in sides:
            _until(lambda s=side: s.state(s.ids["S6"]) == "RESV_CONFIRMED", "confirmation")
        compare("pbs_rstat -f (standing, confirmed)", lambda s: s.rstat("-f", s.ids["S6"]))
        compare("pbs_rstat -S (standing, confirmed)", lambda s: s.rstat("-S", s.ids["S6"]))
        # (last: PBS's refusal leaves schedselect_orig and its resources reordered behind)
        compare("pbs_ralter -l select= not a subset (refused)",
                lambda s: s.attempt("pbs_ralter", "-l", "select=1:ncpus=2", s.ids["R2"]))
    finally:
        for side in sides:
            side.run("qmgr", "-c", "set server scheduling = True")
            side.run("pbsnodes", "-C", "", side.vnode)
            for label, full in side.ids.items():
                if label[:1] in ("R", "S"):
                    side.run("pbs_rdel", full)
        pbs.forget_jobs()
        assert local.client is not None
        left = [i for i, a in local.client("stat_jobs").items() if a["job_state"] != "F"]
        if left:
            local.client("delete", ids=left, force=True)
    differences = [f"{label}\n  pbs:    {a!r}\n  engine: {b!r}" for label, a, b in steps
                   if a != b and label not in DIFFERENT]
    agreed = [label for label, a, b in steps if a == b and label in DIFFERENT]
    assert not differences, f"{len(differences)} of {len(steps)} steps differ:\n" + \
        "\n".join(differences)
    assert not agreed, f"steps in DIFFERENT that now agree: {agreed}"
