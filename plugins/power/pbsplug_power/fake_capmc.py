"""A stand-in for Cray's ``capmc``, for tests and the demo on machines that have no Cray.

It answers as capmc does (one JSON object with ``e`` and ``err_msg``; ``node_status`` with
``on``, ``off`` and ``ready`` lists) and keeps the nodes' power in a JSON state file, named by
the ``FAKE_CAPMC_STATE`` environment variable::

    {"nodes": {"24": {"power": "on", "ready_at": 0, "sleep_limit": 0}},
     "boot_delay": 0,                       # seconds from node_on to ready
     "fail": {"node_on": {"e": 52, "err_msg": "Invalid nid"}},   # scripted failures
     "calls": [["node_on", "--nids", "24-25"]]}                  # every argv it received

`install(path, state_file)` writes an executable ``capmc`` at `path` that runs this module.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import sys
import time
from pathlib import Path

from .capmc import parse_nid_list

VERBS = ("node_on", "node_off", "node_status", "set_sleep_state_limit")


def install(path: str | os.PathLike, state_file: str | os.PathLike,
            nodes: dict[int, str] | None = None, boot_delay: float = 0) -> Path:
    """An executable fake capmc at `path`, its state in `state_file` (nids powered as in
    `nodes`, default none)."""
    path, state_file = Path(path), Path(state_file)
    state_file.write_text(json.dumps({
        "nodes": {str(n): {"power": p, "ready_at": 0, "sleep_limit": 0}
                  for n, p in (nodes or {}).items()},
        "boot_delay": boot_delay, "fail": {}, "calls": []}))
    path.write_text(f"#!/bin/sh\nFAKE_CAPMC_STATE='{state_file}' exec '{sys.executable}' "
                    f"-m pbsplug_power.fake_capmc \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _answer(body: dict) -> int:
    print(json.dumps(body))
    return 0


def main(argv: list[str]) -> int:
    state_path = os.environ["FAKE_CAPMC_STATE"]
    with open(state_path, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # one capmc at a time changes the state
        state = json.load(handle)
        state["calls"].append(argv)
        result = _run(state, argv)
        handle.seek(0)
        handle.truncate()
        json.dump(state, handle)
    return _answer(result)


def _run(state: dict, argv: list[str]) -> dict:
    if not argv or argv[0] not in VERBS:
        return {"e": 22, "err_msg": f"unknown command {argv[:1]}"}
    verb, args = argv[0], argv[1:]
    if verb in state["fail"]:
        return state["fail"][verb]
    options = dict(zip(args[::2], args[1::2], strict=False))
    text = options.get("--nids") or options.get("-n")
    try:
        nids = parse_nid_list(text) if text else [int(n) for n in state["nodes"]]
    except ValueError as exc:
        return {"e": 22, "err_msg": str(exc)}
    unknown = [n for n in nids if str(n) not in state["nodes"]]
    if unknown:
        return {"e": 52, "err_msg": f"Invalid nid(s) {unknown}"}
    now = time.time()
    nodes = {n: state["nodes"][str(n)] for n in nids}
    if verb == "node_on":
        for node in nodes.values():
            if node["power"] != "on":
                node.update(power="on", ready_at=now + state["boot_delay"])
    elif verb == "node_off":
        for node in nodes.values():
            node.update(power="off", ready_at=0)
    elif verb == "set_sleep_state_limit":
        limit = options.get("--limit")
        if limit is None or not limit.isdigit():
            return {"e": 22, "err_msg": "--limit needs a sleep state number"}
        for node in nodes.values():
            node["sleep_limit"] = int(limit)
    else:
        answer: dict = {"e": 0, "err_msg": "Success", "on": [], "off": [], "ready": []}
        for nid, node in nodes.items():
            if node["power"] == "off":
                answer["off"].append(nid)
            elif node["ready_at"] <= now:
                answer["ready"].append(nid)
            else:
                answer["on"].append(nid)
        return answer
    return {"e": 0, "err_msg": "Success"}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
