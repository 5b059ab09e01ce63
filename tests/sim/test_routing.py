"""Route queues in a replay: a platform's ``[queues.NAME]`` with ``queue_type = "Route"``,
whose jobs the simulator routes by the engine's own rules (`pbsplug.engine.routing.route_job`):
where each job goes, when, and what is refused, worked out by hand and checked against the
local engine with the same queues."""

from __future__ import annotations

import time

import pytest

from pbsplug import PluginInfo, clock, hookimpl
from pbsplug.engine.errors import PbsError
from pbsplug.engine.home import Home
from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine
from pbsplug.engine.testing import make_root, remove_root
from pbsplug.plugins import PluginSet
from pbsplug.sim.machine import PlatformError, load_platform
from pbsplug.sim.records import COMPLETED, REJECTED, WALLTIME, TraceJob
from pbsplug.siteconfig import SiteConfig

from .helpers import replay

#: Two hosts of one cpu. `entry` routes to `short` (at most 10 minutes and 1 cpu; Priority
#: 10), then `long` (10:00:01 to 10 hours); `front` routes to `entry`, a route queue too.
PLATFORM = """
[[hosts]]
prefix = "n"
count = 2
ncpus = 1

[queues.front]
queue_type = "Route"
route_destinations = "entry"

[queues.entry]
queue_type = "r"
route_destinations = ["short", "long"]
{entry}

[queues.short]
priority = 10
resources_max = {{walltime = "00:10:00", ncpus = 1}}

[queues.long]
resources_min = {{walltime = "00:10:01"}}
resources_max = {{walltime = "10:00:00"}}
"""


def platform(tmp_path, entry=""):
    path = tmp_path / "p.toml"
    path.write_text(PLATFORM.format(entry=entry))
    return load_platform(path)


def tj(job_id, submit, run, ncpus, walltime, queue="entry", **kw):
    return TraceJob(str(job_id), 1, float(submit), float(run), ncpus, float(walltime),
                    queue=queue, **kw)


#: (walltime, ncpus) -> where `entry` puts the job: short takes what it can (the first
#: destination), long what short refuses, and a job neither takes is refused at submission.
ROUTED = {(60, 1): "short", (3600, 1): "long", (60, 2): None, (86400, 1): None}


def test_a_job_goes_to_the_first_destination_that_takes_it(tmp_path):
    jobs = [tj(n, 0, 100, ncpus, wall) for n, (wall, ncpus) in enumerate(ROUTED, 1)]
    sink, sim = replay(platform(tmp_path), jobs)
    assert {k: v[0] for k, v in sim.entered.items()} == {"1": "short", "2": "long"}
    by_id = sink.by_id()
    for job_id in ("3", "4"):  # (PBS's 15039 at qsub: the job is refused)
        assert by_id[job_id].final_state == REJECTED and by_id[job_id].start is None
        assert by_id[job_id].reason == "qsub: Job rejected by all possible destinations"
    # Each job ran in its destination with its destination's limits: j1 killed at 60 s.
    assert (by_id["1"].final_state, by_id["1"].start, by_id["1"].end) == (WALLTIME, 0, 60)
    assert (by_id["2"].final_state, by_id["2"].start, by_id["2"].end) == (COMPLETED, 0, 100)


def test_the_engine_routes_the_same_jobs_to_the_same_queues(tmp_path):
    """The same queues on an engine in this process (qmgr, qsub into `entry`): each job
    lands where the replay put it, or is refused at qsub in both."""
    root = make_root()
    try:
        eng = Engine(Home(root), plugins=PluginSet(SiteConfig(path=None)))
        manager = Caller(0, ROLE_MANAGER)
        for command in (
                "set server scheduling = false",
                "create queue short queue_type=execution,enabled=true,started=true,"
                "Priority=10,resources_max.walltime=00:10:00,resources_max.ncpus=1",
                "create queue long queue_type=execution,enabled=true,started=true,"
                "resources_min.walltime=00:10:01,resources_max.walltime=10:00:00",
                "create queue entry queue_type=route,route_destinations='short,long',"
                "enabled=true,started=true"):
            assert eng.req_qmgr(manager, command)["code"] == 0, command
        on_engine = {}
        for wall, ncpus in ROUTED:
            try:
                job_id = eng.req_submit(manager, {"queue": "entry", "Resource_List": {
                    "select": f"{ncpus}:ncpus=1", "walltime": str(wall)}}, "true\n")
            except PbsError as exc:
                on_engine[wall, ncpus] = exc.code
                continue
            on_engine[wall, ncpus] = eng.store.job(job_id)["queue"]
        eng.close()
    finally:
        remove_root(root)
    jobs = [tj(n, 0, 100, ncpus, wall) for n, (wall, ncpus) in enumerate(ROUTED, 1)]
    sink, sim = replay(platform(tmp_path), jobs)
    in_replay = {key: sim.entered[str(n)][0] if str(n) in sim.entered else 15039
                 for n, key in enumerate(ROUTED, 1)}
    assert on_engine == in_replay == {key: 15039 if dest is None else dest
                                      for key, dest in ROUTED.items()}


