"""PBS's accounting log of the local engine (server_priv/accounting/YYYYMMDD), read back by
`pbsplug sim run` and `pbsplug tracejob`."""

from __future__ import annotations

import os
import re
import stat
import time

import pytest

from pbsplug.cli.pbs import _rsub_variables
from pbsplug.engine import tracejob
from pbsplug.engine.accounting import MAX_VALUE, Accounting, text_of
from pbsplug.engine.home import Home
from pbsplug.engine.server import ROLE_MANAGER, Caller
from pbsplug.sim.traces import _PBS_ESCAPE, _PBS_PAIR, open_trace

from .conftest import poll_until, until

#: The keys OpenPBS 23.06 writes in each record type of a plain job (checked on a running
#: PBS: tests/adapters/test_pbs_accounting_parity.py compares them whole).
JOB_HEAD = ["user", "group", "project", "jobname", "queue", "ctime", "qtime", "etime"]
RUN = ["start", "exec_host", "exec_vnode"]
END = ["session", "end", "Exit_status"]
LINE = re.compile(r"^(\d\d/\d\d/\d{4} \d\d:\d\d:\d\d);([A-Za-z]);([^;]+);(.*)$")


def records(home: Home) -> list[tuple[str, str, str, str]]:
    """(stamp, type, id, body) of every record, in the order written."""
    out = []
    for path in sorted(home.accounting.iterdir()):
        for line in path.read_text().splitlines():
            m = LINE.match(line)
            assert m, f"not a record: {line!r}"
            out.append(m.groups())
    return out


def pairs(body: str) -> dict[str, str]:
    return {k: _PBS_ESCAPE.sub(r"\1", v[1:-1]) if v.startswith('"') else v
            for k, v in _PBS_PAIR.findall(body)}


def of(recs, obj_id: str) -> list[tuple[str, dict[str, str]]]:
    return [(kind, pairs(body)) for _, kind, i, body in recs if i == obj_id]


def _keys(record: dict[str, str]) -> list[str]:
    """A record's keys, resources as `Resource_List.*` / `resources_used.*`."""
    out = []
    for key in record:
        short = key.split(".")[0] + ".*" if "." in key else key
        if short not in out:
            out.append(short)
    return out


def test_each_job_event_writes_pbs_record(engine):
    home = engine.home
    done = engine.pbs("qsub", "-N", "done", "-l", "walltime=00:01:00", "--", "/bin/true",
                      check=True).stdout.strip()
    held = engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()
    engine.pbs("qalter", "-N", "renamed", "-l", "walltime=00:02:00", held, check=True)
    engine.pbs("qmgr", "-c", "create queue other queue_type=execution,enabled=true,"
               "started=false", check=True)
    engine.pbs("qmove", "other", held, check=True)
    engine.pbs("qdel", held, check=True)
    rerun = engine.pbs("qsub", "--", "/bin/sleep", "60", check=True).stdout.strip()
    engine.wait(rerun, "R")
    engine.pbs("qrerun", rerun, check=True)
    until(lambda: engine.job(rerun)["job_state"] == "R" and
          engine.job(rerun).get("run_count") == 2, what="the rerun job runs again")
    engine.pbs("qsig", "-s", "suspend", rerun, check=True)
    engine.pbs("qsig", "-s", "resume", rerun, check=True)
    engine.pbs("qdel", rerun, check=True)
    engine.wait(done)
    engine.wait(rerun)

    recs = records(home)
    host = done.split(".", 1)[1]
    assert [k for k, _ in of(recs, done)] == ["Q", "S", "E"]
    assert [k for k, _ in of(recs, held)] == ["Q", "a", "Q", "D"]
    assert [k for k, _ in of(recs, rerun)] == ["Q", "S", "R", "S", "z", "r", "D", "E"]

    (q, qa), (s, sa), (e, ea) = of(recs, done)
    assert _keys(qa) == [*JOB_HEAD, "Resource_List.*"]
    assert _keys(sa) == [*JOB_HEAD, *RUN, "Resource_List.*", "resource_assigned.*"]
    assert _keys(ea) == [*JOB_HEAD, *RUN, "Resource_List.*", *END, "resources_used.*",
                         "run_count"]
    job = engine.job(done)
    assert qa["jobname"] == "done" and qa["queue"] == "workq" and qa["user"] == job["euser"]
    assert int(qa["ctime"]) == job["ctime"] and int(ea["start"]) == job["stime"]
    assert ea["exec_vnode"] == job["exec_vnode"] and ea["Exit_status"] == "0"
    assert ea["Resource_List.walltime"] == "00:01:00" and ea["run_count"] == "1"
    assert int(ea["end"]) >= int(ea["start"]) and int(ea["session"]) > 0
    assert ea["resources_used.walltime"] == job["resources_used"]["walltime"]

    held_recs = of(recs, held)
    assert held_recs[0][1]["etime"] == "0"  # (held: not eligible, as PBS writes it)
    assert held_recs[1][1] == {"Job_Name": "renamed", "Resource_List.walltime": "00:02:00"}
    assert held_recs[2][1]["queue"] == "other"
    assert held_recs[3][1] == {"requestor": f"root@{host}"}

    rerun_recs = of(recs, rerun)
    assert rerun_recs[2][1]["Exit_status"] == "-11"  # (PBS's JOB_EXEC_RERUN, as PBS's qrerun)
    assert _keys(rerun_recs[4][1]) == ["resources_used.*"]  # (z: the run's use so far)
    assert rerun_recs[5][1] == {} and rerun_recs[7][1]["run_count"] == "2"
    assert [b for _, k, i, b in recs if i == rerun and k == "r"] == [""]


