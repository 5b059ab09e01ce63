"""Access control lists on an `Engine` in this process: the server's and each queue's, as
OpenPBS 23.06 applied the same lists (checked by hand; core/engine/acl.py lists the facts).
The user is uid 1001, the one the security tests make (its name comes from the system)."""

from __future__ import annotations

import pytest

from pbsplug import values
from pbsplug.engine import acl
from pbsplug.engine.errors import PBSE_BADHOST, PBSE_PERM, PbsError
from pbsplug.engine.server import ROLE_MANAGER, ROLE_OPERATOR, ROLE_USER, Caller, Engine

ROOT = Caller(0, ROLE_MANAGER)
USER = Caller(1001, ROLE_USER)


@pytest.fixture
def engine(engine_here):
    eng = engine_here()
    qmgr(eng, "set server scheduling = false")
    qmgr(eng, "create queue aq queue_type=execution,enabled=true,started=true")
    return eng


def qmgr(eng: Engine, text: str) -> None:
    out = eng.req_qmgr(ROOT, text)
    assert out["code"] == 0, out


def submit(eng: Engine, caller: Caller, queue: str = "aq", **attrs) -> str:
    return eng.req_submit(caller, {"queue": queue, **attrs}, "true\n")


def refused(call) -> int:
    with pytest.raises(PbsError) as err:
        call()
    return err.value.code


def test_a_queues_acl_users_refuses_qsub_root_too_and_the_first_entry_decides(engine):
    qmgr(engine, "set queue aq acl_user_enable=true,acl_users=daemon")
    assert refused(lambda: submit(engine, USER)) == PBSE_PERM
    assert refused(lambda: submit(engine, ROOT)) == PBSE_PERM  # (no bypass at qsub)
    qmgr(engine, f"set queue aq acl_users='{USER.user}@{engine.host}'")
    assert submit(engine, USER)
    qmgr(engine, f"set queue aq acl_users='-{USER.user},+{USER.user}'")
    assert refused(lambda: submit(engine, USER)) == PBSE_PERM
    qmgr(engine, f"set queue aq acl_users='{USER.user[:3]}*'")  # (names no one)
    assert refused(lambda: submit(engine, USER)) == PBSE_PERM
    qmgr(engine, "set queue aq acl_user_enable=false")  # (the list counts while on)
    assert submit(engine, USER)


def test_a_queues_acl_refuses_a_users_qmove_not_a_managers(engine):
    qmgr(engine, "set queue aq acl_user_enable=true,acl_users=daemon")
    mine = submit(engine, USER, queue="workq", Hold_Types="u")
    (result,) = engine.req_move(USER, "aq", [mine])
    assert result["error"]["code"] == PBSE_PERM
    (result,) = engine.req_move(Caller(1001, ROLE_OPERATOR), "aq", [mine])
    assert result["error"]["code"] == PBSE_PERM
    (result,) = engine.req_move(ROOT, "aq", [mine])
    assert "error" not in result and engine.store.job(mine)["queue"] == "aq"


def test_acl_groups_and_acl_hosts(engine):
    qmgr(engine, "set queue aq acl_group_enable=true,acl_groups=root")
    assert submit(engine, ROOT)
    assert refused(lambda: submit(engine, USER)) == PBSE_PERM
    qmgr(engine, "set queue aq acl_group_enable=false")
    qmgr(engine, "set queue aq acl_host_enable=true,acl_hosts='*.nowhere.example'")
    assert refused(lambda: submit(engine, USER)) == PBSE_BADHOST  # (PBS's 15008)
    qmgr(engine, "set queue aq acl_user_enable=true,acl_users=nobody")
    assert refused(lambda: submit(engine, USER)) == PBSE_BADHOST  # (the hosts first)
    qmgr(engine, "set queue aq acl_user_enable=false")
    qmgr(engine, f"set queue aq acl_hosts='{engine.host}'")
    assert submit(engine, USER)


def test_a_route_queue_passes_over_a_destination_whose_acl_refuses_the_owner(engine):
    qmgr(engine, "set queue aq acl_user_enable=true,acl_users=root")
    qmgr(engine, "create queue rq queue_type=route,route_destinations='aq,workq'")
    qmgr(engine, "set queue rq enabled=true,started=true")
    assert engine.store.job(submit(engine, USER, queue="rq"))["queue"] == "workq"
    assert engine.store.job(submit(engine, ROOT, queue="rq"))["queue"] == "aq"


