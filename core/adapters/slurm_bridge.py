"""Slurm's scripts as pbsplug events, and each outcome carried out with PBS's meaning.

`slurm_program` (the program Slurm runs) sends ``{"script", "env"}`` to the host's worker
(`worker`, with `load` and `dispatch` below) or, where there is none, calls `dispatch` itself.
`dispatch` builds pbsplug's events from Slurm's environment and ``scontrol`` (`slurm_read`),
fires them through pbsplug's runner (the plugins' chain, order, alarm and fail_action), and
maps the outcome onto Slurm:

===================  ==============================================  =========================
script               events                                          outcome in Slurm
===================  ==============================================  =========================
PrologSlurmctld      runjob                                          reject, error, alarm: exit
                                                                     1 (Slurm requeues a batch
                                                                     job, never drains)
Prolog               execjob_begin, execjob_prologue, execjob_launch reject: ``scontrol
                                                                     requeue`` (``scancel`` for
                                                                     delete() or launch), exit
                                                                     0 (no drain); error or
                                                                     alarm: the same, and with
                                                                     fail_action offline_vnodes
                                                                     the node drained with the
                                                                     hook's name
(TaskProlog)         execjob_launch's environment                    ``export`` / ``unset``
Epilog               execjob_epilogue, execjob_end                   always exit 0 (PBS ignores
                                                                     their rejects)
EpilogSlurmctld      jobobit                                         always exit 0
HealthCheckProgram   exechost_startup (first run after slurmd        vnode changes (offline:
                     starts), then exechost_periodic                 drain), exit 0
SuspendProgram,      periodic (`slurm_power`)                        the plugins' drivers; see
ResumeProgram,                                                       `slurm_power`
``pbsplug slurm
periodic``
===================  ==============================================  =========================

A Slurm action that fails (scontrol cannot requeue) ends the script with exit 1, so that
Slurm's own rule (drain and requeue) stops the job rather than letting it run.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..events import Event
from ..runner import ACCEPT, ALARM, ERROR, Outcome, Runner
from .slurm_read import Slurm, SlurmError, checked_job_id

log = logging.getLogger("pbsplug.slurm")

#: The events each script fires, in order.
SCRIPT_EVENTS = {
    "prolog_slurmctld": ("runjob",),
    "prolog": ("execjob_begin", "execjob_prologue", "execjob_launch"),
    "epilog": ("execjob_epilogue", "execjob_end"),
    "epilog_slurmctld": ("jobobit",),
    "health_check": ("exechost_startup", "exechost_periodic"),
}
#: PBS's comment on a vnode a hook's error took offline (pbs-behavior.md).
OFFLINE_REASON = "offlined by hook '{hook}' due to hook error"


class Context:
    """What a worker keeps between events: the runner over the site's plugins, Slurm's
    commands and the installed config."""

    def __init__(self, config: Mapping[str, Any], runner: Runner, slurm: Slurm):
        self.config = config
        self.runner = runner
        self.slurm = slurm

    @property
    def state_dir(self) -> Path:
        return Path(self.config["state_dir"])


def load(config: Mapping[str, Any], mode: str | None = "inprocess") -> Context:
    """The plugins the install named, loaded once (in the worker, or in the program).

    In the worker every hook runs in the child the worker forked for the script, under
    SIGALRM's alarm (``inprocess``: no second fork per event); the worker kills a child
    still running past its deadline. Without a worker (`run_here`) each hook gets the
    runner's own isolation (a forked child, killed past its alarm)."""
    from .bridge import plugin_set

    _log_to(config.get("log_file") or "")
    plugins = plugin_set(config.get("plugins") or {}, config.get("config_file")
                         or "<pbsplug-slurm.json>")
    runner = Runner(plugins, mode=mode, trace_file=config.get("trace_file") or None)
    slurm = Slurm(config.get("bin_dir") or "/usr/bin", config.get("slurm_conf") or "")
    return Context(config, runner, slurm)


