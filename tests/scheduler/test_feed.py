"""A scheduler fed through a `Feed` (kept objects and logs, as the local engine and a
scheduler process feed theirs) decides exactly as a new scheduler given new objects every
cycle, over a queue that changes the way an engine's does."""

from __future__ import annotations

import random

import pytest

from pbsplug import Job, PluginSet, Queue, Reservation, Server, Vnode, hookimpl
from pbsplug.scheduler import Policy, Scheduler, Snapshot
from pbsplug.scheduler.feed import Feed
from pbsplug.siteconfig import SiteConfig
from pbsplug.units import format_duration, parse_exec_vnode

NOW = 1_800_000_000.0


class Site:
    """Stored rows changed the way a server changes them: submissions, ends, holds,
    alterations, vnodes going offline, queue and server settings; the vnodes' job states
    derived from the running jobs, as the engine derives them."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.now = NOW
        self.seq = 0
        self.nodes = {f"n{i:02d}": {"state": "free", "resources_available": {
            "ncpus": self.rng.choice([4, 8]), "mem": "32gb", "host": f"h{i // 2}",
            **({"switch": f"s{i % 3}"} if i % 4 else {})}}  # (a few on no switch)
            for i in range(12)}
        self.queues = {"workq": {"queue_type": "Execution", "started": True, "enabled": True},
                       "fast": {"queue_type": "Execution", "started": True, "enabled": True,
                                "Priority": 10}}
        self.server = {"resources_default": {"walltime": "02:00:00"}}
        self.jobs: dict[str, dict] = {}
        self.ends: dict[str, float] = {}
        self.resvs: dict[str, dict] = {}  # confirmed reservations

    def submit(self) -> None:
        self.seq += 1
        chunks, ncpus = self.rng.choice([1, 1, 2, 3]), self.rng.choice([1, 2, 4, 8])
        res = {"select": f"{chunks}:ncpus={ncpus}"}
        if self.rng.random() < 0.8:
            res["walltime"] = format_duration(self.rng.choice([600, 1800, 3600, 7200]))
        if self.rng.random() < 0.2:
            res["place"] = self.rng.choice(["scatter", "pack", "excl", "group=switch",
                                            "scatter:group=switch"])
        attrs = {"queue": self.rng.choice(["workq", "workq", "fast"]), "job_state": "Q",
                 "Resource_List": res, "qtime": int(self.now), "Hold_Types": "n"}
        if self.rng.random() < 0.1:
            attrs["Execution_Time"] = int(self.now) + self.rng.choice([60, 1200])
        self.jobs[f"{self.seq}.srv"] = attrs

    def step(self) -> None:
        """Time passes; jobs end; and one or more of the other changes."""
        self.now += self.rng.choice([0, 1, 30, 300, 900])
        for job_id in [j for j, end in self.ends.items() if end <= self.now]:
            del self.ends[job_id], self.jobs[job_id]
        for name in [r for r, attrs in self.resvs.items() if attrs["reserve_end"] <= self.now]:
            del self.resvs[name]  # over
        for _ in range(self.rng.choice([0, 1, 1, 2, 5])):
            self.submit()
        queued = [j for j, a in self.jobs.items() if a["job_state"] in ("Q", "H")]
        roll = self.rng.random()
        if queued and roll < 0.1:  # qhold / qrls
            job_id = self.rng.choice(queued)
            attrs = dict(self.jobs[job_id])
            held = attrs["job_state"] == "H"
            attrs["job_state"], attrs["Hold_Types"] = ("Q", "n") if held else ("H", "u")
            self.jobs[job_id] = attrs
        elif queued and roll < 0.2:  # qalter walltime
            job_id = self.rng.choice(queued)
            attrs = dict(self.jobs[job_id])
            attrs["Resource_List"] = {**attrs["Resource_List"], "walltime": format_duration(
                self.rng.choice([300, 1200, 5400]))}
            self.jobs[job_id] = attrs
        elif roll < 0.27:  # a vnode offline, or back
            name = self.rng.choice(sorted(self.nodes))
            node = dict(self.nodes[name])
            node["state"] = "free" if node["state"] == "offline" else "offline"
            self.nodes[name] = node
        elif roll < 0.3:  # the server's default walltime
            self.server = {"resources_default": {"walltime": self.rng.choice(
                ["01:00:00", "02:00:00", "04:00:00"])}}
        elif roll < 0.33:  # a queue's priority
            self.queues["fast"] = {**self.queues["fast"], "Priority": self.rng.choice([0, 10])}
        elif roll < 0.36:  # a queue's default walltime (jobs without their own take it)
            self.queues["workq"] = {**self.queues["workq"], "resources_default": {
                "walltime": self.rng.choice(["00:30:00", "03:00:00"])}}
        elif roll < 0.39:  # a queue moved into another scheduler's partition, or back
            fast = dict(self.queues["fast"])
            if fast.pop("partition", None) is None:
                fast["partition"] = "p1"
            self.queues["fast"] = fast
        elif roll < 0.42:  # a reservation confirmed, or one deleted
            if self.resvs and self.rng.random() < 0.5:
                del self.resvs[self.rng.choice(sorted(self.resvs))]
            else:
                name = self.rng.choice(sorted(self.nodes))
                start = int(self.now) + self.rng.choice([0, 600, 3600])
                self.resvs[f"R{self.seq}"] = {
                    "reserve_state": "RESV_CONFIRMED", "reserve_start": start,
                    "reserve_end": start + 1800, "resv_nodes": f"({name}:ncpus=2)",
                    "Resource_List": {"select": "1:ncpus=2"}}

    def vnode_rows(self) -> dict[str, dict]:
        used: dict[str, int] = dict.fromkeys(self.nodes, 0)
        for attrs in self.jobs.values():
            for name, res in parse_exec_vnode(attrs.get("exec_vnode", "")):
                used[name] += int(res.get("ncpus", 0))
        rows = {}
        for name, node in self.nodes.items():
            states = [s for s in node["state"].split(",") if s != "free"]
            if used[name] >= node["resources_available"]["ncpus"]:
                states.append("job-busy")
            rows[name] = {**node, "state": ",".join(states) or "free",
                          "resources_assigned": {"ncpus": used[name]}}
        return rows

    def active(self) -> dict[str, dict]:
        return {j: a for j, a in self.jobs.items() if a["job_state"] in ("Q", "R")}

    def apply(self, result) -> None:
        """Starts, estimates and comments written back, as the engine writes them."""
        for job_id, est in result.estimates.items():
            self.jobs[job_id] = {**self.jobs[job_id], "estimated": {
                "start_time": est.start_time, "exec_vnode": est.exec_vnode}}
        for job_id, comment in result.comments.items():
            if self.jobs[job_id].get("comment") != comment:
                self.jobs[job_id] = {**self.jobs[job_id], "comment": comment}
        for decision in result.run:
            attrs = {**self.jobs[decision.job_id], "job_state": "R",
                     "exec_vnode": decision.exec_vnode, "stime": int(self.now)}
            attrs.pop("estimated", None)
            self.jobs[decision.job_id] = attrs
            walltime = 3600  # ends before, at or after its walltime: all happen
            self.ends[decision.job_id] = self.now + walltime * self.rng.choice([0.2, 0.5, 1, 3])


def reservations(site: Site) -> list[Reservation]:
    """New objects every cycle, as the engine makes them."""
    return [Reservation(name, attrs) for name, attrs in site.resvs.items()]


def fresh_snapshot(site: Site) -> Snapshot:
    return Snapshot(Server("srv", site.server), {n: Queue(n, a) for n, a in site.queues.items()},
                    {n: Vnode(n, a) for n, a in site.vnode_rows().items()},
                    [Job(j, a) for j, a in site.active().items()], reservations(site))


class Starving:
    """Names the last queued job starving in the first half of each hour."""

    @hookimpl
    def sched_job_order(self, order):
        if order.jobs and int(order.now // 60) % 60 < 30:
            order.starving.append(order.jobs[-1].id)


class Alternate:
    """Places a planned job on its last candidates on odd minutes: an answer that changes
    with the time alone."""

    @hookimpl
    def sched_node_placement(self, placement):
        if placement.start is None or int(placement.now // 60) % 2 == 0:
            return None
        return placement.fit(list(reversed(placement.candidates)))


def decisions(result) -> tuple:
    return ([(d.job_id, d.exec_vnode) for d in result.run],
            {j: (e.start_time, e.exec_vnode) for j, e in result.estimates.items()},
            result.comments, result.top_jobs)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("depth, formula, hook", [
    (1, None, None), (3, None, None), (1, "walltime", None), (1, None, Alternate),
    (1, None, Starving)])
def test_a_fed_scheduler_decides_as_a_new_one_each_cycle(seed, depth, formula, hook,
                                                         tmp_path):
    site = Site(seed)
    policy = Policy(strict_ordering=True, backfill_depth=depth, estimate_limit=6,
                    job_sort_formula=formula)
    hooks = hook_of(tmp_path, hook()) if hook is not None else None

    def scheduler() -> Scheduler:  # default, beside a scheduler owning partition p1
        return Scheduler(policy=policy, claimed={"p1"}, hooks=hooks)

    kept, feed = scheduler(), Feed()
    started = kept_cycles = reused = 0
    for _ in range(120):
        site.step()
        feed.set_server("srv", site.server)
        feed.set_queues(site.queues)
        feed.set_vnodes(site.vnode_rows())
        feed.set_jobs(site.active())
        before = kept._kept
        mark = feed.job_log.mark
        result = kept.cycle(feed.snapshot(reservations(site)), site.now)
        feed.read(mark)
        kept_cycles += kept._kept is before
        reused += kept._sticky_used
        expected = scheduler().cycle(fresh_snapshot(site), site.now)
        assert decisions(result) == decisions(expected)
        started += len(result.run)
        site.apply(result)
    # Not a trivial run: jobs started and waited, and most cycles kept what they had.
    assert started > 40
    assert sum(1 for a in site.jobs.values() if a["job_state"] == "Q") > 5
    assert kept_cycles > 40
    if hook is not Alternate:  # (whose plans are never kept)
        assert reused > 0


def test_unchanged_rows_keep_their_objects_and_changes_are_logged():
    feed = Feed()
    feed.set_jobs({"1.srv": {"job_state": "Q"}, "2.srv": {"job_state": "Q"}})
    feed.set_vnodes({"n1": {"state": "free"}, "n2": {"state": "free"}})
    first, vnode = feed.jobs["1.srv"], feed.vnodes["n2"]
    mark, version = feed.job_log.mark, feed.vnode_log.version
    feed.set_jobs({"1.srv": {"job_state": "Q"}, "2.srv": {"job_state": "R"},
                   "3.srv": {"job_state": "Q"}})
    feed.set_vnodes({"n2": {"state": "free"}, "n3": {"state": "offline"}})
    assert feed.jobs["1.srv"] is first and feed.vnodes["n2"] is vnode
    assert [(j.id, j.job_state, added) for j, added in feed.job_log.since(mark)] == [
        ("2.srv", "Q", False), ("2.srv", "R", True), ("3.srv", "Q", True)]
    assert feed.vnode_log.since(version) == {"n1", "n3"}
    assert sorted(feed.vnodes) == ["n2", "n3"]
    feed.read(feed.job_log.mark)
    feed.set_jobs({"3.srv": {"job_state": "Q"}})
    assert [(j.id, added) for j, added in feed.job_log.since(feed.job_log.base)] == [
        ("1.srv", False), ("2.srv", False)]
    server = feed.server
    feed.set_server("server", {})
    assert feed.server is not server  # the first set is new
    server = feed.server
    feed.set_server("server", {})
    assert feed.server is server
    feed.set_server("server", {"scheduling": False})
    assert feed.server is not server and feed.server.scheduling is False


QUEUES = {"workq": {"queue_type": "Execution", "started": True, "enabled": True}}


def queued(qtime: int, select: str, walltime: str) -> dict:
    return {"queue": "workq", "job_state": "Q", "Hold_Types": "n", "qtime": qtime,
            "Resource_List": {"select": select, "walltime": walltime}}


def running_row(stime: float | None, exec_vnode: str, select: str, walltime: str) -> dict:
    row = {"queue": "workq", "job_state": "R", "exec_vnode": exec_vnode, "qtime": 1,
           "Resource_List": {"select": select, "walltime": walltime}}
    if stime is not None:
        row["stime"] = int(stime)
    return row


def hook_of(tmp_path, plugin):
    """The hooks of a plugin set with `plugin` enabled."""
    plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
    assert plugins.add("plugin", plugin, enable=True).status == "enabled"
    return plugins.hook


def fed_and_new(steps, nodes: dict, hooks=None, policy=None, explain=True) -> None:
    """Each (now, job rows[, reservation rows]) in turn: the fed scheduler decides as a new
    one."""
    policy = policy or Policy(strict_ordering=True)
    feed, sched = Feed(), Scheduler(policy=policy, hooks=hooks)
    sched.explain = explain
    for now, jobs, *more in steps:
        resvs = more[0] if more else {}
        feed.set_server("srv", {})
        feed.set_queues(QUEUES)
        feed.set_vnodes(nodes)
        feed.set_jobs(jobs)
        objects = [Reservation(name, attrs) for name, attrs in resvs.items()]
        result = sched.cycle(feed.snapshot(objects), now)
        new = Scheduler(policy=policy, hooks=hooks)
        new.explain = explain
        expected = new.cycle(Snapshot(
            Server("srv", {}), {n: Queue(n, a) for n, a in QUEUES.items()},
            {n: Vnode(n, a) for n, a in nodes.items()}, [Job(j, a) for j, a in jobs.items()],
            [Reservation(name, attrs) for name, attrs in resvs.items()]), now)
        if not explain:  # (comments are not read: `Scheduler.explain`)
            result.comments = expected.comments = {}
        assert decisions(result) == decisions(expected), now - NOW


def test_a_top_plan_made_around_a_reservation_is_not_kept_once_it_is_gone():
    """Planned after a reservation (the vnode is taken from +200 to +2000), the top job
    starts at +2000 and a later job fits in front; the reservation deleted, it starts at
    +90 and nothing fits in front."""
    resv = {"R1.srv": {"reserve_state": "RESV_CONFIRMED", "resv_nodes": "(n1:ncpus=4)",
                       "reserve_start": NOW + 200, "reserve_end": NOW + 2000,
                       "Resource_List": {"select": "1:ncpus=4"}}}
    jobs = {"1.srv": running_row(NOW - 10, "(n1:ncpus=2)", "1:ncpus=2", "00:01:40"),
            "2.srv": queued(2, "1:ncpus=4", "00:05:00"),
            "3.srv": queued(3, "1:ncpus=2", "00:08:20")}
    nodes = {"n1": {"state": "free", "resources_available": {"ncpus": 4}}}
    fed_and_new([(NOW, jobs, resv), (NOW + 10, jobs)], nodes)


def test_a_top_plan_a_placement_hook_chose_is_asked_for_again(tmp_path):
    jobs = {"1.srv": running_row(NOW, "(n1:ncpus=4)+(n2:ncpus=4)", "2:ncpus=4", "01:00:00"),
            "2.srv": queued(2, "1:ncpus=4", "00:05:00")}
    nodes = {n: {"state": "free", "resources_available": {"ncpus": 4}} for n in ("n1", "n2")}
    fed_and_new([(NOW, jobs), (NOW + 60, jobs)], nodes, hook_of(tmp_path, Alternate()))


class StarvingAtFirst:
    @hookimpl
    def sched_job_order(self, order):
        if order.now < NOW + 5:
            order.starving.append("2.srv")


def test_a_top_plan_made_for_a_starving_job_is_not_kept(tmp_path):
    """Without strict_ordering, 2.srv is a top job only while a hook names it starving;
    afterwards 3.srv starts in front of it."""
    jobs = {"1.srv": running_row(NOW, "(n1:ncpus=2)", "1:ncpus=2", "00:01:40"),
            "2.srv": queued(2, "1:ncpus=4", "00:05:00"),
            "3.srv": queued(3, "1:ncpus=2", "00:08:20")}
    nodes = {"n1": {"state": "free", "resources_available": {"ncpus": 4}}}
    fed_and_new([(NOW, jobs), (NOW + 10, jobs)], nodes, hook_of(tmp_path, StarvingAtFirst()),
                Policy(strict_ordering=False, backfill_depth=1))


class StarvingLater:
    @hookimpl
    def sched_job_order(self, order):
        if order.now > NOW + 5:
            order.starving.append("3.srv")


def test_a_kept_top_plan_is_not_used_while_a_hook_names_another_job_starving(tmp_path):
    """2.srv's plan (at +100) is kept; once 3.srv is named starving it goes first and is
    planned at +100, and 2.srv after it."""
    jobs = {"1.srv": running_row(NOW, "(n1:ncpus=4)", "1:ncpus=4", "00:01:40"),
            "2.srv": queued(2, "1:ncpus=4", "00:05:00"),
            "3.srv": queued(3, "1:ncpus=4", "00:05:00")}
    nodes = {"n1": {"state": "free", "resources_available": {"ncpus": 4}}}
    fed_and_new([(NOW, jobs), (NOW + 10, jobs)], nodes, hook_of(tmp_path, StarvingLater()))


def test_a_running_job_without_a_start_time_is_booked_from_each_cycles_now():
    jobs = {"1.srv": running_row(None, "(n1:ncpus=4)", "1:ncpus=4", "01:00:00"),
            "2.srv": queued(2, "1:ncpus=4", "00:05:00")}
    nodes = {"n1": {"state": "free", "resources_available": {"ncpus": 4}}}
    fed_and_new([(NOW, jobs), (NOW + 600, jobs), (NOW + 700, jobs)], nodes)


def test_a_job_given_the_start_time_it_was_first_booked_from_is_noticed_past_its_walltime():
    """1.srv has no stime at first, then the one the first cycle booked it from: once its
    walltime is over it holds n1 until now + 1, and 2.srv does not start on top of it."""
    nodes = {"n1": {"state": "free", "resources_available": {"ncpus": 4}}}
    two = queued(2, "1:ncpus=4", "00:05:00")
    first = {"1.srv": running_row(None, "(n1:ncpus=4)", "1:ncpus=4", "01:00:00"), "2.srv": two}
    timed = {"1.srv": running_row(NOW, "(n1:ncpus=4)", "1:ncpus=4", "01:00:00"), "2.srv": two}
    fed_and_new([(NOW, first), (NOW + 10, timed), (NOW + 3605, timed)], nodes)


@pytest.mark.parametrize("limit, explain", [(100, True), (0, False)])
def test_a_vnode_freed_on_the_host_an_exclhost_plan_passed_over_replans_it(limit, explain):
    """4.srv needs a whole host: at first h1's b (h0's c is busy until +1000); once c's job
    ends early, h0's a, earlier in vnode order, from +500."""
    nodes = {"a": {"state": "free", "resources_available": {"ncpus": 4, "host": "h0"}},
             "b": {"state": "free", "resources_available": {"ncpus": 4, "host": "h1"}},
             "c": {"state": "free", "resources_available": {"ncpus": 2, "host": "h0"}}}
    jobs = {"1.srv": running_row(NOW, "(a:ncpus=4)", "1:ncpus=4", "00:08:20"),
            "2.srv": running_row(NOW, "(b:ncpus=4)", "1:ncpus=4", "00:08:20"),
            "3.srv": running_row(NOW, "(c:ncpus=2)", "1:ncpus=2", "00:16:40"),
            "4.srv": {**queued(2, "1:ncpus=4", "00:05:00"), "Resource_List": {
                "select": "1:ncpus=4", "walltime": "00:05:00", "place": "exclhost"}},
            "5.srv": queued(3, "1:ncpus=2", "00:16:40")}
    ended = {j: a for j, a in jobs.items() if j != "3.srv"}
    fed_and_new([(NOW, jobs), (NOW + 100, ended)], nodes,
                policy=Policy(strict_ordering=True, estimate_limit=limit), explain=explain)


