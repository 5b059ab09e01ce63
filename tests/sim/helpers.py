"""What the simulator tests share."""

from __future__ import annotations


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
