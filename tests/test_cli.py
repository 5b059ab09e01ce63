"""The ``pbsplug`` command line, run as a real process against really installed plugins.

Every test installs plugin distributions (`dists`), writes a site config in a fresh pbsplug
home (`home`) and runs the ``pbsplug`` console script (`cli`). Plugin modules write a marker
file when they are imported, so a test can tell which plugins a command imported.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shlex
import socket
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import pbsplug

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: Prepended to every plugin module: record that it was imported.
MARK = '''\
import os as _os
if _os.environ.get("CLI_TEST_MARKS"):
    open(_os.path.join(_os.environ["CLI_TEST_MARKS"], __name__), "w").close()
'''

QUEUEJOB = """
from pbsplug import hookimpl

@hookimpl
def queuejob(event):
    pass
"""

#: The repository's own plugins (plugins/*), which `make test` installs into the venv: every
#: command sees them beside a test's distributions, so listings leave them out.
PACKAGED = frozenset(ep.name for ep in importlib.metadata.entry_points(group="pbsplug"))
BUILTIN_GROUPS = ("plugins", "hooks", "config", "event", "hook", "plugin")


def install(dists, name: str, source: str = QUEUEJOB, **kw) -> None:
    """Install plugin `name` (module ``pbsplug_<name>``) with the import marker."""
    dists.add(name, MARK + textwrap.dedent(source), **kw)


@pytest.fixture
def marks(tmp_path) -> Path:
    path = tmp_path / "marks"
    path.mkdir()
    return path


@pytest.fixture
def run(cli, marks):
    """conftest's `cli` (the real ``pbsplug`` script, this test's distributions and home),
    with the import markers switched on."""

    def go(*args: str, input: str | None = None, **env: str):
        return cli(*args, input=input, **{"CLI_TEST_MARKS": str(marks), **env})

    return go


def imported(marks: Path) -> set[str]:
    return {p.name.removeprefix("pbsplug_") for p in marks.iterdir()}


def write_site(home: Path, text: str) -> Path:
    path = home / "site.toml"
    path.write_text(textwrap.dedent(text))
    return path


def error_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("pbsplug: error:")]


def one_line_error(result) -> str:
    """The command failed with exit 2 and exactly one error line, without a traceback."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    return lines[0]


def table(stdout: str) -> dict[str, list[str]]:
    """``plugins list`` rows by plugin name: [name, dist, version, status, hooks, error...]."""
    lines = stdout.splitlines()
    assert lines and lines[0].split()[:4] == ["NAME", "DISTRIBUTION", "VERSION", "STATUS"], stdout
    return {line.split()[0]: line.split() for line in lines[1:]
            if line.strip() and line.split()[0] not in PACKAGED}


def as_json(result):
    """``plugins list --json`` records, without the repository's own plugins."""
    assert not result.stdout.startswith("Traceback"), result.stderr
    data = json.loads(result.stdout)
    if isinstance(data, list):
        return [r for r in data if not (isinstance(r, dict) and r.get("name") in PACKAGED)]
    return data


def installed(*names: str) -> str:
    """The installed list an error names: a test's plugins and the repository's own."""
    return ", ".join(sorted(set(names) | PACKAGED))


# =============================================================================================
# --version, --help
# =============================================================================================

def test_version_and_help_import_no_plugin(dists, home, run, marks):
    install(dists, "alpha")
    install(dists, "beta")
    install(dists, "broken", "raise RuntimeError('kaboom')\n")
    write_site(home, "enable_all_installed = true\n")

    for args in (["--version"], ["-V"], ["--site", str(home / "site.toml"), "--version"]):
        result = run(*args)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"pbsplug {pbsplug.__version__}"
        assert result.stderr == ""
    result = run("--help")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    commands = result.stdout.split("Commands:", 1)[1]
    for group in BUILTIN_GROUPS:
        assert f"\n  {group} " in commands, result.stdout
    assert "Installed plugins" in result.stdout
    for name in ("alpha", "beta", "broken"):
        assert name in result.stdout.split("Installed plugins", 1)[1]
    assert imported(marks) == set()

    # The markers do work: a command that loads the plugins imports them.
    assert run("plugins", "list").returncode == 0
    assert imported(marks) == {"alpha", "beta", "broken"}


def test_help_without_plugins(monkeypatch):
    from pbsplug.cli import commands

    monkeypatch.setattr(commands, "installed_entry_points", lambda: [])
    assert commands._epilog() == "No plugin is installed."


def test_help_lists_the_installed_plugins(run):
    result = run("--help")
    assert result.returncode == 0
    listed = result.stdout.split("Installed plugins", 1)[1].split(":", 1)[1]
    assert listed.replace(",", " ").split() == sorted(PACKAGED)


