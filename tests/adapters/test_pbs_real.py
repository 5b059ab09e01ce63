"""The PBS adapter against a real OpenPBS (conftest.py builds and starts it): plugins installed
with ``pbsplug pbs install`` run inside PBS's own hooks, with PBS's consequences."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pbsplug.testing import site_toml

from .conftest import MOM_HOOKS, RealPbs

#: A plugin whose behaviour each test picks with the job's name.
PBSTEST = """
import json
import time
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(api="1.0", events=("queuejob", "runjob", "execjob_begin",
                                             "execjob_prologue", "execjob_launch",
                                             "execjob_end"),
                         fail_action=("offline_vnodes",), alarm=4)


@hookimpl
def queuejob(event):
    name = str(event.job.Job_Name or "")
    if name.startswith("q-reject"):
        event.reject("pbstest: refused at queuejob")
    if name.startswith("q-account"):
        event.job.Account_Name = "pbstest-account"


@hookimpl
def runjob(event):
    if str(event.job.Job_Name or "").startswith("r-reject"):
        event.reject("pbstest: not now")


@hookimpl
def execjob_prologue(event):
    if str(event.job.Job_Name or "").startswith("p-reject"):
        event.reject("pbstest: rejected at prologue")


@hookimpl
def execjob_launch(event):
    if str(event.job.Job_Name or "").startswith("l-reject"):
        event.reject("pbstest: rejected at launch")
    event.env["PBSTEST_LAUNCH"] = "seen"


@hookimpl
def execjob_begin(event):
    name = str(event.job.Job_Name or "")
    if name.startswith("b-reject"):
        event.reject("pbstest: rejected at begin")
    if name.startswith("b-rerun"):
        event.job.rerun()
        event.reject("pbstest: rerun at begin")
    if name.startswith("b-delete"):
        event.job.delete()
        event.reject("pbstest: deleted at begin")
    if name.startswith("b-raise"):
        raise RuntimeError("pbstest: boom at begin")
    if name.startswith("b-hang"):
        while True:
            time.sleep(0.5)
    event.logjobmsg(event.job.id, "pbstest: begin accepted on "
                    + ",".join(sorted(event.vnode_list)))


@hookimpl
def execjob_end(event):
    if str(event.job.Job_Name or "").startswith("e-reject"):
        event.reject("pbstest: rejected at end")