def test_the_servers_acl_users_refuses_every_request_of_a_user_it_does_not_name(engine):
    qmgr(engine, "set server acl_users=daemon")
    qmgr(engine, "set server acl_user_enable=true")
    for op, args in (("submit", {"attrs": {}, "script": "true\n"}), ("stat_jobs", {})):
        assert refused(lambda op=op, args=args: engine.handle(op, args, USER.uid)) == \
            PBSE_PERM
    assert engine.handle("stat_jobs", {}, 0) == {}  # a manager passes
    qmgr(engine, f"set server acl_users={USER.user}")
    assert engine.handle("stat_jobs", {}, USER.uid) == {}


def test_acl_roots_decides_whether_roots_jobs_are_let_in(engine, engine_here):
    """OpenPBS 23.06, checked: with acl_roots unset, or naming neither root nor root@host,
    root's qsub is refused with 15023 (`Bad UID for job execution`, qsub's status 175),
    after the queue is found; a new pbsplug home lets root in (acl_roots = root), and a
    home made before pbsplug read acl_roots is given it once."""
    assert engine.store.get("server", "server")["acl_roots"] == ["root"]
    assert submit(engine, ROOT)
    qmgr(engine, "unset server acl_roots")
    with pytest.raises(PbsError) as err:
        submit(engine, ROOT)
    assert (err.value.code, err.value.message) == (15023, "Bad UID for job execution")
    assert refused(lambda: submit(engine, ROOT, queue="nosuch")) == 15018  # (queue first)
    # ... but before the queue's own checks (PBS answered 15023 for these three too).
    qmgr(engine, "create queue off queue_type=execution,enabled=false,started=true")
    qmgr(engine, "create queue theirs queue_type=execution,enabled=true,started=true,"
                 "acl_user_enable=true,acl_users=nobody")
    qmgr(engine, "create queue rq queue_type=route,enabled=true,started=true,"
                 "route_destinations=aq")
    for queue in ("off", "theirs", "rq"):
        assert refused(lambda queue=queue: submit(engine, ROOT, queue=queue)) == 15023, queue
    # pbs_rsub: 15095, `Bad effective UID for reservation` (pbs_rsub's status 247).
    with pytest.raises(PbsError) as err:
        engine.req_resv_submit(ROOT, {"reserve_duration": 600,
                                      "reserve_start": int(engine.clock()) + 3600})
    assert (err.value.code, err.value.message) == (15095, "Bad effective UID for reservation")
    assert engine.store.all("resv") == {}
    assert submit(engine, USER)  # (users' jobs are not root's)
    for text, allowed in ((f"root@{engine.host}", True), ("bob", False), ("-root,root", False),
                          ("root@*", True)):
        qmgr(engine, f"set server acl_roots = '{text}'")
        if allowed:
            assert submit(engine, ROOT), text
        else:
            assert refused(lambda: submit(engine, ROOT)) == 15023, text
    count = len(engine.store.jobs())
    qmgr(engine, "unset server acl_roots")
    engine.close()
    again = engine_here()  # (the same home: unset stays unset)
    assert "acl_roots" not in again.store.get("server", "server")
    assert refused(lambda: submit(again, ROOT)) == 15023
    with again.store.transaction() as st:  # (a home from before: no meta key)
        st.db.execute("DELETE FROM meta WHERE key = 'acl_roots_given'")
    again.close()
    older = engine_here()
    assert older.store.get("server", "server")["acl_roots"] == ["root"]
    assert submit(older, ROOT) and len(older.store.jobs()) == count + 1


def test_acl_entries_read_as_pbs_reads_them():
    n1 = ("n1", "n1.example.org")  # (a host's short and full names)
    assert acl.user_allowed(["bob@*.example.org"], "bob", n1)
    assert not acl.user_allowed(["bob@*.example.org"], "bob", ("n1", "n1.other.org"))
    # (a leading `*` stands for any one or more characters, not only for labels)
    assert acl.user_allowed(["bob@*example.org"], "bob", ("evilexample.org",))
    assert acl.user_allowed(["bob@n1"], "bob", n1) and acl.user_allowed(
        ["bob@n1.example.org"], "bob", n1)
    assert not acl.user_allowed([], "bob", n1)
    assert not acl.user_allowed(["-bob", "bob"], "bob", n1)
    assert acl.user_allowed(["--bob", "bob"], "bob", n1)  # (it refuses a user `-bob`)
    assert not acl.user_allowed(["-bob@*.example.org", "bob"], "bob", n1)
    assert acl.host_allowed(["*"], n1) and acl.host_allowed(["*.example.org"], n1)
    root_gid = 0
    assert acl.group_allowed(["nosuchgroup", "+root"], {root_gid})
    assert not acl.group_allowed(["-root", "root"], {root_gid})
    # A switch that does not read as a boolean counts as on: the list is applied.
    assert not acl.queue_allows({"acl_user_enable": None, "acl_users": ["x"]}, "bob", n1)


