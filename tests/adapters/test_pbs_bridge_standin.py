"""The in-process bridge against a stand-in for PBS's ``pbs`` module, for what PBS's own does
not show: how often the bridge asks PBS for its jobs in one server periodic run."""

from __future__ import annotations

import importlib
import sys
import textwrap
from types import SimpleNamespace
from typing import Any

import pytest

from pbsplug import clock
from pbsplug.adapters import pbs_bridge

NOW = 1_700_000_000.0
QUEUED, RUNNING, SUSPEND = 1, 4, 5
#: PBS gives a job's state as its own type; pbs_wire.plain reads it by its type's name.
JobState = type("job_state", (int,), {})


class StandInJob:
    """A job as ``pbs.server().jobs()`` gives it: its class lists its attribute names."""

    attributes = dict.fromkeys(("id", "job_state", "queue", "Job_Owner", "Resource_List",
                                "exec_vnode", "stime"))

    def __init__(self, job_id: str, state: int, **attrs: Any):
        self.id, self.job_state, self.queue, self.Job_Owner = (
            job_id, JobState(state), "workq", "alice@h")
        self.Resource_List = attrs.pop("Resource_List")
        self.exec_vnode = attrs.pop("exec_vnode", None)
        self.stime = attrs.pop("stime", None)
        self.substate = attrs.pop("substate", None)


class StandInVnode:
    attributes = dict.fromkeys(("name", "state", "resources_available"))

    def __init__(self, name: str, ncpus: int):
        self.name, self.state, self.resources_available = name, "free", {"ncpus": str(ncpus)}


class StandInQueue:
    attributes = dict.fromkeys(("name", "queue_type", "enabled", "started"))
    name, queue_type, enabled, started = "workq", "Execution", True, True


class StandInServer:
    attributes = dict.fromkeys(("name",))
    name = "srv"

    def __init__(self, jobs: list[StandInJob]):
        self._jobs, self.walks = jobs, 0

    def jobs(self):
        self.walks += 1  # PBS builds every job object again for each walk
        yield from self._jobs

    def queues(self):
        yield StandInQueue()


def _stand_in_pbs(server: StandInServer) -> SimpleNamespace:
    def accept() -> None:
        raise SystemExit(0)  # as PBS's accept() ends the hook

    def reject(message: str = "") -> None:
        raise AssertionError(f"rejected: {message}")

    event = SimpleNamespace(type="periodic", requestor="PBS_Server", requestor_host="srv",
                            vnode_list={"n1": StandInVnode("n1", 2)}, resv_list={},
                            accept=accept, reject=reject)
    logged: list[str] = []
    return SimpleNamespace(PERIODIC="periodic", JOB_STATE_QUEUED=QUEUED,
                           JOB_STATE_RUNNING=RUNNING, JOB_STATE_SUSPEND=SUSPEND,
                           LOG_WARNING=2, LOG_ERROR=1,
                           event=lambda: event, server=lambda: server, logged=logged,
                           logmsg=lambda level, text: logged.append(text))


