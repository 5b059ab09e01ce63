"""``pbsplug mjf drain | undrain | show | time-left | serve``, run as commands."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from pbsplug.testing import ctrl_c_works, until
from pbsplug_mjf import read_features, this_host

HOST = this_host()

PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))


@pytest.fixture
def home(base, config):
    """An engine home whose site config points mjf at the test's directories, with a host
    already started (its $MACHINEFEATURES written)."""
    lines = "".join(f'{k} = "{v}"\n' for k, v in config.items())
    (base / "site.toml").write_text(f"[plugins.mjf.config]\n{lines}grace_secs = 600\n")
    machine = base / "machinefeatures" / HOST
    machine.mkdir(parents=True)
    (machine / "total_cpu").write_text("8\n")
    return base


def run(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("PBSPLUG_") and k not in ("MACHINEFEATURES", "JOBFEATURES")}
    return subprocess.run([PBSPLUG, "mjf", *args], capture_output=True, text=True,
                          env={**clean, "PBSPLUG_HOME": str(home), **(env or {})}, timeout=60)


def shutdowntime(home: Path) -> Path:
    return home / "machinefeatures" / HOST / "shutdowntime"


def test_drain_in_and_at_and_undrain(home):
    before = int(time.time())
    done = run(home, "drain", "--in", "7200")
    assert done.returncode == 0, done.stderr
    when = int(shutdowntime(home).read_text())
    assert before + 7200 <= when <= int(time.time()) + 7200
    assert done.stdout.startswith(f"{HOST}: shutdowntime {when} (")
    assert (home / "machinefeatures" / HOST / "grace_secs").read_text() == "600\n"
    at = datetime.fromtimestamp(before + 86400).replace(microsecond=0)
    done = run(home, "drain", "--at", at.isoformat())
    assert done.returncode == 0, done.stderr
    assert int(shutdowntime(home).read_text()) == int(at.timestamp())
    assert f", was {when};" in done.stdout
    assert run(home, "drain", "--at", str(before + 9000)).returncode == 0
    assert shutdowntime(home).read_text() == f"{before + 9000}\n"
    done = run(home, "undrain")
    assert done.returncode == 0 and f"shutdowntime {before + 9000} removed" in done.stdout
    assert not shutdowntime(home).exists()
    assert run(home, "undrain").stdout == f"{HOST}: was not draining\n"


@pytest.mark.parametrize(("args", "code", "message"), [
    (("--at", "1000000000"), 2, "the drain time 1000000000 ("),
    (("--at", "1000000000"), 2, ") is in the past"),
    (("--in", "60"), 2, "is sooner than grace_secs (600 s) from now; the earliest allowed is"),
    (("--in", "-5"), 2, "Invalid value for '--in': '-5' is not a whole number (digits 0-9)"),
    (("--in", "1_0"), 2, "Invalid value for '--in': '1_0' is not a whole number"),
    (("--in", "9223372036854775807"), 2, "is no date (seconds since the epoch up to the"),
    (("--at", "-99999999999999"), 2, "the drain time -99999999999999 is no date"),
    (("--at", "99999999999999"), 2, "the drain time 99999999999999 is no date (seconds"),
    ((), 2, "give the shutdown time with --at TIME or --in SECONDS (one of them)"),
    (("--at", "1900000000", "--in", "9000"), 2, "(one of them)"),
    (("--at", "next tuesday"), 2, "'next tuesday': expected seconds since the epoch or an ISO"),
    (("--in", "9000", "--host", "nosuchhost"), 1, "no $MACHINEFEATURES for host nosuchhost at"),
    (("--in", "9000", "--host", "../x"), 2, "host '../x' cannot name a features directory"),
])
def test_a_drain_that_cannot_be_is_refused_and_changes_nothing(home, args, code, message):
    done = run(home, "drain", *args)
    assert done.returncode == code
    assert message in " ".join(done.stderr.split()), done.stderr
    assert not shutdowntime(home).exists()


def test_a_bad_configuration_is_named(home):
    (home / "site.toml").write_text("[plugins.mjf.config]\nhs06 = 10.0\nhs06_per_cpu = 1.0\n")
    done = run(home, "drain", "--in", "9000")
    assert done.returncode != 0
    assert ("plugins.mjf.config.hs06_per_cpu = 1.0: set hs06 (the whole machine's rating) or "
            "hs06_per_cpu, not both") in done.stderr


@pytest.fixture
def job_env(home):
    job = home / "jobfeatures" / "3.server"
    job.mkdir(parents=True)
    start = int(time.time()) - 100
    for key, value in (("job_id", "3.server"), ("allocated_cpu", "2"),
                       ("jobstart_secs", str(start)), ("wall_limit_secs", "3600")):
        (job / key).write_text(value + "\n")
    return {"MACHINEFEATURES": str(home / "machinefeatures" / HOST), "JOBFEATURES": str(job)}


def test_show_and_time_left_inside_a_job(home, job_env):
    done = run(home, "show", env=job_env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"$MACHINEFEATURES {job_env['MACHINEFEATURES']}"
    assert lines[1].split() == ["total_cpu", "8"]
    assert f"$JOBFEATURES {job_env['JOBFEATURES']}" in lines
    assert any(line.split() == ["allocated_cpu", "2"] for line in lines)
    shown = json.loads(run(home, "show", "--json", env=job_env).stdout)
    assert shown["jobfeatures"]["features"]["job_id"] == "3.server"
    assert shown["machinefeatures"]["features"] == {"total_cpu": 8}
    assert 3400 <= shown["time_left"] <= 3500
    left = run(home, "time-left", env=job_env)
    assert left.returncode == 0 and 3400 <= int(left.stdout) <= 3500
    run(home, "drain", "--in", "1200")
    assert 1100 <= int(run(home, "time-left", env=job_env).stdout) <= 1200


def test_show_for_a_job_named_on_the_host(home, job_env):
    done = run(home, "show", "--job", "3.server", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["jobfeatures"]["location"] == job_env["JOBFEATURES"]


def test_a_job_named_wrongly(home, job_env):
    done = run(home, "show", "--job", "4.server")
    assert done.returncode == 1 and "no $JOBFEATURES for job 4.server at" in done.stderr
    done = run(home, "show", "--job", "../x")
    assert done.returncode == 2
    assert "job '../x' cannot name a features directory" in " ".join(done.stderr.split())


def test_outside_a_job_or_without_limits(home, job_env):
    done = run(home, "time-left")
    assert done.returncode == 1
    assert "not inside a job: $JOBFEATURES is not set" in done.stderr
    (Path(job_env["JOBFEATURES"]) / "wall_limit_secs").unlink()
    done = run(home, "time-left", env=job_env)
    assert done.returncode == 1 and "no limit is known" in done.stderr
    (Path(job_env["JOBFEATURES"]) / "allocated_cpu").write_text("two\n")
    done = run(home, "show", env=job_env)
    assert done.returncode == 1 and "/allocated_cpu: 'two' is not an integer" in done.stderr


def test_serve_publishes_the_directories_until_interrupted(home, job_env):
    # (port 0: the kernel's free port, which its first line names; a port found free
    # before could be another test's by the time the server bound it)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    server = subprocess.Popen([PBSPLUG, "mjf", "serve", "--bind", "127.0.0.1:0",
                               "--quiet"], env={**clean, "PBSPLUG_HOME": str(home)},
                              stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_works)
    try:
        first = server.stderr.readline()
        match = re.search(r" at http://127\.0\.0\.1:(\d+) \(Ctrl-C stops\)$", first)
        assert match, first
        port = int(match.group(1))
        url = f"http://127.0.0.1:{port}/jobfeatures/3.server"

        def answered():
            try:
                return read_features(url, timeout=1)
            except Exception:
                return None

        assert until(answered, what="the server")["allocated_cpu"] == 2
        busy = run(home, "serve", "--bind", f"127.0.0.1:{port}")
        assert busy.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in busy.stderr
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=20) == 0
    assert server.stderr.read() == ""  # (--quiet: no access log)


def test_serve_names_a_bad_address(home):
    done = run(home, "serve", "--bind", "localhost")
    assert done.returncode == 2
    assert "'localhost': expected ADDR:PORT" in " ".join(done.stderr.split())


def test_a_drain_without_grace_configured_writes_grace_secs_0_beside_it(home):
    (home / "site.toml").write_text((home / "site.toml").read_text().replace(
        "grace_secs = 600\n", ""))
    done = run(home, "drain", "--in", "60")
    assert done.returncode == 0, done.stderr
    assert (home / "machinefeatures" / HOST / "grace_secs").read_text() == "0\n"


def test_a_drain_refuses_a_host_folder_others_may_write_in(home):
    (home / "machinefeatures" / HOST).chmod(0o777)
    done = run(home, "drain", "--in", "9000")
    assert done.returncode == 1
    assert (f"refusing the features folder {home}/machinefeatures/{HOST}: "
            f"{home}/machinefeatures/{HOST} is writable by everyone (owner uid 0 (root), mode 0777)"
            in " ".join(done.stderr.split())), done.stderr
    assert not shutdowntime(home).exists()
