"""`pbsplug sim run` / `sim compare` as a user runs them, and the platform file's checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pbsplug.cli import main
from pbsplug.sim.machine import PlatformError, from_header, load_platform
from pbsplug.testing import missing

HEADER = "; MaxNodes: 4\n; MaxProcs: 4\n"


def swf(tmp_path, rows, header=HEADER):
    """A small SWF file: rows of (job, submit, run, procs, requested time)."""
    lines = [header.rstrip("\n")]
    for job, submit, run, procs, req in rows:
        lines.append(f"{job} {submit} 0 {run} {procs} -1 -1 {procs} {req} -1 1 1 1 -1 1 -1 -1 -1")
    path = tmp_path / "t.swf"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_sim_run_writes_results_and_reports_what_ran(tmp_path, capsys):
    trace = swf(tmp_path, [(1, 0, 100, 2, 100), (2, 0, 100, 3, 200), (3, 10, 50, 2, 80)])
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "sim", "run", str(trace), "--policy", "easy",
                                "--out", str(out), "--no-plots")
    assert code == 0, err
    assert "machine: 4 hosts, 4 vnodes, 4 cpus" in stdout
    assert "jobs: 3 finished, 0 rejected, 0 killed at walltime" in stdout
    assert "hooks: none enabled" in stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["jobs"] == 3
    # EASY by hand (test_engine's first case): j3 backfills at 10, j2 starts at 100.
    assert metrics["mean_wait_s"] == pytest.approx((0 + 100 + 0) / 3)


def test_sim_run_options_override_the_header(tmp_path, capsys):
    trace = swf(tmp_path, [(1, 0, 10, 8, 10)])
    code, stdout, err = run_cli(capsys, "sim", "run", str(trace), "--nodes", "2",
                                "--cpus-per-node", "4", "--out", str(tmp_path / "o"),
                                "--no-plots")
    assert code == 0, err
    assert "machine: 2 hosts, 2 vnodes, 8 cpus (4 cpus each" in stdout
    assert "jobs: 1 finished" in stdout


@pytest.mark.parametrize("args,expected", [
    (["--policy", "lottery"], "--policy 'lottery': expected one of pbs, easy, fifo"),
    (["--format", "csv"], "--format 'csv': expected one of swf, pbs, sacct"),
    (["--limit", "0"], "--limit 0: expected at least 1"),
    (["--cpus-per-node", "2"], "--cpus-per-node needs --nodes"),
    (["--nodes", "4", "--cpus-per-node", "0"],
     "--nodes/--cpus-per-node: cpus per node: 0: expected 1 to 1,000,000"),
    (["--nodes", "100000000"], "--nodes/--cpus-per-node: nodes: 100000000: expected 1 to "
                               "1,000,000"),
])
def test_sim_run_bad_options_are_one_line_errors(tmp_path, capsys, args, expected):
    trace = swf(tmp_path, [(1, 0, 10, 1, 10)])
    code, _, err = run_cli(capsys, "sim", "run", str(trace), "--out", str(tmp_path / "o"),
                           "--no-plots", *args)
    assert code == 2
    assert err.strip().splitlines() == [f"pbsplug: error: {expected}"]


def test_a_missing_trace_and_a_bad_platform_are_one_line_errors(tmp_path, capsys):
    code, _, err = run_cli(capsys, "sim", "run", str(tmp_path / "nope.swf"), "--no-plots",
                           "--out", str(tmp_path / "o"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "nope.swf" in err
    platform = tmp_path / "p.toml"
    platform.write_text("[[hosts]]\ncount = 2\nncpus = -1\n")
    trace = swf(tmp_path, [(1, 0, 10, 1, 10)])
    code, _, err = run_cli(capsys, "sim", "run", str(trace), "--platform", str(platform),
                           "--no-plots", "--out", str(tmp_path / "o"))
    assert code == 2
    assert err.strip() == (f"pbsplug: error: {platform}: hosts[0].ncpus: -1: expected an "
                           "integer from 1 to 1,000,000")


def test_sim_compare_runs_both_sites_and_writes_the_differences(tmp_path, capsys):
    trace = swf(tmp_path, [(1, 0, 100, 2, 100), (2, 0, 100, 3, 200), (3, 10, 50, 2, 80)])
    (tmp_path / "a.toml").write_text("")
    (tmp_path / "b.toml").write_text("[sim.scheduler]\nstrict_ordering = true\n"
                                     "backfill = false\n")
    out = tmp_path / "cmp"
    code, stdout, err = run_cli(capsys, "sim", "compare", str(trace), "--site",
                                str(tmp_path / "a.toml"), "--site", str(tmp_path / "b.toml"),
                                "--out", str(out), "--no-plots")
    assert code == 0, err
    result = json.loads((out / "compare.json").read_text())
    assert result["labels"] == ["a", "b"]
    # a (PBS's default: backfill everything) starts j3 at 10; b (FIFO) holds it until j2
    # ends at 200: j3 waits 190 s more, the mean wait 190/3 s more.
    assert result["differences"]["mean_wait_added_s"] == pytest.approx(190 / 3, abs=1e-3)
    code, _, err = run_cli(capsys, "sim", "compare", str(trace), "--site",
                           str(tmp_path / "a.toml"), "--no-plots", "--out", str(out))
    assert code == 2 and "give two --site files" in err


def test_a_site_sim_table_with_an_unknown_key_is_refused(tmp_path, capsys):
    trace = swf(tmp_path, [(1, 0, 10, 1, 10)])
    site = tmp_path / "s.toml"
    site.write_text("[sim]\npolicy = 'easy'\n")
    code, _, err = run_cli(capsys, "sim", "run", str(trace), "--site", str(site),
                           "--no-plots", "--out", str(tmp_path / "o"))
    assert code == 2 and "[sim].policy: unknown key" in err


def test_a_site_sched_table_adds_a_scheduler_over_its_partition(tmp_path, capsys):
    # Hosts a0, a1 in p1 (queue 1); b0, b1 in p2 (queue 2). Job 2 (queue 1) fits on b0 at 0
    # when one scheduler sees everything; with s2 owning p2 it waits for job 1 (p1) to end.
    rows = [(1, 0, 100, 2, 100, 1), (2, 0, 50, 1, 50, 1), (3, 0, 10, 1, 10, 2)]
    trace = tmp_path / "q.swf"
    trace.write_text("; MaxNodes: 4\n; MaxProcs: 4\n" + "".join(
        f"{j} {s} 0 {r} {p} -1 -1 {p} {q} -1 1 1 1 -1 {queue} -1 -1 -1\n"
        for j, s, r, p, q, queue in rows))
    platform = tmp_path / "p.toml"
    platform.write_text('[[hosts]]\nprefix = "a"\ncount = 2\nncpus = 1\npartition = "p1"\n'
                        '[[hosts]]\nprefix = "b"\ncount = 2\nncpus = 1\npartition = "p2"\n'
                        '[queues.1]\npartition = "p1"\n[queues.2]\npartition = "p2"\n')
    one, two = tmp_path / "one.toml", tmp_path / "two.toml"
    one.write_text("")
    two.write_text('[sim.sched.s2]\npartition = "p2"\n')
    waits = {}
    for site in (one, two):
        out = tmp_path / site.stem
        code, stdout, err = run_cli(capsys, "sim", "run", str(trace), "--platform",
                                    str(platform), "--site", str(site), "--no-plots", "--out",
                                    str(out))
        assert code == 0, err
        assert ("schedulers: default (what no other owns); s2 (p2)" in stdout) == (
            site is two)
        waits[site.stem] = json.loads((out / "metrics.json").read_text())["per_queue"]
    assert waits["one"]["1"]["max_wait_s"] == 0
    assert waits["two"]["1"]["max_wait_s"] == 100 and waits["two"]["2"]["max_wait_s"] == 0
    two.write_text('[sim.sched.s2]\npartition = "p2"\nbackfil = false\n')
    code, _, err = run_cli(capsys, "sim", "run", str(trace), "--platform", str(platform),
                           "--site", str(two), "--no-plots", "--out", str(tmp_path / "bad"))
    assert code == 2 and f"{two}: [sim.sched.s2].backfil: unknown key" in err
    two.write_text('[sim.sched.s2]\npartition = "p2"\n[sim.sched.s3]\npartition = "p2"\n')
    code, _, err = run_cli(capsys, "sim", "run", str(trace), "--platform", str(platform),
                           "--site", str(two), "--no-plots", "--out", str(tmp_path / "bad"))
    assert code == 2 and f"{two}: [sim.sched.s3].partition: 'p2': Partition is already " \
        "associated with other scheduler ([sim.sched.s2] has it)" in err, err
    # As qmgr checks a sched's partition; and one no host of the platform has.
    for value, message in [('"pbs-default"', "'pbs-default': Default partition name is not "
                            "allowed"),
                           ('["p2", "gpu"]', "'gpu': no host of the platform is in this "
                            "partition (the platform's partitions: p1, p2)")]:
        two.write_text(f"[sim.sched.s2]\npartition = {value}\n")
        code, _, err = run_cli(capsys, "sim", "run", str(trace), "--platform", str(platform),
                               "--site", str(two), "--no-plots", "--out", str(tmp_path / "bad"))
        assert code == 2 and f"{two}: [sim.sched.s2].partition: {message}\n" == err.split(
            "error: ", 1)[-1], err
    # sim compare finds B's before A runs; the machine without a platform has no partition.
    code, _, err = run_cli(capsys, "sim", "compare", str(trace), "--platform", str(platform),
                           "--site", str(one), "--site", str(two), "--no-plots", "--out",
                           str(tmp_path / "cmp"))
    assert code == 2 and f"{two}: [sim.sched.s2].partition: 'gpu': no host" in err, err
    assert not (tmp_path / "cmp").exists()
    two.write_text('[sim.sched.s2]\npartition = "p2"\n')
    code, _, err = run_cli(capsys, "sim", "compare", str(trace), "--site", str(one), "--site",
                           str(two), "--no-plots", "--out", str(tmp_path / "cmp"))
    assert code == 2 and "'p2': no host of the platform is in this partition (the " \
        "platform's partitions: none)" in err and not (tmp_path / "cmp").exists(), err


# -- the platform file ----------------------------------------------------------------------------

PLATFORM = """
[power.thin]
busy = 190.0
idle = 95
asleep = 9
off = 0
booting = 120
boot = 300
shutdown = 30

