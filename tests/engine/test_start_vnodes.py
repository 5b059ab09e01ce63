"""Each of a job's start events (execjob_begin, execjob_prologue, execjob_launch) hands its
hooks vnodes made from the stored data: what an earlier event's hooks left on theirs and
the server did not keep (a state it derives, written past the setters) is not seen by
the next event's hooks (review, session 47: the three events shared one set of objects)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.server import ROLE_MANAGER, Caller

from .conftest import poll_until

ROOT = Caller(0, ROLE_MANAGER)


class Leaker:
    """execjob_begin writes on each vnode what the server does not keep: a state it derives
    from the jobs (``job-busy``) through the setter, and a resource past the setters
    (``dict.__setitem__``, which stays in the hook's own process when it is forked); the
    prologue and launch hooks write down what they see, in a file (a forked hook's memory
    is its own)."""

    plugin_info = PluginInfo(events=("execjob_begin", "execjob_prologue", "execjob_launch"))

    def __init__(self, seen: Path):
        self.seen = seen

    @hookimpl
    def execjob_begin(self, event):
        self._note(event)
        for vn in event.vnode_list.values():
            vn.state = "job-busy"
            dict.__setitem__(vn.resources_available, "leaked", 1)

    @hookimpl
    def execjob_prologue(self, event):
        self._note(event)

    @hookimpl
    def execjob_launch(self, event):
        self._note(event)

    def _note(self, event) -> None:
        seen = {name: [vn.state, "leaked" in vn.resources_available]
                for name, vn in event.vnode_list.items()}
        with self.seen.open("a") as out:
            out.write(json.dumps([event.type, seen]) + "\n")


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
def test_a_start_event_sees_the_stored_vnodes_not_the_last_events_objects(
        engine_here, register_plugin, tmp_path, isolation):
    seen = tmp_path / "seen"
    register_plugin(Leaker(seen), "leaker", isolation=isolation, alarm=10)
    eng = engine_here()
    job_id = eng.req_submit(ROOT, {}, script="true\n")
    poll_until(eng, lambda: seen.exists() and len(seen.read_text().splitlines()) >= 3,
               "the job's three start events")
    runs = [json.loads(line) for line in seen.read_text().splitlines()]
    assert [event for event, _ in runs] == ["execjob_begin", "execjob_prologue",
                                           "execjob_launch"], (job_id, runs)
    begin = runs[0][1]
    assert begin and all(not leaked for _, leaked in begin.values()), begin
    for event, vnodes in runs[1:]:
        assert vnodes == begin, f"{event} saw the begin hook's leftovers: {vnodes}"


class Starts:
    """A no-op hook on each start event."""

    plugin_info = PluginInfo(events=("execjob_begin", "execjob_prologue", "execjob_launch"))

    @hookimpl
    def execjob_begin(self, event):
        pass

    @hookimpl
    def execjob_prologue(self, event):
        pass

    @hookimpl
    def execjob_launch(self, event):
        pass


def test_a_start_reads_the_stored_vnodes_once_for_its_three_hooked_events(
        engine_here, register_plugin, monkeypatch):
    # Each event a hook runs for read every stored vnode again: three reads of the node
    # table per start.
    register_plugin(Starts(), "starts", isolation="inprocess")
    eng = engine_here()
    reads: list[str] = []
    real_all, real_start, real_track = eng.store.all, eng._start, eng._track_states
    starting = []

    def all_(type: str):
        if starting == [True] and type == "node":
            reads.append(type)
        return real_all(type)

    def during(real, *args, **kwargs):
        starting.append(real == real_start)
        try:
            return real(*args, **kwargs)
        finally:
            starting.pop()

    monkeypatch.setattr(eng.store, "all", all_)
    monkeypatch.setattr(eng, "_start", functools.partial(during, real_start))
    # (the launch's look at every vnode's state, `_track_states`, is no start event's)
    monkeypatch.setattr(eng, "_track_states", functools.partial(during, real_track))
    job_id = eng.req_submit(ROOT, {}, script="true\n")
    poll_until(eng, lambda: job_id in eng.launches, "the job's launch")
    assert reads == ["node"], reads
