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
import re
import weakref
from array import array
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO, TypeGuard

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
#: The plots a run may draw (`plots.run_plots`): which ones depends on the run.
RUN_PLOTS = ("utilization.png", "power_states.png", "wait_cdf.png", "gantt.png")
#: Every name a run may write in its folder, and a comparison in its own. Each starts by
#: removing these names left by an earlier run (`_Folder.clear`), and only these: a rerun
#: with --no-plots, or too many jobs for a Gantt chart, leaves no stale plot beside new
#: files.
RUN_FILES = (JOBS_CSV, MACHINE_STATES_CSV, SERIES_CSV, METRICS_JSON, METRICS_TXT) + RUN_PLOTS
COMPARE_FILES = ("compare.json", "compare.txt", "compare_time.png", "compare_wait_cdf.png")

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
#: How many distinct reasons the rejected jobs are counted under (`reason_key`); jobs
#: rejected for a reason beyond them are counted under `OTHER_REASONS`.
MAX_REJECT_REASONS = 20
OTHER_REASONS = "(other reasons)"
#: A number in a reason (a count, a time, a job id's digits), not inside a name (`q1`).
_REASON_NUMBER = re.compile(r"(?<![A-Za-z_])\d+(?:\.\d+)?")


class OutputError(ValueError):
    """The output directory cannot be used, or a result is not what a sink accepts."""


def _plotting() -> ModuleType:
    """The plots module, or an `OutputError` saying why there are no plots (no matplotlib)."""
    try:
        import matplotlib  # noqa: F401  (a dependency; a broken install is a one-line error)

        from . import plots
    except ImportError as exc:
        raise OutputError(f"cannot draw the plots: {exc}; install matplotlib or pass "
                          "--no-plots") from None
    return plots


def fmt(x: float | int | None) -> str:
    """A number as the output files write it: whole numbers without a point, others to six
    decimals at most, so the same value is always the same text; None, NaN and inf are empty."""
    if type(x) is not float:  # floats (most calls) go straight on
        if x is None:
            return ""
        if isinstance(x, int):  # (a bool too: int.is_integer is Python 3.12's)
            return str(int(x))
    if x.is_integer() and -1e15 < x < 1e15:
        return str(int(x))
    text = f"{x:.6f}"
    if "n" in text:  # nan, inf
        return ""
    text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def intervals(hosts: Iterable[int]) -> str:
    """Host indices as Batsim's interval set: (0, 1, 2, 3, 7) -> ``0-3 7``."""
    if type(hosts) is tuple and hosts:
        first, last = hosts[0], hosts[-1]
        if len(hosts) == 1:
            return str(first)
        if last - first == len(hosts) - 1 and hosts == tuple(range(first, last + 1)):
            return f"{first}-{last}"
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


def reason_key(why: str | None) -> str:
    """A rejection reason as the key it is counted under: its first line, numbers written
    as N (`ncpus (R: N A: N T: N)`), at most 160 characters, so that the reasons of many
    jobs group into few keys."""
    first = (str(why or "").strip().splitlines() or [""])[0]
    return _REASON_NUMBER.sub("N", first)[:160] or "no reason given"


