"""The Slurm adapter against a real Slurm (conftest.py starts it: four slurmd as four nodes):
plugins installed with ``pbsplug slurm install --apply`` run in Slurm's own Prolog, Epilog
and controller scripts, with PBS's consequences mapped onto Slurm's."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from pbsplug.adapters import slurm as slurm_module
from pbsplug.testing import site_toml, until

from .conftest import SLURMTEST_LOG, Installed
from .slurm_cluster import SlurmCluster

#: A plugin whose behaviour each test picks with the job's name.
SLURMTEST = """
import os
import time
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(api="1.0", events=("runjob", "execjob_begin", "execjob_launch",
                                             "execjob_end", "jobobit"),
                         fail_action=("offline_vnodes",), alarm=3)


def _note(event, what):
    with open(os.environ.get("SLURMTEST_LOG", "/tmp/pbsplug-slurm/slurmtest.log"), "a") as fh:
        fh.write(f"{what} {event.job.id} {event.job.Job_Name} "
                 f"{','.join(sorted(event.vnode_list or ()))}\\n")


@hookimpl
def runjob(event):
    _note(event, "runjob")
    if str(event.job.Job_Name or "").startswith("r-reject"):
        event.reject("slurmtest: not now")


def _known(event, what, before):
    # What the Prolog and Epilog take from slurmd's environment, beside Slurm's reading.
    after = (event.job.euser, event.job.queue)
    with open(os.environ.get("SLURMTEST_LOG", "/tmp/pbsplug-slurm/slurmtest.log"), "a") as fh:
        fh.write(f"known {what} {event.job.id} {before == after} {','.join(map(str, before))}\\n")


@hookimpl
def execjob_begin(event):
    before = (event.job.euser, event.job.queue)  # read first: from the environment
    name = str(event.job.Job_Name or "")
    _note(event, "begin")
    _known(event, "begin", before)
    if name.startswith("b-reject"):
        event.reject("slurmtest: rejected at begin")
    if name.startswith("b-delete"):
        event.job.delete()
        event.reject("slurmtest: deleted at begin")
    if name.startswith("b-raise"):
        raise RuntimeError("slurmtest: boom at begin")
    if name.startswith("b-hang"):
        while True:
            time.sleep(0.5)


@hookimpl
def execjob_launch(event):
    event.env["SLURMTEST_LAUNCH"] = f"seen-{event.job.id}"


@hookimpl
def execjob_end(event):
    before = (event.job.euser, event.job.queue)
    _note(event, f"end exit={event.job.Exit_status}")
    _known(event, "end", before)
    if str(event.job.Job_Name or "").startswith("e-reject"):
        event.reject("slurmtest: rejected at end")


@hookimpl
def jobobit(event):
    _note(event, "obit")
