"""The bridge's conversions both ways, against PBS's real ``pbs`` module (run under PBS's own
``pbs_python``, as the hooks are)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from .conftest import resetting_socket

PBS_PATH = "/opt/pbs/lib/python/altair:/opt/pbs/lib/python/altair/pbs/v1"


def _in_pbs_python(pbs_python: Path, code: str) -> dict:
    script = textwrap.dedent("""
        import json, site, sys
        site.addsitedir(sys.argv[1])
        import pbs
        from pbs.v1 import _base_types as types
        from pbsplug.adapters.pbs_wire import Types, plain, pbs_value
        t = Types(pbs)
    """) + textwrap.dedent(code)
    done = subprocess.run([str(pbs_python), "-c", script, sysconfig.get_paths()["purelib"]],
                          capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": PBS_PATH, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_pbs_types_become_pbsplug_plain_data(built_pbs):
    out = _in_pbs_python(built_pbs, """
        values = {
            "size": pbs.size("10gb"), "duration": pbs.duration("01:02:03"),
            "select": pbs.select("2:ncpus=4:mem=1gb"), "place": pbs.place("scatter:excl"),
            "exec_vnode": pbs.exec_vnode("(vm:ncpus=2)+(vm2:ncpus=1)"),
            "job_state": types.job_state("R"), "held": types.job_state("H"),
            "busy": pbs.vnode_state(pbs.ND_OFFLINE | pbs.ND_JOBBUSY),
            "free": pbs.vnode_state(pbs.ND_STATE_FREE), "sleep": pbs.vnode_state(pbs.ND_SLEEP),
            "sharing": pbs.vnode_sharing(pbs.ND_FORCE_EXCL),
            "env": pbs.pbs_env({"A": "1", "B": "x y"}), "hold": pbs.hold_types("us"),
            "int": types.pbs_int(5), "float": types.pbs_float(2.5), "none": None,
        }
        print(json.dumps({k: plain(v, t) for k, v in values.items()}))
    """)
    assert out == {
        "size": "10gb", "duration": "01:02:03", "select": "2:ncpus=4:mem=1gb",
        "place": "scatter:excl", "exec_vnode": "(vm:ncpus=2)+(vm2:ncpus=1)",
        "job_state": "R", "held": "H", "busy": "offline,job-busy", "free": "free",
        "sleep": "sleep", "sharing": "force_excl", "env": {"A": "1", "B": "x y"},
        "hold": "us", "int": 5, "float": 2.5, "none": None}


def test_plain_values_go_back_as_pbs_types(built_pbs):
    out = _in_pbs_python(built_pbs, """
        state = pbs_value(pbs, "state", "offline,job-busy", t)
        free = pbs_value(pbs, "state", "free", t)
        sharing = pbs_value(pbs, "sharing", "default_excl", t)
        try:
            pbs_value(pbs, "state", "no-such-state", t)
            bad = None
        except ValueError as exc:
            bad = str(exc)
        print(json.dumps({
            "state": [type(state).__name__, int(state) == pbs.ND_OFFLINE | pbs.ND_JOBBUSY],
            "free": int(free), "sharing": int(sharing) == pbs.ND_DEFAULT_EXCL, "bad": bad,
            "job_state": pbs_value(pbs, "job_state", "Q", t) == pbs.JOB_STATE_QUEUED}))
    """)
    assert out == {"state": ["vnode_state", True], "free": 0, "sharing": True,
                   "bad": "PBS has no vnode state 'no-such-state'", "job_state": True}


def _hook_input(path: Path, variables: bytes, event: str = "execjob_begin",
                launch: tuple[bytes, list[bytes], bytes] | None = None) -> None:
    """An input file for ``pbs_python --hook -i`` (PBS's hook test mode) with a job whose
    Variable_List holds `variables`, as the MoM writes an event's objects; with `launch`,
    an execjob_launch's progname, argv and environment, as the MoM writes them (the
    environment alone in triple quotes)."""
    given: list[bytes] = []
    if launch is not None:
        progname, argv, env = launch
        given = [b"pbs.event().progname=" + progname,
                 *(b"pbs.event().argv[%d]=%s" % (i, a) for i, a in enumerate(argv)),
                 b'pbs.event().env="""' + env + b'"""']
    lines = [*given, b"pbs.event().type=" + event.encode(), b"pbs.event().hook_name=probe",
             b"pbs.event().hook_type=site", b"pbs.event().requestor=pbs_mom",
             b"pbs.event().job.id=1.srv", b"pbs.event().job.Job_Owner=mallory@h",
             b"pbs.event().job.exec_vnode=(node1:ncpus=2)",
             b"pbs.event().job.schedselect=1:ncpus=2:mem=50mb",
             b'pbs.event().job.Variable_List="""' + variables + b'"""',
             b"pbs.event().vnode_list[node1].resources_available[ncpus]=8"]
    path.write_bytes(b"\n".join(lines) + b"\n")


#: PBS's hook script (`pbs_hook`) and what it imports (pbs_wire, worker_client).
ADAPTERS = Path(__file__).parents[2] / "core" / "adapters"


def _probe_config(config: Path, dists, python: str, run_dir: Path, worker: bool = True,
                  events: tuple[str, ...] = ("execjob_begin",)) -> Path:
    """The hook config (at `config`) of the plugin `dists` holds as "probe" (`PROBE`, or a
    test's own), on `events`, through a worker (unless not `worker`), started with
    `python`, its socket in `run_dir`; the worker's socket path."""
    from pbsplug.adapters.pbs_bridge import hook_objects

    config.write_text(json.dumps({
        "installed_by": "pbsplug pbs install", "hook_name": "pbsplug_probe",
        "plugin": "probe", "entry_point": "pbsplug_probe",
        "site_dirs": [sysconfig.get_paths()["purelib"], str(dists.root)],
        "attributes": {"events": list(events), "alarm": 30, "enabled": True,
                       "fail_action": ["offline_vnodes"]},
        "config": {}, "worker": worker, "python": python,
        "wire_dir": str(ADAPTERS), "objects": hook_objects(),
        "worker_dir": str(run_dir)}))
    return run_dir / f"pbs-{hashlib.sha256(config.read_bytes()).hexdigest()[:20]}.sock"


def _run_probe(built_pbs: Path, tmp_path: Path, config: Path,
               variables: bytes = b"HOME=/home/mallory", run: str = "",
               launch: tuple[bytes, list[bytes], bytes] | None = None) -> tuple[str, str]:
    """The hook of `config` run by pbs_python's hook test mode on an execjob_begin (an
    execjob_launch of `launch`'s progname, argv and environment) of a job whose
    Variable_List holds `variables`: its results and PBS's log, in files named after
    `config` (and `run`, where one config runs more than once). (-e 255: PBS's own debug
    dump of the event's attributes, 0400, left out.)"""
    given, out, log = (config.with_name(f"{config.stem}{run}.{what}")
                       for what in ("in", "out", "log"))
    _hook_input(given, variables, "execjob_begin" if launch is None else "execjob_launch",
                launch)
    subprocess.run([str(built_pbs), "--hook", "-i", str(given),
                    "-o", str(out), "-l", str(log), "-e", "255",
                    str(ADAPTERS / "pbs_hook.py")], cwd=tmp_path, timeout=120,
                   env={"PYTHONPATH": PBS_PATH, "PATH": "/usr/bin:/bin",
                        "PBS_HOOK_CONFIG_FILE": str(config)}, capture_output=True)
    return (out.read_text(errors="replace") if out.exists() else "",
            log.read_text(errors="replace") if log.exists() else "")


def _end_workers(folder: Path) -> None:
    """End the workers this test started (their socket is in `folder`), each by its pid."""
    import signal

    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"pbsplug.adapters.worker" in argv and any(
                a.startswith(str(folder).encode() + b"/") for a in argv):
            try:
                os.kill(int(pid), signal.SIGTERM)
            except ProcessLookupError:
                pass


def _run_probe_both_ways(built_pbs: Path, tmp_path: Path, dists, variables: bytes,
                         run: str = "", launch: tuple[bytes, list[bytes], bytes] | None = None
                         ) -> dict[bool, tuple[str, str]]:
    """`_run_probe` of the plugin `dists` holds as "probe" both ways (by whether through
    the host's worker: True; in pbs_python: False), the workers it started ended after:
    each way's results and PBS's log. A launch asks only a worker that runs already (it
    never starts one): an execjob_begin of the same hook starts it first."""
    results = {}
    events = ("execjob_begin",) if launch is None else ("execjob_begin", "execjob_launch")
    try:
        for worker in (True, False):
            config = tmp_path / f"probe-{worker}.CF"
            _probe_config(config, dists, sys.executable, tmp_path / "run", worker, events)
            if worker and launch is not None:
                _run_probe(built_pbs, tmp_path, config, run=f"{run}-start")
            results[worker] = _run_probe(built_pbs, tmp_path, config, variables, run, launch)
    finally:
        _end_workers(tmp_path / "run")
    return results


def test_an_event_pbs_could_not_build_fails_closed(built_pbs, tmp_path):
    """A job attribute that is not UTF-8 makes pbs_python run the hook without the event's
    vnode_list (PBS logs "Encountered an error while setting event"). event_data left it
    out, and the plugins saw an empty one: cpuset made no cpuset for the job. It is an
    error now, as reading it is in a native hook; a clean job reads as before."""
    hook = tmp_path / "probe.py"
    hook.write_text(textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ADAPTERS)!r})
        import pbs
        import pbs_wire
        e = pbs.event()
        try:
            data = pbs_wire.event_data(pbs, e, pbs_wire.Types(pbs), ("job", "vnode_list"),
                                       True)
            what = sorted(data["vnode_list"]), data["requestor"], data["job"].get("schedselect")
        except pbs_wire.EventIncomplete as exc:
            what = "incomplete: " + str(exc)
        pbs.logmsg(pbs.LOG_ERROR, "PROBE " + json.dumps(what))
        e.accept()
    """))
    seen = {}
    for name, variables in (("clean", b"HOME=/home/mallory"),
                            ("not_utf8", b"HOME=/home/mallory,X=\xff")):
        _hook_input(tmp_path / f"{name}.in", variables)
        subprocess.run([str(built_pbs), "--hook", "-i", str(tmp_path / f"{name}.in"),
                        "-o", str(tmp_path / f"{name}.out"), "-l", str(tmp_path / f"{name}.log"),
                        "-e", "2047", str(hook)], cwd=tmp_path, timeout=60,
                       env={"PYTHONPATH": PBS_PATH, "PATH": "/usr/bin:/bin"},
                       capture_output=True)
        log = (tmp_path / f"{name}.log").read_text(errors="replace")
        probes = [line.split("PROBE ", 1)[1] for line in log.splitlines() if "PROBE " in line]
        seen[name] = json.loads(probes[0]) if probes else log
    # (a job's schedselect reaches the plugins as PBS's select string)
    assert seen["clean"] == [["node1"], "pbs_mom", "1:ncpus=2:mem=50mb"]
    assert seen["not_utf8"].startswith("incomplete: PBS gave this event no vnode_list"), seen


def test_the_hook_rejects_an_event_pbs_could_not_build_and_runs_no_plugin(built_pbs,
                                                                         tmp_path, dists):
    """pbsplug's hook script under PBS's pbs_python (the MoM's way), both paths: through the
    worker and in pbs_python. A job whose Variable_List is not UTF-8 is rejected (no
    fail_action: the node stays in service) and the plugin never runs; a clean one runs."""
    dists.add("probe", "from pbsplug import PluginInfo, hookimpl\n"
                       "plugin_info = PluginInfo(events=('execjob_begin',))\n"
                       "@hookimpl\ndef execjob_begin(event):\n"
                       "    event.job.comment = 'ran on ' + ','.join(sorted(event.vnode_list))\n")
    seen = {name: _run_probe_both_ways(built_pbs, tmp_path, dists, variables, f"-{name}")
            for name, variables in (("clean", b"HOME=/home/mallory"),
                                    ("not_utf8", b"HOME=/home/mallory,X=\xff"))}
    for worker in (True, False):
        results = {name: seen[name][worker][0] for name in seen}
        assert "pbs.event().accept=True" in results["clean"], (worker, results)
        assert "ran on node1" in results["clean"], (worker, results)
        assert "pbs.event().reject=True" in results["not_utf8"], (worker, results)
        assert "PBS gave this event no vnode_list" in results["not_utf8"]
        assert "ran on" not in results["not_utf8"]


def test_a_job_owners_line_break_writes_no_line_of_theirs_for_pbs(built_pbs, tmp_path,
                                                                  dists):
    """PBS writes a hook's log lines and reject message as they come, and the MoM reads a
    hook's outcome back from a file of ``name=value`` lines (pbs_python's results file). A
    plugin that quotes a job owner's value there (a Variable_List entry, as a site's policy
    hook would) let the owner's line break make lines of their own: a forged record in
    PBS's log, and lines the MoM reads as the hook's results (``pbs.reboot=True``, a
    vnode's state). Every text pbsplug hands PBS is one line now, control characters
    shown escaped. Both paths: the worker, and in pbs_python."""
    dists.add("probe", "from pbsplug import PluginInfo, hookimpl\n"
                       "plugin_info = PluginInfo(events=('execjob_begin',))\n"
                       "@hookimpl\ndef execjob_begin(event):\n"
                       "    project = event.job.Variable_List.get('PROJECT')\n"
                       "    event.logger.info('job %s: project %s', event.job.id, project)\n"
                       "    event.reject(f'project {project} has no time left here')\n")
    forged = "12/06/2026 10:00:00;0008;pbs_mom;Job;1.srv;Job deleted at request of root"
    injected = ["pbs.reboot=True", "pbs.event().vnode_list[node1].state=offline", forged]
    variables = ("HOME=/home/mallory,PROJECT=x\n" + "\n".join(injected)).encode()
    results = _run_probe_both_ways(built_pbs, tmp_path, dists, variables)
    escaped = "x\\n" + "\\n".join(injected)
    for worker, (out, log) in results.items():
        assert "pbs.event().reject=True" in out, (worker, out, log)
        assert f"pbs.event().reject_msg=project {escaped} has no time left" in out, out
        assert not [line for line in out.splitlines() if line in injected], (worker, out)
        assert f"probe: job 1.srv: project {escaped}\n" in log, (worker, log)
        assert not [line for line in log.splitlines() if line in injected], (worker, log)


def test_a_job_owners_line_break_in_a_value_a_plugin_sets_adds_no_result_for_the_mom(
        built_pbs, tmp_path, dists):
    """pbs_python writes what a hook set on PBS's objects into the results file the MoM
    reads back, ``pbs.event().job.comment=<value>``, one line each and unquoted (only
    Variable_List and the launch environment are quoted). A plugin that put a job owner's
    value in a job's or a vnode's comment (free text, where pbsplug allows line breaks)
    let the owner's line break add results of their own (``pbs.reboot=True``, another
    vnode's state). What pbsplug sets on PBS's objects is one line now, control
    characters shown escaped."""
    dists.add("probe", "from pbsplug import PluginInfo, hookimpl\n"
                       "plugin_info = PluginInfo(events=('execjob_begin',))\n"
                       "@hookimpl\ndef execjob_begin(event):\n"
                       "    project = event.job.Variable_List.get('PROJECT')\n"
                       "    event.job.comment = f'project {project}'\n"
                       "    event.vnode_list['node1'].comment = f'last: {project}'\n")
    injected = ["pbs.reboot=True", "pbs.event().vnode_list[node1].state=offline"]
    variables = ("HOME=/home/mallory,PROJECT=x\n" + "\n".join(injected)).encode()
    results = {worker: out for worker, (out, _) in
               _run_probe_both_ways(built_pbs, tmp_path, dists, variables).items()}
    escaped = "x\\n" + "\\n".join(injected)
    for worker, out in results.items():
        assert "pbs.event().accept=True" in out, (worker, out)
        assert f"pbs.event().job.comment=project {escaped}\n" in out, (worker, out)
        assert f'pbs.event().vnode_list["node1"].comment=last: {escaped}\n' in out, out
        assert not [line for line in out.splitlines() if line in injected], (worker, out)


def test_a_job_owners_line_break_in_a_launch_argument_adds_no_result_for_the_mom(
        built_pbs, tmp_path, dists):
    """The MoM writes an execjob_launch's progname and argv unquoted into the hook's input,
    one ``name=value`` line each, and pbs_python writes them back as the hook leaves them,
    unquoted, into the results the MoM reads (accepted or rejected). An argument in
    three double quotes is read as one value over several lines (an owner's
    ``qsub -- /bin/echo`` with such an argument holding a line break), so its lines came
    back as results of the owner's own (``pbs.reboot=True``, a vnode's state). The hook now
    rejects such a launch (PBS deletes the job), sets progname and argv on one line first,
    and runs no plugin. The environment is quoted both ways: a value with triple quotes at
    a line's end is cut there on the way in, and adds no line. Both paths: the worker, and
    in pbs_python."""
    dists.add("probe", "import sys\n"
                       "from pbsplug import PluginInfo, hookimpl\n"
                       "plugin_info = PluginInfo(events=('execjob_begin', "
                       "'execjob_launch'))\n"
                       "@hookimpl\ndef execjob_begin(event):\n"
                       "    pass\n"  # (its worker's start, for the launch)
                       "@hookimpl\ndef execjob_launch(event):\n"
                       "    where = 'pbs_python' if 'pbs' in sys.modules else 'worker'\n"
                       "    event.env['PROBE'] = where + ':' + str(len(event.argv))\n")
    injected = [b"pbs.reboot=True", b"pbs.event().vnode_list[node1].state=offline"]
    sneaked = b'"""x\n' + b"\n".join(injected) + b'"""'
    home = b"HOME=/home/mallory"
    cases = {
        "clean": (b"/bin/echo", [b"/bin/echo", b"hi"], home),
        "argv": (b"/bin/echo", [b"/bin/echo", sneaked], home),
        "progname": (sneaked, [b"/bin/echo"], home),
        "env": (b"/bin/echo", [b"/bin/echo", b"hi"],
                home + b',X=a"""\n' + b"\n".join(injected) + b"\nY=b"),
    }
    seen = {case: _run_probe_both_ways(built_pbs, tmp_path, dists, home, f"-{case}", launch)
            for case, launch in cases.items()}
    escaped = "x\\n" + "\\n".join(i.decode() for i in injected)
    for worker in (True, False):
        out = {case: seen[case][worker][0] for case in cases}
        where = "worker" if worker else "pbs_python"
        for case in cases:
            assert not [line for line in out[case].splitlines()
                        if line.encode() in injected], (worker, case, out[case])
        assert "pbs.event().accept=True" in out["clean"], (worker, out)
        assert f'PROBE={where}:2"""' in out["clean"], (worker, out)
        assert "pbs.event().accept=True" in out["env"], (worker, out)
        assert f'PROBE={where}:2"""' in out["env"], (worker, out)
        for case, what in (("argv", "argv[1]"), ("progname", "progname")):
            assert "pbs.event().reject=True" in out[case], (worker, case, out[case])
            assert f"pbs.event().reject_msg=pbsplug: the job's {what} holds a line break" \
                in out[case], (worker, case, out[case])
            assert "PROBE=" not in out[case], (worker, case, out[case])  # no plugin ran
        assert f"pbs.event().argv[1]={escaped}\n" in out["argv"], (worker, out)
        assert f"pbs.event().progname={escaped}\n" in out["progname"], (worker, out)


