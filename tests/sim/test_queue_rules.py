"""A replay's queue rules on who and how many may enter (the platform's ACLs,
from_route_only and limits on queued jobs), checked by the engine's own code
(`pbsplug.engine.admission`, `pbsplug.engine.limits`) when a job is submitted to a queue
and when a route queue routes it: where each job goes, when, and what is refused, worked
out by hand and checked against the local engine with the same queues."""

from __future__ import annotations

import pytest

from pbsplug import AttributeReadOnly, PluginInfo, clock, hookimpl
from pbsplug.engine.errors import PbsError
from pbsplug.engine.home import Home
from pbsplug.engine.server import ROLE_MANAGER, ROLE_USER, Caller, Engine
from pbsplug.engine.testing import make_root, remove_root
from pbsplug.plugins import PluginSet
from pbsplug.sim.engine import EPOCH, Simulator
from pbsplug.sim.machine import PlatformError, load_platform
from pbsplug.sim.records import COMPLETED, REJECTED, TraceJob
from pbsplug.siteconfig import SiteConfig

from .helpers import guard_periodic_runs, replay

#: One host of one cpu. `entry` routes to `vip` (alice's), then to `batch` (at most two
#: jobs not finished, or not begun: {limit}; only from a route queue).
PLATFORM = """
[[hosts]]
prefix = "n"
count = 1
ncpus = 1

[queues.entry]
queue_type = "Route"
route_destinations = ["vip", "batch"]
route_retry_time = 60

[queues.vip]
acl_user_enable = true
acl_users = ["alice"]

[queues.batch]
from_route_only = true
{limit} = "[o:PBS_ALL=2]"
"""


def platform(tmp_path, limit="max_queued", text=PLATFORM):
    path = tmp_path / "p.toml"
    path.write_text(text.format(limit=limit))
    return load_platform(path)


def tj(job_id, submit, user, group="users", queue="entry", run=100, ncpus=1, wall=200):
    return TraceJob(str(job_id), 1, float(submit), float(run), ncpus,
                    None if wall is None else float(wall), user=user, group=group, queue=queue)


#: Four jobs at 0 into `entry`: alice's goes to vip (its ACL names her), bob's and carol's
#: to batch (vip refuses them for good), dave's finds batch full (two jobs there) and is
#: tried again every 60 s (route_retry_time). One cpu: alice's runs 0-100, bob's 100-200,
#: carol's 200-300, dave's 300-400 wherever it waited.
JOBS = [tj(1, 0, "alice"), tj(2, 0, "bob"), tj(3, 0, "carol"), tj(4, 0, "dave")]


@pytest.mark.parametrize(("limit", "dave_enters"), [
    # max_queued counts every job not finished: batch has two until bob's ends at 200;
    # dave's is tried at 60, 120, 180, and routed at 240.
    ("max_queued", 240),
    # queued_jobs_threshold counts the jobs not begun: bob's begins at 100, so at 120.
    ("queued_jobs_threshold", 120),
])
def test_acls_and_limits_on_queued_jobs_decide_where_and_when_jobs_are_routed(
        tmp_path, limit, dave_enters):
    sink, sim = replay(platform(tmp_path, limit), JOBS)
    assert sim.entered == {"1": ("vip", 0, "Q"), "2": ("batch", 0, "Q"),
                           "3": ("batch", 0, "Q"), "4": ("batch", dave_enters, "Q")}
    assert {k: (r.final_state, r.start, r.end) for k, r in sink.by_id().items()} == {
        "1": (COMPLETED, 0, 100), "2": (COMPLETED, 100, 200), "3": (COMPLETED, 200, 300),
        "4": (COMPLETED, 300, 400)}


@pytest.mark.parametrize(("limit", "dave_enters"), [
    ("max_queued_res", 240), ("queued_jobs_threshold_res", 120)])
def test_limits_on_queued_resources_count_what_the_jobs_ask(tmp_path, limit, dave_enters):
    # Two cpus in batch: as two jobs of one cpu above (each job's select asks one).
    text = PLATFORM.replace('{limit} = "[o:PBS_ALL=2]"',
                            f'{limit} = {{{{ncpus = "[o:PBS_ALL=2]"}}}}')
    sink, sim = replay(platform(tmp_path, text=text), JOBS)
    assert sim.entered["4"] == ("batch", dave_enters, "Q")


def test_a_group_acl_names_the_traces_group(tmp_path):
    # vip takes the staff group's jobs, and (both lists on) only alice's of them.
    text = PLATFORM.replace("acl_user_enable = true\n", "acl_group_enable = true\n"
                            'acl_groups = ["staff"]\n')
    jobs = [tj(1, 0, "bob", "staff"), tj(2, 0, "dave"), tj(3, 0, "alice")]
    sink, sim = replay(platform(tmp_path, text=text), jobs)
    assert sim.entered == {"1": ("vip", 0, "Q"), "2": ("batch", 0, "Q"),
                           "3": ("batch", 0, "Q")}
    text = text.replace("acl_group_enable", "acl_user_enable = true\nacl_group_enable")
    jobs = [tj(1, 0, "bob", "staff"), tj(2, 0, "alice", "staff"), tj(3, 0, "alice")]
    sink, sim = replay(platform(tmp_path, text=text), jobs)
    assert sim.entered == {"1": ("batch", 0, "Q"), "2": ("vip", 0, "Q"),
                           "3": ("batch", 0, "Q")}


