"""The local engine's job commands answer bad input as OpenPBS 23.06's do: the same standard
output, standard error and exit status for each command of a table, run on the real PBS
(conftest.py) and on a local engine in the same session, as test_pbs_parity.py does for
qmgr (its `local` engine, `_norm` and design).

Each side first makes the same three jobs: one running (``sleep``), one finished (``true``,
kept as history) and one held (``qsub -h``). A command names them ``{run}``, ``{done}`` and
``{held}``; in the answers, each side's ids become those names, and its host ``HOST``.
``{fresh}`` is a held job made for that row alone (qrun runs a held job).
Privilege rows run as a second Unix user (the jobs are root's). Rows that would queue a job
on either side are left out (a job id printed is not an error path), but for the ones in
`DIFFERENT` whose job the engine refuses.

The real PBS is shared: its jobs are deleted after the table (``qdel -W force``)."""

from __future__ import annotations

import re
import shlex
import socket

from pbsplug.engine.testing import LocalEngine

from .conftest import WRAPPERS, RealPbs, assert_agree, forget_both
from .test_pbs_parity import _norm, _pbs_host

#: (the command line, as whom: "" root, "user" the second user).
ROWS: list[tuple[str, str]] = [
    # qsub: resources, select, place, queue, -W, walltime, -J, script
    ("qsub -l nosuchres=1 -- /bin/true", ""),
    ("qsub -l ncpus=x -- /bin/true", ""),
    ("qsub -l mem=lots -- /bin/true", ""),
    ("qsub -l select=abc -- /bin/true", ""),
    ("qsub -l select=1:ncpus=x -- /bin/true", ""),
    ("qsub -l select=1:nosuchres=1 -- /bin/true", ""),
    ("qsub -l select=0:ncpus=1 -- /bin/true", ""),
    ("qsub -l select=1:ncpus=1 -l ncpus=2 -- /bin/true", ""),
    ("qsub -l place=scatter -- /bin/true", ""),
    ("qsub -l select=1:ncpus=1 -l place=nowhere -- /bin/true", ""),
    ("qsub -l walltime=abc -- /bin/true", ""),
    ("qsub -l walltime=-1 -- /bin/true", ""),
    ("qsub -l walltime=1:xx:00 -- /bin/true", ""),
    ("qsub -l", ""),
    ("qsub -l = -- /bin/true", ""),
    ("qsub -q nosuch -- /bin/true", ""),
    ("qsub -q nosuch@nosuchhost -- /bin/true", ""),
    ("qsub -W nosuch=1 -- /bin/true", ""),
    ("qsub -W depend=frob:1 -- /bin/true", ""),
    ("qsub -W depend=afterok:99999 -- /bin/true", ""),
    ("qsub -W block=maybe -- /bin/true", ""),
    ("qsub -W umask=999 -- /bin/true", ""),
    ("qsub -J abc -- /bin/true", ""),
    ("qsub -I -- /bin/true", ""),  # (no terminal: standard input is a pipe)
    ("qsub -W interactive=true -- /bin/true", ""),
    ("qsub -J 5-1 -- /bin/true", ""),
    ("qsub -j xx -- /bin/true", ""),
    ("qsub -r maybe -- /bin/true", ""),
    ("qsub -p 5000 -- /bin/true", ""),
    ("qsub -a notadate -- /bin/true", ""),
    ("qsub -N '' -- /bin/true", ""),
    ("qsub /nonexistent/script.sh", ""),
    ("qsub -Z -- /bin/true", ""),
    # qstat
    ("qstat 99999", ""), ("qstat 99999.{host}", ""), ("qstat -f 99999", ""),
    ("qstat abc", ""), ("qstat 1.2.3@@x", ""), ("qstat -Q nosuch", ""),
    ("qstat -Qf nosuch", ""), ("qstat -f {done}", ""), ("qstat {done}", ""),
    ("qstat -Z", ""), ("qstat -F xml", ""), ("qstat 99999 {done}", ""),
    # qdel
    ("qdel 99999", ""), ("qdel abc", ""), ("qdel {done}", ""), ("qdel", ""),
    ("qdel -Z {held}", ""), ("qdel {held}", "user"), ("qdel 99999 {held}", "user"),
    # qalter, qhold, qrls
    ("qalter -N x 99999", ""), ("qalter -l walltime=abc {held}", ""),
    ("qalter -l nosuchres=1 {held}", ""), ("qalter -l select=abc {held}", ""),
    ("qalter -l ncpus=2 {run}", ""), ("qalter -N x {done}", ""),
    ("qalter -h x {held}", ""), ("qalter -N x {held}", "user"), ("qalter {held}", ""),
    ("qhold 99999", ""), ("qhold {done}", ""), ("qhold -h x {held}", ""),
    ("qhold {held}", "user"), ("qrls 99999", ""), ("qrls {done}", ""),
    ("qrls -h x {held}", ""), ("qrls {held}", "user"),
    # qrun (a manager's command)
    ("qrun 99999", ""), ("qrun -H nosuch {held}", ""), ("qrun {run}", ""),
    ("qrun {done}", ""), ("qrun", ""), ("qrun {held}", "user"),
    ("qrun -Z", ""), ("qrun -H", ""), ("qrun -H '' {fresh}", ""), ("qrun abc", ""),
    ("qrun abc 99999", ""), ("qrun 99999 99998", ""), ("qrun -a 99999", ""),
    # qrun -H: a vnode alone, in parentheses, with resources, twice; `-` (where it ran)
    ("qrun -H {host} {fresh}", ""), ("qrun -H ({host}) {fresh}", ""),
    ("qrun -H ({host}:ncpus=1) {fresh}", ""), ("qrun -H {host}+{host} {fresh}", ""),
    ("qrun -H {host}) {fresh}", ""), ("qrun -H - {fresh}", ""),
    ("qrun -H ({host}:ncpus=1 {fresh}", ""), ("qrun -H {host}:ncpus=x {fresh}", ""),
    # qalter: which error comes first
    ("qalter -l nosuchres=1 99999", ""), ("qalter -l select=1:nosuchres=1 99999", ""),
    ("qalter -l walltime=abc 99999 99998", ""), ("qalter -l walltime=abc abc 99999", ""),
    ("qalter -l walltime=abc abc", ""), ("qalter -l nosuchres=1 {done}", ""),
    ("qalter -N x abc 99999", ""), ("qalter -l nosuchres=1 {held}", "user"),
    ("qhold abc", ""), ("qrls abc 99999", ""),
    # pbsnodes
    ("pbsnodes nosuch", ""), ("pbsnodes -Z", ""), ("pbsnodes -o nosuch", ""),
    ("pbsnodes -F xml nosuch", ""), ("pbsnodes -o {host}", "user"),
    # job ids at this server and at another (seq@server, seq.server@server)
    ("qstat 99999@{host}", ""), ("qstat 99999.{host}@{host}", ""), ("qdel 99999@{host}", ""),
    ("qhold 99999@{host}", ""),
    ("qalter -N x 99999@{host}", ""), ("qrun 99999@{host}", ""), ("qrerun 99999@{host}", ""),
    ("qmove workq 99999@{host}", ""), ("qstat 1@nosuchhost", ""), ("qdel 1@nosuchhost", ""),
    ("qrun 1@nosuchhost", ""), ("qhold 1@nosuchhost", ""), ("qstat 1.other", ""),
    ("qdel 1.other", ""), ("qhold 1.other", ""), ("qstat 1@{host}@{host}", ""),
    # qdel -x (the history purged), qrerun -W force
    ("qdel -x 99999", ""), ("qdel -x {fresh}", ""), ("qdel -x {done}", "user"),
    ("qrerun -W bogus {run}", ""), ("qrerun -W force {done}", ""),
    ("qrerun -W force {held}", ""), ("qrerun -W force 99999", ""),
    ("qrerun -W force {run}", "user"),
    # qdel -W: force, suppress_email=N, or digits (taken and ignored); else illegal
    ("qdel -W abc 99999", ""), ("qdel -W '' 99999", ""), ("qdel -W foo=1 99999", ""),
    ("qdel -W -5 99999", ""), ("qdel -W 30 99999", ""),
    ("qdel -W suppress_email=2 99999", ""),
    # qstat -F (any case, dsv, -D) and -w (a table row's padding follows its job id's
    # length, which differs between the two servers: the tables are left to
    # tests/engine/test_qstat_wide.py, which has PBS's)
    ("qstat -f -F DSV 99999", ""), ("qstat -D x", ""), ("qstat -f -w -F json {held}", ""),
    ("qstat -F json {held}", ""), ("qstat -w 99999", ""), ("qstat -F dsv", ""),
    ("qstat -B -F json", ""), ("qstat -x -F json", ""),
    # pbsnodes -l, -S, -j, -L, -H
    ("pbsnodes -l", ""), ("pbsnodes -aS", ""), ("pbsnodes -S", ""), ("pbsnodes -Sj", ""),
    ("pbsnodes -j", ""), ("pbsnodes -H", ""), ("pbsnodes -l {host}", ""),
    ("pbsnodes -H nosuch", ""), ("pbsnodes -S nosuch", ""), ("pbsnodes -aS -F xml", ""),
    # qstat's other listings: options PBS takes not together, -E, -q; pbsnodes -v
    ("qstat -a -i", ""), ("qstat -G -M", ""), ("qstat -1", ""), ("qstat -a -B", ""),
    ("qstat -q -f", ""), ("qstat -p -F json", ""), ("qstat -a -r -G -M", ""),
    ("qstat -E workq", ""), ("qstat -E 99999", ""), ("qstat -q nosuch", ""),
    ("qstat -u", ""), ("qstat -a {done}", ""), ("qstat -a 99999", ""),
    ("pbsnodes -v", ""), ("pbsnodes -lv", ""), ("pbsnodes -Hv {host}", ""),
    ("pbsnodes -v nosuch", ""),
    # -l nodes= (PBS's old request)
    ("qsub -l nodes=abc -- /bin/true", ""), ("qsub -l nodes=0 -- /bin/true", ""),
    ("qsub -l nodes=1:ppn=x -- /bin/true", ""), ("qsub -l nodes=1#pack -- /bin/true", ""),
    ("qsub -l nodes=2 -l ncpus=3 -- /bin/true", ""),
    ("qsub -l nodes=1 -l select=1:ncpus=1 -- /bin/true", ""),
    ("qsub -l nodes=1 -l place=pack -- /bin/true", ""),
    ("qalter -l nodes=abc {fresh}", ""), ("qalter -l nodes=0 {fresh}", ""),
    # qalter's other options
    ("qalter -p 5000 {held}", ""), ("qalter -p 5000 99999", ""),
    ("qalter -e otherhost:rel {held}", ""), ("qalter -W nosuch=1 {held}", ""),
    ("qalter -W block=true {held}", ""), ("qalter -P a/b {held}", ""),
    ("qalter -v A=1 {held}", ""), ("qalter -W depend=frob:1 {held}", ""),
    ("qalter -A acct -m n -p 10 {held}", ""),
    # qalter of a running job: what may be altered while it runs, by a manager
    ("qalter -N renamed -p 5 {run}", ""), ("qalter -A acct {run}", ""),
    ("qalter -j oe {run}", ""), ("qalter -k oe {run}", ""), ("qalter -P proj {run}", ""),
    ("qalter -R oe {run}", ""), ("qalter -W umask=022 {run}", ""),
    ("qalter -W depend=afterok:{held} {run}", ""), ("qalter -l walltime=02:00:00 {run}", ""),
    ("qalter -l cput=00:30:00 {run}", ""), ("qalter -l walltime=03:00:00 {run}", ""),
    ("qalter -l walltime=02:30:00 -l mem=1gb {run}", ""),
    ("qalter -l select=1:ncpus=1 {run}", ""),
    # soft_walltime: operators' and managers' qalter only
    ("qsub -l soft_walltime=00:10:00 -- /bin/true", ""),
    ("qsub -l soft_walltime=00:10:00 -- /bin/true", "user"),
    ("qalter -l soft_walltime=00:05:00 {held}", ""),
    ("qalter -l walltime=00:20:00 -l soft_walltime=00:30:00 {held}", ""),
    # -o and -e with a host: one that does not resolve, this host's names
    ("qsub -o otherhost:/tmp/x -- /bin/true", ""),
    ("qsub -e nosuch.example.com:/tmp/x -- /bin/true", ""),
    ("qsub -h -o localhost:/tmp/x -e {host}:/tmp/y -- /bin/true", ""),
    ("qalter -o otherhost:/tmp/x {held}", ""), ("qalter -e localhost:/tmp/y {held}", ""),
]

