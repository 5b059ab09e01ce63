"""The ATOM job API as the batch system uses it: REST over HTTP on a UNIX socket, through
requests with requests-unixsocket.

``http+unix://<percent-encoded socket path>/rm/v1/jobs`` takes a POST when a job starts and
``.../rm/v1/jobs/<jobid>`` a DELETE when it ends. The base ``/rm/v1`` is fixed here, as the
seed has it: a configuration file cannot change it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import requests
import requests_unixsocket

from pbsplug import HookAlarm, jsontext

#: The API's base path. Internal: not a configuration key (seed 000, "version_uri").
VERSION_URI = "/rm/v1"
JOBS = "/jobs"


class AtomFailure(Exception):
    """ATOM did not answer as needed: no answer in time, no connection, or a status that
    means failure. The text says which request and what came back."""


def jobs_url(socket_file: str, jobid: str | None = None) -> str:
    """``http+unix://%2Fvar%2Frun%2Fatomd%2Fatomd.sock/rm/v1/jobs[/<jobid>]``."""
    url = f"http+unix://{quote(socket_file, safe='')}{VERSION_URI}{JOBS}"
    return url if jobid is None else f"{url}/{quote(jobid, safe='')}"


def describe(response: requests.Response) -> str:
    """The status and every field of the answer: ``HTTP 500 Internal Server Error;
    detail='node unhealthy', status=500``. A body that is not JSON, or that `answer`
    refuses, is shown as text with why: ``body 'oops' (not JSON: ...)``."""
    text = f"HTTP {response.status_code} {response.reason or ''}".rstrip()
    if not response.content:
        return text + "; no body"
    try:
        body = answer(response)
    except jsontext.JsonError as exc:
        return f"{text}; body {response.text[:2000]!r} ({exc.why})"
    if isinstance(body, Mapping):
        fields = ", ".join(f"{k}={v!r}" for k, v in body.items())
        return f"{text}; {fields or 'an empty object'}"
    return f"{text}; body {json.dumps(body)[:2000]}"


def answer(response: requests.Response) -> Any:
    """The answer's JSON body, read with `pbsplug.jsontext` (`response.json()` raised
    RecursionError on a body nested deeply, through the hook, and read ``NaN`` and the last
    of a key twice), or `jsontext.JsonError` naming why not."""
    return jsontext.loads(response.content, "ATOM's answer")


class Atom:
    """One hook run's conversation with ATOM. `config` is the plugin's checked
    configuration (post_timeout, delete_timeout, unix_socket_file); `log` the hook's logger:
    failures go to it at error level with the request, the status and every field of the
    answer, and every request and answer at debug level."""

    def __init__(self, config: Mapping[str, Any], log: logging.Logger):
        self.socket_file = str(config["unix_socket_file"])
        self.post_timeout = float(config["post_timeout"])
        self.delete_timeout = float(config["delete_timeout"])
        self.log = log
        self.session = requests_unixsocket.Session()

    # -- the two calls the hook makes -----------------------------------------------------------
    def start_job(self, jobid: str, uid: int, exclusive: bool) -> None:
        """POST the job. A 400 means ATOM may still hold it (a requeued job, a lost DELETE):
        DELETE it (a 404 is fine) and POST once more. Raises `AtomFailure` otherwise."""
        payload = {"jobid": jobid, "uid": uid, "exclusive": exclusive}
        response = self._post(payload)
        if response.status_code == 200:
            return
        if response.status_code == 400:
            self.log.warning("POST %s %s: %s; ATOM may still hold the job: deleting it and "
                             "posting again", jobs_url(self.socket_file), json.dumps(payload),
                             describe(response))
            deleted = self._delete(jobid)
            if deleted.status_code not in (200, 204, 404):
                raise self._failed("DELETE", jobs_url(self.socket_file, jobid), None, deleted)
            response = self._post(payload)
            if response.status_code == 200:
                return
        raise self._failed("POST", jobs_url(self.socket_file), payload, response)

    def end_job(self, jobid: str) -> None:
        """DELETE the job: 204 (or 200) is done; anything else raises `AtomFailure`, a 404
        included (ATOM should have held the job)."""
        response = self._delete(jobid)
        if response.status_code not in (200, 204):
            raise self._failed("DELETE", jobs_url(self.socket_file, jobid), None, response)

    def list_jobs(self, timeout: float) -> requests.Response:
        """``GET /rm/v1/jobs``, for ``pbsplug cray_atom check``."""
        return self._request("GET", jobs_url(self.socket_file), None, timeout)

    # -- one request ----------------------------------------------------------------------------
    def _post(self, payload: dict[str, Any]) -> requests.Response:
        return self._request("POST", jobs_url(self.socket_file), payload, self.post_timeout)

    def _delete(self, jobid: str) -> requests.Response:
        return self._request("DELETE", jobs_url(self.socket_file, jobid), None,
                             self.delete_timeout)

    def _request(self, method: str, url: str, payload: dict[str, Any] | None,
                 timeout: float) -> requests.Response:
        shown = f"{method} {url}" + (f" {json.dumps(payload)}" if payload is not None else "")
        self.log.debug("ATOM request: %s", shown)
        try:
            response = self.session.request(method, url, json=payload, timeout=timeout)
        except HookAlarm:
            self.log.error("%s: the hook's alarm came before ATOM answered", shown)
            raise
        except requests.Timeout:
            self.log.error("%s: no answer within %g s", shown, timeout)
            raise AtomFailure(f"{shown}: no answer within {timeout:g} s") from None
        except requests.RequestException as exc:
            self.log.error("%s: cannot reach ATOM: %s", shown, exc)
            raise AtomFailure(f"{shown}: cannot reach ATOM: {exc}") from None
        self.log.debug("ATOM answer to %s: %s", shown, describe(response))
        return response

    def _failed(self, method: str, url: str, payload: dict[str, Any] | None,
                response: requests.Response) -> AtomFailure:
        shown = f"{method} {url}" + (f" {json.dumps(payload)}" if payload is not None else "")
        self.log.error("%s: %s", shown, describe(response))
        return AtomFailure(f"{shown}: {describe(response)}")

    def close(self) -> None:
        self.session.close()