def test_qsub_into_a_queue_is_refused_as_the_engine_refuses_it(tmp_path):
    """A trace job naming a from_route_only queue is refused as qsub is (PBS's 15022), one
    naming a queue whose ACL refuses its user too (15007), and one over a queue's limit on
    queued jobs (15142); the others run."""
    text = PLATFORM + '\n[queues.small]\nmax_queued = "[u:PBS_GENERIC=1]"\n'
    jobs = [tj(1, 0, "bob", queue="batch"), tj(2, 0, "bob", queue="vip"),
            tj(3, 0, "alice", queue="vip"), tj(4, 0, "bob", queue="small"),
            tj(5, 0, "bob", queue="small"), tj(6, 0, "carol", queue="small")]
    sink, sim = replay(platform(tmp_path, text=text), jobs)
    by_id = sink.by_id()
    assert {k: (r.final_state, r.reason) for k, r in by_id.items()
            if r.final_state == REJECTED} == {
        "1": (REJECTED, "qsub: Access to queue is denied"),
        "2": (REJECTED, "qsub: Unauthorized Request"),
        "5": (REJECTED, "qsub: would exceed queue generic's per-user limit")}  # (PBS's)
    assert sim.entered == {"3": ("vip", 0, "Q"), "4": ("small", 0, "Q"),
                           "6": ("small", 0, "Q")}


def test_a_job_no_destination_takes_for_good_is_rejected_at_qsub(tmp_path):
    """vip's ACL refuses bob's jobs for good; full batch refuses for now, but its
    resources_max for good, looked at first (as the engine does): a job past it is
    rejected at once, as qsub refuses it (15039), not tried again."""
    text = PLATFORM + 'resources_max = {{ncpus = 1}}\n'
    sink, sim = replay(platform(tmp_path, text=text),
                       [tj(1, 0, "bob"), tj(2, 0, "bob"), tj(3, 0, "bob", ncpus=2)])
    result = sink.by_id()["3"]
    assert (result.final_state, result.reason, result.end) == (
        REJECTED, "qsub: Job rejected by all possible destinations", 0)


# -- the complex's limits ([sim.server]) ------------------------------------------------------

ONE_CPU = """
[[hosts]]
prefix = "n"
count = {count}
ncpus = 1
"""


def test_the_servers_max_queued_refuses_a_qsub_into_any_queue(tmp_path):
    """[sim.server] max_queued = [o:PBS_ALL=2], one cpu, jobs of 10 s in workq (no rules
    of its own). At 1, j1 runs and j2 waits: j3 would be a third job in the complex and is
    refused as qsub refuses it (15142). At 10 j1 ends before the submission: j4 is the
    second; j2 starts at 10, j4 at 20. Without the limit, j3 runs at 20 and j4 at 30."""
    jobs = [tj(1, 0, "alice", queue=None, run=10), tj(2, 0, "alice", queue=None, run=10),
            tj(3, 1, "bob", queue=None, run=10), tj(4, 10, "bob", queue=None, run=10)]
    machine = platform(tmp_path, text=ONE_CPU.format(count=1))
    sink, _ = replay(machine, jobs, server_attrs={"max_queued": "[o:PBS_ALL=2]"})
    assert {k: (r.final_state, r.start, r.reason) for k, r in sink.by_id().items()} == {
        "1": (COMPLETED, 0, None), "2": (COMPLETED, 10, None),
        "3": (REJECTED, None, "qsub: Maximum number of jobs already in complex"),
        "4": (COMPLETED, 20, None)}
    sink, _ = replay(machine, jobs)
    assert sink.starts() == {"1": 0, "2": 10, "3": 20, "4": 30}


def test_a_limit_on_queued_walltime_counts_what_the_jobs_asked(tmp_path):
    """One cpu; batch has max_queued_res walltime [o:PBS_ALL=150]. j1 and j2 (at 0 and 1)
    ask no walltime: they count none against it, as on the engine, and run 0-100 and
    100-200 (their run time is what the scheduler plans them with). j3 asks 100 s at 2:
    100 in all, taken; j4 asks 100 s at 3: 200 would be over, refused at qsub. The
    replay's stand-in for j1's and j2's walltime (their run time) was counted: j2 was
    refused (100 + 100 > 150), and j3 and j4 too."""
    text = ONE_CPU.format(count=1) + """
[queues.batch]
max_queued_res = {{walltime = "[o:PBS_ALL=150]"}}
"""
    jobs = [tj(1, 0, "alice", queue="batch", wall=None),
            tj(2, 1, "alice", queue="batch", wall=None),
            tj(3, 2, "alice", queue="batch", wall=100),
            tj(4, 3, "alice", queue="batch", wall=100)]
    sink, _ = replay(platform(tmp_path, text=text), jobs)
    assert {k: (r.final_state, r.start, r.reason) for k, r in sink.by_id().items()} == {
        "1": (COMPLETED, 0, None), "2": (COMPLETED, 100, None),
        "3": (COMPLETED, 200, None),
        "4": (REJECTED, None, "qsub: would exceed limit on resource walltime in queue batch")}


