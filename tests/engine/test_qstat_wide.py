"""qstat -w: PBS's wide table, and -f without wrapping, as OpenPBS 23.06 prints them (checked
on the real one, with long job names and attribute values)."""

from __future__ import annotations

import os
import pwd

from pbsplug.engine import display

USER = pwd.getpwuid(os.getuid()).pw_name
#: What PBS's qstat -w printed (the header, and the columns' widths: a job id of 30, then
#: Name, User and Queue of 15).
WIDE_HEADER = [
    "Job id                         Name            User             Time Use S Queue",
    "-----------------------------  --------------- ---------------  -------- - "
    "---------------",
]


def _held(engine, name: str) -> str:
    done = engine.pbs("qsub", "-h", "-N", name, "--", "/bin/true")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_qstat_w_prints_the_wide_table(engine):
    # 14 characters fit; 15 and more are cut to 14 and '*', as PBS's -w cuts them
    names = ["abcdefghijklmn", "abcdefghijklmno", "abcdefghijklmnopqrstuvwxyz0123456789"]
    ids = [_held(engine, name) for name in names]
    done = engine.pbs("qstat", "-w", *ids)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[:2] == WIDE_HEADER
    shown = ["abcdefghijklmn ", "abcdefghijklmn*", "abcdefghijklmn*"]
    assert lines[2:] == [f"{job_id:<30} {name} {USER:<15}         0 H workq          "
                         for job_id, name in zip(ids, shown, strict=True)]
    assert all(len(line) == 90 for line in lines[1:])
    # without -w, the usual table: 15 characters fit, 16 and more are cut to 15 and '*'
    plain = engine.pbs("qstat", *ids).stdout.splitlines()
    assert [line[18:34] for line in plain[2:]] == [
        "abcdefghijklmn  ", "abcdefghijklmno ", "abcdefghijklmno*"]


def test_qstat_fw_prints_each_attribute_on_one_line(engine):
    name = "n" * 120
    job_id = _held(engine, name)
    wrapped = engine.pbs("qstat", "-f", job_id).stdout
    assert f"    Job_Name = {name}\n" not in wrapped and "\n\t" in wrapped
    done = engine.pbs("qstat", "-fw", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    assert f"    Job_Name = {name}\n" in done.stdout
    assert "\n\t" not in done.stdout
    # the same attributes as -f, unwrapped
    assert done.stdout.splitlines()[0] == f"Job Id: {job_id}"
    assert [line.split(" = ")[0] for line in done.stdout.splitlines() if " = " in line] == [
        line.split(" = ")[0] for line in wrapped.splitlines() if line.startswith("    ")]


def test_qstat_w_with_F_is_refused_as_pbs_refuses_it(engine):
    job_id = _held(engine, "x")
    done = engine.pbs("qstat", "-f", "-w", "-F", "json", job_id)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[0] == "qstat: option w cannot be used with -F"


def test_the_wide_table_of_a_job_id_longer_than_its_column():
    jobs = {"123456789012345678901234567890123.host": {
        "Job_Name": "j", "Job_Owner": "averyveryverylongusername@host", "job_state": "Q",
        "queue": "workq"}}
    row = display.qstat_table(jobs, wide=True).splitlines()[2]
    assert row.startswith("12345678901234567890123456789* j               "
                          "averyveryveryl* ")
