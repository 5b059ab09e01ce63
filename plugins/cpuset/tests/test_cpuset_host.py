"""The execution host's hooks through the runner, on a described machine (a sysfs tree) with
an emulated cgroup tree: what each event makes, the stuck cycle, orphans, the report, and
every error. test_cpuset_engine.py does the same with real cpusets and a real server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pbsplug_cpuset
from pbsplug_cpuset.cgroupfs import detect
from pbsplug_cpuset.fake_sysfs import write_sysfs

PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))
MESSAGE = "Hook cpuset: Unable to clean up one or more cgroups"


@pytest.fixture
def machine(tmp_path, register_plugin):
    """A host with two NUMA nodes of four CPUs (vnodes host[0], host[1]), an emulated
    cgroup v1 tree, and the plugin enabled on it; returns a dict of its paths and a
    ``configure(**more)`` to reload it with other values."""
    write_sysfs(tmp_path / "sys", {0: "0-3", 1: "4-7"})
    (tmp_path / "cg" / "cpuset").mkdir(parents=True)
    base = {"emulate": True, "cgroup_version": "1", "cgroup_root": str(tmp_path / "cg"),
            "sysfs_root": str(tmp_path / "sys"), "state_dir": str(tmp_path / "state"),
            "kill_timeout": 0.4}

    def configure(**more):
        """Load the plugin again with these values as well."""
        return register_plugin(pbsplug_cpuset, "cpuset", config={**base, **more})

    configure()
    return {"root": tmp_path / "cg" / "cpuset", "state": tmp_path / "state",
            "configure": configure, "base": base}


def vnodes(*names, ncpus=4, **attrs):
    return {name: {"state": "free", "resources_available": {"ncpus": ncpus, "host": "host"},
                   **attrs} for name in names}


def job(job_id="1.host", exec_vnode="(host[1]:ncpus=2)"):
    return {"id": job_id, "exec_vnode": exec_vnode, "Resource_List": {"ncpus": 2}}


def begin(fire_event, job_data, names=("host[0]", "host[1]")):
    return fire_event("execjob_begin", {"job": job_data, "vnode_list": vnodes(*names)})


def cpuset_files(root, name):
    path = root / "pbs_jobs" / name
    return (path / "cpuset.cpus").read_text().strip(), (path / "cpuset.mems").read_text().strip()


def test_begin_makes_the_jobs_cpuset_with_its_numa_nodes_cpus(machine, fire_event):
    out = begin(fire_event, job())
    assert out.accepted, out.message
    assert cpuset_files(machine["root"], "1.host") == ("4-5", "1")
    # The next job on host[1] gets the next CPUs; one on host[0] node 0's.
    assert begin(fire_event, job("2.host", "(host[1]:ncpus=2)")).accepted
    assert begin(fire_event, job("3.host", "(host[0]:ncpus=1)")).accepted
    assert cpuset_files(machine["root"], "2.host") == ("6-7", "1")
    assert cpuset_files(machine["root"], "3.host") == ("0", "0")


def test_the_free_node_mask_is_reported_on_the_vnodes(machine, fire_event):
    fire_event("exechost_periodic", {"vnode_list": vnodes("host[0]", "host[1]")})
    out = begin(fire_event, job("1.host", "(host[1]:ncpus=4)"))
    # host[1] is wholly held: only node 0 is free (bit 0).
    assert out.changes["vnode_list"]["host[1]"]["cpuset_free_mask"] == "1"


def test_a_job_that_does_not_fit_is_requeued_with_why(machine, fire_event):
    assert begin(fire_event, job("1.host", "(host[1]:ncpus=3)")).accepted
    out = begin(fire_event, job("2.host", "(host[1]:ncpus=2)"))
    assert not out.accepted
    assert out.consequence == "requeue"
    assert out.detail == ("cpuset for job 2.host: vnode host[1] (NUMA node 1) has 1 free "
                          "CPUs, the job was given 2")
    assert not (machine["root"] / "pbs_jobs" / "2.host").exists()


def test_a_job_without_cpus_runs_without_a_cpuset(machine, fire_event):
    assert begin(fire_event, job("1.host", "(host[1]:mem=1gb)")).accepted
    assert not (machine["root"] / "pbs_jobs" / "1.host").exists()


def test_allow_zero_cpus_false_refuses_such_a_job(machine, fire_event):
    machine["configure"](allow_zero_cpus=False)
    out = begin(fire_event, job("1.host", "(host[1]:mem=1gb)"))
    assert not out.accepted and out.consequence == "delete"
    assert out.detail == ("cpuset enabled with mandatory ncpus >= 1, but job does not "
                          "request ncpus on mother superior: rejecting job")


def test_launch_confines_the_process_and_end_removes_the_cpuset(machine, fire_event):
    assert begin(fire_event, job()).accepted
    proc = subprocess.Popen(["sleep", "60"])
    try:
        out = fire_event("execjob_launch", {"job": job(), "vnode_list": vnodes("host[1]"),
                                            "pid": proc.pid, "argv": ["sleep", "60"]})
        assert out.accepted, out.message
        procs = (machine["root"] / "pbs_jobs" / "1.host" / "cgroup.procs").read_text()
        assert str(proc.pid) in procs.split()
        out = fire_event("execjob_epilogue", {"job": job(), "vnode_list": vnodes("host[1]")})
        assert out.accepted
        assert proc.wait(timeout=10) == -9  # what was left of the job was killed
        assert not (machine["root"] / "pbs_jobs" / "1.host").exists()
    finally:
        proc.kill()
        proc.wait()


def test_launch_of_a_job_whose_cpuset_is_missing_requeues_it(machine, fire_event):
    out = fire_event("execjob_launch", {"job": job(), "vnode_list": vnodes("host[1]"),
                                        "pid": 1, "argv": ["true"]})
    assert not out.accepted and out.consequence == "requeue"
    assert "the cpuset of job 1.host is missing" in out.detail


def stick(root, name, pid):
    """Put process `pid` (one SIGKILL cannot end: the `frozen` fixture) in the cpuset."""
    (root / "pbs_jobs" / name / "cgroup.procs").write_text(f"{pid}\n")


def test_a_stuck_cpuset_is_recorded_busy_then_offline_and_back_once_gone(
        machine, fire_event, frozen):
    machine["configure"](offline_stuck_after=0, online_nodes_min_delay=0)
    assert begin(fire_event, job()).accepted
    stick(machine["root"], "1.host", frozen())
    out = fire_event("execjob_epilogue", {"job": job(), "vnode_list": vnodes("host[1]")})
    changes = out.changes["vnode_list"]["host[1]"]
    assert changes["state"] == "busy,offline"
    assert changes["comment"] == MESSAGE
    assert changes["cpuset_stuck"].startswith("1.host@")
    record = json.loads((machine["state"] / "cpuset_state.json").read_text())
    assert set(record["stuck"]) == {"1.host"}
    # Still stuck at the next periodic: it stays so.
    out = fire_event("exechost_periodic", {"vnode_list": vnodes(
        "host[0]", "host[1]", state="busy,offline", comment=MESSAGE)})
    assert "host[1]" not in out.changes.get("vnode_list", {}) or \
        "state" not in out.changes["vnode_list"]["host[1]"]
    # The process is let go and dies: the next periodic reclaims the cpuset and brings the
    # vnode back.
    frozen.thaw()
    out = fire_event("exechost_periodic", {"vnode_list": {
        **vnodes("host[0]"), **vnodes("host[1]", state="busy,offline", comment=MESSAGE,
                                      cpuset_stuck="1.host@1")}})
    changes = out.changes["vnode_list"]["host[1]"]
    assert changes["state"] == "free"
    assert changes["comment"] is None
    assert changes["cpuset_stuck"] is None
    assert not (machine["root"] / "pbs_jobs" / "1.host").exists()


def test_a_stuck_vnode_goes_offline_only_after_offline_stuck_after(
        machine, fire_event, frozen):
    assert begin(fire_event, job()).accepted
    stick(machine["root"], "1.host", frozen())
    out = fire_event("execjob_end", {"job": job(), "vnode_list": vnodes("host[1]")})
    assert out.changes["vnode_list"]["host[1]"]["state"] == "busy"
    record_file = machine["state"] / "cpuset_state.json"
    record = json.loads(record_file.read_text())
    record["stuck"]["1.host"] = time.time() - 601
    record_file.write_text(json.dumps(record))
    out = fire_event("exechost_periodic", {"vnode_list": vnodes("host[1]", state="busy")})
    assert out.changes["vnode_list"]["host[1]"]["state"] == "busy,offline"


def stuck_then_reclaimed(machine, fire_event, frozen):
    """Job 1.host's cpuset gets stuck at its end (offline at once), then its process dies:
    the outcome of the next exechost_periodic."""
    assert begin(fire_event, job()).accepted
    stick(machine["root"], "1.host", frozen())
    fire_event("execjob_end", {"job": job(), "vnode_list": vnodes("host[1]")})
    frozen.thaw()
    return fire_event("exechost_periodic", {"vnode_list": vnodes(
        "host[1]", state="busy,offline", comment=MESSAGE)})


def test_online_waits_for_min_delay(machine, fire_event, frozen):
    machine["configure"](offline_stuck_after=0, online_nodes_min_delay=3600)
    out = stuck_then_reclaimed(machine, fire_event, frozen)
    # Reclaimed: busy goes, offline stays until online_nodes_min_delay has passed.
    assert out.changes["vnode_list"]["host[1]"]["state"] == "offline"


def test_a_cpuset_of_no_running_job_is_renamed_orphan_and_reaped(machine, fire_event,
                                                                  caplog):
    assert begin(fire_event, job("1.host")).accepted
    assert begin(fire_event, job("2.host", "(host[0]:ncpus=1)")).accepted
    out = fire_event("exechost_periodic", {"vnode_list": vnodes("host[0]", "host[1]"),
                                           "job_list": {"2.host": {"job_state": "R"}}})
    assert out.accepted
    names = sorted(p.name for p in (machine["root"] / "pbs_jobs").iterdir() if p.is_dir())
    assert names == ["2.host"]
    assert "renamed 1.host.orphan and reaped" in caplog.text


def test_startup_removes_empty_cpusets_and_sets_numa_vnodes_ncpus(machine, fire_event):
    machine["configure"](exclude_cpus=[0])
    cpusets = detect(machine["base"]["cgroup_root"], "1", emulate=True)
    cpusets.ensure_parent("pbs_jobs")
    cpusets.create("pbs_jobs/7.host", [1], [0])
    out = fire_event("exechost_startup", {"vnode_list": vnodes("host[0]", "host[1]")})
    assert out.accepted, out.message
    assert not cpusets.exists("pbs_jobs/7.host")
    changes = out.changes["vnode_list"]
    assert changes["host[0]"]["resources_available"]["ncpus"] == 3
    assert changes["host[1]"]["resources_available"]["ncpus"] == 4


@pytest.mark.parametrize("config, problem", [
    ({"cgroup_root": "relative"}, "expected an absolute path"),
    # checked level by level as written: '..' after a link names another folder
    ({"cgroup_root": "/sys/fs/../fs/cgroup"}, "cgroup_root = \"/sys/fs/../fs/cgroup\": "
                                              "expected a path without '..'"),
    ({"state_dir": "/var/x/../y"}, "state_dir = \"/var/x/../y\": expected a path without '..'"),
    ({"state_dir": "records"}, "state_dir = \"records\": expected an absolute path"),
    ({"cgroup_version": "3"}, "one of 'auto', '1', '2'"),
    ({"octants": ["0-3", "3-7"]}, "physical id 3 is in octant 0 and in octant 1"),
    ({"octants": ["a-b"]}, "octant 0"),
    ({"physical_ids": "0,0"}, "0"),
    ({"node_numbers": {"n1": -1}}, "wrong: n1"),
    ({"vnode_numa": {"n1": "x"}}, "wrong: n1"),
    ({"placement_type": "random"}, "load_balanced"),
    ({"kill_timeout": 0}, "> 0"),
    ({"node_numbers": {"n1": 1 << 20}}, "below 1048576); wrong: n1"),
    ({"cgroup_prefix": "/"}, "expected a cpuset under the cgroup root"),
    ({"cgroup_prefix": ""}, "expected a cpuset under the cgroup root"),
    ({"cgroup_prefix": "jobs/../x"}, "no '..'"),
    ({"octants": ["0-9"], "physical_ids": "0-3"}, "physical_ids does not map"),
    ({"no_such_key": 1}, "no_such_key"),
    # past what a float holds: OverflowError where the hooks compute with them
    ({"starve_after": 10**400}, "<= 315360000"),
    ({"stuck_grace": 10**400}, "<= 315360000"),
    ({"offline_stuck_after": 10**400}, "<= 315360000"),
    ({"online_nodes_min_delay": 10**400}, "<= 315360000"),
    ({"straddle_after": 10**400}, "<= 315360000"),
    ({"kill_timeout": 1e300}, "<= 86400"),
    # a CPU id below 0 excluded nothing, and said nothing
    ({"exclude_cpus": [0, -1]}, "exclude_cpus = [0, -1]: expected CPU ids (whole numbers "
                                ">= 0); wrong: -1"),
])
def test_bad_configuration_is_refused_at_load_with_what_was_wrong(register_plugin, config,
                                                                  problem):
    record = register_plugin(pbsplug_cpuset, "cpuset", config=config, check=False)
    assert record.status == "failed"
    assert problem in record.failure_text()


def test_a_host_without_cpusets_fails_the_hook_with_what_to_fix(tmp_path, register_plugin,
                                                                fire_event, caplog):
    register_plugin(pbsplug_cpuset, "cpuset", config={"cgroup_root": str(tmp_path)})
    out = begin(fire_event, job())
    assert out.kind == "error"
    assert "offline_vnodes" in out.fail_action
    assert "cpusets cannot be made on this host" in caplog.text
    assert "emulate" in caplog.text


@pytest.mark.parametrize("text, why", [
    ("{not json", "Expecting property name"),
    # json.loads' RecursionError: the hook's error, in Python's words
    ('{"jobs": ' + "[" * 100_000, "nested too deeply"),
    # json.loads kept the last of a key twice, and read a value too deep to copy
    ('{"jobs": {}, "jobs": {}}', 'the key "jobs" twice in one object'),
    ('{"nodes": ' + "[" * 600 + "]" * 600 + "}", "nested more than 100 levels deep"),
    ("[1]", "(a JSON array, not an object)"),  # (it said no why)
    (b'{"jobs": {"\xff": 1}}', "'utf-8' codec can't decode byte 0xff")])
def test_a_broken_record_is_named(machine, fire_event, caplog, text, why):
    machine["state"].mkdir()
    path = machine["state"] / "cpuset_state.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    out = begin(fire_event, job())
    assert out.kind == "error"
    assert f"{machine['state'] / 'cpuset_state.json'}: not the cpuset hook's JSON record" in \
        caplog.text
    assert why in caplog.text and "remove it to start afresh" in caplog.text


def test_the_flags_are_the_sites(machine, fire_event):
    machine["configure"](mem_hardwall=True, memory_spread_page=True)
    assert begin(fire_event, job()).accepted
    path = machine["root"] / "pbs_jobs" / "1.host"
    assert (path / "cpuset.mem_hardwall").read_text().strip() == "1"
    assert (path / "cpuset.memory_spread_page").read_text().strip() == "1"


def test_mem_fences_false_gives_every_memory_node(machine, fire_event):
    machine["configure"](mem_fences=False)
    assert begin(fire_event, job()).accepted
    assert cpuset_files(machine["root"], "1.host") == ("4-5", "0-1")


def test_an_earlier_runs_stuck_cpuset_is_set_aside_and_the_job_gets_a_new_one(
        machine, fire_event, frozen):
    assert begin(fire_event, job("1.host", "(host[1]:ncpus=2)")).accepted
    stick(machine["root"], "1.host", frozen())
    # The job was requeued and comes back to this host before its old cpuset went.
    out = begin(fire_event, job("1.host", "(host[1]:ncpus=2)"))
    assert out.accepted, out.detail
    assert cpuset_files(machine["root"], "1.host") == ("6-7", "1")  # not the stuck CPUs
    assert (machine["root"] / "pbs_jobs" / "1.host.orphan").is_dir()
    record = json.loads((machine["state"] / "cpuset_state.json").read_text())
    assert set(record["stuck"]) == {"1.host.orphan"}
    assert record["jobs"]["1.host.orphan"] == {"host[1]": 2}


def test_on_cgroup_v2_an_orphan_is_reaped_under_its_own_name(tmp_path, register_plugin,
                                                             fire_event, caplog):
    write_sysfs(tmp_path / "sys", {0: "0-3"})
    (tmp_path / "cg").mkdir()
    register_plugin(pbsplug_cpuset, "cpuset", config={
        "emulate": True, "cgroup_version": "2", "cgroup_root": str(tmp_path / "cg"),
        "sysfs_root": str(tmp_path / "sys"), "state_dir": str(tmp_path / "state")})
    assert begin(fire_event, job("1.host", "(host:ncpus=1)"), names=("host",)).accepted
    assert (tmp_path / "cg" / "pbs_jobs" / "1.host" / "cgroup.procs").exists()
    out = fire_event("exechost_periodic", {"vnode_list": vnodes("host"), "job_list": {}})
    assert out.accepted, out.detail
    assert not (tmp_path / "cg" / "pbs_jobs" / "1.host").exists()
    assert "cpuset pbs_jobs/1.host belongs to no job on this host: reaped" in caplog.text


def test_a_stuck_orphan_on_a_host_without_numa_vnodes_holds_the_hosts_vnode(
        tmp_path, register_plugin, fire_event, frozen):
    write_sysfs(tmp_path / "sys", {0: "0-3"})
    (tmp_path / "cg" / "cpuset").mkdir(parents=True)
    register_plugin(pbsplug_cpuset, "cpuset", config={
        "emulate": True, "cgroup_version": "1", "cgroup_root": str(tmp_path / "cg"),
        "sysfs_root": str(tmp_path / "sys"), "state_dir": str(tmp_path / "state")})
    cpusets = detect(tmp_path / "cg", "1", emulate=True, cpus=[0, 1, 2, 3], mems=[0])
    cpusets.ensure_parent("pbs_jobs")
    cpusets.create("pbs_jobs/5.host", [2], [0])  # from before a crash: no record of it
    cpusets.attach("pbs_jobs/5.host", frozen())
    out = fire_event("exechost_periodic", {"vnode_list": vnodes("host1"), "job_list": {}})
    changes = out.changes["vnode_list"]["host1"]
    assert changes["state"] == "busy"
    assert changes["cpuset_stuck"].startswith("5.host.orphan@")


def test_with_online_offlined_nodes_false_a_vnode_stays_offline_and_is_offlined_again(
        machine, fire_event, frozen):
    machine["configure"](offline_stuck_after=0, online_offlined_nodes=False)
    out = stuck_then_reclaimed(machine, fire_event, frozen)
    assert out.changes["vnode_list"]["host[1]"]["state"] == "offline"  # left to the admin
    # The admin brings it back (pbsnodes -r); a later stuck cpuset offlines it again.
    fire_event("exechost_periodic", {"vnode_list": vnodes("host[1]")})
    assert begin(fire_event, job("2.host")).accepted
    stick(machine["root"], "2.host", frozen())
    out = fire_event("execjob_end", {"job": job("2.host"), "vnode_list": vnodes("host[1]")})
    assert out.changes["vnode_list"]["host[1]"]["state"] == "busy,offline"
    assert out.changes["vnode_list"]["host[1]"]["comment"] == MESSAGE


def test_a_cpuset_removed_behind_the_hooks_back_is_forgotten(machine, fire_event):
    fire_event("exechost_periodic", {"vnode_list": vnodes("host[0]", "host[1]")})
    assert begin(fire_event, job("1.host", "(host[1]:ncpus=4)")).accepted
    (machine["root"] / "pbs_jobs" / "1.host" / "cgroup.procs").write_text("")
    detect(machine["base"]["cgroup_root"], "1", emulate=True).remove("pbs_jobs/1.host")
    out = fire_event("exechost_periodic", {"vnode_list": vnodes("host[0]", "host[1]"),
                                           "job_list": {"1.host": {"job_state": "R"}}})
    assert out.changes["vnode_list"]["host[1]"]["cpuset_free_mask"] == "3"
    record = json.loads((machine["state"] / "cpuset_state.json").read_text())
    assert record["jobs"] == {}


def test_startup_gives_a_hosts_only_vnode_the_cpus_a_job_may_get(machine, fire_event):
    machine["configure"](exclude_cpus=[0, 5])
    out = fire_event("exechost_startup", {"vnode_list": vnodes("host", ncpus=8)})
    assert out.changes["vnode_list"]["host"]["resources_available"]["ncpus"] == 6


def status(home, *args):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    return subprocess.run([PBSPLUG, "cpuset", "status", *args], capture_output=True,
                          text=True, env={**clean, "PBSPLUG_HOME": str(home)}, timeout=60)


def test_the_status_command_shows_cpusets_stuck_ones_and_the_mask(machine, fire_event,
                                                                   tmp_path, frozen):
    fire_event("exechost_periodic", {"vnode_list": vnodes("host[0]", "host[1]")})
    assert begin(fire_event, job("1.host", "(host[1]:ncpus=4)")).accepted
    assert begin(fire_event, job("2.host", "(host[0]:ncpus=1)")).accepted
    stick(machine["root"], "2.host", frozen())
    fire_event("execjob_end", {"job": job("2.host", "(host[0]:ncpus=1)"),
                               "vnode_list": vnodes("host[0]")})
    home = tmp_path / "home"
    home.mkdir()
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in machine["base"].items())
    (home / "site.toml").write_text(f"[plugins.cpuset]\nenabled = true\n"
                                    f"[plugins.cpuset.config]\n{lines}\n")
    proc = status(home)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "cgroup v1 (emulated) cpusets under" in text
    assert "free-node mask: 0 (nodes none)" in text  # node 1 held, node 0 stuck
    assert re.search(r"1\.host\s+4-7\s+1\s+host\[1\]\s+0\s+job", text), text
    assert re.search(r"2\.host\s+0\s+0\s+host\[0\]\s+1\s+stuck for", text), text
    record = json.loads(status(home, "--json").stdout)
    assert [c["name"] for c in record["cpusets"]] == ["1.host", "2.host"]
    assert record["cpusets"][1]["stuck_for"] >= 0


def test_the_status_command_says_what_is_wrong(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "site.toml").write_text(f'[plugins.cpuset.config]\ncgroup_root = "{tmp_path}"\n')
    proc = status(home)
    assert proc.returncode == 1
    assert proc.stderr.startswith("pbsplug cpuset: ")
    assert "emulate" in proc.stderr


@pytest.mark.parametrize("mode", ["process", "inprocess"])
def test_an_unexpected_error_holds_the_job_and_leaves_the_node_in_service(
        machine, fire_event, monkeypatch, mode):
    """PBS's cgroups hook (main()): any other exception holds the job (s), requeues it and
    rejects; no hook error, so fail_action offline_vnodes does not take the node out."""
    from pbsplug_cpuset.host import Host

    def broken(self, event):
        raise RuntimeError("something nobody expected")

    monkeypatch.setattr(Host, "begin", broken)
    out = fire_event("execjob_begin", {"job": job(), "vnode_list": vnodes("host[0]", "host[1]")},
                     mode=mode)
    assert (out.kind, out.consequence, out.fail_action) == ("reject", "requeue", ())
    assert out.detail == ("execjob_begin: RuntimeError: something nobody expected "
                          "(system hold set)")
    assert out.changes["job"]["Hold_Types"] == "s" and out.job_action == "rerun"
    assert "state" not in out.changes.get("vnode_list", {}).get("host[1]", {})


def test_an_unexpected_error_after_the_job_ran_does_not_run_it_again(
        machine, fire_event, monkeypatch):
    """Before, the end events held and requeued a job that had finished."""
    from pbsplug_cpuset.host import Host

    def broken(self, event):
        raise RuntimeError("something nobody expected")

    monkeypatch.setattr(Host, "end", broken)
    for event in ("execjob_epilogue", "execjob_end", "execjob_abort"):
        out = fire_event(event, {"job": job(), "vnode_list": vnodes("host[1]")})
        assert out.kind == "reject" and out.fail_action == (), event
        assert out.detail == f"{event}: RuntimeError: something nobody expected"
        assert "Hold_Types" not in out.changes.get("job", {}) and out.job_action is None


def test_cpusets_the_hook_did_not_make_are_never_reaped(machine, fire_event):
    """A site's own cpuset beside the jobs' (not named as a job) was killed and removed at
    every periodic run; a job's is still reaped when the host no longer runs it."""
    cpusets = detect(machine["base"]["cgroup_root"], "1", emulate=True)
    cpusets.ensure_parent("pbs_jobs")
    cpusets.create("pbs_jobs/admin_tools", [0], [0])
    cpusets.create("pbs_jobs/9.host", [1], [0])
    for event, more in (("exechost_startup", {}), ("exechost_periodic", {"job_list": {}})):
        out = fire_event(event, {"vnode_list": vnodes("host[0]", "host[1]"), **more})
        assert out.accepted, out.message
    assert cpusets.exists("pbs_jobs/admin_tools") and not cpusets.exists("pbs_jobs/9.host")


