"""ResultWriter and compare_results on small crafted runs whose metrics are worked out by hand."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pbsplug.sim.output import (
    OutputError,
    ResultWriter,
    TimeBins,
    compare_results,
    fmt,
    intervals,
    percentile,
)
from pbsplug.sim.records import (
    COMPLETED,
    REJECTED,
    WALLTIME,
    JobResult,
    MachineStates,
    TraceJob,
)

BATSIM_JOBS_HEADER = (
    "job_id,workload_name,profile,submission_time,requested_number_of_resources,"
    "requested_time,success,final_state,starting_time,execution_time,finish_time,"
    "waiting_time,turnaround_time,stretch,allocated_resources,consumed_energy,metadata")
BATSIM_STATES_HEADER = "time,nb_sleeping,nb_switching_on,nb_switching_off,nb_idle,nb_computing"


def job(job_id, submit, ncpus, queue, walltime=None):
    return TraceJob(job_id=job_id, line=1, submit=submit, run_time=0.0, ncpus=ncpus,
                    walltime=walltime, queue=queue)


def states(t, watts, **counts):
    return MachineStates(time=t, counts=counts, watts=watts,
                         busy_cpus=4 * counts.get("computing", 0))


def crafted_run(out: Path, **kw) -> ResultWriter:
    """2 hosts of 4 cpus; 4 jobs; power goes off, on, and off again."""
    w = ResultWriter(out, cpus=8, **kw)
    w.machine(states(0, 200, idle=2))
    w.machine(states(0, 300, idle=1, computing=1))      # same instant: this one holds
    w.machine(states(30, 400, computing=2))
    w.job(JobResult(job("3", 20, 2, "a"), COMPLETED, 30, 50, hosts=(1,), energy=100.0))
    w.machine(states(50, 300, idle=1, computing=1))
    w.job(JobResult(job("4", 40, 1, "b"), REJECTED, None, 40))
    w.job(JobResult(job("1", 0, 4, "a", 3600), COMPLETED, 0, 100, hosts=(0,), energy=500.0))
    w.machine(states(100, 400, computing=2))
    w.job(JobResult(job("2", 10, 8, "b", 5), WALLTIME, 100, 105, hosts=(0, 1), energy=40.5))
    w.machine(states(105, 100, switching_off=2))
    w.machine(states(115, 10, sleeping=2))
    w.machine(states(200, 105, switching_on=1, sleeping=1))
    w.machine(states(260, 105, idle=1, sleeping=1))
    w.machine(states(300, 55, switching_off=1, sleeping=1))
    w.machine(states(310, 10, sleeping=2))
    w.close(3600)
    return w


def test_metrics_worked_out_by_hand(tmp_path):
    crafted_run(tmp_path)
    m = json.loads((tmp_path / "metrics.json").read_text())
    # Waits 0 (job 1), 90 (job 2), 10 (job 3); runs 100, 5, 20; job 4 was rejected.
    assert (m["jobs"], m["jobs_started"], m["jobs_rejected"]) == (4, 3, 1)
    assert m["jobs_killed_at_walltime"] == 1
    assert m["mean_wait_s"] == pytest.approx(100 / 3, abs=1e-6)
    assert (m["median_wait_s"], m["p95_wait_s"], m["max_wait_s"]) == (10, 90, 90)
    # BSLD: max(1, 100/100) = 1; (90 + 5) / max(5, 10) = 9.5; (10 + 20) / 20 = 1.5.
    assert m["mean_bounded_slowdown"] == pytest.approx((1 + 9.5 + 1.5) / 3)
    # Plain slowdown: 1, 95 / 5 = 19, 1.5.
    assert m["mean_slowdown"] == pytest.approx((1 + 19 + 1.5) / 3, abs=1e-6)
    # Utilization: (4*100 + 8*5 + 2*20) / (8 cpus * (105 - 0)).
    assert m["makespan_s"] == 105
    assert m["utilization"] == pytest.approx(480 / (8 * 105), abs=1e-6)
    # Energy: 300*30 + 400*20 + 300*50 + 400*5 + 100*10 + 10*85 + 105*60 + 105*40 + 55*10
    # + 10*3290 = 79,800 J over 3,600 s.
    joules = 300 * 30 + 400 * 20 + 300 * 50 + 400 * 5 + 100 * 10 + 10 * 85 + 105 * 60 \
        + 105 * 40 + 55 * 10 + 10 * 3290
    assert m["energy_kwh"] == pytest.approx(joules / 3.6e6, abs=1e-6)
    assert m["mean_power_w"] == pytest.approx(joules / 3600, abs=1e-6)
    # Sleeping hosts: 2*85 + 1*60 + 1*40 + 1*10 + 2*3290 host-seconds.
    assert m["node_hours_off"] == pytest.approx((170 + 60 + 40 + 10 + 6580) / 3600, abs=1e-6)
    # Hosts entering switching_off: 2 at 105 s, 1 at 300 s; 2 hosts over 1/24 of a day.
    assert m["power_cycles"] == 3
    assert m["power_cycles_per_node_per_day"] == pytest.approx(3 / 2 / (3600 / 86400))
    assert m["hosts"] == 2 and m["cpus"] == 8
    assert m["job_energy_kwh"] == pytest.approx(640.5 / 3.6e6, abs=1e-6)
    a, b = m["per_queue"]["a"], m["per_queue"]["b"]
    assert (a["jobs"], a["mean_wait_s"], a["max_wait_s"]) == (2, 5, 10)
    # Per queue, median and p95 of its own waits: a waited 0 and 10, b only 90.
    assert (a["median_wait_s"], a["p95_wait_s"]) == (5, 10)
    assert (b["median_wait_s"], b["p95_wait_s"]) == (90, 90)
    assert a["mean_bounded_slowdown"] == pytest.approx(1.25)
    assert (b["jobs"], b["jobs_rejected"], b["jobs_killed_at_walltime"], b["mean_wait_s"]) == (
        2, 1, 1, 90)
    table = (tmp_path / "metrics.txt").read_text()
    assert "mean bounded slowdown (tau 10 s)" in table and "4.000" in table
    assert "queue" in table and "\na " in table
    queue_a = next(line for line in table.splitlines() if line.startswith("a "))
    assert queue_a.split()[1:5] == ["2", "5.0", "5.0", "10.0"]  # jobs, mean, median, p95


def test_jobs_csv_is_batsim_format(tmp_path):
    crafted_run(tmp_path)
    text = (tmp_path / "out_jobs.csv").read_text()
    assert text.splitlines()[0] == BATSIM_JOBS_HEADER
    rows = {r["job_id"]: r for r in csv.DictReader(text.splitlines())}
    assert list(rows) == ["3", "4", "1", "2"]               # in the order they finished
    j2 = rows["2"]
    assert (j2["submission_time"], j2["starting_time"], j2["finish_time"]) == ("10", "100",
                                                                               "105")
    assert (j2["execution_time"], j2["waiting_time"], j2["turnaround_time"]) == ("5", "90",
                                                                                 "95")
    assert (j2["stretch"], j2["success"], j2["final_state"]) == ("19", "0", WALLTIME)
    assert (j2["allocated_resources"], j2["requested_number_of_resources"]) == ("0-1", "2")
    assert j2["metadata"] == "ncpus=8 queue=b" and rows["3"]["requested_number_of_resources"] == "1"
    assert (j2["requested_time"], j2["consumed_energy"], j2["workload_name"]) == ("5", "40.5",
                                                                                  "w0")
    assert rows["1"]["success"] == "1" and rows["1"]["stretch"] == "1"
    j4 = rows["4"]
    assert (j4["final_state"], j4["requested_time"], j4["starting_time"]) == (REJECTED, "-1",
                                                                              "")
    assert j4["waiting_time"] == j4["stretch"] == j4["allocated_resources"] == ""


def test_machine_states_csv_is_batsim_format(tmp_path):
    crafted_run(tmp_path)
    lines = (tmp_path / "out_machine_states.csv").read_text().splitlines()
    assert lines[0] == BATSIM_STATES_HEADER
    assert lines[1:] == ["0,0,0,0,1,1", "30,0,0,0,0,2", "50,0,0,0,1,1", "100,0,0,0,0,2",
                         "105,0,0,2,0,0", "115,2,0,0,0,0", "200,1,1,0,0,0", "260,1,0,0,1,0",
                         "300,1,0,1,0,0", "310,2,0,0,0,0", "3600,2,0,0,0,0"]
    series = (tmp_path / "out_series.csv").read_text().splitlines()
    assert series[0] == "time,queued,running,busy_cpus,watts" and series[1] == "0,0,0,4,300"


def test_same_run_gives_byte_identical_files(tmp_path):
    crafted_run(tmp_path / "one")
    crafted_run(tmp_path / "two")
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert {"gantt.png", "utilization.png", "power_states.png", "wait_cdf.png"} <= set(names)
    assert names == sorted(p.name for p in (tmp_path / "two").iterdir())
    for name in names:
        one, two = (tmp_path / "one" / name).read_bytes(), (tmp_path / "two" / name).read_bytes()
        assert one == two, name


def test_plots_are_pngs_and_gantt_only_for_small_runs(tmp_path):
    crafted_run(tmp_path / "small")
    for name in ("utilization.png", "power_states.png", "wait_cdf.png", "gantt.png"):
        data = (tmp_path / "small" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and b"Software" not in data
    crafted_run(tmp_path / "big", gantt_limit=2)
    assert not (tmp_path / "big" / "gantt.png").exists()
    crafted_run(tmp_path / "none", plots=False)
    assert not list((tmp_path / "none").glob("*.png"))


def test_the_gantt_charts_rows_are_the_hosts_numbered_as_out_jobs_numbers_them(tmp_path,
                                                                             monkeypatch):
    """Audit: host h was drawn from h to h + 1 under ticks at 0.5 steps, so a bar sat
    between two labels. Each host is the row centred on its whole-number tick now, and a
    small run's bars carry their job's id."""
    from pbsplug.sim import plots

    drawn = {}
    real_save = plots._save

    def keep(fig, folder, name):
        drawn[name] = fig
        return real_save(fig, folder, name)

    monkeypatch.setattr(plots, "_save", keep)
    crafted_run(tmp_path / "g")
    (ax,) = drawn["gantt.png"].axes
    assert all(float(t).is_integer() for t in ax.get_yticks())
    assert ax.get_ylim() == (-0.5, 1.5)
    rows = sorted((round((b.y0 + b.y1) / 2, 6), round(b.height, 6))
                  for coll in ax.collections for b in [coll.get_paths()[0].get_extents()])
    # job 1 on host 0, job 3 on host 1, job 2 on hosts 0 and 1 (one bar over both rows)
    assert rows == [(0.0, 0.8), (0.5, 1.8), (1.0, 0.8)]
    assert sorted(t.get_text() for t in ax.texts) == ["1", "2", "3"]


def test_without_plots_the_other_files_are_the_same_and_nothing_is_kept_for_them(tmp_path):
    with_plots = crafted_run(tmp_path / "plots")
    without = crafted_run(tmp_path / "none", plots=False)
    for name in ("out_jobs.csv", "out_machine_states.csv", "out_series.csv", "metrics.json",
                 "metrics.txt"):
        assert (tmp_path / "plots" / name).read_bytes() == (tmp_path / "none" / name).read_bytes()
    assert with_plots.gantt and with_plots.bins.t0 == 0
    assert without.gantt is None and without.bins is None  # (only the plots read them)


def test_number_formatting_and_intervals():
    assert [fmt(3), fmt(3.0), fmt(0.1 + 0.2), fmt(1 / 3), fmt(None), fmt(float("nan"))] == [
        "3", "3", "0.3", "0.333333", "", ""]
    assert intervals((7, 0, 1, 2, 3, 9, 10)) == "0-3 7 9-10" and intervals(()) == ""
    assert percentile(list(range(1, 21)), 95) == 19 and percentile([], 50) == 0.0


def test_an_int_of_a_subclass_is_written_as_its_number():
    # int.is_integer is Python 3.12's: on 3.10 and 3.11 a bool or IntEnum raised
    # AttributeError where an int is written.
    class Count(int):
        pass

    assert [fmt(True), fmt(False), fmt(Count(7))] == ["1", "0", "7"]


def test_bad_output_directories(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(OutputError, match="is a file"):
        ResultWriter(afile, cpus=1)
    with pytest.raises(OutputError, match="cannot create output directory"):
        ResultWriter(afile / "sub", cpus=1)
    with pytest.raises(OutputError, match="cpus 0"):
        ResultWriter(tmp_path / "o", cpus=0)


def test_a_rerun_removes_the_earlier_runs_files_and_nothing_else(tmp_path):
    """A rerun without plots (or without a Gantt chart) leaves none of the earlier run's
    plots; other files stay; a symlink planted under an output name is removed, not
    followed; a directory under an output name is a one-line error before anything runs."""
    from pbsplug.sim.output import COMPARE_FILES, RUN_FILES

    out = tmp_path / "out"
    crafted_run(out)
    assert {p.name for p in out.iterdir()} == set(RUN_FILES)  # (every name it owns)
    (out / "notes.txt").write_text("mine")
    (out / "old.png").write_text("mine")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (out / "gantt.png").unlink()
    (out / "gantt.png").symlink_to(outside)
    crafted_run(out, plots=False)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["metrics.json", "metrics.txt", "notes.txt", "old.png", "out_jobs.csv",
         "out_machine_states.csv", "out_series.csv"])
    assert outside.read_text() == "keep"
    (out / "metrics.json").unlink()
    (out / "metrics.json").mkdir()
    with pytest.raises(OutputError, match=r"out/metrics.json is a directory, where the run "
                                          r"writes its file metrics.json"):
        ResultWriter(out, cpus=1)
    (out / "metrics.json").rmdir()
    crafted_run(out, plots=False)
    cmp = tmp_path / "cmp"
    compare_results(out, out, cmp, "x", "y")
    assert {p.name for p in cmp.iterdir()} == set(COMPARE_FILES)
    compare_results(out, out, cmp, "x", "y", plots=False)
    assert {p.name for p in cmp.iterdir()} == {"compare.json", "compare.txt"}


def test_a_link_planted_during_the_run_is_never_written_through(tmp_path):
    """The metrics and plots are written at the end of a replay, long after its folder was
    cleared: a link planted meanwhile under their names (by whoever may write the folder)
    is removed and the file made afresh, never followed; the folder's path moved meanwhile
    changes nothing either (the files are made in the folder the run opened)."""
    out = tmp_path / "out"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    w = ResultWriter(out, cpus=8)
    w.machine(states(0, 200, idle=2))
    for name in ("metrics.txt", "metrics.json", "wait_cdf.png"):
        (out / name).symlink_to(victim)
    moved = tmp_path / "moved"
    out.rename(moved)
    out.symlink_to(victim.parent / "elsewhere", target_is_directory=True)
    (victim.parent / "elsewhere").mkdir()
    w.close(10)
    assert victim.read_text() == "keep"
    assert not any((victim.parent / "elsewhere").iterdir())
    for name in ("metrics.txt", "metrics.json", "wait_cdf.png"):
        assert not (moved / name).is_symlink() and (moved / name).stat().st_size > 0


def test_a_writer_touches_nothing_before_its_first_result(tmp_path):
    """A replay refused while it is set up (after the writer is made) leaves the earlier
    run's files as they were."""
    out = tmp_path / "out"
    crafted_run(out, plots=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    ResultWriter(out, cpus=8, plots=False)  # (and nothing else: the replay was refused)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_writer_never_left_open_holds_no_descriptor(tmp_path, open_fds):
    """The folder's descriptor is closed at the run's end, when its end fails (a metrics
    name that became a directory), and when a writer is dropped unclosed (a replay that
    failed half way): a process making replays one after another never runs out."""
    before = open_fds()
    for i in range(20):
        w = ResultWriter(tmp_path / f"o{i}", cpus=8, plots=False)
        w.machine(states(0, 200, idle=2))
        del w
    assert open_fds() == before
    w = ResultWriter(tmp_path / "bad", cpus=8, plots=False)
    w.machine(states(0, 200, idle=2))
    (tmp_path / "bad" / "metrics.txt").mkdir()
    with pytest.raises(OutputError, match="metrics.txt"):
        w.close(10)
    assert open_fds() == before


def test_a_folder_one_may_write_but_not_list_takes_the_results(attacker):
    """The folder was opened for reading, which a folder of mode 0300 refuses: a run that
    wrote into one before was refused. (As an unprivileged user: root reads any folder.)"""
    import os
    import pwd
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp") as top:  # (a path the user can reach)
        os.chmod(top, 0o755)
        out = Path(top) / "drop"
        out.mkdir()
        user = pwd.getpwnam(attacker.user)
        os.chown(out, user.pw_uid, user.pw_gid)
        out.chmod(0o300)
        done = attacker.python(
            "import sys\nfrom pbsplug.sim.output import ResultWriter\n"
            "w = ResultWriter(sys.argv[1], cpus=1, plots=False)\nw.close(0)\n", str(out))
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in out.iterdir()) == [
            "metrics.json", "metrics.txt", "out_jobs.csv", "out_machine_states.csv",
            "out_series.csv"]


