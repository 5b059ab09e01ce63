"""The failure matrix of seed 000: each ATOM answer, each outcome (accept, plain reject, or
the hook's error, on which fail_action offlines the vnodes), and the exact requests the
service saw."""

from __future__ import annotations

import logging
import os
import pwd

import pytest

JOBS = "/rm/v1/jobs"
UID = os.getuid()
ME = pwd.getpwuid(UID).pw_name
BODY = {"jobid": "12.server", "uid": UID, "exclusive": False}
POST = ("POST", JOBS, BODY)
DELETE = ("DELETE", f"{JOBS}/12.server", None)

ACCEPTED = ("accept", ())
PLAIN_REJECT = ("reject", ())
OFFLINE = ("error", ("offline_vnodes",))


def result(outcome):
    return outcome.kind, outcome.fail_action


# -- execjob_begin ------------------------------------------------------------------------------

def test_200_accepts(hook, atom):
    assert result(hook("execjob_begin")) == ACCEPTED
    assert atom.requests == [POST]
    assert atom.jobs == {"12.server": {**BODY, "state": "running"}}


def test_the_uid_is_the_job_owners(hook, atom):
    nobody = pwd.getpwnam("nobody")
    assert result(hook("execjob_begin", euser="nobody")) == ACCEPTED
    assert atom.requests == [("POST", JOBS, {**BODY, "uid": nobody.pw_uid})]


@pytest.mark.parametrize("delete_status", [None, 200, 404])
def test_400_deletes_then_posts_again(hook, atom, delete_status):
    """ATOM still holds the job (None: the service's own DELETE answer, 204)."""
    atom.script("POST", 400, {"detail": "job 12.server already exists"})
    if delete_status is not None:
        atom.script("DELETE", delete_status)
    assert result(hook("execjob_begin")) == ACCEPTED
    assert atom.requests == [POST, DELETE, POST]


def test_400_then_delete_500_fails(hook, atom):
    atom.script("POST", 400)
    atom.script("DELETE", 500, {"detail": "internal"})
    outcome = hook("execjob_begin")
    assert result(outcome) == OFFLINE
    assert atom.requests == [POST, DELETE]
    assert "HTTP 500" in outcome.detail


def test_400_then_post_500_fails(hook, atom):
    atom.script("POST", 400)
    atom.script("POST", 500)
    assert result(hook("execjob_begin")) == OFFLINE
    assert atom.requests == [POST, DELETE, POST]


def test_400_twice_fails(hook, atom):
    atom.script("POST", 400, times=2)
    assert result(hook("execjob_begin")) == OFFLINE
    assert atom.requests == [POST, DELETE, POST]


@pytest.mark.parametrize("status", [500, 401, 403, 404, 503])
def test_other_statuses_fail(hook, atom, status):
    atom.script("POST", status, {"status": status, "detail": "no"})
    assert result(hook("execjob_begin")) == OFFLINE
    assert atom.requests == [POST]


def test_a_failure_is_logged_with_the_request_the_status_and_every_field(hook, atom, caplog):
    atom.script("POST", 500, {"status": 500, "title": "Internal Server Error",
                              "detail": "node unhealthy"})
    with caplog.at_level(logging.INFO):
        hook("execjob_begin")
    errors = [r.getMessage() for r in caplog.records
              if r.name == "pbsplug.hook.cray_atom" and r.levelno == logging.ERROR]
    assert errors[0] == (
        f"POST http+unix://{str(atom.socket_path).replace('/', '%2F')}{JOBS} "
        f'{{"jobid": "12.server", "uid": {UID}, "exclusive": false}}: '
        "HTTP 500 Internal Server Error; status=500, title='Internal Server Error', "
        "detail='node unhealthy'")


def test_requests_and_answers_are_logged_at_debug_level(hook, atom, caplog):
    with caplog.at_level(logging.DEBUG, logger="pbsplug.hook.cray_atom"):
        hook("execjob_begin")
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG
             and r.name == "pbsplug.hook.cray_atom"]
    assert debug[0].startswith("ATOM request: POST http+unix://")
    assert debug[1].startswith("ATOM answer to POST http+unix://")
    assert debug[1].endswith(f"HTTP 200 OK; jobid='12.server', uid={UID}, exclusive=False, "
                             "state='running'")


def test_a_200_nested_deeply_accepts(hook, atom):
    """ATOM took the job; describing its answer (at debug level, for every answer) raised
    response.json()'s RecursionError: the hook's error, and the vnodes offlined."""
    atom.script("POST", 200, raw=b"[" * 100_000)
    assert result(hook("execjob_begin")) == ACCEPTED
    assert atom.requests == [POST]


@pytest.mark.parametrize("raw, shown", [
    (b'{"detail": "node unhealthy", "detail": "ok"}', 'the key "detail" twice in one object'),
    (b'{"status": NaN}', "NaN is not a JSON number"),
    (b"oops", "not JSON: Expecting value: line 1 column 1 (char 0)"),
])
def test_a_failure_with_an_answer_that_is_not_json_shows_it_and_why(hook, atom, caplog, raw,
                                                                     shown):
    """response.json() kept the last of a key twice ("detail='ok'") and read NaN."""
    atom.script("POST", 500, raw=raw)
    outcome = hook("execjob_begin")
    assert result(outcome) == OFFLINE
    errors = [r.getMessage() for r in caplog.records
              if r.name == "pbsplug.hook.cray_atom" and r.levelno == logging.ERROR]
    assert errors[0].endswith(f"HTTP 500 Internal Server Error; body {raw.decode()!r} "
                              f"({shown})"), errors[0]