"""


def _site(tmp_path: Path, text: str) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    site = home / "site.toml"
    site.write_text(text)
    return site


def _install(pbs: RealPbs, site: Path, dists=None, *extra: str) -> str:
    """``pbsplug pbs install``; with `dists`, its plugins are installed and imported too."""
    if dists is None:
        return pbs.pbsplug(site, "pbs", "install", *extra).stdout
    return pbs.pbsplug(site, "pbs", "install", *extra, "--site-dir", str(dists.root),
                       path=dists.root).stdout


def _mom_log() -> str:
    logs = sorted(Path("/var/spool/pbs/mom_logs").glob("*"))
    return logs[-1].read_text(errors="replace") if logs else ""


@pytest.fixture
def pbstest(pbs: RealPbs, dists, tmp_path):
    """The pbstest plugin installed into PBS as pbsplug_pbstest."""
    dists.add("pbstest", PBSTEST)
    site = _site(tmp_path, site_toml("pbstest"))
    out = _install(pbs, site, dists)
    assert "create hook pbsplug_pbstest" in out
    pbs.wait_mom_hooks(["pbsplug_pbstest"])
    return site


# -- install, status, uninstall ---------------------------------------------------------------

def test_install_twice_changes_nothing_the_second_time_and_uninstall_restores_pbs(
        pbs: RealPbs, tmp_path):
    before = pbs.hooks()
    site = _site(tmp_path, site_toml("mjf") + site_toml("cray_atom").replace(
        "[plugins]\n", "") + "\n[plugins.multisched]\nenabled = true\n")
    first = _install(pbs, site)
    assert "create hook pbsplug_mjf" in first and "create hook pbsplug_cray_atom" in first
    assert "multisched: nothing to install: PBS runs several schedulers" in first
    assert first.count("nothing to install") == 1  # (the reason said it again)
    assert "PBS_cray_atom" in first  # PBS ships its own ATOM hook: install says so
    listed = pbs.hooks()
    assert "Hook pbsplug_mjf" in listed and "Hook pbsplug_cray_atom" in listed
    second = _install(pbs, site)
    assert "pbsplug_mjf is up to date" in second
    assert not any(verb in second for verb in ("create hook", "set hook", "import hook"))
    status = pbs.pbsplug(site, "pbs", "status").stdout
    assert "pbsplug_mjf: installed" in status and "pbsplug_cray_atom: installed" in status

    # A changed attribute is the only thing a new install touches; status shows it first.
    site.write_text(site.read_text().replace("[plugins.mjf]\nenabled = true",
                                             "[plugins.mjf]\nenabled = true\nalarm = 17"))
    assert "differs: qmgr -c 'set hook pbsplug_mjf alarm = 17'" in pbs.pbsplug(
        site, "pbs", "status").stdout
    third = _install(pbs, site)
    assert "set hook pbsplug_mjf alarm = 17" in third
    # The config file carries the attributes too; the script is the same, and so is the
    # other plugin's hook.
    assert "application/x-config" in third and "application/x-python" not in third
    assert "pbsplug_cray_atom is up to date" in third

    out = pbs.pbsplug(site, "pbs", "uninstall").stdout
    assert "delete hook pbsplug_mjf" in out and "delete hook pbsplug_cray_atom" in out
    assert pbs.hooks() == before


def test_install_can_disable_pbs_own_hook_for_the_same_feature(pbs: RealPbs, tmp_path):
    site = _site(tmp_path, site_toml("cray_atom"))
    pbs.qmgr("set pbshook PBS_cray_atom enabled = true")
    try:
        out = _install(pbs, site, None, "--disable-pbs-hooks")
        assert "set pbshook PBS_cray_atom enabled = false" in out
        assert "enabled = false" in pbs.qmgr("list pbshook PBS_cray_atom")
    finally:
        pbs.qmgr("set pbshook PBS_cray_atom enabled = false", check=False)


def test_dry_run_prints_the_commands_and_files_and_changes_nothing(pbs: RealPbs, tmp_path):
    before = pbs.hooks()
    site = _site(tmp_path, site_toml("mjf"))
    out = _install(pbs, site, None, "--dry-run")
    assert "create hook pbsplug_mjf" in out and "--- FILE (py)" in out
    assert '"plugin": "mjf"' in out and "dry run: nothing was changed" in out
    assert pbs.hooks() == before


def test_qmgr_errors_are_one_line_with_pbs_text(pbs: RealPbs, tmp_path):
    site = _site(tmp_path, site_toml("mjf"))
    done = pbs.pbsplug(site, "pbs", "install", "--qmgr", "qmgr-not-here", check=False)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "qmgr-not-here: not found" in done.stderr


# -- plugins inside PBS ---------------------------------------------------------------------

def test_mjf_variables_and_files_reach_a_real_pbs_job(pbs: RealPbs, tmp_path):
    out_file = tmp_path / "mjf.out"
    jobfeatures = tmp_path / "jf"
    site = _site(tmp_path, site_toml("mjf", {
        "hs06_per_cpu": 10.0, "jobfeatures_dir": str(jobfeatures),
        "machinefeatures_dir": str(tmp_path / "mf")}, freq=2))
    _install(pbs, site)
    pbs.wait_mom_hooks(["pbsplug_mjf"])
    # exechost_periodic (or exechost_startup) writes the host's $MACHINEFEATURES.
    deadline = time.monotonic() + 30
    while not (tmp_path / "mf").is_dir() or not any((tmp_path / "mf").iterdir()):
        assert time.monotonic() < deadline, "exechost_periodic never wrote $MACHINEFEATURES"
        time.sleep(0.3)
    job = pbs.qsub('echo "JF=$JOBFEATURES"; cat "$JOBFEATURES/allocated_cpu" '
                   '"$JOBFEATURES/hs06_job"; echo "MF=$MACHINEFEATURES"\n',
                   "-j", "oe", "-o", str(out_file), "-l", "walltime=00:05:00")
    attrs = pbs.wait(job)
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    lines = out_file.read_text().split()
    assert lines[0] == f"JF={jobfeatures}/{job}"
    assert lines[1:3] == ["1", "10"]
    assert lines[3].startswith(f"MF={tmp_path / 'mf'}/")
    assert not (jobfeatures / job).exists()  # execjob_end removed the job's directory


def test_cray_atom_tells_the_atom_service_of_a_real_job(pbs: RealPbs, tmp_path):
    from pbsplug_cray_atom.fake import FakeAtom

    sock = Path("/tmp") / f"pbsplug-atom-{tmp_path.name[-8:]}.sock"
    atom = FakeAtom(sock).start()  # a socket on a file path crosses PBS's namespace
    try:
        site = _site(tmp_path, site_toml("cray_atom", {"unix_socket_file": str(sock)}))
        _install(pbs, site)
        pbs.wait_mom_hooks(["pbsplug_cray_atom"])
        job = pbs.qsub("true\n", "-l", "walltime=00:05:00")
        assert pbs.wait(job)["Exit_status"] == 0
        deadline = time.monotonic() + 10
        while len(atom.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        methods = [(r.method, r.path) for r in atom.requests]
        assert methods == [("POST", "/rm/v1/jobs"), ("DELETE", f"/rm/v1/jobs/{job}")]
        assert atom.requests[0].body["jobid"] == job and atom.requests[0].body["uid"] == 0
    finally:
        atom.stop()


# -- PBS's consequences of each outcome -------------------------------------------------------

def test_a_queuejob_reject_refuses_qsub_with_the_hooks_message(pbs: RealPbs, pbstest):
    done = pbs.run("qsub", "-N", "q-reject-1", input="true\n", check=False)
    assert done.returncode != 0 and "pbstest: refused at queuejob" in done.stderr
    job = pbs.qsub("true\n", "-N", "q-account-1")
    attrs = pbs.wait(job)
    assert attrs["Exit_status"] == 0
    assert attrs["Account_Name"] == "pbstest-account"  # a queuejob hook's change, kept


def test_a_runjob_reject_keeps_the_job_queued_with_pbs_comment(pbs: RealPbs, pbstest):
    job = pbs.qsub("true\n", "-N", "r-reject-1")
    deadline = time.monotonic() + 30
    while "pbstest: not now" not in (pbs.job(job).get("comment") or ""):
        assert time.monotonic() < deadline, pbs.job(job).get("comment")
        time.sleep(0.3)
    assert pbs.job(job)["job_state"] == "Q"


def test_prologue_reject_requeues_and_launch_reject_deletes(pbs: RealPbs, pbstest):
    prologue = pbs.qsub("true\n", "-N", "p-reject-1")
    assert pbs.wait(prologue, "H")["comment"] == "job held, too many failed attempts to run"
    launch = pbs.qsub("true\n", "-N", "l-reject-1")
    attrs = pbs.wait(launch, "F")
    assert attrs.get("Exit_status") != 0
    assert "pbstest: rejected at launch" in _mom_log()


def test_the_launch_environment_and_rerun(pbs: RealPbs, pbstest, tmp_path):
    out = tmp_path / "env.out"
    job = pbs.qsub('echo "$PBSTEST_LAUNCH"\n', "-N", "env-1", "-j", "oe", "-o", str(out))
    assert pbs.wait(job)["Exit_status"] == 0
    assert out.read_text().strip() == "seen"  # execjob_launch's env change reached the job
    rerun = pbs.qsub("true\n", "-N", "b-rerun-1")
    attrs = pbs.wait(rerun, "H")  # rerun()+reject requeues (15170), until PBS holds it
    assert attrs["comment"] == "job held, too many failed attempts to run"


def test_an_execjob_begin_reject_requeues_until_pbs_holds_the_job(pbs: RealPbs, pbstest):
    job = pbs.qsub("true\n", "-N", "b-reject-1")
    attrs = pbs.wait(job, "H")
    assert attrs["comment"] == "job held, too many failed attempts to run"
    assert "pbstest: rejected at begin" in _mom_log()
    assert "offline" not in pbs.node()["state"]  # a plain reject never offlines


def test_delete_and_reject_at_begin_ends_the_job(pbs: RealPbs, pbstest):
    job = pbs.qsub("true\n", "-N", "b-delete-1")
    attrs = pbs.wait(job, "F")
    assert "run_count" not in attrs or int(attrs["run_count"]) <= 1
    assert "offline" not in pbs.node()["state"]


def test_an_exception_applies_fail_action_offline_vnodes(pbs: RealPbs, pbstest):
    job = pbs.qsub("true\n", "-N", "b-raise-1")
    deadline = time.monotonic() + 30
    while "offline" not in pbs.node()["state"]:
        assert time.monotonic() < deadline, "the node was never offlined"
        time.sleep(0.3)
    node = pbs.node()
    assert node["comment"] == "offlined by hook 'pbsplug_pbstest' due to hook error"
    assert "pbstest: boom at begin" in _mom_log()
    assert pbs.job(job)["job_state"] in ("Q", "H")  # requeued, not run


def test_an_alarm_is_pbs_alarm(pbs: RealPbs, pbstest):
    job = pbs.qsub("true\n", "-N", "b-hang-1")
    deadline = time.monotonic() + 40
    while f"{job};alarm call while running execjob_begin hook 'pbsplug_pbstest'" not in (
            _mom_log()):
        assert time.monotonic() < deadline, "no alarm in the MoM log"
        time.sleep(0.5)
    # An alarm is a hook error: fail_action applies, as after an exception.
    while "offline" not in pbs.node()["state"]:
        assert time.monotonic() < deadline, "the node was never offlined"
        time.sleep(0.3)
    assert pbs.node()["comment"] == "offlined by hook 'pbsplug_pbstest' due to hook error"


def test_an_end_reject_is_ignored_and_log_lines_reach_pbs(pbs: RealPbs, pbstest):
    job = pbs.qsub("true\n", "-N", "e-reject-1")
    attrs = pbs.wait(job)
    assert attrs["Exit_status"] == 0
    log = _mom_log()
    assert f"{job};pbstest: begin accepted on " in log
    assert list(MOM_HOOKS.glob("pbsplug_pbstest.*"))


def test_cpuset_confines_a_real_pbs_job(pbs: RealPbs, tmp_path):
    from .conftest import CPUSET_ROOT

    if pbs.cpuset_problem:
        import os

        if os.environ.get("CI") == "true":
            pytest.fail(pbs.cpuset_problem)
        pytest.skip(pbs.cpuset_problem)
    out_file = tmp_path / "cpuset.out"
    site = _site(tmp_path, site_toml("cpuset", {"cgroup_root": str(CPUSET_ROOT)}))
    _install(pbs, site)
    pbs.wait_mom_hooks(["pbsplug_cpuset"])
    job = pbs.qsub("cat /proc/self/cpuset; grep Cpus_allowed_list /proc/self/status\n",
                   "-j", "oe", "-o", str(out_file), "-l", "select=1:ncpus=1",
                   "-l", "walltime=00:05:00")
    attrs = pbs.wait(job)
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    cpuset, allowed = out_file.read_text().splitlines()[:2]
    assert cpuset == f"/pbs_jobs/{job}"  # the job's own cpuset, made at execjob_begin
    cpus = allowed.split(":")[1].strip()
    assert cpus.isdigit()  # one CPU, not the whole machine's list
    deadline = time.monotonic() + 20  # execjob_end removes it
    while (CPUSET_ROOT / "cpuset" / "pbs_jobs" / job).exists():
        assert time.monotonic() < deadline, "the job's cpuset was never removed"
        time.sleep(0.2)


def test_power_sleeps_an_idle_pbs_vnode_and_wakes_it_for_a_queued_job(pbs: RealPbs, tmp_path):
    """The server periodic, inside PBS: the idle vnode goes to sleep through the simulated
    driver; a job that only it can run gets no estimate from PBS's scheduler, so the bridge
    plans one (pbsplug's scheduler, the plugin's boot time) and the plugin wakes the vnode
    for it; PBS then runs the job there."""
    node = next(iter(json.loads(pbs.run("pbsnodes", "-a", "-F", "json").stdout)["nodes"]))
    # A reservation to come keeps its vnode awake. One deleted lingers in the periodic
    # hook's resv_list (not in pbs_rstat) while finished jobs of its queue are kept.
    pbs.forget_history()
    pbs.forget_resvs()
    pbs.qmgr(f"set node {node} poweroff_eligible = True")
    job = None
    try:
        site = _site(tmp_path, site_toml("power", {
            "power_on_off_enable": True, "node_idle_limit": 1, "min_node_down_delay": 1,
            "driver": "simulated", "boot_delay": 2, "state_dir": str(tmp_path / "power")},
            freq=1))
        out = _install(pbs, site)
        assert "order 2000 is outside PBS's range for a site hook" in out
        assert "not in PBS: sched_node_availability" in out
        deadline = time.monotonic() + 30
        while "sleep" not in pbs.node(node)["state"]:  # the server periodic, in PBS
            assert time.monotonic() < deadline, f"{node} was never powered off"
            time.sleep(0.3)
        simulated = json.loads((tmp_path / "power" / "simulated_power.json").read_text())
        assert simulated[node]["power"] == "off"
        logs = sorted(Path("/var/spool/pbs/server_logs").glob("*"))
        assert f"Job;node_power_off;launch: simulated node_off {node}" in logs[-1].read_text()

        job = pbs.qsub("#!/bin/sh\nhostname\n", "-l", "select=1:ncpus=1",
                       "-l", "walltime=00:01:00")
        assert pbs.job(job)["job_state"] == "Q"  # nothing awake can run it
        deadline = time.monotonic() + 60
        while "sleep" in pbs.node(node)["state"]:
            assert time.monotonic() < deadline, f"{node} was never woken for {job}: " \
                                                f"{pbs.job(job).get('comment')}"
            time.sleep(0.3)
        assert json.loads((tmp_path / "power" / "simulated_power.json").read_text()
                          )[node]["power"] == "on"
        assert f"Job;node_power_on;launch: simulated node_on {node}" in logs[-1].read_text()
        deadline = time.monotonic() + 60
        while pbs.job(job)["job_state"] not in "RF":
            assert time.monotonic() < deadline, f"{job} never ran on the woken {node}"
            pbs.qmgr("set server scheduling = True")  # a cycle now, not at the iteration
            time.sleep(0.5)
        attrs = pbs.wait(job)
        assert attrs["exec_host"].startswith(node) and attrs["Exit_status"] == 0
    finally:
        if job is not None:
            pbs.forget_jobs()
        pbs.clean_hooks()
        pbs.qmgr(f"set node {node} state = free", check=False)
        pbs.qmgr(f"unset node {node} poweroff_eligible", check=False)
