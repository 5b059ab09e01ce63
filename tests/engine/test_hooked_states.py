"""What hooks and requests leave in a job's state, holds and dependencies, on an `Engine` in
this process (its requests are method calls): the cases a hostile review of the lifecycle's
state rules found."""

from __future__ import annotations

import time

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.errors import PbsError
from pbsplug.engine.home import Home
from pbsplug.engine.server import ROLE_MANAGER, ROLE_OPERATOR, ROLE_USER, Caller, Engine
from pbsplug.engine.testing import make_root, remove_root
from pbsplug.plugins import PluginSet
from pbsplug.scheduling import SchedulerInstance
from pbsplug.siteconfig import PluginSite, SiteConfig

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
    engine._holds(ROOT, job_id, "u", add=True)  # (qhold fires no modifyjob: no depend)
    stored = engine.store.job(job_id)
    assert (stored["job_state"], stored.get("depend"), stored.get("Hold_Types", "n")) == (
        "R", None, "u")


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
    s (a manager's) or p (root's) on a running job, held should it be requeued. OpenPBS
    23.06 lets qalter -h hold a running job (checked, as root): the rules are qhold's."""
    job_id = engine.req_submit(ROOT, {}, script="true\n")
    running(engine, job_id)
    operator = Caller(65534, ROLE_OPERATOR)  # (nobody, an operator)
    for holds in ("s", "p"):
        with pytest.raises(PbsError) as refused:
            engine.req_alter(operator, job_id, {"Hold_Types": holds})
        assert refused.value.code == 15007, holds
    engine.req_alter(operator, job_id, {"Hold_Types": "o"})
    stored = engine.store.job(job_id)
    assert (stored["job_state"], stored["Hold_Types"]) == ("R", "o")


def test_qalter_depend_replaces_the_types_it_names(engine):
    """OpenPBS 23.06, checked: qalter -W depend=afterany:P2 on a job with afterok:P1 keeps
    both; afterok:P2 then replaces the afterok entry. pbsplug replaced the whole depend,
    dropping (among others) the after entries another job's before had written."""
    p1, p2 = (engine.req_submit(ROOT, {"Hold_Types": "u"}, script="true\n")
              for _ in range(2))
    child = engine.req_submit(ROOT, {"depend": f"afterok:{p1}"}, script="true\n")
    engine.req_alter(ROOT, child, {"depend": f"afterany:{p2}"})
    assert engine.store.job(child)["depend"] == f"afterok:{p1},afterany:{p2}"
    engine.req_alter(ROOT, child, {"depend": f"afterok:{p2}"})
    assert engine.store.job(child)["depend"] == f"afterany:{p2},afterok:{p2}"


def test_a_job_wide_mpiprocs_past_the_ranks_bound_is_refused_at_qsub(engine):
    """Review: the 2^20-rank bound read only a select: -l mpiprocs=2000000 was queued, and
    failed at its start."""
    with pytest.raises(PbsError) as refused:
        engine.req_submit(ROOT, {"Resource_List": {"mpiprocs": 2_000_000}}, script="true\n")
    assert "Resource_List.mpiprocs: 2000000 MPI ranks (mpiprocs) in all" in \
        refused.value.message
    assert engine.store.jobs(("Q", "H")) == {}


def test_a_plugin_failing_for_a_moment_denies_no_reservation(engine, register_plugin):
    """Review: one failed sched_instances call left its schedulers out, and the poll took
    their partitions for gone: a reservation waiting for PX was denied for good."""
    plugin = Flaky()
    register_plugin(plugin, "flaky")
    resv_id = engine.resvs.submit(ROOT, {"reserve_start": int(time.time()) + 3600,
                                         "reserve_duration": 600, "partition": "PX"})["id"]
    plugin.fail = True
    engine.resvs.poll(time.time())
    assert resv_id in engine.store.all("resv")
    plugin.fail = False
    engine.resvs.poll(time.time() + 10)
    assert resv_id in engine.store.all("resv")


