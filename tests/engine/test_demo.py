"""`pbsplug demo` (the README's `make demo`): real jobs, the installed plugins at work, and
nothing left behind."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from rich.console import Console

from pbsplug import PluginInfo, Setting, hookimpl
from pbsplug.engine.demo import PluginDemo
from pbsplug.engine.home import Home

from .conftest import PBSPLUG

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib
from .test_server import plugin


def demo_home(out: str) -> str:
    """The demo's home, as its first line names it."""
    match = re.match(r"pbsplug demo in (/tmp/pbsplug-demo-\w+)\n", out)
    assert match, out
    return match.group(1)


def test_the_demo_runs_every_job_with_the_installed_plugins_and_cleans_up(dists, tmp_path):
    plugin(dists, "counter", """
        import os
        from pbsplug.siteconfig import default_home

        @hookimpl
        def queuejob(event):
            event.job.Account_Name = "demo"
            with open(os.environ["HOME_SEEN"], "a") as seen:
                seen.write(f"{default_home()}\\n")

        @hookimpl
        def execjob_begin(event):
            pass

        @hookimpl
        def demo_setup(workdir):
            (workdir / "started").write_text("yes")
            return {"order": 7}

        @hookimpl
        def demo_report(workdir):
            return [f"setup left {(workdir / 'started').read_text()} in {workdir.name}"]
        """, ("queuejob", "execjob_begin"))
    seen = tmp_path / "homes"
    done = subprocess.run([PBSPLUG, "demo"], capture_output=True, text=True,
                          env=dists.env(COLUMNS="200", HOME_SEEN=str(seen)), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    # the server's plugins find their default folders under the demo's home, not the
    # caller's (root's /var/spool/pbsplug)
    homes = set(seen.read_text().splitlines())
    assert len(homes) == 1 and homes.pop().startswith("/tmp/pbsplug-demo-"), seen.read_text()
    assert "plugins enabled: counter" in out
    assert "counter: setup left yes in counter\n" in out  # demo_setup, then demo_report
    for name, status in (("hello", "0"), ("vscatter", "0"), ("overtime", "-29"),
                         ("fails", "3"), ("held", "0"), ("deleted", "271")):
        rows = [line for line in out.splitlines() if line.startswith(f"│ {name} ")]
        assert rows and all(f"│ {status} " in row for row in rows), (name, rows)
    assert "walltime" in out and "exceeded limit 00:00:02" in out
    # the summary's hook runs: 10 submissions through queuejob, 10 starts through begin
    assert any("counter" in line and "queuejob" in line and " 10 " in line
               for line in out.splitlines()), out
    assert any("counter" in line and "execjob_begin" in line for line in out.splitlines())
    # its home is gone, and no server or job of it is left running (its own: another
    # test's demo may run beside it)
    root = demo_home(out)
    assert not os.path.lexists(root)
    leftover = subprocess.run(["pgrep", "-f", root], capture_output=True)
    assert leftover.stdout == b""


class Shows:
    """A plugin with a configuration key, shown in the demo."""

    plugin_info = PluginInfo(events=("queuejob",), config={"target": Setting(str, "none")})

    def __init__(self):
        self.calls = []

    @hookimpl
    def queuejob(self, event):
        pass

    @hookimpl
    def demo_setup(self, workdir):
        self.calls.append(("setup", workdir.name, workdir.is_dir()))
        return {"order": 7, "config": {"target": f"{workdir}/service.sock"}}

    @hookimpl
    def demo_report(self, workdir):
        self.calls.append(("report", workdir.name))
        return ["stopped the stand-in", "saw 3 requests"]


class Broken:
    @hookimpl
    def demo_setup(self, workdir):
        raise RuntimeError("no stand-in here")

    @hookimpl
    def demo_report(self, workdir):
        raise AssertionError("never called: its setup failed")


@pytest.fixture
def shown(tmp_path, register_plugin, pbsplug_plugins):
    """A `PluginDemo` over `Shows` and `Broken`: (demo, home, its printed text, Shows)."""
    shows = Shows()
    register_plugin(shows, "shows")
    register_plugin(Broken(), "broken")
    home = Home(tmp_path / "home")
    home.make()
    home.site.write_text("# the demo's site\n[plugins.shows]\nenabled = true\n")
    out = io.StringIO()
    demo = PluginDemo(home, tmp_path / "plugins", Console(file=out, width=200),
                      plugins=pbsplug_plugins)
    return demo, home, out, shows


def test_hook_demo_setup_settings_go_into_the_demo_site_config(tmp_path, shown):
    demo, home, out, shows = shown
    demo.setup()
    site = tomllib.loads(home.site.read_text())
    assert site["plugins"]["shows"] == {
        "enabled": True, "order": 7,
        "config": {"target": f"{tmp_path}/plugins/shows/service.sock"}}
    assert "broken" not in site["plugins"]  # its setup failed: its defaults stand
    assert home.site.read_text().startswith("# the demo's site\n")  # the file is edited
    assert "broken: demo_setup failed: no stand-in here" in out.getvalue()
    assert shows.calls == [("setup", "shows", True)]


def test_hook_demo_report_lines_reach_the_summary_once(shown):
    demo, home, out, shows = shown
    demo.setup()
    demo.report()
    demo.report()  # the demo calls it again on its way out: nothing happens twice
    assert out.getvalue().splitlines()[-2:] == ["shows: stopped the stand-in",
                                                "shows: saw 3 requests"]
    assert shows.calls == [("setup", "shows", True), ("report", "shows")]


class Wrong:
    """Answers the demo hooks with what they do not take."""

    @hookimpl
    def demo_setup(self, workdir):
        return ["not", "a", "table"]

    @hookimpl
    def demo_report(self, workdir):
        return 3


def test_a_plugin_answering_the_demo_hooks_wrongly_stops_no_other(tmp_path, register_plugin,
                                                                   pbsplug_plugins):
    register_plugin(Wrong(), "wrong")  # (set up and reported before the plugin after it)
    shows = Shows()
    register_plugin(shows, "shows")
    home = Home(tmp_path / "home")
    home.make()
    home.site.write_text("[plugins.shows]\nenabled = true\n")
    out = io.StringIO()
    demo = PluginDemo(home, tmp_path / "plugins", Console(file=out, width=200),
                      plugins=pbsplug_plugins)
    demo.setup()
    assert "wrong: demo_setup returned list, expected a table of settings or None" in (
        out.getvalue())
    site = tomllib.loads(home.site.read_text())
    assert "wrong" not in site["plugins"] and site["plugins"]["shows"]["order"] == 7
    demo.report()
    assert "wrong: demo_report returned int, expected a list of lines or None" in (
        out.getvalue())
    assert shows.calls == [("setup", "shows", True), ("report", "shows")]
