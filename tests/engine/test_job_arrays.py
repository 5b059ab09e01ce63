"""Job arrays (qsub -J), as OpenPBS 23.06 keeps them (checked on the real PBS: ids, states,
attributes, messages, exit statuses, the subjobs' environment and file names)."""

from __future__ import annotations

import json

import pytest

from pbsplug.engine import arrays


@pytest.mark.parametrize(("given", "remaining"), [
    ([4, 6], "4-6:2"), ([8, 10], "8,10"), ([], "-"), ([1, 2, 3, 5], "1-3,5")])
def test_remaining_indices_are_written_as_pbs_writes_them(given, remaining):
    step = 2 if given == [4, 6] else 1
    assert arrays.format_indices(given, step) == remaining
    assert arrays.parse_indices(remaining) == sorted(given)


@pytest.mark.parametrize("bad", [
    "5", "3-1", "1-1", "1-10:0", "1-3,5", "a-b", "1-3:", "-1-3",
    # Past the numbers PBS's qsub reads (2^63 - 2), and digits other than ASCII's.
    "10000000000000000000000-10000000000000000000005", "1-18446744073709551616",
    "1-3:99999999999999999999", "1-9223372036854775807", "1-3:9223372036854775807",
    "\u0661-\u0663", "1-\u0663", "1-3:\u0662"])
def test_qsub_refuses_a_range_pbs_refuses(engine, bad):
    done = engine.pbs("qsub", "-J", bad, "--", "/bin/true")
    assert done.returncode == 2
    assert done.stderr.startswith("qsub: illegal -J value\nusage: qsub")


def test_qsub_refuses_a_non_rerunnable_array(engine):
    done = engine.pbs("qsub", "-r", "n", "-J", "1-3", "--", "/bin/true")
    assert done.returncode == 2
    assert done.stderr.startswith("qsub:  cannot submit non-rerunable Array Job\nusage:")


def test_an_array_past_max_array_size_is_refused(engine):
    done = engine.pbs("qsub", "-J", "0-10000", "--", "/bin/true")
    assert (done.returncode, done.stderr) == (
        3, "qsub: Array job exceeds server or queue size limit\n")
    engine.pbs("qmgr", "-c", "set server max_array_size = 3", check=True)
    assert engine.pbs("qsub", "-J", "1-4", "--", "/bin/true").returncode == 3
    assert engine.pbs("qsub", "-h", "-J", "1-3", "--", "/bin/true").returncode == 0


def test_an_array_is_one_row_with_pbs_attributes(engine):
    job_id = engine.pbs("qsub", "-h", "-N", "arr", "-J", "0-6:2%2", "--", "/bin/true",
                        check=True).stdout.strip()
    number = job_id.split("[")[0]
    assert job_id == f"{number}[].{engine.client('status')['server']}"
    attrs = engine.job(job_id)
    assert attrs["array"] is True
    assert attrs["array_indices_submitted"] == "0-6:2"
    assert attrs["array_indices_remaining"] == "0-6:2"
    assert attrs["array_state_count"] == "Queued:4 Running:0 Exiting:0 Expired:0"
    assert attrs["max_run_subjobs"] == 2
    assert attrs["Output_Path"].endswith(f"/arr.o{number}.^array_index^")
    assert attrs["job_state"] == "H"
    sub = engine.job(arrays.subjob_id(job_id, 4))
    assert (sub["array_id"], sub["array_index"], sub["job_state"]) == (job_id, 4, "Q")
    assert sub["Output_Path"].endswith(f"/arr.o{number}.4")
    unknown = engine.pbs("qstat", f"{number}[3]")
    assert (unknown.returncode, unknown.stderr) == (
        153, f"qstat: Unknown Job Id {number}[3].{job_id.split('.', 1)[1]}\n")
    assert engine.pbs("qstat", number).returncode == 153


