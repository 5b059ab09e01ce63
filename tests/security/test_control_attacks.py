"""Attacks on the job-control commands and job arrays (qdel of subjob ranges, qstat -t,
qmsg) by an unprivileged user: none may hold the server, nor make it use memory or time out
of proportion to what the user keeps."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

from .conftest import qsub

#: The start of an attacker's script that talks to the server directly: `c` is a client.
_CLIENT = ("import json, os, subprocess, sys, time\n"
           "from pathlib import Path\n"
           "from pbsplug.engine.client import Client\n"
           "from pbsplug.engine.home import Home\n"
           "c = Client(Home(Path(os.environ['PBSPLUG_HOME'])))\n")
#: Once the script's `job` runs, `forms` names it 150 times, in its three forms (12,
#: 12.server, 12@SERVER).
_RUNNING_FORMS = ("while c('stat_jobs', ids=[job])[job]['job_state'] != 'R':\n"
                  "    time.sleep(0.05)\n"
                  "number, server = job.split('.', 1)\n"
                  "forms = [job, number, f'{number}@{server.upper()}'] * 50\n")


def test_qdel_of_a_huge_subjob_range_costs_what_the_array_holds(engine, attacker):
    # A range is checked against the array's own indices, never walked: 10**14 indices
    # held the server (one loop step each) for days.
    array = qsub(attacker, engine, "-h", "-J", "0-3", "--", "/bin/true")
    number = array.split("[")[0]
    done = attacker.pbs(engine, "qdel", f"{number}[2-99999999999999]")
    assert (done.returncode, done.stderr) == (0, "")
    assert engine.job(array)["array_indices_remaining"] == "0-1"
    # A step of 0 names no subjob (it is no range), as any other id of no job.
    zero = attacker.pbs(engine, "qdel", f"{number}[0-3:0]")
    assert zero.returncode == 153
    assert zero.stderr.startswith(f"qdel: Unknown Job Id {number}[0-3:0]")
    assert engine.job(array)["array_indices_remaining"] == "0-1"


def test_qstat_t_f_of_an_array_does_not_multiply_its_environment_unbounded(engine, attacker):
    # Each subjob shows its array's environment: 1 MiB of it and 100 indices made a 100 MiB
    # answer (10,000 indices: 10 GiB in the root server's memory) from one submission.
    # One answer carries at most MAX_SHOWN_ENV bytes of subjobs' environments.
    from pbsplug.engine.subjobs import MAX_SHOWN_ENV

    done = attacker.python(
        _CLIENT +
        "env = {f'V{i}': 'x' * 100_000 for i in range(10)}\n"
        "job = c('submit', attrs={'Variable_List': env, 'Hold_Types': 'u',\n"
        "                         'array_indices_submitted': '1-100'}, script='true\\n')\n"
        "jobs = c('stat_jobs', ids=[job], subjobs=True)\n"
        "sizes = [sum(len(k) + len(v) for k, v in a.get('Variable_List', {}).items())\n"
        "         for j, a in jobs.items() if a.get('array_id')]\n"
        "print(json.dumps([len(sizes), sum(sizes), sum(s > 0 for s in sizes)]))\n",
        home=engine)
    assert done.returncode == 0, done.stderr
    count, total, with_env = json.loads(done.stdout)
    assert count == 100
    assert 0 < total <= MAX_SHOWN_ENV
    assert 0 < with_env < 100


_STOPPED_TERMINAL = """\
import os, subprocess, sys, termios, time
master, slave = os.openpty()
termios.tcflow(slave, termios.TCOOFF)  # (its output stopped: a write to it waits)
tty = os.ttyname(slave)
job = subprocess.run(["pbsplug", "qsub", "-e", tty, "--", "/bin/sleep", "60"],
                     capture_output=True, text=True, check=True).stdout.strip()
while "job_state = R" not in subprocess.run(["pbsplug", "qstat", "-f", job],
                                            capture_output=True, text=True).stdout:
    time.sleep(0.05)
