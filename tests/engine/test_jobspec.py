"""qsub's options and #PBS directives, read into a JobRequest (pbsplug.engine.jobspec)."""

from __future__ import annotations

import calendar
import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbsplug import values
from pbsplug.engine import jobspec
from pbsplug.engine.jobspec import (
    PBS_MAXJOBNAME,
    PBSE_BADATVAL,
    PBSE_BADSCRIPT,
    PBSE_IVALREQ,
    PBSE_JOBNBIG,
    PBSE_NOSUP,
    USAGE,
    JobSpecError,
    cvtdate,
    directives,
    is_executable_line,
    job_variables,
    parse_qsub,
    resource_value,
    server_variables,
)

ENV = {"HOME": "/home/alice", "PATH": "/usr/bin:/bin", "LOGNAME": "alice",
       "SHELL": "/bin/bash", "LANG": "C", "FOO": "bar", "PBS_O_OLD": "stale"}

#: Monday 23 November 2026, 10:00:00 UTC.
NOW = calendar.timegm((2026, 11, 23, 10, 0, 0))

BASE_VARS = {
    "PBS_O_HOME": "/home/alice", "PBS_O_LANG": "C", "PBS_O_LOGNAME": "alice",
    "PBS_O_PATH": "/usr/bin:/bin", "PBS_O_SHELL": "/bin/bash", "PBS_O_WORKDIR": "/work",
    "PBS_O_SYSTEM": "Linux", "PBS_O_HOST": "login1",
}