def test_pbs_commands_run_without_typer_or_the_kernel(dists, home, run):
    """``pbsplug qsub`` and the other PBS commands skip typer, the kernel and requests,
    which is most of a command's start-up; ``--help`` still lists them."""
    from pbsplug.cli.pbs import COMMANDS

    heavy = ("typer", "pydantic", "requests", "pbsplug.plugins", "pbsplug.engine.server")
    code = ("import sys\nfrom pbsplug.cli import main\nstatus = main(['qstat'])\n"
            f"print(status, [m for m in {heavy!r} if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dists.env(PBSPLUG_HOME=str(home)), timeout=60)
    # (no server runs: the reason, then OpenPBS 23.06's line and exit status)
    assert result.stdout.split(" ", 1) == ["255", "[]\n"], result.stderr
    host = socket.gethostname().split(".")[0]
    assert result.stderr == f"qstat: no server runs in {home} (start one with " \
                            "`pbsplug server start`)\n" \
                            f"qstat: cannot connect to server {host} (errno=15010)\n"
    listed = run("--help").stdout.split("Commands:", 1)[1]
    assert [name for name in COMMANDS if f"\n  {name} " not in listed] == []


# =============================================================================================
# plugins list
# =============================================================================================

@pytest.mark.parametrize("failure,error", [
    ("raise RuntimeError('kaboom')", "import failed: RuntimeError: kaboom"),
    ("import sys\nsys.exit(3)", "import failed: SystemExit: 3"),
    ("import pbsplug_does_not_exist", "import failed: ModuleNotFoundError"),
])
def test_plugins_list_survives_a_plugin_that_fails_to_import(dists, home, run, failure, error):
    install(dists, "alpha")
    install(dists, "broken", failure + "\n", version="2.5")
    install(dists, "zeta")
    write_site(home, """
        [plugins.broken]
        enabled = true
        [plugins.alpha]
        enabled = true
    """)
    result = run("plugins", "list")
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    assert set(rows) == {"alpha", "broken", "zeta"}
    assert rows["broken"][1:4] == ["pbsplug-broken", "2.5", "failed"]
    assert error in " ".join(rows["broken"][4:])
    assert rows["alpha"][3:5] == ["enabled", "queuejob"]
    assert rows["zeta"][3] == "disabled"
    # The failure message: plugin, distribution and version, the error, how to disable it.
    message = next(line for line in result.stderr.splitlines() if "'broken'" in line)
    assert "plugin 'broken' pbsplug-broken 2.5 failed: " + error in message
    assert "pbsplug plugins disable broken" in message
    assert "PBSPLUG_DISABLE_PLUGINS=broken" in message


def test_disable_a_broken_plugin_then_list_shows_it_disabled(dists, home, run, marks):
    install(dists, "alpha")
    install(dists, "broken", "raise RuntimeError('kaboom')\n")
    site = write_site(home, "[plugins.broken]\nenabled = true\n[plugins.alpha]\nenabled = true\n")
    assert run("plugins", "list").returncode == 0
    assert "broken" in imported(marks)

    # Even in strict mode, where loading the broken plugin is fatal, disable works.
    result = run("plugins", "disable", "broken", PBSPLUG_STRICT_PLUGINS="1")
    assert result.returncode == 0, result.stderr
    assert "plugin 'broken' disabled" in result.stdout
    data = tomllib.loads(site.read_text())
    assert data["plugins"]["broken"]["enabled"] is False
    assert data["plugins"]["alpha"]["enabled"] is True

    for entry in marks.iterdir():
        entry.unlink()
    result = run("plugins", "list", PBSPLUG_STRICT_PLUGINS="1")
    assert result.returncode == 0, result.stderr
    assert table(result.stdout)["broken"][3] == "disabled"
    assert "kaboom" not in result.stdout + result.stderr
    assert imported(marks) == {"alpha"}


def test_plugins_list_json_and_statuses(dists, home, run, marks):
    install(dists, "on", version="2.3")
    install(dists, "off", """
        from pbsplug import hookimpl
        @hookimpl
        def queuejob(event):
            pass
        @hookimpl
        def execjob_begin(event):
            pass
    """)
    install(dists, "denied")
    install(dists, "bad", "raise ValueError('no good')\n")
    write_site(home, """
        [plugins.on]
        enabled = true
        [plugins.denied]
        enabled = true
        [plugins.bad]
        enabled = true
    """)
    result = run("plugins", "list", "--json", PBSPLUG_DISABLE_PLUGINS="denied")
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in as_json(result)}
    assert set(records) == {"on", "off", "denied", "bad"}
    for record in records.values():
        assert {"name", "distribution", "version", "status", "hooks", "error"} <= set(record)
    assert records["on"]["distribution"] == "pbsplug-on"
    assert records["on"]["version"] == "2.3"
    assert records["on"]["status"] == "enabled"
    assert records["on"]["hooks"] == ["queuejob"]
    assert records["on"]["error"] is None
    assert records["off"]["status"] == "disabled" and records["off"]["hooks"] == []
    assert records["denied"]["status"] == "blocked"
    assert "PBSPLUG_DISABLE_PLUGINS" in records["denied"]["error"]
    assert records["bad"]["status"] == "failed"
    assert "ValueError: no good" in records["bad"]["error"]
    assert imported(marks) == {"on", "bad"}

    # --all imports the disabled plugin too, to show its hooks; the blocked one stays out.
    result = run("plugins", "list", "--all", "--json", PBSPLUG_DISABLE_PLUGINS="denied")
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in as_json(result)}
    assert records["off"]["status"] == "disabled"
    assert records["off"]["hooks"] == ["execjob_begin", "queuejob"]
    assert records["denied"]["status"] == "blocked"
    assert imported(marks) == {"on", "bad", "off"}

    result = run("plugins", "list", "--all", PBSPLUG_DISABLE_PLUGINS="denied")
    rows = table(result.stdout)
    assert rows["off"][3:5] == ["disabled", "execjob_begin,queuejob"]
    assert rows["denied"][3] == "blocked"


def test_allowlist_blocks_every_other_plugin_and_empty_means_none(dists, home, run, marks):
    for name in ("alpha", "beta", "gamma"):
        install(dists, name)
    write_site(home, "enable_all_installed = true\n")
    result = run("plugins", "list", "--all", "--json", PBSPLUG_LOAD_PLUGINS="alpha,gamma",
                 PBSPLUG_DISABLE_PLUGINS="gamma")
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in as_json(result)}
    assert [records[n]["status"] for n in ("alpha", "beta", "gamma")] == [
        "enabled", "blocked", "blocked"]
    assert "PBSPLUG_LOAD_PLUGINS" in records["beta"]["error"]
    assert "PBSPLUG_DISABLE_PLUGINS" in records["gamma"]["error"]
    assert imported(marks) == {"alpha"}

    result = run("plugins", "list", "--all", "--json", PBSPLUG_LOAD_PLUGINS="")
    assert result.returncode == 0, result.stderr
    assert {r["status"] for r in as_json(result)} == {"blocked"}
    assert imported(marks) == {"alpha"}


def test_unknown_hook_name_and_newer_api_fail_the_plugin(dists, home, run):
    install(dists, "typo", """
        from pbsplug import hookimpl
        @hookimpl
        def queuejobb(event):
            pass
    """)
    install(dists, "future", """
        from pbsplug import PluginInfo, hookimpl
        plugin_info = PluginInfo(api="2.0")
        @hookimpl
        def queuejob(event):
            pass
    """)
    install(dists, "good")
    write_site(home, "enable_all_installed = true\n")
    result = run("plugins", "list", "--json")
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in as_json(result)}
    assert records["typo"]["status"] == "failed"
    assert "implements hooks no spec declares: queuejobb" in records["typo"]["error"]
    assert records["future"]["status"] == "failed"
    assert "needs kernel API 2.0" in records["future"]["error"]
    assert records["good"]["status"] == "enabled"


@pytest.mark.parametrize("how", ["env", "option", "site"])
def test_strict_mode_fails_with_one_line_per_failed_plugin(dists, home, run, how):
    install(dists, "good")
    install(dists, "broken", "raise RuntimeError('kaboom')\n")
    install(dists, "typo", """
        from pbsplug import hookimpl
        @hookimpl
        def queuejobb(event):
            pass
    """)
    write_site(home, ("strict_plugins = true\n" if how == "site" else "")
               + "enable_all_installed = true\n")
    args = ["--strict"] if how == "option" else []
    env = {"PBSPLUG_STRICT_PLUGINS": "1"} if how == "env" else {}
    result = run(*args, "plugins", "list", **env)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "NAME" not in result.stdout
    lines = error_lines(result)
    assert len(lines) == 2, result.stderr
    assert "plugin 'broken' pbsplug-broken 1.0 failed: import failed: RuntimeError: kaboom" \
        in lines[0]
    assert "plugin 'typo' pbsplug-typo 1.0 failed: implements hooks no spec declares: " \
        "queuejobb" in lines[1]
    assert all("pbsplug plugins disable" in line for line in lines)


def test_strict_mode_with_debug_shows_the_traceback(dists, home, run):
    install(dists, "broken", "raise RuntimeError('kaboom')\n")
    write_site(home, "[plugins.broken]\nenabled = true\n")
    result = run("--debug", "--strict", "plugins", "list")
    assert result.returncode != 0
    assert "Traceback (most recent call last)" in result.stderr
    assert "PluginLoadError" in result.stderr
    assert "kaboom" in result.stderr
    # Without strict mode, the same plugin does not stop the command.
    assert run("--debug", "plugins", "list").returncode == 0


# =============================================================================================
# plugins enable / disable / info
# =============================================================================================

SITE_WITH_COMMENTS = """\
# Site configuration for cluster X
enable_all_installed = false   # plugins stay off unless enabled here

# The alpha plugin: off until the upgrade
[plugins.alpha]
enabled = false   # flip after the upgrade
alarm = 7         # seconds

[plugins.alpha.config]
limit = 4  # at most four
"""


