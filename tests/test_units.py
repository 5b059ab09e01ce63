import pytest
from hypothesis import given
from hypothesis import strategies as st

from pbsplug import (
    format_duration,
    format_size,
    parse_bool,
    parse_duration,
    parse_place,
    parse_select,
    parse_size,
    units,
    values,
)
from pbsplug.units import (
    exec_vnode_names,
    format_exec_host,
    parse_duration_cached,
    parse_exec_vnode,
)


@pytest.mark.parametrize("text,expected", [
    ("4gb", 4 << 30), ("512mb", 512 << 20), ("100kb", 102400), ("2048", 2048),
    ("1kw", 8192), ("3TB", 3 << 40), (" 7b ", 7), (12, 12),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "4 gigs", "-1gb", "1.5gb", True, -3, "gb"])
def test_parse_size_rejects_with_the_value(bad):
    with pytest.raises(ValueError) as err:
        parse_size(bad)
    assert str(bad) in str(err.value)


def test_format_size_is_the_inverse():
    for n in (1, 1024, 4 << 30, 3 << 40, 1536 << 20):
        assert parse_size(format_size(n)) == n
    assert format_size(4 << 30) == "4gb"


@pytest.mark.parametrize("text,expected", [
    ("01:00:00", 3600), ("1:30:00", 5400), ("10:00", 600), ("45", 45), ("00:00:01.5", 1),
    (90, 90), ("100:00:00", 360000),
])
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("bad", ["", "1:2:3:4", "ten", "01:xx:00", "-5", True,
                                 "\u0660\u0661:\u0660\u0660:\u0660\u0660", "\u0663",
                                 "1_0:00"])  # (Arabic-Indic digits: float() reads them)
def test_parse_duration_rejects(bad):
    with pytest.raises(ValueError, match=r"\[\[HH:\]MM:\]SS|negative"):
        parse_duration(bad)


def test_the_cached_parse_answers_and_refuses_as_parse_duration_does():
    """A cache keyed by value would take True for the 1 parsed before it, and a list for no
    key at all (TypeError): each is refused as `parse_duration` refuses it."""
    assert parse_duration_cached(1) == 1 and parse_duration_cached("01:00:00") == 3600
    for bad in (True, ["01:00:00"], "ten"):
        with pytest.raises(ValueError, match=r"\[\[HH:\]MM:\]SS"):
            parse_duration_cached(bad)


@pytest.mark.parametrize("bad", ["9" * 400, "9" * 400 + ":00", float("inf"), float("nan"),
                                 2 ** 63, "9223372036854775808"])
def test_parse_duration_rejects_what_no_long_holds(bad):
    # 400 digits made float() return inf, and int(inf) raised OverflowError, not ValueError
    with pytest.raises(ValueError, match="is over 9223372036854775807 seconds"):
        parse_duration(bad)
    assert parse_duration(2 ** 62) == 2 ** 62


def test_format_duration():
    assert format_duration(5400) == "01:30:00"
    assert format_duration(360000) == "100:00:00"
    assert format_duration(0) == "00:00:00"


def test_format_duration_of_a_negative_number_of_seconds_is_its_size_with_a_sign():
    # floor division made -2 "-1:59:58" (a host last used 2 s after the run, in power status)
    assert format_duration(-2) == "-00:00:02"
    assert format_duration(-5400) == "-01:30:00"
    assert format_duration(-7201.5) == "-02:00:01"


def test_parse_select_chunks():
    chunks = parse_select("2:ncpus=4:mem=8gb+1:ncpus=1:host=n1")
    assert [(c.count, c.resources) for c in chunks] == [
        (2, {"ncpus": 4, "mem": "8gb"}), (1, {"ncpus": 1, "host": "n1"})]
    assert str(chunks[0]) == "2:ncpus=4:mem=8gb"
    assert parse_select("ncpus=2")[0].count == 1


@pytest.mark.parametrize("bad", ["", "2:ncpus", "0:ncpus=1", "2:=4", "1:ncpus=2+", "3",
                                 "1:ncpus= 2", "1:ncpus=2 +1:ncpus=1", "1:mem=4 gb"])
