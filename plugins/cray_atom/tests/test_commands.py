"""``pbsplug cray_atom check`` and ``pbsplug cray_atom fake-service``, run as commands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import requests_unixsocket

from pbsplug.testing import ctrl_c_works, until
from pbsplug_cray_atom.atom import jobs_url

PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))


def run(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    return subprocess.run([PBSPLUG, "cray_atom", *args], capture_output=True, text=True,
                          env={**env, "PBSPLUG_HOME": str(home)}, timeout=60)


def test_check_reports_what_atom_answers(tmp_path, atom):
    atom.jobs  # noqa: B018 (the service starts empty)
    (tmp_path / "site.toml").write_text(
        f'[plugins.cray_atom.config]\nunix_socket_file = "{atom.socket_path}"\n')
    session = requests_unixsocket.Session()
    session.post(jobs_url(str(atom.socket_path)),
                 json={"jobid": "3.s", "uid": 0, "exclusive": True}).raise_for_status()
    done = run(tmp_path, "check")  # the configured socket
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"unix_socket_file  {atom.socket_path}"
    assert lines[1] == "socket            present"
    assert lines[2] == f"GET {jobs_url(str(atom.socket_path))}  HTTP 200 OK; body " \
                       '[{"jobid": "3.s", "uid": 0, "exclusive": true, "state": "running"}]'
    assert lines[3:] == ["jobs ATOM holds   1",
                         '  {"exclusive": true, "jobid": "3.s", "state": "running", "uid": 0}']
    assert atom.requests[-1] == ("GET", "/rm/v1/jobs", None)


def test_check_an_error_status(tmp_path, atom):
    atom.script("GET", 503, {"detail": "starting"})
    done = run(tmp_path, "check", "--socket", str(atom.socket_path))
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1].endswith("HTTP 503 Service Unavailable; "
                                                 "detail='starting'")


def test_check_an_answer_nested_deeply(tmp_path, atom):
    """response.json()'s RecursionError was the command's traceback."""
    atom.script("GET", 200, raw=b"[" * 100_000)
    done = run(tmp_path, "check", "--socket", str(atom.socket_path))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1].endswith("[[' (arrays or objects nested too deeply)")


def test_check_no_socket(tmp_path):
    done = run(tmp_path, "check", "--socket", str(tmp_path / "none.sock"))
    assert done.returncode == 1
    assert "missing: not a Shasta node here" in done.stdout


def test_check_nobody_listening(tmp_path, atom):
    atom.stop(remove_socket=False)
    done = run(tmp_path, "check", "--socket", str(atom.socket_path))
    assert done.returncode == 1
    assert "cannot reach ATOM" in done.stdout.splitlines()[-1]
    assert done.stderr == ""


def test_check_a_file_that_is_no_socket(tmp_path):
    plain = tmp_path / "atomd.sock"
    plain.write_text("")
    done = run(tmp_path, "check", "--socket", str(plain))
    assert done.returncode == 1
    assert "exists but is not a UNIX socket" in done.stdout


def test_check_a_service_that_does_not_answer(tmp_path, atom):
    atom.script("GET", delay=5.0)
    done = run(tmp_path, "check", "--socket", str(atom.socket_path), "--timeout", "0.5")
    assert done.returncode == 1
    assert "no answer within 0.5 s" in done.stdout


def test_fake_service_runs_until_interrupted(tmp_path, sock_dir):
    sock = sock_dir / "fake.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    proc = subprocess.Popen([PBSPLUG, "cray_atom", "fake-service", "--socket", str(sock)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "PBSPLUG_HOME": str(tmp_path)},
                            preexec_fn=ctrl_c_works)
    try:
        until(sock.exists, what="the fake service's socket")
        session = requests_unixsocket.Session()
        answer = session.post(jobs_url(str(sock)),
                              json={"jobid": "1.s", "uid": 0, "exclusive": False})
        assert answer.status_code == 200
        assert session.delete(jobs_url(str(sock), "1.s")).status_code == 204
        assert session.delete(jobs_url(str(sock), "1.s")).status_code == 404
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    assert out.splitlines()[-1] == "stopped; it saw 3 requests", err
    assert not sock.exists()


def test_check_refuses_a_timeout_that_is_not_a_finite_number_up_to_a_day(tmp_path, atom):
    for timeout in ("0", "86401"):
        done = run(tmp_path, "check", "--socket", str(atom.socket_path), "--timeout", timeout)
        assert done.returncode == 2, (timeout, done.stderr)
        assert done.stderr.strip() == (f"pbsplug cray_atom check: --timeout {float(timeout):g}: "
                                       "expected seconds > 0 and <= 86400"), done.stderr
        assert "Traceback" not in done.stderr
    for timeout in ("inf", "nan", "1_0"):  # (pbsplug.cli_seconds: typer's usage error)
        done = run(tmp_path, "check", "--socket", str(atom.socket_path), "--timeout", timeout)
        assert done.returncode == 2, (timeout, done.stderr)
        assert f"Invalid value for '--timeout': '{timeout}' is not a number of seconds >= 0" \
            in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert atom.requests == []
