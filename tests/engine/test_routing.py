"""Route queues on an `Engine` in this process, with a clock the test moves: where a job in
one goes, when, and what is refused. Each expectation is what OpenPBS 23.06 did with the
same queues and requests (the adapter tests' build, checked by hand; core/engine/routing.py
lists the facts), unless the test says it is pbsplug's choice."""

from __future__ import annotations

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine import routing
from pbsplug.engine.errors import PBSE_IVALREQ, PBSE_QACESS, PBSE_QUNOENB, PbsError
from pbsplug.engine.server import ROLE_MANAGER, ROLE_USER, Caller, Engine
from pbsplug.engine.store import StoreWriteError

ROOT = Caller(0, ROLE_MANAGER)
USER = Caller(1001, ROLE_USER)
T0 = 1_800_000_000.0


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def engine(engine_here, clock):
    eng = engine_here(clock)
    qmgr(eng, "set server scheduling = false")  # (no job runs: where they are is the point)
    qmgr(eng, "create queue small queue_type=execution,enabled=true,started=true,"
              "resources_max.ncpus=1,resources_default.mem=100mb")
    qmgr(eng, "create queue big queue_type=execution,enabled=true,started=true,"
              "resources_min.ncpus=2,resources_max.ncpus=2")
    qmgr(eng, "create queue rq queue_type=route,route_destinations='small,big',"
              "resources_default.walltime=00:10:00,enabled=true,started=true")
    return eng


def qmgr(eng: Engine, text: str, code: int = 0) -> dict:
    out = eng.req_qmgr(ROOT, text)
    assert out["code"] == code, out
    return out


def submit(eng: Engine, caller: Caller = ROOT, queue: str = "rq", **attrs) -> str:
    res = attrs.pop("res", {})
    return eng.req_submit(caller, {"queue": queue, "Resource_List": res, **attrs}, "true\n")


def job(eng: Engine, job_id: str) -> dict:
    return eng.store.job(job_id)


def where(eng: Engine, job_id: str) -> tuple[str, str]:
    attrs = job(eng, job_id)
    return attrs["queue"], attrs["job_state"]


def log(eng: Engine) -> str:
    return "".join(path.read_text() for path in eng.log.dir.iterdir())


def later(eng: Engine, clock: Clock, seconds: float) -> None:
    """`seconds` on, then the server's routing pass."""
    clock.now += seconds
    eng.router.poll(clock.now)


def test_a_job_goes_to_the_first_destination_that_takes_it(engine):
    two = submit(engine, res={"ncpus": 2})
    one = submit(engine)
    assert where(engine, two) == ("big", "Q") and where(engine, one) == ("small", "Q")
    # The destination's defaults; the route queue's (walltime) went with it.
    assert job(engine, one)["Resource_List"]["mem"] == "100mb"
    assert "walltime" not in job(engine, one)["Resource_List"]
    assert "walltime" not in job(engine, two)["Resource_List"]
    assert f";Job;{two};Job routed from rq to big" in log(engine)
    assert "queue = big" in log(engine)  # (qsub's line names where the job went)


def test_a_job_no_destination_takes_is_refused_at_qsub_and_forgotten(engine):
    with pytest.raises(PbsError) as refused:
        submit(engine, res={"ncpus": 3})
    assert (refused.value.code, refused.value.message) == (
        routing.PBSE_ROUTEREJ, "Job rejected by all possible destinations")
    assert engine.store.jobs() == {}
    qmgr(engine, "unset queue rq route_destinations")  # no destination: none takes it
    with pytest.raises(PbsError):
        submit(engine)
    assert engine.store.jobs() == {}