def test_a_job_routed_into_another_route_queue_goes_on_at_the_next_pass(tmp_path):
    # j1 enters front at 5, goes to entry at once, and on to short a second later (the
    # engine's router passes once a second), where it starts; j2, in entry, is routed at
    # once; j3 names no queue of the platform: workq, an execution queue.
    jobs = [tj(1, 5, 10, 1, 60, queue="front"), tj(2, 5, 10, 1, 60),
            tj(3, 5, 10, 1, 60, queue="nosuch")]
    sink, sim = replay(platform(tmp_path), jobs)
    assert sim.entered == {"1": ("short", 6, "Q"), "2": ("short", 5, "Q"),
                           "3": ("workq", 5, "Q")}
    assert sink.by_id()["1"].start == 15  # (j2 and j3 took both cpus from 5 to 15)


class Waiter:
    """queuejob gives every job an Execution_Time 500 s on."""

    plugin_info = PluginInfo(events=("queuejob",), sim_safe=("queuejob",))

    @hookimpl
    def queuejob(self, event):
        event.job.Execution_Time = int(clock.now()) + 500


@pytest.mark.parametrize(("entry", "expected"), [
    # PBS keeps a waiting job in its route queue: routed at its Execution_Time.
    ("", (("short", 500, "Q"), COMPLETED, 500)),
    # route_waiting_jobs: routed at once, it waits in its destination.
    ("route_waiting_jobs = true", (("short", 0, "W"), COMPLETED, 500)),
    # Past the route queue's lifetime at its next try, it is finished, unrouted.
    ("route_lifetime = 100", (None, REJECTED, None)),
])
def test_a_waiting_job_stays_in_its_route_queue_unless_it_routes_such_jobs(
        entry, expected, tmp_path, register_plugin, pbsplug_plugins):
    register_plugin(Waiter(), "waiter", isolation="inprocess")
    sink, sim = replay(platform(tmp_path, entry), [tj(1, 0, 10, 1, 60)],
                       plugins=pbsplug_plugins, tmp_path=tmp_path)
    (result,) = sink.jobs
    assert (sim.entered.get("1"), result.final_state, result.start) == expected
    if result.final_state == REJECTED:
        assert (result.reason, result.end) == ("Route queue lifetime exceeded", 500)


@pytest.mark.parametrize(("entry", "message"), [
    ('partition = "p1"', "queues.entry.partition: 'p1': Cannot assign a partition to route "
                         "queue"),
    ('queue_type = "lottery"', "queues.entry.queue_type: 'lottery': Illegal attribute or "
                               "resource value queue_type"),
    ("route_lifetime = 1.5", "queues.entry.route_lifetime: 1.5: Illegal attribute or "
                             "resource value route_lifetime"),
    ('route_held_jobs = "maybe"', "queues.entry.route_held_jobs: 'maybe': Illegal"),
    ("route_destinations = []", "queues.entry.route_destinations: none given: Cannot "
                                "enable queue, incomplete definition"),
    ('route_destinations = "short,shrot"', "queues.entry.route_destinations: 'shrot': no "
                                           "such queue: expected a [queues.NAME]"),
    ('route_destinations = "entry"', "queues.entry.route_destinations: 'entry': the queue "
                                     "itself"),
    ('route_destinations = "front"', "queues.front.route_destinations: route queues "
                                     "front -> entry -> front make a loop"),
    ('colour = "red"', "queues.entry.colour: unknown key"),
])
def test_a_bad_route_queue_is_a_one_line_error(tmp_path, entry, message):
    text = PLATFORM.format(entry="").replace('route_destinations = ["short", "long"]\n',
                                             "" if "route_destinations" in entry else
                                             'route_destinations = ["short", "long"]\n')
    text = text.replace('queue_type = "r"\n', "" if "queue_type" in entry else
                        'queue_type = "r"\n')
    text = text.replace("[queues.entry]\n", f"[queues.entry]\n{entry}\n")
    text = text.replace("ncpus = 1\n", 'ncpus = 1\npartition = "p1"\n', 1)
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PlatformError) as err:
        load_platform(path)
    assert str(err.value).startswith(f"{path}: {message}"), str(err.value)
    assert "\n" not in str(err.value)


def test_route_keys_of_an_execution_queue_are_refused(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[[hosts]]\ncount = 1\nncpus = 1\n[queues.short]\nqueue_type = "e"\n'
                    'route_destinations = "long"\n')
    with pytest.raises(PlatformError, match=r"queues.short.route_destinations: only a "
                                            r"route queue \(queue_type = \"Route\"\) has it"):
        load_platform(path)
    path.write_text('[[hosts]]\ncount = 1\nncpus = 1\n[queues.short]\nqueue_type = "e"\n')
    assert load_platform(path).queues == {"short": {"queue_type": "Execution"}}