def test_parse_select_rejects_naming_the_spec(bad):
    with pytest.raises(ValueError, match="select"):
        parse_select(bad)


def test_parse_place():
    assert parse_place("scatter:excl") == parse_place("excl:scatter")
    p = parse_place("pack:shared:group=switch")
    assert (p.arrangement, p.sharing, p.group) == ("pack", "shared", "switch")
    assert parse_place(None).arrangement == "free"
    with pytest.raises(ValueError, match="'spread'"):
        parse_place("spread")


@pytest.mark.parametrize("spec", ["excl:shared", "shared:excl", "exclhost:shared",
                                  "scatter:pack", "free:free", "excl:excl",
                                  "group=a:group=b", "group="])
def test_parse_place_refuses_a_part_given_twice(spec):
    """OpenPBS 23.06's qsub refuses each of these (``Illegal attribute or resource value
    Resource_List.place``); read one way here and another by a plugin, ``excl:shared``
    was shared to the scheduler and exclusive to cray_atom."""
    with pytest.raises(ValueError, match="place"):
        parse_place(spec)


@pytest.mark.parametrize("sharing,place,expected", [
    ("force_excl", "shared", "excl"), ("force_exclhost", "shared", "exclhost"),
    ("ignore_excl", "excl", "shared"), ("default_shared", "excl", "excl"),
    ("default_shared", "scatter:exclhost", "exclhost"), ("default_excl", "shared", "shared"),
    ("default_excl", "free", "excl"), ("default_exclhost", None, "exclhost"),
    ("default_shared", "pack", "shared"), (None, None, "shared"),
    ("default_exclhost", "pack:excl", "excl"),
])
def test_exclusivity_follows_pbs_first_match(sharing, place, expected):
    from pbsplug import exclusivity, parse_place

    assert exclusivity(place, sharing) == expected
    assert exclusivity(parse_place(place), sharing) == expected


@pytest.mark.parametrize("text, value", [
    ("true", True), ("T", True), ("y", True), ("1", True), (True, True),
    ("False", False), ("f", False), ("n", False), ("0", False), (False, False)])
def test_parse_bool_takes_pbs_spellings(text, value):
    assert parse_bool(text) is value


@pytest.mark.parametrize("text", ["yes please", "", "2", None])
def test_parse_bool_names_a_bad_value(text):
    with pytest.raises(ValueError, match=r"is not a boolean \(true\|t\|y\|1\|false\|f\|n\|0\)"):
        parse_bool(text)


@pytest.mark.parametrize("exec_vnode, exec_host", [
    # As OpenPBS 23.06 wrote them on one host "vm" (its MoM) with vnodes vm[0..2]:
    ("(vm[0]:ncpus=1)+(vm)+(vm[1])+(vm[2])", "vm/0+vm/1*0+vm/2*0+vm/3*0"),
    ("(vm[0]:ncpus=1)+(vm[1]:ncpus=1)+(vm)+(vm[2])", "vm/0+vm/1+vm/2*0+vm/3*0"),
    ("(vm:ncpus=0)", "vm/0*0"),
    ("(vm:ncpus=2)", "vm/0*2"),
])
def test_exec_host_is_pbss_per_chunk_with_ncpus_unless_one(exec_vnode, exec_host):
    assert format_exec_host(parse_exec_vnode(exec_vnode), lambda _: "vm") == exec_host


def test_exec_host_counts_chunks_per_host():
    chunks = [("a0", {"ncpus": 2}), ("a1", {}), ("b0", {"ncpus": 1}), ("a2", {"ncpus": "3"})]
    assert format_exec_host(chunks, lambda name: "h" + name[0]) == "ha/0*2+ha/1*0+hb/0+ha/2*3"


@given(st.text(alphabet="n1():=+ x", max_size=40))
def test_exec_vnode_names_are_parse_exec_vnodes_names(text):
    """The names-only reading gives the vnodes `parse_exec_vnode` gives, whatever the text."""
    assert exec_vnode_names(text) == tuple(name for name, _ in parse_exec_vnode(text))


