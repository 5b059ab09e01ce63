"""The trace readers on real lines, crafted malformed ones, fuzzed ones and the real traces."""

from __future__ import annotations

import gzip
import math
import random
from pathlib import Path

import pytest

from pbsplug.sim.records import TraceJob
from pbsplug.sim.traces import TraceError, open_trace
from pbsplug.testing import missing

TRACES = Path("/work/shared/data/traces")


def needs_traces() -> None:
    """The shared traces, or `missing` (a skip here, a failure under CI: a skip there
    would pass for done)."""
    if not TRACES.exists():
        missing(f"the shared traces are not on this machine ({TRACES})")


SWF_HEADER = """\
; Version: 2.2
; Computer: Test box
; UnixStartTime: 843480031
; TimeZoneString: Europe/Stockholm
; MaxNodes: 100
; MaxProcs: 400
; MaxQueues: 2
; Queue: 1 batch
; Queue: 2 short jobs
; Partition: 1 main
; Note: a crafted log
"""


def swf_line(*, job=1, submit=0, wait=5, run=100, alloc=4, used_mem=-1, req_procs=4,
             req_time=3600, req_mem=-1, status=1, user=3, group=2, queue=1, partition=-1,
             extra="") -> str:
    fields = [job, submit, wait, run, alloc, -1, used_mem, req_procs, req_time, req_mem,
              status, user, group, -1, queue, partition, -1, -1]
    return " ".join(str(f) for f in fields) + (f" {extra}" if extra else "") + "\n"


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def read(path: Path, **kw) -> tuple[list[TraceJob], object]:
    trace = open_trace(path, **kw)
    return list(trace), trace


# --- SWF ------------------------------------------------------------------------------------

def test_swf_header_goes_into_trace_info(tmp_path):
    path = write(tmp_path, "t.swf", SWF_HEADER + swf_line())
    trace = open_trace(path)
    info = trace.info
    assert (info.format, info.max_nodes, info.max_procs) == ("swf", 100, 400)
    assert (info.unix_start_time, info.time_zone) == (843480031, "Europe/Stockholm")
    assert info.queues == {"1": "batch", "2": "short jobs"}
    assert info.partitions == {"1": "main"}
    assert "Computer: Test box" in info.notes and "Note: a crafted log" in info.notes


def test_swf_fields_and_unknowns(tmp_path):
    lines = (swf_line(job=7, submit=10, wait=3, run=50, alloc=8, req_procs=-1, req_time=-1,
                      req_mem=1000, user=-1, queue=2)
             + swf_line(job=12, submit=20, wait=-1, run=0.4, alloc=2, req_procs=4,
                        req_time=60, status=0, queue=-1, partition=3)
             + swf_line(job=30, submit=20, alloc=-1, req_procs=-1)      # no processor count
             + swf_line(job=31, submit=25, run=-1)                      # run time unknown
             + swf_line(job=32, submit=26, status=3))                   # a partial execution
    jobs, trace = read(write(tmp_path, "t.swf", SWF_HEADER + lines))
    a, b = jobs
    assert (a.job_id, a.line, a.submit, a.run_time, a.ncpus) == ("7", 12, 10.0, 50.0, 8)
    assert a.walltime is None                      # -1 requested time: unknown
    assert a.mem == 1000 * 1024 * 8                # KB per processor, for the whole job
    assert (a.user, a.group, a.queue, a.status, a.recorded_wait) == ("", "2", "2", 1, 3.0)
    assert (b.job_id, b.ncpus, b.walltime, b.run_time, b.mem) == ("12", 4, 60.0, 0.4, None)
    assert (b.queue, b.status, b.recorded_wait) == ("3", 0, None)   # partition when no queue
    assert trace.jobs == 2
    assert trace.dropped == {"no processor count (fields 5 and 8 unknown)": 1,
                             "run time unknown (field 4)": 1,
                             "partial execution records (status 2-4)": 1}
    assert "dropped" in trace.summary()


def test_swf_extended_queue_names_and_requests(tmp_path):
    line = swf_line(queue="q_long", extra="nodes=2:ppn=4 -1").replace(" q_long ", " q_long ")
    (job,), _ = read(write(tmp_path, "meta.swf", line))
    assert job.queue == "q_long" and job.select == "2:ncpus=4"  # as PBS converts it
    for spec, select in (("nodes=2:ppn=4:cl_zewura+1:ppn=2", "2:ncpus=4+1:ncpus=2"),
                         ("nodes=n12:ppn=8:gpus=1", "1:ncpus=8"), ("nodes=3", "3:ncpus=1")):
        (job,), _ = read(write(tmp_path, "meta3.swf", swf_line(extra=spec)))
        assert job.select == select, spec
    with pytest.raises(TraceError, match=r":\d+: select .*ppn=0 is not a number of cpus"):
        read(write(tmp_path, "meta4.swf", swf_line(extra="nodes=2:ppn=0")))
    line = swf_line(extra="1:ncpus=2:mem=1gb+2:ncpus=1")
    (job,), _ = read(write(tmp_path, "meta2.swf", line))
    assert job.select == "1:ncpus=2:mem=1gb+2:ncpus=1"


