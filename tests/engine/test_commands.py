"""PBS's commands end to end: each one run as a real process against a real local server,
with PBS's exact output, messages and exit statuses (an error's exit status is its PBS
error number modulo 256)."""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import time

import pytest

from .conftest import PBSPLUG, until

USER = pwd.getpwuid(os.getuid()).pw_name
#: A job the scheduler can never place: it stays queued (Q) for as long as a test needs.
UNPLACEABLE = ("-l", "select=1:ncpus=99999")

PBSE_UNKJOBID, PBSE_BADATVAL, PBSE_UNKQUE = 15001, 15014, 15018
PBSE_NORERUN, PBSE_UNKNODE, PBSE_HISTJOBID = 15038, 15062, 15139

TABLE_HEADER = ["Job id            Name             User              Time Use S Queue",
                "----------------  ---------------- ----------------  -------- - -----"]
HISTORY = "Job has finished, use -x or -H to obtain historical job information"


def qsub(engine, *args: str, input: str | None = None) -> str:
    """Submit with ``pbsplug qsub``; qsub prints the job id alone on its line."""
    done = engine.pbs("qsub", *args, input=input)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    job_id = done.stdout.strip()
    assert done.stdout == f"{job_id}\n"
    return job_id


def server_name(engine) -> str:
    return engine.client("status")["server"]


def seq(job_id: str) -> str:
    return job_id.split(".")[0]


def row(job_id: str, name: str, state: str, time_use: str = "0") -> str:
    """A qstat table row, without the trailing blanks of its last column."""
    seq_, _, server = job_id.partition(".")
    return (f"{seq_ + '.' + server.split('.')[0]:<17} {name:<16} {USER:<16}  {time_use:>8} "
            f"{state} workq")