def test_ties_in_the_queue_order_go_by_job_id_however_the_jobs_came():
    """Same queue time, no sequence number in the ids: x.srv first, also after a hold."""
    nodes = {"n1": {"state": "free", "resources_available": {"ncpus": 1}}}
    busy = {"1.srv": running_row(NOW, "(n1:ncpus=1)", "1:ncpus=1", "00:01:00")}
    x, y = queued(5, "1:ncpus=1", "00:05:00"), queued(5, "1:ncpus=1", "00:05:00")
    held = {**x, "job_state": "H", "Hold_Types": "u"}
    fed_and_new([(NOW, {**busy, "x.srv": x, "y.srv": y}),
                 (NOW + 10, {**busy, "x.srv": held, "y.srv": y}),
                 (NOW + 20, {**busy, "x.srv": x, "y.srv": y}),
                 (NOW + 100, {"x.srv": x, "y.srv": y})], nodes)


def test_a_job_past_its_walltime_is_booked_from_each_cycles_now():
    nodes = {"n1": {"state": "free", "resources_available": {"ncpus": 4}}}
    jobs = {"1.srv": running_row(NOW - 1000, "(n1:ncpus=4)", "1:ncpus=4", "00:08:20"),
            "2.srv": queued(2, "1:ncpus=4", "00:05:00")}
    fed_and_new([(NOW, jobs), (NOW + 0.5, jobs), (NOW + 0.9, jobs), (NOW + 3, jobs)], nodes)


