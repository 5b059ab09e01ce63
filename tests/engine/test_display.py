"""PBS's qstat, pbsnodes and pbs_rstat output formats (pbsplug.engine.display)."""

from __future__ import annotations

import calendar
import json
import os
import time

import pytest

from pbsplug.engine import accounting
from pbsplug.engine.display import (
    convert_time,
    ctime,
    job_state_letter,
    json_value,
    pbsnodes_full,
    pbsnodes_json,
    qstat_full,
    qstat_json,
    qstat_queues,
    qstat_server,
    qstat_table,
    resv_state,
    rstat_full,
    rstat_table,
    show_nonprint,
    value_text,
    wrap_attribute,
)

#: Monday 23 November 2026, 10:00:00 UTC.
T = calendar.timegm((2026, 11, 23, 10, 0, 0))
#: Tuesday 3 November 2026, 09:05:07 UTC (a one-digit day).
T3 = calendar.timegm((2026, 11, 3, 9, 5, 7))

HEADER = ("Job id            Name             User              Time Use S Queue\n"
          "----------------  ---------------- ----------------  -------- - -----")


def _set_tz(value: str | None) -> None:
    if value is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = value
    time.tzset()


@pytest.fixture(autouse=True)
def utc():
    """Local time is UTC during each test; the caller's TZ is restored afterwards."""
    old = os.environ.get("TZ")
    _set_tz("UTC")
    yield
    _set_tz(old)


# -- values ----------------------------------------------------------------------------------------

def test_ctime_is_ctime3_without_its_newline():
    assert ctime(T) == "Mon Nov 23 10:00:00 2026"
    assert ctime(str(T)) == "Mon Nov 23 10:00:00 2026"
    assert ctime(float(T) + 0.9) == "Mon Nov 23 10:00:00 2026"
    assert ctime(T3) == "Tue Nov  3 09:05:07 2026"      # the day is space-padded


def test_ctime_is_local_time():
    _set_tz("XST+5")        # five hours west of UTC, no tz database needed
    assert ctime(T) == "Mon Nov 23 05:00:00 2026"


@pytest.mark.parametrize("state,letter", [("R", "R"), ("q", "Q"), ("running", "R"),
                                          ("QUEUED", "Q"), ("held", "H"), ("finished", "F"),
                                          ("user-suspended", "U"), ("zzz", "Z"), (None, "")])
def test_job_state_letter(state, letter):
    assert job_state_letter(state) == letter


@pytest.mark.parametrize("state,short,long", [
    (2, "CO", "RESV_CONFIRMED"), ("2", "CO", "RESV_CONFIRMED"), ("RN", "RN", "RESV_RUNNING"),
    ("RESV_UNCONFIRMED", "UN", "RESV_UNCONFIRMED"), ("degraded", "DG", "RESV_DEGRADED"),
    (12, "IC", "RESV_IN_CONFLICT"), (13, "13", "13"), ("odd", "odd", "odd"),
])
def test_resv_state(state, short, long):
    assert resv_state(state) == short
    assert resv_state(state, long=True) == long


@pytest.mark.parametrize("value,resource,text", [
    (True, None, "True"), (False, "ncpus", "False"),
    (3600, "walltime", "01:00:00"), (90061, "cput", "25:01:01"), (3600, None, "3600"),
    (4294967296, "mem", "4gb"), (1536, "vmem", "1536b"), (3 << 20, "pmem", "3mb"),
    (0, "mem", "0kb"),
    (4, "ncpus", "4"), ("2gb", "mem", "2gb"),
    ({"A": "1", "B": "x,y"}, None, "A=1,B=x\\,y"),
    (["n1", "n2"], None, "n1,n2"),  # (qstat -Qf acl_users, qstat -Bf operators)
])
def test_value_text(value, resource, text):
    assert value_text(value, resource) == text


def test_show_nonprint():
    assert show_nonprint("a\x01b\x1bc\td\ne") == "a^Ab^[c\td^Je"


