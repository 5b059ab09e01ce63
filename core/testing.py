"""Pytest fixtures for plugin authors (loaded through the ``pytest11`` entry point).

::

    from pbsplug import hookimpl

    class Reject:
        @hookimpl
        def queuejob(self, event):
            if event.job.Resource_List["walltime"] is None:
                event.reject("walltime is required")

    def test_walltime_required(register_plugin, fire_event):
        register_plugin(Reject(), "walltime_check")
        outcome = fire_event("queuejob", {"job": {"id": "1.s"}})
        assert not outcome.accepted and outcome.message == "walltime is required"

Each test gets a fresh `PluginSet` with autoload off (no installed plugin is loaded) and an
empty site config in its tmp_path. `register_plugin` enables a plugin object for that test,
with optional hook attributes and configuration; `fire_event` runs an event through the
registered hooks and returns the `pbsplug.Outcome`. `local_engine` starts a real
local-engine server with the installed plugins for end-to-end tests (`site_toml` writes its
site config), and `until` waits for what it does. `unix_user` is a second Unix user (root
only), for ``engine.as_user(...)``; `attacker` is that user with an environment of its own
on the system interpreter, to run ``pbsplug`` commands and Python as that user would;
`unsafe_folder` is a folder that user could write in, for a plugin's folder root must refuse.
A request the server refuses raises `PbsError` (``from pbsplug.testing import PbsError``),
with PBS's error number as its ``code``.
"""

from __future__ import annotations

import signal
import time
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

from . import values
from .engine.errors import PbsError as PbsError  # what a refused local_engine request raises
from .events import Event
from .plugins import FAILED, PluginRecord, PluginSet
from .runner import Outcome, Runner
from .siteconfig import PluginSite, SiteConfig

if TYPE_CHECKING:
    from pathlib import Path


def _umask_now() -> int:
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The test process's umask when pytest loaded this plugin.
_START_UMASK = _umask_now()


@pytest.fixture(autouse=True)
def _umask_back() -> Iterator[None]:
    """Each test starts and ends with the umask the test process started with: an `Engine`
    made in the process sets the server's private one (077), which every later test's
    folders and files, and the servers they start, would otherwise get."""
    import os

    os.umask(_START_UMASK)
    yield
    os.umask(_START_UMASK)


@pytest.fixture(autouse=True)
def _no_server_resources() -> Iterator[None]:
    """Each test starts with no server's custom resources known to the kernel's values
    rules (`values.use_resources`): an engine sets them before each event, and one left by
    an earlier test in the process decided a later one's answer."""
    values.use_resources(None)
    yield
    values.use_resources(None)


@pytest.fixture
def pbsplug_plugins(tmp_path: Path) -> PluginSet:
    """A fresh plugin set with no plugin loaded and an empty site config."""
    return PluginSet(SiteConfig(path=tmp_path / "site.toml"))


@pytest.fixture
def register_plugin(pbsplug_plugins: PluginSet,
                    monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., PluginRecord]]:
    """``register_plugin(plugin, name=None, *, config=None, check=True, **attributes)``:
    enable `plugin` (a module or object with hookimpls) for this test. A module's names
    are put back after the test (`_put_back`): what its `configure` (or a hook run in this
    process) bound there, such as the configuration it keeps, reaches no later test.
    (`monkeypatch` is asked for so that the test's is undone after that: a name it patched
    before the module was registered is then put back as it was before the patch.)

    `attributes` override hook attributes as the site would (``order=5``, ``alarm=2``,
    ``isolation="process"``...); `config` is the plugin's configuration, checked against its
    schema. With `check` (the default) a plugin that fails to load fails the test with the
    loader's message; without it the failed record is returned. A name registered again is
    the plugin loaded again, with this call's attributes and configuration (`PluginSet.add`).
    """
    modules: dict[int, tuple[types.ModuleType, dict[str, Any]]] = {}

    def register(plugin: Any, name: str | None = None, *, config: Mapping[str, Any] | None = None,
                 check: bool = True, **attributes: Any) -> PluginRecord:
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__.lower()
        if isinstance(plugin, types.ModuleType):  # (it outlives the test; an object does not)
            modules.setdefault(id(plugin), (plugin, dict(vars(plugin))))
        pbsplug_plugins.site.plugins[name] = PluginSite(
            name, enabled=True, attributes=dict(attributes), config=dict(config or {}))
        record = pbsplug_plugins.add(name, plugin)
        if check and record.status == FAILED:
            pytest.fail(record.failure_text(), pytrace=False)
        return record

    yield register
    for module, names in modules.values():
        _put_back(module, names)


