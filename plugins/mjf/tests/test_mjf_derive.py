"""Every key's derivation, as unit tests of the pure functions."""

from __future__ import annotations

import os

import pytest

from pbsplug import Job, Vnode, values
from pbsplug_mjf.derive import (
    HostError,
    MJFError,
    announced_shutdown,
    job_end,
    job_features,
    machine_features,
    swap_rule_problem,
)

GB = 1 << 30
BASE = {"hs06": None, "hs06_per_cpu": None, "grace_secs": 0, "grace_secs_job": 0,
        "scratch_resource": "", "scratch_path": "", "swap_rule": "vmem-mem"}
NOW = 1_800_000_000


def cfg(**values):
    return {**BASE, **values}


def job(exec_vnode="(n1:ncpus=4)", stime=NOW - 10, **resources):
    return Job("7.server", {"exec_vnode": exec_vnode, "stime": stime,
                            "Resource_List": resources})


def vnodes(*ncpus):
    return [Vnode(f"n{i}", {"resources_available": {"ncpus": n}}) for i, n in enumerate(ncpus)]


# -- $MACHINEFEATURES -------------------------------------------------------------------------

@pytest.mark.parametrize(("config", "cpus", "expected"), [
    (cfg(), (8, 8), {"total_cpu": 16, "grace_secs": 0}),
    (cfg(hs06=250.5), (8, 8), {"total_cpu": 16, "hs06": 250.5, "grace_secs": 0}),
    (cfg(hs06_per_cpu=12.25), (8, 8), {"total_cpu": 16, "hs06": 196, "grace_secs": 0}),
    (cfg(hs06_per_cpu=10.0), (), {"grace_secs": 0}),  # no CPUs known: no total, no rating
    (cfg(grace_secs=3600), (4,), {"total_cpu": 4, "grace_secs": 3600}),
    (cfg(grace_secs=0), (4,), {"total_cpu": 4, "grace_secs": 0}),
])
def test_machine_features(config, cpus, expected):
    assert machine_features(config, vnodes(*cpus)) == expected


def test_a_vnode_without_ncpus_counts_nothing_and_a_bad_one_is_named():
    assert machine_features(cfg(), [Vnode("a", {}), *vnodes(2)]) == {"total_cpu": 2,
                                                                     "grace_secs": 0}
    with pytest.raises(MJFError, match=r"vnode n0: resources_available.ncpus = 'many'"):
        machine_features(cfg(), vnodes("many"))
    for text in ("\u0661\u0662", "1_0", "\u00b2"):  # digits int() reads, or not at all
        with pytest.raises(MJFError, match=r"resources_available.ncpus = .* not an integer"):
            machine_features(cfg(), vnodes(text))
    assert machine_features(cfg(), vnodes("12"))["total_cpu"] == 12


# -- $JOBFEATURES -----------------------------------------------------------------------------

def test_a_plain_job():
    features = job_features(cfg(), job(walltime="01:30:00", cput="02:00:00", mem="4gb"),
                            ["n1"], NOW)
    assert features == {"job_id": "7.server", "allocated_cpu": 4, "jobstart_secs": NOW - 10,
                        "wall_limit_secs": 5400, "cpu_limit_secs": 7200,
                        "max_rss_bytes": 4 * GB, "grace_secs_job": 0}


def test_keys_whose_value_is_unknown_are_absent_never_zero():
    features = job_features(cfg(), job(exec_vnode="(n1)", stime=None), ["n1"], NOW)
    # grace_secs_job is known (no grace, by default), and always there (test_grace_keys_...).
    assert features == {"job_id": "7.server", "jobstart_secs": NOW, "grace_secs_job": 0}
    for key in ("allocated_cpu", "hs06_job", "wall_limit_secs", "cpu_limit_secs",
                "max_rss_bytes", "max_swap_bytes", "scratch_limit_bytes", "shutdowntime_job"):
        assert key not in features


@pytest.mark.parametrize(("value", "expected"), [
    ("4gb", 4 * GB), ("512mb", 512 << 20), ("100kb", 102400), ("1kw", 8192), ("2048", 2048),
    ("1tb", 1 << 40),
])
def test_sizes_are_bytes(value, expected):
    assert job_features(cfg(), job(mem=value), ["n1"], NOW)["max_rss_bytes"] == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("10:00", 600), ("00:00:45", 45), ("3600", 3600), (90, 90), ("1:00:00.5", 3600)])
def test_times_are_integer_seconds(value, expected):
    features = job_features(cfg(), job(walltime=value), ["n1"], NOW)
    assert features["wall_limit_secs"] == expected
    assert isinstance(features["wall_limit_secs"], int)


