"""qmgr against a real server: objects, PBS's errors and exit codes, hooks as plugins, the
management event, and job dependencies."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from .conftest import PBSPLUG, until
from .test_server import plugin


def qmgr(engine, text: str, stdin: bool = False):
    if stdin:
        return engine.pbs("qmgr", input=text)
    return engine.pbs("qmgr", "-c", text)


def test_queues_and_nodes_are_created_set_listed_and_printed(engine):
    done = qmgr(engine, """
        create queue fast
        set queue fast queue_type = Execution, Priority = 100
        set queue fast enabled = True ; set queue fast started = True
        set queue fast resources_max.walltime = 01:00:00
        create node n1 resources_available.ncpus = 4, resources_available.mem = 8gb
        """, stdin=True)
    assert (done.returncode, done.stderr) == (0, "")
    listed = qmgr(engine, "list queue fast")
    assert listed.stdout.startswith("Queue fast\n    queue_type = Execution\n")
    assert "    Priority = 100\n" in listed.stdout
    assert "    resources_max.walltime = 01:00:00\n" in listed.stdout
    printed = qmgr(engine, "print queue fast").stdout
    assert "create queue fast\n" in printed
    assert "set queue fast resources_max.walltime = 01:00:00\n" in printed
    node = engine.client("stat_nodes", names=["n1"])["n1"]
    assert node["resources_available"]["ncpus"] == 4 and node["state"] == "free"
    # `print` output fed back to qmgr makes the same objects.
    qmgr(engine, "delete queue fast")
    assert "fast" not in engine.client("stat_queues")
    assert qmgr(engine, printed, stdin=True).returncode == 0
    assert engine.client("stat_queues")["fast"]["Priority"] == 100

    # jobs go where the new objects say
    job_id = engine.submit("true\n", queue="fast", Resource_List={"select": "1:ncpus=4"})
    assert engine.wait(job_id)["exec_vnode"] == "(n1:ncpus=4)"


def test_errors_are_pbs_messages_and_codes_and_stop_the_text(engine):
    done = qmgr(engine, "set queue nosuch enabled = True")
    assert done.returncode == 15018 % 256
    assert done.stderr == ("qmgr obj=nosuch svr=default: Unknown queue\n"
                           "qmgr: Error (15018) returned from server\n")
    done = qmgr(engine, "set node nosuch comment = x")
    assert done.stderr.splitlines() == ["qmgr obj=nosuch svr=default: Unknown node ",
                                        "qmgr: Error (15062) returned from server"]
    # As in qmgr, a word that is no attribute is read as a server name: a syntax error.
    done = qmgr(engine, "set server no_such_attribute = 1")
    assert done.stderr.splitlines()[:2] == ["qmgr: Syntax error",
                                            "set server no_such_attribute = 1"]
    done = qmgr(engine, "set queue workq no_such_attribute = 1")
    assert done.stderr.splitlines() == ["qmgr obj=workq svr=default: Undefined attribute ",
                                        "qmgr: Error (15002) returned from server"]
    done = qmgr(engine, "set queue workq max_running = lots")
    assert done.stderr.splitlines()[-1] == "qmgr: Error (15014) returned from server"
    assert "Illegal attribute or resource value" in done.stderr
    # Read from a file, as OpenPBS 23.06's qmgr: an error does not stop the next command,
    # and the exit status is the last command's.
    done = qmgr(engine, "create queue a1\nset queue nosuch enabled = True\ncreate queue a2\n",
                stdin=True)
    assert done.returncode == 0 and "Unknown queue" in done.stderr
    queues = engine.client("stat_queues")
    assert "a1" in queues and "a2" in queues
    done = qmgr(engine, "create queue b1\nset queue b1 = = =\n", stdin=True)
    assert done.returncode == 4 and done.stderr.startswith("qmgr: Syntax error")
    assert "b1" in engine.client("stat_queues")
    # With -c, the text is one command: `;` and newlines are part of it.
    done = qmgr(engine, "create queue c1; create queue c2")
    assert done.returncode == 4 and done.stderr.startswith("qmgr: Syntax error")
    assert not {"c1", "c2"} & set(engine.client("stat_queues"))
    busy = engine.submit("sleep 30\n")
    engine.wait(busy, "R")
    done = qmgr(engine, "delete queue workq")
    assert done.stderr.splitlines() == ["qmgr obj=workq svr=default: Cannot delete busy object",
                                        "qmgr: Error (15027) returned from server"]
    engine.client("delete", ids=[busy], force=True)


def test_a_server_without_a_name_and_active_answer_as_openpbs(engine):
    """OpenPBS 23.06's answers (tests/adapters/test_pbs_parity.py checks them on the real
    one): `create TYPE @server` creates nothing; `svr=` names the server as given; `active`
    of a type that has no active objects says so, with PBS's exit status."""
    import socket

    host = socket.gethostname().split(".")[0]
    before = engine.client("stat_queues")
    done = qmgr(engine, "create queue @default")
    assert (done.returncode, done.stderr) == (15028 % 256, (
        "qmgr obj= svr=default: Queue name too long\n"
        "qmgr: Error (15028) returned from server\n"))
    assert engine.client("stat_queues").keys() == before.keys()
    done = qmgr(engine, f"create node @{host}")
    assert (done.returncode, done.stderr.splitlines()) == (15062 % 256, [
        f"qmgr obj= svr={host}: Unknown node ", "qmgr: Error (15062) returned from server"])
    for text, status, first in (
            ("create sched @default", 15211 % 256, "Scheduler already exists"),
            ("create hook @default", 32, "no hook name specified"),
            ("create resource @default", 15014 % 256,
             "Illegal attribute or resource value: no resource name given")):
        done = qmgr(engine, text)
        assert (done.returncode, done.stderr.splitlines()[0]) == (
            status, f"qmgr obj= svr=default: {first}"), text
    done = qmgr(engine, f"set queue nosuch@{host} enabled = true")
    assert done.stderr.splitlines()[0] == f"qmgr obj=nosuch svr={host}: Unknown queue"
    done = qmgr(engine, f"list queue nosuch@{host}")
    assert done.stderr.splitlines()[0] == f"qmgr obj=nosuch svr={host}: Unknown queue"
    done = qmgr(engine, f"set server {host} no_such_attribute = 1")
    assert done.stderr.splitlines()[0] == f"qmgr obj={host} svr={host}: Undefined attribute "

    assert qmgr(engine, "active sched").stdout == "Active schedulers:\n"
    for text, status in (("active sched default", 2), ("active hook nosuch", 1),
                         ("active resource nosuch", 1), ("active pbshook PBS_power", 1),
                         ("active hook", 0), ("active resource", 0)):
        done = qmgr(engine, text)
        word = text.split()[1]
        assert (done.returncode, done.stdout, done.stderr) == (
            status, "", f"qmgr: active takes a server, queue or node, not a {word}\n"), text
    assert qmgr(engine, f"active server {host},default").stdout == ""
    done = qmgr(engine, "active server nosuch")
    assert (done.returncode, done.stderr) == (
        1, "Unknown Host.\nqmgr: cannot connect to server nosuch\n")


