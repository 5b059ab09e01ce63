"""A job's files and its end on the real server: umask, -o DIR/, a killed shepherd, the
comments of jobs that did not run normally, exec_host, the home's modes (issue 17)."""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import socket
import stat
from pathlib import Path

import pytest

from pbsplug.testing import missing

from .conftest import until

HOST = socket.gethostname().split(".")[0]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def session_members(sid: int) -> list[int]:
    """The processes of session `sid` (a job's, whose leader is its shepherd)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def test_job_files_get_umask_077_by_default_and_w_umask_when_given(engine):
    default = engine.pbs("qsub", "-N", "dflt", "--", "/bin/sh", "-c", "umask; echo x >&2",
                         check=True).stdout.strip()
    wide = engine.pbs("qsub", "-N", "wide", "-W", "umask=022", "--", "/bin/sh", "-c", "umask",
                      check=True).stdout.strip()
    assert engine.wait(default)["Exit_status"] == 0
    assert engine.wait(wide)["Exit_status"] == 0
    seq, wseq = default.split(".")[0], wide.split(".")[0]
    out, err = engine.work / f"dflt.o{seq}", engine.work / f"dflt.e{seq}"
    assert out.read_text() == "0077\n" and mode(out) == 0o600 and mode(err) == 0o600
    assert (engine.work / f"wide.o{wseq}").read_text() == "0022\n"
    assert mode(engine.work / f"wide.o{wseq}") == 0o644
    assert engine.job(wide)["umask"] == "022"


@pytest.mark.parametrize("value", ["9", "08", "12345", "abc", "-1", ""])
def test_a_bad_umask_is_refused_with_15014(engine, value):
    done = engine.pbs("qsub", "-W", f"umask={value}", "--", "/bin/true")
    assert done.returncode != 0 and "illegal -W value" in done.stderr
    with pytest.raises(Exception) as refused:  # the raw API, past qsub's own check
        engine.submit("true\n", umask=value)
    assert getattr(refused.value, "code", None) == 15014
    assert "umask" in str(refused.value)
    assert engine.client("stat_jobs", history=True) == {}


def test_output_to_a_folder_goes_to_name_dot_o_seq_in_it(engine):
    outs, errs = engine.work / "outs", engine.work / "errs"
    outs.mkdir()
    errs.mkdir()
    job_id = engine.pbs("qsub", "-N", "dirjob", "-o", "outs/", "-e", str(errs), "--",
                        "/bin/sh", "-c", "echo to-out; echo to-err >&2", check=True).stdout
    seq = job_id.split(".")[0]
    attrs = engine.wait(job_id.strip())
    assert attrs["Exit_status"] == 0
    assert attrs["Output_Path"] == f"{HOST}:{outs}/"
    assert (outs / f"dirjob.o{seq}").read_text() == "to-out\n"
    assert (errs / f"dirjob.e{seq}").read_text() == "to-err\n"


def test_a_killed_shepherd_requeues_a_rerunnable_job_and_kills_what_is_left(engine):
    job_id = engine.submit("sleep 300 & sleep 300\n", Job_Name="lost")
    seq = job_id.split(".")[0]
    record = engine.home.jobs / f"{seq}.shepherd"
    until(lambda: record.exists() and engine.job(job_id)["job_state"] == "R")
    shepherd = json.loads(record.read_text())["shepherd"]
    until(lambda: len(session_members(shepherd)) >= 3, what="the job's processes")
    os.kill(shepherd, signal.SIGKILL)
    until(lambda: int(engine.job(job_id).get("run_count", 0)) == 2, what="the job to rerun")
    until(lambda: session_members(shepherd) == [], what="the lost job's processes to go")
    assert "Job requeued: it was lost (its shepherd" in engine.log()
    assert "job lost: its shepherd" in engine.log()
    engine.client("delete", ids=[job_id])


def test_a_killed_shepherd_ends_a_job_that_is_not_rerunnable_with_minus_2(engine):
    job_id = engine.submit("sleep 300\n", Job_Name="lost", Rerunable=False)
    seq = job_id.split(".")[0]
    record = engine.home.jobs / f"{seq}.shepherd"
    until(lambda: record.exists())
    shepherd = json.loads(record.read_text())["shepherd"]
    until(lambda: len(session_members(shepherd)) >= 2, what="the job's process")
    os.kill(shepherd, signal.SIGKILL)
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == -4  # PBS's JOB_EXEC_INITABT
    assert re.fullmatch(rf"Job lost and not rerunnable: its shepherd \(pid {shepherd}\) ended "
                        r"without the job's status; [12] process\(es\) left of it killed",
                        attrs["comment"])
    # (SIGKILL ends a process once it runs again: on a loaded machine, after this reads /proc)
    until(lambda: session_members(shepherd) == [], what="the lost job's processes to go")
    assert not (engine.home.tmp / f"pbs.{job_id}").exists()


def test_a_requeued_run_leaves_no_file_behind(engine):
    """Run, held, rerun, deleted while queued: the run's nodefile, shepherd, status and
    script files and its TMPDIR go when the requeue ends the run (PBS's MoM cleans a job's
    files at the end of each run), and none is left once the job is deleted. They stayed
    for ever."""
    job_id = engine.submit("sleep 300\n", Job_Name="again")
    seq = job_id.split(".")[0]
    files = [engine.home.jobs / f"{seq}.{kind}" for kind in ("nodes", "shepherd", "SC")]
    tmpdir = engine.home.tmp / f"pbs.{job_id}"
    until(lambda: engine.job(job_id)["job_state"] == "R" and all(
        p.exists() for p in [*files, tmpdir]), what="the job to run")
    (tmpdir / "scratch").write_text("left by the job\n")
    engine.pbs("qhold", job_id, check=True)
    engine.pbs("qrerun", job_id, check=True)
    assert engine.wait(job_id, "H")["run_count"] == 1
    status = engine.home.jobs / f"{seq}.status"
    assert [p for p in [*files, status, tmpdir] if p.exists()] == []
    engine.client("delete", ids=[job_id])
    assert engine.wait(job_id)["job_state"] == "F"
    assert [p for p in [*files, status, tmpdir] if p.exists()] == []


def test_a_job_deleted_while_queued_takes_its_runs_leftovers_with_it(engine):
    """Whatever of an earlier run is still there when a queued job is deleted (a requeue
    that could not remove it) goes with the job."""
    job_id = engine.submit("true\n", Job_Name="held", Hold_Types="u")
    seq = job_id.split(".")[0]
    left = [engine.home.jobs / f"{seq}.{kind}" for kind in ("nodes", "status", "shepherd")]
    for path in left:
        path.write_text("{}\n")
    tmpdir = engine.home.tmp / f"pbs.{job_id}"
    tmpdir.mkdir()
    (tmpdir / "scratch").write_text("x\n")
    engine.client("delete", ids=[job_id])
    assert engine.wait(job_id)["job_state"] == "F"
    assert [p for p in [*left, tmpdir] if p.exists()] == []


def test_a_job_starts_in_its_owners_home_as_pbs_starts_it(engine):
    """OpenPBS 23.06 (checked) starts a job in its owner's home folder, whatever folder it
    was submitted from (a script cds to $PBS_O_WORKDIR itself); pbsplug started it in
    PBS_O_WORKDIR."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    job_id = engine.pbs("qsub", "-N", "where", "--", "/bin/sh", "-c",
                        'pwd -P; echo "$PBS_O_WORKDIR"; echo "$HOME"', check=True).stdout.strip()
    assert engine.wait(job_id)["Exit_status"] == 0
    out = (engine.work / f"where.o{job_id.split('.')[0]}").read_text()
    assert out == f"{os.path.realpath(home)}\n{engine.work}\n{home}\n"


