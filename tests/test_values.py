"""The kernel's value rules (`pbsplug.values`): PBS's types and ranges, the same for every
entry; kernel objects that refuse a bad value when a hook sets it; config files whose
errors are one line naming the file."""

from __future__ import annotations

import math
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbsplug import Job, Vnode, values
from pbsplug.settings import ConfigError, read_cf
from pbsplug.siteconfig import load_site


@pytest.fixture(autouse=True)
def no_custom_resources():
    values.use_resources(None)
    yield
    values.use_resources(None)


@pytest.mark.parametrize("name,value,expected", [
    ("walltime", "1:30:00", "01:30:00"), ("walltime", 59, "00:00:59"),
    ("walltime", "10.7", "00:00:10"), ("mem", "4GB", "4gb"), ("mem", 1024, "1024b"),
    ("ncpus", "8", 8), ("ncpus", 0, 0), ("nice", -20, -20), ("energy", "1.5", 1.5),
    ("accelerator", "t", True), ("host", "n1", "n1"),
    ("select", "2:ncpus=4:mem=1gb+1:ncpus=1", "2:ncpus=4:mem=1gb+1:ncpus=1"),
    ("place", "scatter:excl", "scatter:excl"),
])
def test_resource_values_are_stored_as_pbs_writes_them(name, value, expected):
    assert values.resource_value(name, value) == expected


@pytest.mark.parametrize("name,value", [
    ("walltime", "not-a-walltime"), ("walltime", "9" * 400), ("walltime", -1),
    ("walltime", math.inf), ("walltime", True), ("ncpus", -1), ("ncpus", 2**63),
    ("ncpus", "1.5"), ("ncpus", [1]), ("mem", "99999999999pb"), ("mem", "-1gb"),
    ("energy", "nan"), ("nice", 20), ("host", "a\x00b"), ("host", "\udc80"),
    ("select", "1:ncpus=-2"), ("select", "0:ncpus=1"), ("select", ""), ("place", "wide"),
    # (more digits than int() and str() take, 4300: a hook's int, a select's count or value)
    pytest.param("ncpus", 10**5000, id="ncpus-10**5000"), ("walltime", "9" * 5000),
    ("mem", "9" * 5000 + "gb"),
    ("select", "9" * 5000 + ":ncpus=1"), ("select", "1:ncpus=" + "9" * 5000),
    ("select", "1:mem=" + "9" * 5000 + "gb"),
])
def test_bad_resource_values_are_refused_naming_the_resource(name, value):
    with pytest.raises(values.BadValue) as err:
        values.resource_value(name, value)
    assert err.value.code == values.PBSE_BADATVAL
    assert err.value.attr.startswith("Resource_List")
    assert "\n" not in str(err.value) and "Exceeds the limit" not in str(err.value)


def test_an_undefined_resource_is_15035_once_the_server_says_what_exists():
    assert values.resource_value("nosuchres", 3) == "3"  # nothing known: a string
    values.use_resources({"scratch": "size"})
    with pytest.raises(values.BadValue) as err:
        values.resource_value("nosuchres", 3)
    assert (err.value.code, err.value.pbs_text) == (
        15035, "Unknown resource Resource_List.nosuchres")
    assert values.resource_value("scratch", "10GB") == "10gb"
    with pytest.raises(values.BadValue):
        values.select("1:ncpus=1:nosuchres=2")


def test_names_have_pbs_lengths_and_no_control_characters():
    assert values.check_name("job", "x" * 236)
    assert values.check_name("queue", "q" * 15)
    assert values.check_name("node", "host[0]")
    for kind, name in (("job", "x" * 237), ("queue", "q" * 16), ("node", "n" * 256),
                       ("job", "a b"), ("job", "a/b"), ("queue", "q\x1b"), ("user", ""),
                       ("user", "u" * 257), ("job", "\udcff")):
        with pytest.raises(values.BadValue):
            values.check_name(kind, name)