"""

LOG = SLURMTEST_LOG
#: A job script that leaves a mark when it runs.
RAN = "#!/bin/sh\ntouch /tmp/pbsplug-slurm/ran-$SLURM_JOB_ID\n"
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")


@pytest.fixture
def slurmtest(slurm: Installed, dists):
    dists.add("slurmtest", SLURMTEST)
    out = slurm.install(site_toml("slurmtest"))
    assert "slurmtest: execjob_begin: Prolog" in out
    return slurm


def _log_lines() -> list[str]:
    try:
        return LOG.read_text().splitlines()
    except OSError:
        return []


def _drained(cluster: SlurmCluster, node: str) -> bool:
    return "drain" in cluster.node_states().get(node, "")


# -- install, status, uninstall ---------------------------------------------------------------

def test_install_merges_the_lines_and_uninstall_leaves_slurm_conf_as_it_was(slurm, dists):
    dists.add("slurmtest", SLURMTEST)
    before = slurm.cluster.conf.read_text()
    slurm.cluster.write_conf(before + "Epilog=/bin/true\n")  # a site's own Epilog
    own = slurm.cluster.conf.read_text()
    out = slurm.pbsplug(site_toml("slurmtest"), "install", "--apply", *slurm.options()).stdout
    assert "replaced (kept as a comment): Epilog=/bin/true" in out
    text = slurm.cluster.conf.read_text()
    assert f"Prolog={slurm.dir}/prolog" in text and f"Epilog={slurm.dir}/epilog" in text
    assert f"TaskProlog={slurm.dir}/task_prolog" in text
    assert "PrologSlurmctld=" in text and "EpilogSlurmctld=" in text
    assert (slurm.dir / "prolog").stat().st_mode & 0o777 == 0o755
    assert (slurm.dir / "pbsplug-slurm.json").stat().st_mode & 0o777 == 0o600
    status = slurm.pbsplug(None, "status", *slurm.options()).stdout
    assert "slurmtest: installed" in status
    if slurm_module.compiler():  # the native launcher by default, its Python program beside
        assert f"Prolog={slurm.dir}/prolog-native\n" in text
        assert f"TaskProlog={slurm.dir}/task_prolog\n" in text  # the job's user: Python
        assert (slurm.dir / "prolog-native").stat().st_mode & 0o777 == 0o755
        assert "Slurm runs: native launcher (" in out and "Slurm runs: native" in status
        python = slurm.pbsplug(None, "status", "--no-native", *slurm.options()).stdout
        assert "installed with the native launcher" in python
    assert "not in Slurm" not in status or "queuejob" not in status
    # A second install changes nothing in slurm.conf.
    slurm.pbsplug(None, "install", "--apply", *slurm.options())
    assert slurm.cluster.conf.read_text() == text
    out = slurm.pbsplug(None, "uninstall", "--dir", str(slurm.dir), "--slurm-conf",
                        str(slurm.cluster.conf)).stdout
    assert "site's own restored" in out
    assert slurm.cluster.conf.read_text() == own
    assert not slurm.dir.exists()
    slurm.cluster.write_conf(before)


def test_the_sites_prolog_and_epilog_keep_running_after_install(slurm, dists):
    """A site's own Prolog and Epilog (its node cleanup) are not switched off by install
    --apply: pbsplug's programs run them first, and pbsplug's hooks run too."""
    dists.add("slurmtest", SLURMTEST)
    cluster = slurm.cluster
    before = cluster.conf.read_text()
    site = slurm.top / "site"
    site.mkdir(mode=0o755)
    marks = slurm.top / "site-marks"
    for name in ("prolog", "epilog"):
        (site / name).write_text(f"#!/bin/sh\necho {name} $SLURM_JOB_ID >> {marks}\n")
        (site / name).chmod(0o755)
    cluster.write_conf(before + f"Prolog={site}/prolog\nEpilog={site}/epilog\n")
    try:
        out = slurm.install(site_toml("slurmtest"))
        for name in ("Prolog", "Epilog"):
            assert (f"replaced (kept as a comment): {name}={site}/{name.lower()}; pbsplug's "
                    f"{name} runs it first") in out, out
        job = cluster.sbatch("-J", "ok", "-w", "n1", "-o", "/dev/null", script=RAN)
        assert cluster.wait_done(job)["job_state"] == "COMPLETED"
        until(lambda: f"epilog {job}" in (marks.read_text() if marks.exists() else ""), 60,
              "the site's Epilog's mark")
        assert marks.read_text().splitlines() == [f"prolog {job}", f"epilog {job}"]
        until(lambda: any(line.startswith(f"end exit=0 {job} ok n1") for line in _log_lines()),
              60, "pbsplug's execjob_end")
        assert any(line.startswith(f"begin {job} ok n1") for line in _log_lines())
        assert Path(f"/tmp/pbsplug-slurm/ran-{job}").exists()
        assert not _drained(cluster, "n1")
    finally:
        cluster.write_conf(before)


def test_no_native_installs_the_python_programs(slurm, dists):
    dists.add("slurmtest", SLURMTEST)
    out = slurm.pbsplug(site_toml("slurmtest"), "install", "--no-native",
                        *slurm.options()).stdout
    assert "Slurm runs: Python programs" in out
    assert f"Prolog={slurm.dir}/prolog\n" in out
    assert not (slurm.dir / "prolog-native").exists()


def test_status_lists_events_with_no_slurm_script(slurm, dists):
    dists.add("subtest", """
from pbsplug import PluginInfo, hookimpl
plugin_info = PluginInfo(api="1.0", events=("queuejob", "execjob_begin", "resv_begin"))
@hookimpl
def queuejob(event):
    pass
@hookimpl
def execjob_begin(event):
    pass
@hookimpl
def resv_begin(event):
    pass
