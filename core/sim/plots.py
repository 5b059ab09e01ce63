"""The PNG plots of a run and of a comparison (matplotlib, imported only here).

Time plots average the step series of the CSV files into `PLOT_BINS` equal time bins
(time-weighted), so a plot costs the same for 1,000 jobs or 500,000 and memory stays small.
Figures are built with matplotlib's object API (no pyplot, no global backend switch) in its
default style, and saved without software or date metadata, so the bytes depend only on
the data and the matplotlib version.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .output import BIN_COLUMNS, JOBS_CSV, PLOT_BINS, SERIES_CSV, TimeBins
from .records import MACHINE_STATES

DPI = 100
#: Most points drawn on a CDF (the waits are sampled evenly beyond that).
CDF_POINTS = 2000
#: A Gantt chart of at most this many jobs writes each job's id on its bars.
GANTT_NAMED = 60
STATE_COLORS = {"computing": "#1f77b4", "idle": "#2ca02c", "switching_on": "#ff7f0e",
                "switching_off": "#d62728", "sleeping": "#7f7f7f"}


F = TypeVar("F", bound=Callable[..., Any])


def _default_style(func: F) -> F:
    """Run `func` in matplotlib's default style, whatever the user's matplotlibrc says."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import matplotlib.style

        with matplotlib.style.context("default"):
            return func(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


def _figure(rows: int = 1, height: float = 3.5) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, height * rows), dpi=DPI, layout="constrained")
    return fig, fig.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]


def _save(fig: Any, folder: Any, name: str) -> Path:
    """The figure written as `name` in the output folder (`output._Folder`: made afresh,
    never through a link); its path."""
    with folder.create(name, binary=True) as f:
        fig.savefig(f, format="png", dpi=DPI, metadata={"Software": None})
    return folder.path / name


def _span(path: Path) -> tuple[float, float] | None:
    if not path.exists():
        return None
    first = last = None
    for row in _rows(path, ("time",)):
        first = row[0] if first is None else first
        last = row[0]
    if first is None or last is None:
        return None
    return first, max(last, first + 1.0)


def _waits(path: Path) -> Iterator[float]:
    """The waiting times of a `_jobs.csv` (rejected jobs have none)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        i = next(reader, []).index("waiting_time")
        for row in reader:
            if row[i]:
                yield float(row[i])


def _rows(path: Path, columns: Sequence[str]) -> Iterator[list[float]]:
    """The named columns of a CSV file as floats, streamed."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        index = [header.index(c) for c in columns]
        for row in reader:
            yield [float(row[i]) for i in index]


def _binned(path: Path, columns: Sequence[str], t0: float, t1: float
            ) -> tuple[list[float], dict[str, list[float]]]:
    """Time-weighted means of step series `columns` over PLOT_BINS bins of [t0, t1]."""
    width = (t1 - t0) / PLOT_BINS
    sums = {c: [0.0] * PLOT_BINS for c in columns}
    prev_t: float | None = None
    prev: dict[str, float] = {}
    for row in _rows(path, ("time", *columns)):
        t = row[0]
        if prev_t is not None and t > prev_t:
            _spread(sums, prev, prev_t, min(t, t1), t0, width)
        prev_t, prev = t, dict(zip(columns, row[1:], strict=True))
    if prev_t is not None and prev_t < t1:
        _spread(sums, prev, prev_t, t1, t0, width)
    centres = [t0 + (i + 0.5) * width for i in range(PLOT_BINS)]
    return centres, {c: [v / width for v in s] for c, s in sums.items()}


def _spread(sums: dict[str, list[float]], values: dict[str, float], a: float, b: float,
            t0: float, width: float) -> None:
    i = max(0, int((a - t0) / width))
    while i < PLOT_BINS and a < b:
        edge = min(b, t0 + (i + 1) * width)
        for c, v in values.items():
            sums[c][i] += v * (edge - a)
        a = edge
        i += 1


def _hours(times: list[float], t0: float) -> list[float]:
    return [(t - t0) / 3600 for t in times]


@_default_style
def run_plots(folder: Any, cpus: int, waits: Sequence[float],
              gantt: list[tuple[float, float, tuple[int, ...], str]] | None,
              hosts: int | None, bins: TimeBins) -> list[Path]:
    """Write the run's plots into `folder` (`output._Folder`) from the writer's time bins
    and sorted waits."""
    written = []
    times, columns = bins.means()
    if times and bins.t0 is not None:
        series = dict(zip(BIN_COLUMNS, columns, strict=True))
        hours = _hours(times, bins.t0)
        fig, (ax_u, ax_q) = _figure(2, 2.8)
        ax_u.plot(hours, [v / cpus for v in series["busy_cpus"]], lw=0.8)
        ax_u.set_ylabel("utilization")
        ax_u.set_ylim(0, 1.05)
        ax_q.plot(hours, series["queued"], lw=0.8, color="#d62728")
        ax_q.set_ylabel("jobs queued")
        ax_q.set_xlabel("hours from the first machine state")
        written.append(_save(fig, folder, "utilization.png"))

        fig, (ax,) = _figure(1, 3.5)
        ax.stackplot(hours, *[series[k] for k in MACHINE_STATES], labels=list(MACHINE_STATES),
                     colors=[STATE_COLORS[k] for k in MACHINE_STATES], lw=0)
        ax.set_ylabel("hosts")
        ax.set_xlabel("hours from the first machine state")
        ax.legend(loc="upper right", fontsize="small", ncols=5)
        written.append(_save(fig, folder, "power_states.png"))

    fig, (ax,) = _figure(1, 3.5)
    _cdf(ax, waits, "wait")
    ax.set_xlabel("wait (s, symmetric log scale)")
    ax.set_ylabel("fraction of jobs")
    written.append(_save(fig, folder, "wait_cdf.png"))

    if gantt and any(hosts_ for _, _, hosts_, _ in gantt):
        written.append(_gantt(folder, gantt, hosts))
    return written


