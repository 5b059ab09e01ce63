"""The power plugin (seed 004) driving a real Slurm's power saving (conftest.py starts it).

The hardware is what cannot run here: the plugin's ``command`` driver powers a node off by
stopping its slurmd and on by starting it again (``slurmd -b``, with the signal mask that
slurmctld's ResumeProgram leaves blocked cleared: the two fixes of the shared recipe), and
answers its status from the slurmd's pid."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from pbsplug.testing import site_toml, until

from .conftest import Installed
from .slurm_cluster import ROOT

POWER_ON = f"""#!/bin/sh
echo "on $1" >> "$(dirname "$0")/calls.log"
mkdir -p {ROOT}/spool/$1
# A boot takes time. slurmd -b reports a boot one second ago; started in the second of the
# resume request, that boot predates it and slurmctld keeps waiting ("Still waiting for boot
# of node"): ResumeTimeout, the node marked down, the job requeued.
sleep 2
setsid /usr/bin/perl -MPOSIX -e 'sigprocmask(SIG_SETMASK, POSIX::SigSet->new); exec @ARGV' \\
  /usr/sbin/slurmd -b -D -N "$1" -f "{ROOT}/etc/slurm.conf" \\
  >> {ROOT}/log/slurmd-$1.out 2>&1 < /dev/null &
