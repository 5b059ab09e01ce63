"""A job's request as the server completes it (`lifecycle.completed_request`), on an `Engine`
in this process: queue and server defaults, resource limits, the conversion of a job without
a select, and what qalter and qmove do to each. Each expectation is what OpenPBS 23.06
answered to the same requests (the adapter tests' build, checked by hand)."""

from __future__ import annotations

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.errors import PBSE_BADATVAL, PBSE_EXCQRESC, PBSE_INVALJOBRESC, PbsError
from pbsplug.engine.server import ROLE_MANAGER, ROLE_OPERATOR, ROLE_USER, Caller, Engine
from pbsplug.scheduler.model import schedselect

ROOT = Caller(0, ROLE_MANAGER)
USER = Caller(1001, ROLE_USER)


@pytest.fixture
def engine(engine_here):
    return engine_here()


def submit(eng: Engine, caller: Caller = ROOT, queue_name: str | None = None, **res) -> str:
    attrs = {"Resource_List": res, "Hold_Types": "u", **({"queue": queue_name} if queue_name
                                                         else {})}
    return eng.req_submit(caller, attrs, "true\n")


def request(eng: Engine, job_id: str) -> dict:
    return eng.store.job(job_id)["Resource_List"]


def queue(eng: Engine, name: str, **attrs) -> None:
    """Create (or change) queue `name` with `attrs`."""
    with eng.store.transaction() as st:
        current = st.get("queue", name) or {"queue_type": "Execution", "enabled": True,
                                             "started": True}
        st.put("queue", name, {**current, **attrs})


def server(eng: Engine, **attrs) -> None:
    with eng.store.transaction() as st:
        st.put("server", "server", {**st.get("server", "server"), **attrs})


def test_a_job_without_a_select_gets_its_conversion_and_place_pack(engine):
    with engine.store.transaction() as st:
        st.put("resource", "scratch", {"type": "size", "flag": "h"})
    job = submit(engine, vmem="2gb", ncpus=2, mem="1gb", arch="linux", cput="100",
                 walltime="60", scratch="5gb")
    res = request(engine, job)
    assert res["select"] == "1:arch=linux:mem=1gb:ncpus=2:scratch=5gb:vmem=2gb"
    assert (res["place"], res["nodect"], res["ncpus"], res["cput"]) == \
        ("pack", 1, 2, "00:01:40")
    plain = submit(engine, walltime="60")  # default_chunk's ncpus
    assert (request(engine, plain)["select"], request(engine, plain)["ncpus"]) == \
        ("1:ncpus=1", 1)


def test_qalter_derives_a_converted_select_again_until_a_select_is_given(engine):
    job = submit(engine, ncpus=2, mem="1gb", walltime="100")
    engine.req_alter(ROOT, job, {"Resource_List": {"ncpus": 3}})
    res = request(engine, job)
    assert (res["select"], res["ncpus"], res["place"]) == ("1:mem=1gb:ncpus=3", 3, "pack")
    engine.req_alter(ROOT, job, {"Resource_List": {"select": "1:ncpus=4"}})
    res = request(engine, job)  # PBS keeps the asked mem and the derived place
    assert (res["select"], res["ncpus"], res["mem"], res["place"]) == \
        ("1:ncpus=4", 4, "1gb", "pack")
    with pytest.raises(PbsError) as refused:  # a select given: PBS's 15109 from now on
        engine.req_alter(ROOT, job, {"Resource_List": {"mem": "2gb"}})
    assert refused.value.code == PBSE_INVALJOBRESC and "resource is: mem" in \
        refused.value.message
    assert request(engine, job)["mem"] == "1gb"


def test_queue_then_server_defaults_fill_what_a_job_does_not_ask_for(engine):
    queue(engine, "workq", resources_default={"mem": "20mb"})
    server(engine, resources_default={"mem": "99mb", "walltime": "00:10:00"})
    job = submit(engine)
    res = request(engine, job)
    assert (res["mem"], res["walltime"], res["select"]) == \
        ("20mb", "00:10:00", "1:mem=20mb:ncpus=1")
    asked = submit(engine, mem="1mb", walltime="60")
    assert (request(engine, asked)["mem"], request(engine, asked)["walltime"]) == \
        ("1mb", "00:01:00")
    chunks = submit(engine, select="2:ncpus=1")  # a select job: job-wide beside it
    assert (request(engine, chunks)["mem"], request(engine, chunks)["select"]) == \
        ("20mb", "2:ncpus=1")


