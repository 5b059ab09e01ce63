"""``pbsplug multisched status`` against a real server with two partitioned schedulers, and
its errors."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from pbsplug.testing import site_toml
from pbsplug_multisched.commands import parse_list, status_lines

PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))


def qmgr(engine, text: str) -> None:
    done = engine.pbs("qmgr", "-c", text)
    assert (done.returncode, done.stderr) == (0, ""), text


@pytest.fixture
def server(local_engine, tmp_path):
    engine = local_engine(site_toml("multisched", {"state_dir": str(tmp_path / "records"),
                                                   "qmgr": [PBSPLUG, "qmgr"]}))
    for line in ("create queue q1 queue_type = execution, enabled = True, started = True, "
                 "partition = P1",
                 "create node v1 resources_available.ncpus = 1, partition = P1",
                 "create sched sc1 partition = P1", "set sched sc1 scheduling = True",
                 "create sched sc2 partition = P2"):
        qmgr(engine, line)
    return engine


def test_status_shows_each_scheduler_its_partitions_state_pid_and_last_cycle(server):
    job_id = server.submit("true\n", queue="q1")
    assert server.wait(job_id, timeout=60)["Exit_status"] == 0
    done = server.pbs("multisched", "status", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["sched"]: row for row in json.loads(done.stdout)}
    assert set(rows) == {"default", "sc1", "sc2"}
    sc1 = rows["sc1"]
    assert (sc1["partitions"], sc1["state"]) == ("P1", "idle")
    lock = Path(server.home.root / "sched_priv_sc1" / "sched.lock")
    assert sc1["pid"] == int(lock.read_text())
    assert sc1["last_cycle"] is not None
    assert sc1["jobs_considered"] >= 0 and sc1["jobs_started"] >= 0
    assert rows["sc2"]["state"] == "down" and rows["sc2"]["pid"] is None
    assert rows["default"]["pid"] == "server"
    text = server.pbs("multisched", "status").stdout
    assert text.splitlines()[0].split() == ["sched", "partitions", "state", "pid",
                                            "last", "cycle", "considered", "comment"]
    assert any(line.split()[:3] == ["sc1", "P1", "idle"] for line in text.splitlines())


def test_status_runs_this_environments_pbsplug_qmgr_when_pbsplug_is_not_on_path(local_engine,
                                                                                tmp_path):
    import os
    import subprocess

    engine = local_engine(site_toml("multisched", {"state_dir": str(tmp_path / "records")}))
    qmgr(engine, "create sched sc1 partition = P1")
    env = {**engine.env(), "PATH": os.defpath}  # the default qmgr, ["pbsplug", "qmgr"]
    done = subprocess.run([PBSPLUG, "multisched", "status", "--json"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert {row["sched"] for row in json.loads(done.stdout)} == {"default", "sc1"}


def test_status_says_why_when_qmgr_fails(tmp_path):
    import os
    import subprocess

    home = tmp_path / "home"
    home.mkdir()
    (home / "site.toml").write_text(site_toml("multisched", {"qmgr": ["/nonexistent/qmgr"]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    done = subprocess.run([PBSPLUG, "multisched", "status"], capture_output=True, text=True,
                          env={**env, "PBSPLUG_HOME": str(home)}, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("pbsplug multisched: cannot run /nonexistent/qmgr")


def test_list_output_is_read_as_qmgr_writes_it():
    text = ("Sched default\n    scheduling = True\n    state = idle\n\n"
            "Sched sc1\n    partition = P1,P2\n    comment = NEEDS_ATTENTION\n")
    assert parse_list(text) == {"default": {"scheduling": "True", "state": "idle"},
                                "sc1": {"partition": "P1,P2", "comment": "NEEDS_ATTENTION"}}
    lines = status_lines([{"sched": "sc1", "partitions": "P1,P2", "state": "down",
                           "pid": None, "last_cycle": None, "jobs_considered": None,
                           "jobs_started": None, "comment": "NEEDS_ATTENTION"}], 0)
    assert lines[1].split() == ["sc1", "P1,P2", "down", "-", "-", "-", "NEEDS_ATTENTION"]



FORGE = """
import json, os, sys
state = sys.argv[1]
with open(os.path.join(state, "multisched_sc1.json"), "w") as handle:
    json.dump({"sched": "sc1", "pid": 1, "started": 1.7e9, "duration": 0.1,
               "jobs_considered": 999, "jobs_started": 999}, handle)
