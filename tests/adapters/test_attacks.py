"""The adapters against a local unprivileged user (`attacker`): what reaches a root worker
from a user's socket, job or environment. No Slurm or PBS here: the workers are started by
hand, as the programs would start them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pbsplug.adapters import slurm, slurm_bridge
from pbsplug.plugins import load_plugins
from pbsplug.siteconfig import load_site
from pbsplug.testing import missing, until

LAUNCH_AND_END = """
from pbsplug import PluginInfo, hookimpl
plugin_info = PluginInfo(api="1.0", events=("execjob_launch", "execjob_end"))
MARK = {mark!r}
@hookimpl
def execjob_launch(event):
    pass
@hookimpl
def execjob_end(event):
    with open(MARK, "a") as fh:
        fh.write(event.job.id + "\\n")
"""
#: Sends argv[2] (JSON) to the socket at argv[1] and prints the answer.
SEND = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(120)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode())
s.shutdown(socket.SHUT_WR)
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.decode(errors="replace"))
"""


@pytest.fixture
def task_worker(dists, tmp_path):
    """A Slurm install's task worker (public socket, the real bridge) with a plugin that
    notes every execjob_end it runs; (socket, mark file)."""
    if os.geteuid() != 0:
        missing("needs root: the task worker runs as root")
    mark = tmp_path / "ends"
    dists.add("attacked", LAUNCH_AND_END.format(mark=str(mark)))
    site = tmp_path / "site.toml"
    site.write_text("[plugins.attacked]\nenabled = true\n")
    sys.path.insert(0, str(dists.root))
    try:
        plugins = load_plugins(load_site(site), env={})
    finally:
        sys.path.remove(str(dists.root))
    run = Path("/run") / f"pbsplug-attack-{os.getpid()}"
    p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)], bin_dir="/nowhere",
                   slurm_conf="", state_dir=str(tmp_path / "state"), log_file="",
                   run_dir=str(run), native=False)
    config = tmp_path / slurm.TASK_CONFIG_NAME
    config.write_text(p.extra_files[slurm.TASK_CONFIG_NAME])
    sock = Path(f"{run}-task") / "task.sock"
    proc = subprocess.Popen([sys.executable, "-m", "pbsplug.adapters.worker", str(sock),
                             str(config)])
    try:
        until(sock.exists, 60, "the task worker's socket")
        yield sock, mark
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(sock.parent, ignore_errors=True)


@pytest.mark.parametrize("script,env,argv", [
    ("epilog", {"SLURM_JOB_ID": "77", "SLURM_JOB_USER": "root", "SLURMD_NODENAME": "n1"}, []),
    ("prolog", {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": "n1"}, []),
    ("suspend", {}, ["n1"]),
    ("resume", {"SLURM_RESUME_FILE": "/etc/shadow"}, ["n1"]),
    ("health_check", {"SLURMD_NODENAME": "n1"}, []),
])
def test_the_task_workers_socket_runs_no_other_script(task_worker, attacker, script, env,
                                                      argv):
    """Every local user can reach the task worker's socket: a request there for any script
    but TaskProlog (an Epilog for another user's job, a SuspendProgram for any node) is
    refused, never run as root with the sender's environment."""
    sock, mark = task_worker
    done = attacker.python(SEND, str(sock), json.dumps({"script": script, "env": env,
                                                        "argv": argv}))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer == {"exit": 1, "stdout": "",
                      "error": "pbsplug: the task worker serves TaskProlog alone"}
    assert not mark.exists(), "root ran the plugin's execjob_end for the attacker"


def test_a_public_bridge_refuses_other_scripts_in_one_line(dists, tmp_path):
    sys.path.insert(0, str(dists.root))
    dists.add("attacked", LAUNCH_AND_END.format(mark=str(tmp_path / "ends")))
    site = tmp_path / "site.toml"
    site.write_text("[plugins.attacked]\nenabled = true\n")
    try:
        plugins = load_plugins(load_site(site), env={})
        p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)],
                       bin_dir="/nowhere", slurm_conf="", state_dir=str(tmp_path / "state"),
                       log_file="", run_dir="/run/x", native=False)
        ctx = slurm_bridge.load(json.loads(p.extra_files[slurm.TASK_CONFIG_NAME]))
    finally:
        sys.path.remove(str(dists.root))
    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_USER": "root", "SLURMD_NODENAME": "n1"}
    answer = slurm_bridge.dispatch(ctx, {"script": "epilog", "env": env,
                                         "_peer": [1, 1000, 1000]})
    assert answer == {"exit": 1, "stdout": "",
                      "error": "pbsplug: the task worker serves TaskProlog alone"}
    assert not (tmp_path / "ends").exists()