@pytest.mark.parametrize(("limits", "res"), [
    ({"resources_max": {"walltime": "01:00:00"}}, {"walltime": "2:00:00"}),
    ({"resources_min": {"mem": "10mb"}}, {"mem": "5mb"}),
    ({"resources_min": {"ncpus": 2}}, {}),  # default_chunk's ncpus counts
    ({"resources_max": {"mem": "1gb"}}, {"select": "2:ncpus=1:mem=600mb"}),  # summed
    ({"resources_max": {"nodect": 1}}, {"select": "2:ncpus=1"}),
    ({"resources_max": {"arch": "linux"}}, {"arch": "sun"}),  # by their text
    ({"resources_min": {"arch": "linux"}}, {"arch": "abc"}),
    ({"resources_max": {"walltime": "00:30:00"}, "resources_default": {"walltime": "00:40:00"}},
     {}),  # a default past the limit
])
def test_qsub_past_a_queues_limits_is_refused_even_for_root(engine, limits, res):
    queue(engine, "workq", **limits)
    for caller in (USER, ROOT):
        with pytest.raises(PbsError) as refused:
            submit(engine, caller, **res)
        assert (refused.value.code, refused.value.message) == (
            PBSE_EXCQRESC, "Job violates queue and/or server resource limits")
    assert engine.store.jobs() == {}


def test_the_servers_resources_max_limits_too_and_within_limits_passes(engine):
    server(engine, resources_max={"ncpus": 4})
    with pytest.raises(PbsError) as refused:
        submit(engine, select="2:ncpus=3")
    assert refused.value.code == PBSE_EXCQRESC
    queue(engine, "workq", resources_max={"arch": "linux", "walltime": "01:00:00"})
    job = submit(engine, USER, select="2:ncpus=2", walltime="01:00:00")
    assert request(engine, job)["ncpus"] == 4
    job = submit(engine, USER, ncpus=2, arch="abc")
    assert request(engine, job)["select"] == "1:arch=abc:ncpus=2"


def test_resources_max_is_the_last_default_and_a_queues_limit_goes_first(engine):
    queue(engine, "workq", resources_max={"walltime": "00:30:00", "ncpus": 2})
    server(engine, resources_max={"walltime": "00:20:00", "mem": "2gb"})
    job = submit(engine, USER)  # the queue's max first: its limit goes before the server's
    res = request(engine, job)
    assert (res["walltime"], res["mem"], res["select"], res["ncpus"]) == \
        ("00:30:00", "2gb", "1:mem=2gb:ncpus=1", 1)  # ncpus: default_chunk before max
    assert request(engine, submit(engine, USER, walltime="00:25:00"))["walltime"] == \
        "00:25:00"


def test_a_users_qalter_past_the_limits_is_refused_an_operators_is_not(engine):
    queue(engine, "workq", resources_max={"walltime": "01:00:00"},
          resources_default={"walltime": "00:10:00"})
    job = submit(engine, USER)
    with pytest.raises(PbsError) as refused:
        engine.req_alter(USER, job, {"Resource_List": {"walltime": "03:00:00"}})
    assert refused.value.code == PBSE_EXCQRESC
    assert request(engine, job)["walltime"] == "00:10:00"
    engine.req_alter(Caller(0, ROLE_OPERATOR), job, {"Resource_List": {"walltime": "03:00:00"}})
    assert request(engine, job)["walltime"] == "03:00:00"
    engine.req_alter(USER, job, {"Resource_List": {"walltime": None}})  # unset: its default
    assert request(engine, job)["walltime"] == "00:10:00"


def test_a_value_set_again_is_asked_for_even_when_it_equals_the_default(engine):
    queue(engine, "workq", resources_default={"mem": "20mb"})
    queue(engine, "q2", resources_default={"mem": "40mb"})
    job = submit(engine, ncpus=2)
    engine.req_alter(ROOT, job, {"Resource_List": {"mem": "20mb"}})
    engine.req_move(ROOT, "q2", [job])
    assert request(engine, job)["mem"] == "20mb"


