"""The server's own vnode changes (a periodic hook's, a fail_action's offline_vnodes): each is
written at once, and its modifyvnode hooks are told of it afterwards while the server
serves, in the order the changes were made (`Engine._set_node`). They ran first, in the
server's one thread: a slow modifyvnode hook held every client until its alarm."""

from __future__ import annotations

import json
import os

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.client import Client
from pbsplug.engine.server import Engine

from .conftest import until
from .test_server import plugin

#: A hang guard only, for the requests made while a hook is held: the old server answered
#: none until the hook ended (here: never, the hook waiting for the test).
SERVED_WITHIN = 30.0


def _told(dists, root, held: str, watch: str = "") -> str:
    """A modifyvnode hook that, for the first change whose new comment is `held`, touches
    ``root/started`` and waits until the test opens the fifo ``root/gate`` to write; then
    (and at once for any other change, a later one to `held` too: the gate is opened once)
    appends what it was told to ``root/told``, for a change whose new comment starts with
    `watch`."""
    os.mkfifo(root / "gate")
    return plugin(dists, "told", f"""
        import os

        @hookimpl
        def modifyvnode(event):
            vn, old = event.vnode, event.vnode_o
            if not str(vn.comment).startswith({watch!r}):
                return
            if vn.comment == {held!r} and not os.path.exists({str(root / "started")!r}):
                open({str(root / "started")!r}, "w").close()
                with open({str(root / "gate")!r}) as gate:  # (until the test writes to it)
                    gate.read()
            with open({str(root / "told")!r}, "a") as out:
                out.write(f"{{event.requestor}} {{vn.name}} {{old.state}},{{old.comment}} -> "
                          f"{{vn.state}},{{vn.comment}}\\n")
        """, ("modifyvnode",), alarm=300)


def _ticks(dists, root, last: str = "two") -> str:
    """A periodic hook that, while ``root/tick`` exists, moves the first vnode's comment
    on: unset to ``one``, ``one`` to ``two``; ``root/tick`` is removed once it made
    `last`."""
    return plugin(dists, "tick", f"""
        import os

        @hookimpl
        def periodic(event):
            if not os.path.exists({str(root / "tick")!r}):
                return
            vn = event.vnode_list[sorted(event.vnode_list)[0]]
            if vn.comment is None:
                vn.comment = "one"
            elif vn.comment == "one":
                vn.comment = "two"
            if vn.comment == {last!r}:
                os.unlink({str(root / "tick")!r})
        """, ("periodic",), freq=1)


def _open_gate(root) -> None:
    with open(root / "gate", "w"):
        pass


def _lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_periodic_hooks_changes_are_told_while_the_server_serves_in_order(
        dists, make_engine, engine_root):
    """A periodic hook changes a vnode's comment twice; the first change's modifyvnode hook
    is held: meanwhile the server answers (pbsnodes, qstat), shows the change at once, and
    makes the periodic hook's second change; the second change is told only after the first,
    each with the vnode as it was and as the change left it."""
    engine = make_engine(_told(dists, engine_root, "one") + _ticks(dists, engine_root))
    name = sorted(engine.nodes())[0]
    (engine_root / "tick").touch()
    until(lambda: (engine_root / "started").exists(), what="the modifyvnode hook to start")
    client = Client(engine.home, timeout=SERVED_WITHIN)
    assert client("stat_nodes", names=[name])[name]["comment"] in ("one", "two")
    assert client("stat_jobs") == {}
    until(lambda: client("stat_nodes", names=[name])[name].get("comment") == "two",
          what="the second change, made while the first one's hook is held")
    done = engine.pbs("pbsnodes", name)
    assert done.returncode == 0 and "comment = two" in done.stdout, done
    assert not (engine_root / "told").exists()  # (the held hook writes once let go)
    _open_gate(engine_root)
    until(lambda: len(_lines(engine_root / "told")) >= 2, what="both changes told")
    assert _lines(engine_root / "told") == [f"root {name} free,None -> free,one",
                                            f"root {name} free,one -> free,two"]