def test_enable_and_disable_keep_comments_and_layout(dists, home, run):
    install(dists, "alpha", """
        from pbsplug import PluginInfo, Setting, hookimpl
        plugin_info = PluginInfo(config={"limit": Setting(int, 3)})
        @hookimpl
        def queuejob(event):
            pass
    """)
    install(dists, "beta")
    site = write_site(home, SITE_WITH_COMMENTS)

    result = run("plugins", "enable", "alpha")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"plugin 'alpha' enabled in {site}; no server is running in "
                             f"{home}\n")
    text = site.read_text()
    assert text == SITE_WITH_COMMENTS.replace("enabled = false   #", "enabled = true   #")
    assert tomllib.loads(text)["plugins"]["alpha"]["enabled"] is True

    assert run("plugins", "enable", "beta").returncode == 0
    assert run("plugins", "disable", "alpha").returncode == 0
    text = site.read_text()
    for comment in ("# Site configuration for cluster X", "# plugins stay off unless enabled",
                    "# The alpha plugin: off until the upgrade", "# flip after the upgrade",
                    "# seconds", "# at most four"):
        assert comment in text
    assert text.startswith(SITE_WITH_COMMENTS)
    data = tomllib.loads(text)
    assert data["plugins"]["alpha"] == {"enabled": False, "alarm": 7, "config": {"limit": 4}}
    assert data["plugins"]["beta"] == {"enabled": True}
    statuses = {r["name"]: r["status"] for r in as_json(run("plugins", "list", "--json"))}
    assert statuses == {"alpha": "disabled", "beta": "enabled"}


def test_enable_creates_the_site_config(dists, home, run):
    install(dists, "alpha")
    result = run("plugins", "enable", "alpha")
    assert result.returncode == 0, result.stderr
    assert tomllib.loads((home / "site.toml").read_text()) == {
        "plugins": {"alpha": {"enabled": True}}}


def test_enable_an_unknown_plugin_is_a_one_line_error(dists, home, run):
    install(dists, "alpha")
    install(dists, "beta")
    site = write_site(home, SITE_WITH_COMMENTS)
    result = run("plugins", "enable", "gamma")
    line = one_line_error(result)
    assert "no installed plugin is named 'gamma'" in line
    assert f"(installed: {installed('alpha', 'beta')})" in line
    assert site.read_text() == SITE_WITH_COMMENTS


def test_plugins_info_shows_attributes_and_config_schema(dists, home, run):
    install(dists, "alpha", """
        from pbsplug import PluginInfo, Setting, hookimpl
        plugin_info = PluginInfo(
            events=("queuejob",), order=10, alarm=5, description="Alpha checks jobs",
            config={"limit": Setting(int, 3, ge=1, le=10, doc="how many at most"),
                    "label": Setting(str, "x")})
        @hookimpl
        def queuejob(event):
            pass
    """)
    install(dists, "beta")
    write_site(home, """
        [plugins.alpha]
        enabled = true
        order = 20
        [plugins.alpha.config]
        limit = 4
    """)
    result = run("plugins", "info", "alpha")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "name: alpha" in out and "status: enabled" in out
    assert "distribution: pbsplug-alpha" in out
    assert "description: Alpha checks jobs" in out
    assert "hooks: queuejob" in out
    assert "attributes:" in out
    for line in ("order = 20", "alarm = 5", 'events = ["queuejob"]', "enabled = true",
                 'user = "pbsadmin"'):
        assert f"  {line}\n" in out, out
    assert "configuration:" in out
    assert "limit = 4  (an integer >= 1 and <= 10; default 3) how many at most" in out
    assert 'label = "x"  (a string; default "x")' in out

    data = as_json(run("plugins", "info", "alpha", "--json"))
    assert data["attributes"]["order"] == 20 and data["attributes"]["alarm"] == 5
    assert data["config"] == {"limit": 4, "label": "x"}
    assert data["config_schema"]["limit"] == {
        "type": "int", "default": 3, "required": False,
        "expected": "an integer >= 1 and <= 10", "doc": "how many at most"}

    line = one_line_error(run("plugins", "info", "nosuch"))
    assert f"no installed plugin is named 'nosuch' (installed: {installed('alpha', 'beta')})" \
        in line


# =============================================================================================
# hooks list
# =============================================================================================