def _log_to(path: str) -> None:
    root = logging.getLogger()
    if path and not any(getattr(h, "_pbsplug_slurm", False) for h in root.handlers):
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(path)
        except OSError:
            return
        handler._pbsplug_slurm = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter(
            "%(asctime)s %(process)d %(name)s %(levelname)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)


def dispatch(ctx: Context, request: Mapping[str, Any]) -> dict[str, Any]:
    """One Slurm script's run: ``{"exit": status, "stdout": text}``. Whatever goes wrong in
    pbsplug itself is one log line and the script's failure, never a traceback in Slurm."""
    script = str(request.get("script") or "")
    env = request.get("env")
    if not isinstance(env, Mapping):
        return _answer(1, f"pbsplug: the request carries no environment for {script!r}")
    env = {str(k): str(v) for k, v in env.items()}
    handler = HANDLERS.get(script)
    if handler is None:
        return _answer(1, f"pbsplug: no Slurm script {script!r}; scripts are: "
                          + ", ".join(HANDLERS))
    try:
        return handler(ctx, env, list(request.get("argv") or []))
    except (SlurmError, ValueError, OSError) as exc:
        log.error("%s job %s: %s", script, env.get("SLURM_JOB_ID", "-"), exc)
        return _answer(1, f"pbsplug {script}: {exc}")


def _answer(status: int, error: str = "", stdout: str = "") -> dict[str, Any]:
    return {"exit": status, "stdout": stdout, "error": error}


def this_node(env: Mapping[str, str]) -> str:
    return env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _fire(ctx: Context, name: str, data: Mapping[str, Any]) -> Outcome:
    return ctx.runner.fire(Event.from_dict(name, data))


def _stopped(out: Outcome, job_id: str, script: str) -> None:
    (log.warning if out.kind == "reject" else log.error)(
        "%s job %s: %s %s by '%s': %s (consequence: %s%s)", script, job_id, out.event,
        "rejected" if out.kind == "reject" else f"{out.kind}", out.hook, out.detail,
        out.consequence, f", fail_action {','.join(out.fail_action)}" if out.fail_action
        else "")


# -- vnode and job changes ----------------------------------------------------------------

def apply_vnode_changes(ctx: Context, changes: Mapping[str, Any], hook: str | None) -> None:
    """A hook's vnode changes as Slurm has them: a state with ``offline`` drains the node
    (reason: the comment the hook set, else that the hook did it); one without, for a node a
    hook had drained, resumes it. Other attributes have no Slurm counterpart and are
    logged."""
    for name, attrs in (changes or {}).items():
        attrs = dict(attrs)
        state = attrs.pop("state", None)
        comment = attrs.pop("comment", None)
        attrs.pop("_new", None)
        if state is not None:
            states = set(str(state).split(","))
            if "offline" in states:
                reason = comment or f"offlined by pbsplug hook '{hook}'"
                ctx.slurm.update(f"nodename={name}", "state=drain", f"reason={reason}")
                log.info("node %s drained: %s", name, reason)
            else:
                ctx.slurm.update(f"nodename={name}", "state=resume")
                log.info("node %s resumed by hook '%s'", name, hook)
        if attrs:
            log.info("hook '%s' changed %s of node %s: no Slurm counterpart, not applied",
                     hook, ", ".join(sorted(attrs)), name)


def apply_job_changes(ctx: Context, job_id: str, changes: Mapping[str, Any],
                      hook: str | None) -> None:
    """A hook's job changes: the comment becomes the job's Slurm comment; the rest is
    logged (no Slurm counterpart a node script may set)."""
    changes = {k: v for k, v in (changes or {}).items() if k != "_action"}
    comment = changes.pop("comment", None)
    if comment is not None:
        ctx.slurm.update(f"jobid={job_id}", f"comment={comment}")
    if changes:
        log.info("hook '%s' changed %s of job %s: not applied in Slurm", hook,
                 ", ".join(sorted(changes)), job_id)


def _host_failure(ctx: Context, out: Outcome, job_id: str, node: str, script: str
                  ) -> dict[str, Any]:
    """A Prolog event that did not accept: the node drained only for an error or alarm with
    offline_vnodes; the job requeued or cancelled through the controller, as PBS would."""
    _stopped(out, job_id, script)
    if out.kind in (ERROR, ALARM) and "offline_vnodes" in out.fail_action:
        reason = OFFLINE_REASON.format(hook=out.hook)
        ctx.slurm.update(f"nodename={node}", "state=drain", f"reason={reason}")
        log.warning("node %s drained: %s", node, reason)
    if out.kind == "reject":
        apply_vnode_changes(ctx, out.changes.get("vnode_list") or {}, out.hook)
    message = out.message or f"{out.event} {out.kind}"
    try:
        ctx.slurm.update(f"jobid={job_id}", f"comment=pbsplug {out.event}: {message}"[:250])
    except SlurmError as exc:
        log.warning("job %s: its comment could not be set: %s", job_id, exc)
    try:
        if out.consequence == "delete":
            ctx.slurm.cancel(job_id)
            log.info("job %s cancelled (%s)", job_id, out.event)
        else:
            try:
                ctx.slurm.requeue(job_id)
                log.info("job %s requeued (%s)", job_id, out.event)
            except SlurmError as exc:  # not requeueable (--no-requeue): PBS would delete
                log.warning("job %s cannot be requeued (%s): cancelled", job_id, exc)
                ctx.slurm.cancel(job_id)
    except SlurmError as exc:
        return _answer(1, f"pbsplug {script}: job {job_id} could not be stopped: {exc}")
    return _answer(0)


# -- the scripts ----------------------------------------------------------------------------

def prolog_slurmctld(ctx: Context, env: Mapping[str, str], argv: list[str]
                     ) -> dict[str, Any]:
    job_id = checked_job_id(env.get("SLURM_JOB_ID"))
    out = _fire(ctx, "runjob", {"job": ctx.slurm.job(job_id)})
    if out.accepted:
        return _answer(0)
    _stopped(out, job_id, "PrologSlurmctld")
    try:
        ctx.slurm.update(f"jobid={job_id}",
                         f"comment=Not Running: pbsplug runjob: {out.message}"[:250])
    except SlurmError as exc:
        log.warning("job %s: its comment could not be set: %s", job_id, exc)
    return _answer(1, f"pbsplug runjob: {out.message}")


def prolog(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    job_id = checked_job_id(env.get("SLURM_JOB_ID"))
    node = this_node(env)
    job, vnodes = ctx.slurm.job_and_nodes(job_id, [node])
    data: dict[str, Any] = {"job": job, "vnode_list": vnodes}
    for name in ("execjob_begin", "execjob_prologue"):
        out = _fire(ctx, name, data)
        if not out.accepted:
            return _host_failure(ctx, out, job_id, node, "Prolog")
        apply_vnode_changes(ctx, out.changes.get("vnode_list") or {}, out.hook)
        apply_job_changes(ctx, job_id, out.changes.get("job") or {}, out.hook)
    base = {k: v for k, v in env.items() if k.startswith(("SLURM_", "SLURMD_"))}
    out = _fire(ctx, "execjob_launch", {**data, "env": base, "argv": [], "progname": ""})
    if not out.accepted:
        return _host_failure(ctx, out, job_id, node, "Prolog")
    write_launch_env(ctx, job_id, node, job, base, out.changes.get("env"))
    return _answer(0)


def launch_file(state_dir: Path, job_id: str, node: str) -> Path:
    return state_dir / "launch" / f"{checked_job_id(job_id)}.{node}"


def write_launch_env(ctx: Context, job_id: str, node: str, job: Mapping[str, Any],
                     before: Mapping[str, str], after: Mapping[str, str] | None) -> None:
    """execjob_launch's changes to the environment, as TaskProlog's ``export``/``unset``
    lines, in a file only the job's user can read (TaskProlog runs as that user)."""
    path = launch_file(ctx.state_dir, job_id, node)
    if after is None:
        path.unlink(missing_ok=True)
        return
    lines = []
    for key, value in sorted(after.items()):
        if before.get(key) == value:
            continue
        if "\n" in value or "\n" in key or not key.replace("_", "a").isalnum():
            log.warning("job %s: launch variable %r cannot travel through TaskProlog "
                        "(a name of letters, digits and _; one line)", job_id, key)
            continue
        lines.append(f"export {key}={value}")
    lines += [f"unset {key}" for key in sorted(set(before) - set(after))]
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o711)  # users reach their own file by name, list nothing
    part = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("".join(line + "\n" for line in lines))
    uid = _uid_of(job)
    if uid is not None and os.geteuid() == 0:
        os.chown(part, uid, -1)
    os.replace(part, path)


def _uid_of(job: Mapping[str, Any]) -> int | None:
    import pwd

    try:
        return pwd.getpwnam(str(job.get("euser") or "")).pw_uid
    except KeyError:
        return None


def epilog(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    job_id = checked_job_id(env.get("SLURM_JOB_ID"))
    node = this_node(env)
    try:
        launch_file(ctx.state_dir, job_id, node).unlink(missing_ok=True)
    except OSError as exc:
        log.warning("job %s: %s", job_id, exc)
    job, vnodes = ctx.slurm.job_and_nodes(job_id, [node])
    status = env.get("SLURM_JOB_EXIT_CODE")
    if status and status.lstrip("-").isdigit():
        code = int(status)
        job["Exit_status"] = (code >> 8) if code & 0x7F == 0 else 256 + (code & 0x7F)
    data = {"job": job, "vnode_list": vnodes}
    for name in ("execjob_epilogue", "execjob_end"):
        out = _fire(ctx, name, data)
        if not out.accepted:
            _stopped(out, job_id, "Epilog")  # PBS ignores them: logged, nothing else
        if out.kind in (ACCEPT, "reject"):
            apply_vnode_changes(ctx, out.changes.get("vnode_list") or {}, out.hook)
    return _answer(0)


def epilog_slurmctld(ctx: Context, env: Mapping[str, str], argv: list[str]
                     ) -> dict[str, Any]:
    job_id = checked_job_id(env.get("SLURM_JOB_ID"))
    out = _fire(ctx, "jobobit", {"job": ctx.slurm.job(job_id)})
    if not out.accepted:
        _stopped(out, job_id, "EpilogSlurmctld")
    return _answer(0)


def health_check(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    """exechost_startup on the first run after this node's slurmd started (slurmd runs the
    HealthCheckProgram before it registers), exechost_periodic on every later one."""
    node = this_node(env)
    vnodes = ctx.slurm.nodes([node])
    started = str((vnodes.get(node) or {}).get("slurmd_start_time") or "")
    marker = ctx.state_dir / "started" / node
    try:
        seen = marker.read_text().strip()
    except OSError:
        seen = None
    if seen != started or not started:
        out = _fire(ctx, "exechost_startup", {"vnode_list": vnodes})
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(started)
    else:
        jobs = ctx.slurm.run("squeue", "-h", "-w", node, "-t", "R,CG,CF", "-o", "%i",
                             check=False).split()
        out = _fire(ctx, "exechost_periodic", {
            "vnode_list": vnodes, "job_list": {j: {"id": j} for j in jobs}})
    if not out.accepted:
        _stopped(out, "-", "HealthCheckProgram")
    if out.kind in (ACCEPT, "reject"):
        apply_vnode_changes(ctx, out.changes.get("vnode_list") or {}, out.hook)
    return _answer(0)


def _power(name: str):
    def handler(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
        from . import slurm_power

        return getattr(slurm_power, name)(ctx, env, argv)

    return handler


HANDLERS = {"prolog_slurmctld": prolog_slurmctld, "prolog": prolog, "epilog": epilog,
            "epilog_slurmctld": epilog_slurmctld, "health_check": health_check,
            "periodic": _power("periodic"), "suspend": _power("suspend"),
            "resume": _power("resume"), "resume_fail": _power("resume_fail")}


def run_here(config_file: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """The program's path without a worker: load and dispatch in this process."""
    config = json.loads(Path(config_file).read_text())
    return dispatch(load(config, mode=None), request)