def test_a_multi_chunk_job_counts_the_chunks_on_this_host_only():
    two_hosts = job(exec_vnode="(n1:ncpus=2:mem=2gb)+(n2:ncpus=3:mem=1gb)+(n3:ncpus=8)",
                    mem="11gb", ncpus=13)
    here = job_features(cfg(), two_hosts, ["n1", "n2"], NOW)
    assert (here["allocated_cpu"], here["max_rss_bytes"]) == (5, 3 * GB)
    other = job_features(cfg(), two_hosts, ["n3"], NOW)
    # n3's chunk has no mem, and the job-wide 11gb is not this host's share: unknown.
    assert other["allocated_cpu"] == 8 and "max_rss_bytes" not in other


def test_the_job_wide_value_stands_in_when_all_chunks_are_here():
    one_host = job(exec_vnode="(n1)+(n2)", ncpus=6, mem="6gb")
    features = job_features(cfg(), one_host, ["n1", "n2"], NOW)
    assert (features["allocated_cpu"], features["max_rss_bytes"]) == (6, 6 * GB)


@pytest.mark.parametrize(("config", "host_total", "expected"), [
    (cfg(hs06_per_cpu=10.5), None, 42),
    (cfg(hs06=320.0), 32, 40),
    (cfg(hs06=100.0), 3, 133.333),
    (cfg(hs06=320.0), None, None),  # the host's total is not known yet
    (cfg(), 32, None),
])
def test_hs06_job_per_cpu_and_total(config, host_total, expected):
    features = job_features(config, job(), ["n1"], NOW, host_total_cpu=host_total)
    assert features.get("hs06_job") == expected


@pytest.mark.parametrize(("rule", "resources", "expected"), [
    ("vmem-mem", {"mem": "4gb", "vmem": "6gb"}, 2 * GB),
    ("vmem-mem", {"mem": "4gb", "vmem": "3gb"}, 0),
    ("vmem-mem", {"mem": "4gb"}, None),
    ("vmem-mem", {"vmem": "4gb"}, None),
    ("none", {"mem": "4gb", "vmem": "6gb"}, None),
    ("0.5*mem", {"mem": "4gb"}, 2 * GB),
    ("2 * mem", {"mem": "1gb"}, 2 * GB),
    ("0.5*mem", {}, None),
    ("1gb", {}, GB),
])
def test_swap_rules(rule, resources, expected):
    features = job_features(cfg(swap_rule=rule), job(**resources), ["n1"], NOW)
    assert features.get("max_swap_bytes") == expected


@pytest.mark.parametrize(("rule", "ok"), [
    ("vmem-mem", True), ("none", True), ("0.25*mem", True), ("4gb", True), ("mem", False),
    ("vmem", False), ("-1*mem", False), ("lots", False), ("1000*mem", True),
    ("1000.5*mem", False), ("9" * 400 + "*mem", False),  # inf * mem: every begin raised
    ("\u0661*mem", False), ("0.5*mem\u2003", False)])  # ASCII digits and spaces only
def test_swap_rule_validation(rule, ok):
    assert (swap_rule_problem(rule) is None) is ok


def test_scratch_from_a_resource_or_the_file_system(tmp_path):
    config = cfg(scratch_resource="scratch", scratch_path=str(tmp_path))
    assert job_features(config, job(scratch="10gb"), ["n1"], NOW)[
        "scratch_limit_bytes"] == 10 * GB
    fs = os.statvfs(tmp_path)
    assert job_features(config, job(), ["n1"], NOW)["scratch_limit_bytes"] == (
        fs.f_blocks * fs.f_frsize)
    assert "scratch_limit_bytes" not in job_features(cfg(), job(scratch="1gb"), ["n1"], NOW)
    with pytest.raises(HostError, match=r"scratch_path = '/nonexistent/x': No such file"):
        job_features(cfg(scratch_path="/nonexistent/x"), job(), ["n1"], NOW)


@pytest.mark.parametrize(("resources", "exec_vnode", "message"), [
    ({"walltime": "soon"}, "(n1)", r"job 7.server: Resource_List.walltime = 'soon' is not a "
                                   r"duration \(\[\[HH:\]MM:\]SS\)"),
    ({"cput": "1:2:3:4"}, "(n1)", r"Resource_List.cput = '1:2:3:4' is not a duration"),
    ({"mem": "4 gigs"}, "(n1)", r"Resource_List.mem = '4 gigs' is not a size"),
    ({}, "(n1:mem=lots)", r"exec_vnode mem='lots' is not a size"),
    ({}, "(n1:ncpus=two)", r"exec_vnode ncpus='two' is not an integer"),
    ({}, "(n1:ncpus=\u0661\u0662)", r"exec_vnode ncpus='\u0661\u0662' is not an integer"),
    ({}, "(n1:ncpus=1_0)", r"exec_vnode ncpus='1_0' is not an integer"),
])
def test_a_value_that_does_not_parse_names_the_job_the_resource_and_the_value(
        resources, exec_vnode, message):
    with pytest.raises(MJFError, match=message):
        job_features(cfg(), job(exec_vnode=exec_vnode, **resources), ["n1"], NOW)


