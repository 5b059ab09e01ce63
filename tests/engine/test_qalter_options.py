"""qalter's options beside -N, -l and -h, each read and checked as qsub reads and checks
it, with OpenPBS 23.06's qalter's answers (checked on the real one)."""

from __future__ import annotations

import pytest

#: Options qalter shares with qsub, and a value of each.
SHARED = [("-o", "/tmp/out.txt"), ("-e", "rel/err"), ("-a", "202701011200"),
          ("-A", "acct"), ("-j", "oe"), ("-k", "doe"), ("-m", "abe"),
          ("-M", "a@b.c,x@y"), ("-p", "-5"), ("-P", "proj"), ("-r", "n"),
          ("-S", "/bin/sh@vm,/bin/bash@other"), ("-c", "c=5"), ("-R", "oe"),
          ("-W", "umask=027")]


def _held(engine, *args: str) -> str:
    done = engine.pbs("qsub", "-h", *args, "--", "/bin/true")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("option, value", SHARED)
def test_qalter_sets_what_qsub_sets_for_the_same_option(engine, option, value):
    submitted = _held(engine, option, value)
    altered = _held(engine)
    done = engine.pbs("qalter", option, value, altered)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), (option, value)
    want, got = engine.job(submitted), engine.job(altered)
    changed = {k for k in set(want) | set(got) if want.get(k) != got.get(k)} - {
        "ctime", "qtime", "mtime", "Submit_arguments", "Output_Path", "Error_Path",
        "queue_rank", "etime"}
    assert changed == set(), (option, value, {k: (want.get(k), got.get(k)) for k in changed})
    if option in ("-o", "-e"):
        key = "Output_Path" if option == "-o" else "Error_Path"
        assert got[key] == want[key]


def test_qalter_W_depend(engine):
    parent = _held(engine)
    job_id = _held(engine)
    done = engine.pbs("qalter", "-W", f"depend=afterok:{parent.split('.')[0]}", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    assert engine.job(job_id)["depend"] == f"afterok:{parent}"
    itself = engine.pbs("qalter", "-W", f"depend=afterok:{job_id}", job_id)
    assert (itself.returncode, itself.stderr) == (156, f"qalter: Invalid request {job_id}\n")


@pytest.mark.parametrize("option, value", [
    ("-p", "5000"), ("-p", "x"), ("-j", "xx"), ("-r", "maybe"), ("-a", "notadate"),
    ("-k", "xx"), ("-m", "xx"), ("-M", ""), ("-S", ""), ("-o", ""), ("-c", "u"),
    ("-c", "x=5"), ("-R", "x"), ("-e", "otherhost:rel"), ("-W", "depend=frob:1")])
def test_a_value_qalter_refuses_before_asking_the_server(engine, option, value):
    """As PBS's qalter (checked): ``illegal -X value``, its usage, exit 2, for a job that
    does not exist too; the job is not changed."""
    job_id = _held(engine)
    before = engine.job(job_id)
    for target in (job_id, "99999"):
        done = engine.pbs("qalter", option, value, target)
        assert (done.returncode, done.stdout) == (2, ""), (option, value)
        lines = done.stderr.splitlines()
        assert lines[0] == f"qalter: illegal {option} value", (option, value)
        assert lines[-1].startswith("usage: qalter [-a date_time]")
    assert engine.job(job_id) == before


def test_what_the_server_refuses(engine):
    job_id = _held(engine)
    for args, status, line in (
            (("-W", "block=true"), 166, f"Illegal attribute or resource value block {job_id}"),
            (("-W", "interactive=true"), 166,
             f"Illegal attribute or resource value interactive {job_id}"),
            (("-P", "a/b"), 166, f"Illegal attribute or resource value project {job_id}"),
            (("-W", "nosuch=1"), 154, f"Undefined attribute nosuch {job_id}")):
        done = engine.pbs("qalter", *args, job_id)
        assert (done.returncode, done.stderr) == (status, f"qalter: {line}\n"), args
    assert engine.job(job_id).get("project") != "a/b"


def test_qalter_has_no_v_and_refuses_what_the_engine_cannot_honour(engine):
    job_id = _held(engine)
    done = engine.pbs("qalter", "-v", "A=1", job_id)  # (PBS's qalter has no -v either)
    assert (done.returncode, done.stderr.splitlines()[0]) == (
        2, "qalter: invalid option -- 'v'")
    for args in (("-u", "nobody"), ("-W", "group_list=x")):
        done = engine.pbs("qalter", *args, job_id)
        assert done.returncode == 1, args
        assert done.stderr.startswith("qalter: ") and "not supported" in done.stderr, args
