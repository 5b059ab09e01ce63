"""The lifecycle's comment times (`pbsplug.lifecycle.when`), read once a minute per zone."""

from __future__ import annotations

import os
import time

import pytest

from pbsplug.lifecycle import when


@pytest.fixture
def zone():
    """Set TZ for the test (time.tzset), and put it back after."""
    old = os.environ.get("TZ")

    def use(name: str) -> None:
        os.environ["TZ"] = name
        time.tzset()

    yield use
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


# Around the end of summer time in Europe (2021-10-31 01:00 UTC), and whole minutes apart.
INSTANTS = [0, 59, 60, 61, 1635641999, 1635642000, 1635642059, 1635645599, 1635645600,
            1234567890, 1234567890.9]


@pytest.mark.parametrize("name", ["UTC", "Europe/Stockholm", "Asia/Kolkata"])
def test_when_is_pbs_comment_time_in_the_zone_set(zone, name):
    zone(name)
    for epoch in INSTANTS:
        assert when(epoch) == time.strftime("%a %b %d at %H:%M", time.localtime(epoch))


def test_a_zone_set_later_is_not_answered_from_the_earlier_one(zone):
    zone("UTC")
    assert when(1635642000) == "Sun Oct 31 at 01:00"
    zone("Asia/Kolkata")  # +05:30
    assert when(1635642000) == "Sun Oct 31 at 06:30"


# -- substate ---------------------------------------------------------------------------------

NOW = 1_800_000_000


@pytest.mark.parametrize(("holds", "when", "state", "substate"), [
    ("n", None, "Q", 10), ("o", None, "H", 20), ("n", NOW + 60, "W", 30),
    ("u", NOW + 60, "H", 20)])
def test_a_requeued_job_has_pbss_substate_for_the_state_it_is_in(holds, when, state,
                                                                 substate):
    """A requeue left substate 10 whatever the job's state: held and waiting jobs had
    a queued job's substate (PBS's are 20 and 30)."""
    from pbsplug import lifecycle

    attrs = {"job_state": "R", "substate": 42, "run_count": 1, "Hold_Types": holds,
             **({"Execution_Time": when} if when else {})}
    lifecycle.requeued(attrs, "requeued", NOW)
    assert (attrs["job_state"], attrs["substate"]) == (state, substate)
    refused = {"job_state": "Q", "substate": 10}
    lifecycle.runjob_refused(refused, "no", {"Hold_Types": holds,
                                             **({"Execution_Time": when} if when else {})},
                             NOW)
    assert (refused["job_state"], refused["substate"]) == (state, substate)


def test_a_dependency_hold_keeps_its_substate_while_its_s_hold_does():
    from pbsplug import lifecycle

    attrs = {"job_state": "H", "substate": lifecycle.DEPEND_HELD, "Hold_Types": "su"}
    lifecycle.set_substate(attrs)
    assert attrs["substate"] == 22
    attrs["Hold_Types"] = "u"  # (its dependencies met: the s hold went)
    lifecycle.set_substate(attrs)
    assert attrs["substate"] == 20
    finished = {"job_state": "F", "substate": 91}
    lifecycle.set_substate(finished)
    assert finished["substate"] == 91


def test_a_finished_jobs_comment_says_finished_or_failed_as_pbs_does():
    from pbsplug import lifecycle

    ran = {"stime": 0, "exec_vnode": "(vm:ncpus=1)"}
    for status, word in ((0, "finished"), (3, "failed"), (271, "failed"), (-29, "failed")):
        attrs = dict(ran)
        lifecycle.finished(attrs, status, 10)
        assert attrs["comment"].startswith("Job run at ") and \
            attrs["comment"].endswith(f" on (vm:ncpus=1) and {word}"), (status, attrs)
    given = dict(ran)
    lifecycle.finished(given, 3, 10, comment="Job deleted at request of root@vm")
    assert given["comment"] == "Job deleted at request of root@vm"  # a reason given stays