"""


def test_a_state_dir_others_may_write_is_refused(shared_tmp, attacker, caplog, unsafe_folder):
    """Another user who could write in state_dir forged a scheduler's record (its cycles,
    its jobs considered) for the status. Such a folder is now refused: the scheduler does
    not record there and its log says why, once; the status exits 1 with one line naming
    the folder, its owner and its mode."""
    import os
    import subprocess
    from types import SimpleNamespace

    from pbsplug_multisched import records

    state, problem = unsafe_folder.path, unsafe_folder.problem
    done = attacker.python(FORGE, str(state))
    assert done.returncode == 0, done.stderr
    planted = {p.name: p.read_bytes() for p in state.iterdir()}
    refusal = f"refusing state_dir {state}: {problem}, so another user could plant"
    with pytest.raises(OSError, match=re.escape(refusal)):
        records.last_cycles({"state_dir": str(state)})
    stats = SimpleNamespace(sched="sc1", started=1.7e9, duration=0.5, jobs_considered=3,
                            jobs_started=1)
    records._refused.clear()
    for _ in range(2):
        records.record({"state_dir": str(state)}, stats)  # a cycle never fails for it
    logged = [r.getMessage() for r in caplog.records]
    assert [m.startswith(f"multisched: {refusal}") for m in logged] == [True], logged
    assert {p.name: p.read_bytes() for p in state.iterdir()} == planted
    home = shared_tmp / "home"
    home.mkdir()
    (home / "site.toml").write_text(site_toml("multisched", {
        "state_dir": str(state), "qmgr": ["/nonexistent/qmgr"]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    done = subprocess.run([PBSPLUG, "multisched", "status"], capture_output=True, text=True,
                          env={**env, "PBSPLUG_HOME": str(home)}, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith(f"pbsplug multisched: {refusal}")
    assert done.stderr.count("\n") == 1


def test_a_record_of_another_user_left_in_the_state_dir_is_skipped(tmp_path, attacker):
    """A folder made safe after a user could write in it may still hold that user's record,
    theirs to edit: it is not shown."""
    import os

    from pbsplug_multisched.records import last_cycles

    for name in ("sc1", "sc2"):
        (tmp_path / f"multisched_{name}.json").write_text(json.dumps(
            {"sched": name, "started": 1.7e9, "duration": 0.5, "jobs_considered": 4,
             "jobs_started": 2}))
    os.chown(tmp_path / "multisched_sc1.json", attacker.uid, attacker.gid)
    assert set(last_cycles({"state_dir": str(tmp_path)})) == {"sc2"}


@pytest.mark.parametrize("record", [
    {"sched": "sc1", "started": "soon", "duration": 0.1, "jobs_considered": 1,
     "jobs_started": 0},  # status_lines: TypeError from datetime.fromtimestamp
    {"sched": "sc1", "started": 1e300, "duration": 0.1, "jobs_considered": 1,
     "jobs_started": 0},  # OverflowError
    {"sched": "sc1", "started": 1.7e9, "duration": 0.1, "jobs_considered": [1],
     "jobs_started": 0},
    {"sched": "default", "started": 1.7e9, "duration": 0.1, "jobs_considered": 1,
     "jobs_started": 0},  # another scheduler's name than the file's
    [1, 2],
    # json.loads kept the last of a key twice, and read a value too deep to copy
    '{"sched": "default", "started": 1.7e9, "duration": 0.1, "jobs_considered": 1, '
    '"jobs_started": 0, "sched": "sc1"}',
    '{"sched": "sc1", "started": 1.7e9, "duration": 0.1, "jobs_considered": 1, '
    '"jobs_started": 0, "x": ' + "[" * 600 + "]" * 600 + "}",
])
def test_a_record_of_another_shape_is_skipped(tmp_path, record):
    from pbsplug_multisched.records import last_cycles

    (tmp_path / "multisched_sc1.json").write_text(
        record if isinstance(record, str) else json.dumps(record))
    (tmp_path / "multisched_sc2.json").write_text(json.dumps(
        {"sched": "sc2", "started": 1.7e9, "duration": 0.5, "jobs_considered": 4,
         "jobs_started": 2}))
    cycles = last_cycles({"state_dir": str(tmp_path)})
    assert set(cycles) == {"sc2"}
    rows = [{"sched": name, "partitions": "P", "state": "idle", "pid": 1, "comment": "",
             "last_cycle": cycle["started"], "jobs_considered": cycle["jobs_considered"]}
            for name, cycle in cycles.items()]
    assert status_lines(rows, 1.7e9 + 5)[1].split()[:3] == ["sc2", "P", "idle"]