def test_a_periodic_run_walks_pbss_jobs_once_for_its_queued_and_running_jobs(
        tmp_path, monkeypatch):
    (tmp_path / "pbsplug_standin_probe.py").write_text(textwrap.dedent("""
        from pbsplug import PluginInfo, hookimpl

        plugin_info = PluginInfo(events=("periodic",))
        seen = {}


        @hookimpl
        def periodic(event):
            seen.update({j.id: dict(j.estimated) for j in event.job_list.values()})
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = importlib.import_module("pbsplug_standin_probe")
    monkeypatch.setitem(sys.modules, "pbsplug_standin_probe", probe)  # gone after the test
    monkeypatch.setitem(sys.modules, "_pbs_v1", SimpleNamespace())
    monkeypatch.setattr(pbs_bridge, "_LOADED", {})
    server = StandInServer([
        StandInJob("1.srv", RUNNING, exec_vnode="(n1:ncpus=2)", stime=int(NOW - 600),
                   Resource_List={"select": "1:ncpus=2", "ncpus": "2",
                                  "walltime": "01:00:00"}),
        StandInJob("2.srv", QUEUED, Resource_List={"select": "1:ncpus=1", "ncpus": "1",
                                                   "walltime": "00:10:00"})])
    pbs = _stand_in_pbs(server)
    config = {"plugin": "probe", "entry_point": "pbsplug_standin_probe",
              "attributes": {"events": ["periodic"]}, "config": {}}
    with clock.use(lambda: NOW), pytest.raises(SystemExit):
        pbs_bridge.run(pbs, config)
    assert pbs.logged == []
    # The queued job waits for the running one's walltime: it is what the plan ran around.
    assert probe.seen == {
        "2.srv": {"start_time": int(NOW - 600 + 3600), "exec_vnode": "(n1:ncpus=1)"}}
    assert server.walks == 1


def test_a_periodic_runs_vnodes_name_the_suspended_jobs_pbs_freed_them_of(tmp_path,
                                                                           monkeypatch):
    """PBS frees a suspended job's vnodes (its `jobs` unset, its cpus unassigned): the
    server periodic's vnodes name it in suspended_jobs, whether its state reads S or R with
    PBS's suspended substate (43 by qsig, 45 by the scheduler); job_list stays the queued
    jobs."""
    (tmp_path / "pbsplug_standin_suspended.py").write_text(textwrap.dedent("""
        from pbsplug import PluginInfo, hookimpl

        plugin_info = PluginInfo(events=("periodic",))
        seen = {}


        @hookimpl
        def periodic(event):
            seen.update({n: v.get("suspended_jobs") for n, v in event.vnode_list.items()})
            seen["job_list"] = sorted(event.job_list)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = importlib.import_module("pbsplug_standin_suspended")
    monkeypatch.setitem(sys.modules, "pbsplug_standin_suspended", probe)
    monkeypatch.setitem(sys.modules, "_pbs_v1", SimpleNamespace())
    monkeypatch.setattr(pbs_bridge, "_LOADED", {})
    chunk = {"Resource_List": {"select": "1:ncpus=1", "ncpus": "1", "walltime": "01:00:00"},
             "exec_vnode": "(n1:ncpus=1)", "stime": int(NOW - 600)}
    server = StandInServer([
        StandInJob("3.srv", SUSPEND, **chunk),
        StandInJob("4.srv", RUNNING, substate=43, **chunk),
        StandInJob("5.srv", RUNNING, substate=42, **chunk)])  # (running: in `jobs` in PBS)
    pbs = _stand_in_pbs(server)
    config = {"plugin": "probe", "entry_point": "pbsplug_standin_suspended",
              "attributes": {"events": ["periodic"]}, "config": {}}
    with clock.use(lambda: NOW), pytest.raises(SystemExit):
        pbs_bridge.run(pbs, config)
    assert probe.seen == {"n1": ["3.srv", "4.srv"], "job_list": []}


def test_exechost_periodics_rerun_and_delete_are_called_on_pbss_jobs():
    """A plugin's job.rerun() / job.delete() on jobs of exechost_periodic's job_list reach
    PBS's own jobs of ``e.job_list`` (its MoM then requeues or deletes them); the bridge
    dropped them."""
    from pbsplug.adapters import pbs_wire

    called = []

    class PbsJob:
        def __init__(self, job_id):
            self.job_id = job_id

        def rerun(self):
            called.append(("rerun", self.job_id))

        def delete(self):
            called.append(("delete", self.job_id))

    pevent = SimpleNamespace(job=None, job_list={j: PbsJob(j) for j in ("1.s", "2.s", "3.s")})
    pbs_wire.apply_changes(None, pevent, {"job_list": {
        "1.s": {"_action": "rerun"}, "2.s": {"_action": "delete"},
        "9.s": {"_action": "delete"}}}, None)
    assert called == [("rerun", "1.s"), ("delete", "2.s")]
