"""The API's HTTP as the server reads it (issue 17): malformed requests are refused in one
clear line with PBS's Invalid request (15004), the limits hold, and a refused request never
reaches the engine."""

from __future__ import annotations

import json
import socket
from types import SimpleNamespace

import pytest

from pbsplug.engine.client import MAX_BODY_BYTES
from pbsplug.engine.errors import PBSE_IVALREQ, PbsError


def _raw(engine, data: bytes) -> tuple[str, dict]:
    """Send `data` on a fresh connection; the status line and the JSON answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(engine.home.socket))
        s.sendall(data)
        got = b""
        while chunk := s.recv(1 << 16):
            got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), json.loads(body)


@pytest.mark.parametrize("request_bytes, status, text", [
    (b"GET /v1/status HTTP/1.0\r\n\r\n", "400", "method 'GET'"),
    (b"POST /status HTTP/1.0\r\n\r\n", "400", "path '/status'"),
    (b"POST /v1/no-such HTTP/1.0\r\n\r\n", "400", "path '/v1/no-such'"),
    (b"POST /v1/status\r\n\r\n", "400", "malformed request line"),
    (b"POST /v1/status HTTP/1.0\r\nno colon\r\n\r\n", "400", "malformed header line"),
    (b"POST /v1/status HTTP/1.0\r\nContent-Length: -1\r\n\r\n", "400", "bad Content-Length"),
    # Latin-1's superscript digits pass str.isdigit, not int(): it killed the server.
    (b"POST /v1/status HTTP/1.0\r\nContent-Length: \xb2\r\n\r\n", "400", "bad Content-Length"),
    (b"POST /v1/status HTTP/1.0\r\nContent-Length: 1\xb9\r\n\r\n", "400", "bad Content-Length"),
    (b"POST /v1/status HTTP/1.0\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "400",
     "bad Content-Length"),
    (b"POST /v1/status HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "400",
     "Transfer-Encoding is not supported"),
    (b"POST /v1/status HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1), "413",
     "over the server's limit"),
    (b"POST /v1/status HTTP/1.0\r\nContent-Length: 3\r\n\r\n[1]", "400",
     "Invalid request: arguments: a JSON array, not an object"),
    (b"POST /v1/status HTTP/1.0\r\nContent-Length: 2\r\n\r\n{x", "400", "Invalid request"),
    (b"POST /v1/status HTTP/1.0\r\nContent-Length: 4000\r\n\r\n" + b"[" * 2000 + b"]" * 2000,
     "400", "Invalid request"),
    (b"POST /v1/no_such_request HTTP/1.0\r\n\r\n", "400", "Unknown request no_such_request"),
    # A JSON number past what int() reads (4300 digits): the answer was Python's words.
    *[(b"POST /v1/%s HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (op, len(body), body),
       "400", "Invalid request: arguments: a number of 5,000 digits (at most 1,000)")
      for op, body in ((b"status", b'{"x": %s}' % (b"9" * 5000)),
                       (b"submit", b'{"attrs": {"Priority": -%s}}' % (b"9" * 5000)))],
    # What the body's JSON cannot be (`pbsplug.jsontext`), each named: Python's words
    # before (the UTF-8 codec's), or taken (a key twice: the last one was).
    *[(b"POST /v1/status HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
       "400", f"Invalid request: arguments: {why}") for body, why in (
          (b"[" * 100_000, "arrays or objects nested too deeply"),
          (b'{"x": "\xff"}', "not UTF-8 text (byte 0xff at offset 7)"),
          (b'{"x": NaN}', "NaN is not a JSON number"),
          (b'{"x": [-Infinity]}', "-Infinity is not a JSON number"),
          (b'{"x": 1e400}', "a number past a float's range (1e400)"),
          (b'{"x": 1, "x": 2}', 'the key "x" twice in one object'),
          # 8 MiB of them cost the server's one loop 400 MB and seconds.
          (b'{"x": [' + b"[]," * 1_000_000 + b"[]]}",
           "1,000,003 arrays and objects (at most 1,000,000)"))],
])
def test_a_malformed_request_is_refused_in_one_line(engine, request_bytes, status, text):
    line, answer = _raw(engine, request_bytes)
    assert line.split()[1] == status, (line, answer)
    assert answer["error"]["code"] == PBSE_IVALREQ
    assert text in answer["error"]["message"], answer
    assert "\n" not in answer["error"]["message"]
    assert engine.client("status")["pid"] == engine.home.server_pid()


def test_a_request_split_in_pieces_is_read_whole(engine):
    body = json.dumps({"ids": None}).encode()
    data = (b"POST /v1/stat_jobs HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
            + body)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(engine.home.socket))
        for i in range(len(data)):  # one byte at a time: the server reassembles them
            s.send(data[i:i + 1])
        got = b""
        while chunk := s.recv(1 << 16):
            got += chunk
    assert got.startswith(b"HTTP/1.0 200 OK\r\n"), got[:200]
    assert json.loads(got.partition(b"\r\n\r\n")[2]) == {"result": {}}


def test_the_client_refuses_an_oversized_request_before_sending(engine):
    with pytest.raises(PbsError) as err:
        engine.client("qmgr", text="set server comment = " + "x" * MAX_BODY_BYTES)
    assert err.value.code == PBSE_IVALREQ
    assert "over the server's limit" in err.value.message
    assert "connection from" not in engine.log()  # it never reached the server


def test_a_failing_poll_does_not_stop_the_server(engine):
    """Whatever `Engine.poll` raises (here a walltime nobody can read, written behind the
    server's back), the loop logs it, once, and goes on serving."""
    import sqlite3

    from pbsplug.engine.testing import until

    job_id = engine.submit("sleep 60\n")
    engine.wait(job_id, "R")
    db = sqlite3.connect(engine.home.db, timeout=30)
    attrs = json.loads(db.execute("SELECT attrs FROM jobs WHERE id=?", (job_id,)).fetchone()[0])
    attrs["Resource_List"]["walltime"] = "not-a-walltime"
    with db:
        db.execute("UPDATE jobs SET attrs=? WHERE id=?", (json.dumps(attrs), job_id))
    db.close()
    # The next polls fail on it: on that job alone (or, where the engine sets such a job
    # aside, they do that).
    failed = f";{job_id};handling the running job failed: "
    until(lambda: failed in engine.log() or engine.job(job_id)["job_state"] != "R",
          what="a poll to meet the bad walltime")
    held = engine.submit("true\n", Hold_Types="u")  # the server goes on answering
    assert engine.job(held)["job_state"] == "H"
    assert engine.pbs("qstat").returncode == 0
    assert engine.client("status")["pid"] == engine.home.server_pid()
    assert engine.log().count(failed) <= 1  # not a line every 50 ms
    assert "poll failed" not in engine.log()  # the rest of each poll went on


def test_a_connection_that_fails_unexpectedly_drops_that_client_alone(tmp_path, monkeypatch):
    """Whatever reading one connection raises (a bug in the server's HTTP), the listener
    logs it and drops that connection; the loop and the other clients go on."""
    from pbsplug.engine import api

    logged: list[str] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(tmp_path / "s.sock"))
        server.listen()
        server.setblocking(False)  # (as `serve` makes it)
        listener = api._Listener(SimpleNamespace(asking_fds=list), server)  # (no hooks)
        monkeypatch.setattr(listener, "log", lambda kind, message: logged.append(message))
        bad, good = (socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2))
        with bad, good:
            bad.connect(str(tmp_path / "s.sock"))
            good.connect(str(tmp_path / "s.sock"))
            real = api._Connection.parse_head

            def parse_head(conn):
                if b"boom" in conn.buf:
                    raise RuntimeError("a bug in the parser")
                return real(conn)

            monkeypatch.setattr(api._Connection, "parse_head", parse_head)
            bad.sendall(b"POST /v1/status HTTP/1.0\r\nX-Boom: boom\r\n\r\n")
            good.sendall(b"POST /v1/status HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}")
            for _ in range(50):
                listener.wait(0.05)
                if listener.ready:
                    break
            assert [c.op for waiting in listener.ready.values() for c in waiting] == [
                "status"]  # the good one, whole
            assert len(listener.conns) == 1
            assert bad.recv(100) == b""  # closed by the server
            assert any("dropped" in m and "a bug in the parser" in m for m in logged), logged
        listener.selector.close()


