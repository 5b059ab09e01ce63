"""The native launcher (slurm_launcher.c) against the Python program it stands in for: the
same request reaches a real worker, and the same answers come out as the same exit status
and bytes on stdout and stderr; where it cannot ask (no worker, an environment it does not
send itself), it is the Python program."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pbsplug.adapters import slurm, slurm_program
from pbsplug.testing import missing, until

from .conftest import resetting_socket

#: A dispatcher that answers what the request's PBSPLUG_TEST_ANSWER says (a Python literal),
#: and, for "echo", the request it got (without who sent it).
ECHO_DISPATCH = """
import ast

def load(config):
    return None

def dispatch(_, request):
    said = request["env"].get("PBSPLUG_TEST_ANSWER", "echo")
    if said == "echo":
        seen = {k: v for k, v in request.items() if k not in ("_peer", "answer")}
        env = dict(seen["env"])
        env.pop("LC_CTYPE", None)  # the Python program's own locale coercion (PEP 538)
        seen["env"] = env
        return {"exit": 0, "stdout": repr(sorted(seen.items())) + "\\n", "error": ""}
    return ast.literal_eval(said)
"""

#: Runs argv[1] with an environment that names A twice (execve itself: no dict can).
EXEC_TWICE = """
import ctypes, sys
strings = lambda *s: (ctypes.c_char_p * (len(s) + 1))(*[x.encode() for x in s], None)
ctypes.CDLL(None, use_errno=True).execve(sys.argv[1].encode(), strings(sys.argv[1]),
                                         strings("A=first", "A=second"))
