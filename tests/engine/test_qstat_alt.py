"""qstat's alternative format (-a, -i, -r, -H, -u, -T, -G, -M, -n, -s, -1, with -w), -p,
-E and -q, as OpenPBS 23.06 prints them. The expected lines are what the real one printed
for the same jobs (a probe of tests/adapters, 2026-12-05): a running job (session 24136,
walltime 01:00:00, mem 512mb, on vm/0) and a held one (select=2:ncpus=1:mem=3gb)."""

from __future__ import annotations

import os
import pwd
import time

import pytest

from pbsplug.engine import display

USER = pwd.getpwuid(os.getuid()).pw_name
RUN_COMMENT = "Job run at Sat Dec 05 at 23:37 on (vm:mem=524288kb:ncpus=1)"
JOBS = {
    "1290.vm": {"Job_Name": "averyverylongjobname", "Job_Owner": "root@vm", "job_state": "R",
                "queue": "workq", "session_id": 24136, "exec_host": "vm/0",
                "comment": RUN_COMMENT, "stime": 1796513850,
                "Resource_List": {"mem": "512mb", "ncpus": 1, "nodect": 1,
                                  "walltime": "01:00:00"},
                "resources_used": {"cput": "00:00:00", "walltime": "00:00:00"}},
    "1292.vm": {"Job_Name": "STDIN", "Job_Owner": "root@vm", "job_state": "H",
                "queue": "workq",
                "Resource_List": {"mem": "6gb", "ncpus": 2, "nodect": 2,
                                  "select": "2:ncpus=1:mem=3gb"}},
}
SERVER = {"vm": {"server_state": "Active"}}
HEAD = ["", "vm: ", f"{'':60}Req'd  Req'd   Elap",
        "Job ID          Username Queue    Jobname    SessID NDS TSK Memory Time  S Time",
        "--------------- -------- -------- ---------- ------ --- --- ------ ----- - -----"]
RUN = "1290.vm         root     workq    averyvery*  24136   1   1  512mb 01:00 R 00:00"
HELD = "1292.vm         root     workq    STDIN         --    2   2    6gb   --  H   -- "
WIDE_HEAD = [
    "", "vm: ", f"{'':99}Req'd  Req'd   Elap",
    "Job ID                         Username        Queue           Jobname         SessID  "
    " NDS  TSK   Memory Time  S Time",
    "------------------------------ --------------- --------------- --------------- --------"
    " ---- ----- ------ ----- - -----"]
WIDE_RUN = ("1290.vm                        root            workq           averyverylongj*    "
            "24136    1     1  512mb 01:00 R 00:00")
WIDE_HELD = ("1292.vm                        root            workq           STDIN             "
             "   --     2     2    6gb   --  H   -- ")


def _alt(**options) -> list[str]:
    return display.qstat_alt(JOBS, SERVER, **options).split("\n")


def test_the_alternative_format_is_pbss():
    assert _alt() == [*HEAD, RUN, HELD]
    assert _alt(wide=True) == [*WIDE_HEAD, WIDE_RUN, WIDE_HELD]


def test_n_s_and_1_add_exec_hosts_and_comments_as_pbs_does():
    assert _alt(nodes=True) == [*HEAD, RUN, "   vm/0", HELD, "    -- "]
    assert _alt(nodes=True, one_line=True) == [*HEAD, RUN + " vm/0", HELD + "  -- "]
    assert _alt(comments=True) == [*HEAD, RUN, f"   {RUN_COMMENT}", HELD, "    -- "]
    assert _alt(comments=True, one_line=True) == [
        *HEAD, f"{RUN}    {RUN_COMMENT}", f"{HELD}     -- "]
    assert _alt(nodes=True, comments=True, one_line=True) == [
        *HEAD, RUN + " vm/0", f"   {RUN_COMMENT}", HELD + "  -- ", "    -- "]
    assert _alt(wide=True, nodes=True, one_line=True) == [
        *WIDE_HEAD, WIDE_RUN + " vm/0", WIDE_HELD + "  -- "]
    assert _alt(header=False) == [RUN, HELD]