def test_subjobs_run_with_their_index_and_the_array_ends(engine):
    script = ("echo idx=$PBS_ARRAY_INDEX aid=$PBS_ARRAY_ID jid=$PBS_JOBID\n"
              "exit $PBS_ARRAY_INDEX\n")
    job_id = engine.pbs("qsub", "-N", "arr", "-J", "0-4:2%2", input=script,
                        check=True).stdout.strip()
    number = job_id.split("[")[0]
    attrs = engine.wait(job_id)
    # (a subjob failed, and the last one, 2 or 4, did not exit 0: PBS's)
    assert (attrs["Exit_status"], attrs["substate"]) == (1, 93)
    assert attrs["comment"].startswith("Job Array Began at ")
    assert attrs["comment"].endswith(" and failed")
    assert attrs["array_indices_remaining"] == "-"
    for index in (0, 2, 4):
        sub = engine.job(arrays.subjob_id(job_id, index))
        assert (sub["job_state"], sub["Exit_status"], sub["array_index"]) == ("F", index, index)
        out = (engine.work / f"arr.o{number}.{index}").read_text()
        assert out == f"idx={index} aid={job_id} jid={arrays.subjob_id(job_id, index)}\n"


def test_an_array_whose_subjobs_succeed_finishes(engine):
    job_id = engine.pbs("qsub", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["substate"]) == (0, 92)
    assert attrs["comment"].endswith(" and finished")
    assert attrs["array_state_count"] == "Queued:0 Running:0 Exiting:0 Expired:0"