def test_results_out_of_order_are_refused(tmp_path):
    w = ResultWriter(tmp_path, cpus=4, plots=False)
    w.machine(states(10, 1, idle=1))
    with pytest.raises(OutputError, match="back in time"):
        w.machine(states(5, 1, idle=1))
    with pytest.raises(OutputError, match="not in order"):
        w.job(JobResult(job("1", 20, 1, None), COMPLETED, 10, 30))
    with pytest.raises(OutputError, match="before the last machine state"):
        w.close(1)


def test_compare_results_differences(tmp_path):
    crafted_run(tmp_path / "on", plots=False)
    w = ResultWriter(tmp_path / "off", cpus=8, plots=False)   # fewer watts, longer waits
    w.machine(states(0, 100, idle=2))
    w.job(JobResult(job("1", 0, 4, "a"), COMPLETED, 50, 150, hosts=(0,)))
    w.close(3600)
    result = compare_results(tmp_path / "on", tmp_path / "off", tmp_path / "cmp",
                             "always-on", "power")
    d = result["differences"]
    on, off = result["runs"]["always-on"], result["runs"]["power"]
    assert d["energy_saved_kwh"] == pytest.approx(on["energy_kwh"] - 100 * 3600 / 3.6e6,
                                                  abs=1e-6)
    assert d["energy_saved_percent"] == pytest.approx(
        100 * (on["energy_kwh"] - off["energy_kwh"]) / on["energy_kwh"], abs=1e-3)
    assert d["mean_wait_added_s"] == pytest.approx(50 - 100 / 3, abs=1e-6)
    files = {p.name for p in (tmp_path / "cmp").iterdir()}
    assert files == {"compare.json", "compare.txt", "compare_time.png", "compare_wait_cdf.png"}
    table = (tmp_path / "cmp" / "compare.txt").read_text()
    assert "always-on" in table and "energy_saved_kwh" in table
    with pytest.raises(OutputError, match="different labels"):
        compare_results(tmp_path / "on", tmp_path / "off", tmp_path / "c2", "x", "x")
    with pytest.raises(OutputError, match="cannot read the run's metrics"):
        compare_results(tmp_path / "on", tmp_path / "nothing", tmp_path / "c3")