def test_custom_resources_schedulers_and_the_default_scheduler(engine):
    assert qmgr(engine, "create resource PBScraynid type = long").returncode == 0
    node = next(iter(engine.client("stat_nodes")))
    assert qmgr(engine, f"set node {node} resources_available.PBScraynid = 7").returncode == 0
    assert engine.client("stat_nodes", names=[node])[node]["resources_available"][
        "PBScraynid"] == 7
    done = qmgr(engine, f"set node {node} resources_available.undefined_res = 7")
    assert "Unknown resource" in done.stderr and "(15035)" in done.stderr

    assert qmgr(engine, "set sched default scheduler_iteration = 30").returncode == 0
    assert engine.client("stat_server")[engine.client("status")["server"]][
        "scheduler_iteration"] == 30
    done = qmgr(engine, "set sched default partition = p1")
    assert done.stderr.splitlines()[0] == ("qmgr obj=default svr=default: Operation is not "
                                           "permitted on default scheduler")
    done = qmgr(engine, "create sched TestLongScheduler")
    assert "(15212)" in done.stderr
    assert qmgr(engine, "create sched sc1 partition = P1").returncode == 0
    assert "(15211)" in qmgr(engine, "create sched sc1").stderr
    assert "Sched sc1\n" in qmgr(engine, "list sched").stdout
    assert "(15214)" in qmgr(engine, "delete sched default").stderr
    assert qmgr(engine, "delete sched sc1").returncode == 0
    assert "(15213)" in qmgr(engine, "delete sched sc1").stderr


