"""pbsnodes -l, -S, -j, -L and -H as OpenPBS 23.06 prints them (checked on the real one:
tests/adapters/test_pbs_job_parity.py has its answers)."""

from __future__ import annotations

import json

import pytest

from pbsplug.engine import display

#: A vnode name longer than -S's column (15).
LONG = "averyveryverylongnodename"


def _add_vnode(engine, name: str, *settings: str) -> None:
    host = engine.client("stat_nodes")[sorted(engine.client("stat_nodes"))[0]][
        "resources_available"]["host"]
    engine.pbs("qmgr", "-c", f"create node {name} resources_available.host = {host}",
               check=True)
    for setting in settings:
        engine.pbs("qmgr", "-c", f"set node {name} {setting}", check=True)


@pytest.mark.parametrize("value, shown", [
    ("24683792kb", "24gb"), ("1500mb", "1gb"), ("1536mb", "2gb"), ("2560mb", "3gb"),
    ("999kb", "999kb"), ("1000kb", "1mb"), ("1023kb", "1mb"), ("100b", "100 b"),
    ("1023b", "1kb"), ("5w", "5 b"), ("10tb", "10tb"), ("0kb", "0kb"), (None, "0kb")])
def test_summary_sizes_as_pbs_shows_them(value, shown):
    assert display.summary_size(value) == shown


def test_pbsnodes_l_lists_the_vnodes_down_or_offline(engine):
    done = engine.pbs("pbsnodes", "-l")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    _add_vnode(engine, "n1")
    _add_vnode(engine, LONG)
    engine.pbs("pbsnodes", "-o", "n1", check=True)
    engine.pbs("pbsnodes", "-o", "-C", "being fixed", LONG, check=True)
    done = engine.pbs("pbsnodes", "-l")
    assert (done.returncode, done.stderr) == (0, "")
    assert sorted(done.stdout.splitlines()) == [f"{LONG} offline being fixed",
                                                f"{'n1':<20} offline "]
    for args in (("-l", "n1"), ("-l", "-S"), ("-l", "-a")):
        refused = engine.pbs("pbsnodes", *args)
        assert (refused.returncode, refused.stdout) == (1, ""), args
        assert refused.stderr.splitlines()[-1] == "       pbsnodes -l", args


def test_pbsnodes_aS_and_aSL(engine):
    _add_vnode(engine, LONG, "resources_available.ncpus = 4",
               "resources_available.mem = 1500mb", "comment = 'a note'")
    host = engine.client("stat_nodes")[LONG]["resources_available"]["host"]
    done = engine.pbs("pbsnodes", "-aS")
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[:2] == list(display.SUMMARY_HEADER)
    row = f"{LONG[:15]} free            --       --       {host:<15} --              1gb " \
          f"      4       0       0 a note"
    assert row in lines[2:]
    long = engine.pbs("pbsnodes", "-aSL").stdout.splitlines()
    assert f"{LONG} free            --       --       {host:<15} --              1gb " \
           f"      4       0       0 a note" in long
    named = engine.pbs("pbsnodes", "-S", LONG, "nosuch")
    assert (named.returncode, named.stderr) == (1, "Node: nosuch,  Error: Unknown node \n")
    assert named.stdout.splitlines() == [*display.SUMMARY_HEADER, row]


def test_pbsnodes_aSj_counts_and_lists_the_jobs(engine):
    vnode = sorted(engine.client("stat_nodes"))[0]
    ncpus = engine.client("stat_nodes")[vnode]["resources_available"]["ncpus"]
    job_id = engine.pbs("qsub", "-l", "select=1:ncpus=1", input="sleep 60\n",
                        check=True).stdout.strip()
    engine.wait(job_id, "R")
    done = engine.pbs("pbsnodes", "-S", "-j", vnode)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[:3] == list(display.SUMMARY_JOBS_HEADER)
    fields = lines[3].split()
    assert fields[0] == vnode and fields[2:5] == ["1", "1", "0"]
    assert fields[6] == f"{ncpus - 1}/{ncpus}"
    assert fields[-1] == job_id.split(".")[0]
    dsv = engine.pbs("pbsnodes", "-Sj", "-F", "DSV", vnode).stdout.strip()
    assert dsv.startswith(f"vnode={vnode}|state=") and dsv.endswith(f"|jobs={job_id}")
    node = json.loads(engine.pbs("pbsnodes", "-Sj", "-F", "json", vnode).stdout)["nodes"][
        vnode]
    assert (node["Total Jobs"], node["Suspended Jobs"], node["jobs"]) == (1, "", [job_id])
    engine.pbs("qdel", "-W", "force", job_id, check=True)


def test_pbsnodes_H_shows_a_hosts_vnodes(engine):
    _add_vnode(engine, "n1")
    host = engine.client("stat_nodes")["n1"]["resources_available"]["host"]
    done = engine.pbs("pbsnodes", "-H", host)
    assert (done.returncode, done.stderr) == (0, "")
    assert "n1" in [block.splitlines()[0] for block in done.stdout.split("\n\n") if block]
    summary = engine.pbs("pbsnodes", "-HS", host).stdout.splitlines()
    assert any(line.startswith("n1 ") for line in summary[2:])
    unknown = engine.pbs("pbsnodes", "-H", "nosuch")
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (
        1, "", "Node: nosuch,  Error: Unknown node \n")


@pytest.mark.parametrize("args", [("-S",), ("-j",), ("-Sj",), ("-L",), ("-H",),
                                  ("-aS", "-F", "xml")])
def test_pbsnodes_option_combinations_pbs_refuses(engine, args):
    done = engine.pbs("pbsnodes", *args)
    assert (done.returncode, done.stdout) == (1, ""), args
    assert done.stderr.splitlines()[-1] == "       pbsnodes -l", args


def test_pbsnodes_a_F_dsv(engine):
    vnode = sorted(engine.client("stat_nodes"))[0]
    done = engine.pbs("pbsnodes", "-a", "-F", "dsv", "-D", ",")
    assert (done.returncode, done.stderr) == (0, "")
    line = done.stdout.splitlines()[0]
    assert line.startswith(f"Name={vnode},Mom=")
    assert ",state=free," in line
    epoch = engine.client("stat_nodes")[vnode]["last_state_change_time"]
    assert f",last_state_change_time={epoch}" in line