def test_each_reservation_event_writes_pbs_record(engine_here):
    """A reservation submitted, confirmed, begun and over; another deleted before it begins.
    The server's clock is the test's, moved past the first one's start and end once it is
    confirmed (on the wall clock, a reservation 2 s ahead could begin, and end, before a
    loaded machine had confirmed it)."""
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    root = Caller(0, ROLE_MANAGER)
    start = int(now[0]) + 60

    def rsub(begin: int, end: int) -> str:  # (the attributes pbs_rsub -R -E sends)
        return eng.req_resv_submit(root, {
            "Resource_List": {}, "reserve_start": begin, "reserve_end": end,
            "Variable_List": _rsub_variables(dict(os.environ))})["id"]

    resv, gone = rsub(start, start + 2), rsub(start + 600, start + 700)
    poll_until(eng, lambda: all(eng.store.get("resv", i)["reserve_state"] == "RESV_CONFIRMED"
                                for i in (resv, gone)), "the reservations' confirmation")
    eng.req_resv_delete(root, [gone])
    now[0] = start + 1
    poll_until(eng, lambda: [k for k, _ in of(records(eng.home), resv)] == ["U", "Y", "B"],
               "the reservation's beginning")
    now[0] = start + 3
    poll_until(eng, lambda: [k for k, _ in of(records(eng.home), resv)] == ["U", "Y", "B", "k"],
               "the reservation's records up to its end")

    recs = records(eng.home)
    host = resv.split(".", 1)[1]
    assert [k for k, _ in of(recs, gone)] == ["U", "Y", "k"]
    kinds = {k: a for k, a in of(recs, resv)}
    assert kinds["U"] == {"requestor": f"root@{host}"}
    assert list(kinds["Y"]) == ["requestor", "start", "end", "nodes"]
    assert list(kinds["B"])[:9] == ["owner", "name", "queue", "ctime", "start", "end",
                                    "duration", "nodes", "Authorized_Users"]
    assert kinds["k"] == {"requestor": f"root@{host}"}  # (its end: PBS's k, as its owner's)
    assert kinds["B"]["queue"] == resv.split(".")[0]