def test_the_servers_threshold_counts_each_users_jobs_not_begun(tmp_path):
    """[sim.server] queued_jobs_threshold = [u:PBS_GENERIC=1], two cpus. At 0 (the
    submissions come before the cycle) alice's j1 is not begun yet: her j2 is refused;
    bob's j3 is his first. At 5 j1 has begun: her j4 is taken, and waits for j1's cpu
    (10); at 6 j4 has not begun: her j5 is refused."""
    jobs = [tj(1, 0, "alice", queue=None, run=10), tj(2, 0, "alice", queue=None, run=10),
            tj(3, 0, "bob", queue=None, run=20), tj(4, 5, "alice", queue=None, run=10),
            tj(5, 6, "alice", queue=None, run=10)]
    sink, _ = replay(platform(tmp_path, text=ONE_CPU.format(count=2)), jobs,
                     server_attrs={"queued_jobs_threshold": "[u:PBS_GENERIC=1]"})
    refused = "qsub: would exceed complex's per-user limit of jobs in 'Q' state"
    assert {k: (r.final_state, r.start, r.reason) for k, r in sink.by_id().items()} == {
        "1": (COMPLETED, 0, None), "2": (REJECTED, None, refused),
        "3": (COMPLETED, 0, None), "4": (COMPLETED, 10, None), "5": (REJECTED, None, refused)}


#: Two cpus; `entry` routes to `q`, which gives a job without a walltime 100 s.
ROUTED = ONE_CPU.format(count=2) + """
[queues.big]

[queues.entry]
queue_type = "Route"
route_destinations = ["q"]

[queues.q]
resources_default = {{walltime = "100"}}
"""


def test_a_job_the_complexs_limit_refuses_is_routed_after_a_job_of_another_queue_ends(
        tmp_path):
    """[sim.server] max_queued_res.walltime = [u:PBS_GENERIC=150]. alice's j1 (in big,
    100 s) runs 0-100. Her j2 (10 s, no walltime) enters entry at 1 with its run time, 10
    s, as its walltime (110 in all); routed, q would give it 100 s (200): the complex
    refuses for now, and it is tried on its retry grid (31, 61, 91, 121: entry's
    route_retry_time, 30 s). j1 leaves big at 100, a queue j2 does not wait for: it is
    routed at 121. bob's j3 (big, 1-300; his own limit, 300 s) counts apart."""
    jobs = [tj(1, 0, "alice", queue="big", run=100, wall=100),
            tj(2, 1, "alice", queue="entry", run=10, wall=None),
            tj(3, 1, "bob", queue="big", run=299, wall=300)]
    limit = {"max_queued_res": {"walltime": "[u:PBS_GENERIC=150],[u:bob=300]"}}
    sink, sim = replay(platform(tmp_path, text=ROUTED), jobs, server_attrs=limit)
    assert sim.entered == {"1": ("big", 0, "Q"), "2": ("q", 121, "Q"), "3": ("big", 1, "Q")}
    assert sink.starts() == {"1": 0, "2": 121, "3": 1}


#: Two cpus; `entry` routes to `q`, which gives a job without a walltime 100 s, then to
#: `batch`, one job at a time.
TWO_WAYS = ONE_CPU.format(count=2) + """
[queues.entry]
queue_type = "Route"
route_destinations = ["q", "batch"]

[queues.q]
resources_default = {walltime = "100"}

[queues.batch]
max_queued = "[o:PBS_ALL=1]"
"""


def test_a_job_refused_on_two_counts_that_one_end_lowers_is_woken_once(tmp_path):
    """[sim.server] max_queued_res.walltime = [u:PBS_GENERIC=150]. alice's j1 (in batch,
    100 s) runs 0-100. Her j2 (10 s, no walltime) enters entry at 1: q would give it
    100 s, 200 in all, over the complex's limit; batch is full. It is parked on both
    counts (alice's walltime in the complex, batch's jobs). j1's end lowers both: j2 is
    woken once, and routed to q at its tick after that (121: entry's retry time, 30 s).
    Woken count by count, the replay stopped with a KeyError (the first woke it, which
    took it off the second)."""
    jobs = [tj(1, 0, "alice", queue="batch", run=100, wall=100),
            tj(2, 1, "alice", run=10, wall=None)]
    limit = {"max_queued_res": {"walltime": "[u:PBS_GENERIC=150]"}}
    sink, sim = replay(platform(tmp_path, text=TWO_WAYS.replace("{", "{{").replace("}", "}}")),
                       jobs, server_attrs=limit)
    assert sim.entered == {"1": ("batch", 0, "Q"), "2": ("q", 121, "Q")}
    assert sink.starts() == {"1": 0, "2": 121}


def _on_engine(commands: tuple[str, ...], submits: list[tuple[Caller, dict]]) -> list[str]:
    """qmgr's `commands` on an engine in this process, then each qsub (its caller and its
    job's attributes, one cpu for 200 s): for each, the queue its job is in, or
    ``qsub: <error>``."""
    root = make_root()
    try:
        eng = Engine(Home(root), plugins=PluginSet(SiteConfig(path=None)))
        for command in commands:
            assert eng.req_qmgr(MANAGER, command)["code"] == 0, command
        out = []
        for caller, attrs in submits:
            try:
                job_id = eng.req_submit(caller, {**attrs, "Resource_List": {
                    "select": "1:ncpus=1", "walltime": "200"}}, "true\n")
            except PbsError as exc:
                out.append(f"qsub: {exc.message}")
                continue
            out.append(eng.store.job(job_id)["queue"])
        eng.close()
    finally:
        remove_root(root)
    return out