def test_a_stream_kept_with_k_goes_to_the_owners_home(engine):
    """qsub -k o / -k e without d, as OpenPBS 23.06 did (checked): the kept stream is
    written to <Job_Name>.o<seq> (.e<seq>) in its owner's home on the execution host and
    stays there, whatever -o or -e says; a stream not kept goes to its path, and with d
    both do. pbsplug kept -k as an attribute and wrote to the paths."""
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    script = ["--", "/bin/sh", "-c", "echo out; echo err >&2"]
    both = engine.pbs("qsub", "-N", "keepboth", "-k", "oe", *script, check=True)
    out_only = engine.pbs("qsub", "-N", "keepout", "-k", "o", "-o", f"{engine.work}/ko.out",
                          "-e", f"{engine.work}/ko.err", *script, check=True)
    direct = engine.pbs("qsub", "-N", "keepdirect", "-k", "oed", *script, check=True)
    seqs = [done.stdout.strip().split(".")[0] for done in (both, out_only, direct)]
    kept = [home / f"keepboth.o{seqs[0]}", home / f"keepboth.e{seqs[0]}",
            home / f"keepout.o{seqs[1]}"]
    try:
        for done in (both, out_only, direct):
            assert engine.wait(done.stdout.strip())["Exit_status"] == 0
        assert [p.read_text() for p in kept] == ["out\n", "err\n", "out\n"]
        assert all(mode(p) == 0o600 for p in kept)
        assert not (engine.work / f"keepboth.o{seqs[0]}").exists()
        assert not (engine.work / "ko.out").exists()
        assert (engine.work / "ko.err").read_text() == "err\n"
        assert (engine.work / f"keepdirect.o{seqs[2]}").read_text() == "out\n"
        assert not (home / f"keepdirect.o{seqs[2]}").exists()
    finally:
        for path in kept:
            path.unlink(missing_ok=True)