def percentile(ordered: list[float] | array[float], p: float) -> float:
    """Nearest-rank percentile of sorted values: the smallest value with at least p% of the
    values at or below it (p95 of 1..20 is 19)."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return float(ordered[rank - 1])


def median(ordered: list[float] | array[float]) -> float:
    n = len(ordered)
    if not n:
        return 0.0
    mid = n // 2
    return float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


class _Group:
    """Running sums for one set of jobs (the whole run, or one queue), and its waits (8
    bytes a job: the median and p95 need them all)."""

    __slots__ = ("jobs", "started", "rejected", "killed", "wait_sum", "wait_max", "bsld_sum",
                 "sd_sum", "sd_jobs", "area", "energy", "waits", "_ordered")

    def __init__(self) -> None:
        self.jobs = self.started = self.rejected = self.killed = self.sd_jobs = 0
        self.wait_sum = self.wait_max = self.bsld_sum = self.sd_sum = 0.0
        self.area = self.energy = 0.0
        self.waits = array("d")
        self._ordered: array[float] | None = None

    def add(self, values: tuple[float, float, float, float] | None, killed: bool,
            energy: float) -> None:
        """Count a job: `values` are its wait, run, bounded slowdown and cpu seconds, or None
        when it never started."""
        self.jobs += 1
        self.energy += energy
        if killed:
            self.killed += 1
        if values is None:
            self.rejected += 1
            return
        wait, run, bsld, area = values
        self.started += 1
        self.wait_sum += wait
        self.waits.append(wait)
        if wait > self.wait_max:
            self.wait_max = wait
        self.bsld_sum += bsld
        if run > 0:
            self.sd_sum += (wait + run) / run
            self.sd_jobs += 1
        self.area += area

    def sorted_waits(self) -> array[float]:
        """The waits in order, as a compact array (the sorting list is freed at once)."""
        if self._ordered is None or len(self._ordered) != len(self.waits):
            self._ordered = array("d", sorted(self.waits))
        return self._ordered

    def metrics(self) -> dict[str, Any]:
        """The group's metrics; those over started jobs are None (not available) when none
        started, and the plain slowdown when no job ran more than 0 s: 0 would be a wait
        and a slowdown no run can have."""
        n = self.started
        ordered = self.sorted_waits()
        return {
            "jobs": self.jobs, "jobs_started": n, "jobs_rejected": self.rejected,
            "jobs_killed_at_walltime": self.killed,
            "mean_wait_s": self.wait_sum / n if n else None,
            "max_wait_s": self.wait_max if n else None,
            "median_wait_s": median(ordered) if n else None,
            "p95_wait_s": percentile(ordered, 95) if n else None,
            "mean_bounded_slowdown": self.bsld_sum / n if n else None,
            "mean_slowdown": self.sd_sum / self.sd_jobs if self.sd_jobs else None,
            "slowdown_jobs": self.sd_jobs, "cpu_seconds": self.area,
            "job_energy_kwh": self.energy / 3.6e6,
        }


#: The step series the time plots average per bin: the machine states, busy cpus, queued.
BIN_COLUMNS = MACHINE_STATES + ("busy_cpus", "queued")


class TimeBins:
    """Time-weighted sums of step series in `PLOT_BINS` equal bins from the first time on.

    The end is not known in advance: when a value falls past the last bin, bins are merged
    in pairs and their width doubles, so memory stays fixed and the sums stay exact.
    """

    def __init__(self, columns: int, width: float = 1.0) -> None:
        self.t0: float | None = None
        self.width = width
        self.sums = [[0.0] * columns for _ in range(PLOT_BINS)]
        self.last = 0.0

    def add(self, a: float, b: float, values: tuple[float, ...]) -> None:
        """Add `values` holding over [a, b)."""
        if self.t0 is None:
            self.t0 = a
        if b <= a:
            return
        t0 = self.t0
        while b > t0 + self.width * PLOT_BINS:
            self._double()
        if b > self.last:
            self.last = b
        width, sums = self.width, self.sums
        i = int((a - t0) / width)
        if b <= t0 + (i + 1) * width:  # the usual case: within one bin
            row, dt = sums[i], b - a
            for k, v in enumerate(values):
                if v:
                    row[k] += v * dt
            return
        while a < b:
            edge = min(b, t0 + (i + 1) * width)
            dt = edge - a
            row = sums[min(i, PLOT_BINS - 1)]
            for k, v in enumerate(values):
                if v:
                    row[k] += v * dt
            a = edge
            i += 1

    def _double(self) -> None:
        sums = self.sums
        merged = [[x + y for x, y in zip(sums[2 * i], sums[2 * i + 1], strict=True)]
                  for i in range(PLOT_BINS // 2)]
        self.sums = merged + [[0.0] * len(sums[0]) for _ in range(PLOT_BINS - len(merged))]
        self.width *= 2

    def means(self) -> tuple[list[float], list[list[float]]]:
        """Bin centres and each column's mean per bin, up to the last time added."""
        if self.t0 is None:
            return [], []
        used = min(PLOT_BINS, max(1, math.ceil((self.last - self.t0) / self.width)))
        centres = [self.t0 + (i + 0.5) * self.width for i in range(used)]
        columns = [[self.sums[i][k] / self.width for i in range(used)]
                   for k in range(len(self.sums[0]))]
        return centres, columns


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
        check_names(self.out, RUN_FILES)
        self.folder = _Folder(self.out)
        self.cpus, self.hosts, self.workload = cpus, hosts, workload
        self.plots, self.gantt_limit = plots, gantt_limit
        self.all = _Group()
        self.queues: dict[str, _Group] = {}
        self.rejected_reasons: dict[str, int] = {}
        # What only the plots read (none without them): the Gantt chart's jobs, and the
        # time series averaged per bin.
        self.gantt: list[tuple[float, float, tuple[int, ...], str]] | None = \
            [] if plots else None
        self.first_submit: float | None = None
        self.last_end: float | None = None
        # The machine's integrals, from its first record on.
        self.first_state: float | None = None
        # The last machine state: time, the five counts (MACHINE_STATES order), queued,
        # running, busy cpus, watts.
        self.prev: tuple[float, int, int, int, int, int, int, int, int, float] | None = None
        self.bins = TimeBins(len(BIN_COLUMNS)) if plots else None
        self.energy = self.sleep_area = 0.0
        self.end: float | None = None
        self.power_cycles = 0
        self.closed = False
        # The files are made at the first result, not before: a replay refused while it is
        # set up (a site's plugin, its schedulers) leaves an earlier run's files as they were.
        self._files: list[TextIO] = []

    def _start(self) -> None:
        """Clear what an earlier run left, and open the CSVs with their headers."""
        self.folder.clear(RUN_FILES)
        # (a large buffer: these files get a line per event)
        self._files = [self.folder.create(name, buffering=1 << 18)
                       for name in (JOBS_CSV, MACHINE_STATES_CSV, SERIES_CSV)]
        _, self._states_f, self._series_f = self._files  # (states and series: lines made here)
        self._jobs, self._states, self._series = (csv.writer(f, lineterminator="\n")
                                                  for f in self._files)
        self._jobs.writerow(JOB_COLUMNS)
        self._states.writerow(STATE_COLUMNS)
        self._series.writerow(SERIES_COLUMNS)

    # --- the sink -------------------------------------------------------------------------

    def job(self, result: JobResult) -> None:
        if not self._files:
            self._start()
        job = result.job
        submit, start, end = job.submit, result.start, result.end
        if start is None:
            values = None
            key = reason_key(result.reason)
            reasons = self.rejected_reasons
            if key not in reasons and len(reasons) >= MAX_REJECT_REASONS:
                key = OTHER_REASONS
            reasons[key] = reasons.get(key, 0) + 1
        else:
            if start < submit or end < start:
                raise OutputError(f"job {job.job_id}: start {start} and end {end} are not in "
                                  f"order after submit {submit}")
            wait, run = start - submit, end - start
            values = (wait, run, max(1.0, (wait + run) / max(run, TAU)), job.ncpus * run)
        killed = result.final_state == WALLTIME
        self.all.add(values, killed, result.energy)
        if job.queue is not None:
            group = self.queues.get(job.queue)
            if group is None:
                group = self.queues[job.queue] = _Group()
            group.add(values, killed, result.energy)
        if self.first_submit is None or submit < self.first_submit:
            self.first_submit = submit
        if self.last_end is None or end > self.last_end:
            self.last_end = end
        if self.gantt is not None and start is not None:
            if len(self.gantt) < self.gantt_limit:
                self.gantt.append((start, end, result.hosts, job.job_id))
            else:
                self.gantt = None
        self._write_job(result, values)

    def machine(self, states: MachineStates) -> None:
        if not self._files:
            self._start()
        c = states.counts
        state = (states.time, c.get("sleeping", 0), c.get("switching_on", 0),
                 c.get("switching_off", 0), c.get("idle", 0), c.get("computing", 0),
                 states.queued, states.running, states.busy_cpus, states.watts)
        prev = self.prev
        if prev is not None:
            if state[0] < prev[0]:
                raise OutputError(f"machine states went back in time: {state[0]} after "
                                  f"{prev[0]}")
            if state[0] > prev[0]:
                self._advance(prev, state[0])
            if state[3] > prev[3]:
                self.power_cycles += state[3] - prev[3]
        else:
            self.first_state = state[0]
            if self.hosts is None:
                self.hosts = sum(state[1:6]) or None
        # Several records at one instant: the last one is the state from then on.
        self.prev = state

    def close(self, end: float) -> None:
        if self.closed:
            return
        self.closed = True
        prev = self.prev
        if prev is not None:
            if end < prev[0]:
                raise OutputError(f"close({end}) is before the last machine state ({prev[0]})")
            self._advance(prev, end)
            if end > prev[0]:  # the state holds until the end: say so in the files
                self._write_states((end,) + prev[1:])
        self.end = end
        try:
            if not self._files:
                self._start()
            for f in self._files:
                f.close()
            metrics = self.metrics()
            self.folder.write_text(METRICS_JSON, json.dumps(_rounded(metrics), indent=2,
                                                            sort_keys=True) + "\n")
            self.folder.write_text(METRICS_TXT, metrics_table(metrics))
            if self.plots:
                plots = _plotting()

                plots.run_plots(self.folder, self.cpus, self.all.sorted_waits(), self.gantt,
                                self.hosts, self.bins)
        finally:
            self.folder.close()

    # --- metrics --------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """Every metric of the run (docs/simulator.md, "Outputs", defines each)."""
        out = self.all.metrics()
        makespan = (self.last_end - self.first_submit) if self.first_submit is not None \
            and self.last_end is not None else 0.0
        out["makespan_s"] = makespan
        out["cpus"] = self.cpus
        out["utilization"] = out["cpu_seconds"] / (self.cpus * makespan) if makespan else 0.0
        end = self.end if self.end is not None else self.prev[0] if self.prev else None
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
        out["rejected_reasons"] = dict(self.rejected_reasons)
        return out

    # --- writing --------------------------------------------------------------------------

    def _advance(self, s: tuple[float, ...], until: float) -> None:
        """State `s` held from its time until `until`: integrate it and write it."""
        dt = until - s[0]
        self.energy += s[9] * dt
        self.sleep_area += s[1] * dt
        if self.bins is not None:
            self.bins.add(s[0], until, (s[1], s[2], s[3], s[4], s[5], s[8], s[6]))
        self._write_states(s)

    def _write_states(self, s: tuple[float, ...]) -> None:
        t = fmt(s[0])
        self._states_f.write(f"{t},{s[1]},{s[2]},{s[3]},{s[4]},{s[5]}\n")
        self._series_f.write(f"{t},{s[6]},{s[7]},{s[8]},{fmt(s[9])}\n")

    def _write_job(self, r: JobResult, values: tuple[float, ...] | None) -> None:
        job = r.job
        if values is None:
            times = ["", "", "", "", "", ""]
        else:
            wait, run = values[0], values[1]
            turnaround = wait + run
            times = [fmt(r.start), fmt(run), fmt(r.end), fmt(wait), fmt(turnaround),
                     fmt(turnaround / run) if run else ""]
        # Batsim's resources are hosts (evalys draws and counts them so): the processors
        # and the queue go in the metadata.
        hosts = len(r.hosts) or job.nodes or 1
        meta = f"ncpus={job.ncpus}" if job.queue is None else \
            f"ncpus={job.ncpus} queue={job.queue}"
        if values is None and r.reason:  # one quoted value: the metadata stays one field
            why = (r.reason.strip().splitlines() or [""])[0][:200].replace('"', "'")
            meta += f' reason="{why}"'
        self._jobs.writerow([
            job.job_id, self.workload, "", fmt(job.submit), hosts,
            fmt(job.walltime) if job.walltime is not None else "-1",
            1 if r.final_state == COMPLETED else 0, r.final_state, *times,
            intervals(r.hosts), fmt(r.energy), meta])


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