MANAGER = Caller(0, ROLE_MANAGER)


def test_the_engine_refuses_the_same_jobs_by_the_servers_limit(tmp_path):
    """The server's max_queued on an engine in this process: the third of three qsubs is
    refused with the replay's text."""
    on_engine = _on_engine(("set server scheduling = false",
                            "set server max_queued = '[o:PBS_ALL=2]'"),
                           [(MANAGER, {})] * 3)
    sink, _ = replay(platform(tmp_path, text=ONE_CPU.format(count=1)),
                     [tj(n, 0, "root", queue=None) for n in (1, 2, 3)],
                     server_attrs={"max_queued": "[o:PBS_ALL=2]"})
    reasons = {r.job.job_id: r.reason or "workq" for r in sink.jobs}
    assert on_engine == [reasons[n] for n in "123"] == [
        "workq", "workq", "qsub: Maximum number of jobs already in complex"]


def test_a_queues_limit_counts_the_servers_default_chunk_as_the_engine_does(tmp_path):
    """batch's max_queued_res.mem = [o:PBS_ALL=2gb]; [sim.server] default_chunk.mem =
    1gb, which each job's chunk takes: the third job of one chunk is refused, on the
    engine and in the replay. (The replay counted the queue's limits without the
    server's attributes: every chunk without mem counted none, and all three ran.)"""
    on_engine = _on_engine((
        "set server scheduling = false", "set server default_chunk.mem = 1gb",
        "create queue batch queue_type=execution,enabled=true,started=true,"
        "max_queued_res.mem='[o:PBS_ALL=2gb]'"), [(MANAGER, {"queue": "batch"})] * 3)
    text = ONE_CPU.format(count=4) + 'mem = "4gb"\n\n[queues.batch]\n' \
        'max_queued_res = {{mem = "[o:PBS_ALL=2gb]"}}\n'
    sink, _ = replay(platform(tmp_path, text=text),
                     [tj(n, 0, "root", queue="batch") for n in (1, 2, 3)],
                     server_attrs={"default_chunk": {"mem": "1gb"}})
    reasons = {r.job.job_id: r.reason or "batch" for r in sink.jobs}
    assert on_engine == [reasons[n] for n in "123"] == [
        "batch", "batch", "qsub: would exceed limit on resource mem in queue batch"]


class NeverRun:
    """runjob refuses every job: a queued job never starts and never goes."""

    plugin_info = PluginInfo(events=("runjob",), sim_safe=("runjob",))

    @hookimpl
    def runjob(self, event):
        event.reject("not today")


def test_a_job_waiting_for_a_full_destination_ends_the_replay_when_nothing_changes(
        tmp_path, register_plugin, pbsplug_plugins):
    """batch's two jobs never start (a runjob hook refuses them), so dave's is never
    routed: the replay ends (it does not retry for ever) and says so."""
    register_plugin(NeverRun(), "neverrun", isolation="inprocess")
    sink, sim = replay(platform(tmp_path), [tj(2, 0, "bob"), tj(3, 0, "carol"),
                                            tj(4, 0, "dave")],
                       plugins=pbsplug_plugins, tmp_path=tmp_path)
    by_id = sink.by_id()
    assert {k: r.final_state for k, r in by_id.items()} == {
        "2": REJECTED, "3": REJECTED, "4": REJECTED}
    assert by_id["4"].reason == "never routed out of its route queue"


def test_a_job_waiting_for_a_full_destination_is_rejected_when_its_lifetime_runs_out(
        tmp_path, register_plugin, pbsplug_plugins):
    """As above, with entry's route_lifetime 150 s: dave's, refused at its submission at
    0, is tried at 60 and 120 and, past its lifetime at 180 (180 - 0 > 150), rejected
    then as the engine's router rejects it. It was rejected at 60, `never routed out of
    its route queue`: nothing else was left to happen, and the retry at its lifetime's
    tick was not a step of the replay."""
    register_plugin(NeverRun(), "neverrun", isolation="inprocess")
    text = PLATFORM.replace("route_retry_time = 60",
                            "route_retry_time = 60\nroute_lifetime = 150")
    sink, sim = replay(platform(tmp_path, text=text), [tj(2, 0, "bob"), tj(3, 0, "carol"),
                                                       tj(4, 0, "dave")],
                       plugins=pbsplug_plugins, tmp_path=tmp_path)
    result = sink.by_id()["4"]
    assert (result.final_state, result.reason, result.end) == (
        REJECTED, "Route queue lifetime exceeded", 180)