def test_exec_vnode_names_of_chunks_and_the_rest_of_a_host():
    assert exec_vnode_names("(a0:ncpus=1)+(a1)+(b0:ncpus=1:mem=1gb+b1:ncpus=2)") == (
        "a0", "a1", "b0", "b1")
    assert exec_vnode_names("") == ()


# -- what the server writes beside a select (OpenPBS 23.06, checked) -----------------------------

TYPES = {"ncpus": "long", "mem": "size", "mpiprocs": "long", "energy": "float",
         "arch": "string", "bigmem": "boolean", "nodect": "long"}


def test_select_sums_add_up_numeric_resources_default_chunk_included():
    sums = units.select_sums("1:mem=5mb+2:ncpus=2:mpiprocs=3:arch=linux", (), TYPES)
    assert sums == {"mem": "5mb", "ncpus": 5, "mpiprocs": 6, "nodect": 3}
    queue, server = {"ncpus": 2, "mem": "1gb"}, {"mem": "4gb", "energy": 0.5}
    sums = units.select_sums("3:bigmem=true", (queue, server), TYPES)
    assert sums == {"ncpus": 6, "mem": "3gb", "energy": 1.5, "nodect": 3}


@pytest.mark.parametrize("select,mem", [  # OpenPBS 23.06's Resource_List.mem (qstat -f)
    ("2:ncpus=1:mem=512mb", "1024mb"), ("1:mem=512mb+1:mem=1536mb", "2048mb"),
    ("1:mem=1024kb+1:mem=1mb", "2048kb"), ("2:ncpus=1:mem=1500b", "3000b"),
    ("1:mem=1536kb+1:mem=1gb", "1050112kb"), ("1:mem=1500b+1:mem=1gb", "1048578kb"),
    ("1:mem=1500b+1:mem=1kb", "3kb"), ("1:mem=1mb+1:mem=1gb", "1025mb"),
    ("1:mem=1500b+1:mem=3mb", "3074kb"),
    # Each added chunk: to nothing it replaces it; else at the smaller unit, never below
    # kilo, each rounded up; words kept when both are words, else a word is 8 bytes.
    ("1:mem=1500b+1:mem=1500b", "4kb"), ("1:mem=1kw+1:mem=1kw", "2kw"), ("2:mem=1kw", "2kw"),
    ("1:mem=0gb+1:mem=1500b", "1500b"), ("1:mem=1500b+1:mem=0gb", "2kb"),
    ("1:mem=1kw+1:mem=1kb", "9kb"), ("1:mem=1kb+1:mem=1kw", "9kb"),
    ("1:mem=1500b+1:mem=1mb", "1026kb"), ("1:mem=3b+1:mem=5b+1:mem=7b", "3kb"),
    ("1:mem=1kw+1:mem=3b", "9kb"), ("1:mem=0b+1:mem=0b", "0b"), ("1:mem=1b", "1b"),
    ("1:mem=1w+1:mem=1w", "2kw"), ("1:mem=1mb+2:mem=1500b", "1027kb"),
    ("2:mem=1500b+1:mem=1mb", "1027kb"), ("1:mem=0b+2:mem=1500b", "3000b"),
    ("1:mem=1kw+2:mem=1w", "2kw"), ("1:mem=1kw+1:mem=1mw", "1025kw"), ("3:mem=1w", "3w"),
    ("1:mem=0kb+1:mem=0b", "0b"), ("1:mem=0mb+1:mem=3kw", "3kw"),
    ("1:mem=2mb+1:mem=0kw", "2048kb"), ("1:mem=1kw+1:mem=0b", "8kb"),
    ("1:mem=1gb+1:mem=1gb", "2gb"), ("1:mem=3w+1:mem=1kb", "2kb"),
    ("1:mem=1w+1:mem=1b", "2kb"), ("1:mem=5mw+1:mem=1gb", "1064mb"),
    ("1:mem=1gw+1:mem=1gw", "2gw"), ("2:mem=1kb+1:mem=0b+1:mem=1b", "3kb"),
    ("1:mem=0b+1:mem=0kb+1:mem=5b", "5b"), ("1:mem=1025b+1:mem=1kb", "3kb"),
    ("1:mem=2047mb+1:mem=1gb", "3071mb"),
])
def test_select_sums_add_sizes_up_in_pbss_units(select, mem):
    assert units.select_sums(select, (), TYPES)["mem"] == mem