def check_names(out_dir: str | os.PathLike[str], names: Iterable[str]) -> None:
    """An `OutputError` now when a run could not write `names` into `out_dir` (which may
    not exist yet): `out_dir` is a file, or a name in it is a directory. Nothing is
    changed; `sim compare` checks its second run's folder before the first runs."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OutputError(f"output directory {out} is a file; give a directory")
    for name in names:
        _not_a_directory(out / name, name)


def _not_a_directory(path: Path, name: str) -> None:
    if path.is_dir() and not path.is_symlink():
        raise OutputError(f"{path} is a directory, where the run writes its file "
                          f"{name}: move it away or give another directory")


class _Folder:
    """An output folder, opened once: its files are removed and made relative to that
    descriptor, each afresh (its name unlinked, then created exclusively, never through a
    link). A link planted under an output name, before the run or during it, and the
    folder's path moved once the run began, are never followed: a planted link is
    removed, or the file cannot be made and the error names it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:  # (O_PATH: a folder one may write but not list serves as well)
            self.fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise OutputError(f"cannot open output directory {path}: "
                              f"{exc.strerror or exc}") from None
        # Closed by `close`, or when the folder is dropped unclosed (a replay that failed).
        self._finalizer = weakref.finalize(self, os.close, self.fd)

    def _dir(self) -> int:
        if not self._finalizer.alive:
            raise OutputError(f"output directory {self.path}: used after the run closed it")
        return self.fd

    def clear(self, names: Iterable[str]) -> None:
        """Remove what an earlier run left under `names`, each name itself."""
        for name in names:
            try:
                os.unlink(name, dir_fd=self._dir())
            except FileNotFoundError:
                pass
            except OSError as exc:
                _not_a_directory(self.path / name, name)
                raise OutputError(f"cannot remove {self.path / name} (an earlier run's "
                                  f"file): {exc.strerror or exc}") from None

    def create(self, name: str, *, binary: bool = False, buffering: int = -1) -> Any:
        """`name` made afresh and opened for writing (text: UTF-8, lines as written)."""
        self.clear((name,))
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o666, dir_fd=self._dir())
        except OSError as exc:  # (a link planted since the name was cleared, a full disk)
            raise OutputError(f"cannot write {self.path / name}: "
                              f"{exc.strerror or exc}") from None
        if binary:
            return os.fdopen(fd, "wb", buffering=buffering)
        return os.fdopen(fd, "w", buffering=buffering, encoding="utf-8", newline="")

    def write_text(self, name: str, text: str) -> None:
        try:
            with self.create(name) as f:
                f.write(text)
        except OSError as exc:  # (a full disk, a folder made unwritable during the run)
            raise OutputError(f"cannot write {self.path / name}: "
                              f"{exc.strerror or exc}") from None

    def close(self) -> None:
        self._finalizer()  # (once: later calls do nothing)


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
QUEUE_COLUMNS = (("jobs", "{:,}"), ("mean_wait_s", "{:,.1f}"), ("median_wait_s", "{:,.1f}"),
                 ("p95_wait_s", "{:,.1f}"), ("max_wait_s", "{:,.1f}"),
                 ("mean_bounded_slowdown", "{:,.3f}"), ("jobs_killed_at_walltime", "{:,}"))