""")
    slurm.pbsplug(site_toml("subtest"), "install", *slurm.options())
    out = slurm.pbsplug(None, "status", *slurm.options()).stdout
    assert "not in Slurm: queuejob: Slurm's submit-time extension point is job_submit" in out
    assert "not in Slurm: resv_begin: Slurm runs no script for reservations" in out
    assert "execjob_begin: Prolog, on each node as root" in out
    assert "slurm.conf lacks Prolog=" in out  # printed, not applied


def test_a_bad_option_is_one_line(slurm, dists):
    done = slurm.pbsplug(site_toml("mjf"), "install", "--dir", "relative/dir", check=False)
    assert done.returncode == 2
    assert "--dir relative/dir: expected an absolute path" in done.stderr
    assert "Traceback" not in done.stderr


# -- jobs -------------------------------------------------------------------------------------

def test_an_accepted_job_runs_every_script_and_gets_the_launch_environment(slurmtest):
    cluster = slurmtest.cluster
    job = cluster.sbatch("-J", "ok", "-o", "/tmp/pbsplug-slurm/ok-%j.out",
                         script="#!/bin/sh\necho LAUNCH=$SLURMTEST_LAUNCH\nexit 3\n")
    done = cluster.wait_done(job)
    assert done["job_state"] == "FAILED"  # exit 3
    out = Path(f"/tmp/pbsplug-slurm/ok-{job}.out").read_text()
    assert f"LAUNCH=seen-{job}" in out
    cluster.wait_job(job, lambda j: any(line.startswith(f"obit {job}")
                                        for line in _log_lines()), what="seen by jobobit")
    lines = _log_lines()
    assert f"runjob {job} ok " in lines[0] + " "
    assert any(line.startswith(f"begin {job} ok n1") for line in lines), lines
    assert any(line.startswith(f"end exit=3 {job} ok n1") for line in lines), lines
    # The owner and partition from slurmd's environment are what Slurm's reading says.
    assert f"known begin {job} True root,debug" in lines, lines
    assert f"known end {job} True root,debug" in lines, lines


def test_a_begin_reject_requeues_the_job_and_never_drains(slurmtest):
    cluster = slurmtest.cluster
    job = cluster.sbatch("-J", "b-reject", "-w", "n2", "-o", "/dev/null", script=RAN)
    requeued = cluster.wait_job(job, lambda j: j["restart_cnt"] >= 1, what="requeued")
    assert requeued["job_state"] not in ENDED
    assert "slurmtest: rejected at begin" in requeued["comment"]
    assert not Path(f"/tmp/pbsplug-slurm/ran-{job}").exists()  # the script never ran
    assert not _drained(cluster, "n2")
    assert "execjob_begin rejected by 'slurmtest'" in slurmtest.log_text()


#: A plugin whose only hook, in the Prolog, reads the job beyond slurmd's environment.
READS_AT_BEGIN = """
from pbsplug import PluginInfo, hookimpl
plugin_info = PluginInfo(api="1.0", events=("execjob_begin",))
@hookimpl
def execjob_begin(event):
    event.job.Job_Name