@pytest.mark.parametrize("lifetime", [10**18, 2**63 - 1])
def test_a_lifetime_past_a_floats_steps_is_never_reached(
        tmp_path, register_plugin, pbsplug_plugins, lifetime):
    """A route_lifetime qmgr accepts (a long) but whose end is past the steps of a float
    (qtime + 1e18: adding the retry's 60 s leaves it the same) never runs out in a replay:
    dave's, refused for now and with nothing else left to happen, ends as with no lifetime
    (the replay looped for ever looking for the tick past it)."""
    register_plugin(NeverRun(), "neverrun", isolation="inprocess")
    text = PLATFORM.replace("route_retry_time = 60",
                            f"route_retry_time = 60\nroute_lifetime = {lifetime}")
    sink, _ = replay(platform(tmp_path, text=text), [tj(2, 0, "bob"), tj(3, 0, "carol"),
                                                     tj(4, 0, "dave")],
                     plugins=pbsplug_plugins, tmp_path=tmp_path)
    (tmp_path / "plain").mkdir()
    plain, _ = replay(platform(tmp_path / "plain"), [tj(2, 0, "bob"), tj(3, 0, "carol"),
                                                     tj(4, 0, "dave")],
                      plugins=pbsplug_plugins, tmp_path=tmp_path / "plain")
    result, expected = sink.by_id()["4"], plain.by_id()["4"]
    assert (result.final_state, result.reason, result.end) == (
        expected.final_state, expected.reason, expected.end)
    assert result.reason != "Route queue lifetime exceeded"


@pytest.mark.parametrize("rule", ["router's", "at its lifetime"])
def test_a_waiting_job_is_rejected_at_the_tick_the_routers_own_rule_says(
        tmp_path, register_plugin, pbsplug_plugins, monkeypatch, rule):
    """One lifetime rule for the engine's router and the replay (`routing.expired`): with
    entry's route_lifetime 120 s, dave's (refused at 0, tried at 60, 120, 180) is at its
    lifetime exactly at 120, not past it: rejected at 180, the first tick at which
    `route_job` finishes it. With the rule changed to reject at the lifetime itself, the
    replay follows it (120). The replay had a rule of its own in two places (whether a
    waiting job's try could be passed over, and the tick its lifetime runs out), which a
    change of the router's left behind."""
    from pbsplug.engine import routing

    if rule != "router's":
        monkeypatch.setattr(routing, "expired", lambda attrs, most, now: bool(most) and (
            now - attrs["qtime"] >= most), raising=False)
    register_plugin(NeverRun(), "neverrun", isolation="inprocess")
    text = PLATFORM.replace("route_retry_time = 60",
                            "route_retry_time = 60\nroute_lifetime = 120")
    sink, sim = replay(platform(tmp_path, text=text), [tj(2, 0, "bob"), tj(3, 0, "carol"),
                                                       tj(4, 0, "dave")],
                       plugins=pbsplug_plugins, tmp_path=tmp_path)

    def full(dest):
        raise PbsError(routing.PBSE_MAXQUED, "full")  # (a refusal for now)

    # The router's own answer at each of dave's ticks (batch full, vip refusing for good).
    queue = sim.machine.queues["entry"] | {"started": True}
    finished = [at for at in (60, 120, 180) if routing.route_job(
        {"qtime": EPOCH, "job_state": "Q"}, "entry", queue, EPOCH + at, {"vip"}, full,
        lambda dest: dest).outcome == "finished"]
    assert finished[0] == (180 if rule == "router's" else 120)
    result = sink.by_id()["4"]
    assert (result.final_state, result.reason, result.end) == (
        REJECTED, "Route queue lifetime exceeded", finished[0])


#: Two cpus; entry routes to batch, which takes one job at a time.
ONE_AT_A_TIME = ONE_CPU.format(count=2) + """
[queues.entry]
queue_type = "Route"
route_destinations = ["batch"]

[queues.batch]
max_queued = "[o:PBS_ALL=1]"
"""


def test_a_job_waiting_for_the_last_job_of_its_destination_is_routed_when_it_ends(
        tmp_path):
    """Two cpus; entry routes to batch, which takes one job at a time. j1 runs in batch
    0-100; j2, submitted at 1, waits in entry (tries at 31, 61, 91) and is routed at 121,
    entry's first tick after j1 ended, as the engine's router routes it. The replay ended
    at 100 with j2 rejected (`never routed out of its route queue`): nothing else was left
    to happen, and a retry waited only while something else might."""
    text = ONE_AT_A_TIME
    jobs = [tj(1, 0, "alice", run=100), tj(2, 1, "bob", run=10)]
    sink, sim = replay(platform(tmp_path, text=text), jobs)
    assert sim.entered == {"1": ("batch", 0, "Q"), "2": ("batch", 121, "Q")}
    assert {k: (r.final_state, r.start, r.end) for k, r in sink.by_id().items()} == {
        "1": (COMPLETED, 0, 100), "2": (COMPLETED, 121, 131)}


