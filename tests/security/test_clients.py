"""No client can hold the server (issue 17), tried as an unprivileged local user would: raw
connections to the server's socket that trickle, send a huge body or headers without end,
never read their answer, or open hundreds of connections. While each attack goes on, root's
qstat answers, a job's walltime kill happens, and the attacker gets a clear error or a
closed connection; afterwards the server answers and nothing outside the attacker's rights
has changed.

The attacker (`pbsplug.testing.attacker`) runs one script (`ATTACK`) in a mode; it prints
``ready`` once its connections are in place, keeps attacking until its stdin closes, then
prints what it saw as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pbsplug.engine.api import MAX_BUFFERED_PER_UID
from pbsplug.engine.client import MAX_BODY_BYTES, MAX_HEADER_BYTES
from pbsplug.engine.testing import until

ATTACK = r'''
import json, select, socket, sys, time

mode, path = sys.argv[1], sys.argv[2]
seen = {"opened": 0, "closed_by_server": 0, "connect_failed": 0, "answers": []}
REQUEST = b"POST /v1/stat_jobs HTTP/1.0\r\nContent-Type: application/json\r\n"


def stopped(wait=0.0):
    return bool(select.select([sys.stdin], [], [], wait)[0])


def connect(blocking=False):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        seen["connect_failed"] += 1
        s.close()
        return None
    s.setblocking(blocking)
    seen["opened"] += 1
    return s


def note(data):
    """What an answer said: its status line and its error message."""
    if not data:
        return
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        message = json.loads(body)["error"]["message"]
    except Exception:
        message = body[:100].decode(errors="replace")
    seen["answers"].append(head.split(b"\r\n")[0].decode(errors="replace") + " " + message)


def drain(s):
    """Read until the server closes; what was read, or None if it is still open."""
    got = b""
    while True:
        try:
            data = s.recv(1 << 16)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if not data:
            seen["closed_by_server"] += 1
            return got
        got += data


def hung_up(poller, conns, wait_ms):
    """The connections the server has closed (what it sent may still be unread)."""
    gone = {fd for fd, ev in poller.poll(wait_ms) if ev & (select.POLLRDHUP | select.POLLHUP)}
    return [s for s in conns if s.fileno() in gone]


def ready():
    print("ready", flush=True)


if mode == "trickle":  # 8 connections, one byte of the request each every 0.5 s
    message = REQUEST + b"Content-Length: 2\r\n\r\n{}"
    conns = {}
    first = True
    while not stopped(0.5):
        while len(conns) < 8:
            s = connect()
            if s is None:
                break
            conns[s] = [0, b""]
        for s, state in list(conns.items()):
            try:
                if state[0] < len(message):
                    s.send(message[state[0]:state[0] + 1])
                    state[0] += 1
            except OSError:
                pass
            got = drain(s)
            if got is not None:
                note(state[1] + got)
                s.close()
                del conns[s]
        if first:
            ready()
            first = False
    for s, state in conns.items():  # what the server answered before the attack ended
        select.select([s], [], [], 1.0)
        got = drain(s)
        if got is not None:
            note(state[1] + got)
elif mode in ("huge", "headers"):  # a 50 MB body, or headers without end, as fast as it can
    first = True
    while not stopped():
        s = connect(blocking=True)
        if s is None:
            time.sleep(0.1)
            continue
        s.settimeout(30)
        if first:
            ready()
            first = False
        try:
            if mode == "huge":
                s.sendall(REQUEST.replace(b"stat_jobs", b"qmgr")
                          + b"Content-Length: 50000000\r\n\r\n")
                chunk = b'{"text": "set server comment = ' + b"x" * 65536
                for _ in range(50000000 // len(chunk)):
                    s.sendall(chunk)
            else:
                s.sendall(REQUEST)
                while True:
                    s.sendall(b"X-Pad: " + b"a" * 1000 + b"\r\n")
        except OSError:
            pass
        s.setblocking(False)
        got = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            select.select([s], [], [], 1.0)
            more = drain(s)
            if more is not None:
                got = more
                break
        note(got)
        s.close()
elif mode == "noread":  # 16 complete requests for a big answer, never read while open
    message = REQUEST + b"Content-Length: 17\r\n\r\n{\"history\": true}"
    conns = []
    first = True
    poller = select.poll()
    while not stopped(0.5):
        while len(conns) < 16:
            s = connect()
            if s is None:
                break
            s.send(message)
            conns.append(s)
            poller.register(s, select.POLLRDHUP)
        for s in hung_up(poller, conns, 0):
            poller.unregister(s)
            got = drain(s) or b""
            head, _, body = got.partition(b"\r\n\r\n")
            status = head.split(b"\r\n")[0].decode()
            length = head.decode().rsplit(":", 1)[-1].strip()
            seen["answers"].append(f"{status} got {len(body)} bytes of {length}")
            s.close()
            conns.remove(s)
        if first:
            ready()
            first = False
    for s in hung_up(poller, conns, 1000):  # dropped before the attack ended
        got = drain(s) or b""
        head, _, body = got.partition(b"\r\n\r\n")
        status = head.split(b"\r\n")[0].decode()
        length = head.decode().rsplit(":", 1)[-1].strip()
        seen["answers"].append(f"{status} got {len(body)} bytes of {length}")
elif mode == "bulk":  # 8 requests of nearly the largest body each, held unfinished
    limit = int(sys.argv[3])
    conns = []
    poller = select.poll()
    for _ in range(8):
        s = connect(blocking=True)
        s.settimeout(30)
        try:
            s.sendall(REQUEST + b"Content-Length: %d\r\n\r\n" % limit
                      + b"x" * (limit - limit // 8))
        except OSError:
            pass
        s.setblocking(False)
        conns.append(s)
        poller.register(s, select.POLLIN | select.POLLRDHUP)
    ready()
    while not stopped(0.2):
        for s in hung_up(poller, conns, 0):
            poller.unregister(s)
            note(drain(s) or b"")
            s.close()
            conns.remove(s)
    for s in hung_up(poller, conns, 1000):
        note(drain(s) or b"")
elif mode == "many":  # hundreds of idle connections, reopened as the server closes them
    conns = []
    first = True
    poller = select.poll()
    while not stopped(0.2):
        while len(conns) < 400:
            s = connect()
            if s is None:
                break
            conns.append(s)
            poller.register(s, select.POLLIN | select.POLLRDHUP)
        for s in hung_up(poller, conns, 0):
            poller.unregister(s)
            note(drain(s) or b"")
            s.close()
            conns.remove(s)
        if first:
            ready()
            first = False
    for s in hung_up(poller, conns, 1000):
        note(drain(s) or b"")
    seen["open_at_end"] = len(conns)
elif mode == "unread":  # N complete requests for a big answer, never read, held open
    message = REQUEST + b"Content-Length: 17\r\n\r\n{\"history\": true}"
    conns = [s for s in (connect(blocking=True) for _ in range(int(sys.argv[3]))) if s]
    poller = select.poll()
    for s in conns:
        s.sendall(message)
        poller.register(s, select.POLLIN)
    answering = set()  # the connections whose answer has begun to come
    deadline = time.monotonic() + 60
    while len(answering) < len(conns) and time.monotonic() < deadline:
        answering.update(fd for fd, _ in poller.poll(100))
    seen["answering"] = len(answering)
    ready()
    while not stopped(0.5):
        pass
print(json.dumps(seen), flush=True)
'''


class Attack:
    """The attacker's script running in the background; `running` while the attack is on."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.seen: dict = {}

    @property
    def running(self) -> bool:
        return self.proc.poll() is None


