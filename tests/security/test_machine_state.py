"""The root-only fixtures (`unix_user`, `attacker`) keep what they make of the machine, their
lock files and the attacker's environment, in a folder of their own user's that nobody else
may write to (`pbsplug.testing.MACHINE_STATE`, in /var/lib): not in /var/tmp, where another
user could plant a file or a link under the name first."""

from __future__ import annotations

import os
import pwd
import stat

import pytest

from pbsplug import testing


@pytest.fixture
def state_at(tmp_path, monkeypatch):
    def at(name: str):
        path = tmp_path / name
        monkeypatch.setattr(testing, "MACHINE_STATE", str(path))
        return path
    return at


def test_the_folder_is_made_for_its_user_alone_and_holds_the_locks(state_at):
    path = state_at("state")
    assert testing._machine_state() == str(path)
    st = path.lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
    assert stat.S_IMODE(st.st_mode) & 0o022 == 0
    with testing._machine_lock("user"):
        lock = (path / "user.lock").lstat()
    assert stat.S_ISREG(lock.st_mode) and stat.S_IMODE(lock.st_mode) == 0o600
    assert testing._machine_state() == str(path)  # (made once, then taken as it is)


def test_a_planted_link_is_refused_and_not_followed(state_at, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    state_at("state").symlink_to(target)
    with pytest.raises(RuntimeError, match="state is not a folder of uid .* remove it"):
        testing._machine_state()
    with pytest.raises(RuntimeError):
        with testing._machine_lock("user"):
            pass
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o1777])
def test_a_folder_others_may_write_to_is_refused(state_at, mode):
    path = state_at("state")
    path.mkdir()
    path.chmod(mode)
    with pytest.raises(RuntimeError, match="not a folder of uid"):
        testing._machine_state()


def test_another_users_folder_is_refused(state_at, unix_user):
    path = state_at("theirs")
    path.mkdir(mode=0o755)
    os.chown(path, pwd.getpwnam(unix_user).pw_uid, -1)
    with pytest.raises(RuntimeError, match="not a folder of uid 0"):
        testing._machine_state()


def test_a_strict_umask_still_leaves_the_folder_open_to_enter(state_at):
    path = state_at("state")
    old = os.umask(0o077)
    try:
        testing._machine_state()
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.lstat().st_mode) == 0o755
    path.chmod(0o700)  # (as an earlier run under that umask left it)
    testing._machine_state()
    assert stat.S_IMODE(path.lstat().st_mode) == 0o755


def test_the_attacker_runs_its_environment_from_the_folder(attacker):
    """The folder sits in one only root may write to, and the second user runs the
    environment made in it."""
    parent = os.path.dirname(testing.MACHINE_STATE)
    st = os.lstat(parent)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o022
    assert os.path.dirname(attacker.venv) == testing.MACHINE_STATE
    done = attacker.python("import os, sys; print(os.geteuid(), sys.prefix)")
    assert done.returncode == 0, done.stderr
    uid, prefix = done.stdout.split()
    assert int(uid) == pwd.getpwnam(attacker.user).pw_uid != 0
    assert prefix == str(attacker.venv)


def test_a_shared_lock_is_held_by_many_at_once_and_never_with_the_whole_lock(state_at):
    import fcntl

    path = state_at("state")
    with testing._machine_lock("root", shared=True), \
            testing._machine_lock("root", shared=True):
        fd = os.open(path / "root.lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    with testing._machine_lock("root"):  # (once they are let go)
        pass
