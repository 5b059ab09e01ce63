"""A job's output and error files are written on this machine, the engine's one host: a
raw request whose Output_Path or Error_Path names another host is refused (15029), one
naming localhost or this host's name is written here (docs/engine.md, departures)."""

from __future__ import annotations

import pytest

from pbsplug.engine.errors import PbsError


@pytest.mark.parametrize("attr", ["Output_Path", "Error_Path"])
def test_a_path_on_another_host_is_refused_at_submit_and_alter(engine, attr):
    with pytest.raises(PbsError) as err:
        engine.client("submit", attrs={attr: "elsewhere:/tmp/x", "Hold_Types": "u"},
                      script="true\n")
    assert (err.value.code, err.value.message) == (
        15029, f"No support for requested service {attr}: elsewhere is not this host")
    job_id = engine.client("submit", attrs={"Hold_Types": "u"}, script="true\n")
    with pytest.raises(PbsError) as err:
        engine.client("alter", id=job_id, attrs={attr: "elsewhere:/tmp/x"})
    assert err.value.code == 15029
    engine.client("alter", id=job_id, attrs={attr: "LOCALHOST:/tmp/x"})
    assert engine.job(job_id)[attr] == "LOCALHOST:/tmp/x"


def test_a_path_on_localhost_is_written_here(engine):
    out = engine.work / "local.out"
    job_id = engine.client("submit", attrs={"Output_Path": f"localhost:{out}"},
                           argv=["/bin/echo", "here"])
    assert engine.wait(job_id)["Exit_status"] == 0
    assert out.read_text() == "here\n"