#: Host parts read against a client on host `vm`, and whether they name it: OpenPBS 23.06's
#: answers to qsub from its own host `vm`, with each as a queue's acl_hosts and as
#: ``user@<host>`` in its acl_users (tests/adapters/test_pbs_acl_parity.py asks it again).
PBS_HOSTS = [("vm", True), ("VM", True), ("*", True), ("*m", True), ("*M", True),
             ("*vm", False), ("v*", False), ("x*vm", False), ("*.vm", False), ("**", False),
             ("*.*", False), ("vm.", False), ("localhost", False), ("other", False),
             ("*.example.com", False), ("vm.example.com", False), ("192.0.2.10", False),
             ("127.0.0.1", False)]


@pytest.mark.parametrize("host,named", PBS_HOSTS)
def test_a_host_part_names_a_host_as_pbs_reads_it(host, named):
    assert acl.host_allowed([host], ("vm",)) is named
    assert acl.user_allowed([f"bob@{host}"], "bob", ("vm",)) is named
    assert acl.user_allowed([f"-bob@{host}", "bob"], "bob", ("vm",)) is not named


def test_a_host_part_names_a_host_by_its_short_or_full_name():
    n1 = ("n1", "n1.example.org")
    for host in ("n1", "N1.Example.ORG", "*.example.org", "*.org", "*ample.org", "*1",
                 "*"):
        assert acl.host_allowed([host], n1), host
    for host in ("example.org", "*n1.example.org", "*.n1", "n1.example", "n2", "*.n1.org"):
        assert not acl.host_allowed([host], n1), host
    assert not acl.user_allowed(["bob@"], "bob", n1)  # (no host names none)
    assert not acl.user_allowed(["BOB"], "bob", n1)  # (user names are exact)
    assert not acl.group_allowed(["root@n1"], {0}) and not acl.group_allowed(["root@*"], {0})
    # A host list switched on with no entry lets in the server's own host (whose names
    # every pbsplug client has), as OpenPBS's does.
    assert acl.host_allowed([], n1) and acl.host_allowed(None, n1)
    assert acl.queue_allows({"acl_host_enable": True}, "bob", n1)


def test_a_local_clients_host_is_this_hosts_short_and_full_names(engine):
    """Every client is on the server's host (a UNIX socket): an entry naming it by its short
    name or its full one names the client; localhost, an address or another host does not
    (OpenPBS, reached by its host's name, named a client on its host so, checked)."""
    assert engine.host in engine.host_names
    assert all(name.split(".")[0] == engine.host for name in engine.host_names)
    engine.host_names = (engine.host, f"{engine.host}.cluster.example")
    user, host = USER.user, engine.host
    qmgr(engine, "set queue aq acl_user_enable=true")
    for entry, allowed in ((f"{user}@{host}", True), (f"{user}@{host.upper()}", True),
                           (f"{user}@{host}.cluster.example", True),
                           (f"{user}@*.cluster.example", True), (f"{user}@*.example", True),
                           (f"{user}@*", True), (f"{user}@*{host[-1]}", True),
                           (f"{user}@*{host}", False), (f"{user}@{host}*", False),
                           (f"{user}@localhost", False), (f"{user}@127.0.0.1", False),
                           (f"{user}@other.example.com", False),
                           (f"{user}@*.other.example", False), (f"{user}@*.{host}", False)):
        qmgr(engine, f"set queue aq acl_users = '{entry}'")
        if allowed:
            assert submit(engine, USER), entry
        else:
            assert refused(lambda: submit(engine, USER)) == PBSE_PERM, entry
    qmgr(engine, "set queue aq acl_user_enable=false")
    qmgr(engine, "set queue aq acl_host_enable=true")
    for entry, allowed in ((host, True), (f"{host}.cluster.example", True),
                           ("*.example", True), ("localhost", False),
                           ("*.example.com", False), (f"-{host},*", False)):
        qmgr(engine, f"set queue aq acl_hosts = '{entry}'")
        if allowed:
            assert submit(engine, USER), entry
        else:
            assert refused(lambda: submit(engine, USER)) == PBSE_BADHOST, entry
    qmgr(engine, "unset queue aq acl_hosts")  # (on, with no list: this host only)
    assert submit(engine, USER)


