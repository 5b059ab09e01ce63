"""Where a real server runs its hooks, and the site changes it sees (issue 17): every event's
hooks in a forked process unless the site trusts one with ``isolation = "inprocess"``; a
site.toml edited by `pbsplug plugins enable`, by hand or by qmgr is picked up, and one that
became invalid keeps the last good configuration; a hook's hold survives the requeue."""

from __future__ import annotations

from pbsplug.engine.errors import PbsError

from .conftest import until
from .test_server import plugin

WHERE = """
    import os
    from pathlib import Path

    @hookimpl
    def queuejob(event):
        Path({out!r}).write_text(str(os.getpid()))
    """


def test_server_event_hooks_run_in_a_process_unless_the_site_trusts_them(dists, make_engine,
                                                                        engine_root, tmp_path):
    out = tmp_path / "pid"
    site = plugin(dists, "where", WHERE.format(out=str(out)), ("queuejob",))
    engine = make_engine(site)
    server = engine.home.server_pid()
    engine.submit(Job_Name="a", Hold_Types="u")
    assert int(out.read_text()) != server  # a forked child ran it

    # The site opts the hook in: the server picks up the edited file by itself.
    engine.home.site.write_text(site + 'isolation = "inprocess"\n')
    until(lambda: "enabled plugins: where" in engine.log(), what="the reload")
    engine.submit(Job_Name="b", Hold_Types="u")
    assert int(out.read_text()) == server


GATE = """
    @hookimpl
    def queuejob(event):
        event.reject("the gate is closed")
    """


def refused(engine) -> bool:
    try:
        job_id = engine.submit(Hold_Types="u")
    except PbsError as err:
        assert (err.code, err.message) == (15136, "the gate is closed")
        return True
    engine.client("delete", ids=[job_id])
    return False


def test_plugins_enable_reaches_the_running_server_and_a_bad_site_keeps_the_last_good(
        dists, make_engine):
    plugin(dists, "gate", GATE, ("queuejob",))
    engine = make_engine("")
    site = engine.home.site
    assert not refused(engine)

    done = engine.pbs("plugins", "enable", "gate")
    assert (done.returncode, done.stdout) == (
        0, f"plugin 'gate' enabled in {site}; the running server in {engine.root} picks it "
           "up\n")
    until(lambda: refused(engine), what="the server to pick up the enabled plugin")

    # A site.toml that became invalid: logged in one line, the last good one stays.
    site.write_text("[plugins.gate\nenabled = false\n")
    until(lambda: f"site config {site} not loaded" in engine.log(), what="the error")
    lines = [li for li in engine.log().splitlines() if f"site config {site} not" in li]
    assert len(lines) == 1 and "not loaded, the last good one stays in use: " in lines[0]
    assert refused(engine) and engine.pbs("qstat").returncode == 0

    # Fixed: the new one applies.
    site.write_text("[plugins.gate]\nenabled = false\n")
    until(lambda: not refused(engine), what="the fixed site config")

    engine.pbs("server", "stop", check=True)
    done = engine.pbs("plugins", "enable", "gate")
    assert done.stdout == (f"plugin 'gate' enabled in {site}; no server is running in "
                           f"{engine.root}\n")


def test_a_site_config_with_which_a_running_plugin_fails_is_not_loaded(dists, make_engine):
    """A bad hook attribute or configuration value of a plugin the server runs dropped that
    plugin at the reload (its policy silently off: the log said only 'enabled plugins:
    none'); the last good site config now stays, and the log names the plugin's error."""
    plugin(dists, "gate", GATE, ("queuejob",))
    engine = make_engine("[plugins.gate]\nenabled = true\n")
    site = engine.home.site
    assert refused(engine)
    status = engine.pbs("server", "status").stdout
    assert status.rstrip().endswith("; plugins enabled: gate"), status
    site.write_text("[plugins.gate]\nenabled = true\norder = 5000\n")
    until(lambda: f"site config {site} not loaded" in engine.log(), what="the error")
    line = next(li for li in engine.log().splitlines() if f"site config {site} not" in li)
    assert "the last good one stays in use: plugin 'gate'" in line and "order" in line, line
    assert refused(engine)  # still in force
    site.write_text("[plugins.gate]\nenabled = true\norder = 7\n")
    until(lambda: "enabled plugins: gate" in engine.log(), what="the fixed site config")
    assert refused(engine)


def test_a_qmgr_request_sees_the_site_config_as_it_is_now(dists, make_engine):
    plugin(dists, "gate", GATE, ("queuejob",))
    engine = make_engine("[plugins.gate]\nenabled = true\n")
    engine.home.site.write_text("[plugins.gate]\nenabled = true\norder = 7\n")
    listed = engine.pbs("qmgr", "-c", "list hook gate").stdout  # no wait: qmgr reloads it
    assert "    order = 7\n" in listed


HOLD = """
    @hookimpl
    def execjob_begin(event):
        event.job.Hold_Types = "s"
        event.job.rerun()
        event.reject("cpusets are out of order (system hold set)")
    """


def test_a_hooks_system_hold_survives_the_requeue_and_the_node_stays(dists, make_engine):
    """PBS's cgroups hook on an unexpected error: the job held (s), requeued, the node in
    service."""
    engine = make_engine(plugin(dists, "holder", HOLD, ("execjob_begin",),
                                fail_action=("offline_vnodes",)))
    job_id = engine.submit()
    attrs = engine.wait(job_id, "H")
    assert attrs["Hold_Types"] == "s"
    assert attrs["comment"] == ("Job requeued by execjob_begin hook: cpusets are out of "
                                "order (system hold set)")
    assert all("offline" not in n["state"] for n in engine.nodes().values())
