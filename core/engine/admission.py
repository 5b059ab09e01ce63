"""Whether a queue lets a job in, before its request and the limits on queued jobs are
looked at: what qsub, qmove and a route queue's router ask of the queue. The engine's
server (`Engine._submit_queue`) and the simulator (a replay's queues) both ask it here,
so a replay refuses what the engine refuses, with the same code and text."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from .. import units
from . import acl
from .errors import PBSE_BADHOST, PBSE_PERM, PBSE_QACESS, PBSE_QUNOENB, PBSE_UNKQUE, PbsError


def check_entry(queue: Mapping[str, Any] | None, name: str, user: str, hosts: Iterable[str],
                *, routed: bool = False, by_manager: bool = False,
                groups: Collection[str] | None = None) -> Mapping[str, Any]:
    """`queue`, or PBS's refusal of a job of `user` (submitting from the host named `hosts`)
    entering queue `name` (its attributes `queue`; None: no such queue), in this order:
    15018 for an unknown queue, 15021 for one not enabled, 15022 for a ``from_route_only``
    one unless the job is `routed` there from a route queue or a manager moves it
    (`by_manager`; to qsub, root's too, as OpenPBS 23.06 answers), and 15008 or 15007
    when its ACLs refuse `user` (`acl.queue_refusal`, with `groups` the groups named
    there, else `user`'s on this machine; a manager's move passes), raised."""
    if queue is None:
        raise PbsError(PBSE_UNKQUE, obj=name)
    if not units.parse_bool(queue.get("enabled", False)):
        raise PbsError(PBSE_QUNOENB, obj=name)
    if not routed and not by_manager and units.parse_bool(queue.get("from_route_only", False)):
        raise PbsError(PBSE_QACESS, obj=name)
    refusal = None if by_manager else acl.queue_refusal(queue, user, hosts, groups)
    if refusal is not None:  # (its acl_hosts, as PBS checks it first, or the others)
        raise PbsError(PBSE_BADHOST if refusal == "acl_hosts" else PBSE_PERM, obj=name)
    return queue