"""


@pytest.mark.parametrize("plugin,script", [("readsbegin", "Prolog"),
                                           ("slurmtest", "PrologSlurmctld")])
def test_a_jobs_forged_comment_holds_the_job_and_never_drains(slurm, dists, plugin, script):
    """A comment that reads as Slurm's keys makes the job's reading a refused one: the
    Prolog exited 1 for it and Slurm drained the node; PrologSlurmctld exited 1 and Slurm
    requeued the job, to fail again, for ever. The job is requeued held now."""
    dists.add(plugin, READS_AT_BEGIN if plugin == "readsbegin" else SLURMTEST)
    slurm.install(site_toml(plugin))
    cluster = slurm.cluster
    job = cluster.sbatch("-J", "forged", "--comment", "hi NumCPUs=64", "-w", "n2", "-o",
                         "/dev/null", script=RAN)
    # Slurm shows the requeued job held while it is still COMPLETING on its node: wait
    # for it to be back in the queue.
    held = cluster.wait_job(job, lambda j: j["restart_cnt"] >= 1 and "Held" in str(
        j.get("state_reason")) and j["job_state"] == "PENDING", what="requeued held")
    assert held["comment"].startswith(f"pbsplug {script}: scontrol show job {job}: NumCPUs")
    assert not Path(f"/tmp/pbsplug-slurm/ran-{job}").exists()
    assert not _drained(cluster, "n2")


def test_a_runjob_reject_requeues_through_prolog_slurmctld_without_draining(slurmtest):
    cluster = slurmtest.cluster
    job = cluster.sbatch("-J", "r-reject", "-o", "/dev/null", script=RAN)
    requeued = cluster.wait_job(job, lambda j: j["restart_cnt"] >= 1, what="requeued")
    assert requeued["job_state"] not in ENDED
    assert not Path(f"/tmp/pbsplug-slurm/ran-{job}").exists()
    assert "Not Running: pbsplug runjob: slurmtest: not now" in requeued["comment"]
    assert not any(line.startswith(f"begin {job}") for line in _log_lines())
    assert all("drain" not in s for s in cluster.node_states().values())


def test_delete_at_begin_cancels_the_job(slurmtest):
    cluster = slurmtest.cluster
    job = cluster.sbatch("-J", "b-delete", "-o", "/dev/null", script=RAN)
    done = cluster.wait_done(job)
    assert not Path(f"/tmp/pbsplug-slurm/ran-{job}").exists()
    assert done["job_state"] == "CANCELLED"
    assert done["restart_cnt"] == 0
    assert all("drain" not in s for s in cluster.node_states().values())


def test_an_error_with_offline_vnodes_drains_the_node_naming_the_hook(slurmtest):
    cluster = slurmtest.cluster
    job = cluster.sbatch("-J", "b-raise", "-w", "n3", "-p", "gpu", "-o", "/dev/null")
    cluster.wait_job(job, lambda j: j["restart_cnt"] >= 1, what="requeued")
    node = cluster.node("n3")
    assert "DRAIN" in node["state_flags"] or "drain" in cluster.node_states()["n3"]
    assert node["reason"] == "offlined by hook 'slurmtest' due to hook error"
    assert "RuntimeError: slurmtest: boom at begin" in slurmtest.log_text()


def test_a_hanging_hook_gets_its_alarm(slurmtest):
    cluster = slurmtest.cluster
    job = cluster.sbatch("-J", "b-hang", "-w", "n4", "-p", "gpu", "-o", "/dev/null")
    cluster.wait_job(job, lambda j: j["restart_cnt"] >= 1, what="requeued", timeout=60)
    assert cluster.node("n4")["reason"] == "offlined by hook 'slurmtest' due to hook error"
    assert "alarm" in slurmtest.log_text()


def test_an_end_reject_is_ignored(slurmtest):
    cluster = slurmtest.cluster
    job = cluster.sbatch("-J", "e-reject", "-w", "n1", "-o", "/dev/null")
    assert cluster.wait_done(job)["job_state"] == "COMPLETED"
    cluster.wait_job(job, lambda j: "execjob_end rejected" in slurmtest.log_text(),
                     what="logged")
    time.sleep(0.5)
    assert not _drained(cluster, "n1")


def test_srun_tasks_each_get_the_launch_environment_and_a_runjob_reject_cancels_srun(
        slurmtest):
    cluster = slurmtest.cluster
    done = cluster.run("/usr/bin/srun", "-J", "ok", "-p", "all", "-N2", "-n2",
                       "/bin/sh", "-c", "echo $SLURMD_NODENAME $SLURMTEST_LAUNCH",
                       cwd="/tmp", timeout=120)
    lines = sorted(done.stdout.split("\n")[:2])
    job = lines[0].split("seen-")[1]
    # Two tasks on two nodes (which two is Slurm's choice: earlier tests drain some, and
    # a node still finishing a job is passed over), each with the launch hook's variable.
    assert [line.split()[1] for line in lines] == [f"seen-{job}"] * 2
    assert len({line.split()[0] for line in lines}) == 2
    # PrologSlurmctld's failure cancels an srun job (Slurm's rule; a batch job is requeued).
    refused = cluster.run("/usr/bin/srun", "-J", "r-reject", "/bin/true", cwd="/tmp",
                          check=False, timeout=120)
    assert refused.returncode != 0
    assert all("drain" not in s for s in cluster.node_states().values())


# -- exechost_periodic ------------------------------------------------------------------------

#: A plugin that notes each exechost_periodic's node and job list.
SEEJOBS = """
import os
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(api="1.0", events=("exechost_periodic",), freq=600)


@hookimpl
def exechost_periodic(event):
    with open(os.environ.get("SLURMTEST_LOG", "/tmp/pbsplug-slurm/slurmtest.log"), "a") as fh:
        fh.write(f"periodic {','.join(sorted(event.vnode_list))} "
                 f"{','.join(sorted(event.job_list or ()))}\\n")