def test_a_vnodes_changes_waiting_are_told_as_one_and_a_change_of_nothing_not_at_all(
        dists, make_engine, engine_root):
    """A periodic hook sets the first vnode's comment to ``one`` (its modifyvnode hook is
    held); its next runs set every vnode's comment to ``c2``, ``c3``, then ``c3`` twice
    more. Each vnode's changes made while the hook is held are told as one change, from the
    first's old row to the last's (its place in the queue kept); a run that changes
    nothing is neither written nor told: the queue holds one change a vnode, however many
    runs (it grew by every vnode each run, identical runs too)."""
    runs = engine_root / "runs"
    engine = make_engine(_told(dists, engine_root, "one") + plugin(dists, "tick", f"""
        import os

        @hookimpl
        def periodic(event):
            if not os.path.exists({str(engine_root / "tick")!r}):
                return
            with open({str(runs)!r}, "a") as out:
                out.write("run\\n")
            run = len(open({str(runs)!r}).read().splitlines())
            if run == 1:
                event.vnode_list[sorted(event.vnode_list)[0]].comment = "one"
                return
            for vn in event.vnode_list.values():
                vn.comment = f"c{{min(run, 3)}}"
            if run == 5:
                os.unlink({str(engine_root / "tick")!r})
        """, ("periodic",), freq=1))
    first, *others = names = sorted(engine.nodes())
    (engine_root / "tick").touch()
    until(lambda: (engine_root / "started").exists(), what="the modifyvnode hook to start")
    until(lambda: not (engine_root / "tick").exists(), what="the periodic hook's five runs",
          timeout=60)
    assert {a.get("comment") for a in engine.nodes().values()} == {"c3"}
    assert not (engine_root / "told").exists()
    _open_gate(engine_root)
    until(lambda: len(_lines(engine_root / "told")) >= 1 + len(names), what="all told")
    told = _lines(engine_root / "told")
    assert told[:2] == [f"root {first} free,None -> free,one",
                        f"root {first} free,one -> free,c3"]
    assert sorted(told[2:]) == [f"root {name} free,None -> free,c3" for name in others]
    engine.stop()
    assert "were not run" not in engine.log()


def test_a_clients_change_is_judged_at_once_before_the_servers_earlier_ones_are_told(
        dists, make_engine, engine_root):
    """The periodic hook sets the comment ``one`` (its hook held), then ``two``; a
    ``pbsnodes -C three`` meanwhile is judged at once (its hooks run before its write, not
    behind the queue): told ``two -> three`` first, then the server's two changes, each as
    it was made (docs/engine.md)."""
    engine = make_engine(_told(dists, engine_root, "one") + _ticks(dists, engine_root))
    name = sorted(engine.nodes())[0]
    (engine_root / "tick").touch()
    until(lambda: (engine_root / "started").exists(), what="the modifyvnode hook to start")
    until(lambda: not (engine_root / "tick").exists(), what="the second change")
    done = engine.pbs("pbsnodes", "-C", "three", name)
    assert done.returncode == 0, done
    told = _lines(engine_root / "told")
    assert len(told) == 1 and told[0].endswith(f" {name} free,two -> free,three"), told
    _open_gate(engine_root)
    until(lambda: len(_lines(engine_root / "told")) >= 3, what="the server's changes told")
    assert _lines(engine_root / "told")[1:] == [f"root {name} free,None -> free,one",
                                                f"root {name} free,one -> free,two"]
    assert engine.nodes()[name]["comment"] == "three"


def test_a_modifyvnode_reject_of_the_servers_change_is_logged_and_its_write_refused(
        dists, make_engine, engine_root):
    """The objects are read-only in modifyvnode, as for a client's change: the hook's write
    fails in the hook, nothing of it stored; its reject is logged, the change kept."""
    tried = engine_root / "tried"
    engine = make_engine(plugin(dists, "nay", f"""
        from pbsplug import AttributeReadOnly

        @hookimpl
        def modifyvnode(event):
            if event.vnode.comment == "one":
                try:
                    event.vnode.comment = "the hook's"
                except AttributeReadOnly as exc:
                    open({str(tried)!r}, "w").write(str(exc))
                event.reject("not one")
        """, ("modifyvnode",)) + _ticks(dists, engine_root))
    name = sorted(engine.nodes())[0]
    (engine_root / "tick").touch()
    until(lambda: f"Node;{name};modifyvnode hook rejected: not one" in engine.log(),
          what="the reject logged")
    assert "read-only" in tried.read_text()
    assert engine.nodes()[name]["comment"] in ("one", "two")