def test_the_file_is_the_servers_alone(engine):
    engine.wait(engine.pbs("qsub", "--", "/bin/true", check=True).stdout.strip())
    folder = engine.home.accounting
    assert folder == engine.root / "server_priv" / "accounting"
    for path, mode in ((folder.parent, 0o700), (folder, 0o700)):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path
    (day,) = folder.iterdir()
    assert re.fullmatch(r"\d{8}", day.name)
    assert stat.S_IMODE(day.stat().st_mode) == 0o600
    assert day.stat().st_uid == os.geteuid()


@pytest.mark.parametrize("value, shown", [
    ("a b;c", '"a b;c"'),
    ('say "hi"', r'"say \"hi\""'),
    ("back\\slash x", r'"back\\slash x"'),
    ("line\nbreak", "line^Jbreak"),
    ("tab\there", "tab^Ihere"),
    ("del\x7f", "del^?"),
    ("csi\x9b", "csi\\x9b"),
    # str.splitlines ends a line at these two: a job name holding one forged a record
    ("ls\u2028forged;E;2.h;x", "ls\\u2028forged;E;2.h;x"), ("ps\u2029", "ps\\u2029"),
    ("\u00e9\u202a", "\u00e9\u202a"),
    ("", '""'),
    (12, "12"),
    (["a", "b"], "a,b"),
])
def test_a_value_never_breaks_its_record(value, shown):
    assert text_of(value) == shown


def test_odd_values_stay_in_their_record_and_read_back(tmp_path):
    home = Home(tmp_path)
    home.make()
    logged: list[str] = []
    acct = Accounting(home, "h", lambda: 1_000_000_000.0, lambda *a: logged.append(a[-1]))
    attrs = {"euser": "u", "egroup": "g", "Account_Name": 'a b;c"d\\e\nf', "Job_Name": "j",
             "queue": "q", "ctime": 1, "qtime": 2, "job_state": "Q",
             "Resource_List": {"site": "x" * (MAX_VALUE + 10), "ncpus": 1}}
    acct.queued("1.h", attrs)
    acct.aborted("1.h", 'hook said: "no"\nforged;A;2.h;x')
    acct.close()
    lines = (home.accounting / time.strftime("%Y%m%d", time.localtime(1e9))).read_text()
    lines = lines.splitlines()
    assert len(lines) == 2 and not logged
    assert lines[0].startswith(time.strftime("%m/%d/%Y %H:%M:%S", time.localtime(1e9)) +
                               ";Q;1.h;user=u group=g ")  # (the engine's clock, not now)
    got = pairs(lines[0].split(";", 3)[3])
    assert got["account"] == 'a b;c"d\\e^Jf'
    assert got["Resource_List.site"] == "x" * MAX_VALUE + "..."
    assert got["jobname"] == "j" and got["Resource_List.ncpus"] == "1"
    assert lines[1].split(";", 3)[3] == 'hook said: "no"^Jforged;A;2.h;x'


def test_a_link_at_the_files_name_is_not_followed_and_the_loss_is_logged_once(tmp_path):
    home = Home(tmp_path / "home")
    home.make()
    target = tmp_path / "elsewhere"
    target.write_text("")
    now = 1_000_000_000.0
    day = home.accounting / time.strftime("%Y%m%d", time.localtime(now))
    day.symlink_to(target)
    logged: list[str] = []
    acct = Accounting(home, "h", lambda: now, lambda *a: logged.append(a[-1]))
    for n in range(3):
        acct.deleted(f"{n}.h", "root@h")
    assert target.read_text() == ""
    assert len(logged) == 1 and "accounting record not written" in logged[0], logged
    day.unlink()
    acct.deleted("3.h", "root@h")
    assert logged[1] == "3 accounting records lost: " + logged[0].split(": ", 1)[1].split(
        " (")[0]
    assert day.read_text().endswith(";D;3.h;requestor=root@h\n")
    assert not day.is_symlink()


