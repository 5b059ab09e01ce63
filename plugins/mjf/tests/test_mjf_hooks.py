"""The hooks, each event fired in its own process as the execution host runs it, against
real directories."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

import pbsplug_mjf as plugin
from pbsplug.testing import missing
from pbsplug_mjf import SWEEP_AFTER, this_host
from pbsplug_mjf.keys import KEY_NAME

HOST = this_host()

HOST_VNODES = {HOST: {"resources_available": {"ncpus": 8}},
               f"{HOST}[1]": {"resources_available": {"ncpus": 8}}}


def a_job(job_id="12.server", **resources):
    resources = {"walltime": "01:00:00", **resources}
    return {"id": job_id, "stime": int(time.time()), "exec_vnode": f"({HOST}:ncpus=4)",
            "Resource_List": resources}


def machine(base: Path) -> Path:
    return base / "machinefeatures" / HOST


def read(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in directory.iterdir()}


def test_startup_writes_the_machine_features(hook, base):
    outcome = hook("exechost_startup", {"vnode_list": HOST_VNODES}, hs06_per_cpu=10.0,
                   grace_secs=1800)
    assert outcome.accepted, outcome.message
    assert read(machine(base)) == {"total_cpu": "16\n", "hs06": "160\n", "grace_secs": "1800\n"}
    assert stat.S_IMODE(machine(base).stat().st_mode) == 0o755
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in machine(base).iterdir())


def test_startup_removes_a_stale_shutdowntime_and_keeps_a_future_one(hook, base):
    machine(base).mkdir(parents=True)
    (machine(base) / "shutdowntime").write_text(f"{int(time.time()) - 5}\n")
    assert hook("exechost_startup", {"vnode_list": HOST_VNODES}).accepted
    assert not (machine(base) / "shutdowntime").exists()
    future = int(time.time()) + 3600
    (machine(base) / "shutdowntime").write_text(f"{future}\n")
    assert hook("exechost_startup", {"vnode_list": HOST_VNODES}).accepted
    assert (machine(base) / "shutdowntime").read_text() == f"{future}\n"


def test_an_unwritable_base_directory_is_a_clear_reject(hook, base):
    (base / "file").write_text("")  # a base under a file: no user, root included, can make it
    outcome = hook("exechost_startup", {"vnode_list": HOST_VNODES},
                   machinefeatures_dir=str(base / "file" / "machinefeatures"))
    assert not outcome.accepted
    assert outcome.message == (f"mjf: cannot make the base directory "
                               f"{base}/file/machinefeatures/{HOST}: Not a directory")


def test_begin_makes_the_job_directory_whole_before_the_job_starts(hook, base):
    hook("exechost_startup", {"vnode_list": HOST_VNODES}, hs06=320.0, grace_secs_job=900)
    job = a_job(mem="2gb", vmem="3gb", cput="04:00:00")
    outcome = hook("execjob_begin", {"job": job, "vnode_list": {HOST: {}}})
    assert outcome.accepted, outcome.message
    directory = base / "jobfeatures" / "12.server"
    assert read(directory) == {
        "job_id": "12.server\n", "allocated_cpu": "4\n", "hs06_job": "80\n",
        "jobstart_secs": f"{job['stime']}\n", "wall_limit_secs": "3600\n",
        "cpu_limit_secs": "14400\n", "max_rss_bytes": f"{2 << 30}\n",
        "max_swap_bytes": f"{1 << 30}\n", "grace_secs_job": "900\n"}
    assert stat.S_IMODE(directory.stat().st_mode) == 0o755
    for path in directory.iterdir():
        assert KEY_NAME.fullmatch(path.name)
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        assert path.read_text().count("\n") == 1 and path.read_text().endswith("\n")
    assert [p.name for p in directory.parent.iterdir()] == ["12.server"]  # no temporary left


def test_a_rerun_job_gets_a_fresh_directory(hook, base):
    hook("execjob_begin", {"job": a_job(), "vnode_list": {HOST: {}}})
    directory = base / "jobfeatures" / "12.server"
    (directory / "shutdowntime_job").write_text("1\n")
    assert hook("execjob_begin", {"job": a_job(walltime="00:30:00"),
                                  "vnode_list": {HOST: {}}}).accepted
    assert (directory / "wall_limit_secs").read_text() == "1800\n"
    assert not (directory / "shutdowntime_job").exists()


@pytest.mark.parametrize(("resources", "message"), [
    ({"walltime": "tomorrow"}, "mjf: job 12.server: Resource_List.walltime = 'tomorrow' is not "
                               "a duration ([[HH:]MM:]SS)"),
    ({"mem": "4 gigs"}, "mjf: job 12.server: Resource_List.mem = '4 gigs' is not a size "
                        "(for example 4gb)"),
])
def test_a_request_that_does_not_parse_rejects_and_leaves_nothing(hook, base, resources,
                                                                  message):
    outcome = hook("execjob_begin", {"job": {**a_job(), "exec_vnode": f"({HOST})",
                                             "Resource_List": resources},
                                     "vnode_list": {HOST: {}}})
    assert (outcome.accepted, outcome.kind, outcome.message) == (False, "reject", message)
    assert not list(base.glob("jobfeatures/*")) and not list(base.glob("jobfeatures/.*"))


def test_a_directory_that_cannot_be_written_rejects_and_leaves_nothing(hook, base):
    (base / "jobs").write_text("")
    outcome = hook("execjob_begin", {"job": a_job(), "vnode_list": {HOST: {}}},
                   jobfeatures_dir=str(base / "jobs" / "features"))
    assert outcome.message == (f"mjf: cannot make the base directory {base}/jobs/features: "
                               "Not a directory")
    assert (base / "jobs").read_text() == ""


def test_launch_puts_both_locations_in_the_environment(hook, base):
    hook("exechost_startup", {"vnode_list": HOST_VNODES})
    hook("execjob_begin", {"job": a_job(), "vnode_list": {HOST: {}}})
    outcome = hook("execjob_launch", {"job": a_job(), "vnode_list": {HOST: {}},
                                      "env": {"PATH": "/bin"}, "argv": ["/bin/true"],
                                      "progname": "/bin/true"})
    assert outcome.accepted
    assert outcome.changes["env"] == {"PATH": "/bin", "MACHINEFEATURES": str(machine(base)),
                                      "JOBFEATURES": str(base / "jobfeatures" / "12.server")}


def test_launch_sets_nothing_that_does_not_exist(hook):
    outcome = hook("execjob_launch", {"job": a_job(), "env": {"PATH": "/bin"},
                                      "argv": ["/bin/true"], "progname": "/bin/true"})
    assert outcome.accepted and outcome.changes.get("env", {"PATH": "/bin"}) == {"PATH": "/bin"}


def test_end_removes_the_job_directory(hook, base):
    hook("execjob_begin", {"job": a_job(), "vnode_list": {HOST: {}}})
    assert (base / "jobfeatures" / "12.server").is_dir()
    assert hook("execjob_end", {"job": a_job()}).accepted
    assert list((base / "jobfeatures").iterdir()) == []
    assert hook("execjob_end", {"job": a_job()}).accepted  # already gone: fine


def test_periodic_sweeps_directories_of_jobs_that_no_longer_run(hook, base):
    for job_id in ("1.server", "2.server", "3.server"):
        hook("execjob_begin", {"job": a_job(job_id), "vnode_list": {HOST: {}}})
    old = time.time() - SWEEP_AFTER - 5
    for job_id in ("1.server", "2.server"):
        os.utime(base / "jobfeatures" / job_id, (old, old))
    outcome = hook("exechost_periodic", {"vnode_list": HOST_VNODES,
                                         "job_list": {"2.server": {"job_state": "R"}}})
    assert outcome.accepted, outcome.message
    # 1 is gone; 2 still runs; 3 is too young to judge (its begin may be under way).
    assert sorted(p.name for p in (base / "jobfeatures").iterdir()) == ["2.server", "3.server"]
    stranger = base / "jobfeatures" / "not-a-job"  # no job_id naming it: not ours to remove
    stranger.mkdir()
    os.utime(stranger, (old, old))
    assert hook("exechost_periodic", {"vnode_list": HOST_VNODES, "job_list": {}}).accepted
    assert sorted(p.name for p in (base / "jobfeatures").iterdir()) == ["3.server",
                                                                        "not-a-job"]


def test_periodic_announces_a_drain_and_withdraws_it(hook, base):
    hook("exechost_startup", {"vnode_list": HOST_VNODES}, grace_secs_job=600)
    job = a_job()
    hook("execjob_begin", {"job": job, "vnode_list": {HOST: {}}})
    job_file = base / "jobfeatures" / "12.server" / "shutdowntime_job"
    shutdown = int(time.time()) + 1200
    (machine(base) / "shutdowntime").write_text(f"{shutdown}\n")
    running = {"vnode_list": HOST_VNODES, "job_list": {"12.server": {"job_state": "R"}}}
    assert hook("exechost_periodic", running).accepted
    assert job_file.read_text() == f"{shutdown}\n"
    (machine(base) / "shutdowntime").write_text(f"{int(time.time()) + 30}\n")
    before = time.time()
    assert hook("exechost_periodic", running).accepted
    moved = int(job_file.read_text())
    assert before + 600 - 1 <= moved <= time.time() + 600  # no sooner than grace_secs_job
    (machine(base) / "shutdowntime").unlink()
    assert hook("exechost_periodic", running).accepted
    assert not job_file.exists()


def test_periodic_rewrites_only_what_changed(hook, base):
    hook("exechost_startup", {"vnode_list": HOST_VNODES}, hs06_per_cpu=10.0)
    total = machine(base) / "total_cpu"
    old = time.time() - 1000
    os.utime(total, (old, old))
    assert hook("exechost_periodic", {"vnode_list": HOST_VNODES}).accepted
    assert total.stat().st_mtime == old  # same value: untouched, Last-Modified stays true
    bigger = {**HOST_VNODES, f"{HOST}[2]": {"resources_available": {"ncpus": 4}}}
    assert hook("exechost_periodic", {"vnode_list": bigger}).accepted
    assert total.read_text() == "20\n" and (machine(base) / "hs06").read_text() == "200\n"


def test_the_demo_keeps_its_features_in_its_folder_and_reports_them(register_plugin,
                                                                     fire_event, base):
    settings = plugin.demo_setup(workdir=base)
    assert settings["freq"] <= 5  # the demo lasts seconds: the periodic must run in it
    register_plugin(plugin, "mjf", config=settings["config"])  # a configuration that loads
    fire_event("exechost_startup", {"vnode_list": HOST_VNODES}, mode="process")
    fire_event("execjob_begin", {"job": a_job(), "vnode_list": {HOST: {}}}, mode="process")
    assert plugin.demo_report(workdir=base) == [
        f"$MACHINEFEATURES for {HOST}: total_cpu=16 hs06=160 grace_secs=3600",
        "$JOBFEATURES directories left after the jobs: 1"]


# -- a host that cannot provide the features is the hook's error: its vnodes go offline -----

NOBODY = 65534


def a_host_error(outcome, *texts: str) -> bool:
    return (outcome.kind == "error" and outcome.fail_action == ("offline_vnodes",)
            and outcome.detail.startswith("HostError: ")
            and all(text in outcome.detail for text in texts))


def test_the_plugin_takes_its_hosts_vnodes_out_on_a_hook_error():
    assert plugin.plugin_info.fail_action == ("offline_vnodes",)


def test_a_base_in_another_users_folder_is_refused_before_any_job_is_written(hook, base):
    if os.geteuid() != 0:
        missing("giving a folder to another user needs root")
    squat = base / "squat"  # made by a user before the admin's `mkdir -p`
    squat.mkdir()
    os.chown(squat, NOBODY, NOBODY)
    outcome = hook("execjob_begin", {"job": a_job(), "vnode_list": {HOST: {}}},
                   jobfeatures_dir=str(squat / "jobfeatures"))
    assert a_host_error(outcome, f"refusing the features folder {squat}/jobfeatures: "
                                 f"{squat} is owned by uid {NOBODY}"), outcome.detail
    assert os.listdir(squat) == []


def test_startup_refuses_a_machine_folder_others_may_write_in(hook, base):
    (base / "machinefeatures").mkdir()
    (base / "machinefeatures").chmod(0o777)
    outcome = hook("exechost_startup", {"vnode_list": HOST_VNODES})
    assert a_host_error(outcome, f"{base}/machinefeatures is writable by everyone"), (
        outcome.detail)
    assert os.listdir(base / "machinefeatures") == []


def test_periodic_leaves_job_folders_alone_in_a_base_others_may_write_in(hook, base):
    hook("execjob_begin", {"job": a_job(), "vnode_list": {HOST: {}}})
    (base / "jobfeatures").chmod(0o777)  # anyone could have swapped 12.server since
    machine(base).mkdir(parents=True)
    (machine(base) / "shutdowntime").write_text(f"{int(time.time()) + 1200}\n")
    outcome = hook("exechost_periodic", {"vnode_list": HOST_VNODES,
                                         "job_list": {"12.server": {"job_state": "R"}}})
    assert not outcome.accepted
    assert f"{base}/jobfeatures is writable by everyone (owner uid 0 (root), mode 0777)" \
        in outcome.message
    assert not (base / "jobfeatures" / "12.server" / "shutdowntime_job").exists()


def test_a_missing_scratch_path_takes_the_host_out_when_a_job_starts(hook, base, caplog):
    """At start-up it is only logged: the file system may be mounted after the MoM
    starts, and a start-up offline lasts until the next start-up."""
    missing = str(base / "no-scratch")
    outcome = hook("exechost_startup", {"vnode_list": HOST_VNODES}, scratch_path=missing)
    assert outcome.accepted, outcome.detail
    assert f"scratch_path = '{missing}': No such file or directory" in caplog.text
    outcome = hook("execjob_begin", {"job": a_job(), "vnode_list": {HOST: {}}})
    assert a_host_error(outcome, f"scratch_path = '{missing}'"), outcome.detail
    assert outcome.consequence == "requeue"  # the job runs elsewhere, not this host
    assert not list(base.glob("jobfeatures/*")) and not list(base.glob("jobfeatures/.*"))


# -- the grace keys: required wherever a drain may reach started jobs (seed 003) --------------

def test_with_the_default_configuration_a_drain_finds_both_grace_keys_there(hook, base):
    assert hook("exechost_startup", {"vnode_list": HOST_VNODES}).accepted
    assert hook("execjob_begin", {"job": a_job(), "vnode_list": {HOST: {}}}).accepted
    job_dir = base / "jobfeatures" / "12.server"
    # Static, so there before any drain: the job knows from its first look it has no grace.
    assert (job_dir / "grace_secs_job").read_text() == "0\n"
    assert (machine(base) / "grace_secs").read_text() == "0\n"
    shutdown = int(time.time()) + 600
    (machine(base) / "shutdowntime").write_text(f"{shutdown}\n")
    assert hook("exechost_periodic", {"vnode_list": HOST_VNODES,
                                      "job_list": {"12.server": {"job_state": "R"}}}).accepted
    assert (job_dir / "shutdowntime_job").read_text() == f"{shutdown}\n"
    assert (job_dir / "grace_secs_job").read_text() == "0\n"
    assert (machine(base) / "grace_secs").read_text() == "0\n"


def test_a_drain_keeps_the_grace_the_job_was_promised_when_it_started(hook, base):
    hook("exechost_startup", {"vnode_list": HOST_VNODES})  # grace_secs_job 0 now
    hook("execjob_begin", {"job": a_job(), "vnode_list": {HOST: {}}})
    job_dir = base / "jobfeatures" / "12.server"
    (job_dir / "grace_secs_job").write_text("900\n")  # as begun under an earlier config
    (machine(base) / "shutdowntime").write_text(f"{int(time.time()) + 60}\n")
    before = time.time()
    assert hook("exechost_periodic", {"vnode_list": HOST_VNODES,
                                      "job_list": {"12.server": {"job_state": "R"}}}).accepted
    announced = int((job_dir / "shutdowntime_job").read_text())
    assert before + 900 - 1 <= announced <= time.time() + 900