sys.exit("execve failed")
"""

ANSWERS = [
    {"exit": 0, "stdout": "", "error": ""},
    {"exit": 1, "stdout": "", "error": "pbsplug prolog: rejected by hook x"},
    {"exit": 3, "stdout": "two\nlines\n", "error": "and an error"},
    {"exit": 0, "stdout": "caf\u00e9 \u2603 no newline at the end", "error": None},
    {"exit": True, "stdout": "x\n"},
    {"exit": 256 + 7, "stdout": "", "error": ""},
    {"exit": None, "stdout": "", "error": "exit None is 0"},
    {"kind": "error", "detail": "pbsplug worker: RuntimeError: broken"},
    "not a dict",
]


@pytest.fixture(scope="module")
def launchers(tmp_path_factory):
    """A worker with ECHO_DISPATCH, a Python program and a launcher for it; another pair
    whose socket has no worker and whose config is missing."""
    cc = slurm.compiler()
    if not cc:
        missing("no C compiler (cc, gcc)")
    if os.geteuid() != 0:
        missing("needs root: the launcher asks the worker only as root")
    tmp = tmp_path_factory.mktemp("launcher")
    code = tmp / "code"
    code.mkdir()
    (code / "echodispatch.py").write_text(ECHO_DISPATCH)
    config = tmp / "config.json"
    config.write_text(json.dumps({"loader": "echodispatch:load", "python": sys.executable,
                                  "dispatcher": "echodispatch:dispatch", "site_dirs":
                                  [str(code)], "encoding": "marshal", "deadline": 60}))
    run = Path("/run") / f"pbsplug-launcher-{os.getpid()}"
    sock = run / "w.sock"
    adapters = str(Path(slurm_program.__file__).parent)
    pairs = {}
    for kind, conf, path in (("worker", config, sock),
                             ("none", tmp / "missing.json", run / "none.sock")):
        program = tmp / f"prolog-{kind}"
        program.write_text(slurm_program.program_text(sys.executable, adapters, "prolog",
                                                      str(conf), str(path)))
        program.chmod(0o755)
        native = tmp / f"prolog-{kind}-native"
        slurm.compile_launcher(cc, {"PBSPLUG_SCRIPT": "prolog", "PBSPLUG_SOCKET": str(path),
                                    "PBSPLUG_TASK_SOCKET": "", "PBSPLUG_PYTHON": str(program)},
                               native)
        pairs[kind] = (str(program), str(native))
    pairs["setup"] = (tmp, config, sock)
    proc = subprocess.Popen([sys.executable, "-m", "pbsplug.adapters.worker", str(sock),
                             str(config)], env={**os.environ, "PYTHONPATH": str(code)})
    try:
        until(sock.exists, 60, "the worker's socket")
        yield pairs
    finally:
        proc.kill()
        proc.wait()
        for leftover in run.glob("*"):
            leftover.unlink()
        run.rmdir()


def _run(program: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([program, *args], env=env, capture_output=True, timeout=120)


def _same(pair, env, *args) -> subprocess.CompletedProcess:
    python, native = (_run(p, env, *args) for p in pair)
    assert (native.returncode, native.stdout, native.stderr) == (
        python.returncode, python.stdout, python.stderr)
    return native


def test_the_launcher_sends_the_request_the_python_program_sends(launchers):
    env = {"SLURM_JOB_ID": "42", "SLURMD_NODENAME": "n1", "EMPTY": "", "EQ": "a=b=c",
           "SPACES": " two  words "}
    done = _same(launchers["worker"], env, "arg one", "", "n[1-3]")
    assert b"'SLURM_JOB_ID': '42'" in done.stdout and b"'n[1-3]'" in done.stdout
    assert b"'script', 'prolog'" in done.stdout


@pytest.mark.parametrize("answer", ANSWERS, ids=range(len(ANSWERS)))
def test_the_launcher_carries_out_each_answer_as_the_python_program_does(launchers, answer):
    done = _same(launchers["worker"], {"PBSPLUG_TEST_ANSWER": repr(answer)})
    if isinstance(answer, dict) and "exit" in answer:
        assert done.returncode == int(answer["exit"] or 0) & 0xFF
    else:
        assert done.returncode == 1


def test_an_environment_it_does_not_send_itself_goes_to_the_python_program(launchers):
    """Non-ASCII (the Python program decodes it) and a name twice (Python keeps the first):
    the launcher execs the Python program, which asks the worker itself."""
    for env in ({"SLURM_JOB_NAME": "caf\u00e9", "A": "1"},):
        _same(launchers["worker"], env)
    python, native = launchers["worker"]
    one = subprocess.run([sys.executable, "-c", EXEC_TWICE, python], capture_output=True,
                         timeout=120)
    other = subprocess.run([sys.executable, "-c", EXEC_TWICE, native], capture_output=True,
                           timeout=120)
    assert (other.returncode, other.stdout, other.stderr) == (
        one.returncode, one.stdout, one.stderr)
    assert b"'A': 'first'" in other.stdout


def test_without_a_worker_the_launcher_is_the_python_program(launchers):
    done = _same(launchers["none"], {"SLURM_JOB_ID": "1"})
    assert done.returncode == 1 and b"missing.json" in done.stderr


def test_install_builds_the_launchers_and_uninstall_removes_them(tmp_path, launchers):
    target = tmp_path / "prolog-native"
    slurm.compile_launcher(slurm.compiler(), {
        "PBSPLUG_SCRIPT": "prolog", "PBSPLUG_SOCKET": "/run/x.sock", "PBSPLUG_TASK_SOCKET": "",
        "PBSPLUG_PYTHON": "/nowhere/prolog"}, target)
    assert target.stat().st_mode & 0o777 == 0o755
    assert slurm._ours_native(target)
    done = slurm.uninstall(tmp_path, None)
    assert done == [f"removed {target}"] and not target.exists()


def test_not_root_the_launcher_execs_the_python_program_with_its_arguments(launchers):
    """A SlurmUser that is not root: nothing is sent, the Python program (here a stand-in
    that says how it was run) gets the same arguments and environment, but for a
    PBSPLUG_SITE_RAN the launcher did not set (the Python program runs the site's program)."""
    import shutil

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        missing("needs setpriv")
    run = Path("/run") / f"pbsplug-launcher-user-{os.getpid()}"
    run.mkdir(mode=0o755)
    try:
        stand_in = run / "prolog"
        stand_in.write_text('#!/bin/sh\necho "python program: $0 $* $SLURM_JOB_ID '
                            'ran=${PBSPLUG_SITE_RAN-none}"\nexit 7\n')
        stand_in.chmod(0o755)
        native = run / "prolog-native"
        slurm.compile_launcher(slurm.compiler(), {
            "PBSPLUG_SCRIPT": "prolog", "PBSPLUG_SOCKET": "/run/nowhere.sock",
            "PBSPLUG_TASK_SOCKET": "", "PBSPLUG_PYTHON": str(stand_in)}, native)
        done = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                               str(native), "a b", "c"],
                              env={"SLURM_JOB_ID": "9", "PBSPLUG_SITE_RAN": "0 /nowhere"},
                              capture_output=True, timeout=120, cwd="/")
        assert (done.returncode, done.stdout) == (
            7, f"python program: {stand_in} a b c 9 ran=none\n".encode())
    finally:
        shutil.rmtree(run, ignore_errors=True)