def test_hooks_fire_once_for_the_array_and_per_subjob(dists, make_engine, engine_root):
    from .test_server import plugin

    record = engine_root / "seen"
    engine = make_engine(plugin(dists, "watch", f"""
        def seen(event, name):
            job = event.job
            open({str(record)!r}, "a").write(
                f"{{name}} {{job.array_indices_submitted}} {{job.array_id}} "
                f"{{job.array_index}}\\n")

        @hookimpl
        def queuejob(event):
            seen(event, "queuejob")

        @hookimpl
        def runjob(event):
            seen(event, "runjob")

        @hookimpl
        def execjob_begin(event):
            seen(event, "execjob_begin")

        @hookimpl
        def execjob_end(event):
            seen(event, "execjob_end")

        @hookimpl
        def jobobit(event):
            seen(event, "jobobit")
        """, ("queuejob", "runjob", "execjob_begin", "execjob_end", "jobobit")))
    job_id = engine.pbs("qsub", "-J", "1-2%1", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(job_id)
    lines = record.read_text().splitlines()
    assert lines == [
        "queuejob 1-2 None None",
        *(f"{event} None {job_id} {index}" for index in (1, 2)
          for event in ("runjob", "execjob_begin", "execjob_end", "jobobit")),
        "jobobit 1-2 None None"], lines


def test_a_restarted_server_keeps_its_arrays_and_running_subjobs(engine):
    job_id = engine.pbs("qsub", "-J", "1-3%1", "--", "/bin/sh", "-c", "sleep 2",
                        check=True).stdout.strip()
    first = arrays.subjob_id(job_id, 1)
    engine.wait(first, "R")
    engine.kill()
    engine.start()
    attrs = engine.wait(job_id, timeout=90)
    assert (attrs["Exit_status"], attrs["array_indices_remaining"]) == (0, "-")
    subs = [engine.job(arrays.subjob_id(job_id, i)) for i in (1, 2, 3)]
    assert [(s["job_state"], s["Exit_status"], s["run_count"]) for s in subs] == [
        ("F", 0, 1)] * 3


def _ids(table: str) -> list[str]:
    return [line.split()[0] for line in table.splitlines()[2:]]


def test_qstat_t_and_J_show_subjobs_and_arrays(engine):
    job_id = engine.pbs("qsub", "-h", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    subs = [arrays.subjob_id(job_id, i) for i in (1, 2, 3)]
    assert _ids(engine.pbs("qstat", check=True).stdout) == [job_id]
    assert _ids(engine.pbs("qstat", "-t", check=True).stdout) == [job_id, *subs]
    assert _ids(engine.pbs("qstat", "-J", check=True).stdout) == [job_id]
    assert _ids(engine.pbs("qstat", "-Jt", check=True).stdout) == subs
    assert _ids(engine.pbs("qstat", "-t", job_id, check=True).stdout) == [job_id, *subs]


def test_qstat_xt_lists_a_finished_arrays_subjobs(engine):
    job_id = engine.pbs("qsub", "-J", "0-4:2", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(job_id)
    table = engine.pbs("qstat", "-xt", job_id, check=True).stdout.splitlines()
    assert [line.split()[0] for line in table[2:]] == [
        job_id, *(arrays.subjob_id(job_id, i) for i in (0, 2, 4))]
    assert [line.split()[4] for line in table[2:]] == ["F"] * 4


def test_qdel_of_subjobs_a_range_and_the_array(engine):
    job_id = engine.pbs("qsub", "-h", "-J", "1-10", "--", "/bin/true",
                        check=True).stdout.strip()
    number, server = job_id.split("[")[0], job_id.split(".", 1)[1]
    assert engine.pbs("qdel", f"{number}[2]").returncode == 0
    assert engine.pbs("qdel", f"{number}[4-6]").returncode == 0
    assert engine.pbs("qdel", f"{number}[4-6]").returncode == 0  # (gone already: let be)
    out_of_range = engine.pbs("qdel", f"{number}[11]")
    assert (out_of_range.returncode, out_of_range.stderr) == (
        156, f"qdel: Invalid request {number}[11].{server}\n")
    assert engine.pbs("qdel", f"{number}[1-20:2]").returncode == 0
    attrs = engine.job(job_id)
    assert attrs["array_indices_remaining"] == "8,10"
    assert attrs["array_state_count"] == "Queued:2 Running:0 Exiting:0 Expired:8"
    states = engine.pbs("qstat", "-t", job_id, check=True).stdout.splitlines()[2:]
    assert [line.split()[4] for line in states] == ["H", *"XXXXXXXQXQ"]
    assert engine.pbs("qdel", job_id).returncode == 0
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["substate"]) == ("F", 91)
    assert attrs["array_state_count"] == "Queued:0 Running:0 Exiting:0 Expired:10"


def test_a_subjob_deleted_before_it_began_shows_as_openpbs_shows_it(engine):
    """OpenPBS 23.06.06, measured as a user (``-J 1-4%1``, ``qdel 12[3]`` while 12[1]
    ran): the deleted index is X with its array's stime and substate (70), ``Subjob
    finished`` and no Exit_status while the array runs, Expired in its count; once the
    array is over it is F with the array's substate, Exit_status and obittime, still
    Expired, and the array ends ``and finished``. pbsplug showed no obittime then."""
    go = engine.work / "go"
    script = f"for i in $(seq 600); do [ -e {go} ] && exit 0; sleep 0.1; done\n"
    job_id = engine.pbs("qsub", "-J", "1-3%1", input=script, check=True).stdout.strip()
    third = arrays.subjob_id(job_id, 3)
    engine.wait(arrays.subjob_id(job_id, 1), "R")
    done = engine.pbs("qdel", third)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    array, attrs = engine.job(job_id), engine.job(third)
    assert array["array_state_count"] == "Queued:1 Running:1 Exiting:0 Expired:1"
    assert [attrs.get(k) for k in ("job_state", "substate", "stime", "comment")] == [
        "X", 70, array["stime"], "Subjob finished"]
    assert "Exit_status" not in attrs and "obittime" not in attrs
    go.touch()
    array, attrs = engine.wait(job_id), engine.job(third)
    assert array["comment"].endswith(" and finished")
    assert array["array_state_count"] == "Queued:0 Running:0 Exiting:0 Expired:1"
    assert [attrs.get(k) for k in ("job_state", "substate", "stime", "Exit_status",
                                   "obittime", "comment")] == [
        "F", 92, array["stime"], 0, array["obittime"], "Subjob finished"]


def test_a_subjob_is_not_held_released_or_altered_but_its_array_is(engine):
    job_id = engine.pbs("qsub", "-h", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    sub = arrays.subjob_id(job_id, 2)
    for command in (("qhold",), ("qrls",), ("qalter", "-l", "walltime=100")):
        done = engine.pbs(*command, sub)
        assert (done.returncode, done.stderr) == (156, f"{command[0]}: Invalid request {sub}\n")
    assert engine.pbs("qalter", "-l", "walltime=100", job_id).returncode == 0
    assert engine.pbs("qrls", job_id).returncode == 0
    attrs = engine.wait(job_id)
    assert attrs["Resource_List"]["walltime"] == "00:01:40"
    assert engine.job(sub)["Resource_List"]["walltime"] == "00:01:40"


def test_a_running_array_is_held_then_begun_again_and_qrerun_requeues_a_subjob(engine):
    job_id = engine.pbs("qsub", "-J", "1-2%1", "--", "/bin/sleep", "60",
                        check=True).stdout.strip()
    first = arrays.subjob_id(job_id, 1)
    engine.wait(first, "R")
    assert engine.job(job_id)["job_state"] == "B"
    assert engine.pbs("qhold", job_id).returncode == 0
    assert engine.job(job_id)["job_state"] == "H"
    assert engine.pbs("qrls", job_id).returncode == 0
    assert (engine.job(job_id)["job_state"], engine.job(job_id)["substate"]) == ("B", 70)
    queued = arrays.subjob_id(job_id, 2)
    assert engine.job(queued)["job_state"] == "Q"  # (max_run_subjobs = 1)
    refused = engine.pbs("qrerun", queued)  # (OpenPBS 23.06.06's 15016 here, measured)
    assert (refused.returncode, refused.stderr) == (
        168, f"qrerun: Request invalid for state of job {queued}\n")
    assert engine.pbs("qrerun", first).returncode == 0
    engine.wait(first, "R")
    assert engine.job(first)["run_count"] == 2 or engine.job(first)["job_state"] == "R"
    assert engine.pbs("qdel", job_id).returncode == 0
    attrs = engine.wait(job_id)
    assert attrs["comment"].endswith(" and terminated")


def test_qrun_of_a_subjob_runs_it_and_an_array_is_not_run(engine):
    job_id = engine.pbs("qsub", "-J", "1-3%1", "--", "/bin/sleep", "60",
                        check=True).stdout.strip()
    engine.wait(arrays.subjob_id(job_id, 1), "R")
    refused = engine.pbs("qrun", job_id)
    assert (refused.returncode, refused.stderr) == (2, f"qrun: Invalid request {job_id}\n")
    third = arrays.subjob_id(job_id, 3)
    assert engine.pbs("qrun", third).returncode == 0  # (past max_run_subjobs, as qrun may)
    assert engine.job(third)["job_state"] == "R"
    assert engine.job(job_id)["array_indices_remaining"] == "2"
    assert engine.pbs("qdel", job_id).returncode == 0
    engine.wait(job_id)


def test_qstat_f_t_shows_a_run_subjobs_environment(engine):
    job_id = engine.pbs("qsub", "-J", "1-2", "-v", "SEEN=yes", "--", "/bin/true",
                        check=True).stdout.strip()
    engine.wait(job_id)
    shown = engine.client("stat_jobs", ids=[job_id], history=True, subjobs=True)
    assert [a["Variable_List"]["SEEN"] for a in shown.values()] == ["yes"] * 3


def test_the_store_reads_one_arrays_subjobs_alone(tmp_path):
    from pbsplug.engine.store import Store

    store = Store(tmp_path / "server.db")
    rows = {"1[].vm": ("B", None), "1[2].vm": ("R", 2), "1[3].vm": ("F", 3),
            "12[].vm": ("Q", None), "12[2].vm": ("R", 2), "2.vm": ("Q", None)}
    with store.transaction() as st:
        for seq, (job_id, (state, index)) in enumerate(rows.items()):
            attrs = {"job_state": state, **({"array_index": index} if index else {})}
            st.add_job(seq, job_id, attrs, None)
    assert sorted(store.subjob_states("1[].vm")) == [(2, "R"), (3, "F")]
    assert list(store.subjobs("1[].vm")) == ["1[2].vm", "1[3].vm"]
    assert store.subjob_states("12[].vm") == [(2, "R")]
    store.close()


def test_subjobs_start_in_index_order(engine):
    ncpus = sum(int(n["resources_available"]["ncpus"]) for n in engine.nodes().values())
    order = engine.work / "order"
    job_id = engine.pbs("qsub", "-h", "-J", "1-12", "-l", f"select=1:ncpus={ncpus}",
                        input=f"echo $PBS_ARRAY_INDEX >> {order}\n", check=True).stdout.strip()
    assert engine.pbs("qrls", job_id).returncode == 0
    engine.wait(job_id)
    assert order.read_text().split() == [str(i) for i in range(1, 13)]


def test_what_openpbs_answers_for_a_held_array_not_begun(engine):
    job_id = engine.pbs("qsub", "-h", "-J", "1-4", "--", "/bin/true", check=True).stdout.strip()
    number = job_id.split("[")[0]
    assert engine.pbs("qdel", f"{number}[2]").returncode == 0
    again = engine.pbs("qdel", f"{number}[2]")
    assert (again.returncode, again.stderr) == (
        55, f"qdel: Request invalid for finished array subjob {arrays.subjob_id(job_id, 2)}\n")
    third = arrays.subjob_id(job_id, 3)
    rerun = engine.pbs("qrerun", third)
    assert (rerun.returncode, rerun.stderr) == (
        168, f"qrerun: Request invalid for state of job {third}\n")
    assert engine.pbs("qalter", "-W", "max_run_subjobs=1", job_id).returncode == 0
    assert engine.job(job_id)["max_run_subjobs"] == 1
    assert engine.pbs("qrun", third).returncode == 0  # (its array held: it runs all the same)
    # (X, not F, while its array lives: OpenPBS 23.06's qstat names it so, checked)
    assert engine.wait(third, "X")["Exit_status"] == 0, engine.log()[-3000:]
    assert engine.job(job_id)["job_state"] == "H"


def test_a_percent_without_a_number_is_the_servers_15014(engine):
    for value in ("1-3%", "1-3%x"):
        done = engine.pbs("qsub", "-J", value, "--", "/bin/true")
        assert done.returncode == 166, done.stderr


@pytest.mark.parametrize("value", [
    "2147483647-2147483648", "2147483646-2147483649", "1-3:2147483648",
    "4294967290-4294967296", "1-9223372036854775806",  # (PBS's server wraps the first)
    "1-3%2147483649", "1-3%99999999999999999999", "1-3%" + "9" * 5000, "1-3%\u0662"])
def test_an_index_past_a_c_int_or_a_percent_past_the_servers_is_15014(engine, value):
    """OpenPBS 23.06 (checked): an index or step past 2^31 - 1 is its server's 15014
    (2^32 - 6 to 2^32, which it took, it turned into -6 to 0); a ``%`` no number fits
    too. Stored, such an index was read back from SQLite as a float."""
    done = engine.pbs("qsub", "-J", value, "--", "/bin/true")
    assert (done.returncode, done.stderr) == (
        166, "qsub: Illegal attribute or resource value array_indices_submitted\n")
    assert engine.client("stat_jobs", history=True) == {}
    with pytest.raises(arrays.ServerRefuses):
        arrays.parse_spec(value)


def test_a_raw_request_cannot_store_an_index_past_a_c_int(engine):
    with pytest.raises(Exception) as refused:
        engine.client("submit", attrs={"array_indices_submitted": "1-2147483648"},
                      script="true\n")
    assert getattr(refused.value, "code", None) == 15014, refused.value
    assert engine.client("stat_jobs", history=True) == {}


def test_the_largest_indices_and_percent_are_kept_exactly(engine):
    job_id = engine.pbs("qsub", "-h", "-J", "2147483645-2147483647:2%2147483648", "--",
                        "/bin/true", check=True).stdout.strip()
    attrs = engine.job(job_id)
    assert (attrs["array_indices_submitted"], attrs["array_indices_remaining"],
            attrs["max_run_subjobs"]) == ("2147483645-2147483647:2", "2147483645-2147483647:2",
                                          2147483648)
    number, server = job_id.split("[")[0], job_id.split(".", 1)[1]
    shown = engine.pbs("qstat", "-ft", "-F", "json", job_id, check=True).stdout
    assert list(json.loads(shown)["Jobs"]) == [
        job_id, f"{number}[2147483645].{server}", f"{number}[2147483647].{server}"]


def test_parse_spec_bounds_every_number():
    assert arrays.parse_spec("0-2147483647:2147483647%2147483648") == arrays.Spec(
        0, 2147483647, 2147483647, 2147483648)
    assert arrays.parse_spec("000001-3").start == 1  # (leading zeros: the same number)
    for value, refused in (("1-2147483648", arrays.OutOfRange),
                           ("1-3:2147483648", arrays.OutOfRange),
                           ("1-3%2147483649", arrays.OutOfRange),
                           ("1-3%", arrays.PercentEmpty),
                           ("1-3%\u0662", arrays.PercentEmpty),
                           ("1-9223372036854775806", arrays.OutOfRange),
                           ("1-9223372036854775807", ValueError),
                           ("1-" + "9" * 5000, ValueError)):
        with pytest.raises(refused) as raised:
            arrays.parse_spec(value)
        assert refused is not ValueError or not isinstance(raised.value,
                                                            arrays.ServerRefuses), value


def test_qselect_lists_arrays_not_their_subjobs(engine):
    array = engine.pbs("qsub", "-J", "1-3%1", "--", "/bin/sleep", "60",
                       check=True).stdout.strip()
    single = engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(arrays.subjob_id(array, 1), "R")
    assert engine.pbs("qselect", check=True).stdout.split() == [array, single]
    assert engine.pbs("qselect", "-J", check=True).stdout.split() == [array]
    engine.pbs("qdel", array, single, check=True)


@pytest.mark.parametrize(("remaining", "count"), [
    ("-", 0), ("7", 1), ("4-6:2,9", 3), ("0-9999", 10_000), ("1-10:3", 4), ("8,10", 2)])
def test_remaining_indices_are_counted_from_their_runs(remaining, count):
    assert arrays.count_indices(remaining) == count == len(arrays.parse_indices(remaining))
    with pytest.raises(ValueError):
        arrays.count_indices("1-5:0")


@pytest.mark.parametrize(("names", "refuse"), [
    (["{a}[2]", "{a}[1-3]"], False), (["{a}[1-3]", "{a}[2]"], False),
    (["{a}[2]", "{a}[]"], False), (["{a}[1-3]", "{a}[2-3]", "{a}[]"], False),
    (["{a}[2]", "{a}[1-3]"], True), (["{a}[]", "{a}[2]", "{a}[]"], True)],
    ids=["alone-range", "range-alone", "alone-whole", "range-range-whole",
         "alone-range-refused", "whole-alone-whole-refused"])
def test_a_subjob_named_again_in_one_qdel_is_deleted_once(
        engine_here, register_plugin, tmp_path, names, refuse):
    """``qdel 12[2] 12[1-3]`` (a running subjob named alone, then in a range, or in the
    whole array ``12[]``, in any order) fired subjob 2's execjob_preterm for each name and
    wrote its D record for each: the array's part did not know what the request had taken
    already, as ``qdel 7 7.server`` does. Now it is deleted once, one preterm, one D, and
    each name is answered as the first (a refusal again for a preterm that refused)."""
    from pbsplug import PluginInfo, hookimpl
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    from .conftest import accounting_records, jobs_left_killed, poll_until

    ran = tmp_path / "ran"
    tmp_path.chmod(0o777)

    class Counts:
        plugin_info = PluginInfo(events=("execjob_preterm",))

        @hookimpl
        def execjob_preterm(self, event):
            with ran.open("a") as out:
                out.write(event.job.id + "\n")
            if refuse:
                event.reject("not now")

    register_plugin(Counts(), "counts")
    eng = engine_here()
    root = Caller(0, ROLE_MANAGER)
    array = eng.req_submit(root, {"array_indices_submitted": "1-3"}, "exec sleep 300\n")
    sub = array.replace("[]", "[2]")
    poll_until(eng, lambda: sub in eng.launches, "subjob 2 running")
    running = sorted(job for job in eng.launches if job.startswith(array.split("[")[0]))
    number = array.split("[")[0]
    answers = eng.req_delete(root, [name.format(a=number) for name in names])
    records = accounting_records(eng)
    if not refuse:  # (one D a running subjob)
        assert [records.count(f";D;{job};") for job in running] == [1] * len(running), \
            records
    runs = ran.read_text().splitlines()
    assert sorted(runs) == running, runs  # (one preterm a running subjob)
    if refuse:
        assert all(answer["error"]["code"] == 15136 for answer in answers), answers
        assert f";D;{sub};" not in records, records
        assert all(job in eng.launches and job not in eng.kills for job in running)
        jobs_left_killed(eng)  # (the refused subjobs' sleep 300 and shepherds)
        return
    assert all(answer.get("error") is None for answer in answers), answers
    assert all(job in eng.kills for job in running), (running, eng.kills)
