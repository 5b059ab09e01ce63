"""PBS's error codes and texts, as the engine answers requests with them (pbs_error.h).

The value rules' codes (15002, 15003, 15014, 15029, 15035) come from the kernel's
`pbsplug.values`, whose `BadValue.pbs_text` is the reply's text."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import units
from ..runner import Outcome

PBSE_UNKJOBID = 15001
PBSE_NOATTR = 15002
PBSE_ATTRRO = 15003
PBSE_IVALREQ = 15004
PBSE_PERM = 15007
PBSE_BADHOST = 15008
PBSE_SYSTEM = 15010
PBSE_BADATVAL = 15014
PBSE_BADSTATE = 15016
PBSE_UNKQUE = 15018
PBSE_QUNOENB = 15021
PBSE_QACESS = 15022
PBSE_BADUSER = 15023
PBSE_NOSUP = 15029
PBSE_NOCONNECTS = 15033
PBSE_UNKRESC = 15035
PBSE_DUPLIST = 15055
PBSE_EXCQRESC = 15036
PBSE_UNKNODE = 15062
PBSE_R_UID = 15095
PBSE_MAXARRAYSIZE = 15107
PBSE_INVALJOBRESC = 15109
PBSE_HOOKERROR = 15136
PBSE_HISTJOBID = 15139
PBSE_FINISHED_SUBJOB = 15159

MESSAGES = {
    PBSE_UNKJOBID: "Unknown Job Id",
    PBSE_NOATTR: "Undefined attribute",
    PBSE_ATTRRO: "Cannot set attribute, read only or insufficient permission",
    PBSE_IVALREQ: "Invalid request",
    PBSE_PERM: "Unauthorized Request",
    PBSE_BADHOST: "Access from host not allowed, or unknown host",
    PBSE_SYSTEM: "System error",
    PBSE_BADATVAL: "Illegal attribute or resource value",
    PBSE_BADSTATE: "Request invalid for state of job",
    PBSE_UNKQUE: "Unknown queue",
    PBSE_QUNOENB: "Queue is not enabled",
    PBSE_QACESS: "Access to queue is denied",
    PBSE_BADUSER: "Bad UID for job execution",
    PBSE_NOSUP: "No support for requested service",
    PBSE_NOCONNECTS: "No free connections",
    PBSE_UNKRESC: "Unknown resource",
    PBSE_DUPLIST: "Duplicate entry in list ",
    PBSE_EXCQRESC: "Job violates queue and/or server resource limits",
    PBSE_UNKNODE: "Unknown node",
    PBSE_R_UID: "Bad effective UID for reservation",
    PBSE_HISTJOBID: "Job has finished",
    PBSE_MAXARRAYSIZE: "Array job exceeds server or queue size limit",
    PBSE_FINISHED_SUBJOB: "Request invalid for finished array subjob",
}


class PbsError(Exception):
    """A refused request: PBS's code and the text the client prints."""

    def __init__(self, code: int, message: str | None = None, obj: str | None = None):
        self.code = code
        self.message = message or MESSAGES.get(code, "Error")
        self.obj = obj
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "obj": self.obj}


def each(ids: list[str], act: Callable[[str], None]) -> list[dict[str, Any]]:
    """Run `act` on every id: ``[{"id": ...}]`` or ``[{"id": ..., "error": {...}}]`` per id,
    so one bad id does not stop the others (qdel, qmove, pbs_rdel)."""
    results: list[dict[str, Any]] = []
    for one in ids:
        try:
            act(one)
            results.append({"id": one})
        except PbsError as err:
            results.append({"id": one, "error": err.to_dict()})
    return results


def check_resources(res: Mapping[str, Any]) -> None:
    """Refuse a Resource_List whose select, place or walltime does not parse, with PBS's
    ``Illegal attribute or resource value Resource_List.<name>``."""
    for key, parse in (("select", units.parse_select), ("place", units.parse_place),
                       ("walltime", units.parse_duration)):
        if res.get(key) is not None:
            try:
                parse(res[key])
            except ValueError:
                raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value "
                               f"Resource_List.{key}") from None


#: What a request whose hooks the server's stop gave up is answered (PBSE_SYSTEM), as PBS's
#: server shutting down answers one: the stop's doing, never the hooks' error.
STOPPING = "System error: the server is stopping"

#: A request refused because another changed what it changes, or deleted or made its vnode,
#: while its hooks ran (`Engine.vnode_steps`); PBSE_SYSTEM, nothing of it written.
CHANGED_MEANWHILE = ("System error: vnode {} changed while the command's hooks ran; nothing "
                     "of the command is done, run it again")


def stopped(outcome: Outcome, stopping: bool) -> bool:
    """Whether the runner gave one of `outcome`'s hooks up for the server's stop (a SIGTERM
    that landed as they ran: `HookRun.cancelled`), the server `stopping`: the hook was not
    judged, and what follows is the stop's rule, never the hook's error. Never the run's
    message: a hook may reject with `runner.CANCELLED`'s text, or raise an exception that
    reads so, the server not stopping; that is the hook's reject or error."""
    return stopping and any(run.cancelled for run in outcome.runs)


def refuse_if_stopped(outcome: Outcome, stopping: bool, obj: str | None = None) -> None:
    """A request whose hooks the server's stop gave up (`stopped`) refused with `STOPPING`,
    nothing of it done, as PBS's server shutting down answers a request it does not
    finish; not ``hook encountered an exception``. (An array's qdel whose subjobs'
    preterm hooks accepted before the one given up has its own answer, naming those,
    which are deleted: `Engine._array_preterms`.)"""
    if stopped(outcome, stopping):
        raise PbsError(PBSE_SYSTEM, STOPPING, obj=obj)