def test_a_request_is_checked_attribute_by_attribute():
    ok = values.job_request({"Job_Name": "j", "Priority": "5", "Execution_Time": 1700000000,
                             "Resource_List": {"walltime": 60}, "Job_Owner": "x@y"}, "user",
                            {})
    assert ok == {"Job_Name": "j", "Priority": 5, "Execution_Time": 1700000000,
                  "Resource_List": {"walltime": "00:01:00"}}  # Job_Owner is the server's
    for attrs, code in (({"job_state": "R"}, 15003), ({"euser": "root"}, 15003),
                        ({"nosuch": 1}, 15002), ({"Execution_Time": "abc"}, 15014),
                        ({"Execution_Time": 10**15}, 15014), ({"User_List": "a"}, 15029),
                        ({"group_list": "g"}, 15029), ({"Priority": 2000}, 15014),
                        ({"Resource_List": {"nosuch": 1}}, 15035),
                        ({"Variable_List": {"A": 1}}, 15014), ({"Hold_Types": "x"}, 15014),
                        ({"comment": "mine"}, 15003),
                        # refused by qsub (15029); a raw request was stored and ignored
                        ({"stagein": "in@h:/data/in"}, 15029), ({"stageout": "o@h:/o"}, 15029),
                        ({"sandbox": "private"}, 15029)):
        with pytest.raises(values.BadValue) as err:
            values.job_request(attrs, "user", {})
        assert err.value.code == code, attrs
    assert values.job_request({"comment": "ok"}, "operator", {}) == {"comment": "ok"}
    assert values.job_request({"sandbox": "HOME"}, "user", {}) == {"sandbox": "HOME"}


def test_a_plugins_job_attribute_meets_the_rules_of_its_type():
    """A plugin-registered job attribute a user may set was checked only for its Python
    type: a string took control characters and megabytes (``a\nJob Id: 9.x``), a size
    ``' lots of '``. It now meets the rules a built-in one of its type meets first."""
    from pbsplug.attributes import AttributeRegistry

    registry = AttributeRegistry()
    for name, kind in (("note", "string"), ("scratch", "size"), ("tags", "string_array"),
                       ("grace", "duration"), ("weight", "float")):
        registry.add("job", name, kind, set_by="user", validator=lambda v: None)
    extra = registry.for_type("job")

    def request(**attrs):
        return values.job_request(attrs, "user", {}, extra=extra)

    assert request(note="fine", scratch="4GB", tags=["a", "b"], grace="90",
                   weight=1.5) == {"note": "fine", "scratch": "4gb", "tags": ["a", "b"],
                                   "grace": 90, "weight": 1.5}
    for attrs in ({"note": "a\nJob Id: 9.x"}, {"note": "x" * (values.MAX_STRING + 1)},
                  {"scratch": " lots of "}, {"tags": ["a", "b\x00"]}, {"tags": "a"},
                  {"grace": "soon"}, {"weight": float("nan")}):
        with pytest.raises(values.BadValue) as err:
            request(**attrs)
        assert err.value.code == 15014 and next(iter(attrs)) in str(err.value), attrs


@pytest.mark.parametrize("bad", ["(n1:ncpus=2", "(:ncpus=1)", "n1:ncpus=1", "(n1:ncpus)",
                                 "(n1)(n2)", "(n1)++(n2)", "(n1:ncpus=2)+", "()"])
def test_an_exec_vnode_not_shaped_as_pbs_writes_it_is_refused(bad):
    # the chunks' reader drops brackets and empty names, so these were stored before
    with pytest.raises(values.BadValue, match=r"exec_vnode: .* is not \(vnode:res=value"):
        values.job_value("exec_vnode", bad, {})


def test_exec_vnode_in_pbs_shapes_is_kept():
    for good in ("", "(n1)", "(n1:ncpus=2:mem=4gb)+(n2:ncpus=1)", "(n1:ncpus=2+n2:ncpus=2)",
                 "(n0:ncpus=4)+(n1)"):
        assert values.job_value("exec_vnode", good, {}) == good