def test_hooks_list_per_event_in_run_order(dists, home, run):
    for name in ("bravo", "alpha", "charlie", "off"):
        install(dists, name)
    install(dists, "host", """
        from pbsplug import PluginInfo, hookimpl
        plugin_info = PluginInfo(fail_action=("offline_vnodes",))
        @hookimpl
        def execjob_begin(event):
            pass
        @hookimpl
        def queuejob(event):
            pass
    """)
    install(dists, "tick", """
        from pbsplug import hookimpl
        @hookimpl
        def exechost_periodic(event):
            pass
    """)
    write_site(home, """
        [plugins.bravo]
        enabled = true
        order = 5
        [plugins.alpha]
        enabled = true
        order = 5
        [plugins.charlie]
        enabled = true
        order = 2
        [plugins.off]
        enabled = false
        [plugins.host]
        enabled = true
        events = ["execjob_begin"]
        alarm = 60
        [plugins.tick]
        enabled = true
        freq = 300
    """)
    result = run("hooks", "list", "--json")
    assert result.returncode == 0, result.stderr
    data = as_json(result)
    assert list(data) == ["queuejob", "execjob_begin", "exechost_periodic"]
    assert [h["hook"] for h in data["queuejob"]] == ["charlie", "alpha", "bravo"]
    assert [h["order"] for h in data["queuejob"]] == [2, 5, 5]
    assert data["queuejob"][0] == {"hook": "charlie", "order": 2, "mode": "process",
                                   "alarm": 30, "freq": None, "fail_action": ["none"],
                                   "user": "pbsadmin"}
    assert data["execjob_begin"] == [{"hook": "host", "order": 1, "mode": "process",
                                      "alarm": 60, "freq": None,
                                      "fail_action": ["offline_vnodes"], "user": "pbsadmin"}]
    assert data["exechost_periodic"][0]["freq"] == 300

    result = run("hooks", "list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("queuejob:")
    assert lines[start + 1].split() == ["HOOK", "ORDER", "MODE", "ALARM", "FREQ",
                                        "FAIL_ACTION", "USER"]
    assert [line.split()[0] for line in lines[start + 2:start + 5]] == [
        "charlie", "alpha", "bravo"]
    host = lines[lines.index("execjob_begin:") + 2].split()
    assert host == ["host", "1", "process", "60", "-", "offline_vnodes", "pbsadmin"]

    result = run("hooks", "list", "--event", "execjob_begin", "--json")
    assert result.returncode == 0, result.stderr
    assert list(as_json(result)) == ["execjob_begin"]
    result = run("hooks", "list", "--event", "runjob")
    assert result.returncode == 0 and "No enabled hook for runjob." in result.stdout
    line = one_line_error(run("hooks", "list", "--event", "queuejobb"))
    assert "unknown event 'queuejobb'; events are: queuejob," in line


# =============================================================================================
# config check
# =============================================================================================

CONFIGURED = """
from pbsplug import PluginInfo, Setting, hookimpl
plugin_info = PluginInfo(config={
    "limit": Setting(int, 3, ge=1, le=10),
    "label": Setting(str, "x"),
})
@hookimpl
def queuejob(event):
    pass
"""


def check_errors(result) -> list[str]:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


def test_config_check_accepts_a_valid_site(dists, home, run):
    install(dists, "alpha", CONFIGURED)
    (home / "alpha.CF").write_text('{"label": "from the CF"}\n')
    write_site(home, """
        [plugins.alpha]
        enabled = true
        order = 1000
        alarm = 1
        config_file = "alpha.CF"
        [plugins.alpha.config]
        limit = 10
    """)
    result = run("config", "check")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{home / 'site.toml'}: valid; enabled plugins: alpha"
    result = run("config", "check", PBSPLUG_HOME=str(home / "empty"))
    assert result.returncode == 0
    assert "(absent: every plugin off): valid; enabled plugins: none" in result.stdout


def test_config_check_malformed_toml(dists, home, run):
    install(dists, "alpha")
    site = write_site(home, "[plugins.alpha]\nenabled = tru\n")
    errors = check_errors(run("config", "check"))
    assert len(errors) == 1
    assert str(site) in errors[0] and "not valid TOML" in errors[0]


def test_config_check_lists_every_structural_error(dists, home, run):
    install(dists, "alpha")
    install(dists, "beta")
    site = write_site(home, """
        colour = "blue"
        [plugins.alpha]
        enabled = true
        alarm = 0
        [plugins.beta]
        enabled = "yes"
        ordr = 3
    """)
    errors = check_errors(run("config", "check"))
    assert all(str(site) in e for e in errors), errors
    text = "\n".join(errors)
    assert 'colour = "blue": unknown key; known keys: enable_all_installed' in text
    assert ("plugins.alpha.alarm = 0: set_hook_alarm: alarm value '0' of a hook must be > 0"
            in text)
    assert 'plugins.beta.enabled = "yes": expected true or false' in text
    assert "plugins.beta.ordr = 3: unknown key; known keys: enabled, events" in text


def test_config_check_lists_every_plugin_error(dists, home, run):
    install(dists, "alpha")
    install(dists, "gamma", CONFIGURED)
    install(dists, "delta", CONFIGURED)
    (home / "delta.CF").write_text("this is not JSON\n")
    site = write_site(home, """
        [plugins.alpha]
        enabled = true
        fail_action = "offline_vnodes"
        [plugins.gamma]
        enabled = true
        [plugins.gamma.config]
        limit = "three"
        label = "ok"
        colour = "red"
        [plugins.delta]
        enabled = true
        config_file = "delta.CF"
        [plugins.ghost]
        enabled = true
    """)
    errors = check_errors(run("config", "check"))
    text = "\n".join(errors)
    assert ("Can't set hook fail_action value to 'offline_vnodes': hook event must contain at "
            "least one of execjob_begin, exechost_startup, execjob_prologue") in text
    alpha = next(e for e in errors if "offline_vnodes" in e)
    assert str(site) in alpha and "[plugins.alpha]" in alpha
    gamma = next(e for e in errors if e.startswith("error: gamma:"))
    assert f'{site} [plugins.gamma.config]: plugins.gamma.config.limit = "three": expected ' \
           "an integer >= 1 and <= 10" in gamma
    assert 'plugins.gamma.config.colour = "red": unknown key; known keys: label, limit' in gamma
    delta = next(e for e in errors if e.startswith("error: delta:"))
    assert str(home / "delta.CF") in delta and "not valid JSON" in delta
    assert "this is not JSON" in delta
    ghost = next(e for e in errors if "ghost" in e)
    assert str(site) in ghost and "[plugins.ghost]: no installed plugin is named 'ghost'" in ghost

    write_site(home, """
        [plugins.gamma]
        enabled = true
        [plugins.gamma.config]
        limit = 11
    """)
    errors = check_errors(run("config", "check"))
    assert len(errors) == 1
    assert "plugins.gamma.config.limit = 11: expected an integer >= 1 and <= 10" in errors[0]


def test_config_check_errors_of_a_cf_file_name_the_cf_file(dists, home, run):
    install(dists, "gamma", CONFIGURED)
    cf = home / "gamma.CF"
    cf.write_text('{"limit": 0, "label": 5}\n')
    write_site(home, '[plugins.gamma]\nenabled = true\nconfig_file = "gamma.CF"\n')
    errors = check_errors(run("config", "check"))
    assert len(errors) == 1
    assert f"{cf}: limit = 0: expected an integer >= 1 and <= 10" in errors[0]
    assert f"{cf}: label = 5: expected a string" in errors[0]


def test_config_check_order_out_of_range_in_pbs_words(dists, home, run):
    install(dists, "alpha")
    site = write_site(home, "[plugins.alpha]\nenabled = true\norder = 5000\n")
    errors = check_errors(run("config", "check"))
    assert len(errors) == 1
    assert str(site) in errors[0] and "5000" in errors[0]
    assert ("order given (5000) is outside the acceptable range of [1, 1000] for type 'site'."
            in errors[0])


def test_config_check_order_out_of_a_site_hooks_range(dists, home, run):
    """Within the pbs range but outside the site range: PBS's words for a site hook."""
    install(dists, "alpha")
    site = write_site(home, "[plugins.alpha]\nenabled = true\norder = 1500\n")
    errors = check_errors(run("config", "check"))
    assert len(errors) == 1
    assert str(site) in errors[0]
    assert ("order given (1500) is outside the acceptable range of [1, 1000] for type 'site'."
            in errors[0])


def test_config_check_lists_structural_and_plugin_errors_together(dists, home, run):
    install(dists, "gamma", CONFIGURED)
    write_site(home, """
        colour = "blue"
        [plugins.gamma]
        enabled = true
        [plugins.gamma.config]
        limit = "three"
        [plugins.ghost]
        enabled = true
    """)
    text = "\n".join(check_errors(run("config", "check")))
    assert 'colour = "blue": unknown key' in text
    assert 'plugins.gamma.config.limit = "three"' in text
    assert "no installed plugin is named 'ghost'" in text


def test_config_check_a_truncated_cf_file(dists, home, run):
    install(dists, "gamma", CONFIGURED)
    cf = home / "gamma.CF"
    cf.write_text('{"limit": 3,\n')
    write_site(home, '[plugins.gamma]\nenabled = true\nconfig_file = "gamma.CF"\n')
    errors = check_errors(run("config", "check"))
    assert len(errors) == 1
    assert str(cf) in errors[0] and "not valid JSON" in errors[0]


# =============================================================================================
# pbsplug event
# =============================================================================================

EVENT_PLUGINS = {
    "setter": """
        from pbsplug import hookimpl
        @hookimpl
        def queuejob(event):
            event.job.comment = "seen by setter"
    """,
    "rej": """
        from pbsplug import hookimpl
        @hookimpl
        def queuejob(event):
            event.reject()
    """,
    "boom": """
        from pbsplug import hookimpl
        @hookimpl
        def queuejob(event):
            raise ValueError("bad thing")
        @hookimpl
        def execjob_begin(event):
            raise ValueError("bad thing")
    """,
    "plainrej": """
        from pbsplug import hookimpl
        @hookimpl
        def execjob_begin(event):
            event.reject("no way")
    """,
    "spin": """
        from pbsplug import hookimpl
        def forever():
            while True:
                try:
                    while True:
                        pass
                except BaseException:
                    pass
        @hookimpl
        def queuejob(event):
            forever()
        @hookimpl
        def execjob_begin(event):
            forever()
    """,
}
JOB = {"job": {"id": "1.server", "Job_Owner": "alice@host"}}
HOST_JOB = {"job": {"id": "1.server"}, "vnode_list": {"node1": {}}}
RUN_KEYS = {"hook", "order", "mode", "duration", "outcome"}


@pytest.fixture
def event_setup(dists, home, tmp_path):
    for name, source in EVENT_PLUGINS.items():
        install(dists, name, source)
    (tmp_path / "job.json").write_text(json.dumps(JOB))
    (tmp_path / "host.json").write_text(json.dumps(HOST_JOB))

    def site(text: str) -> None:
        write_site(home, text)

    return site


def test_event_accepted(event_setup, run, tmp_path):
    event_setup("[plugins.setter]\nenabled = true\n")
    result = run("event", "queuejob", "--input", str(tmp_path / "job.json"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("queuejob: accepted\n")
    assert 'job.comment = "seen by setter"' in result.stdout
    result = run("event", "queuejob", "--input", str(tmp_path / "job.json"), "--json")
    assert result.returncode == 0, result.stderr
    out = as_json(result)
    assert out["accepted"] is True and out["kind"] == "accept"
    assert out["hook"] is None and out["message"] is None and out["code"] is None
    assert out["consequence"] == "proceed"
    assert out["changes"] == {"job": {"comment": "seen by setter"}}
    assert [r["hook"] for r in out["runs"]] == ["setter"]


def test_event_without_hooks_is_accepted(event_setup, run, tmp_path):
    event_setup("")
    result = run("event", "queuejob", "--input", str(tmp_path / "job.json"))
    assert result.returncode == 0, result.stderr
    assert "hook runs: none" in result.stdout


def test_event_rejected_without_a_message(event_setup, run, tmp_path):
    event_setup("""
        [plugins.setter]
        enabled = true
        order = 5
        [plugins.rej]
        enabled = true
        order = 7
    """)
    result = run("event", "queuejob", "--input", str(tmp_path / "job.json"), "--json")
    assert result.returncode == 1, result.stderr
    out = as_json(result)
    assert {"accepted", "kind", "hook", "message", "code", "fail_action", "consequence",
            "runs", "changes"} <= set(out)
    assert out["accepted"] is False and out["kind"] == "reject" and out["hook"] == "rej"
    assert out["message"] == "queuejob request rejected by 'rej'"
    assert out["code"] == 15136
    assert out["fail_action"] == [] and out["consequence"] == "refuse"
    assert [(r["hook"], r["order"], r["mode"], r["outcome"]) for r in out["runs"]] == [
        ("setter", 5, "process", "accept"), ("rej", 7, "process", "reject")]
    for r in out["runs"]:
        assert RUN_KEYS <= set(r) and r["duration"] >= 0
    # Changes of earlier hooks survive a plain reject, as in PBS.
    assert out["changes"] == {"job": {"comment": "seen by setter"}}

    result = run("event", "queuejob", "--input", str(tmp_path / "job.json"))
    assert result.returncode == 1
    assert "queuejob: rejected by 'rej' (reject)" in result.stdout
    assert "message: queuejob request rejected by 'rej'" in result.stdout


def test_event_exception(event_setup, run, tmp_path):
    event_setup("""
        [plugins.setter]
        enabled = true
        [plugins.boom]
        enabled = true
        events = ["queuejob"]
        order = 2
    """)
    result = run("event", "queuejob", "--input", str(tmp_path / "job.json"), "--json")
    assert result.returncode == 1, result.stderr
    out = as_json(result)
    assert out["kind"] == "error" and out["hook"] == "boom" and out["code"] == 15136
    assert out["message"] == ("request rejected as filter hook 'boom' encountered an exception. "
                              "Please inform Admin")
    assert out["detail"] == "ValueError: bad thing"
    assert out["fail_action"] == [] and out["consequence"] == "refuse"
    assert out["changes"] == {}  # no change applies after an exception
    assert "queuejob hook 'boom' encountered an exception, request rejected" in result.stderr


@pytest.mark.parametrize("mode", ["process", "inprocess"])
def test_event_a_raising_hook_is_one_line_without_debug(event_setup, run, tmp_path, mode):
    """Issue 17: one line naming the hook and the error; the traceback with --debug."""
    event_setup("[plugins.boom]\nenabled = true\nevents = [\"queuejob\"]\n")
    job = str(tmp_path / "job.json")
    result = run("event", "queuejob", "--input", job, "--mode", mode)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "pbsplug: ERROR: queuejob hook 'boom' encountered an exception, request rejected: "
        "ValueError: bad thing"]
    result = run("--debug", "event", "queuejob", "--input", job, "--mode", mode)
    assert result.returncode == 1
    assert "Traceback (most recent call last):" in result.stderr
    assert 'raise ValueError("bad thing")' in result.stderr


def test_event_fail_action_applies_on_exception_not_on_reject(event_setup, run, tmp_path):
    event_setup("""
        [plugins.boom]
        enabled = true
        events = ["execjob_begin"]
        fail_action = ["offline_vnodes"]
    """)
    host = str(tmp_path / "host.json")
    out = as_json(run("event", "execjob_begin", "--input", host, "--json"))
    assert out["kind"] == "error" and out["runs"][0]["mode"] == "process"
    assert out["fail_action"] == ["offline_vnodes"]
    assert out["consequence"] == "requeue"

    event_setup("""
        [plugins.plainrej]
        enabled = true
        fail_action = ["offline_vnodes"]
    """)
    result = run("event", "execjob_begin", "--input", host, "--json")
    assert result.returncode == 1
    out = as_json(result)
    assert out["kind"] == "reject" and out["message"] == "no way"
    assert out["fail_action"] == []
    assert out["consequence"] == "requeue"
    result = run("event", "execjob_begin", "--input", host)
    assert "fail_action: none" in result.stdout


@pytest.mark.parametrize("event,site,fail_action", [
    ("queuejob", 'events = ["queuejob"]\nisolation = "process"\n', []),
    ("execjob_begin", 'events = ["execjob_begin"]\nfail_action = "offline_vnodes"\n',
     ["offline_vnodes"]),
])
def test_event_alarm_stops_a_hook_that_swallows_the_interrupt(event_setup, run, tmp_path,
                                                              event, site, fail_action):
    event_setup("[plugins.spin]\nenabled = true\nalarm = 1\n" + site)
    data = str(tmp_path / ("job.json" if event == "queuejob" else "host.json"))
    result = run("event", event, "--input", data, "--json")  # (the hook never ends alone)
    assert result.returncode == 1, result.stderr
    out = as_json(result)
    assert out["kind"] == "alarm" and out["hook"] == "spin" and out["code"] == 15136
    assert out["message"] == ("request rejected as filter hook 'spin' got an alarm call. "
                              "Please inform Admin")
    assert out["fail_action"] == fail_action
    assert [r["outcome"] for r in out["runs"]] == ["alarm"]


@pytest.mark.parametrize("args,text", [
    (["queuejob", "--input", "MISSING"], "cannot be read: No such file or directory"),
    (["queuejob", "--input", "BAD"], "not valid JSON"),
    (["queuejobb", "--input", "JOB"], "unknown event 'queuejobb'; events are: queuejob,"),
    (["queuejob", "--input", "HOST"], "queuejob does not carry 'vnode_list'; it takes: job, "
                                      "requestor, requestor_host"),
    (["queuejob", "--input", "LIST"], "the event input must be a JSON object"),
    (["queuejob", "--input", "JOB", "--mode", "thread"], "--mode 'thread'"),
])
def test_event_input_errors(event_setup, run, tmp_path, args, text):
    event_setup("[plugins.setter]\nenabled = true\n")
    (tmp_path / "bad.json").write_text('{"job": ')
    (tmp_path / "list.json").write_text("[1, 2]")
    files = {"MISSING": tmp_path / "missing.json", "BAD": tmp_path / "bad.json",
             "JOB": tmp_path / "job.json", "HOST": tmp_path / "host.json",
             "LIST": tmp_path / "list.json"}
    args = [str(files.get(a, a)) for a in args]
    line = one_line_error(run("event", *args))
    assert text in line


def test_event_input_from_stdin_and_the_trace(event_setup, run, tmp_path, home):
    event_setup("""
        [plugins.setter]
        enabled = true
        [plugins.rej]
        enabled = true
        order = 3
    """)
    result = run("hooks", "trace")
    assert result.returncode == 0 and "No hook has run yet" in result.stdout
    result = run("event", "queuejob", "--input", "-", "--json", input=json.dumps(JOB))
    assert result.returncode == 1, result.stderr
    assert as_json(result)["hook"] == "rej"
    line = one_line_error(run("event", "queuejob", "--input", "-", input="{oops"))
    assert "-: not valid JSON" in line

    runs = as_json(run("hooks", "trace", "--json"))
    assert [(r["event"], r["hook"], r["outcome"]) for r in runs] == [
        ("queuejob", "setter", "accept"), ("queuejob", "rej", "reject")]
    assert (home / "hook_trace.jsonl").exists()
    result = run("hooks", "trace")
    rows = [line.split()[:2] for line in result.stdout.splitlines()[1:]]
    assert rows == [["queuejob", "setter"], ["queuejob", "rej"]]
    run("event", "queuejob", "--input", str(tmp_path / "job.json"))
    assert len(as_json(run("hooks", "trace", "--json", "--last", "3"))) == 3


@pytest.mark.parametrize("text, why", [
    # each was a traceback: json.loads' RecursionError, int()'s ValueError, the codec's
    ("[" * 100_000, "arrays or objects nested too deeply"),
    ('{"job": {"id": %s}}' % ("9" * 5000), "a number of 5,000 digits (at most 1,000)"),
    (b'{"job": {"Job_Name": "\xff"}}', "not UTF-8 text (byte 0xff at offset 22)"),
])
def test_event_input_that_json_loads_fails_on_is_one_line(event_setup, run, tmp_path, text,
                                                          why):
    event_setup("[plugins.setter]\nenabled = true\n")
    path = tmp_path / "bad.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    line = one_line_error(run("event", "queuejob", "--input", str(path)))
    assert line.endswith(f"{path}: not valid JSON: {why}"), line


@pytest.mark.parametrize("line, why", [
    ('{"hook": "setter", "event": "queuejob", "order": 1, "mo', "not JSON: Unterminated "
     "string starting at: line 1 column 53 (char 52): not a hook run's record"),
    ("[" * 100_000, "arrays or objects nested too deeply: not a hook run's record"),
    ('{"hook": "setter", "event": "queuejob", "order": 1, "mode": "process", '
     '"duration": "x", "outcome": "accept"}', "not a hook run's record (event, hook, order, "
                                              "mode, duration, outcome, message)"),
])
def test_a_trace_line_that_is_no_hook_run_is_named(event_setup, run, home, line, why):
    """A trace line cut short (a full disk), or not the runner's: `hooks trace` was a
    traceback (JSONDecodeError, RecursionError, a duration that is no number)."""
    event_setup("[plugins.setter]\nenabled = true\n")
    (home / "hook_trace.jsonl").write_text(
        '{"hook": "setter", "event": "queuejob", "order": 1, "mode": "process", '
        '"duration": 0.1, "outcome": "accept", "message": null, "started": 0.0}\n' + line)
    error = one_line_error(run("hooks", "trace"))
    assert error.endswith(f"{home / 'hook_trace.jsonl'} line 2: {why}"), error


# =============================================================================================
# hook import / export
# =============================================================================================

HOST_PLUGIN = """
from pbsplug import PluginInfo, Setting, hookimpl
plugin_info = PluginInfo(pbs_name="PBS_hosty", config={
    "timeout": Setting(float, 30.0, gt=0),
    "mode": Setting(str, "a", choices=("a", "b")),
})
@hookimpl
def execjob_begin(event):
    pass
@hookimpl
def execjob_end(event):
    pass
"""

HK = """\
# exported from PBS
hook_name=hosty
type=site
enabled=false
fail_action=offline_vnodes
event=execjob_begin,execjob_end
order=50
alarm=90
"""


def test_hook_import_writes_the_site_config(dists, home, run, tmp_path):
    install(dists, "hosty", HOST_PLUGIN)
    site = write_site(home, "# keep me\n[plugins.other]\nenabled = false\n")
    (tmp_path / "hosty.HK").write_text(HK)
    (tmp_path / "hosty.CF").write_text('{"timeout": 12.5, "mode": "b"}\n')
    result = run("hook", "import", "hosty", "--hk", str(tmp_path / "hosty.HK"),
                 "--cf", str(tmp_path / "hosty.CF"))
    assert result.returncode == 0, result.stderr
    assert "into [plugins.hosty]" in result.stdout
    text = site.read_text()
    assert text.startswith("# keep me\n[plugins.other]\nenabled = false\n")
    assert tomllib.loads(text)["plugins"]["hosty"] == {
        "enabled": False, "events": ["execjob_begin", "execjob_end"], "order": 50,
        "alarm": 90, "fail_action": ["offline_vnodes"],
        "config": {"timeout": 12.5, "mode": "b"}}
    info = as_json(run("plugins", "info", "hosty", "--json"))
    assert info["status"] == "disabled"
    assert info["attributes"]["alarm"] == 90 and info["attributes"]["order"] == 50
    assert info["config"] == {"timeout": 12.5, "mode": "b"}

    # The PBS hook's name is accepted too; an attribute the file leaves out is PBS's default.
    (tmp_path / "pbs.HK").write_text("hook_name=PBS_hosty\nalarm=9\n")
    result = run("hook", "import", "hosty", "--hk", str(tmp_path / "pbs.HK"))
    assert result.returncode == 0, result.stderr
    table_ = tomllib.loads(site.read_text())["plugins"]["hosty"]
    assert table_["alarm"] == 9 and table_["enabled"] is True
    assert table_["config"] == {"timeout": 12.5, "mode": "b"}


def test_hook_import_refuses_bad_files_and_writes_nothing(dists, home, run, tmp_path):
    install(dists, "hosty", HOST_PLUGIN)
    site = write_site(home, "# keep me\n[plugins.hosty]\nenabled = true\nalarm = 3\n")
    before = site.read_text()
    hk = tmp_path / "hosty.HK"
    hk.write_text(HK)

    (tmp_path / "other.HK").write_text(HK.replace("hook_name=hosty", "hook_name=other"))
    line = one_line_error(run("hook", "import", "hosty", "--hk", str(tmp_path / "other.HK")))
    assert "hook_name 'other' failed integrity check (expected 'hosty' or 'PBS_hosty')" in line

    (tmp_path / "bad.CF").write_text('{"timeout": -1, "mode": "b"}\n')
    line = one_line_error(run("hook", "import", "hosty", "--hk", str(hk), "--cf",
                              str(tmp_path / "bad.CF")))
    assert f"{tmp_path / 'bad.CF'}: timeout = -1: expected a number > 0" in line

    (tmp_path / "unknown.CF").write_text('{"colour": "red"}\n')
    line = one_line_error(run("hook", "import", "hosty", "--hk", str(hk), "--cf",
                              str(tmp_path / "unknown.CF")))
    assert 'colour = "red": unknown key' in line

    (tmp_path / "conf.yaml").write_text('{"timeout": 1}\n')  # PBS refuses the suffix
    line = one_line_error(run("hook", "import", "hosty", "--hk", str(hk), "--cf",
                              str(tmp_path / "conf.yaml")))
    assert line == (f"pbsplug: error: {tmp_path / 'conf.yaml'} contains an invalid suffix, "
                    "should be one of: .json .py .txt .xml .ini")

    (tmp_path / "alarm.HK").write_text("hook_name=hosty\nalarm=0\n")
    line = one_line_error(run("hook", "import", "hosty", "--hk", str(tmp_path / "alarm.HK")))
    assert "set_hook_alarm: alarm value '0' of a hook must be > 0" in line

    line = one_line_error(run("hook", "import", "hosty", "--hk", str(tmp_path / "none.HK")))
    assert "cannot be read" in line
    line = one_line_error(run("hook", "import", "nosuch", "--hk", str(hk)))
    assert "no installed plugin is named 'nosuch'" in line
    assert site.read_text() == before


def test_hook_import_refuses_an_event_the_plugin_does_not_implement(dists, home, run,
                                                                     tmp_path):
    install(dists, "hosty", HOST_PLUGIN)
    site = write_site(home, "[plugins.hosty]\nenabled = true\n")
    before = site.read_text()
    (tmp_path / "h.HK").write_text("hook_name=hosty\nevent=execjob_begin,execjob_prologue\n")
    line = one_line_error(run("hook", "import", "hosty", "--hk", str(tmp_path / "h.HK")))
    assert "execjob_prologue" in line
    assert site.read_text() == before


def test_hook_export_writes_pbs_format(dists, home, run, tmp_path):
    install(dists, "pro", """
        from pbsplug import PluginInfo, hookimpl
        plugin_info = PluginInfo(type="pbs")
        @hookimpl
        def execjob_prologue(event):
            pass
        @hookimpl
        def execjob_epilogue(event):
            pass
    """)
    install(dists, "tick", """
        from pbsplug import hookimpl
        @hookimpl
        def exechost_periodic(event):
            pass
    """)
    install(dists, "hosty", HOST_PLUGIN)
    write_site(home, """
        [plugins.pro]
        enabled = false
        alarm = 45
        order = 1500
        fail_action = ["offline_vnodes", "scheduler_restart_cycle"]
        user = "pbsuser"
        debug = true
        [plugins.tick]
        enabled = true
        freq = 300
        alarm = 10
        [plugins.hosty]
        enabled = true
        [plugins.hosty.config]
        mode = "b"
    """)
    out = tmp_path / "out"
    out.mkdir()
    for name in ("pro", "tick", "hosty"):
        result = run("hook", "export", name, "--dir", str(out))
        assert result.returncode == 0, result.stderr
    assert (out / "pro.HK").read_text() == (
        "hook_name=pro\ntype=pbs\nenabled=false\ndebug=true\nuser=pbsuser\n"
        "fail_action=offline_vnodes,scheduler_restart_cycle\n"
        "event=execjob_epilogue,execjob_prologue\norder=1500\nalarm=45\n")
    assert (out / "tick.HK").read_text() == (
        "hook_name=tick\nevent=exechost_periodic\nalarm=10\nfreq=300\n")
    assert (out / "hosty.HK").read_text() == "hook_name=hosty\nevent=execjob_begin,execjob_end\n"
    assert json.loads((out / "hosty.CF").read_text()) == {"timeout": 30.0, "mode": "b"}
    assert not (out / "pro.CF").exists() and not (out / "tick.CF").exists()
    assert sorted(p.name for p in out.iterdir()) == ["hosty.CF", "hosty.HK", "pro.HK",
                                                      "tick.HK"]

    result = run("hook", "export", "hosty", "--dir", str(out), "--hook-name", "PBS_hosty")
    assert result.returncode == 0, result.stderr
    assert (out / "PBS_hosty.HK").read_text().startswith("hook_name=PBS_hosty\n")
    line = one_line_error(run("hook", "export", "hosty", "--dir", str(tmp_path / "nowhere")))
    assert "no such directory" in line


@pytest.mark.parametrize("name,site", [
    ("pro", """
        [plugins.pro]
        enabled = false
        alarm = 45
        order = 1500
        fail_action = ["offline_vnodes"]
        user = "pbsuser"
        debug = true
    """),
    ("hosty", """
        [plugins.hosty]
        enabled = true
        events = ["execjob_end"]
        order = 7
        [plugins.hosty.config]
        timeout = 2.5
    """),
])
def test_hook_export_import_round_trip(dists, home, run, tmp_path, name, site):
    install(dists, "pro", """
        from pbsplug import PluginInfo, hookimpl
        plugin_info = PluginInfo(type="pbs")
        @hookimpl
        def execjob_prologue(event):
            pass
        @hookimpl
        def execjob_epilogue(event):
            pass
    """)
    install(dists, "hosty", HOST_PLUGIN)
    write_site(home, site)
    out = tmp_path / "out"
    out.mkdir()
    assert run("hook", "export", name, "--dir", str(out)).returncode == 0
    before = as_json(run("plugins", "info", name, "--json"))

    other = tmp_path / "other-home"
    other.mkdir()
    args = ["hook", "import", name, "--hk", str(out / f"{name}.HK")]
    if (out / f"{name}.CF").exists():
        args += ["--cf", str(out / f"{name}.CF")]
    result = run(*args, PBSPLUG_HOME=str(other))
    assert result.returncode == 0, result.stderr
    after = as_json(run("plugins", "info", name, "--json", PBSPLUG_HOME=str(other)))
    assert after["attributes"] == before["attributes"]
    assert after["config"] == before["config"]
    assert after["status"] == before["status"]


# =============================================================================================
# plugin new
# =============================================================================================

def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PBSPLUG_", "PYTHON", "PIP_")) and k != "VIRTUAL_ENV"}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", **extra)
    return env


def test_plugin_new_installs_lists_and_passes_its_tests(run, tmp_path, home):
    if importlib.util.find_spec("pip") is None or importlib.util.find_spec("setuptools") is None:
        pytest.skip("pip and setuptools are needed to install the new plugin")
    result = run("plugin", "new", "wall_guard", "--dir", str(tmp_path / "src"))
    assert result.returncode == 0, result.stderr
    root = tmp_path / "src" / "wall_guard"
    assert result.stdout.startswith(f"wrote {root}\n")
    for rel in ("pyproject.toml", "README.md", "pbsplug_wall_guard/__init__.py",
                "tests/test_wall_guard_hooks.py"):
        assert (root / rel).is_file(), rel

    # A throwaway virtualenv that sees this one's packages (pbsplug, pytest, setuptools, pip):
    # a venv made from a venv's python gets the *base* interpreter's site-packages with
    # --system-site-packages, so this venv's are added by a .pth file.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, env=_clean_env(), timeout=60)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path("
                                            "'purelib'))"], capture_output=True, text=True,
                             check=True, env=_clean_env()).stdout.strip()
    Path(purelib, "_pbsplug_dev.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    env = _clean_env(PBSPLUG_HOME=str(home))

    def venv_run(*args: str, input: str | None = None, cwd: Path | None = None):
        return subprocess.run([python, *args], capture_output=True, text=True, env=env,
                              input=input, cwd=cwd, timeout=120)

    result = venv_run("-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                      "-e", str(root))
    assert result.returncode == 0, result.stdout + result.stderr
    pbsplug_cli = ("-c", "import sys; from pbsplug.cli import main; sys.exit(main())")

    result = venv_run(*pbsplug_cli, "plugins", "list", "--all", "--json")
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in json.loads(result.stdout)}
    assert records["wall_guard"]["distribution"] == "pbsplug-wall-guard"
    assert records["wall_guard"]["version"] == "0.1.0"
    assert records["wall_guard"]["status"] == "disabled"
    assert records["wall_guard"]["hooks"] == ["queuejob"]

    assert venv_run(*pbsplug_cli, "plugins", "enable", "wall_guard").returncode == 0
    result = venv_run(*pbsplug_cli, "event", "queuejob", "--input", "-", "--json",
                      input=json.dumps({"job": {"id": "1.s"}}))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["changes"] == {
        "job": {"Resource_List": {"walltime": "01:00:00"}}}

    result = venv_run("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout

    # The main environment did not get the plugin.
    result = run("plugins", "list", "--json")
    assert "wall_guard" not in {r["name"] for r in as_json(result)}


def test_plugin_new_says_to_use_pbsplugs_own_python(run, tmp_path):
    """A bare `pip` or `pytest` may be another environment's (plugin-authors.md): the hint
    and the README name pbsplug's interpreter, and the hint pastes into a shell as is."""
    parent = tmp_path / "my src"
    result = run("plugin", "new", "tidy", "--dir", str(parent))
    assert result.returncode == 0, result.stderr
    root = parent / "tidy"
    hint = result.stdout.splitlines()[1].removeprefix("next: ")
    install, enable, test = (shlex.split(part) for part in hint.split(" && "))
    python = install[0]
    assert install[1:] == ["-m", "pip", "install", "-e", f"{root}[test]"]
    assert enable == ["pbsplug", "plugins", "enable", "tidy"]
    assert test == [python, "-m", "pytest", str(root / "tests")]
    found = subprocess.run([python, "-c", "import pbsplug, pytest"], capture_output=True,
                           text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    readme = (root / "README.md").read_text()
    assert "python -m pip install -e '.[test]'" in readme
    assert "python -m pytest tests" in readme
    assert "\n    pytest" not in readme and "\n    pip " not in readme
    assert "pbsplug server start" in readme and "restart it after a\nchange" in readme


def test_plugin_new_refuses_a_bad_name_or_an_existing_folder(run, tmp_path):
    parent = tmp_path / "src"
    assert run("plugin", "new", "good", "--dir", str(parent)).returncode == 0
    marker = parent / "good" / "README.md"
    before = marker.read_text()
    line = one_line_error(run("plugin", "new", "good", "--dir", str(parent)))
    assert f"{parent / 'good'} already exists" in line
    assert marker.read_text() == before
    for bad in ("Bad-Name", "9lives", "x" * 41):
        line = one_line_error(run("plugin", "new", bad, "--dir", str(parent)))
        assert f"plugin name '{bad}' must match [a-z][a-z0-9_]*" in line
        assert not (parent / bad).exists()
    line = one_line_error(run("plugin", "new", "hooks", "--dir", str(parent)))
    assert "'hooks' is a pbsplug command" in line


# =============================================================================================
# plugin command groups
# =============================================================================================

TOOLS = """
import typer
from pbsplug import PluginInfo, Setting, hookimpl, plugin_config

plugin_info = PluginInfo(description="Tools of the tools plugin",
                         config={"greeting": Setting(str, "hello")})

@hookimpl
def register_commands(cli):
    @cli.command()
    def greet(name: str, shout: bool = typer.Option(False, "--shout")):
        '''Greet someone.'''
        text = f"{plugin_config('tools')['greeting']}, {name}"
        typer.echo(text.upper() if shout else text)

    @cli.command()
    def fail():
        '''Exit 3.'''
        raise typer.Exit(3)
"""


def test_plugin_command_group(dists, home, run, marks, tmp_path):
    install(dists, "tools", TOOLS)
    install(dists, "other")
    result = run("tools", "greet", "bob")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello, bob\n"
    assert imported(marks) == {"tools"}  # only the named plugin is imported
    assert run("tools", "greet", "bob", "--shout").stdout == "HELLO, BOB\n"
    assert run("tools", "fail").returncode == 3
    result = run("tools", "--help")
    assert result.returncode == 0
    assert "Tools of the tools plugin" in result.stdout
    assert "greet" in result.stdout and "Greet someone." in result.stdout

    write_site(home, '[plugins.tools.config]\ngreeting = "hi"\n')
    assert run("tools", "greet", "bob").stdout == "hi, bob\n"
    other_site = tmp_path / "other.toml"
    other_site.write_text('[plugins.tools.config]\ngreeting = "hey"\n')
    assert run("--site", str(other_site), "tools", "greet", "bob").stdout == "hey, bob\n"


def test_plugin_command_group_of_a_failing_plugin(dists, home, run):
    install(dists, "tools", TOOLS)
    install(dists, "broken", "raise RuntimeError('kaboom')\n")
    install(dists, "plain")
    line = one_line_error(run("broken", "anything"))
    assert "plugin 'broken' pbsplug-broken 1.0 failed: import failed: RuntimeError: kaboom" \
        in line
    assert "pbsplug plugins disable broken" in line
    line = one_line_error(run("plain", "anything"))
    assert "plugin 'plain' has no commands" in line
    line = one_line_error(run("tools", "greet", "bob", PBSPLUG_DISABLE_PLUGINS="tools"))
    assert "plugin 'tools' is blocked by PBSPLUG_DISABLE_PLUGINS" in line
    write_site(home, "[plugins.tools.config]\ngreeting = 5\n")
    line = one_line_error(run("tools", "greet", "bob"))
    assert "plugin 'tools' pbsplug-tools 1.0 failed: bad configuration" in line
    assert "plugins.tools.config.greeting = 5: expected a string" in line
    result = run("nosuch", "cmd")
    assert result.returncode == 2 and "No such command 'nosuch'" in result.stderr