def test_swf_gz_and_iterating_twice(tmp_path):
    path = tmp_path / "t.swf.gz"
    with gzip.open(path, "wt") as f:
        f.write(SWF_HEADER + swf_line(job=1) + swf_line(job=5, submit=3))
    trace = open_trace(path)
    assert [j.job_id for j in trace] == ["1", "5"]
    assert [j.job_id for j in trace] == ["1", "5"]
    assert trace.info.max_procs == 400


def test_swf_error_names_file_line_and_field(tmp_path):
    path = write(tmp_path, "t.swf", SWF_HEADER + swf_line() + swf_line(job=2, run="x12"))
    with pytest.raises(TraceError) as err:
        list(open_trace(path))
    msg = str(err.value)
    assert str(path) in msg and ":13:" in msg and "run time (field 4)" in msg and "x12" in msg
    assert err.value.line == 13 and isinstance(err.value, ValueError)


@pytest.mark.parametrize("line, field", [
    ("1 2 3\n", "fields"),
    (swf_line(submit=-5), "submit time"),
    (swf_line(wait=-7), "wait time"),
    (swf_line(run="nan"), "run time"),
    (swf_line(req_time="inf"), "requested time"),
    (swf_line(alloc=10**30), "allocated processors"),
    (swf_line(status=9), "status"),
    (swf_line(job=-3), "job number"),
    (swf_line(submit="1e300"), "submit time"),
])
def test_swf_malformed_lines(tmp_path, line, field):
    path = write(tmp_path, "t.swf", line)
    with pytest.raises(TraceError, match=field):
        list(open_trace(path))


def test_swf_line_back_in_time_is_bad_and_skip_bad_counts_it(tmp_path):
    text = swf_line(job=1, submit=100) + swf_line(job=2, submit=50) + swf_line(job=3, submit=120)
    path = write(tmp_path, "t.swf", text)
    with pytest.raises(TraceError, match="goes back in time"):
        list(open_trace(path))
    jobs, trace = read(path, skip_bad=True)
    assert [j.job_id for j in jobs] == ["1", "3"]
    assert trace.skipped == 1 and ":2:" in trace.skip_reasons[0]
    assert "skipped 1 bad lines" in trace.summary()


def test_skip_bad_keeps_the_first_reasons_and_the_exact_count(tmp_path):
    text = swf_line() + "garbage\n" * 20 + swf_line(job=2, submit=5)
    jobs, trace = read(write(tmp_path, "t.swf", text), skip_bad=True)
    assert len(jobs) == 2 and trace.skipped == 20 and len(trace.skip_reasons) == 5


def test_swf_header_bad_value(tmp_path):
    path = write(tmp_path, "t.swf", "; MaxProcs: lots\n" + swf_line())
    with pytest.raises(TraceError, match=r"t.swf:1: header MaxProcs: 'lots'"):
        open_trace(path)
    path = write(tmp_path, "t.swf", "; Note: x\n; MaxNodes: 0\n" + swf_line())
    with pytest.raises(TraceError, match=r"t.swf:2: header MaxNodes: 0 is out of range"):
        open_trace(path)
    assert open_trace(write(tmp_path, "t.swf", "; MaxNodes: -1\n")).info.max_nodes is None