def test_a_select_job_gets_place_free_and_a_converted_value_is_quoted(engine):
    res = request(engine, submit(engine, select="2:ncpus=1"))
    assert (res["place"], res["nodect"]) == ("free", 2)
    assert request(engine, submit(engine, select="1:ncpus=1", place="scatter"))["place"] == \
        "scatter"
    job = submit(engine, USER, arch="linux+100:ncpus=1", ncpus=2)
    res = request(engine, job)
    assert (res["select"], res["ncpus"], res["nodect"]) == \
        ('1:arch="linux+100:ncpus=1":ncpus=2', 2, 1)
    with pytest.raises(PbsError) as refused:  # (no select can hold both quotes)
        submit(engine, USER, arch="a\"'b")
    assert refused.value.code == PBSE_BADATVAL


def test_qmove_swaps_one_queues_defaults_for_anothers_and_keeps_what_was_asked(engine):
    queue(engine, "workq", resources_default={"mem": "20mb"},
          resources_max={"walltime": "01:00:00"})
    queue(engine, "q2", resources_default={"mem": "30mb"},
          resources_max={"walltime": "00:30:00"})
    queue(engine, "q3")
    defaulted = submit(engine)
    asked = submit(engine, mem="20mb", walltime="600")
    engine.req_move(ROOT, "q2", [defaulted, asked])
    res = request(engine, defaulted)
    assert (res["mem"], res["walltime"], res["select"]) == \
        ("30mb", "00:30:00", "1:mem=30mb:ncpus=1")
    res = request(engine, asked)
    assert (res["mem"], res["walltime"], res["select"]) == \
        ("20mb", "00:10:00", "1:mem=20mb:ncpus=1")
    engine.req_move(ROOT, "q3", [defaulted])  # no defaults there: q2's go
    res = request(engine, defaulted)
    assert ("mem" in res, "walltime" in res, res["select"]) == (False, False, "1:ncpus=1")


def test_a_users_or_operators_qmove_past_the_limits_is_refused_a_managers_is_not(engine):
    queue(engine, "q2", resources_max={"walltime": "00:30:00"})
    jobs = [submit(engine, USER, walltime="00:50:00") for _ in range(3)]
    for caller, job in ((USER, jobs[0]), (Caller(1001, ROLE_OPERATOR), jobs[1])):
        results = engine.req_move(caller, "q2", [job])
        assert results[0]["error"]["code"] == PBSE_EXCQRESC
    engine.req_move(ROOT, "q2", jobs[2:])
    assert [engine.store.job(j)["queue"] for j in jobs] == ["workq", "workq", "q2"]


class Recorder:
    """queuejob sees the request as asked; modifyjob sets mem on jobs named ``set``."""

    plugin_info = PluginInfo(events=("queuejob", "modifyjob"))

    def __init__(self):
        self.seen: list = []

    @hookimpl
    def queuejob(self, event):
        self.seen.append(dict(event.job.Resource_List))

    @hookimpl
    def modifyjob(self, event):
        if event.job.Job_Name == "set":
            event.job.Resource_List["mem"] = "30mb"


def test_hooks_see_the_request_before_it_is_completed_and_their_values_are_asked_for(
        engine, register_plugin):
    recorder = Recorder()
    register_plugin(recorder, "recorder", isolation="inprocess")
    queue(engine, "workq", resources_default={"mem": "20mb"})
    queue(engine, "q2", resources_default={"mem": "40mb"})
    job = engine.req_submit(ROOT, {"Resource_List": {"ncpus": 2}, "Job_Name": "set",
                                   "Hold_Types": "u"}, "true\n")
    assert recorder.seen == [{"ncpus": 2}]  # no select, no default yet (as PBS's hook)
    assert request(engine, job)["select"] == "1:mem=20mb:ncpus=2"
    engine.req_alter(ROOT, job, {"Resource_List": {"walltime": "60"}})
    assert request(engine, job)["select"] == "1:mem=30mb:ncpus=2"  # the hook's mem
    engine.req_move(ROOT, "q2", [job])
    assert request(engine, job)["mem"] == "30mb"  # asked (by the hook), not a default