@contextlib.contextmanager
def attack(attacker, engine, mode: str, *args: str) -> Iterator[Attack]:
    env = {"PATH": f"{attacker.venv}/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}
    runuser = shutil.which("runuser") or "runuser"
    proc = subprocess.Popen(
        [runuser, "-u", attacker.user, "--", f"{attacker.venv}/bin/python", "-c", ATTACK, mode,
         str(engine.home.socket), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, cwd="/tmp")
    running = Attack(proc)
    try:
        readable, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if readable else ""
        assert line.strip() == "ready", f"the attack did not start: {line!r} " + (
            proc.stderr.read() if proc.poll() is not None else "")
        yield running
    finally:
        try:  # closing its stdin ends the attack
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        lines = out.strip().splitlines()
        assert proc.returncode == 0 and lines, f"the attacker failed: {err}"
        running.seen = json.loads(lines[-1])


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under the home with its mode and owner, but what a server changes anyway
    (its database, logs and jobs' files are checked by content elsewhere)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_mode, st.st_uid, st.st_gid)
    return out


@pytest.fixture
def scene(engine, attacker):
    """Root's held job, the attacker's home snapshot."""
    held = engine.submit("true\n", Job_Name="rootheld", Hold_Types="u")
    before = _snapshot(engine.root)
    return {"held": held, "before": before,
            "held_attrs": engine.job(held)}


def _under_attack(engine, attacker, scene, mode: str, dropped: str, *args: str,
                  at_deadline: bool = False) -> dict:
    """Run the attack; while it is on, root's qstat answers and a walltime kill happens, and
    the server drops one of the attacker's connections (`dropped`, as its log says).
    Afterwards the server answers and nothing of others' changed. Returns what the attacker
    saw.

    Where the server drops the attacker only at a deadline (`at_deadline`), root's qstat is
    answered before that drop: a server the attack held would answer root only once it had
    dropped the connection holding it (an order of events, not a time measured)."""
    drop = f"connection from uid {attacker.uid} dropped: {dropped}"
    with attack(attacker, engine, mode, *args) as on:
        drops = engine.log().count(drop)
        engine.client("stat_jobs", history=True)
        assert on.running, "the attack ended before root's qstat was answered"
        if at_deadline:
            assert engine.log().count(drop) == drops, "root was answered only after a drop"
        done = engine.pbs("qstat", "-x")
        assert done.returncode == 0 and "rootheld" in done.stdout, done.stderr
        killed = engine.submit("sleep 60\n", Job_Name="walltime",
                               Resource_List={"walltime": "00:00:01"})
        attrs = engine.wait(killed, timeout=60)
        assert "walltime" in attrs.get("comment", "") or "walltime" in engine.log()
        assert attrs["Exit_status"] != 0, attrs
        assert on.running, "the attack ended before the walltime kill was seen"
        until(lambda: drop in engine.log(), timeout=60,
              what=f"the server to drop a connection: {dropped}")
    # Afterwards: the server answers, root's job is as it was, nothing made or changed.
    assert engine.client("status")["pid"] == engine.home.server_pid()
    held = engine.job(scene["held"])
    assert {k: v for k, v in held.items() if k != "mtime"} == {
        k: v for k, v in scene["held_attrs"].items() if k != "mtime"}
    after = _snapshot(engine.root)
    owned = [p for p, (_, uid, _) in after.items() if uid == attacker.uid]
    assert not owned, f"files of the attacker in the server's home: {owned}"
    changed = {p for p in scene["before"] if p in after and after[p] != scene["before"][p]}
    assert not changed, changed
    return on.seen


def test_a_trickling_client_does_not_hold_the_server(engine, attacker, scene):
    seen = _under_attack(engine, attacker, scene, "trickle", "request not complete within",
                         at_deadline=True)
    assert seen["closed_by_server"] >= 1, seen
    assert any(a.startswith("HTTP/1.0 408") and "not complete within" in a
               for a in seen["answers"]), seen


def test_a_huge_body_is_refused_at_its_head(engine, attacker, scene):
    seen = _under_attack(engine, attacker, scene, "huge", "request body of 50000000 bytes")
    assert seen["answers"], seen
    assert all(a.startswith("HTTP/1.0 413") and "over the server's limit" in a
               for a in seen["answers"]), seen
    comment = next(iter(engine.client("stat_server").values())).get("comment", "")
    assert "xxxx" not in comment  # nothing of it applied


def test_headers_without_end_are_cut_at_the_limit(engine, attacker, scene):
    seen = _under_attack(engine, attacker, scene, "headers", "request headers over")
    assert seen["answers"], seen
    assert all(a.startswith("HTTP/1.0 431") and f"over {MAX_HEADER_BYTES} bytes" in a
               for a in seen["answers"]), seen


def test_big_requests_held_unfinished_are_capped_per_user(engine, attacker, scene):
    seen = _under_attack(engine, attacker, scene, "bulk",
                         f"over {MAX_BUFFERED_PER_UID} bytes of requests being read",
                         str(MAX_BODY_BYTES))
    refused = [a for a in seen["answers"] if a.startswith("HTTP/1.0 503")]
    assert refused, seen
    assert all("No free connections" in a and "being read already" in a for a in refused)


def test_a_client_that_never_reads_its_answer_is_dropped(engine, attacker, scene):
    # Root's jobs make an answer bigger than a socket's buffer, so the server cannot just
    # leave it with the kernel.
    for i in range(120):
        engine.submit("true\n", Job_Name=f"big{i}", Hold_Types="u",
                      Variable_List={"PBS_O_WORKDIR": str(engine.work), "PAD": "p" * 4000})
    scene["before"] = _snapshot(engine.root)
    seen = _under_attack(engine, attacker, scene, "noread", "answer not read within",
                         at_deadline=True)
    dropped = [a for a in seen["answers"] if a.startswith("HTTP/1.0 200")]
    assert dropped, seen
    for line in dropped:  # cut short: the server gave up on writing it
        got, _, total = line.split(" got ")[1].partition(" bytes of ")
        assert int(got) < int(total), line


def test_answers_never_read_do_not_hold_the_servers_stop(engine, attacker):
    """The server's stop gave each connection with an answer still owed up to 1 s to take
    it, one after the other: a user's 32 connections (`MAX_CONNECTIONS_PER_UID`) each
    asking for a qstat of about 500 KB, none read, held `pbsplug server stop` 32 s (32.3 s
    measured). The stop now gives them 1 s in all (`STOP_WRITE_DEADLINE`), then closes
    them, and logs each uid's connections dropped so (which the old stop never said: the
    test fails there on it, not on a time; 60 s is only a hang guard)."""
    from pbsplug.engine.api import MAX_CONNECTIONS_PER_UID

    for i in range(120):  # an answer bigger than a socket's buffer: the server must wait
        engine.submit("true\n", Job_Name=f"big{i}", Hold_Types="u",
                      Variable_List={"PBS_O_WORKDIR": str(engine.work), "PAD": "p" * 4000})
    with attack(attacker, engine, "unread", str(MAX_CONNECTIONS_PER_UID)) as on:
        done = engine.pbs("server", "stop", "--timeout", "60")
        assert done.returncode == 0 and "stopped" in done.stdout, done.stderr
        assert engine.home.server_pid() is None
        assert on.running, "the attack ended before the server stopped"
    assert on.seen["answering"] == on.seen["opened"] == MAX_CONNECTIONS_PER_UID, on.seen
    assert "answer not read within" not in engine.log()  # (all were owed at the stop)
    assert (f"connection from uid {attacker.uid} dropped: answer not taken before the "
            "server stopped") in engine.log()


def test_hundreds_of_connections_are_capped(engine, attacker, scene):
    from pbsplug.engine.api import MAX_CONNECTIONS_PER_UID

    seen = _under_attack(engine, attacker, scene, "many", "connection refused: ")
    assert seen["opened"] > MAX_CONNECTIONS_PER_UID, seen
    refused = [a for a in seen["answers"] if a.startswith("HTTP/1.0 503")]
    assert refused and all("No free connections" in a for a in refused), seen["answers"][:5]
    assert seen["open_at_end"] <= 400


def test_a_user_flooding_the_queue_is_stopped_at_max_queued_and_others_are_not(
        engine, attacker, scene):
    """Before PBS's max_queued was enforced (it was stored and ignored), nothing limited how
    many jobs one user kept, each with up to 1 MiB of environment: 300 such made every
    request slow for everyone. The site's limit now stops the attacker's submissions, also
    through the raw API and through a project of their choosing, and only theirs."""
    done = engine.pbs("qmgr", "-c", "set server max_queued = [u:PBS_GENERIC=3]")
    assert done.returncode == 0, done.stderr
    kept = [attacker.pbs(engine, "qsub", "-h", "--", "/bin/true", cwd=engine.work)
            for _ in range(3)]
    assert all(d.returncode == 0 for d in kept), [d.stderr for d in kept]
    over = attacker.pbs(engine, "qsub", "-h", "-P", "other", "--", "/bin/true",
                        cwd=engine.work)
    assert (over.returncode, over.stderr) == (15142 % 256,
                                              "qsub: would exceed complex's per-user limit\n")
    raw = attacker.python(
        "import os; from pathlib import Path\n"
        "from pbsplug.engine.client import Client\n"
        "from pbsplug.engine.home import Home\n"
        "try:\n"
        "    Client(Home(Path(os.environ['PBSPLUG_HOME'])))('submit', attrs={\n"
        "        'Hold_Types': 'u', 'Variable_List': {'X': 'x' * 500000}}, script='true')\n"
        "except Exception as exc:\n"
        "    print(getattr(exc, 'code', None), exc)\n", home=engine)
    assert raw.stdout.startswith("15142 "), (raw.stdout, raw.stderr)
    mine = [j for j, a in engine.client("stat_jobs").items()
            if a["euser"] == attacker.user]
    assert len(mine) == 3
    for _ in range(2):  # root's (it has the scene's held job) are counted for root alone
        engine.submit("true\n", Hold_Types="u")


HOSTILE_JSON = r'''
import json, socket, sys

path = sys.argv[1]
bodies = [b"[" * 100000, b'{"attrs": {"Job_Name": "a", "Job_Name": "b"}, "script": "true\\n"}',
          b'{"attrs": {"Priority": NaN}, "script": "true\\n"}', b'{"ids": [1e400]}',
          b'{"ids": [%s]}' % (b"9" * 5000),
          b'{"text": "\xff"}']
out = []
for body in bodies:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(b"POST /v1/submit HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        got = b""
        while chunk := s.recv(1 << 16):
            got += chunk
    head, _, answer = got.partition(b"\r\n\r\n")
    out.append([head.split(b"\r\n")[0].decode(), json.loads(answer)])
print(json.dumps(out))
'''


def test_json_that_json_loads_fails_on_or_takes_wrongly_is_the_callers_pbs_error(engine,
                                                                              attacker):
    """As an unprivileged user, request bodies nested 100,000 deep, with a key twice, NaN,
    1e400, a number of 5,000 digits or invalid UTF-8: each is PBS's Invalid request naming
    what was wrong, no job is made, and root is served after."""
    done = attacker.python(HOSTILE_JSON, str(engine.home.socket), timeout=120)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    why = ["arrays or objects nested too deeply", 'the key "Job_Name" twice in one object',
           "NaN is not a JSON number", "a number past a float's range (1e400)",
           "a number of 5,000 digits (at most 1,000)", "not UTF-8 text (byte 0xff at offset 10)"]
    for (line, answer), what in zip(answers, why, strict=True):
        assert line.startswith("HTTP/1.0 400"), (line, answer)
        assert answer == {"error": {"code": 15004, "obj": None,
                                    "message": f"Invalid request: arguments: {what}"}}
    assert engine.client("stat_jobs", history=True) == {}
    assert engine.client("status")["pid"] == engine.home.server_pid()


def test_answers_a_user_does_not_take_are_not_made_ahead(engine, attacker):
    """A user's requests were answered as they came, each answer kept until its client
    took it (up to `WRITE_DEADLINE`): 16 connections each asking for qstat -f of 40 jobs
    with 1 MiB of environment, none read, had the server hold 16 answers of 40 MiB, 700 MB,
    and a user's 32 connections with more jobs could take all the machine's memory. Past
    `MAX_UNSENT_PER_UID` of a user's answers not taken, that user's next request waits for
    its clients to read; each is answered in its turn when they do.

    The clients read once the server has made every answer it makes ahead (an order of
    events, not a time; they slept 6 s): their first answer has begun to come, then root's
    requests come one after the other, twice as many as the clients'. A server that makes
    a user's answers ahead answers that user between any two of root's (the uid answered
    least recently goes first), so by then it has made them all."""
    from pbsplug.engine.api import MAX_UNSENT_PER_UID

    client = ("import os, socket, sys, time\n"
              "from pathlib import Path\n"
              "from pbsplug.engine.client import Client\n"
              "from pbsplug.engine.home import Home\n"
              "home = Home(Path(os.environ['PBSPLUG_HOME']))\n")
    submit = client + (
        "env = {f'V{i}': 'x' * 100_000 for i in range(10)}\n"
        "for i in range(40):\n"
        "    Client(home)('submit', attrs={'Variable_List': env, 'Hold_Types': 'u'},\n"
        "                 script='true\\n')\n")
    done = attacker.python(submit, home=engine, timeout=300)
    assert done.returncode == 0, done.stderr
    pid = int(engine.home.pidfile.read_text())
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # (VmHWM from here)

    def kb(key: str) -> int:
        line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if ln.startswith(key + ":"))
        return int(line.split()[1])

    before = kb("VmRSS")
    hold = client + (
        "import select\n"
        "socks = []\n"
        "for i in range(16):\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    s.connect(str(home.socket))\n"
        "    s.sendall(b'POST /v1/stat_jobs HTTP/1.0\\r\\nContent-Length: 2\\r\\n\\r\\n{}')\n"
        "    socks.append(s)\n"
        "begun = select.select(socks, [], [], 120)[0]  # (a hang guard)\n"
        "print('answering' if begun else 'no answer began within 120 s', flush=True)\n"
        "sys.stdin.readline()  # the test's cue: the answers made ahead are made\n"
        "whole = 0\n"
        "for s in socks:\n"
        "    data = bytearray()\n"
        "    while chunk := s.recv(1 << 20):\n"
        "        data += chunk\n"
        "    head, _, body = bytes(data).partition(b'\\r\\n\\r\\n')\n"
        "    length = int(head.split(b'Content-Length: ')[1].split(b'\\r\\n')[0])\n"
        "    whole += head.startswith(b'HTTP/1.0 200') and len(body) == length\n"
        "print(whole, length)\n")
    env = {"PATH": f"{attacker.venv}/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp",
           "PBSPLUG_HOME": str(engine.root)}
    proc = subprocess.Popen(
        [shutil.which("runuser") or "runuser", "-u", attacker.user, "--",
         f"{attacker.venv}/bin/python", "-c", hold], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/tmp",
        start_new_session=True)
    try:
        readable, _, _ = select.select([proc.stdout], [], [], 180)
        line = proc.stdout.readline() if readable else ""
        assert line.strip() == "answering", line
        for _ in range(2 * 16):  # (root's: never held back)
            assert engine.client("status")["pid"] == pid
        out, err = proc.communicate("go\n", timeout=300)
    finally:  # (its group, only while it is not reaped: then its number may be another's)
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, err
    whole, size = map(int, out.split())
    assert whole == 16 and size > MAX_UNSENT_PER_UID
    grew = (kb("VmHWM") - before) * 1024
    assert grew < 8 * size, f"the server grew {grew >> 20} MiB for answers of {size >> 20} MiB"
    assert engine.client("stat_server")