#: Rows whose answers still differ, and why (docs/engine.md, "The commands"). Each is
#: expected to differ: a row that comes to agree fails, so that it leaves this table.
_SAYS = ("the same exit status and output; where PBS's message names nothing of what was "
         "wrong the engine says it (every error of pbsplug's names what was wrong)")
_USAGE = ("the same exit status and output; PBS's commands start a bad option's message "
          "with their path (/opt/pbs/bin/qsub) and print a usage of PBS's options; the "
          "engine's say `qsub` and list the engine's options, and say what was wrong where "
          "PBS's say nothing (`illegal -h value 'x'`, `a job id is required`)")
_SELECT = ("the same code, exit status and output; PBS names the resource inside the "
           "select (`select.ncpus`, `Unknown resource: nosuchres`), the engine the select "
           "(`Resource_List.select`)")
#: Reasons that still require PBS's exit status and standard output.
_SAME_STATUS = (_SAYS, _USAGE, _SELECT)
DIFFERENT: dict[str, str] = {
    "qsub -l select=1:ncpus=x -- /bin/true": _SELECT,
    "qsub -l select=1:nosuchres=1 -- /bin/true": _SELECT,
    "qsub -l select=0:ncpus=1 -- /bin/true": _SAYS,
    "qhold {done}": _SAYS, "qrls {done}": _SAYS, "qalter -N x {done}": _SAYS,
    "qrun {done}": _SAYS, "qalter -l nosuchres=1 {done}": _SAYS,
    "qrun -Z": _USAGE, "qrun -H": _USAGE, "qrun -H '' {fresh}": _USAGE,
    "qrun -a 99999":
        "PBS's qrun -a does not wait for the server's answer and says nothing (exit 0); "
        "the engine's runs the job at once and says why it could not (Unknown Job Id, 2)",
    "qrun -H ({host}:ncpus=1 {fresh}":
        "PBS runs the job with the specification as its exec_vnode, unbalanced "
        "parenthesis and all; the engine refuses what is no exec_vnode (15014, exit 2)",
    "qrun -H {host}:ncpus=x {fresh}":
        "PBS runs the job with ncpus=x in its exec_vnode; the engine refuses what is no "
        "exec_vnode (15014, exit 2)",
    "qsub -l": _USAGE, "qsub -Z -- /bin/true": _USAGE, "qstat -Z": _USAGE,
    "qstat -F xml": _USAGE, "qdel": _USAGE, "qdel -Z {held}": _USAGE,
    "qalter -h x {held}": _USAGE, "qhold -h x {held}": _USAGE, "qrls -h x {held}": _USAGE,
    "qrun": _USAGE, "pbsnodes -Z": _USAGE, "pbsnodes -F xml nosuch": _USAGE,
    "qsub -q nosuch@nosuchhost -- /bin/true":
        _SAYS + " (PBS cuts the host's name: `cannot connect to server nosuchh`)",
    "qsub -W nosuch=1 -- /bin/true": _SAYS + " (PBS's text is 'Unknown queue', for 15002)",
    "qhold 1@nosuchhost":
        _SAYS + " (PBS cuts the host's name: `cannot connect to server nosuchh`)",
    "qrerun -W bogus {run}": _USAGE, "qrerun -W force {done}": _SAYS,
    "qstat -D x": _USAGE,
    "pbsnodes -S": _USAGE, "pbsnodes -Sj": _USAGE, "pbsnodes -j": _USAGE,
    "pbsnodes -H": _USAGE, "pbsnodes -l {host}": _USAGE, "pbsnodes -aS -F xml": _USAGE,
    "qsub -l nodes=2 -l ncpus=3 -- /bin/true": _SAYS,
    "qstat -u": _USAGE, "pbsnodes -v": _USAGE, "pbsnodes -lv": _USAGE,
    "pbsnodes -Hv {host}": _USAGE,
    "qalter -p 5000 {held}": _USAGE, "qalter -p 5000 99999": _USAGE,
    "qalter -e otherhost:rel {held}": _USAGE, "qalter -o otherhost:/tmp/x {held}": _USAGE,
    "qalter -v A=1 {held}": _USAGE,
    "qalter -W depend=frob:1 {held}": _USAGE,
    "qalter -W nosuch=1 {held}": _SAYS + " (PBS's 15002 names nothing: `Undefined attribute "
                                         " <id>`)",
    "qalter -W block=true {held}": _SAYS,
    "qalter -l walltime=00:20:00 -l soft_walltime=00:30:00 {held}": _SAYS,
    "qsub -W umask=999 -- /bin/true":
        "PBS takes a umask that is not octal; the engine refuses it (illegal -W value, "
        "exit 2): 9 is no octal digit and the umask would be meaningless",
}


