"""``pbsplug power status`` as a process: what it prints, and a clear error for every way it
cannot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pbsplug_power import state

PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))


def status(home: Path, *args: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    return subprocess.run([PBSPLUG, "power", "status", *args], capture_output=True,
                          text=True, env={**clean, "PBSPLUG_HOME": str(home)}, timeout=60)


@pytest.fixture
def home(tmp_path):
    (tmp_path / "site.toml").write_text("[plugins.power]\nenabled = true\n")
    return tmp_path


def test_status_shows_every_host_with_its_reason(home):
    now = int(time.time())
    state.save(home / "hooks" / "tmp", {"n2": now - 40}, 300, {  # the default folder
        "time": now - 30, "mode": "on_off", "driver": "capmc", "hosts": {
            "n1": {"power": "asleep", "idle": 5400, "eligible": True,
                   "why": "asleep; nothing needs it within 900 s"},
            "n2": {"power": "booting", "idle": None, "eligible": True,
                   "why": "still booting"}}})
    done = status(home)
    after = int(time.time())
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("power on/off with the capmc driver; as of the "
                               "periodic run at ")
    age = int(re.search(r"\((\d+) s ago\)$", lines[0]).group(1))
    assert 30 <= age <= after - now + 30  # the command's own start-up, however slow
    assert lines[1].split() == ["host", "power", "idle", "eligible", "why"]
    assert lines[2].split()[:4] == ["n1", "asleep", "01:30:00", "yes"]
    assert lines[2].endswith("asleep; nothing needs it within 900 s")
    assert lines[3].split()[:5] == ["n2", "booting", "never", "used", "yes"]
    record = json.loads(status(home, "--json").stdout)
    assert record["booting"] == {"n2": now - 40}


def test_status_shows_idle_as_of_the_run_from_last_used_as_from_the_old_idle(home):
    """The record holds each host's last use; `power status` shows its idle time as of the
    run (the time its reason is as of), as it did from the previous release's record, which
    held the idle time itself: the same rows and the same --json."""
    when = int(time.time()) - 30
    shown = []
    for hosts in ({"n1": {"last_used": when - 5400}, "n2": {"last_used": None},
                   "n3": {"last_used": when + 2}},  # (a little ahead of the run's clock)
                  {"n1": {"idle": 5400}, "n2": {"idle": None}, "n3": {"idle": -2}}):
        state.save(home / "hooks" / "tmp", {}, 300, {
            "time": when, "mode": "on_off", "driver": "capmc", "hosts": {
                host: {**entry, "power": "awake", "eligible": False, "why": "busy"}
                for host, entry in hosts.items()}})
        done = status(home)
        assert done.returncode == 0, done.stderr
        shown.append((done.stdout.splitlines()[1:], json.loads(status(home, "--json").stdout)))
    assert shown[0] == shown[1]
    assert [line.split()[:3] for line in shown[0][0][1:3]] == [
        ["n1", "awake", "01:30:00"], ["n2", "awake", "never"]]
    assert shown[0][1]["hosts"]["n3"]["idle"] == -2


def test_a_host_last_used_after_the_run_shows_as_not_idle_with_a_mark(home):
    """A host last used after the run's time (a clock stepped back) was not idle then: its
    idle time shows as 00:00:00 with a mark, and a last line says by how much, not
    format_duration's -1:59:58 of old (nor -00:00:02). --json gives the idle time as is. A
    run ahead of the command's clock says so, not "0 s ago"."""
    before = int(time.time())
    when = before + 3600
    state.save(home / "hooks" / "tmp", {}, 300, {
        "time": when, "mode": "on_off", "driver": "capmc", "hosts": {
            "n1": {"last_used": when + 2, "power": "awake", "eligible": False, "why": "busy"},
            "n2": {"idle": -90, "power": "awake", "eligible": False, "why": "busy"},
            "n3": {"last_used": when - 60, "power": "awake", "eligible": True, "why": "busy"}}})
    done = status(home)
    after = int(time.time())
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    ahead = int(re.search(r"\((\d+) s ahead of this host's clock: was a clock stepped "
                          r"back\?\)$", lines[0]).group(1))
    assert when - after <= ahead <= when - before  # (the command's clock read in between)
    assert [line.split()[:3] for line in lines[2:5]] == [
        ["n1", "awake", "00:00:00*"], ["n2", "awake", "00:00:00*"], ["n3", "awake", "00:01:00"]]
    assert lines[5:] == ["* last used after the run's time (by up to 00:01:30), so not idle "
                         "then: was a clock stepped back?"]
    record = json.loads(status(home, "--json").stdout)
    assert {host: entry["idle"] for host, entry in record["hosts"].items()} == {
        "n1": -2, "n2": -90, "n3": 60}