def test_a_dependency_changed_to_one_met_or_removed_lifts_its_hold(engine):
    """Review: changing or removing a job's depend never lifted the hold its old one set:
    qalter -W depend= left it H with s for ever (its owner may not release s). An s hold
    whose depend was met already is not the dependency's: it stays."""
    parent = engine.req_submit(ROOT, {"Hold_Types": "u"}, script="true\n")
    done = engine.req_submit(ROOT, {}, script="true\n")
    attrs = engine.store.job(done)
    attrs.update(job_state="F", Exit_status=0, stime=1)
    with engine.store.transaction() as st:
        st.put_job(done, attrs)
    waiting = engine.req_submit(ROOT, {"depend": f"afterok:{parent}"}, script="true\n")
    assert engine.store.job(waiting)["Hold_Types"] == "s"
    engine.req_alter(ROOT, waiting, {"depend": f"afterok:{done}"})  # met already
    assert (engine.store.job(waiting)["job_state"], engine.store.job(waiting)["Hold_Types"]
            ) == ("Q", "n")
    other = engine.req_submit(ROOT, {"depend": f"afterok:{parent}"}, script="true\n")
    engine.req_alter(ROOT, other, {"depend": None})  # removed
    assert engine.store.job(other)["Hold_Types"] == "n"
    held = engine.req_submit(ROOT, {"depend": f"afterok:{done}"}, script="true\n")
    engine._holds(ROOT, held, "s", add=True)  # a manager's s, the depend met already
    engine.req_alter(ROOT, held, {"depend": None})
    assert engine.store.job(held)["Hold_Types"] == "s"


def test_a_job_may_not_depend_on_itself(engine):
    """Review: qalter J -W depend=afterok:J held J for ever (before:J deadlocked it);
    PBS refuses a parent that is the child."""
    job_id = engine.req_submit(ROOT, {}, script="true\n")
    for kind in ("afterok", "before"):
        with pytest.raises(PbsError) as refused:
            engine.req_alter(ROOT, job_id, {"depend": f"{kind}:{job_id.split('.')[0]}"})
        assert refused.value.code == 15004, kind
    assert "depend" not in engine.store.job(job_id)


class Never:
    """runjob refuses jobs named ``never`` and gives them a depend on `failed`."""

    plugin_info = PluginInfo(events=("runjob",))
    failed = ""

    @hookimpl
    def runjob(self, event):
        if event.job.Job_Name == "never":
            event.job.depend = f"afterok:{self.failed}"
            event.reject("not now")


def test_a_runjob_hooks_dropped_depend_leaves_no_hold(engine, register_plugin):
    """Review: a runjob hook's depend on a job that failed was dropped, but the check had
    already held the job (s) in place: H for ever, with no depend."""
    hook = Never()
    register_plugin(hook, "never", isolation="inprocess")
    hook.failed = engine.req_submit(ROOT, {}, script="false\n")
    attrs = engine.store.job(hook.failed)
    attrs.update(job_state="F", Exit_status=1, stime=1)
    with engine.store.transaction() as st:
        st.put_job(hook.failed, attrs)
    job_id = engine.req_submit(ROOT, {"Job_Name": "never"}, script="true\n")
    assert engine._start(job_id, engine.store.job(job_id), "(x:ncpus=1)") is False
    stored = engine.store.job(job_id)
    assert (stored["job_state"], stored.get("Hold_Types", "n"), stored.get("depend")) == (
        "Q", "n", None), stored


class Flaky:
    """Names scheduler plug (partition PX) until it fails; or a bad instance."""

    plugin_info = PluginInfo()

    def __init__(self, fail: bool = False, bad: bool = False):
        self.fail, self.bad = fail, bad

    @hookimpl
    def sched_instances(self, server):
        if self.fail:
            raise OSError("its configuration momentarily unreadable")
        return [SchedulerInstance("plug", partitions=None if self.bad else ("PX",),
                                  scheduling=False)]