def test_a_value_shown_and_its_accounting_record_differ_on_the_tab_alone():
    """qstat showed U+2028 and U+2029 as they were, where the accounting log escapes them:
    a program reading ``qstat -f`` with Python's ``str.splitlines`` saw a comment holding
    one start a forged ``Job Id:`` block. One rule shows a value in both; a tab stays on
    screen (as PBS prints it), and is ``^I`` in a record (its tokens split at blanks)."""
    text = "a\u2028Job Id: 9.x\u2029b\tc\x1e\x85é"
    assert show_nonprint(text) == "a\\u2028Job Id: 9.x\\u2029b\tc^^\\x85é"
    assert accounting.shown(text) == show_nonprint(text, tab=False) == (
        "a\\u2028Job Id: 9.x\\u2029b^Ic^^\\x85é")
    shown = qstat_full({"1.s": {"Job_Name": "j", "comment": text}})
    assert [line for line in shown.splitlines() if line.startswith("Job Id:")] == [
        "Job Id: 1.s"]


@pytest.mark.parametrize("value,out", [
    (4, 4), (2.5, 2.5), ("4", 4), ("-3", -3), ("0", 0), ("0.5", 0.5), ("1e3", 1000),
    ("007", "007"), ("01:00:00", "01:00:00"), ("4gb", "4gb"), (True, "True"), ("", ""),
    ("1.", "1."),
])
def test_json_value_writes_numbers_unquoted(value, out):
    text = qstat_json({"1.s": {"x": value}}, "s", "1", timestamp=0)
    assert json.loads(text)["Jobs"]["1.s"]["x"] == out
    # Unquoted values are a str subclass; quoted ones plain str.
    assert (type(json_value(value)) is str) is isinstance(out, str)


# -- qstat -----------------------------------------------------------------------------------------

JOBS = {
    "12.srv.example.com": {"Job_Name": "STDIN", "Job_Owner": "alice@login1.example.com",
                           "job_state": "Q", "queue": "workq"},
    "13.srv.example.com": {"Job_Name": "sim", "Job_Owner": "bob@login1", "job_state": "R",
                           "queue": "workq",
                           "resources_used": {"cput": 75, "walltime": 3600}},
}


def test_qstat_a_queued_and_a_running_job():
    assert qstat_table(JOBS) == HEADER + (
        "\n12.srv            STDIN            alice                    0 Q workq           "
        "\n13.srv            sim              bob               00:01:15 R workq           ")


def test_qstat_lines_line_up_with_the_header():
    lines = qstat_table(JOBS).splitlines()
    assert lines[0].index("Name") == lines[2].index("STDIN") == 18
    assert lines[0].index("User") == lines[2].index("alice") == 35
    assert lines[0].index("Time Use") + 7 == lines[2].index(" Q") - 1 == 60
    assert lines[0].index("S Queue") == lines[3].index("R workq") == 62


def test_qstat_cuts_long_values_with_a_star():
    jobs = [{"id": "123456789012345.averylongservername.example.com",
             "Job_Name": "exactly16chars__", "Job_Owner": "a_very_long_username@h",
             "job_state": "running", "queue": "a_very_long_queue_name@srv",
             "resources_used": {"cput": "1234:00:00"}}]
    line = qstat_table(jobs).splitlines()[2]
    assert line == ("123456789012345.* exactly16chars_* a_very_long_use*  1234:00* R "
                    "a_very_long_que*")


def test_qstat_a_name_of_fifteen_characters_is_not_cut():
    line = qstat_table({"1.s": {"Job_Name": "fifteen_chars__", "job_state": "Q"}})
    assert line.splitlines()[2].split()[1] == "fifteen_chars__"


def test_qstat_prints_the_server_comment_first():
    out = qstat_table(JOBS, server={"srv": {"comment": "maintenance\x07 tonight"}})
    assert out.splitlines()[0] == "maintenance^G tonight"
    assert out.splitlines()[1] == HEADER.splitlines()[0]


