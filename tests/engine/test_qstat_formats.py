"""qstat's -F formats as OpenPBS 23.06 writes them (checked on the real one): json and dsv,
named in any case; dsv's delimiter (-D) and how a value holding it is written."""

from __future__ import annotations

import json

from pbsplug.engine import display


def _held(engine, *args: str) -> str:
    done = engine.pbs("qsub", "-h", *args, "--", "/bin/true")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_F_is_read_in_any_case(engine):
    job_id = _held(engine)
    for fmt in ("JSON", "Json"):
        done = engine.pbs("qstat", "-f", "-F", fmt, job_id)
        assert (done.returncode, done.stderr) == (0, ""), fmt
        assert list(json.loads(done.stdout)["Jobs"]) == [job_id]
    done = engine.pbs("qstat", "-f", "-F", "DSV", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"Job Id: {job_id}|Job_Name=STDIN|")


def test_F_dsv_writes_each_job_on_one_line_as_f_shows_it(engine):
    first = _held(engine, "-N", "first", "-v", "V1=a|b,V2=c\\,d")
    second = _held(engine, "-N", "second")
    done = engine.pbs("qstat", "-f", "-F", "dsv", first, second)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert [line.split("|", 1)[0] for line in lines] == [f"Job Id: {first}",
                                                          f"Job Id: {second}"]
    attrs = engine.client("stat_jobs", ids=[first])[first]
    fields = lines[0].split("|")
    assert "Job_Name=first" in fields and "job_state=H" in fields
    assert f"ctime={display.ctime(attrs['ctime'])}" in fields
    # the delimiter inside a value gets a backslash (Variable_List's V1=a|b)
    assert "V1=a\\|b,V2=c\\,d" in lines[0]


def test_F_dsv_D_delimiter(engine):
    job_id = _held(engine, "-v", "V2=c\\,d")
    done = engine.pbs("qstat", "-f", "-F", "dsv", "-D", ",", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    line = done.stdout.rstrip("\n")
    assert line.startswith(f"Job Id: {job_id},Job_Name=STDIN,")
    # Variable_List's own commas escaped, and the comma it escaped already: \\,
    assert ",Variable_List=PBS_O_HOME=" in line and "\\,V2=c\\\\,d" in line
    several = engine.pbs("qstat", "-f", "-F", "dsv", "-D", ";;", job_id).stdout
    assert several.startswith(f"Job Id: {job_id};;Job_Name=STDIN;;")


def test_D_takes_only_dsv(engine):
    job_id = _held(engine)
    for args in (("-D", "x"), ("-f", "-D", "|"), ("-f", "-F", "json", "-D", ",")):
        done = engine.pbs("qstat", *args, job_id)
        assert (done.returncode, done.stdout) == (2, ""), args
        assert done.stderr.splitlines()[-1] == "qstat --version", args  # (the usage)
    bad = engine.pbs("qstat", "-f", "-F", "xml", job_id)
    assert (bad.returncode, bad.stdout) == (2, "")


def test_Q_and_B_in_dsv(engine):
    queues = engine.pbs("qstat", "-Qf", "-F", "dsv", "workq")
    assert (queues.returncode, queues.stderr) == (0, "")
    assert queues.stdout.startswith("Queue: workq|queue_type=Execution|")
    assert queues.stdout.count("\n") == 1
    server = engine.pbs("qstat", "-Bf", "-F", "dsv", "-D", ",")
    name = engine.client("status")["server"]
    assert server.stdout.startswith(f"Server: {name},server_state=")
    assert server.stdout.count("\n") == 1
