"""A real Slurm whose SlurmUser is not root (Debian's default, ``slurm``): after ``pbsplug
slurm install`` the power programs slurmctld runs as SlurmUser work, and so do a root
``pbsplug slurm periodic`` and root's HealthCheckProgram, in the same state folder.

The environment is one every user can run (the `attacker` fixture's: the system interpreter
with this checkout of pbsplug), as a site's /opt/pbsplug would be: the project's own lives
under /root. The power plugin's driver is the ``command`` one, whose commands note who ran
them (the hardware is what cannot run here)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from pbsplug.testing import missing, site_toml, until

from .conftest import Installed
from .slurm_cluster import base_conf

SLURM_USER = "slurm"
POWER_PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "power" / "pbsplug_power"
#: The driver's commands: each notes who ran it; a host is off while its mark is there.
SWITCH = """#!/bin/sh
echo "$(id -un) $0 $1" >> "$(dirname "$0")/state/calls.log"
case "$0" in
  */off) touch "$(dirname "$0")/state/$1.off" ;;
  */on) rm -f "$(dirname "$0")/state/$1.off" ;;
esac
exit 0
"""
STATUS = """#!/bin/sh
for host in $(echo "$1" | tr , ' '); do
  if [ -e "$(dirname "$0")/state/$host.off" ]; then echo "$host off"; \\
  else echo "$host ready"; fi