def test_qstat_with_no_jobs_prints_nothing():
    assert qstat_table({}) == ""
    assert qstat_table([]) == ""


def test_qstat_takes_a_list_of_dicts_or_kernel_objects():
    class Job:
        def to_dict(self):
            return {"id": "7.s", "Job_Name": "k", "Job_Owner": "u@h", "job_state": "H",
                    "queue": "q"}

    assert qstat_table([Job()]).splitlines()[2] == (
        "7.s               k                u                        0 H q               ")
    with pytest.raises(ValueError, match="has no id"):
        qstat_table([{"Job_Name": "anonymous"}])


# -- qstat -f wrapping -----------------------------------------------------------------------------

def test_wrap_a_short_value():
    assert wrap_attribute("Job_Name", "STDIN") == "    Job_Name = STDIN"


def test_wrap_a_value_that_just_fits():
    # "    x = " is 8 columns: a piece fits while its length plus 8 is below 78.
    assert wrap_attribute("x", "b" * 69) == "    x = " + "b" * 69
    # 70 characters no longer "fit", but are printed character by character, and the line
    # breaks only once the count passes 78.
    assert wrap_attribute("x", "b" * 70) == "    x = " + "b" * 70
    assert wrap_attribute("x", "b" * 71) == "    x = " + "b" * 71 + "\n\t"


def test_wrap_a_long_piece_is_cut_every_71_characters():
    assert wrap_attribute("x", "a" * 150) == (
        "    x = " + "a" * 71 + "\n\t" + "a" * 71 + "\n\t" + "a" * 8)


def test_wrap_breaks_at_commas():
    value = ("PBS_O_HOME=/home/alice,PBS_O_PATH=/usr/bin:/bin:/usr/local/bin:/opt/pbs/bin:/sbin,"
             "PBS_O_WORKDIR=/home/alice/work,X=a\\,b")
    assert wrap_attribute("Variable_List", value) == (
        "    Variable_List = PBS_O_HOME=/home/alice,\n"
        "\tPBS_O_PATH=/usr/bin:/bin:/usr/local/bin:/opt/pbs/bin:/sbin,\n"
        "\tPBS_O_WORKDIR=/home/alice/work,X=a\\,b")


def test_wrap_a_later_long_piece_starts_a_new_line_then_is_cut():
    assert wrap_attribute("x", "a" * 60 + "," + "c" * 80) == (
        "    x = " + "a" * 60 + ",\n\t" + "c" * 70 + "\n\t" + "c" * 10)


def test_wrap_the_comma_is_not_counted():
    # 8 + 30 + 39 = 77: the second piece still fits although with its comma the line is 78
    # columns; the count is then 77, so a one-character third piece no longer fits.
    out = wrap_attribute("x", "a" * 30 + "," + "b" * 39 + "," + "c")
    assert out == "    x = " + "a" * 30 + "," + "b" * 39 + ",\n\tc"


def test_wrap_drops_empty_pieces_and_shows_control_characters():
    assert wrap_attribute("comment", ",a,,b,") == "    comment = a,b"
    assert wrap_attribute("comment", "bell\x07") == "    comment = bell^G"


def test_wrap_state_count_as_qstat_Qf_shows_it():
    value = "Transit:0 Queued:2 Held:0 Waiting:0 Running:1 Exiting:0 Begun:0"
    assert wrap_attribute("state_count", value) == (
        "    state_count = Transit:0 Queued:2 Held:0 Waiting:0 Running:1 Exiting:0 Begun\n"
        "\t:0")


# -- qstat -f --------------------------------------------------------------------------------------