def test_a_disabled_destination_keeps_the_job_waiting_until_its_retry_time(engine, clock):
    qmgr(engine, "set queue small enabled=false")
    one = submit(engine)
    assert where(engine, one) == ("rq", "Q")
    qmgr(engine, "set queue small enabled=true")
    later(engine, clock, 29)
    assert where(engine, one) == ("rq", "Q")  # tried again at route_retry_time, 30 s
    later(engine, clock, 1)
    assert where(engine, one) == ("small", "Q")
    assert job(engine, one)["qtime"] == int(clock.now)  # it entered small now


def test_held_and_waiting_jobs_stay_unless_the_queue_routes_them(engine, clock):
    held = submit(engine, Hold_Types="u")
    waiting = submit(engine, Execution_Time=int(T0) + 3600)
    assert where(engine, held) == ("rq", "H") and where(engine, waiting) == ("rq", "W")
    later(engine, clock, 60)
    assert where(engine, held) == ("rq", "H")
    engine.req_release(ROOT, [held])
    later(engine, clock, 1)  # released: routed at the next pass
    assert where(engine, held) == ("small", "Q")
    qmgr(engine, "set queue rq route_waiting_jobs=true,route_held_jobs=true")
    held2 = submit(engine, Hold_Types="u")
    later(engine, clock, 1)
    assert where(engine, held2) == ("small", "H") and where(engine, waiting) == ("small", "W")


def test_a_stopped_route_queue_keeps_its_jobs_until_started(engine, clock):
    qmgr(engine, "set queue rq started=false")
    one = submit(engine)
    later(engine, clock, 120)
    assert where(engine, one) == ("rq", "Q")
    qmgr(engine, "set queue rq started=true")
    later(engine, clock, 1)
    assert where(engine, one) == ("small", "Q")


def test_no_job_runs_from_a_route_queue(engine):
    """Neither a cycle (the route queue started, its destinations disabled: the job waits
    there, Q) nor qrun -H (PBS runs jobs of execution queues only: 15004, read in
    OpenPBS's source)."""
    qmgr(engine, "set server scheduling = true")
    qmgr(engine, "set queue small enabled=false")
    qmgr(engine, "set queue big enabled=false")
    one = submit(engine)
    engine.cycle()
    assert where(engine, one) == ("rq", "Q")
    vnode = next(iter(engine.store.all("node")))
    with pytest.raises(PbsError) as refused:
        engine.req_run(ROOT, one, vnodes=vnode)
    assert refused.value.code == PBSE_IVALREQ and where(engine, one) == ("rq", "Q")


def test_the_route_lifetime_is_looked_at_before_all_else(engine, clock):
    """As PBS's router does (read in its source): a held job past it is finished too, and
    so is one a destination would now take (at its next try, 30 s on)."""
    qmgr(engine, "set queue rq route_lifetime=10")
    held = submit(engine, Hold_Types="u")
    qmgr(engine, "set queue small enabled=false")
    late = submit(engine)
    qmgr(engine, "set queue small enabled=true")
    later(engine, clock, 30)
    for one in (held, late):
        attrs = job(engine, one)
        assert (one, attrs["job_state"], attrs.get("comment"), attrs["queue"]) == (
            one, "F", routing.EXPIRED, "rq")


def test_a_job_past_the_route_lifetime_is_finished(engine, clock):
    qmgr(engine, "set queue rq route_lifetime=10,route_retry_time=3")
    qmgr(engine, "set queue small enabled=false")
    qmgr(engine, "set queue big enabled=false")
    one = submit(engine)
    for _ in range(3):
        later(engine, clock, 3)
        assert where(engine, one) == ("rq", "Q")  # 9 s: within its lifetime
    later(engine, clock, 3)
    attrs = job(engine, one)
    assert (attrs["job_state"], attrs["comment"]) == ("F", "Route queue lifetime exceeded")