def test_a_failed_begin_hooks_offline_is_made_at_once_and_told_while_the_server_serves(
        dists, make_engine, engine_root):
    """execjob_begin fails with fail_action offline_vnodes: the job's vnode is offline at
    once, and the server answers while the modifyvnode hook that is told of it is held."""
    held = "offlined by hook 'broken' due to hook error"
    site = _told(dists, engine_root, held, watch=held) + plugin(dists, "broken", """
        @hookimpl
        def execjob_begin(event):
            raise RuntimeError("lost the fabric")
        """, ("execjob_begin",), fail_action="offline_vnodes")
    engine = make_engine(site)
    name, *others = sorted(engine.nodes())
    for other in others:  # (the job's one try offlines `name` alone)
        engine.client("node_state", names=[other], offline=True, comment="parked")
    job_id = engine.submit("true\n")
    until(lambda: (engine_root / "started").exists(), what="the modifyvnode hook to start")
    client = Client(engine.home, timeout=SERVED_WITHIN)
    node = client("stat_nodes", names=[name])[name]
    assert (node["state"], node["comment"]) == ("offline", held)
    assert client("stat_jobs", ids=[job_id])[job_id]["job_state"] == "Q"
    _open_gate(engine_root)
    until(lambda: _lines(engine_root / "told"), what="the offline told")
    assert _lines(engine_root / "told") == [f"root {name} free,None -> offline,{held}"]


def test_a_change_whose_hook_runs_as_the_server_stops_is_kept_its_hook_not_told(
        dists, make_engine, engine_root):
    """The server stops while the modifyvnode hook of its own change is held: the hook is
    stopped (logged), the change stays made."""
    engine = make_engine(_told(dists, engine_root, "one") +
                         _ticks(dists, engine_root, last="one"))
    name = sorted(engine.nodes())[0]
    (engine_root / "tick").touch()
    until(lambda: (engine_root / "started").exists(), what="the modifyvnode hook to start")
    engine.stop()
    assert (f"the modifyvnode hooks of 1 vnode change(s) the server made were not run, the "
            f"server stopping: {name}") in engine.log()
    engine.start()
    assert engine.nodes()[name]["comment"] == "one"
    assert not (engine_root / "told").exists()


class _Watcher:
    """A periodic hook that offlines every vnode, and a modifyvnode hook that notes what it
    is told and the vnode's stored state as it runs (both in this process)."""

    plugin_info = PluginInfo(events=("periodic", "modifyvnode"))

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.seen: list[tuple[str, str, str, str]] = []

    @hookimpl
    def periodic(self, event):
        for vn in event.vnode_list.values():
            vn.state = "offline"

    @hookimpl
    def modifyvnode(self, event):
        assert self.engine is not None
        stored = self.engine.store.get("node", event.vnode.name)
        self.seen.append((event.vnode.name, str(event.vnode_o.state), str(event.vnode.state),
                          str(stored["state"])))


def test_an_engine_without_the_loop_tells_its_change_once_it_is_written(engine_here,
                                                                        register_plugin):
    """An engine in this process (no server loop to run them meanwhile) runs the hooks at
    once, as the change is written: they find the change stored."""
    watcher = _Watcher()
    register_plugin(watcher, "watcher", isolation="inprocess")
    eng = watcher.engine = engine_here()
    eng.periodic.run("periodic", "watcher")
    assert watcher.seen == [(name, "free", "offline", "offline")
                            for name in sorted(eng.store.all("node"))]
    assert not eng.notices