def test_a_job_whose_owner_has_no_home_does_not_start_as_in_pbs(engine):
    """OpenPBS 23.06 (checked, for a user whose home folder does not exist): the job fails
    with Exit_status -2 (JOB_EXEC_FAIL2) and "Could not chdir to home directory" in its
    error file. Run as ``nobody``, whose home is /nonexistent."""
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        missing("needs the user nobody")
    if os.geteuid() != 0 or os.path.isdir(nobody.pw_dir):
        missing("needs root, and a user nobody whose home folder does not exist")
    job_id = engine.as_user("nobody", "submit", attrs={
        "Job_Name": "homeless", "Variable_List": {"PBS_O_WORKDIR": str(engine.work)}},
        argv=["/bin/true"])["result"]
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == -2
    assert attrs["comment"].startswith(
        "Job could not start: cannot start in its owner's home: FileNotFoundError: ")
    err = engine.work / f"homeless.e{job_id.split('.')[0]}"
    assert err.read_text() == "Could not chdir to home directory\n"
    assert err.stat().st_uid == nobody.pw_uid


def test_comments_say_what_happened(engine):
    # (a job starts in its owner's home, not PBS_O_WORKDIR: a program that is not there)
    gone = engine.client("submit", attrs={
        "Job_Name": "nowhere", "Variable_List": {"PBS_O_WORKDIR": str(engine.work)},
        "Output_Path": f"{HOST}:{engine.work}/nowhere.out",
        "Error_Path": f"{HOST}:{engine.work}/nowhere.err"}, argv=[str(engine.work / "missing")])
    attrs = engine.wait(gone)
    assert attrs["Exit_status"] == -1
    assert attrs["comment"].startswith("Job could not start: FileNotFoundError: ")
    assert "missing" in attrs["comment"]
    # The note is in the job's error file, written by the job's own process.
    assert (engine.work / "nowhere.err").read_text().startswith(
        "pbsplug: the job could not start: FileNotFoundError")
    running = engine.submit("sleep 300\n")
    until(lambda: engine.job(running).get("session_id"), what="the job to run")
    engine.client("delete", ids=[running])
    attrs = engine.wait(running)
    assert attrs["Exit_status"] == 256 + signal.SIGTERM == 271
    assert attrs["comment"] == "Job deleted at request of root@" + HOST
    ran = engine.wait(engine.submit("true\n"))
    assert ran["comment"].startswith("Job run at ") and ran["comment"].endswith(" and finished")


def test_exec_host_counts_cpus_as_pbs_does(engine):
    engine.client("qmgr", text=f"set node {next(iter(engine.nodes()))} "
                               "resources_available.ncpus = 4")
    two = engine.submit("sleep 300\n", Resource_List={"select": "1:ncpus=2"})
    one = engine.submit("sleep 300\n", Resource_List={"select": "1:ncpus=1"})
    assert engine.wait(two, "R")["exec_host"] == f"{HOST}/0*2"
    assert engine.wait(one, "R")["exec_host"] == f"{HOST}/0"
    engine.client("delete", ids=[two, one])


def test_the_nodefile_holds_each_chunks_mpiprocs_which_exec_vnode_does_not_list(engine):
    """OpenPBS 23.06, checked: exec_vnode lists what a chunk takes of its vnode, not its
    layout (``select=1:ncpus=1:mpiprocs=2`` ran on ``(vm:ncpus=1)``); the nodefile has a
    line per MPI rank, one a chunk at least. pbsplug's exec_vnode listed mpiprocs (and
    matched values), and its nodefile read them from there."""
    engine.pbs("qmgr", "-c", f"set node {next(iter(engine.client('stat_nodes')))} "
               "resources_available.ncpus = 4", check=True)
    job_id = engine.submit("sleep 300\n", Resource_List={
        "select": "1:ncpus=1:mpiprocs=3+1:ncpus=1"})
    attrs = engine.wait(job_id, "R")
    vnode = next(iter(engine.client("stat_nodes")))
    assert attrs["exec_vnode"] == f"({vnode}:ncpus=1)+({vnode}:ncpus=1)"
    nodefile = engine.home.jobs / f"{job_id.split('.')[0]}.nodes"
    until(lambda: nodefile.exists() and nodefile.read_text(), what="the job's nodefile")
    assert nodefile.read_text() == f"{HOST}\n" * 4
    engine.client("delete", ids=[job_id])