"""


def test_exechost_periodic_lists_the_jobs_of_partitions_hidden_from_the_caller(slurm, dists):
    """A job in a Hidden=YES partition (running on n3) and one in a partition only a group
    may use (suspended on n4) are in their node's exechost_periodic job list, with the
    HealthCheckProgram's squeue run as a caller Slurm hides those partitions from (a
    --bin-dir whose squeue runs as nobody): it asks with ``-a``. Without it such a caller
    gets no job there, and the cpuset plugin would reap the jobs' cpusets as orphans.
    (slurmd runs the program as root, which Slurm 22.05 shows these jobs with or without
    ``-a``.)"""
    from .slurm_cluster import hidden_jobs, unprivileged_commands

    cluster = slurm.cluster
    dists.add("seejobs", SEEJOBS)
    bin_dir = unprivileged_commands(slurm.top / "bin")
    slurm.pbsplug(site_toml("seejobs"), "install", "--apply", *slurm.options(),
                  "--bin-dir", str(bin_dir))
    cluster.reconfigure()
    hidden, grouped = hidden_jobs(cluster)
    plain = cluster.run(str(bin_dir / "squeue"), "-h", "-t", "all", "-o", "%i").stdout.split()
    assert hidden not in plain and grouped not in plain, plain  # really hidden from nobody

    def job_list(node: str) -> list[str] | None:
        """The job list of an exechost_periodic this run of the program fired (its first
        run on a node since slurmd started fires exechost_startup instead)."""
        before = len(_log_lines())
        done = cluster.run(str(slurm.dir / "health_check"), check=False,
                           env={**cluster.env, "SLURMD_NODENAME": node})
        assert done.returncode == 0, done.stderr
        lines = [line for line in _log_lines()[before:]
                 if line.startswith(f"periodic {node} ")]
        if not lines:
            return None
        jobs = lines[-1].split(" ", 2)[2]
        return jobs.split(",") if jobs else []

    def periodic_jobs(node: str) -> list[str]:
        fired: list[list[str]] = []

        def one() -> bool:
            jobs = job_list(node)
            if jobs is not None:
                fired.append(jobs)
            return bool(fired)

        until(one, 30, f"exechost_periodic on {node}")
        return fired[-1]

    assert periodic_jobs("n3") == [hidden]
    assert periodic_jobs("n4") == [grouped]


def test_a_heterogeneous_jobs_parts_run_and_periodic_jobs_name_them_as_their_events_do(
        slurmtest):
    """A heterogeneous job (``sbatch ... : ...``): part 0 on one cpu of n3, part 1 on both
    cpus of n1. Each part is a job of its own to Slurm (its own id: squeue's ``%A``, the
    SLURM_JOB_ID of its scripts), and ``scontrol show job <part 0's id>`` answers every
    part, one record each: the adapter took that for a job whose text holds a line break,
    and PrologSlurmctld requeued the job held; it never ran. Part 0 is read alone now
    (``<id>+0``): each part gets its runjob, part 0 its execjob_begin on n3 (the batch
    script's node; part 1's nodes run no Prolog with no step there), each its
    execjob_end and jobobit, each with its own id as ``job.id``. The periodic event's
    vnode ``jobs`` name each cpu a part holds by that same id, as on the engine
    (``<job.id>/<cpu>``); squeue's ``%i`` they were named by (``12+1``) is no event's."""
    from pbsplug.adapters import slurm_power
    from pbsplug.adapters.slurm_read import Slurm

    cluster = slurmtest.cluster
    sleeper = "#!/bin/sh\nsleep 600\n"
    cluster.sbatch("-J", "het", "-o", "/dev/null", "-p", "gpu", "-w", "n3", "-n", "1", ":",
                   "-p", "all", "-w", "n1", "-n", "2", script=sleeper)

    def seen(what: str) -> list[list[str]]:
        """The events' lines for the job: [what, id, name, nodes] (end: its exit too)."""
        return [words for words in map(str.split, _log_lines())
                if words[0] == what and "het" in words[1:4]]

    runjob = until(lambda: len(seen("runjob")) == 2 and seen("runjob"), 60,
                   "both parts' runjob")
    begin = until(lambda: seen("begin"), 60, "part 0's execjob_begin")
    assert [words[3] for words in begin] == ["n3"], begin
    first = begin[0][1]
    [second] = {words[1] for words in runjob} - {first}
    for part in (first, second):
        cluster.wait_job(part, lambda j: j["job_state"] == "RUNNING", 60, "running")
    ctx = type("Ctx", (), {"slurm": Slurm("/usr/bin", str(cluster.conf))})()
    assert slurm_power.running_jobs(ctx) == {
        "n3": [f"{first}/0"], "n1": [f"{second}/0", f"{second}/1"]}
    cluster.cancel_all()
    until(lambda: len(seen("obit")) == len(seen("end")) == 2, 60,
          "both parts' execjob_end and jobobit")
    assert sorted(words[1] for words in seen("obit")) == sorted((first, second))
    assert sorted((words[2], words[4]) for words in seen("end")) == sorted(
        ((first, "n3"), (second, "n1"))), seen("end")