def test_route_keys_are_read_as_qmgr_reads_them(tmp_path):
    machine = platform(tmp_path, "route_held_jobs = true\nroute_lifetime = \"600\"\n"
                                 "route_retry_time = 30")
    assert machine.queues["entry"] == {
        "queue_type": "Route", "route_destinations": ["short", "long"],
        "route_held_jobs": True, "route_lifetime": 600, "route_retry_time": 30}
    assert machine.queues["front"]["route_destinations"] == ["entry"]


def test_a_destination_no_platform_declares_refuses_the_job_for_good(tmp_path):
    # A machine made in code is not checked as a platform file is: its route queue's
    # unknown destination refuses jobs as the engine's unknown queue does (15018), and the
    # next one is asked.
    machine = platform(tmp_path)
    machine.queues["entry"]["route_destinations"] = ["nosuch", "long", "short"]
    sink, sim = replay(machine, [tj(1, 0, 10, 1, 60), tj(2, 0, 10, 1, 3600)])
    assert {k: v[0] for k, v in sim.entered.items()} == {"1": "short", "2": "long"}


class SeesQueued:
    """Takes both vnodes offline at start-up (no job ever starts), gives the job of 77 s an
    Execution_Time an hour on, and notes each periodic run's job list: (id, queue, state)."""

    plugin_info = PluginInfo(events=("exechost_startup", "queuejob", "periodic"),
                             sim_safe=("exechost_startup", "queuejob", "periodic"))

    def __init__(self):
        self.seen = []

    @hookimpl
    def exechost_startup(self, event):
        for vnode in event.vnode_list.values():
            vnode.state = "offline"

    @hookimpl
    def queuejob(self, event):
        if str(event.job.Resource_List["walltime"]) in ("77", "00:01:17"):
            event.job.Execution_Time = int(clock.now()) + 3600

    @hookimpl
    def periodic(self, event):
        self.seen.append([(j, job.queue, job.job_state) for j, job in event.job_list.items()])


def test_a_periodic_hook_sees_every_queued_job_as_the_engines_does(tmp_path, register_plugin,
                                                                   pbsplug_plugins):
    """short takes one job not finished (max_queued). j1 goes there; j2 finds it full, and
    long refuses it for good: it waits in entry, queued. j3 asks both cpus of workq; j4
    waits (W) for its Execution_Time. A periodic hook sees the jobs in state Q, in
    submission order, as the engine's (`store.jobs(("Q",))`): j2 in its route queue too
    (it saw j1, j3 and the waiting j4)."""
    text = PLATFORM.format(entry="").replace(
        "[queues.short]\n", '[queues.short]\nmax_queued = "[o:PBS_ALL=1]"\n')
    path = tmp_path / "p.toml"
    path.write_text(text)
    hook = SeesQueued()
    register_plugin(hook, "seer", isolation="inprocess", freq=60)
    jobs = [tj(1, 0, 10, 1, 60), tj(2, 1, 10, 1, 60), tj(3, 2, 10, 2, 60, queue="nosuch"),
            tj(4, 3, 10, 1, 77, queue="nosuch")]
    replay(load_platform(path), jobs, plugins=pbsplug_plugins, tmp_path=tmp_path)
    expected = [("1", "short", "Q"), ("2", "entry", "Q"), ("3", "workq", "Q")]
    assert hook.seen[0] == expected
    root = make_root()
    try:
        eng = Engine(Home(root), plugins=PluginSet(SiteConfig(path=None)))
        manager = Caller(0, ROLE_MANAGER)
        for command in (
                "set server scheduling = false",
                "create queue short queue_type=execution,enabled=true,started=true,"
                "Priority=10,resources_max.walltime=00:10:00,resources_max.ncpus=1,"
                "max_queued='[o:PBS_ALL=1]'",
                "create queue long queue_type=execution,enabled=true,started=true,"
                "resources_min.walltime=00:10:01,resources_max.walltime=10:00:00",
                "create queue entry queue_type=route,route_destinations='short,long',"
                "enabled=true,started=true"):
            assert eng.req_qmgr(manager, command)["code"] == 0, command
        ids = []
        for queue, ncpus, extra in (("entry", 1, {}), ("entry", 1, {}), ("workq", 2, {}),
                                    ("workq", 1, {"Execution_Time": int(time.time()) + 3600})):
            ids.append(eng.req_submit(manager, {"queue": queue, "Resource_List": {
                "select": f"{ncpus}:ncpus=1", "walltime": "60"}, **extra}, "true\n"))
        on_engine = [(str(ids.index(j) + 1), a["queue"], a["job_state"])
                     for j, a in eng.store.jobs(("Q",)).items()]
        eng.close()
    finally:
        remove_root(root)
    assert on_engine == expected
