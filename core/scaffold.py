"""`pbsplug plugin new NAME`: a new plugin distribution that installs, loads and passes its
test as written, laid out as ARCHITECTURE.md lays out plugins."""

from __future__ import annotations

import re
from pathlib import Path

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}\Z")

_PYPROJECT = '''\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "pbsplug-{dist}"
version = "0.1.0"
description = "pbsplug plugin {name}"
readme = "README.md"
requires-python = ">=3.10"
# Plugins pin the kernel's range: hook specs change only by additions within a major version.
dependencies = ["pbsplug>=0.1,<1"]

[project.optional-dependencies]
test = ["pytest>=8"]

[project.entry-points.pbsplug]
{name} = "pbsplug_{name}"

[tool.setuptools]
packages = ["pbsplug_{name}"]
'''

_MODULE = '''\
"""pbsplug plugin {name}: gives jobs that ask for no walltime the site's default."""

from __future__ import annotations

from pbsplug import Event, PluginInfo, Setting, hookimpl, parse_duration


def _duration(value: str) -> str | None:
    try:
        parse_duration(value)
    except ValueError as exc:
        return str(exc)
    return None


plugin_info = PluginInfo(
    api="1.0",
    events=("queuejob",),
    config={{
        "default_walltime": Setting(str, "01:00:00", check=_duration,
                                    doc="walltime given to jobs that request none"),
    }},
)


@hookimpl
def queuejob(event: Event) -> None:
    """A job without a walltime gets the configured default."""
    job = event.job
    if job.Resource_List["walltime"] is None:
        job.Resource_List["walltime"] = event.hook_config["default_walltime"]
'''

_TEST = '''\
import pbsplug_{name}


def test_default_walltime_is_set(register_plugin, fire_event):
    register_plugin(pbsplug_{name}, "{name}")
    outcome = fire_event("queuejob", {{"job": {{"id": "1.server"}}}})
    assert outcome.accepted
    assert outcome.changes["job"]["Resource_List"] == {{"walltime": "01:00:00"}}


def test_requested_walltime_is_kept(register_plugin, fire_event):
    register_plugin(pbsplug_{name}, "{name}", config={{"default_walltime": "00:10:00"}})
    job = {{"id": "2.server", "Resource_List": {{"walltime": "02:00:00"}}}}
    outcome = fire_event("queuejob", {{"job": job}})
    assert outcome.accepted and "job" not in outcome.changes
'''

_README = '''\
# pbsplug-{dist}

A pbsplug plugin: jobs submitted without a walltime get the site's default.

## Configuration (`[plugins.{name}.config]` in the site config)

| key | default | meaning |
|---|---|---|
| default_walltime | `01:00:00` | walltime given to jobs that request none |

## Events

- `queuejob`: sets `Resource_List.walltime` when the job has none.

## Try it

With the Python environment pbsplug is installed in (its `python` and `pbsplug`), and a
pbsplug home of your own, so that no server in service is touched:

    export PBSPLUG_HOME=$PWD/dev-home
    python -m pip install -e '.[test]'
    pbsplug plugins enable {name}
    pbsplug plugins list
    python -m pytest tests

On the local engine (the server imports the plugin when it starts: restart it after a
change to the code):

    pbsplug server start
    echo 'sleep 1' | pbsplug qsub          # no walltime asked
    pbsplug qstat -fx                      # Resource_List.walltime = 01:00:00
    pbsplug server stop
'''


def new_plugin(name: str, parent: Path) -> Path:
    """Write the plugin's distribution in ``parent/name``; returns its folder.

    `ValueError` for a bad name or a folder that already exists (nothing is overwritten).
    """
    if not NAME_RE.match(name):
        raise ValueError(f"plugin name {name!r} must match [a-z][a-z0-9_]* (at most 40 "
                         "characters): it is the entry point, the site-config table, the CLI "
                         "group and part of the package name")
    root = Path(parent) / name
    if root.exists():
        raise ValueError(f"{root} already exists; choose another name or --dir")
    values = {"name": name, "dist": name.replace("_", "-")}
    files = {
        "pyproject.toml": _PYPROJECT,
        f"pbsplug_{name}/__init__.py": _MODULE,
        f"tests/test_{name}_hooks.py": _TEST,  # one module name per plugin (plugin-authors.md)
        "README.md": _README,
    }
    for rel, template in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**values))
    return root