def _real(pbs: RealPbs, line: str, user: str, unix_user: str):
    argv = shlex.split(line)
    if user:
        argv = [str(WRAPPERS / "pbs-ns"), "runuser", "-u", unix_user, "--",
                f"/opt/pbs/bin/{argv[0]}", *argv[1:]]
    done = pbs.run(*argv, check=False, input="")
    return done.returncode, done.stdout, done.stderr


def _engine(local: LocalEngine, line: str, user: str, attacker):
    argv = shlex.split(line)
    done = attacker.pbs(local, *argv, input="") if user else local.pbs(*argv, input="")
    return done.returncode, done.stdout, done.stderr


def _ids(text: str, jobs: dict[str, str], host: str) -> str:
    for name, job_id in jobs.items():
        text = re.sub(rf"\b{re.escape(job_id)}\b", "{" + name + "}", text)
    return _norm(text, host)


def _mapped(result: tuple[int, str, str], jobs: dict[str, str], host: str):
    """A command's (exit status, output, errors), each job's id and the host named."""
    return result[0], _ids(result[1], jobs, host), _ids(result[2], jobs, host)


def _jobs_real(pbs: RealPbs) -> dict[str, str]:
    jobs = {"run": pbs.qsub("sleep 1000\n"), "done": pbs.qsub("true\n"),
            "held": pbs.qsub("true\n", "-h")}
    pbs.wait(jobs["done"])
    pbs.wait(jobs["run"], "R")
    return jobs


