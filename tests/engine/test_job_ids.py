"""Job identifiers in every form PBS's commands take (``12``, ``12.server``, ``12@server``,
``12.server@server``), for every job command, as OpenPBS 23.06 answers them (checked:
tests/adapters/test_pbs_job_parity.py)."""

from __future__ import annotations

import pytest

from pbsplug.engine import jobid

#: A host name that never resolves (RFC 2606).
NO_HOST = "nosuchhost.invalid"


def _held(engine) -> str:
    done = engine.pbs("qsub", "-h", "--", "/bin/true")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_jobid_reads_each_form_of_this_servers_ids():
    assert jobid.full_id("12", "vm") == "12.vm"
    for text in ("12.vm", "12@vm", "12.vm@vm", "12@VM", "12.VM", "12.vm.example.org@vm"):
        expected = None if "example" in text else "12.vm"
        assert jobid.full_id(text, "vm") == expected, text
    assert jobid.full_id("12.vm.example.org", "vm", ["vm", "vm.example.org"]) == "12.vm"
    for text in ("abc", "12.other", "12@other", "1@vm@vm", "12.", "12@"):
        assert jobid.full_id(text, "vm") is None, text


def test_every_job_command_takes_an_id_at_this_server(engine):
    server = engine.client("status")["server"]
    job_id = _held(engine)
    seq = job_id.split(".")[0]
    for form in (f"{seq}@{server}", f"{seq}.{server}@{server}", f"{seq}@{server.upper()}"):
        done = engine.pbs("qstat", form)
        assert (done.returncode, done.stderr) == (0, ""), form
        assert done.stdout.splitlines()[2].startswith(f"{seq}.{server} ")
    for argv in (("qhold", "-h", "o", f"{seq}.{server}@{server}"),
                 ("qrls", "-h", "o", f"{seq}@{server}"),
                 ("qalter", "-N", "renamed", f"{seq}@{server}"),
                 ("qmove", "workq", f"{seq}@{server}")):
        done = engine.pbs(*argv)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), argv
    assert engine.job(job_id)["Job_Name"] == "renamed"
    done = engine.pbs("qdel", f"{seq}@{server}")
    assert (done.returncode, done.stderr) == (0, "")
    done = engine.pbs("qstat", "-x", f"{seq}@{server}")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[2].split()[-2:] == ["F", "workq"]


def test_an_unknown_job_at_this_server_is_named_by_its_full_id(engine):
    server = engine.client("status")["server"]
    for command in ("qstat", "qhold", "qrls", "qrerun"):
        done = engine.pbs(command, f"99999@{server}")
        assert (done.returncode, done.stderr) == (
            153, f"{command}: Unknown Job Id 99999.{server}\n"), command
    done = engine.pbs("qrun", f"99999.{server}@{server}")
    assert (done.returncode, done.stderr) == (2, f"qrun: Unknown Job Id 99999.{server}\n")
    # qdel names a job as it was given, as PBS's does
    done = engine.pbs("qdel", f"99999@{server}")
    assert (done.returncode, done.stderr) == (153, f"qdel: Unknown Job Id 99999@{server}\n")


@pytest.mark.parametrize("argv", [("qstat",), ("qdel",), ("qhold",), ("qrls",),
                                  ("qalter", "-N", "x"), ("qrun",), ("qrerun",),
                                  ("qmove", "workq")])
def test_an_id_naming_another_server_after_its_dot_is_illegally_formed(engine, argv):
    job_id = _held(engine)
    seq = job_id.split(".")[0]
    done = engine.pbs(*argv, f"{seq}.other")
    assert (done.returncode, done.stderr) == (
        1, f"{argv[0]}: illegally formed job identifier: {seq}.other\n")
    assert engine.job(job_id)["job_state"] == "H"


def test_an_id_at_a_server_that_does_not_resolve(engine):
    """Each command's words and exit status, as OpenPBS 23.06's (checked; its qhold, qrls,
    qalter, qmove and qrerun cut the host's name to 7 characters)."""
    server = engine.client("status")["server"]
    expected = {
        "qstat": (255, f"qstat: cannot connect to server {server} (errno=15008)"),
        "qdel": (160, f"Couldn't connect to cluster: {NO_HOST}"),
        "qrun": (2, f"qrun: could not connect to server {NO_HOST} (15008)"),
        "qhold": (160, f"qhold: cannot connect to server {NO_HOST} (errno=15008)"),
        "qrerun": (160, f"qrerun: cannot connect to server {NO_HOST} (errno=15008)"),
    }
    for command, (status, line) in expected.items():
        done = engine.pbs(command, f"1@{NO_HOST}")
        assert (done.returncode, done.stderr) == (status, f"Unknown Host.\n{line}\n"), command
    done = engine.pbs("qalter", "-N", "x", f"1.{server}@{NO_HOST}")
    assert (done.returncode, done.stderr) == (
        160, f"Unknown Host.\nqalter: cannot connect to server {NO_HOST} (errno=15008)\n")
