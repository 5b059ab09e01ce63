"""Fuzzing every API request and every attribute against a real server (issue 17): each
answer is a success or a clear error (a PBS code, one line), the server stays up, and
everything stored can be read back (qstat -f, pbsnodes -a) and scheduled. Hooks' changes
are fuzzed too: an invalid one is the hook's error, a valid one is stored and readable.
An unprivileged user's raw requests get the same answers, and change nothing of others'."""

from __future__ import annotations

import json
import random
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbsplug import values
from pbsplug.engine import depend
from pbsplug.engine.errors import PbsError
from pbsplug.engine.testing import LocalEngine, make_root, remove_root

#: PBS's codes a refusal may carry; 15010 (System error) would be a bug the fuzz found.
PBS_CODES = range(15001, 15300)

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=5)
_plausible = st.sampled_from([
    "1", "0", "-1", "4", "2gb", "-3mb", "01:00:00", "abc", "", "99999999999999999999999",
    "1:ncpus=2", "1:ncpus=2:nosuch=1", "scatter:excl", "free", "true", "n", "u", "oe",
    "afterok:0", "a\nb", "\x00", "\udc80", "x" * 300, 1700000000, -5, 3.5, True])
_values = _plausible | _json_values
_attr_names = st.sampled_from(sorted(values.JOB_ATTRIBUTES) + [
    "User_List", "group_list", "nosuch", "", "Resource_List"])
_resource_names = st.sampled_from(sorted(values.RESOURCE_TYPES) + ["nosuchres", "", "1x"])
_resources = st.dictionaries(_resource_names | st.text(max_size=8), _values, max_size=4)
_attrs = st.dictionaries(_attr_names, _values, max_size=5).flatmap(
    lambda a: st.just(a) | _resources.map(lambda r: {**a, "Resource_List": r}))


@pytest.fixture
def make_server(dists):
    """``make_server(site_toml)``: a started server in a fresh home (plugins from `dists`)."""
    made = []

    def make(site: str = "") -> LocalEngine:
        root = make_root()
        made.append((root, LocalEngine(root, site, env=dists.env()).start()))
        return made[-1][1]

    yield make
    for root, server in made:
        server.stop()
        remove_root(root)


def plugin(dists, name: str, body: str, events: tuple[str, ...]) -> str:
    """Install a plugin whose module is `body`; its site section."""
    dists.add(name, f"from pbsplug import PluginInfo, hookimpl\n"
                    f"plugin_info = PluginInfo(events={events!r})\n{textwrap.dedent(body)}")
    return f"[plugins.{name}]\nenabled = true\n"


def _answer(engine: LocalEngine, op: str, **args) -> tuple[bool, object]:
    """(True, result) or (False, PbsError); anything else fails the test."""
    try:
        return True, engine.client(op, **args)
    except PbsError as err:
        assert err.code in PBS_CODES and err.code != 15010, (op, args, err.code, err.message)
        assert "\n" not in err.message and "Traceback" not in err.message, err.message
        return False, err


_OPS = ["submit", "alter", "delete", "hold", "release", "move", "rerun", "run", "node_state",
        "qmgr", "resv_submit", "resv_delete", "stat_jobs", "stat_queues", "stat_nodes",
        "stat_resvs", "stat_server", "status", "nosuch"]
_ARGS = ["attrs", "script", "argv", "id", "ids", "names", "types", "destination", "force",
         "history", "vnodes", "offline", "comment", "text", "other"]


def _requests(job_ids: list[str]):
    """A random API request: (op, args)."""
    target = st.sampled_from(job_ids + ["999.nowhere", "x"]) if job_ids else st.just("1")
    qmgr_line = st.tuples(
        st.sampled_from(["set server {} = {}", "set queue workq {} = {}",
                         "set node {} = {}", "create resource fz{} type = {}",
                         "set server resources_default.{} = {}"]),
        st.sampled_from(["scheduler_iteration", "default_queue", "Priority", "comment",
                         "resources_available.ncpus", "max_running", "walltime", "ncpus",
                         "long", "size", "nosuch"]),
        _plausible.map(str)).map(lambda t: t[0].format(t[1], t[2]))
    return st.one_of(
        st.tuples(st.just("submit"), st.fixed_dictionaries({
            "attrs": _attrs, "script": st.sampled_from(["true\n", None, ""])})),
        st.tuples(st.just("alter"), st.fixed_dictionaries({"id": target, "attrs": _attrs})),
        st.tuples(st.just("resv_submit"), st.fixed_dictionaries({"attrs": st.dictionaries(
            st.sampled_from(["Reserve_Name", "reserve_start", "reserve_end",
                             "reserve_duration", "Resource_List", "partition", "nosuch"]),
            _values, max_size=4)})),
        st.tuples(st.just("qmgr"), st.fixed_dictionaries({"text": qmgr_line})),
        st.tuples(st.just("node_state"), st.fixed_dictionaries({
            "names": st.lists(st.sampled_from(["nosuch", "fz1"]), max_size=2),
            "comment": _plausible.map(str)})),
        st.tuples(st.sampled_from(["hold", "release", "delete"]),
                  st.fixed_dictionaries({"ids": st.lists(target, max_size=2)})),
        st.tuples(st.just("move"), st.fixed_dictionaries({
            "destination": _plausible.map(str), "ids": st.lists(target, max_size=2)})),
        # any request, any argument, any JSON type (shutdown and attach aside: they act
        # on the server and on processes, not on values)
        st.tuples(st.sampled_from(_OPS), st.dictionaries(st.sampled_from(_ARGS),
                                                         _json_values, max_size=3)),
    )