def test_the_starts_offline_and_recovery_are_told_once_the_server_serves(
        dists, make_engine, engine_root):
    """exechost_startup fails with offline_vnodes: the server starts and serves, its vnodes
    offline, while the modifyvnode hook told of the first is held (the start waited for
    it); then each is told; the next start's recovery is told too. The host has a vnode
    the hook adds besides its own (one a NUMA node): the changes of a start of several
    vnodes (the gate held every one, opened once). The hook adding that vnode again at the
    recovery's start changes nothing: not told."""
    held = "offlined by hook 'boot' due to hook error"
    flag = engine_root / "fail"
    engine = make_engine(_told(dists, engine_root, held) + plugin(dists, "boot", f"""
        import os
        from pbsplug import Vnode

        @hookimpl
        def exechost_startup(event):
            if os.path.exists({str(flag)!r}):
                raise RuntimeError("hardware check failed")
            event.vnode_list["gpu0"] = Vnode("gpu0", {{"resources_available": {{"ncpus": 1}}}})
        """, ("exechost_startup",), fail_action="offline_vnodes,clear_vnodes_upon_recovery"))
    until(lambda: "root gpu0 " in (engine_root / "told").read_text()
          if (engine_root / "told").exists() else False, what="the new vnode told")
    engine.stop()
    (engine_root / "told").unlink()
    flag.touch()
    engine.start()
    until(lambda: (engine_root / "started").exists(), what="the modifyvnode hook to start")
    client = Client(engine.home, timeout=SERVED_WITHIN)
    names = sorted(client("stat_nodes"))
    assert "gpu0" in names and len(names) >= 2
    assert {(a["state"], a["comment"]) for a in client("stat_nodes").values()} == {
        ("offline", held)}
    _open_gate(engine_root)
    until(lambda: len(_lines(engine_root / "told")) == len(names), what="the offlines told")
    engine.stop()
    flag.unlink()
    engine.start()
    until(lambda: len(_lines(engine_root / "told")) == 2 * len(names),
          what="the recoveries told")
    told = _lines(engine_root / "told")
    assert sorted(told[:len(names)]) == [
        f"root {name} free,None -> offline,{held}" for name in names]
    assert sorted(told[len(names):]) == [
        f"root {name} offline,{held} -> free,None" for name in names]


def test_a_change_of_nothing_is_neither_written_nor_told(engine_here, register_plugin):
    """The periodic hook offlines every vnode each run: its second run changes nothing, and
    tells nothing (it told every vnode again, and wrote it again)."""
    watcher = _Watcher()
    register_plugin(watcher, "watcher", isolation="inprocess")
    eng = watcher.engine = engine_here()
    eng.periodic.run("periodic", "watcher")
    stored = eng.store.all("node")
    eng.periodic.run("periodic", "watcher")
    assert watcher.seen == [(name, "free", "offline", "offline") for name in sorted(stored)]
    assert eng.store.all("node") == stored


def test_a_notice_that_fails_to_start_is_logged_and_dropped(engine_here, register_plugin,
                                                            monkeypatch):
    """The server's data unread as its change's modifyvnode hooks are to be told: that is
    logged (one line), the change stays written, and the next change is told (it ended the
    writer, and the socket server's loop with it)."""
    watcher = _Watcher()
    register_plugin(watcher, "watcher", isolation="inprocess")
    eng = watcher.engine = engine_here()
    name = sorted(eng.store.all("node"))[0]
    old = eng.store.get("node", name)

    def unread() -> None:
        raise RuntimeError("disk I/O error\nmore")

    with monkeypatch.context() as patched:
        patched.setattr(eng, "resource_types", unread)
        eng._set_node(name, old, {**old, "comment": "one"})
    assert eng.store.get("node", name)["comment"] == "one"
    assert not eng.notices and not watcher.seen
    logged = "".join(p.read_text() for p in eng.home.logs.glob("*"))
    assert (f"Node;{name};telling the modifyvnode hooks of the server's change failed, not "
            "told: RuntimeError: disk I/O error\n") in logged
    eng._set_node(name, eng.store.get("node", name), {**old, "state": "offline"})
    assert watcher.seen == [(name, "free", "offline", "offline")]


def _sets(dists, root) -> str:
    """A periodic hook that, when the test has written ``root/want`` (JSON: vnode name ->
    comment), sets those vnodes' comments and removes the file."""
    return plugin(dists, "sets", f"""
        import json
        import os

        @hookimpl
        def periodic(event):
            try:
                with open({str(root / "want")!r}) as f:
                    want = json.load(f)
            except FileNotFoundError:
                return
            for name, comment in want.items():
                event.vnode_list[name].comment = comment
            os.unlink({str(root / "want")!r})
        """, ("periodic",), freq=1)


