# pbsplug's hook script for PBS, written by `pbsplug pbs install`: do not edit.
#
# PBS runs it in its own interpreter (no site-packages, PYTHONPATH ignored, -OO), inside the
# server for server events and in a fresh pbs_python per event on the execution hosts. The
# hook's config file (imported with the script) says where pbsplug is installed and which
# plugin to run. An execution-host event run as root goes, as plain data (pbs_wire, which
# needs no pbsplug import), to the host's pbsplug worker, started by the first event that
# finds none (`worker`, asked through `worker_client`, stdlib only like pbs_wire and loaded
# from the same folder); anything else, or a worker that cannot be had (or started: said in
# PBS's log), runs the plugin in this interpreter (pbs_bridge).
import json
import os
import sys

import pbs

# The functions' annotations are strings, never evaluated, and what they name is imported
# for the checker alone (mypy takes TYPE_CHECKING as true): not even ``typing`` is imported
# for them in PBS's interpreter.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# No .pyc written from here: a hook may run under a job owner's file size limit (launch,
# attach), which would cut them short and break every later import of them.
sys.dont_write_bytecode = True


def _ask_worker(config: "dict[str, Any]", config_text: "bytes", name: "str",
                data: "dict[str, Any]") -> "dict[str, Any] | None":
    """The plugin's outcome from the host's worker, or None when there is no worker to ask."""
    import hashlib

    import pbs_wire
    import worker_client

    run_dir = config.get("worker_dir") or "/run/pbsplug"
    digest = hashlib.sha256(config_text).hexdigest()[:20]
    path = os.path.join(run_dir, f"pbs-{digest}.sock")
    # A start that fails (no folder: /run read-only, a full disk; an unsafe one; its lock;
    # its process), or a worker that reset the connection twice, is said in PBS's log, and
    # the plugin runs here, as without a worker: as the hook's error, fail_action could
    # take the node offline.
    def failed(why: "str") -> "None":
        pbs.logmsg(pbs.LOG_WARNING, pbs_wire.one_line(
            f"pbsplug: {name}: {why}; the plugin runs in this process"))

    # A launch or attach hook runs in the job's own process, under the job owner's umask
    # and limits: it asks a worker that runs already, and never starts one with those.
    answer = worker_client.ask(config["python"], pbs.hook_config_filename, path,
                               json.dumps({"event": name, "data": data}).encode(),
                               may_start=name not in ("execjob_launch", "execjob_attach"),
                               failed=failed)
    if answer is None:
        return None
    if not answer:  # the event's process ended without an answer (killed, or crashed)
        return {"kind": "error", "detail": "the plugin's process ended without an answer",
                "changes": {}, "logs": [], "hook": config.get("plugin"), "event": name}
    return json.loads(answer)


def _pbsplug_hook() -> "None":
    path = pbs.hook_config_filename
    if not path:
        raise RuntimeError("pbsplug: this hook has no config file; run 'pbsplug pbs install'")
    with open(path, "rb") as fh:
        config_text = fh.read()
    config = json.loads(config_text)
    if config.get("worker") and os.geteuid() == 0:
        sys.path.insert(0, config["wire_dir"])  # pbs_wire and worker_client, stdlib only
        import pbs_wire
        import worker_client  # noqa: F401 - imported here, while wire_dir is on sys.path

        del sys.path[0]
        event = pbs.event()
        types = pbs_wire.Types(pbs)
        name = types.event_name(event.type, config["objects"])
        if name is not None and config["objects"][name][1]:  # an execution-host event
            objects = config["objects"][name][0]
            data = pbs_wire.event_data_or_reject(pbs, event, types, objects, True)
            outcome = _ask_worker(config, config_text, name, data)
            if outcome is not None:
                pbs_wire.log_records(pbs, outcome["logs"])
                pbs_wire.finish(pbs, event, outcome, types)
    import site

    for directory in config["site_dirs"]:
        site.addsitedir(directory)
    from pbsplug.adapters.pbs_bridge import run

    run(pbs, config)


_pbsplug_hook()