def _everything_readable(engine: LocalEngine) -> None:
    """The server answers; qstat -f -x and pbsnodes -a print every stored object; a cycle
    over all of it runs and the server still answers."""
    engine.client("status")
    # The fuzz's qmgr lines may have left what keeps any job from running (a default of
    # 1700000000 ncpus, a max_running of 0): unset, for the probe.
    for line in ("unset server resources_default.ncpus", "unset server max_running",
                 "unset queue workq max_running"):
        engine.pbs("qmgr", "-c", line, check=True)
    engine.pbs("qmgr", "-c", "set server scheduling = true", check=True)
    probe = engine.submit()  # runs only once cycles over everything stored have run
    assert engine.wait(probe, timeout=120)["Exit_status"] == 0
    for args in (("qstat", "-f", "-x"), ("pbsnodes", "-a"), ("pbs_rstat", "-f"),
                 ("qmgr", "-c", "print server")):
        done = engine.pbs(*args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    log = engine.log()
    assert "scheduling cycle failed" not in log and "set aside" not in log


@pytest.fixture
def fuzz_engine(make_server):
    engine = make_server()
    engine.pbs("qmgr", "-c", "set server scheduling = false", check=True)
    engine.pbs("qmgr", "-c", "create node fz1 resources_available.ncpus = 2", check=True)
    return engine


def test_every_request_and_attribute_fuzzed_through_the_socket(fuzz_engine):
    engine = fuzz_engine
    job_ids = [engine.submit(Hold_Types="u") for _ in range(2)]

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def one_request(data):
        op, args = data.draw(_requests(job_ids))
        ok, result = _answer(engine, op, **args)
        if ok and op == "submit":
            stored = engine.job(result)
            for name, value in args["attrs"].items():
                if name in values.JOB_ATTRIBUTES and name != "Resource_List" and \
                        value is not None and name not in values.SERVER_OVERRIDES:
                    assert stored.get(name) == values.job_value(name, value, {}), name

    one_request()
    _everything_readable(engine)


_HOOK = """
import json

@hookimpl
def queuejob(event):
    job = event.job
    wanted = job.Variable_List.get("FUZZ")
    if wanted:
        name, resource, value = json.loads(wanted)
        if resource:
            job.Resource_List[resource] = value
        else:
            setattr(job, name, value)
"""

HOOK_ERROR = ("request rejected as filter hook 'fuzzer' encountered an exception. "
              "Please inform Admin")


def test_hooks_changes_fuzzed_are_the_hooks_error_or_stored(dists, make_server):
    engine = make_server(plugin(dists, "fuzzer", _HOOK, ("queuejob",)))
    engine.pbs("qmgr", "-c", "set server scheduling = false", check=True)
    hookable = sorted(n for n, r in values.JOB_ATTRIBUTES.items()
                      if r.set_by != values.SERVER and n != "Variable_List")
    change = st.one_of(
        st.tuples(st.sampled_from(hookable), st.none(), _values),
        st.tuples(st.just("Resource_List"), _resource_names, _values))

    @settings(max_examples=80, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(change=change)
    def one_hook_change(change):
        name, resource, value = change
        try:
            fuzz = json.dumps([name, resource, value])
        except ValueError:
            return
        variables = {"PBS_O_WORKDIR": str(engine.work), "FUZZ": fuzz}
        ok, result = _answer(engine, "submit", attrs={"Variable_List": variables,
                                                       "Hold_Types": "u"}, script="true\n")
        value = json.loads(fuzz)[2]  # what the hook saw (JSON turns tuples into lists)
        try:
            if value is None:  # None unsets, as in PBS
                expected = None
            elif resource:
                expected = values.resource_value(resource, value, custom={})
            else:
                expected = values.job_value(name, value, {})
            valid = True
        except values.BadValue:
            valid = False
        if not valid:
            assert not ok and result.message == HOOK_ERROR, (change, result)
            return
        if not ok and name == "queue":  # routed to a queue that is not there, as qsub -q
            assert result.message == "Unknown queue", (change, result)
            return
        if not ok and resource == "nodes":  # a spec the server cannot convert, as qsub -l
            # nodes: 15089 node(s) specification error, 15035 an unknown name, 15014 ncpus
            assert result.code in (15089, 15035, 15014), (change, result.code, result.message)
            return
        if not ok and name == "depend":  # on a job that is not there, as qsub -W depend
            assert result.message == "Unknown Job Id", (change, result)
            return
        if not ok:  # a valid value the event's guard does not let a queuejob hook set
            assert result.message == HOOK_ERROR, (change, result)
            return
        stored = engine.job(result)
        if name == "depend" and expected is not None:  # stored by full ids, as qsub's
            server = result.split(".", 1)[1]
            expected = depend.format([(kind, [i if "." in i else f"{i}.{server}" for i in ids])
                                      for kind, ids in depend.parse(expected)])
        if resource == "nodect":  # (the server writes it, its chunks' count, as PBS's)
            assert stored["Resource_List"]["nodect"] == 1, change
        elif resource and expected is None:
            pass  # (unset: what the server needs, it completes with PBS's default)
        elif resource:
            assert stored.get("Resource_List", {}).get(resource) == expected, change
        elif name == "Resource_List" and expected is not None:
            # (the server completes the request a hook left: defaults, select, nodect; it
            # drops none of the hook's resources)
            assert set(expected) <= set(stored.get("Resource_List", {})), change
        elif expected is not None:
            assert stored.get(name) == expected, change

    one_hook_change()
    _everything_readable(engine)


_ATTACKER_SCRIPT = """
import json, os, sys
from pathlib import Path
from pbsplug.engine.client import Client
from pbsplug.engine.errors import PbsError
from pbsplug.engine.home import Home

client = Client(Home(Path(os.environ["PBSPLUG_HOME"])))
out = []
for op, args in json.loads(open(sys.argv[1]).read()):
    try:
        out.append(["ok", client(op, **args)])
    except PbsError as err:
        out.append(["error", err.code, err.message])
print(json.dumps(out))
"""


def test_an_unprivileged_users_raw_requests_get_the_same_rules(fuzz_engine, attacker):
    """As the attacker: read-only attributes (euser, Job_Owner is ignored), system holds,
    undefined resources and bad values are refused; root's job and the server are intact;
    the attacker's jobs are the attacker's."""
    engine = fuzz_engine
    root_job = engine.submit(Hold_Types="u", Job_Name="roots")
    before = engine.job(root_job)
    rng = random.Random(17)
    plausible = ["1", "-1", "abc", "2gb", "01:00:00", "", "\u0007", 10**30, True, None,
                 {"a": 1}, ["x"]]
    cases = [["submit", {"attrs": {"euser": "root"}, "script": "true\n"}],
             ["submit", {"attrs": {"Job_Owner": "root@x", "Hold_Types": "u"},
                         "script": "true\n"}],
             ["submit", {"attrs": {"Hold_Types": "s"}, "script": "true\n"}],
             ["submit", {"attrs": {"Resource_List": {"nosuchres": 1}}, "script": "true\n"}],
             ["alter", {"id": root_job, "attrs": {"Job_Name": "mine"}}],
             ["qmgr", {"text": "set server default_queue = nosuch"}]]
    names = sorted(values.JOB_ATTRIBUTES)
    for _ in range(60):
        attrs = {rng.choice(names): rng.choice(plausible) for _ in range(rng.randint(1, 3))}
        attrs.setdefault("Hold_Types", "u")
        cases.append(["submit", {"attrs": attrs, "script": "true\n"}])
    case_file = engine.work / "cases.json"  # the jobs' directory: the attacker can read it
    case_file.write_text(json.dumps(cases))
    case_file.chmod(0o644)
    done = attacker.python(_ATTACKER_SCRIPT, str(case_file), home=engine, timeout=300)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    codes = [a[1] for a in answers[:5]]
    assert answers[0][:2] == ["error", 15003]
    assert answers[1][0] == "ok"
    assert codes[2:] == [15007, 15035, 15007]
    assert answers[5][1]["code"] == 15007  # qmgr answers with its own record
    for answer in answers[:5] + answers[6:]:
        if answer[0] == "error":
            assert answer[1] in PBS_CODES and answer[1] != 15010, answer
            assert "\n" not in answer[2]
    mine = engine.job(answers[1][1])
    assert mine["euser"] == attacker.user and mine["Job_Owner"].startswith(attacker.user + "@")
    for answer in answers[:5] + answers[6:]:
        if answer[0] == "ok":
            assert engine.job(answer[1])["euser"] == attacker.user
    assert engine.job(root_job) == before
    assert engine.client("stat_server")
    _everything_readable(engine)


# --- numbers of thousands of digits ---------------------------------------------------------

#: More digits than int() reads (4300: ValueError, in Python's words, that the server's
#: answer carried).
HUGE = "9" * 5000
_HUGE_VALUES = [HUGE, "-" + HUGE, HUGE + ":00", "1:" + HUGE, HUGE + "gb", HUGE + ":ncpus=1",
                "1:ncpus=" + HUGE, "1-" + HUGE, "afterok:" + HUGE, "[u:PBS_GENERIC=" + HUGE + "]"]
_RESV = {"reserve_start": 4_000_000_000, "reserve_duration": 60}


@pytest.fixture(scope="module")
def huge_server():
    root = make_root()
    engine = LocalEngine(root).start()
    engine.pbs("qmgr", "-c", "set server scheduling = false", check=True)
    engine.pbs("qmgr", "-c", "create node fz1 resources_available.ncpus = 2", check=True)
    for kind in ("long", "size", "float", "string_array"):
        engine.pbs("qmgr", "-c", f"create resource fz{kind} type = {kind}", check=True)
    job = engine.submit(Hold_Types="u")
    resv = engine.client("resv_submit", attrs=dict(_RESV))
    yield engine, job, resv if isinstance(resv, str) else resv["id"]
    engine.stop()
    remove_root(root)


def _huge_requests(kind: str, name: str, job: str, resv: str, value: str):
    """The requests that put `value` into the field `name` of `kind`."""
    if kind == "job":
        attrs = {name: value}
        return [("submit", {"attrs": {**attrs, "Hold_Types": "u"}, "script": "true\n"}),
                ("alter", {"id": job, "attrs": attrs})]
    if kind == "resource":
        attrs = {"Resource_List": {name: value}}
        return [("submit", {"attrs": {**attrs, "Hold_Types": "u"}, "script": "true\n"}),
                ("alter", {"id": job, "attrs": attrs}),
                ("resv_submit", {"attrs": {**_RESV, **attrs}})]
    if kind == "resv":
        return [("resv_submit", {"attrs": {**_RESV, name: value}}),
                ("resv_alter", {"id": resv, "attrs": {name: value}})]
    if kind == "qmgr":
        return [("qmgr", {"text": name.format(value)})]
    return [(name, {"ids": [value, f"{value}.x", f"1[{value}]", f"R{value}"]})]


_QMGR = ["set server {}", "set server max_run = {}", "set server max_run_res.ncpus = {}",
         "set server max_run_res_soft.mem = {}", "set server max_queued_res.fzsize = {}",
         "set server scheduler_iteration = {}", "set server resources_default.walltime = {}",
         "set server resources_max.mem = {}", "set queue workq Priority = {}",
         "set queue workq resources_min.fzsize = {}", "set node fz1 resources_available.ncpus"
         " = {}", "set node fz1 resources_available.fzfloat = {}",
         "set node fz1 resources_available.fzlong = {}", "set sched sched_cycle_length = {}",
         "set server default_qsub_arguments = \"-p {}\""]


@pytest.mark.parametrize("kind, name", [
    *[("job", n) for n in sorted(values.JOB_ATTRIBUTES) if n != "Resource_List"],
    *[("resource", n) for n in sorted(values.RESOURCE_TYPES)],
    *[("resource", f"fz{k}") for k in ("long", "size", "float", "string_array")],
    *[("resv", n) for n in ("reserve_start", "reserve_end", "reserve_duration",
                            "Reserve_Name", "reserve_rrule", "interactive", "partition")],
    *[("qmgr", line) for line in _QMGR],
    *[("ids", op) for op in ("stat_jobs", "hold", "release", "delete", "rerun", "run",
                             "stat_resvs", "resv_delete")],
])
def test_a_value_of_thousands_of_digits_is_a_pbs_error_in_one_line(huge_server, kind, name):
    """Each field of each request given 5,000 digits (alone, signed, as a duration, a
    size, a select, a range, a dependency, an entity limit): a success or a PBS error in
    one line; never Python's words (int() refuses 4300 digits and more)."""
    engine, job, resv = huge_server
    for value in _HUGE_VALUES:
        for op, args in _huge_requests(kind, name, job, resv, value):
            ok, result = _answer(engine, op, **args)
            said = json.dumps(result) if ok else result.message
            assert "Exceeds the limit" not in said and "4300" not in said, (op, name)
    assert engine.client("status")
