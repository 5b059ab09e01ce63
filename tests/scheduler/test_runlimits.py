"""PBS's run limits in a cycle (`pbsplug.scheduler.runlimits`): max_run, max_run_res and the
old-style max_running / max_user_run / max_group_run, on the server and on a queue, each
worked out by hand."""

from __future__ import annotations

from pbsplug import Queue, Server
from pbsplug.scheduler import Policy, Scheduler

from .helpers import NOW, job, running, snapshot, vnode

QUEUE = {"queue_type": "execution", "started": True}


def cycle(snap, **policy):
    return Scheduler(policy=Policy(**policy)).cycle(snap, NOW)


def ran(result) -> list[str]:
    return sorted(r.job_id for r in result.run)


def machine(n: int = 8):
    return [vnode(f"n{i}", ncpus=1) for i in range(n)]


def jobs_of(user: str, count: int, first: int, **kw):
    return [job("1:ncpus=1", id=f"{first + i}.s", euser=user, egroup="staff", **kw)
            for i in range(count)]


def test_max_run_per_user_starts_that_many_and_does_not_block_other_users():
    alice = jobs_of("alice", 4, 1)
    bob = jobs_of("bob", 1, 10)
    server = Server("srv", {"max_run": "[u:PBS_GENERIC=2]"})
    # Under strict ordering too: alice's held jobs are no top jobs and block nobody.
    result = cycle(snapshot(machine(), alice + bob, server=server), strict_ordering=True)
    assert ran(result) == ["1.s", "10.s", "2.s"]
    assert result.comments["3.s"] == \
        "Not Running: User has reached server running job limit."
    assert "3.s" not in result.estimates and result.top_jobs == []


def test_running_jobs_count_and_a_users_own_limit_beats_the_generic_one():
    already = running("1:ncpus=1", "(n0:ncpus=1)", id="0.s", euser="alice", egroup="staff")
    alice = jobs_of("alice", 3, 1)
    server = Server("srv", {"max_run": "[u:PBS_GENERIC=1],[u:alice=2]"})
    result = cycle(snapshot(machine(), [already, *alice], server=server))
    assert ran(result) == ["1.s"]
    assert result.comments["2.s"] == "Not Running: Server job limit reached for user alice"


def test_queue_limits_and_old_style_limits_with_pbs_texts():
    queues = {"workq": Queue("workq", {**QUEUE, "max_user_run": 1}),
              "big": Queue("big", {**QUEUE, "max_running": 2})}
    jobs = jobs_of("alice", 2, 1) + jobs_of("bob", 3, 10, queue="big")
    result = cycle(snapshot(machine(), jobs, queues))
    assert ran(result) == ["1.s", "10.s", "11.s"]
    assert result.comments["2.s"] == \
        "Not Running: User has reached queue workq running job limit."
    assert result.comments["12.s"] == "Not Running: Queue big job limit has been reached."
    # The group's limit on the server, old style.
    plain = {name: Queue(name, QUEUE) for name in ("workq", "big")}
    result = cycle(snapshot(machine(), jobs, plain, server=Server("srv", {"max_group_run": 2})))
    assert ran(result) == ["1.s", "2.s"]
    assert result.comments["10.s"] == "Not Running: Group has reached server running limit."


def test_max_run_res_sums_what_running_and_started_jobs_ask_for():
    big = [job("2:ncpus=1", id=f"{i}.s", euser="alice", place="scatter") for i in (1, 2, 3)]
    queues = {"workq": Queue("workq", {**QUEUE, "max_run_res": {
        "ncpus": "[u:PBS_GENERIC=5]"}})}
    result = cycle(snapshot(machine(), big, queues))
    assert ran(result) == ["1.s", "2.s"]  # 2 + 2; a third would make 6
    assert result.comments["3.s"] == \
        "Not Running: Queue workq per-user limit reached on resource ncpus"
    server = Server("srv", {"max_run_res": {"ncpus": "[o:PBS_ALL=3]"}})
    result = cycle(snapshot(machine(), big, server=server))
    assert ran(result) == ["1.s"]
    assert result.comments["2.s"] == \
        "Not Running: would exceed overall limit on resource ncpus in complex"


def test_without_limits_nothing_changes():
    alice = jobs_of("alice", 4, 1)
    assert ran(cycle(snapshot(machine(), alice))) == ["1.s", "2.s", "3.s", "4.s"]


def test_jobs_in_a_reservation_meet_the_limits_and_count():
    """Review of the first version: a reservation's jobs were started before the limits
    were asked, and not counted (OpenPBS checks every job, a reservation's too)."""
    from .helpers import resv

    vnodes = [vnode("n1"), vnode("n2")]
    queues = {"workq": Queue("workq", QUEUE), "R1": Queue("R1", QUEUE)}
    held = resv("R1", "1:ncpus=4", NOW - 10, NOW + 3600, state="RUNNING",
                resv_nodes="(n2:ncpus=4)", queue="R1")
    inside = [job("1:ncpus=2", queue="R1", id=f"{i}.s", euser="alice") for i in (1, 2)]
    outside = [job("1:ncpus=1", id=f"{i}.s", euser="alice") for i in (3, 4)]
    server = Server("srv", {"max_run": "[o:PBS_ALL=2]"})
    result = cycle(snapshot(vnodes, inside + outside, queues, reservations=[held],
                            server=server))
    assert ran(result) == ["1.s", "2.s"]
    assert result.comments["3.s"] == "Not Running: Server job limit has been reached."


def test_job_wide_resources_count_from_resource_list_with_a_select():
    """Review of the first version: with a select, walltime (job-wide, in no chunk)
    counted 0."""
    jobs = [job("1:ncpus=1", "01:00:00", id=f"{i}.s", euser="alice") for i in (1, 2, 3)]
    server = Server("srv", {"max_run_res": {"walltime": "[u:PBS_GENERIC=02:00:00]"}})
    result = cycle(snapshot(machine(), jobs, server=server))
    assert ran(result) == ["1.s", "2.s"]
    assert result.comments["3.s"] == \
        "Not Running: Server per-user limit reached on resource walltime"


def test_a_custom_resource_counts_by_its_declared_type():
    """Review of the first version: without the custom resources' types the scheduler
    guessed them from the limit's text: 25 GB written in bytes read as a count, and every
    job's 10gb as nothing."""
    jobs = [job("1:ncpus=1:scratch=10gb", id=f"{i}.s", euser="alice") for i in (1, 2, 3)]
    server = Server("srv", {"max_run_res": {"scratch": f"[o:PBS_ALL={25 << 30}]"}})
    snap = snapshot(machine(), jobs, server=server)
    snap.resource_types = {"scratch": "size"}
    vnodes = [vnode(f"n{i}", ncpus=1, resources={"scratch": "100gb"}) for i in range(4)]
    snap.vnodes = {v.name: v for v in vnodes}
    assert ran(cycle(snap)) == ["1.s", "2.s"]


def test_a_running_job_on_vnodes_this_scheduler_does_not_see_counts():
    """Review of the first version: only the jobs booked on this scheduler's vnodes were
    counted (a job run elsewhere with qrun -H was not)."""
    elsewhere = running("1:ncpus=1", "(other:ncpus=1)", id="0.s", euser="alice")
    server = Server("srv", {"max_run": "[u:PBS_GENERIC=1]"})
    result = cycle(snapshot(machine(), [elsewhere, *jobs_of("alice", 1, 1)], server=server))
    assert ran(result) == []
    assert "running job limit" in result.comments["1.s"]