done
"""


class SlurmUserSite:
    def __init__(self, slurm: Installed, venv: Path, hw: Path, dists: Path):
        self.slurm = slurm
        self.cluster = slurm.cluster
        self.venv = venv
        self.hw = hw
        self.dists = dists

    def pbsplug(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = {**self.cluster.env, "PBSPLUG_HOME": str(self.slurm.home),
               "PYTHONPATH": str(self.dists)}
        return self.cluster.run(str(self.venv / "bin" / "pbsplug"), "--site",
                                str(self.slurm.home / "site.toml"), "slurm", *args, env=env,
                                check=check)

    def as_slurm_user(self, *argv: str, env: dict[str, str] | None = None
                      ) -> subprocess.CompletedProcess:
        return subprocess.run(["setpriv", f"--reuid={SLURM_USER}", f"--regid={SLURM_USER}",
                               "--init-groups", *argv], capture_output=True, text=True,
                              env=env or self.cluster.env, timeout=120, cwd="/")

    def calls(self) -> list[str]:
        try:
            text = (self.hw / "state" / "calls.log").read_text()
        except OSError:
            return []
        return [" ".join([line.split()[0], Path(line.split()[1]).name, *line.split()[2:]])
                for line in text.splitlines()]


@pytest.fixture
def slurm_user_site(slurm: Installed, attacker):
    """The test's Slurm restarted with SlurmUser=slurm (its folders made slurm's), and the
    power plugin installed from an environment every user can run; afterwards SlurmUser
    is root again."""
    try:
        pwd.getpwnam(SLURM_USER)
    except KeyError:
        missing(f"needs the user {SLURM_USER} (Debian's slurmctld package makes it)")
    if shutil.which("setpriv") is None:
        missing("needs setpriv (Debian package util-linux) to run a program as SlurmUser")
    cluster = slurm.cluster
    before = cluster.conf.read_text()
    hw = slurm.top / "hardware"
    (hw / "state").mkdir(parents=True, exist_ok=True)
    shutil.chown(hw / "state", SLURM_USER, SLURM_USER)  # the driver runs as SlurmUser
    for name, text in (("on", SWITCH), ("off", SWITCH), ("status", STATUS)):
        (hw / name).write_text(text)
        os.chmod(hw / name, 0o755)
    # The power plugin as pip would lay it out, where SlurmUser can read it.
    dists = slurm.top / "dists"
    info = dists / "pbsplug_power-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pbsplug-power\n"
                                   "Version: 0.1.0\n")
    (info / "entry_points.txt").write_text("[pbsplug]\npower = pbsplug_power\n")
    (dists / "pbsplug_power").symlink_to(POWER_PLUGIN)
    extra = "SuspendExcNodes=n[1-2]\nSuspendTimeout=5\nResumeTimeout=90\nDebugFlags=Power"
    cluster.write_conf(base_conf(cluster.root, extra, slurm_user=SLURM_USER))
    cluster.own_folders(SLURM_USER)
    site = SlurmUserSite(slurm, Path(attacker.venv), hw, dists)
    try:
        cluster.reset()
        yield site
    finally:
        cluster.cancel_all()
        site.pbsplug("uninstall", "--dir", str(slurm.dir), "--slurm-conf", str(cluster.conf),
                     check=False)
        cluster.write_conf(before)
        cluster.own_folders("root")
        cluster.reset()
        slurm.restart = False


def _owner(path: Path) -> str:
    return pwd.getpwuid(path.stat().st_uid).pw_name


def test_power_programs_run_as_slurmuser_beside_roots_programs(slurm_user_site):
    site = slurm_user_site
    slurm, cluster = site.slurm, site.cluster
    config = {"driver": "command", "power_on_off_enable": "True", "node_idle_limit": "2",
              "min_node_down_delay": "1", "max_concurrent_nodes": "1", "boot_delay": 1,
              "power_on_command": [str(site.hw / "on"), "{host}"],
              "power_off_command": [str(site.hw / "off"), "{host}"],
              "status_command": [str(site.hw / "status"), "{hosts}"]}
    (slurm.home / "site.toml").write_text(site_toml("power", config))
    options = slurm.options()
    options[options.index("--site-dir") + 1] = str(site.dists)  # (pytest's tmp_path: 0700)
    out = site.pbsplug("install", "--apply", *options).stdout
    slurm.restart = True
    cluster.restart_controller()  # 22.05 reads the power programs at its start
    cluster.reconfigure()
    power, own = slurm.state / "power", slurm.state / "slurmuser"
    assert f"made {power} slurm's (the power programs' records and lock)" in out
    assert f"made {own} slurm's" in out
    assert "cannot reach" not in out  # the environment is one SlurmUser can run
    assert (_owner(slurm.state), _owner(power), _owner(own)) == ("root", "slurm", "slurm")
    conf_file = slurm.dir / "pbsplug-slurm.json"
    assert conf_file.stat().st_mode & 0o777 == 0o640 and _owner(conf_file) == "root"

    # SuspendProgram, run by slurmctld as SlurmUser: the plugin's driver powers n3 off.
    cluster.run("scontrol", "update", "nodename=n3", "state=power_down")
    until(lambda: "slurm off n3" in site.calls(), 60, "SuspendProgram to power n3 off")

    def recorded() -> bool:  # (written once the driver has answered)
        try:
            return '"n3"' in (power / "power_off.json").read_text()
        except OSError:
            return False

    until(recorded, 20, "SuspendProgram's record of n3")
    assert _owner(power / "power_off.json") == "slurm"
    # The plugin's default state folder is under SlurmUser's pbsplug home, not root's.
    plugin_state = own / "hooks" / "tmp"
    until(lambda: (plugin_state / "power_status.json").exists(), 10, "the plugin's record")
    assert _owner(plugin_state / "power_status.json") == "slurm"
    assert f"launch: {site.hw / 'off'} n3" in (own / slurm.log.name).read_text()

    # `pbsplug slurm periodic` run by root: the event runs as SlurmUser, in its folders.
    def n4_off() -> str:
        return site.pbsplug("periodic", "--dir", str(slurm.dir)).stdout

    assert until(n4_off, 30, "a power-off").split() == ["powered", "off:", "n4"]
    assert "slurm off n4" in site.calls()  # the driver ran as SlurmUser
    assert "powered off by the plugins' decision" in slurm.log_text()  # root's log
    assert _owner(power / "power_off.json") == "slurm"
    assert _owner(power / "power.lock") == "slurm"

    # HealthCheckProgram, run by slurmd as root, keeps its marks in the state folder.
    health = cluster.run(str(slurm.dir / "health_check"),
                         env={**cluster.env, "SLURMD_NODENAME": "n1"}, check=False)
    assert health.returncode == 0, health.stderr
    assert _owner(slurm.state / "started" / "n1") == "root"
    assert _owner(slurm.state / "started") == "root"

    # Root's `pbsplug power status` reads the records SlurmUser's programs wrote, in
    # SlurmUser's pbsplug home (install recorded it in root's: pbsplug.hook_home).
    shown = cluster.run(str(site.venv / "bin" / "pbsplug"), "--site",
                        str(slurm.home / "site.toml"), "power", "status", "--json",
                        env={**cluster.env, "PBSPLUG_HOME": str(slurm.home),
                             "PYTHONPATH": str(site.dists)}, check=False)
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    del record["booting"]
    written = json.loads((plugin_state / "power_status.json").read_text())
    for host in written["hosts"].values():  # the record keeps last use, status shows idle
        last_used = host.pop("last_used")
        host["idle"] = None if last_used is None else written["time"] - last_used
    assert record == written
    assert "n4" in record["hosts"]  # the last run's, which powered n4 off

    # `pbsplug slurm status` checks who owns SlurmUser's folders on this host.
    def folder_lines() -> list[str]:
        out = site.pbsplug("status", *options, check=False).stdout
        return [line.strip() for line in out.splitlines() if "folder" in line
                and line.strip().startswith("differs:")]

    assert folder_lines() == []
    os.chown(power, 0, 0)
    try:
        assert folder_lines() == [
            f"differs: {power} (the power programs' folder) is a folder owned by root, mode "
            "0755; expected a folder owned by slurm, writable by no one else: run 'pbsplug "
            "slurm install' again, as root, on the controller"]
    finally:
        os.chown(power, pwd.getpwnam(SLURM_USER).pw_uid, pwd.getpwnam(SLURM_USER).pw_gid)

    # Run as SlurmUser, periodic works too (the config is its group's to read).
    again = site.as_slurm_user(str(site.venv / "bin" / "pbsplug"), "slurm", "periodic",
                               "--dir", str(slurm.dir))
    assert again.returncode == 0, again.stderr

    # Without the folder install makes (an install run on another host), a program run as
    # SlurmUser fails in one line that says what to do.
    shutil.rmtree(power)
    failed = site.as_slurm_user(str(slurm.dir / "suspend"), "n3")
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines() == [
        f"pbsplug suspend: the power programs' folder (<--state-dir>/power) {power} is "
        "missing and uid 64030 cannot make it (Permission denied): run 'pbsplug slurm "
        "install' as root on this host (the controller), which makes it SlurmUser's"
        .replace("64030", str(pwd.getpwnam(SLURM_USER).pw_uid))]


def _scontrol_slurm_user(cluster) -> str:
    out = cluster.run("/usr/bin/scontrol", "show", "config").stdout
    return next(line.split("=", 1)[1].strip().split("(")[0] for line in out.splitlines()
                if line.startswith("SlurmUser"))


def test_slurmuser_set_in_slurm_conf_and_in_an_included_file_is_read_as_slurm_reads_it(
        slurm: Installed):
    """Slurm reads an included file where its Include line stands, and the last SlurmUser
    read wins: pbsplug took the main file's whenever it had one (an included
    SlurmUser=slurm after the main file's SlurmUser=root was read as root)."""
    from pbsplug.adapters import slurm as slurm_module

    try:
        pwd.getpwnam(SLURM_USER)
    except KeyError:
        missing(f"needs the user {SLURM_USER} (Debian's slurmctld package makes it)")
    cluster = slurm.cluster
    before = cluster.conf.read_text()
    included = cluster.conf.parent / "pbsplug-test-included.conf"
    included.write_text(f"SlurmUser={SLURM_USER}\n")
    main = base_conf(cluster.root, slurm_user="root").splitlines()
    at = next(i for i, line in enumerate(main) if line.startswith("SlurmUser="))
    seen = {}
    try:
        cluster.own_folders(SLURM_USER)
        for layout, lines in (
                ("after", [*main[:at + 1], f"Include {included}", *main[at + 1:]]),
                ("before", [*main[:at], f"Include {included}", *main[at:]])):
            cluster.write_conf("\n".join(lines) + "\n")
            cluster.restart_controller()
            seen[layout] = (_scontrol_slurm_user(cluster),
                            slurm_module.read_slurm_user(cluster.conf))
    finally:
        cluster.write_conf(before)
        included.unlink(missing_ok=True)
        cluster.own_folders("root")
        cluster.reset()
    # Slurm's own reading (the controller's word), and pbsplug's agreeing with it
    assert seen == {"after": (SLURM_USER, SLURM_USER), "before": ("root", "root")}
