"""``pbsplug mjf serve``'s HTTP server on a real loopback socket."""

from __future__ import annotations

import http.client
import os
import re
import time
from email.utils import formatdate

import pytest

from pbsplug_mjf.serve import parse_bind, serve

HOST = "wn001"


@pytest.fixture
def tree(base):
    machine = base / "machinefeatures" / HOST
    job = base / "jobfeatures" / "9.server"
    for directory, values in ((machine, {"total_cpu": "16\n", "hs06": "160\n"}),
                              (job, {"job_id": "9.server\n", "wall_limit_secs": "600\n"})):
        directory.mkdir(parents=True)
        for key, value in values.items():
            (directory / key).write_text(value)
    (job / ".wall_limit_secs.tmp").write_text("half")  # a write under way: never shown
    (base / "secret").write_text("outside\n")
    then = time.time() - 3600
    os.utime(machine / "total_cpu", (then, then))
    return base


@pytest.fixture
def get(tree):
    server = serve(tree / "machinefeatures", tree / "jobfeatures", "127.0.0.1:0",
                   max_age=30, quiet=True).start()

    def request(path: str, method: str = "GET", headers: dict | None = None):
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
        conn.request(method, path, headers=headers or {})
        answer = conn.getresponse()
        body = answer.read()
        conn.close()
        return answer, body

    yield request
    server.stop()


def test_a_key_is_its_value_as_text_with_cache_headers(get, tree):
    answer, body = get(f"/machinefeatures/{HOST}/total_cpu")
    assert (answer.status, body) == (200, b"16\n")
    assert answer.getheader("Content-Type") == "text/plain; charset=us-ascii"
    mtime = int((tree / "machinefeatures" / HOST / "total_cpu").stat().st_mtime)
    assert answer.getheader("Last-Modified") == formatdate(mtime, usegmt=True)
    assert answer.getheader("Cache-Control") == "max-age=30"


def test_if_modified_since_answers_304_until_the_value_changes(get, tree):
    path = f"/machinefeatures/{HOST}/total_cpu"
    stamp = get(path)[0].getheader("Last-Modified")
    answer, body = get(path, headers={"If-Modified-Since": stamp})
    assert (answer.status, body) == (304, b"")
    (tree / "machinefeatures" / HOST / "total_cpu").write_text("20\n")
    answer, body = get(path, headers={"If-Modified-Since": stamp})
    assert (answer.status, body) == (200, b"20\n")
    assert get(path, headers={"If-Modified-Since": "yesterday"})[0].status == 200


def test_head_has_the_headers_and_no_body(get):
    answer, body = get("/jobfeatures/9.server/job_id", method="HEAD")
    assert (answer.status, body, answer.getheader("Content-Length")) == (200, b"", "9")


@pytest.mark.parametrize("path", ["/jobfeatures/9.server", "/jobfeatures/9.server/"])
def test_a_directory_is_a_listing_of_its_keys(get, path):
    answer, body = get(path)
    assert answer.status == 200 and answer.getheader("Content-Type").startswith("text/html")
    text = body.decode()
    assert '<a href="/jobfeatures/9.server/job_id">job_id</a>' in text
    assert "wall_limit_secs" in text and ".tmp" not in text and "half" not in text


def test_the_root_and_the_bases_are_listings(get):
    root = get("/")[1].decode()
    assert "/jobfeatures" in root and "/machinefeatures" in root
    assert f'href="/machinefeatures/{HOST}"' in get("/machinefeatures")[1].decode()


@pytest.mark.parametrize("path", [
    "/jobfeatures/9.server/shutdowntime_job",  # absent key
    "/jobfeatures/10.server/job_id",           # absent job
    "/jobfeatures/10.server",
    "/nothing",
    f"/machinefeatures/{HOST}/total_cpu/more",
    "/jobfeatures/9.server/.wall_limit_secs.tmp",  # never a temporary file
    "/jobfeatures/../secret",
    "/jobfeatures/..%2Fsecret",
    "/jobfeatures/%2e%2e/secret",
    "/jobfeatures/9.server/../../secret",
    f"/machinefeatures/{HOST}/..",
    "/machinefeatures/..",
    "/jobfeatures/escape/x",  # a symlink out of the base
])
def test_anything_absent_or_outside_is_a_real_404(get, tree, path):
    (tree / "jobfeatures" / "escape").symlink_to(tree)
    (tree / "x").write_text("1\n")
    answer, body = get(path)
    assert (answer.status, body) == (404, b"Not Found\n")
    assert b"outside" not in body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
