"""Who may do what: the server knows callers by their uid on its socket (SO_PEERCRED)."""

from __future__ import annotations

import pwd
import socket


def test_users_run_their_own_jobs_and_touch_only_those(engine, unix_user):
    work = str(engine.work)
    mine = engine.as_user(unix_user, "submit", attrs={
        "Variable_List": {"PBS_O_WORKDIR": work}}, argv=["/bin/sh", "-c", "id -un; sleep 30"])
    job_id = mine["result"]
    attrs = engine.wait(job_id, "R")
    assert attrs["euser"] == unix_user and attrs["Job_Owner"].startswith(f"{unix_user}@")

    roots = engine.submit("sleep 30\n")
    engine.wait(roots, "R")
    refused = engine.as_user(unix_user, "delete", ids=[roots])
    assert refused["result"][0]["error"]["code"] == 15007
    assert refused["result"][0]["error"]["message"] == "Unauthorized Request"
    for op, args in (("run", {"id": roots}), ("node_state", {"names": ["x"], "offline": True}),
                     ("rerun", {"ids": [roots]}), ("shutdown", {})):
        assert engine.as_user(unix_user, op, **args)["error"]["code"] == 15007, op

    assert engine.as_user(unix_user, "delete", ids=[job_id])["result"] == [{"id": job_id}]
    engine.wait(job_id)
    out = engine.work / f"STDIN.o{job_id.split('.')[0]}"
    assert out.read_text() == f"{unix_user}\n"  # the job ran as its owner
    assert out.stat().st_uid == pwd.getpwnam(unix_user).pw_uid
    engine.client("delete", ids=[roots])  # a manager deletes anybody's job


def test_managers_attribute_makes_a_user_a_manager(engine, unix_user):
    roots = engine.submit("sleep 30\n")
    engine.wait(roots, "R")
    assert engine.as_user(unix_user, "delete", ids=[roots])["result"][0]["error"][
        "code"] == 15007
    engine.pbs("qmgr", "-c", f"set server managers += {unix_user}@*", check=True)
    assert engine.as_user(unix_user, "delete", ids=[roots])["result"] == [{"id": roots}]


def test_a_user_may_list_with_qmgr_but_not_change(engine, unix_user):
    listed = engine.as_user(unix_user, "qmgr", text="list queue workq")["result"]
    assert listed["output"].startswith("Queue workq\n") and listed["code"] == 0
    refused = engine.as_user(unix_user, "qmgr", text="set queue workq enabled = False")
    assert refused["result"]["errors"] == ["qmgr obj=workq svr=default: Unauthorized Request ",
                                           "qmgr: Error (15007) returned from server"]
    hooks = engine.as_user(unix_user, "qmgr", text="list hook")["result"]
    # OpenPBS 23.06's qmgr: why, alone, and exit status 0
    assert (hooks["output"], hooks["status"], len(hooks["errors"])) == ("", 0, 1)
    assert hooks["errors"][0].startswith(f"{unix_user}@")
    assert " is unauthorized to access hooks data from server " in hooks["errors"][0]
    assert engine.client("stat_queues")["workq"]["enabled"] is True



def test_a_users_hook_request_naming_a_hook_is_refused_about_that_hook(engine, unix_user):
    """OpenPBS 23.06 (checked): `list hook X`, `list pbshook X` and `print hook X` by a
    non-manager name X and end 'hook error returned from server', exit 1; only without
    names does `list hook` say why alone (exit 0) and `print hook` name no object."""
    host = socket.gethostname().split(".")[0]
    why = f"{unix_user}@{host} is unauthorized to access hooks data from server " \
          f"{host}"
    for text, name in (("list hook nosuch", "nosuch"), ("print hook nosuch", "nosuch"),
                       ("list pbshook PBS_power", "PBS_power"), ("print hook", "")):
        answer = engine.as_user(unix_user, "qmgr", text=text, one=True)["result"]
        assert answer["errors"] == [f"qmgr obj={name} svr=default: {why}",
                                    "qmgr: hook error returned from server"], text
        assert (answer["output"], answer["status"]) == ("", 1), text

def _holds(engine, user, op, job_id, types):
    """The error code of `op` (hold or release) of `types` on `job_id` as `user`, or 0."""
    answer = engine.as_user(user, op, ids=[job_id], types=types)["result"][0]
    return answer.get("error", {}).get("code", 0)