ids = [job] * int(sys.argv[1])
done = subprocess.run(["pbsplug", "qmsg", "-E", "hi", *ids], capture_output=True, text=True)
print(done.returncode, done.stderr.splitlines()[:1])
subprocess.run(["pbsplug", "qdel", job])
"""


def test_qmsg_to_a_stopped_terminal_does_not_hold_the_server(engine, attacker):
    # The error file is the owner's own terminal, its output stopped (^S, tcflow): the
    # writer waited NOTE_WAIT (1 s) for it, once per job named, so one qmsg naming the
    # job 10,000 times held the one-threaded server for hours. The write does not wait.
    done = attacker.python(_STOPPED_TERMINAL, "3", home=engine, cwd=engine.work)
    assert done.returncode == 0, done.stderr
    status, lines = done.stdout.split(" ", 1)
    assert "did not end within" not in lines, lines
    assert "Resource temporarily unavailable" in lines, lines


def test_qmsg_naming_one_job_many_times_writes_once(engine, attacker):
    # Each write is a child process of the server: one raw request naming a job 10,000
    # times (in its forms: 12, 12.server, 12@SERVER) cost the server 10,000 of them.
    done = attacker.python(
        _CLIENT +
        "job = subprocess.run(['pbsplug', 'qsub', '-e', 'err.txt', '--', '/bin/sleep', '60'],\n"
        "                     capture_output=True, text=True, check=True).stdout.strip()\n"
        + _RUNNING_FORMS +
        "while not Path('err.txt').exists():  # (R comes before the job opens it)\n"
        "    time.sleep(0.05)\n"
        "answers = c('message', ids=forms, text='hi')\n"
        "c('delete', ids=[job])\n"
        "print(json.dumps([sum('error' not in a for a in answers),\n"
        "                  Path('err.txt').read_text().count('hi')]))\n",
        home=engine, cwd=engine.work)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [150, 1]


def test_qdel_naming_one_running_job_many_times_kills_it_once(engine, attacker):
    # Each kill of a running job runs execjob_preterm, writes its accounting record and
    # signals every process of the job (its shepherd's tree, walked thread by thread, in
    # the server's loop): one raw request naming the job 10,000 times (in its forms: 12,
    # 12.server, 12@SERVER) cost the server 10,000 of each, a job of many threads the
    # longest.
    done = attacker.python(
        _CLIENT +
        "Path('term.sh').write_text(\"trap '' TERM\\nsleep 60\\n\")\n"
        "job = subprocess.run(['pbsplug', 'qsub', 'term.sh'],\n"
        "                     capture_output=True, text=True, check=True).stdout.strip()\n"
        + _RUNNING_FORMS +
        "answers = c('delete', ids=forms)\n"
        "print(json.dumps([job, sum('error' not in a for a in answers)]))\n",
        home=engine, cwd=engine.work)
    assert done.returncode == 0, done.stderr
    job_id, answered = json.loads(done.stdout)
    assert answered == 150
    engine.wait(job_id, timeout=60)
    assert engine.log().count(f"{job_id};Job to be deleted at request of") == 1


_STOP_THE_WRITER = _CLIENT + """\
import signal
job = subprocess.run(['pbsplug', 'qsub', '-e', 'err.txt', '--', '/bin/sleep', '60'],
                     capture_output=True, text=True, check=True).stdout.strip()
while c('stat_jobs', ids=[job])[job]['job_state'] != 'R':
    time.sleep(0.05)
while not Path('err.txt').exists():  # (the job's process opens it once its shepherd has
    time.sleep(0.05)                 # recorded it: qmsg before has no file to write to)
server = Path(os.environ['PBSPLUG_HOME'], 'server.pid').read_text().split()[0]
me = os.getpid()
racer = os.fork()
if racer == 0:  # SIGSTOP to each new child of the server's that this user may signal
    while os.getppid() == me:  # (only those: other tests may run processes as this user)
        last = int(Path('/proc/sys/kernel/ns_last_pid').read_text())
        for pid in range(last - 2, last + 4):
            try:
                if Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[1] \
                        == server:
                    os.kill(pid, signal.SIGSTOP)
            except (OSError, IndexError):
                pass
    os._exit(0)
answers = [c('message', ids=[job], text='hi') for _ in range(20)]
os.kill(racer, signal.SIGKILL)
os.waitpid(racer, 0)
c('delete', ids=[job])
print(json.dumps([[a for a in answer if 'error' in a] for answer in answers]))
print(Path('err.txt').read_text().count('hi'))
"""


def test_qmsg_writer_cannot_be_stopped_by_the_jobs_owner(engine, attacker):
    # The child that writes qmsg's line had become the job's owner (real uid too), so the
    # owner could SIGSTOP it (its pid is the next one: a loop of kill(2) on the next few
    # pids that are the server's children wins the race most times) and the one-threaded
    # server waited NOTE_WAIT (1 s) for it, for each job a request named: with many jobs
    # running, one qmsg held the server for a minute, and the next one again. It now
    # only acts as the owner (`executor.act_as`).
    done = attacker.python(_STOP_THE_WRITER, home=engine, cwd=engine.work, timeout=120)
    assert done.returncode == 0, done.stderr
    refused, written = done.stdout.splitlines()
    assert json.loads(refused) == [[]] * 20
    assert int(written) == 20


def test_qmsg_writer_acts_as_the_owner_with_roots_real_and_saved_uid(shared_tmp, unix_user,
                                                                     monkeypatch):
    # The racer above wins its race most times, not every time: this says it every time.
    # The writer's ids as /proc shows them once it took the owner's: its real and saved uid
    # root's (kill(2) from the owner is refused), its effective and filesystem uid the
    # owner's (what it opens, it opens as them).
    from pbsplug.engine import executor

    owner = pwd.getpwnam(unix_user)
    err = shared_tmp / "err.txt"
    err.touch(mode=0o600)
    os.chown(err, owner.pw_uid, owner.pw_gid)
    seen = shared_tmp / "ids"
    act_as = executor.act_as

    def observed(ids):  # (in the writer: opened as root, written once it acts as the owner)
        with open(seen, "w") as out:
            act_as(ids)
            status = Path("/proc/self/status").read_text()
            out.write(next(line for line in status.splitlines() if line.startswith("Uid:")))

    monkeypatch.setattr(executor, "act_as", observed)  # (the fork inherits it)
    why = executor.append_line(str(err), "", "hi", (owner.pw_uid, owner.pw_gid, unix_user))
    assert why is None
    assert err.read_text() == "hi\n"
    assert seen.read_text().split() == ["Uid:", "0", str(owner.pw_uid), "0", str(owner.pw_uid)]