def test_a_job_within_a_second_of_its_walltime_is_booked_from_each_cycles_now():
    """1.srv's walltime ends at +100; at +99.5 a new scheduler books it until +100.5, so
    the one-second 5.srv fits on d in front of the top job."""
    nodes = {"a": {"state": "free", "resources_available": {"ncpus": 4}},
             "d": {"state": "free", "resources_available": {"ncpus": 1}}}
    jobs = {"1.srv": running_row(NOW, "(a:ncpus=4)", "1:ncpus=4", "00:01:40"),
            "4.srv": queued(4, "1:ncpus=4+1:ncpus=1", "00:05:00")}
    later = {**jobs, "5.srv": queued(5, "1:ncpus=1", "00:00:01")}
    fed_and_new([(NOW, jobs), (NOW + 99.5, later)], nodes)


def test_a_started_job_whose_exec_vnode_differs_from_the_cycles_is_booked_as_it_says():
    nodes = {"n1": {"state": "free", "resources_available": {"ncpus": 4}}}
    two = queued(2, "1:ncpus=1", "00:05:00")
    fed_and_new([(NOW, {"2.srv": two}),
                 (NOW + 10, {"2.srv": {**two, "job_state": "R", "stime": int(NOW),
                                       "exec_vnode": "(n1:ncpus=3)"},
                             "3.srv": queued(3, "1:ncpus=2", "00:05:00")})], nodes)


