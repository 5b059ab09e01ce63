"""``-l nodes=``: PBS's old request, converted to a select and a place as OpenPBS 23.06's
server converts it (each conversion below checked on the real one with qsub, then qstat
-f; a chunk's mem is written ``349525KB``, in capitals, as PBS writes it there only)."""

from __future__ import annotations

import pytest

from pbsplug import units

TYPES = {"bigmem": "boolean", "arch": "string"}


@pytest.mark.parametrize("spec, asked, select, place", [
    ("1:ppn=2", {}, "1:ncpus=2:mpiprocs=2", "scatter"),
    ("2:ppn=1", {}, "2:ncpus=1", "scatter"),
    ("2", {}, "2:ncpus=1", "scatter"),
    ("01", {}, "1:ncpus=1", "scatter"),
    ("vm", {}, "1:ncpus=1:host=vm", "scatter"),
    ("1:vm", {}, "1:ncpus=1:host=vm", "scatter"),
    ("vm:ppn=2", {}, "1:ncpus=2:host=vm:mpiprocs=2", "scatter"),
    ("vm+vm", {}, "1:ncpus=1:host=vm+1:ncpus=1:host=vm", "scatter"),
    ("1:ppn=2+1:ppn=1", {}, "1:ncpus=2:mpiprocs=2+1:ncpus=1", "scatter"),
    ("vm:ppn=1+1:ppn=2", {}, "1:ncpus=1:host=vm+1:ncpus=2:mpiprocs=2", "scatter"),
    ("1:ncpus=2", {}, "1:ncpus=2", "scatter"),
    ("1:ppn=2:ncpus=3", {}, "1:ncpus=6:mpiprocs=2", "scatter"),
    ("1#excl", {}, "1:ncpus=1", "scatter:excl"),
    ("3:ppn=2#excl", {}, "3:ncpus=2:mpiprocs=2", "scatter:excl"),
    ("1:ppn=1#shared", {}, "1:ncpus=1", "free"),
    ("1:bigmem", {}, "1:ncpus=1:bigmem=True", "scatter"),
    ("vm:bigmem", {}, "1:ncpus=1:bigmem=True:host=vm", "scatter"),
    ("1:ppn=2", {"ncpus": 4}, "1:ncpus=4:mpiprocs=2", "scatter"),
    ("2", {"ncpus": 4}, "2:ncpus=2", "scatter"),
    ("1:ppn=2", {"mem": "1gb"}, "1:ncpus=2:mem=1048576KB:mpiprocs=2", "scatter"),
    ("2:ppn=1", {"mem": "1gb"}, "2:ncpus=1:mem=524288KB", "scatter"),
    ("3", {"mem": "1gb"}, "3:ncpus=1:mem=349525KB", "scatter"),
    ("vm:ppn=2", {"mem": "2gb"}, "1:ncpus=2:mem=2097152KB:host=vm:mpiprocs=2", "scatter"),
    ("1:ppn=2+1", {"mem": "3gb"},
     "1:ncpus=2:mem=1572864KB:mpiprocs=2+1:ncpus=1:mem=1572864KB", "scatter"),
])
def test_nodes_converted_as_openpbs_converts_them(spec, asked, select, place):
    assert units.nodes_select(spec, hosts={"vm"}, types=TYPES, **asked) == (select, place)


@pytest.mark.parametrize("spec, asked, code, message", [
    ("0", {}, 15089, "node(s) specification error"),
    ("1:ppn=x", {}, 15089, "node(s) specification error"),
    ("1:ppn=0", {}, 15089, "node(s) specification error"),
    ("1:ppn=2:mem=1gb", {}, 15089, "node(s) specification error"),
    ("1:mpiprocs=3", {}, 15089, "node(s) specification error"),
    ("1:arch=linux", {}, 15089, "node(s) specification error"),
    ("abc", {}, 15035, "Unknown resource: abc"),
    ("localhost", {}, 15035, "Unknown resource: localhost"),
    ("1#exclhost", {}, 15035, "Unknown resource: exclhost"),
    ("1#pack", {}, 15035, "Unknown resource: pack"),
    ("2", {"ncpus": 3}, 15014, "Illegal attribute or resource value Resource_List.ncpus"),
    ("2:ppn=2", {"ncpus": 2}, 15014,
     "Illegal attribute or resource value Resource_List.ncpus"),
    ("1:ppn=3+2:ppn=1", {"ncpus": 9}, 15014,
     "Illegal attribute or resource value Resource_List.ncpus"),
])
def test_nodes_openpbs_refuses(spec, asked, code, message):
    with pytest.raises(units.NodesError) as caught:
        units.nodes_select(spec, hosts={"vm"}, types=TYPES, **asked)
    assert (caught.value.code, caught.value.message) == (code, message)


