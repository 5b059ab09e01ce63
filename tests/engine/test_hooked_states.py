"""What hooks and requests leave in a job's state, holds and dependencies, on an `Engine` in
this process (its requests are method calls): the cases a hostile review of the lifecycle's
state rules found."""

from __future__ import annotations

import time

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.errors import PbsError
from pbsplug.engine.home import Home
from pbsplug.engine.server import ROLE_MANAGER, ROLE_OPERATOR, Caller, Engine
from pbsplug.engine.testing import make_root, remove_root
from pbsplug.scheduling import SchedulerInstance

ROOT = Caller(0, ROLE_MANAGER)


@pytest.fixture
def engine(pbsplug_plugins):
    root = make_root()
    yield Engine(Home(root), plugins=pbsplug_plugins)
    remove_root(root)


def running(eng: Engine, job_id: str) -> None:
    """Store `job_id` as running (no process: these tests look at the server's rules)."""
    attrs = eng.store.job(job_id)
    attrs.update(job_state="R", exec_vnode="(x:ncpus=1)", stime=1)
    with eng.store.transaction() as st:
        st.put_job(job_id, attrs)


class Setter:
    """modifyjob and movejob write what `wanted` says to jobs named ``set``."""

    plugin_info = PluginInfo(events=("modifyjob", "movejob"))

    def __init__(self):
        self.wanted: dict = {}

    def _set(self, job):
        if job.Job_Name == "set":
            for name, value in self.wanted.items():
                setattr(job, name, value)

    @hookimpl
    def modifyjob(self, event):
        self._set(event.job)

    @hookimpl
    def movejob(self, event):
        self._set(event.job)


def test_a_hooks_depend_on_a_running_job_is_refused(engine, register_plugin):
    """Review: a modifyjob hook's depend on a running job held it (H, s) while it ran, its
    cpus free to the scheduler, and released it to Q when the parent ended: it could start
    twice. As qalter's depend on a running job: 15015, nothing stored."""
    hook = Setter()
    register_plugin(hook, "setter", isolation="inprocess")
    parent = engine.req_submit(ROOT, {"Hold_Types": "u"}, script="true\n")
    job_id = engine.req_submit(ROOT, {"Job_Name": "set"}, script="true\n")
    running(engine, job_id)
    hook.wanted = {"depend": f"afterok:{parent}"}
    with pytest.raises(PbsError) as refused:
        engine.req_alter(ROOT, job_id, {"Account_Name": "x"})
    assert refused.value.code == 15015
    with pytest.raises(PbsError):  # (the owner's qhold of it too)
        engine._holds(ROOT, job_id, "u", add=True)
    stored = engine.store.job(job_id)
    assert (stored["job_state"], stored.get("depend"), stored.get("Hold_Types", "n")) == (
        "R", None, "n")


def test_a_movejob_hooks_hold_and_depend_are_the_jobs_as_modifyjobs_are(engine,
                                                                       register_plugin):
    """Review: a movejob hook's hold left the job Q (runnable, held), and its depend was
    stored unchecked, by a bare id, never enforced."""
    hook = Setter()
    register_plugin(hook, "setter", isolation="inprocess")
    engine.req_qmgr(ROOT, "create queue other queue_type = execution, enabled = true, "
                          "started = true")
    job_id = engine.req_submit(ROOT, {"Job_Name": "set"}, script="true\n")
    hook.wanted = {"depend": "afterok:999"}
    (answer,) = engine.req_move(ROOT, "other", [job_id])
    assert answer["error"]["code"] == 15001, answer  # Unknown Job Id: nothing moved
    assert engine.store.job(job_id)["queue"] == "workq"
    parent = engine.req_submit(ROOT, {"Hold_Types": "u"}, script="true\n")
    hook.wanted = {"depend": f"afterok:{parent.split('.')[0]}", "Hold_Types": "u"}
    assert engine.req_move(ROOT, "other", [job_id]) == [{"id": job_id}]
    stored = engine.store.job(job_id)
    assert (stored["queue"], stored["job_state"], stored["depend"]) == (
        "other", "H", f"afterok:{parent}")
    assert set(stored["Hold_Types"]) == {"s", "u"}