def test_hooks_are_plugins_and_management_may_refuse(dists, make_engine):
    site = plugin(dists, "guard", """
        @hookimpl
        def management(event):
            m = event.management
            if m["objtype"] == "queue" and m["cmd"] == "delete":
                event.reject(f"queue {m['objname']} is protected")
        """, ("management",))
    plugin(dists, "spare", """
        @hookimpl
        def queuejob(event):
            event.job.Account_Name = "spare"
        """, ("queuejob",))
    engine = make_engine(site)
    done = qmgr(engine, "delete queue workq")
    assert done.stderr.splitlines() == ["qmgr obj=workq svr=default: queue workq is protected",
                                        "qmgr: hook error returned from server"]
    listed = qmgr(engine, "list hook guard").stdout
    assert listed.startswith("Hook guard\n") and "    enabled = true\n" in listed
    assert "    event = management\n" in listed

    # create hook = enable an installed plugin; it runs at once; delete hook turns it off.
    assert qmgr(engine, "create hook spare").returncode == 0
    assert "[plugins.spare]" in (engine.root / "site.toml").read_text()
    assert engine.job(engine.submit())["Account_Name"] == "spare"
    assert qmgr(engine, "set hook spare order = 5").returncode == 0
    assert "order = 5" in (engine.root / "site.toml").read_text()
    assert "    order = 5\n" in qmgr(engine, "list hook spare").stdout
    done = qmgr(engine, "set hook spare order = 5000")
    assert (done.returncode, done.stderr.splitlines()[-1]) == (
        15136 % 256, "qmgr: hook error returned from server")
    assert qmgr(engine, "delete hook spare").returncode == 0
    assert "Account_Name" not in engine.job(engine.submit())
    missing = qmgr(engine, "create hook nothere")
    assert "no plugin 'nothere' is installed" in missing.stderr


def test_dependencies_hold_release_and_delete(engine):
    first = engine.submit("sleep 1; exit 0\n")
    ok = engine.submit("true\n", depend=f"afterok:{first}")
    notok = engine.submit("true\n", depend=f"afternotok:{first}")
    anyway = engine.submit("true\n", depend=f"afterany:{first}")
    held = engine.job(ok)
    assert (held["job_state"], held["Hold_Types"]) == ("H", "s")
    assert engine.wait(ok)["Exit_status"] == 0
    assert engine.wait(anyway)["Exit_status"] == 0
    gone = engine.wait(notok)
    assert gone["comment"] == f"Job deleted as result of dependency on job {first}"
    assert "Exit_status" not in gone

    # before: the listed job (submitted with on:1, as PBS asks) waits on the new one
    later = engine.submit("true\n", Hold_Types="u", depend="on:1")
    engine.submit("sleep 1\n", depend=f"beforeok:{later}")
    assert "afterok:" in engine.job(later)["depend"]
    engine.client("release", ids=[later])
    assert engine.job(later)["job_state"] == "H"  # still the dependency's system hold
    assert engine.wait(later)["Exit_status"] == 0

    # a job no server knows: queued, then deleted naming it (OpenPBS 23.06's, checked)
    done = engine.pbs("qsub", "-W", f"depend=afterok:{first}:999:{later}", "--", "/bin/true")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    gone = engine.job(done.stdout.strip())
    host = first.split(".", 1)[1]
    assert (gone["job_state"], gone["comment"]) == (
        "F", f"Dependency request for job rejected by 999.{host}")
    held = engine.submit("true\n", Hold_Types="u")  # (qalter: refused, naming it)
    done = engine.pbs("qalter", "-W", "depend=afterok:999", held)
    assert (done.returncode, done.stderr) == (
        153, f"qalter: Unknown Job Id depend: 999.{host} {held}\n")
    runone = engine.pbs("qsub", "-W", f"depend=runone:{first}", "--", "/bin/true")
    assert runone.stderr == "qsub: No support for requested service: depend type runone\n"


def test_set_pbshook_sets_the_plugin_that_declares_that_pbs_name(dists, make_engine):
    """Seed 004's `qmgr -c "set pbshook PBS_power enabled=true"`: PBS's hook name reaches
    the plugin that declares it, disabled (so not imported) until then."""
    plugin(dists, "pw", """
        @hookimpl
        def periodic(event):
            pass
        """, ("periodic",), type="pbs", pbs_name="PBS_pw")
    engine = make_engine("")
    assert "enabled = false" in qmgr(engine, "list hook pw").stdout
    assert qmgr(engine, "set pbshook PBS_pw enabled = true").returncode == 0
    listed = qmgr(engine, "list pbshook PBS_pw").stdout
    assert listed.startswith("Hook PBS_pw\n") and "    enabled = true\n" in listed
    done = qmgr(engine, "set pbshook PBS_nosuch enabled = true")
    assert done.stderr.splitlines() == ["qmgr obj=PBS_nosuch svr=default: PBS_nosuch does "
                                        "not exist!", "qmgr: hook error returned from server"]


