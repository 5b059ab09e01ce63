"""Reading Machine/Job Features, for payloads and pilots.

::

    import os
    from pbsplug_mjf import read_features, time_left

    machine = read_features(os.environ["MACHINEFEATURES"])
    job = read_features(os.environ["JOBFEATURES"])
    print(job["allocated_cpu"], time_left(machine, job))

A location is a local directory (a leading ``/``) or an ``http://`` / ``https://`` URL, as the
note says. Values come back typed (int, float for the HS06 ratings, str for job_id); a key
that is absent is missing from the result. The static keys of a location are read once per
process; the dynamic ones (shutdowntime, shutdowntime_job) are read again on every call.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping

from pbsplug import clock

from .derive import MJFError
from .keys import DYNAMIC_KEYS, JOB_KEYS, MACHINE_KEYS, Value, parse_value

#: Static values already read, by location.
_static: dict[str, dict[str, Value]] = {}


def _is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def _fetch(location: str, key: str, timeout: float) -> str | None:
    """A key's text, None when it is absent (no file, or HTTP 404)."""
    if _is_url(location):
        url = f"{location}/{key}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                return answer.read().decode("ascii", "replace")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise MJFError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        except TimeoutError:
            raise MJFError(f"{url}: no answer within {timeout:g} s") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                raise MJFError(f"{url}: no answer within {timeout:g} s") from None
            raise MJFError(f"{url}: {getattr(reason, 'strerror', None) or reason}") from None
        except (OSError, http.client.HTTPException) as exc:  # dropped mid-answer, garbled
            raise MJFError(f"{url}: {exc.__class__.__name__}: {exc}") from None
    path = f"{location}/{key}"
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise MJFError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_features(location: str, keys: Iterable[str] | None = None, *,
                  timeout: float = 10.0) -> dict[str, Value]:
    """The features at `location` ($MACHINEFEATURES or $JOBFEATURES): every standard key
    present (or only `keys`), typed. `MJFError` names the location and key when one cannot
    be read or does not hold what the note defines."""
    location = str(location).rstrip("/")
    if not (location.startswith("/") or _is_url(location)):
        raise MJFError(f"{location!r} is neither an absolute path nor an http(s) URL")
    wanted = tuple(keys) if keys is not None else MACHINE_KEYS + JOB_KEYS
    cached = _static.setdefault(location, {})
    values: dict[str, Value] = {}
    for key in wanted:
        if key not in DYNAMIC_KEYS and key in cached:
            values[key] = cached[key]
            continue
        text = _fetch(location, key, timeout)
        if text is None:
            continue
        try:
            values[key] = parse_value(key, text)
        except ValueError as exc:
            raise MJFError(f"{location}/{exc}") from None
        if key not in DYNAMIC_KEYS:
            cached[key] = values[key]
    return values


def time_left(machine: Mapping[str, Value], job: Mapping[str, Value],
              now: float | None = None) -> int | None:
    """Seconds the job may still run, as DIRAC computes them: the earliest of
    jobstart_secs + wall_limit_secs, shutdowntime_job and shutdowntime, minus now (negative
    once it has passed); None when none of them is known."""
    now = clock.now() if now is None else now
    limits = [int(job[k]) for k in ("shutdowntime_job",) if k in job]
    if "shutdowntime" in machine:
        limits.append(int(machine["shutdowntime"]))
    if "jobstart_secs" in job and "wall_limit_secs" in job:
        limits.append(int(job["jobstart_secs"]) + int(job["wall_limit_secs"]))
    return min(limits) - int(now) if limits else None