@pytest.fixture(autouse=True)
def utc():
    """Local time is UTC during each test; the caller's TZ is restored afterwards."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


def utc_epoch(*fields: int) -> int:
    return calendar.timegm(fields + (0,) * (6 - len(fields)))


def submit(*argv: str, script: str = "echo hello\n", **kw) -> jobspec.JobRequest:
    kw.setdefault("cwd", "/work")
    kw.setdefault("env", ENV)
    kw.setdefault("user", "alice")
    kw.setdefault("host", "login1")
    kw.setdefault("system", "Linux")
    kw.setdefault("now", NOW)
    kw.setdefault("read_script", lambda: script)
    return parse_qsub(list(argv), **kw)


def refused(*argv: str, **kw) -> JobSpecError:
    with pytest.raises(JobSpecError) as info:
        submit(*argv, **kw)
    return info.value


def with_usage(message: str) -> str:
    return f"{message}\n{USAGE}"


# -- the whole request -----------------------------------------------------------------------------

def test_a_script_on_stdin_gets_qsubs_defaults():
    req = submit(script="#!/bin/sh\necho hello\n")
    assert req.script == "#!/bin/sh\necho hello\n"
    assert req.argv is None and req.server is None
    assert req.quiet is False and req.block is False
    assert req.attrs == {
        "Job_Name": "STDIN", "Job_Owner": "alice@login1", "Checkpoint": "u",
        "Hold_Types": "n", "Join_Path": "n", "Keep_Files": "n", "Mail_Points": "a",
        "Priority": 0, "Rerunable": True, "Variable_List": BASE_VARS, "Submit_arguments": "",
    }
    # PBS's attribute order, as the server stores and qstat -f lists them.
    assert list(req.attrs) == ["Job_Name", "Job_Owner", "Checkpoint", "Hold_Types",
                               "Join_Path", "Keep_Files", "Mail_Points", "Priority",
                               "Rerunable", "Variable_List", "Submit_arguments"]


def test_usage_text_is_qsubs():
    assert USAGE.splitlines()[0] == ("usage: qsub [-a date_time] [-A account_string] "
                                     "[-c interval]")
    assert USAGE.splitlines()[-1] == "       qsub --version"


def test_the_default_reader_is_standard_input(monkeypatch):
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO("#PBS -N fromstdin\ntrue\n"))
    req = parse_qsub([], cwd="/work", env=ENV, user="alice", host="login1", system="Linux")
    assert req.script == "#PBS -N fromstdin\ntrue\n"
    assert req.attrs["Job_Name"] == "fromstdin"


def test_submit_arguments_are_the_command_line():
    req = submit("-N", "x", "-l", "ncpus=2")
    assert req.attrs["Submit_arguments"] == "-N x -l ncpus=2"


def test_many_options_at_once_are_ordered_as_pbs_lists_them():
    req = submit("-q", "workq", "-N", "job1", "-A", "acct", "-l", "ncpus=2", "-h",
                 "-P", "proj", "-W", "depend=afterok:7", server="srv")
    assert list(req.attrs) == ["Job_Name", "Job_Owner", "queue", "Account_Name", "Checkpoint",
                               "depend", "Hold_Types", "Join_Path", "Keep_Files",
                               "Mail_Points", "Priority", "Rerunable", "Resource_List",
                               "Variable_List", "Submit_arguments", "project"]


# -- -N --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["job1", "1job", "a.b+c-d_e", "x" * PBS_MAXJOBNAME])
def test_N_sets_the_job_name(name):
    assert submit("-N", name).attrs["Job_Name"] == name


def test_a_job_name_one_character_too_long_is_refused():
    err = refused("-N", "x" * (PBS_MAXJOBNAME + 1))
    assert PBS_MAXJOBNAME == 236
    assert err.message == "qsub: Job name is too long"
    assert err.stderr == "qsub: Job name is too long"     # no usage after it
    assert (err.code, err.status, err.usage) == (PBSE_JOBNBIG, 2, False)
    assert PBSE_JOBNBIG == 15173


@pytest.mark.parametrize("name", ["a b", "a/b", "job!", "x:y", ""])
def test_an_illegal_job_name_prints_usage_and_exits_2(name):
    err = refused("-N", name)
    assert err.stderr == with_usage("qsub: illegal -N value")
    assert (err.code, err.status, err.usage) == (PBSE_BADATVAL, 2, True)
    assert str(err) == "illegal -N value"


def test_the_last_N_on_the_command_line_wins():
    assert submit("-N", "first", "-N", "second").attrs["Job_Name"] == "second"


# -- -q --------------------------------------------------------------------------------------------

def test_q_names_the_queue():
    req = submit("-q", "workq")
    assert req.attrs["queue"] == "workq" and req.server is None


def test_q_queue_at_server():
    req = submit("-q", "express@other.example.com")
    assert req.attrs["queue"] == "express"
    assert req.server == "other.example.com"


def test_q_at_server_alone_leaves_the_queue_to_the_server():
    req = submit("-q", "@other")
    assert "queue" not in req.attrs and req.server == "other"


@pytest.mark.parametrize("dest", ["workq@", "a@b@c", "work q"])
def test_a_malformed_destination_is_refused(dest):
    err = refused("-q", dest)
    assert err.message == f"qsub: illegally formed destination: {dest}"
    assert (err.code, err.status) == (PBSE_BADATVAL, 2)


# -- -l --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("-l", "place=scatter"),
                                  ("-l", "place=excl", "-l", "walltime=5")])
def test_a_place_without_a_select_is_refused_as_openpbs_qsub_refuses_it(args):
    err = refused(*args, "--", "/bin/true")
    assert (err.message, err.status) == ('qsub: Cannot have "place" without "select"', 7)
    assert submit("-l", "place=scatter", "-l", "select=1:ncpus=1", "--", "/bin/true"
                  ).attrs["Resource_List"]["place"] == "scatter"

def test_l_select_place_walltime_mem():
    req = submit("-l", "select=2:ncpus=4:mem=2GB,place=scatter:excl",
                 "-l", "walltime=1:30:00", "-lmem=4GB")
    assert req.attrs["Resource_List"] == {
        "select": "2:ncpus=4:mem=2GB", "place": "scatter:excl",
        "walltime": "01:30:00", "mem": "4gb",
    }


@pytest.mark.parametrize("given,stored", [
    ("walltime=90", "00:01:30"), ("walltime=10:00", "00:10:00"),
    ("walltime=100:00:00", "100:00:00"), ("cput=1:2:3", "01:02:03"),
    ("mem=512mb", "512mb"), ("mem=2048", "2048b"), ("vmem=1KW", "1kw"),
    ("ncpus=8", 8), ("nodect=+2", 2), ("host=node1", "node1"),
])
def test_l_values_are_stored_by_their_type(given, stored):
    name = given.split("=")[0]
    assert submit("-l", given).attrs["Resource_List"] == {name: stored}


def test_l_a_custom_resource_is_a_string_unless_typed():
    req = submit("-l", "scratch=10,licence=yes,ratio=0.5,fast=true,disk=2gb,budget=1:00",
                 resource_types={"scratch": "long", "ratio": "float", "fast": "boolean",
                                 "disk": "size", "budget": "duration"})
    assert req.attrs["Resource_List"] == {"scratch": 10, "licence": "yes", "ratio": 0.5,
                                          "fast": True, "disk": "2gb", "budget": "00:01:00"}


def test_l_a_quoted_value_may_hold_commas():
    req = submit("-l", "software=\"a,b\",ncpus=1")
    assert req.attrs["Resource_List"] == {"software": "a,b", "ncpus": 1}


def test_l_later_on_the_command_line_wins():
    req = submit("-l", "ncpus=2,mem=1gb", "-l", "ncpus=4")
    assert req.attrs["Resource_List"] == {"ncpus": 4, "mem": "1gb"}


@pytest.mark.parametrize("value", ["walltime=1:00,", "=5", ",ncpus=1"])
def test_bad_l_syntax_prints_usage_and_exits_2(value):
    err = refused("-l", value)
    assert err.stderr == with_usage("qsub: illegal -l value")
    assert (err.code, err.status) == (PBSE_BADATVAL, 2)


def test_l_an_illegal_character_is_shown_with_a_caret():
    err = refused("-l", "foo=a&b")
    assert err.message == "qsub: illegal -l value\n illegal character:\nfoo=a&b\n     ^"
    assert err.stderr == with_usage(err.message)
    assert err.status == 2


def test_l_an_unclosed_quote_is_shown_with_a_caret():
    err = refused("-l", 'foo="abc')
    assert err.message == 'qsub: illegal -l value\n no closing quote:\nfoo="abc\n        ^'


@pytest.mark.parametrize("value,name", [
    ("walltime=abc", "walltime"), ("walltime=1:2:3:4", "walltime"), ("walltime=", "walltime"),
    ("mem=lots", "mem"), ("mem=1.5gb", "mem"), ("ncpus=two", "ncpus"),
    ("select=abc", "select"), ("select=2:ncpus=x", "select"), ("select=1:mem=big", "select"),
    ("place=everywhere", "place"), ("place=", "place"),
])
def test_a_bad_resource_value_is_pbse_badatval(value, name):
    err = refused("-l", value)
    assert err.message == f"qsub: Illegal attribute or resource value Resource_List.{name}"
    assert err.stderr == err.message            # no usage
    assert err.code == PBSE_BADATVAL == 15014
    assert err.status == 166                    # 15014 % 256, as the shell sees it
    assert err.usage is False


def test_a_badly_typed_custom_resource_is_refused():
    err = refused("-l", "scratch=lots", resource_types={"scratch": "long"})
    assert err.message == "qsub: Illegal attribute or resource value Resource_List.scratch"


# -- -o -e -j --------------------------------------------------------------------------------------

@pytest.mark.parametrize("given,stored", [
    ("out.txt", "login1:/work/out.txt"),
    ("logs/out.txt", "login1:/work/logs/out.txt"),
    ("/tmp/out.txt", "login1:/tmp/out.txt"),
    ("LOGIN1:/tmp/out.txt", "LOGIN1:/tmp/out.txt"),
    ("localhost:out.txt", "localhost:/home/alice/out.txt"),
])
def test_o_and_e_paths_become_host_and_absolute_path(given, stored):
    req = submit("-o", given, "-e", given)
    assert req.attrs["Output_Path"] == stored
    assert req.attrs["Error_Path"] == stored


@pytest.mark.parametrize("letter", ["o", "e"])
def test_o_and_e_without_a_path_are_refused(letter):
    err = refused(f"-{letter}", "node2:")
    assert err.stderr == with_usage(f"qsub: illegal -{letter} value")


@pytest.mark.parametrize("letter", ["o", "e"])
def test_o_and_e_on_another_host_are_refused(letter, monkeypatch):
    """The engine writes a job's files on this host (localhost, its names, qsub's host):
    a host that does not resolve is PBS's ``illegal -o value`` (exit 2, OpenPBS 23.06's
    qsub and qalter, checked); one that resolves, where PBS would copy the file, is
    refused in one line (exit 1)."""
    import socket

    def resolve(name, *args):
        if name != "node2.example.org":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.7", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    err = refused(f"-{letter}", "nosuchhost:/tmp/out.txt")
    assert (err.stderr, err.status) == (with_usage(f"qsub: illegal -{letter} value"), 2)
    err = refused(f"-{letter}", "node2.example.org:/tmp/out.txt")
    assert (err.stderr, err.status) == (
        f"qsub: -{letter} node2.example.org:/tmp/out.txt (another host: the engine writes "
        "a job's files on this host) is not supported by the pbsplug local engine", 1)


@pytest.mark.parametrize("value", ["oe", "eo", "n"])
def test_j_joins_the_streams(value):
    assert submit("-j", value).attrs["Join_Path"] == value


def test_j_with_a_bad_value_is_refused():
    assert refused("-j", "xy").stderr == with_usage("qsub: illegal -j value")


# -- -r -h -z --------------------------------------------------------------------------------------

def test_r_sets_rerunable():
    assert submit("-r", "n").attrs["Rerunable"] is False
    assert submit("-r", "y").attrs["Rerunable"] is True


@pytest.mark.parametrize("value", ["yes", "N", ""])
def test_r_with_a_bad_value_is_refused(value):
    err = refused("-r", value)
    assert err.stderr == with_usage("qsub: illegal -r value")
    assert err.status == 2


def test_h_holds_the_job():
    assert submit("-h").attrs["Hold_Types"] == "u"


def test_z_asks_for_no_job_id_and_flags_combine():
    req = submit("-hz")
    assert req.quiet is True and req.attrs["Hold_Types"] == "u"
    assert submit().quiet is False


# -- -v -V and Variable_List -----------------------------------------------------------------------

def test_variable_list_holds_the_pbs_o_variables():
    env = dict(ENV, TZ="Europe/Paris", MAIL="/var/mail/alice")
    req = submit(env=env, cwd="/home/alice/run", host="fe2")
    assert req.attrs["Variable_List"] == {
        "PBS_O_HOME": "/home/alice", "PBS_O_LANG": "C", "PBS_O_LOGNAME": "alice",
        "PBS_O_PATH": "/usr/bin:/bin", "PBS_O_MAIL": "/var/mail/alice",
        "PBS_O_SHELL": "/bin/bash", "PBS_O_TZ": "Europe/Paris",
        "PBS_O_WORKDIR": "/home/alice/run", "PBS_O_SYSTEM": "Linux", "PBS_O_HOST": "fe2",
    }
    assert req.attrs["Job_Owner"] == "alice@fe2"


def test_v_adds_variables_from_values_or_the_environment():
    req = submit("-v", "X=1,FOO,Z='a,b',PBS_O_HOST=fake")
    assert req.attrs["Variable_List"] == dict(BASE_VARS, X="1", FOO="bar", Z="a,b")


def test_v_a_quote_groups_and_an_unclosed_one_is_refused():
    assert submit("-v", "Z=\"a'b\"").attrs["Variable_List"]["Z"] == "a'b"
    err = refused("-v", "Z='a,b")
    assert err.message == "qsub: cannot send environment with the job"
    assert (err.code, err.status) == (PBSE_BADATVAL, 1)


def test_v_a_variable_missing_from_the_environment_is_refused():
    err = refused("-v", "NOT_SET")
    assert err.message == "qsub: cannot send environment with the job"
    assert (err.code, err.status) == (PBSE_BADATVAL, 1)


def test_V_sends_the_whole_environment_but_not_its_pbs_o_names():
    req = submit("-V", "-v", "X=1")
    expected = dict(BASE_VARS, X="1")
    expected.update({k: v for k, v in ENV.items() if not k.startswith("PBS_O_")})
    assert req.attrs["Variable_List"] == expected
    assert "PBS_O_OLD" not in req.attrs["Variable_List"]


def test_job_variables_without_home_or_system():
    out = job_variables({}, cwd="/w", host="h")
    assert out == {"PBS_O_HOME": "/", "PBS_O_WORKDIR": "/w",
                   "PBS_O_SYSTEM": os.uname().sysname, "PBS_O_HOST": "h"}


def test_server_variables():
    assert server_variables("workq", "login1") == {"PBS_O_QUEUE": "workq",
                                                   "PBS_O_HOST": "login1"}


# -- -W --------------------------------------------------------------------------------------------

def test_W_depend_afterok_completes_the_job_id_with_the_server():
    req = submit("-W", "depend=afterok:12", server="srv.example.com")
    assert req.attrs["depend"] == "afterok:12.srv.example.com"


def test_W_depend_keeps_ids_as_given_without_a_server():
    assert submit("-W", "depend=afterok:12").attrs["depend"] == "afterok:12"


def test_W_depend_several_types_and_ids():
    req = submit("-W", "depend=afterok:12:13.other,afterany:14[].srv,on:2", server="srv")
    assert req.attrs["depend"] == "afterok:12.srv:13.other,afterany:14[].srv,on:2"


def test_W_a_quoted_value_loses_its_quotes_and_an_unclosed_one_is_refused():
    assert submit("-W", "depend='afterok:12'").attrs["depend"] == "afterok:12"
    err = refused("-W", "depend='afterok:12")
    assert err.stderr == with_usage("qsub: illegal -W value")


@pytest.mark.parametrize("value", ["depend=later:12", "depend=afterok", "depend=afterok:",
                                   "depend=afterok:x y", "depend=on:two", "depend=afterok:abc"])
def test_W_a_bad_dependency_is_refused(value):
    err = refused("-W", value)
    assert err.stderr == with_usage("qsub: illegal -W value")
    assert err.status == 2


def test_W_block_waits_for_the_job():
    assert submit("-W", "block=true").block is True
    assert submit("-W", "block=TRUE").block is True
    assert submit("-W", "block=false").block is False
    assert "block" not in submit("-W", "block=true").attrs


def test_W_block_with_a_bad_value_is_refused():
    assert refused("-W", "block=maybe").stderr == with_usage("qsub: illegal -W value")


def test_W_other_attributes():
    req = submit("-W", "sandbox=O_WORKDIR,umask=027",
                 "-W", "run_count=2,release_nodes_on_stageout=True")
    attrs = req.attrs
    assert attrs["sandbox"] == "O_WORKDIR"
    assert attrs["umask"] == "027"
    assert attrs["run_count"] == 2
    assert attrs["release_nodes_on_stageout"] is True


@pytest.mark.parametrize("args,what", [
    (["-u", "bob"], "-u"), (["-W", "group_list=staff"], "-W group_list"),
    (["-W", "stagein=/tmp/in@host:/data/in"], "-W stagein"),
    (["-W", "stageout=/tmp/o@host:/data/o"], "-W stageout"),
    (["-W", "sandbox=PRIVATE"], "-W sandbox=PRIVATE")])
def test_options_the_engine_cannot_honour_are_refused_with_15029(args, what):
    err = refused(*args)
    assert err.code == 15029 and err.status == 1
    assert err.stderr.startswith(f"qsub: {what} ")
    assert "not supported by the pbsplug local engine" in err.stderr


@pytest.mark.parametrize("value", ["sandbox=nowhere", "umask=999", "run_count=x",
                                   "run_count=\u00b2", "run_count=\u0663",  # (a traceback)
                                   "depend=on:\u0663", "pwd=/tmp", "=x",
                                   "noequals", "x='unclosed"])
def test_W_bad_values_are_refused(value):
    assert refused("-W", value).stderr == with_usage("qsub: illegal -W value")


# -- -a --------------------------------------------------------------------------------------------

def test_a_sets_the_execution_time():
    req = submit("-a", "202612011200")
    assert req.attrs["Execution_Time"] == utc_epoch(2026, 12, 1, 12, 0)


@pytest.mark.parametrize("text,expected", [
    ("1030", (2026, 11, 23, 10, 30)),               # later today
    ("1000", (2026, 11, 24, 10, 0)),                # now has come: tomorrow
    ("0930", (2026, 11, 24, 9, 30)),                # passed today: tomorrow
    ("251000", (2026, 11, 25, 10, 0)),              # DDhhmm later this month
    ("220800", (2026, 12, 22, 8, 0)),               # day passed: next month
    ("12011200", (2026, 12, 1, 12, 0)),             # MMDDhhmm
    ("10011200", (2027, 10, 1, 12, 0)),             # month passed: next year
    ("2701011200", (2027, 1, 1, 12, 0)),            # YYMMDDhhmm
    ("6801011200", (2068, 1, 1, 12, 0)),            # YY below 69 is 20YY
    ("6901011200", (1969, 1, 1, 12, 0)),
    ("202701011200.30", (2027, 1, 1, 12, 0, 30)),   # CCYYMMDDhhmm.SS
    ("1030.05", (2026, 11, 23, 10, 30, 5)),
])
def test_cvtdate(text, expected):
    assert cvtdate(text, now=NOW) == utc_epoch(*expected)


@pytest.mark.parametrize("text", ["123", "10:00", "abcd", "2400", "1060", "13011200",
                                  "321000", "1000.6", "1000.60", "1000.xx", "12345"])
def test_cvtdate_refuses(text):
    with pytest.raises(ValueError):
        cvtdate(text, now=NOW)


def test_a_bad_a_value_prints_usage():
    err = refused("-a", "tomorrow")
    assert err.stderr == with_usage("qsub: illegal -a value")
    assert (err.code, err.status) == (PBSE_BADATVAL, 2)


# -- -A -P -k -m -M -p -S -u -c -R -----------------------------------------------------------------

def test_A_and_P():
    attrs = submit("-A", "acct42", "-P", "proj_x").attrs
    assert attrs["Account_Name"] == "acct42"
    assert attrs["project"] == "proj_x"


@pytest.mark.parametrize("value", ["a/b", "a:b", "a,b", ""])
def test_P_with_a_forbidden_character_is_refused(value):
    assert refused("-P", value).stderr == with_usage("qsub: illegal -P value")


@pytest.mark.parametrize("value", ["o", "e", "oe", "eo", "n", "od", "oed", "dn"])
def test_k_accepted(value):
    assert submit("-k", value).attrs["Keep_Files"] == value


@pytest.mark.parametrize("value", ["d", "x", "on", "oen"])
def test_k_refused(value):
    assert refused("-k", value).stderr == with_usage("qsub: illegal -k value")


@pytest.mark.parametrize("value", ["a", "b", "e", "abe", "n", "abej"])
def test_m_accepted(value):
    assert submit("-m", value).attrs["Mail_Points"] == value


@pytest.mark.parametrize("value", ["j", "x", "an", ""])
def test_m_refused(value):
    assert refused("-m", value).stderr == with_usage("qsub: illegal -m value")


def test_M_mail_users():
    assert submit("-M", "alice@example.com,bob").attrs["Mail_Users"] == "alice@example.com,bob"
    assert refused("-M", "a@").stderr == with_usage("qsub: illegal -M value")


@pytest.mark.parametrize("value,stored", [("-1024", -1024), ("1023", 1023), ("+5", 5),
                                          ("0", 0)])
def test_p_priority(value, stored):
    assert submit("-p", value).attrs["Priority"] == stored


@pytest.mark.parametrize("value", ["-1025", "1024", "high", "1.5"])
def test_p_out_of_range_is_refused(value):
    err = refused("-p", value)
    assert err.stderr == with_usage("qsub: illegal -p value")
    assert err.status == 2


def test_S():
    attrs = submit("-S", "/bin/sh,/bin/bash@node2").attrs
    assert attrs["Shell_Path_List"] == "/bin/sh,/bin/bash@node2"


@pytest.mark.parametrize("letter,value", [("S", "/bin/sh,/bin/bash"), ("S", "")])
def test_S_and_u_at_most_one_entry_per_host(letter, value):
    assert refused(f"-{letter}", value).stderr == with_usage(f"qsub: illegal -{letter} value")


def test_c_and_R():
    attrs = submit("-c", "c=10", "-R", "oe").attrs
    assert attrs["Checkpoint"] == "c=10" and attrs["Remove_Files"] == "oe"
    assert refused("-c", "u").stderr == with_usage("qsub: illegal -c value")
    assert refused("-c", "z").stderr == with_usage("qsub: illegal -c value")
    assert refused("-R", "x").stderr == with_usage("qsub: illegal -R value")


# -- -- command args -------------------------------------------------------------------------------

def test_a_command_job():
    req = submit("-N", "cmd", "--", "/bin/echo", "hi", "-N", "notanoption",
                 script="#PBS -N never_read\n")
    assert req.script is None
    assert req.argv == ["/bin/echo", "hi", "-N", "notanoption"]
    assert req.attrs["Job_Name"] == "cmd"
    assert req.attrs["Submit_arguments"] == "-N cmd -- /bin/echo hi -N notanoption"


def test_a_command_job_is_named_stdin():
    assert submit("--", "date").attrs["Job_Name"] == "STDIN"


def test_a_dash_dash_without_a_command_is_refused():
    err = refused("--")
    assert err.stderr == with_usage("qsub: a command must follow --")
    assert (err.code, err.status) == (PBSE_IVALREQ, 2)


def test_the_script_must_be_the_last_argument():
    err = refused("job.sh", "-N", "x")
    assert err.stderr == with_usage("qsub: the script (job.sh) must be the last argument")
    assert (err.code, err.status) == (PBSE_IVALREQ, 2)


# -- option syntax ---------------------------------------------------------------------------------

def test_an_unknown_option_prints_usage_and_exits_2():
    err = refused("-Y")
    assert err.stderr == with_usage("qsub: invalid option -- 'Y'")
    assert (err.code, err.status, err.usage) == (PBSE_IVALREQ, 2, True)
    assert PBSE_IVALREQ == 15004


def test_an_option_missing_its_argument():
    err = refused("-l", "ncpus=1", "-N")
    assert err.stderr == with_usage("qsub: option requires an argument -- 'N'")
    assert err.status == 2


# -- interactive jobs and arrays -------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["-I"], ["-W", "interactive=true"], ["-W", "interactive=True"]])
def test_an_interactive_job_reads_no_script(argv):
    """qsub -I's standard input is the job's terminal: no script is read from it."""
    def read_script() -> str:
        raise AssertionError("qsub -I read standard input")

    request = parse_qsub(argv, cwd="/home/u", env={}, user="u", host="h",
                         read_script=read_script)
    assert (request.interactive, request.script, request.argv) == (True, "", None)
    assert "interactive" not in request.attrs  # (the server sets it)


def test_interactive_false_is_a_batch_job():
    request = submit("-W", "interactive=false")
    assert "interactive" not in request.attrs and not request.interactive


@pytest.mark.parametrize(("value", "submitted", "max_run"), [
    ("1-10", "1-10", None), ("0-6:2%2", "0-6:2", 2), ("1-5:10", "1-5:10", None),
    ("1-3:2%1", "1-3:2", 1)])
def test_an_array_range_is_kept_as_pbs_keeps_it(value, submitted, max_run):
    attrs = submit("-J", value).attrs
    assert attrs["array_indices_submitted"] == submitted
    assert attrs.get("max_run_subjobs") == max_run


@pytest.mark.parametrize("value", ["5", "3-1", "1-1", "2-2%5", "1-10:0", "1-3,5", "a-b",
                                   "1-3:", "-1-3"])
def test_an_array_range_pbs_refuses_is_refused(value):
    err = refused("-J", value)
    assert err.stderr == with_usage("qsub: illegal -J value")
    assert err.status == 2


def test_an_array_must_be_rerunnable():
    err = refused("-J", "1-3", "-r", "n")
    assert err.stderr == with_usage("qsub:  cannot submit non-rerunable Array Job")
    assert err.status == 2


@pytest.mark.parametrize("argv", [["-X"], ["-I", "-X"]])
def test_x11_forwarding_is_refused(argv):
    err = refused(*argv)
    assert err.message == "qsub: -X (X11 forwarding) is not supported by the pbsplug local engine"
    assert (err.code, err.status) == (PBSE_NOSUP, 1)


def test_an_array_in_a_directive():
    attrs = submit(script="#PBS -J 1-4\necho\n").attrs
    assert attrs["array_indices_submitted"] == "1-4"


# -- script files ----------------------------------------------------------------------------------

def test_a_script_file_names_the_job(tmp_path):
    (tmp_path / "run.sh").write_text("#!/bin/sh\n#PBS -l ncpus=2\necho\n")
    req = submit("run.sh", cwd=str(tmp_path))
    assert req.script == "#!/bin/sh\n#PBS -l ncpus=2\necho\n"
    assert req.attrs["Job_Name"] == "run.sh"
    assert req.attrs["Resource_List"] == {"ncpus": 2}
    assert req.attrs["Variable_List"]["PBS_O_WORKDIR"] == str(tmp_path)
    assert submit(str(tmp_path / "run.sh"), cwd="/").attrs["Job_Name"] == "run.sh"


def test_a_missing_script_file(tmp_path):
    err = refused("nosuch.sh", cwd=str(tmp_path))
    assert err.message == "qsub: script file:: No such file or directory"
    assert err.stderr == err.message
    assert (err.code, err.status) == (PBSE_BADSCRIPT, 1)
    assert PBSE_BADSCRIPT == 15042


def test_a_script_that_is_a_directory(tmp_path):
    (tmp_path / "d").mkdir()
    err = refused("d", cwd=str(tmp_path))
    assert err.message == "qsub: script not a file"
    assert (err.code, err.status) == (PBSE_BADSCRIPT, 1)


def test_a_dash_reads_the_script_from_stdin():
    req = submit("-", script="#PBS -N dash\ntrue\n")
    assert req.attrs["Job_Name"] == "dash"


# -- directives ------------------------------------------------------------------------------------

SCRIPT = """#!/bin/bash
# a comment
  #PBS -N fromdir