@pytest.mark.parametrize(("limit", "dave", "lifetime", "dave_enters"), [
    # dave's tries: 67, 127, 187, 247 (its retry grid from its submission at 7). bob's
    # ends at 200: batch frees for max_queued then; bob's begins at 100: for
    # queued_jobs_threshold.
    ("max_queued", 7, None, 247),
    ("queued_jobs_threshold", 7, None, 127),
    # A tick at the instant of the change: an end comes before the router's pass...
    ("max_queued", 20, None, 200),
    # ... a start after it (the scheduler's cycle): the next tick.
    ("queued_jobs_threshold", 40, None, 160),
    # Past entry's route_lifetime (150 s from 7) at its try at 187: rejected then.
    ("max_queued", 7, 150, None),
])
def test_a_waiting_job_is_tried_on_its_retry_grid_whatever_happens_between(
        tmp_path, limit, dave, lifetime, dave_enters):
    """A job a full destination refused is routed at the tick of its retry grid (its
    first try plus a multiple of route_retry_time) at which the engine's router finds
    the destination freed, however few of the ticks between are tried; and past its
    route queue's route_lifetime, rejected at the tick the router finds it so."""
    text = PLATFORM if lifetime is None else PLATFORM.replace(
        "route_retry_time = 60", f"route_retry_time = 60\nroute_lifetime = {lifetime}")
    jobs = [tj(1, 0, "alice"), tj(2, 0, "bob"), tj(3, 0, "carol"), tj(4, dave, "dave")]
    sink, sim = replay(platform(tmp_path, limit, text=text), jobs)
    if dave_enters is None:
        result = sink.by_id()["4"]
        assert (result.final_state, result.reason, result.end) == (
            REJECTED, "Route queue lifetime exceeded", 187)
    else:
        assert sim.entered["4"] == ("batch", dave_enters, "Q")


#: `front` routes to `entry`, a route queue of one job at most, which routes to `batch`,
#: of one job at most.
CHAIN = ONE_CPU.format(count=1) + """
[queues.front]
queue_type = "Route"
route_destinations = ["entry"]
route_retry_time = 60

[queues.entry]
queue_type = "Route"
route_destinations = ["batch"]
route_retry_time = 10
max_queued = "[o:PBS_ALL=1]"

[queues.batch]
max_queued = "[o:PBS_ALL=1]"
"""


def test_a_job_freed_by_another_in_a_pass_is_tried_in_that_pass(tmp_path):
    """Job 1 goes through entry to batch at 1 and runs until 121. Job 2 waits in entry for
    batch (tries at 13, 23, ...); job 3 in front for entry (63, 123, ...). At 123 the
    router's pass routes job 2 to batch, which frees entry for job 3, tried after it in
    the same pass: job 3 enters entry at 123 (not at 183), is tried there at 124, 134, ...
    and enters batch at 154, once job 2 (123-153) has ended. (Job 4, submitted at 1000
    to workq, keeps the replay going.)"""
    jobs = [tj(1, 0, "bob", queue="front", run=120), tj(2, 2, "bob", queue="front", run=30),
            tj(3, 3, "bob", queue="front"), tj(4, 1000, "bob", queue="workq")]
    sink, sim = replay(platform(tmp_path, text=CHAIN.replace("{", "{{").replace("}", "}}")),
                       jobs)
    assert sim.entered == {"1": ("batch", 1, "Q"), "2": ("batch", 123, "Q"),
                           "3": ("batch", 154, "Q"), "4": ("workq", 1000, "Q")}


def test_a_waiting_job_is_not_tried_while_its_destination_stays_full(tmp_path,
                                                                     monkeypatch):
    """bob's job runs 10,000 s in full batch: dave's waits for its end, tried again only
    after batch's jobs changed (bob's start at 100, its end at 10,100), not once a
    minute in between (each try, or each tick skipped as one, ends in `_retry`)."""
    from pbsplug.sim.engine import Simulator

    waits = []
    retry = Simulator._retry

    def counted(self, run, when, over):
        waits.append(run.tj.job_id)
        retry(self, run, when, over)

    monkeypatch.setattr(Simulator, "_retry", counted)
    jobs = [tj(1, 0, "alice"), tj(2, 0, "bob", run=10000, wall=10000), tj(3, 0, "carol"),
            tj(4, 0, "dave")]
    sink, sim = replay(platform(tmp_path), jobs)
    assert sim.entered["4"] == ("batch", 10140, "Q")  # (its tick after 10,100)
    assert waits.count("4") <= 3  # (its first try, and one after each change)


def counted_tries(monkeypatch):
    """The job ids `Simulator._route` is asked to route, one a try, as they come."""
    from pbsplug.sim.engine import Simulator

    tries = []
    route = Simulator._route

    def counted(self, run, submitting=False):
        tries.append(run.tj.job_id)
        route(self, run, submitting)

    monkeypatch.setattr(Simulator, "_route", counted)
    return tries


def test_a_waiting_job_is_tried_only_after_the_count_that_refused_it_falls(tmp_path,
                                                                          monkeypatch):
    """Two cpus; entry routes to batch, one job of each user at most. alice's j1 runs in
    batch 0-1000; her j2, submitted to entry at 1, is refused (tries on its grid: 61,
    121, ...) until j1 ends: routed at 1021. bob's jobs come and go in batch meanwhile
    (10-110, 210-310, 410-510, 610-710): each start and end changed batch, and woke j2
    for a try that could only fail (alice's count was as it was): 2 tries now, 10
    before."""
    text = ONE_CPU.format(count=2) + """
[queues.entry]
queue_type = "Route"
route_destinations = ["batch"]
route_retry_time = 60

[queues.batch]
max_queued = "[u:PBS_GENERIC=1]"
"""
    tries = counted_tries(monkeypatch)
    jobs = [tj(1, 0, "alice", queue="batch", run=1000, wall=1000), tj(2, 1, "alice"),
            *(tj(k, 10 + 200 * (k - 3), "bob") for k in range(3, 7))]
    sink, sim = replay(platform(tmp_path, text=text), jobs)
    assert {k: v[:2] for k, v in sim.entered.items()} == {
        "1": ("batch", 0), "2": ("batch", 1021), "3": ("batch", 10), "4": ("batch", 210),
        "5": ("batch", 410), "6": ("batch", 610)}
    assert tries.count("2") == 2  # (at its submission, and at 1021)