[[hosts]]
prefix = "c"
count = 3
vnodes = 2
ncpus = 4
mem = "8gb"
partition = "p1"

[[hosts]]
names = ["big"]
ncpus = 64
poweroff_eligible = false

[queues.long]
partition = "p1"
priority = 5
resources_max = {walltime = "24:00:00", mem = "64gb"}
resources_default = {walltime = 3600}
"""


def test_a_platform_file_describes_hosts_vnodes_partitions_and_power(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(PLATFORM)
    machine = load_platform(path)
    assert [h.name for h in machine.hosts] == ["c0", "c1", "c2", "big"]
    assert machine.hosts[0].vnodes == ["c0[0]", "c0[1]"]
    assert machine.hosts[0].mem == 8 * 1024 ** 3 and machine.hosts[0].partition == "p1"
    assert machine.total_cpus == 3 * 2 * 4 + 64
    power = machine.hosts[0].power
    assert (power.busy, power.shutting_down, power.boot) == (190.0, 120.0, 300.0)
    assert machine.hosts[3].poweroff_eligible is False
    assert machine.queues == {"long": {
        "partition": "p1", "Priority": 5, "resources_default": {"walltime": "01:00:00"},
        "resources_max": {"walltime": "24:00:00", "mem": "64gb"}}}


@pytest.mark.parametrize("text,message", [
    ("[[hosts]]\ncount = 1\nncpus = 2\ncolour = 'red'\n", "hosts[0].colour: unknown key"),
    ("[power.a]\nbusy = nan\n[[hosts]]\ncount = 1\nncpus = 1\n",
     "power.a.busy: nan: expected a number from 0 to 1e+09"),
    ("[power.a]\nboot = inf\n[[hosts]]\ncount = 1\nncpus = 1\n", "power.a.boot: inf:"),
    ("[power.a]\nidle = 1e308\n[[hosts]]\ncount = 1\nncpus = 1\n", "power.a.idle: 1e+308:"),
    ("[[hosts]]\ncount = 1000000000\nncpus = 1\n",
     "hosts[0].count: 1000000000: expected an integer from 1 to 1,000,000"),
    ("[[hosts]]\ncount = 1\nncpus = 9223372036854775807\n", "hosts[0].ncpus: 92233"),
    ("[[hosts]]\ncount = 600000\nncpus = 1\n[[hosts]]\ncount = 600000\nprefix = 'm'\n"
     "ncpus = 1\n", "hosts[1]: 600,000 hosts of 1 vnodes make the machine over 1,000,000"),
    ("[[hosts]]\nnames = ['a:b', 'c']\nncpus = 1\n",
     "hosts[0]: host name: 'a:b' is not a valid host name"),
    ("[[hosts]]\nnames = ['a']\ncount = 2\nncpus = 1\n", "hosts[0]: names with count"),
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", "not valid TOML: arrays or tables nested too"),
    # A number past what Python reads (4300 digits) is the file's error, not a ValueError.
    ("[[hosts]]\ncount = 1\nncpus = " + "9" * 5000 + "\n",
     "not valid TOML: an integer of 5,000 digits, more than the 4,300 read (at line 3)"),
    ("[[hosts]]\ncount = 1\nncpus = 1\n[queues.q]\npartition = 'p9'\n",
     "queues.q.partition: 'p9': no host is in it"),
    ("[[hosts]]\ncount = 1\nncpus = 2\nmem = 'lots'\n", "hosts[0].mem: 'lots': expected a size"),
    ("[[hosts]]\ncount = 1\nncpus = 1\n[queues.q]\nresources_max = {walltime = 'abc'}\n",
     "queues.q.resources_max.walltime: 'abc' is not a duration"),
    ("[[hosts]]\ncount = 1\nncpus = 1\n[queues.q]\nresources_min = 5\n",
     "queues.q.resources_min: 5 is not a mapping of resources"),
    ("[[hosts]]\ncount = 1\nncpus = 1\n[queues.q]\nresources_default = {gpus = 1}\n",
     "queues.q.resources_default.gpus: resource 'gpus' is not defined"),
    ("[[hosts]]\ncount = 1\nncpus = 1\n[queues.q]\nmax_run = 5\n",
     "queues.q.max_run: unknown key; expected partition, priority, resources_default"),
    ("[[hosts]]\ncount = 1\nncpus = 2\npower = 'fat'\n", "hosts[0].power: 'fat': no [power.fat]"),
    ("[power.a]\nbusy = -3\n[[hosts]]\ncount = 1\nncpus = 1\n", "power.a.busy: -3: expected a"),
    ("[[hosts]]\nnames = ['a', 'a']\nncpus = 1\n", "hosts[0]: host 'a' is named twice"),
    ("hosts = 3\n", "hosts: 3: expected one or more [[hosts]] tables"),
    ("[[hosts]]\ncount = 1\nncpus = 1\n[extra]\n", "extra: unknown section"),
    ("[[hosts\n", "not valid TOML"),
    # PBS's range of a queue's Priority; partitions and queue names checked as names.
    ("[[hosts]]\ncount = 1\nncpus = 1\n[queues.q]\npriority = 999999\n",
     "queues.q.priority: 999999: expected an integer from -1024 to 1,023"),
    ("[[hosts]]\ncount = 1\nncpus = 1\npartition = 'a,b'\n",
     "hosts[0].partition: 'a,b': expected a partition name"),
    ("[[hosts]]\ncount = 1\nncpus = 1\npartition = ' '\n",
     "hosts[0].partition: ' ': expected a partition name"),
    ("[[hosts]]\ncount = 1\nncpus = 1\npartition = 'pbs-default'\n",
     "hosts[0].partition: 'pbs-default': Default partition name is not allowed"),
    ("[[hosts]]\ncount = 1\nncpus = 1\npartition = 'p'\n[queues.q]\npartition = 'p,'\n",
     "queues.q.partition: 'p,': expected a partition name"),
    ("[[hosts]]\ncount = 1\nncpus = 1\n[queues.'']\n", "queues.'': expected a queue name"),
    ("[[hosts]]\ncount = 1\nncpus = 1\n[queues.'a b;c']\n",
     "queues.'a b;c': expected a queue name (1 to 15 letters, digits, _ or -)"),
    ("[[hosts]]\ncount = 1\nncpus = 1\n[queues.abcdefghijklmnop]\n",
     "queues.'abcdefghijklmnop': expected a queue name"),
])
def test_platform_errors_name_the_file_the_key_and_the_value(tmp_path, text, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PlatformError) as caught:
        load_platform(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_platform_file_that_is_not_text_is_named(tmp_path):
    path = tmp_path / "p.toml"
    path.write_bytes(b"\xff\xfe[[hosts]]\n")
    with pytest.raises(PlatformError, match=f"^{path}: not valid UTF-8"):
        load_platform(path)


def test_the_header_gives_hosts_and_cpus_per_host():
    assert from_header(1024, 8192, "r").total_cpus == 8192
    assert len(from_header(1024, 8192, "r").hosts) == 1024
    assert len(from_header(None, 100, "k").hosts) == 100
    with pytest.raises(PlatformError, match="neither MaxNodes nor MaxProcs"):
        from_header(None, None, "x")


def test_cpusets_scheduler_side_runs_in_a_simulation_and_its_host_events_do_not(tmp_path,
                                                                                capsys):
    """cpuset's octant placement, starvation drain and stuck-cpuset answers are decisions:
    declared sim_safe, they run in every cycle; its host events make real cgroups and are
    left out, each named."""
    from pbsplug.testing import site_toml

    trace = swf(tmp_path, [(1, 0, 100, 2, 100), (2, 0, 100, 3, 200)])
    site = tmp_path / "site.toml"
    site.write_text(site_toml("cpuset"))
    code, stdout, err = run_cli(capsys, "--site", str(site), "sim", "run", str(trace),
                                "--out", str(tmp_path / "o"), "--no-plots")
    assert code == 0, err
    assert "\nhooks:\n  ran: cpuset " in stdout  # (no trailing space after hooks:)
    for hook in ("sched_job_order", "sched_node_placement", "sched_node_availability"):
        assert f"ran: cpuset {hook} (in every scheduling cycle)" in stdout
    for event in ("execjob_begin", "execjob_launch", "execjob_end"):
        assert f"left out: cpuset {event}: not declared sim_safe by the plugin" in stdout
    assert "jobs: 2 finished" in stdout


@pytest.mark.parametrize("text,message", [
    ("[sim]\nscheduler = 3\n", "[sim.scheduler]: 3: expected a table of policy settings"),
    ("[sim]\nserver = [1, 2]\n", "[sim.server]: [1, 2]: expected a table of server "
                                  "attributes"),
    ("[sim.server]\nresources_default = 5\n",
     "[sim.server].resources_default = 5: Illegal attribute or resource value"),
    ("[sim.server]\nresources_default = {walltime = 'abc'}\n",
     "Illegal attribute or resource value resources_default.walltime"),
    ("[sim.server]\nbogus = 1\n", "[sim.server].bogus = 1: Undefined attribute"),
    ("[sim.server]\nserver_state = 'Idle'\n", "[sim.server].server_state: the server sets it"),
    ("[sim.server]\nstrict_ordering = true\n", "[sim.server].strict_ordering: a scheduler "
                                               "policy setting, not a server attribute"),
    ("[sim.sched.a]\npartition = 'p1'\ncolour = 1\n", "[sim.sched.a]"),
    ("[sim.sched.a]\npartition = 'p1'\njob_sort_formula = 'ncpus +* 2'\n",
     "[sim.sched.a]: job_sort_formula 'ncpus +* 2' is not an expression"),
    ("[sim.scheduler]\nbackfill_depth = -3\n",
     "backfill_depth=-3: expected a whole number from 0 to 2147483647"),
    ("[sim.scheduler]\nnode_sort_key = 'ncpus UP'\n", "expected 'key', 'key HIGH' or"),
    ("[sim.scheduler]\njob_sort_formula = 'ncpus +* 2'\n",
     "[sim.scheduler]: job_sort_formula 'ncpus +* 2' is not an expression"),
    ("[plugins.powr]\nenabled = true\n", "[plugins.powr]: no installed plugin is named "
                                         "'powr'"),
])
def test_bad_site_tables_are_errors_naming_the_file_and_the_key(tmp_path, capsys, text,
                                                                message):
    trace = swf(tmp_path, [(1, 0, 10, 1, 10)])
    site = tmp_path / "s.toml"
    site.write_text(text)
    code, _, err = run_cli(capsys, "sim", "run", str(trace), "--site", str(site),
                           "--no-plots", "--out", str(tmp_path / "o"))
    assert code == 2 and err.startswith("pbsplug: error: ") and "Traceback" not in err, err
    assert message in err and (str(site) in err or "plugin" in err), err


def test_an_enabled_plugin_that_cannot_load_stops_the_replay(tmp_path, capsys):
    """A power plugin with a bad key would be left out: the replay would not measure what
    the site asked for. It is an error, not a warning."""
    pytest.importorskip("pbsplug_power")
    trace = swf(tmp_path, [(1, 0, 10, 1, 10)])
    site = tmp_path / "s.toml"
    site.write_text("[plugins.power]\nenabled = true\n[plugins.power.config]\nbogus = 1\n")
    code, _, err = run_cli(capsys, "sim", "run", str(trace), "--site", str(site),
                           "--no-plots", "--out", str(tmp_path / "o"))
    assert code == 2 and "plugin 'power': bad configuration" in err and "bogus" in err


def test_a_site_state_dir_replays_as_the_default_and_its_folder_is_not_touched(tmp_path,
                                                                               capsys):
    """`sim compare` of a site that keeps the power plugin's state folder the default (A)
    with one that sets it to a live site's folder (B): the same results, hosts powered off
    in both; B's report says the replay kept its own folder, and the live folder stays
    empty. B's replay used to see no host power off (the driver's record was in the live
    folder, the simulator reads its own) and wrote the driver's records in the live one."""
    from pbsplug.testing import require_module

    require_module("pbsplug_power")
    trace = swf(tmp_path, [(1, 0, 10, 1, 10), (2, 5000, 10, 1, 10), (3, 9000, 10, 1, 10)])
    live = tmp_path / "live"
    live.mkdir()
    power = ("[plugins.power]\nenabled = true\nisolation = 'inprocess'\nfreq = 300\n"
             "[plugins.power.config]\ndriver = 'simulated'\npower_on_off_enable = 'True'\n"
             "node_idle_limit = '600'\nmin_node_down_delay = '600'\n")
    (tmp_path / "a.toml").write_text(power)
    (tmp_path / "b.toml").write_text(power + f"state_dir = {json.dumps(str(live))}\n")
    out = tmp_path / "o"
    code, stdout, err = run_cli(capsys, "sim", "compare", str(trace), "--site",
                                str(tmp_path / "a.toml"), "--site", str(tmp_path / "b.toml"),
                                "--no-plots", "--out", str(out))
    assert code == 0, err
    a, b = stdout.split("== b (")
    note = f"  state folder: power state_dir {live} (the site's) left for the replay's own " \
        "work folder"
    assert note in b.splitlines() and "state folder" not in a
    metrics = [json.loads((out / run / "metrics.json").read_text()) for run in "ab"]
    assert metrics[0] == metrics[1]
    assert metrics[0]["node_hours_off"] > 0 and metrics[0]["power_cycles"] > 0
    assert list(live.iterdir()) == []