def test_truncated_gzip_is_a_trace_error(tmp_path):
    data = gzip.compress((swf_line() * 5000).encode())
    path = write(tmp_path, "t.swf.gz", data[: len(data) // 2])
    with pytest.raises(TraceError, match="cannot read"):
        list(open_trace(path))


def test_corrupted_gzip_is_a_trace_error_in_every_reader(tmp_path):
    """Bytes overwritten inside the deflate stream raise zlib.error, which is no OSError:
    it is a one-line TraceError too, when reading the header, detecting the format or
    reading jobs."""
    data = bytearray(gzip.compress("".join(swf_line(job=i, submit=i) for i in range(1, 5000))
                                   .encode()))
    data[100:108] = b"\xff" * 8
    swf = write(tmp_path, "c.swf.gz", bytes(data))
    with pytest.raises(TraceError, match=r"c.swf.gz: cannot read its first line: .*"
                                         r"decompressing"):
        list(open_trace(swf))
    log = write(tmp_path, "c.log.gz", bytes(data))
    with pytest.raises(TraceError, match="c.log.gz: cannot read"):
        open_trace(log)  # detection
    for fmt in ("sacct", "pbs"):
        with pytest.raises(TraceError, match="c.log.gz: cannot read"):
            list(open_trace(log, fmt=fmt))


def test_an_over_long_line_is_a_bad_line_never_built(tmp_path):
    """A line over MAX_LINE characters is bad (named by file and line, counted with
    skip_bad, the lines after it read as usual), and it is never built whole: a gzip bomb
    of one 40 MB line without an end is read in constant memory."""
    import tracemalloc

    from pbsplug.sim.traces import MAX_LINE

    huge = "1" * (MAX_LINE + 10)
    path = write(tmp_path, "t.swf", swf_line(job=1) + huge + "\n" + swf_line(job=3, submit=5))
    with pytest.raises(TraceError, match=r"t.swf:2: line: longer than 1,048,576 characters"):
        list(open_trace(path))
    jobs, trace = read(path, skip_bad=True)
    assert [(j.job_id, j.line) for j in jobs] == [("1", 1), ("3", 3)]
    assert trace.skipped == 1
    pbs = write(tmp_path, "acct", PBS_E + "x" * (MAX_LINE + 1) + "\n" + PBS_E)
    jobs, trace = read(pbs, fmt="pbs", skip_bad=True)
    assert (len(jobs), trace.skipped) == (2, 1)
    sacct = write(tmp_path, "s", SACCT_HEAD + "\n" + "|" * (MAX_LINE + 1) + "\n")
    jobs, trace = read(sacct, skip_bad=True)
    assert (len(jobs), trace.skipped) == (0, 1)
    with pytest.raises(TraceError, match=r"s2:1: header: longer than"):
        list(open_trace(write(tmp_path, "s2", "JobID|" * MAX_LINE), fmt="sacct"))
    with pytest.raises(TraceError, match=r"zeros:1: line: longer than .*not a trace"):
        open_trace(write(tmp_path, "zeros", b"\0" * (MAX_LINE + 1)))  # detection
    bomb = write(tmp_path, "bomb.swf.gz", gzip.compress(b"; MaxNodes: 2\n" + b"0" * 40_000_000))
    tracemalloc.start()
    try:
        jobs, trace = read(bomb, skip_bad=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (jobs, trace.skipped, trace.info.max_nodes) == ([], 1, 2)
    assert peak < 8 * MAX_LINE  # a few copies of the capped line at most, not 40 MB
    with pytest.raises(TraceError, match=r"bomb.swf.gz:2: line: longer than"):
        list(open_trace(bomb))


def test_open_trace_errors(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        open_trace(tmp_path / "missing.swf")
    with pytest.raises(TraceError, match="unknown trace format 'csv'"):
        open_trace(write(tmp_path, "a.swf", swf_line()), fmt="csv")
    with pytest.raises(TraceError, match="not a trace"):
        open_trace(write(tmp_path, "a.txt", "hello world\n"))
    with pytest.raises(TraceError, match="not a trace"):
        open_trace(write(tmp_path, "empty", ""))


def test_detection_by_content(tmp_path):
    assert open_trace(write(tmp_path, "log", swf_line())).info.format == "swf"
    assert open_trace(write(tmp_path, "s", SACCT_HEAD + "\n")).info.format == "sacct"
    assert open_trace(write(tmp_path, "20261120", PBS_E)).info.format == "pbs"


# --- PBS accounting -------------------------------------------------------------------------

PBS_E = ("11/20/2026 10:30:00;E;12.srv;user=alice group=users queue=workq qtime=1000 "
         "start=1100 end=1700 Resource_List.select=2:ncpus=4:mem=2gb+1:ncpus=2 "
         "Resource_List.nodect=3 Resource_List.walltime=01:00:00 Resource_List.mem=10gb "
         'jobname="my job" Exit_status=0\n')


def test_pbs_records_from_a_directory_sorted_by_submit(tmp_path):
    acct = tmp_path / "accounting"
    acct.mkdir()
    (acct / "20261120").write_text(
        "11/20/2026 10:00:00;Q;12.srv;queue=workq\n" + PBS_E
        + "11/20/2026 10:40:00;E;13.srv;user=bob group=g queue=q qtime=900 start=950 "
          "end=2000 Resource_List.ncpus=8 Resource_List.walltime=600 Exit_status=271\n")
    (acct / "20261121").write_text(
        "11/21/2026 00:00:01;E;14.srv;user=bob queue=q qtime=1050 end=1060 Exit_status=-1\n"
        "11/21/2026 00:00:02;E;15.srv;user=carol queue=q ctime=1200 start=1300 end=1301\n")
    jobs, trace = read(acct)
    assert trace.info.format == "pbs" and trace.info.unix_start_time == 900
    assert [j.job_id for j in jobs] == ["13.srv", "12.srv", "15.srv"]
    b, a, c = jobs
    assert (a.submit, a.run_time, a.ncpus, a.nodes, a.walltime) == (100.0, 600.0, 10, 3, 3600.0)
    assert (a.mem, a.queue, a.user, a.status, a.recorded_wait) == (10 << 30, "workq",
                                                                     "alice", 1, 100.0)
    assert a.select == "2:ncpus=4:mem=2gb+1:ncpus=2" and a.line == 2
    assert (b.submit, b.ncpus, b.walltime, b.status) == (0.0, 8, 600.0, 0)
    assert (c.submit, c.ncpus, c.status) == (300.0, 1, -1)     # ctime when no qtime
    assert trace.dropped == {"never started (E record without start)": 1}


def test_a_selects_cpus_are_the_jobs_whatever_the_other_fields_say(tmp_path):
    """A job runs with its select, so its ncpus (utilization, out_jobs.csv's metadata) is
    the select's sum: extended SWF's field 8 and a PBS record's Resource_List.ncpus said
    otherwise and were taken, so a job running on 4 cpus counted 1."""
    swf = write(tmp_path, "x.swf", "1 0 -1 100 1 -1 -1 1 200 -1 1 1 1 -1 1 -1 -1 -1 "
                                   "nodes=2:ppn=2\n"
                                   "2 0 -1 100 8 -1 -1 8 200 2 1 1 1 -1 1 -1 -1 -1 "
                                   "1:ncpus=2+1:mem=1gb\n")
    (a, b), _ = read(swf)
    assert (a.select, a.ncpus, b.ncpus) == ("2:ncpus=2", 4, 3)
    assert b.mem == 2 * 1024 * 8  # field 10 is per processor of field 8
    acct = write(tmp_path, "acct", "11/20/2026 10:30:00;E;1.srv;qtime=10 start=15 end=20 "
                                   "Resource_List.ncpus=1 Resource_List.select=2:ncpus=2\n")
    (job,), _ = read(acct, fmt="pbs")
    assert job.ncpus == 4


def test_sacct_a_zero_request_falls_back_to_the_allocation(tmp_path):
    """ReqCPUS=0 gave 1 cpu (`or 1`) instead of NCPUS, as the docs say it should."""
    head = "JobID|Submit|Start|End|ReqCPUS|NCPUS|ReqNodes|NNodes"
    row = "7|2024-01-31T10:00:00|2024-01-31T10:05:00|2024-01-31T11:05:00|{}\n"
    (job,), _ = read(write(tmp_path, "s", head + "\n" + row.format("0|16|0|2")))
    assert (job.ncpus, job.nodes) == (16, 2)
    (job,), _ = read(write(tmp_path, "s", head + "\n" + row.format("0|0|0|0")))
    assert (job.ncpus, job.nodes) == (1, None)


def test_a_byte_order_mark_opening_a_trace_is_taken_off(tmp_path):
    """An sacct file saved with a UTF-8 BOM was "not a trace", or, given --format sacct,
    lacked "the fields JobID"; SWF and PBS files with one are read as well."""
    bom = b"\xef\xbb\xbf"
    sacct = write(tmp_path, "s", bom + (SACCT_HEAD + "\n" + sacct_row()).encode())
    for fmt in (None, "sacct"):
        jobs, trace = read(sacct, fmt=fmt)
        assert (trace.info.format, [j.job_id for j in jobs]) == ("sacct", ["100"])
    swf = write(tmp_path, "t", bom + (SWF_HEADER + swf_line()).encode())
    jobs, trace = read(swf)
    assert (trace.info.format, len(jobs), trace.info.max_nodes) == ("swf", 1, 100)
    assert "Version: 2.2" in trace.info.notes  # (the first header line, after the mark)
    jobs, trace = read(write(tmp_path, "acct", bom + PBS_E.encode()))
    assert (trace.info.format, len(jobs)) == ("pbs", 1)


def test_a_byte_order_mark_never_cuts_an_over_long_first_line_in_two(tmp_path):
    """The mark was taken off before the line's length was measured: a first line one
    character too long came in as two lines, its cut-off end read as a job."""
    from pbsplug.sim.traces import MAX_LINE

    line = "\ufeff;" + "x" * (MAX_LINE - 1)  # MAX_LINE + 1 with its mark
    swf = write(tmp_path, "t.swf", (line + "\n" + swf_line()).encode())
    with pytest.raises(TraceError, match=r"t.swf:1: line: longer than 1,048,576 characters"):
        list(open_trace(swf))


def test_python_number_syntax_and_other_scripts_digits_are_not_numbers(tmp_path):
    """int() and float() read `1_00` as 100 and `٣` as 3; no trace writes either."""
    bad_swf = {"1 0 -1 1_00 1 -1 -1 1 200 -1 1 1 1 -1 1 -1 -1 -1": r"run time \(field 4\): "
               "'1_00' is not a number",
               "1 0 -1 100 1 -1 -1 1_0 200 -1 1 1 1 -1 1 -1 -1 -1": r"requested processors "
               r"\(field 8\): '1_0' is not a whole number"}
    for line, message in bad_swf.items():
        with pytest.raises(TraceError, match=r"t.swf:1: " + message):
            list(open_trace(write(tmp_path, "t.swf", line + "\n")))
    with pytest.raises(TraceError, match=r"t.swf:1: header MaxNodes: '1_0' is not a whole"):
        open_trace(write(tmp_path, "t.swf", "; MaxNodes: 1_0\n"))
    (job,), _ = read(write(tmp_path, "t.swf", swf_line(queue="q_1")))  # a name may have _
    assert job.queue == "q_1"
    pbs = "11/20/2026 10:30:00;E;1.srv;qtime=10 start=15 end=20 "
    for body, field in (("Resource_List.ncpus=\u0663", "Resource_List.ncpus"),
                        ("Resource_List.walltime=\u0660\u0661:\u0660\u0660:\u0660\u0660",
                         "Resource_List.walltime"),
                        ("Resource_List.mem=\u0663gb", "Resource_List.mem"),
                        ("Resource_List.select=\u0663:ncpus=1", "Resource_List.select"),
                        ("Resource_List.select=1:ncpus=\u0663", "Resource_List.select"),
                        ("Exit_status=\u0660", "Exit_status"), ("qtime=1_0", "qtime")):
        with pytest.raises(TraceError, match=f"acct:1: {field}: "):
            list(open_trace(write(tmp_path, "acct", pbs + body + "\n"), fmt="pbs"))
    for row, field in ((sacct_row(ncpus="\u0663"), "ReqCPUS"),
                       (sacct_row(submit="\u0661\u0662"), "Submit"),
                       (sacct_row(limit="\u0661-00:00:00"), "Timelimit"),
                       (sacct_row(mem="\u0663G"), "ReqMem")):
        with pytest.raises(TraceError, match=f"s:2: {field}: "):
            list(open_trace(write(tmp_path, "s", SACCT_HEAD + "\n" + row)))


@pytest.mark.parametrize("body, field", [
    ("qtime=10 start=5 end=20", "start"),
    ("qtime=10 start=15 end=12", "end"),
    ("start=15 end=20", "qtime"),
    ("qtime=10 start=15", "end"),
    ("qtime=x start=15 end=20", "qtime"),
    ("qtime=10 start=15 end=20 Resource_List.walltime=1:2:3:4", "Resource_List.walltime"),
    ("qtime=10 start=15 end=20 Resource_List.walltime=999999999:00:00",
     "Resource_List.walltime: .* is out of range"),
    ("qtime=10 start=15 end=20 Resource_List.walltime=999999999999999999:00:00",
     "Resource_List.walltime: duration .* is over 9223372036854775807 seconds"),
    ("qtime=10 start=15 end=20 Resource_List.mem=lots", "Resource_List.mem"),
    ("qtime=10 start=15 end=20 Resource_List.select=2:ncpus=x", "Resource_List.select"),
    ("qtime=10 start=15 end=20 Resource_List.ncpus=0", "Resource_List.ncpus"),
    # (over the count limit: the select's fault, named as such, not Resource_List.ncpus's)
    ("qtime=10 start=15 end=20 Resource_List.select=2147483647:ncpus=2",
     r"Resource_List.select: 2147483647:ncpus=2 asks 4294967294 cpus in all"),
    ("qtime=10 start=15 end=20 Resource_List.select=1:ncpus=0", r"Resource_List.select: .*"
     "asks 0 cpus"),
    ("qtime=10 start=15 end=20 Exit_status=oops", "Exit_status"),
])
def test_pbs_malformed_records(tmp_path, body, field):
    path = write(tmp_path, "acct", f"11/20/2026 10:30:00;E;1.srv;{body}\n")
    with pytest.raises(TraceError, match=field) as err:
        list(open_trace(path, fmt="pbs"))
    assert ":1:" in str(err.value)


def test_pbs_record_that_is_not_a_record(tmp_path):
    path = write(tmp_path, "acct", PBS_E + "this is not a record\n")
    with pytest.raises(TraceError, match=r"acct:2: record"):
        list(open_trace(path, fmt="pbs"))
    jobs, trace = read(path, fmt="pbs", skip_bad=True)
    assert len(jobs) == 1 and trace.skipped == 1


def test_pbs_empty_directory(tmp_path):
    (tmp_path / "acct").mkdir()
    with pytest.raises(TraceError, match="no accounting files"):
        open_trace(tmp_path / "acct")


# --- sacct ----------------------------------------------------------------------------------

SACCT_HEAD = ("JobID|Submit|Start|End|Elapsed|Timelimit|NCPUS|ReqCPUS|NNodes|ReqNodes|ReqMem|"
              "User|Group|Partition|State")


def sacct_row(job="100", submit="2024-01-31T10:00:00", start="2024-01-31T10:05:00",
              end="2024-01-31T11:05:00", limit="1-00:00:00", ncpus="8", nodes="1",
              mem="4000M", state="COMPLETED", partition="batch") -> str:
    return "|".join([job, submit, start, end, "01:00:00", limit, ncpus, ncpus, nodes, nodes,
                     mem, "alice", "users", partition, state]) + "\n"


def test_sacct_jobs_steps_and_time_formats(tmp_path):
    text = (SACCT_HEAD + "\n" + sacct_row()
            + sacct_row(job="100.batch") + sacct_row(job="100.extern")
            + sacct_row(job="99", submit="2024-01-31T09:00:00", start="2024-01-31T09:00:10",
                        end="2024-01-31T09:30:10", limit="UNLIMITED", ncpus="16", nodes="2",
                        mem="2Gn", state="CANCELLED by 0")
            + sacct_row(job="101", limit="30:00", mem="1Gc", ncpus="2")
            + sacct_row(job="102", limit="Partition_Limit", mem="")
            + sacct_row(job="103", limit="45", start="Unknown", end="Unknown", state="PENDING")
            + sacct_row(job="104", limit="2-12", end="Unknown", state="RUNNING")
            + sacct_row(job="105_3", limit="01:02:03", state="TIMEOUT"))
    jobs, trace = read(write(tmp_path, "sacct.txt", text))
    by_id = {j.job_id: j for j in jobs}
    assert [j.job_id for j in jobs] == ["99", "100", "101", "102", "105_3"]
    assert trace.info.unix_start_time == 1706691600
    j99, j100 = by_id["99"], by_id["100"]
    assert (j99.submit, j99.run_time, j99.recorded_wait, j99.walltime) == (0.0, 1800.0, 10.0,
                                                                           None)
    assert (j99.ncpus, j99.nodes, j99.mem, j99.status) == (16, 2, 2 * 2 * (1 << 30), 5)
    assert (j100.submit, j100.walltime, j100.mem, j100.queue) == (3600.0, 86400.0,
                                                                  4000 << 20, "batch")
    assert by_id["101"].walltime == 1800.0 and by_id["101"].mem == 2 << 30
    assert by_id["102"].walltime is None and by_id["102"].mem is None
    assert by_id["105_3"].walltime == 3723.0 and by_id["105_3"].status == 0
    assert trace.dropped == {"never started (no Start)": 1, "not finished (no End)": 1}


@pytest.mark.parametrize("row, field", [
    (sacct_row(limit="1:2:3:4"), "Timelimit"),
    (sacct_row(submit="yesterday"), "Submit"),
    (sacct_row(end="2024-01-31T10:00:00"), "End"),
    (sacct_row(ncpus="-4"), "ReqCPUS"),
    (sacct_row(mem="4 GB"), "ReqMem"),
    (sacct_row(mem="9" * 320 + "G"), "ReqMem: .* is out of range"),
    ("1|2|3\n", "fields"),
    # Dates no sacct prints (Slurm's times run from 1970; 2^32 - 2 on are its markers of
    # no time): year 1 was read as a date 62 billion seconds before the epoch.
    (sacct_row(submit="0001-01-01T00:00:00"), "Submit: '0001-01-01T00:00:00' is out of range"),
    (sacct_row(start="1969-12-31T23:59:59"), "Start: .* is out of range: sacct prints dates "
                                             "from 1970"),
    (sacct_row(end="2106-02-07T06:28:14"), "End: .* is out of range"),
    (sacct_row(end="9999-12-31T23:59:59"), "End: .* is out of range"),
    (sacct_row(submit="4294967294"), "Submit: '4294967294' is out of range"),
    (sacct_row(submit="0001-01-01T01:00:00+01:00"), "Submit: .* is out of range"),
])
def test_sacct_malformed_rows(tmp_path, row, field):
    path = write(tmp_path, "s.txt", SACCT_HEAD + "\n" + row)
    with pytest.raises(TraceError, match=field) as err:
        list(open_trace(path, fmt="sacct"))
    assert "s.txt:2:" in str(err.value)


def test_sacct_dates_at_the_ends_of_slurms_range_are_read(tmp_path):
    """The first second of 1970 and the last before Slurm's markers of no time (2^32 - 3:
    2106-02-07T06:28:13 UTC), as dates and as epoch seconds."""
    text = (SACCT_HEAD + "\n"
            + sacct_row(job="1", submit="1970-01-01T00:00:00", start="1970-01-01T00:00:10",
                        end="2106-02-07T06:28:13")
            + sacct_row(job="2", submit="0", start="10", end=str(2**32 - 3)))
    jobs, _ = read(write(tmp_path, "s.txt", text))
    assert [(j.job_id, j.submit, j.recorded_wait, j.run_time) for j in jobs] == [
        ("1", 0.0, 10.0, 2**32 - 13.0), ("2", 0.0, 10.0, 2**32 - 13.0)]


def test_sacct_header_without_the_needed_fields(tmp_path):
    path = write(tmp_path, "s.txt", "JobID|User\n1|bob\n")
    with pytest.raises(TraceError, match="Submit, Start, End"):
        list(open_trace(path, fmt="sacct"))
    path = write(tmp_path, "s2.txt", "JobID|Submit|Start|End|JobID\n"
                 "1|2024-01-01T00:00:00|2024-01-01T00:00:10|2024-01-01T00:10:00|2\n")
    with pytest.raises(TraceError, match=":1: header: the field JobID is named twice"):
        list(open_trace(path, fmt="sacct"))


# --- fuzz -----------------------------------------------------------------------------------

NASTY = ["", "-1", "-5", "nan", "NaN", "inf", "-inf", "1e308", "9" * 5000, "0x10", "1_0",
         "\xff\xfe", "١٢", "0.5", "-0", "2:3", "=", '"', "|", ";", "\x00", "é"]


def mutate(rng: random.Random, line: str, sep: str) -> bytes:
    kind = rng.randrange(7)
    data = line.encode()
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))) + b"\n"
    if kind == 1:
        return data[: rng.randrange(len(data))] + b"\n"
    fields = line.rstrip("\n").split(sep) if sep != " " else line.split()
    if kind == 2 and fields:
        del fields[rng.randrange(len(fields))]
    elif kind == 3:
        fields.insert(rng.randrange(len(fields) + 1), rng.choice(NASTY))
    elif kind == 4 and fields:
        pos = rng.randrange(len(fields))
        if sep == ";":
            head, *pairs = fields[3].split(" ") if len(fields) > 3 else ("",)
            fields[3] = " ".join([head, *pairs, f"{rng.choice(KEYS)}={rng.choice(NASTY)}"])
        else:
            fields[pos] = rng.choice(NASTY)
    elif kind == 5:
        for _ in range(3):
            if fields:
                fields[rng.randrange(len(fields))] = rng.choice(NASTY)
    else:
        pos = rng.randrange(len(data))
        return data[:pos] + bytes([rng.randrange(256)]) + data[pos + 1:]
    return (sep.join(fields) + "\n").encode("utf-8", "surrogateescape")


KEYS = ["qtime", "start", "end", "ctime", "Resource_List.ncpus", "Resource_List.select",
        "Resource_List.walltime", "Resource_List.mem", "Resource_List.nodect", "Exit_status"]


def check_job(job: TraceJob) -> None:
    assert isinstance(job, TraceJob)
    assert math.isfinite(job.submit) and job.submit >= 0
    assert math.isfinite(job.run_time) and job.run_time >= 0
    assert isinstance(job.ncpus, int) and job.ncpus >= 1
    assert job.walltime is None or (math.isfinite(job.walltime) and job.walltime >= 0)
    assert job.mem is None or job.mem >= 0
    assert isinstance(job.job_id, str) and job.job_id


@pytest.mark.parametrize("fmt, head, seed_lines, sep", [
    ("swf", SWF_HEADER, [swf_line(), swf_line(job=2, submit=9, req_procs=-1, req_time=-1)],
     " "),
    ("pbs", "", [PBS_E], ";"),
    ("sacct", SACCT_HEAD + "\n", [sacct_row(), sacct_row(job="7", limit="UNLIMITED",
                                                         mem="2Gn")], "|"),
])
def test_fuzzed_lines_give_a_job_or_a_trace_error(tmp_path, fmt, head, seed_lines, sep):
    rng = random.Random(20)
    outcomes = {"job": 0, "error": 0}
    for case in range(400):
        body = b"".join(mutate(rng, rng.choice(seed_lines), sep)
                        for _ in range(rng.randrange(1, 4)))
        path = tmp_path / f"{fmt}{case}"
        path.write_bytes(head.encode() + body)
        for skip_bad in (False, True):
            try:
                for job in open_trace(path, fmt=fmt, skip_bad=skip_bad):
                    check_job(job)
                    outcomes["job"] += 1
            except TraceError as exc:
                assert str(path) in str(exc)
                outcomes["error"] += 1
    assert outcomes["job"] > 50 and outcomes["error"] > 50, outcomes  # both paths exercised


def test_fuzzed_whole_files_with_detection(tmp_path):
    rng = random.Random(7)
    for case in range(200):
        path = tmp_path / f"blob{case}"
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))))
        try:
            for job in open_trace(path, skip_bad=rng.random() < 0.5):
                check_job(job)
        except TraceError:
            pass


