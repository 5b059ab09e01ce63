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