def test_a_socket_another_user_planted_is_told_nothing(launchers, tmp_path):
    """A user who got to plant a socket where the worker's should be (a run folder they can
    write) hears nothing from the launcher: it asks only a root peer, else it is the Python
    program (here a stand-in that says so)."""
    import shutil

    setpriv = shutil.which("setpriv")
    if setpriv is None or not Path("/usr/bin/python3").exists():
        missing("needs setpriv and /usr/bin/python3 (the planter's interpreter)")
    run = Path("/run") / f"pbsplug-launcher-plant-{os.getpid()}"
    run.mkdir(mode=0o755)
    os.chown(run, 65534, 65534)
    sock, heard = run / "w.sock", run / "heard"
    planter = subprocess.Popen(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
         "import os, socket, sys\n"
         "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)\n"
         "c, _ = s.accept(); c.settimeout(30); data = b''\n"
         "while chunk := c.recv(65536): data += chunk\n"
         # written whole, then renamed: the test waits for the name
         "open(sys.argv[2] + '.part', 'w').write(str(len(data)))\n"
         "os.rename(sys.argv[2] + '.part', sys.argv[2])\n", str(sock), str(heard)])
    try:
        until(sock.exists, 30, "the planted socket")
        native = _stand_in_launcher(tmp_path, sock)
        done = _run(str(native), {"SLURM_JOB_ID": "7", "SECRET": "the job's environment"})
        assert (done.returncode, done.stdout) == (5, b"python program: \n")
        until(heard.exists, 30, "the planter's count")
        assert heard.read_text() == "0"
    finally:
        planter.kill()
        planter.wait()
        shutil.rmtree(run, ignore_errors=True)


def _stand_in_launcher(run: Path, sock: Path) -> Path:
    """A launcher in `run` for the worker at `sock`, whose Python program is a stand-in that
    says it ran, with its arguments, and exits 5."""
    stand_in = run / "prolog"
    stand_in.write_text('#!/bin/sh\necho "python program: $*"\nexit 5\n')
    stand_in.chmod(0o755)
    native = run / "prolog-native"
    slurm.compile_launcher(slurm.compiler(), {
        "PBSPLUG_SCRIPT": "prolog", "PBSPLUG_SOCKET": str(sock), "PBSPLUG_TASK_SOCKET": "",
        "PBSPLUG_PYTHON": str(stand_in)}, native)
    return native


@pytest.mark.parametrize("when", ["after the request", "mid-request"])
def test_a_worker_that_resets_the_connection_leaves_it_to_the_python_program(launchers, when):
    """A worker leaving at its idle exit just as it is asked closes the connection with the
    request unread: the launcher sees a reset (ECONNRESET; EPIPE or ECONNRESET while it
    still sends) before any answer, and nothing ran. That was one line and exit 1 (a failed
    Prolog drains the node), where the Python program asks again once, of a new worker,
    then runs the events itself; the launcher execs the Python program now (here a stand-in
    that says so), as when no worker answers. The socket resets every connection once the
    request has come; "mid-request", the request is more than the socket holds."""
    import shutil

    run = Path("/run") / f"pbsplug-launcher-reset-{os.getpid()}"
    run.mkdir(mode=0o700)
    try:
        sock = run / "w.sock"
        native = _stand_in_launcher(run, sock)
        env = {"SLURM_JOB_ID": "7"}
        if when == "mid-request":  # each under execve's 128 KiB a string
            env.update({f"BIG{i}": "x" * 100_000 for i in range(12)})
        with resetting_socket(sock) as resets:
            done = _run(str(native), env, "a b")
        assert (done.returncode, done.stdout, done.stderr) == (
            5, b"python program: a b\n", b""), done.stderr
        assert resets == [b"{"]  # asked once (a marshal dict), reset
    finally:
        shutil.rmtree(run, ignore_errors=True)