def test_a_job_woken_is_not_tried_when_the_count_is_back_where_it_refused_it(
        tmp_path, monkeypatch):
    """Two cpus; entry routes to batch, one job at a time (route_retry_time 30). j1 runs
    in batch 0-100; j2 (submitted at 1) and j3 (at 2) wait in entry. j1's end wakes both:
    j2 is routed at 121 and batch is full again when j3's tick comes at 122, so j3 is not
    tried then (a try could only fail: the count is where it was when it refused j3);
    j2's end at 131 wakes it again: routed at 152. j3 was tried at 122 before."""
    text = ONE_AT_A_TIME
    tries = counted_tries(monkeypatch)
    jobs = [tj(1, 0, "alice", queue="batch", run=100), tj(2, 1, "bob", run=10),
            tj(3, 2, "carol", run=10)]
    sink, sim = replay(platform(tmp_path, text=text), jobs)
    assert {k: v[:2] for k, v in sim.entered.items()} == {
        "1": ("batch", 0), "2": ("batch", 121), "3": ("batch", 152)}
    assert tries.count("3") == 2  # (at its submission, and at 152)


class OfflineUntil1000:
    """The machine's vnodes are offline from the start, and free again at the first
    periodic run from trace time 1000."""

    plugin_info = PluginInfo(events=("exechost_startup", "periodic"),
                             sim_safe=("exechost_startup", "periodic"))

    @hookimpl
    def exechost_startup(self, event):
        for vnode in event.vnode_list.values():
            vnode.state = "offline"

    @hookimpl
    def periodic(self, event):
        if clock.now() >= EPOCH + 1000:
            for vnode in event.vnode_list.values():
                vnode.state = "free"


def test_a_waiting_job_is_tried_late_when_only_periodic_hooks_run(
        tmp_path, register_plugin, pbsplug_plugins):
    """Nothing can start until 1035 (the periodic hook's run at or after 1000, every
    45 s): until then the replay's instants are the periodic runs only, and each takes
    dave's retry whose time has passed, late (at 90, then 180, 270, ...: its tick 60 s
    after each), as the engine's router at a pass takes every job due. bob's start at
    1035 frees batch (queued_jobs_threshold): dave's is routed at its tick after that."""
    register_plugin(OfflineUntil1000(), "offline", isolation="inprocess", freq=45)
    sink, sim = replay(platform(tmp_path, "queued_jobs_threshold"),
                       [tj(2, 0, "bob"), tj(3, 0, "carol"), tj(4, 7, "dave")],
                       plugins=pbsplug_plugins, tmp_path=tmp_path)
    assert sim.entered["4"] == ("batch", 1050, "Q")


class MovesJobs:
    """A periodic hook that tries, at every run, to send each queued job it is given to the
    other destination of `entry` (batch and other in turn); notes each job it saw and
    what each write came to."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self):
        self.seen = []

    @hookimpl
    def periodic(self, event):
        queue = ("batch", "other")[int(clock.now()) // 60 % 2]
        for job_id, job in event.job_list.items():
            try:
                job.queue = queue
            except AttributeReadOnly as err:
                self.seen.append((job_id, str(err)))
            else:
                self.seen.append((job_id, queue))


#: One cpu; `entry` routes to `batch` (two jobs at most), then to `other` (none).
TWO_FULL = ONE_CPU.format(count=1) + """
[queues.entry]
queue_type = "Route"
route_destinations = ["batch", "other"]
route_retry_time = 60

[queues.batch]
max_queued = "[o:PBS_ALL=2]"