@pytest.mark.parametrize("array", ["1-3", "1-3%3"])  # (%: 22.05 adds ArrayTaskThrottle=3)
def test_every_task_of_a_job_array_runs_and_periodic_jobs_name_them_as_their_events_do(
        slurmtest, array):
    """A job array of three tasks, each on one cpu of n1 or n2. The task that starts last
    keeps the array's id, and 22.05 answers ``scontrol show job <that id>`` with every task
    of the array, a record each: the adapter took that for a job whose text holds a line
    break, and PrologSlurmctld requeued that task held. It is read alone now (``<array
    id>_<task>``): every task runs, each with its runjob, execjob_begin, execjob_end and
    jobobit naming it by its own id (``job.id``, squeue's ``%A``), and the periodic
    event's vnode ``jobs`` name each task's cpu by that id (squeue's ``%i``, ``5_1``,
    named them before)."""
    from pbsplug.adapters import slurm_power
    from pbsplug.adapters.slurm_read import Slurm

    cluster = slurmtest.cluster
    cluster.sbatch("-J", "arr", "-o", "/dev/null", "-p", "debug", "-n", "1", f"--array={array}",
                   script="#!/bin/sh\nsleep 600\n")

    def seen(what: str) -> list[list[str]]:
        """The events' lines for the array: [what, id, name, nodes] (end: its exit too)."""
        return [words for words in map(str.split, _log_lines())
                if words[0] == what and "arr" in words[1:4]]

    begin = until(lambda: len(seen("begin")) == 3 and seen("begin"), 60,
                  "every task's execjob_begin")
    tasks = {words[1]: words[3] for words in begin}
    assert len(tasks) == 3, begin
    for task in tasks:
        cluster.wait_job(task, lambda j: j["job_state"] == "RUNNING", 60, "running")
    ctx = type("Ctx", (), {"slurm": Slurm("/usr/bin", str(cluster.conf))})()
    running = slurm_power.running_jobs(ctx)
    assert sorted(entry.split("/")[0] for node in ("n1", "n2")
                  for entry in running.get(node, [])) == sorted(tasks), running
    for task, node in tasks.items():
        assert any(entry.startswith(f"{task}/") for entry in running[node]), running
    cluster.cancel_all()
    until(lambda: len(seen("obit")) == 3, 60, "every task's jobobit")
    assert sorted(words[1] for words in seen("obit")) == sorted(tasks)


#: A plugin that deletes, at execjob_begin, the job whose id the test wrote in `DELETE_ID`.
DELETE_ID = Path("/tmp/pbsplug-slurm/delete-id")
DELETES_ONE = f"""
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(api="1.0", events=("execjob_begin",))


@hookimpl
def execjob_begin(event):
    with open({str(DELETE_ID)!r}) as fh:
        if str(event.job.id) == fh.read().strip():
            event.job.delete()
            event.reject("deletesone: not this task")
"""


@pytest.mark.parametrize("array", ["1-3", "1-3%3"])  # (%: 22.05 adds ArrayTaskThrottle=3)
def test_a_hooks_delete_of_an_arrays_last_task_leaves_the_other_tasks_running(
        slurm, dists, array):
    """The task of an array that starts last keeps the array's id (held, the array's tasks
    start in order: task 3 here), and ``scancel <that id>`` cancels every task of the
    array: an execjob_begin hook that deleted that task (by its ``job.id``) cancelled the
    two others too. The adapter acts on ``<id>_3`` now: that task is cancelled, with the hook's
    message as its comment, and the others run. With a ``%`` limit, 22.05 writes
    ``ArrayTaskThrottle=3`` in the task's record before its name: that task's read was
    refused, and every task requeued held."""
    dists.add("deletesone", DELETES_ONE)
    slurm.install(site_toml("deletesone"))
    cluster = slurm.cluster
    array = cluster.sbatch("-H", "-J", "arr", "-o", "/dev/null", "-p", "debug", "-n", "1",
                           f"--array={array}", script="#!/bin/sh\nsleep 600\n")
    DELETE_ID.write_text(array)
    try:
        cluster.run("scontrol", "release", array)
        cancelled = cluster.wait_job(array, lambda j: j["job_state"] == "CANCELLED", 60,
                                     "cancelled")
        assert cancelled["array_task_id"] == 3, cancelled
        assert "deletesone: not this task" in cancelled["comment"]
        others = cluster.run("squeue", "-h", "-a", "-t", "all", "-o", "%A %i %T").stdout
        tasks = {line.split()[1]: line for line in others.splitlines()}
        for task in (f"{array}_1", f"{array}_2"):
            cluster.wait_job(tasks[task].split()[0], lambda j: j["job_state"] == "RUNNING",
                             60, "running")
    finally:
        DELETE_ID.unlink(missing_ok=True)