def _set_by_hook(engine, root, **want: str) -> None:
    """Have the periodic hook (`_sets`) set the comments `want` (vnode -> comment), and
    wait until it has."""
    aside = root / "want.new"
    aside.write_text(json.dumps(want))
    aside.rename(root / "want")
    until(lambda: not (root / "want").exists() and all(
        engine.nodes().get(n, {}).get("comment") == c for n, c in want.items()),
        what=f"the periodic hook to set {want}")


def _second_vnode(engine) -> tuple[str, str]:
    """The first vnode and a second one, made by qmgr (the machine may have one)."""
    engine.pbs("qmgr", "-c", "create node spare", check=True)
    first = sorted(n for n in engine.nodes() if n != "spare")[0]
    return first, "spare"


def test_a_waiting_change_of_a_vnode_deleted_meanwhile_is_told_from_its_own_rows(
        dists, make_engine, engine_root):
    """The periodic hook changes vnode A (its modifyvnode hook held), then vnode B; B is
    deleted (qmgr) before its change is told, and then A changed again (the sentinel,
    queued after B's): B's change is told all the same, from the rows recorded when it was
    queued, as PBS tells every change made while the vnode existed; it is told before the
    sentinel, which the test waits for (a change dropped would show as its absence)."""
    engine = make_engine(_told(dists, engine_root, "c-one", watch="c-") +
                         _sets(dists, engine_root))
    first, second = _second_vnode(engine)
    _set_by_hook(engine, engine_root, **{first: "c-one"})
    until(lambda: (engine_root / "started").exists(), what="the modifyvnode hook to start")
    _set_by_hook(engine, engine_root, **{second: "c-b1"})
    engine.pbs("qmgr", "-c", f"delete node {second}", check=True)
    assert second not in engine.nodes()
    _set_by_hook(engine, engine_root, **{first: "c-last"})
    _open_gate(engine_root)
    until(lambda: any(line.endswith(",c-last") for line in _lines(engine_root / "told")),
          what="the sentinel change told, after the deleted vnode's")
    assert _lines(engine_root / "told") == [f"root {first} free,None -> free,c-one",
                                            f"root {second} free,None -> free,c-b1",
                                            f"root {first} free,c-one -> free,c-last"]


def test_a_vnode_deleted_and_made_again_is_told_its_own_change_not_the_old_rows(
        dists, make_engine, engine_root):
    """Vnode B's change (comment c-orig to c-b1) waits while A's hook is held; B is deleted
    and made again (qmgr), and the periodic hook sets the new B's comment: the deleted B's
    change is told as it was made (c-orig to c-b1), then the new vnode's own (None to
    c-b2), not merged into the old one's (c-orig to c-b2, a change no vnode made)."""
    engine = make_engine(_told(dists, engine_root, "c-one", watch="c-") +
                         _sets(dists, engine_root))
    first, second = _second_vnode(engine)
    _set_by_hook(engine, engine_root, **{second: "c-orig"})
    until(lambda: _lines(engine_root / "told"), what="the first change told")
    _set_by_hook(engine, engine_root, **{first: "c-one"})
    until(lambda: (engine_root / "started").exists(), what="the modifyvnode hook to start")
    _set_by_hook(engine, engine_root, **{second: "c-b1"})
    engine.pbs("qmgr", "-c", f"delete node {second}", check=True)
    engine.pbs("qmgr", "-c", f"create node {second}", check=True)
    _set_by_hook(engine, engine_root, **{second: "c-b2"})
    _open_gate(engine_root)
    until(lambda: any(line.endswith(",c-b2") for line in _lines(engine_root / "told")),
          what="the new vnode's change told (the last queued)")
    assert _lines(engine_root / "told") == [f"root {second} free,None -> free,c-orig",
                                            f"root {first} free,None -> free,c-one",
                                            f"root {second} free,c-orig -> free,c-b1",
                                            f"root {second} free,None -> free,c-b2"]