@pytest.mark.parametrize("explain", [True, False])
def test_without_estimates_a_kept_plan_says_what_a_deferred_one_says(explain):
    nodes = {"n1": {"state": "free", "resources_available": {"ncpus": 4}}}
    jobs = {"1.srv": running_row(NOW, "(n1:ncpus=2)", "1:ncpus=2", "00:16:40"),
            "2.srv": queued(2, "1:ncpus=4", "00:05:00"),
            "3.srv": queued(3, "1:ncpus=1", "00:33:20")}
    fewer = {j: a for j, a in jobs.items() if j != "3.srv"}
    fed_and_new([(NOW, jobs), (NOW + 10, fewer)], nodes,
                policy=Policy(strict_ordering=True, estimate_limit=0), explain=explain)


def test_a_kept_plan_is_made_again_once_the_cpus_freed_since_make_up_what_it_lacked():
    """A top job of eight one-cpu chunks on one 8-cpu vnode is planned at +2000, when the
    last running job ends; at +1000 seven cpus are free, one short. One cpu freed early
    (+10) leaves the plan as it was, and so does a cycle with nothing freed (+20); a second
    cpu freed (+30) makes up the one it lacked: it starts at +1000, and a job that would end
    after that no longer starts in front of it."""
    nodes = {"n1": {"state": "free", "resources_available": {"ncpus": 8}}}
    jobs = {"1.srv": running_row(NOW, "(n1:ncpus=4)", "4:ncpus=1", "00:16:40"),
            "2.srv": running_row(NOW, "(n1:ncpus=2)", "2:ncpus=1", "00:16:40"),
            "3.srv": running_row(NOW, "(n1:ncpus=1)", "1:ncpus=1", "00:16:40"),
            "4.srv": running_row(NOW, "(n1:ncpus=1)", "1:ncpus=1", "00:33:20"),
            "5.srv": queued(2, "8:ncpus=1", "01:00:00")}
    one_freed = {j: a for j, a in jobs.items() if j != "3.srv"}
    two_freed = {j: a for j, a in one_freed.items() if j != "4.srv"}
    two_freed["6.srv"] = queued(3, "1:ncpus=1", "00:25:00")
    fed_and_new([(NOW, jobs), (NOW + 10, one_freed), (NOW + 20, one_freed),
                 (NOW + 30, two_freed)], nodes)