FULL_JOB = {
    "Variable_List": {"PBS_O_HOME": "/home/alice", "PBS_O_WORKDIR": "/home/alice/work"},
    "Rerunable": True,
    "Resource_List": {"walltime": 3600, "ncpus": 4, "mem": "2gb", "unset": None},
    "job_state": "R",
    "Job_Owner": "alice@login1",
    "Job_Name": "sim",
    "queue": "workq",
    "ctime": T,
    "qtime": str(T + 5),
    "stime": T3,
    "exec_vnode": [],
    "comment": None,
    "estimated": {"start_time": 0},
    "custom_attr": "x",
}


def test_qstat_full():
    assert qstat_full({"13.srv": FULL_JOB}) == (
        "Job Id: 13.srv\n"
        "    Job_Name = sim\n"
        "    Job_Owner = alice@login1\n"
        "    job_state = R\n"
        "    queue = workq\n"
        "    ctime = Mon Nov 23 10:00:00 2026\n"
        "    qtime = Mon Nov 23 10:00:05 2026\n"
        "    Rerunable = True\n"
        "    Resource_List.mem = 2gb\n"
        "    Resource_List.ncpus = 4\n"
        "    Resource_List.walltime = 01:00:00\n"
        "    stime = Tue Nov  3 09:05:07 2026\n"
        "    Variable_List = PBS_O_HOME=/home/alice,PBS_O_WORKDIR=/home/alice/work\n"
        "    estimated.start_time = UNKNOWN\n"
        "    custom_attr = x\n")


def test_qstat_full_a_blank_line_after_each_job():
    jobs = {"1.s": {"Job_Name": "a", "estimated": {"start_time": T}}, "2.s": {}}
    assert qstat_full(jobs) == ("Job Id: 1.s\n    Job_Name = a\n"
                                "    estimated.start_time = Mon Nov 23 10:00:00 2026\n"
                                "\nJob Id: 2.s\n")
    assert qstat_full({}) == ""


# -- qstat -F json ---------------------------------------------------------------------------------

def test_qstat_json():
    job = {"Job_Name": "sim", "job_state": "R", "ctime": T, "Priority": 0, "Rerunable": True,
           "Resource_List": {"walltime": 3600, "ncpus": 4},
           "Variable_List": {"B": "x,y", "A": "1"}, "Exit_status": None}
    assert qstat_json({"13.srv": job}, "srv", "23.06.06", timestamp=T) == """{
    "timestamp":1795428000,
    "pbs_version":"23.06.06",
    "pbs_server":"srv",
    "Jobs":{
        "13.srv":{
            "Job_Name":"sim",
            "job_state":"R",
            "ctime":"Mon Nov 23 10:00:00 2026",
            "Priority":0,
            "Rerunable":"True",
            "Resource_List":{
                "ncpus":4,
                "walltime":"01:00:00"
            },
            "Variable_List":{
                "B":"x,y",
                "A":1
            }
        }
    }
}"""


def test_qstat_json_is_valid_json_with_pbs_top_level_keys():
    doc = json.loads(qstat_json(JOBS, {"srv": {}}, "23.06.06", timestamp=T))
    assert list(doc) == ["timestamp", "pbs_version", "pbs_server", "Jobs"]
    assert doc["timestamp"] == T and doc["pbs_server"] == "srv"
    assert list(doc["Jobs"]) == ["12.srv.example.com", "13.srv.example.com"]
    assert doc["Jobs"]["13.srv.example.com"]["resources_used"] == {"cput": "00:01:15",
                                                                   "walltime": "01:00:00"}


def test_qstat_json_without_jobs_has_no_jobs_key():
    assert qstat_json({}, "srv", "23.06.06", timestamp=T) == (
        '{\n    "timestamp":1795428000,\n    "pbs_version":"23.06.06",\n'
        '    "pbs_server":"srv"\n}')


def test_json_pbs_version_and_server_stay_strings():
    doc = json.loads(qstat_json({}, "2024", "20", timestamp=T))
    assert doc["pbs_version"] == "20" and doc["pbs_server"] == "2024"


