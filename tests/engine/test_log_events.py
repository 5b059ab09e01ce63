"""The server's ``log_events``: the server log writes a line when its event class (the
line's second field) shares a bit with it, as PBS's does; PBS's default 511 leaves out the
reservation lines (0200). It is read when qmgr sets it and when the server starts."""

from __future__ import annotations

import re
import time

from pbsplug.engine.home import LOG_ERROR, LOG_JOB, LOG_RESV, Home, ServerLog


def _resv(engine) -> str:
    """A reservation of one CPU an hour from now: its lines are in the reservation class
    (0200)."""
    when = time.strftime("%d%H%M.%S", time.localtime(time.time() + 3600))
    done = engine.pbs("pbs_rsub", "-R", when, "-D", "600", "-l", "select=1:ncpus=1",
                      check=True)
    return done.stdout.split()[0]


def _classes(engine, name: str) -> set[str]:
    """The event classes of the log lines written against `name`."""
    return {line.split(";")[1] for line in engine.log().splitlines()
            if line.count(";") >= 5 and line.split(";")[4] == name}


def test_the_default_leaves_out_the_reservation_lines(engine):
    shown = engine.pbs("qstat", "-Bf").stdout
    assert "    log_events = 511\n" in shown, shown
    resv_id = _resv(engine)
    job_id = engine.submit("true\n", Resource_List={"walltime": 60})
    engine.wait(job_id)
    assert "0008" in _classes(engine, job_id)
    assert f";{resv_id};" not in engine.log()


def test_what_qmgr_sets_is_what_is_written(engine):
    qmgr = engine.pbs("qmgr", "-c", "set server log_events = 1023", check=True)
    assert qmgr.stdout == ""
    first = _resv(engine)
    assert re.search(rf";0200;Server@[^;]+;Resv;{re.escape(first)};New reservation submitted",
                     engine.log()), engine.log()
    engine.pbs("qmgr", "-c", "set server log_events = 8", check=True)  # jobs' lines only
    second = _resv(engine)
    job_id = engine.submit("true\n", Resource_List={"walltime": 60})
    engine.wait(job_id)
    assert f";{second};" not in engine.log()
    assert _classes(engine, job_id) == {"0008"}
    engine.pbs("qmgr", "-c", "unset server log_events", check=True)  # 511 again
    assert "    log_events = 511\n" in engine.pbs("qstat", "-Bf").stdout
    engine.pbs("pbs_rdel", first, second, check=True)
    job_id = engine.submit("true\n", Resource_List={"walltime": 60})
    engine.wait(job_id)
    assert "0010" in _classes(engine, job_id)  # (the usage line, class job_usage)
    assert f";{first};" in engine.log() and f";{second};" not in engine.log()


def test_a_restarted_server_reads_it(engine):
    engine.pbs("qmgr", "-c", "set server log_events = 0", check=True)
    engine.stop()
    engine.start()
    job_id = engine.submit("true\n", Resource_List={"walltime": 60})
    engine.wait(job_id)
    assert f";{job_id};" not in engine.log()


def test_a_line_of_several_classes_is_written_when_one_of_them_is_asked_for(tmp_path):
    home = Home(tmp_path)
    home.make()
    log = ServerLog(home, "h")
    log.events = LOG_JOB
    log(LOG_JOB | LOG_ERROR, "Job", "1.h", "both")
    log(LOG_ERROR, "Server", "h", "error only")
    log(LOG_RESV, "Resv", "R1.h", "resv")
    log.close()
    text = "".join(p.read_text() for p in home.logs.iterdir())
    assert [line.split(";", 1)[1] for line in text.splitlines()] == ["0009;Server@h;Job;1.h;both"]


def test_what_qmgr_takes(engine):
    """Any integer, as OpenPBS 23.06's log_events (checked: -1, which asks for every class,
    2048, 99999999999 and +5 are taken) up to a C long's (pbsplug's bound); anything else
    is 15014, naming it, and changes nothing (checked: abc, 1.5 and 0x10)."""
    for value, shown in (("-1", "-1"), ("0", "0"), ("2048", "2048"), ("+5", "5"),
                         ("99999999999", "99999999999"), (str(2**63 - 1), str(2**63 - 1))):
        done = engine.pbs("qmgr", "-c", f"set server log_events = {value}")
        assert (done.returncode, done.stderr) == (0, ""), value
        assert f"    log_events = {shown}\n" in engine.pbs("qstat", "-Bf").stdout
    for value in (str(2**63), "abc", "1.5", "0x10", "5x"):
        done = engine.pbs("qmgr", "-c", f"set server log_events = {value}")
        assert (done.returncode, done.stderr) == (15014 % 256, (
            "qmgr obj= svr=default: Illegal attribute or resource value log_events\n"
            "qmgr: Error (15014) returned from server\n")), value
    assert f"    log_events = {2**63 - 1}\n" in engine.pbs("qstat", "-Bf").stdout


def test_a_line_holding_a_lone_surrogate_is_written_escaped_not_lost(tmp_path):
    """A hook's log text may hold lone surrogates (a file name os.fsdecode made of bytes
    that are not UTF-8; JSON's "\\udcff" carries them in its report): the line was lost
    ('1 log lines lost: ... surrogates not allowed')."""
    home = Home(tmp_path)
    home.make()
    log = ServerLog(home, "h")
    log(LOG_ERROR, "Hook", "a", "cannot open " + "caf\udce9")
    log.close()
    text = "".join(p.read_text() for p in home.logs.iterdir())
    assert [line.split(";", 1)[1] for line in text.splitlines()] == [
        "0001;Server@h;Hook;a;cannot open caf\\udce9"]