def test_a_worker_whose_process_ended_without_an_answer_is_still_exit_1(launchers):
    """The other end: a connection that ends (EOF) with no answer, its request read whole,
    is a worker's child killed at its deadline or crashed, which may have run the event:
    one line and exit 1, the Python program not run (it too fails there, asking no one
    again)."""
    import shutil
    import socket
    import threading

    run = Path("/run") / f"pbsplug-launcher-eof-{os.getpid()}"
    run.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock = run / "w.sock"
        native = _stand_in_launcher(run, sock)
        listener.bind(str(sock))
        listener.listen()
        listener.settimeout(60)  # (a hang guard)
        read = []

        def read_then_close() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(60)
                while chunk := conn.recv(65536):
                    read.append(chunk)

        reader = threading.Thread(target=read_then_close, daemon=True)
        reader.start()
        done = _run(str(native), {"SLURM_JOB_ID": "7"})
        reader.join(60)
        assert (done.returncode, done.stdout, done.stderr) == (
            1, b"", b"pbsplug prolog: the worker's process ended without an answer\n")
        assert b"".join(read)[:1] == b"{"
    finally:
        listener.close()
        shutil.rmtree(run, ignore_errors=True)


def test_install_wants_a_folder_no_other_user_can_write(tmp_path):
    folder = tmp_path / "pbsplug"
    folder.mkdir(mode=0o755)
    slurm._check_private(folder)  # root's, 0755: fine
    for mode in (0o775, 0o757):
        folder.chmod(mode)
        with pytest.raises(slurm.SlurmInstallError, match=r"is writable by .* so another "
                           r"user could plant .*\(slurmd runs its programs as root\)$"):
            slurm._check_private(folder)
    folder.chmod(0o755)
    os.chown(folder, 65534, 65534)
    with pytest.raises(slurm.SlurmInstallError, match="owned by uid 65534"):
        slurm._check_private(folder)


#: A site's program: its name, arguments, job and stdin in the marks file, then its exit
#: status from the environment (SITE_EXIT_<name>, default 0).
SITE_PROGRAM = """#!/bin/sh
echo "$(basename "$0") $* job=$SLURM_JOB_ID stdin=$(cat)" >> MARKS
eval "exit \\${SITE_EXIT_$(basename "$0" | tr - _):-0}"
"""


def _chained_pair(launchers, tmp_path, script, site, worker=True):
    """A Python program and a launcher for `script` that run the site's `site` first."""
    tmp, config, sock = launchers["setup"]
    if not worker:
        config, sock = tmp / "missing.json", sock.with_name("none.sock")
    program = tmp_path / script
    program.write_text(slurm_program.program_text(
        sys.executable, str(Path(slurm_program.__file__).parent), script, str(config),
        str(sock), site=site))
    program.chmod(0o755)
    native = tmp_path / f"{script}-native"
    defs = slurm.native_defs_of(script, str(sock), "", str(program), site)
    slurm.compile_launcher(slurm.compiler(), defs, native)
    return str(program), str(native)


def _sites(tmp_path, *names):
    marks = tmp_path / "marks"
    folder = tmp_path / "site.d"
    folder.mkdir()
    for name in names:
        (folder / name).write_text(SITE_PROGRAM.replace("MARKS", str(marks)))
        (folder / name).chmod(0o755)
    return folder, marks


def _chained_run(program, marks, env, *args):
    done = subprocess.run([program, *args], env={"SLURM_JOB_ID": "7", **env},
                          input=b"not for the site", capture_output=True, timeout=120)
    text = marks.read_text() if marks.exists() else ""
    marks.unlink(missing_ok=True)
    return done, text