def test_json_timestamp_defaults_to_now_and_version_to_pbsplugs(monkeypatch):
    from pbsplug import __version__
    monkeypatch.setattr(time, "time", lambda: 1234.5)
    doc = json.loads(qstat_json({}, "s"))
    assert doc["timestamp"] == 1234
    assert doc["pbs_version"] == __version__


def test_json_escapes_strings():
    doc = json.loads(qstat_json({"1.s": {"comment": 'say "hi"\\ ünï'}}, "s", "1", timestamp=0))
    assert doc["Jobs"]["1.s"]["comment"] == 'say "hi"\\ ünï'


# -- qstat -Q and -B -------------------------------------------------------------------------------

QUEUES = {
    "workq": {"queue_type": "Execution", "total_jobs": 3, "enabled": True, "started": "True",
              "state_count": "Transit:0 Queued:2 Held:0 Waiting:0 Running:1 Exiting:0 Begun:0",
              "resources_default": {"walltime": 3600}, "max_running": 10},
    "a_very_long_queue_name": {"queue_type": "Route", "enabled": "False",
                               "state_count": {"Queued": 123456}},
    "bare": {"queue_type": None},
}


def test_qstat_Q_table():
    assert qstat_queues(QUEUES) == (
        "Queue              Max   Tot Ena Str   Que   Run   Hld   Wat   Trn   Ext Type\n"
        "---------------- ----- ----- --- --- ----- ----- ----- ----- ----- ----- ----\n"
        "workq               10     3 yes yes     2     1     0     0     0     0 Exe*\n"
        "a_very_long_que*     0     0  no  no 1234*     0     0     0     0     0 Rou*\n"
        "bare                 0     0  no  no     0     0     0     0     0     0 not defined")


def test_qstat_Q_with_no_queues_prints_nothing():
    assert qstat_queues({}) == ""


def test_qstat_Qf():
    assert qstat_queues({"workq": QUEUES["workq"]}, full=True) == (
        "Queue: workq\n"
        "    queue_type = Execution\n"
        "    total_jobs = 3\n"
        "    state_count = Transit:0 Queued:2 Held:0 Waiting:0 Running:1 Exiting:0 Begun\n"
        "\t:0\n"
        "    max_running = 10\n"
        "    resources_default.walltime = 01:00:00\n"
        "    enabled = True\n"
        "    started = True\n")


def test_qstat_Qf_json():
    doc = json.loads(qstat_queues({"workq": QUEUES["workq"]}, json_out=True, server="srv",
                                  version="23.06.06", timestamp=T))
    assert doc == {"timestamp": T, "pbs_version": "23.06.06", "pbs_server": "srv",
                   "Queue": {"workq": {
                       "queue_type": "Execution", "total_jobs": 3,
                       "state_count": ("Transit:0 Queued:2 Held:0 Waiting:0 Running:1 "
                                       "Exiting:0 Begun:0"),
                       "max_running": 10, "resources_default": {"walltime": "01:00:00"},
                       "enabled": "True", "started": "True"}}}
    empty = json.loads(qstat_queues({}, json_out=True, server="srv", version="1", timestamp=T))
    assert list(empty) == ["timestamp", "pbs_version", "pbs_server"]


SERVER = {"srv": {"server_state": "Active", "server_host": "srv.example.com",
                  "scheduling": True, "total_jobs": 3, "default_queue": "workq",
                  "state_count": "Transit:0 Queued:2 Held:0 Waiting:0 Running:1 Exiting:0"}}


def test_qstat_B_table():
    assert qstat_server(SERVER) == (
        "Server             Max   Tot   Que   Run   Hld   Wat   Trn   Ext Status\n"
        "---------------- ----- ----- ----- ----- ----- ----- ----- ----- -----------\n"
        "srv                  0     3     2     1     0     0     0     0 Active    ")


def test_qstat_B_a_long_status_is_cut():
    out = qstat_server({"name": "s", "server_state": "Hot_Start_Pending"})
    assert out.splitlines()[2].endswith("    0 Hot_Start*")