def test_no_plugin_is_configured_with_the_sites_state_folder(tmp_path, dists, cli):
    """`pbsplug sim compare`, each site's plugins loaded twice (checked before either run,
    then for its run): a plugin's configure is given its state folder's empty default
    every time, never the live folder the site set, which a configure may make or open.
    The plugins were loaded with the site's folder and configured with it, the replay's
    override coming only after: this plugin made the live folder."""
    said = tmp_path / "configured"
    dists.add("keeps", f"""
        import os
        from pbsplug import PluginInfo, Setting, hookimpl

        plugin_info = PluginInfo(api="1.13", events=("periodic",), sim_safe=("periodic",),
                                 config={{"records": Setting(str, "", state_folder=True)}})

        @hookimpl
        def configure(config):
            with open({str(said)!r}, "a") as out:
                out.write(repr(config["records"]) + "\\n")
            if config["records"]:
                os.makedirs(config["records"], exist_ok=True)

        @hookimpl
        def periodic(event):
            pass
        """)
    live = tmp_path / "live"
    plugin = "[plugins.keeps]\nenabled = true\nisolation = 'inprocess'\n"
    (tmp_path / "a.toml").write_text(plugin)
    (tmp_path / "b.toml").write_text(plugin + f"[plugins.keeps.config]\nrecords = "
                                              f"{json.dumps(str(live))}\n")
    trace = swf(tmp_path, [(1, 0, 10, 1, 10)])
    done = cli("sim", "compare", str(trace), "--site", str(tmp_path / "a.toml"), "--site",
               str(tmp_path / "b.toml"), "--no-plots", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    assert f"state folder: keeps records {live} (the site's) left for the replay's own " \
        "work folder" in done.stdout
    # Each site checked (one configure), then each run: loaded in the replay's home, and
    # not configured again while it runs nor after (`private_state_folders`).
    assert said.read_text().splitlines() == ["''"] * 4 and not live.exists()


@pytest.mark.parametrize("command", ["run", "compare"])
def test_a_configure_that_reads_the_home_has_the_replays_folder(tmp_path, dists, cli, home,
                                                                 command):
    """The plugins load and are configured with the replay's work folder already the
    pbsplug home (for `sim compare`, each site's check before either run too): a
    configure that reads its empty state folder as <home>/hooks/tmp, as plugin authors
    are told to expect, makes the replay's folder, the one its hooks then see, and
    nothing in the live home. The plugins were loaded before the work folder became the
    home: configure made the live home's hooks/tmp."""
    said = tmp_path / "said"
    dists.add("homes", f"""
        import os
        from pbsplug import PluginInfo, Setting, default_home, hookimpl

        plugin_info = PluginInfo(api="1.13", events=("periodic",), sim_safe=("periodic",),
                                 config={{"records": Setting(str, "", state_folder=True)}})

        def folder(config):
            return config["records"] or str(default_home() / "hooks" / "tmp")

        @hookimpl
        def configure(config):
            os.makedirs(folder(config), exist_ok=True)
            with open({str(said)!r}, "a") as out:
                out.write("configure " + folder(config) + "\\n")

        @hookimpl
        def periodic(event):
            with open({str(said)!r}, "a") as out:
                out.write("periodic " + folder(event.hook_config) + "\\n")
        """)
    (tmp_path / "a.toml").write_text("[plugins.homes]\nenabled = true\n"
                                     "isolation = 'inprocess'\nfreq = 60\n")
    (tmp_path / "b.toml").write_text((tmp_path / "a.toml").read_text())
    trace = swf(tmp_path, [(1, 0, 600, 1, 600)])
    scratch = tmp_path / "scratch"  # (where a replay makes its work folder: TMPDIR)
    scratch.mkdir()
    sites = ["--site", str(tmp_path / "a.toml")]
    if command == "compare":
        sites += ["--site", str(tmp_path / "b.toml")]
    done = cli("sim", command, str(trace), *sites, "--no-plots", "--out", str(tmp_path / "o"),
               TMPDIR=str(scratch))
    assert done.returncode == 0, done.stderr
    lines = [line.split(" ", 1) for line in said.read_text().splitlines()]
    configured = [path for what, path in lines if what == "configure"]
    # Each run: loaded in its home, not configured again while it runs nor after it
    # (`private_state_folders`); compare: each site's check first.
    assert len(configured) == (1 if command == "run" else 4)
    for path in configured:  # a work folder's: pbsplug-sim-*/hooks/tmp under TMPDIR
        work = Path(path).parent.parent
        assert work.parent == scratch and work.name.startswith("pbsplug-sim-"), path
    # Each run's hooks see the folder its configure made (the run's own, each in turn).
    runs = configured[-1:] if command == "run" else configured[2:]
    periodic = [path for what, path in lines if what == "periodic"]
    assert set(periodic) == set(runs), lines
    assert not (home / "hooks").exists()
    assert list(scratch.iterdir()) == []  # (every work folder removed)


@pytest.mark.parametrize("driver", ["command", None])
def test_a_power_driver_that_switches_real_hosts_is_refused_before_it_runs(tmp_path, capsys,
                                                                          driver):
    """The power plugin's hooks are safe in a replay only with the simulated driver: the
    site's production config (its command, or the default capmc) would switch the real
    hosts' power from the replaying machine. The replay is refused, naming the plugin and
    the setting; the command never ran."""
    from pbsplug.testing import require_module

    require_module("pbsplug_power")
    ran = tmp_path / "EXECUTED"
    trace = swf(tmp_path, [(1, 0, 10, 1, 10), (2, 5000, 10, 1, 10), (3, 9000, 10, 1, 10)])
    command = f'["/bin/sh", "-c", "echo {{hosts}} >> {ran}", "x"]'
    site = tmp_path / "s.toml"
    site.write_text(
        "[plugins.power]\nenabled = true\nisolation = 'inprocess'\nfreq = 300\n"
        "[plugins.power.config]\npower_on_off_enable = 'True'\nnode_idle_limit = '600'\n"
        "min_node_down_delay = '600'\n" + (
            f"driver = '{driver}'\npower_off_command = {command}\n"
            f"power_on_command = {command}\nstatus_command = {command}\n"
            if driver else ""))
    assert run_cli(capsys, "sim", "run", str(trace), "--no-plots", "--out",
                   str(tmp_path / "o"))[0] == 0  # an earlier run's results
    before = {p.name: p.read_bytes() for p in (tmp_path / "o").iterdir()}
    code, out, err = run_cli(capsys, "sim", "run", str(trace), "--site", str(site),
                             "--no-plots", "--out", str(tmp_path / "o"))
    assert code == 2, (out, err)
    assert f"plugin power: driver {driver or 'capmc'!r} switches real hosts" in err
    assert 'driver = "simulated"' in err and len(err.strip().splitlines()) == 1
    assert not ran.exists()
    assert {p.name: p.read_bytes() for p in (tmp_path / "o").iterdir()} == before


def test_out_is_any_folder_name_but_the_empty_one():
    from pbsplug.cli.sim import CliError, _out_dir

    assert _out_dir(" ") == Path(" ")
    with pytest.raises(CliError, match="--out '': expected a directory"):
        _out_dir("")


def test_a_job_id_still_in_the_system_is_an_error_naming_the_line(tmp_path, capsys):
    trace = swf(tmp_path, [(1, 0, 100, 1, 100), (1, 5, 100, 1, 100)])
    code, _, err = run_cli(capsys, "sim", "run", str(trace), "--no-plots",
                           "--out", str(tmp_path / "o"))
    assert code == 2
    assert err.strip() == (f"pbsplug: error: {trace}:4: job 1: a job with this id is still "
                           "queued or running; job ids must be unique")


def test_a_job_id_still_in_the_system_names_the_file_of_a_folder_and_can_be_skipped(
        tmp_path, capsys):
    """In a folder of PBS accounting files the error named the folder; --skip-bad could
    not skip such a job (it stopped the replay)."""
    acct = tmp_path / "accounting"
    acct.mkdir()
    rec = ("11/20/2026 10:{m}:00;E;{job}.srv;user=u queue=workq qtime={q} start={q} "
           "end={e} Resource_List.ncpus=1 Resource_List.walltime=600 Exit_status=0\n")
    (acct / "20261120").write_text(rec.format(m=10, job=1, q=1000, e=1500))
    (acct / "20261121").write_text(rec.format(m=20, job=2, q=1001, e=1100)
                                   + rec.format(m=30, job=1, q=1010, e=1200))
    out = tmp_path / "o"
    code, _, err = run_cli(capsys, "sim", "run", str(acct), "--nodes", "4", "--no-plots",
                           "--out", str(out))
    assert code == 2
    assert err.strip() == (f"pbsplug: error: {acct / '20261121'}:2: job 1.srv: a job with "
                           "this id is still queued or running; job ids must be unique")
    code, stdout, err = run_cli(capsys, "sim", "run", str(acct), "--nodes", "4", "--no-plots",
                                "--skip-bad", "--out", str(out))
    assert code == 0, err
    assert "jobs: 2 finished, 0 rejected" in stdout
    assert "trace: 1 malformed lines skipped (--skip-bad); the first:" in stdout
    assert f"  {acct / '20261121'}:2: job 1.srv: a job with this id" in stdout
    assert len((out / "out_jobs.csv").read_text().splitlines()) == 3


def test_compare_reads_both_sites_first_and_names_its_runs_safely(tmp_path, capsys):
    trace = swf(tmp_path, [(1, 0, 10, 1, 10)])
    (tmp_path / "a.toml").write_text("")
    (tmp_path / "bad.toml").write_text("[sim.scheduler]\nbackfill_depth = -1\n")
    out = tmp_path / "cmp" / "here"
    for second in ("nope.toml", "bad.toml"):
        code, _, err = run_cli(capsys, "sim", "compare", str(trace), "--site",
                               str(tmp_path / "a.toml"), "--site", str(tmp_path / second),
                               "--no-plots", "--out", str(out))
        assert code == 2 and second in err and not out.exists(), err
    (tmp_path / "...toml").write_text("")  # its stem, "..", would be out's parent
    code, _, err = run_cli(capsys, "sim", "compare", str(trace), "--site",
                           str(tmp_path / "a.toml"), "--site", str(tmp_path / "...toml"),
                           "--no-plots", "--out", str(out))
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["A", "B", "compare.json", "compare.txt"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["here"]


def test_extended_swf_requests_and_skipped_lines(tmp_path, capsys):
    """nodes=2:ppn=2 is Torque's form: 2 chunks of 2 cpus, as PBS converts it; a chunk's
    mem is dropped on a machine that declares no memory (it would refuse every such job);
    a request that is no select is a bad line, shown with --skip-bad."""
    trace = tmp_path / "x.swf"
    tail = "-1 1 1 1 -1 q -1 -1 -1"
    trace.write_text("; MaxNodes: 4\n; MaxProcs: 8\n"
                     f"1 0 0 10 4 -1 -1 4 10 {tail} nodes=2:ppn=2\n"
                     f"2 1 0 10 1 -1 -1 1 10 {tail} 1:ncpus=1:mem=2gb\n"
                     f"3 2 0 10 1 -1 -1 1 10 {tail} 1:ncpus=x\n")
    out = tmp_path / "o"
    code, _, err = run_cli(capsys, "sim", "run", str(trace), "--no-plots", "--out", str(out))
    assert code == 2 and err.startswith(f"pbsplug: error: {trace}:5: select") and "'x'" in err
    code, stdout, err = run_cli(capsys, "sim", "run", str(trace), "--no-plots", "--skip-bad",
                                "--out", str(out))
    assert code == 0, err
    assert "jobs: 2 finished, 0 rejected" in stdout
    assert "trace: 1 malformed lines skipped (--skip-bad); the first:" in stdout
    assert f"  {trace}:5: select" in stdout
    rows = (out / "out_jobs.csv").read_text().splitlines()
    assert len(rows) == 3


def test_rejected_jobs_say_why_in_the_report_the_metrics_and_out_jobs(tmp_path, capsys):
    """A job the replay rejects was silent (no reason anywhere). A chunk resource the
    platform has none of (ngpus, a site's own `foo`) is kept in the select, as PBS keeps
    it: such a job can never run, and the report says so, grouped by reason."""
    import csv

    acct = tmp_path / "acct"
    acct.mkdir()
    rec = ("11/20/2026 10:30:00;E;{job}.srv;user=u queue=workq qtime=1000 start=1100 "
           "end=1700 Resource_List.select={select} Resource_List.walltime=01:00:00 "
           "Exit_status=0\n")
    (acct / "20261120").write_text("".join(rec.format(job=j, select=s) for j, s in (
        (1, "1:ncpus=2:ngpus=1"), (2, "1:ncpus=2"), (3, "1:ncpus=2:foo=1"),
        (4, "1:ncpus=200"), (5, "1:ncpus=300"))))
    out = tmp_path / "o"
    code, stdout, err = run_cli(capsys, "sim", "run", str(acct), "--nodes", "2",
                                "--cpus-per-node", "4", "--no-plots", "--out", str(out))
    assert code == 0, err
    assert "jobs: 1 finished, 4 rejected" in stdout
    never = "Can Never Run: Insufficient amount of resource: "
    assert f"rejected: 2 jobs: {never}ncpus (R: N A: N T: N)" in stdout
    assert f"rejected: 1 job: {never}ngpus (R: N A: N T: N)" in stdout
    assert f"rejected: 1 job: {never}foo (R: N A: N T: N)" in stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["rejected_reasons"] == {f"{never}ncpus (R: N A: N T: N)": 2,
                                           f"{never}ngpus (R: N A: N T: N)": 1,
                                           f"{never}foo (R: N A: N T: N)": 1}
    table = (out / "metrics.txt").read_text()
    assert f"jobs rejected, by reason:\n         2  {never}ncpus" in table
    with open(out / "out_jobs.csv", newline="") as f:
        rows = {r["job_id"]: r for r in csv.DictReader(f)}
    assert all(len(r) == 17 for r in rows.values())  # Batsim's columns, still
    assert rows["1.srv"]["metadata"] == (f'ncpus=2 queue=workq reason="{never}ngpus '
                                         '(R: 1 A: 0 T: 0)"')
    assert rows["2.srv"]["metadata"] == "ncpus=2 queue=workq"


def test_rejection_reasons_are_grouped_under_a_bounded_table(tmp_path):
    from pbsplug.sim.output import MAX_REJECT_REASONS, OTHER_REASONS, ResultWriter, reason_key
    from pbsplug.sim.records import REJECTED, JobResult, TraceJob

    assert reason_key("queuejob: job 12.srv asks 4gb, q1 allows 2.5\nmore") == (
        "queuejob: job N.srv asks Ngb, q1 allows N")
    assert reason_key(None) == reason_key("  ") == "no reason given"
    w = ResultWriter(tmp_path, cpus=1, plots=False)
    for i in range(3 * MAX_REJECT_REASONS):
        w.job(JobResult(TraceJob(str(i), 1, 0.0, 1.0, 1), REJECTED, None, 0.0,
                        reason=f"queuejob: hook{chr(65 + i % 26)}{chr(65 + i // 26)} says no"))
    w.close(0)
    reasons = w.metrics()["rejected_reasons"]
    assert len(reasons) == MAX_REJECT_REASONS + 1
    assert reasons[OTHER_REASONS] == 2 * MAX_REJECT_REASONS


def test_extended_swf_utilization_counts_the_selects_cpus(tmp_path, capsys):
    """busy_cpus said 4 while utilization and the metadata counted field 8's 1 cpu."""
    trace = tmp_path / "x.swf"
    trace.write_text("; MaxNodes: 4\n; MaxProcs: 8\n"
                     "1 0 -1 100 1 -1 -1 1 200 -1 1 1 1 -1 1 -1 -1 -1 nodes=2:ppn=2\n")
    out = tmp_path / "o"
    code, _, err = run_cli(capsys, "sim", "run", str(trace), "--no-plots", "--out", str(out))
    assert code == 0, err
    assert json.loads((out / "metrics.json").read_text())["utilization"] == 0.5  # 4 of 8
    assert (out / "out_jobs.csv").read_text().splitlines()[1].endswith(",ncpus=4 queue=1")
    assert (out / "out_series.csv").read_text().splitlines()[1] == "0,0,1,4,600"


def test_an_empty_out_is_refused(tmp_path, capsys, monkeypatch):
    """--out '' was the current directory (Path('') is '.'): results went there."""
    trace = swf(tmp_path, [(1, 0, 10, 1, 10)])
    (tmp_path / "a.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    for args in (["run", str(trace)], ["compare", str(trace), "--site", "a.toml", "--site",
                                       "a.toml"]):
        code, _, err = run_cli(capsys, "sim", *args, "--no-plots", "--out", "")
        assert code == 2 and err.strip().splitlines() == [
            "pbsplug: error: --out '': expected a directory (give --out . for the current "
            "one)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.toml", "t.swf"]


def test_a_directory_under_an_output_name_is_an_error_before_the_replay(tmp_path, capsys):
    """A folder named metrics.json failed after the whole replay, with an unprefixed
    `[Errno 21]`; in a comparison, after both runs. It is one line before any run now."""
    trace = swf(tmp_path, [(1, 0, 10, 1, 10)])
    out = tmp_path / "o"
    (out / "metrics.json").mkdir(parents=True)
    code, stdout, err = run_cli(capsys, "sim", "run", str(trace), "--no-plots", "--out",
                                str(out))
    assert code == 2 and stdout == ""
    assert err.strip().splitlines() == [
        f"pbsplug: error: {out}/metrics.json is a directory, where the run writes its file "
        "metrics.json: move it away or give another directory"]
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json"]  # nothing written
    (tmp_path / "a.toml").write_text("")
    (tmp_path / "b.toml").write_text("")
    for bad in ("b/out_jobs.csv", "compare.txt"):
        cmp = tmp_path / bad.replace("/", "_")
        (cmp / bad).mkdir(parents=True)
        code, stdout, err = run_cli(capsys, "sim", "compare", str(trace), "--site",
                                    str(tmp_path / "a.toml"), "--site",
                                    str(tmp_path / "b.toml"), "--no-plots", "--out", str(cmp))
        assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1
        assert f"{cmp / bad} is a directory" in err
        assert not (cmp / "a").exists()  # A did not run first


def test_server_attributes_keep_qmgrs_spelling():
    """[sim.server] names match without regard to case, as qmgr's do, and are stored as
    qmgr spells them (else the server would hold a name nothing reads)."""
    from pbsplug.cli.sim import _server_attrs

    assert _server_attrs({"Resources_Default": {"walltime": "00:00:30"}, "BACKFILL_DEPTH": 5,
                          "scheduling": False}, "s.toml: [sim.server]") == {
        "resources_default": {"walltime": "00:00:30"}, "backfill_depth": 5,
        "scheduling": False}


def test_a_selects_memory_is_left_out_on_a_machine_without_memory(tmp_path, capsys):
    from pbsplug.sim.engine import _without_mem

    assert _without_mem("2:mem=4gb") == "2:ncpus=1"  # a chunk of memory only: one cpu
    assert _without_mem("1:ncpus=2:MEM=4gb:vmem=1gb+1:pmem=2gb") == "1:ncpus=2+1:ncpus=1"
    assert _without_mem("3:ncpus=2") == "3:ncpus=2"


@pytest.mark.parametrize("command", ["run", "compare"])
def test_sigterm_ends_a_replay_through_its_clean_up(tmp_path, command):
    """A batch system's time limit or a kill ends `sim run`, and `sim compare` in its
    first run, as Ctrl-C does: the replay's work folder (under TMPDIR here) is removed,
    and the exit status says SIGTERM."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from pbsplug.testing import require_module

    require_module("pbsplug_power")
    # Long enough to be running when the signal comes (tens of seconds): 50,000 jobs.
    trace = tmp_path / "long.swf"
    trace.write_text("; MaxNodes: 16\n; MaxProcs: 16\n" + "".join(
        f"{j} {j * 60} 0 {300 + j % 7 * 100} {1 + j % 4} -1 -1 {1 + j % 4} 900 -1 1 1 1 -1 "
        "1 -1 -1 -1\n" for j in range(1, 50_001)))
    site = tmp_path / "s.toml"
    site.write_text("[plugins.power]\nenabled = true\nisolation = 'inprocess'\n"
                    "[plugins.power.config]\ndriver = 'simulated'\n"
                    "power_on_off_enable = 'True'\n")
    sites = ["--site", str(site)]
    if command == "compare":  # (B: the same site under another name)
        other = tmp_path / "s2.toml"
        other.write_text(site.read_text())
        sites += ["--site", str(other)]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    code = "import sys\nfrom pbsplug.cli import main\nsys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "sim", command, str(trace), *sites,
                             "--no-plots", "--out", str(tmp_path / "o")],
                            env={**os.environ, "TMPDIR": str(scratch)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        # The platform file in the work folder: the replay is running (the folder itself
        # is made before the plugins load).
        while not any(scratch.glob("*/hooks/tmp/*")):
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "no work folder appeared"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    assert list(scratch.iterdir()) == []


TRACES = Path("/work/shared/data/traces")


def needs_traces() -> None:
    """The shared traces, or `missing` (a skip here, a failure under CI: a skip there
    would pass for done)."""
    if not TRACES.exists():
        missing(f"the shared traces are not on this machine ({TRACES})")


DOC = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"


def test_the_docs_worked_example_is_what_the_command_prints(tmp_path, capsys, monkeypatch):
    """docs/simulator.md's KTH-SP2 example: the command, what it prints (but the time it
    took) and kth/metrics.txt, as the doc shows them; the plots it shows are there."""
    needs_traces()
    text = DOC.read_text()
    example = text[text.index("A worked example, KTH-SP2"):]
    blocks = example.split("```")
    shown, table = blocks[1].strip().splitlines(), blocks[3].strip() + "\n"
    command = shown[0].removeprefix("$ ").split()
    assert command[:3] == ["pbsplug", "sim", "run"]
    (tmp_path / command[3]).symlink_to(TRACES / command[3])
    monkeypatch.chdir(tmp_path)
    code, stdout, err = run_cli(capsys, *command[1:])
    assert code == 0, err
    printed = stdout.strip().splitlines()
    assert [line for line in printed if not line.startswith("time: ")] == \
        [line for line in shown[1:] if not line.startswith("time: ")]
    assert (tmp_path / "kth" / "metrics.txt").read_text() == table
    for image in ("utilization", "power_states", "wait_cdf"):
        assert f"(simulator/kth-easy-{image}.png)" in example
        assert (DOC.parent / "simulator" / f"kth-easy-{image}.png").is_file()
        assert (tmp_path / "kth" / f"{image}.png").is_file()
