"""What a simulation wrote: metrics (JSON and a table), Batsim CSV files and PNG plots.

`ResultWriter(out_dir, cpus=...)` is a `ResultSink`: the simulator hands it every finished job
and every change of the machine's state, in time order, then `close(end)`. It writes, in
`out_dir`:

- `out_jobs.csv`: one line per job, Batsim's `_jobs.csv` columns;
- `out_machine_states.csv`: hosts per state over time, Batsim's `_machine_states.csv`;
- `out_series.csv`: queued and running jobs, busy cpus and watts over time (pbsplug's own);
- `metrics.json` and `metrics.txt`: the metrics, defined in docs/simulator.md ("Outputs");
- `utilization.png`, `power_states.png`, `wait_cdf.png` and, for small runs, `gantt.png`.

Memory: the CSV lines are written as they come; running sums give every metric except the
wait percentiles, which need every wait: they are kept in a compact array (8 bytes a job).
The Gantt chart keeps its jobs only while there are at most `gantt_limit` of them. The plots
re-read the CSV files after `close`.

Deterministic: the same calls give byte-identical files (fixed number formatting, sorted
JSON keys, PNGs without software or date metadata).
"""

from __future__ import annotations

import csv
import json
import math
import os
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .records import (
    COMPLETED,
    MACHINE_STATES,
    WALLTIME,
    JobResult,
    MachineStates,
)

#: The bounded slowdown's threshold, seconds (Feitelson et al.): runs shorter count as tau.
TAU = 10.0
PREFIX = "out"
JOBS_CSV = f"{PREFIX}_jobs.csv"
MACHINE_STATES_CSV = f"{PREFIX}_machine_states.csv"
SERIES_CSV = f"{PREFIX}_series.csv"
METRICS_JSON = "metrics.json"
METRICS_TXT = "metrics.txt"

#: Batsim's `_jobs.csv` columns, in its order (docs/output-jobs.rst of oar-team/batsim).
JOB_COLUMNS = ("job_id", "workload_name", "profile", "submission_time",
               "requested_number_of_resources", "requested_time", "success", "final_state",
               "starting_time", "execution_time", "finish_time", "waiting_time",
               "turnaround_time", "stretch", "allocated_resources", "consumed_energy",
               "metadata")
#: Batsim's `_machine_states.csv` columns (docs/output-energy.rst).
STATE_COLUMNS = ("time",) + tuple(f"nb_{s}" for s in MACHINE_STATES)
SERIES_COLUMNS = ("time", "queued", "running", "busy_cpus", "watts")

#: How many time bins the time plots average into.
PLOT_BINS = 1000


class OutputError(ValueError):
    """The output directory cannot be used, or a result is not what a sink accepts."""


def fmt(x: float | int | None) -> str:
    """A number as the output files write it: whole numbers without a point, others to six
    decimals at most, so the same value is always the same text; None is empty."""
    if x is None:
        return ""
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return ""
    r = round(x, 6)
    if r == int(r) and abs(r) < 1e15:
        return str(int(r))
    return f"{r:.6f}".rstrip("0").rstrip(".")


def intervals(hosts: Iterable[int]) -> str:
    """Host indices as Batsim's interval set: (0, 1, 2, 3, 7) -> ``0-3 7``."""
    out: list[str] = []
    ordered = sorted(set(hosts))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return " ".join(out)


