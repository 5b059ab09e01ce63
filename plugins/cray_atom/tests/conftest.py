"""A stand-in ATOM service per test, on a real UNIX socket, and the plugin registered
against it."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

import pbsplug_cray_atom as plugin
from pbsplug_cray_atom.fake import FakeAtom

HOST = socket.gethostname().split(".", 1)[0]
ME = pwd.getpwuid(os.getuid()).pw_name


@pytest.fixture
def sock_dir():
    # A UNIX socket path must fit in 107 bytes; pytest's tmp_path may not.
    path = Path(tempfile.mkdtemp(prefix="atom", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def atom(sock_dir):
    """A running fake ATOM service on ``<sock_dir>/atomd.sock``."""
    service = FakeAtom(sock_dir / "atomd.sock").start()
    yield service
    service.stop()


@pytest.fixture
def hook(register_plugin, fire_event, atom):
    """The plugin registered as the site would enable it, talking to `atom`; returns
    ``fire(event_name, job=..., sharing=..., **config)`` run in its own process, as the
    execution host runs it."""

    registered = []

    def fire(event: str, job_id: str = "12.server", euser: str = ME, place: str | None = None,
             sharing: str | None = None, alarm: int = 300, **config):
        settings = {"alarm": alarm, "config": {"unix_socket_file": str(atom.socket_path),
                                               "post_timeout": 2.0, "delete_timeout": 2.0,
                                               **config}}
        if not registered:
            register_plugin(plugin, "cray_atom", alarm=alarm, config=settings["config"])
            registered.append(settings)
        assert registered == [settings], "one test, one configuration"
        resources = {"select": "1:ncpus=1"} | ({"place": place} if place else {})
        vnode = {"resources_available": {"ncpus": 2}} | ({"sharing": sharing} if sharing
                                                         else {})
        return fire_event(event, {
            "job": {"id": job_id, "euser": euser, "Job_Owner": f"{euser}@{HOST}",
                    "Resource_List": resources, "exec_vnode": f"({HOST}:ncpus=1)"},
            "vnode_list": {HOST: vnode},
        }, mode="process")

    return fire