def test_metrics_over_no_started_job_are_not_available_and_compare_says_so(tmp_path):
    """With no job started, a mean wait of 0.0 and a mean bounded slowdown of 0.000 were
    reported (no run has them) and compare subtracted them; they are null (JSON) and n/a
    (tables) now, their differences too, and compare gives the rejected jobs' difference."""
    crafted_run(tmp_path / "on", plots=False)
    w = ResultWriter(tmp_path / "none", cpus=8, plots=False)
    w.machine(states(0, 100, idle=2))
    w.job(JobResult(job("1", 0, 4, "a"), REJECTED, None, 0, reason="too big"))
    w.job(JobResult(job("2", 0, 4, "a"), REJECTED, None, 0, reason="too big"))
    w.close(10)
    m = json.loads((tmp_path / "none" / "metrics.json").read_text())
    lacking = ("mean_wait_s", "median_wait_s", "p95_wait_s", "max_wait_s",
               "mean_bounded_slowdown", "mean_slowdown")
    assert [m[k] for k in lacking] == [None] * 6
    assert [m["per_queue"]["a"][k] for k in lacking] == [None] * 6
    table = (tmp_path / "none" / "metrics.txt").read_text()
    assert "mean wait (s)" in table and table.count("n/a") == 6 + 5  # and the queue's five
    assert [line.split()[-1] for line in table.splitlines() if "wait" in line][:4] == [
        "n/a"] * 4
    result = compare_results(tmp_path / "on", tmp_path / "none", tmp_path / "cmp", "on",
                             "none", plots=False)
    d = result["differences"]
    assert d["mean_wait_added_s"] is None and d["mean_bounded_slowdown_added"] is None
    assert "mean_wait_added_percent" not in d
    assert d["jobs_rejected_added"] == 1  # 2 - 1
    text = (tmp_path / "cmp" / "compare.txt").read_text()
    assert "mean_wait_added_s: n/a (none has no mean_wait_s: no job started)" in text
    assert "jobs_rejected_added: 1.0000" in text
    assert [row.split()[-3:] for row in text.splitlines() if row.startswith("mean wait")] == [
        ["33.3", "n/a", "n/a"]]
    # A run whose started jobs all ran 0 s has waits, but no plain slowdown.
    w = ResultWriter(tmp_path / "zero", cpus=8, plots=False)
    w.job(JobResult(job("1", 0, 4, "a"), COMPLETED, 5, 5))
    w.close(5)
    m = w.metrics()
    assert (m["mean_wait_s"], m["mean_bounded_slowdown"], m["mean_slowdown"]) == (5, 1, None)