def test_a_post_timeout_fails(hook, atom):
    atom.script("POST", delay=3.0)
    outcome = hook("execjob_begin", post_timeout=0.5)  # (it answers, 200, after 3 s)
    assert result(outcome) == OFFLINE
    assert "no answer within 0.5 s" in outcome.detail
    assert atom.requests == [POST]


def test_a_delete_timeout_during_the_retry_fails(hook, atom):
    atom.script("POST", 400)
    atom.script("DELETE", delay=3.0)
    outcome = hook("execjob_begin", delete_timeout=0.5)
    assert result(outcome) == OFFLINE
    assert "DELETE" in outcome.detail and "no answer within 0.5 s" in outcome.detail
    assert atom.requests == [POST, DELETE]


def test_a_dropped_connection_fails(hook, atom):
    atom.script("POST", drop=True)
    assert result(hook("execjob_begin")) == OFFLINE
    assert atom.requests == [POST]


def test_connection_refused_fails(hook, atom):
    atom.stop(remove_socket=False)  # the socket file stays; nobody listens on it
    assert atom.socket_path.exists()
    outcome = hook("execjob_begin")
    assert result(outcome) == OFFLINE
    assert "cannot reach ATOM" in outcome.detail


def test_no_socket_file_accepts_without_a_request(hook, atom):
    atom.stop()
    assert not atom.socket_path.exists()
    assert result(hook("execjob_begin")) == ACCEPTED
    assert result(hook("execjob_end")) == ACCEPTED
    assert atom.requests == []


def test_no_socket_file_accepts_an_owner_with_no_uid_here(hook, atom):
    """Not a Shasta node: nothing is sent, so the owner's uid is never asked for (README:
    "no socket file: every job is accepted")."""
    atom.stop()
    outcome = hook("execjob_begin", euser="no_such_user_pbsplug")
    assert result(outcome) == ACCEPTED, outcome.message
    assert atom.requests == []


def test_an_owner_with_no_uid_here_is_a_plain_reject(hook, atom):
    outcome = hook("execjob_begin", euser="no_such_user_pbsplug")
    assert result(outcome) == PLAIN_REJECT
    assert outcome.message == ("cray_atom: the job's owner 'no_such_user_pbsplug' has no uid "
                               "on this host")
    assert atom.requests == []


def test_an_alarm_during_the_post_offlines(hook, atom):
    atom.script("POST", delay=5.0)
    outcome = hook("execjob_begin", alarm=1, post_timeout=30.0)
    assert outcome.kind == "alarm"
    assert outcome.fail_action == ("offline_vnodes",)
    assert atom.requests == [POST]


@pytest.mark.parametrize("place,sharing,exclusive", [
    ("scatter:excl", None, True),
    ("pack:shared", "default_excl", False),
    ("free", "force_exclhost", True),
    (None, "default_exclhost", True),
])
def test_exclusive_is_sent_as_the_scheduler_decides_it(hook, atom, place, sharing, exclusive):
    assert result(hook("execjob_begin", place=place, sharing=sharing)) == ACCEPTED
    assert atom.requests == [("POST", JOBS, {**BODY, "exclusive": exclusive})]


# -- execjob_end --------------------------------------------------------------------------------

def test_end_deletes_the_job(hook, atom):
    assert result(hook("execjob_begin")) == ACCEPTED
    atom.clear()
    assert result(hook("execjob_end")) == ACCEPTED  # the service's own answer: 204
    assert atom.requests == [DELETE]
    assert atom.jobs == {}


def test_end_accepts_200(hook, atom):
    atom.script("DELETE", 200, {"jobid": "12.server"})
    assert result(hook("execjob_end")) == ACCEPTED
    assert atom.requests == [DELETE]


@pytest.mark.parametrize("status", [404, 500, 400])
def test_end_errors_are_plain_rejects(hook, atom, status):
    """404 included: the node stays in service (seed 000: the next POST tells)."""
    if status != 404:  # 404 is the service's own answer for a job it does not hold
        atom.script("DELETE", status)
    outcome = hook("execjob_end")
    assert result(outcome) == PLAIN_REJECT
    assert f"HTTP {status}" in outcome.message
    assert atom.requests == [DELETE]


def test_end_timeout_is_a_plain_reject(hook, atom):
    atom.script("DELETE", delay=3.0)
    outcome = hook("execjob_end", delete_timeout=0.5)
    assert result(outcome) == PLAIN_REJECT
    assert "no answer within 0.5 s" in outcome.message
    assert atom.requests == [DELETE]


def test_end_alarm_is_a_plain_reject(hook, atom):
    atom.script("DELETE", delay=5.0)
    outcome = hook("execjob_end", alarm=1, delete_timeout=30.0)
    assert result(outcome) == PLAIN_REJECT
    assert outcome.message == ("cray_atom: DELETE of 12.server: the hook's alarm came before "
                               "ATOM answered")
    assert atom.requests == [DELETE]


def test_end_connection_refused_is_a_plain_reject(hook, atom):
    atom.stop(remove_socket=False)
    outcome = hook("execjob_end")
    assert result(outcome) == PLAIN_REJECT
    assert "cannot reach ATOM" in outcome.message