def test_a_long_comment_and_a_long_exec_host_are_cut_as_pbs_cuts_them():
    jobs = {"1.vm": {**JOBS["1290.vm"], "comment": "c" * 75,
                     "exec_host": "+".join(f"node{i:02}.example.com/0*8" for i in range(12))}}
    lines = display.qstat_alt(jobs, SERVER, nodes=True, comments=True).split("\n")
    assert lines[-1] == "   " + "c" * 70 + "..."
    hosts = [line[3:] for line in lines[6:-1]]
    assert "".join(hosts) == "+".join(f"node{i:02}/0*8" for i in range(12))
    assert all(line.endswith("+") and len(line) <= 77 for line in hosts[:-1])
    wide = display.qstat_alt(jobs, SERVER, comments=True, wide=True).split("\n")
    assert wide[-1] == "   " + "c" * 75


def test_T_shows_the_estimated_start_column():
    assert _alt(start=True) == [
        "", "vm: ", f"{'':75}Est", f"{'':60}Req'd  Req'd   Start", *HEAD[3:],
        RUN[:-5] + "   --", HELD[:-5] + "   --"]
    assert _alt(start=True, wide=True)[2] == f"{'':99}               Est"


@pytest.fixture
def tokyo(monkeypatch):
    """The local time zone pinned to UTC+9 with no summer time (a POSIX TZ, no tzdata
    needed): 1_000_000_000 is Sunday 9 September 2001, 10:46:40 there."""
    monkeypatch.setenv("TZ", "JST-9")
    time.tzset()
    yield 1_000_000_000.0
    monkeypatch.undo()
    time.tzset()


def test_T_sorts_started_jobs_first_then_the_soonest_estimates(tokyo):
    now = tokyo
    jobs = {"1.vm": {"job_state": "Q", "estimated": {"start_time": int(now) + 7200}},
            "2.vm": {"job_state": "Q"},
            "3.vm": {"job_state": "Q", "estimated": {"start_time": int(now) + 60}},
            "4.vm": {"job_state": "R", "stime": int(now) - 10}}
    rows = display.qstat_alt(jobs, SERVER, start=True, now=now).split("\n")[6:]
    assert [row.split()[0] for row in rows] == ["4.vm", "3.vm", "1.vm", "2.vm"]
    assert rows[1][-5:] == "10:47"
    assert [row[-5:] for row in (rows[0], rows[3])] == ["   --", "   --"]


DAY = 86400


@pytest.mark.parametrize("offset, shown", [
    (None, "--"), (-60, "--"), (0, "10:46"), (60, "10:47"),
    (50400, "Mo 00"),                      # the next day (Monday 00:46), not today
    (3 * DAY + 5 * 3600, "We 15"), (7 * DAY - 60, "Su 10"),  # within a week: day, hour
    (7 * DAY, "Sep"), (30 * DAY, "Oct"), (110 * DAY, "Dec"),  # this year: the month
    (120 * DAY, "2002"), (4 * 365 * DAY, "2005"),            # within 5 years: the year
    (5 * 365 * DAY, ">5yrs"), (7 * 365 * DAY, ">5yrs")])
def test_estimated_start_forms(tokyo, offset, shown):
    now = tokyo
    epoch = None if offset is None else now + offset
    assert display.estimated_start(epoch, now) == shown
    assert display.estimated_start(0, now) == "?"


def test_G_and_M_show_sizes_in_gigabytes_and_megawords():
    assert _alt(unit="gb")[5:] == [RUN.replace("  512mb", "    1gb"), HELD]
    assert _alt(unit="mw")[5:] == [RUN.replace("  512mb", "   64mw"),
                                   HELD.replace("    6gb", "  768mw")]