def percentile(ordered: list[float] | array, p: float) -> float:
    """Nearest-rank percentile of sorted values: the smallest value with at least p% of the
    values at or below it (p95 of 1..20 is 19)."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return float(ordered[rank - 1])


def median(ordered: list[float] | array) -> float:
    n = len(ordered)
    if not n:
        return 0.0
    mid = n // 2
    return float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


class _Group:
    """Running sums for one set of jobs (the whole run, or one queue)."""

    __slots__ = ("jobs", "started", "rejected", "killed", "wait_sum", "wait_max", "bsld_sum",
                 "sd_sum", "sd_jobs", "area", "energy")

    def __init__(self) -> None:
        self.jobs = self.started = self.rejected = self.killed = self.sd_jobs = 0
        self.wait_sum = self.wait_max = self.bsld_sum = self.sd_sum = 0.0
        self.area = self.energy = 0.0

    def add(self, result: JobResult) -> float | None:
        """Count a job; its wait when it started."""
        self.jobs += 1
        self.energy += result.energy
        if result.final_state == WALLTIME:
            self.killed += 1
        if result.start is None:
            self.rejected += 1
            return None
        wait = result.start - result.job.submit
        run = result.end - result.start
        self.started += 1
        self.wait_sum += wait
        self.wait_max = max(self.wait_max, wait)
        self.bsld_sum += max(1.0, (wait + run) / max(run, TAU))
        if run > 0:
            self.sd_sum += (wait + run) / run
            self.sd_jobs += 1
        self.area += result.job.ncpus * run
        return wait

    def metrics(self) -> dict[str, Any]:
        n = self.started
        return {
            "jobs": self.jobs, "jobs_started": n, "jobs_rejected": self.rejected,
            "jobs_killed_at_walltime": self.killed,
            "mean_wait_s": self.wait_sum / n if n else 0.0, "max_wait_s": self.wait_max,
            "mean_bounded_slowdown": self.bsld_sum / n if n else 0.0,
            "mean_slowdown": self.sd_sum / self.sd_jobs if self.sd_jobs else 0.0,
            "slowdown_jobs": self.sd_jobs, "cpu_seconds": self.area,
            "job_energy_kwh": self.energy / 3.6e6,
        }


class ResultWriter:
    """A `ResultSink` writing the files listed in the module's docstring into `out_dir`.

    `cpus` is the machine's processor count (utilization's M) and `hosts` its host count
    (power cycles per node; by default the hosts counted in the first machine state).
    """

    def __init__(self, out_dir: str | os.PathLike[str], *, cpus: int, hosts: int | None = None,
                 workload: str = "w0", plots: bool = True, gantt_limit: int = 2000) -> None:
        if not isinstance(cpus, int) or isinstance(cpus, bool) or cpus < 1:
            raise OutputError(f"cpus {cpus!r} must be a whole number of at least 1")
        if hosts is not None and (not isinstance(hosts, int) or hosts < 1):
            raise OutputError(f"hosts {hosts!r} must be a whole number of at least 1")
        self.out = _prepare(out_dir)
        self.cpus, self.hosts, self.workload = cpus, hosts, workload
        self.plots, self.gantt_limit = plots, gantt_limit
        self.all = _Group()
        self.queues: dict[str, _Group] = {}
        self.waits = array("d")
        self.gantt: list[tuple[float, float, tuple[int, ...], str]] | None = []
        self.first_submit: float | None = None
        self.last_end: float | None = None
        # The machine's integrals, from its first record on.
        self.first_state: float | None = None
        self.prev: MachineStates | None = None
        self.energy = self.sleep_area = 0.0
        self.end: float | None = None
        self.power_cycles = 0
        self.closed = False
        self._jobs_f = open(self.out / JOBS_CSV, "w", newline="", encoding="utf-8")
        self._states_f = open(self.out / MACHINE_STATES_CSV, "w", newline="", encoding="utf-8")
        self._series_f = open(self.out / SERIES_CSV, "w", newline="", encoding="utf-8")
        self._jobs = csv.writer(self._jobs_f, lineterminator="\n")
        self._states = csv.writer(self._states_f, lineterminator="\n")
        self._series = csv.writer(self._series_f, lineterminator="\n")
        self._jobs.writerow(JOB_COLUMNS)
        self._states.writerow(STATE_COLUMNS)
        self._series.writerow(SERIES_COLUMNS)

    # --- the sink -------------------------------------------------------------------------

    def job(self, result: JobResult) -> None:
        job = result.job
        if result.start is not None and (result.start < job.submit or result.end < result.start):
            raise OutputError(f"job {job.job_id}: start {result.start} and end {result.end} "
                              f"are not in order after submit {job.submit}")
        wait = self.all.add(result)
        if job.queue is not None:
            self.queues.setdefault(job.queue, _Group()).add(result)
        if wait is not None:
            self.waits.append(wait)
        self.first_submit = job.submit if self.first_submit is None else min(
            self.first_submit, job.submit)
        self.last_end = result.end if self.last_end is None else max(self.last_end, result.end)
        if self.gantt is not None and result.start is not None:
            if len(self.gantt) < self.gantt_limit:
                self.gantt.append((result.start, result.end, result.hosts, job.job_id))
            else:
                self.gantt = None
        self._write_job(result)

    def machine(self, states: MachineStates) -> None:
        prev = self.prev
        if prev is not None:
            if states.time < prev.time:
                raise OutputError(f"machine states went back in time: {states.time} after "
                                  f"{prev.time}")
            if states.time > prev.time:
                self._integrate(prev, states.time)
                self._write_states(prev)
            going_off = states.counts.get("switching_off", 0) - prev.counts.get(
                "switching_off", 0)
            self.power_cycles += max(0, going_off)
        else:
            self.first_state = states.time
            if self.hosts is None:
                self.hosts = sum(states.counts.get(s, 0) for s in MACHINE_STATES) or None
        # Several records at one instant: the last one is the state from then on.
        self.prev = MachineStates(states.time, dict(states.counts), states.watts,
                                  states.queued, states.running, states.busy_cpus)

    def close(self, end: float) -> None:
        if self.closed:
            return
        self.closed = True
        if self.prev is not None:
            if end < self.prev.time:
                raise OutputError(f"close({end}) is before the last machine state "
                                  f"({self.prev.time})")
            self._integrate(self.prev, end)
            self._write_states(self.prev)
            if end > self.prev.time:  # the state holds until the end: say so in the files
                self._write_states(MachineStates(end, self.prev.counts, self.prev.watts,
                                                 self.prev.queued, self.prev.running,
                                                 self.prev.busy_cpus))
        self.end = end
        for f in (self._jobs_f, self._states_f, self._series_f):
            f.close()
        metrics = self.metrics()
        _write_text(self.out / METRICS_JSON, json.dumps(_rounded(metrics), indent=2,
                                                       sort_keys=True) + "\n")
        _write_text(self.out / METRICS_TXT, metrics_table(metrics))
        if self.plots:
            from . import plots

            plots.run_plots(self.out, self.cpus, self.waits, self.gantt, self.hosts)

    # --- metrics --------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """Every metric of the run (docs/simulator.md, "Outputs", defines each)."""
        out = self.all.metrics()
        ordered = array("d", sorted(self.waits))
        out["median_wait_s"] = median(ordered)
        out["p95_wait_s"] = percentile(ordered, 95)
        makespan = (self.last_end - self.first_submit) if self.first_submit is not None \
            and self.last_end is not None else 0.0
        out["makespan_s"] = makespan
        out["cpus"] = self.cpus
        out["utilization"] = out["cpu_seconds"] / (self.cpus * makespan) if makespan else 0.0
        end = self.end if self.end is not None else self.prev.time if self.prev else None
        span = float(end - self.first_state) if self.first_state is not None and end else 0.0
        hosts = self.hosts or 0
        out["hosts"] = hosts
        out["machine_seconds"] = span
        out["energy_kwh"] = self.energy / 3.6e6
        out["mean_power_w"] = self.energy / span if span else 0.0
        out["node_hours_off"] = self.sleep_area / 3600
        out["power_cycles"] = self.power_cycles
        out["power_cycles_per_node_per_day"] = (
            self.power_cycles / hosts / (span / 86400) if hosts and span else 0.0)
        out["per_queue"] = {q: g.metrics() for q, g in sorted(self.queues.items())}
        return out

    # --- writing --------------------------------------------------------------------------

    def _integrate(self, states: MachineStates, until: float) -> None:
        dt = until - states.time
        self.energy += states.watts * dt
        self.sleep_area += states.counts.get("sleeping", 0) * dt

    def _write_states(self, s: MachineStates) -> None:
        self._states.writerow([fmt(s.time)] + [s.counts.get(k, 0) for k in MACHINE_STATES])
        self._series.writerow([fmt(s.time), s.queued, s.running, s.busy_cpus, fmt(s.watts)])

    def _write_job(self, r: JobResult) -> None:
        job = r.job
        started = r.start is not None
        run = r.end - r.start if started else None
        turnaround = r.end - job.submit if started else None
        self._jobs.writerow([
            job.job_id, self.workload, "", fmt(job.submit), job.ncpus,
            fmt(job.walltime) if job.walltime is not None else "-1",
            1 if r.final_state == COMPLETED else 0, r.final_state,
            fmt(r.start), fmt(run), fmt(r.end) if started else "",
            fmt(r.start - job.submit) if started else "", fmt(turnaround),
            fmt(turnaround / run) if started and run else "",
            intervals(r.hosts), fmt(r.energy), ""])


def _prepare(out_dir: str | os.PathLike[str]) -> Path:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OutputError(f"output directory {out} is a file; give a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create output directory {out}: "
                          f"{exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutputError(f"output directory {out} is not writable")
    return out


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def _rounded(value: Any) -> Any:
    """Floats to 6 decimals for JSON, so the same run writes the same text."""
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


#: The table's rows: metric key, label, format.
TABLE_ROWS = (
    ("jobs", "jobs", "{:,}"), ("jobs_started", "jobs started", "{:,}"),
    ("jobs_rejected", "jobs rejected", "{:,}"),
    ("jobs_killed_at_walltime", "jobs killed at walltime", "{:,}"),
    ("mean_wait_s", "mean wait (s)", "{:,.1f}"), ("median_wait_s", "median wait (s)", "{:,.1f}"),
    ("p95_wait_s", "p95 wait (s)", "{:,.1f}"), ("max_wait_s", "max wait (s)", "{:,.1f}"),
    ("mean_bounded_slowdown", "mean bounded slowdown (tau 10 s)", "{:,.3f}"),
    ("mean_slowdown", "mean slowdown", "{:,.3f}"),
    ("utilization", "utilization", "{:.4f}"), ("makespan_s", "makespan (s)", "{:,.0f}"),
    ("energy_kwh", "energy (kWh)", "{:,.3f}"), ("mean_power_w", "mean power (W)", "{:,.1f}"),
    ("node_hours_off", "node-hours off", "{:,.1f}"),
    ("power_cycles_per_node_per_day", "power cycles per node per day", "{:.4f}"),
)
QUEUE_COLUMNS = (("jobs", "{:,}"), ("mean_wait_s", "{:,.1f}"), ("max_wait_s", "{:,.1f}"),
                 ("mean_bounded_slowdown", "{:,.3f}"), ("jobs_killed_at_walltime", "{:,}"))


def metrics_table(m: dict[str, Any]) -> str:
    """The metrics as an aligned text table, then one line per queue."""
    rows = [(label, form.format(m[key])) for key, label, form in TABLE_ROWS]
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value:>16}" for label, value in rows]
    if m.get("per_queue"):
        lines += ["", _queue_table(m["per_queue"])]
    return "\n".join(lines) + "\n"


def _queue_table(per_queue: dict[str, dict[str, Any]]) -> str:
    head = ["queue", "jobs", "mean wait (s)", "max wait (s)", "mean BSLD", "killed"]
    body = [[q] + [form.format(g[key]) for key, form in QUEUE_COLUMNS]
            for q, g in per_queue.items()]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in [head] + body)


# --- reading a run back (compare, plots) ----------------------------------------------------

def read_rows(path: Path) -> Iterator[dict[str, str]]:
    """The rows of one of the CSV files, streamed."""
    with open(path, newline="", encoding="utf-8") as f:
        yield from csv.DictReader(f)


def read_metrics(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(run_dir) / METRICS_JSON
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise OutputError(f"{path}: cannot read the run's metrics: "
                          f"{exc.strerror or exc}") from None
    except ValueError as exc:
        raise OutputError(f"{path}: not a metrics file: {exc}") from None


#: The differences `compare_results` reports: metric, difference, its percent, direction.
#: "saved" is A minus B (positive when B used less); "added" is B minus A.
DIFFERENCES = (
    ("energy_kwh", "energy_saved_kwh", "energy_saved_percent", "saved"),
    ("mean_power_w", "mean_power_saved_w", "mean_power_saved_percent", "saved"),
    ("mean_wait_s", "mean_wait_added_s", "mean_wait_added_percent", "added"),
    ("median_wait_s", "median_wait_added_s", "median_wait_added_percent", "added"),
    ("p95_wait_s", "p95_wait_added_s", "p95_wait_added_percent", "added"),
    ("mean_bounded_slowdown", "mean_bounded_slowdown_added",
     "mean_bounded_slowdown_added_percent", "added"),
    ("utilization", "utilization_added", "utilization_added_percent", "added"),
    ("makespan_s", "makespan_added_s", "makespan_added_percent", "added"),
    ("node_hours_off", "node_hours_off_added", "node_hours_off_added_percent", "added"),
    ("jobs_killed_at_walltime", "jobs_killed_added", "jobs_killed_added_percent", "added"),
)


def compare_results(dir_a: str | os.PathLike[str], dir_b: str | os.PathLike[str],
                    out_dir: str | os.PathLike[str], label_a: str = "A", label_b: str = "B",
                    plots: bool = True) -> dict[str, Any]:
    """Two runs' metrics side by side with B's differences from A, written to `out_dir` as
    `compare.json` and `compare.txt`, and overlaid plots (`compare_*.png`). Returns the JSON.
    """
    if label_a == label_b:
        raise OutputError(f"the two runs need different labels (both are {label_a!r})")
    a, b = read_metrics(dir_a), read_metrics(dir_b)
    out = _prepare(out_dir)
    diff: dict[str, Any] = {}
    for key, name, percent, direction in DIFFERENCES:
        va, vb = a.get(key), b.get(key)
        if not isinstance(va, (int, float)) or not isinstance(vb, (int, float)):
            continue
        diff[name] = va - vb if direction == "saved" else vb - va
        if va:
            diff[percent] = 100 * diff[name] / abs(va)
    result = {"labels": [label_a, label_b], "runs": {label_a: a, label_b: b},
              "differences": diff}
    _write_text(out / "compare.json", json.dumps(_rounded(result), indent=2, sort_keys=True)
                + "\n")
    _write_text(out / "compare.txt", compare_table(a, b, diff, label_a, label_b))
    if plots:
        from . import plots as plotting

        plotting.compare_plots(Path(dir_a), Path(dir_b), out, label_a, label_b)
    return _rounded(result)


def compare_table(a: dict[str, Any], b: dict[str, Any], diff: dict[str, Any],
                  label_a: str, label_b: str) -> str:
    rows = [("metric", label_a, label_b, f"{label_b} - {label_a}")]
    for key, label, form in TABLE_ROWS:
        va, vb = a.get(key), b.get(key)
        if va is None or vb is None:
            continue
        rows.append((label, form.format(va), form.format(vb), form.format(vb - va)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    lines.append("")
    for name in sorted(diff):
        lines.append(f"{name}: {diff[name]:,.4f}")
    return "\n".join(lines) + "\n"