def test_a_dependency_that_can_never_be_met_is_refused_at_qalter(engine, register_plugin):
    """Review: qalter -W depend=afterok:<a job that failed> held the job with s for ever
    (its owner may not release s); qsub deletes such a job at once. qalter and a hook's
    change are refused with PBS's words."""
    hook = Setter()
    register_plugin(hook, "setter", isolation="inprocess")
    failed = engine.req_submit(ROOT, {}, script="false\n")
    attrs = engine.store.job(failed)
    attrs.update(job_state="F", Exit_status=1, stime=1)
    with engine.store.transaction() as st:
        st.put_job(failed, attrs)
    job_id = engine.req_submit(ROOT, {"Job_Name": "set"}, script="true\n")
    with pytest.raises(PbsError) as refused:
        engine.req_alter(ROOT, job_id, {"depend": f"afterok:{failed}"})
    assert refused.value.message == ("Illegal attribute or resource value depend: "
                                     f"{failed} Finished job did not satisfy dependency")
    hook.wanted = {"depend": f"afterok:{failed}"}
    with pytest.raises(PbsError):
        engine.req_alter(ROOT, job_id, {"Account_Name": "x"})
    stored = engine.store.job(job_id)
    assert (stored["job_state"], stored.get("depend"), stored.get("Hold_Types", "n")) == (
        "Q", None, "n")


def test_an_operators_qalter_sets_no_system_hold_on_a_running_job(engine):
    """Review: qalter's hold rules were checked only for jobs still to run: an operator set
    s (a manager's) or p (root's) on a running job, held should it be requeued."""
    job_id = engine.req_submit(ROOT, {}, script="true\n")
    running(engine, job_id)
    operator = Caller(65534, ROLE_OPERATOR)  # (nobody, an operator)
    for holds in ("s", "p"):
        with pytest.raises(PbsError) as refused:
            engine.req_alter(operator, job_id, {"Hold_Types": holds})
        assert refused.value.code == 15007, holds
    engine.req_alter(operator, job_id, {"Hold_Types": "o"})
    assert engine.store.job(job_id)["Hold_Types"] == "o"


def test_a_job_wide_mpiprocs_past_the_ranks_bound_is_refused_at_qsub(engine):
    """Review: the 2^20-rank bound read only a select: -l mpiprocs=2000000 was queued, and
    failed at its start."""
    with pytest.raises(PbsError) as refused:
        engine.req_submit(ROOT, {"Resource_List": {"mpiprocs": 2_000_000}}, script="true\n")
    assert "Resource_List.mpiprocs: 2000000 MPI ranks (mpiprocs) in all" in \
        refused.value.message
    assert engine.store.jobs(("Q", "H")) == {}


class Instances:
    """A plugin naming one scheduler, for partition PX, that may fail for a moment."""

    plugin_info = PluginInfo()

    def __init__(self):
        self.fail = False

    @hookimpl
    def sched_instances(self, server):
        if self.fail:
            raise OSError("its configuration momentarily unreadable")
        return [SchedulerInstance("plug", partitions=("PX",), scheduling=False)]


def test_a_plugin_failing_for_a_moment_denies_no_reservation(engine, register_plugin):
    """Review: one failed sched_instances call left its schedulers out, and the poll took
    their partitions for gone: a reservation waiting for PX was denied for good."""
    plugin = Instances()
    register_plugin(plugin, "instances")
    resv_id = engine.resvs.submit(ROOT, {"reserve_start": int(time.time()) + 3600,
                                         "reserve_duration": 600, "partition": "PX"})["id"]
    plugin.fail = True
    engine.resvs.poll(time.time())
    assert resv_id in engine.store.all("resv")
    plugin.fail = False
    engine.resvs.poll(time.time() + 10)
    assert resv_id in engine.store.all("resv")