def test_an_exclhost_job_lists_the_rest_of_its_host_as_pbs_does(engine):
    """As OpenPBS 23.06 runs it on a host of three vnodes: exec_vnode names the host's other
    vnodes with no resources after its chunk, exec_host gives each of them ``*0``, and
    every vnode of the host lists the job and shows job-exclusive."""
    for name in engine.client("stat_nodes"):
        engine.client("node_state", names=[name], offline=True)
    for name in ("hx0", "hx1", "hx2"):
        engine.pbs("qmgr", "-c", f"create node {name} resources_available.ncpus = 2, "
                   "resources_available.host = hx", check=True)
    whole = engine.submit("sleep 300\n", Resource_List={"select": "1:ncpus=2",
                                                         "place": "exclhost"})
    attrs = engine.wait(whole, "R")
    # One MPI rank: the rest of the host adds no line to PBS_NODEFILE.
    nodefile = engine.home.jobs / f"{whole.split('.')[0]}.nodes"
    until(lambda: nodefile.exists() and nodefile.read_text(), what="the job's nodefile")
    assert nodefile.read_text() == f"{HOST}\n"
    assert attrs["exec_vnode"] == "(hx0:ncpus=2)+(hx1)+(hx2)"
    assert attrs["exec_host"] == f"{HOST}/0*2+{HOST}/1*0+{HOST}/2*0"
    assert attrs["comment"].endswith(" on (hx0:ncpus=2)+(hx1)+(hx2)")
    nodes = engine.client("stat_nodes", names=["hx0", "hx1", "hx2"])
    assert {n: (row["state"], row["jobs"]) for n, row in nodes.items()} == {
        "hx0": ("job-exclusive", [f"{whole}/0", f"{whole}/1"]),  # (each cpu, `cpuslots`)
        **{n: ("job-exclusive", [f"{whole}/0"]) for n in ("hx1", "hx2")}}
    shared = engine.submit("sleep 300\n", Resource_List={"select": "1:ncpus=1"})
    engine.client("delete", ids=[whole])
    assert engine.wait(shared, "R")["exec_vnode"] == "(hx0:ncpus=1)"
    engine.client("delete", ids=[shared])


def test_the_auto_vnode_has_a_state_change_time(engine):
    for attrs in engine.nodes().values():
        assert int(attrs["last_state_change_time"]) > 1_600_000_000


def test_the_home_is_private_and_an_old_home_is_tightened(engine):
    home = engine.home
    engine.wait(engine.submit("true\n"))
    expected = {home.root: 0o755, home.logs: 0o700, home.jobs: 0o711, home.tmp: 0o711,
                home.db: 0o600, home.db.with_name("server.db-wal"): 0o600}
    expected.update({log: 0o600 for log in home.logs.iterdir()})
    assert {p: mode(p) for p in expected} == expected
    assert mode(home.socket) == 0o777
    engine.stop()
    loose = {home.db: 0o644, home.logs: 0o755, home.jobs: 0o755, home.tmp: 0o1777}
    for path, loose_mode in loose.items():
        path.chmod(loose_mode)
    stale = home.jobs / "99.SC"
    stale.write_text("echo secret\n")
    stale.chmod(0o755)
    engine.start()
    assert {p: mode(p) for p in loose} == {home.db: 0o600, home.logs: 0o700,
                                           home.jobs: 0o711, home.tmp: 0o711}
    assert mode(stale) == 0o600


def test_a_shepherd_killed_while_the_server_is_down_leaves_nothing_running(engine):
    job_id = engine.submit("sleep 300\n", Job_Name="orphan")
    record = engine.home.jobs / f"{job_id.split('.')[0]}.shepherd"
    until(lambda: record.exists())
    shepherd = json.loads(record.read_text())["shepherd"]
    until(lambda: len(session_members(shepherd)) >= 2, what="the job's process")
    engine.kill()
    os.kill(shepherd, signal.SIGKILL)
    engine.start()
    until(lambda: int(engine.job(job_id).get("run_count", 0)) == 2, what="the job to rerun")
    until(lambda: session_members(shepherd) == [], what="the orphaned job's processes to go")
    assert "Job requeued after a server restart: its shepherd is gone" in engine.log()
    engine.client("delete", ids=[job_id])