def _put_back(module: types.ModuleType, names: dict[str, Any]) -> None:
    """Each of `names` bound in `module` again as it was, where it now names another object
    (an object changed in place stays changed). A name bound since is left: deleting one
    could take away a submodule that an import bound, which the import system does not
    bind again."""
    now = vars(module)
    for name, value in names.items():
        if now.get(name, names) is not value:
            now[name] = value


@pytest.fixture
def fire_event(pbsplug_plugins: PluginSet) -> Callable[..., Outcome]:
    """``fire_event(event, data=None, *, mode=None)``: run an event through the registered
    hooks. `event` is an event name (with `data` keyed by PBS's names: job, vnode_list, ...)
    or a `pbsplug.Event`; `mode` forces ``process`` or ``inprocess`` for every hook."""

    def fire(event: str | Event, data: Mapping[str, Any] | None = None, *,
             mode: str | None = None) -> Outcome:
        ev = event if isinstance(event, Event) else Event.from_dict(event, data or {})
        return Runner(pbsplug_plugins, mode=mode).fire(ev)

    return fire


@pytest.fixture
def local_engine() -> Iterator[Callable[..., Any]]:
    """``local_engine(site_toml="", env=None)``: a real local-engine server, started in a
    fresh home under /tmp with `site_toml` as its site config, for end-to-end tests of
    installed plugins (`pbsplug.engine.testing.LocalEngine`: ``submit``, ``wait``, ``job``,
    ``nodes``, ``log``, ``client(op, ...)``, ``pbs("qstat", "-f")``). Servers, their jobs and
    their homes are gone after the test."""
    from .engine.testing import LocalEngine, make_root, remove_root

    made: list[Any] = []

    def make(site_toml: str = "", env: Mapping[str, str] | None = None) -> Any:
        engine = LocalEngine(make_root(), site_toml, env)
        made.append(engine)
        return engine.start()

    yield make
    for engine in made:
        engine.stop()
        remove_root(engine.root)


#: The second Unix user `unix_user` makes.
SECOND_USER = "pbsplugtu"


@pytest.fixture(scope="session")
def unix_user() -> str:
    """A second Unix user (made once, with useradd, and its home folder, 0700: a job starts
    in its owner's home, as PBS starts it), for tests of what another user may do: jobs run
    as their owner, files a job must not change. Skips, saying why, without root or without
    useradd, runuser or curl."""
    import os
    import pwd
    import shutil
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("needs root: creates a Unix user and runs jobs as their owners")
    for tool, package in (("useradd", "passwd"), ("runuser", "util-linux"), ("curl", "curl")):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (Debian package {package}) to act as a second user")
    with _machine_lock("user"):
        try:
            pwd.getpwnam(SECOND_USER)
        except KeyError:
            subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", SECOND_USER],
                           check=True)
        user = pwd.getpwnam(SECOND_USER)
        if not os.path.isdir(user.pw_dir):  # (made by an older fixture without one)
            os.makedirs(os.path.dirname(user.pw_dir), exist_ok=True)
            os.mkdir(user.pw_dir, 0o700)
            os.chown(user.pw_dir, user.pw_uid, user.pw_gid, follow_symlinks=False)
    return SECOND_USER


#: Where the root-only fixtures keep what they make of the machine (lock files, the
#: attacker's environment): a folder of root's in /var/lib, where no other user can plant
#: a file or a link before them, as anyone can in /var/tmp.
MACHINE_STATE = "/var/lib/pbsplug-tests"