def test_running_jobs_note_one_expiry_each_however_often_their_rows_change():
    feed, sched = Feed(), Scheduler(policy=Policy())
    feed.set_server("srv", {})
    feed.set_queues(QUEUES)
    feed.set_vnodes({"n1": {"state": "free", "resources_available": {"ncpus": 64}}})
    rows = {f"{n}.srv": running_row(NOW, "(n1:ncpus=1)", "1:ncpus=1", "01:00:00")
            for n in range(20)}
    rows["floating.srv"] = running_row(None, "(n1:ncpus=1)", "1:ncpus=1", "01:00:00")
    for cycle in range(30):  # each cycle, every row changes (resources_used)
        feed.set_jobs({j: {**a, "resources_used": {"cput": cycle}} for j, a in rows.items()})
        sched.cycle(feed.snapshot([]), NOW + cycle)
    assert len(sched._kept.expiry) == 20  # (none for the job booked again every cycle)


@pytest.mark.parametrize("state, kept", [("job-busy", True), ("offline", False)])
def test_a_kept_top_plan_outlives_vnode_rows_that_change_only_with_jobs(state, kept):
    """An engine writes job-busy and resources_assigned on every start and end: the kept top
    job's plan stays. A vnode that can no longer take a job now drops it."""
    policy = Policy(strict_ordering=True, estimate_limit=100)
    feed, sched = Feed(), Scheduler(policy=policy)
    feed.set_server("srv", {})
    feed.set_queues(QUEUES)
    nodes = {n: {"state": "free", "resources_available": {"ncpus": 4}} for n in ("n1", "n2")}
    jobs = {"1.srv": running_row(NOW, "(n1:ncpus=2)", "1:ncpus=2", "00:01:40"),
            "2.srv": queued(2, "2:ncpus=4", "00:05:00"),
            "3.srv": queued(3, "1:ncpus=4", "00:05:00")}
    feed.set_vnodes(nodes)
    feed.set_jobs(jobs)
    first = sched.cycle(feed.snapshot([]), NOW)
    top = sched._kept.top
    assert top is not None and top[0] == "2.srv" and first.top_jobs == ["2.srv"]
    assert [d.job_id for d in first.run] == []  # 3.srv would delay 2.srv
    feed.set_vnodes({**nodes, "n2": {**nodes["n2"], "state": state,
                                     "resources_assigned": {"ncpus": 0}}})
    second = sched.cycle(feed.snapshot([]), NOW + 10)
    assert (sched._kept.top is top) is kept
    new = Scheduler(policy=policy).cycle(feed.snapshot([]), NOW + 10)
    assert (second.run, second.top_jobs, second.estimates) == (new.run, new.top_jobs,
                                                               new.estimates)