[queues.other]
max_queued = "[o:PBS_ALL=0]"
"""


def test_a_periodic_hook_changing_jobs_destinations_wakes_no_waiting_job(
        tmp_path, register_plugin, pbsplug_plugins, monkeypatch):
    """alice's j1 (batch) runs 0-5000, bob's j2 (batch) waits for the cpu: batch is full
    when carol's j3 enters entry at 1, and other takes none; j3 is parked on both counts.
    A periodic hook (every 60 s) tries to move each queued job to batch or other in turn:
    a periodic event's jobs are read-only, as on the engine, so each run is refused its
    write (to j2 and j3, 60 to 4980; to j3 at 5041, routed and not started yet: a job
    waiting in a route queue is among the queued jobs, as on the engine) and no count
    changes. j3 is tried at its submission, then only after j2's end lowers batch's count
    (5010): at its tick 5041. The replay ends (in no more than 200 periodic runs: a hang
    guard, not a time)."""
    hook = MovesJobs()
    register_plugin(hook, "mover", isolation="inprocess", freq=60)
    tries = counted_tries(monkeypatch)
    parked = []
    retry = Simulator._retry
    guard_periodic_runs(monkeypatch, most=200)

    def counted(self, run, when, over):
        parked.append((run.tj.job_id, self.now - EPOCH))
        retry(self, run, when, over)

    monkeypatch.setattr(Simulator, "_retry", counted)
    jobs = [tj(1, 0, "alice", queue="batch", run=5000, wall=5000),
            tj(2, 0, "bob", queue="batch", run=10, wall=10), tj(3, 1, "carol")]
    sink, sim = replay(platform(tmp_path, text=TWO_FULL), jobs, plugins=pbsplug_plugins,
                       tmp_path=tmp_path)
    assert sim.entered == {"1": ("batch", 0, "Q"), "2": ("batch", 0, "Q"),
                           "3": ("batch", 5041, "Q")}
    assert tries == ["3", "3"]
    assert parked == [("3", 1)]  # (not again at a tick while nothing it waits on fell)
    assert hook.seen == [("2", "periodic: job '2' is read-only here"),
                         ("3", "periodic: job '3' is read-only here")] * 83 + [
        ("3", "periodic: job '3' is read-only here")]
    assert {k: (r.start, r.end) for k, r in sink.by_id().items()} == {
        "1": (0, 5000), "2": (5000, 5010), "3": (5041, 5141)}


@pytest.mark.parametrize(("key", "message"), [
    ('acl_users = ["a", "a"]', "queues.batch.acl_users: ['a', 'a']: Duplicate entry in list"),
    ("from_route_only = 2", "queues.batch.from_route_only: 2: Illegal attribute or resource "
                            "value from_route_only"),
    ("max_queued = 5", "queues.batch.max_queued: 5: Illegal attribute or resource value "
                       "max_queued: '5': expected [u|g|p|o:name=value]"),
    ('max_queued_res = "[o:PBS_ALL=1]"', "queues.batch.max_queued_res: '[o:PBS_ALL=1]': "
                                         "expected a table of resources"),
    ('max_queued_res = {foo = "[o:PBS_ALL=1]"}', "queues.batch.max_queued_res.foo: "
                                                 "'[o:PBS_ALL=1]': Unknown resource"),
    ("acl_host_enable = true", "queues.batch.acl_host_enable: not modelled in a replay"),
    ('acl_hosts = "h"', "queues.batch.acl_hosts: not modelled in a replay"),
])
def test_a_bad_queue_rule_is_a_one_line_error(tmp_path, key, message):
    path = tmp_path / "p.toml"
    path.write_text(PLATFORM.format(limit="queued_jobs_threshold").replace(
        "from_route_only = true\n", "") + key + "\n")
    with pytest.raises(PlatformError) as err:
        load_platform(path)
    assert str(err.value).startswith(f"{path}: {message}"), str(err.value)
    assert "\n" not in str(err.value)


def test_queue_rules_are_stored_as_qmgr_stores_them(tmp_path):
    text = PLATFORM.replace('acl_users = ["alice"]', 'acl_users = "zoe,-bob,alice"') + \
        'max_queued_res = {{ncpus = ["[o:PBS_ALL=4]", "[u:PBS_GENERIC=2]"]}}\n'
    batch = platform(tmp_path, text=text).queues["batch"]
    assert batch == {"from_route_only": True, "max_queued": "[o:PBS_ALL=2]",
                     "max_queued_res": {"ncpus": "[o:PBS_ALL=4],[u:PBS_GENERIC=2]"}}
    # (an ACL in PBS's order: users byte by byte, the sign left out)
    assert platform(tmp_path, text=text).queues["vip"]["acl_users"] == [
        "alice", "-bob", "zoe"]


def test_the_engine_routes_and_refuses_the_same_jobs(tmp_path):
    """The same queues on an engine in this process (qmgr; qsub by root and by the test
    user, pbsplugtu): each job lands where the replay put it at its submission, waits in
    `entry` where the replay made it wait, or is refused with the same text."""
    user = Caller(1001, ROLE_USER)
    on_engine = _on_engine((
        "set server scheduling = false",
        "create queue vip queue_type=execution,enabled=true,started=true,"
        f"acl_user_enable=true,acl_users={user.user}",
        "create queue batch queue_type=execution,enabled=true,started=true,"
        "from_route_only=true,max_queued='[o:PBS_ALL=2]'",
        "create queue entry queue_type=route,route_destinations='vip,batch',"
        "enabled=true,started=true"),
        [(user, {"queue": "entry"})] + [(MANAGER, {"queue": q})
                                        for q in ("entry", "entry", "entry", "batch", "vip")])
    text = PLATFORM.replace('acl_users = ["alice"]', f'acl_users = ["{user.user}"]')
    jobs = [tj(1, 0, user.user), tj(2, 0, "root"), tj(3, 0, "root"), tj(4, 0, "root"),
            tj(5, 0, "root", queue="batch"), tj(6, 0, "root", queue="vip")]
    sink, sim = replay(platform(tmp_path, text=text), jobs)
    reasons = {r.job.job_id: r.reason for r in sink.jobs if r.final_state == REJECTED}
    in_replay = [sim.entered[str(n)][0] if sim.entered.get(str(n), (None, 1))[1] == 0
                 else reasons.get(str(n), "entry") for n in range(1, 7)]
    assert on_engine == in_replay == [
        "vip", "batch", "batch", "entry", "qsub: Access to queue is denied",
        "qsub: Unauthorized Request"]