def test_the_servers_acl_hosts_never_refuses_its_own_host(engine):
    """OpenPBS 23.06 (checked): with the server's acl_hosts on and naming another host,
    a user on the server's host is still served; every pbsplug client is on it."""
    qmgr(engine, "set server acl_hosts = nowhere.example")
    qmgr(engine, "set server acl_host_enable = true")
    assert engine.handle("stat_jobs", {}, USER.uid) == {}
    assert submit(engine, USER, queue="workq")


def test_a_sign_alone_is_refused_and_one_stored_names_no_one():
    """OpenPBS takes ``+`` or ``-`` alone as a list's answer for everyone no entry names
    (``acl_users = +`` let every user in, checked); pbsplug refuses it, saying which."""
    for kind, noun in (("user", "user name"), ("group", "group name"), ("host", "host name")):
        for given in (["+"], ["-"], ["alice", "+"], ["-", "alice"]):
            with pytest.raises(acl.BadEntry) as err:
                acl.insert(kind, ["bob"], given)
            sign = "+" if "+" in given else "-"
            assert str(err.value) == f"'{sign}' is a sign without a {noun}", (kind, given)
        # One sign is the sign: `--` refuses a user (group, host) named `-`.
        assert sorted(acl.ordered(kind, ["--", "+-", "-+"])) == sorted(["--", "+-", "-+"])
    with pytest.raises(values.BadValue) as bad:
        values.acl_entry("+", "Authorized_Users")
    assert str(bad.value) == "Authorized_Users: '+' is a sign without a user name"
    assert values.acl_entry("--", "Authorized_Users") == "--"
    vm = ("vm",)
    # Stored by an older pbsplug: it names no one, and the list reads as without it.
    assert not acl.user_allowed(["+"], "bob", vm)
    assert not acl.user_allowed(["-root", "+"], "bob", vm)
    assert acl.user_allowed(["-", "bob"], "bob", vm)
    assert not acl.group_allowed(["+"], {0})
    assert not acl.host_allowed(["+"], vm) and not acl.host_allowed(["-"], vm)
    assert acl.user_allowed(["+-"], "-", vm) and not acl.user_allowed(["--", "-"], "-", vm)


def test_qmgr_refuses_a_sign_alone_and_keeps_the_list(make_engine):
    eng = make_engine()
    eng.pbs("qmgr", "-c", "set queue workq acl_users = alice", check=True)
    for attr, value, noun in (("acl_users", "+", "user"), ("acl_users", "'+,bob'", "user"),
                              ("acl_hosts", "-", "host"), ("acl_groups", "'root,-'", "group")):
        for op in ("=", "+="):
            done = eng.pbs("qmgr", "-c", f"set queue workq {attr} {op} {value}")
            # PBS's 15014 naming the attribute (not 15004: a later command still runs)
            assert done.returncode == 15014 & 0xff, (attr, op, value, done.returncode)
            assert f"Illegal attribute or resource value {attr}: '" in done.stderr and \
                f"' is a sign without a {noun} name" in done.stderr, done.stderr
    listed = eng.pbs("qmgr", "-c", "list queue workq", check=True).stdout
    assert "    acl_users = alice\n" in listed and "acl_hosts" not in listed and \
        "acl_groups" not in listed, listed
    eng.pbs("qmgr", "-c", "set queue workq acl_users -= alice", check=True)