#PBS -l walltime=00:10:00 -l \\
    ncpus=2
: colon line
#PBS -o 'my out.txt'

#PBS -W depend=afterok:5
echo start
#PBS -N after_the_first_command
"""


def test_directives_are_read_until_the_first_executable_line():
    assert directives(SCRIPT) == [" -N fromdir", " -l walltime=00:10:00 -l     ncpus=2",
                                  " -o 'my out.txt'", " -W depend=afterok:5"]
    req = submit(script=SCRIPT, server="srv")
    assert req.attrs["Job_Name"] == "fromdir"
    assert req.attrs["Resource_List"] == {"walltime": "00:10:00", "ncpus": 2}
    assert req.attrs["Output_Path"] == "login1:/work/my out.txt"
    assert req.attrs["depend"] == "afterok:5.srv"


@pytest.mark.parametrize("line,executable", [
    ("echo hi", True), ("  x=1", True), ("", False), ("   ", False), ("# comment", False),
    ("   # indented comment", False), ("#!/bin/sh", False), (": no-op", False),
    ("#PBS -N x", False),
])
def test_is_executable_line(line, executable):
    assert is_executable_line(line) is executable


def test_an_empty_prefix_reads_no_directives():
    assert directives("#PBS -N x\n", "") == []


def test_C_sets_the_directive_prefix():
    script = "#PBS -N ignored\n#XX -N used\necho\n"
    assert submit("-C", "#XX", script=script).attrs["Job_Name"] == "used"
    assert submit("-C", "", script=script).attrs["Job_Name"] == "STDIN"


def test_pbs_dprefix_sets_the_prefix_and_C_beats_it():
    script = "#PBS -N pbs\n#AA -N aa\n#BB -N bb\necho\n"
    env = dict(ENV, PBS_DPREFIX="#AA")
    assert submit(env=env, script=script).attrs["Job_Name"] == "aa"
    assert submit("-C", "#BB", env=env, script=script).attrs["Job_Name"] == "bb"


def test_C_in_a_directive_is_ignored():
    script = "#PBS -C #XX\n#PBS -N kept\n#XX -N never\necho\n"
    assert submit(script=script).attrs["Job_Name"] == "kept"


def test_precedence_command_line_then_directive_then_default():
    script = "#PBS -N dir\n#PBS -q dirq\n#PBS -m abe\n#PBS -p 10\necho\n"
    req = submit("-N", "cli", script=script,
                 default_args=["-N", "def", "-q", "defq", "-m", "n", "-p", "1", "-A", "defacct"])
    attrs = req.attrs
    assert attrs["Job_Name"] == "cli"          # command line beats all
    assert attrs["queue"] == "dirq"            # directive beats default
    assert attrs["Mail_Points"] == "abe"
    assert attrs["Priority"] == 10
    assert attrs["Account_Name"] == "defacct"  # default when nothing else names it


def test_the_last_directive_wins_for_an_ordinary_option():
    assert submit(script="#PBS -N one\n#PBS -N two\n").attrs["Job_Name"] == "two"


def test_l_merge_rule_across_levels():
    script = "#PBS -l walltime=10:00,ncpus=2\n#PBS -l ncpus=4,mem=1gb\necho\n"
    req = submit("-l", "walltime=20:00", script=script,
                 default_args=["-l", "ncpus=8,mem=8gb,vmem=2gb"])
    # The command line's walltime stands; the first directive to name ncpus wins over the
    # second; the second adds mem; the default adds only vmem, which nothing named.
    assert req.attrs["Resource_List"] == {"walltime": "00:20:00", "ncpus": 2, "mem": "1gb",
                                          "vmem": "2gb"}


def test_W_block_and_v_precedence():
    req = submit("-W", "block=false", "-v", "A=cli", script="#PBS -W block=true\n#PBS -v A=dir\n")
    assert req.block is False
    assert req.attrs["Variable_List"]["A"] == "cli"
    req = submit(script="#PBS -W block=true\n#PBS -V\n")
    assert req.block is True and req.attrs["Variable_List"]["FOO"] == "bar"


def test_directive_quotes_and_backslashes():
    req = submit(script='#PBS -N "quoted"\n#PBS -M a\\@b\n#PBS -o "x y"\n')
    assert req.attrs["Job_Name"] == "quoted"
    assert req.attrs["Mail_Users"] == "a@b"
    assert req.attrs["Output_Path"] == "login1:/work/x y"


def test_a_directive_option_error_names_the_directive_and_exits_1():
    err = refused(script="#PBS -N ok\n#PBS -r x\necho\n")
    assert err.stderr == "qsub: illegal -r value\nqsub: directive error: -r x"
    assert (err.code, err.status, err.usage) == (PBSE_BADATVAL, 1, False)


def test_an_unknown_option_in_a_directive():
    err = refused(script="#PBS -Y\n")
    assert err.stderr == "qsub: invalid option -- 'Y'\nqsub: directive error: -Y"
    assert (err.code, err.status) == (PBSE_IVALREQ, 1)


def test_an_operand_in_a_directive():
    err = refused(script="#PBS -N a b\n")
    assert err.stderr == "qsub: directive error: -N a b"
    assert err.status == 1


def test_a_dash_dash_in_a_directive():
    assert refused(script="#PBS -- /bin/true\n").stderr == "qsub: directive error: -- /bin/true"


def test_a_bad_l_in_a_directive():
    err = refused(script="#PBS -l walltime=1:00,\n")
    assert err.stderr == "qsub: illegal -l value\nqsub: directive error: -l walltime=1:00,"
    assert err.status == 1


def test_an_unmatched_quote_in_a_directive():
    err = refused(script="#PBS -N 'oops\n")
    assert err.message == "qsub: unmatched '"
    assert err.status == 1


def test_a_bad_value_from_a_directive_is_checked_in_pass_two():
    err = refused(script="#PBS -l walltime=bad\n")
    assert err.stderr == "qsub: Illegal attribute or resource value Resource_List.walltime"
    assert err.status == 166
    err = refused(script="#PBS -N bad/name\n")
    assert err.stderr == with_usage("qsub: illegal -N value")


def test_a_bad_default_qsub_argument():
    err = refused(default_args=["-Y"])
    assert err.message == "qsub: invalid option -- 'Y'\nqsub: illegal default_qsub_arguments"
    assert err.status == 1


# -- resource_value --------------------------------------------------------------------------------

@pytest.mark.parametrize("name,value,kind,expected", [
    ("walltime", "3600", None, "01:00:00"),
    ("walltime", 59, None, "00:00:59"),
    ("mem", " 16GB ", None, "16gb"),
    ("nice", "-5", None, -5),
    ("x", "T", "boolean", True),
    ("x", "0", "boolean", False),
    ("x", "2.5", "float", 2.5),
    ("select", "1:ncpus=2+2:ncpus=1:mem=1gb", None, "1:ncpus=2+2:ncpus=1:mem=1gb"),
    ("place", "pack:shared", None, "pack:shared"),
    ("custom", 42, None, "42"),
])
def test_resource_value(name, value, kind, expected):
    result = resource_value(name, value, kind)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize("name,value,kind", [
    ("ncpus", "1.5", None), ("x", "maybe", "boolean"), ("walltime", "", None),
    ("ncpus", "-1", None), ("mem", "99999999999999999999pb", None), ("nice", "20", None),
    ("walltime", "9" * 400, None), ("x", "inf", "float"), ("host", "a\x01b", None),
    ("mem", "4gib", None), ("select", "", None), ("x", "abc", "float"),
])
def test_resource_value_refuses(name, value, kind):
    with pytest.raises(ValueError):
        resource_value(name, value, kind)


def test_job_spec_error_text():
    err = JobSpecError("qsub: something", 15004, usage=True)
    assert str(err) == "something"
    assert err.stderr == f"qsub: something\n{USAGE}"
    assert err.status == 2


# -- random -l strings: the trial's 262 of 300 accepted ------------------------------------------
_l_names = st.sampled_from(sorted(values.RESOURCE_TYPES)) | st.from_regex(
    r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
_l_values = st.sampled_from(["1", "-1", "4gb", "01:00:00", "abc", "1:ncpus=2", "free",
                             "99999999999999999999999", "1.5", "t", "2:ncpus=1:bogus=1"]) | \
    st.text(alphabet="0123456789:abcgmkb.=-+", max_size=12)


@settings(max_examples=300, deadline=None)
@given(items=st.lists(st.tuples(_l_names, _l_values), min_size=1, max_size=3))
def test_random_l_strings_are_refused_unless_every_resource_is_defined_and_valid(items):
    """qsub then the server (no custom resources defined): a resource list is accepted only
    when every name is PBS's and every value fits its type; the rest get PBS's error."""
    spec = ",".join(f"{n}={v}" for n, v in items)
    try:
        request = submit("-l", spec)
    except jobspec.JobSpecError as err:
        assert err.code in (15014, 15004, 15035) and "\n" not in str(err)
        return
    try:
        stored = values.job_request(request.attrs, "user", {})
    except values.BadValue as err:
        assert err.code in (15014, 15035)
        return
    for name in stored.get("Resource_List", {}):
        assert name in values.RESOURCE_TYPES


@pytest.mark.parametrize("args", [("-p", "\u0663"), ("-a", "\u00b2\u00b2\u00b2\u00b2"),
                                  ("-l", "ncpus=\u0663"), ("-l", "walltime=\u0660\u0661:00"),
                                  ("-l", "mem=\u0663gb"), ("-l", "select=\u00b2:ncpus=1")])
def test_digits_of_other_scripts_are_not_numbers(args):
    """str.isdigit and re's \\d take ``²`` (which int() refuses: a traceback) and ``٣``
    (which int() reads as 3); PBS reads ASCII digits only."""
    err = refused(*args)
    assert err.status != 0 and "\n" not in err.stderr.split(USAGE)[0].strip()
