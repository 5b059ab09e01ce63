"""The directories on disk: atomic writes, whole directories, nothing left on failure."""

from __future__ import annotations

import os

import pytest

from pbsplug.testing import missing
from pbsplug_mjf import files
from pbsplug_mjf.derive import HostError, MJFError


def test_a_key_is_its_value_and_one_newline_and_no_temporary_is_left(base):
    files.write_key(base, "total_cpu", 16)
    files.write_key(base, "hs06", 160.25)
    files.write_key(base, "total_cpu", 32)  # replaced in place
    assert sorted(os.listdir(base)) == ["hs06", "total_cpu"]
    assert (base / "total_cpu").read_text() == "32\n"
    assert (base / "hs06").read_text() == "160.25\n"
    assert files.read_key(base, "total_cpu") == 32 and files.read_key(base, "hs06") == 160.25
    assert files.read_key(base, "shutdowntime") is None


@pytest.mark.parametrize(("key", "value", "message"), [
    ("shutdowntime", 1.9e9, "shutdowntime: 1900000000.0 is not an integer"),
    ("job_id", "7 server", "job_id: '7 server' is not printable ASCII"),
    ("hs06", -1, "hs06: -1 is not a rating > 0"),
    # A rating is never 0 (absent when unknown), never 'inf' or 'nan', which no reader takes.
    ("hs06", 0, "hs06: 0 is not a rating > 0"),
    ("hs06_job", 0.0001, r"hs06_job: 0.0001 is not a rating > 0 to three decimals"),
    ("hs06", float("inf"), "hs06: inf is not a finite rating"),
    ("hs06_job", float("nan"), "hs06_job: nan is not a finite rating"),
    ("hs06", 10**400, r"hs06: 1000+ is not a finite rating"),
])
def test_a_value_the_note_does_not_allow_is_never_written(base, key, value, message):
    with pytest.raises(ValueError, match=message):
        files.write_key(base, key, value)
    assert os.listdir(base) == []


def test_key_names_are_lowercase_letters_digits_and_underscores(base):
    with pytest.raises(MJFError, match=r"'Total-CPU' is not a key name"):
        files.write_key(base, "Total-CPU", 1)


def test_sync_writes_only_what_changes_and_removes_what_is_gone(base):
    files.write_key(base, "total_cpu", 8)
    files.write_key(base, "grace_secs", 60)
    then = os.stat(base / "total_cpu").st_mtime_ns - 10**9
    os.utime(base / "total_cpu", ns=(then, then))
    changed = files.sync_keys(base, {"total_cpu": 8, "hs06": 80}, ("total_cpu", "hs06",
                                                                   "grace_secs"))
    assert changed == ["hs06", "grace_secs"]
    assert os.stat(base / "total_cpu").st_mtime_ns == then
    assert sorted(os.listdir(base)) == ["hs06", "total_cpu"]


def test_a_directory_is_made_whole_or_not_at_all(base):
    made = files.make_dir_whole(base, "4.server", {"job_id": "4.server", "allocated_cpu": 2})
    assert sorted(os.listdir(made)) == ["allocated_cpu", "job_id"]
    with pytest.raises(ValueError, match="wall_limit_secs: '1h' is not an integer"):
        files.make_dir_whole(base, "5.server", {"job_id": "5.server", "allocated_cpu": 2,
                                                "wall_limit_secs": "1h", "cpu_limit_secs": 9})
    assert os.listdir(base) == ["4.server"]  # no half-made 5.server, no temporary
    again = files.make_dir_whole(base, "4.server", {"job_id": "4.server"})
    assert os.listdir(again) == ["job_id"] and os.listdir(base) == ["4.server"]


def test_removing_a_directory(base):
    files.make_dir_whole(base, "4.server", {"job_id": "4.server"})
    assert files.remove_dir(base / "4.server") is True
    assert files.remove_dir(base / "4.server") is False
    assert os.listdir(base) == []


@pytest.mark.parametrize("name", ["", "..", ".hidden", "a/b", "x\0y"])
def test_names_that_cannot_be_a_directory(name):
    with pytest.raises(MJFError, match="cannot name a features directory"):
        files.checked_name("job", name)


# -- whose base folder: nobody else may swap the features (StrictModes, sticky allowed) -------

NOBODY = 65534


@pytest.fixture
def needs_root() -> None:
    if os.geteuid() != 0:
        missing("giving a folder to another user needs root")


@pytest.mark.usefixtures("needs_root")
def test_a_base_under_another_users_folder_is_refused_and_nothing_is_made_there(base):
    """The rule is the kernel's (`pbsplug.safedirs`, tests/test_safedirs.py); a refusal is
    the hook's HostError, naming the features folder."""
    squat = base / "squat"
    squat.mkdir()
    os.chown(squat, NOBODY, NOBODY)  # made by a user before the admin's `mkdir -p`
    with pytest.raises(HostError, match=(
            rf"^refusing the features folder {squat}/jobfeatures: {squat} is owned by uid "
            rf"{NOBODY}\b.*another user could plant or change what is in it")):
        files.ensure_base(squat / "jobfeatures")
    assert os.listdir(squat) == []  # refused before anything was made in it
    os.mkdir(squat / "jobfeatures")  # root's own folder, but its parent is the user's
    with pytest.raises(HostError, match=rf"{squat} is owned by uid {NOBODY}"):
        files.check_base(squat / "jobfeatures")


def test_a_base_that_cannot_be_made_is_the_plugins_error(base):
    (base / "file").write_text("")
    with pytest.raises(MJFError, match=(rf"^cannot make the base directory {base}/file/"
                                        "jobfeatures: Not a directory$")):
        files.ensure_base(base / "file" / "jobfeatures")