#: Lists set with qmgr (`set queue q acl_users = "..."`) on OpenPBS 23.06, and the order it
#: stored and printed them in.
PBS_ORDERS = [
    ("user", "b@x.y.com,b@*.y.com,b@*,b,-b@z,a,B,+b@a.y.com",
     "B,a,b,b@x.y.com,+b@a.y.com,b@*.y.com,-b@z,b@*"),
    ("user", "b,b@*", "b,b@*"), ("user", "b@*,b", "b,b@*"),
    ("user", "b@vm,-b", "-b,b@vm"), ("user", "-b,b@vm", "-b,b@vm"),
    ("user", "b@zz,b@aa,b@*.aa,b@m.aa", "b@zz,b@m.aa,b@*.aa,b@aa"),
    ("user", "zed,-abc@*.example.org,bob@vm,+bob,carol@*",
     "-abc@*.example.org,+bob,bob@vm,carol@*,zed"),
    ("user", "zed@vm,amy@*,pbsplugtu@vm,bob@*.example.org",
     "amy@*,bob@*.example.org,pbsplugtu@vm,zed@vm"),
    ("user", "zed,root,amy@vm", "amy@vm,root,zed"),
    ("user", "b@aa,b@zz", "b@zz,b@aa"), ("user", "b@zz,b@aa", "b@zz,b@aa"),
    ("user", "b@x.com,b@y.org,b@*.com", "b@x.com,b@*.com,b@y.org"),
    ("user", "b@*.org,b@x.com,b@y.org", "b@x.com,b@y.org,b@*.org"),
    ("user", "b@a.b,b@b", "b@a.b,b@b"),
    ("user", "b@x.y.com,b@z", "b@x.y.com,b@z"), ("user", "b@z,b@x.y.com", "b@x.y.com,b@z"),
    ("user", "b@*.y.com,-b@z", "b@*.y.com,-b@z"), ("user", "b@*,b@z", "b@z,b@*"),
    ("user", "b@m,b@z", "b@z,b@m"), ("user", "b@z,b@m", "b@z,b@m"),
    ("user", "b@zm,b@am", "b@zm,b@am"), ("user", "b@am,b@zm", "b@zm,b@am"),
    ("user", "b@ma,b@mz", "b@mz,b@ma"), ("user", "b@mz,b@ma", "b@mz,b@ma"),
    ("user", "b@x.y.com,b@zz.org", "b@x.y.com,b@zz.org"),
    ("host", "a.b.com,b.com,*.com,zz.org,c", "a.b.com,b.com,*.com,zz.org,c"),
    ("host", "aa,zz,mm", "zz,mm,aa"), ("host", "x.aa,y.aa,*.aa,aa", "y.aa,x.aa,*.aa,aa"),
    ("host", "-aa,bb,+cc,-zz", "-zz,+cc,bb,-aa"),
    ("group", "zz,-aa,bb,+AA,Bb", "+AA,Bb,-aa,bb,zz"),
    # An entry and its signed twin: a stored `*` goes after the new one, others before it.
    ("user", "bob@*,-bob@*", "-bob@*,bob@*"), ("user", "-bob@*,bob@*", "bob@*,-bob@*"),
    ("user", "bob@*.aa,-bob@*.aa", "-bob@*.aa,bob@*.aa"),
    ("user", "bob@vm,-bob@vm", "bob@vm,-bob@vm"), ("user", "-bob@vm,bob@vm", "-bob@vm,bob@vm"),
    ("user", "bob@vm,+bob@vm", "bob@vm,+bob@vm"),
    ("host", "+*.ex.com,-*.ex.com", "-*.ex.com,+*.ex.com"),
    ("host", "-*.ex.com,+*.ex.com", "+*.ex.com,-*.ex.com"),
    ("host", "*,-*", "-*,*"), ("host", "-*,*", "*,-*"), ("host", "vm,-vm", "vm,-vm"),
    ("host", "-vm,vm", "-vm,vm"), ("host", "+vm,vm", "+vm,vm"),
    ("group", "g,-g", "g,-g"), ("group", "-g,g", "-g,g"), ("group", "+g,g", "+g,g"),
    # Users byte by byte, `@` too ('-' 45, '.' 46, '2' 50, '@' 64).
    ("user", "bob@vm,bob2", "bob2,bob@vm"), ("user", "bob2,bob@vm", "bob2,bob@vm"),
    ("user", "bob,bob@vm,bob2,bob.x,bob-y", "bob,bob-y,bob.x,bob2,bob@vm"),
    # One sign is the sign: `--bob` names `-bob`.
    ("user", "-alice,--bob", "--bob,-alice"), ("group", "-alice,--bob", "--bob,-alice"),
    ("host", "--a,-b", "--a,-b"),
]


@pytest.mark.parametrize("kind,given,stored", PBS_ORDERS)
def test_lists_are_kept_in_pbss_order(kind, given, stored):
    assert ",".join(acl.ordered(kind, given.split(","))) == stored