# --- the real traces ------------------------------------------------------------------------

def records_in_header(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("; MaxRecords:"):
            return int(line.split(":")[1])
    raise AssertionError(f"no MaxRecords in {path}")


@pytest.mark.parametrize("name", ["KTH-SP2-1996-2.1-cln", "RICC-2010-2"])
def test_real_traces_read_whole(name):
    needs_traces()
    trace = open_trace(TRACES / f"{name}.swf.gz")
    count, last, procs = 0, 0.0, trace.info.max_procs
    for job in trace:
        count += 1
        assert job.submit >= last and 1 <= job.ncpus <= procs
        last = job.submit
    # Every record of the header is a job, or dropped with a reason (KTH has one job with
    # neither allocated nor requested processors: AccaSim's 28,475 jobs).
    assert count + sum(trace.dropped.values()) == records_in_header(
        TRACES / f"{name}.header.txt")
    assert trace.skipped == 0
    if name.startswith("KTH"):
        assert (count, trace.info.max_nodes, procs) == (28475, 100, 100)
        assert trace.dropped == {"no processor count (fields 5 and 8 unknown)": 1}
    else:
        assert (count, trace.info.max_nodes, procs) == (447794, 1024, 8192)
        assert trace.info.time_zone == "Asia/Tokyo"


def test_fuzzed_swf_headers(tmp_path):
    rng = random.Random(3)
    header_lines = SWF_HEADER.splitlines(keepends=True)
    for case in range(200):
        lines = list(header_lines)
        pos = rng.randrange(len(lines))
        key = lines[pos].split(":")[0]
        lines[pos] = f"{key}: {rng.choice(NASTY)}\n" if rng.random() < 0.7 else \
            mutate(rng, lines[pos], " ").decode("latin-1")
        path = tmp_path / f"h{case}.swf"
        path.write_bytes("".join(lines).encode("utf-8", "surrogateescape") + swf_line().encode())
        try:
            trace = open_trace(path)
            for job in trace:
                check_job(job)
            assert trace.info.max_procs is None or trace.info.max_procs >= 1
        except TraceError as exc:
            assert str(path) in str(exc)


def test_an_arrays_own_e_record_is_not_a_job(tmp_path):
    """OpenPBS 23.06 writes an E for an array itself (``12[].srv``, from its first subjob's
    start to its end) beside its subjobs' own: replayed, its cpus would be counted twice."""
    acct = tmp_path / "accounting"
    acct.mkdir()
    head = "user=u group=g queue=q qtime=100 Resource_List.ncpus=1 Resource_List.select=1:ncpus=1"
    (acct / "20261206").write_text(
        f"12/06/2026 03:44:04;E;12[1].srv;{head} start=100 end=102 Exit_status=3 run_count=1\n"
        f"12/06/2026 03:44:11;E;12[2].srv;{head} start=102 end=109 Exit_status=0 run_count=1\n"
        f"12/06/2026 03:44:11;E;12[].srv;{head} start=100 session=0 end=109 Exit_status=0 "
        "run_count=0\n")
    jobs, trace = read(acct)
    assert [j.job_id for j in jobs] == ["12[1].srv", "12[2].srv"]
    assert trace.dropped == {"an array's own record (its subjobs' are replayed)": 1}


# --- numbers past what int() reads ----------------------------------------------------------

HUGE = "9" * 5000  # (int() refuses 4300 digits and more, in Python's words)
ZEROS = "0" * 5000 + "7"  # (leading zeros count toward int()'s 4300 too)
_SWF_HUGE = [" ".join(HUGE if i == n else f for i, f in enumerate(swf_line().split())) + "\n"
             for n in range(18)]
_PBS_HUGE = [(key, value) for key in KEYS for value in (HUGE, f"{HUGE}:00", f"{HUGE}gb",
                                                         f"{HUGE}:ncpus=1", f"1:ncpus={HUGE}")]
_SACCT_ROW = dict(zip(SACCT_HEAD.split("|"), sacct_row().rstrip("\n").split("|"), strict=True))
_SACCT_HUGE = [{**_SACCT_ROW, key: value} for key in SACCT_HEAD.split("|")[1:11]
               for value in (HUGE, f"{HUGE}M", f"1-{HUGE}")]


@pytest.mark.parametrize("fmt, text", [
    *[("swf", SWF_HEADER + line) for line in _SWF_HUGE],
    *[("swf", SWF_HEADER.replace(f"{key}: {was}", f"{key}: {HUGE}") + swf_line())
      for key, was in (("MaxNodes", 100), ("MaxProcs", 400), ("UnixStartTime", 843480031))],
    *[("swf", SWF_HEADER + swf_line(extra=extra)) for extra in (
        f"nodes={HUGE}", f"nodes=1:ppn={HUGE}", f"nodes={HUGE}:ppn=2", "nodes=\u00b2",
        f"nodes={ZEROS}", f"nodes=1:ppn={ZEROS}", f"1:ncpus={ZEROS}",
        "nodes=1:ppn=\u00b2", f"{HUGE}:ncpus=1", f"1:ncpus={HUGE}", f"1:mem={HUGE}gb")],
    *[("pbs", PBS_E.replace(" Exit_status=0", f" {key}={value} Exit_status=0")
       if key != "Exit_status" else PBS_E.replace("Exit_status=0", f"Exit_status={value}"))
      for key, value in _PBS_HUGE],
    *[("sacct", SACCT_HEAD + "\n" + "|".join(row.values()) + "\n") for row in _SACCT_HUGE],
])
def test_a_number_of_thousands_of_digits_is_a_trace_error_in_one_line(tmp_path, fmt, text):
    """Each numeric field of the three formats with 5,000 digits: a job read, or the
    file's one-line error, not Python's ValueError text."""
    path = write(tmp_path, f"huge.{fmt}", text)
    for skip_bad in (False, True):
        try:
            for job in open_trace(path, fmt=fmt, skip_bad=skip_bad):
                check_job(job)
        except TraceError as exc:
            message = str(exc)
            assert str(path) in message and "\n" not in message, message
            assert "Exceeds the limit" not in message and "4300" not in message, message