def test_list_hook_is_the_site_hooks_and_list_pbshook_the_pbs_hooks(dists, make_engine):
    """As OpenPBS 23.06's qmgr (checked): `list hook` and `print hook` without names show
    only site hooks, `list pbshook` only pbs hooks, by their PBS names; a disabled pbs
    plugin (never imported) is one too. `print pbshook` exits 1 (OpenPBS's says nothing)."""
    body = """
        @hookimpl
        def periodic(event):
            pass
        """
    plugin(dists, "pw", body, ("periodic",), type="pbs", pbs_name="PBS_pw")  # disabled
    plugin(dists, "pq", body, ("periodic",), type="pbs", pbs_name="PBS_pq")
    plugin(dists, "sitey", body, ("periodic",))
    engine = make_engine("[plugins.pq]\nenabled = true\n[plugins.sitey]\nenabled = true\n")
    def titles(text):  # (the environment's own plugins are installed too)
        return {line for line in text.splitlines() if line.startswith("Hook ")}

    listed = qmgr(engine, "list hook").stdout
    assert "Hook sitey" in titles(listed) and "type = pbs" not in listed
    assert not {"Hook pw", "Hook pq", "Hook power", "Hook cray_atom"} & titles(listed)
    printed = qmgr(engine, "print hook").stdout
    assert "create hook sitey\n" in printed and "create hook pq\n" not in printed
    assert "type = pbs" not in printed
    listed = qmgr(engine, "list pbshook").stdout
    assert {"Hook PBS_pq", "Hook PBS_pw"} <= titles(listed)
    assert all(name.startswith("Hook PBS_") for name in titles(listed))
    assert "type = site" not in listed
    done = qmgr(engine, "print pbshook PBS_pq")
    assert (done.returncode, done.stdout) == (1, "")  # as OpenPBS 23.06, which says nothing
    assert done.stderr == "qmgr: print pbshook is not supported; list pbshook shows a PBS hook\n"
    # Named, a plugin is still its hook whatever its type (pbsplug's plugin names).
    assert qmgr(engine, "list hook pw").stdout.startswith("Hook pw\n")


# -- issue 17: PBS's rules that qmgr missed -----------------------------------------------

@pytest.mark.parametrize("text, message", [
    ("create hook PBSfoo", "hook_name 'PBSfoo', cannot use PBS as a prefix it is reserved "
                           "for pbs hooks"),
    ("create hook prov2", "Another hook 'prov1' already has event 'provision', only one "
                          "'provision' hook allowed"),
])
def test_qmgr_create_hook_refuses_what_pbs_refuses(dists, make_engine, text, message):
    body = """
        @hookimpl
        def provision(event):
            pass

        @hookimpl
        def queuejob(event):
            pass
        """
    for name in ("prov1", "prov2", "PBSfoo"):
        plugin(dists, name, body, ("provision",))
    plugin(dists, "other", body, ("queuejob",))
    engine = make_engine("[plugins.prov1]\nenabled = true\n[plugins.other]\nenabled = true\n")
    name = text.split()[-1]
    done = engine.pbs("qmgr", "-c", text)
    assert done.stderr.splitlines() == [f"qmgr obj={name} svr=default: {message}",
                                        "qmgr: hook error returned from server"]
    assert f"[plugins.{name}]" not in engine.home.site.read_text()
    # nor may another hook take the event with set
    done = engine.pbs("qmgr", "-c", "set hook other event = provision")
    assert done.stderr.splitlines()[0] == (
        "qmgr obj=other svr=default: Another hook 'prov1' already has event 'provision', "
        "only one 'provision' hook allowed")


def test_a_disabled_pbs_hook_takes_pbs_orders(dists, make_engine):
    plugin(dists, "pw", """
        @hookimpl
        def periodic(event):
            pass
        """, ("periodic",), type="pbs", pbs_name="PBS_pw")
    engine = make_engine("")
    for order in ("-1000", "2000"):
        done = engine.pbs("qmgr", "-c", f"set pbshook PBS_pw order = {order}")
        assert (done.returncode, done.stderr) == (0, "")
        assert f"    order = {order}\n" in engine.pbs("qmgr", "-c", "list pbshook PBS_pw").stdout
    done = engine.pbs("qmgr", "-c", "set pbshook PBS_pw order = 2001")
    assert ("order given (2001) is outside the acceptable range of [-1000, 2000] for type "
            "'pbs'.") in done.stderr


_MIX = "Cannot mix old and new style queue/run limit enforcement types"