def _machine_state() -> str:
    """`MACHINE_STATE`, made if missing and open to every user to read and enter (the
    second user runs the attacker's environment in it, whatever the umask); an error if
    it is not a folder of this user's that no one else may write to (a link, or another
    owner's)."""
    import os
    import stat

    try:
        os.mkdir(MACHINE_STATE, 0o755)
    except FileExistsError:
        pass
    except OSError as exc:
        missing(f"cannot make {MACHINE_STATE}: {exc.strerror or exc}")
    try:  # (checked and opened up through one descriptor: no link followed, no race)
        fd = os.open(MACHINE_STATE, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        fd = None
    try:
        st = os.fstat(fd) if fd is not None else None
        if fd is None or st is None or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise RuntimeError(f"{MACHINE_STATE} is not a folder of uid {os.geteuid()} that "
                               "only it may write to: remove it")
        if stat.S_IMODE(st.st_mode) != 0o755:
            os.fchmod(fd, 0o755)
    finally:
        if fd is not None:
            os.close(fd)
    return MACHINE_STATE


#: The `_machine_lock` of the machine's real cgroup v1 cpuset root: held shared by a test
#: that makes cpusets there, whole by one that makes its prefix mem_exclusive there, which
#: keeps every other cpuset beside it from the memory nodes it has (on most machines, all).
CPUSET_ROOT_LOCK = "cpuset-root"


@contextmanager
def _machine_lock(name: str, shared: bool = False) -> Iterator[None]:
    """Held while a fixture makes or changes something of the machine's (a user, an
    environment, ns_last_pid): `make test` runs several pytests at once (its workers, and
    the adapters' beside them). `shared`: held by any number at once, but never with the
    lock taken whole (a test that may not share the machine's cpuset root with others)."""
    import fcntl
    import os

    fd = os.open(f"{_machine_state()}/{name}.lock",
                 os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def site_toml(plugin: str, config: Mapping[str, Any] | None = None, **attributes: Any) -> str:
    """The site config that enables `plugin` with hook `attributes` (``freq=1``) and its
    `config`, as TOML text for ``local_engine(site_toml(...))``."""
    import tomlkit

    section: dict[str, Any] = {"enabled": True, **attributes}
    if config:
        section["config"] = dict(config)
    return tomlkit.dumps({"plugins": {plugin: section}})


def missing(why: str) -> None:
    """A test cannot get what it needs (root, a package, a tool): it fails under CI
    (``CI=true``, where a skip would pass for done) and skips elsewhere, saying why."""
    import os

    if os.environ.get("CI") == "true":
        pytest.fail(f"needed under CI: {why}", pytrace=False)
    pytest.skip(why)


def require_module(name: str, why: str = "") -> Any:
    """The module `name`, imported; when it cannot be, `missing` (fails under CI)."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(why or f"module {name} cannot be imported ({exc}); `make` installs every "
                "package of this repository")


def ctrl_c_works() -> None:
    """``preexec_fn`` for a command a test stops with SIGINT, as Ctrl-C would: the signal's
    default action in the child. A suite run from a shell in the background inherits SIGINT
    ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def until(check: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    """Poll `check` every 50 ms until it returns something true, and return that; fail the
    test (AssertionError) after `timeout` seconds. For what a server does in its own time:
    ``until(lambda: engine.job(j)["job_state"] == "R", what="the job to run")``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
        time.sleep(0.05)


#: The interpreter an unprivileged user can run: the project's own may live under /root.
SYSTEM_PYTHON = "/usr/bin/python3"
#: What the attacker's environment installs besides pbsplug: the CLI's dependencies, and a
#: setuptools that can build pbsplug editable (Debian's 66 cannot).
_ATTACKER_DEPS = ("setuptools>=77", "wheel", "pluggy>=1.5", "typer>=0.12", "requests>=2.32",
                  "requests-unixsocket>=0.4.1", "tomlkit>=0.12", "rich>=13")


class Attacker:
    """An unprivileged local user with an environment of its own (`venv`, on the system
    interpreter, with this checkout of pbsplug installed editable): `pbs` runs ``pbsplug``
    commands and `python` runs code, both as that user through ``runuser``."""

    def __init__(self, user: str, venv: Any):
        import pwd

        self.user = user
        self.venv = venv
        pw = pwd.getpwnam(user)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid

    def _run(self, argv: list[str], home: Any, input: str | None, cwd: Any,
             timeout: float) -> Any:
        import os
        import shutil
        import subprocess

        env = {"PATH": f"{self.venv}/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
               "HOME": "/tmp", "USER": self.user, "LOGNAME": self.user}
        if home is not None:
            env["PBSPLUG_HOME"] = str(getattr(home, "root", home))
        runuser = shutil.which("runuser") or "runuser"
        return subprocess.run([runuser, "-u", self.user, "--", *argv], capture_output=True,
                              text=True, input=input, env=env, cwd=cwd or "/tmp",
                              timeout=timeout, preexec_fn=os.setsid)

    def pbs(self, home: Any, *args: str, input: str | None = None, cwd: Any = None,
            timeout: float = 60.0) -> Any:
        """``pbsplug ARGS`` as the attacker against the server in `home` (a path or a
        `LocalEngine`); the CompletedProcess (text)."""
        return self._run([f"{self.venv}/bin/pbsplug", *args], home, input, cwd, timeout)

    def python(self, code: str, *args: str, home: Any = None, cwd: Any = None,
               timeout: float = 60.0) -> Any:
        """Run Python `code` (``sys.argv[1:]`` is `args`) as the attacker."""
        return self._run([f"{self.venv}/bin/python", "-c", code, *args], home, None, cwd,
                         timeout)


@pytest.fixture
def shared_tmp() -> Iterator[Any]:
    """A fresh folder under /tmp, root's (the test's user's) and 0755, that every user may
    traverse, for what the `attacker` must reach (pytest's tmp_path is 0700); removed after
    the test."""
    import shutil
    import tempfile
    from pathlib import Path

    top = Path(tempfile.mkdtemp(prefix="pbsplug-test-", dir="/tmp"))
    top.chmod(0o755)
    yield top
    shutil.rmtree(top, ignore_errors=True)


class UnsafeFolder:
    """A folder another user could write in (`unsafe_folder`): its `path`, which of the two
    `kind`s it is, and the `problem` as `pbsplug.safedirs` words it in a refusal."""

    def __init__(self, path: Any, kind: str, problem: str):
        self.path, self.kind, self.problem = path, kind, problem


@pytest.fixture(params=["made by the attacker", "world-writable"])
def unsafe_folder(request: Any, shared_tmp: Any, attacker: Attacker) -> UnsafeFolder:
    """A folder in a sticky folder everyone may write (as /tmp), that another user could
    write in, made each of the two ways (the test runs once for each): by the `attacker`
    before root came (theirs, mode 0755), or by root but writable by everyone (mode 1777).
    For a plugin's state or data folder, which root must refuse rather than trust."""
    sticky = shared_tmp / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp
    path = sticky / "folder"
    if request.param == "world-writable":
        path.mkdir()
        path.chmod(0o1777)
        problem = (f"{path} is writable by everyone (owner uid 0 (root), mode 1777): others "
                   "may add files to it")
    else:
        done = attacker.python("import os, sys; os.mkdir(sys.argv[1], 0o755)", str(path))
        assert done.returncode == 0, done.stderr
        problem = f"{path} is owned by uid {attacker.uid} ({attacker.user}), mode 0755"
    return UnsafeFolder(path, request.param, problem)


@pytest.fixture(scope="session")
def attacker(unix_user: str) -> Attacker:
    """The second Unix user with an environment on the system interpreter (made once per
    checkout under `MACHINE_STATE`, pbsplug installed editable from this checkout), for
    attacks made as an unprivileged user would make them. Skips without /usr/bin/python3;
    under CI (``CI=true``) a missing piece fails instead."""
    import hashlib
    import os
    import subprocess
    import sys
    from pathlib import Path

    checkout = Path(__file__).resolve().parent.parent
    if not Path(SYSTEM_PYTHON).exists():
        message = f"needs {SYSTEM_PYTHON} (Debian package python3-venv) for the attacker"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    key = hashlib.sha256(f"{checkout}\n{sys.prefix}".encode()).hexdigest()[:12]
    venv = Path(_machine_state()) / f"attacker-{key}"
    stamp = venv / ".installed"
    with _machine_lock(f"attacker-{key}"):
        if not stamp.exists():
            subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(venv)], check=True)
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                   "--disable-pip-version-check"]
            subprocess.run([*pip, *_ATTACKER_DEPS], check=True)
            subprocess.run([*pip, "--no-deps", "--no-build-isolation", "-e", str(checkout)],
                           check=True, cwd="/tmp")
            stamp.write_text("ok\n")
    venv.chmod(0o755)
    return Attacker(unix_user, venv)