def test_a_job_row_that_cannot_be_read_changes_nothing_in_the_feed():
    feed = Feed()
    feed.set_jobs({"1.srv": {"job_state": "Q"}})
    first, mark = feed.jobs["1.srv"], feed.job_log.mark
    with pytest.raises(Exception):  # noqa: B017 - whatever the object refuses
        feed.set_jobs({"1.srv": {"job_state": "Q", "Resource_List": "not a mapping"}})
    assert feed.jobs["1.srv"] is first and feed.job_log.mark == mark


def test_a_clock_gone_back_starts_afresh():
    """A running job booked as started at a later cycle's time has not started at an
    earlier one: its vnode is free until then."""
    rows = {"1.srv": running_row(NOW + 50, "(n1:ncpus=4)", "1:ncpus=4", "01:00:00"),
            "2.srv": queued(2, "1:ncpus=4", "00:00:20")}
    feed, sched = Feed(), Scheduler(policy=Policy())
    feed.set_server("srv", {})
    feed.set_queues(QUEUES)
    feed.set_vnodes({"n1": {"state": "free", "resources_available": {"ncpus": 4}}})
    feed.set_jobs(rows)
    assert sched.cycle(feed.snapshot([]), NOW + 100).run == []
    assert [d.job_id for d in sched.cycle(feed.snapshot([]), NOW + 20).run] == ["2.srv"]


