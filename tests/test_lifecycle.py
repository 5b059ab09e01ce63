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