def test_qstat_Bf():
    assert qstat_server(SERVER, full=True) == (
        "Server: srv\n"
        "    server_state = Active\n"
        "    server_host = srv.example.com\n"
        "    scheduling = True\n"
        "    total_jobs = 3\n"
        "    state_count = Transit:0 Queued:2 Held:0 Waiting:0 Running:1 Exiting:0\n"
        "    default_queue = workq\n")


def test_qstat_Bf_json():
    text = qstat_server(SERVER, json_out=True, version="23.06.06", timestamp=T)
    assert text.startswith('{\n    "timestamp":1795428000,\n    "pbs_version":"23.06.06",\n'
                           '    "pbs_server":"srv",\n    "Server":{\n        "srv":{\n'
                           '            "server_state":"Active",\n')
    doc = json.loads(text)
    assert doc["Server"]["srv"]["scheduling"] == "True"
    assert doc["Server"]["srv"]["total_jobs"] == 3


# -- pbsnodes --------------------------------------------------------------------------------------

NODES = {
    "node1": {"last_state_change_time": T, "sharing": "default_shared", "resv_enable": True,
              "resources_assigned": {"ncpus": 4, "mem": 0, "ngpus": "0"},
              "resources_available": {"ncpus": 4, "mem": 4294967296, "host": "node1"},
              "jobs": ["13.srv/0", "13.srv/1", "14.srv/2"], "pcpus": 4, "state": "job-busy",
              "Port": 15002, "Mom": "node1.example.com", "comment": "rack\x1b3"},
    "node2": {"Mom": "node2", "state": "free", "jobs": []},
}


def test_pbsnodes_a():
    assert pbsnodes_full(NODES) == (
        "node1\n"
        "     Mom = node1.example.com\n"
        "     Port = 15002\n"
        "     state = job-busy\n"
        "     pcpus = 4\n"
        "     jobs = 13.srv/0, 13.srv/1, 14.srv/2\n"
        "     resources_available.host = node1\n"
        "     resources_available.mem = 4gb\n"
        "     resources_available.ncpus = 4\n"
        "     resources_assigned.mem = 0kb\n"
        "     resources_assigned.ncpus = 4\n"
        "     resources_assigned.ngpus = 0\n"
        "     comment = rack^[3\n"
        "     resv_enable = True\n"
        "     sharing = default_shared\n"
        "     last_state_change_time = Mon Nov 23 10:00:00 2026\n"
        "\n"
        "node2\n"
        "     Mom = node2\n"
        "     state = free\n")


def test_pbsnodes_a_does_not_wrap():
    out = pbsnodes_full({"n": {"comment": "x" * 200}})
    assert out == "n\n     comment = " + "x" * 200 + "\n"


def test_pbsnodes_json():
    assert pbsnodes_json(NODES, "srv", "23.06.06", timestamp=T) == """{
    "timestamp":1795428000,
    "pbs_version":"23.06.06",
    "pbs_server":"srv",
    "nodes":{
        "node1":{
            "Mom":"node1.example.com",
            "Port":15002,
            "state":"job-busy",
            "pcpus":4,
            "jobs":[
                "13.srv",
                "14.srv"
            ],
            "resources_available":{
                "host":"node1",
                "mem":"4gb",
                "ncpus":4
            },
            "resources_assigned":{
                "ncpus":4
            },
            "comment":"rack\\u001b3",
            "resv_enable":"True",
            "sharing":"default_shared",
            "last_state_change_time":1795428000
        },
        "node2":{
            "Mom":"node2",
            "state":"free"
        }
    }
}"""


def test_pbsnodes_json_jobs_as_a_string():
    doc = json.loads(pbsnodes_json({"n": {"jobs": "1.s/0, 1.s/1, 2.s/0"}}, "s", "1",
                                   timestamp=0))
    assert doc["nodes"]["n"]["jobs"] == ["1.s", "2.s"]


