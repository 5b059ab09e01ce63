"""power: ramp idle hosts down or power them off, and wake them before queued work needs them
(seed 004, PBS's ``PBS_power`` hook).

- ``periodic`` (on the server, every 300 s): the decision and the driver's actions
  (`periodic_run`); vnodes of hosts taken down go to state ``sleep``.
- ``exechost_startup``: a host that (re)starts has just been used, as PBS's rule for
  ``last_used_time`` says, so it is not powered off the moment it comes up.
- ``sched_node_availability``: the scheduler plans a sleeping vnode from the driver's boot
  delay (a booting one from its power-on time plus the delay); that plan is what wakes it.
- Enabling the plugin makes the server's ``power_provisioning`` True (read-only).

See README.md for the keys, the drivers and the log lines.
"""

from __future__ import annotations

from typing import Any

from pbsplug import PluginInfo, clock, hookimpl

from . import state
from .config import check_config, settings
from .driver import host_of

__version__ = "0.1.0"

plugin_info = PluginInfo(
    api="1.13",
    # PBS_power.HK: type=pbs, enabled=false, order=2000, alarm=180, freq=300; its MoM events
    # (begin, prologue, epilogue, end, exechost_periodic) handle Cray energy profiles (eoe),
    # which pbsplug does not offer; exechost_startup keeps last_used_time true.
    events=("periodic", "exechost_startup"), order=2000, alarm=180, freq=300, type="pbs",
    pbs_name="PBS_power", server_flags=("power_provisioning",),
    config=settings(), check_config=check_config,
    # Safe in the simulator with the simulated driver: its files are the state folder's,
    # which the simulator keeps in its own work folder, and it reads pbsplug.clock. Any
    # other driver switches real hosts: a replay with it is refused (`sim_check`).
    sim_safe=("periodic", "exechost_startup", "sched_node_availability"),
    sim_check=lambda config: None if config.get("driver") == "simulated" else (
        f"driver {config.get('driver')!r} switches real hosts; a replay needs "
        '[plugins.power.config] driver = "simulated"'),
    description="Ramp idle hosts down or power them off, and wake them for queued work",
)

#: The configuration this process loaded (`configure`), for the scheduler's hook.
_config: dict[str, Any] | None = None


@hookimpl
def configure(config: dict[str, Any]) -> None:
    global _config
    _config = config


@hookimpl
def periodic(event) -> None:
    """PBS_power's periodic run (see `pbsplug_power.periodic_run`)."""
    from .periodic_run import run  # not `.periodic`: it would shadow this hook

    run(event)


@hookimpl
def exechost_startup(event) -> None:
    """The host (re)starts: its awake vnodes were just used (seed 004, Interface 5)."""
    now = int(clock.now())
    for vnode in event.vnode_list.values():
        if "sleep" not in vnode.states:
            vnode.last_used_time = now


@hookimpl
def sched_node_availability(sched: str, now: float, vnodes: list) -> dict[str, float]:
    """When sleeping vnodes can take work: a booting host when it was powered on plus
    boot_delay, any other sleeping host boot_delay from now."""
    if _config is None:
        return {}
    asleep = [vnode for vnode in vnodes if "sleep" in vnode.states]
    if not asleep:
        return {}
    boot_delay = float(_config["boot_delay"])
    try:
        booting = state.booting(state.state_dir(_config))
    except OSError:  # the periodic run reports a broken record; plan as if none boots
        booting = {}
    out = {}
    for vnode in asleep:
        since = booting.get(host_of(vnode))
        out[vnode.name] = max(now, float(since) + boot_delay) if since is not None else (
            now + boot_delay)
    return out


@hookimpl
def register_commands(cli) -> None:
    from .commands import register

    register(cli)


@hookimpl
def demo_setup(workdir) -> dict:
    """The demo's host sleeps through the simulated driver: on/off mode, a short idle limit,
    and a state folder of the demo's own. Its vnodes are not poweroff_eligible, so none goes
    down; the report shows why, host by host."""
    return {"freq": 2, "config": {"driver": "simulated", "power_on_off_enable": "True",
                                  "node_idle_limit": "5", "min_node_down_delay": "5",
                                  "boot_delay": 2, "state_dir": str(workdir)}}


@hookimpl
def demo_report(workdir) -> list[str]:
    from .commands import status_lines

    try:
        record = state.status(workdir)
    except OSError as exc:
        return [f"power: {exc}"]
    return status_lines(record, int(clock.now())) if record else [
        "power: the periodic hook did not run during the demo"]