def _held_engine(local: LocalEngine) -> str:
    return local.pbs("qsub", "-h", input="true\n", check=True).stdout.strip()


def _jobs_engine(local: LocalEngine) -> dict[str, str]:
    jobs = {name: local.pbs("qsub", *opts, input=script, check=True).stdout.strip()
            for name, script, opts in (("run", "sleep 1000\n", ()), ("done", "true\n", ()),
                                       ("held", "true\n", ("-h",)))}
    local.wait(jobs["done"])
    local.wait(jobs["run"], "R")
    return jobs


def test_job_commands_answer_bad_input_as_openpbs(pbs, local, attacker, unix_user):
    pbs_host = _pbs_host(pbs)
    engine_host = socket.gethostname().split(".")[0]
    differences, agreed = [], []
    try:
        real_jobs = _jobs_real(pbs)
        mine_jobs = _jobs_engine(local)
        for line, user in ROWS:
            if "{fresh}" in line:
                real_jobs["fresh"] = pbs.qsub("true\n", "-h")
                mine_jobs["fresh"] = _held_engine(local)
            real = _real(pbs, line.format(host=pbs_host, **real_jobs), user, unix_user)
            mine = _engine(local, line.format(host=engine_host, **mine_jobs), user, attacker)
            if line.startswith("qsub"):  # (a job queued: its id, which the two do not share)
                real = (real[0], re.sub(rf"^\d+\.{pbs_host}$", "{new}", real[1], flags=re.M),
                        real[2])
                mine = (mine[0], re.sub(rf"^\d+\.{engine_host}$", "{new}", mine[1],
                                        flags=re.M), mine[2])
            real, mine = _mapped(real, real_jobs, pbs_host), _mapped(mine, mine_jobs, engine_host)
            label = f"[{user or 'root'}] {line!r}"
            if real != mine and (line not in DIFFERENT or (
                    DIFFERENT[line].startswith(_SAME_STATUS) and real[:2] != mine[:2])):
                # (a row that only says more must still exit and print as PBS's does)
                differences.append(f"{label}\n  pbs:    {real!r}\n  engine: {mine!r}")
            if real == mine and line in DIFFERENT:
                agreed.append(label)
    finally:
        forget_both(pbs, local)
    assert_agree(differences, len(ROWS))
    assert not agreed, f"rows in DIFFERENT that now agree: {agreed}"