def test_it_is_read_only(get, tree, method):
    answer, _ = get("/jobfeatures/9.server/job_id", method=method)
    assert (answer.status, answer.getheader("Allow")) == (405, "GET, HEAD")
    assert answer.getheader("Connection") == "close"  # an unread body is never a request
    assert (tree / "jobfeatures" / "9.server" / "job_id").read_text() == "9.server\n"


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:8080", ("127.0.0.1", 8080)), (":8080", ("0.0.0.0", 8080)),
    ("[::1]:80", ("::1", 80))])
def test_bind_addresses(text, expected):
    assert parse_bind(text) == expected


@pytest.mark.parametrize("text", ["8080", "host:", "host:http", "host:70000"])
def test_bad_bind_addresses_are_named(text):
    with pytest.raises(ValueError, match=f"{text!r}: expected ADDR:PORT"):
        parse_bind(text)


#: The attacker's client: connects, then sends nothing ("idle") or one byte of a request
#: every 0.1 s ("trickle"), and prints "closed" once the server drops the connection, or
#: "held" if it still holds it after 30 s.
_SLOW_CLIENT = """
import socket, sys, time
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
conn = socket.create_connection((host, port))
conn.settimeout(0.1)
request = b"GET /jobfeatures/9.server/job_id HTTP/1.1\\r\\n" + b"X-Slow: " + b"a" * 10000
end = time.monotonic() + 30
for byte in request:
    if time.monotonic() > end:
        break
    try:
        if mode == "trickle":
            conn.send(bytes([byte]))
        if conn.recv(1) == b"":
            print("closed"); sys.exit()
    except socket.timeout:
        continue
    except OSError:
        print("closed"); sys.exit()
print("held")
"""


@pytest.mark.parametrize("mode", ["idle", "trickle"])
def test_a_slow_client_is_dropped_when_its_request_time_is_up(tree, attacker, mode):
    """A connection that sends nothing, or a byte at a time, held a thread (and, at
    server_close, the whole server) for ever: each request has request_timeout seconds."""
    server = serve(tree / "machinefeatures", tree / "jobfeatures", "127.0.0.1:0",
                   quiet=True)
    server.request_timeout = 0.5
    server.start()
    try:
        done = attacker.python(_SLOW_CLIENT, mode, *map(str, server.server_address[:2]))
        assert done.stdout.strip() == "closed", done.stderr
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
        conn.request("GET", "/jobfeatures/9.server/job_id")
        assert conn.getresponse().read() == b"9.server\n"  # others are served meanwhile
        conn.close()
    finally:
        server.stop()


_HUGE_HEAD = """
import socket, sys
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
headers = b"".join(b"X-%d: %s\\r\\n" % (n, b"a" * 60000) for n in range(99))
try:
    conn.sendall(b"GET /jobfeatures/9.server/job_id HTTP/1.1\\r\\n" + headers + b"\\r\\n")
except OSError:
    pass  # dropped while sending: the answer is read below
print(conn.recv(100).split(b"\\r\\n")[0].decode())
"""


def test_a_huge_request_head_is_refused(tree, attacker):
    """http.server reads 100 headers of 64 KiB each, so every connection could make the
    server hold 6 MB: the head is cut at HEAD_LIMIT and answered 431."""
    server = serve(tree / "machinefeatures", tree / "jobfeatures", "127.0.0.1:0",
                   quiet=True).start()
    try:
        done = attacker.python(_HUGE_HEAD, *map(str, server.server_address[:2]))
        assert done.stdout.strip() == "HTTP/1.1 431 Request Header Fields Too Large", \
            done.stderr
    finally:
        server.stop()


_MANY_CONNECTIONS = """
import socket, sys
address = (sys.argv[1], int(sys.argv[2]))
held = [socket.create_connection(address, timeout=30) for _ in range(int(sys.argv[3]))]
conn = socket.create_connection(address, timeout=30)
conn.sendall(b"GET /jobfeatures/9.server/job_id HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
print(conn.recv(100).split(b"\\r\\n")[0].decode())
"""


