"""mjf on the local engine: real jobs read their features; a drain reaches a running job."""

from __future__ import annotations

from pathlib import Path

from pbsplug.testing import site_toml, until
from pbsplug_mjf import this_host

HOST = this_host()

SCRIPT = """\
echo "allocated_cpu=$(cat $JOBFEATURES/allocated_cpu)"
echo "wall_limit_secs=$(cat $JOBFEATURES/wall_limit_secs)"
echo "total_cpu=$(cat $MACHINEFEATURES/total_cpu)"
echo "job_id=$(cat $JOBFEATURES/job_id)"
echo "jobfeatures=$JOBFEATURES"
"""


def site(base: Path, freq: int = 120, **config) -> str:
    values = {"machinefeatures_dir": str(base / "machinefeatures"),
              "jobfeatures_dir": str(base / "jobfeatures"), **config}
    return site_toml("mjf", values, freq=freq)


def output(engine, job_id: str) -> dict[str, str]:
    text = (engine.work / f"STDIN.o{job_id.split('.')[0]}").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_a_job_reads_its_features_and_they_are_gone_after_it(local_engine, base):
    engine = local_engine(site(base, hs06_per_cpu=12.5))
    host_cpus = sum(int(n["resources_available"]["ncpus"]) for n in engine.nodes().values())
    job_id = engine.submit(SCRIPT, Resource_List={"select": "1:ncpus=2",
                                                  "walltime": "00:10:00"})
    assert engine.wait(job_id)["Exit_status"] == 0
    seen = output(engine, job_id)
    assert seen["allocated_cpu"] == "2"
    assert seen["wall_limit_secs"] == "600"
    assert seen["total_cpu"] == str(host_cpus)
    assert seen["job_id"] == job_id
    assert seen["jobfeatures"] == str(base / "jobfeatures" / job_id)
    assert not (base / "jobfeatures" / job_id).exists()
    assert (base / "machinefeatures" / HOST / "hs06").read_text() == f"{12.5 * host_cpus:g}\n"


def test_a_drain_reaches_a_running_job_within_one_periodic_interval(local_engine, base):
    engine = local_engine(site(base, freq=2, grace_secs=60, grace_secs_job=120))
    job_id = engine.submit("sleep 60\n", Resource_List={"walltime": "01:00:00"})
    engine.wait(job_id, "R")
    job_dir = base / "jobfeatures" / job_id
    until(lambda: (job_dir / "jobstart_secs").exists(), what="the job's features")
    assert not (job_dir / "shutdowntime_job").exists()
    done = engine.pbs("mjf", "drain", "--in", "300")
    assert done.returncode == 0, done.stderr
    shutdown = int((base / "machinefeatures" / HOST / "shutdowntime").read_text())
    announced = until(lambda: (job_dir / "shutdowntime_job").exists() and
                      (job_dir / "shutdowntime_job").read_text(), timeout=10,
                      what="shutdowntime_job after the drain")
    assert int(announced) == shutdown  # sooner than the job's end, later than the grace
    assert engine.pbs("mjf", "undrain").returncode == 0
    until(lambda: not (job_dir / "shutdowntime_job").exists(), timeout=10,
          what="shutdowntime_job gone after undrain")
    engine.client("delete", ids=[job_id])
    engine.wait(job_id)
    assert not job_dir.exists()


def test_a_scratch_resource_that_is_not_a_size_takes_the_host_out_and_leaves_nothing(
        local_engine, base):
    engine = local_engine(site(base, scratch_resource="scratch"))
    # A custom resource's type is known only to the server, so the load cannot refuse it:
    # the first job that has it shows the site's mistake, which is the host's, not the job's.
    engine.pbs("qmgr", "-c", "create resource scratch type = string", check=True)
    job_id = engine.submit("true\n", Resource_List={"scratch": "lots"})
    attrs = until(lambda: (a := engine.job(job_id)).get("run_count") and
                  a["job_state"] in "QH" and a)
    assert attrs["job_state"] == "Q"  # requeued, to run elsewhere once the host is fixed
    nodes = until(lambda: all("offline" in n["state"] for n in engine.nodes().values())
                  and engine.nodes(), what="the host's vnodes offline")
    assert {n["comment"] for n in nodes.values()} == {
        "offlined by hook 'mjf' due to hook error"}
    assert "scratch_resource = 'scratch' is a string resource, not a size" in engine.log()
    assert not list(base.glob("jobfeatures/*")) and not list(base.glob("jobfeatures/.*"))
    engine.client("delete", ids=[job_id])


def test_the_job_cannot_change_its_features(local_engine, base, unix_user):
    engine = local_engine(site(base))
    script = ("cat $JOBFEATURES/job_id\n"
              "echo 999 > $JOBFEATURES/wall_limit_secs && echo wrote-key\n"
              "touch $JOBFEATURES/extra && echo made-key\n"
              "rm -f $JOBFEATURES/job_id && echo removed-key\n"
              "echo 1 > $MACHINEFEATURES/total_cpu && echo wrote-machine\n"
              "mv $JOBFEATURES $JOBFEATURES.x && echo moved-dir\n"
              "id -un\n")
    # Submitted by the second user, from a process of theirs.
    job_id = engine.as_user(unix_user, "submit", script=script, attrs={
        "Variable_List": {"PBS_O_WORKDIR": str(engine.work)},
        "Resource_List": {"walltime": "00:05:00"}})["result"]
    engine.wait(job_id)
    out = (engine.work / f"STDIN.o{job_id.split('.')[0]}").read_text().split()
    assert out == [job_id, unix_user]  # read, and nothing changed
    err = (engine.work / f"STDIN.e{job_id.split('.')[0]}").read_text()
    assert err.count("Permission denied") == 5, err