def _host(engine) -> str:
    nodes = engine.client("stat_nodes")
    return nodes[sorted(nodes)[0]]["resources_available"]["host"]


def test_qsub_l_nodes_converts_and_keeps_nodes_and_nodect(engine):
    host = _host(engine)
    done = engine.pbs("qsub", "-h", "-l", f"nodes={host}:ppn=2", "-l", "mem=2gb", "--",
                      "/bin/true")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    res = engine.job(done.stdout.strip())["Resource_List"]
    assert res == {"nodes": f"{host}:ppn=2", "select": f"1:ncpus=2:mem=2097152KB:host={host}"
                   ":mpiprocs=2", "place": "scatter", "ncpus": 2, "mpiprocs": 2,
                   "mem": "2097152kb", "nodect": 1}


def test_qsub_l_nodes_answers_as_openpbs(engine):
    for args, status, line in (
            (("-l", "nodes=abc"), 187, "qsub: Unknown resource: abc"),
            (("-l", "nodes=0"), 241, "qsub: node(s) specification error"),
            (("-l", "nodes=2", "-l", "ncpus=3"), 166,
             "qsub: Illegal attribute or resource value Resource_List.ncpus"),
            (("-l", "nodes=1", "-l", "select=1:ncpus=1"), 6,
             "qsub: Cannot be used with select or place: nodes"),
            (("-l", "nodes=1", "-l", "place=pack"), 6,
             "qsub: Cannot be used with select or place: nodes")):
        done = engine.pbs("qsub", *args, "--", "/bin/true")
        assert (done.returncode, done.stdout, done.stderr) == (status, "", f"{line}\n"), args


def test_qalter_l_nodes_converts_a_job_whose_select_the_server_made(engine):
    job_id = engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()
    assert engine.pbs("qalter", "-l", "nodes=2:ppn=1", job_id).returncode == 0
    res = engine.job(job_id)["Resource_List"]
    assert (res["select"], res["place"], res["ncpus"], res["nodect"]) == (
        "2:ncpus=1", "scatter", 2, 2)
    odd = engine.pbs("qalter", "-l", "ncpus=3", job_id)
    assert (odd.returncode, odd.stderr) == (
        166, f"qalter: Illegal attribute or resource value Resource_List.ncpus {job_id}\n")
    assert engine.pbs("qalter", "-l", "ncpus=4", job_id).returncode == 0
    assert engine.job(job_id)["Resource_List"]["select"] == "2:ncpus=2"
    bad = engine.pbs("qalter", "-l", "nodes=abc", job_id)
    assert (bad.returncode, bad.stderr) == (187, f"qalter: Unknown resource: abc {job_id}\n")
    # a select given replaces the converted one; the nodes and the place stay
    assert engine.pbs("qalter", "-l", "select=1:ncpus=1", job_id).returncode == 0
    res = engine.job(job_id)["Resource_List"]
    assert (res["select"], res["place"], res["nodes"]) == ("1:ncpus=1", "scatter", "2:ppn=1")


def test_a_job_of_nodes_runs_with_its_processes(engine):
    job_id = engine.pbs("qsub", "-l", "nodes=1:ppn=2", input=(
        'echo "$NCPUS $(wc -l < $PBS_NODEFILE)" > "$PBS_O_WORKDIR/seen"\n'),
        check=True).stdout.strip()
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    assert (engine.work / "seen").read_text().split() == ["2", "2"]
    assert attrs["exec_vnode"].count("ncpus=") >= 1