def test_status_without_a_record_says_how_to_get_one(home):
    done = status(home)
    assert done.returncode == 1 and "no periodic run is recorded in" in done.stderr
    assert "set hook power enabled = true" in done.stderr


def test_status_with_a_broken_record_names_the_file(home):
    (home / "hooks" / "tmp").mkdir(parents=True)
    (home / "hooks" / "tmp" / state.STATUS_FILE).write_text("[1, 2")
    done = status(home)
    assert done.returncode == 1
    assert f"{home}/hooks/tmp/power_status.json: not the power hook's JSON record" in done.stderr


@pytest.mark.parametrize(("record", "problem"), [
    ({"time": 1700000000, "hosts": {"n1": {"power": "awake"}}},
     "\"hosts\" 'n1': \"eligible\" is missing, expected true or false"),
    ({"time": "yesterday", "hosts": {}}, '"time" is "yesterday", expected an integer epoch'),
    ({"time": 1700000000, "hosts": ["n1"]}, '"hosts" is ["n1"], expected an object'),
    ({"time": 1700000000, "hosts": {"n1": {"power": "awake", "eligible": True, "why": "",
                                           "last_used": "yesterday"}}},
     "\"hosts\" 'n1': \"last_used\" is \"yesterday\", expected an integer epoch time or null"),
    ({"time": 1700000000, "hosts": {"n1": {"power": "awake", "eligible": True, "why": "",
                                           "last_used": 1.5}}},
     "\"hosts\" 'n1': \"last_used\" is 1.5, expected an integer epoch time or null"),
    # the mode and driver, which status names (a list as the mode was a TypeError's
    # traceback, a mode it did not know shown as "off", no driver as "None")
    ({"time": 1700000000, "mode": ["on_off"], "driver": "capmc", "hosts": {}},
     '"mode" is ["on_off"], expected "on_off", "ramp" or null'),
    ({"time": 1700000000, "mode": "turbo", "driver": "capmc", "hosts": {}},
     '"mode" is "turbo", expected "on_off", "ramp" or null'),
    ({"time": 1700000000, "driver": "capmc", "hosts": {}},
     '"mode" is missing, expected "on_off", "ramp" or null'),
    ({"time": 1700000000, "mode": "ramp", "hosts": {}}, '"driver" is missing, expected a string'),
    ({"time": 1700000000, "mode": None, "driver": {"capmc": 1}, "hosts": {}},
     '"driver" is {"capmc": 1}, expected a string'),
    # not JSON, though Python's json reads it: --json wrote it out again, for jq to refuse
    ('{"time": 1700000000, "mode": null, "driver": "capmc", "hosts": {}, "seen": NaN}',
     "NaN is not a JSON number"),
    ('{"time": 1700000000, "mode": null, "driver": "capmc", "hosts": {}, "seen": -Infinity}',
     "-Infinity is not a JSON number"),
    ('{"time": 1700000000, "mode": null, "driver": "capmc", "hosts": {}, "seen": 1e400}',
     "a number past a float's range (1e400)"),
])
def test_status_with_a_record_of_the_wrong_shape_names_the_file(home, record, problem):
    """Valid JSON of another shape: one line naming the file, not a traceback."""
    (home / "hooks" / "tmp").mkdir(parents=True)
    (home / "hooks" / "tmp" / state.STATUS_FILE).write_text(
        record if isinstance(record, str) else json.dumps(record))
    done = status(home)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip()
    assert line.startswith(f"pbsplug power: {home}/hooks/tmp/power_status.json: not the "
                           "power hook's JSON record ("), line
    assert problem in line and line.endswith("; remove it to start afresh"), line
    assert "\n" not in line


def test_status_with_a_bad_configuration_reports_the_key(home):
    (home / "site.toml").write_text('[plugins.power.config]\ndriver = "wake-on-lan"\n')
    done = status(home)
    assert done.returncode != 0 and "driver" in done.stderr and "wake-on-lan" in done.stderr


