"""What the simulator tests share."""

from __future__ import annotations

from pbsplug.sim.engine import Simulator, policy_settings


class Sink:
    """Keeps what the simulator sends (a `ResultWriter`'s place): each job's result, the
    machine's states, the end."""

    def __init__(self):
        self.jobs = []
        self.states = []
        self.closed = None

    def job(self, result):
        self.jobs.append(result)

    def machine(self, states):
        self.states.append(states)

    def close(self, end):
        self.closed = end

    def starts(self):
        return {r.job.job_id: r.start for r in self.jobs}

    def by_id(self):
        return {r.job.job_id: r for r in self.jobs}


class Recorder(Simulator):
    """Notes the execution queue each job entered, when, and its state then:
    ``entered[job_id] = (queue, time, job_state)``."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.entered = {}

    def _enqueue(self, run):
        self.entered[run.tj.job_id] = (run.attrs["queue"], self.now - self.epoch,
                                       run.attrs["job_state"])
        super()._enqueue(run)


def replay(machine, jobs, plugins=None, tmp_path=None, server_attrs=None):
    """Replays `jobs` on `machine` under PBS's policy with a `Recorder` (and the server's
    `server_attrs`, as ``[sim.server]`` gives them): (its sink, it)."""
    sink = Sink()
    sim = Recorder(machine, sink, plugins=plugins, policy=policy_settings("pbs"),
                   server_attrs=server_attrs,
                   workdir=None if tmp_path is None else tmp_path / "work")
    sim.run(jobs)
    return sink, sim


def guard_periodic_runs(monkeypatch, most=1000):
    """Stop a replay whose periodic hook would run for ever: past `most` periodic runs it
    raises (a hang guard on the number of runs, not a time)."""
    periodic = Simulator._periodic
    runs = []

    def guarded(self, name):
        runs.append(self.now)
        if len(runs) > most:
            raise RuntimeError(f"the replay goes on: over {most} periodic runs")
        periodic(self, name)

    monkeypatch.setattr(Simulator, "_periodic", guarded)