def test_a_hook_setting_a_bad_value_raises_in_the_hook():
    """As pbs.v1's types do: the assignment raises, so the hook fails, and nothing is set."""
    job = Job("1.s", {"Resource_List": {"walltime": "00:10:00"}})
    with pytest.raises(ValueError):
        job.Resource_List["walltime"] = "not-a-walltime"
    with pytest.raises(ValueError):
        job.Execution_Time = "abc"
    with pytest.raises(ValueError):
        job.Priority = 5000
    with pytest.raises(ValueError):
        job.Resource_List = {"ncpus": -1}
    assert job.Resource_List["walltime"] == "00:10:00"
    assert job.changes() == {}
    job.Resource_List["walltime"] = 3600
    assert job.Resource_List["walltime"] == "01:00:00"
    vnode = Vnode("n1", {"state": "free", "resources_available": {"ncpus": 4}})
    with pytest.raises(ValueError):
        vnode.state = "sideways"
    with pytest.raises(ValueError):
        vnode.resources_available["ncpus"] = "lots"
    vnode.state = "offline"
    vnode.resources_available["mem"] = "8GB"
    assert vnode.changes() == {"state": "offline", "resources_available": {"mem": "8gb"}}


def test_stored_rows_the_server_cannot_use_are_found():
    problems = values.job_problems({"Execution_Time": "abc", "job_state": "Q",
                                    "Resource_List": {"walltime": "x", "ncpus": 2},
                                    "comment": "odd\x01 but harmless"})
    assert set(problems) == {"Execution_Time", "Resource_List.walltime"}
    assert values.vnode_problems({"resources_available": {"ncpus": "lots"},
                                  "state": "free"}) == {
        "resources_available.ncpus": "resources_available.ncpus: 'lots' is not an integer"}


# -- property: any value either passes and is stored in its own canonical form, or is refused
# with a one-line BadValue; nothing else escapes ------------------------------------------------
_anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(values.RESOURCE_TYPES)), value=_anything)
def test_any_resource_value_is_stored_canonically_or_refused_in_one_line(name, value):
    try:
        stored = values.resource_value(name, value)
    except values.BadValue as exc:
        assert exc.code in (15014, 15035) and "\n" not in str(exc)
        return
    assert values.resource_value(name, stored) == stored  # idempotent: readable again


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(values.JOB_ATTRIBUTES)), value=_anything)
def test_any_job_attribute_value_is_checked_or_refused_in_one_line(name, value):
    try:
        stored = values.job_value(name, value, {})
    except values.BadValue as exc:
        assert exc.code in (15014, 15018, 15035) and "\n" not in str(exc)
        return
    assert values.job_value(name, stored, {}) == stored


# -- configuration files: one line naming the file ---------------------------------------------
def test_a_deeply_nested_site_toml_is_a_one_line_error_naming_the_file(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text("a = " + "[" * 50000 + "]" * 50000 + "\n")
    with pytest.raises(ConfigError) as err:
        load_site(site)
    assert str(site) in str(err.value) and "nested too deeply" in str(err.value)


def test_a_site_toml_that_is_not_utf8_names_the_file(tmp_path):
    site = tmp_path / "site.toml"
    site.write_bytes(b"[plugins.x]\nenabled = true\n# caf\xe9\n")
    with pytest.raises(ConfigError) as err:
        load_site(site)
    assert str(site) in str(err.value) and "UTF-8" in str(err.value)


def test_a_cf_file_nested_too_deeply_or_not_utf8_names_the_file(tmp_path):
    deep = tmp_path / "deep.CF"
    deep.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ConfigError) as err:
        read_cf(deep)
    assert str(deep) in str(err.value) and "nested more than 100 levels deep" in str(err.value)
    latin = tmp_path / "latin.CF"
    latin.write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(ConfigError) as err:
        read_cf(latin)
    assert str(latin) in str(err.value) and "UTF-8" in str(err.value)


@pytest.mark.parametrize("text, why", [
    ('{"post_timeout": 10, "post_timeout": 20}', 'the key "post_timeout" twice in one object'),
    ('{"post_timeout": NaN}', "NaN is not a JSON number"),
    ('{"post_timeout": %s}' % ("9" * 2000), "a number of 2,000 digits (at most 1,000)"),
    ('{"hosts": %s}' % ("[" * 600 + "]" * 600),
     "arrays or objects nested more than 100 levels deep"),
], ids=["a key twice", "NaN", "2000 digits", "600 deep"])
def test_a_cf_file_json_loads_took_but_jsontext_refuses_names_the_file(tmp_path, text, why):
    """A .CF file may be one a PBS admin brought: json.loads took a key twice (the last
    one), NaN, a 2,000-digit integer and nesting 600 deep without a word."""
    cf = tmp_path / "site.CF"
    cf.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_cf(cf)
    message = str(err.value)
    assert message.startswith(f"{cf}: (") and message.endswith(f": not valid JSON: {why}")
    assert "\n" not in message, message


