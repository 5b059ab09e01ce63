"""pbsnodes -l, -S, -j, -L, -H and -v as OpenPBS 23.06 prints them (checked on the real one:
tests/adapters/test_pbs_job_parity.py has its answers): without -v, of hosts."""

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
    done = engine.pbs("pbsnodes", "-vl")
    assert (done.returncode, done.stderr) == (0, "")
    assert sorted(done.stdout.splitlines()) == [f"{LONG} offline being fixed",
                                                f"{'n1':<20} offline "]
    # of the host, whose vnodes' states differ (<various>): nothing, as PBS's
    assert engine.pbs("pbsnodes", "-l").stdout == ""
    for args in (("-l", "n1"), ("-l", "-S"), ("-l", "-a"), ("-l", "-v")):
        refused = engine.pbs("pbsnodes", *args)
        assert (refused.returncode, refused.stdout) == (1, ""), args
        assert refused.stderr.splitlines()[-1] == "       pbsnodes [-v] -l", args


def test_pbsnodes_aS_and_aSL(engine):
    _add_vnode(engine, LONG, "resources_available.ncpus = 4",
               "resources_available.mem = 1500mb", "comment = 'a note'")
    host = engine.client("stat_nodes")[LONG]["resources_available"]["host"]
    done = engine.pbs("pbsnodes", "-avS")
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[:2] == list(display.SUMMARY_HEADER)
    row = f"{LONG[:15]} free            --       --       {host:<15} --              1gb " \
          f"      4       0       0 a note"
    assert row in lines[2:]
    long = engine.pbs("pbsnodes", "-avSL").stdout.splitlines()
    assert f"{LONG} free            --       --       {host:<15} --              1gb " \
           f"      4       0       0 a note" in long
    named = engine.pbs("pbsnodes", "-vS", LONG, "nosuch")
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
    assert done.stderr.splitlines()[-1] == "       pbsnodes [-v] -l", args


def test_pbsnodes_a_F_dsv(engine):
    vnode = sorted(engine.client("stat_nodes"))[0]
    done = engine.pbs("pbsnodes", "-a", "-F", "dsv", "-D", ",")
    assert (done.returncode, done.stderr) == (0, "")
    line = done.stdout.splitlines()[0]
    assert line.startswith(f"Name={vnode},Mom=")
    assert ",state=free," in line
    epoch = engine.client("stat_nodes")[vnode]["last_state_change_time"]
    assert f",last_state_change_time={epoch}" in line


#: Two vnodes of host vm as the real OpenPBS 23.06 reported them (a probe, 2026-12-05:
#: vn2 made with qmgr on vm's MoM), and what its pbsnodes -a printed of the host.
VM_VNODES = {
    "vm": {"Mom": "vm", "Port": 15002, "pbs_version": "23.06.06", "ntype": "PBS",
           "state": "free", "pcpus": 2, "jobs": ["1290.vm/0"], "resv": ["R1286.vm"],
           "resources_available": {"arch": "linux", "host": "vm", "mem": "24683792kb",
                                   "ncpus": 2, "vnode": "vm"},
           "resources_assigned": {"mem": "524288kb", "ncpus": 1},
           "resv_enable": True, "sharing": "default_shared", "license": "l",
           "last_state_change_time": 1796513875, "last_used_time": 1796513852},
    "vn2": {"Mom": "vm", "Port": 15002, "pbs_version": "unavailable", "ntype": "PBS",
            "state": "state-unknown",
            "resources_available": {"host": "vm", "mem": "1gb", "ncpus": 2, "vnode": "vn2"},
            "resources_assigned": {"mem": "0kb", "ncpus": 0},
            "comment": "second", "resv_enable": True, "sharing": "default_shared",
            "last_state_change_time": 1796513875},
}
VM_HOST = f"""vm
     Mom = vm
     Port = 15002
     pbs_version = <various>
     ntype = PBS
     state = <various>
     pcpus = 2
     jobs = 1290.vm/0
     resv = R1286.vm
     comment = second
     resv_enable = True
     sharing = default_shared
     license = l
     last_state_change_time = {display.ctime(1796513875)}
     last_used_time = {display.ctime(1796513852)}
     resources_available.arch = linux
     resources_available.host = vm
     resources_available.mem = 25732368kb
     resources_available.ncpus = 4
     resources_available.vnode = <various>
     resources_assigned.mem = 524288kb
     resources_assigned.ncpus = 1
"""


def test_a_host_of_several_vnodes_is_listed_as_pbs_lists_it():
    hosts = display.pbsnodes_hosts(VM_VNODES)
    assert list(hosts) == ["vm"]
    assert display.pbsnodes_full(hosts) == VM_HOST
    summary = display.pbsnodes_summary(hosts).splitlines()[2]
    assert summary == ("vm              <various>       --       --       vm              "
                       "--             25gb       4       0       0 second")
    jobs = display.pbsnodes_summary(hosts, jobs=True).splitlines()[3]
    assert jobs == ("vm              <various>            1     1      0    24gb/25gb     "
                    "3/4     0/0     0/0 1290")
    dsv = display.pbsnodes_dsv(hosts)
    assert dsv.startswith("Name=vm|Mom=vm|Port=15002|pbs_version=<various>|ntype=PBS|"
                          "state=<various>|pcpus=2|jobs=1290.vm/0|resv=R1286.vm|comment=second|")
    assert display.pbsnodes_hosts(VM_VNODES, only="VM") == hosts
    assert display.pbsnodes_hosts(VM_VNODES, only="vn2") == {}
    # a host of one vnode is that vnode; a vnode without a host is no host's
    alone = {"n1": {**VM_VNODES["vn2"], "resources_available": {"host": "h1", "vnode": "n1"}},
             "lost": {"state": "free"}}
    assert display.pbsnodes_hosts(alone) == {"n1": alone["n1"]}


def test_pbsnodes_lists_hosts_unless_v(engine):
    vnode = sorted(engine.client("stat_nodes"))[0]
    host = engine.client("stat_nodes")[vnode]["resources_available"]["host"]
    _add_vnode(engine, "n1", "resources_available.ncpus = 3", "comment = second")
    blocks = engine.pbs("pbsnodes", "-a", check=True).stdout.split("\n\n")
    assert [b.splitlines()[0] for b in blocks if b.strip()] == [host]
    assert "     resources_available.vnode = <various>" in blocks[0].splitlines()
    assert engine.pbs("pbsnodes", "-a", "n1", check=True).stdout == \
        engine.pbs("pbsnodes", "-a", check=True).stdout  # (-a: all, names or not)
    vnodes = engine.pbs("pbsnodes", "-av", check=True).stdout.split("\n\n")
    assert sorted(b.splitlines()[0] for b in vnodes if b.strip()) == sorted([vnode, "n1"])
    named = engine.pbs("pbsnodes", "n1")
    assert (named.returncode, named.stdout, named.stderr) == (
        1, "", "Node: n1,  Error: Unknown node \n")
    assert engine.pbs("pbsnodes", "-v", "n1", check=True).stdout.startswith("n1\n")
    assert engine.pbs("pbsnodes", host, check=True).stdout.startswith(f"{host}\n")
    summary = engine.pbs("pbsnodes", "-aS", check=True).stdout.splitlines()[2:]
    assert [line.split()[0] for line in summary] == [host[:15]]
    for args in (("-v",), ("-Hv", host), ("-o", "-v", "n1")):
        refused = engine.pbs("pbsnodes", *args)
        assert (refused.returncode, refused.stdout) == (1, ""), args
    assert engine.pbs("pbsnodes", "-vH", host, check=True).stdout.count("\n\n") == 2