def test_a_converted_nodes_request_reads_as_openpbs(pbs, local):
    """The select and schedselect written for ``-l nodes=`` with a job-wide mem, and the
    sums: OpenPBS 23.06 writes a chunk's share as ``349525KB`` (in capitals, there only)
    and ``Resource_List.mem`` as ``1048575kb``."""
    import json

    asked = ("-h", "-l", "nodes=3:ppn=2", "-l", "mem=1gb")
    real_id = pbs.qsub("true\n", *asked)
    mine_id = local.pbs("qsub", *asked, input="true\n", check=True).stdout.strip()
    try:
        real = pbs.job(real_id)
        mine = json.loads(local.pbs("qstat", "-f", "-F", "json", mine_id, check=True).stdout)
        mine = mine["Jobs"][mine_id]
        assert (real["Resource_List"], real["schedselect"]) == \
            (mine["Resource_List"], mine["schedselect"])
    finally:
        pbs.forget_jobs()
        local.pbs("qdel", mine_id)


#: Commands run with no server to answer them.
NO_SERVER_ROWS = ("qstat", "qstat -f 1", "qsub -- /bin/true", "qdel 1", "pbsnodes -a",
                  "qmgr -c 'list server'", "qhold 1", "qalter -N x 1", "pbs_rstat",
                  "qrun 1", "qsig 1", "qselect")