def table(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def run_with_env(engine, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([PBSPLUG, *args], capture_output=True, text=True,
                          env=engine.env(**env), cwd=engine.work, timeout=120)


def a_vnode(engine) -> str:
    return sorted(engine.client("stat_nodes"))[0]


# -- qsub ---------------------------------------------------------------------------------------

def test_qsub_a_script_file_with_directives(engine):
    (engine.work / "job.sh").write_text(
        "#!/bin/sh\n#PBS -N dirjob\n#PBS -l walltime=00:05:00\n#PBS -j oe\n"
        "#PBS -o joined.txt\necho to-out\necho to-err >&2\n")
    job_id = qsub(engine, "job.sh")
    assert job_id == f"{seq(job_id)}.{server_name(engine)}"
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == 0
    assert attrs["Job_Name"] == "dirjob"
    assert attrs["Resource_List"]["walltime"] == "00:05:00"
    assert attrs["Join_Path"] == "oe"
    assert attrs["Output_Path"].endswith(f":{engine.work}/joined.txt")
    assert sorted((engine.work / "joined.txt").read_text().split()) == ["to-err", "to-out"]
    assert not (engine.work / f"dirjob.e{seq(job_id)}").exists()


def test_qsub_the_command_line_beats_a_directive(engine):
    (engine.work / "job.sh").write_text("#PBS -N fromdirective\ntrue\n")
    job_id = qsub(engine, "-N", "fromcmdline", "job.sh")
    assert engine.wait(job_id)["Job_Name"] == "fromcmdline"


def test_qsub_a_script_on_standard_input(engine):
    job_id = qsub(engine, input="echo from stdin $PBS_JOBNAME\n")
    assert engine.wait(job_id)["Exit_status"] == 0
    assert (engine.work / f"STDIN.o{seq(job_id)}").read_text() == "from stdin STDIN\n"


def test_qsub_a_command_and_its_arguments_after_double_dash(engine):
    job_id = qsub(engine, "-N", "cmd", "--", "/bin/echo", "one", "two  three")
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == 0
    assert attrs["Submit_arguments"] == "-N cmd -- /bin/echo one two  three"
    assert (engine.work / f"cmd.o{seq(job_id)}").read_text() == "one two  three\n"


def test_qsub_v_and_V_put_variables_in_the_jobs_environment(engine):
    show = 'echo "[$GIVEN] [$TAKEN] [$ONLY_WITH_V]"'
    with_v = run_with_env(engine, "qsub", "-N", "v", "-v", "GIVEN=a b,TAKEN", "--",
                          "/bin/sh", "-c", show, TAKEN="from-env", ONLY_WITH_V="whole")
    with_big_v = run_with_env(engine, "qsub", "-N", "bigv", "-V", "--", "/bin/sh", "-c",
                              show, TAKEN="t", ONLY_WITH_V="whole")
    for done in (with_v, with_big_v):
        assert (done.returncode, done.stderr) == (0, "")
    v_id, big_v_id = with_v.stdout.strip(), with_big_v.stdout.strip()
    engine.wait(v_id)
    engine.wait(big_v_id)
    assert (engine.work / f"v.o{seq(v_id)}").read_text() == "[a b] [from-env] []\n"
    assert (engine.work / f"bigv.o{seq(big_v_id)}").read_text() == "[] [t] [whole]\n"
    assert engine.job(v_id)["Variable_List"]["GIVEN"] == "a b"


def test_qsub_h_queues_the_job_held(engine):
    job_id = qsub(engine, "-h", input="true\n")
    time.sleep(0.3)  # a scheduling cycle ran after the submission: it must not start it
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["Hold_Types"]) == ("H", "u")
    done = engine.pbs("qstat", job_id)
    assert table(done.stdout) == TABLE_HEADER + [row(job_id, "STDIN", "H")]


def test_qsub_r_n_makes_the_job_not_rerunnable(engine):
    job_id = qsub(engine, "-r", "n", "-h", input="true\n")
    assert "    Rerunable = False\n" in engine.pbs("qstat", "-f", job_id).stdout
    default = qsub(engine, "-h", input="true\n")
    assert "    Rerunable = True\n" in engine.pbs("qstat", "-f", default).stdout


def test_qsub_to_an_unknown_queue(engine):
    done = engine.pbs("qsub", "-q", "nosuch", "--", "/bin/true")
    assert (done.returncode, done.stdout, done.stderr) == (
        PBSE_UNKQUE % 256, "", "qsub: Unknown queue\n")
    assert engine.client("stat_jobs", history=True) == {}


def test_qsub_bad_resource_values_and_syntax(engine):
    bad_value = engine.pbs("qsub", "-l", "walltime=ten", "--", "/bin/true")
    assert (bad_value.returncode, bad_value.stdout, bad_value.stderr) == (
        PBSE_BADATVAL % 256, "",
        "qsub: Illegal attribute or resource value Resource_List.walltime\n")
    bad_syntax = engine.pbs("qsub", "-l", "walltime=1:00,", "--", "/bin/true")
    assert bad_syntax.returncode == 2
    lines = bad_syntax.stderr.splitlines()
    assert lines[:2] == ["qsub: illegal -l value",
                         "usage: qsub [-a date_time] [-A account_string] [-c interval]"]
    assert engine.client("stat_jobs", history=True) == {}


@pytest.mark.parametrize("args, name", [
    # What OpenPBS 23.06 answered (status 5: its server's 15109, modulo 256):
    (("-l", "select=1:ncpus=4", "-l", "ncpus=1"), "ncpus"),
    (("-l", "ncpus=1", "-l", "select=1:ncpus=4"), "ncpus"),
    (("-l", "select=1:ncpus=1", "-l", "mem=1gb"), "mem"),
    (("-l", "select=1:ncpus=1", "-l", "arch=linux"), "arch"),
    (("-l", "select=1:ncpus=1,mpiprocs=1"), "mpiprocs"),
    (("-l", "place=scatter", "-l", "vntype=x"), "vntype"),
    (("-l", "select=1:ncpus=1", "-l", "rack=1"), "rack"),  # a custom one, flag h
])
def test_qsub_a_host_level_resource_beside_select_or_place_is_refused(engine, args, name):
    engine.client("qmgr", text="create resource rack type = string, flag = h")
    done = engine.pbs("qsub", *args, "--", "/bin/true")
    assert (done.returncode, done.stderr) == (5, 'qsub: "-lresource=" cannot be used with '
                                              f'"select" or "place", resource is: {name}\n')
    assert engine.client("stat_jobs", history=True) == {}


def test_qsub_and_qmove_past_a_queues_limits(engine):
    """OpenPBS 23.06's words and status (15036 modulo 256: 188), for qsub and a user's
    qmove; a converted job shows its select and place=pack, and its queue's default."""
    engine.client("qmgr", text="set queue workq resources_max.walltime = 01:00:00")
    engine.client("qmgr", text="set queue workq resources_default.mem = 20mb")
    done = engine.pbs("qsub", "-l", "walltime=2:00:00", "--", "/bin/true")
    assert (done.returncode, done.stdout, done.stderr) == (
        188, "", "qsub: Job violates queue and/or server resource limits\n")
    assert engine.client("stat_jobs", history=True) == {}
    job_id = qsub(engine, "-h", "-l", "ncpus=2", "-l", "walltime=0:50:00", input="true\n")
    full = engine.pbs("qstat", "-f", job_id).stdout
    for line in ("Resource_List.select = 1:mem=20mb:ncpus=2", "Resource_List.place = pack",
                 "Resource_List.mem = 20mb", "Resource_List.nodect = 1"):
        assert f"    {line}\n" in full, full
    engine.client("qmgr", text="create queue short queue_type = execution, enabled = true, "
                               "started = true, resources_max.walltime = 00:30:00")
    moved = engine.pbs("qmove", "short", job_id)  # root may move it past the limits
    assert moved.returncode == 0, moved.stderr
    assert "mem" not in engine.job(job_id)["Resource_List"]  # workq's default went
    engine.client("delete", ids=[job_id])


def test_qsub_job_wide_resources_beside_a_select_and_qalter_of_one(engine):
    """pmem, pvmem, file, cput, walltime and a custom resource without flag h are
    job-wide beside a select, as in OpenPBS 23.06; qalter adding ncpus is refused."""
    engine.client("qmgr", text="create resource licence type = long")
    job_id = qsub(engine, "-h", "-l", "select=1:ncpus=1", "-l", "pmem=1gb", "-l",
                  "file=1gb", "-l", "cput=10", "-l", "licence=2", input="true\n")
    done = engine.pbs("qalter", "-l", "ncpus=2", job_id)
    assert done.returncode == 5 and "resource is: ncpus" in done.stderr, done.stderr
    assert engine.pbs("qalter", "-l", "walltime=10:00", job_id).returncode == 0
    assert engine.job(job_id)["Resource_List"]["ncpus"] == 1  # the select's, not qalter's
    engine.client("delete", ids=[job_id])


def test_the_server_writes_a_selects_sums_as_openpbs_does(engine):
    """OpenPBS 23.06, checked: beside a select the server writes nodect and the chunks'
    sums (default_chunk's ncpus included); a qalter'd select's replace them (PBS leaves
    the old sum of a resource the new select does not name: pbsplug does not); a job
    without a select gets ncpus and nodect 1. A hook read Resource_List["ncpus"] as None."""
    job_id = qsub(engine, "-h", "-l", "select=2:ncpus=1:mem=10mb", input="true\n")
    res = engine.job(job_id)["Resource_List"]
    assert (res["ncpus"], res["mem"], res["nodect"]) == (2, "20mb", 2), res
    full = engine.pbs("qstat", "-f", job_id).stdout
    assert "    Resource_List.nodect = 2\n" in full and "    Resource_List.mem = 20mb\n" in full
    other = qsub(engine, "-h", "-l", "select=1:mem=5mb+2:ncpus=2:mpiprocs=3", input="true\n")
    res = engine.job(other)["Resource_List"]
    assert (res["ncpus"], res["mem"], res["mpiprocs"], res["nodect"]) == (5, "5mb", 6, 3)
    engine.pbs("qalter", "-l", "select=1:ncpus=3", other, check=True)
    res = engine.job(other)["Resource_List"]
    assert (res["ncpus"], res["nodect"], "mem" in res, "mpiprocs" in res) == (3, 1, False,
                                                                               False), res
    engine.client("qmgr", text="set server default_chunk.ncpus = 2")
    plain = qsub(engine, "-h", input="true\n")
    res = engine.job(plain)["Resource_List"]
    assert (res["ncpus"], res["nodect"]) == (2, 1), res
    engine.client("qmgr", text="create queue big queue_type = execution, enabled = true, "
                               "started = true, default_chunk.ncpus = 4")
    engine.pbs("qmove", "big", job_id, check=True)  # (its chunks take big's default now)
    res = engine.job(job_id)["Resource_List"]
    assert (res["ncpus"], res["mem"], res["nodect"]) == (2, "20mb", 2), res  # (it named them)
    moved = qsub(engine, "-h", "-l", "select=3:mem=1mb", input="true\n")
    assert engine.job(moved)["Resource_List"]["ncpus"] == 6  # (the server's default: 2)
    engine.pbs("qmove", "big", moved, check=True)
    assert engine.job(moved)["Resource_List"]["ncpus"] == 12
    engine.client("delete", ids=[job_id, other, plain, moved])


def test_qsub_a_script_that_does_not_exist(engine):
    done = engine.pbs("qsub", "no-such-script.sh")
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", "qsub: script file:: No such file or directory\n")


def test_qsub_z_prints_no_job_id(engine):
    done = engine.pbs("qsub", "-z", input="true\n")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    jobs = engine.client("stat_jobs", history=True)
    assert len(jobs) == 1
    engine.wait(next(iter(jobs)))


def test_qsub_W_block_true_waits_and_exits_with_the_jobs_exit_status(engine):
    failed = engine.pbs("qsub", "-W", "block=true", "--", "/bin/sh", "-c", "sleep 1; exit 3")
    job_id = failed.stdout.strip()
    assert (failed.returncode, failed.stdout, failed.stderr) == (3, f"{job_id}\n", "")
    assert engine.job(job_id)["job_state"] == "F"  # it returned once the job was over
    ok = engine.pbs("qsub", "-W", "block=true", input="true\n")
    assert (ok.returncode, ok.stderr) == (0, "")


def test_qsub_W_depend_afterok_holds_the_job_until_its_parent_succeeds(engine):
    parent = qsub(engine, "-h", "--", "/bin/true")
    # A bare sequence number is completed with the server's name, as PBS's qsub does.
    child = qsub(engine, "-W", f"depend=afterok:{seq(parent)}", "--", "/bin/true")
    full = engine.pbs("qstat", "-f", child).stdout
    assert f"    depend = afterok:{parent}\n" in full
    time.sleep(0.3)
    assert engine.job(child)["job_state"] == "H"
    assert engine.pbs("qrls", parent).returncode == 0
    assert engine.wait(parent)["Exit_status"] == 0
    assert engine.wait(child)["Exit_status"] == 0


def test_qsub_W_run_count_is_kept_and_counts_on(engine):
    """OpenPBS 23.06 (checked): ``qsub -W run_count=3`` gives the job run_count 3, and 4
    once it has run; 25 does not hold a job that starts (only failed starts count).
    pbsplug set 0 whatever was asked."""
    job_id = qsub(engine, "-h", "-W", "run_count=3", "--", "/bin/true")
    assert "    run_count = 3\n" in engine.pbs("qstat", "-f", job_id).stdout
    assert engine.pbs("qrls", job_id).returncode == 0
    assert engine.wait(job_id)["run_count"] == 4
    many = qsub(engine, "-W", "run_count=25", "--", "/bin/true")
    attrs = engine.wait(many)
    assert (attrs["run_count"], attrs["Exit_status"], attrs["Hold_Types"]) == (26, 0, "n")
    bad = engine.pbs("qsub", "-W", "run_count=-1", "--", "/bin/true")
    assert (bad.returncode, bad.stderr.splitlines()[0]) == (2, "qsub: illegal -W value")


# -- qstat --------------------------------------------------------------------------------------

def test_every_command_prints_its_version_alone_as_pbs_does():
    """PBS's commands each take ``--version`` alone and print ``pbs_version = X``: scripts
    read the version that way. The usage texts named it; the commands refused it."""
    from pbsplug import __version__
    from pbsplug.cli.pbs import COMMANDS

    for name in sorted(COMMANDS):
        done = subprocess.run([PBSPLUG, name, "--version"], capture_output=True, text=True,
                              timeout=120)
        assert (done.returncode, done.stdout, done.stderr) == (
            0, f"pbs_version = {__version__}\n", ""), name


def test_qstat_table_of_a_queued_job(engine):
    job_id = qsub(engine, *UNPLACEABLE, "-N", "waiting", input="true\n")
    done = engine.pbs("qstat")
    assert (done.returncode, done.stderr) == (0, "")
    assert table(done.stdout) == TABLE_HEADER + [row(job_id, "waiting", "Q")]
    assert table(engine.pbs("qstat", job_id).stdout) == table(done.stdout)


def test_qstat_prints_nothing_without_jobs(engine):
    done = engine.pbs("qstat")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_qstat_f(engine):
    job_id = qsub(engine, *UNPLACEABLE, "-N", "full", input="true\n")
    done = engine.pbs("qstat", "-f", job_id)
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == f"Job Id: {job_id}"
    for expected in ("    Job_Name = full", f"    Job_Owner = {USER}@", "    job_state = Q",
                     "    queue = workq", "    Hold_Types = n", "    Join_Path = n",
                     "    Resource_List.select = 1:ncpus=99999", "    Rerunable = True",
                     f"    Output_Path = {server_name(engine)}:{engine.work}/full.o"):
        assert any(line.startswith(expected) for line in lines), expected
    assert done.stdout.endswith("\n\n")  # a blank line after each job


def test_qstat_x_shows_a_finished_job(engine):
    job_id = qsub(engine, input="exit 5\n")
    engine.wait(job_id)
    done = engine.pbs("qstat", "-x", job_id)
    assert done.returncode == 0
    lines = table(done.stdout)
    assert lines[:2] == TABLE_HEADER
    assert lines[2] == row(job_id, "STDIN", "F", "00:00:00")
    full = engine.pbs("qstat", "-x", "-f", job_id).stdout
    assert "    job_state = F\n" in full and "    Exit_status = 5\n" in full
    assert table(engine.pbs("qstat", "-x").stdout)[2] == lines[2]
    assert engine.pbs("qstat").stdout == ""  # without -x a finished job is not listed


def test_qstat_of_a_finished_job_without_x(engine):
    job_id = qsub(engine, input="true\n")
    engine.wait(job_id)
    done = engine.pbs("qstat", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (
        PBSE_HISTJOBID % 256, "", f"qstat: {job_id} {HISTORY}\n")


def test_qstat_F_json(engine):
    job_id = qsub(engine, *UNPLACEABLE, "-N", "js", input="true\n")
    done = engine.pbs("qstat", "-f", "-F", "json")
    assert done.returncode == 0
    doc = json.loads(done.stdout)
    assert set(doc) == {"timestamp", "pbs_version", "pbs_server", "Jobs"}
    assert doc["pbs_server"] == server_name(engine)
    assert abs(doc["timestamp"] - time.time()) < 60
    job = doc["Jobs"][job_id]
    assert (job["Job_Name"], job["job_state"], job["queue"]) == ("js", "Q", "workq")
    assert job["Resource_List"] == {"select": "1:ncpus=99999", "ncpus": 99999, "nodect": 1,
                                   "place": "free"}  # (as OpenPBS writes a select job's)
    assert job["Rerunable"] == "True"
    assert job["Variable_List"]["PBS_O_WORKDIR"] == str(engine.work)
    assert json.loads(engine.pbs("qstat", "-f", "-F", "json", job_id).stdout)["Jobs"].keys() \
        == {job_id}


@pytest.mark.parametrize("args", [("-F", "json"), ("-F", "dsv"), ("-x", "-F", "json"),
                                  ("-Q", "-F", "json"), ("-B", "-F", "json"),
                                  ("-F", "JSON", "99999")])
def test_qstat_F_wants_f_beside_it(cli, args):
    """As OpenPBS 23.06's qstat (checked): -F without -f is ``conflicting options.`` and
    the usage, exit 2, before any job or queue is asked for."""
    done = cli("qstat", *args)
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", f"qstat: conflicting options.\n{USAGES['qstat']}\n")


def test_qstat_Q(engine):
    qsub(engine, *UNPLACEABLE, input="true\n")
    qsub(engine, "-h", input="true\n")
    done = engine.pbs("qstat", "-Q")
    assert (done.returncode, done.stderr) == (0, "")
    assert table(done.stdout) == [
        "Queue              Max   Tot Ena Str   Que   Run   Hld   Wat   Trn   Ext Type",
        "---------------- ----- ----- --- --- ----- ----- ----- ----- ----- ----- ----",
        "workq                0     2 yes yes     1     0     1     0     0     0 Exe*"]


def test_qstat_Q_f(engine):
    qsub(engine, *UNPLACEABLE, input="true\n")
    done = engine.pbs("qstat", "-Q", "-f")
    assert done.returncode == 0
    assert done.stdout == (
        "Queue: workq\n"
        "    queue_type = Execution\n"
        "    total_jobs = 1\n"
        "    state_count = Transit:0 Queued:1 Held:0 Waiting:0 Running:0 Exiting:0 Begun\n"
        "\t:0\n"
        "    enabled = True\n"
        "    started = True\n\n")


def test_qstat_B(engine):
    qsub(engine, *UNPLACEABLE, input="true\n")
    done = engine.pbs("qstat", "-B")
    assert done.returncode == 0
    lines = table(done.stdout)
    assert lines[:2] == [
        "Server             Max   Tot   Que   Run   Hld   Wat   Trn   Ext Status",
        "---------------- ----- ----- ----- ----- ----- ----- ----- ----- -----------"]
    assert len(lines) == 3
    assert lines[2].split()[:3] == [server_name(engine), "0", "1"]
    assert lines[2].split()[-1] == "Active"


def test_qstat_B_counts_the_jobs_by_state(engine):
    qsub(engine, *UNPLACEABLE, input="true\n")
    qsub(engine, "-h", input="true\n")
    line = table(engine.pbs("qstat", "-B").stdout)[2]
    assert line.split()[1:9] == ["0", "2", "1", "0", "1", "0", "0", "0"]
    assert ("    state_count = Transit:0 Queued:1 Held:1 Waiting:0 Running:0 Exiting:0 "
            in engine.pbs("qstat", "-B", "-f").stdout)


def test_qstat_B_f(engine):
    done = engine.pbs("qstat", "-B", "-f")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    name = server_name(engine)
    assert lines[0] == f"Server: {name}"
    for expected in ("    server_state = Active", f"    server_host = {name}",
                     "    scheduling = True", "    total_jobs = 0",
                     "    default_queue = workq"):
        assert expected in lines, expected
    assert done.stdout.endswith("\n\n")


def test_qstat_of_an_unknown_job(engine):
    name = server_name(engine)
    done = engine.pbs("qstat", "99")
    assert (done.returncode, done.stdout, done.stderr) == (
        PBSE_UNKJOBID % 256, "", f"qstat: Unknown Job Id 99.{name}\n")
    # The jobs it knows are still shown; without the header, which PBS's qstat prints
    # with the first id's answer (OpenPBS 23.06, checked: test_pbs_qstat_parity.py).
    job_id = qsub(engine, *UNPLACEABLE, input="true\n")
    mixed = engine.pbs("qstat", "98", job_id)
    assert mixed.returncode == PBSE_UNKJOBID % 256
    assert mixed.stderr == f"qstat: Unknown Job Id 98.{name}\n"
    assert table(mixed.stdout) == [row(job_id, "STDIN", "Q")]
    assert table(engine.pbs("qstat", job_id, "98").stdout) == TABLE_HEADER + [
        row(job_id, "STDIN", "Q")]


# -- qdel ---------------------------------------------------------------------------------------

def test_qdel_a_running_and_a_queued_job(engine):
    running = qsub(engine, input="sleep 30\n")
    queued = qsub(engine, *UNPLACEABLE, input="true\n")
    engine.wait(running, "R")
    done = engine.pbs("qdel", running, queued)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    for job_id in (running, queued):
        attrs = engine.wait(job_id, timeout=20)
        assert attrs["comment"].startswith(f"Job deleted at request of {USER}@")
    assert engine.job(running)["Exit_status"] == 256 + 15  # killed by SIGTERM
    assert "Exit_status" not in engine.job(queued)  # it never ran


def test_qdel_W_force(engine):
    job_id = qsub(engine, input="sleep 30\n")
    engine.wait(job_id, "R")
    done = engine.pbs("qdel", "-W", "force", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    attrs = engine.wait(job_id, timeout=20)
    assert attrs["comment"].startswith(f"Job deleted at request of {USER}@")
    assert attrs["Exit_status"] == 256 + 15


def test_qdel_of_an_unknown_job(engine):
    job_id = qsub(engine, *UNPLACEABLE, input="true\n")
    done = engine.pbs("qdel", "99", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (  # (the id as given, as PBS's)
        PBSE_UNKJOBID % 256, "", "qdel: Unknown Job Id 99\n")
    assert engine.wait(job_id, timeout=10)["job_state"] == "F"  # the known one went


# -- qhold / qrls -------------------------------------------------------------------------------

def test_qhold_and_qrls_of_a_queued_job(engine):
    job_id = qsub(engine, *UNPLACEABLE, input="true\n")
    held = engine.pbs("qhold", "-h", "u", job_id)
    assert (held.returncode, held.stdout, held.stderr) == (0, "", "")
    assert table(engine.pbs("qstat", job_id).stdout)[2] == row(job_id, "STDIN", "H")
    assert engine.job(job_id)["Hold_Types"] == "u"
    released = engine.pbs("qrls", "-h", "u", job_id)
    assert (released.returncode, released.stdout, released.stderr) == (0, "", "")
    assert table(engine.pbs("qstat", job_id).stdout)[2] == row(job_id, "STDIN", "Q")
    assert engine.job(job_id)["Hold_Types"] == "n"


def test_qrls_lets_a_held_job_run(engine):
    job_id = qsub(engine, "-h", input="echo released\n")
    assert engine.pbs("qrls", job_id).returncode == 0
    assert engine.wait(job_id)["Exit_status"] == 0
    assert (engine.work / f"STDIN.o{seq(job_id)}").read_text() == "released\n"


def test_qhold_of_a_running_job_holds_it_should_it_be_requeued(engine):
    """OpenPBS 23.06, checked: qhold of a running job is accepted; it runs on with the hold,
    commented ``Job held by root on Sat Dec  5 02:16:59 2026``; qrls takes the hold and the
    comment away; held and requeued (qrerun), it is H. pbsplug refused it (15018 state)."""
    job_id = qsub(engine, input="sleep 300\n")
    engine.wait(job_id, "R")
    assert engine.pbs("qhold", job_id).returncode == 0
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["Hold_Types"]) == ("R", "u"), attrs
    assert re.fullmatch(r"Job held by root on \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}",
                        attrs["comment"]), attrs["comment"]
    assert engine.pbs("qrls", job_id).returncode == 0
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["Hold_Types"], "comment" in attrs) == ("R", "n", False)
    engine.pbs("qhold", job_id, check=True)
    engine.pbs("qrerun", job_id, check=True)
    until(lambda: engine.job(job_id)["job_state"] == "H", what="the held job requeued")
    assert engine.job(job_id)["Hold_Types"] == "u"
    engine.client("delete", ids=[job_id])


def test_a_qrls_that_leaves_no_hold_clears_any_comment(engine_here):
    """OpenPBS 23.06, checked: qrls clears the comment when no hold is left, whatever it
    says (an operator's, a running job's ``Job run at``) and whether the job was held or
    not; a qrls that leaves a hold keeps it. pbsplug cleared only ``Job held by``."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    eng = engine_here()
    root = Caller(0, ROLE_MANAGER)
    held = eng.req_submit(root, {"Hold_Types": "uo"}, "true\n")
    free = eng.req_submit(root, {"Hold_Types": "n"}, "true\n")
    eng.req_qmgr(root, "set server scheduling = false")
    for job_id in (held, free):
        eng.req_alter(root, job_id, {"comment": "hello"})
    eng.req_release(root, [held], "u")
    assert eng.store.job(held)["comment"] == "hello"  # (o is left)
    for job_id, types in ((held, "o"), (free, "u")):
        eng.req_release(root, [job_id], types)
        assert "comment" not in eng.store.job(job_id), job_id
    assert eng.store.job(held)["Hold_Types"] == "n"


def test_a_qhold_or_qrls_that_changes_nothing_writes_nothing(engine_here):
    """A qhold of holds the job has, or a qrls of holds it has not (with no comment to
    clear), succeeds and writes nothing: no transaction, no mtime. OpenPBS 23.06 saves the
    job only when its holds change. Each request used to rewrite the job. Each is logged
    as PBS's server logs it, changed or not (checked): ``Holds ou set at request of
    root@host``, the letters as given; it was ``Job modified`` for a change only."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    ticks = iter(range(1_000_000_000, 2_000_000_000, 10))  # (a later mtime at each write)
    eng = engine_here(clock=lambda: next(ticks))
    root = Caller(0, ROLE_MANAGER)
    held = eng.req_submit(root, {"Hold_Types": "uo"}, "true\n")
    free = eng.req_submit(root, {"Hold_Types": "n"}, "true\n")
    with eng.store.transaction() as st:  # (a release of `s` gave a job 20 tries again)
        st.put_job(free, {**eng.store.job(free), "run_count": 3})
    stored = {job_id: eng.store.job(job_id) for job_id in (held, free)}
    changes = eng.store.db.total_changes
    logged = "".join(p.read_text() for p in eng.log.dir.iterdir())
    answers = (eng.req_hold(root, [held], "u") + eng.req_hold(root, [held], "ou") +
               eng.req_release(root, [free], "u") + eng.req_release(root, [free], "s") +
               eng.req_release(root, [held], "s"))
    assert all("error" not in answer for answer in answers), answers
    assert eng.store.db.total_changes == changes
    assert {job_id: eng.store.job(job_id) for job_id in (held, free)} == stored

    def logged_since() -> list[tuple[str, str]]:
        text = "".join(p.read_text() for p in eng.log.dir.iterdir())
        assert text.startswith(logged)
        return [tuple(line.split(";", 5)[4:]) for line in text[len(logged):].splitlines()]

    by = f"at request of root@{eng.host}"
    assert logged_since() == [
        (held, f"Holds u set {by}"), (held, f"Holds ou set {by}"),
        (free, f"Holds u released {by}"), (free, f"Holds s released {by}"),
        (held, f"Holds s released {by}")]
    eng.req_hold(root, [free], "u")  # a change is written, with its mtime
    assert eng.store.db.total_changes > changes
    after = eng.store.job(free)
    assert (after["Hold_Types"], after["job_state"]) == ("u", "H")
    assert after["mtime"] > stored[free]["mtime"]
    assert logged_since()[-1] == (free, f"Holds u set {by}")


def test_qhold_and_qrls_of_an_unknown_job(engine):
    name = server_name(engine)
    for command in ("qhold", "qrls"):
        done = engine.pbs(command, "99")
        assert (done.returncode, done.stderr) == (
            PBSE_UNKJOBID % 256, f"{command}: Unknown Job Id 99.{name}\n")


# -- qrerun -------------------------------------------------------------------------------------

def test_qrerun_requeues_a_running_job_which_runs_again(engine):
    job_id = qsub(engine, input="sleep 30\n")
    assert engine.wait(job_id, "R")["run_count"] == 1
    done = engine.pbs("qrerun", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    attrs = until(lambda: (a := engine.job(job_id))["run_count"] == 2 and a,
                  what="the job to run a second time")
    assert attrs["job_state"] in "QR"
    assert "    run_count = 2\n" in engine.pbs("qstat", "-f", job_id).stdout
    engine.pbs("qdel", "-W", "force", job_id, check=True)
    engine.wait(job_id)


def test_qrerun_refuses_a_job_that_is_not_rerunnable(engine):
    job_id = qsub(engine, "-r", "n", input="sleep 30\n")
    engine.wait(job_id, "R")
    done = engine.pbs("qrerun", job_id)
    assert done.returncode != 0
    assert done.stderr.startswith("qrerun: ") and done.stderr.endswith(f" {job_id}\n")
    time.sleep(0.3)
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["run_count"]) == ("R", 1)
    engine.pbs("qdel", job_id, check=True)
    engine.wait(job_id)


def test_qrerun_not_rerunnable_exit_status_is_pbse_norerun(engine):
    job_id = qsub(engine, "-r", "n", input="sleep 30\n")
    engine.wait(job_id, "R")
    try:
        assert engine.pbs("qrerun", job_id).returncode == PBSE_NORERUN % 256
    finally:
        engine.pbs("qdel", job_id)


def test_qrerun_of_an_unknown_job(engine):
    done = engine.pbs("qrerun", "99")
    assert (done.returncode, done.stderr) == (
        PBSE_UNKJOBID % 256, f"qrerun: Unknown Job Id 99.{server_name(engine)}\n")


#: A job whose first run waits to be ended and whose later runs end at once.
ONCE_THEN_DONE = ('if [ -e "$PBS_O_WORKDIR/ran.$PBS_JOBID" ]; then exit 0; fi; '
                  'touch "$PBS_O_WORKDIR/ran.$PBS_JOBID"; sleep 300')


def test_one_qrerun_requeues_the_job_once(engine):
    """The qrerun's reason went with the job into its next run, whose normal end then
    requeued it again, and so on for ever: a qrerun job ran again and again. It runs once
    more, the command it was submitted with (`qsub --`), and ends."""
    job_id = qsub(engine, "--", "/bin/sh", "-c", ONCE_THEN_DONE)
    engine.wait(job_id, "R")
    engine.pbs("qrerun", job_id, check=True)
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2)
    assert "Job requeued at request of an operator (qrerun)" in engine.log()
    assert engine.log().count("Job requeued at request of an operator") == 1


def test_a_job_held_while_running_then_qrerun_is_held_and_runs_once_released(engine):
    """Held (o) while it runs, then rerun: it is H, and stays so; released, it runs once
    and ends (a second requeue from the qrerun's kept reason made it loop)."""
    job_id = qsub(engine, "--", "/bin/sh", "-c", ONCE_THEN_DONE)
    engine.wait(job_id, "R")
    engine.pbs("qhold", "-h", "o", job_id, check=True)
    engine.pbs("qrerun", job_id, check=True)
    attrs = engine.wait(job_id, "H")
    assert (attrs["Hold_Types"], attrs["run_count"], attrs["substate"]) == ("o", 1, 20)
    engine.pbs("qrls", "-h", "o", job_id, check=True)
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2)