def test_status_reads_the_records_of_the_user_the_hook_runs_as(home, shared_tmp):
    """Inside Slurm with a SlurmUser that is not root, the periodic hook runs as SlurmUser
    with a pbsplug home of its own, and root's status looked in root's home: "no periodic
    run is recorded". The install records where the hook runs (`pbsplug.hook_home`), and
    root reads that user's records there, as theirs, never through a link of theirs."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: the records are another user's")
    import pwd

    from pbsplug.hookhome import record_hook_homes

    nobody = pwd.getpwnam("nobody")
    theirs = shared_tmp / "slurmuser"
    records = theirs / "hooks" / "tmp"
    now = int(time.time())
    state.save(records, {}, 300, {"time": now, "mode": "on_off", "driver": "command",
                                  "hosts": {"n3": {"power": "asleep", "idle": 60,
                                                   "eligible": True, "why": "powered off"}}})
    for path in (theirs, theirs / "hooks", records, *records.iterdir()):
        os.chown(path, nobody.pw_uid, nobody.pw_gid)  # as the hook run as nobody made them
    assert "no periodic run is recorded" in status(home).stderr  # root's own home: none
    record_hook_homes({"power": ("nobody", str(theirs))}, "a test's install", home)
    done = status(home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[2].split()[:2] == ["n3", "asleep"]
    # A state_dir the site gives the plugin is that user's too (install handed it over).
    (home / "site.toml").write_text(f"[plugins.power]\nenabled = true\n[plugins.power."
                                    f"config]\nstate_dir = {json.dumps(str(records))}\n")
    assert status(home).returncode == 0
    # A link of theirs, for root to read a record of root's elsewhere: refused.
    (records / state.STATUS_FILE).unlink()
    (records / state.STATUS_FILE).symlink_to(shared_tmp / "root-record.json")
    done = status(home)
    assert (done.returncode, done.stderr) == (
        1, f"pbsplug power: refusing {records / state.STATUS_FILE}: a link, never followed; "
           "remove it\n")


@pytest.fixture
def their_records(shared_tmp, attacker, home):
    """A pbsplug home of the `attacker`'s (standing for a SlurmUser that is not root, an
    account that may be taken over), recorded as where the power hook runs: a function
    that writes, as that user, the text (or sparse size) of its status record, in
    ``hooks/tmp`` as the hook keeps it."""
    from pbsplug.hookhome import record_hook_homes

    theirs = shared_tmp / "slurmuser"
    theirs.mkdir()
    os.chown(theirs, attacker.uid, attacker.gid)
    record_hook_homes({"power": (attacker.user, str(theirs))}, "a test's install", home)
    records = theirs / "hooks" / "tmp"

    def write(text: str = "", size: int = 0) -> Path:
        path = records / state.STATUS_FILE
        done = attacker.python(
            "import os, sys; os.makedirs(sys.argv[1], exist_ok=True)\n"
            "with open(sys.argv[2], 'w') as fh:\n    fh.write(sys.argv[3])\n"
            "if int(sys.argv[4]):\n    os.truncate(sys.argv[2], int(sys.argv[4]))",
            str(records), str(path), text, str(size))
        assert done.returncode == 0, done.stderr
        return path

    return write


def test_status_shows_another_users_record_without_its_control_characters(home,
                                                                           their_records):
    """Root's status prints the records the hook wrote as SlurmUser (kernel API 1.8), an
    account that may be taken over: an escape sequence in a host's name or reason reached
    root's terminal as it was (a title set, the screen cleared), and a line break made a
    row of its own. Each is shown escaped."""
    now = int(time.time())
    their_records(json.dumps({
        "time": now, "mode": "on_off", "driver": "command\x1b[2J", "hosts": {
            "n3\x1b]0;root@controller\x07": {
                "power": "asleep", "idle": 60, "eligible": True,
                "why": "powered off\r\nn9      on      never used  no        forged"}}}))
    done = status(home)
    assert done.returncode == 0, done.stderr
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", done.stdout)
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and "with the command\\x1b[2J driver" in lines[0]
    assert lines[2].startswith("n3\\x1b]0;root@controller\\x07  asleep")
    assert lines[2].endswith("powered off\\r\\nn9      on      never used  no        forged")
    assert json.loads(status(home, "--json").stdout)["driver"] == "command\x1b[2J"


def test_status_refuses_another_users_record_too_big_to_read(home, their_records):
    """A record of another user's is theirs to make any size: a sparse file of 64 GiB (no
    disk taken) had root's status read it whole, all the memory it could get (the
    controller's, where slurmctld runs), and fail with a traceback. Refused, in one line,
    past 64 MiB. (Run here with 4 GiB of address space, so the test cannot take the
    machine's memory.)"""
    import resource

    path = their_records(size=64 << 30)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    done = subprocess.run([PBSPLUG, "power", "status"], capture_output=True, text=True,
                          env={**clean, "PBSPLUG_HOME": str(home)}, timeout=120,
                          preexec_fn=limited)
    assert (done.returncode, done.stderr) == (1, (
        f"pbsplug power: refusing {path}: {64 << 30} bytes, more than the {64 << 20} read "
        "of a file of another user's; remove it\n"))