def test_a_new_entry_goes_where_pbs_puts_it_in_a_list_not_in_order():
    """pbs_rsub put its owner into the -U list so (OpenPBS 23.06): before the first entry
    it precedes, the others left as given."""
    given = ["nobody", "zed@vm", "-abc@*.example.org", "root"]
    assert acl.insert("user", given, ["pbsplugtu@vm"]) == [
        "nobody", "pbsplugtu@vm", "zed@vm", "-abc@*.example.org", "root"]
    assert acl.insert("user", ["+pbsplugtu", "-root"], ["pbsplugtu@vm"]) == [
        "+pbsplugtu", "pbsplugtu@vm", "-root"]


def test_qmgr_stores_acls_in_pbss_order_refuses_an_entry_twice_and_the_order_decides(engine):
    host = engine.host
    qmgr(engine, f"set queue aq acl_user_enable=true,"
                 f"acl_users='{USER.user}@{host},-{USER.user}'")
    assert engine.store.get("queue", "aq")["acl_users"] == [f"-{USER.user}",
                                                            f"{USER.user}@{host}"]
    assert refused(lambda: submit(engine, USER)) == PBSE_PERM  # (-user is read first)
    qmgr(engine, f"set queue aq acl_users -= '-{USER.user}'")
    assert submit(engine, USER)
    qmgr(engine, "set server managers += zed@*")
    before = engine.store.get("server", "server")["managers"]
    for text in ("set server managers += zed@*", "set server managers = 'amy,amy'",
                 "set queue aq acl_hosts = 'a,b,a'", "set queue aq acl_groups += 'x,x'"):
        out = engine.req_qmgr(ROOT, text)
        assert out["code"] == 15055, (text, out)
        assert "Duplicate entry in list  " in str(out), out
    assert engine.store.get("server", "server")["managers"] == before
    qmgr(engine, f"set queue aq acl_users += '+{USER.user}'")  # (a sign makes another)
    qmgr(engine, "set queue aq acl_hosts = 'aa,zz,mm'")
    assert engine.store.get("queue", "aq")["acl_hosts"] == ["zz", "mm", "aa"]
    # A refusal added after an entry it mirrors goes first (PBS's order for a stored `*`),
    # so it refuses: pbsplug put it after, and the user was let in.
    qmgr(engine, f"set queue aq acl_users = '{USER.user}@*'")
    assert submit(engine, USER)
    qmgr(engine, f"set queue aq acl_users += '-{USER.user}@*'")
    assert engine.store.get("queue", "aq")["acl_users"] == [f"-{USER.user}@*",
                                                            f"{USER.user}@*"]
    assert refused(lambda: submit(engine, USER)) == PBSE_PERM
    # At most 1,000 entries, in one request or added up; nothing stored past it.
    names = ",".join(f"u{i}" for i in range(999))
    qmgr(engine, f"set queue aq acl_users = '{names}'")
    for text in ("set queue aq acl_users += 'x,y'", f"set queue aq acl_users = '{names},x,y'"):
        out = engine.req_qmgr(ROOT, text)
        assert out["code"] == 15014, out
        assert "Illegal attribute or resource value acl_users: more than 1,000 entries" in \
            str(out), out
    assert len(engine.store.get("queue", "aq")["acl_users"]) == 999
    qmgr(engine, "set queue aq acl_users += x")


def test_managers_and_operators_name_users_as_an_acl_does(engine):
    """Both lists are read as user ACLs (one reader for all such lists): ``user@*.domain``
    matches this host's full name, a ``-`` entry read first refuses."""
    engine.host_names = (engine.host, f"{engine.host}.cluster.example")
    assert engine.caller(1001).role == ROLE_USER
    qmgr(engine, f"set server operators = '{USER.user}@*.cluster.example'")
    assert engine.caller(1001).role == ROLE_OPERATOR
    qmgr(engine, f"set server managers = '{USER.user}@*.other.example'")
    assert engine.caller(1001).role == ROLE_OPERATOR
    qmgr(engine, f"set server managers = '{USER.user}@{engine.host}.cluster.example'")
    assert engine.caller(1001).role == ROLE_MANAGER
    qmgr(engine, f"set server managers = '{USER.user}@*,-{USER.user}'")  # (stored -u first)
    assert engine.caller(1001).role == ROLE_OPERATOR