def test_a_cycle_that_fails_half_way_leaves_the_next_to_start_afresh():
    feed = Feed()
    feed.set_server("srv", {})
    feed.set_queues({"workq": {"queue_type": "Execution", "started": True}})
    feed.set_vnodes({"n1": {"state": "free", "resources_available": {"ncpus": 4}}})
    feed.set_jobs({"1.srv": {"queue": "workq", "job_state": "Q", "qtime": 1,
                             "Resource_List": {"select": "1:ncpus=1", "walltime": "1:00:00"}}})
    sched = Scheduler(policy=Policy())
    assert len(sched.cycle(feed.snapshot([]), NOW).run) == 1

    class Broken(list):
        def __iter__(self):
            raise RuntimeError("a reservation that cannot be read")

    with pytest.raises(RuntimeError):
        sched.cycle(Snapshot(feed.server, feed.queues, feed.vnodes, feed.jobs.values(),
                             Broken(), vnodes_version=feed.vnode_log.version,
                             job_log=feed.job_log, vnode_log=feed.vnode_log), NOW)
    assert sched._kept is None


def test_a_vnode_whose_priority_changed_is_placed_by_its_new_priority():
    """The default node_sort_key ("sort_priority HIGH") reads each vnode's Priority: a
    kept scheduler keeps its parsed vnodes while rows change only with jobs, and sorts them
    again when a Priority changed."""
    feed, sched = Feed(), Scheduler(policy=Policy())
    feed.set_server("srv", {})
    feed.set_queues(QUEUES)
    nodes = {n: {"state": "free", "resources_available": {"ncpus": 4}, "Priority": p}
             for n, p in (("n1", 1), ("n2", 5))}
    feed.set_vnodes(nodes)
    feed.set_jobs({"1.srv": queued(1, "1:ncpus=1", "00:05:00")})
    assert [d.exec_vnode for d in sched.cycle(feed.snapshot([]), NOW).run] == ["(n2:ncpus=1)"]
    infos = sched._kept.infos
    feed.set_vnodes({**nodes, "n2": {**nodes["n2"], "state": "job-busy",
                                     "resources_assigned": {"ncpus": 1}}})
    feed.set_jobs({"1.srv": running_row(NOW, "(n2:ncpus=1)", "1:ncpus=1", "00:05:00"),
                   "2.srv": queued(2, "1:ncpus=1", "00:05:00")})
    assert [d.exec_vnode for d in sched.cycle(feed.snapshot([]), NOW + 1).run] == [
        "(n2:ncpus=1)"]
    assert sched._kept.infos is infos  # not parsed again
    feed.set_vnodes({**nodes, "n1": {**nodes["n1"], "Priority": 9}})
    feed.set_jobs({"1.srv": running_row(NOW, "(n2:ncpus=1)", "1:ncpus=1", "00:05:00"),
                   "2.srv": running_row(NOW + 1, "(n2:ncpus=1)", "1:ncpus=1", "00:05:00"),
                   "3.srv": queued(3, "1:ncpus=1", "00:05:00")})
    snap = feed.snapshot([])
    assert [d.exec_vnode for d in sched.cycle(snap, NOW + 2).run] == ["(n1:ncpus=1)"]
    assert [d.exec_vnode for d in Scheduler(policy=Policy()).cycle(snap, NOW + 2).run] == [
        "(n1:ncpus=1)"]