@pytest.mark.parametrize("column", [None, "not json", '{"defaults": 1}', "[1, 2]"])
def test_a_job_stored_without_what_the_server_wrote(engine, column):
    """A row of an older pbsplug (nothing written) or a record that does not read: its
    select's sums and a select that is its conversion count as the server's, the rest as
    asked for."""
    queue(engine, "q2", resources_default={"mem": "30mb"})
    converted = submit(engine, ncpus=2, mem="1gb")
    chunks = submit(engine, select="2:ncpus=1:mem=10mb")
    with engine.store.transaction() as st:
        old = st.job(chunks)
        old["Resource_List"] = {"select": "2:ncpus=1:mem=10mb", "mem": "20mb", "ncpus": 2,
                                "nodect": 2}
        st.put_job(chunks, old)
        for job in (converted, chunks):
            st.db.execute("UPDATE jobs SET written=? WHERE id=?", (column, job))
    engine.req_alter(ROOT, chunks, {"Resource_List": {"select": "1:ncpus=1"}})
    res = request(engine, chunks)  # the old sums went with the old select
    assert (res["ncpus"], res["nodect"], "mem" in res) == (1, 1, False)
    engine.req_alter(ROOT, converted, {"Resource_List": {"ncpus": 3}})  # derived again
    res = request(engine, converted)
    assert (res["select"], res["mem"]) == ("1:mem=1gb:ncpus=3", "1gb")
    engine.req_move(ROOT, "q2", [converted])
    assert request(engine, converted)["mem"] == "1gb"  # asked for: stays


def test_a_converted_value_with_a_colon_is_placed_as_asked_for(engine, caplog):
    """Review: the value was pasted in unquoted (``1:arch=a:b:ncpus=1``), so every cycle
    failed on it and set the job aside. Quoted, the scheduler reads arch ``a:b``, which no
    vnode has: the job waits, with the scheduler's comment."""
    job = submit(engine, USER, arch="a:b", ncpus=1)
    engine.req_release(ROOT, [job], "u")
    engine.cycle()
    stored = engine.store.job(job)
    assert stored["job_state"] == "Q", stored
    assert "cycle failed" not in caplog.text
    assert str(stored.get("comment", "")).startswith(("Can Never Run", "Not Running")), stored


class SameMem:
    """modifyjob sets mem to 20mb (the value it may already have) on jobs named ``same``."""

    plugin_info = PluginInfo(events=("modifyjob",))

    @hookimpl
    def modifyjob(self, event):
        if event.job.Job_Name == "same":
            event.job.Resource_List["mem"] = "20mb"


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
def test_a_hooks_value_equal_to_a_default_is_asked_for(engine, register_plugin, isolation):
    """Review: what hooks set was read from the job after the runner had taken the
    changes away, so a hook's mem equal to the default stayed a default and qmove
    replaced it."""
    register_plugin(SameMem(), "same", isolation=isolation)
    queue(engine, "workq", resources_default={"mem": "20mb"})
    queue(engine, "q2", resources_default={"mem": "40mb"})
    job = engine.req_submit(ROOT, {"Resource_List": {"ncpus": 2}, "Job_Name": "same",
                                   "Hold_Types": "u"}, "true\n")
    engine.req_alter(ROOT, job, {"Resource_List": {"walltime": "60"}})
    assert "mem" not in engine.store.written(job)["defaults"]
    engine.req_move(ROOT, "q2", [job])
    assert request(engine, job)["mem"] == "20mb"


def test_a_users_qrls_is_not_limited_by_limits_lowered_since(engine):
    queue(engine, "workq", resources_max={"walltime": "01:00:00"})
    job = submit(engine, USER, walltime="00:50:00")
    queue(engine, "workq", resources_max={"walltime": "00:30:00"})
    engine.req_release(USER, [job], "u")
    assert engine.store.job(job)["job_state"] == "Q"