def test_old_and_new_style_limits_are_never_mixed(engine):
    """OpenPBS 23.06 (checked: tests/adapters/test_pbs_parity.py's rows): a new-style limit
    (max_run, max_run_res, their _soft forms, max_queued, max_queued_res,
    queued_jobs_threshold and its _res) is refused with 15141 while an old-style one
    (max_running, max_user_run, max_group_run; a queue's max_queuable too) is set on the
    server or any queue; an old-style one while the server or a queue has a max_run* or a
    queue a max_queued or queued_jobs_threshold. Nothing of the command is kept."""
    def q(text: str) -> tuple[int, list[str]]:
        answer = engine.client("qmgr", text=text)
        return answer["code"], answer["errors"]

    def refused(obj: str) -> tuple[int, list[str]]:
        return 15141, [f"qmgr obj={obj} svr=default: {_MIX}",
                       "qmgr: Error (15141) returned from server"]

    assert q("create queue lq queue_type = execution") == (0, [])
    assert q("set server max_running = 10") == (0, [])
    for text, obj in (("set server max_run = [o:PBS_ALL=10]", ""),
                      ("set queue lq max_run = [o:PBS_ALL=10]", "lq"),
                      ("set queue lq max_run_res.ncpus = [o:PBS_ALL=10]", "lq"),
                      ("set queue lq max_run_soft = [o:PBS_ALL=10]", "lq"),
                      ("set queue lq max_queued = [o:PBS_ALL=10]", "lq"),
                      ("set server max_queued_res.ncpus = [u:PBS_GENERIC=4]", ""),
                      ("set queue lq queued_jobs_threshold = [o:PBS_ALL=1]", "lq"),
                      ("create queue lq2 queue_type = execution, max_run = [o:PBS_ALL=1]",
                       "lq2")):
        assert q(text) == refused(obj), text
    assert "lq2" not in engine.client("stat_queues")
    assert q("unset server max_running") == (0, [])
    assert q("set queue lq max_queuable = 5") == (0, [])  # (old style, on a queue)
    assert q("set server max_run = [o:PBS_ALL=10]") == refused("")
    assert q("unset queue lq max_queuable") == (0, [])
    assert q("set queue lq max_run = [u:PBS_GENERIC=4]") == (0, [])
    for text, obj in (("set server max_user_run = 5", ""), ("set queue lq max_running = 5", "lq"),
                      ("set queue lq max_queuable = 5", "lq"),
                      ("set queue workq max_group_run = 5", "workq")):
        assert q(text) == refused(obj), text
    assert q("unset queue lq max_run") == (0, [])
    assert q("set queue lq max_queued = [o:PBS_ALL=10]") == (0, [])
    assert q("set server max_user_run = 5") == refused("")  # (a queue's max_queued counts)
    assert q("unset queue lq max_queued") == (0, [])
    # The server's max_queued refuses no old-style limit set after it (PBS looks at the
    # server's max_run* only), but is refused after one.
    assert q("set server max_queued = [o:PBS_ALL=5]") == (0, [])
    assert q("set server max_user_run = 5") == (0, [])
    assert q("set server max_queued = [o:PBS_ALL=6]") == refused("")
    assert q("unset server max_queued") == (0, [])
    assert q("unset server max_user_run") == (0, [])
    # both in one command, in either order: neither is kept
    assert q("set server max_running = 5, max_run = [o:PBS_ALL=5]") == refused("")
    assert q("set server max_run = [o:PBS_ALL=5], max_running = 5") == refused("")
    server = engine.client("stat_server")
    assert not {"max_running", "max_run"} & set(next(iter(server.values())))
    done = qmgr(engine, "set server max_run = [o:PBS_ALL=5]")
    assert (done.returncode, done.stderr) == (0, "")
    done = qmgr(engine, "set queue lq max_user_run = 5")
    assert (done.returncode, done.stdout, done.stderr) == (
        15141 % 256, "", f"qmgr obj=lq svr=default: {_MIX}\n"
                         "qmgr: Error (15141) returned from server\n")


def _type_warning(queue: str, attr: str) -> tuple[int, list[str]]:
    return 15026, [f"qmgr obj={queue} svr=default: Warning: type of queue {queue} "
                   f"incompatible with attribute {attr}",
                   "qmgr: Error (15026) returned from server"]


