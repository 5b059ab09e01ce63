"""Attacks on the file system through the local engine, made as an unprivileged local user
(`attacker`): whatever the server does for a user it does as that user, never through a link
the user planted, and the server's own files are private (issue 17).

Each test checks that nothing outside the attacker's rights changed (no file made, no owner,
mode or content changed), that other users' jobs are intact and that the server answers.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from pbsplug.testing import until

from .conftest import qsub

NOTE = b"pbsplug: the job could not start"


def state_of(path: Path) -> tuple | None:
    """What an attack must not change: type, owner, mode, content (None: absent)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    content = b""
    if stat.S_ISREG(st.st_mode):
        content = hashlib.sha256(path.read_bytes()).digest()
    elif stat.S_ISLNK(st.st_mode):
        content = os.readlink(path).encode()
    return stat.S_IFMT(st.st_mode), st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), content


@pytest.fixture
def root_dir(engine) -> Path:
    """A folder only root may write, with a file in it: where an attacker must not write
    (as /etc is; the attacker can reach it)."""
    folder = engine.root / "rootonly"
    folder.mkdir()
    folder.chmod(0o755)
    (folder / "precious").write_text("root's own data\n")
    (folder / "precious").chmod(0o644)
    return folder


def bystander(engine) -> str:
    """Another user's (root's) job, running through the attack."""
    job_id = engine.submit("sleep 300\n", Job_Name="bystander")
    until(lambda: engine.job(job_id)["job_state"] == "R", what="the bystander to run")
    return job_id


def assert_intact(engine, bystander_id: str) -> None:
    """The server answers and the other user's job still runs, untouched."""
    attrs = engine.job(bystander_id)
    assert attrs["job_state"] == "R" and attrs["euser"] == "root"
    assert engine.pbs("qstat").returncode == 0


def test_an_error_path_in_a_root_folder_is_never_made_by_root(engine, attacker, root_dir):
    """`qsub -e /etc/nologin -- /bin/true` made a root-owned /etc/nologin: the shepherd, still
    root, appended its start-failure note to the user's -e path."""
    other = bystander(engine)
    target = root_dir / "nologin"
    before = state_of(root_dir)
    job_id = qsub(attacker, engine, "-e", str(target), "--", "/bin/true")
    attrs = engine.wait(job_id)
    assert not target.exists() and not os.path.lexists(target)
    assert state_of(root_dir) == before
    assert attrs["Exit_status"] == -1
    assert attrs["comment"].startswith("Job could not start: cannot open its output")
    assert str(target) in attrs["comment"]
    assert_intact(engine, other)


def test_the_error_path_cannot_append_to_the_servers_database(engine, attacker):
    """`-e $PBSPLUG_HOME/server.db` appended the failure note to the database."""
    other = bystander(engine)
    db = engine.home.db
    before = db.stat()
    job_id = qsub(attacker, engine, "-e", str(db), "--", "/bin/true")
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == -1 and "Permission" in attrs["comment"]
    after = db.stat()
    assert (after.st_uid, stat.S_IMODE(after.st_mode)) == (before.st_uid, 0o600)
    assert NOTE not in db.read_bytes()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert_intact(engine, other)


def test_a_symlink_at_the_next_tmpdir_cannot_hand_its_target_to_the_user(engine, attacker,
                                                                        root_dir):
    """tmp/ was 1777 and the TMPDIR was made with mkdir(exist_ok) then chown'd through
    links: a link planted at tmp/pbs.<next id> gave its target to the user."""
    other = bystander(engine)
    seq = int(other.split(".")[0]) + 1
    server = other.split(".", 1)[1]
    planted = engine.home.tmp / f"pbs.{seq}.{server}"
    tried = attacker.python("import os, sys\ntry:\n    os.symlink(sys.argv[1], sys.argv[2])\n"
                            "except PermissionError:\n    print('refused')\n",
                            str(root_dir), str(planted), home=engine)
    assert tried.stdout.strip() == "refused", tried.stderr
    assert not os.path.lexists(planted)
    # A link left from before tmp/ was closed (planted here as root) is removed, not used.
    os.symlink(root_dir, planted)
    before = state_of(root_dir), state_of(root_dir / "precious")
    job_id = qsub(attacker, engine, "--", "/bin/sh", "-c",
                  'stat -c "%U %a" "$TMPDIR"; touch "$TMPDIR/mine"; chmod 777 "$TMPDIR"')
    assert job_id == f"{seq}.{server}"
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    out = engine.work / f"STDIN.o{seq}"
    assert out.read_text().split() == [attacker.user, "700"]
    assert (state_of(root_dir), state_of(root_dir / "precious")) == before
    assert not (root_dir / "mine").exists()
    assert not os.path.lexists(planted)  # removed at the job's end, without following links
    assert_intact(engine, other)