def test_users_take_turns_so_many_requests_never_wait_out_anothers_one(tmp_path):
    """One user's requests, however many and however slow each is to answer (a qhold of
    10,000 ids), are answered in turn with the other users' (round robin per uid), not
    before them: a user with 30 such requests queued once held another user's qstat past
    its 60 s timeout."""
    from pbsplug.engine import api

    served: list[int] = []
    late: list = []  # a request that comes in while the first one is answered

    class Engine:
        stopping = False

        def handle(self, op, args, uid):
            served.append(uid)
            if late:
                listener.read(late.pop())
            return {}

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(tmp_path / "s.sock"))
        listener = api._Listener(Engine(), server)
        pairs = []

        def connection(uid):
            ours, theirs = socket.socketpair()
            pairs.append((ours, theirs))
            conn = api._Connection(ours, uid, float("inf"))
            listener.conns[ours.fileno()] = conn
            listener.per_uid[uid] += 1
            listener.selector.register(ours, 1)
            theirs.sendall(b"POST /v1/status HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}")
            return conn

        for uid in [1000] * 5 + [1001, 0, 1001]:  # in the order they came in
            listener.read(connection(uid))
        while listener.ready:
            listener.answer(listener.next_ready())
        assert served == [1000, 1001, 0, 1000, 1001, 1000, 1000, 1000]
        # A user who comes while another's request is answered is next, not after that
        # user's next request.
        served.clear()
        for _ in range(3):
            listener.read(connection(1000))
        late.append(connection(1002))
        while listener.ready:
            listener.answer(listener.next_ready())
        assert served == [1000, 1002, 1000, 1000]
        for ours, theirs in pairs:
            assert theirs.recv(100).startswith(b"HTTP/1.0 200 OK")  # every one answered
            ours.close()
            theirs.close()
        listener.selector.close()