@pytest.mark.parametrize("kind", ["python", "native"])
def test_the_sites_program_runs_first_and_its_failure_goes_with_the_request(
        launchers, tmp_path, kind):
    """The site's Prolog (the slurm.conf line install replaced) runs first with the
    script's arguments and environment, stdin /dev/null; its failure is in the request
    (the bridge decides what runs) and is the script's exit status."""
    folder, marks = _sites(tmp_path, "site-prolog")
    pair = _chained_pair(launchers, tmp_path, "prolog", str(folder / "site-prolog"))
    program = pair[kind == "native"]
    done, text = _chained_run(program, marks, {}, "a b", "c")
    assert text == "site-prolog a b c job=7 stdin=\n"
    assert done.returncode == 0 and b"site_status" not in done.stdout
    assert b"SITE_RAN" not in done.stdout and b"'argv', ['a b', 'c']" in done.stdout
    done, text = _chained_run(program, marks, {"SITE_EXIT_site_prolog": "3"})
    assert text == "site-prolog  job=7 stdin=\n"  # once
    assert done.returncode == 3
    assert f"('site_program', '{folder / 'site-prolog'}'), ('site_status', 3)".encode() \
        in done.stdout


@pytest.mark.parametrize("kind", ["python", "native"])
def test_a_pattern_runs_each_match_in_order_and_an_epilog_runs_them_all(launchers, tmp_path,
                                                                        kind):
    folder, marks = _sites(tmp_path, "b-two", "a-one", ".hidden")
    for script in ("prolog", "epilog"):
        pair = _chained_pair(launchers, tmp_path, script, f"{folder}/*")
        program = pair[kind == "native"]
        done, text = _chained_run(program, marks, {})
        assert (done.returncode, text) == (0, "a-one  job=7 stdin=\nb-two  job=7 stdin=\n")
        done, text = _chained_run(program, marks, {"SITE_EXIT_a_one": "4"})
        ran = ["a-one"] + (["b-two"] if script == "epilog" else [])
        assert done.returncode == 4 and [line.split()[0] for line in text.splitlines()] == ran
        assert f"'site_program', '{folder / 'a-one'}'".encode() in done.stdout


def test_the_launcher_that_hands_over_to_the_python_program_runs_the_site_once(
        launchers, tmp_path):
    """No worker: the launcher execs the Python program after the site's program ran; the
    Python program does not run it again, and exits with its status."""
    folder, marks = _sites(tmp_path, "site-epilog")
    python, native = _chained_pair(launchers, tmp_path, "epilog",
                                   str(folder / "site-epilog"), worker=False)
    for program in (python, native):
        done, text = _chained_run(program, marks, {"SITE_EXIT_site_epilog": "5"})
        assert text == "site-epilog  job=7 stdin=\n"
        assert done.returncode == 5 and b"missing.json" in done.stderr


#: A site's program that says, in the marks file, that it ran and what PBSPLUG_SITE_RAN it
#: saw, then exits SITE_EXIT (default 0).
SITE_SEES = """#!/bin/sh
echo "$(basename "$0") ran=${PBSPLUG_SITE_RAN-none}" >> MARKS
exit ${SITE_EXIT:-0}
"""


def _seeing_pair(launchers, tmp_path):
    folder = tmp_path / "site.d"
    folder.mkdir()
    site = folder / "site-prolog"
    site.write_text(SITE_SEES.replace("MARKS", str(tmp_path / "marks")))
    site.chmod(0o755)
    return _chained_pair(launchers, tmp_path, "prolog", str(site)), tmp_path / "marks"


@pytest.mark.parametrize("kind", ["python", "native"])
def test_a_site_ran_the_launcher_did_not_set_in_this_run_is_dropped(launchers, tmp_path,
                                                                     kind):
    """PBSPLUG_SITE_RAN already in the environment (slurmd's own, left by an admin's shell;
    the old form, a parent's pid, init's) is not the launcher's word for this run: the
    site's program runs, once, and neither it nor the worker's request sees the variable.
    Before, the Python program skipped the site's program for it, and the launcher passed
    it to the site's program and to the worker."""
    pair, marks = _seeing_pair(launchers, tmp_path)
    program = pair[kind == "native"]
    for forged in ("0 /nowhere", f"{os.getpid()} 0 /nowhere", "1 0 /nowhere", "junk", ""):
        done, text = _chained_run(program, marks, {"PBSPLUG_SITE_RAN": forged})
        assert text == "site-prolog ran=none\n", forged
        assert done.returncode == 0 and b"SITE_RAN" not in done.stdout, forged
        assert b"'SLURM_JOB_ID': '7'" in done.stdout  # (the worker's echo of the request)