def test_qmove_into_a_route_queue_routes_at_once_or_finishes_the_job(engine):
    one = submit(engine, queue="workq", Hold_Types="u")
    engine.req_release(ROOT, [one])
    engine.req_move(ROOT, "rq", [one])
    assert where(engine, one) == ("small", "Q")
    wide = submit(engine, queue="workq", res={"ncpus": 5})
    (result,) = engine.req_move(ROOT, "rq", [wide])
    assert "error" not in result  # (qmove succeeded; the routing then failed)
    attrs = job(engine, wide)
    assert (attrs["queue"], attrs["job_state"], attrs["comment"]) == (
        "rq", "F", "Job rejected by all possible destinations")


def test_from_route_only_refuses_qsub_but_not_routing(engine):
    qmgr(engine, "set queue small from_route_only=true")
    with pytest.raises(PbsError) as refused:
        submit(engine, queue="small")
    assert (refused.value.code, refused.value.message) == (
        PBSE_QACESS, "Access to queue is denied")
    assert where(engine, submit(engine)) == ("small", "Q")
    # qmove: a manager's passes (checked on PBS); a user's is refused (pbsplug's reading).
    mine = submit(engine, caller=USER, queue="workq")
    (result,) = engine.req_move(USER, "small", [mine])
    assert result["error"]["code"] == PBSE_QACESS
    (result,) = engine.req_move(ROOT, "small", [mine])
    assert "error" not in result and where(engine, mine) == ("small", "Q")


def test_qmgr_refuses_to_enable_a_route_queue_without_destinations(engine):
    out = qmgr(engine, "create queue r2 queue_type=route,enabled=true", code=15030)
    assert "Cannot enable queue, incomplete definition" in "".join(out["errors"])
    assert engine.store.get("queue", "r2") is None
    qmgr(engine, "create queue r2 queue_type=route")
    qmgr(engine, "set queue r2 enabled=true", code=15030)
    qmgr(engine, "set queue r2 route_destinations=small")
    qmgr(engine, "set queue r2 enabled=true")
    qmgr(engine, "unset queue r2 route_destinations")  # (PBS lets this be)


def test_qmgr_refuses_to_enable_a_queue_without_a_type(engine):
    """An untyped queue could be enabled, and ran jobs. PBS refuses the enable with 15030
    (qmgr's exit status 182), at create too, and neither enabled nor started is set; a
    type given in the same request counts; started alone is let be. A job for an untyped
    queue is refused as for any disabled one (15021). As OpenPBS 23.06 (checked)."""
    qmgr(engine, "create queue q3")
    out = qmgr(engine, "set queue q3 enabled=true,started=true", code=15030)
    assert out["status"] == 15030 % 256
    assert out["errors"][0] == "qmgr obj=q3 svr=default: Cannot enable queue, incomplete " \
                               "definition"
    assert engine.store.get("queue", "q3") == {}
    qmgr(engine, "set queue q3 started=true")
    with pytest.raises(PbsError) as refused:
        submit(engine, caller=USER, queue="q3")
    assert refused.value.code == PBSE_QUNOENB
    qmgr(engine, "create queue q4 enabled=true", code=15030)
    assert engine.store.get("queue", "q4") is None
    qmgr(engine, "create queue q5 queue_type=execution,enabled=true")
    qmgr(engine, "set queue q3 queue_type=execution,enabled=true,started=true")
    assert where(engine, submit(engine, caller=USER, queue="q3")) == ("q3", "Q")
    # Nor may its type go again, enabled or not (PBS's 15137, exit 33): that was another
    # way to an enabled queue without one.
    for name in ("q3", "q5"):
        out = qmgr(engine, f"unset queue {name} queue_type", code=15137)
        assert (out["status"], out["errors"][0]) == (
            33, f"qmgr obj={name} svr=default: Queue type must be set")
        assert engine.store.get("queue", name)["queue_type"] == "Execution"


class MoveWatch:
    plugin_info = PluginInfo(events=("movejob",))

    def __init__(self):
        self.seen = []

    @hookimpl
    def movejob(self, event):
        self.seen.append(event.job.queue)