@pytest.mark.parametrize("value, unit, shown", [
    ("512mb", None, "512mb"), ("512mb", "gb", "1gb"), ("512mb", "mw", "64mw"),
    ("6gb", "mw", "768mw"), ("10485760kb", None, "10gb"), ("100b", None, "100 b"),
    ("5w", None, "5 w"), ("1kb", "gb", "1gb"), ("99999kb", None, "98mb"),
    ("0kb", "mw", "0mw")])
def test_sizes_as_pbs_converts_them(value, unit, shown):
    assert display.size_column(value, unit) == shown


def test_p_shows_the_percentage_done():
    lines = display.qstat_table(JOBS, percent=True).split("\n")
    assert lines == [
        "Job id            Name             User               % done  S Queue",
        "----------------  ---------------- ----------------  -------- - -----",
        "1290.vm           averyverylongjo* root                    0  R workq           ",
        "1292.vm           STDIN            root                   --  H workq           "]
    assert display.qstat_table(JOBS, percent=True, wide=True).split("\n")[:2] == [
        "Job id                         Name            User              % done  S Queue",
        "-----------------------------  --------------- ---------------  -------- - "
        "---------------"]


@pytest.mark.parametrize("attrs, shown", [
    ({"job_state": "Q", "Resource_List": {"walltime": 100}}, "-- "),
    ({"job_state": "X"}, "100"),
    ({"job_state": "R", "Resource_List": {"walltime": "00:10:00"},
      "resources_used": {"walltime": "00:05:00"}}, " 50 "),
    ({"job_state": "R", "Resource_List": {"walltime": "00:10:00", "cput": "00:01:00"},
      "resources_used": {"walltime": "00:05:00", "cput": "00:00:45"}}, " 75 "),
    ({"job_state": "H", "Resource_List": {"cput": "00:10:00"}}, "  0 "),
    ({"job_state": "H", "Resource_List": {"walltime": "00:10:00"}}, "-- "),
    ({"job_state": "F", "Resource_List": {"walltime": "00:00:10"},
      "resources_used": {"walltime": "00:00:25"}}, "250 ")])
def test_percent_done_as_pbs_works_it_out(attrs, shown):
    assert display.percent_done(attrs) == shown


def test_q_summarises_the_queues():
    queues = {"workq": {"enabled": True, "started": True, "state_count":
                        "Transit:0 Queued:1 Held:2 Waiting:0 Running:3 Exiting:0 Begun:0"},
              "other": {"enabled": True, "started": False, "max_running": 10,
                        "resources_max": {"mem": "2gb", "walltime": "01:00:00"},
                        "state_count": "Transit:0 Queued:0 Held:0 Waiting:1 Running:0"}}
    assert display.qstat_queue_summary(queues, "vm").split("\n") == [
        "", "server: vm", "",
        "Queue            Memory CPU Time Walltime Node   Run   Que   Lm  State",
        "---------------- ------ -------- -------- ---- ----- ----- ----  -----",
        "workq              --      --       --     --      3     3   --   E R",
        "other               2gb    --    01:00:00  --      0     1   10   E S",
        f"{'':47}----- -----", f"{'':47}    3     4"]
    assert display.qstat_queue_summary(queues, "vm", "mw").split("\n")[6].startswith(
        "other             256mw")


# -- the command ------------------------------------------------------------------------------

def _submit(engine, *args: str, script: str = "true\n") -> str:
    done = engine.pbs("qsub", *args, input=script)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def three(engine):
    """A running job, a finished one and a held one, as the real PBS's probe had them."""
    run = _submit(engine, "-l", "walltime=01:00:00", "-l", "mem=512mb", "-N",
                  "averyverylongjobname", script="sleep 1000\n")
    done = _submit(engine, "-l", "cput=00:10:00")
    held = _submit(engine, "-h", "-l", "select=2:ncpus=1:mem=3gb", "-l", "place=free")
    engine.wait(done)
    engine.wait(run, "R")
    yield {"run": run, "done": done, "held": held}
    engine.pbs("qdel", run)


