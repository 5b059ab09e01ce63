"""cray_atom on the local engine: real jobs, the real server, the stand-in ATOM service on
a real UNIX socket."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from pbsplug.testing import site_toml, until


def site(atom, **config) -> str:
    values = {"unix_socket_file": str(atom.socket_path), "post_timeout": 2.0,
              "delete_timeout": 2.0, **config}
    return site_toml("cray_atom", values)


def test_a_job_is_registered_at_start_and_deleted_at_end(local_engine, atom):
    engine = local_engine(site(atom))
    job_id = engine.submit("sleep 1\n", Resource_List={"select": "1:ncpus=1",
                                                       "place": "excl"})
    engine.wait(job_id, "R")
    assert atom.jobs == {job_id: {"jobid": job_id, "uid": os.getuid(), "exclusive": True,
                                  "state": "running"}}
    assert engine.wait(job_id)["Exit_status"] == 0
    assert atom.requests == [("POST", "/rm/v1/jobs",
                              {"jobid": job_id, "uid": os.getuid(), "exclusive": True}),
                             ("DELETE", f"/rm/v1/jobs/{job_id}", None)]
    assert atom.jobs == {}
    shared = engine.submit("true\n")
    engine.wait(shared)
    assert atom.requests[2] == ("POST", "/rm/v1/jobs",
                                {"jobid": shared, "uid": os.getuid(), "exclusive": False})


def test_a_failing_post_offlines_the_vnode_and_requeues_the_job(local_engine, atom):
    engine = local_engine(site(atom))
    atom.script("POST", 503, {"status": 503, "detail": "node health check failed"})
    job_id = engine.submit("true\n")
    node = until(lambda: next((n for n in engine.nodes().values()
                               if "offline" in n["state"]), None), what="an offline vnode")
    assert node["comment"] == "offlined by hook 'cray_atom' due to hook error"
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["run_count"]) == ("Q", 1)
    log = engine.log()
    assert "node health check failed" in log and ";Hook;cray_atom;POST http+unix://" in log
    assert atom.requests == [("POST", "/rm/v1/jobs",
                              {"jobid": job_id, "uid": os.getuid(), "exclusive": False})]


def test_a_failing_delete_leaves_the_vnode_in_service(local_engine, atom):
    engine = local_engine(site(atom))
    atom.script("DELETE", 500, {"detail": "try later"})
    job_id = engine.submit("true\n")
    assert engine.wait(job_id)["Exit_status"] == 0
    assert all("offline" not in n["state"] for n in engine.nodes().values())
    assert ";Hook;cray_atom;execjob_end request rejected by 'cray_atom': cray_atom: DELETE " \
        in engine.log()
    assert [r.method for r in atom.requests] == ["POST", "DELETE"]
    again = engine.submit("true\n")  # the node still takes jobs (ATOM now answers 400 first)
    assert engine.wait(again)["Exit_status"] == 0


def test_no_atom_socket_runs_jobs_without_a_request(local_engine, atom):
    atom.stop()
    engine = local_engine(site(atom))
    job_id = engine.submit("true\n")
    assert engine.wait(job_id)["Exit_status"] == 0
    assert atom.requests == []


def test_the_demo_runs_with_a_stand_in_atom_service():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    done = subprocess.run([str(Path(sys.executable).with_name("pbsplug")), "demo"],
                          capture_output=True, text=True, env={**env, "COLUMNS": "200"},
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("cray_atom: the stand-in ATOM service saw 10 POST (job starts, 1 exclusive) and "
            "10 DELETE (job ends); it holds 0 jobs now") in done.stdout
    home = re.match(r"pbsplug demo in (/tmp/pbsplug-demo-\w+)\n", done.stdout)
    assert home and not os.path.lexists(home.group(1))  # its own (another demo may run)