def test_routing_fires_no_movejob_hook(engine, register_plugin, clock):
    watch = MoveWatch()
    register_plugin(watch, "watch", isolation="inprocess")
    submit(engine)
    one = submit(engine, queue="workq", Hold_Types="u")
    engine.req_move(ROOT, "rq", [one])
    engine.req_release(ROOT, [one])
    later(engine, clock, 1)
    assert where(engine, one) == ("small", "Q")
    assert watch.seen == ["rq"]  # the qmove's, not the routings' (at qsub, at a pass)


def test_a_loop_of_route_queues_moves_one_hop_a_pass(engine, clock):
    qmgr(engine, "create queue r2 queue_type=route,route_destinations=r3")
    qmgr(engine, "create queue r3 queue_type=route,route_destinations=r2")
    qmgr(engine, "set queue r2 enabled=true,started=true")
    qmgr(engine, "set queue r3 enabled=true,started=true")
    one = submit(engine, queue="r2")
    assert where(engine, one) == ("r3", "Q")
    later(engine, clock, 1)
    assert where(engine, one) == ("r2", "Q")
    later(engine, clock, 1)
    assert where(engine, one) == ("r3", "Q")


def test_the_servers_own_failure_to_write_is_tried_again(engine, clock, monkeypatch):
    """A full disk while the job is written into its destination (PBS's 15010) is a
    refusal for now, not for good: the job waits, and goes at its next try."""
    qmgr(engine, "set queue small enabled=false")
    one = submit(engine)
    qmgr(engine, "set queue small enabled=true")
    real, calls = engine._into_queue, []

    def full_disk_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise StoreWriteError("database or disk is full")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "_into_queue", full_disk_once)
    later(engine, clock, 30)
    assert where(engine, one) == ("rq", "Q")
    later(engine, clock, 30)
    assert where(engine, one) == ("small", "Q")


def test_a_destination_that_refused_for_good_is_not_asked_again(engine, clock):
    """(as PBS keeps a job's bad destinations): one log line of small's limits, not one
    per retry while big is disabled"""
    qmgr(engine, "set queue rq route_retry_time=1")
    qmgr(engine, "set queue big enabled=false")
    two = submit(engine, res={"ncpus": 2})
    for _ in range(20):
        later(engine, clock, 1)
    assert where(engine, two) == ("rq", "Q")
    assert log(engine).count(f";{two};Resource_List.ncpus is outside") == 1
    qmgr(engine, "set queue big enabled=true")
    later(engine, clock, 1)
    assert where(engine, two) == ("big", "Q")


def test_one_job_that_cannot_be_routed_stops_no_other(engine, clock, monkeypatch):
    qmgr(engine, "set queue small enabled=false")
    bad, good = submit(engine), submit(engine)
    qmgr(engine, "set queue small enabled=true")
    real = engine.route_to

    def broken(job_id, *args, **kwargs):
        if job_id == bad:
            raise TypeError("a value nothing foresaw")
        return real(job_id, *args, **kwargs)

    monkeypatch.setattr(engine, "route_to", broken)
    for _ in range(31):
        clock.now += 1
        engine.poll()
    assert where(engine, good) == ("small", "Q") and where(engine, bad) == ("rq", "Q")
    assert log(engine).count(f";{bad};routing from rq failed: TypeError") == 1


def test_destinations_naming_this_server_or_the_queue_itself(engine):
    """``small@<this server>`` is small; the route queue itself (a loop) and another
    server's queue are passed over (pbsplug's reading)."""
    qmgr(engine, f"set queue rq route_destinations='rq,big@elsewhere,small@{engine.server_name}'")
    one = submit(engine)
    assert where(engine, one) == ("small", "Q")


def test_a_job_routed_at_qsub_waits_for_job_accumulation_time(engine, clock):
    qmgr(engine, "set server scheduling = true")
    qmgr(engine, "set sched default job_accumulation_time = 5")
    engine.sched_due.clear()
    submit(engine)
    assert engine.sched_due == {"default": clock.now + 5}