def test_connections_past_max_connections_are_answered_503(tree, attacker):
    """Connections were taken until the descriptors ran out (then accept fails and the
    server loops on its listening socket): past max_connections, a 503 and close."""
    server = serve(tree / "machinefeatures", tree / "jobfeatures", "127.0.0.1:0",
                   quiet=True)
    server.max_connections = 3
    server.start()
    try:
        done = attacker.python(_MANY_CONNECTIONS, *map(str, server.server_address[:2]), "3")
        assert done.stdout.strip() == "HTTP/1.1 503 Service Unavailable", done.stderr
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
        conn.request("GET", "/jobfeatures/9.server/job_id")  # the attacker's are gone
        assert conn.getresponse().read() == b"9.server\n"
        conn.close()
    finally:
        server.stop()


# -- who owns what is served: the server runs as root ------------------------------------------

def test_a_base_another_user_could_change_is_not_served(base, unsafe_folder):
    """Run as root over a folder a user could write, the server served what that user put
    there (and a link swapped in after the path was checked served any file). Such a folder
    is refused before anything listens, by the function and by the command, with the
    hooks' rule for the base folders."""
    import subprocess
    import sys
    from pathlib import Path

    from pbsplug_mjf.derive import HostError

    jobs = unsafe_folder.path
    (base / "machinefeatures").mkdir()
    refusal = f"refusing the features folder {jobs}: {unsafe_folder.problem}"
    with pytest.raises(HostError, match=re.escape(refusal)):
        serve(base / "machinefeatures", jobs, "127.0.0.1:0", quiet=True)
    (base / "site.toml").write_text(
        f'[plugins.mjf.config]\nmachinefeatures_dir = "{base / "machinefeatures"}"\n'
        f'jobfeatures_dir = "{jobs}"\n')
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    done = subprocess.run([str(Path(sys.executable).with_name("pbsplug")), "mjf", "serve",
                           "--bind", "127.0.0.1:0", "--quiet"], capture_output=True,
                          text=True, env={**clean, "PBSPLUG_HOME": str(base)}, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith(f"pbsplug mjf: {refusal}")


def test_a_link_swapped_in_after_the_server_looked_is_never_followed(base, attacker,
                                                                      monkeypatch):
    """The path was checked (resolved inside its base), then read by path: a user who could
    write in a job's folder swapped a link in between, and root served the file it led to.
    Each segment is now opened relative to the one before and never through a link: the
    swap is made (by the attacker, at once) right after the server's first look at the
    key, and what is served is the key as it was."""
    victim = base / "victim"
    victim.write_text("root's secret\n")
    victim.chmod(0o600)
    job = base / "jobfeatures" / "9.server"
    job.mkdir(parents=True)
    (base / "machinefeatures").mkdir()
    (job / "job_id").write_text("9.server\n")
    for path in (job, job / "job_id"):
        os.chown(path, attacker.uid, attacker.gid)  # a folder the user may write in
    done = attacker.python("import os, sys; os.symlink(sys.argv[1], sys.argv[2])",
                           str(victim), str(job / ".swap"))
    assert done.returncode == 0, done.stderr
    server = serve(base / "machinefeatures", base / "jobfeatures", "127.0.0.1:0",
                   quiet=True).start()
    swapped = []

    def swap_after(original):
        def call(path, *args, **kwargs):
            result = original(path, *args, **kwargs)
            if not swapped and os.path.basename(os.fsdecode(path)) == "job_id":
                swapped.append(True)
                done = attacker.python("import os, sys; os.rename(sys.argv[1], sys.argv[2])",
                                       str(job / ".swap"), str(job / "job_id"))
                assert done.returncode == 0, done.stderr
            return result
        return call

    try:
        for name in ("open", "stat", "lstat"):
            monkeypatch.setattr(os, name, swap_after(getattr(os, name)))
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=30)
        conn.request("GET", "/jobfeatures/9.server/job_id")
        answer = conn.getresponse()
        body = answer.read()
        conn.close()
        monkeypatch.undo()
        assert swapped and (job / "job_id").is_symlink()
        assert b"secret" not in body
        assert (answer.status, body) == (200, b"9.server\n")
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=30)
        conn.request("GET", "/jobfeatures/9.server/job_id")  # the link, now there
        assert conn.getresponse().status == 404
        conn.close()
    finally:
        monkeypatch.undo()
        server.stop()
