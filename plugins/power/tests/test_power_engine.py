"""End to end on the local engine, with the simulated driver (and the stand-in capmc for a
failing driver): hosts really go to sleep, queued work wakes them, and the log says so.

Each test makes hosts of its own (vnodes whose resources_available.host differ) and removes
the machine's default vnodes, so only those hosts exist. The hook runs every second.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime

import pytest

from pbsplug.testing import site_toml, until
from pbsplug_power.fake_capmc import install

IDLE = 3  # node_idle_limit


def site(state_dir, freq: int = 1, **config) -> str:
    values = {"driver": "simulated", "power_on_off_enable": "True",
              "node_idle_limit": str(IDLE), "min_node_down_delay": "1", "boot_delay": 2,
              "state_dir": str(state_dir), **config}
    return site_toml("power", values, freq=freq)


def make_hosts(engine, eligible: dict[str, bool]) -> None:
    """One one-cpu vnode per host (`<host>v`), created now, and no other vnode."""
    defaults = list(engine.nodes())
    for host, ok in eligible.items():
        engine.pbs("qmgr", "-c", f"create node {host}v resources_available.host={host},"
               f"resources_available.ncpus=1,poweroff_eligible={ok}", check=True)
    for name in defaults:
        engine.pbs("qmgr", "-c", f"delete node {name}", check=True)


def states(engine) -> dict[str, str]:
    return {name: attrs["state"] for name, attrs in engine.nodes().items()}


def logged_at(log: str, text: str) -> float:
    """When the first server log line containing `text` was written."""
    for line in log.splitlines():
        if text in line:
            return datetime.strptime(line[:19], "%m/%d/%Y %H:%M:%S").timestamp()
    raise AssertionError(f"no log line with {text!r}")


@pytest.fixture
def state_dir(tmp_path):
    return tmp_path / "power"


def test_idle_hosts_sleep_after_the_idle_limit_and_ineligible_ones_never(local_engine,
                                                                          state_dir):
    engine = local_engine(site(state_dir))
    make_hosts(engine, {"h1": True, "h2": True, "h3": False})
    until(lambda: states(engine)["h1v"] == "sleep" and states(engine)["h2v"] == "sleep",
          timeout=30)
    nodes = engine.nodes()
    for name in ("h1v", "h2v"):  # went down only once idle for longer than the limit
        assert nodes[name]["last_state_change_time"] - nodes[name]["last_used_time"] > IDLE
    time.sleep(2)  # more runs: the ineligible host stays up
    assert states(engine)["h3v"] == "free"
    log = engine.log()
    assert re.search(r";0008;Server@[^;]+;Job;node_power_off;launch: simulated node_off h1",
                     log)
    assert ";Job;node_power_off;launch: finished" in log
    assert "h3" not in "".join(line for line in log.splitlines() if "node_power_off" in line)
    assert "power_provisioning = True" in engine.pbs("qstat", "-Bf").stdout
    assert "state = sleep" in engine.pbs("pbsnodes", "-v", "h1v").stdout
    status = engine.pbs("power", "status")
    assert status.returncode == 0, status.stderr
    rows = {line.split()[0]: line for line in status.stdout.splitlines()[2:]}
    assert rows["h1"].split()[1] == "asleep" and rows["h3"].split()[1] == "awake"
    assert "poweroff_eligible is False on h3v" in rows["h3"]
    record = json.loads(engine.pbs("power", "status", "--json").stdout)
    assert record["hosts"]["h3"]["eligible"] is False and record["mode"] == "on_off"


def test_a_queued_job_wakes_the_sleeping_host_it_needs_and_runs(local_engine, state_dir):
    engine = local_engine(site(state_dir))
    make_hosts(engine, {"h1": True})
    until(lambda: states(engine)["h1v"] == "sleep", timeout=30)
    job_id = engine.submit("true\n")
    # The scheduler plans the job on the sleeping host after the driver's boot delay.
    estimated = until(lambda: engine.job(job_id).get("estimated"), timeout=10)
    assert estimated["exec_vnode"] == "(h1v:ncpus=1)"
    attrs = engine.wait(job_id, timeout=30)
    assert attrs["Exit_status"] == 0 and attrs["exec_vnode"] == "(h1v:ncpus=1)"
    log = engine.log()
    assert logged_at(log, "Job;node_power_on;launch: simulated node_on h1") <= (
        estimated["start_time"])  # woken before the estimated start
    ran = logged_at(log, f"Job;{job_id};Job Run")
    assert ran >= logged_at(log, "Job;node_power_on;launch: finished")


def test_a_failing_driver_leaves_the_hosts_up_and_says_why(local_engine, state_dir,
                                                          tmp_path):
    capmc = install(tmp_path / "capmc", tmp_path / "capmc.json", {1: "on"})
    data = json.loads((tmp_path / "capmc.json").read_text())
    data["fail"] = {"node_off": {"e": 52, "err_msg": "Node 1 is in a bad state"}}
    (tmp_path / "capmc.json").write_text(json.dumps(data))
    engine = local_engine(site(state_dir, driver="capmc", capmc=str(capmc), nids={"h1": 1}))
    make_hosts(engine, {"h1": True, "h2": True})  # h2 has no Cray nid
    until(lambda: "periodic request rejected by 'power'" in engine.log(), timeout=30)
    assert states(engine) == {"h1v": "free", "h2v": "free"}
    log = engine.log()
    assert f"Job;node_power_off;launch: {capmc} node_off --nids 1" in log
    assert "e=52 err_msg='Node 1 is in a bad state'" in log
    calls = json.loads((tmp_path / "capmc.json").read_text())["calls"]
    assert calls[0] == ["node_off", "--nids", "1"]  # h2 was never asked for
    record = json.loads(engine.pbs("power", "status", "--json").stdout)
    assert record["hosts"]["h1"]["why"].startswith("the driver failed")
    assert "no Cray nid" in record["hosts"]["h2"]["why"]


def test_a_bad_pbs_value_rejects_every_run_with_its_message(local_engine, state_dir):
    engine = local_engine(site(state_dir, node_idle_limit="ten"))
    make_hosts(engine, {"h1": True})
    until(lambda: "node_idle_limit: 'ten' is not an integer" in engine.log(), timeout=30)
    assert "periodic request rejected by 'power'" in engine.log()
    assert states(engine) == {"h1v": "free"}


def test_a_suspended_jobs_host_stays_up_and_the_job_resumes(local_engine, state_dir):
    """A suspended job's cpus are released (as PBS releases them): its vnode shows no job
    and no cpus assigned, yet its host must not be powered off under it."""
    engine = local_engine(site(state_dir))
    make_hosts(engine, {"h1": True, "h2": True})
    job_id = engine.submit("sleep 600\n")
    until(lambda: engine.job(job_id)["job_state"] == "R", timeout=30)
    on = engine.job(job_id)["exec_vnode"].strip("()").split(":")[0]
    other = "h2v" if on == "h1v" else "h1v"
    assert engine.pbs("qsig", "-s", "suspend", job_id).returncode == 0
    until(lambda: engine.job(job_id)["job_state"] == "S", timeout=30)
    node = engine.nodes()[on]
    assert not node.get("jobs") and not node.get("resources_assigned", {}).get("ncpus")

    def why() -> str:
        record = json.loads(engine.pbs("power", "status", "--json").stdout or "{}")
        return (record.get("hosts") or {}).get(on[:-1], {}).get("why", "")

    # Both hosts idle past the limit (neither's last use is later than its creation): the
    # empty one goes down, and a later run still keeps the suspended job's host up.
    until(lambda: states(engine)[other] == "sleep", timeout=30)
    until(lambda: "suspended job" in why(), timeout=30)
    assert why() == f"{on} has a suspended job ({job_id}), not idle"
    assert states(engine)[on] == "free"
    assert "node_power_off;launch: simulated node_off " + on[:-1] not in engine.log()
    assert engine.pbs("qsig", "-s", "resume", job_id).returncode == 0
    until(lambda: engine.job(job_id)["job_state"] == "R", timeout=30)