# -- qrun ---------------------------------------------------------------------------------------

def test_qrun_H_runs_a_held_job_on_that_vnode(engine):
    vnode = a_vnode(engine)
    job_id = qsub(engine, "-h", input="echo ran\n")
    done = engine.pbs("qrun", "-H", vnode, job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == 0 and attrs["run_count"] == 1
    assert attrs["exec_vnode"].startswith(f"({vnode}")
    assert (engine.work / f"STDIN.o{seq(job_id)}").read_text() == "ran\n"


def test_qrun_runs_a_held_job_where_the_scheduler_would(engine):
    job_id = qsub(engine, "-h", input="true\n")
    done = engine.pbs("qrun", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    assert engine.wait(job_id)["Exit_status"] == 0


def test_qrun_runs_a_waiting_job_which_keeps_its_execution_time(engine):
    """qrun of a W job (qsub -a in the future) was `Request invalid for state of job`;
    PBS's qrun runs it, and leaves its Execution_Time as it was."""
    later = time.strftime("%Y%m%d%H%M", time.localtime(time.time() + 30 * 86400))
    job_id = qsub(engine, "-a", later, input="true\n")
    waiting = engine.job(job_id)
    assert (waiting["job_state"], waiting["substate"]) == ("W", 30)
    done = engine.pbs("qrun", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 1)
    assert attrs["Execution_Time"] == waiting["Execution_Time"]


def test_a_held_or_waiting_job_qrun_then_qrerun_is_held_or_waiting_again(engine):
    """As OpenPBS 23.06 (checked): qrun leaves the job's holds and Execution_Time, and the
    requeue puts it back in the state they make."""
    later = time.strftime("%Y%m%d%H%M", time.localtime(time.time() + 30 * 86400))
    held = qsub(engine, "-h", input="sleep 300\n")
    waiting = qsub(engine, "-a", later, input="sleep 300\n")
    for job_id, state, substate in ((held, "H", 20), (waiting, "W", 30)):
        engine.pbs("qrun", job_id, check=True)
        engine.wait(job_id, "R")
        engine.pbs("qrerun", job_id, check=True)
        attrs = engine.wait(job_id, state)
        assert (attrs["substate"], attrs["run_count"]) == (substate, 1)
    assert engine.job(held)["Hold_Types"] == "u"
    engine.pbs("qdel", held, waiting, check=True)


def test_qrun_refuses_a_running_job(engine):
    job_id = qsub(engine, input="sleep 300\n")
    engine.wait(job_id, "R")
    done = engine.pbs("qrun", job_id)
    assert (done.returncode, done.stderr) == (
        2, f"qrun: Request invalid for state of job {job_id}\n")
    engine.pbs("qdel", job_id, check=True)


def test_qrun_H_an_unknown_vnode(engine):
    """As OpenPBS 23.06's qrun prints it: the -H specification, not the job."""
    job_id = qsub(engine, "-h", input="true\n")
    for spec in ("nosuchvnode", f"{a_vnode(engine)}+nosuchvnode", "(nosuchvnode:ncpus=1)"):
        done = engine.pbs("qrun", "-H", spec, job_id)
        assert (done.returncode, done.stdout, done.stderr) == (  # (PBS's qrun exits 2)
            2, "", f"qrun: Unknown node  {spec}\n")
    assert engine.job(job_id)["job_state"] == "H"


@pytest.mark.parametrize("select, spec, chunks", [
    ("1:ncpus=1", "{v}", ["{v}:ncpus=1"]),
    ("2:ncpus=1", "{v}", ["{v}:ncpus=1", "{v}:ncpus=1"]),       # back to the first
    ("1:ncpus=1", "{v}+{v}", ["{v}:ncpus=1"]),                   # one more than needed
    ("1:ncpus=2:mem=10mb", "({v})", ["{v}:ncpus=2:mem=10mb"]),
    ("1:ncpus=1", "{v}/0", ["{v}:ncpus=1"]),                     # exec_host's form
    ("1:ncpus=1", "({v}:ncpus=2)", ["{v}:ncpus=2"]),             # as written
    ("1:ncpus=1", "{v}:ncpus=2", ["{v}:ncpus=2"]),               # PBS's own form
    ("1:ncpus=1", " {v} ", ["{v}:ncpus=1"]),
    ("3:ncpus=1", "{v}+other", ["{v}:ncpus=1", "other:ncpus=1", "{v}:ncpus=1"]),  # in turn
    ("1:ncpus=1:host={h}", "{v}", ["{v}:ncpus=1"]),             # what to match is not kept
])
def test_qrun_H_gives_vnodes_named_alone_the_jobs_chunks(engine, select, spec, chunks):
    """As OpenPBS 23.06 does: vnodes without resources get the job's chunks in turn, so the
    job's cpus are assigned there (and nothing else is put on them)."""
    vnode = a_vnode(engine)
    engine.client("qmgr", text=f"set node {vnode} resources_available.ncpus = 4")
    engine.client("qmgr", text="create node other resources_available.ncpus = 4")
    host = engine.client("stat_nodes", names=[vnode])[vnode]["resources_available"]["host"]
    job_id = qsub(engine, "-h", "-l", f"select={select.format(h=host)}", input="sleep 300\n")
    done = engine.pbs("qrun", "-H", spec.format(v=vnode), job_id)
    assert (done.returncode, done.stderr) == (0, "")
    attrs = engine.wait(job_id, "R")
    shown = [c.format(v=vnode) for c in chunks]
    assert attrs["exec_vnode"] == "+".join(f"({c})" for c in shown)
    nodes = engine.client("stat_nodes", names=[vnode, "other"])
    for name in (vnode, "other"):
        ncpus = sum(int(c.split("ncpus=")[1].split(":")[0]) for c in shown
                    if c.split(":")[0] == name)
        assert nodes[name]["resources_assigned"].get("ncpus", 0) == ncpus, name
    engine.client("delete", ids=[job_id])


@pytest.mark.parametrize("spec", ["(:ncpus=1)", "{v}:ncpus=x", "{v}:ncpus=1:=2", "+", "()",
                                  "({v}:ncpus=2 )", "{v}:ncpus= 2", "( {v} )"])
def test_qrun_H_a_bad_specification_is_refused_and_the_job_stays(engine, spec):
    """A space inside is refused too: ``ncpus=2 `` would run the job with no cpus counted."""
    job_id = qsub(engine, "-h", input="true\n")
    done = engine.pbs("qrun", "-H", spec.format(v=a_vnode(engine)), job_id)
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", f"qrun: Illegal attribute or resource value {job_id}\n")
    assert engine.job(job_id)["job_state"] == "H" and "exec_vnode" not in engine.job(job_id)


def test_qrun_H_an_empty_specification_or_a_huge_mapping_is_refused(engine):
    """An empty -H is qrun's usage error (exit 1, as OpenPBS 23.06's: checked), blanks an
    invalid request (15004). Vnodes named alone for a select of 100,000 chunks would make
    an exec_vnode past the 1 MiB a value may hold: refused before it is made (15014)."""
    job_id = qsub(engine, "-h", input="true\n")
    done = engine.pbs("qrun", "-H", "", job_id)
    assert (done.returncode, done.stderr.splitlines()[0]) == (
        1, "qrun: illegal -H value: the vnode specification is empty")
    done = engine.pbs("qrun", "-H", "  ", job_id)
    assert (done.returncode, done.stderr) == (2, f"qrun: Invalid request {job_id}\n")
    # `-H -`: where the job ran before; it never ran
    done = engine.pbs("qrun", "-H", "-", job_id)
    assert (done.returncode, done.stderr) == (2, f"qrun: Invalid request {job_id}\n")
    wide = qsub(engine, "-h", "-l", "select=100000:ncpus=1:mem=1mb", input="true\n")
    done = engine.pbs("qrun", "-H", a_vnode(engine), wide)
    assert (done.returncode, done.stderr) == (
        2, f"qrun: Illegal attribute or resource value {wide}\n")
    assert "exec_vnode" not in engine.job(wide) and "exec_vnode" not in engine.job(job_id)


def test_qrun_of_an_unknown_job(engine):
    """OpenPBS 23.06's qrun exits 2 on every error its server answers (checked)."""
    done = engine.pbs("qrun", "99")
    assert (done.returncode, done.stderr) == (
        2, f"qrun: Unknown Job Id 99.{server_name(engine)}\n")


# -- qalter -------------------------------------------------------------------------------------

def test_qalter_name_and_walltime(engine):
    job_id = qsub(engine, *UNPLACEABLE, "-N", "before", input="true\n")
    done = engine.pbs("qalter", "-N", "after", "-l", "walltime=1:30:00", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    full = engine.pbs("qstat", "-f", job_id).stdout
    assert "    Job_Name = after\n" in full
    assert "    Resource_List.walltime = 01:30:00\n" in full
    assert "    Resource_List.select = 1:ncpus=99999\n" in full  # the others stay


def test_qalter_h_holds_a_queued_job(engine):
    job_id = qsub(engine, *UNPLACEABLE, input="true\n")
    assert engine.pbs("qalter", "-h", "u", job_id).returncode == 0
    assert engine.job(job_id)["Hold_Types"] == "u"
    assert table(engine.pbs("qstat", job_id).stdout)[2] == row(job_id, "STDIN", "H")


def test_qalter_of_an_unknown_job(engine):
    done = engine.pbs("qalter", "-N", "x", "99")
    assert (done.returncode, done.stderr) == (
        PBSE_UNKJOBID % 256, f"qalter: Unknown Job Id 99.{server_name(engine)}\n")



def test_qalter_which_error_comes_first(engine):
    """OpenPBS 23.06's order (checked: tests/adapters/test_pbs_job_parity): an unknown job
    before a resource the server does not know; a finished job before it too; a value
    that is no value (checked before asking) for the first job id alone, after the
    arguments that are no job id."""
    host = server_name(engine)
    done = engine.pbs("qalter", "-l", "nosuchres=1", "99", "98")
    assert (done.returncode, done.stderr) == (
        PBSE_UNKJOBID % 256, f"qalter: Unknown Job Id 99.{host}\nqalter: Unknown Job Id "
        f"98.{host}\n")
    finished = qsub(engine, input="true\n")
    engine.wait(finished)
    done = engine.pbs("qalter", "-l", "nosuchres=1", finished)
    assert (done.returncode, done.stderr) == (35, f"qalter: Job has finished {finished}\n")
    done = engine.pbs("qalter", "-l", "walltime=abc", "abc", "99", "98")
    assert (done.returncode, done.stderr) == (
        166, "qalter: illegally formed job identifier: abc\nqalter: Illegal attribute or "
        f"resource value Resource_List.walltime 99.{host}\n")
    done = engine.pbs("qalter", "-l", "walltime=abc", "abc")
    assert (done.returncode, done.stderr) == (
        1, "qalter: illegally formed job identifier: abc\n")


@pytest.mark.parametrize("command, status", [("qalter", 153), ("qhold", 153),
                                             ("qrls", 153), ("qrun", 2), ("qrerun", 153)])
def test_an_argument_that_is_no_job_id_is_said_in_its_place(engine, command, status):
    """As OpenPBS 23.06's commands (checked): its line, and on to the next id; the exit
    status is the last error's (qrun's 2 for any server error)."""
    host = server_name(engine)
    args = ["-N", "x"] if command == "qalter" else []
    done = engine.pbs(command, *args, "abc", "99")
    assert (done.returncode, done.stderr) == (
        status, f"{command}: illegally formed job identifier: abc\n"
        f"{command}: Unknown Job Id 99.{host}\n")
    done = engine.pbs(command, *args, "99", "abc")
    assert done.returncode == 1 and done.stderr.splitlines()[1] == (
        f"{command}: illegally formed job identifier: abc")


# -- pbsnodes -----------------------------------------------------------------------------------

def test_pbsnodes_a(engine):
    done = engine.pbs("pbsnodes", "-a")
    assert (done.returncode, done.stderr) == (0, "")
    nodes = engine.client("stat_nodes")
    blocks = done.stdout.split("\n\n")
    assert [b.splitlines()[0] for b in blocks if b] == list(nodes)
    vnode = next(iter(nodes))
    lines = blocks[0].splitlines()
    assert lines[1:5] == [f"     Mom = {nodes[vnode]['Mom']}", "     ntype = PBS",
                          "     state = free",
                          f"     pcpus = {nodes[vnode]['pcpus']}"]
    ncpus = nodes[vnode]["resources_available"]["ncpus"]
    assert f"     resources_available.ncpus = {ncpus}" in lines


def test_pbsnodes_F_json(engine):
    done = engine.pbs("pbsnodes", "-a", "-F", "json")
    assert done.returncode == 0
    doc = json.loads(done.stdout)
    assert set(doc) == {"timestamp", "pbs_version", "pbs_server", "nodes"}
    assert doc["pbs_server"] == server_name(engine)
    nodes = engine.client("stat_nodes")
    assert doc["nodes"].keys() == nodes.keys()
    vnode = next(iter(nodes))
    assert doc["nodes"][vnode]["state"] == "free"
    assert doc["nodes"][vnode]["resources_available"]["ncpus"] == (
        nodes[vnode]["resources_available"]["ncpus"])


def test_pbsnodes_o_r_and_C(engine):
    vnode = a_vnode(engine)

    def show() -> list[str]:
        return engine.pbs("pbsnodes", vnode).stdout.splitlines()

    offline = engine.pbs("pbsnodes", "-o", vnode)
    assert (offline.returncode, offline.stdout, offline.stderr) == (0, "", "")
    assert "     state = offline" in show()
    # An offline vnode gets no job.
    job_id = qsub(engine, "-l", f"select=1:vnode={vnode}", input="true\n")
    time.sleep(0.3)
    assert engine.job(job_id)["job_state"] == "Q"
    cleared = engine.pbs("pbsnodes", "-r", vnode)
    assert (cleared.returncode, cleared.stdout, cleared.stderr) == (0, "", "")
    assert engine.wait(job_id)["Exit_status"] == 0  # it may run there now
    assert "     state = free" in show()
    comment = engine.pbs("pbsnodes", "-C", "under repair", vnode)
    assert (comment.returncode, comment.stdout, comment.stderr) == (0, "", "")
    assert "     comment = under repair" in show()
    # An empty comment unsets it, as OpenPBS 23.06's pbsnodes -C "" does (checked): no
    # `comment = ` line is left.
    cleared = engine.pbs("pbsnodes", "-C", "", vnode)
    assert (cleared.returncode, cleared.stdout, cleared.stderr) == (0, "", "")
    assert not [line for line in show() if line.strip().startswith("comment")]
    assert "comment" not in engine.client("stat_nodes", names=[vnode])[vnode]


def test_pbsnodes_unknown_node(engine):
    """OpenPBS 23.06's words and exit status 1 (checked: tests/adapters/test_pbs_job_parity)."""
    for args, text in ((("nosuch",), "Node: nosuch,  Error: Unknown node \n"),
                       (("-o", "nosuch"), "Error marking node nosuch - Unknown node \n"),
                       (("-C", "x", "nosuch"), "Error marking node nosuch - Unknown node \n")):
        done = engine.pbs("pbsnodes", *args)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", text), args


# -- bad options --------------------------------------------------------------------------------

USAGES = {
    # (OpenPBS 23.06's, checked, with the options the engine's has not)
    "qstat": "usage: \nqstat [-f] [-J] [-p] [-t] [-x] [-E] [-F format | -w] [-D delim] "
             "[ job_identifier... | destination... ]\n"
             "qstat [-a|-i|-r|-H|-T] [-J] [-t] [-u user] [-n] [-s] [-G|-M] [-1] [-w]\n"
             "\t[ job_identifier... | destination... ]\n"
             "qstat -Q [-f] [-F format] [-D delim] [ destination... ]\n"
             "qstat -q [-G|-M] [ destination... ]\n"
             "qstat -B [-f] [-F format] [-D delim] [ server_name... ]\n"
             "qstat --version",
    # (OpenPBS 23.06's, checked: -x purges the history)
    "qdel": "usage:\n\tqdel [-W force|suppress_email=X] [-x] job_identifier...\n"
            "\tqdel --version",
    "qhold": "usage: qhold [-h hold_list] job_identifier...",
    "qrls": "usage: qrls [-h hold_list] job_identifier...",
    "qrerun": "usage: qrerun [-W force] job_identifier...",
    "qrun": "usage: qrun [-a] [-H vnode_specification | -H -] job_identifier...",
    "qalter": "usage: qalter [-a date_time] [-A account_string] [-c interval] [-e path] "
              "[-h hold_list] [-j oe|eo|n] [-k keep] [-l resource_list] [-m mail_options] "
              "[-M user_list] [-N name] [-o path] [-p priority] [-P project] [-r y|n] "
              "[-R o|e|oe] [-S path] [-u user_list] [-W additional_attributes] "
              "job_identifier...",
    "pbsnodes": "usage: pbsnodes [-a] [-v] [-S [-j] [-L]] [-H] [-F json|dsv [-D delimiter]] "
                "[-o|-r] [-C comment] [node...]\n       pbsnodes [-v] -l",
    "qmove": "usage: qmove destination job_identifier...",
}


@pytest.mark.parametrize("command", sorted(USAGES))
def test_a_bad_option_prints_the_usage_and_exits_2(cli, command):
    """(pbsnodes and qrun exit 1, as OpenPBS 23.06's do: checked)"""
    done = cli(command, "-Z", "1.host")
    assert (done.returncode, done.stdout, done.stderr) == (
        1 if command in ("pbsnodes", "qrun") else 2, "",
        f"{command}: invalid option -- 'Z'\n{USAGES[command]}\n")


def test_qsub_bad_option_prints_the_usage_and_exits_2(cli):
    done = cli("qsub", "-Z", "script.sh")
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[:2] == ["qsub: invalid option -- 'Z'",
                         "usage: qsub [-a date_time] [-A account_string] [-c interval]"]
    assert lines[-1] == "       qsub --version"


@pytest.mark.parametrize("command, args, letter", [
    ("qstat", ["-F"], "F"), ("qdel", ["-W"], "W"), ("qrun", ["-H"], "H"),
    ("qalter", ["-N"], "N"), ("pbsnodes", ["-C"], "C")])
def test_an_option_without_its_argument(cli, command, args, letter):
    done = cli(command, *args)
    assert (done.returncode, done.stderr) == (
        1 if command in ("pbsnodes", "qrun") else 2,
        f"{command}: option requires an argument -- '{letter}'\n{USAGES[command]}\n")


@pytest.mark.parametrize("command", ["qdel", "qhold", "qrls", "qrerun", "qrun", "qalter"])
def test_a_missing_job_id_prints_the_usage_and_exits_2(cli, command):
    """(qrun exits 1, as OpenPBS 23.06's does: checked)"""
    done = cli(command)
    assert done.returncode == (1 if command == "qrun" else 2)
    assert done.stderr.endswith(f"\n{USAGES[command]}\n")


def test_a_custom_string_resource_holding_digits_is_no_amount_on_the_vnode(engine):
    """``rack=1`` names a rack: jobs asking for it share the vnode, and the vnode's
    resources_assigned counts no rack (it counted one unit per job, and a second job waited
    for the first)."""
    vnode = a_vnode(engine)
    engine.client("qmgr", text="create resource rack type = string, flag = h")
    engine.client("qmgr", text=f"set node {vnode} resources_available.ncpus = 4")
    engine.client("qmgr", text=f"set node {vnode} resources_available.rack = 1")
    ids = [qsub(engine, "-l", "select=1:ncpus=1:rack=1", input="sleep 300\n")
           for _ in range(2)]
    for job_id in ids:
        assert engine.wait(job_id, "R")["exec_vnode"] == f"({vnode}:ncpus=1)"  # (matched)
    assigned = engine.client("stat_nodes", names=[vnode])[vnode]["resources_assigned"]
    assert assigned.get("ncpus") == 2 and "rack" not in assigned, assigned
    engine.client("delete", ids=ids)


def test_a_custom_host_resource_asked_job_wide_goes_in_the_jobs_chunk(engine):
    """PBS's conversion puts a custom resource with flag h in the job's one chunk: the
    engine's scheduler left ``-l scratch=5gb`` job-wide, and the job ran on a vnode with no
    scratch. Now it waits for a vnode that has enough; qrun -H runs it there all the same
    (PBS's qrun -H places the chunks as told), its chunk with its scratch and its layout
    (mpiprocs) left out, as the scheduler's exec_vnode. The scheduler's exec_vnode and
    resources_assigned show sizes in kilobytes, qrun -H's as the job wrote them, as
    OpenPBS 23.06 does (checked)."""
    vnode = a_vnode(engine)
    engine.client("qmgr", text="create resource scratch type = size, flag = nh")
    engine.client("qmgr", text=f"set node {vnode} resources_available.scratch = 1gb")
    big = qsub(engine, "-l", "scratch=5gb", "-l", "mpiprocs=2", input="sleep 300\n")
    small = qsub(engine, "-l", "scratch=512mb", input="sleep 300\n")
    assert engine.wait(small, "R")["exec_vnode"] == f"({vnode}:ncpus=1:scratch=524288kb)"
    assigned = engine.client("stat_nodes", names=[vnode])[vnode]["resources_assigned"]
    assert assigned["scratch"] == "524288kb"  # (a size in kilobytes, as PBS shows it)
    until(lambda: "Can Never Run" in engine.job(big).get("comment", ""),
          what="the job too big for every vnode")
    assert engine.job(big)["job_state"] == "Q"
    engine.pbs("qrun", "-H", vnode, big, check=True)
    assert engine.wait(big, "R")["exec_vnode"] == f"({vnode}:ncpus=1:scratch=5gb)"
    engine.client("delete", ids=[big, small])


# --- numbers of thousands of digits ---------------------------------------------------------

#: More digits than int() reads (4300: it raises ValueError, in Python's words).
HUGE = "9" * 5000


@pytest.fixture(scope="module")
def huge_engine():
    """One server for every command of `HUGE_ARGS`: a held job, a held array, a
    reservation and a node ({job}, {array}, {number}, {resv} in the arguments)."""
    from pbsplug.engine.testing import LocalEngine, make_root, remove_root

    root = make_root()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    engine = LocalEngine(root, env={**env, "PBS_TZID": "UTC"}).start()  # (for pbs_rsub -r)
    engine.pbs("qmgr", "-c", "set server scheduling = false", check=True)
    engine.pbs("qmgr", "-c", "create node fz1 resources_available.ncpus = 2", check=True)
    engine.pbs("qmgr", "-c", "create resource fzsize type = size", check=True)
    names = {"job": engine.submit(Hold_Types="u"),
             "array": engine.pbs("qsub", "-h", "-J", "1-3", "--", "/bin/true",
                                 check=True).stdout.strip(),
             "resv": engine.pbs("pbs_rsub", "-R", "2100", "-D", "60",
                                check=True).stdout.split()[0]}
    names["number"] = names["job"].split(".")[0]
    yield engine, names
    engine.stop()
    remove_root(root)


#: Each command and option given a number of `HUGE` digits ({n}), and, for those that
#: printed Python's traceback, the first line of the error they print for any other bad value.
HUGE_ARGS = [
    (("qsub", "-p", "{n}", "--", "/bin/true"), "qsub: illegal -p value"),
    (("qsub", "-p", "-{n}", "--", "/bin/true"), "qsub: illegal -p value"),
    (("qsub", "-p", "+{n}", "--", "/bin/true"), "qsub: illegal -p value"),
    (("qsub", "-W", "run_count={n}", "--", "/bin/true"),
     "qsub: Illegal attribute or resource value run_count"),
    (("qalter", "-p", "{n}", "{job}"), "qalter: illegal -p value"),
    (("qalter", "-p", "-{n}", "{job}"), "qalter: illegal -p value"),
    (("qalter", "-W", "run_count={n}", "{job}"),
     "qalter: Illegal attribute or resource value run_count {job}"),
    (("pbs_ralter", "-I", "{n}", "{resv}"),
     "pbs_ralter: Illegal attribute or resource value interactive"),
    (("pbs_ralter", "-I", "-{n}", "{resv}"),
     "pbs_ralter: Illegal attribute or resource value interactive"),
    # (a digit int() refuses: the rule's error, not 'Invalid request: invalid literal')
    (("pbs_rsub", "-R", "2100", "-D", "60", "-r", "FREQ=DAILY;COUNT=\u00b2"),
     "pbs_rsub: Undefined iCalendar syntax"),
    (("pbs_rsub", "-R", "2100", "-D", "60", "-r", "FREQ=DAILY;INTERVAL=\u00b9;COUNT=2"),
     "pbs_rsub: Undefined iCalendar syntax"),
    (("pbs_rsub", "-R", "2100", "-D", "60", "-r", "FREQ=DAILY;COUNT={n}"), None),
    (("qmgr", "-c", "set server max_run_res_soft.mem = [u:PBS_GENERIC={n}gb]"), None),
    (("qmgr", "-c", "set server max_run_res.fzsize = [u:PBS_GENERIC={n}]"), None),
    *[(("qsub", *args, "--", "/bin/true"), None) for args in (
        ("-a", "{n}"), ("-c", "c={n}"), ("-J", "1-{n}"), ("-J", "1-3:{n}"),
        ("-J", "1-3%{n}"),
        ("-W", "depend=afterok:{n}"), ("-W", "depend=afterok:{job}:{n}"),
        ("-W", "max_run_subjobs={n}", "-J", "1-3"), ("-W", "umask={n}"),
        ("-l", "walltime={n}"),
        ("-l", "walltime={n}:00"), ("-l", "walltime=1:{n}"), ("-l", "ncpus={n}"),
        ("-l", "mem={n}gb"), ("-l", "select={n}:ncpus=1"), ("-l", "select=1:ncpus={n}"),
        ("-l", "select=1:mem={n}kb"), ("-l", "nodes={n}"), ("-l", "nodes=1:ppn={n}"),
        ("-l", "fzsize={n}gb"))],
    *[(("qalter", *args, "{job}"), None) for args in (
        ("-a", "{n}"), ("-c", "c={n}"), ("-W", "depend=afterok:{n}"), ("-l", "walltime={n}"),
        ("-l", "select={n}:ncpus=1"), ("-l", "nodes=1:ppn={n}"))],
    (("qalter", "-W", "max_run_subjobs={n}", "{array}"), None),
    *[((command, *args), None) for command in ("qstat", "qhold", "qrls", "qdel")
      for args in (("{n}",), ("{number}[{n}]",), ("{number}[1-{n}]",),
                   ("{number}[1-3:{n}]",))],
    *[(("qselect", *args), None) for args in (
        ("-p", "gt.{n}"), ("-a", "gt.{n}"), ("-t", "gt.{n}"), ("-l", "ncpus.gt.{n}"),
        ("-l", "walltime.gt.{n}:00"), ("-l", "mem.gt.{n}gb"))],
    *[(("pbs_rsub", *args), None) for args in (
        ("-R", "{n}", "-D", "60"), ("-R", "2100", "-D", "{n}"), ("-R", "2100", "-E", "{n}"),
        ("-R", "2100", "-D", "60", "-l", "select={n}:ncpus=1"),
        ("-R", "2100", "-D", "60", "-I", "{n}"))],
    *[(("pbs_ralter", *args, "{resv}"), None) for args in (
        ("-R", "{n}"), ("-E", "{n}"), ("-D", "{n}"), ("-l", "select={n}:ncpus=1"))],
    (("pbs_rstat", "R{n}"), None), (("pbs_rdel", "R{n}"), None),
    (("qsig", "-s", "{n}", "{job}"), None), (("qrun", "-H", "(fz1:ncpus={n})", "{job}"), None),
    (("qdel", "-W", "+{n}", "{job}"), None), (("tracejob", "-n", "{n}", "{job}"), None),
    *[(("qmgr", "-c", line), None) for line in (
        "set server scheduler_iteration = {n}", "set server max_run = [u:PBS_GENERIC={n}]",
        "set server resources_default.walltime = {n}:00", "set server resources_max.mem = {n}gb",
        "set queue workq Priority = {n}", "set node fz1 resources_available.ncpus = {n}",
        "set sched sched_cycle_length = {n}")],
]


@pytest.mark.parametrize("digits", [HUGE, "0" * 5000 + "7"], ids=["nines", "zeros"])
@pytest.mark.parametrize("argv, first", HUGE_ARGS, ids=lambda a: " ".join(a)[:60]
                         if isinstance(a, tuple) else None)
def test_a_number_of_thousands_of_digits_is_each_commands_own_error(huge_engine, argv, first,
                                                                     digits):
    """Where a command took a value's digits to int(), 5000 of them printed Python's
    traceback (``qsub -p``, ``-W run_count``, ``pbs_ralter -I``) or put its text in the
    server's answer (a qmgr limit of a size): each is now the error that command prints
    for any other bad value of that field, and no command says Python's words. 5000 zeros
    and a 7 too: int() counts the zeros, and values.past did not (-l mem, select, nodes)."""
    engine, names = huge_engine
    done = engine.pbs(*(a.format(n=digits, **names) for a in argv))
    said = done.stdout + done.stderr
    assert "Traceback" not in said and "Exceeds the limit" not in said, argv
    assert "4300" not in said and "int_max_str_digits" not in said, argv
    assert "invalid literal" not in said, argv
    if first is not None:
        assert done.returncode != 0, argv
        assert done.stderr.splitlines()[0] == first.format(**names), (argv, done.stderr[:300])
