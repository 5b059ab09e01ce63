"""``pbsplug server start|stop`` tell the truth (issue 17): a server that dies at start is
reported in one line with where its log is, a non-manager's stop is one line with PBS's
Unauthorized Request, and ``--site`` is taken after the subcommand as before it."""

from __future__ import annotations

import subprocess

import pytest

from pbsplug.engine.client import ServerUnavailable
from pbsplug.engine.testing import PBSPLUG, LocalEngine


def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_start_reports_a_server_that_dies_at_start(engine_root, dists):
    (engine_root / "server.db").write_bytes(b"this is not an SQLite database\n" * 200)
    engine = LocalEngine(engine_root, env=dists.env())
    done = engine.pbs("server", "start")
    line = _one_error_line(done)
    assert "did not start" in line and "file is not a database" in line, line
    assert str(engine_root / "server.out") in line, line
    assert "started" not in done.stdout
    assert engine.home.server_pid() is None
    assert not engine.home.socket.exists()
    assert not engine.home.pidfile.exists()  # no stale pid file left behind


def test_start_waits_until_the_server_answers(engine):
    # `server start` returned (the fixture): the server answers at once, without retries.
    assert engine.client("status")["pid"] == engine.home.server_pid()
    done = engine.pbs("server", "status")
    assert done.returncode == 0 and "server " in done.stdout


def test_a_request_before_start_says_no_server_runs(engine_root):
    engine = LocalEngine(engine_root)  # (not started: its client had been None)
    for ask in (engine.submit, engine.nodes, lambda: engine.client("status")):
        with pytest.raises(ServerUnavailable, match="no server runs in"):
            ask()


def test_a_second_start_is_refused_in_one_line(engine):
    line = _one_error_line(engine.pbs("server", "start"))
    assert "already runs" in line


def test_stop_by_a_non_manager_is_one_line(engine, attacker):
    done = attacker.pbs(engine, "server", "stop")
    line = _one_error_line(done)
    assert "Unauthorized Request" in line and "15007" in line, line
    assert engine.client("status")["pid"] == engine.home.server_pid()  # still serving
    assert "Server shutdown" not in engine.log()


def test_site_is_taken_after_the_subcommand(dists, tmp_path):
    import json

    site = tmp_path / "elsewhere.toml"
    site.write_text("[plugins.power]\nenabled = true\n")
    env = dists.env(PBSPLUG_HOME=str(tmp_path / "home"))

    def power_status(*args: str) -> str:
        done = subprocess.run([PBSPLUG, *args], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return {r["name"]: r["status"] for r in json.loads(done.stdout)}["power"]

    assert power_status("plugins", "list", "--json") == "disabled"  # the home's site: none
    for args in (["--site", str(site), "plugins", "list", "--json"],
                 ["plugins", "list", "--json", "--site", str(site)],
                 ["plugins", "list", f"--site={site}", "--json"],
                 ["plugins", "--site", str(site), "list", "--json"]):
        assert power_status(*args) == "enabled", args


def test_pbs_commands_take_site_after_their_name(engine, tmp_path):
    site = tmp_path / "elsewhere.toml"
    site.write_text("")
    engine.submit("true\n", Job_Name="sitejob", Hold_Types="u")
    plain = engine.pbs("qstat")
    for args in (["--site", str(site), "qstat"], ["qstat", "--site", str(site)],
                 ["qstat", f"--site={site}"]):
        done = engine.pbs(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert done.stdout == plain.stdout and "sitejob" in done.stdout