def test_an_arrays_tasks_not_started_yet_are_no_job_to_stop(slurm):
    """``sbatch --array=1-5%1`` with task 1 running (as a job of its own): 22.05 answers
    ``scontrol show job <array id>`` with the tasks not started yet first, one record of
    the array's id (``ArrayTaskId=2-5%1``). `Slurm.alone` named that bare id, by which
    scancel and ``scontrol requeue`` act on every task, the running one too. A stop by
    that id is refused now (`UnnamedJobError`), and nothing is cancelled; a held array
    none of whose tasks started (one record, ``ArrayTaskId=1-3``) is refused the same."""
    from pbsplug.adapters.slurm_read import Slurm, UnnamedJobError

    cluster = slurm.cluster
    array = cluster.sbatch("-J", "left", "-o", "/dev/null", "-p", "debug", "-n", "1",
                           "--array=1-5%1", script="#!/bin/sh\nsleep 600\n")
    held = cluster.sbatch("-H", "-J", "held", "-o", "/dev/null", "-p", "debug", "-n", "1",
                          "--array=1-3", script="#!/bin/sh\nsleep 600\n")
    try:
        running = until(lambda: cluster.run("/usr/bin/squeue", "-h", "-t", "R", "-o",
                                            "%A %i").stdout.split(), 60, "task 1 to run")
        assert running[1] == f"{array}_1", running
        first = cluster.run("/usr/bin/scontrol", "-o", "show", "job", array).stdout
        assert first.startswith(f"JobId={array} ArrayJobId={array} ArrayTaskId=2-5%1 "), first
        slurm_ = Slurm("/usr/bin", str(cluster.conf))
        for job_id, tasks in ((array, "2-5"), (held, "1-3")):
            with pytest.raises(UnnamedJobError,
                               match=rf"\({job_id}_\[{tasks}\]\), not one job"):
                slurm_.cancel(job_id)
            with pytest.raises(UnnamedJobError):
                slurm_.requeue(job_id)
        task = cluster.job(running[0])
        assert task["job_state"] == "RUNNING", task
        assert cluster.job(array)["job_state"] == "PENDING"
        assert slurm_.alone(running[0]) == running[0]  # (the running task, by its own id)
    finally:  # (by the arrays' ids, every task)
        cluster.run("/usr/bin/scancel", array, held, check=False)
        until(lambda: not cluster.run("/usr/bin/squeue", "-h", "-t", "PD,R,CG", "-o",
                                      "%A").stdout.strip(), 30, "the arrays to end")


#: A plugin that stops, at execjob_begin, the job whose id the test wrote in `HET_STOP`
#: (``<id> delete`` or ``<id> requeue``).
HET_STOP = Path("/tmp/pbsplug-slurm/het-stop")
STOPS_ONE = f"""
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(api="1.0", events=("execjob_begin",))


@hookimpl
def execjob_begin(event):
    with open({str(HET_STOP)!r}) as fh:
        job_id, how = fh.read().split()
    if str(event.job.id) == job_id:
        if how == "delete":
            event.job.delete()
        event.reject(f"stopsone: {{how}} this part")
"""


@pytest.mark.parametrize("how", ["delete", "requeue"])
def test_a_hooks_stop_of_a_heterogeneous_jobs_part_1_acts_as_slurm_allows(slurm, dists, how):
    """A heterogeneous job: part 0 on n3, part 1 on n1, whose Prolog runs when the batch
    script launches a step there (``srun --het-group=1``). An execjob_begin hook stops part
    1 (its own id, as its event has it). A delete cancels that part alone (``scancel
    <id>+1``), part 0 runs on; a requeue requeues the whole heterogeneous job (``scontrol
    requeue <id>``: Slurm requeues no part alone). The comment goes on part 1 alone. The
    requeue was ``scontrol requeue <part 1's id>``, which 22.05 refuses (``Job not
    heterogeneous job leader``), and part 1 was cancelled instead, part 0 running on."""
    dists.add("stopsone", STOPS_ONE)
    slurm.install(site_toml("stopsone"))
    cluster = slurm.cluster
    first = cluster.sbatch("-H", "-J", "het", "-o", "/dev/null", "-p", "gpu", "-w", "n3", "-n",
                           "1", ":", "-p", "all", "-w", "n1", "-n", "2",
                           script="#!/bin/sh\nsrun --het-group=1 sleep 600 &\nsleep 600\n")
    parts = cluster.run("/usr/bin/squeue", "-h", "-a", "-o", "%A %i").stdout.split("\n")
    [second] = [line.split()[0] for line in parts if line.endswith(f" {first}+1")]
    HET_STOP.write_text(f"{second} {how}")
    try:
        cluster.run("/usr/bin/scontrol", "release", first)
        if how == "delete":
            cancelled = cluster.wait_job(second, lambda j: j["job_state"] == "CANCELLED", 60,
                                         "cancelled")
            assert "stopsone: delete this part" in cancelled["comment"], cancelled
            kept = cluster.job(first)
            assert kept["job_state"] == "RUNNING", kept
            assert "stopsone" not in str(kept.get("comment")), kept
        else:
            for part in (first, second):
                requeued = cluster.wait_job(part, lambda j: j["restart_cnt"] >= 1, 60,
                                            "requeued")
                assert requeued["job_state"] not in ENDED, requeued
            assert "stopsone: requeue this part" in cluster.job(second)["comment"]
            assert "stopsone" not in str(cluster.job(first).get("comment"))
        assert not _drained(cluster, "n1")
    finally:
        HET_STOP.unlink(missing_ok=True)