def test_a_plugins_last_answer_stands_while_it_fails(engine, register_plugin):
    """Review: while a plugin's sched_instances failed, default claimed its partition (its
    jobs ran under default's policy) and a reservation waiting for it looked ownerless;
    a bad instance (partitions None) raised through every qsub."""
    plugin = Flaky()
    register_plugin(plugin, "flaky")
    assert set(engine._schedulers()) == {"default", "plug"}
    plugin.fail = True
    scheds = engine._schedulers()
    assert set(scheds) == {"default", "plug"} and not scheds["default"].owns_partition("PX")
    plugin.fail, plugin.bad = False, True
    assert set(engine._schedulers()) == {"default"}  # (refused, logged; no exception)
    engine.req_submit(ROOT, {}, script="true\n")


class Instances:
    """Names scheduler plug (partition PX); its configure fails when `broken`."""

    plugin_info = PluginInfo()

    def __init__(self, broken: bool):
        self.broken = broken

    @hookimpl
    def configure(self, config):
        if self.broken:
            raise OSError("its licence server is down for a minute")

    @hookimpl
    def sched_instances(self, server):
        return [SchedulerInstance("plug", partitions=("PX",), scheduling=False)]


def test_a_plugin_that_failed_to_load_leaves_its_partitions_reservations_waiting(tmp_path):
    """Review: a plugin that failed at the server's start named no scheduler, and the poll
    took its partition for gone: its reservations were denied for good."""
    def plugins(broken: bool) -> PluginSet:
        made = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
        made.site.plugins["instances"] = PluginSite("instances", enabled=True,
                                                    attributes={}, config={})
        made.add("instances", Instances(broken))
        return made

    root = make_root()
    try:
        before = Engine(Home(root), plugins=plugins(False))
        resv_id = before.resvs.submit(ROOT, {"reserve_start": int(time.time()) + 3600,
                                             "reserve_duration": 600,
                                             "partition": "PX"})["id"]
        after = Engine(Home(root), plugins=plugins(True))  # (a restart; it fails to load)
        assert after.plugins.failed
        after.resvs.poll(time.time())
        assert resv_id in after.store.all("resv")
    finally:
        remove_root(root)


def test_the_jobs_waiting_on_one_job_are_read_alone(engine):
    """Review: every qdel, qsub and start read every job held for a dependency (3,000 of
    them made each qdel of an unrelated job cost 23 ms, a user's 10,000-id qdel minutes of
    the server's one thread): SQLite now picks those naming the job."""
    parents = [engine.req_submit(ROOT, {"Hold_Types": "u"}, script="true\n")
               for _ in range(3)]
    waiting = {p: engine.req_submit(ROOT, {"depend": f"afterok:{p}"}, script="true\n")
               for p in parents}
    assert set(engine.store.depend_held()) == set(waiting.values())
    assert set(engine.store.depend_held([parents[1]])) == {waiting[parents[1]]}
    assert engine.store.depend_held([]) == {}


def test_qalter_checks_only_the_depend_it_gives(engine):
    """Review: with qalter's depend merged by type, the entries kept were checked again as
    if given: once a kept before: target had gone, or belonged to another user, every later
    qalter -W depend of the job's owner was refused (15016, 15007)."""
    owner = Caller(65534, ROLE_USER)  # (nobody)
    mine = engine.req_submit(owner, {"Hold_Types": "u"}, script="true\n")
    theirs = engine.req_submit(ROOT, {"depend": "on:1"}, script="true\n")
    parent = engine.req_submit(owner, {"Hold_Types": "u"}, script="true\n")
    engine.req_alter(ROOT, mine, {"depend": f"before:{theirs}"})  # a manager's doing
    engine.req_alter(owner, mine, {"depend": f"afterok:{parent}"})
    assert engine.store.job(mine)["depend"] == f"before:{theirs},afterok:{parent}"
    engine._delete(ROOT, theirs, False)
    engine.req_alter(owner, mine, {"depend": f"afterany:{parent}"})
    assert engine.store.job(mine)["depend"].endswith(f"afterany:{parent}")