@pytest.mark.parametrize("kind", ["python", "native"])
def test_only_the_process_execing_the_python_program_can_say_the_site_ran(launchers,
                                                                         tmp_path, kind):
    """The variable counts only with the Python program's own pid first: set by the process
    that exec'd it (exec keeps the pid), which is the launcher's hand-over. A shell that
    sets it with its own pid and execs the Python program is believed (it is the one that
    runs it, as the launcher is); the launcher believes no one, removes it and runs the
    site's program itself."""
    pair, marks = _seeing_pair(launchers, tmp_path)
    program = pair[kind == "native"]
    done = subprocess.run(["/bin/sh", "-c", 'PBSPLUG_SITE_RAN="$$ 4 /site/x" exec "$0"',
                           program], env={"SLURM_JOB_ID": "7"}, capture_output=True,
                          timeout=120)
    text = marks.read_text() if marks.exists() else ""
    assert b"SITE_RAN" not in done.stdout
    if kind == "python":
        assert (done.returncode, text) == (4, ""), done.stderr
        assert b"('site_program', '/site/x'), ('site_status', 4)" in done.stdout
    else:
        assert (done.returncode, text) == (0, "site-prolog ran=none\n"), done.stderr


def test_the_launchers_hand_over_runs_the_site_once_and_tells_no_one_else(launchers,
                                                                          tmp_path):
    """The launcher runs the site's program, then (an environment it does not send itself:
    non-ASCII) execs the Python program, which asks the worker: the site's program ran once
    and saw no PBSPLUG_SITE_RAN (a forged one in slurmd's environment neither), its failure
    reached the request, and the variable did not."""
    pair, marks = _seeing_pair(launchers, tmp_path)
    env = {"SLURM_JOB_NAME": "caf\u00e9", "PBSPLUG_SITE_RAN": "0 /nowhere", "SITE_EXIT": "3"}
    done, text = _chained_run(pair[1], marks, env)
    assert (done.returncode, text) == (3, "site-prolog ran=none\n"), done.stderr
    assert b"SITE_RAN" not in done.stdout and "caf\u00e9".encode() in done.stdout
    site = tmp_path / "site.d" / "site-prolog"
    assert f"('site_program', '{site}'), ('site_status', 3)".encode() in done.stdout


def _closed_stdio_run(program: str, env: dict[str, str]) -> int:
    """`program`'s exit status run as slurmctld runs SuspendProgram and ResumeProgram:
    stdin, stdout and stderr closed."""
    return subprocess.run(["/bin/sh", "-c", 'exec 0<&- 1>&- 2>&-; exec "$0"', program],
                          env=env, timeout=120).returncode


def test_a_program_run_with_its_stdio_closed_exits_with_its_answer(launchers):
    """slurmctld 22.05 closes every fd before it runs the power programs. The Python
    program (run by the launcher too when the request is not one it sends, or no worker
    answers) then had None for sys.stdout and sys.stderr, and its last flush failed: exit
    1 whatever the answer ("power_save: program exit status of 1" in slurmctld's log at
    every SuspendProgram the real cluster's own timer ran). The answer's status now."""
    ok = {"PBSPLUG_TEST_ANSWER": repr({"exit": 0, "stdout": "out\n", "error": "err"})}
    three = {"PBSPLUG_TEST_ANSWER": repr({"exit": 3, "stdout": "", "error": ""})}
    python, native = launchers["worker"]
    for env in (ok, three, {**ok, "SLURM_JOB_NAME": "caf\u00e9"}):  # (the last: execs python)
        want = int(ast.literal_eval(env["PBSPLUG_TEST_ANSWER"])["exit"])
        assert [_closed_stdio_run(p, env) for p in (python, native)] == [want, want], env