def test_select_sums_leave_out_what_no_pbs_value_holds():
    sums = units.select_sums("100000:mem=100pb", (), TYPES)
    assert "mem" not in sums and sums["nodect"] == 100000 and sums["ncpus"] == 100000
    # Rounded up chunk by chunk, a sum in range in bytes may pass it (it was stored, and
    # the server's own check of the job set it aside at the next start).
    for select in ("1:mem=9223372036854775000b+1:mem=1b",
                   "1:mem=576460752303423487w+1:mem=576460752303423487w"):
        sums = units.select_sums(select, (), TYPES)
        assert "mem" not in sums and sums["nodect"] == 2, select


def test_with_sums_add_a_selects_sums_and_convert_a_plain_job():
    first = units.with_sums({"select": "2:ncpus=1:mem=10mb", "walltime": "1:00"}, (), TYPES)
    assert first == {"select": "2:ncpus=1:mem=10mb", "walltime": "1:00", "ncpus": 2,
                     "mem": "20mb", "nodect": 2}
    assert units.with_sums({"walltime": "1:00"}, ({"ncpus": 4},), TYPES) == {
        "walltime": "1:00", "nodect": 1, "ncpus": 4}
    assert units.with_sums({"ncpus": 2}, (), TYPES) == {"ncpus": 2, "nodect": 1}
    assert units.with_sums({"select": "x:y"}, (), TYPES) == {"select": "x:y"}  # its check's


def test_a_converted_select_holds_the_host_level_resources_by_name():
    # OpenPBS 23.06: -l vmem=2gb -l ncpus=2 -l mem=1gb -l arch=linux -l host=vm -l cput=100
    res = {"vmem": "2gb", "ncpus": 2, "mem": "1gb", "arch": "linux", "host": "vm",
           "cput": "100", "walltime": "1:00", "scratch": "5gb", "software": "abc"}
    assert units.converted_select(res, values.CHUNK_RESOURCES) == \
        "1:arch=linux:host=vm:mem=1gb:ncpus=2:vmem=2gb"
    assert units.converted_select(res, values.CHUNK_RESOURCES | {"scratch"}) == \
        "1:arch=linux:host=vm:mem=1gb:ncpus=2:scratch=5gb:vmem=2gb"
    assert units.converted_select({"walltime": "1:00"}, values.CHUNK_RESOURCES) == "1"
    # PBS's order whatever the case, and a value quoted where a select would split it
    assert units.converted_select({"Scratch": "1gb", "arch": "a:b", "ncpus": 1, "host": "x y"},
                                  values.CHUNK_RESOURCES | {"Scratch"}) == \
        '1:arch="a:b":host="x y":ncpus=1:Scratch=1gb'
    assert units.converted_select({"arch": 'a"+b'}, values.CHUNK_RESOURCES) == "1:arch='a\"+b'"
    with pytest.raises(ValueError, match="both quotes"):
        units.converted_select({"arch": "a\"'b"}, values.CHUNK_RESOURCES)


@pytest.mark.parametrize(("spec", "chunks"), [
    ('1:arch="a:b":ncpus=1', [(1, {"arch": "a:b", "ncpus": 1})]),
    ("2:x='a+b=c(d)':ncpus=2+1:ncpus=1", [(2, {"x": "a+b=c(d)", "ncpus": 2}),
                                          (1, {"ncpus": 1})]),
    ('1:host="x y"', [(1, {"host": "x y"})]),
    ('1:n="12"', [(1, {"n": "12"})]),  # quoted: as written
])
def test_a_select_reads_quoted_values_whole(spec, chunks):
    parsed = parse_select(spec)
    assert [(c.count, c.resources) for c in parsed] == chunks
    again = parse_select("+".join(map(str, parsed)))  # written back, quoted where needed
    assert [(c.count, c.resources) for c in again] == [
        (n, {k: int(v) if k == "n" else v for k, v in r.items()}) for n, r in chunks]