def test_who_sets_and_releases_which_hold_as_openpbs_answers(engine, unix_user):
    """OpenPBS 23.06, checked: an operator sets and releases o, not s (a manager's) nor p;
    p is released by the job's owner; one letter refused refuses the request whole. pbsplug
    let operators set and release s."""
    roots = engine.submit("true\n", Hold_Types="u")
    engine.pbs("qmgr", "-c", f"set server operators += {unix_user}@*", check=True)
    for op, types, code in (("hold", "s", 15007), ("hold", "p", 15007), ("hold", "os", 15007),
                            ("hold", "o", 0), ("release", "o", 0)):
        assert _holds(engine, unix_user, op, roots, types) == code, (op, types)
    assert engine.job(roots)["Hold_Types"] == "u"  # (os refused whole: no o left)
    engine.client("hold", ids=[roots], types="s")
    assert _holds(engine, unix_user, "release", roots, "s") == 15007
    refused = engine.as_user(unix_user, "alter", id=roots, attrs={"Hold_Types": "u"})
    assert refused["error"]["code"] == 15007  # (qalter removing s: the same rule)
    assert engine.job(roots)["Hold_Types"] == "su"
    engine.pbs("qmgr", "-c", f"set server operators -= {unix_user}@*", check=True)
    mine = engine.as_user(unix_user, "submit", attrs={"Hold_Types": "u"},
                          argv=["/bin/true"])["result"]
    engine.client("hold", ids=[mine], types="p")  # a manager's
    assert _holds(engine, unix_user, "hold", mine, "p") == 15007
    assert _holds(engine, unix_user, "release", mine, "p") == 0  # its owner's to release
    assert engine.job(mine)["Hold_Types"] == "u"
    engine.client("delete", ids=[roots, mine])


def test_qhold_and_qrls_go_on_past_a_refused_id(engine, attacker):
    """OpenPBS 23.06, checked: qrls A BAD B releases A and B, prints a line for BAD and
    exits with the last refusal's status. The server's request stopped at the first
    refusal."""
    a, b = (engine.as_user(attacker.user, "submit", attrs={"Hold_Types": "u"},
                           argv=["/bin/true"])["result"] for _ in range(2))
    roots = engine.submit("true\n", Hold_Types="u")
    answer = engine.as_user(attacker.user, "hold", ids=[a, roots, "99999", b], types="u")
    codes = [r.get("error", {}).get("code", 0) for r in answer["result"]]
    assert codes == [0, 15007, 15001, 0], answer
    done = attacker.pbs(engine, "qrls", a, "99999", roots, b)
    name = a.split(".", 1)[1]
    assert done.stderr == (f"qrls: Unknown Job Id 99999.{name}\n"
                           f"qrls: Unauthorized Request  {roots}\n"), done.stderr
    assert done.returncode == 15007 % 256, done  # the last refusal's
    for job_id in (a, b):
        assert engine.wait(job_id)["run_count"] == 1  # released, both: they ran
    assert engine.job(roots)["job_state"] == "H"
    engine.client("delete", ids=[roots])


def test_the_servers_acl_refusal_is_printed_as_openpbs_prints_it(engine, attacker):
    """OpenPBS 23.06 (checked as a user its server's acl_users does not name): the server's
    text ends in a blank, ``Unauthorized Request ``; qstat -Q and -B name the first queue
    asked for, or nothing, after a second blank; each command says it once, exit 159."""
    engine.pbs("qmgr", "-c", "set server acl_users = root", check=True)
    engine.pbs("qmgr", "-c", "set server acl_user_enable = true", check=True)
    for argv, line in ((("qsub", "--", "/bin/true"), "qsub: Unauthorized Request "),
                       (("qstat", "-Q", "workq"), "qstat: Unauthorized Request  workq"),
                       (("qstat", "-Qf", "nosuch"), "qstat: Unauthorized Request  nosuch"),
                       (("qstat", "-B"), "qstat: Unauthorized Request  "),
                       (("qstat",), "qstat: Unauthorized Request "),
                       (("qstat", "99999"), "qstat: Unauthorized Request "),
                       (("qstat", "workq"), "qstat: Unauthorized Request "),
                       (("qdel", "99999"), "qdel: Unauthorized Request ")):
        done = attacker.pbs(engine, *argv, input="")
        assert (done.returncode, done.stdout, done.stderr) == (159, "", f"{line}\n"), argv


def test_a_queues_acl_refusal_of_qsub_is_printed_as_openpbs_prints_it(engine, attacker):
    engine.pbs("qmgr", "-c", "create queue aq queue_type=execution,enabled=true,"
               "started=true,acl_user_enable=true,acl_users=root", check=True)
    done = attacker.pbs(engine, "qsub", "-q", "aq", "--", "/bin/true")
    assert (done.returncode, done.stdout, done.stderr) == (
        159, "", "qsub: Unauthorized Request \n")


def test_a_qmgr_node_changes_modifyvnode_requestor_is_the_manager_who_ran_it(
        dists, make_engine, engine_root, unix_user):
    """event.requestor of modifyvnode is the user who ran the command, as PBS's is:
    qmgr's create node and set node as pbsnodes' -o (review, session 47: qmgr's were
    fired as root's, whoever ran them)."""
    from .test_server import plugin

    seen = engine_root / "seen"
    engine = make_engine(plugin(dists, "who", f"""
        @hookimpl
        def modifyvnode(event):
            with open({str(seen)!r}, "a") as out:
                out.write(f"{{event.vnode.name}} {{event.requestor}}\\n")
        """, ("modifyvnode",)))
    engine.pbs("qmgr", "-c", f"set server managers += {unix_user}@*", check=True)
    for text in ("create node extra", "set node extra comment = 'by a manager'"):
        answer = engine.as_user(unix_user, "qmgr", text=text, one=True)["result"]
        assert answer["code"] == 0, answer
    assert engine.as_user(unix_user, "node_state", names=["extra"], offline=True)[
        "result"] is None
    assert seen.read_text().splitlines() == [f"extra {unix_user}"] * 3