def test_a_kept_plan_of_a_group_job_is_made_again_when_a_smaller_set_frees():
    """The top job (two one-cpu chunks, place=group=switch) is planned on switch A (three
    vnodes) at +1000, when A frees; B (two vnodes) is busy until +2000 and +1000. When B's
    first job ends early, B holds the job at +1000 too and, smaller, is its set: a kept plan
    is not kept past an end on a vnode after its own (first fit would never reach there,
    but sets are tried smallest first)."""
    policy = Policy(strict_ordering=True, estimate_limit=100)
    feed, sched = Feed(), Scheduler(policy=policy)
    feed.set_server("srv", {})
    feed.set_queues(QUEUES)
    nodes = {n: {"state": "free", "resources_available": {"ncpus": 1, "switch": n[0]}}
             for n in ("a0", "a1", "a2", "b0", "b1")}
    jobs = {"1.srv": running_row(NOW, "(a0:ncpus=1)+(a1:ncpus=1)+(a2:ncpus=1)", "3:ncpus=1",
                                 "00:16:40"),
            "2.srv": running_row(NOW, "(b0:ncpus=1)", "1:ncpus=1", "00:33:20"),
            "3.srv": running_row(NOW, "(b1:ncpus=1)", "1:ncpus=1", "00:16:40"),
            "4.srv": {**queued(4, "2:ncpus=1", "00:05:00"),
                      "Resource_List": {"select": "2:ncpus=1", "walltime": "00:05:00",
                                        "place": "group=switch"}}}
    feed.set_vnodes(nodes)
    feed.set_jobs(jobs)
    first = sched.cycle(feed.snapshot([]), NOW)
    assert first.estimates["4.srv"].exec_vnode == "(a0:ncpus=1)+(a1:ncpus=1)"
    assert sched._kept.top is not None
    del jobs["2.srv"]  # ends early
    feed.set_jobs(jobs)
    second = sched.cycle(feed.snapshot([]), NOW + 10)
    new = Scheduler(policy=policy).cycle(feed.snapshot([]), NOW + 10)
    assert new.estimates["4.srv"].exec_vnode == "(b0:ncpus=1)+(b1:ncpus=1)"
    assert (second.run, second.estimates) == (new.run, new.estimates)