def _rows(engine, *args: str) -> list[str]:
    done = engine.pbs("qstat", *args)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return [line.split()[0] for line in done.stdout.splitlines()[5:] if line[:1].isdigit()]


def test_i_r_H_and_u_select_jobs_but_never_those_named(engine, three):
    assert _rows(engine, "-i") == [three["held"]]
    assert _rows(engine, "-r") == [three["run"]]
    assert _rows(engine, "-H") == [three["done"]]
    assert _rows(engine, "-i", "workq") == [three["held"]]
    assert _rows(engine, "-u", f"nobody,{USER}") == [three["run"], three["held"]]
    assert _rows(engine, "-u", "nobody") == []
    assert engine.pbs("qstat", "-u", "nobody").stdout == ""
    # named jobs are shown whatever their state (PBS asks for them by id)
    assert _rows(engine, "-i", three["run"]) == [three["run"]]
    assert _rows(engine, "-H", three["run"]) == [three["run"]]
    assert _rows(engine, "-a", three["held"], three["run"]) == [three["held"], three["run"]]


def test_the_header_comes_with_the_first_operands_jobs(engine, three):
    done = engine.pbs("qstat", "-a", "99999", three["held"])
    assert done.returncode == 153
    assert done.stderr.startswith("qstat: Unknown Job Id 99999.")
    assert [line.split()[0] for line in done.stdout.splitlines()] == [three["held"]]
    plain = engine.pbs("qstat", "99999", three["held"]).stdout.splitlines()
    assert [line.split()[0] for line in plain] == [three["held"]]


def test_E_lists_named_jobs_by_number_and_passes_over_unknown_ones(engine, three):
    done = engine.pbs("qstat", "-E", three["held"], "99999", three["run"])
    assert (done.returncode, done.stderr) == (0, "")
    assert [line.split()[0] for line in done.stdout.splitlines()[2:]] == [
        three["run"], three["held"]]
    alone = engine.pbs("qstat", "-E", "99999")  # (unknown when none is known)
    assert (alone.returncode, alone.stdout) == (153, "")
    assert alone.stderr.startswith("qstat: Unknown Job Id 99999.")
    refused = engine.pbs("qstat", "-E", "workq")
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        1, "", "qstat: Express option can only be used with job ids\n")


@pytest.mark.parametrize("args, said", [
    (("-a", "-i"), 1), (("-G", "-M"), 1), (("-1",), 1), (("-a", "-B"), 1),
    (("-a", "-Q"), 1), (("-q", "-f"), 1), (("-a", "-F", "json"), 1), (("-p", "-F", "json"), 1),
    (("-a", "-r", "-G", "-M"), 2), (("-f", "-n", "-F", "json"), 1),
    (("-w", "-F", "json"), 1)])
def test_options_pbs_takes_not_together(engine, args, said):
    done = engine.pbs("qstat", *args)
    assert (done.returncode, done.stdout) == (2, "")
    lines = done.stderr.splitlines()
    assert lines[:said] == ["qstat: conflicting options."] * said
    assert lines[said] in ("usage: ", "qstat: option w cannot be used with -F")


@pytest.mark.parametrize("args", [("-B", "-a"), ("-aw", "-Q"), ("-Q", "-a")])
def test_options_pbs_takes_together_in_that_order(engine, args):
    done = engine.pbs("qstat", *args)
    assert (done.returncode, done.stderr) == (0, "")


def test_q_on_the_engine(engine, three):
    done = engine.pbs("qstat", "-q")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[5].split() == ["workq", "--", "--", "--", "--", "1",
                                                   "1", "--", "E", "R"]
    unknown = engine.pbs("qstat", "-q", "nosuch")
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (
        170, "", "qstat: Unknown queue nosuch\n")