def test_a_stored_reservation_without_its_times_is_a_problem_to_set_aside():
    """A reservation stored without reserve_end (a hook unset it) stopped every poll of
    the server; it is now a bad row, set aside at start."""
    assert "reserve_end" in values.resv_problems({"reserve_start": 1})
    assert values.resv_problems({"reserve_start": 1, "reserve_end": 2}) == {}


@pytest.mark.parametrize("spec", ['1:ncpus="+2"', '1:ncpus=" 2"', '1:mem=" 1gb"',
                                  '1:mem="1 gb"', "1:walltime='1:00'"])
def test_a_quoted_amount_in_a_select_is_refused(spec):
    """Review: quoted, an amount with a sign or a space passed the value rules (summed as
    2 cpus), and the scheduler then matched it as text; only a string needs quotes."""
    with pytest.raises(values.BadValue, match="in a chunk is"):
        values.select(spec)


def test_a_quoted_string_or_plain_amount_in_a_select_is_kept():
    assert values.select('1:arch="a:b":ncpus="2"') == '1:arch="a:b":ncpus="2"'



@pytest.mark.parametrize("check, value", [
    (lambda v: values.long(v, "x"), "\u0663"), (lambda v: values.long(v, "x"), "1_0"),
    (lambda v: values.number(v, "x"), "\u0663"), (lambda v: values.number(v, "x"), "1_0"),
    (lambda v: values.number(v, "x"), "infinity"),
    (lambda v: values.seconds(v, "x"), "\u0660\u0661:00"),
    (lambda v: values.size(v, "x"), "\u0663gb"),
])
def test_numbers_are_ascii_digits(check, value):
    """int(), float() and re's \\d read other scripts' digits (``٣`` as 3) and Python's
    ``1_0``; PBS's values are ASCII digits."""
    with pytest.raises(values.BadValue):
        check(value)
    assert not values.digits("\u00b2") and not values.digits("") and values.digits("042")
    assert not values.check_depend("on:\u0663") and values.check_depend("on:3")
    assert values.number(" -1.5e3 ", "x") == -1500.0 and values.number(".5", "x") == 0.5


@pytest.mark.parametrize("text, most, expected", [
    ("042", 100, 42), ("0", 0, 0), ("0" * 4300, 0, 0), ("0" * 4299 + "7", 10, 7),
    ("0" * 5000, 0, None), ("0" * 5000 + "7", 10, None),
    ("101", 100, None), ("9" * 5000, values.LONG_MAX, None),
    ("0" * 100_000 + "9" * 5000, values.LONG_MAX, None), ("", 10, None), ("-1", 10, None),
    (" 1", 10, None), ("1_0", 100, None), ("\u0663", 10, None), ("\u00b2", 10, None)])
def test_whole_reads_ascii_digits_up_to_a_bound_and_int_reads_them(text, most, expected):
    """int() counts leading zeros toward its 4300 digits: 5000 zeros and a 7 were no
    number `past` a long, and int() of them was Python's ValueError."""
    assert values.whole(text, most) == expected
    assert not values.digits(text) or values.past(text, most) is (expected is None)


@pytest.mark.skipif(not hasattr(sys, "set_int_max_str_digits"),
                    reason="a Python without a limit on int()'s digits")
def test_past_takes_the_interpreters_own_limit_on_digits():
    """PYTHONINTMAXSTRDIGITS (or ``-X int_max_str_digits``) lowers what int() reads, down
    to 640 digits, for every run of a user's commands that set it: `past` took 4300, and
    `whole` of 1000 zeros and a 7 was int()'s ValueError, in Python's words."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        assert values.whole("0" * 1000 + "7", 10) is None
        assert values.past("0" * 1000 + "7", 10)
        assert values.whole("0" * 639 + "7", 10) == 7
    finally:
        sys.set_int_max_str_digits(before)
