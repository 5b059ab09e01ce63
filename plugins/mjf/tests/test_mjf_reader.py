"""`read_features` and `time_left`, as payloads use them: local directories and HTTP."""

from __future__ import annotations

import re
import socket
import time

import pytest

from pbsplug_mjf import MJFError, read_features, this_host, time_left
from pbsplug_mjf.serve import serve

HOST = this_host()

GLIDEIN_INTEGER = re.compile(r"^-?[0-9]+$")  # check_wn_drainstate.sh's test of a time


@pytest.fixture
def features(hook, base):
    """A host and a job made by the hooks themselves."""
    hook("exechost_startup", {"vnode_list": {HOST: {"resources_available": {"ncpus": 8}}}},
         hs06=100.0, grace_secs=3600, grace_secs_job=600)
    job = {"id": "5.server", "stime": int(time.time()), "exec_vnode": f"({HOST}:ncpus=3)",
           "Resource_List": {"walltime": "02:00:00", "cput": "06:00:00", "mem": "3gb"}}
    hook("execjob_begin", {"job": job, "vnode_list": {HOST: {}}})
    return base / "machinefeatures" / HOST, base / "jobfeatures" / "5.server", job


def test_values_come_back_typed(features):
    machine_dir, job_dir, job = features
    assert read_features(str(machine_dir)) == {"total_cpu": 8, "hs06": 100.0,
                                               "grace_secs": 3600}
    values = read_features(str(job_dir))
    assert values == {"allocated_cpu": 3, "hs06_job": 37.5, "grace_secs_job": 600,
                      "jobstart_secs": job["stime"], "job_id": "5.server",
                      "wall_limit_secs": 7200, "cpu_limit_secs": 21600,
                      "max_rss_bytes": 3 << 30}
    assert isinstance(values["hs06_job"], float) and isinstance(values["job_id"], str)


def test_every_time_value_passes_glideinwms_check(features):
    machine_dir, job_dir, _ = features
    for directory in (machine_dir, job_dir):
        for path in directory.iterdir():
            if path.name not in ("hs06", "hs06_job", "job_id"):
                assert GLIDEIN_INTEGER.match(path.read_text().strip()), path


def test_static_keys_are_read_once_and_dynamic_ones_every_call(features):
    machine_dir, job_dir, _ = features
    assert "shutdowntime_job" not in read_features(str(job_dir))
    (job_dir / "wall_limit_secs").write_text("1\n")
    (job_dir / "shutdowntime_job").write_text("1900000000\n")
    (machine_dir / "shutdowntime").write_text("1900000100\n")
    again = read_features(str(job_dir))
    assert again["wall_limit_secs"] == 7200  # static: as first read
    assert again["shutdowntime_job"] == 1900000000  # dynamic: read again
    assert read_features(str(machine_dir))["shutdowntime"] == 1900000100
    (job_dir / "shutdowntime_job").unlink()
    assert "shutdowntime_job" not in read_features(str(job_dir) + "/")  # same location


def test_only_the_keys_asked_for(features):
    _, job_dir, _ = features
    assert read_features(str(job_dir), ["allocated_cpu", "hs06"]) == {"allocated_cpu": 3}


@pytest.mark.parametrize(("key", "text", "message"), [
    ("shutdowntime_job", "1.9e9\n", r"/shutdowntime_job: '1.9e9' is not an integer"),
    ("wall_limit_secs", "\n", r"/wall_limit_secs: '' is not an integer"),
    ("job_id", "5 server\n", r"/job_id: '5 server' is not printable ASCII"),
    ("hs06_job", "fast\n", r"/hs06_job: 'fast' is not a decimal number"),
])
def test_a_malformed_value_is_an_error_naming_the_location_and_key(base, key, text, message):
    (base / key).write_text(text)
    with pytest.raises(MJFError, match=re.escape(str(base)) + message):
        read_features(str(base))


def test_a_location_must_be_a_path_or_a_url():
    with pytest.raises(MJFError, match="'machinefeatures' is neither an absolute path nor"):
        read_features("machinefeatures")


# -- DIRAC's arithmetic -----------------------------------------------------------------------

NOW = 1_800_000_000


@pytest.mark.parametrize(("machine", "job", "expected"), [
    ({}, {"jobstart_secs": NOW - 100, "wall_limit_secs": 3600}, 3500),
    ({"shutdowntime": NOW + 600}, {"jobstart_secs": NOW - 100, "wall_limit_secs": 3600}, 600),
    ({"shutdowntime": NOW + 600}, {"jobstart_secs": NOW, "wall_limit_secs": 3600,
                                   "shutdowntime_job": NOW + 300}, 300),
    ({}, {"shutdowntime_job": NOW + 10}, 10),
    ({}, {"jobstart_secs": NOW - 4000, "wall_limit_secs": 3600}, -400),  # overrun
    ({}, {"jobstart_secs": NOW}, None),  # no walltime: nothing known
    ({"total_cpu": 8}, {}, None),
])
def test_time_left_as_dirac_computes_it(machine, job, expected):
    assert time_left(machine, job, now=NOW) == expected


def test_time_left_from_what_the_hooks_wrote(features):
    machine_dir, job_dir, job = features
    left = time_left(read_features(str(machine_dir)), read_features(str(job_dir)))
    assert abs(left - (job["stime"] + 7200 - time.time())) <= 2


# -- over HTTP --------------------------------------------------------------------------------

@pytest.fixture
def server(base):
    running = serve(base / "machinefeatures", base / "jobfeatures", "127.0.0.1:0").start()
    yield running
    running.stop()


def test_http_reads_what_the_directories_hold(features, server):
    machine_dir, job_dir, _ = features
    url = f"{server.url}/jobfeatures/5.server"
    assert read_features(url) == read_features(str(job_dir))
    assert read_features(f"{server.url}/machinefeatures/{HOST}") == read_features(
        str(machine_dir))
    (job_dir / "shutdowntime_job").write_text("1900000000\n")
    assert read_features(url)["shutdowntime_job"] == 1900000000
    assert read_features(f"{server.url}/jobfeatures/6.server") == {}  # all 404: nothing


def test_http_that_does_not_answer_in_time_is_a_clear_error():
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/jobfeatures/1.s"
        with pytest.raises(MJFError, match=re.escape(url) + r"/\w+: no answer within 0.5 s"):
            read_features(url, timeout=0.5)


def test_http_with_nobody_listening_is_a_clear_error():
    with socket.socket() as probe:  # bound, never listening: refused, and no other
        probe.bind(("127.0.0.1", 0))  # test's server can take the port meanwhile
        port = probe.getsockname()[1]
        with pytest.raises(MJFError, match=r"http://127.0.0.1:\d+/x/\w+: Connection refused"):
            read_features(f"http://127.0.0.1:{port}/x")