#: How the tables write a metric that is not available (null in JSON).
NOT_AVAILABLE = "n/a"


def _cell(form: str, value: Any) -> str:
    return NOT_AVAILABLE if value is None else form.format(value)


def metrics_table(m: dict[str, Any]) -> str:
    """The metrics as an aligned text table, then one line per queue."""
    rows = [(label, _cell(form, m[key])) for key, label, form in TABLE_ROWS]
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value:>16}" for label, value in rows]
    if m.get("rejected_reasons"):
        lines += ["", "jobs rejected, by reason:"]
        lines += [f"{count:>10,}  {key}" for key, count in rejected_reasons(m)]
    if m.get("per_queue"):
        lines += ["", _queue_table(m["per_queue"])]
    return "\n".join(lines) + "\n"


def rejected_reasons(m: dict[str, Any]) -> list[tuple[str, int]]:
    """The metrics' rejection reasons, most frequent first (then by key)."""
    return sorted((m.get("rejected_reasons") or {}).items(), key=lambda kv: (-kv[1], kv[0]))


def _queue_table(per_queue: dict[str, dict[str, Any]]) -> str:
    head = ["queue", "jobs", "mean wait (s)", "median wait (s)", "p95 wait (s)", "max wait (s)",
            "mean BSLD", "killed"]
    body = [[q] + [_cell(form, g[key]) for key, form in QUEUE_COLUMNS]
            for q, g in per_queue.items()]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in [head] + body)