def test_a_key_twice_in_a_request_is_refused_not_read_as_its_last(engine):
    """A request naming an attribute twice is refused, and no job is made: the server kept
    the last name and made the job, a reader that keeps the first saw another request."""
    body = b'{"attrs": {"Job_Name": "first", "Job_Name": "second"}, "script": "true\\n"}'
    line, answer = _raw(engine, b"POST /v1/submit HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(body), body))
    assert line.split()[1] == "400", answer
    assert answer["error"] == {"code": PBSE_IVALREQ, "obj": None, "message": (
        'Invalid request: arguments: the key "Job_Name" twice in one object')}
    assert engine.client("stat_jobs", history=True) == {}


def test_a_listener_whose_close_fails_still_closes_the_engine(engine_root, monkeypatch):
    """As the server stops, a listener whose close raises leaves the engine closed all the
    same (its hook chains stopped, its database closed) and the pid file gone: the
    engine's close was skipped."""
    from pbsplug.engine import api
    from pbsplug.engine.home import Home

    closed: list[str] = []
    engine_close = api.Engine.close

    def close_engine(self):
        closed.append("engine")
        engine_close(self)

    def close_listener(self):
        raise OSError("the listener's close failed")

    monkeypatch.setattr(api.signal, "signal", lambda *args: None)  # (pytest's own stay)
    monkeypatch.setattr(api._Listener, "run", lambda self: None)  # (stopped at once)
    monkeypatch.setattr(api._Listener, "close", close_listener)
    monkeypatch.setattr(api.Engine, "close", close_engine)
    home = Home(engine_root)
    with pytest.raises(OSError, match="the listener's close failed"):
        api.serve(home)
    assert closed == ["engine"]
    assert home.server_pid() is None


def test_a_failing_step_of_a_hook_chain_does_not_stop_the_loop(tmp_path, monkeypatch):
    """Whatever stepping the hook chains that parked requests and the server's vnode
    changes wait for raises (`Engine.poll_asking`, run when one of their hooks wrote), the
    loop logs it as a failed poll and goes on: it ended the server's loop."""
    import os

    from pbsplug.engine import api

    logged: list[str] = []
    read_end, write_end = os.pipe()
    os.write(write_end, b"x")  # (a hook that wrote)

    class Engine:
        stopping = False
        polls = 0

        def asking_fds(self):
            return [read_end]

        def poll_asking(self):
            raise RuntimeError("a bug stepping a chain")

        def poll(self):
            self.polls += 1
            self.stopping = True

    engine = Engine()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(str(tmp_path / "s.sock"))
            server.listen()
            server.setblocking(False)
            listener = api._Listener(engine, server)
            monkeypatch.setattr(listener, "log", lambda kind, message: logged.append(message))
            listener.run()
            listener.selector.close()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert engine.polls == 1  # the loop went on to its poll
    assert any("poll failed" in m and "a bug stepping a chain" in m for m in logged), logged