def test_grace_and_a_drain_already_set_when_the_job_starts():
    features = job_features(cfg(grace_secs_job=600), job(walltime="01:00:00"), ["n1"], NOW,
                            host_shutdowntime=NOW + 100)
    assert features["grace_secs_job"] == 600
    # Set before the job starts, so no grace applies: the host's shutdown, sooner than the end.
    assert features["shutdowntime_job"] == NOW + 100
    later = job_features(cfg(), job(walltime="00:10:00"), ["n1"], NOW,
                         host_shutdowntime=NOW + 99999)
    assert later["shutdowntime_job"] == NOW - 10 + 600  # the job's own end is earlier
    unknown_end = job_features(cfg(), job(), ["n1"], NOW, host_shutdowntime=NOW + 50)
    assert unknown_end["shutdowntime_job"] == NOW + 50


# -- the drain's announcement to running jobs -------------------------------------------------

END = NOW + 7200


@pytest.mark.parametrize(("existing", "end", "host", "grace", "expected"), [
    (None, END, None, 600, None),              # no drain: nothing announced
    (NOW + 900, END, None, 600, None),         # undrained: removed
    (None, END, NOW + 3600, 600, NOW + 3600),  # the host's shutdown, well beyond the grace
    (None, END, NOW + 60, 600, NOW + 600),     # never sooner than the grace from now
    (None, END, NOW + 99999, 600, END),        # the job ends first
    (None, NOW + 300, NOW + 60, 600, NOW + 300),  # grace beyond the job's end: its end
    (None, None, NOW + 60, 600, NOW + 600),    # no walltime: the host's, with the grace
    (None, END, NOW + 60, None, NOW + 60),     # no grace configured
    (NOW + 600, END, NOW + 60, 600, NOW + 600),  # announced at the grace earlier: kept
    (NOW + 3600, END, NOW + 1800, 600, NOW + 1800),  # moved earlier, grace allows it
    (NOW + 3600, END, NOW + 5000, 600, NOW + 5000),  # moved later: always allowed
    (NOW + 900, END, NOW + 100, 600, NOW + 600),  # moved earlier: as early as the grace
    (NOW + 500, END, NOW + 100, 600, NOW + 500),  # the grace is past the current: kept
])
def test_announced_shutdown(existing, end, host, grace, expected):
    assert announced_shutdown(existing, end, host, grace, NOW) == expected


def test_announcing_again_changes_nothing():
    first = announced_shutdown(None, END, NOW + 60, 600, NOW)
    for later in (NOW + 120, NOW + 240, NOW + 599):
        assert announced_shutdown(first, END, NOW + 60, 600, later) == first


def test_job_end():
    assert job_end({"jobstart_secs": 100, "wall_limit_secs": 50}) == 150
    assert job_end({"jobstart_secs": 100}) is None


def test_a_share_of_hs06_that_would_be_written_as_0_is_refused():
    with pytest.raises(MJFError, match=r"job 7.server: hs06_job: hs06 = 0.001 shared over "
                                       r"total_cpu 64 gives 6.25e-05 for 4 cpus, which is 0"):
        job_features(cfg(hs06=0.001), job(), ["n1"], NOW, host_total_cpu=64)


@pytest.fixture
def server_resources():
    """The server's custom resources, as the engine tells the kernel before each event."""
    def use(table):
        values.use_resources(table)
    yield use
    values.use_resources(None)


def test_scratch_resource_the_server_does_not_define_is_the_hosts_error(server_resources):
    server_resources({"scratch": "size"})
    with pytest.raises(HostError, match=r"^scratch_resource = 'scratchh': the server defines "
                                        r"no such resource"):
        job_features(cfg(scratch_resource="scratchh"), job(), ["n1"], NOW)


def test_scratch_resource_that_is_not_a_size_is_the_hosts_error_not_the_jobs(
        server_resources):
    server_resources({"scratch": "string"})
    with pytest.raises(HostError, match=r"^scratch_resource = 'scratch' is a string resource, "
                                        r"not a size: job 7.server: Resource_List.scratch = "
                                        r"'fast' is not a size"):
        job_features(cfg(scratch_resource="scratch"), job(scratch="fast"), ["n1"], NOW)
    # A size resource: the job's value, had the server let a bad one through, is the job's.
    server_resources({"scratch": "size"})
    with pytest.raises(MJFError, match=r"Resource_List.scratch = 'fast' is not a size"):
        job_features(cfg(scratch_resource="scratch"), job(scratch="fast"), ["n1"], NOW)