def test_time_bins_stay_exact_when_they_double():
    bins = TimeBins(2, width=1.0)
    # 2 hosts busy for 500 s, then 1 for 1,500 s: past 1,000 one-second bins, they merge.
    bins.add(0, 500, (2.0, 0.0))
    bins.add(500, 2000, (1.0, 3.0))
    assert bins.width == 2.0
    centres, (busy, queued) = bins.means()
    assert len(centres) == 1000 and centres[0] == 1.0
    assert busy[0] == 2.0 and busy[249] == 2.0 and busy[250] == 1.0 and busy[-1] == 1.0
    assert sum(b * bins.width for b in busy) == pytest.approx(2 * 500 + 1500)
    assert sum(q * bins.width for q in queued) == pytest.approx(3 * 1500)
    # One more second doubles them again; a segment across a bin edge is split.
    bins.add(2000, 2001, (4.0, 0.0))
    bins.add(2001, 2006, (2.0, 0.0))
    centres, (busy, _) = bins.means()
    assert bins.width == 4.0 and len(centres) == 502
    assert busy[500] == pytest.approx((4.0 * 1 + 2.0 * 3) / 4) and busy[501] == 1.0
    assert sum(b * bins.width for b in busy) == pytest.approx(2 * 500 + 1500 + 4 + 10)


def test_writing_without_plots_never_imports_matplotlib(tmp_path):
    code = ("import sys; from pbsplug.sim import output, traces; "
            "w = output.ResultWriter(sys.argv[1], cpus=1, plots=False); w.close(0); "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


def test_plots_without_matplotlib_are_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    with pytest.raises(OutputError, match="cannot draw the plots: .*install matplotlib or "
                                          "pass --no-plots"):
        crafted_run(tmp_path)
    assert (tmp_path / "metrics.json").exists()  # what does not need plots is written