#: The plugin of the tests of a worker that cannot be had: it says it ran.
PROBE = ("from pbsplug import PluginInfo, hookimpl\n"
         "plugin_info = PluginInfo(events=('execjob_begin',))\n"
         "@hookimpl\ndef execjob_begin(event):\n"
         "    event.job.comment = 'ran here'\n")


def _ran_in_pbs_python_saying(out: str, log: str, says: str, case: str = "") -> None:
    """The probe ran (in pbs_python) and PBS's log has one line of pbsplug's saying `says`
    and that it did."""
    assert "pbs.event().accept=True" in out, (case, out, log)
    assert "pbs.event().job.comment=ran here\n" in out, (case, out, log)
    why = [line for line in log.splitlines() if "pbsplug: execjob_begin: " in line]
    assert len(why) == 1 and says in why[0], (case, log)
    assert why[0].endswith("; the plugin runs in this process"), (case, log)


def test_a_worker_that_cannot_be_started_leaves_the_plugin_to_run_in_pbs_python(
        built_pbs, tmp_path, dists):
    """An execution-host event that finds no worker starts one; when that start failed (its
    folder cannot be made: /run read-only, a full disk; its lock; its process) the error
    failed the hook, and PBS's fail_action could take the node offline, while a worker
    that cannot be asked (a reset connection) already left the plugin to run in
    pbs_python. A start that fails is that fallback now, with one line in PBS's log
    saying why. An unsafe folder is still never used (its refusal, said on stderr, which
    PBS keeps nowhere, is that log line now), nor is a worker that ended at start."""
    dists.add("probe", PROBE)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    lock_dir = tmp_path / "lock"
    unsafe = tmp_path / "un\nsafe"  # (the log line is one line, the break shown escaped)
    unsafe.mkdir(mode=0o777)
    unsafe.chmod(0o777)
    cases = {  # the worker's run folder, its python, and what the log line says
        "folder": (a_file / "run", sys.executable, f"Not a directory: '{a_file / 'run'}'"),
        "lock": (lock_dir, sys.executable, ".sock.lock'"),
        "spawn": (tmp_path / "run", str(tmp_path / "no-python"),
                  f"No such file or directory: '{tmp_path / 'no-python'}'"),
        "ended": (tmp_path / "run", "/bin/false", "ended at start, exit status 1"),
        "unsafe": (unsafe / "run", sys.executable, f"{tmp_path}/un\\nsafe is writable by "
                   "everyone (owner uid 0 (root), mode 0777), so another user could plant"),
    }
    results = {}
    try:
        for case, (run_dir, python, _) in cases.items():
            config = tmp_path / f"{case}.CF"
            sock = _probe_config(config, dists, python, run_dir)
            if case == "lock":  # the lock's name taken by a folder: it cannot be opened
                lock_dir.mkdir(mode=0o700, exist_ok=True)
                Path(f"{sock}.lock").mkdir()
            results[case] = _run_probe(built_pbs, tmp_path, config)
    finally:
        _end_workers(tmp_path)
    for case, (out, log) in results.items():
        _ran_in_pbs_python_saying(out, log, cases[case][2], case)
    assert not (unsafe / "run").exists()  # the unsafe folder was not used