def test_on_count_holds_a_job_until_that_many_jobs_name_it_with_before(engine):
    """OpenPBS 23.06 (checked): ``on:2`` holds the job (``s``); each ``before*`` naming it
    counts it down and adds its ``after*`` (merged by type). Once spent, a ``before*`` of
    a type it has an entry of is accepted and changes nothing; one of another type deletes
    the new job. The job runs once what was added is met."""
    first = engine.req_submit(ROOT, {"depend": "on:2"}, script="true\n")
    attrs = engine.store.job(first)
    assert (attrs["job_state"], attrs["Hold_Types"], attrs["depend"]) == ("H", "s", "on:2")

    def named(kind: str) -> str:
        return engine.req_submit(ROOT, {"depend": f"{kind}:{first}", "Hold_Types": "u"},
                                 script="true\n")

    ok = named("beforeok")
    assert engine.store.job(first)["depend"] == f"on:1,afterok:{ok}"
    # The same job naming it again counts nothing more (review; PBS's register_dep).
    engine.req_alter(ROOT, ok, {"depend": f"beforeok:{first}"})
    assert engine.store.job(first)["depend"] == f"on:1,afterok:{ok}"
    ok2 = named("beforeok")
    assert engine.store.job(first)["depend"] == f"afterok:{ok}:{ok2}"
    late = named("beforeok")  # (spent; it has an afterok entry: accepted, no change)
    assert engine.store.job(first)["depend"] == f"afterok:{ok}:{ok2}"
    assert engine.store.job(late)["job_state"] == "H"
    other = named("beforeany")  # (spent; no afterany entry: rejected)
    attrs = engine.store.job(other)
    assert (attrs["job_state"], attrs["comment"]) == (
        "F", f"Dependency request for job rejected by {first}")
    # Both end well: the job is released.
    with engine.store.transaction() as st:
        for job in (ok, ok2):
            st.put_job(job, {**st.job(job), "job_state": "F", "Exit_status": 0,
                             "stime": 1})
    engine._resolve_depend([ok, ok2])
    attrs = engine.store.job(first)
    assert (attrs["job_state"], attrs["Hold_Types"]) == ("Q", "n")


def test_two_before_entries_naming_one_job_both_count(engine):
    """Review: the second entry was made from the target as it was before the first, and
    replaced it (a beforeok became a beforeany)."""
    first = engine.req_submit(ROOT, {"depend": "on:2"}, script="true\n")
    both = engine.req_submit(ROOT, {"depend": f"beforeok:{first},beforeany:{first}",
                                    "Hold_Types": "u"}, script="true\n")
    assert engine.store.job(first)["depend"] == f"afterok:{both},afterany:{both}"


def test_a_before_naming_a_job_without_on_is_rejected(engine):
    parent = engine.req_submit(ROOT, {"Hold_Types": "u"}, script="true\n")
    waiting = engine.req_submit(ROOT, {"depend": f"afterok:{parent}"}, script="true\n")
    fine = engine.req_submit(ROOT, {"depend": f"beforeok:{waiting}", "Hold_Types": "u"},
                             script="true\n")  # (an afterok entry: accepted, no change)
    assert engine.store.job(fine)["job_state"] == "H"
    assert engine.store.job(waiting)["depend"] == f"afterok:{parent}"
    plain = engine.req_submit(ROOT, {"Hold_Types": "u"}, script="true\n")
    new = engine.req_submit(ROOT, {"depend": f"beforeok:{plain}"}, script="true\n")
    attrs = engine.store.job(new)
    assert (attrs["job_state"], attrs["comment"]) == (
        "F", f"Dependency request for job rejected by {plain}")
    assert "depend" not in engine.store.job(plain)
    queued = engine.req_submit(ROOT, {"Hold_Types": "u"}, script="true\n")
    with pytest.raises(PbsError) as refused:  # (qalter: refused, the job stays as it was)
        engine.req_alter(ROOT, queued, {"depend": f"before:{plain}"})
    assert refused.value.code == 15054 and "depend" not in engine.store.job(queued)
    for bad in ("on:0", "on:x", "on:1:2", "on:\u00b2"):
        with pytest.raises(PbsError) as refused:
            engine.req_submit(ROOT, {"depend": bad}, script="true\n")
        assert refused.value.code == 15014, bad