def test_commands_without_a_server_answer_as_openpbs(pbs, tmp_path):
    """The exit status and the last line each command prints when no server answers: the
    real PBS's clients pointed at a port nobody listens on (a pbs.conf of their own; the
    shared server runs on), the engine's at a home where no server runs. The line before
    it says why, in each one's words (PBS's `Connection refused`, the engine's names the
    home)."""
    import os
    import subprocess

    from pbsplug.engine.testing import PBSPLUG

    conf = tmp_path / "pbs.conf"
    conf.write_text(open("/etc/pbs.conf").read() + "PBS_BATCH_SERVICE_PORT=15999\n")
    conf.chmod(0o644)
    real_env = {**pbs.env, "PBS_CONF_FILE": str(conf)}
    mine_env = {**os.environ, "PBSPLUG_HOME": str(tmp_path / "home")}
    pbs_host = _pbs_host(pbs)
    engine_host = socket.gethostname().split(".")[0]
    differences = []
    for line in NO_SERVER_ROWS:
        real = pbs.run(*shlex.split(line), check=False, input="", env=real_env)
        mine = subprocess.run([PBSPLUG, *shlex.split(line)], capture_output=True, text=True,
                              input="", env=mine_env, timeout=60)
        theirs = (real.returncode, real.stdout, _norm(real.stderr.replace(
            "/opt/pbs/bin/", "").splitlines()[-1], pbs_host))
        ours = (mine.returncode, mine.stdout, _norm(mine.stderr.splitlines()[-1],
                                                    engine_host))
        if theirs != ours:
            differences.append(f"{line!r}\n  pbs:    {theirs!r}\n  engine: {ours!r}")
    assert not differences, "\n".join(differences)


def test_modifyjob_hooks_fire_where_openpbs_fires_them(pbs, dists, tmp_path):
    """A modifyjob hook that refuses every change, on each side: qhold and qrls pass it by
    (OpenPBS 23.06 fires modifyjob for qalter only), qalter is refused."""
    import textwrap

    from pbsplug.engine.testing import make_root, remove_root

    script = tmp_path / "refuse.py"
    script.write_text("import pbs\npbs.event().reject('no changes')\n")
    script.chmod(0o644)
    dists.add("refuser", textwrap.dedent("""\
        from pbsplug import PluginInfo, hookimpl
        plugin_info = PluginInfo(events=("modifyjob",))

        @hookimpl
        def modifyjob(event):
            event.reject("no changes")
        """))
    root = make_root()
    local = LocalEngine(root, "[plugins.refuser]\nenabled = true\n", env=dists.env()).start()
    commands = (("qhold", "-h", "o"), ("qrls", "-h", "o"), ("qalter", "-N", "x"))
    try:
        pbs.qmgr("create hook pbsplug_parity_refuser event=modifyjob")
        pbs.qmgr(f"import hook pbsplug_parity_refuser application/x-python default {script}")
        real_job = pbs.qsub("true\n", "-h")
        mine_job = local.pbs("qsub", "-h", input="true\n", check=True).stdout.strip()
        for command in commands:
            real = pbs.run(*command, real_job, check=False)
            mine = local.pbs(*command, mine_job)
            theirs = (real.returncode, real.stdout, real.stderr.replace(real_job, "{job}"))
            ours = (mine.returncode, mine.stdout, mine.stderr.replace(mine_job, "{job}"))
            assert theirs == ours, command
    finally:
        pbs.qmgr("delete hook pbsplug_parity_refuser", check=False)
        pbs.forget_jobs()
        local.stop()
        remove_root(root)