def test_numbers_are_ascii_digits(machine, fire_event):
    """\\d and int() also read Arabic-Indic digits (and int() '1_0'): a site's cpuset named
    '\u0661\u0662' was taken for a job's and reaped, an exec_vnode chunk's ncpus=\u0662 gave
    the job 2 CPUs."""
    from pbsplug_cpuset.host import JOB_CPUSET

    assert JOB_CPUSET.fullmatch("12[3].host") and not JOB_CPUSET.fullmatch("\u0661\u0662")
    cpusets = detect(machine["base"]["cgroup_root"], "1", emulate=True)
    cpusets.ensure_parent("pbs_jobs")
    cpusets.create("pbs_jobs/\u0661\u0662", [0], [0])
    out = fire_event("exechost_periodic", {"vnode_list": vnodes("host[0]", "host[1]"),
                                           "job_list": {}})
    assert out.accepted, out.message
    assert cpusets.exists("pbs_jobs/\u0661\u0662")
    for ncpus in ("\u0662", "1_0"):
        out = begin(fire_event, job("5.host", f"(host[1]:ncpus={ncpus})"))
        assert out.kind == "reject", out
        assert f"exec_vnode host[1]: ncpus={ncpus!r} is not a whole number" in out.detail
        assert not cpusets.exists("pbs_jobs/5.host")