def test_pbsnodes_lists_a_vnodes_reservations_as_pbs_does():
    """``resv = R613.vm, R612.vm`` after ``jobs``, and one string in JSON (OpenPBS 23.06,
    checked)."""
    vnode = {"n": {"state": "free", "jobs": ["5.s/0"], "resv": ["R7.s", "R6.s"],
                   "resv_enable": True}}
    assert pbsnodes_full(vnode) == ("n\n     state = free\n     jobs = 5.s/0\n"
                                    "     resv = R7.s, R6.s\n     resv_enable = True\n")
    doc = json.loads(pbsnodes_json(vnode, "s", "1", timestamp=0))
    assert doc["nodes"]["n"]["resv"] == "R7.s, R6.s"


# -- pbs_rstat -------------------------------------------------------------------------------------

@pytest.mark.parametrize("offset,text", [
    (0, "Today 10:00"),
    (3600, "Today 11:00"),
    (-3600, "Today 09:00"),
    (86400, "Tue 10:00"),                 # later this week (weeks start on Sunday)
    (5 * 86400, "Sat 10:00"),
    (-86400, "Sun 10:00"),                # the Sunday that began this week
    (-2 * 86400, "Sat Nov 21 10:00"),     # last week
    (6 * 86400, "Sun Nov 29 10:00"),      # next week
    (40 * 86400, "Sat Jan 02 2027 10:00"),
    (-365 * 86400, "Sun Nov 23 2025 10:00"),
])
def test_convert_time(offset, text):
    assert convert_time(T + offset, now=T) == text


RESV = {"resvid": "R14.srv", "Reserve_Name": "NULL", "Reserve_Owner": "alice@login1",
        "queue": "R14", "reserve_state": 2, "reserve_start": T + 3600,
        "reserve_end": T + 7200, "reserve_duration": 3600, "Authorized_Users": ["alice@*"],
        "Resource_List": {"ncpus": 2, "walltime": 3600}, "resv_execvnodes": "(n1:ncpus=2)",
        "ctime": T3}

RSTAT_HEADER = ("Resv ID    Queue    User     State             Start / Duration / End"
                "              \n" + "-" * 69)


def test_rstat_table():
    assert rstat_table([RESV], now=T) == RSTAT_HEADER + (
        "\nR14.srv    R14      alice@*  CO          Today 11:00 / 3600 / Today 12:00      ")


def test_rstat_table_cuts_columns_and_computes_the_duration():
    resv = {"name": "R123456789012.srv", "queue": "R123456789012",
            "Authorized_Users": "someone_long@*,x", "reserve_state": "RESV_RUNNING",
            "reserve_start": T - 86400 * 400, "reserve_end": T + 86400 * 30}
    line = rstat_table([resv], now=T).splitlines()[2]
    assert line == ("R123456789 R1234567 someone_ RN    Sun Oct 19 2025 1 / 37152000 / "
                    "Wed Dec 23 10:00 ")


def test_rstat_table_with_no_reservations_prints_nothing():
    assert rstat_table([], now=T) == ""


def test_rstat_full():
    assert rstat_full([RESV, {"resvid": "R15.srv", "reserve_state": "RN"}]) == (
        "Resv ID: R14.srv\n"
        "Reserve_Name = NULL\n"
        "Reserve_Owner = alice@login1\n"
        "reserve_state = RESV_CONFIRMED\n"
        "reserve_start = Mon Nov 23 11:00:00 2026\n"
        "reserve_end = Mon Nov 23 12:00:00 2026\n"
        "reserve_duration = 3600\n"
        "queue = R14\n"
        "Resource_List.ncpus = 2\n"
        "Resource_List.walltime = 01:00:00\n"
        "Authorized_Users = alice@*\n"
        "ctime = Tue Nov 03 09:05:07 2026\n"        # strftime: the day is zero-padded
        "\n"
        "Resv ID: R15.srv\n"
        "reserve_state = RESV_RUNNING\n")