def test_output_to_another_users_file_or_a_link_to_it_is_refused(engine, attacker, root_dir):
    """-o at root's file, or at a link to it the attacker made: opened as the attacker, and
    never through a link."""
    other = bystander(engine)
    precious = root_dir / "precious"
    link = engine.work / "innocent.out"
    made = attacker.python("import os, sys; os.symlink(sys.argv[1], sys.argv[2])",
                           str(precious), str(link), home=engine)
    assert made.returncode == 0, made.stderr
    before = state_of(precious)
    direct = qsub(attacker, engine, "-o", str(precious), "--", "/bin/echo", "overwritten")
    linked = qsub(attacker, engine, "-o", str(link), "-j", "oe", "--", "/bin/echo", "through")
    assert engine.wait(direct)["Exit_status"] == -1
    assert "Permission denied" in engine.job(direct)["comment"]
    assert engine.wait(linked)["Exit_status"] == -1
    assert "symbolic link" in engine.job(linked)["comment"]
    assert state_of(precious) == before
    assert_intact(engine, other)


def test_a_link_planted_at_another_users_output_name_is_not_followed(engine, attacker,
                                                                     root_dir):
    """The attacker plants a link where root's next job writes its output: root's job must
    not write through it (it fails to start, saying why)."""
    other = bystander(engine)
    seq = int(other.split(".")[0]) + 1
    precious = root_dir / "precious"
    made = attacker.python("import os, sys; os.symlink(sys.argv[1], sys.argv[2])",
                           str(precious), str(engine.work / f"victim.o{seq}"), home=engine)
    assert made.returncode == 0, made.stderr
    before = state_of(precious)
    job_id = engine.submit("echo clobbered\n", Job_Name="victim")
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == -1 and "symbolic link" in attrs["comment"]
    assert state_of(precious) == before
    assert_intact(engine, other)


def test_the_servers_files_and_other_users_jobs_cannot_be_read(engine, attacker):
    """server.db, its WAL, server_logs, jobs/ and <seq>.SC were world-readable, and job
    output files 0644: every job script and -V environment was open to all."""
    secret = "echo root-secret-output\nsleep 300\n"
    other = engine.submit(secret, Job_Name="secret")
    until(lambda: engine.job(other)["job_state"] == "R", what="root's job to run")
    seq = other.split(".")[0]
    out = engine.work / f"secret.o{seq}"
    until(lambda: out.exists(), what="root's output file")
    assert engine.home.db.with_name("server.db-wal").exists()
    probe = (
        "import os, sys\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        if os.path.isdir(path):\n"
        "            os.listdir(path)\n"
        "        else:\n"
        "            open(path, 'rb').read(1)\n"
        "        print('READ', path)\n"
        "    except PermissionError:\n"
        "        print('refused', path)\n")
    logs = sorted(engine.home.logs.iterdir())
    targets = [engine.home.db, engine.home.db.with_name("server.db-wal"), engine.home.logs,
               *logs, engine.home.jobs, engine.home.jobs / f"{seq}.SC",
               engine.home.jobs / f"{seq}.nodes", engine.home.tmp, out]
    seen = attacker.python(probe, *map(str, targets), home=engine)
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.split("\n")[:-1] == [f"refused {t}" for t in targets]
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    # What users need is still open: the socket, and their own job's script and nodefile.
    mine = qsub(attacker, engine, "-j", "oe", "--", "/bin/sh", "-c",
                'cat "$PBS_NODEFILE" && test -r "$PBS_NODEFILE" && echo nodefile ok')
    assert engine.wait(mine)["Exit_status"] == 0
    script = attacker.pbs(engine, "qsub", "-N", "scripted", cwd=engine.work,
                          input="#!/bin/sh\necho script ok\n")
    assert script.returncode == 0, script.stderr
    assert engine.wait(script.stdout.strip())["Exit_status"] == 0
    assert (engine.work / f"scripted.o{script.stdout.split('.')[0]}").read_text() == (
        "script ok\n")
    assert_intact(engine, other)