# --- reading a run back (compare, plots) ----------------------------------------------------

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
    ("jobs_rejected", "jobs_rejected_added", "jobs_rejected_added_percent", "added"),
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
    out = _Folder(_prepare(out_dir))
    diff: dict[str, Any] = {}
    for key, name, percent, direction in DIFFERENCES:
        va, vb = a.get(key), b.get(key)
        if not _number(va) or not _number(vb):
            diff[name] = None  # not available in one run (no job started): nothing to subtract
            continue
        diff[name] = va - vb if direction == "saved" else vb - va
        if va:
            diff[percent] = 100 * diff[name] / abs(va)
    result = {"labels": [label_a, label_b], "runs": {label_a: a, label_b: b},
              "differences": diff}
    try:
        out.clear(COMPARE_FILES)
        out.write_text("compare.json", json.dumps(_rounded(result), indent=2, sort_keys=True)
                       + "\n")
        out.write_text("compare.txt", compare_table(a, b, diff, label_a, label_b))
        if plots:
            plotting = _plotting()

            plotting.compare_plots(Path(dir_a), Path(dir_b), out, label_a, label_b)
    finally:
        out.close()
    return _rounded(result)


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def compare_table(a: dict[str, Any], b: dict[str, Any], diff: dict[str, Any],
                  label_a: str, label_b: str) -> str:
    """Both runs' metrics and B - A; a metric one run does not have (no job started) is
    n/a, and so is its difference, which then says which run lacks it."""
    rows = [("metric", label_a, label_b, f"{label_b} - {label_a}")]
    for key, label, form in TABLE_ROWS:
        va, vb = a.get(key), b.get(key)
        if key not in a and key not in b:
            continue
        rows.append((label, _cell(form, va if _number(va) else None),
                     _cell(form, vb if _number(vb) else None),
                     form.format(vb - va) if _number(va) and _number(vb) else NOT_AVAILABLE))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    lines.append("")
    keys = {name: key for key, name, _, _ in DIFFERENCES}
    for name in sorted(diff):
        if diff[name] is not None:
            lines.append(f"{name}: {diff[name]:,.4f}")
            continue
        key = keys.get(name, name)
        why = [f"{label} has no {key}" + (": no job started" if m.get("jobs_started") == 0
                                          else "")
               for label, m in ((label_a, a), (label_b, b)) if not _number(m.get(key))]
        lines.append(f"{name}: {NOT_AVAILABLE} ({'; '.join(why)})")
    return "\n".join(lines) + "\n"