def test_a_worker_that_resets_the_connection_twice_is_said_in_pbs_log(built_pbs, tmp_path,
                                                                       dists):
    """A connection to the host's worker reset before any answer (a worker that left with
    it unaccepted) is asked again once, of a new worker; reset again, the plugin ran in
    pbs_python without a word, where a worker that cannot be started says why in PBS's
    log. It says so now. The worker's socket here is one that resets every connection
    once the request has come (closed with it unread)."""
    dists.add("probe", PROBE)
    config = tmp_path / "reset.CF"
    sock = _probe_config(config, dists, sys.executable, tmp_path / "run")
    sock.parent.mkdir(mode=0o700)
    try:
        with resetting_socket(sock) as resets:
            out, log = _run_probe(built_pbs, tmp_path, config)
    finally:
        _end_workers(tmp_path)
    assert resets == [b"{", b"{"]  # asked twice, reset twice
    _ran_in_pbs_python_saying(out, log, f"the worker at {sock} reset the connection twice, "
                              "unanswered: Connection reset by peer")


def test_a_hook_config_nested_too_deeply_is_not_pbsplugs(tmp_path):
    """`installed` reads each pbsplug_ hook's config from qmgr: one nested 100,000 deep was
    json.loads' RecursionError, a traceback of 'pbsplug pbs status' and install."""
    from pbsplug.adapters import pbs

    (tmp_path / "deep").write_text("[" * 100_000)
    (tmp_path / "ours").write_text(json.dumps({"installed_by": pbs.INSTALLED_BY}))
    qmgr = tmp_path / "qmgr"
    qmgr.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$2" in
          "list hook") printf 'Hook pbsplug_deep\\n    type = site\\n'
                       printf 'Hook pbsplug_ours\\n    type = site\\n' ;;
          "export hook pbsplug_deep "*) cat {tmp_path / "deep"} ;;
          "export hook pbsplug_ours "*) cat {tmp_path / "ours"} ;;
        esac
        """))
    qmgr.chmod(0o755)
    assert pbs.installed(pbs.Qmgr([str(qmgr)])) == {
        "pbsplug_ours": {"installed_by": pbs.INSTALLED_BY}}


@pytest.mark.parametrize("text", [
    '{"installed_by": "another tool", "installed_by": "INSTALLED_BY"}',
    '{"installed_by": "INSTALLED_BY", "n": NaN}',
    '{"installed_by": "INSTALLED_BY", "n": %s}' % ("9" * 2000),
    '{"installed_by": "INSTALLED_BY", "n": %s}' % ("[" * 600 + "]" * 600),
], ids=["installed_by twice", "NaN", "2000 digits", "600 deep"])
def test_a_hook_config_json_loads_took_wrongly_is_not_pbsplugs(tmp_path, text):
    """json.loads took a key twice (the last one), NaN, a 2,000-digit integer and nesting
    600 deep: such a config, which pbsplug never writes, counted as pbsplug's (its
    uninstall removed that hook). It is read with `pbsplug.jsontext` now. The control: a
    hook beside it, read the same way, whose config is pbsplug's own (the same keys, each
    once, plain values) counts as pbsplug's."""
    from pbsplug.adapters import pbs

    (tmp_path / "odd").write_text(text.replace("INSTALLED_BY", pbs.INSTALLED_BY))
    (tmp_path / "ours").write_text(json.dumps({"installed_by": pbs.INSTALLED_BY, "n": 1}))
    qmgr = tmp_path / "qmgr"
    qmgr.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$2" in
          "list hook") printf 'Hook pbsplug_odd\\n    type = site\\n'
                       printf 'Hook pbsplug_ours\\n    type = site\\n' ;;
          "export hook pbsplug_odd "*) cat {tmp_path / "odd"} ;;
          "export hook pbsplug_ours "*) cat {tmp_path / "ours"} ;;
        esac
        """))
    qmgr.chmod(0o755)
    assert pbs.installed(pbs.Qmgr([str(qmgr)])) == {
        "pbsplug_ours": {"installed_by": pbs.INSTALLED_BY, "n": 1}}
