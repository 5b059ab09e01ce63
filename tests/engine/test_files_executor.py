"""What the executor makes for a job on the real file system (issue 17): the TMPDIR, the
script and nodefile, and their removal, never through a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pbsplug.engine import executor
from pbsplug.testing import missing


@pytest.fixture
def private(tmp_path) -> Path:
    """A folder of the server's that nobody else may write, as tmp/ and jobs/ are."""
    folder = tmp_path / "tmp"
    folder.mkdir(mode=0o711)
    folder.chmod(0o711)
    return folder


@pytest.fixture
def outside(tmp_path) -> Path:
    """What a planted link points at; it must come out unchanged."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "keep").write_text("keep\n")
    folder.chmod(0o755)
    return folder


def snapshot(folder: Path) -> dict:
    return {p.name: (p.lstat().st_uid, stat.S_IMODE(p.lstat().st_mode), p.read_bytes())
            for p in folder.iterdir()} | {".": stat.S_IMODE(folder.lstat().st_mode)}


def test_a_stale_tmpdir_with_links_inside_is_replaced_without_following_them(private, outside):
    stale = private / "pbs.1.host"
    (stale / "deep").mkdir(parents=True)
    (stale / "escape").symlink_to(outside)
    (stale / "deep" / "file-link").symlink_to(outside / "keep")
    (stale / "deep" / "dir-link").symlink_to(outside)
    before = snapshot(outside)
    executor.make_job_dir(stale, None)
    assert list(stale.iterdir()) == []
    assert stat.S_IMODE(stale.lstat().st_mode) == 0o700 and not stale.is_symlink()
    assert snapshot(outside) == before
    executor.remove_job_dir(stale)
    assert not os.path.lexists(stale) and snapshot(outside) == before


def test_a_link_at_the_tmpdir_name_goes_and_its_target_stays(private, outside):
    link = private / "pbs.2.host"
    link.symlink_to(outside)
    before = snapshot(outside)
    executor.make_job_dir(link, None)
    assert link.is_dir() and not link.is_symlink()
    assert snapshot(outside) == before


def test_the_tmpdir_is_handed_to_the_job_owner(private):
    if os.geteuid() != 0:
        missing("needs root: hands the folder to another uid")
    made = private / "pbs.3.host"
    executor.make_job_dir(made, (65534, 65534, "nobody"))
    st = made.lstat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (65534, 65534, 0o700)
    executor.write_job_file(private / "3.SC", "echo hi\n", (65534, 65534, "nobody"), 0o700)
    st = (private / "3.SC").lstat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (65534, 0o700)


def test_job_files_replace_a_link_instead_of_writing_through_it(private, outside):
    (private / "4.nodes").symlink_to(outside / "keep")
    before = snapshot(outside)
    executor.write_job_file(private / "4.nodes", "host\n", None)
    assert (private / "4.nodes").read_text() == "host\n"
    assert not (private / "4.nodes").is_symlink()
    assert stat.S_IMODE((private / "4.nodes").lstat().st_mode) == 0o600
    assert snapshot(outside) == before


def test_nothing_is_made_in_a_folder_others_may_write(tmp_path):
    open_tmp = tmp_path / "tmp"
    open_tmp.mkdir()
    open_tmp.chmod(0o1777)  # a home from before tmp/ was closed, not tightened yet
    with pytest.raises(PermissionError, match="not the server's own private folder"):
        executor.make_job_dir(open_tmp / "pbs.5.host", None)
    with pytest.raises(PermissionError):
        executor.write_job_file(open_tmp / "5.SC", "x", None)
    assert list(open_tmp.iterdir()) == []


def test_the_output_path_is_opened_as_given_or_in_a_folder(tmp_path):
    fd = executor.open_output(f"{tmp_path}/", "job.o7")
    os.close(fd)
    assert (tmp_path / "job.o7").exists()
    (tmp_path / "link").symlink_to(tmp_path / "job.o7")
    with pytest.raises(OSError, match="symbolic link"):
        executor.open_output(str(tmp_path / "link"), "x")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError):  # no reader: refused at once instead of hanging
        executor.open_output(str(tmp_path / "fifo"), "x")
    os.close(executor.open_output(os.devnull, "x"))


def test_a_file_the_open_makes_is_not_checked_one_there_before_is(tmp_path, monkeypatch):
    """A file system that maps owners (NFS's root_squash, a CIFS mount's uid=) shows the
    file a job has just made as another user's: the owner check refused every new output
    file there. Only a file that was there before the open is checked (and truncated)."""
    checked = []
    monkeypatch.setattr(executor, "check_output_file",
                        lambda fd, path: checked.append(path))
    path = tmp_path / "job.o7"
    os.close(executor.open_output(str(path), "x"))
    os.close(executor.open_output(f"{tmp_path}/", "job.o8"))
    assert checked == []
    path.write_text("the run before\n")
    os.close(executor.open_output(str(path), "x"))
    assert checked == [str(path)] and path.read_text() == ""


def test_a_link_of_the_owners_own_to_a_folder_is_refused_saying_to_add_a_slash(tmp_path):
    """`-o logs`, where logs is the job's owner's own link to a folder, is refused (a link is
    never taken for a folder) but reached as `-o logs/`: the refusal said only "is a
    symbolic link, which a job's output never follows", not how to name that folder. A
    link of another user's (planted at a job's default output name) gets no such advice."""
    (tmp_path / "real").mkdir()
    link = tmp_path / "logs"
    link.symlink_to(tmp_path / "real")
    with pytest.raises(OSError, match="symbolic link") as refused:
        executor.open_output(str(link), "job.o7")
    assert f"a trailing / ({link}/)" in str(refused.value), refused.value
    os.close(executor.open_output(f"{link}/", "job.o7"))
    assert (tmp_path / "real" / "job.o7").is_file()
    if os.geteuid() != 0:
        missing("needs root: hands the link to another uid")
    os.lchown(link, 65534, 65534)  # (another user's link: no advice to go through it)
    with pytest.raises(OSError, match="symbolic link") as refused:
        executor.open_output(str(link), "job.o8")
    assert "trailing" not in str(refused.value) and not (tmp_path / "real" / "job.o8").exists()


def test_a_tmpdir_nested_deeper_than_any_recursion_is_removed(private):
    """os.fwalk recursed: 1,000 nested folders raised RecursionError half way through a
    job's end (jobobit never fired, dependent jobs stayed held)."""
    tmpdir = private / "pbs.5.host"
    tmpdir.mkdir()
    fd = os.open(tmpdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(1500):  # by descriptors: the path outgrows PATH_MAX
            os.mkdir("d", dir_fd=fd)
            os.close(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
            fd, old = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(old)
    finally:
        os.close(fd)
    assert executor.remove_job_dir(tmpdir) is None
    assert not os.path.lexists(tmpdir)
    # On a busy machine the end's half second runs out and the rest is set aside as a
    # leftover for the server's sweeps: sweep until it is gone (a tree 1,000 deep left in
    # tmp_path broke pytest's own clean-up, which recurses).
    for _ in range(1000):
        if not executor.sweep_leftovers(private, 5.0):
            break
    assert not [p for p in private.iterdir() if p.name.startswith(executor.LEFTOVER)]


def test_a_folder_swapped_for_a_link_after_it_was_listed_is_never_opened(private, outside,
                                                                        monkeypatch):
    """Between listing a folder and opening it, the job's owner swaps it for a link (to a
    FIFO here; to a terminal, root's open made it the server's controlling terminal).
    os.fwalk opened it without O_NOFOLLOW; nothing but a real folder may be opened."""
    tmpdir = private / "pbs.6.host"
    (tmpdir / "a").mkdir(parents=True)
    (tmpdir / "b").mkdir()
    fifo = outside / "fifo"
    os.mkfifo(fifo)
    real_scandir, real_open = os.scandir, os.open
    opened = []

    class Swapping:
        """os.scandir's listing; then the user swaps b for a link."""

        def __init__(self, fd):
            self.entries = list(real_scandir(fd))
            if any(e.name == "b" for e in self.entries) and not (tmpdir / "b").is_symlink():
                (tmpdir / "b").rmdir()
                (tmpdir / "b").symlink_to(fifo)

        def __iter__(self):
            return iter(self.entries)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def close(self):
            pass

    def watching_open(path, flags, *args, **kw):
        fd = real_open(path, flags, *args, **kw)
        opened.append((path, stat.S_IFMT(os.fstat(fd).st_mode)))
        return fd

    monkeypatch.setattr(os, "scandir", Swapping)
    monkeypatch.setattr(os, "open", watching_open)
    executor.remove_job_dir(tmpdir)
    monkeypatch.undo()
    assert [path for path, kind in opened if kind != stat.S_IFDIR] == []
    assert not os.path.lexists(tmpdir) and stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_folder_named_as_the_removals_own_at_depth_is_removed_too(private):
    """Folders past 64 levels move up to the top folder; under a fixed name, a job's own
    folder of that name made the move fail and the whole TMPDIR stay for good."""
    tmpdir = private / "pbs.7.host"
    path = tmpdir
    for _ in range(70):
        path = path / ".pbsplug-removing-1"
    path.mkdir(parents=True)
    assert executor.remove_job_dir(tmpdir) is None
    assert not os.path.lexists(tmpdir)


def test_a_tree_not_gone_in_its_time_is_set_aside_and_swept_a_slice_at_a_time(private):
    """A process the job left can grow its TMPDIR faster than it is removed: the job's end
    stalled the server for minutes. Now the end spends its seconds, sets the rest aside,
    and sweep_leftovers goes on with it in slices."""
    tmpdir = private / "pbs.8.host"
    for n in range(40):
        (tmpdir / f"d{n}").mkdir(parents=True)
        for m in range(200):
            (tmpdir / f"d{n}" / f"f{m}").touch()
    assert executor.remove_job_dir(tmpdir, seconds=0.0) is None
    assert not os.path.lexists(tmpdir)
    aside = [p.name for p in private.iterdir()]
    assert len(aside) == 1 and aside[0].startswith(executor.LEFTOVER)
    slices = 0
    while executor.sweep_leftovers(private, 0.001):
        slices += 1
        assert slices < 100_000, "the sweep made no progress"
    assert list(private.iterdir()) == [] and slices > 1


def test_a_failed_removal_leaves_no_descriptor_open(private, monkeypatch, open_fds):
    """A folder whose listing failed (a name turned from file to folder and back) was
    opened but not yet held: its descriptor leaked, one a job, towards EMFILE."""
    tmpdir = private / "pbs.9.host"
    (tmpdir / "a" / "b").mkdir(parents=True)
    real = executor._empty_but_folders
    calls = []

    def failing(fd, *args):
        calls.append(fd)
        if len(calls) == 2:
            raise PermissionError("a listing that fails")
        return real(fd, *args)

    monkeypatch.setattr(executor, "_empty_but_folders", failing)
    before = open_fds()
    assert "PermissionError" in executor.remove_job_dir(tmpdir)
    assert open_fds() == before


def test_every_slice_of_the_sweep_makes_progress(private):
    """A folder of empty folders was listed, cut short at the slice's end and listed again
    from its start: a leftover of 250,000 made the server sweep half its time, for good.
    Now what is listed within a slice is removed, empty folders at once."""
    leftover = private / f"{executor.LEFTOVER}many"
    (leftover / "big").mkdir(parents=True)
    fd = os.open(leftover / "big", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for n in range(30_000):
            os.mkdir(f"d{n:05d}", dir_fd=fd)
    finally:
        os.close(fd)
    slices = 0
    while executor.sweep_leftovers(private, 0.002):
        slices += 1
        assert slices < 100_000, "the sweep made no progress"
    assert list(private.iterdir()) == []


def test_a_tmpdir_still_written_to_is_set_aside_and_swept_once_the_writer_is_gone(private):
    """A process the job left keeps writing in its TMPDIR: removal failed (ENOTEMPTY) and
    the TMPDIR stayed as pbs.<id> for good; a requeued run of the job could not start."""
    import subprocess
    import sys

    tmpdir = private / "pbs.10.host"
    tmpdir.mkdir()
    writer = subprocess.Popen([sys.executable, "-c", "import itertools, os\n"
                               "for n in itertools.count():\n"
                               "    open(f'f{n % 1000}', 'w').close()\n"], cwd=tmpdir)
    try:
        while len(os.listdir(tmpdir)) < 10:
            assert writer.poll() is None
        executor.remove_job_dir(tmpdir, seconds=0.05)  # an error or out of time: set aside
        assert not os.path.lexists(tmpdir)
        executor.make_job_dir(tmpdir, None)  # the name is free: a requeued run starts
        assert list(tmpdir.iterdir()) == []
    finally:
        writer.kill()
        writer.wait()
    while executor.sweep_leftovers(private, 0.05):
        pass
    assert [p.name for p in private.iterdir()] == ["pbs.10.host"]


def test_a_stale_tmpdir_is_set_aside_at_once_when_a_job_starts(private):
    """A requeued job's start no longer spends time on its earlier run's TMPDIR."""
    tmpdir = private / "pbs.11.host"
    (tmpdir / "old").mkdir(parents=True)
    executor.make_job_dir(tmpdir, None)
    assert list(tmpdir.iterdir()) == []
    aside = [p.name for p in private.iterdir() if p.name != "pbs.11.host"]
    assert len(aside) == 1 and aside[0].startswith(executor.LEFTOVER)
    assert not executor.sweep_leftovers(private, 1.0)
    assert [p.name for p in private.iterdir()] == ["pbs.11.host"]
