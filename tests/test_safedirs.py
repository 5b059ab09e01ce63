"""`pbsplug.safedirs`: folders and files only root could have changed (kernel API 1.6).

The rule's own tests; the plugins that use it (cpuset, mjf, multisched, power) test what
they do with a refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pbsplug import safedirs

NOBODY = 65534


@pytest.fixture
def base(shared_tmp):
    """A folder under /tmp that every user may traverse (`pbsplug.testing`)."""
    return shared_tmp


@pytest.mark.usefixtures("needs_root")
def test_a_folder_under_another_users_folder_is_refused_and_nothing_is_made_there(base):
    squat = base / "squat"
    squat.mkdir()
    os.chown(squat, NOBODY, NOBODY)  # made by a user before the admin's `mkdir -p`
    with pytest.raises(safedirs.UnsafeFolder, match=(
            rf"^refusing state_dir {squat}/state: {squat} is owned by uid {NOBODY} "
            r"\(nobody\), mode 0755, so another user could plant or change what is in it; "
            r"make it and every folder above it root's .*, or choose another folder$")):
        safedirs.ensure_folder(squat / "state", "state_dir")
    assert os.listdir(squat) == []  # refused before anything was made in it
    os.mkdir(squat / "state")  # root's own folder, but its parent is the user's
    with pytest.raises(safedirs.UnsafeFolder) as refused:
        safedirs.check_folder(squat / "state")
    assert refused.value.problem == f"{squat} is owned by uid {NOBODY} (nobody), mode 0755"


@pytest.mark.usefixtures("needs_root")
def test_a_folder_owned_by_another_user_is_refused(base):
    (base / "state").mkdir(mode=0o755)
    os.chown(base / "state", NOBODY, NOBODY)
    assert safedirs.folder_problem(base / "state") == (
        f"{base}/state is owned by uid {NOBODY} (nobody), mode 0755")


@pytest.mark.usefixtures("needs_root")
def test_a_symlink_on_the_way_must_be_roots_too(base):
    (base / "real").mkdir()
    os.symlink(base / "real", base / "link")
    assert safedirs.folder_problem(base / "link" / "state") is None
    os.lchown(base / "link", NOBODY, NOBODY)
    assert safedirs.folder_problem(base / "link" / "state") == (
        f"{base}/link is a link owned by uid {NOBODY} (nobody)")
    # A root-owned symlink in the user's folder: the user could replace the symlink.
    (base / "squat").mkdir()
    os.chown(base / "squat", NOBODY, NOBODY)
    os.symlink(base / "real", base / "squat" / "link")
    assert safedirs.folder_problem(base / "squat" / "link") == (
        f"{base}/squat is owned by uid {NOBODY} (nobody), mode 0755")


@pytest.mark.usefixtures("needs_root")
def test_a_link_planted_at_a_missing_level_after_the_check_is_not_followed(base,
                                                                           monkeypatch):
    """In a sticky folder as /tmp, a user may put a link at a level not made yet, after the
    folder was checked and before it is made: made by path (mkdir -p follows links), root
    would make and chmod folders where it pointed. Each level is checked as it is opened."""
    sticky = base / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    target = base / "elsewhere"
    target.mkdir(mode=0o700)
    checked = safedirs._folder_check

    def then_planted(path, whole):
        result = checked(path, whole)
        os.symlink(target, sticky / "demo")
        os.lchown(sticky / "demo", NOBODY, NOBODY)
        return result

    monkeypatch.setattr(safedirs, "_folder_check", then_planted)
    with pytest.raises(safedirs.UnsafeFolder,
                       match=rf"{sticky}/demo is a link owned by uid {NOBODY}"):
        safedirs.ensure_folder(sticky / "demo" / "state")
    assert os.listdir(target) == [] and (target.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize(("mode", "problem"), [
    (0o777, "is writable by everyone (owner uid 0 (root), mode 0777)"),
    (0o775, "is writable by its group (owner uid 0 (root), mode 0775)"),
    (0o1775, None),  # sticky: the group may not rename or remove root's folder in it
    (0o1777, None),  # as /tmp: fine on the way, since the folder in it is root's
    (0o755, None),
])
def test_a_folder_on_the_way_that_others_may_write_in(base, mode, problem):
    if os.geteuid() != 0:
        problem = problem and problem.replace("uid 0 (root)", safedirs._owner(os.geteuid()))
    (base / "shared").mkdir()
    (base / "shared").chmod(mode)
    found = safedirs.folder_problem(base / "shared" / "mine" / "state")
    assert found == (f"{base}/shared {problem}" if problem else None)
    made = None if problem else safedirs.ensure_folder(base / "shared" / "mine" / "state")
    assert made is None or (made.is_dir() and made.stat().st_mode & 0o7777 == 0o755)


def test_the_folder_itself_must_be_writable_by_root_alone_even_when_sticky(base):
    (base / "state").mkdir()
    (base / "state").chmod(0o1777)  # others could plant a file in it first
    with pytest.raises(safedirs.UnsafeFolder, match=r"state is writable by everyone \(owner "
                                                    r".*, mode 1777\): others may add files"):
        safedirs.ensure_folder(base / "state")
    assert safedirs.folder_problem(base / "state", whole=False) is None
    assert safedirs.folder_problem("/tmp", whole=False) is None  # /tmp itself, on the way


def test_a_file_is_opened_only_when_plain_and_written_by_root_alone(base):
    record = base / "record.json"
    record.write_text("{}")
    record.chmod(0o644)
    assert safedirs.read_text(record) == "{}"
    record.chmod(0o666)
    with pytest.raises(safedirs.UnsafeFolder, match=(
            rf"^refusing {record}: writable by others \(owner .*, mode 0666\), so another "
            "user could have written it; remove it$")):
        safedirs.read_text(record)
    os.symlink(base / "elsewhere", base / "link.json")
    with pytest.raises(safedirs.UnsafeFolder, match="a link, never followed"):
        safedirs.open_file(base / "link.json", os.O_RDWR | os.O_CREAT)
    assert not (base / "elsewhere").exists()
    os.mkfifo(base / "fifo")  # not waited on: refused at once
    with pytest.raises(safedirs.UnsafeFolder, match=r"not a plain file \(mode"):
        safedirs.read_text(base / "fifo")
    with pytest.raises(FileNotFoundError):
        safedirs.read_text(base / "absent.json")


def test_a_safe_folder_is_checked_without_looking_up_a_user(base, monkeypatch):
    """The owner's name is for a refusal's message: looked up for every level of every
    check, it was a user database lookup per level (a fifth of a check's time here, and a
    network round trip where the passwd database is LDAP) in a power replay's thousands of
    checks. /tmp above `base` is sticky and writable by everyone: allowed, no name."""
    looked_up = []

    def getpwuid(uid):
        looked_up.append(uid)
        raise KeyError(uid)

    monkeypatch.setattr(safedirs.pwd, "getpwuid", getpwuid)
    (base / "state").mkdir(mode=0o755)
    assert safedirs.folder_problem(base / "state") is None
    safedirs.ensure_folder(base / "state" / "made", "state_dir")
    assert looked_up == []
    (base / "open").mkdir()
    (base / "open").chmod(0o1777)
    assert safedirs.folder_problem(base / "open").startswith(f"{base}/open is writable by")
    assert looked_up  # (a refusal names the owner)


def test_a_folder_that_is_all_there_is_not_walked_again(base, monkeypatch):
    """A folder whose every level the check found, each root's in a folder no one else may
    write (or sticky), can neither be made nor changed by anyone else: ensure_folder does
    not open it level by level after the check (a power replay ensures its state folder
    at every periodic run). A level missing is still made through descriptors."""
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    (base / "state").mkdir(mode=0o755)
    assert safedirs.ensure_folder(base / "state", "state_dir") == base / "state"
    assert opened == []
    safedirs.ensure_folder(base / "state" / "new", "state_dir")
    assert "new" in opened and (base / "state" / "new").is_dir()
    (base / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        safedirs.ensure_folder(base / "file", "state_dir")


def test_the_plugins_readmes_quote_the_refusal_as_it_is_worded():
    """The plugins' READMEs show a refusal as an admin will read it in a log. They quoted
    each plugin's own wording ('so another user could plant or change the hook's records
    there', 'could replace the features in it') after the four moved to pbsplug.safedirs,
    whose one message is what is printed now."""
    import re

    root = Path(__file__).resolve().parents[1] / "plugins"
    worded = str(safedirs._refused("X", "/f", "/f is owned by uid 1001 (alice), mode 0755"))
    _, tail = worded.split("/f is owned by uid 1001 (alice), mode 0755", 1)
    shown = tail.split(";")[0] + ";"  # ', so another user could plant or change ...;'
    quoted = []
    for readme in sorted(root.glob("*/README.md")):
        text = " ".join(readme.read_text().split())
        for quote in re.findall(r"`(?:\w+: )?(refusing [^`]*)`", text):
            if "another user" in quote:
                quoted.append(readme.parent.name)
                assert shown in quote, (readme, quote)
                assert re.search(r"owned by uid \d+ \(\w+\), mode \d{4},", quote), (readme, quote)
    assert set(quoted) >= {"cpuset", "mjf", "multisched", "power"}


@pytest.mark.usefixtures("needs_root")
def test_a_folder_handed_to_a_user_through_a_descriptor(base):
    """`ensure_folder_owned_by`: the levels above follow the rule and stay root's; the folder
    becomes the user's, with root's plain files in it, never a link's target nor a file with
    another name (a hard link)."""
    top = base / "state"
    folder = top / "power"
    assert safedirs.ensure_folder_owned_by(folder, NOBODY, NOBODY, "the folder") == folder
    assert (top.stat().st_uid, folder.stat().st_uid) == (0, NOBODY)
    assert folder.stat().st_mode & 0o7777 == 0o755
    os.chown(folder, 0, 0)
    (folder / "lock").write_text("")
    target = base / "target"
    target.write_text("")
    os.symlink(target, folder / "link")
    os.link(target, folder / "hard")
    safedirs.ensure_folder_owned_by(folder, NOBODY, NOBODY, "the folder")
    assert folder.stat().st_uid == NOBODY and (folder / "lock").stat().st_uid == NOBODY
    assert target.stat().st_uid == 0  # neither through the link nor the hard link
    os.chown(top, NOBODY, NOBODY)
    with pytest.raises(safedirs.UnsafeFolder, match=rf"^refusing the folder {folder}: {top} "
                                                    rf"is owned by uid {NOBODY}"):
        safedirs.ensure_folder_owned_by(folder, NOBODY, NOBODY, "the folder")


@pytest.mark.usefixtures("needs_root")
def test_a_folder_of_roots_in_use_is_not_given_away(base):
    """Hostile review: `ensure_folder_owned_by` gives away only a folder made for the user. A
    folder of root's that others write in (/tmp: made 0755 and the user's, every user's
    files in it the user's to remove) or that holds a folder of root's (/var/spool: the
    user could rename cron's folder and put its own in its place) is refused, unchanged."""
    shared = base / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    with pytest.raises(safedirs.UnsafeFolder) as refused:
        safedirs.ensure_folder_owned_by(shared, NOBODY, NOBODY, "the folder")
    assert "\n" not in str(refused.value)
    assert "others may write in it" in str(refused.value)
    info = shared.stat()
    assert (info.st_uid, info.st_mode & 0o7777) == (0, 0o1777)
    tree = base / "spool"
    (tree / "cron").mkdir(parents=True)
    (tree / "record").write_text("")
    with pytest.raises(safedirs.UnsafeFolder) as refused:
        safedirs.ensure_folder_owned_by(tree, NOBODY, NOBODY, "the folder")
    assert f"{tree} holds cron, a folder of root's" in str(refused.value)
    assert tree.stat().st_uid == 0 and (tree / "record").stat().st_uid == 0
    (tree / "cron").rmdir()  # root's plain files alone: handed over, as before
    safedirs.ensure_folder_owned_by(tree, NOBODY, NOBODY, "the folder")
    assert tree.stat().st_uid == NOBODY and (tree / "record").stat().st_uid == NOBODY


def _their_record(base):
    """A folder of nobody's in `base` with their ``record.json`` in it: (folder, record)."""
    folder = base / "theirs"
    folder.mkdir()
    os.chown(folder, NOBODY, NOBODY)
    record = folder / "record.json"
    record.write_text("{}")
    os.chown(record, NOBODY, NOBODY)
    return folder, record


@pytest.mark.usefixtures("needs_root")
def test_root_reads_a_folder_of_the_user_it_names_and_nothing_that_user_could_plant(base):
    """Root reading the records a service user's programs keep (`owner=`, kernel API 1.8):
    the folder and its files may be that user's, never writable by others, never a link;
    a file of root's there is not read through another name (a hard link); the levels
    above still follow the rule; and nothing is opened to write."""
    folder, record = _their_record(base)
    with pytest.raises(safedirs.UnsafeFolder):  # without owner=: another user's
        safedirs.check_folder(folder, "state_dir")
    assert safedirs.check_folder(folder, "state_dir", owner=NOBODY) == folder
    assert safedirs.read_text(record, owner=NOBODY) == "{}"
    with pytest.raises(safedirs.UnsafeFolder):
        safedirs.read_text(record)
    with pytest.raises(safedirs.UnsafeFolder, match=rf"owned by uid {NOBODY} "):
        safedirs.read_text(record, owner=1)  # named for another user: not this one's
    with pytest.raises(ValueError, match="read only"):
        safedirs.open_file(record, os.O_WRONLY, owner=NOBODY)
    os.chmod(folder, 0o777)
    with pytest.raises(safedirs.UnsafeFolder) as caught:
        safedirs.check_folder(folder, "state_dir", owner=NOBODY)
    assert str(caught.value) == (
        f"refusing state_dir {folder}: {folder} is writable by everyone (owner uid {NOBODY} "
        "(nobody), mode 0777), so another user could plant or change what is in it; make "
        f"it uid {NOBODY} (nobody)'s and every folder above it root's, each writable by no "
        "one else (a folder above it may be sticky, as /tmp is), or choose another folder")
    os.chmod(folder, 0o755)
    os.chmod(record, 0o666)
    with pytest.raises(safedirs.UnsafeFolder, match="writable by others"):
        safedirs.read_text(record, owner=NOBODY)
    record.unlink()
    secret = base / "root-only"
    secret.write_text("root's")
    os.link(secret, record)  # a file of root's under another name in the user's folder
    with pytest.raises(safedirs.UnsafeFolder, match=r"with other names \(hard links\)"):
        safedirs.read_text(record, owner=NOBODY)
    record.unlink()
    record.symlink_to(secret)
    with pytest.raises(safedirs.UnsafeFolder, match="a link, never followed"):
        safedirs.read_text(record, owner=NOBODY)
    inner = base / "open" / "theirs"  # the level above writable by everyone
    inner.mkdir(parents=True)
    os.chmod(inner.parent, 0o777)
    os.chown(inner, NOBODY, NOBODY)
    with pytest.raises(safedirs.UnsafeFolder, match=rf"{inner.parent} is writable by "):
        safedirs.check_folder(inner, "state_dir", owner=NOBODY)


@pytest.mark.usefixtures("needs_root")
def test_root_reads_through_the_users_folders_level_by_level_never_through_their_links(base):
    """A service user's pbsplug home holds its records two levels down (hooks/tmp), all its
    own: read. A link of that user's on the way (made after a check, to have root read a
    record of root's elsewhere) is never followed, by the path check nor by the read."""
    home = base / "slurmuser"
    records = home / "hooks" / "tmp"
    records.mkdir(parents=True)
    for folder in (home, home / "hooks", records):
        os.chown(folder, NOBODY, NOBODY)
    (records / "r.json").write_text("theirs")
    os.chown(records / "r.json", NOBODY, NOBODY)
    assert safedirs.check_folder(records, "state_dir", owner=NOBODY) == records
    assert safedirs.read_text(records / "r.json", owner=NOBODY) == "theirs"
    elsewhere = base / "root" / "tmp"
    elsewhere.mkdir(parents=True)
    (elsewhere / "r.json").write_text("root's")
    os.rename(home / "hooks", home / "hooks.real")
    os.symlink(base / "root", home / "hooks")
    os.lchown(home / "hooks", NOBODY, NOBODY)
    with pytest.raises(safedirs.UnsafeFolder, match=rf"{home}/hooks is a link owned by uid"):
        safedirs.check_folder(records, "state_dir", owner=NOBODY)
    with pytest.raises(safedirs.UnsafeFolder) as caught:
        safedirs.read_text(records / "r.json", owner=NOBODY)
    assert str(caught.value) == (
        f"refusing {records}/r.json: {home}/hooks is not a folder (a link, or a file) in a "
        f"folder of uid {NOBODY} (nobody)'s, never followed; remove it")


@pytest.mark.usefixtures("needs_root")
def test_root_reads_no_more_of_another_users_file_than_a_record_needs(base):
    """A file of another user's (`owner=`) is theirs to make any size, a sparse one at no
    cost to them: refused past `OTHERS_FILE_MAX` bytes, before it is read."""
    folder, record = _their_record(base)
    os.truncate(record, safedirs.OTHERS_FILE_MAX)
    assert len(safedirs.read_text(record, owner=NOBODY)) == safedirs.OTHERS_FILE_MAX
    os.truncate(record, 1 << 40)
    with pytest.raises(safedirs.UnsafeFolder) as caught:
        safedirs.read_text(record, owner=NOBODY)
    assert str(caught.value) == (
        f"refusing {record}: {1 << 40} bytes, more than the {safedirs.OTHERS_FILE_MAX} read of "
        "a file of another user's; remove it")