def _cdf(ax: Any, ordered: Sequence[float], label: str) -> None:
    n = len(ordered)
    if n:
        step = max(1, n // CDF_POINTS)
        idx = list(range(0, n, step))
        if idx[-1] != n - 1:
            idx.append(n - 1)
        ax.step([ordered[i] for i in idx], [(i + 1) / n for i in idx], where="post",
                label=label, lw=1)
    ax.set_xscale("symlog", linthresh=10)
    ax.set_ylim(0, 1.02)


def _gantt(folder: Any, jobs: list[tuple[float, float, tuple[int, ...], str]],
           hosts: int | None) -> Path:
    from matplotlib import colormaps
    from matplotlib.ticker import MaxNLocator

    cmap = colormaps["tab20"]
    t0 = min(start for start, _, _, _ in jobs)
    fig, (ax,) = _figure(1, 5)
    named = len(jobs) <= GANTT_NAMED
    for k, (start, end, job_hosts, job_id) in enumerate(jobs):
        color = cmap(k % 20)
        x, width = (start - t0) / 3600, max(end - start, 1e-9) / 3600
        for first, count in _runs(job_hosts):
            # Host h is the row centred on h (its tick), as out_jobs.csv numbers it.
            ax.broken_barh([(x, width)], (first - 0.4, count - 0.2), facecolors=color,
                           edgecolor="black", lw=0.2)
            if named:
                ax.text(x + width / 2, first + (count - 1) / 2, job_id, ha="center",
                        va="center", fontsize="x-small", clip_on=True)
    ax.set_ylim(-0.5, (hosts or 1 + max(max(h) for _, _, h, _ in jobs if h)) - 0.5)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("hours from the first start")
    ax.set_ylabel("host (out_jobs.csv's allocated_resources)")
    return _save(fig, folder, "gantt.png")


def _runs(hosts: Sequence[int]) -> list[tuple[int, int]]:
    """Contiguous host ranges as (first, count)."""
    out: list[tuple[int, int]] = []
    for h in sorted(set(hosts)):
        if out and out[-1][0] + out[-1][1] == h:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((h, 1))
    return out


@_default_style
def compare_plots(dir_a: Path, dir_b: Path, folder: Any, label_a: str, label_b: str
                  ) -> list[Path]:
    """Overlaid plots of two runs: power and utilization over time, and the wait CDFs."""
    spans = [s for s in (_span(dir_a / SERIES_CSV), _span(dir_b / SERIES_CSV)) if s]
    written = []
    if spans:
        t0, t1 = min(s[0] for s in spans), max(s[1] for s in spans)
        fig, (ax_p, ax_b, ax_q) = _figure(3, 2.5)
        for run, label in ((dir_a, label_a), (dir_b, label_b)):
            if not (run / SERIES_CSV).exists():
                continue
            times, s = _binned(run / SERIES_CSV, ("watts", "busy_cpus", "queued"), t0, t1)
            hours = _hours(times, t0)
            ax_p.plot(hours, [w / 1000 for w in s["watts"]], lw=0.8, label=label)
            ax_b.plot(hours, s["busy_cpus"], lw=0.8, label=label)
            ax_q.plot(hours, s["queued"], lw=0.8, label=label)
        ax_p.set_ylabel("power (kW)")
        ax_b.set_ylabel("busy cpus")
        ax_q.set_ylabel("jobs queued")
        ax_q.set_xlabel("hours")
        ax_p.legend(loc="upper right", fontsize="small")
        written.append(_save(fig, folder, "compare_time.png"))
    fig, (ax,) = _figure(1, 3.5)
    drawn = False
    for run, label in ((dir_a, label_a), (dir_b, label_b)):
        waits = sorted(_waits(run / JOBS_CSV)) if (run / JOBS_CSV).exists() else []
        _cdf(ax, waits, label)
        drawn = drawn or bool(waits)
    ax.set_xlabel("wait (s, symmetric log scale)")
    ax.set_ylabel("fraction of jobs")
    if drawn:
        ax.legend(loc="lower right", fontsize="small")
    written.append(_save(fig, folder, "compare_wait_cdf.png"))
    return written