def test_the_schedselect_is_stored_as_pbs_writes_it_and_shown_to_managers_only(engine):
    """OpenPBS 23.06 (checked): each chunk gets what it lacks of the queue's default_chunk,
    then the server's, each table by name; qalter and qmove write it again; qstat shows it
    to managers only (not to an operator)."""
    server(engine, default_chunk={"ncpus": 1, "mem": "50mb"})
    chunks = submit(engine, select="2:ncpus=1:arch=linux")
    converted = submit(engine, ncpus=2, mem="1gb")
    mixed = submit(engine, select="1:mem=10mb+1:ncpus=2")
    stored = {job: engine.store.job(job)["schedselect"] for job in (chunks, converted, mixed)}
    assert stored == {chunks: "2:ncpus=1:arch=linux:mem=50mb", converted: "1:mem=1gb:ncpus=2",
                      mixed: "1:mem=10mb:ncpus=1+1:ncpus=2:mem=50mb"}
    engine.req_alter(ROOT, chunks, {"Resource_List": {"select": "3:ncpus=1"}})
    assert engine.store.job(chunks)["schedselect"] == "3:ncpus=1:mem=50mb"
    server(engine, default_chunk={"ncpus": 1, "mem": "50mb", "arch": "linux"})
    queue(engine, "dq", default_chunk={"mem": "7mb"})
    vmem = submit(engine, select="2:vmem=1gb")
    assert engine.store.job(vmem)["schedselect"] == "2:vmem=1gb:arch=linux:mem=50mb:ncpus=1"
    engine.req_move(ROOT, "dq", [vmem])
    assert engine.store.job(vmem)["schedselect"] == "2:vmem=1gb:mem=7mb:arch=linux:ncpus=1"
    # A default_chunk changed since does not reach a queued job's chunks (PBS keeps its
    # schedselect) until its request is completed again.
    server(engine, default_chunk={"ncpus": 1, "mem": "80mb"})
    assert schedselect(engine._schedselect(chunks, engine.store.job(chunks))) == \
        "3:ncpus=1:mem=50mb"
    engine.req_alter(ROOT, chunks, {"Resource_List": {"select": "2:ncpus=1"}})
    assert engine.store.job(chunks)["schedselect"] == "2:ncpus=1:mem=80mb"
    assert "schedselect" in engine.req_stat_jobs(ROOT, [chunks])[chunks]
    for caller in (USER, Caller(1001, ROLE_OPERATOR)):
        assert "schedselect" not in engine.req_stat_jobs(caller, [chunks])[chunks]


class WritesSchedselect:
    plugin_info = PluginInfo(events=("modifyjob",))

    @hookimpl
    def modifyjob(self, event):
        event.job.schedselect = "1:ncpus=64"


def test_a_hook_may_not_write_the_schedselect(engine, register_plugin):
    """Review: a modifyjob hook's schedselect was stored on a qalter of something else,
    and the scheduler placed it. It is the server's, as PBS's: the hook fails."""
    register_plugin(WritesSchedselect(), "writer", isolation="inprocess")
    job = submit(engine, select="1:ncpus=1")
    with pytest.raises(PbsError):
        engine.req_alter(ROOT, job, {"Job_Name": "renamed"})
    assert engine.store.job(job)["schedselect"] == "1:ncpus=1"


def test_a_stored_schedselect_that_does_not_read_is_set_aside(engine):
    """Review: a row whose schedselect does not parse (written by hand, a foreign
    database) failed every cycle, and setting aside did not look at it. Now it is set
    aside (the job held, the value dropped: worked out again from its request)."""
    bad = submit(engine, select="1:ncpus=1")
    with engine.store.transaction() as st:
        st.put_job(bad, {**st.job(bad), "schedselect": "1:ncpus"})
    assert engine.set_aside() == 1
    attrs = engine.store.job(bad)
    assert "schedselect" not in attrs and "bad attribute value set aside" in attrs["comment"]


def test_an_empty_job_wide_value_is_refused_at_qsub(engine):
    """Review: ``qsub -l arch=`` was queued with a converted select no cycle could read
    (``1:arch=:ncpus=1``): each such job cost a failed cycle."""
    with pytest.raises(PbsError) as refused:
        submit(engine, arch="")
    assert refused.value.code == PBSE_BADATVAL and "arch=" in refused.value.message
    assert engine.store.jobs() == {}


def test_booleans_and_string_arrays_are_limited_by_a_minimum_only(engine):
    """OpenPBS 23.06 (checked): a boolean other than resources_min's is refused, and a
    string array with a value resources_min's list does not hold; resources_max refuses
    neither."""
    with engine.store.transaction() as st:
        st.put("resource", "bres", {"type": "boolean", "flag": "h"})
        st.put("resource", "sares", {"type": "string_array"})
    queue(engine, "lq", resources_max={"bres": False, "sares": "a,b"})
    for asked in ({"bres": True}, {"bres": False}, {"sares": "c"}, {"sares": "a,c"}):
        assert submit(engine, **asked, queue_name="lq")
    queue(engine, "lq", resources_max={}, resources_min={"bres": False, "sares": "a,b"})
    assert submit(engine, bres=False, queue_name="lq")
    assert submit(engine, sares="b,a", queue_name="lq")
    for asked in ({"bres": True}, {"sares": "c"}, {"sares": "a,c"}):
        with pytest.raises(PbsError) as refused:
            submit(engine, **asked, queue_name="lq")
        assert refused.value.code == PBSE_EXCQRESC, asked
