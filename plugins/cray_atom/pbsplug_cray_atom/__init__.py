"""cray_atom: tell Cray Shasta's ATOM service when jobs start and end (seed 000).

At execjob_begin the job is POSTed to ATOM; if ATOM cannot take it, the hook fails and its
fail_action (offline_vnodes) takes this host's vnodes out of service, and the job is
requeued. At execjob_end the job is DELETEd; a failure there is a plain reject that leaves
the node in service (the next job's POST will tell whether the node is broken). Where the
socket file does not exist this is not a Shasta node, and every job is accepted without a
request. See README.md for the whole table of failures and outcomes.
"""

from __future__ import annotations

import os
import pwd
import socket
from collections.abc import Mapping

from pbsplug import HookAlarm, PluginInfo, Setting, absolute_path, exclusivity, hookimpl

from .atom import Atom, AtomFailure

__version__ = "0.1.0"

DEFAULT_SOCKET = "/var/run/atomd/atomd.sock"


#: The longest a request may wait for ATOM, in seconds: a day. A site may raise the hook's
#: alarm (300 s, the seed's: Cray's longest time to make a node usable) and the timeouts
#: with it; a timeout past the alarm never ends the wait (the alarm comes first). The bound
#: keeps the value one the clock can add: 1e300 made every request raise OverflowError
#: (infinity and NaN are refused by the kernel for every float setting).
MAX_TIMEOUT = 86400.0


plugin_info = PluginInfo(
    api="1.10",
    # The seed's PBS_cray_atom.HK: type=pbs, enabled=false, user=pbsadmin,
    # event=execjob_begin,execjob_end, order=100, alarm=300, fail_action=offline_vnodes.
    events=("execjob_begin", "execjob_end"), order=100, alarm=300,
    fail_action=("offline_vnodes",), user="pbsadmin", type="pbs", pbs_name="PBS_cray_atom",
    config={
        "post_timeout": Setting(float, 30.0, gt=0, le=MAX_TIMEOUT,
                                doc="seconds to wait for ATOM to answer a POST"),
        "delete_timeout": Setting(float, 30.0, gt=0, le=MAX_TIMEOUT,
                                  doc="seconds to wait for ATOM to answer a DELETE"),
        "unix_socket_file": Setting(str, DEFAULT_SOCKET, check=absolute_path,
                                    doc="ATOM's UNIX socket; where it does not exist the "
                                        "hook sends nothing"),
    },
    description="Tell Cray Shasta's ATOM service when jobs start and end",
)


# -- the hooks --------------------------------------------------------------------------------

@hookimpl
def execjob_begin(event) -> None:
    """POST the starting job to ATOM; an ATOM that cannot take it fails the hook (the
    vnodes go offline and the job is requeued). An owner unknown here is a plain reject, on
    a Shasta node only: elsewhere nothing is sent, so the owner's uid does not matter."""
    atom = shasta_atom(event)
    if atom is None:
        return
    try:
        job = event.job
        owner = job_owner(job)
        try:
            uid = pwd.getpwnam(owner).pw_uid
        except KeyError:
            event.reject(f"cray_atom: the job's owner {owner!r} has no uid on this host")
        exclusive = job_is_exclusive(job, event.vnode_list)
        atom.start_job(job.id, uid, exclusive)  # AtomFailure or HookAlarm: the hook's error
    finally:
        atom.close()


@hookimpl
def execjob_end(event) -> None:
    """DELETE the ended job from ATOM; any failure is a plain reject, so the node stays in
    service."""
    atom = shasta_atom(event)
    if atom is None:
        return
    try:
        atom.end_job(event.job.id)
    except AtomFailure as exc:
        event.reject(f"cray_atom: {exc}")
    except HookAlarm:
        event.reject(f"cray_atom: DELETE of {event.job.id}: the hook's alarm came before "
                     "ATOM answered")
    finally:
        atom.close()


# -- what the hooks work out ------------------------------------------------------------------

def shasta_atom(event) -> Atom | None:
    """A client for this host's ATOM; None where its socket file does not exist (not a
    Shasta node: nothing to tell)."""
    config = event.hook_config
    if not os.path.exists(config["unix_socket_file"]):
        event.logger.debug("no ATOM socket at %s: not a Shasta node, nothing to tell",
                           config["unix_socket_file"])
        return None
    return Atom(config, event.logger)


def job_owner(job) -> str:
    """The job's user on this host: euser, else Job_Owner without its ``@host``."""
    return str(job.euser or str(job.Job_Owner or "").split("@", 1)[0])


def local_vnode(vnode_list: Mapping):
    """This host's vnode among the job's: the natural vnode (named after the host), else
    one of its ``host[N]`` vnodes, else the job's first vnode (one-host engines name their
    vnodes freely)."""
    if not vnode_list:
        return None
    host = socket.gethostname().split(".", 1)[0]
    if host in vnode_list:
        return vnode_list[host]
    for name, vnode in vnode_list.items():
        if name.startswith(f"{host}["):
            return vnode
    return next(iter(vnode_list.values()))


def job_is_exclusive(job, vnode_list: Mapping) -> bool:
    """ATOM's ``exclusive``: the scheduler's exclusivity rule from the job's place and the
    local vnode's sharing (pbs-behavior.md §4); exclhost counts as exclusive."""
    vnode = local_vnode(vnode_list)
    sharing = vnode.sharing if vnode is not None else None
    return exclusivity(job.Resource_List["place"], sharing) != "shared"


# -- the demo ---------------------------------------------------------------------------------

#: ``pbsplug demo``'s stand-in ATOM services, by the demo's work folder.
_demo_services: dict[str, object] = {}


@hookimpl
def demo_setup(workdir) -> dict:
    """This machine has no ATOM: the demo talks to the stand-in service instead."""
    from .fake import FakeAtom

    service = FakeAtom(f"{workdir}/atomd.sock").start()
    _demo_services[str(workdir)] = service
    return {"config": {"unix_socket_file": str(service.socket_path)}}


@hookimpl
def demo_report(workdir) -> list[str]:
    service = _demo_services.pop(str(workdir), None)
    if service is None:
        return []
    service.stop()
    methods = [request.method for request in service.requests]
    exclusive = sum(1 for r in service.requests if r.method == "POST" and r.body
                    and r.body.get("exclusive"))
    return [f"the stand-in ATOM service saw {methods.count('POST')} POST (job starts, "
            f"{exclusive} exclusive) and {methods.count('DELETE')} DELETE (job ends); it "
            f"holds {len(service.jobs)} jobs now"]


# -- commands ---------------------------------------------------------------------------------

@hookimpl
def register_commands(cli) -> None:
    from . import commands

    commands.register(cli)