@pytest.mark.parametrize("spec", ['1:arch="a:b', "1:arch=a'b", '1:arch=""', '1:arch="a"b'])
def test_a_select_with_a_quote_left_open_or_inside_a_value_is_refused(spec):
    with pytest.raises(ValueError, match="select"):
        parse_select(spec)


@pytest.mark.parametrize(("res", "maxima", "minima", "over"), [
    ({"walltime": "2:00:00"}, [{"walltime": "01:00:00"}], [], "walltime"),
    ({"walltime": "1:00:00"}, [{"walltime": "01:00:00"}], [], None),  # the bound passes
    ({"mem": "1200mb"}, [None, {"mem": "1gb"}], [], "mem"),  # the server's, summed
    ({"mem": "5mb"}, [], [{"mem": "10mb"}], "mem"),
    ({"ncpus": 1}, [], [{"ncpus": 2}], "ncpus"),
    ({"arch": "sun"}, [{"arch": "linux"}], [], "arch"),  # strings by their text
    ({"arch": "abc"}, [{"arch": "linux"}], [], None),
    ({"arch": "abc"}, [], [{"arch": "linux"}], "arch"),
    ({"walltime": "1:00"}, [{"mem": "1gb"}], [{"ncpus": 2}], None),  # not asked: not compared
    ({"energy": 2.5}, [{"energy": 2}], [], "energy"),
    ({"vntype": "a"}, [{"vntype": "b"}], [], None),  # no order here
    ({"accelerator": True}, [{"accelerator": False}], [], None),
    # a queue's limit on a resource goes before the server's (OpenPBS 23.06)
    ({"walltime": "1:30:00"}, [{"walltime": "2:00:00"}, {"walltime": "1:00:00"}], [], None),
    ({"walltime": "1:30:00"}, [{"mem": "1gb"}, {"walltime": "1:00:00"}], [], "walltime"),
    ({"ncpus": 5}, [{"ncpus": float("inf")}], [], None),  # (not a long: not compared)
    ({"energy": 5}, [{"energy": float("nan")}], [], None),
    ({"ncpus": "x"}, [{"ncpus": 1}], [], None),  # not a value of its type: its check's
])
def test_outside_limits_names_the_first_resource_past_a_queues_or_the_servers(
        res, maxima, minima, over):
    assert units.outside_limits(res, maxima, minima, values.RESOURCE_TYPES) == over


#: 5000 zeros and a 7: no number past a long, but more digits than int() reads (it counts
#: leading zeros).
ZEROS = "0" * 5000 + "7"


@pytest.mark.parametrize("parse", [
    lambda: parse_size(f"{ZEROS}kb"), lambda: parse_select(f"{ZEROS}:ncpus=1"),
    lambda: units.nodes_select(ZEROS, types=TYPES),
    lambda: units.nodes_select(f"1:ppn={ZEROS}", types=TYPES),
    lambda: units.nodes_select(f"1:ncpus={ZEROS}", types=TYPES),
], ids=["size", "select count", "nodes count", "nodes ppn", "nodes ncpus"])
def test_a_number_of_thousands_of_leading_zeros_is_the_values_own_error(parse):
    """values.past read 5000 zeros and a 7 as 7, under a long, and the int() after it
    raised Python's ValueError ("Exceeds the limit (4300 digits)")."""
    with pytest.raises(ValueError) as err:
        parse()
    message = str(err.value)
    assert "Exceeds the limit" not in message and "4300" not in message, message[:200]
    assert parse_select(f"1:ncpus={ZEROS}")[0].resources["ncpus"] == ZEROS  # (text: refused
    # by its type's check, as a number past a long is)