def test_an_attribute_of_the_other_queue_type_is_refused(engine):
    """OpenPBS 23.06 (checked: tests/adapters/test_pbs_parity.py's rows) answers 15026,
    ``Warning: type of queue Q incompatible with attribute A``, for a route queue's
    attribute (route_destinations, route_held_jobs, route_waiting_jobs, route_retry_time,
    route_lifetime) on an execution queue and an execution queue's (kill_delay,
    max_user_run, default_chunk, resources_available, ...) on a route queue, naming the
    first in its order; a queue without a type takes the type of the first. PBS stores the
    attribute all the same and answers 15026 to every later change of that queue; the
    engine stores nothing of the command."""
    def q(text: str) -> tuple[int, list[str]]:
        answer = engine.client("qmgr", text=text)
        return answer["code"], answer["errors"]

    assert q("create queue ex queue_type = execution") == (0, [])
    for attr in ("route_held_jobs = true", "route_waiting_jobs = true",
                 "route_retry_time = 10", "route_lifetime = 10",
                 "route_destinations = workq"):
        assert q(f"set queue ex {attr}") == _type_warning("ex", attr.split()[0]), attr
    assert q("set queue ex route_lifetime = 5, route_held_jobs = true") == \
        _type_warning("ex", "route_held_jobs")  # (PBS's order, not the command's)
    assert q("set queue ex comment = x") == (0, [])  # (nothing was kept)
    stored = engine.client("stat_queues", names=["ex"])["ex"]
    assert not [k for k in stored if k.startswith("route_")], stored
    assert q("create queue ex2 queue_type = execution, route_lifetime = 10") == \
        _type_warning("ex2", "route_lifetime")
    assert "ex2" not in engine.client("stat_queues")
    assert q("create queue rq queue_type = route") == (0, [])
    for attr in ("kill_delay = 5", "max_user_run = 5", "default_chunk.ncpus = 1",
                 "resources_available.ncpus = 2", "checkpoint_min = 5",
                 "max_run = [o:PBS_ALL=5]"):
        assert q(f"set queue rq {attr}") == _type_warning("rq", attr.split()[0].split(".")[0])
    assert q("set queue rq max_running = 5, resources_max.ncpus = 2") == (0, [])  # (any)
    assert q("set queue ex kill_delay = 5") == (0, [])
    assert q("set queue ex queue_type = route") == _type_warning("ex", "kill_delay")
    assert engine.client("stat_queues", names=["ex"])["ex"]["queue_type"] == "Execution"
    # A queue without a type: its first typed attribute decides, in PBS's order.
    assert q("create queue un") == (0, [])
    assert q("set queue un route_held_jobs = true") == (0, [])
    assert q("set queue un kill_delay = 5") == _type_warning("un", "route_held_jobs")
    assert q("set queue un queue_type = execution") == _type_warning("un", "route_held_jobs")
    assert q("set queue un queue_type = route") == (0, [])
    done = qmgr(engine, "set queue un kill_delay = 5")
    assert (done.returncode, done.stdout, done.stderr) == (
        15026 % 256, "", "qmgr obj=un svr=default: Warning: type of queue un incompatible "
                         "with attribute kill_delay\nqmgr: Error (15026) returned from server\n")


@pytest.mark.parametrize("command", [("qmgr", "-c", "create node a comment = ask"),
                                     ("pbsnodes", "-o", "-C", "ask", "a")])
def test_a_modifyvnode_hook_may_ask_the_server_to_write_while_it_runs(dists, make_engine,
                                                                      command):
    """A qmgr command's or a pbsnodes change's modifyvnode hook that sends the server a
    request which writes (a qsub, through the socket) has it answered while it runs: the
    server serves while the hook runs, nothing held for it; the change is made once the hook
    ends. (It waited for the hook's alarm, which killed it: pbsnodes' did until its hooks
    took qmgr's path.)"""
    site = plugin(dists, "asks", """
        import os
        from pathlib import Path
        from pbsplug.engine.client import Client
        from pbsplug.engine.home import Home

        @hookimpl
        def modifyvnode(event):
            if event.vnode.comment != "ask":
                return
            job = Client(Home(Path(os.environ["PBSPLUG_HOME"])), timeout=600)(
                "submit", attrs={"Hold_Types": "u"}, argv=["/bin/true"])
            with open(os.path.join(os.environ["PBSPLUG_HOME"], "asked"), "a") as out:
                out.write(f"{event.vnode.name} {job}\\n")
        """, ("modifyvnode",), alarm=5)
    engine = make_engine(site)
    if command[0] == "pbsnodes":
        assert qmgr(engine, "create node a").returncode == 0
    done = engine.pbs(*command)
    assert (done.returncode, done.stderr) == (0, "")
    assert (engine.root / "asked").exists(), engine.log()
    [line] = (engine.root / "asked").read_text().splitlines()
    name, job_id = line.split()
    assert name == "a"
    assert engine.job(job_id)["job_state"] == "H"
    node = engine.nodes()["a"]
    assert (node["comment"], node["state"]) == (
        "ask", "offline" if command[0] == "pbsnodes" else "free")