def test_a_full_disk_stops_neither_the_records_after_it_nor_the_server(tmp_path):
    home = Home(tmp_path)
    home.make()
    logged: list[str] = []
    acct = Accounting(home, "h", lambda: 1e9, lambda *a: logged.append(a[-1]))
    acct.deleted("0.h", "root@h")
    for job_id in ("1.h", "2.h"):  # each write fails, as a full disk makes it fail
        os.close(acct._fd or os.open("/dev/null", os.O_RDONLY))
        acct._fd = os.open("/dev/full", os.O_WRONLY)
        acct._day = time.strftime("%Y%m%d", time.localtime(1e9))
        acct.deleted(job_id, "root@h")
    assert len(logged) == 1 and "No space left on device" in logged[0], logged
    acct.deleted("3.h", "root@h")  # reopened: the file takes records again
    text = (home.accounting / time.strftime("%Y%m%d", time.localtime(1e9))).read_text()
    assert [line.split(";")[2] for line in text.splitlines()] == ["0.h", "3.h"]
    assert logged[1] == "2 accounting records lost: No space left on device"


def test_sim_run_replays_the_engines_accounting_log(engine, tmp_path, capsys):
    from pbsplug.cli import main

    ids = [engine.pbs("qsub", "-l", "select=1:ncpus=1", "-l", "walltime=00:00:30", "--",
                      "/bin/sleep", "1", check=True).stdout.strip(),
           engine.pbs("qsub", "-l", "walltime=00:01:00", "-l", "mem=10mb", "--",
                      "/bin/true", check=True).stdout.strip(),
           engine.pbs("qsub", "--", "/bin/false", check=True).stdout.strip()]
    never = engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()
    engine.pbs("qdel", never, check=True)
    jobs = {job_id: engine.wait(job_id) for job_id in ids}

    trace = open_trace(engine.home.accounting)
    replayed = {j.job_id: j for j in trace}
    assert sorted(replayed) == sorted(ids)  # (the deleted job never ran: no E record)
    start = trace.info.unix_start_time
    assert start == min(a["qtime"] for a in jobs.values())
    ends = {i: pairs(b) for _, k, i, b in records(engine.home) if k == "E"}
    for job_id, attrs in jobs.items():
        job = replayed[job_id]
        assert job.submit == attrs["qtime"] - start
        assert job.run_time == int(ends[job_id]["end"]) - attrs["stime"]
        assert job.recorded_wait == attrs["stime"] - attrs["qtime"]
        assert job.ncpus == 1 and job.queue == "workq" and job.user == attrs["euser"]
        assert job.select == attrs["Resource_List"]["select"]
        assert job.status == (1 if attrs["Exit_status"] == 0 else 0)
    assert replayed[ids[0]].walltime == 30 and replayed[ids[1]].walltime == 60
    assert replayed[ids[1]].mem == 10 << 20

    code = main(["sim", "run", str(engine.home.accounting), "--out", str(tmp_path / "out"),
                 "--no-plots", "--nodes", "1", "--cpus-per-node", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "jobs: 3 finished" in out


# -- tracejob ---------------------------------------------------------------------------------

def test_tracejob_prints_the_jobs_server_and_accounting_lines_in_time_order(engine):
    job_id = engine.pbs("qsub", "-N", "traced", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(job_id)
    done = engine.pbs("tracejob", job_id.split(".")[0])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"\nJob: {job_id}\n\n")
    lines = done.stdout.splitlines()[3:]
    shown = [(line[21], line[26:]) for line in lines]
    assert all(re.fullmatch(r"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d  [SA]    .*", line)
               for line in lines), lines
    assert [line[:19] for line in lines] == sorted(line[:19] for line in lines)
    server = [m for s, m in shown if s == "S"]
    assert any(m.startswith("Job Queued at request of") for m in server)
    acct = [pairs(m) for s, m in shown if s == "A"]
    assert [a["jobname"] for a in acct] == ["traced"] * 3 and "Exit_status" in acct[2]
    assert len(server) == len([line for line in engine.log().splitlines()
                               if line.split(";")[4:5] == [job_id]])

    no_acct = engine.pbs("tracejob", "-a", job_id).stdout
    assert "  A    " not in no_acct and "  S    " in no_acct
    no_job = engine.pbs("tracejob", "-f", "job", job_id).stdout  # (0008 lines left out)
    assert "Job Queued at request" not in no_job and "Exit_status=" in no_job
    wrapped = engine.pbs("tracejob", "-w", "60", job_id).stdout.splitlines()[3:]
    assert max(len(line) for line in wrapped if " " in line.strip()) <= 60
    assert any(line.startswith(" " * 26 + "Resource_List.") for line in wrapped)


def test_tracejob_errors(engine):
    missing = engine.pbs("tracejob", "12345")
    assert missing.returncode == 1 and missing.stdout == ""
    assert re.fullmatch(r"\ntracejob: Couldn't find Job Id 12345\.\S+ in logs of past 1 day\n\n",
                        missing.stderr), missing.stderr
    two = engine.pbs("tracejob", "-n", "2", "12345")
    assert "in logs of past 2 days" in two.stderr
    for args, err in ((["-x", "1"], "tracejob: invalid option -- 'x'\n"),
                      (["-n", "abc", "1"], ""), (["-f", "nosuch", "1"], ""),
                      (["-w"], "tracejob: option requires an argument -- 'w'\n"), ([], "")):
        done = engine.pbs("tracejob", *args)
        assert done.returncode == 1, args
        assert done.stdout.startswith("USAGE: tracejob [-a|s|l|m|v]"), args
        assert done.stderr == err, args


def test_tracejob_n_is_bounded_and_none_or_fewer_days_read_no_log(engine, tmp_path):
    """-n 999999999 listed a file for each day back (a hang), and far enough back the
    date was OverflowError. PBS's tracejob takes any number (-n 99999999 ran for
    minutes; checked) and -n 0 or -1 reads no log: `Couldn't find ... in logs of past -1
    days`, exit 1."""
    for days in ("36501", "999999999"):
        with pytest.raises(tracejob.Refused, match=rf"^-n {days}: more days than 36500 "):
            tracejob.parse(["-n", days, "1"], tmp_path, None)
        done = engine.pbs("tracejob", "-n", days, "1")
        assert (done.returncode, done.stdout, done.stderr) == (
            1, "", f"tracejob: -n {days}: more days than 36500 (a hundred years of logs)\n")
    assert tracejob.parse(["-n", "36500", "1"], tmp_path, None).days == 36500
    job_id = engine.submit("true\n")
    engine.wait(job_id)
    assert engine.pbs("tracejob", "-n", "36500", job_id).returncode == 0
    for days in ("0", "-1", "-999999999"):
        done = engine.pbs("tracejob", "-n", days, job_id)
        assert (done.returncode, done.stderr) == (
            1, f"\ntracejob: Couldn't find Job Id {job_id} in logs of past {days} days\n\n")


def test_tracejob_keeps_the_latest_of_an_excessive_message():
    def entry(second: int, message: str) -> tracejob.Entry:
        stamp = f"01/01/2026 00:00:{second:02d}"
        return tracejob.Entry(("2026", "01", "01", stamp[11:]), stamp, "S", message)

    found = [entry(0, "a"), entry(1, "b"), entry(2, "a"), entry(3, "c"), entry(4, "a")]
    kept = tracejob.without_excessive(found, 3)
    assert [(e.message, e.stamp[-2:]) for e in kept] == [("b", "01"), ("c", "03"),
                                                         ("a", "04")]
    assert tracejob.without_excessive(found, 4) == found


def test_tracejob_reads_no_link(tmp_path, capsys):
    home = tmp_path / "home"
    (home / "server_logs").mkdir(parents=True)
    secret = tmp_path / "secret"
    stamp = time.strftime("%m/%d/%Y %H:%M:%S")
    secret.write_text(f"{stamp};0008;Server@h;Job;1.h;from a planted link\n")
    (home / "server_logs" / time.strftime("%Y%m%d")).symlink_to(secret)
    assert tracejob.main(["-a", "1"], home, "h") == 1
    out, err = capsys.readouterr()
    assert "planted" not in out and "Couldn't find Job Id 1.h" in err
    assert "server_logs/" in err  # (the link is named: tracejob could not read that day)


def test_a_users_tracejob_reads_neither_log_and_says_why(engine, attacker):
    """The logs are the server's alone (root's): another user's tracejob finds nothing,
    and names each file it could not read."""
    job_id = engine.pbs("qsub", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(job_id)
    done = attacker.pbs(engine, "tracejob", job_id)
    assert done.returncode == 1 and done.stdout == ""
    day = time.strftime("%Y%m%d")
    for folder in ("server_logs", "server_priv/accounting"):
        assert f"tracejob: {engine.root}/{folder}/{day}: Permission denied\n" in done.stderr
    assert "Couldn't find Job Id" in done.stderr


def test_an_altered_select_records_the_select_not_its_sums(engine):
    """qalter -l select: the a record names what was asked for, as PBS's, not the ncpus and
    nodect the server works out from it."""
    job_id = engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()
    engine.pbs("qalter", "-l", "select=1:ncpus=2", "-A", "x y", job_id, check=True)
    engine.pbs("qalter", "-N", "same", job_id, check=True)
    engine.pbs("qalter", "-N", "same", job_id, check=True)  # (no change: no record)
    altered = [a for k, a in of(records(engine.home), job_id) if k == "a"]
    assert altered == [{"Account_Name": "x y", "Resource_List.select": "1:ncpus=2"},
                       {"Job_Name": "same"}]
    assert engine.job(job_id)["Resource_List"]["ncpus"] == 2


def _begin_refuser(root):
    """A plugin whose execjob_begin hook refuses each job while `root`/refuse exists:
    with `root`/delete, by job.delete(); else by a plain reject."""
    from pbsplug import PluginInfo, hookimpl

    def execjob_begin(self, event):
        if (root / "refuse").exists():
            if (root / "delete").exists():
                event.job.delete()
            event.reject("host not ready")

    return type("Refuser", (), {"plugin_info": PluginInfo(events=("execjob_begin",)),
                                "execjob_begin": hookimpl(execjob_begin)})()


def _begin_deleting(engine_here, register_plugin, engine_root):
    """An engine whose execjob_begin hook deletes each job (`_begin_refuser`, job.delete())
    till `engine_root`/refuse goes."""
    (engine_root / "refuse").touch()
    (engine_root / "delete").touch()
    register_plugin(_begin_refuser(engine_root), "refuser")
    return engine_here()

def test_a_begin_reject_writes_no_s_nor_r_and_its_later_start_one_s(
        engine_here, register_plugin, engine_root):
    # The S was written before the begin hooks were judged: a refused start had an S, its
    # requeue an R, and the start that ran a second S, as if the job had run twice.
    (engine_root / "refuse").touch()
    register_plugin(_begin_refuser(engine_root), "refuser")
    eng = engine_here()
    root = Caller(0, ROLE_MANAGER)
    job_id = eng.req_submit(root, {}, "true\n")
    poll_until(eng, lambda: eng.store.job(job_id).get("run_count", 0) >= 2, "two refusals")
    attrs = eng.store.job(job_id)
    tries = attrs["run_count"]
    assert attrs["comment"] == "Job requeued by execjob_begin hook: host not ready", attrs
    assert [k for k, _ in of(records(eng.home), job_id)] == ["Q"]
    (engine_root / "refuse").unlink()
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
    assert [k for k, _ in of(records(eng.home), job_id)] == ["Q", "S", "E"]
    assert eng.store.job(job_id)["run_count"] == tries + 1  # (each refused try counted)
    (engine_root / "refuse").touch()
    held = eng.req_submit(root, {}, "true\n")  # refused until held: no S, no R either
    poll_until(eng, lambda: eng.store.job(held)["job_state"] == "H", "the hold")
    assert eng.store.job(held)["comment"] == "job held, too many failed attempts to run"
    assert [k for k, _ in of(records(eng.home), held)] == ["Q"]


def test_a_begin_delete_writes_no_s_but_an_a_as_a_job_that_never_ran(
        engine_here, register_plugin, engine_root):
    # It wrote S, then E: a job that never ran has no S and no E (a qdel of a queued job:
    # Q, D); one the server deletes has its A, as PBS's server aborts it (job_abt).
    eng = _begin_deleting(engine_here, register_plugin, engine_root)
    job_id = eng.req_submit(Caller(0, ROLE_MANAGER), {}, "true\n")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
    comment = "Job deleted by execjob_begin hook: host not ready"
    assert eng.store.job(job_id)["comment"] == comment
    found = of(records(eng.home), job_id)
    assert [k for k, _ in found] == ["Q", "A"], found
    assert [b for _, k, i, b in records(eng.home) if i == job_id and k == "A"] == [comment]


def _unwritable(eng, monkeypatch, name: str) -> None:
    """The engine's `name` step fails as a full disk fails its write (the store's error)."""
    from pbsplug.engine.store import StoreWriteError

    def full(*args, **kwargs):
        raise StoreWriteError("database or disk is full")

    monkeypatch.setattr(eng, name, full)


def _begin_deleted_end_kept(engine_here, register_plugin, engine_root, monkeypatch):
    """An engine and a job its execjob_begin hook deleted (job.delete()), that end kept
    unwritten (as on a full disk), the hook refusing no more after it."""
    eng = _begin_deleting(engine_here, register_plugin, engine_root)
    _unwritable(eng, monkeypatch, "_finish_over")
    job_id = eng.req_submit(Caller(0, ROLE_MANAGER), {}, "true\n")
    poll_until(eng, lambda: job_id in eng.unwritten, "the end kept unwritten")
    (engine_root / "refuse").unlink()
    return eng, job_id

def test_a_begin_refusal_whose_requeue_was_unwritten_has_no_r_after_a_restart(
        engine_here, register_plugin, engine_root, monkeypatch):
    # The restart found it R with no launch and requeued it as a run that had begun: an R
    # with no S before it, and its run_count lowered, the refused try not counted.
    (engine_root / "refuse").touch()
    register_plugin(_begin_refuser(engine_root), "refuser")
    eng = engine_here()
    _unwritable(eng, monkeypatch, "_requeue")
    job_id = eng.req_submit(Caller(0, ROLE_MANAGER), {}, "true\n")
    poll_until(eng, lambda: job_id in eng.unwritten, "the requeue kept unwritten")
    assert eng.store.job(job_id)["run_count"] == 1
    (engine_root / "refuse").unlink()
    again = engine_here()  # (the server killed: the first engine does nothing more)
    poll_until(again, lambda: again.store.job(job_id)["job_state"] == "F", "the job's end")
    assert [k for k, _ in of(records(again.home), job_id)] == ["Q", "S", "E"]
    assert again.store.job(job_id)["run_count"] == 2  # (the refused try, then its run)


def test_a_begin_delete_whose_end_was_unwritten_ends_with_its_a_after_a_restart(
        engine_here, register_plugin, engine_root, monkeypatch):
    # The restart requeued it as a job that had not started: a job its begin hooks deleted
    # ran (Q R S E).
    eng, job_id = _begin_deleted_end_kept(engine_here, register_plugin, engine_root,
                                          monkeypatch)
    again = engine_here()
    poll_until(again, lambda: again.store.job(job_id)["job_state"] == "F", "the job's end")
    comment = "Job deleted by execjob_begin hook: host not ready"
    assert again.store.job(job_id)["comment"] == comment
    assert [(k, b) for _, k, i, b in records(again.home) if i == job_id][1:] == [
        ("A", comment)]


def test_a_qdel_of_a_begin_deleted_job_whose_end_waits_writes_its_d_and_no_e(
        engine_here, register_plugin, engine_root, monkeypatch):
    # `_delete_in_prologue` ended it as a run that began: D then E, with no S before them.
    eng, job_id = _begin_deleted_end_kept(engine_here, register_plugin, engine_root,
                                          monkeypatch)
    root = Caller(0, ROLE_MANAGER)
    monkeypatch.undo()
    eng.req_delete(root, [job_id])
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
    assert [k for k, _ in of(records(eng.home), job_id)] == ["Q", "D"]


def test_a_qrerun_of_an_array_writes_no_r_for_a_subjob_its_begin_hooks_deleted(
        engine_here, register_plugin, engine_root):
    # The qrerun wrote an R (a run over) for every finished subjob: one with only its A too.
    from pbsplug import PluginInfo, hookimpl

    def execjob_begin(self, event):
        if "[1]" in event.job.id:
            event.job.delete()
        event.reject("not this one")  # (the second refused: the array stays begun)

    register_plugin(type("First", (), {"plugin_info": PluginInfo(events=("execjob_begin",)),
                                       "execjob_begin": hookimpl(execjob_begin)})(), "first")
    eng = engine_here()
    root = Caller(0, ROLE_MANAGER)
    array = eng.req_submit(root, {"array_indices_submitted": "1-2"}, "true\n")
    first, second = array.replace("[]", "[1]"), array.replace("[]", "[2]")
    poll_until(eng, lambda: (eng.store.job(first) or {}).get("job_state") == "F" and
               (eng.store.job(second) or {}).get("run_count", 0) >= 1,
               "the first deleted, the second refused")
    eng.req_rerun(root, [array])
    assert [k for k, _ in of(records(eng.home), first)] == ["A"]
    assert eng.store.job(first)["job_state"] == "Q"  # (queued again all the same)
    eng.req_delete(root, [array])
    poll_until(eng, lambda: eng.store.job(array)["job_state"] == "F", "the array's end")


def test_an_array_whose_subjobs_its_begin_hooks_deleted_did_not_fail(
        engine_here, register_plugin, engine_root):
    # Its end took a subjob with a stime as one that ran: Exit_status 1, comment "failed".
    # (The array's own S and E stay: written as its first subjob starts, docs/engine.md.)
    eng = _begin_deleting(engine_here, register_plugin, engine_root)
    array = eng.req_submit(Caller(0, ROLE_MANAGER), {"array_indices_submitted": "1-2"},
                           "true\n")
    poll_until(eng, lambda: eng.store.job(array)["job_state"] == "F", "the array's end")
    attrs = eng.store.job(array)
    assert not attrs["comment"].endswith("failed"), attrs["comment"]
    assert attrs["Exit_status"] == 0
    assert [k for k, _ in of(records(eng.home), array.replace("[]", "[1]"))] == ["A"]


def test_a_requeue_whose_write_fails_once_writes_one_r(engine_here, monkeypatch):
    # The R was written before the requeue's transaction: one that failed (the disk
    # filled since the last write, which `probe_write` does not check while writes
    # succeed) left the job's end to be tried again at the next poll (`_poll_job`), and
    # the try that worked wrote a second R for the one requeue.
    import sqlite3

    eng = engine_here()
    root = Caller(0, ROLE_MANAGER)
    job_id = eng.req_submit(root, {}, "sleep 60\n")
    poll_until(eng, lambda: job_id in eng.launches, "the job's run")
    real, failed = eng.store.put_job, []

    def full_once(jid, attrs, *args, **kwargs):  # (the requeue's write: the job back to Q)
        if jid == job_id and attrs.get("job_state") == "Q" and not failed:
            failed.append(jid)
            raise sqlite3.OperationalError("database or disk is full")
        return real(jid, attrs, *args, **kwargs)

    monkeypatch.setattr(eng.store, "put_job", full_once)
    eng.req_rerun(root, [job_id])
    poll_until(eng, lambda: eng.store.job(job_id).get("run_count", 0) >= 2,
               "the requeue, tried again, and the next run")
    assert failed, "the requeue's write never failed"
    assert [k for k, _ in of(records(eng.home), job_id)].count("R") == 1
    eng.req_delete(root, [job_id])
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