def test_a_link_to_a_folder_planted_at_another_users_output_name_is_not_followed(
        engine, attacker, root_dir):
    """A link to a folder, planted where root's next job writes its output, was taken for
    the folder (``os.path.isdir`` follows links) and root's job wrote `<name>.o<seq>` in its
    target, a folder only root may write. The same link at a running job's output name led
    qmsg's line there too, into a file of root's of that name."""
    other = bystander(engine)
    seq = int(other.split(".")[0]) + 1
    made = attacker.python("import os, sys; os.symlink(sys.argv[1], sys.argv[2])",
                           str(root_dir), str(engine.work / f"victim.o{seq}"), home=engine)
    assert made.returncode == 0, made.stderr
    before = state_of(root_dir)
    job_id = engine.submit("echo clobbered\n", Job_Name="victim")
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == -1 and "symbolic link" in attrs["comment"]
    assert state_of(root_dir) == before and not (root_dir / f"victim.o{seq}").exists()
    # qmsg to a running job of root's whose output name the attacker swapped for such a link
    running = engine.submit("sleep 300\n", Job_Name="talker")
    until(lambda: engine.job(running)["job_state"] == "R", what="root's job to run")
    seq = running.split(".")[0]
    out = engine.work / f"talker.o{seq}"
    until(out.exists, what="root's output file")
    out.unlink()  # (as the attacker would in a sticky folder of theirs; here root does it)
    os.symlink(root_dir, out)
    os.lchown(out, attacker.uid, attacker.gid)
    (root_dir / f"talker.o{seq}").write_text("root's own log\n")
    before = state_of(root_dir / f"talker.o{seq}")
    said = engine.pbs("qmsg", "-O", "through the link", running)
    assert said.returncode != 0 and "symbolic link" in said.stderr, said
    assert state_of(root_dir / f"talker.o{seq}") == before
    assert_intact(engine, other)


def test_a_file_planted_at_another_users_output_name_is_not_written(engine, attacker):
    """The attacker makes a file of its own, open to all, where root's next job writes its
    output: root's job wrote its output into it (opened O_CREAT|O_TRUNC, which takes the
    file that is there), and the attacker read it; the output's 0600 was the attacker's
    0666. The job fails to start, saying why, and the file is left as it was."""
    other = bystander(engine)
    seq = int(other.split(".")[0]) + 1
    planted = engine.work / f"victim.o{seq}"
    made = attacker.python("import os, sys\nfd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT"
                           " | os.O_EXCL, 0o666)\nos.write(fd, b'mine\\n')\nos.fchmod(fd, 0o666)",
                           str(planted), home=engine)
    assert made.returncode == 0, made.stderr
    before = state_of(planted)
    job_id = engine.submit("echo root-secret\n", Job_Name="victim")
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == -1, attrs.get("comment")
    assert "is another user's file" in attrs["comment"] and "\n" not in attrs["comment"]
    assert state_of(planted) == before
    seen = attacker.python("import sys; print(open(sys.argv[1]).read(), end='')",
                           str(planted), home=engine)
    assert seen.stdout == "mine\n"
    assert_intact(engine, other)


def test_a_hard_link_at_another_users_output_name_is_not_written(engine, root_dir):
    """A hard link to a file of root's, at root's next job's default output name: where
    fs.protected_hardlinks is 0 (its default in the kernel itself, and in some containers)
    any user may make one to any file, /etc/shadow too, and root's job truncated it and
    wrote its output into it (the file is root's, so `check_output_file` took it as root's
    job's own). Made here by root as the attacker would make it there. The job fails to
    start, saying why, and the file is left as it was."""
    other = bystander(engine)
    seq = int(other.split(".")[0]) + 1
    planted = engine.work / f"victim.o{seq}"
    os.link(root_dir / "precious", planted)
    before = state_of(root_dir / "precious")
    job_id = engine.submit("echo clobbered\n", Job_Name="victim")
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == -1, attrs.get("comment")
    assert "hard link" in attrs["comment"] and "\n" not in attrs["comment"]
    assert state_of(root_dir / "precious") == before
    assert_intact(engine, other)