exit 0
"""
POWER_OFF = f"""#!/bin/sh
echo "off $1" >> "$(dirname "$0")/calls.log"
pid=$(cat {ROOT}/run/slurmd-$1.pid 2>/dev/null) || exit 0
kill -KILL "$pid" 2>/dev/null
rm -f {ROOT}/run/slurmd-$1.pid
exit 0
"""
STATUS = f"""#!/bin/sh
for host in $(echo "$1" | tr , ' '); do
  pid=$(cat {ROOT}/run/slurmd-$host.pid 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$host ready"; \\
  else echo "$host off"; fi
done
"""


@pytest.fixture
def power(slurm: Installed):
    cluster = slurm.cluster
    hw = slurm.top / "hardware"
    hw.mkdir(parents=True, exist_ok=True)
    for name, text in (("on", POWER_ON), ("off", POWER_OFF), ("status", STATUS)):
        (hw / name).write_text(text)
        os.chmod(hw / name, 0o755)
    before = cluster.conf.read_text()
    # n1, n2 kept up by Slurm's own exclusion: not poweroff_eligible for the plugin. Two sets,
    # the first with a count (keep 1 of n1 up): pbsplug read the first set alone.
    cluster.write_conf(before + "SuspendExcNodes=n1:1,n2\nSuspendTimeout=5\n"
                       "ResumeTimeout=90\nDebugFlags=Power\n")
    config = {"driver": "command", "power_on_off_enable": "True", "node_idle_limit": "2",
              "min_node_down_delay": "1", "max_concurrent_nodes": "1", "boot_delay": 1,
              "state_dir": str(slurm.top / "power-state"),
              "power_on_command": [str(hw / "on"), "{host}"],
              "power_off_command": [str(hw / "off"), "{host}"],
              "status_command": [str(hw / "status"), "{hosts}"]}
    out = slurm.install(site_toml("power", config))
    assert "power: periodic: 'pbsplug slurm periodic' on the controller" in out
    yield slurm, hw
    cluster.cancel_all()
    # Reservations outlive slurmctld -c: one left behind keeps its nodes from later tests.
    cluster.run("scontrol", "delete", "reservationname=wake", check=False)
    slurm.pbsplug(None, "uninstall", "--dir", str(slurm.dir), "--slurm-conf",
                  str(cluster.conf), check=False)
    cluster.write_conf(before)
    cluster.reset()


def _idle_for(cluster, nodes: tuple[str, ...], seconds: int) -> None:
    """Wait until Slurm's LastBusyTime of every one of ``nodes`` is ``seconds`` old: after
    the restart each slurmd registers at its own moment, and a plugin run between two of
    them would power off the one that registered first, not the first by name."""
    def old_enough() -> bool:
        out = cluster.run("/usr/bin/sinfo", "--json", check=False).stdout
        busy = {n.get("name"): n.get("last_busy") for n in json.loads(out or "{}")
                .get("nodes", [])}
        now = time.time()
        return all(isinstance(busy.get(n), int) and busy[n] <= now - seconds for n in nodes)
    until(old_enough, 60, f"{nodes} idle for {seconds} s")


def _calls(hw: Path) -> list[str]:
    try:
        return (hw / "calls.log").read_text().splitlines()
    except OSError:
        return []


def test_the_plugins_decision_powers_idle_eligible_nodes_off_and_a_job_wakes_one(power):
    slurm, hw = power
    cluster = slurm.cluster
    text = cluster.conf.read_text()
    assert f"SuspendProgram={slurm.dir}/suspend" in text
    assert f"ResumeProgram={slurm.dir}/resume" in text
    periodic = ["periodic", "--dir", str(slurm.dir)]
    # The nodes have been idle since slurmctld's restart: runs until node_idle_limit passes.
    # max_concurrent_nodes = 1: one host per run, walking hosts by name.
    _idle_for(cluster, ("n3", "n4"), 3)
    first = until(lambda: slurm.pbsplug(None, *periodic).stdout, 30, "a power-off")
    assert first.split() == ["powered", "off:", "n3"]
    assert slurm.pbsplug(None, *periodic).stdout.split() == ["powered", "off:", "n4"]
    assert slurm.pbsplug(None, *periodic).stdout == ""  # n1, n2 are SuspendExcNodes
    states = cluster.wait_nodes(("n3", "n4"), ("idle~",), 30)
    assert states["n1"] == "idle" and states["n2"] == "idle"
    assert _calls(hw) == ["off n3", "off n4"]  # SuspendProgram did not power off again
    # A job for n3: Slurm's ResumeProgram; the plugin's decision powers it on.
    job = cluster.sbatch("-p", "gpu", "-w", "n3", "-o", "/dev/null")
    done = cluster.wait_done(job, timeout=120)
    assert done["job_state"] == "COMPLETED"
    assert _calls(hw).count("on n3") == 1 and "on n4" not in _calls(hw)
    # The job read from Slurm's SLURM_RESUME_FILE (22.05 names its nodes 'nodes')
    assert f"resume: job {job} wants n3 (SLURM_RESUME_FILE)" in slurm.log_text()
    assert "SLURM_RESUME_FILE /" not in slurm.log_text()  # no warning about it
    # After a controller restart Slurm may call ResumeProgram again for the same node.
    resume = subprocess.run([str(slurm.dir / "resume"), "n3"], env=cluster.env,
                            capture_output=True, text=True, timeout=120)
    assert resume.returncode == 0, resume.stderr
    assert _calls(hw).count("on n3") == 1
    assert "powered off by the plugins' decision" in slurm.log_text()


def test_a_sleeping_node_is_woken_ahead_of_a_reservation_and_its_job(power):
    """PBS's 900 s wake-ahead: Slurm never plans a future start on an idle powered-down node
    (it allocates it at once and runs ResumeProgram), so what needs a sleeping node later is
    a reservation on it, and the jobs waiting for that reservation."""
    slurm, hw = power
    cluster = slurm.cluster
    periodic = ["periodic", "--dir", str(slurm.dir)]
    _idle_for(cluster, ("n3", "n4"), 3)
    first = until(lambda: slurm.pbsplug(None, *periodic).stdout, 30, "a power-off")
    assert first.split() == ["powered", "off:", "n3"]
    cluster.wait_nodes(("n3",), ("idle~",), 30)
    # In ten minutes (within PBS's 900 s), for ten minutes, on the sleeping n3 only.
    cluster.run("scontrol", "create", "reservation", "reservationname=wake", "users=root",
                "starttime=now+600", "duration=10", "nodes=n3", "flags=ignore_jobs")
    job = cluster.sbatch("-p", "gpu", "--reservation=wake", "-w", "n3", "-o", "/dev/null")
    # The next runs: the plugin powers n3 on through its driver, its slurmd registers and
    # Slurm takes the node back (22.05 clears POWERED_DOWN), all before the reservation.

    def n3_back() -> bool:
        slurm.pbsplug(None, *periodic)
        return cluster.node_states().get("n3") == "idle"

    until(n3_back, 90, "n3 woken by the plugin and registered with Slurm")
    n3 = [c for c in _calls(hw) if c.endswith(" n3")]
    assert n3 == ["off n3", "on n3"]  # once, by the periodic decision, not ResumeProgram
    assert f"launch: {hw / 'on'} n3" in slurm.log_text()  # the plugin's node_power_on
    assert cluster.job(job)["job_state"] == "PENDING"  # its reservation has not started
    # A ResumeProgram for n3 now (Slurm allocating it, or after a controller restart) does
    # not power it on again.
    resume = subprocess.run([str(slurm.dir / "resume"), "n3"], env=cluster.env,
                            capture_output=True, text=True, timeout=120)
    assert resume.returncode == 0, resume.stderr
    assert _calls(hw).count("on n3") == 1


def test_a_node_a_job_holds_one_cpu_of_is_not_powered_off_under_it(power):
    """A job on one of n3's two cpus: Slurm shows n3 MIXED (PBS's free), and its
    LastBusyTime does not move while the job runs, so n3 looks idle past node_idle_limit.
    sinfo's alloc_cpus was not given to the plugin, which powered n3 off under the job.
    The plugin keeps n3 up now (its cpus assigned; the reason names the job, squeue's) and
    powers off n4, the next host."""
    slurm, hw = power
    cluster = slurm.cluster
    periodic = ["periodic", "--dir", str(slurm.dir)]
    job = cluster.sbatch("-p", "gpu", "-w", "n3", "-n", "1", "-o", "/dev/null",
                         script="#!/bin/sh\nsleep 600\n")
    cluster.wait_job(job, lambda j: j["job_state"] == "RUNNING", 60, "running")
    assert cluster.wait_nodes(("n3",), ("mixed",), 30)["n3"] == "mixed"
    _idle_for(cluster, ("n3", "n4"), 3)  # (LastBusyTime old while the job runs)
    first = until(lambda: slurm.pbsplug(None, *periodic).stdout, 30, "a power-off")
    assert first.split() == ["powered", "off:", "n4"]  # n3 first by name: kept up
    assert slurm.pbsplug(None, *periodic).stdout == ""
    assert _calls(hw) == ["off n4"]
    assert cluster.job(job)["job_state"] == "RUNNING"
    assert cluster.node_states()["n3"] == "mixed"
    status = (slurm.top / "power-state" / "power_status.json").read_text()
    assert f"n3 has a job ({job}), not idle" in status


def test_suspendprogram_keeps_up_a_node_whose_only_job_is_suspended(power):
    """Slurm shows a node whose only job is suspended idle, so it may run SuspendProgram for
    it (an admin's state=power_down; its own timer). SuspendProgram handed it to the plugins'
    decision as idle and eligible, and the driver powered it off under the job. It is kept
    up now, in a line naming the node and the job; the periodic decision keeps it up too,
    its reason naming the job."""
    slurm, hw = power
    cluster = slurm.cluster
    job = cluster.sbatch("-p", "gpu", "-w", "n3", "-n", "1", "-o", "/dev/null",
                         script="#!/bin/sh\nsleep 600\n")
    cluster.wait_job(job, lambda j: j["job_state"] == "RUNNING", 60, "running")
    cluster.run("scontrol", "suspend", job)
    cluster.wait_job(job, lambda j: j["job_state"] == "SUSPENDED", 60, "suspended")
    suspend = subprocess.run([str(slurm.dir / "suspend"), "n3"], env=cluster.env,
                             capture_output=True, text=True, timeout=120)
    assert suspend.returncode == 0, suspend.stderr
    assert "off n3" not in _calls(hw)
    assert (f"SuspendProgram n3: kept up: it has a suspended job ({job}), not idle"
            in slurm.log_text())
    _idle_for(cluster, ("n3", "n4"), 3)
    periodic = ["periodic", "--dir", str(slurm.dir)]
    first = until(lambda: slurm.pbsplug(None, *periodic).stdout, 30, "a power-off")
    assert first.split() == ["powered", "off:", "n4"]  # n3 first by name: kept up
    assert _calls(hw) == ["off n4"]
    assert cluster.job(job)["job_state"] == "SUSPENDED"
    status = (slurm.top / "power-state" / "power_status.json").read_text()
    assert f"n3 has a suspended job ({job}), not idle" in status
    cluster.run("scontrol", "resume", job)
    assert cluster.wait_job(job, lambda j: j["job_state"] == "RUNNING", 60, "resumed")


def test_jobs_of_partitions_hidden_from_the_caller_keep_their_nodes_up(power, tmp_path):
    """A job in a Hidden=YES partition (running on n3) and one in a partition only a group
    may use (suspended on n4): squeue without ``-a`` leaves both out for a caller Slurm hides
    them from, and the plugin would power their nodes off under them. The adapter's queries
    (the vnodes' `jobs` and `suspended_jobs`) ask with ``-a``: run as such a caller (a
    --bin-dir whose squeue runs as nobody) they still name both jobs; and the plugin keeps
    both nodes up, its reasons naming the jobs. (Slurm 22.05 shows root and SlurmUser, the
    programs' own users, these jobs with or without ``-a``: the plain squeue below runs as
    nobody to show that the partitions are really hidden.)"""
    from pbsplug.adapters import slurm_power
    from pbsplug.adapters.slurm_read import Slurm

    from .slurm_cluster import hidden_jobs, unprivileged_commands

    slurm, hw = power
    cluster = slurm.cluster
    hidden, grouped = hidden_jobs(cluster)
    bin_dir = unprivileged_commands(tmp_path / "bin")
    listed = {flags: cluster.run(str(bin_dir / "squeue"), *flags, "-h", "-t", "all", "-o",
                                 "%i").stdout.split() for flags in ((), ("-a",))}
    assert hidden not in listed[()] and grouped not in listed[()], listed
    assert hidden in listed[("-a",)] and grouped in listed[("-a",)], listed
    # The adapter's own queries, run as that caller.
    ctx = type("Ctx", (), {"slurm": Slurm(str(bin_dir), str(cluster.conf))})()
    assert slurm_power.running_jobs(ctx).get("n3") == [f"{hidden}/0"]
    assert slurm_power.suspended_jobs(ctx) == {"n4": [grouped]}
    # The periodic decision (root's): n3 and n4, the only eligible nodes, are kept up.
    _idle_for(cluster, ("n3", "n4"), 3)
    status = slurm.top / "power-state" / "power_status.json"

    def both_kept() -> bool:
        assert slurm.pbsplug(None, "periodic", "--dir", str(slurm.dir)).stdout == ""
        try:
            text = status.read_text()
        except OSError:
            return False
        return (f"n3 has a job ({hidden}), not idle" in text
                and f"n4 has a suspended job ({grouped}), not idle" in text)

    until(both_kept, 30, "a periodic run that kept n3 and n4 up for their jobs")
    assert _calls(hw) == []
    assert cluster.job(hidden)["job_state"] == "RUNNING"
    assert cluster.job(grouped)["job_state"] == "SUSPENDED"


def test_a_pending_job_of_a_hidden_partition_is_among_the_pending_jobs(slurm, tmp_path):
    """A job pending in a Hidden=YES partition (n3 and n4 full until their jobs' time limit)
    has Slurm's expected start and nodes: the adapter's pending query (``squeue -a -t PD``,
    the periodic and SuspendProgram decisions' job_list) gives it, run as a caller Slurm
    hides that partition from (a --bin-dir whose squeue runs as nobody). Without ``-a``
    such a caller gets no such job, and the plugin could power off the nodes it waits for."""
    from pbsplug.adapters import slurm_power
    from pbsplug.adapters.slurm_read import Slurm

    from .slurm_cluster import HIDDEN_PARTITION, unprivileged_commands

    cluster = slurm.cluster
    sleeper = "#!/bin/sh\nsleep 600\n"
    running = [cluster.sbatch("-p", HIDDEN_PARTITION, "-w", node, "-n", "2", "-t", "10",
                              "-o", "/dev/null", script=sleeper) for node in ("n3", "n4")]
    for job in running:
        cluster.wait_job(job, lambda j: j["job_state"] == "RUNNING", 60, "running")
    pending = cluster.sbatch("-p", HIDDEN_PARTITION, "-N", "2", "-n", "2", "-t", "5", "-o",
                             "/dev/null", script=sleeper)
    bin_dir = unprivileged_commands(tmp_path / "bin")
    plain = cluster.run(str(bin_dir / "squeue"), "-h", "-t", "all", "-o", "%i").stdout.split()
    assert pending not in plain, plain  # really hidden from nobody
    ctx = type("Ctx", (), {"slurm": Slurm(str(bin_dir), str(cluster.conf))})()
    jobs = until(lambda: slurm_power.pending_jobs(ctx), 30,
                 "Slurm's expected start and nodes of the pending job")
    assert list(jobs) == [pending]
    assert jobs[pending]["estimated"]["exec_vnode"] == "(n3:ncpus=1)+(n4:ncpus=1)"
    assert jobs[pending]["estimated"]["start_time"] > 0
    assert cluster.job(pending)["job_state"] == "PENDING"


def test_a_nodes_jobs_name_each_cpu_their_jobs_hold_there(slurm, tmp_path):
    """The periodic event's vnode ``jobs`` in the engine's form, one ``<job id>/<cpu>`` a
    cpu: a job of gpu on n3's cpu 0 and one of the hidden partition on its cpu 1, and one
    job on both cpus of n1 and of n2; read as a caller Slurm hides that partition from (a
    --bin-dir whose squeue and scontrol run as nobody: both are asked with ``-a``). A held
    job whose name is a line break then ``JobId=<the wide job> JobName=y`` (scontrol
    writes it as it is) leaves the wide job's cpus as they are: it is asked for alone."""
    from pbsplug.adapters import slurm_power
    from pbsplug.adapters.slurm_read import Slurm

    from .slurm_cluster import HIDDEN_PARTITION, unprivileged_commands

    cluster = slurm.cluster
    sleeper = "#!/bin/sh\nsleep 600\n"
    first = cluster.sbatch("-p", "gpu", "-w", "n3", "-n", "1", "-o", "/dev/null",
                           script=sleeper)
    cluster.wait_job(first, lambda j: j["job_state"] == "RUNNING", 60, "running")
    hidden = cluster.sbatch("-p", HIDDEN_PARTITION, "-w", "n3", "-n", "1", "-o",
                            "/dev/null", script=sleeper)
    wide = cluster.sbatch("-p", "all", "-w", "n[1-2]", "-N", "2", "-n", "4", "-o",
                          "/dev/null", script=sleeper)
    for job in (hidden, wide):
        cluster.wait_job(job, lambda j: j["job_state"] == "RUNNING", 60, "running")
    cluster.sbatch("-H", "-p", "all", "-n", "1", "-o", "/dev/null", "-J",
                   f"x\nJobId={wide} JobName=y", script=sleeper)
    bin_dir = unprivileged_commands(tmp_path / "bin", as_user=("squeue", "scontrol"))
    ctx = type("Ctx", (), {"slurm": Slurm(str(bin_dir), str(cluster.conf))})()
    assert slurm_power.running_jobs(ctx) == {
        "n1": [f"{wide}/0", f"{wide}/1"], "n2": [f"{wide}/0", f"{wide}/1"],
        "n3": [f"{first}/0", f"{hidden}/1"]}


def _running(program: Path) -> bool:
    """Whether a process runs `program` (its path, or that path's ``-native`` launcher)."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
        except OSError:
            continue
        if any(arg.startswith(str(program).encode()) for arg in argv):
            return True
    return False


def test_slurms_own_idle_timer_runs_suspendprogram_through_the_plugins_decision(power):
    """SuspendProgram run by slurmctld's own power-saving timer (SuspendTime=5 in place of
    install's 100 days), not by the test: Slurm 22.05 names the idle nodes it may suspend
    (n3, n4: n1, n2 are SuspendExcNodes) within a power-saving pass (one a minute, or after
    a node's state changes: the restart's registrations). The plugins' decision powers off
    one of them (max_concurrent_nodes 1 a run: n3) and keeps n4 up, logged, while Slurm
    counts both as powered down (docs/slurm.md); when they registered at different
    moments, Slurm names them in two passes, and each run powers off its one. A job for
    the one kept (or the last off) then gets it through ResumeProgram and runs. slurmctld
    runs its power programs with every fd closed: the program with no
    worker to ask (stopped here, as after a boot) exited 1 however it decided, and
    slurmctld logged "power_save: program exit status of 1"; it exits 0 now."""
    slurm, hw = power
    cluster = slurm.cluster
    text = cluster.conf.read_text()
    assert "\nSuspendTime=8640000\n" in text
    cluster.write_conf(text.replace("\nSuspendTime=8640000\n", "\nSuspendTime=5\n"))
    slurm.stop_workers()
    ctld_log = cluster.root / "log" / "slurmctld.log"
    start = ctld_log.stat().st_size
    cluster.restart_controller()
    states = cluster.wait_nodes(("n3", "n4"), ("idle~",), 150)
    assert states["n1"] == "idle" and states["n2"] == "idle"
    # Slurm names n3 and n4 in one pass, or one a pass when they registered at different
    # moments: the plugins' decision (one host a run) powers off n3 and keeps n4 up, logged,
    # or powers off each in its own run. Either way, each is off or kept, never both.
    def passed() -> tuple[list[str], list[str]] | None:
        if _running(slurm.dir / "suspend"):
            return None
        off = [call.split()[1] for call in _calls(hw) if call.startswith("off ")]
        kept = re.findall(r"SuspendProgram (n[34]): the plugins' decision keeps them up",
                          slurm.log_text())
        return (off, kept) if sorted(off + kept) == ["n3", "n4"] else None

    off, kept = until(passed, 60, "SuspendProgram's decisions and ends")
    assert off and (not kept or off == ["n3"] and kept == ["n4"]), (off, kept)
    # The power-saving thread reaps its programs before it runs the next: a ResumeProgram
    # run after SuspendProgram ended comes after its exit status was logged.
    node = (kept or off)[-1]
    job = cluster.sbatch("-p", "gpu", "-w", node, "-o", "/dev/null")
    assert cluster.wait_done(job, timeout=150)["job_state"] == "COMPLETED"
    assert _calls(hw) == [*(f"off {n}" for n in off), f"on {node}"]
    with ctld_log.open("rb") as fh:
        fh.seek(start)
        ctld = fh.read().decode(errors="replace")
    assert "program exit status" not in ctld, ctld[-2000:]