@pytest.mark.parametrize("command", [("qenable", "workq"), ("qstop", "workq")])
def test_a_queue_commands_management_hook_may_ask_the_server_while_it_runs(
        dists, make_engine, command):
    """qenable, qdisable, qstart and qstop are qmgr's ``set queue`` (PBS's management
    event): a management hook that sends the server a request (a qsub, through the socket)
    has it answered while it runs, as for qmgr. (They ran the hook in the server's one
    thread: the hook waited for its own qsub until its alarm killed it, and the command
    failed, every other client waiting meanwhile.)"""
    site = plugin(dists, "asks", """
        import os
        from pathlib import Path
        from pbsplug.engine.client import Client
        from pbsplug.engine.home import Home

        @hookimpl
        def management(event):
            job = Client(Home(Path(os.environ["PBSPLUG_HOME"])), timeout=600)(
                "submit", attrs={"Hold_Types": "u"}, argv=["/bin/true"])
            with open(os.path.join(os.environ["PBSPLUG_HOME"], "asked"), "a") as out:
                out.write(f"{event.management['objname']} {job}\\n")
        """, ("management",), alarm=5)
    engine = make_engine(site)
    done = engine.pbs(*command)
    assert (done.returncode, done.stderr) == (0, ""), engine.log()
    [line] = (engine.root / "asked").read_text().splitlines()
    name, job_id = line.split()
    assert name == "workq"
    assert engine.job(job_id)["job_state"] == "H"
    queue = engine.pbs("qmgr", "-c", "list queue workq").stdout
    expected = "enabled = True" if command[0] == "qenable" else "started = False"
    assert expected in queue, queue


def test_a_command_refused_for_one_node_runs_no_modifyvnode_hook_and_changes_none(
        dists, make_engine):
    """``set node a,b``, refused at b (its management hook rejects): the whole command is
    refused with the hook's text, a's row is as it was, and no modifyvnode hook ran for
    a: every hook of the command is judged before any vnode's change is told."""
    site = plugin(dists, "guard", """
        @hookimpl
        def management(event):
            if event.management["cmd"] == "set" and event.management["objname"] == "b":
                event.reject("b is protected")
        """, ("management",)) + plugin(dists, "told", """
        import os

        @hookimpl
        def modifyvnode(event):
            with open(os.path.join(os.environ["PBSPLUG_HOME"], "told"), "a") as out:
                out.write(event.vnode.name + "\\n")
        """, ("modifyvnode",))
    engine = make_engine(site)
    assert qmgr(engine, "create node a ; create node b", stdin=True).returncode == 0
    (engine.root / "told").unlink()
    done = qmgr(engine, "set node a,b comment = both")
    assert done.stderr.splitlines() == ["qmgr obj=b svr=default: b is protected",
                                        "qmgr: hook error returned from server"]
    assert done.returncode == 15136 % 256
    assert "comment" not in engine.nodes()["a"]
    assert not (engine.root / "told").exists()


def test_a_vnode_changed_while_the_commands_hooks_ran_refuses_the_command(dists, make_engine):
    """The hooks judged the vnode as it was; another request changed it meanwhile (here
    the hook's own pbsnodes -C): the command is refused, nothing of it written, the other
    change kept."""
    site = plugin(dists, "meddles", """
        import os
        from pathlib import Path
        from pbsplug.engine.client import Client
        from pbsplug.engine.home import Home

        @hookimpl
        def modifyvnode(event):
            if event.vnode.comment == "by qmgr":
                Client(Home(Path(os.environ["PBSPLUG_HOME"])), timeout=600)(
                    "node_state", names=[event.vnode.name], comment="by the hook")
        """, ("modifyvnode",))
    engine = make_engine(site)
    assert qmgr(engine, "create node a").returncode == 0
    done = qmgr(engine, "set node a comment = 'by qmgr', resources_available.mem = 3gb")
    assert done.stderr.splitlines() == [
        "qmgr obj=a svr=default: System error: vnode a changed while the command's hooks "
        "ran; nothing of the command is done, run it again",
        "qmgr: Error (15010) returned from server"]
    node = engine.nodes()["a"]
    assert node["comment"] == "by the hook"
    assert "mem" not in node.get("resources_available", {})


def _held_modifyvnode(dists, root, comment: str) -> str:
    """A modifyvnode hook that, for a vnode whose comment is `comment`, touches
    ``root/started`` and waits until the test opens the fifo ``root/gate`` to write."""
    os.mkfifo(root / "gate")
    return plugin(dists, "held", f"""
        @hookimpl
        def modifyvnode(event):
            if event.vnode.comment == {comment!r}:
                open({str(root / "started")!r}, "w").close()
                with open({str(root / "gate")!r}) as gate:  # (until the test writes to it)
                    gate.read()
        """, ("modifyvnode",), alarm=300)


