"""The host's own events: exechost_startup when the server starts, and the periodic hooks.

PBS runs each periodic hook (server ``periodic`` and host ``exechost_periodic``) on its own
clock: the hook's next run is ``freq`` seconds after its previous run *ended*, so runs of one
hook never overlap. The local engine does the same, one hook at a time in the server's
thread; the first run of a hook is ``freq`` seconds after the server starts (or after the hook
first appears in the site config).

Vnode changes a hook makes apply even when it rejects, and not when it fails (exception or
alarm), as PBS does; each is written at once, and its modifyvnode hooks are told of it after,
while the server serves (`Engine._set_node`), as are offline_vnodes' and the recovery's; one
that leaves a vnode as it was (a comment set to what it is) is neither written nor told. An
exechost_periodic hook's ``job.rerun()`` and ``job.delete()`` on the jobs of its ``job_list``
are kept and dropped alike (`Periodic._job_actions`). A server periodic's job_list
(pbsplug's queued jobs) takes neither: the call raises, as PBS gives them only in MoM hooks.
exechost_startup may add vnodes: they are created as the hook gave them. Its fail_action
``offline_vnodes`` marks this host's vnodes offline with PBS's comment;
``clear_vnodes_upon_recovery`` brings them back at the next start whose hooks all succeed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import lifecycle
from ..objects import Job, Reservation, Vnode
from ..units import SUSPENDED_JOBS, jobs_by_vnode
from .home import LOG_ADMIN, LOG_ERROR, LOG_SYSTEM
from .store import StoreWriteError

if TYPE_CHECKING:
    from .server import Engine

PERIODIC_EVENTS = ("periodic", "exechost_periodic")


def offline_comment(hook: str | None) -> str:
    """The comment PBS gives vnodes a failed hook offlined."""
    return f"offlined by hook '{hook}' due to hook error"


class Periodic:
    """When each periodic hook runs next, and the runs themselves."""

    def __init__(self, engine: Engine):
        self.engine = engine
        #: (event, hook) -> when the hook runs next (the engine's clock).
        self.due: dict[tuple[str, str], float] = {}

    def startup(self) -> None:
        """exechost_startup, once, as the execution host comes up."""
        eng = self.engine
        chain = eng.runner.chain("exechost_startup")
        if not chain:
            return
        vnodes = eng._vnodes()
        outcome = eng._event("exechost_startup", vnode_list=vnodes)
        eng._apply_vnode_changes(outcome)
        if not outcome.accepted and outcome.kind == "reject":
            eng.log(LOG_ADMIN, "Hook", outcome.hook or "", f"exechost_startup request "
                    f"rejected by '{outcome.hook}': {outcome.message}")
        if "offline_vnodes" in outcome.fail_action:
            eng._offline_for_hook(list(eng.store.all("node")), outcome.hook)
        if outcome.accepted:
            for entry in chain:
                if "clear_vnodes_upon_recovery" in entry.attrs.fail_action:
                    self._clear_offlined_by(entry.name)

    def _clear_offlined_by(self, hook: str) -> None:
        eng = self.engine
        for name, old in eng.store.all("node").items():
            if old.get("comment") != offline_comment(hook):
                continue
            states = set(str(old.get("state", "free")).split(",")) - {"offline", "free"}
            new = {k: v for k, v in old.items() if k != "comment"}
            new["state"] = ",".join(sorted(states)) or "free"
            eng._set_node(name, old, new)
            eng.log(LOG_ADMIN, "Node", name, f"vnode back online: hook '{hook}' recovered")

    def poll(self, now: float) -> None:
        """Run every periodic hook that is due, one after the other."""
        eng = self.engine
        for event in PERIODIC_EVENTS:
            names = set()
            for entry in eng.runner.chain(event):
                names.add(entry.name)
                key = (event, entry.name)
                when = self.due.setdefault(key, now + entry.attrs.freq)
                if now >= when:
                    # Due again first: a run that fails does not make every poll run it.
                    self.due[key] = now + entry.attrs.freq
                    self.run(event, entry.name)
                    self.due[key] = eng.clock() + entry.attrs.freq
            for key in [k for k in self.due if k[0] == event and k[1] not in names]:
                del self.due[key]

    def vnodes(self) -> dict[str, Vnode]:
        """The server periodic's vnodes: as pbsnodes shows them, each also naming the
        suspended jobs on it (`units.SUSPENDED_JOBS`). A suspended job's cpus are released,
        as PBS's server releases them, so it is in neither the vnode's ``jobs`` nor its
        ``resources_assigned``; yet its host must stay up for its resume."""
        eng = self.engine
        rows = eng._vnode_rows()
        suspended = jobs_by_vnode((job_id, str(attrs.get("exec_vnode") or ""))
                                  for job_id, attrs in eng.store.jobs(("S",), lean=True).items())
        return {name: Vnode(name, {**attrs, SUSPENDED_JOBS: suspended[name]}
                            if name in suspended else attrs)
                for name, attrs in rows.items()}

    def run(self, event: str, hook: str) -> None:
        """One run of one periodic hook."""
        eng = self.engine
        if event == "periodic":
            resvs = {n: Reservation(n, a) for n, a in eng.store.all("resv").items()}
            queued = {j: Job(j, a) for j, a in eng.store.jobs(("Q",)).items()}
            outcome = eng._event("periodic", hooks=(hook,), vnode_list=self.vnodes(),
                                 resv_list=resvs, job_list=queued)
        else:
            jobs = {j: Job(j, a) for j, a in eng.store.jobs(("R", "E", "S")).items()}
            outcome = eng._event("exechost_periodic", hooks=(hook,),
                                 vnode_list=eng._vnodes(), job_list=jobs)
        eng._apply_vnode_changes(outcome)
        if outcome.kind == "reject":
            eng.log(LOG_ADMIN, "Hook", hook, f"{event} request rejected by '{hook}'"
                    + (f": {outcome.detail}" if outcome.detail else ""))
        if event == "exechost_periodic":
            self._job_actions(hook, outcome.changes.get("job_list") or {}, set(jobs))

    def _job_actions(self, hook: str, asked: dict[str, dict[str, str]],
                     given: set[str]) -> None:
        """The ``job.rerun()`` and ``job.delete()`` an exechost_periodic hook called on
        jobs of its ``job_list`` (kept on a reject, dropped on an exception or an alarm,
        as its vnode changes), recorded as PBS's server records its MoM's request
        (OpenPBS 23.06, measured): nothing is killed, the job runs (or stays suspended)
        on, its Exit_status shows the request (`lifecycle.HOOK_ASKED_STATUS`, -18 for a
        rerun, -19 for a delete), and the job's own end carries it out (`lifecycle.end_step`:
        requeued whatever its Rerunable, or ended). A later run's request replaces an
        earlier one; the job's end hooks' own call, if any, wins at its end. One that cannot
        be recorded (a full disk) is logged and dropped; the others, and the poll, go on."""
        eng = self.engine
        for job_id in sorted(asked):
            action = asked[job_id].get("_action")
            if job_id not in given or action not in lifecycle.HOOK_ASKED_STATUS:
                continue
            try:
                with eng.store.transaction() as st:
                    attrs = st.job(job_id)
                    if attrs is None or attrs.get("job_state") not in ("R", "E", "S"):
                        continue  # (it ended meanwhile)
                    attrs["Exit_status"] = lifecycle.HOOK_ASKED_STATUS[action]
                    st.put_job(job_id, attrs)
                    st.merge_runtime(job_id, **{lifecycle.HOOK_ASKED: {"action": action,
                                                                       "hook": hook}})
            except StoreWriteError as exc:  # (a full disk: the others, and the poll, go on)
                eng.log(LOG_ERROR, "Hook", hook, f"exechost_periodic hook '{hook}': "
                        f"job.{action}() of {job_id}: request not recorded: {exc.message}")
                continue
            eng.log(LOG_SYSTEM, "Node", eng.host, f"hook request {action} {job_id}")