def _stop_logged(slurm, job_id: str) -> bool:
    """Whether the adapter's log tells how its stop of job `job_id` ended."""
    return any(f"job {job_id} {what}" in slurm.log_text()
               for what in ("requeued", "cancelled", "cannot be", "is ", "could not"))


def test_a_hooks_requeue_of_part_1_with_part_0_no_requeue_drains_no_node(slurm, dists):
    """Part 0 ``--no-requeue``, part 1 ``--requeue``; an execjob_begin hook rejects part 1
    (a requeue). 22.05 answers ``scontrol requeue <id>`` with an error (``Requested
    operation is presently disabled``) yet requeues part 1; the adapter took that for a
    job it cannot requeue, ran ``scancel <id>+1`` on the pending part, which Slurm refuses
    (``Operation not permitted on individual component``), the Prolog exited 1 and n1 was
    drained (the reviewer's reproducer, r3, 3 of 3). The part is read back now: pending,
    stopped; the node stays in service; part 0 runs on (Slurm's doing)."""
    dists.add("stopsone", STOPS_ONE)
    slurm.install(site_toml("stopsone"))
    cluster = slurm.cluster
    first = cluster.sbatch("-H", "-J", "het", "-o", "/dev/null", "-p", "gpu", "-w", "n3",
                           "-n", "1", "--no-requeue", ":", "-p", "all", "-w", "n1", "-n", "2",
                           "--requeue",
                           script="#!/bin/sh\nsrun --het-group=1 sleep 600 &\nsleep 600\n")
    second = str(int(first) + 1)
    HET_STOP.write_text(f"{second} requeue")
    try:
        cluster.run("/usr/bin/scontrol", "release", first)
        until(lambda: _stop_logged(slurm, second) or _drained(cluster, "n1"), 90,
              "part 1's Prolog to stop it")
        log = slurm.log_text()
        # (read back while Slurm requeues it: COMPLETING, then PENDING)
        assert re.search(rf"job {second} is (COMPLETING|PENDING): not stopped again", log), \
            log[-2000:]
        assert f"job {second} cannot be requeued" not in log, log[-2000:]
        part1 = cluster.wait_job(second, lambda j: j["job_state"] == "PENDING"
                                 and j["restart_cnt"] >= 1, 60, "requeued")
        assert "stopsone: requeue this part" in part1["comment"], part1
        assert cluster.job(first)["job_state"] == "RUNNING"
        assert not _drained(cluster, "n1"), cluster.node("n1")
    finally:
        HET_STOP.unlink(missing_ok=True)


REJECTS_ALL = """
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(api="1.0", events=("execjob_begin",))


@hookimpl
def execjob_begin(event):
    event.reject("rejectsall: not here")
"""


def test_with_prologflags_alloc_a_reject_of_every_part_requeues_the_het_job(slurm, dists):
    """``PrologFlags=Alloc``: each part's Prolog runs at allocation, and a hook rejects
    every execjob_begin (a requeue). The first Prolog requeues the heterogeneous job; the
    second's ``scontrol requeue <id>`` is answered ``Job is pending execution``, which the
    adapter took for a job it cannot requeue: ``scancel <id>+1`` of a pending part, which
    Slurm refuses, exit 1, the node drained (the reviewer's reproducer, r3). Both parts
    are read back now: pending, stopped; requeued, neither node drained."""
    dists.add("rejectsall", REJECTS_ALL)
    slurm.install(site_toml("rejectsall"))
    cluster = slurm.cluster
    conf = cluster.conf.read_text()
    cluster.write_conf(conf + "PrologFlags=Alloc\n")
    cluster.restart_controller()
    cluster.reconfigure()
    try:
        first = cluster.sbatch("-J", "het", "-o", "/dev/null", "-p", "gpu", "-w", "n3", "-n",
                               "1", ":", "-p", "all", "-w", "n1", "-n", "2",
                               script="#!/bin/sh\nsleep 600\n")
        second = str(int(first) + 1)
        until(lambda: all(_stop_logged(slurm, p) for p in (first, second))
              or _drained(cluster, "n1") or _drained(cluster, "n3"), 90,
              "both parts' Prologs to stop them")
        log = slurm.log_text()
        assert "cannot be requeued" not in log and "could not be stopped" not in log, log
        assert re.search(r"job [0-9]+ is (COMPLETING|PENDING): not stopped again", log), \
            log[-2000:]
        for part in (first, second):
            cluster.wait_job(part, lambda j: j["job_state"] == "PENDING"
                             and j["restart_cnt"] >= 1, 60, "requeued")
        assert not _drained(cluster, "n1") and not _drained(cluster, "n3")
    finally:
        cluster.write_conf(conf)
        cluster.restart_controller()
        cluster.reconfigure()