def test_the_servers_write_to_a_vnode_while_the_commands_hooks_ran_is_kept_with_it(
        dists, make_engine, engine_root):
    """While `set node a comment = x` waits for its modifyvnode hook, a job starts and ends
    on a (the server writes a's last_state_change_time and last_used_time): the command
    is written on top of those writes, both kept. (It was refused with 15010: any write to
    a's row meanwhile refused it.)"""
    engine = make_engine(_held_modifyvnode(dists, engine_root, "x"))
    assert qmgr(engine, "create node a resources_available.ncpus = 1").returncode == 0
    command = subprocess.Popen([PBSPLUG, "qmgr", "-c", "set node a comment = x"],
                               env=engine.env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    until(lambda: (engine_root / "started").exists(), what="the modifyvnode hook to start")
    shown = engine.nodes()["a"]  # (the job's writes must differ: a later second than these)
    until(lambda: time.time() >= max(shown["last_state_change_time"],
                                     shown.get("last_used_time", 0)) + 1, what="a new second")
    job_id = engine.submit(Resource_List={"select": "1:ncpus=1:vnode=a"})
    assert engine.wait(job_id)["exec_vnode"] == "(a:ncpus=1)"
    written = engine.nodes()["a"]
    assert "comment" not in written
    assert written["last_used_time"] > shown.get("last_used_time", 0)
    assert written["last_state_change_time"] > shown["last_state_change_time"]
    with open(engine_root / "gate", "w"):
        pass
    out, err = command.communicate(timeout=60)
    assert (command.returncode, out, err) == (0, "", "")
    node = engine.nodes()["a"]
    assert node["comment"] == "x"
    assert (node["last_used_time"], node["last_state_change_time"]) == (
        written["last_used_time"], written["last_state_change_time"])


def test_a_vnode_change_made_while_the_management_hooks_ran_is_kept(dists, make_engine):
    """A management hook that offlines the vnode (a pbsnodes -o through the server) while
    `set node a resources_available.mem` is judged: the command then applies to the vnode
    as it is, offline with its comment. It was made of the vnode as first read, before the
    management hooks, and written back whole: the offline and the comment were lost, and
    the modifyvnode hook was told of a change back to free nobody asked for."""
    site = plugin(dists, "offlines", """
        import os
        from pathlib import Path
        from pbsplug.engine.client import Client
        from pbsplug.engine.home import Home

        @hookimpl
        def management(event):
            m = event.management
            if m["cmd"] == "set" and m["objtype"] == "node":
                Client(Home(Path(os.environ["PBSPLUG_HOME"])), timeout=60)(
                    "node_state", names=[m["objname"]], offline=True,
                    comment="offlined by the hook")
        """, ("management",)) + plugin(dists, "told", """
        import os

        @hookimpl
        def modifyvnode(event):
            with open(os.path.join(os.environ["PBSPLUG_HOME"], "told"), "a") as out:
                out.write(f"{event.vnode_o.state} -> {event.vnode.state}\\n")
        """, ("modifyvnode",))
    engine = make_engine(site)
    assert qmgr(engine, "create node a").returncode == 0
    (engine.root / "told").unlink()
    done = qmgr(engine, "set node a resources_available.mem = 3gb")
    assert done.returncode == 0, done.stderr
    node = engine.nodes()["a"]
    assert "offline" in str(node["state"]) and node.get("comment") == "offlined by the hook", node
    assert node["resources_available"]["mem"] == "3gb", node
    told = (engine.root / "told").read_text().splitlines()
    assert told[-1].endswith("-> offline"), told  # (the command's own: offline stays)


def test_a_server_stopped_while_a_qmgr_commands_hook_runs_refuses_the_command(
        dists, make_engine, engine_root):
    """The command waits for its hook while the server serves; the server's stop gives the
    hook up and answers the command as refused for the stop (15010), nothing of it made."""
    site = plugin(dists, "slow", f"""
        import select

        @hookimpl
        def modifyvnode(event):
            open({str(engine_root / "started")!r}, "w").close()
            select.select([], [], [])  # (until the stop kills it)
        """, ("modifyvnode",), alarm=600)
    engine = make_engine(site)
    command = subprocess.Popen([PBSPLUG, "qmgr", "-c", "create node late"],
                               env=engine.env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    until(lambda: (engine_root / "started").exists(), what="the modifyvnode hook to start")
    engine.stop()
    out, err = command.communicate(timeout=60)
    assert (command.returncode, out, err.splitlines()) == (
        15010 % 256, "", ["qmgr obj=late svr=default: System error: the server is stopping",
                          "qmgr: Error (15010) returned from server"])
    engine.start()
    assert "late" not in engine.nodes()