def test_begins_at_once_never_share_cpus_nor_lose_each_other(machine, tmp_path):
    """Slurm runs prologs at once, PBS's MoM runs hooks as processes: each begin reads which
    CPUs are taken, makes its cpuset and saves the record under one lock. Without it two
    jobs got the same CPUs, and one save dropped the other's job from the record."""
    config = json.dumps({**machine["base"], "kill_timeout": 5})
    script = tmp_path / "begin.py"
    script.write_text(f"""
import json, sys, time
import pbsplug_cpuset
from pbsplug.events import Event
from pbsplug.plugins import PluginSet
from pbsplug.runner import Runner
from pbsplug.siteconfig import PluginSite, SiteConfig
from pbsplug_cpuset.host import Host
chosen = Host._assign
def slowly(self, *args):  # widens the window between reading and making a cpuset
    cpus = chosen(self, *args)
    time.sleep(0.3)
    return cpus
Host._assign = slowly
plugins = PluginSet(SiteConfig(path={str(tmp_path / "site.toml")!r}))
plugins.site.plugins["cpuset"] = PluginSite("cpuset", enabled=True, attributes={{}},
                                            config=json.loads({config!r}))
plugins.add("cpuset", pbsplug_cpuset)
vnodes = {{n: {{"state": "free", "resources_available": {{"ncpus": 4, "host": "host"}}}}
          for n in ("host[0]", "host[1]")}}
sys.stdin.readline()  # all start together
for job_id in sys.argv[1:]:
    out = Runner(plugins, mode="inprocess").fire(Event.from_dict("execjob_begin", {{
        "job": {{"id": job_id, "exec_vnode": "(host[1]:ncpus=1)",
                "Resource_List": {{"ncpus": 1}}}}, "vnode_list": vnodes}}))
    print(job_id, out.kind, out.message, flush=True)
""")
    procs = [subprocess.Popen([sys.executable, str(script), *ids], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
             for ids in (("1.host", "3.host"), ("2.host", "4.host"))]
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert all(line.split()[1] == "accept" for out in outs for line in out.splitlines()), outs
    cpus = {name: cpuset_files(machine["root"], name)[0]
            for name in ("1.host", "2.host", "3.host", "4.host")}
    assert sorted(cpus.values()) == ["4", "5", "6", "7"], cpus
    record = json.loads((machine["state"] / "cpuset_state.json").read_text())
    assert sorted(record["jobs"]) == ["1.host", "2.host", "3.host", "4.host"]


def test_a_vnode_number_no_mask_holds_is_left_out_of_the_mask(machine, fire_event, caplog):
    """A name ending in 1048576 or more made every report fail (the job was held) and
    every periodic run with it."""
    names = ("host[0]", "cn1048576")
    out = fire_event("exechost_periodic", {"vnode_list": vnodes(*names)})
    assert out.accepted, out.message
    assert out.changes["vnode_list"]["host[0]"]["cpuset_free_mask"] == "1"
    assert "vnode cn1048576: logical number 1048576 is beyond the free-node mask's" in \
        caplog.text
    out = fire_event("execjob_begin", {"job": job("1.host", "(host[0]:ncpus=1)"),
                                       "vnode_list": vnodes(*names)})
    assert out.accepted, out.message



FORGE = """
import json, os, sys
state = sys.argv[1]
with open(os.path.join(state, "cpuset_state.json"), "w") as handle:
    json.dump({"jobs": {"admin_tools": {"host[0]": 1}}}, handle)
open(os.path.join(state, "cpuset_state.lock"), "w").close()
"""


def test_a_state_dir_others_may_write_is_refused_and_never_acted_on(machine, fire_event,
                                                                    caplog, shared_tmp,
                                                                    attacker, unsafe_folder):
    """Another user who could write in state_dir could name a site's cpuset in the record
    (the hook, as root, killed what it held and removed it), or hold cpuset_state.lock (every
    event waited until its alarm). Such a folder is now the host's error (offline_vnodes),
    with one line naming it, its owner and its mode; nothing in it is read or written."""
    state, problem = unsafe_folder.path, unsafe_folder.problem
    done = attacker.python(FORGE, str(state))
    assert done.returncode == 0, done.stderr
    planted = {p.name: p.read_bytes() for p in state.iterdir()}
    cpusets = detect(machine["base"]["cgroup_root"], "1", emulate=True)
    cpusets.ensure_parent("pbs_jobs")
    cpusets.create("pbs_jobs/admin_tools", [0], [0])
    machine["configure"](state_dir=str(state))
    for event, data in (("exechost_periodic", {"vnode_list": vnodes("host[0]", "host[1]"),
                                               "job_list": {}}),
                        ("execjob_begin", {"job": job(), "vnode_list": vnodes("host[1]")})):
        caplog.clear()
        out = fire_event(event, data)
        assert out.kind == "error", event  # begin's error takes the host offline
        assert event != "execjob_begin" or "offline_vnodes" in out.fail_action
        assert re.search(rf"refusing state_dir {re.escape(str(state))}: {re.escape(problem)}"
                         r", so another user could [^\n]*, or choose another "
                         r"folder\n", caplog.text), caplog.text  # one line
    assert cpusets.exists("pbs_jobs/admin_tools")  # named in the forged record: left alone
    assert not cpusets.exists("pbs_jobs/1.host")
    assert {p.name: p.read_bytes() for p in state.iterdir()} == planted
    home = shared_tmp / "home"
    home.mkdir()
    lines = "\n".join(f"{k} = {json.dumps(v)}"
                      for k, v in {**machine["base"], "state_dir": str(state)}.items())
    (home / "site.toml").write_text(f"[plugins.cpuset]\nenabled = true\n"
                                    f"[plugins.cpuset.config]\n{lines}\n")
    proc = status(home)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"pbsplug cpuset: refusing state_dir {state}: {problem}")


@pytest.mark.parametrize("name", ["cpuset_state.json", "cpuset_state.lock"])
def test_a_record_or_lock_of_another_user_left_in_the_state_dir_is_refused(
        machine, fire_event, caplog, attacker, name):
    """A folder made safe after a user could write in it may still hold that user's record
    (theirs to edit) or lock (theirs to hold): refused, naming the file, owner and mode."""
    state = machine["state"]
    state.mkdir()
    (state / name).write_text("{}")
    os.chown(state / name, attacker.uid, attacker.gid)
    out = begin(fire_event, job())
    assert out.kind == "error" and "offline_vnodes" in out.fail_action
    assert (f"refusing {state / name}: owned by uid {attacker.uid} ({attacker.user}), mode "
            "0644, so another user could have written it; remove it") in caplog.text
    assert not (state / name).read_text().strip("{}")


def test_the_state_dir_is_made_private_whatever_the_umask(machine, fire_event):
    old = os.umask(0o002)
    try:
        assert begin(fire_event, job()).accepted
    finally:
        os.umask(old)
    assert (machine["state"].stat().st_mode & 0o7777) == 0o755
    assert (machine["state"] / "cpuset_state.lock").stat().st_mode & 0o777 == 0o600
