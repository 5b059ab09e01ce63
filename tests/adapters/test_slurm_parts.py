"""The Slurm adapter's pieces that need no Slurm: scontrol's lines, hostlists, slurm.conf
merging, the plan, the bridge's answers to bad input, and the program as a process against a
worker that is not there."""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime
import json
import logging
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pbsplug import safedirs
from pbsplug.adapters import slurm, slurm_bridge, slurm_power, slurm_program
from pbsplug.adapters.slurm_read import (
    JobTextError,
    Slurm,
    SlurmError,
    UnnamedJobError,
    checked_job_id,
    compress_hostlist,
    duration,
    epoch,
    expand_hostlist,
    job_attributes,
    parse_line,
    vnode_attributes,
    vnode_state,
)
from pbsplug.plugins import load_plugins
from pbsplug.runner import Outcome
from pbsplug.siteconfig import load_site

from .conftest import resetting_socket
from .conftest import worker_client as worker_client_module

JOB = ("JobId=3 JobName=two words UserId=alice(1001) GroupId=users(100) Account=(null) "
       "JobState=RUNNING Reason=None Requeue=1 Restarts=2 TimeLimit=1-02:03:00 "
       "SubmitTime=2026-11-24T02:25:12 EligibleTime=2026-11-24T02:25:12 "
       "StartTime=2026-11-24T02:25:13 Partition=all NodeList=n[1-2] NumNodes=2 NumCPUs=3 "
       "JOB_GRES=(null)   Nodes=n1 CPU_IDs=0-1 Mem=0 GRES=   Nodes=n2 CPU_IDs=0 Mem=0 GRES= "
       "MinCPUsNode=1 MinMemoryNode=100M OverSubscribe=NO Comment=(null) WorkDir=/tmp/a b "
       "StdOut=/tmp/slurm-3.out")
NODE = ("NodeName=n1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=2 CPUTot=2 "
        "AvailableFeatures=(null) NodeHostName=vm OS=Linux 6.1 #1 SMP  RealMemory=1000 "
        "State=MIXED+DRAIN BootTime=2026-11-23T23:32:53 LastBusyTime=2026-11-24T02:24:13 "
        "Reason=broken fan [root@2026-11-24T02:30:00]")

#: Numbers int() cannot read (4300 digits and more; leading zeros count), and one it can
#: that no long holds.
HUGE_NUMBERS = {"4000 digits": "9" * 4000, "5000 digits": "9" * 5000,
                "zeros": "0" * 5000 + "1", "100,000 digits": "9" * 100_000}


def test_a_job_line_becomes_pbs_attributes():
    fields = parse_line(JOB)
    assert fields["JobName"] == "two words" and fields["WorkDir"] == "/tmp/a b"
    assert fields["_alloc"] == [{"Nodes": "n1", "CPU_IDs": "0-1", "Mem": "0", "GRES": ""},
                                {"Nodes": "n2", "CPU_IDs": "0", "Mem": "0", "GRES": ""}]
    job = job_attributes(fields)
    assert job["id"] == "3" and job["Job_Name"] == "two words"
    assert (job["euser"], job["egroup"], job["job_state"]) == ("alice", "users", "R")
    assert job["Resource_List"] == {"ncpus": 3, "nodect": 2, "walltime": "26:03:00",
                                    "mem": "200mb", "place": "scatter:excl"}
    assert job["exec_vnode"] == "(n1:ncpus=2)+(n2:ncpus=1)"
    assert job["run_count"] == 2 and job["Rerunable"] is True
    assert "Account_Name" not in job and "comment" not in job  # (null)


def test_what_a_jobs_free_text_could_forge_is_refused():
    """scontrol -o does not quote values: a comment (printed after the keys it imitates)
    or a job name (printed before them) holding Key= words reads as those keys. A key read
    twice, or both memory keys, make the reading a failed one (leaving them out would fail
    open); allocation lines outside the block between NodeList and MinCPUsNode are none."""
    assert job_attributes(parse_line(JOB.replace("Comment=(null)", "Comment=retry=3")))[
        "exec_vnode"] == "(n1:ncpus=2)+(n2:ncpus=1)"  # Key= words alone are harmless
    for old, new in (
            ("Comment=(null)", "Comment=hi UserId=bob(1002) NumCPUs=64"),
            ("Comment=(null)", "Comment=hi MinMemoryCPU=9G"),
            ("JobName=two words", "JobName=x NodeList=n9 Nodes=n9 CPU_IDs=0-63"),
            ("JobName=two words", "JobName=x MinCPUsNode=1")):
        with pytest.raises(SlurmError, match="appear more than once .* not read"):
            job_attributes(parse_line(JOB.replace(old, new)))
    fields = parse_line(JOB.replace("Comment=(null)", "Comment=Nodes=n1 CPU_IDs=0-63"))
    assert len(fields["_alloc"]) == 2  # a comment's Nodes= is no allocation line


def _scontrol_answering(folder: Path, answers: dict[str, str]) -> Slurm:
    """A Slurm whose scontrol answers ``show job <id>`` (its arguments, or the first line
    of its input as `Slurm.job_and_nodes` writes it) with ``answers[<id>]``."""
    for asked, text in answers.items():
        (folder / f"answer-{asked}").write_text(text)
    scontrol = folder / "scontrol"
    scontrol.write_text('#!/bin/sh\nif [ $# -gt 2 ]; then asked=${5:-$4}; else read -r _ _ asked; '
                        f'fi\ncat "{folder}/answer-$asked"\n')
    scontrol.chmod(0o755)
    return Slurm(bin_dir=str(folder), env=None)


def test_a_heterogeneous_jobs_part_0_and_an_arrays_last_task_are_read_alone(tmp_path):
    """22.05 answers ``scontrol show job 7`` for a heterogeneous job with each of its parts,
    one record each (``JobId=7 HetJobId=7 HetJobOffset=0 JobName=``, then ``JobId=8 ...``),
    and the id an array's last task to start keeps (the array's) with every task: that was
    taken for a job text with a line break, and PrologSlurmctld requeued every
    heterogeneous job, and that task of every array, held. Such a job is asked for alone
    (``7+0``, ``4_3``), whose record is its own; a job whose first record is no such job
    (the fields before JobName are Slurm's) is refused as before, whatever its name
    forges."""
    part0 = JOB.replace("JobId=3 JobName=", "JobId=7 HetJobId=7 HetJobOffset=0 JobName=")
    part1 = JOB.replace("JobId=3 JobName=", "JobId=8 HetJobId=7 HetJobOffset=1 JobName=")
    slurm_ = _scontrol_answering(tmp_path, {"7": f"{part0}\n{part1}\n", "7+0": part0 + "\n",
                                            "8": part1 + "\n"})
    assert slurm_.job("7")["id"] == "7"
    assert slurm_.job_and_nodes("7", [])[0]["id"] == "7"
    assert slurm_.job("8")["id"] == "8"
    # The id an array's last task to start keeps: 22.05 answers it with every task.
    task3 = JOB.replace("JobId=3 JobName=", "JobId=4 ArrayJobId=4 ArrayTaskId=3 JobName=")
    task1 = JOB.replace("JobId=3 JobName=", "JobId=5 ArrayJobId=4 ArrayTaskId=1 JobName=")
    pending = JOB.replace("JobId=3 JobName=", "JobId=4 ArrayJobId=4 ArrayTaskId=4-9 JobName=")
    slurm_ = _scontrol_answering(tmp_path, {"4": f"{task3}\n{task1}\n{pending}\n",
                                            "4_3": task3 + "\n"})
    assert slurm_.job("4")["id"] == "4"
    assert slurm_.job_and_nodes("4", [])[0]["id"] == "4"
    forged = JOB.replace("JobName=two words", "JobName=x\nJobId=3 HetJobId=3 HetJobOffset=0 "
                         "JobName=y")
    slurm_ = _scontrol_answering(tmp_path, {"3": forged + "\n", "3+0": JOB + "\n"})
    with pytest.raises(JobTextError):
        slurm_.job("3")
    with pytest.raises(JobTextError):
        slurm_.job_and_nodes("3", [])


def _noting_slurm(tmp_path, rest: str):
    """Stand-in scontrol and scancel in `tmp_path` that note each call in ``calls`` and then
    run the shell text `rest`; the calls file and a `Slurm` using them."""
    calls = tmp_path / "calls"
    for name in ("scontrol", "scancel"):
        (tmp_path / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n{rest}')
        (tmp_path / name).chmod(0o755)
    return calls, Slurm(bin_dir=str(tmp_path), env=None)


def test_a_hooks_stop_or_comment_of_an_arrays_last_task_acts_on_that_task_alone(tmp_path):
    """The task of an array that starts last keeps the array's id, and Slurm's scancel,
    ``scontrol requeue`` and ``update jobid=`` act on every task of the array by it (22.05):
    a hook's reject or delete of that task (``job 4``) stopped every task, and its comment
    went on all. They name it ``4_3`` now (``scontrol show job 4``'s first record is
    ``JobId=4 ArrayJobId=4 ArrayTaskId=3``); any other job keeps its id."""
    task3 = JOB.replace("JobId=3 JobName=", "JobId=4 ArrayJobId=4 ArrayTaskId=3 JobName=")
    task1 = JOB.replace("JobId=3 JobName=", "JobId=5 ArrayJobId=4 ArrayTaskId=1 JobName=")
    (tmp_path / "answer-4").write_text(f"{task3}\n{task1}\n")
    (tmp_path / "answer-5").write_text(task1 + "\n")
    (tmp_path / "answer-3").write_text(JOB + "\n")
    calls, slurm_ = _noting_slurm(
        tmp_path, f'[ "$2 $3" = "show job" ] && cat "{tmp_path}/answer-$4"\nexit 0\n')
    for job_id in ("4", "5", "3"):
        slurm_.cancel(job_id)
        slurm_.requeue(job_id)
        slurm_.requeue_hold(job_id)
        slurm_.update(f"jobid={job_id}", "comment=x y")
    acted = [line for line in calls.read_text().splitlines() if " show job " not in line]
    assert acted == [line for job_id in ("4_3", "5", "3") for line in (
        f"scancel {job_id}", f"scontrol requeue {job_id}", f"scontrol requeuehold {job_id}",
        f"scontrol update jobid={job_id} comment=x y")]


def test_a_task_of_an_array_with_a_limit_of_tasks_at_once_is_read_and_acted_on_alone(
        tmp_path):
    """An array with a limit of tasks running at once (``sbatch --array=1-3%3``): 22.05
    writes ``ArrayTaskThrottle=3`` between ``ArrayTaskId`` and ``JobName`` (seen on the
    real cluster), which the reading of the task that keeps the array's id did not
    expect: its read was refused as a forged line break (the task requeued held, its
    comment set on every task, ``requeuehold 1`` requeuing every task), a hook's delete
    was ``scancel 1`` (every task), and the periodic event had every such task one entry
    a node (``1/0``)."""
    throttled = " ArrayTaskThrottle=3 JobName="
    task3 = JOB.replace("JobId=3 JobName=", "JobId=1 ArrayJobId=1 ArrayTaskId=3" + throttled)
    task1 = JOB.replace("JobId=3 JobName=", "JobId=3 ArrayJobId=1 ArrayTaskId=1" + throttled)
    slurm_ = _scontrol_answering(tmp_path, {"1": f"{task3}\n{task1}\n", "1_3": task3 + "\n"})
    assert slurm_.job("1")["id"] == "1"
    assert slurm_.job_and_nodes("1", [])[0]["id"] == "1"
    assert slurm_.alone("1") == "1_3"
    record = _one_cpu_of_n4(6, 1).replace(
        "JobId=6 JobName=", "JobId=6 ArrayJobId=5 ArrayTaskId=1 ArrayTaskThrottle=2 JobName=")
    fake = _PowerSlurm(running="6|n4\n", detail=record)
    assert slurm_power.running_jobs(type("Ctx", (), {"slurm": fake})()) == {"n4": ["6/1"]}
    # the optional field is Slurm's place alone: a name cannot forge it in front of JobName
    forged = JOB.replace("JobName=two words", "JobName=x\nJobId=3 ArrayJobId=3 ArrayTaskId=2"
                         + throttled + "y")
    slurm_ = _scontrol_answering(tmp_path, {"3": forged + "\n", "3_2": JOB + "\n"})
    with pytest.raises(JobTextError):
        slurm_.job("3")


#: ``scontrol -o show job 1`` on 22.05 (the tests' real cluster, tests/adapters/
#: test_slurm_real.py) for ``sbatch --array=1-5%1`` with task 1 running as job 2: the tasks
#: not started yet come first, one pending record with the array's id.
LEFTOVER = (
    "JobId=1 ArrayJobId=1 ArrayTaskId=2-5%1 ArrayTaskThrottle=1 JobName=left UserId=root(0) "
    "GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 Account=(null) QOS=(null) "
    "JobState=PENDING Reason=JobArrayTaskLimit Dependency=(null) Requeue=1 Restarts=0 "
    "BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A "
    "SubmitTime=2026-12-07T19:01:06 EligibleTime=Unknown AccrueTime=Unknown StartTime=Unknown "
    "EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
    "LastSchedEval=2026-12-07T19:01:07 Scheduler=Backfill:* Partition=debug "
    "AllocNode:Sid=localhost:938 ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=1 "
    "NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=1000M,node=1,billing=1 "
    "Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 "
    "MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 "
    "Licenses=(null) Network=(null) Command=(null) WorkDir=/tmp/pbsplug-slurm StdErr=/dev/null "
    "StdIn=/dev/null StdOut=/dev/null Power= ")
LEFTOVER_TASK_1 = (
    "JobId=2 ArrayJobId=1 ArrayTaskId=1 ArrayTaskThrottle=1 JobName=left UserId=root(0) "
    "GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 Account=(null) QOS=(null) "
    "JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 "
    "ExitCode=0:0 RunTime=00:00:00 TimeLimit=365-00:00:00 TimeMin=N/A "
    "SubmitTime=2026-12-07T19:01:06 EligibleTime=2026-12-07T19:01:07 AccrueTime=Unknown "
    "StartTime=2026-12-07T19:01:07 EndTime=2027-12-07T19:01:07 Deadline=N/A SuspendTime=None "
    "SecsPreSuspend=0 LastSchedEval=2026-12-07T19:01:07 Scheduler=Backfill Partition=debug "
    "AllocNode:Sid=localhost:938 ReqNodeList=(null) ExcNodeList=(null) NodeList=n1 "
    "BatchHost=n1 NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* "
    "MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
    "OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) "
    "WorkDir=/tmp/pbsplug-slurm StdErr=/dev/null StdIn=/dev/null StdOut=/dev/null Power= ")


def test_an_arrays_tasks_not_started_yet_are_no_job_to_act_on(tmp_path):
    """The record 22.05 writes for an array's tasks not started yet (``ArrayTaskId=2-5%1``,
    the array's id) named the bare id in `Slurm.alone`, by which scancel, ``scontrol
    requeue`` and ``update jobid=`` act on every task of the array, the running ones too:
    no job any event is for, so no name to act by (`UnnamedJobError`, nothing run); the
    running task is acted on by its own id. Also when that record is the whole answer
    (no task started) and for a list of tasks."""
    answers = {"1": f"{LEFTOVER}\n{LEFTOVER_TASK_1}\n", "2": LEFTOVER_TASK_1 + "\n",
               "7": LEFTOVER.replace("JobId=1 ArrayJobId=1 ArrayTaskId=2-5%1 ArrayTaskThrottle=1 ",
                                     "JobId=7 ArrayJobId=7 ArrayTaskId=1,3,7-9 ") + "\n"}
    for asked, text in answers.items():
        (tmp_path / f"answer-{asked}").write_text(text)
    calls, slurm_ = _noting_slurm(
        tmp_path, f'[ "$2 $3" = "show job" ] && cat "{tmp_path}/answer-$4"\nexit 0\n')
    for job_id, tasks in (("1", r"1_\[2-5\]"), ("7", r"7_\[1,3,7-9\]")):
        for act in (slurm_.cancel, slurm_.requeue, slurm_.requeue_hold,
                    lambda j: slurm_.update(f"jobid={j}", "comment=x")):
            with pytest.raises(UnnamedJobError, match=rf"job {job_id}: not acted on: its id "
                               rf"names the tasks of its array not started yet \({tasks}\)"):
                act(job_id)
    assert all(" show job " in line for line in calls.read_text().splitlines())
    slurm_.cancel("2")
    assert calls.read_text().splitlines()[-1] == "scancel 2"
    ctx = type("Ctx", (), {"slurm": slurm_})()
    answer = slurm_bridge._held_for_its_text(ctx, "1", JobTextError("split"), "Prolog")
    assert answer["exit"] == 1 and "not started yet" in answer["error"], answer
    assert calls.read_text().splitlines()[-1] == "scontrol -o show job 1"


def test_the_ids_own_record_is_the_answers_first_or_nothing_is_acted_on(tmp_path):
    """`Slurm.alone` judges the id by the first record of ``scontrol show job <id>``, which
    22.05 writes first for an array's id (the tasks' records after it). An answer whose
    first record is another's (another order) is refused, not searched for a line claiming
    the id: such a line may be a job's own text (a line break in its name), and the bare
    id was taken for the array's tasks not started yet (``1_[2-5]``, by which scancel acts
    on every task, the running ones too)."""
    task3 = JOB.replace("JobId=3 JobName=", "JobId=4 ArrayJobId=4 ArrayTaskId=3 JobName=")
    task1 = JOB.replace("JobId=3 JobName=", "JobId=5 ArrayJobId=4 ArrayTaskId=1 JobName=")
    slurm_ = _scontrol_answering(tmp_path, {"1": f"{LEFTOVER}\n{LEFTOVER_TASK_1}\n",
                                            "4": f"{task3}\n{task1}\n", "4_3": task3 + "\n"})
    with pytest.raises(UnnamedJobError, match=r"job 1: not acted on: its id names the tasks "
                       r"of its array not started yet \(1_\[2-5\]\)"):
        slurm_.alone("1")
    assert slurm_.alone("4") == "4_3"
    assert slurm_.alone("4_3") == "4_3"  # (a task's name, as before 8b29e72)
    assert slurm_.job("4")["id"] == "4"
    assert slurm_.job_and_nodes("4", [])[0]["id"] == "4"
    # with Slurm's own record first, task 1's forged record of id 4 is not the id's
    forged = task1.replace("JobName=two words", "JobName=x\nJobId=4 ArrayJobId=4 "
                           "ArrayTaskId=5-9 JobName=y")
    slurm_ = _scontrol_answering(tmp_path, {"4": f"{task3}\n{forged}\n"})
    assert slurm_.alone("4") == "4_3"
    # in another order, nothing is acted on
    slurm_ = _scontrol_answering(tmp_path, {"1": f"{LEFTOVER_TASK_1}\n{LEFTOVER}\n",
                                            "4": f"{task1}\n{task3}\n"})
    for job_id in ("1", "4"):
        with pytest.raises(UnnamedJobError, match=f"job {job_id}: not acted on: the first "
                           "record of scontrol's answer is not its id's"):
            slurm_.alone(job_id)
    # an answer with no record at all names no job either (the bare id was taken)
    slurm_ = _scontrol_answering(tmp_path, {"9": ""})
    with pytest.raises(UnnamedJobError, match="job 9: not acted on: the first record "):
        slurm_.alone("9")


def test_a_forged_claim_to_the_id_after_another_jobs_record_is_not_acted_by(tmp_path):
    """The answer to ``show job 1`` holds no record of job 1 first, only a task of array 1
    (job 2) whose name forges ``JobId=1 HetJobId=999 HetJobOffset=0 JobName=``, or a plain
    ``JobId=1 JobName=``. The lone claim was taken for job 1's record (8b29e72): the forged
    ``HetJobId`` had root's adapter cancel job 999, another user's; the plain one gave the
    bare id back, by which Slurm acts on every task of array 1. Nothing is acted on now
    (the reviewer's reproducers, r3)."""
    for forgery, acted in (("JobId=1 HetJobId=999 HetJobOffset=0 JobName=y", "scancel 999"),
                           ("JobId=1 JobName=y", "scancel 1")):
        (tmp_path / "calls").unlink(missing_ok=True)
        forged = LEFTOVER_TASK_1.replace("JobName=left", f"JobName=x\n{forgery}")
        (tmp_path / "answer").write_text(forged + "\n")
        calls, slurm_ = _noting_slurm(tmp_path, f'cat "{tmp_path}/answer"\nexit 0\n')
        with pytest.raises(UnnamedJobError, match="job 1: not acted on: the first record"):
            slurm_.alone("1")
        with pytest.raises(UnnamedJobError):
            slurm_.cancel("1")
        assert acted not in calls.read_text()
        assert all(" show job " in line for line in calls.read_text().splitlines())


def test_a_hooks_stop_of_a_heterogeneous_jobs_part_acts_as_slurm_allows(tmp_path):
    """A heterogeneous job 7 of two parts (part 1 is job 8). Part 0 keeps the job's id, by
    which Slurm acts on every part; Slurm cancels a part after part 0 alone by
    ``<id>+<offset>``, cancels no part 0 alone (its cancel is the whole job's) and
    requeues a heterogeneous job only whole, by its id (a part's requeue is an error). A
    hook's delete of part 1 was ``scancel 8``, its requeue ``scontrol requeue 8``, and the
    comment for part 0 went on every part (``update jobid=7``). Now: part 1's delete
    cancels ``7+1``, any part's requeue (held or not) requeues ``7``, part 0's delete
    cancels ``7``, and each comment goes on its part alone (``7+0``, ``7+1``)."""
    part0 = JOB.replace("JobId=3 JobName=", "JobId=7 HetJobId=7 HetJobOffset=0 JobName=")
    part1 = JOB.replace("JobId=3 JobName=", "JobId=8 HetJobId=7 HetJobOffset=1 JobName=")
    (tmp_path / "answer-7").write_text(f"{part0}\n{part1}\n")
    (tmp_path / "answer-8").write_text(part1 + "\n")
    calls, slurm_ = _noting_slurm(
        tmp_path, f'[ "$2 $3" = "show job" ] && cat "{tmp_path}/answer-$4"\nexit 0\n')
    for job_id in ("7", "8"):
        slurm_.cancel(job_id)
        slurm_.requeue(job_id)
        slurm_.requeue_hold(job_id)
        slurm_.update(f"jobid={job_id}", "comment=x y")
    acted = [line for line in calls.read_text().splitlines() if " show job " not in line]
    assert acted == [
        "scancel 7", "scontrol requeue 7", "scontrol requeuehold 7",
        "scontrol update jobid=7+0 comment=x y",
        "scancel 7+1", "scontrol requeue 7", "scontrol requeuehold 7",
        "scontrol update jobid=7+1 comment=x y"]
    # a name's forged part is no part: the first record, Slurm's, is the job's own
    forged = JOB.replace("JobName=two words", "JobName=x\nJobId=3 HetJobId=2 HetJobOffset=1 "
                         "JobName=y")
    (tmp_path / "answer-3").write_text(forged + "\n")
    slurm_.cancel("3")
    slurm_.requeue("3")
    acted = [line for line in calls.read_text().splitlines() if " show job " not in line]
    assert acted[-2:] == ["scancel 3", "scontrol requeue 3"]


def test_a_stop_of_a_job_whose_own_name_was_not_read_fails_not_by_its_bare_id(
        tmp_path, caplog):
    """When the read that finds the name acting on a job alone (`Slurm.alone`) failed, the
    bare id was taken: for the task that keeps its array's id, ``scancel <id>`` and
    ``requeue <id>`` stop every task of the array, silently. The stop fails now, with a
    one-line error naming why, as a failed scancel does, and nothing is acted on (no
    cancel for a requeue that did not happen)."""
    calls, slurm_ = _noting_slurm(
        tmp_path, '[ "$2 $3" = "show job" ] && { echo "slurm_load_jobs error: Socket timed out"'
        ' >&2; exit 1; }\nexit 0\n')
    for act in (slurm_.cancel, slurm_.requeue, slurm_.requeue_hold,
                lambda j: slurm_.update(f"jobid={j}", "comment=x")):
        with pytest.raises(UnnamedJobError, match="job 4: not acted on: .*Socket timed out"):
            act("4")
    assert all(" show job " in line for line in calls.read_text().splitlines())
    ctx = type("Ctx", (), {"slurm": slurm_})()
    out = Outcome(event="execjob_begin", accepted=False, hook="h", kind="reject",
                  message="no", consequence="requeue")
    answer = slurm_bridge._host_failure(ctx, out, "4", "n1", "Prolog")
    assert answer["exit"] == 1
    assert answer["error"].startswith("pbsplug Prolog: job 4 could not be stopped: job 4: "
                                      "not acted on")
    assert "\n" not in answer["error"]
    answer = slurm_bridge._held_for_its_text(ctx, "4", JobTextError("split"), "Prolog")
    assert answer["exit"] == 1 and "not acted on" in answer["error"]
    assert all(" show job " in line for line in calls.read_text().splitlines())


def test_the_power_programs_name_array_tasks_and_heterogeneous_parts_by_their_own_ids():
    """squeue's ``%i`` (``5_1``, ``7+1``) named the jobs of the periodic event's vnode
    ``jobs`` and ``suspended_jobs``, ids no event has (each job event's ``job.id`` and
    exechost_periodic's job list are the task's or part's own: squeue's ``%A``)."""
    record = _one_cpu_of_n4(8, 1).replace("JobId=8 JobName=",
                                          "JobId=8 HetJobId=7 HetJobOffset=1 JobName=")
    fake = _PowerSlurm(running="8|n4\n", suspended="6|n3\n", detail=record)
    ctx = type("Ctx", (), {"slurm": fake})()
    assert slurm_power.running_jobs(ctx) == {"n4": ["8/1"]}
    assert slurm_power.suspended_jobs(ctx) == {"n3": ["6"]}
    assert ("squeue", "-h", "-a", "-t", "CF,R,CG,RS,SI,SO,ST", "-o", "%A|%N") in fake.asked
    assert ("squeue", "-h", "-a", "-t", "S", "-o", "%A|%N") in fake.asked


def test_a_job_name_of_thousands_of_forged_keys_makes_a_short_error():
    """The refusal named every key read twice: a job name of 20,000 forged pairs read
    twice (or one key of 100,000 letters) made an error line of hundreds of kilobytes in
    the Prolog's log. It names the first five, each cut short, and how many more."""
    long_key = "K" * 100_000
    forged = " ".join(f"A{i}=1 A{i}=2" for i in range(20_000))
    for name, first in ((f"x {forged} UserId=bob(1002)", "A0, A1, A10, A100, A1000 and "
                         "19,996 more keys"), (f"x {long_key}=1 {long_key}=2", "K" * 37)):
        with pytest.raises(JobTextError) as caught:
            job_attributes(parse_line(JOB.replace("JobName=two words", f"JobName={name}")))
        message = str(caught.value)
        assert message.startswith(f"scontrol show job 3: {first}"), message[:300]
        assert "appear more than once" in message and "not read" in message
        assert "\n" not in message and len(message) < 300, len(message)


@pytest.mark.parametrize("brk", ["\n", "\r", "\x0b", "\x85", "\u2028"])
def test_a_job_name_with_a_line_break_is_not_read(tmp_path, brk):
    """A name `x<break>UserId=bob(1002) NumCPUs=64 ...` would put a whole forged record on a
    line of its own. Only a line feed ends a record; a reading with more lines than the
    job and its nodes is refused, whichever separator the name holds. Bytes that are not
    UTF-8 are replaced, not a decoding error."""
    forged = JOB.replace("JobName=two words", f"JobName=\udcffx{brk}UserId=bob(1002) "
                         "NumCPUs=64")
    (tmp_path / "answer").write_bytes(forged.encode("utf-8", "surrogateescape") + b"\n")
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f"#!/bin/sh\ncat {tmp_path / 'answer'}\n")
    scontrol.chmod(0o755)
    slurm_ = Slurm(bin_dir=str(tmp_path), env=None)
    # A record cut in two (a line feed; a carriage return too, which text mode reads as
    # one), or one line whose forged keys are read twice: refused either way.
    with pytest.raises(SlurmError, match="more lines than the job and its nodes" if brk in
                       "\r\n" else "appear more than once"):
        slurm_.job("3")
    with pytest.raises(SlurmError, match="more lines than the job and its nodes|appear"):
        slurm_.job_and_nodes("3", ["n1"])
    # (the job's doing, which holds it; an answer without the job is Slurm's failure)
    with pytest.raises(JobTextError):
        slurm_.job("3")
    (tmp_path / "answer").write_bytes(b"")
    with pytest.raises(SlurmError, match="no job in its answer") as failed:
        slurm_.job("3")
    assert not isinstance(failed.value, JobTextError)


def test_slurmds_owner_stays_over_the_reading():
    """The Prolog's events see the owner slurmd named, before and after scontrol's
    reading."""
    from pbsplug.events import Event

    class Reads:
        def job_and_nodes(self, job_id, names):
            job = job_attributes(parse_line(JOB))
            job["euser"] = "bob"  # whatever the reading says
            return job, {"n1": vnode_attributes(parse_line(NODE))}

    ctx = type("Ctx", (), {"slurm": Reads()})()
    _, build = slurm_bridge._deferred_data(ctx, {"SLURM_JOB_USER": "alice"}, "3", "n1")
    job = Event("execjob_prologue", **build()).job
    assert job.euser == "alice" and job.Resource_List["ncpus"] == 3  # read, then alice
    assert Event.from_dict("execjob_begin", build()).job.euser == "alice"  # once read


def test_node_names_from_the_environment_are_checked(tmp_path):
    """SLURMD_NODENAME goes into scontrol's input and the state folder's paths; in a
    TaskProlog the environment is the task owner's. A line break (a second scontrol
    command, run as root), a path or an option is refused before any command runs."""
    for bad in ("n1\nupdate nodename=n2 state=down reason=x", "../../x", "--help"):
        with pytest.raises(SlurmError, match="SLURMD_NODENAME=.*expected a node name"):
            slurm_bridge.this_node({"SLURMD_NODENAME": bad})
        with pytest.raises(SlurmError, match="expected a host name"):
            Slurm(bin_dir=str(tmp_path)).job_and_nodes("3", [bad])
    assert slurm_bridge.this_node({"SLURMD_NODENAME": "n1.cluster-a_2"}) == "n1.cluster-a_2"


@pytest.mark.parametrize("text", [
    '{"n1": null}', "[1]", "1e999", '"x"', "{", '{"n1": 1e999}',
    # (math.isfinite of 400 digits was an OverflowError; 1e300 a time of 301 digits)
    '{"n1": %s}' % ("9" * 400), '{"n1": -%s}' % ("9" * 400), '{"n1": 1e300}',
    '{"n1": %s}' % ("9" * 5000),
    '{"n1": ' + "[" * 100_000])  # (json.loads' RecursionError went through)
def test_a_damaged_power_record_is_logged_and_read_as_empty(tmp_path, caplog, text):
    """A record that cannot be read must not stop power saving for good (every run would
    fail on it): it is logged, naming the file, and read as empty."""
    from pbsplug.adapters import slurm_power

    (tmp_path / slurm_power.OFF_RECORD).write_text(text)
    ctx = type("Ctx", (), {"power_dir": tmp_path})()
    assert slurm_power._off_record(ctx) == {}
    assert str(tmp_path / slurm_power.OFF_RECORD) in caplog.text
    (tmp_path / slurm_power.OFF_RECORD).write_text('{"n1": 1700000000}')
    assert slurm_power._off_record(ctx) == {"n1": 1700000000}


@pytest.mark.parametrize("size", HUGE_NUMBERS)
def test_a_resume_timeout_of_thousands_of_digits_is_logged_and_60_s_taken(
        tmp_path, caplog, size):
    """ResumeProgram read ResumeTimeout with int(): 5000 digits were its ValueError and
    4000 an OverflowError (halved as a float), and the nodes Slurm named were not woken."""
    from pbsplug.adapters import slurm_power

    class Fake:
        def run(self, *args, check=True):
            assert args == ("scontrol", "show", "config")
            return f"ResumeRate = 300 nodes/min\nResumeTimeout = {HUGE_NUMBERS[size]} sec\n"

        def hostnames(self, text):
            return expand_hostlist(text)

        def cluster_json(self, command):  # n1 is up: nothing to wake, the run ends
            return {"nodes": [{"name": "n1", "state": "idle", "state_flags": []}]}

    ctx = type("Ctx", (), {"slurm": Fake(), "power_dir": tmp_path / "power", "config": {}})()
    assert slurm_power.resume(ctx, {}, ["n1"])["exit"] == 0
    if size != "zeros":
        assert "ResumeTimeout '99999" in caplog.text and "60 s taken" in caplog.text


def test_one_pending_job_slurm_answers_oddly_for_is_left_out_alone(caplog):
    from pbsplug.adapters import slurm_power

    class Fake:
        def run(self, *args, check=True):
            return ("1|2026-11-24T02:25:13|n[1-2]\n2|2026-13-45T99:00:00|n1\n"
                    "3|2026-11-24T02:25:13|bad[list\n")

        def hostnames(self, text):
            if "bad" in text:
                raise SlurmError(f"scontrol show hostnames {text}: exit status 1")
            return expand_hostlist(text)

    ctx = type("Ctx", (), {"slurm": Fake()})()
    jobs = slurm_power.pending_jobs(ctx)
    assert list(jobs) == ["1"] and jobs["1"]["estimated"]["exec_vnode"] == (
        "(n1:ncpus=1)+(n2:ncpus=1)")
    assert "pending job 2 left out" in caplog.text and "pending job 3 left out" in caplog.text


def test_each_nodes_suspended_jobs_are_read_and_a_line_not_read_is_the_runs_error():
    """Slurm leaves a node whose only job is suspended IDLE: the periodic event's vnodes
    name such jobs (suspended_jobs), and a job whose nodes do not read fails the run, so
    that its node is never powered off for want of them."""
    from pbsplug.adapters import slurm_power

    class Fake:
        def __init__(self, text):
            self.text, self.asked = text, []

        def run(self, *args, check=True):
            self.asked.append(args)
            return self.text

        def hostnames(self, text):
            if "bad" in text:
                raise SlurmError(f"scontrol show hostnames {text}: exit status 1")
            return expand_hostlist(text)

    fake = Fake("7|n[1-2]\n8|n2\n")
    ctx = type("Ctx", (), {"slurm": fake})()
    assert slurm_power.suspended_jobs(ctx) == {"n1": ["7"], "n2": ["7", "8"]}
    assert fake.asked == [("squeue", "-h", "-a", "-t", "S", "-o", "%A|%N")]
    ctx.slurm = Fake("9|bad[list\n")
    with pytest.raises(SlurmError, match="suspended job 9: its nodes not read"):
        slurm_power.suspended_jobs(ctx)


def test_a_squeue_line_without_three_fields_is_logged_and_a_flood_of_them_counted(caplog):
    """A line of ``squeue -o %i|%S|%Y`` without its three fields was left out with no word
    in the log; each is one line naming it, up to a few, then one line counts the rest."""
    from pbsplug.adapters import slurm_power

    flood = "".join(f"{n}|2026-11-24T02:25:13\n" for n in range(10, 110))

    class Fake:
        def __init__(self, text):
            self.text = text

        def run(self, *args, check=True):
            return self.text

        def hostnames(self, text):
            return expand_hostlist(text)

    def pending(text):
        caplog.clear()
        return slurm_power.pending_jobs(type("Ctx", (), {"slurm": Fake(text)})())

    jobs = pending("1|2026-11-24T02:25:13|n1\n2|2026-11-24T02:25:13|n1|x\nnot a line\n")
    assert list(jobs) == ["1"]
    assert caplog.messages == [
        "squeue line 2 left out: 4 fields, not 3 (id|start|nodes): "
        "'2|2026-11-24T02:25:13|n1|x'",
        "squeue line 3 left out: 1 field, not 3 (id|start|nodes): 'not a line'"]
    assert list(pending("1|2026-11-24T02:25:13|n1\n" + flood)) == ["1"]
    shown = slurm_power.LOGGED_LEFT_OUT
    assert caplog.messages == [
        *(f"squeue line {n + 2} left out: 2 fields, not 3 (id|start|nodes): "
          f"'{n + 10}|2026-11-24T02:25:13'" for n in range(shown)),
        f"squeue: {100 - shown} more lines left out (not logged one by one)"]


def test_hostlists_compressed():
    """`compress_hostlist` writes names as one Slurm hostlist for a log line."""
    assert compress_hostlist([f"n{n}" for n in range(1, 301)]) == "n[1-300]"
    assert compress_hostlist([f"n{n:03d}" for n in range(1, 301)]) == "n[001-300]"
    assert compress_hostlist(["n3", "login", "n1", "n2", "n7", "n1"]) == "n[1-3,7],login"
    assert compress_hostlist(["n9", "n10", "n09", "x"]) == "n[9,09-10],x"
    assert compress_hostlist(["rack1-n5"]) == "rack1-n5" and compress_hostlist([]) == ""
    assert compress_hostlist(["12", "a1b", "n" + "9" * 30]) == f"12,a1b,n{'9' * 30}"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.sampled_from(["n", "gpu", "rack1-n", "a.b_"]), st.integers(0, 1200),
              st.integers(1, 5)).map(lambda t: f"{t[0]}{t[1]:0{t[2]}d}"),
    st.sampled_from(["login", "n", "a1b", "7", "gpu-"])), max_size=60))
def test_a_compressed_hostlist_expands_to_its_names(names):
    """`expand_hostlist` reads `compress_hostlist`'s text back to the same names, each
    once; names already in order keep it."""
    text = compress_hostlist(names)
    back = expand_hostlist(text)
    assert back is not None and len(back) == len(set(back)) and set(back) == set(names), text
    ordered = sorted(set(f"n{n}" for n in range(1, 200) if f"n{n}" in names) or ["n1"],
                     key=lambda name: int(name[1:]))
    assert expand_hostlist(compress_hostlist(ordered)) == ordered


def test_a_node_line_becomes_a_vnode():
    node = vnode_attributes(parse_line(NODE))
    assert node["state"] == "offline"  # MIXED: some CPUs free, as PBS says free
    assert node["resources_available"] == {"host": "n1", "vnode": "n1", "ncpus": 2,
                                           "mem": "1000mb"}
    assert node["comment"] == "broken fan [root@2026-11-24T02:30:00]"
    assert node["Mom"] == "vm"


@pytest.mark.parametrize(("state", "pbs"), [
    ("IDLE", "free"), ("ALLOCATED", "job-busy"), ("MIXED", "free"),
    ("IDLE+DRAIN", "offline"), ("DOWN+NOT_RESPONDING", "down"),
    ("IDLE+POWERED_DOWN", "sleep"), ("idle+POWERING_UP", "sleep")])
def test_node_states(state, pbs):
    assert vnode_state(state) == pbs


def test_bad_values_are_one_line_errors():
    with pytest.raises(SlurmError, match=r"SLURM_JOB_ID='12; rm -rf /': expected a job"):
        checked_job_id("12; rm -rf /")
    with pytest.raises(SlurmError, match=r"TimeLimit='soon': expected \[D-\]HH:MM:SS"):
        duration("soon", "TimeLimit")
    with pytest.raises(SlurmError, match="NumCPUs='many': expected a whole number"):
        job_attributes(parse_line(JOB.replace("NumCPUs=3", "NumCPUs=many")))
    with pytest.raises(SlurmError, match="no UserId, .* in its answer"):
        job_attributes({"JobId": "4", "NumCPUs": "2"})  # a record cut short
    assert duration("UNLIMITED", "TimeLimit") is None
    assert duration("05:00", "TimeLimit") == 300
    assert duration("1-23:59:59", "TimeLimit") == 172799
    assert duration("100:00:00", "TimeLimit") == 360000


@pytest.mark.parametrize("field,bad,why", [
    ("TimeLimit=1-02:03:00", "TimeLimit=99:99:99", r"TimeLimit='99:99:99': expected \[D-\]"),
    ("TimeLimit=1-02:03:00", "TimeLimit=1-24:00:00", r"TimeLimit='1-24:00:00': expected"),
    ("MinMemoryNode=100M", "MinMemoryNode=lots", r"MinMemoryNode='lots': expected a size"),
    ("MinMemoryNode=100M", "MinMemoryNode=" + "9" * 40, r"MinMemoryNode='9+': expected a size"),
    ("CPU_IDs=0-1", "CPU_IDs=3-1", r"CPU_IDs='3-1': expected cpu ids"),
    ("CPU_IDs=0-1", "CPU_IDs=0-", r"CPU_IDs='0-': expected cpu ids"),
    ("CPU_IDs=0-1", "CPU_IDs=0,,1", r"CPU_IDs='0,,1': expected cpu ids"),
])
def test_values_slurm_does_not_write_are_refused_not_misread(field, bad, why):
    # before, 99:99:99 was 99 hours and more, an unreadable size dropped the job's memory
    # and CPU_IDs=3-1 counted -1 cpus
    assert field in JOB
    with pytest.raises(SlurmError, match=why):
        job_attributes(parse_line(JOB.replace(field, bad)))


_NUMERIC_FIELDS = [  # (what JOB or NODE holds, the same with {n}, the key an error names)
    ("NumCPUs=3", "NumCPUs={n}", "NumCPUs"), ("NumNodes=2", "NumNodes={n}", "NumNodes"),
    ("Restarts=2", "Restarts={n}", "Restarts"),
    ("TimeLimit=1-02:03:00", "TimeLimit={n}-02:03:00", "TimeLimit"),
    ("TimeLimit=1-02:03:00", "TimeLimit=1-{n}:03:00", "TimeLimit"),
    ("TimeLimit=1-02:03:00", "TimeLimit={n}:00", "TimeLimit"),
    ("TimeLimit=1-02:03:00", "TimeLimit=00:{n}", "TimeLimit"),
    ("MinMemoryNode=100M", "MinMemoryNode={n}M", "MinMemoryNode"),
    ("CPU_IDs=0-1", "CPU_IDs={n}", "CPU_IDs"), ("CPU_IDs=0-1", "CPU_IDs=0-{n}", "CPU_IDs"),
    ("UserId=alice(1001)", "UserId=alice({n})", "UserId"),
    ("GroupId=users(100)", "GroupId=users({n})", "GroupId"),
    ("SubmitTime=2026-11-24T02:25:12", "SubmitTime={n}-11-24T02:25:12", "SubmitTime"),
    ("CPUTot=2", "CPUTot={n}", "CPUTot"), ("CPUAlloc=2", "CPUAlloc={n}", "CPUAlloc"),
    ("RealMemory=1000", "RealMemory={n}", "RealMemory"),
    ("BootTime=2026-11-23T23:32:53", "BootTime=2026-11-{n}T23:32:53", "BootTime"),
]


def _longs_only(value):
    """Every int in `value` is one a long holds (JSON, PBS and str() take it)."""
    if isinstance(value, dict):
        return all(_longs_only(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_longs_only(v) for v in value)
    return not isinstance(value, int) or -2**63 <= value < 2**63


@pytest.mark.parametrize("size", HUGE_NUMBERS)
@pytest.mark.parametrize("was, field, key", _NUMERIC_FIELDS,
                         ids=[f.format(n="N") for _, f, _ in _NUMERIC_FIELDS])
def test_a_number_of_thousands_of_digits_in_scontrol_is_the_fields_one_line_error(
        was, field, key, size):
    """Each number of ``scontrol show job`` and ``show node`` given digits int() does not
    read (5000, 5000 zeros and a 1, 100,000), or 4000 that no long holds: the job or node
    read with numbers a long holds, or a one-line `SlurmError` naming the key. Before,
    int()'s ValueError (Python's words, no key) came out of NumCPUs, TimeLimit, CPU_IDs and
    UserId, and 4000 digits were read as a count of 4000 digits."""
    line = JOB if was in JOB else NODE
    read = job_attributes if line is JOB else vnode_attributes
    text = line.replace(was, field.format(n=HUGE_NUMBERS[size]))
    try:
        attrs = read(parse_line(text))
    except SlurmError as exc:
        message = str(exc)
        assert message.startswith(f"{key}="), message[:200]
        assert "\n" not in message and len(message) < 200, message[:200]
        assert "Exceeds the limit" not in message and "4300" not in message
    else:
        assert _longs_only(attrs), (field, size)


@pytest.mark.parametrize("size", HUGE_NUMBERS)
@pytest.mark.parametrize("hostlist", ["n[{n}]", "n[1-{n}]", "n[{n}-{n}]", "a1,n[1,{n}]"])
def test_a_host_number_of_thousands_of_digits_is_the_hostlists_one_line_error(
        hostlist, size):
    """int() of a range's bound refused 4300 digits in its words; a bound no long holds is
    no Slurm host number."""
    text = hostlist.format(n=HUGE_NUMBERS[size])
    try:
        names = expand_hostlist(text)
    except SlurmError as exc:
        message = str(exc)
        assert message.startswith("hostlist 'n[") or message.startswith("hostlist 'a1,")
        assert "\n" not in message and len(message) < 200, message[:200]
        assert "Exceeds the limit" not in message and "4300" not in message
    else:  # (5000 zeros and a 1: n0...01, or n1 to it)
        assert size == "zeros" and names is not None and names[-1].endswith("1")


@pytest.mark.parametrize("answer, where", [
    ('{"nodes": [{"name": "n1", "cpus": 2}, {"name": "n2", "cpus": %s}]}', "nodes[1].cpus"),
    ('{"nodes": [{"name": "n1", "last_busy": -%s}]}', "nodes[0].last_busy"),
    ('{"nodes": [{"name": "n1", "state_flags": [%s]}]}', "nodes[0].state_flags[0]"),
    ('{"a\\nb": {"%s": %%s}}' % ("k" * 300), r"['a\nb']['kkkk"),
    ('{"nodes": [%s', "not JSON (Expecting ',' delimiter")],
    ids=["count", "negative", "in a list", "odd keys", "not JSON after it"])
@pytest.mark.parametrize("size", ["5000 digits", "100,000 digits"])
def test_a_number_of_thousands_of_digits_in_sinfo_json_is_named_in_one_line(
        tmp_path, answer, where, size):
    """json.loads refuses an int of 4300 digits or more with int()'s ValueError, which was
    wrapped as 'not JSON (Exceeds the limit (4300 digits) for integer string conversion:
    ... use sys.set_int_max_str_digits() ...)': Python's words, about a Python setting, and
    nothing said where the number was. Now the command, where the number is and how long,
    in one short line (or 'not JSON' for an answer that is not, past the number)."""
    number = HUGE_NUMBERS[size]
    (tmp_path / "answer").write_text(answer % number)
    sinfo = tmp_path / "sinfo"
    sinfo.write_text(f"#!/bin/sh\ncat {tmp_path / 'answer'}\n")
    sinfo.chmod(0o755)
    with pytest.raises(SlurmError) as caught:
        Slurm(bin_dir=str(tmp_path)).cluster_json("sinfo")
    message = str(caught.value)
    assert message.startswith(f"sinfo --json: {where}"), message[:300]
    assert "\n" not in message and len(message) < 200, message[:300]
    assert "Exceeds the limit" not in message and "4300" not in message
    if "not JSON" not in where:
        assert f"a number of {len(number):,} digits" in message


@pytest.mark.parametrize("answer, why", [
    # json.loads' RecursionError went through cluster_json to the power program.
    ('{"nodes": ' + "[" * 100_000, "arrays or objects nested too deeply"),
    ('{"nodes": [{"name": "n1", "cpus": 2}], "nodes": []}', 'the key "nodes" twice in one object'),
    ('{"nodes": [{"name": "n1", "cpus": NaN}]}', "NaN is not a JSON number"),
    ('{"nodes": [{"name": "n1", "cpus": 1e400}]}', "a number past a float's range (1e400)"),
    ('[{"name": "n1"}]', "a JSON array, not an object"),
    ('{"nodes": [' + "9" * 2000 + "]}", "nodes[0] is a number of 2,000 digits"),
    ('{"nodes": [' + "9" * 2000 + ", " + "[" * 100_000, "arrays or objects nested too deeply"),
])
def test_sinfo_json_that_slurm_does_not_write_is_named_in_one_line(tmp_path, answer, why):
    (tmp_path / "answer").write_text(answer)
    sinfo = tmp_path / "sinfo"
    sinfo.write_text(f"#!/bin/sh\ncat {tmp_path / 'answer'}\n")
    sinfo.chmod(0o755)
    with pytest.raises(SlurmError) as caught:
        Slurm(bin_dir=str(tmp_path)).cluster_json("sinfo")
    assert str(caught.value).startswith(f"sinfo --json: {why}"), str(caught.value)[:300]
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


@pytest.mark.parametrize("size", HUGE_NUMBERS)
def test_a_job_id_of_thousands_of_characters_is_quoted_cut_short(size):
    """The error quoted all of it: a line of 100,000 characters in Slurm's log."""
    with pytest.raises(SlurmError, match="^SLURM_JOB_ID='.*: expected a job number$") as exc:
        checked_job_id(HUGE_NUMBERS[size] + "x")
    assert len(str(exc.value)) < 200


def test_slurm_sizes_in_any_unit_are_whole_mb():
    for size, mb in (("1.5G", 1536), ("512K", 1), ("2048", 2048), ("1T", 1048576)):
        job = job_attributes(parse_line(JOB.replace("MinMemoryNode=100M", f"MinMemoryNode={size}")))
        assert job["Resource_List"].get("mem", "0mb") == f"{mb * 2}mb", size  # on 2 nodes


@pytest.mark.parametrize("text", [
    "2026-11-24T02:25:13", "2024-02-29T23:59:59", "2026-1-5T2:3:4", "2026-01-05T23:59:61",
    "2026-03-29T02:30:00", "2026-10-25T02:30:00",
    "2038-01-19T03:14:08", "2040-06-01T12:00:00", "9999-12-31T23:59:59"])  # (64-bit time_t)
def test_a_slurm_time_is_what_strptime_makes_of_it(text):
    import time

    assert epoch(text, "StartTime") == int(time.mktime(time.strptime(
        text, "%Y-%m-%dT%H:%M:%S")))


@pytest.mark.parametrize("text", [
    "2026-02-29T00:00:00", "2026-04-31T00:00:00", "2026-13-01T00:00:00",
    "2026-01-00T00:00:00", "2026-01-05T24:00:00", "2026-01-05T00:60:00",
    "2026-01-05T00:00:62", "26-01-05T00:00:00", "2026-01-05 00:00:00", "soon"])
def test_a_time_strptime_refuses_is_a_one_line_error(text):
    with pytest.raises(SlurmError, match=r"StartTime=.*: expected a time as YYYY-MM-DD"):
        epoch(text, "StartTime")
    assert epoch("(null)", "StartTime") is None and epoch("Unknown", "StartTime") is None


def test_a_time_past_a_32_bit_mktime_is_the_fields_one_line_error(monkeypatch, caplog):
    """Where time_t is 32 bits, the C library's mktime refuses a local time after
    2038-01-19 03:14:07 UTC: Python's time.mktime raises OverflowError, which came out of
    `epoch` as it was (no SlurmError: a pending job's start time past 2038 ended the whole
    power run, not that job's line). This host's is 64 bits: mktime is made to refuse as a
    32-bit one does."""
    import time

    from pbsplug.adapters import slurm_power

    real = time.mktime

    def mktime_32(t):
        seconds = real(t)
        if seconds >= 2 ** 31:
            raise OverflowError("mktime argument out of range")
        return seconds

    monkeypatch.setattr(time, "mktime", mktime_32)
    with pytest.raises(SlurmError, match=r"^StartTime='2040-06-01T12:00:00': past the latest "
                       r"time this host's C library converts \(2038 where time_t is 32 "
                       r"bits\)$"):
        epoch("2040-06-01T12:00:00", "StartTime")
    assert epoch("2037-12-31T00:00:00", "StartTime") == int(real(
        (2037, 12, 31, 0, 0, 0, 0, 0, -1)))

    class Fake:  # squeue --start: one job starts past 2038 and is left out alone
        def run(self, *args, check=True):
            return "1|2026-11-24T02:25:13|n1\n2|2040-06-01T12:00:00|n1\n"

        def hostnames(self, text):
            return expand_hostlist(text)

    assert list(slurm_power.pending_jobs(type("Ctx", (), {"slurm": Fake()})())) == ["1"]
    assert "pending job 2 left out: StartTime='2040-06-01T12:00:00': past" in caplog.text


@pytest.mark.parametrize("text", [
    "0000-01-01T00:00:00", "0001-01-01T00:00:00", "1900-02-28T12:00:00",
    "1969-12-31T23:59:59"])
def test_a_time_before_1970_is_the_fields_one_line_error(text):
    """Slurm writes a time of 0 as Unknown and keeps none earlier: year 0000 was read as 62
    billion seconds before 1970."""
    with pytest.raises(SlurmError, match=r"^StartTime='.*': not after the epoch") as exc:
        epoch(text, "StartTime")
    assert "\n" not in str(exc.value)
    with pytest.raises(SlurmError, match=r"^SubmitTime='.*': not after the epoch"):
        job_attributes(parse_line(JOB.replace("SubmitTime=2026-11-24T02:25:12",
                                              f"SubmitTime={text}")))
    assert epoch("1970-01-02T00:00:00", "StartTime") > 0


def test_hostlists():
    assert expand_hostlist("n1") == ["n1"]
    assert expand_hostlist("n[1-3,7]") == ["n1", "n2", "n3", "n7"]
    assert expand_hostlist("a1,b[08-10]") == ["a1", "b08", "b09", "b10"]
    assert expand_hostlist("rack[1-2]n[1-2]") is None  # left to scontrol
    # Backwards, open or non-ASCII ranges are left to scontrol, which refuses them.
    assert expand_hostlist("n[10-1]") is None and expand_hostlist("n[1-]") is None
    assert expand_hostlist("n[\u0661-\u0663]") is None
    with pytest.raises(SlurmError, match="over 1,000,000 hosts"):
        expand_hostlist("n[0-999999999]")  # not a billion names in memory


HOSTLIST_OF_MANY = """
import sys
import tempfile
from pbsplug.adapters.slurm_read import expand_hostlist
names = [f"node{i:06d}" for i in range(200_000)]
assert expand_hostlist(",".join(names)) == names
assert expand_hostlist("a[1,3],b,c[2-3],d[9]") == ["a1", "a3", "b", "c2", "c3", "d9"]
assert expand_hostlist("a,b]") is None and expand_hostlist("a[1,b") is None
"""


def test_a_hostlist_of_many_names_is_read_in_one_pass():
    """Its commas were found with a pattern that looked from each to the end of the text:
    200,000 names (an uncompressed SuspendExcNodes, say) took ten minutes of a power
    program or Prolog. (The timeout is a hang guard: it takes a fraction of a second.)"""
    done = subprocess.run([sys.executable, "-c", HOSTLIST_OF_MANY], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


COMMENT_OF_MANY_WORDS = """
import sys
import tempfile
from pbsplug.adapters.slurm_read import job_attributes, parse_line
comment = " ".join("a" * 2_000_000)
job = job_attributes(parse_line(sys.argv[1].replace("Comment=(null)", f"Comment={comment}")))
assert job["comment"] == comment and job["jobdir"] == "/tmp/a b", job.get("jobdir")
"""


def test_a_comment_of_many_words_is_read_in_one_pass():
    """A job's owner sets its comment and name. Their words were added to the value one by
    one, each copying the value so far: a comment of 200,000 one-letter words took 3 s of a
    Prolog, 2,000,000 of them minutes. (The timeout is a hang guard: it takes about a
    second.)"""
    done = subprocess.run([sys.executable, "-c", COMMENT_OF_MANY_WORDS, JOB],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_merge_keeps_the_sites_lines_and_unmerge_restores_them_exactly():
    text = "ClusterName=x\nProlog=/site/prolog\n# a comment\nEpilog = /site/epilog\n"
    lines = {"Prolog": "/p/prolog", "Epilog": "/p/epilog", "TaskProlog": "/p/task_prolog"}
    merged = slurm.merge_conf(text, lines)
    assert "#pbsplug-replaced# Prolog=/site/prolog" in merged
    assert "#pbsplug-replaced# Epilog = /site/epilog" in merged
    assert merged.rstrip().endswith(slurm.END)
    assert slurm.merge_conf(merged, lines) == merged  # a second install: the same file
    assert slurm.unmerge_conf(merged) == text
    assert slurm.replaced_lines(text, lines) == ["Prolog=/site/prolog",
                                                 "Epilog = /site/epilog"]



@pytest.mark.parametrize("site", [
    b"ClusterName=x\r\nProlog=/site/prolog\r\n",          # Windows line breaks
    b"ClusterName=x\nProlog=/site/prolog\n\n\n",           # blank lines at the end
    b"ClusterName=x\x0c\nProlog=/site/prolog\xc2\x85\n",   # a form feed, a NEL
    b"# caf\xe9 (latin-1)\nProlog=/site/prolog\n",          # a byte that is no UTF-8
    b"",
])
def test_uninstall_gives_back_slurm_conf_byte_for_byte(tmp_path, site):
    """Slurm splits slurm.conf at '\\n' alone: install keeps every other byte where it
    was, and uninstall gives back the very bytes the site had."""
    conf = tmp_path / "slurm.conf"
    conf.write_bytes(site)
    slurm.apply_conf(conf, {"Prolog": "/p/prolog"})
    merged = conf.read_bytes()
    assert merged.endswith(b"Prolog=/p/prolog\n" + slurm.END.encode() + b"\n")
    if site:
        assert b"#pbsplug-replaced# Prolog=/site/prolog" in merged
    slurm.apply_conf(conf, {"Prolog": "/p/prolog"})  # a second install: the same file
    assert conf.read_bytes() == merged
    slurm.uninstall(tmp_path / "programs", conf)
    assert conf.read_bytes() == site

def test_apply_and_uninstall_keep_slurm_confs_owner_group_and_mode(tmp_path):
    # slurm.conf is often slurm:slurm: rewriting it must not hand it to root.
    conf = tmp_path / "slurm.conf"
    text = "ClusterName=x\nProlog=/site/prolog\n"
    conf.write_text(text)
    os.chown(conf, 4242, 4343)
    os.chmod(conf, 0o640)
    lines = {"Prolog": "/p/prolog"}
    slurm.apply_conf(conf, lines)
    st = conf.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (4242, 4343, 0o640)
    assert "Prolog=/p/prolog" in conf.read_text()
    assert slurm.uninstall(tmp_path / "programs", conf)
    st = conf.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (4242, 4343, 0o640)
    assert conf.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slurm.conf"]  # no part left


def test_a_slurm_conf_that_is_a_link_is_refused_not_replaced(tmp_path):
    # A slurm.conf linked to a shared file: a file of this host's in its place would never
    # see the shared file's later changes.
    shared = tmp_path / "shared.conf"
    text = slurm.merge_conf("ClusterName=x\n", {"Prolog": "/p/prolog"})
    shared.write_text(text)
    conf = tmp_path / "slurm.conf"
    conf.symlink_to(shared)
    for act in (lambda: slurm.apply_conf(conf, {"Prolog": "/q/prolog"}),
                lambda: slurm.uninstall(tmp_path / "programs", conf)):
        with pytest.raises(slurm.SlurmInstallError) as err:
            act()
        assert str(err.value) == (
            f"{conf} is a symbolic link to {shared}: pbsplug would replace the link with a "
            f"file of this host's; name the file itself with --slurm-conf {shared} (every host "
            "that reads it sees the change): left as it was")
        assert conf.is_symlink() and shared.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared.conf", "slurm.conf"]
    slurm.apply_conf(shared, {"Prolog": "/q/prolog"})  # the file named: changed, link kept
    assert "Prolog=/q/prolog" in conf.read_text() and conf.is_symlink()


def test_a_slurm_conf_whose_group_the_caller_cannot_give_is_one_line_and_unchanged(
        shared_tmp, attacker):
    # Only root may give a file a group it is not in: the rewrite stops before the rename.
    etc = shared_tmp / "etc"
    etc.mkdir()
    conf = etc / "slurm.conf"
    conf.write_text(slurm.merge_conf("ClusterName=x\n", {"Prolog": "/p/prolog"}))
    before = conf.read_text()
    for path in (etc, conf):
        os.chown(path, attacker.uid, 0)
    done = attacker.pbs(None, "slurm", "uninstall", "--dir", str(shared_tmp / "programs"),
                        "--slurm-conf", str(conf))
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert f"{conf}: cannot give the new file owner {attacker.uid} and group 0" in done.stderr
    assert conf.read_text() == before and conf.stat().st_gid == 0
    assert sorted(p.name for p in etc.iterdir()) == ["slurm.conf"]


MIXED = """
import time
from pbsplug import PluginInfo, hookimpl
plugin_info = PluginInfo(api="1.0", events=("queuejob", "execjob_begin", "exechost_periodic",
                                             "periodic"), freq=7, alarm=3)
@hookimpl
def queuejob(event):
    pass
@hookimpl
def execjob_begin(event):
    if event.job.Job_Name == "reject":
        event.reject("parts: no")
@hookimpl
def exechost_periodic(event):
    pass
@hookimpl
def periodic(event):
    pass
"""


def _plugins(dists, tmp_path, name="parts"):
    return dists.enabled(name, MIXED, tmp_path)


def test_the_plan_installs_only_the_scripts_the_plugins_need(dists, tmp_path):
    plugins = _plugins(dists, tmp_path)
    p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)], bin_dir="/usr/bin",
                   slurm_conf="", state_dir="/var/spool/x", log_file="/var/log/x",
                   run_dir="/run/x")
    assert set(p.programs) == {"prolog", "health_check", "suspend", "resume", "resume_fail",
                               "slurm_program.py", "worker_client.py"}
    assert p.extra_files == {}  # no execjob_launch: no task worker
    assert p.conf_lines["HealthCheckInterval"] == "7"
    assert p.conf_lines["SuspendTime"] == "8640000"
    assert "Epilog" not in p.conf_lines and "TaskProlog" not in p.conf_lines
    row = p.rows[0]
    assert row["cannot"]["queuejob"].startswith("Slurm's submit-time extension point")
    assert set(row["runs"]) == {"execjob_begin", "exechost_periodic", "periodic"}
    assert p.programs["prolog"].startswith(f"#!{sys.executable} -IS\n")
    assert "/run/x/slurm-" in p.programs["prolog"]


@pytest.mark.parametrize("folder", ["/opt/my dir", "/opt/a#b", '/opt/a"b', "/opt/a\tb",
                                    "/opt/a\nPrologSlurmctld=/tmp/x"])
def test_a_programs_folder_slurm_conf_cannot_name_is_one_line(dists, tmp_path, folder):
    """slurm.conf names the programs by their path: `Prolog=/opt/my dir/prolog` made
    every Slurm command and daemon stop ('Parse error ...: " dir/prolog"', then 'fatal:
    Unable to process configuration file', tried with 22.05's scontrol), a '#' cut the
    path short (a Prolog that does not exist fails every job and drains its node), and a
    line break added a line of its own. Such a --dir is install's one-line error."""
    plugins = _plugins(dists, tmp_path)
    with pytest.raises(slurm.SlurmInstallError, match=r"^--dir .*: slurm\.conf names the "
                       r"programs by their path"):
        slurm.plan(plugins, Path(folder), dirs=[str(dists.root)], bin_dir="/usr/bin",
                   slurm_conf="", state_dir="/var/spool/x", log_file="/var/log/x",
                   run_dir="/run/x")


def test_the_bridge_answers_bad_requests_with_one_line(dists, tmp_path):
    plugins = _plugins(dists, tmp_path)
    p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)], bin_dir="/nowhere",
                   slurm_conf="", state_dir=str(tmp_path / "state"), log_file="",
                   run_dir="/run/x")
    sys.path.insert(0, str(dists.root))
    try:
        ctx = slurm_bridge.load(p.config)
    finally:
        sys.path.remove(str(dists.root))
    answer = slurm_bridge.dispatch(ctx, {"script": "prolog", "env": {"SLURM_JOB_ID": "x y"}})
    assert answer["exit"] == 1 and "SLURM_JOB_ID='x y': expected a job number" in answer["error"]
    answer = slurm_bridge.dispatch(ctx, {"script": "prolog", "env": {"SLURM_JOB_ID": "5"}})
    assert answer["exit"] == 1 and "/nowhere/scontrol does not exist" in answer["error"]
    answer = slurm_bridge.dispatch(ctx, {"script": "nope", "env": {}})
    assert answer["exit"] == 1 and "no Slurm script 'nope'" in answer["error"]
    assert slurm_bridge.dispatch(ctx, {"script": "epilog"})["exit"] == 1


def test_the_program_without_its_config_is_one_line_and_exit_1(tmp_path):
    program = tmp_path / "prolog"
    program.write_text(slurm_program.program_text(
        sys.executable, str(Path(slurm_program.__file__).parent), "prolog",
        str(tmp_path / "missing.json"), str(tmp_path / "no.sock")))
    program.chmod(0o755)
    done = subprocess.run([str(program)], env={"SLURM_JOB_ID": "1"}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("pbsplug prolog: ")
    assert "Traceback" not in done.stderr
    if os.geteuid() == 0:  # root tries the worker first: no worker could start either
        assert "missing.json" in done.stderr


def test_periodic_without_an_install_is_one_line(tmp_path):
    pbsplug = str(Path(sys.executable).with_name("pbsplug"))
    done = subprocess.run([pbsplug, "slurm", "periodic", "--dir", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PBSPLUG_HOME": str(tmp_path)})
    assert done.returncode == 2
    assert f"{tmp_path / 'none'}: no pbsplug Slurm install here" in done.stderr
    assert "Traceback" not in done.stderr


class _Reads:
    """Slurm's reading of JOB and NODE above, counted (the objects' merging needs no Slurm)."""

    def __init__(self) -> None:
        self.calls = 0

    def job_and_nodes(self, job_id, names):
        self.calls += 1
        return job_attributes(parse_line(JOB)), {"n1": vnode_attributes(parse_line(NODE))}


def test_the_event_reads_slurm_only_when_a_hook_needs_more_than_the_environment():
    from pbsplug.events import Event

    slurm_ = _Reads()
    reading = slurm_bridge.Reading(slurm_, "3", "n1", {"Exit_status": 2})
    known = {**slurm_bridge.known_job({"SLURM_JOB_USER": "alice",
                                       "SLURM_JOB_PARTITION": "all"}, "3"), "Exit_status": 2}
    job = slurm_bridge.SlurmJob("3", known, reading)
    vnode = slurm_bridge.SlurmVnode("n1", reading)
    event = Event("execjob_end", job=job, vnode_list={"n1": vnode})
    assert (event.job.id, event.job.euser, event.job.queue, event.job.Exit_status) == (
        "3", "alice", "all", 2)
    event.job.comment = "mine"  # a hook's write, before the reading
    assert slurm_.calls == 0
    assert event.job.Resource_List["ncpus"] == 3 and slurm_.calls == 1
    assert event.job.comment == "mine" and event.job.changes() == {"comment": "mine"}
    assert event.job.Exit_status == 2 and event.job.Job_Name == "two words"
    assert event.vnode_list["n1"].state == "offline" and slurm_.calls == 1  # one reading
    assert pickle.loads(pickle.dumps(event.job)).to_dict() == event.job.to_dict()
    assert type(pickle.loads(pickle.dumps(event.vnode_list["n1"]))).__name__ == "Vnode"
    # A name that does not look like one is left to the reading.
    assert slurm_bridge.known_job({"SLURM_JOB_USER": "a b", "SLURM_JOB_PARTITION": ""},
                                  "3") == {"id": "3"}


ENV_ONLY = """
from pbsplug import PluginInfo, hookimpl
plugin_info = PluginInfo(api="1.0", events=("execjob_begin",))
@hookimpl
def execjob_begin(event):
    if (event.job.id, event.job.euser, event.job.queue) != ("5", "bob", "debug"):
        raise RuntimeError("not what slurmd said")
    if "n1" not in event.vnode_list:
        raise RuntimeError("no n1")
"""


def test_a_prolog_whose_hooks_read_only_the_environment_runs_no_slurm_command(dists,
                                                                               tmp_path):
    dists.add("envonly", ENV_ONLY)
    site = tmp_path / "site.toml"
    site.write_text("[plugins.envonly]\nenabled = true\n")
    sys.path.insert(0, str(dists.root))
    try:
        plugins = load_plugins(load_site(site), env={})
        p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)],
                       bin_dir="/nowhere", slurm_conf="", state_dir=str(tmp_path / "state"),
                       log_file="", run_dir="/run/x")
        ctx = slurm_bridge.load(p.config)
    finally:
        sys.path.remove(str(dists.root))
    env = {"SLURM_JOB_ID": "5", "SLURM_JOB_USER": "bob", "SLURM_JOB_PARTITION": "debug",
           "SLURMD_NODENAME": "n1"}
    # /nowhere/scontrol would fail: the hook read nothing the environment does not give.
    assert slurm_bridge.dispatch(ctx, {"script": "prolog", "env": env}) == {
        "exit": 0, "stdout": "", "error": ""}
    env["SLURM_JOB_USER"] = "alice"  # the hook errs: its error, not a Slurm failure
    answer = slurm_bridge.dispatch(ctx, {"script": "prolog", "env": env})
    assert answer["exit"] == 1 and "could not be stopped" in answer["error"]


def _root_prolog_config(dists, tmp_path: Path) -> tuple[dict, Path]:
    """The plan's config of a site with `ENV_ONLY` enabled, its programs Python ones, and
    the bridge's log file it names; skipped (`missing`) unless root, as only root's
    programs ask the worker."""
    import sysconfig

    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: only root's programs ask the worker")
    plugins = dists.enabled("envonly", ENV_ONLY, tmp_path)
    log = tmp_path / "log" / "slurm.log"
    p = slurm.plan(plugins, tmp_path / "programs", native=False,
                   dirs=[sysconfig.get_paths()["purelib"], str(dists.root)],
                   bin_dir="/nowhere", slurm_conf="", state_dir=str(tmp_path / "state"),
                   log_file=str(log), run_dir="/run/x")
    return p.config, log


def _prolog_runs_its_events_saying(tmp_path: Path, config: dict, log: Path, case: str,
                                   python: str, sock: Path, says: str) -> None:
    """The Prolog program of `config` (its worker `python`'s, at `sock`) run as slurmd runs
    it for job 5 on n1: it exits 0, nothing on stderr, with one line in `log` (removed
    after) saying `says` and that the events ran in the program."""
    config_file = tmp_path / f"{case}.json"
    config_file.write_text(json.dumps({**config, "python": python,
                                       "home": str(tmp_path / "home")}))
    program = tmp_path / f"prolog-{case}"
    program.write_text(slurm_program.program_text(
        sys.executable, str(Path(slurm_program.__file__).parent), "prolog", str(config_file),
        str(sock)))
    program.chmod(0o755)
    env = {"SLURM_JOB_ID": "5", "SLURM_JOB_USER": "bob", "SLURM_JOB_PARTITION": "debug",
           "SLURMD_NODENAME": "n1"}
    done = subprocess.run([str(program)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stderr) == (0, ""), (case, done.stderr)
    lines = log.read_text().splitlines() if log.exists() else []
    why = [line for line in lines if " prolog job 5: " in line]
    assert len(why) == 1 and says in why[0], (case, lines)
    assert why[0].endswith("; the events run in this process"), (case, lines)
    log.unlink()


def test_a_worker_that_cannot_be_started_leaves_the_events_to_the_program(dists, tmp_path):
    """A Slurm program run as root asks the host's worker and starts one when none answers.
    A start that failed (its folder not made: /run read-only, a full disk; its lock; its
    process) failed the program, and a failed Prolog drains the node; one that ended at
    start left the events to the program without a word, and an unsafe folder's refusal
    was a line on stderr, not in the log. The program runs them itself now, as where no
    worker can be had, with one line in the bridge's log saying why."""
    config, log = _root_prolog_config(dists, tmp_path)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    unsafe = tmp_path / "un\nsafe"  # (the log line is one line, the break shown escaped)
    unsafe.mkdir(mode=0o777)
    unsafe.chmod(0o777)
    cases = {  # the worker's socket, its python, and what the log line says
        "folder": (a_file / "run" / "w.sock", sys.executable,
                   f"Not a directory: '{a_file / 'run'}'"),
        "spawn": (tmp_path / "run" / "w.sock", str(tmp_path / "no-python"),
                  f"No such file or directory: '{tmp_path / 'no-python'}'"),
        "ended": (tmp_path / "run" / "w.sock", "/bin/false", "ended at start, exit status 1"),
        "unsafe": (unsafe / "run" / "w.sock", sys.executable, f"{tmp_path}/un\\nsafe is "
                   "writable by everyone (owner uid 0 (root), mode 0777), so another user"),
    }
    for case, (sock, python, says) in cases.items():
        _prolog_runs_its_events_saying(tmp_path, config, log, case, python, sock, says)
    assert not (unsafe / "run").exists()  # the unsafe folder was not used


def test_a_worker_that_resets_the_connection_twice_leaves_the_events_to_the_program(
        dists, tmp_path):
    """A connection to the host's worker reset before any answer (a worker that left with
    it unaccepted, at its idle exit: nothing was done) failed the Slurm program, and a
    failed Prolog drains the node, where PBS's hook asks again once, of a new worker, and
    then runs the plugin itself. The programs share that path now (`worker_client.ask`):
    reset twice, the program runs the events itself, with one line in the bridge's log.
    The worker's socket here resets every connection once the request has come."""
    config, log = _root_prolog_config(dists, tmp_path)
    sock = tmp_path / "run" / "w.sock"
    sock.parent.mkdir(mode=0o700)
    with resetting_socket(sock) as resets:
        _prolog_runs_its_events_saying(
            tmp_path, config, log, "reset", sys.executable, sock,
            f"the worker at {sock} reset the connection twice, unanswered: Connection "
            "reset by peer")
    assert len(resets) == 2 and all(resets)  # asked twice, reset twice


def test_a_worker_asked_again_after_a_reset_calls_meanwhile_once(tmp_path):
    """`meanwhile` (the Slurm Prolog's start of the task worker) is called once however
    often the worker is asked: while the worker works, or, when none answers, before the
    program runs the events itself."""
    client = worker_client_module()
    sock = tmp_path / "w.sock"
    calls, failed = [], []
    with resetting_socket(sock) as resets:
        answer = client.ask(sys.executable, str(tmp_path / "none.json"), str(sock), b"{}",
                            may_start=False, failed=failed.append,
                            meanwhile=lambda: calls.append(1))
    assert answer is None and len(resets) == 2
    assert len(calls) == 1 and len(failed) == 1 and "reset the connection twice" in failed[0]
    calls.clear()
    assert client.ask(sys.executable, "", str(tmp_path / "none.sock"), b"{}",
                      may_start=False, meanwhile=lambda: calls.append(0)) is None
    assert calls == [0]  # no worker: called all the same


@pytest.mark.parametrize("when", ["after the request", "at once"])
def test_a_task_worker_that_breaks_off_is_one_line_and_taskprolog_exits_1(tmp_path, when):
    """A task worker killed mid-talk: TaskProlog, run as the job's user, prints one line,
    never a traceback, and exits 1 (the task fails, as on any other failure of its own)."""
    import threading

    sock = tmp_path / "task.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock))
    server.listen(1)

    def break_off():
        conn, _ = server.accept()
        if when == "after the request":
            conn.recv(1, socket.MSG_PEEK)  # the request is there, left unread: the close
            # resets the connection (ECONNRESET on TaskProlog's side, as a killed worker's)
        conn.close()

    thread = threading.Thread(target=break_off, daemon=True)
    thread.start()
    program = tmp_path / "task_prolog"
    program.write_text(slurm_program.task_program_text(
        sys.executable, str(Path(slurm_program.__file__).parent), str(sock)))
    program.chmod(0o755)
    try:
        done = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    finally:
        thread.join(timeout=60)
        server.close()
    assert done.returncode == 1 and done.stdout == ""
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"pbsplug TaskProlog: the task worker at {sock} ")


CAP_DISPATCH = """
import os

def load(config):
    return config["log"]

def dispatch(log, request):
    uid = request["_peer"][1]
    with open(log, "a") as fh:
        fh.write(f"{uid}\\n")
    return {"exit": 0, "stdout": "", "error": "", "uid": uid}
"""
#: Holds `n` connections to the worker, sending nothing, until its stdin closes.
HOLDER = """
import socket, sys
conns = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    conns.append(s)
print("holding", flush=True)
sys.stdin.read()
"""
#: Sends one whole request and prints the answer.
ASKER = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b'{"script": "cap"}')
s.shutdown(socket.SHUT_WR)
print("sent", flush=True)
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.decode(), flush=True)
"""


def _children(pid: int) -> int:
    count = 0
    for proc in Path("/proc").iterdir():
        try:
            text = (proc / "stat").read_text()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2:].split()[1]) == pid:
            count += 1
    return count


def test_a_public_worker_serves_at_most_max_running_unprivileged_requests_in_all(tmp_path):
    """The public socket's overall cap (`worker.MAX_RUNNING`): as many unprivileged users as
    it takes, each at its own cap (`MAX_RUNNING_PER_UID`), fill it; one more user's request
    then waits, though that user runs nothing, until a slot frees, while root is served at
    once. Users here are bare uids (setpriv), on the system interpreter."""
    import json
    import select
    import shutil

    from pbsplug.adapters import worker
    from pbsplug.testing import SYSTEM_PYTHON, missing, until

    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None or not Path(SYSTEM_PYTHON).exists():
        missing("needs root, setpriv and /usr/bin/python3 (requests as other uids)")
    holders = worker.MAX_RUNNING // worker.MAX_RUNNING_PER_UID
    uids = [63001 + i for i in range(holders + 1)]
    code = tmp_path / "code"
    code.mkdir()
    (code / "capdispatch.py").write_text(CAP_DISPATCH)
    log = tmp_path / "served"
    config = tmp_path / "cap.json"
    config.write_text(json.dumps({"loader": "capdispatch:load", "log": str(log),
                                  "dispatcher": "capdispatch:dispatch", "public": True,
                                  "site_dirs": [str(code)], "deadline": 600}))
    run = Path("/run") / f"pbsplug-cap-{os.getpid()}"  # reachable by every uid
    sock = run / "w.sock"
    # Holds last until the test ends them, not SEND_DEADLINE: nothing here depends on time.
    start = ("import sys; from pbsplug.adapters import worker; worker.SEND_DEADLINE = 600.0; "
             "sys.exit(worker.main(sys.argv[1:]))")
    proc = subprocess.Popen([sys.executable, "-c", start, str(sock), str(config)])
    procs: list[subprocess.Popen] = []

    def as_uid(uid: int, program: str, *args: str) -> subprocess.Popen:
        p = subprocess.Popen([setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                              SYSTEM_PYTHON, "-c", program, str(sock), *args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                             cwd="/", env={"PATH": "/usr/bin:/bin"})
        procs.append(p)
        return p

    try:
        until(sock.exists, 30, "the worker's socket")
        held = [as_uid(uid, HOLDER, str(worker.MAX_RUNNING_PER_UID)) for uid in uids[:-1]]
        for p in held:
            assert p.stdout.readline().strip() == b"holding"
        until(lambda: _children(proc.pid) >= worker.MAX_RUNNING, 60,
              f"{worker.MAX_RUNNING} requests served at once")
        late = as_uid(uids[-1], ASKER)
        assert late.stdout.readline().strip() == b"sent"
        # Root is never held back; answered, it also shows the late request was accepted
        # (connections are accepted in order) and is waiting.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(60)
            conn.connect(str(sock))
            conn.sendall(b'{"script": "root"}')
            conn.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        assert json.loads(answer)["uid"] == 0
        # Not answered while the others hold every slot (they hold for as long as the test
        # says: this wait cannot fail a right worker, however slow the machine; a worker
        # without the cap answers within it).
        ready, _, _ = select.select([late.stdout], [], [], 3.0)
        assert not ready, "served beyond the overall cap: " + late.stdout.read().decode()
        with open(log, "a") as fh:
            fh.write("released\n")
        for p in held:  # their requests end (empty: refused), freeing the slots
            p.stdin.close()
        out, _ = late.communicate(timeout=60)
        assert json.loads(out)["uid"] == uids[-1], out
        served = log.read_text().split()
        assert served.index("0") < served.index("released") < served.index(str(uids[-1]))
        assert len(served) == 3  # the held connections sent nothing to serve
    finally:
        for p in procs:
            p.kill()
            p.wait()
        proc.kill()
        proc.wait()
        shutil.rmtree(run, ignore_errors=True)


def test_the_task_worker_stays_while_a_step_runs_on_the_node(tmp_path):
    """Slurm runs the Prolog (which starts the task worker) once per job on a node, and
    TaskProlog before every task of every step; TaskProlog runs as the job's user, who
    cannot start a root worker. The task worker left after `IDLE_EXIT` idle seconds like
    any worker, so a step started later (``srun b`` after a twenty-minute ``srun a``) had
    no worker to ask and its tasks failed. It stays while a slurmstepd runs here (a
    stand-in, at the path the config names), and leaves once none is left, or once an
    install has changed its config (a new worker serves that)."""
    import json

    from pbsplug.testing import until

    code = tmp_path / "code"
    code.mkdir()
    (code / "capdispatch.py").write_text(CAP_DISPATCH)
    stepd = tmp_path / "slurmstepd"
    shutil.copy("/bin/sleep", stepd)
    config = tmp_path / "task.json"
    config.write_text(json.dumps({"loader": "capdispatch:load", "log": str(tmp_path / "log"),
                                  "dispatcher": "capdispatch:dispatch", "public": True,
                                  "site_dirs": [str(code)], "slurmstepd": str(stepd)}))
    run = tmp_path / "run"
    sock = run / "w.sock"
    start = ("import sys; from pbsplug.adapters import worker; worker.IDLE_EXIT = 0.2; "
             "sys.exit(worker.main(sys.argv[1:]))")
    # (each worker leads a process group of its own, which its serving process is in)
    step = subprocess.Popen([str(stepd), "300"])
    proc = subprocess.Popen([sys.executable, "-c", start, str(sock), str(config)],
                            start_new_session=True)
    try:
        until(sock.exists, 30, "the worker's socket")
        proc_gone = None
        try:
            proc_gone = proc.wait(3)  # (fifteen idle periods, a step running all along)
        except subprocess.TimeoutExpired:
            pass
        assert proc_gone is None and sock.exists(), "the task worker left with a step here"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(60)
            conn.connect(str(sock))
            conn.sendall(b'{"script": "task_prolog"}')
            conn.shutdown(socket.SHUT_WR)
            assert json.loads(conn.recv(65536))["exit"] == 0
        step.kill()
        step.wait()
        assert proc.wait(60) == 0  # no step left: it leaves
        assert not sock.exists()
        # A worker of an earlier install (its config file rewritten since) does not stay.
        step = subprocess.Popen([str(stepd), "300"])
        proc = subprocess.Popen([sys.executable, "-c", start, str(sock), str(config)],
                                start_new_session=True)
        until(sock.exists, 30, "the worker's socket")
        config.write_text(config.read_text().replace('"public"', '"new": 1, "public"'))
        assert proc.wait(60) == 0
    finally:
        step.kill()
        step.wait()
        # Every process of the worker at once (its group): the first alone, its serving
        # process took its place and went on.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # (none left)
        proc.wait()
        shutil.rmtree(run, ignore_errors=True)


#: A task worker's plugins: each answer names the process that forked the request's child
#: (the worker's serving process) in an export line, as a TaskProlog answer does; asked
#: for ``oom_score_adj``, the child's own.
SERVER_DISPATCH = """
import os

def load(config):
    return None

def dispatch(_, request):
    if request.get("oom_score_adj"):
        with open("/proc/self/oom_score_adj") as fh:
            return {"exit": 0, "stdout": f"export OOM_SCORE_ADJ={fh.read().strip()}\\n"}
    return {"exit": 0, "stdout": f"export SERVED_BY={os.getppid()}\\n", "error": ""}
"""


def _dead(pid: int) -> bool:
    """Whether process `pid` has ended (gone, or a zombie its parent has not reaped)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return text[text.rindex(")") + 2] == "Z"


def _serving(pid: int) -> int | None:
    """A child of process `pid` that runs (not a zombie): a task worker's serving process."""
    for proc in Path("/proc").iterdir():
        try:
            text = (proc / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            return int(proc.name)
    return None


class _TaskWorker:
    """A Slurm task worker (`worker.main`, with the module's `settings` changed) serving
    `SERVER_DISPATCH`'s plugins, with a stand-in slurmstepd (a copy of sleep, at the path
    its config names) running: its socket `sock`, config `config`, process `proc` (leading
    a process group of its own, which every process of the worker is in), stderr in
    `errors`, and `servers`, the serving processes the test saw (each answer names the one
    that forked it)."""

    def __init__(self, tmp_path: Path, preexec_fn=None, settings: dict | None = None):
        code = tmp_path / "code"
        code.mkdir()
        (code / "serverdispatch.py").write_text(SERVER_DISPATCH)
        stepd = tmp_path / "slurmstepd"
        shutil.copy("/bin/sleep", stepd)
        self.config = tmp_path / "task.json"
        self.config.write_text(json.dumps({
            "loader": "serverdispatch:load", "public": True,
            "dispatcher": "serverdispatch:dispatch", "site_dirs": [str(code)],
            "slurmstepd": str(stepd)}))
        self.run = tmp_path / "run"
        self.sock = self.run / "w.sock"
        self.errors = tmp_path / "worker.err"
        self.servers: list[int] = []
        self.step = subprocess.Popen([str(stepd), "300"])
        start = "".join(f"worker.{name} = {value!r}; "
                        for name, value in (settings or {}).items())
        start = ("import sys; from pbsplug.adapters import worker; "
                 f"{start}sys.exit(worker.main(sys.argv[1:]))")
        with open(self.errors, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", start, str(self.sock), str(self.config)],
                stderr=err, preexec_fn=preexec_fn, start_new_session=True)

    def ask(self, request: bytes = b"{}") -> str:
        """Ask as TaskProlog does; the value the answer's export line sets."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(60)  # (a hang guard)
            conn.connect(str(self.sock))
            conn.sendall(request)
            conn.shutdown(socket.SHUT_WR)
            answer = json.loads(b"".join(iter(lambda: conn.recv(65536), b"")))
        return answer["stdout"].split("=", 1)[1].strip()

    def served_by(self) -> int:
        """The serving process that answers a request."""
        return int(self.ask())

    def said(self) -> list[str]:
        """The worker's log lines, but for the one a first process run as root without
        CAP_SYS_RESOURCE writes (as in this test's container, maybe) on its
        ``oom_score_adj`` (test_a_task_workers_first_process_that_may_not_lower_its_...)."""
        return [line for line in self.errors.read_text().splitlines()
                if " may not lower its oom_score_adj " not in line]

    def kill_server(self) -> None:
        """SIGKILL the last serving process seen, and wait until it has ended."""
        from pbsplug.testing import until

        os.kill(self.servers[-1], signal.SIGKILL)
        until(lambda: _dead(self.servers[-1]), 30, "the killed worker to end")

    def stop(self) -> None:
        """Every process of the worker killed at once (its group): one by one, a serving
        process killed first is replaced, and one whose first process is killed first
        takes its place."""
        self.step.kill()
        self.step.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # (none left)
        self.proc.wait()
        shutil.rmtree(self.run, ignore_errors=True)


def test_a_task_worker_killed_while_a_step_runs_serves_again_and_taskprolog_gets_its_answer(
        tmp_path):
    """TaskProlog runs as the job's user, who can neither run execjob_launch nor start the
    root task worker; only the next job's Prolog on the node started one. So a task worker
    killed while jobs ran there (out of memory, by hand) failed every later task on the
    node ('no pbsplug task worker at ...', exit 1). Its serving process is now a fork of
    the worker, which keeps the socket and the loaded plugins and forks another at once:
    the TaskProlog program (a real process) gets its answer from the new one, and one line
    says so. Once an install has changed the config, a killed one is not replaced (the
    new config's worker serves)."""
    from pbsplug.testing import until

    worker = _TaskWorker(tmp_path)
    program = tmp_path / "task_prolog"
    program.write_text(slurm_program.task_program_text(
        sys.executable, str(Path(slurm_program.__file__).parent), str(worker.sock)))
    program.chmod(0o755)

    def task_prolog() -> subprocess.CompletedProcess:
        return subprocess.run([str(program)], capture_output=True, text=True, timeout=60)

    def served_by(done: subprocess.CompletedProcess) -> int:
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        assert done.stdout.startswith("export SERVED_BY="), done.stdout
        return int(done.stdout.split("=", 1)[1])

    servers = worker.servers
    try:
        until(worker.sock.exists, 30, "the worker's socket")
        servers.append(served_by(task_prolog()))
        worker.kill_server()
        servers.append(served_by(task_prolog()))  # (the old code: no task worker, exit 1)
        assert servers[1] != servers[0]
        said = worker.said()
        assert said == [f"pbsplug worker: the worker's serving process {servers[0]} was "
                        "killed by signal 9 (SIGKILL): another serves its socket"], said
        worker.config.write_text(worker.config.read_text().replace(
            '"public"', '"new": 1, "public"'))
        os.kill(servers[-1], signal.SIGKILL)
        assert worker.proc.wait(60) == 1
        done = task_prolog()
        assert done.returncode == 1
        assert done.stderr == (f"pbsplug TaskProlog: no pbsplug task worker at "
                               f"{worker.sock} (the Prolog starts it)\n")
    finally:
        worker.stop()


def test_a_task_worker_started_with_sigchld_ignored_still_replaces_its_serving_process(
        tmp_path):
    """An ignored signal survives exec: a task worker started by a process that ignored
    SIGCHLD (a Prolog's parent, a site's wrapper) had its first process's wait for the
    serving one fail (ChildProcessError, with SIGCHLD ignored the kernel reaps it), so a
    serving process killed was not replaced, and the first process ended with a
    traceback. The worker sets SIGCHLD back to its default at start (`clean_process`)."""
    from pbsplug.testing import until

    worker = _TaskWorker(
        tmp_path, preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
    servers = worker.servers
    try:
        until(worker.sock.exists, 30, "the worker's socket")
        servers.append(worker.served_by())
        worker.kill_server()
        servers.append(worker.served_by())  # (waits in the socket's queue for the new one)
        assert servers[1] != servers[0]
        assert worker.proc.poll() is None, worker.errors.read_text()
    finally:
        worker.stop()


def test_a_task_worker_killed_again_and_again_stops_replacing_its_serving_process(tmp_path):
    """A cause that goes on killing the task worker's serving process (a limit it is always
    past, a site's script) had it replaced without end, one line in the log a second.
    Now, as systemd's StartLimitBurst and StartLimitIntervalSec bound a service's
    restarts, a serving process is replaced at most `RESTART_BURST` times in
    `RESTART_INTERVAL` seconds; killed once more within them, the worker says so in one
    line and leaves, its socket removed (the next job's Prolog starts one). Driven by a
    kill loop (replacements at once, an interval longer than the test): no timing in it."""
    from pbsplug.adapters import worker as worker_module
    from pbsplug.testing import until

    burst = 3
    worker = _TaskWorker(tmp_path, settings={"RESTART_EVERY": 0.0, "RESTART_BURST": burst,
                                             "RESTART_INTERVAL": 3600.0})
    killed: list[int] = []
    try:
        until(worker.sock.exists, 30, "the worker's socket")
        while worker.proc.poll() is None:
            assert len(killed) < 20, "still replaced after 20 kills in a row"
            server = until(lambda: worker.proc.poll() is not None
                           or _serving(worker.proc.pid), 30, "a serving process")
            if server is True:
                break  # (the worker has left)
            os.kill(server, signal.SIGKILL)
            killed.append(server)
            until(lambda: _dead(killed[-1]), 30, "the killed serving process to end")
        assert worker.proc.wait(60) == 1
        assert len(killed) == burst + 1
        said = worker.said()
        assert said == [
            *(f"pbsplug worker: the worker's serving process {pid} was killed by signal 9 "
              "(SIGKILL): another serves its socket" for pid in killed[:-1]),
            f"pbsplug worker: the worker's serving process {killed[-1]} was killed by "
            f"signal 9 (SIGKILL): not replaced, the worker's processes killed {burst + 1} "
            "times in 3600 s (the worker leaves; the next job's Prolog starts one)"], said
        assert not worker.sock.exists()
    finally:
        worker.stop()
    assert worker_module.RESTART_BURST == 5 and worker_module.RESTART_INTERVAL == 600.0


def test_the_restart_limit_counts_the_restarts_of_the_last_interval(monkeypatch):
    """The bound on a task worker's replacements slides: `RESTART_BURST` in any
    `RESTART_INTERVAL` seconds, so a serving process killed now and then (the OOM killer
    once an hour) is replaced for as long as the worker lives."""
    from pbsplug.adapters import worker

    monkeypatch.setattr(worker, "RESTART_BURST", 3)
    monkeypatch.setattr(worker, "RESTART_INTERVAL", 100.0)
    limit = worker._RestartLimit()
    assert [limit.allow(t) for t in (0.0, 10.0, 20.0, 30.0)] == [True, True, True, False]
    assert limit.allow(99.0) is False  # (0, 10 and 20 are within 100 s of it)
    assert limit.allow(100.0) is True  # 0 is not: two left in the interval, and this one
    assert limit.allow(105.0) is False
    assert [limit.allow(t) for t in (1000.0, 1000.0, 1000.0, 1000.0)] == [
        True, True, True, False]


def test_a_task_workers_first_process_is_kept_from_the_oom_killer_and_its_hooks_are_not(
        tmp_path):
    """The OOM killer could pick the task worker's first process, which replaces a killed
    serving process: after it nothing would. Run as root, it sets its ``oom_score_adj`` to
    -1000 (0 where it may not: a container without CAP_SYS_RESOURCE, as this test may run
    in); its serving process, and the hooks' forks of it, keep what the worker started
    with (123 here): they are not kept from the OOM killer."""
    from pbsplug.testing import missing, until

    if os.geteuid() != 0:
        missing("needs root (to lower oom_score_adj)")

    def may(values: str) -> bool:  # whether this machine lets root set these in turn
        writes = "; ".join(f"echo {v} > /proc/self/oom_score_adj" for v in values.split())
        return subprocess.run(["sh", "-ec", writes], capture_output=True).returncode == 0

    lowest = "-1000" if may("-1000") else "0" if may("123 0") else None
    if lowest is None:
        missing("root may not lower its oom_score_adj here")

    def start_with_123() -> None:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("123")

    worker = _TaskWorker(tmp_path, preexec_fn=start_with_123)
    try:
        until(worker.sock.exists, 30, "the worker's socket")
        server = worker.served_by()
        worker.servers.append(server)
        first = Path(f"/proc/{worker.proc.pid}/oom_score_adj").read_text().strip()
        serving = Path(f"/proc/{server}/oom_score_adj").read_text().strip()
        hook = worker.ask(b'{"oom_score_adj": 1}')
        assert (first, serving, hook) == (lowest, "123", "123")
        worker.kill_server()  # (a replacement too)
        server = worker.served_by()
        assert Path(f"/proc/{server}/oom_score_adj").read_text().strip() == "123"
    finally:
        worker.stop()


def test_a_task_workers_first_process_that_may_not_lower_its_oom_score_adj_says_so(tmp_path):
    """Lowering ``oom_score_adj`` below the least a process with CAP_SYS_RESOURCE last set
    (0 unless one set it: a container's runtime raising it) takes CAP_SYS_RESOURCE, which
    a container may drop; the first process's write then failed in silence, and nothing
    said it was not kept from the OOM killer. Now one line names the value it has and why,
    and the worker serves on. For real: root without CAP_SYS_RESOURCE (dropped from the
    bounding set before the worker is started), its ``oom_score_adj`` raised to 123 first
    (where this test has CAP_SYS_RESOURCE, that raises the least too: the first process
    keeps 123; where it has not, as in this test's container, it gets 0)."""
    from pbsplug.testing import missing, until

    if os.geteuid() != 0:
        missing("needs root (the worker lowers oom_score_adj only as root)")
    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, cap_sys_resource = 24, 24  # (linux/prctl.h, linux/capability.h)

    def raised_without_cap_sys_resource() -> None:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("123")
        if libc.prctl(pr_capbset_drop, cap_sys_resource, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    try:
        worker = _TaskWorker(tmp_path, preexec_fn=raised_without_cap_sys_resource)
    except subprocess.SubprocessError:
        missing("cannot drop CAP_SYS_RESOURCE from the bounding set here")
    try:
        until(worker.sock.exists, 30, "the worker's socket")
        worker.servers.append(worker.served_by())  # (it serves)
        first = worker.proc.pid
        has = Path(f"/proc/{first}/oom_score_adj").read_text().strip()
        assert has in ("0", "123")
        assert worker.errors.read_text().splitlines() == [
            f"pbsplug worker: the worker's first process {first} may not lower its "
            f"oom_score_adj to -1000 (Permission denied: that takes CAP_SYS_RESOURCE) and "
            f"has {has}: the OOM killer may pick it (its serving process then takes its "
            "place)"]
        assert worker.ask(b'{"oom_score_adj": 1}') == "123"  # (its hooks: as started)
    finally:
        worker.stop()


def test_when_a_task_workers_first_process_is_killed_its_serving_process_takes_its_place(
        tmp_path):
    """The task worker's first process replaces its serving process when that is killed;
    killed itself (SIGKILL: the OOM killer, by hand), nothing replaced the serving process
    when it was killed in turn, and every later task on the node failed until the next
    job's Prolog. The serving process notices it has lost its parent, takes its place once
    no request is in flight, with one line, and forks a serving process in turn, which is
    replaced when killed."""
    from pbsplug.testing import until

    worker = _TaskWorker(tmp_path)
    servers = worker.servers
    try:
        until(worker.sock.exists, 30, "the worker's socket")
        servers.append(worker.served_by())
        # the fork that answered may outlive its answer a moment: a child of the serving
        # process too, it would be taken for the one the take-over forks
        until(lambda: _serving(servers[0]) is None, 30, "the request's fork to end")
        first = worker.proc.pid
        os.kill(first, signal.SIGKILL)
        worker.proc.wait()
        # (the old code: the serving process served on, with no child to take its turn)
        servers.append(until(lambda: _serving(servers[0]), 30,
                             "the old serving process to fork a serving process"))
        assert worker.served_by() == servers[1]
        assert worker.sock.exists()
        worker.kill_server()
        servers.append(worker.served_by())
        assert servers[2] not in servers[:2]
        assert _serving(servers[0]) == servers[2]  # its new first process replaced it
        said = worker.said()
        assert said == [
            f"pbsplug worker: the worker's first process {first} has ended: its serving "
            f"process {servers[0]} takes its place",
            f"pbsplug worker: the worker's serving process {servers[1]} was killed by signal "
            "9 (SIGKILL): another serves its socket"], said
    finally:
        worker.stop()


def test_a_task_worker_whose_first_process_is_killed_again_and_again_stops_taking_its_place(
        tmp_path):
    """A serving process whose first process was killed takes its place and forks a serving
    process; a cause that went on killing each new first process (a root script, a limit
    it is always past) made an endless series of take-overs, one line each. Replacements
    and take-overs now share one budget, `RESTART_BURST` in `RESTART_INTERVAL` seconds (a
    killer alternating between the two processes gets no more than one that kills only
    one of them): here one replacement, then take-overs until the budget is spent, when
    the serving process says so in one line, does not take its place, removes the socket
    and leaves. Driven by a kill loop (an interval longer than the test): no timing."""
    from pbsplug.testing import until

    burst = 3
    worker = _TaskWorker(tmp_path, settings={"RESTART_EVERY": 0.0, "RESTART_BURST": burst,
                                             "RESTART_INTERVAL": 3600.0})
    killed: list[int] = []

    def serving_process_of(first: int) -> int:
        """The serving process `first` forked (not one killed already)."""
        return until(lambda: next((pid for pid in [_serving(first)]
                                   if pid is not None and pid not in killed), None), 30,
                     f"a serving process of {first}")

    try:
        until(worker.sock.exists, 30, "the worker's socket")
        first = worker.proc.pid
        serving = serving_process_of(first)
        os.kill(serving, signal.SIGKILL)  # a replacement: the same budget
        killed.append(serving)
        serving = serving_process_of(first)
        while True:
            assert len(killed) < 20, "still taking its place after 20 kills in a row"
            os.kill(first, signal.SIGKILL)
            killed.append(first)
            if first == worker.proc.pid:
                worker.proc.wait()
            # it takes its place (forks a serving process), or leaves
            after = until(lambda s=serving: _dead(s) or _serving(s), 30,
                          f"serving process {serving} to take its place or leave")
            if after is True:
                break
            first, serving = serving, after
        assert len(killed) == burst + 1
        said = worker.said()
        assert said == [
            f"pbsplug worker: the worker's serving process {killed[0]} was killed by signal "
            "9 (SIGKILL): another serves its socket",
            *(f"pbsplug worker: the worker's first process {pid} has ended: its serving "
              f"process {took} takes its place"  # (and was the next first process killed)
              for pid, took in zip(killed[1:-1], killed[2:], strict=True)),
            f"pbsplug worker: the worker's first process {killed[-1]} has ended: its serving "
            f"process {serving} does not take its place, the worker's processes killed "
            f"{burst + 1} times in 3600 s (the worker leaves; the next job's Prolog starts "
            "one)"], said
        assert not worker.sock.exists()
    finally:
        worker.stop()


def test_a_slurmstepd_a_package_upgrade_replaced_while_it_runs_is_still_slurms(
        tmp_path, monkeypatch):
    """A Slurm package upgraded while jobs run replaces slurmstepd's file: a running step's
    /proc/<pid>/exe then reads ``<path> (deleted)``. TaskProlog's check of who asks
    (`slurm_bridge._step_of`: the task's parent must be slurmstepd) and the task worker's
    stay (`worker._steps_running`) compared it with install's path as it was, so after a
    rolling upgrade the running jobs' later steps' tasks failed. A stand-in (sleep copied
    to a slurmstepd path, titled as a step) is replaced as a package upgrade does."""
    from pbsplug.adapters import worker
    from pbsplug.testing import missing

    if os.geteuid() != 0:
        missing("needs root: a step's slurmstepd is root's")
    stepd = tmp_path / "sbin" / "slurmstepd"
    stepd.parent.mkdir()
    shutil.copy("/bin/sleep", stepd)
    step = subprocess.Popen(["slurmstepd: [12.0]", "300"], executable=str(stepd))
    try:
        # Popen returns once the exec closed the child's close-on-exec pipe, which the
        # kernel does before it lays out the new program's arguments: its cmdline can
        # still read empty then (seen once in CI, under load).
        deadline = time.monotonic() + 30
        while not Path(f"/proc/{step.pid}/cmdline").read_bytes().startswith(b"slurmstepd:"):
            assert time.monotonic() < deadline, "the stand-in never showed its title"
            time.sleep(0.01)
        shutil.copy("/bin/sleep", stepd.with_name("slurmstepd.new"))
        os.replace(stepd.with_name("slurmstepd.new"), stepd)  # as dpkg and rpm do
        assert os.readlink(f"/proc/{step.pid}/exe") == f"{stepd} (deleted)"
        assert worker._steps_running(str(stepd))
        monkeypatch.setattr(slurm_bridge, "_proc_parent", lambda pid: step.pid)
        assert slurm_bridge._step_of(0, str(stepd)) == ("12", None)  # (no socket here)
        step.kill()
        step.wait()
        assert not worker._steps_running(str(stepd))
    finally:
        step.kill()
        step.wait()


@pytest.mark.parametrize(("exe", "stepd", "is_it"), [
    ("/usr/sbin/slurmstepd", "/usr/sbin/slurmstepd", True),
    ("/usr/sbin/slurmstepd (deleted)", "/usr/sbin/slurmstepd", True),
    # a file named 'slurmstepd (deleted)', removed: only root could make it, but not Slurm's
    ("/usr/sbin/slurmstepd (deleted) (deleted)", "/usr/sbin/slurmstepd", False),
    ("/usr/sbin/slurmstepd(deleted)", "/usr/sbin/slurmstepd", False),
    ("/usr/sbin/slurmstepd (deleted)x", "/usr/sbin/slurmstepd", False),
    ("/home/u/slurmstepd (deleted)", "/usr/sbin/slurmstepd", False),
    ("/home/u/usr/sbin/slurmstepd (deleted)", "/usr/sbin/slurmstepd", False),
    ("/usr/sbin/slurmstepd.old (deleted)", "/usr/sbin/slurmstepd", False),
    ("/usr/sbin/slurmstepd-wlm", "", True),  # no path recorded: the name
    ("/usr/sbin/slurmstepd-wlm (deleted)", "", True),
    ("/usr/bin/sleep (deleted)", "", False),
    ("/opt/slurmstepd/sleep (deleted)", "", False),
])
def test_slurmstepd_is_its_path_or_that_path_replaced_nothing_looser(exe, stepd, is_it):
    """The rule both checks share (`slurm_program.is_stepd`): the kernel's one
    ``" (deleted)"`` after install's path, and nothing else near it."""
    assert slurm_program.is_stepd(exe, stepd) is is_it


@pytest.mark.parametrize("node", [
    {"name": "n1", "state": "mixed", "state_flags": ["POWERED_DOWN"], "cpus": 4,
     "alloc_cpus": 1, "last_busy": 1700000000},  # 22.05
    {"name": "n1", "state": ["MIXED", "POWERED_DOWN"], "cpus": 4, "alloc_cpus": 1,
     "last_busy": 1700000000},  # 23.02
    {"name": "n1", "state": ["MIXED", "POWERED_DOWN"], "cpus": 4, "alloc_cpus": 1,
     "last_busy": {"set": True, "infinite": False, "number": 1700000000}},  # 23.11
])
def test_sinfo_json_nodes_of_every_slurm_read_alike(node):
    # 23.02's state list was read as one string: 'sleep' nodes looked 'free'
    attrs = slurm_power.vnode(slurm_power._node(node), True, 5)
    assert attrs["state"] == "sleep"
    assert attrs["resources_available"]["ncpus"] == 4
    assert attrs["resources_assigned"]["ncpus"] == 1  # (a job's cpus: it stays up)
    assert attrs["last_used_time"] == 1700000000


@pytest.mark.parametrize("node,why", [
    ({"name": "n1", "state": {"base": "IDLE"}}, "state .* is not a state and its flags"),
    ({"name": "n1", "state": ["IDLE", 3]}, "state .* is not a state and its flags"),
    # flags that are no list: a TypeError (one iterated), or a string read letter by
    # letter, its POWERED_DOWN missed
    ({"name": "n1", "state": "idle", "state_flags": True}, "state .* is not a state and "),
    ({"name": "n1", "state": "idle", "state_flags": "POWERED_DOWN"}, "state .* is not a "),
    ({"name": "n1", "state": ["IDLE"], "state_flags": 7}, "state .* is not a state and "),
    ({"name": "n1", "state": "idle", "cpus": "four"}, "cpus 'four' is not a count"),
    ({"name": "n1", "state": "idle", "cpus": -1}, "cpus '-1' is not a count"),
    ({"name": "n1", "state": "idle", "last_busy": {"set": True, "number": 1.5}},
     "last_busy .* is not a count"),
    ({"name": "n1", "state": "mixed", "alloc_cpus": "1"}, "alloc_cpus '1' is not a count"),
    ({"name": "n1", "state": "mixed", "alloc_cpus": -1}, "alloc_cpus '-1' is not a count"),
    ({"name": "n1", "state": "mixed", "alloc_cpus": True}, "alloc_cpus 'True' is not a "),
])
def test_sinfo_json_nodes_in_no_known_shape_are_one_line_errors(node, why):
    with pytest.raises(SlurmError, match=f"sinfo --json: node 'n1': {why}"):
        slurm_power._node(node)
    unset = {"name": "n1", "state": "idle", "last_busy": {"set": False}}
    assert slurm_power._node(unset)["last_busy"] == 0
    # a node sinfo does not list (a powered-down CLOUD node, a hidden partition's) is read
    # by its name alone, as the power programs' fallback does: the run goes on
    assert slurm_power.vnode(slurm_power._node({"name": "n9"}), True, 0)["state"]


@pytest.mark.parametrize("held", [{"alloc_cpus": 1}, {}], ids=["alloc_cpus", "none said"])
def test_a_mixed_node_idle_long_ago_by_last_busy_is_not_powered_off_under_its_job(
        held, tmp_path, pbsplug_plugins, register_plugin):
    """A node a job holds some of the cpus of is MIXED, PBS's free, and Slurm's last_busy
    stays where it was last idle while the job runs (seen on 22.05). sinfo's alloc_cpus
    was not read: the power plugin saw a free vnode idle for an hour and powered it off
    under its job. It is the vnode's resources_assigned.ncpus now, and the plugin keeps the
    node up; the idle node beside it is powered off."""
    from pbsplug.runner import Runner
    from pbsplug.testing import require_module

    pbsplug_power = require_module("pbsplug_power")
    state = tmp_path / "power-state"
    register_plugin(pbsplug_power, "power", isolation="inprocess", config={
        "driver": "command", "power_on_off_enable": "True", "node_idle_limit": "2",
        "min_node_down_delay": "1", "state_dir": str(state),
        "power_on_command": ["/bin/true", "{host}"],
        "power_off_command": ["/bin/true", "{host}"],
        "status_command": ["/bin/true", "{hosts}"]})
    old = int(time.time()) - 3600
    # (a Slurm that leaves alloc_cpus out: MIXED alone holds the node up)
    nodes = [{"name": "n1", "state": "mixed", "cpus": 2, **held, "last_busy": old},
             {"name": "n2", "state": "idle", "cpus": 2, "alloc_cpus": 0, "last_busy": old}]
    told = []

    class Told(_PowerSlurm):
        def update(self, *args):
            told.append(args)

    ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, Runner(pbsplug_plugins),
                               Told(nodes=nodes))
    assert slurm_power.periodic(ctx, {}, [])["stdout"] == "powered off: n2\n"
    assert [a[0] for a in told] == ["nodename=n2"]
    assert set(slurm_power._off_record(ctx)) == {"n2"}
    why = pbsplug_power.state.status(state)["hosts"]["n1"]
    assert "n1 has 1 cpus assigned to jobs, not idle" in json.dumps(why)


def test_the_plugins_reason_names_the_jobs_that_keep_a_slurm_node_up(
        tmp_path, pbsplug_plugins, register_plugin):
    """The periodic event's vnodes carried sinfo's alloc_cpus and no jobs, so the power
    plugin's reason for keeping a MIXED node up was 'n1 has 1 cpus assigned to jobs': the
    engine's names the job. Each vnode's jobs are squeue's now (those holding cpus there;
    the suspended ones in suspended_jobs), and the plugin's one reason (its decision's)
    names them on Slurm as on the engine (the plugin reads a vnode's jobs in each engine's
    form: test_power_hooks)."""
    from pbsplug.runner import Runner
    from pbsplug.testing import require_module

    pbsplug_power = require_module("pbsplug_power")
    state = tmp_path / "power-state"
    register_plugin(pbsplug_power, "power", isolation="inprocess", config={
        "driver": "command", "power_on_off_enable": "True", "node_idle_limit": "2",
        "min_node_down_delay": "1", "state_dir": str(state),
        "power_on_command": ["/bin/true", "{host}"],
        "power_off_command": ["/bin/true", "{host}"],
        "status_command": ["/bin/true", "{hosts}"]})
    old = int(time.time()) - 3600
    nodes = [{"name": f"n{i}", "state": base, "cpus": 2, "alloc_cpus": held,
              "last_busy": old}
             for i, base, held in ((1, "mixed", 1), (2, "idle", 0), (3, "idle", 0))]

    class Told(_PowerSlurm):
        def update(self, *args):
            self.asked.append(("scontrol", "update", *args))

    fake = Told(nodes=nodes, running="12|n1\n13|n1\n", suspended="7|n3\n")
    ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, Runner(pbsplug_plugins), fake)
    assert slurm_power.periodic(ctx, {}, [])["stdout"] == "powered off: n2\n"
    why = {h: pbsplug_power.state.status(state)["hosts"][h] for h in ("n1", "n3")}
    assert "n1 has a job (12), not idle" in json.dumps(why["n1"])
    assert "n3 has a suspended job (7), not idle" in json.dumps(why["n3"])
    assert ("squeue", "-h", "-a", "-t", "CF,R,CG,RS,SI,SO,ST", "-o", "%A|%N") in fake.asked


def test_a_failed_squeue_leaves_the_periodic_run_out_not_fired_with_no_jobs(tmp_path, caplog):
    """An empty job_list tells the plugins every job on the node is gone (cpuset reaps
    their cpusets, mjf sweeps their folders); before, a failed squeue gave one. Suspended
    and stopped jobs are asked for too."""
    asked, fired = [], []

    class Fake:
        def nodes(self, names):
            return {"n1": {"slurmd_start_time": "2026-11-24T02:00:00"}}

        def run(self, *args, check=True):
            asked.append(args)
            raise SlurmError("squeue: exit status 1: Unable to contact slurm controller")

    class Runner:
        def fire(self, event):
            fired.append(event.type)
            raise AssertionError("fired")

    ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, Runner(), Fake())
    (tmp_path / "started").mkdir()
    (tmp_path / "started" / "n1").write_text("2026-11-24T02:00:00")
    answer = slurm_bridge.health_check(ctx, {"SLURMD_NODENAME": "n1"}, [])
    assert answer["exit"] == 0 and fired == []
    assert asked[0][:6] == ("squeue", "-h", "-a", "-w", "n1", "-t")
    assert set(asked[0][6].split(",")) >= {"R", "CG", "CF", "S", "ST"}
    assert asked[0][7:] == ("-o", "%A")  # array tasks by their own id (%i: 1234_5)
    assert "exechost_periodic left out this time: squeue: exit status 1" in caplog.text


def test_resume_wakes_a_node_sinfo_does_not_list(monkeypatch):
    """ResumeProgram names the nodes to wake; one sinfo --json leaves out (a powered-down
    CLOUD node, a hidden partition's) was never put to the plugins: Slurm waited out
    ResumeTimeout and marked it DOWN."""
    import contextlib

    fired, woken = [], {}
    for name, value in (("_hostlist", lambda ctx, text: text.split(",")),
                        ("_resume_jobs", lambda env, hosts, ctx: {}),
                        ("config_value", lambda ctx, key: "60"),
                        ("_locked", lambda ctx: contextlib.nullcontext()),
                        ("_off_record", lambda ctx: {"cn9": 1}),
                        ("_woken_record", lambda ctx: woken),  # kept: woken once
                        ("_save_off", lambda *args: None), ("_save_record", lambda *args: None),
                        ("slurm_nodes", lambda ctx: []),
                        ("_fire", lambda ctx, vnodes, jobs, *rest: fired.append(
                            {n: v["state"] for n, v in vnodes.items()})),
                        ("_woke", lambda out, waiting: list(waiting))):
        monkeypatch.setattr(slurm_power, name, value)
    assert slurm_power.resume(None, {}, ["cn9"])["exit"] == 0
    assert fired == [{"cn9": "sleep"}] and "cn9" in woken


class _Hostnames:
    def hostnames(self, text):
        if "bad" in text:
            raise SlurmError(f"scontrol show hostnames {text}: exit status 1")
        return expand_hostlist(text)


def _wanted(jobs):
    return {i: j["estimated"]["exec_vnode"] for i, j in jobs.items()}


def test_each_job_of_slurms_resume_file_is_read_on_its_own(tmp_path, caplog):
    """One job of SLURM_RESUME_FILE that was no object (an AttributeError, caught around the
    whole loop) dropped the jobs after it, and the hosts only they needed were not woken."""
    path = tmp_path / "resume.json"
    path.write_text(json.dumps({"all_nodes": "n[1-6]", "jobs": [
        {"job_id": 11, "nodes": "n1"}, "junk", {"job_id": True, "nodes": "n2"},
        {"job_id": 12, "nodes": ["n2"]}, {"job_id": 13, "nodes": "bad[list"},
        {"job_id": 14, "nodes": "n[3-4]"}]}))
    ctx = type("Ctx", (), {"slurm": _Hostnames()})()
    jobs = slurm_power._resume_jobs({"SLURM_RESUME_FILE": str(path)}, ["n1", "n2", "n3",
                                                                      "n4"], ctx)
    # n2's jobs are left out: it wakes for the one need, as all did without the file
    assert _wanted(jobs) == {"11": "(n1:ncpus=1)", "14": "(n3:ncpus=1)+(n4:ncpus=1)",
                             "slurm-resume": "(n2:ncpus=1)"}
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == [f"resume: SLURM_RESUME_FILE {path}: job 1 left out: a JSON string, not "
                     "an object",
                     f"resume: SLURM_RESUME_FILE {path}: job 2 left out: job_id True is not "
                     "a job id",
                     f"resume: SLURM_RESUME_FILE {path}: job 3 left out: job 12: nodes "
                     "['n2'] is not a hostlist",
                     f"resume: SLURM_RESUME_FILE {path}: job 4 left out: job 13: scontrol "
                     "show hostnames bad[list: exit status 1"]


def test_a_job_named_twice_in_the_resume_file_wants_the_nodes_of_both(tmp_path):
    """A job_id twice in SLURM_RESUME_FILE (Slurm writes each once): the second's nodes
    replaced the first's, and the first's, counted as named, had no need and were not
    woken."""
    path = tmp_path / "resume.json"
    path.write_text(json.dumps({"jobs": [{"job_id": 7, "nodes": "n[1-2]"},
                                         {"job_id": 7, "nodes": "n[2-3]"}]}))
    ctx = type("Ctx", (), {"slurm": _Hostnames()})()
    jobs = slurm_power._resume_jobs({"SLURM_RESUME_FILE": str(path)}, ["n1", "n2", "n3"],
                                    ctx)
    assert _wanted(jobs) == {"7": "(n1:ncpus=1)+(n2:ncpus=1)+(n3:ncpus=1)"}


def test_resume_reads_slurm_23s_nodes_resume_and_wakes_hosts_no_job_names(tmp_path, caplog):
    """23.02 renamed a job's ``nodes`` ``nodes_resume`` (and added ``nodes_alloc``, the whole
    allocation): read as 22.05's, no job had nodes. Slurm's argument also names nodes that
    no job wants (an admin's state=power_up in the same pass): with jobs in the file, those
    had no need, were not woken, and Slurm marked them DOWN after ResumeTimeout."""
    path = tmp_path / "resume.json"
    ctx = type("Ctx", (), {"slurm": _Hostnames()})()
    env = {"SLURM_RESUME_FILE": str(path)}
    path.write_text(json.dumps({"all_nodes": "n[1-2]", "jobs": [{"job_id": 22,
                                                                 "nodes": "n1"}]}))
    assert _wanted(slurm_power._resume_jobs(env, ["n1", "n2"], ctx)) == {
        "22": "(n1:ncpus=1)", "slurm-resume": "(n2:ncpus=1)"}  # 22.05
    path.write_text(json.dumps({"all_nodes_resume": "n[1-3]", "jobs": [
        {"job_id": 21, "nodes_alloc": "n[1-4]", "nodes_resume": "n[1-2]", "extra": None,
         "features": None, "oversubscribe": "NO", "partition": "p", "reservation": None}]}))
    assert _wanted(slurm_power._resume_jobs(env, ["n1", "n2", "n3"], ctx)) == {
        "21": "(n1:ncpus=1)+(n2:ncpus=1)", "slurm-resume": "(n3:ncpus=1)"}
    # no file (Slurm without JSON-C, a run by hand): every host for the one need, quietly
    assert _wanted(slurm_power._resume_jobs({}, ["n1", "n2"], ctx)) == {
        "slurm-resume": "(n1:ncpus=1)+(n2:ncpus=1)"}
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("text,why", [
    ("{", "not read (its text: not JSON: Expecting property name"),
    ("[1, 2]", "has no list of jobs (it is a JSON array)"),
    ('{"jobs": {"job_id": 1}}', "has no list of jobs (its jobs are a JSON object)"),
    ('{"jobs": null}', "has no list of jobs (its jobs are a JSON null)"),
    ('{"all_nodes": "n1"}', "has no list of jobs (no 'jobs' in it)"),
    ("null", "has no list of jobs (it is a JSON null)"),
])
def test_a_resume_file_in_no_shape_slurm_writes_is_one_line(tmp_path, caplog, text, why):
    path = tmp_path / "resume.json"
    path.write_text(text)
    ctx = type("Ctx", (), {"slurm": _Hostnames()})()
    jobs = slurm_power._resume_jobs({"SLURM_RESUME_FILE": str(path)}, ["n1"], ctx)
    assert _wanted(jobs) == {"slurm-resume": "(n1:ncpus=1)"}
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.startswith(f"resume: SLURM_RESUME_FILE {path} {why}") and "\n" not in line


def test_one_sinfo_node_in_no_known_shape_is_left_out_alone(caplog):
    """One node in no shape pbsplug reads raised for the whole answer: no periodic decision
    for any node, and a ResumeProgram woke none of the nodes Slurm named."""
    answer = {"nodes": [{"name": "n1", "state": "idle", "cpus": 2},
                        {"name": "n2", "state": {"base": "IDLE"}}, "junk",
                        {"name": "n3", "state": ["IDLE", "POWERED_DOWN"], "cpus": 4}]}

    class Fake:
        def cluster_json(self, command):
            return answer

    ctx = type("Ctx", (), {"slurm": Fake()})()
    nodes = slurm_power.slurm_nodes(ctx)
    assert [(n["name"], n["state_flags"]) for n in nodes] == [("n1", []),
                                                             ("n3", ["POWERED_DOWN"])]
    assert [r.getMessage() for r in caplog.records] == [
        "sinfo --json: node 'n2': state \"{'base': 'IDLE'}\" is not a state and its "
        "flags; left out",
        "sinfo --json: node 2: 'junk' is not a node with a name; left out"]
    # an answer none of whose nodes is read is the first one's error, as before
    answer["nodes"] = answer["nodes"][1:3]
    with pytest.raises(SlurmError, match="^sinfo --json: node 'n2': state "):
        slurm_power.slurm_nodes(ctx)


def test_a_reservation_slurm_answers_oddly_for_keeps_its_nodes_up(caplog):
    """A reservation left out of the periodic run (ddef5cd) had its nodes powered off before
    or while it ran. One whose start does not read is kept as begun (its nodes stay up),
    logged; one whose nodes do not read is the run's error, so nothing is powered off."""
    class Fake(_Hostnames):
        answer = [{"ReservationName": "a", "Nodes": "n1", "State": "INACTIVE",
                   "StartTime": "2026-11-24T02:25:13"},
                  {"ReservationName": "c", "Nodes": "n2", "StartTime": "2026-13-45T99:00:00"},
                  {"ReservationName": "d", "Nodes": "n[3-4]", "State": "ACTIVE",
                   "StartTime": "2026-11-24T02:25:13"}]

        def reservations(self):
            return self.answer

    fake = Fake()
    resvs = slurm_power.reservations(type("Ctx", (), {"slurm": fake})())
    # (Slurm's local time, read here by datetime, not by the code's mktime)
    start = int(datetime.datetime(2026, 11, 24, 2, 25, 13).timestamp())
    assert {k: (v["reserve_state"], v["reserve_start"], v["resv_nodes"])
            for k, v in resvs.items()} == {
        "a": ("RESV_CONFIRMED", start, "(n1)"), "c": ("RESV_CONFIRMED", 0, "(n2)"),
        "d": ("RESV_RUNNING", start, "(n3)+(n4)")}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert lines[0].startswith("reservation 'c': its start not read, taken as begun (its "
                               "nodes stay up): StartTime='2026-13-45T99:00:00'"), lines
    fake.answer = [*fake.answer, {"ReservationName": "b", "Nodes": "bad[list",
                                  "StartTime": "2026-11-24T02:25:13"}]
    with pytest.raises(SlurmError, match=r"^reservation 'b': its nodes not read: scontrol "
                                         r"show hostnames bad\[list: exit status 1$"):
        slurm_power.reservations(type("Ctx", (), {"slurm": fake})())


@pytest.mark.parametrize("value,kept", [
    ("n[1-2]", {"n1", "n2"}),
    ("n[1-2]:1", {"n1", "n2"}),
    ("n[1-2]:1,n[5-6]:2", {"n1", "n2", "n5", "n6"}),
    ("n[1-2]:1,n[5-6]", {"n1", "n2", "n5", "n6"}),
    ("n3,n[1-2]:1", {"n1", "n2", "n3"}),
    ("(null)", set()),
])
def test_every_set_of_suspendexcnodes_is_kept_up(value, kept):
    """SuspendExcNodes is sets of nodes, each with an optional ':count' (slurm.conf(5)); only
    the first set was read, and the nodes of the others were powered off."""
    config = f"SuspendExcNodes         = {value}\nSuspendExcParts         = (null)\n"
    assert slurm_power.excluded(type("Ctx", (), {"slurm": _Hostnames()})(), config) == kept


def test_a_failed_sinfo_of_suspendexcparts_stops_the_run():
    """The nodes of SuspendExcParts are read with sinfo -p: one that failed (slurmctld busy)
    read as no nodes, and the periodic run powered off the nodes the admin had excluded."""
    class Fake(_Hostnames):
        def run(self, *args, check=True):
            assert args[0] == "sinfo", args
            if check:
                raise SlurmError("sinfo -h -o %R %N -p gpu: exit status 1: timed out")
            return ""

    with pytest.raises(SlurmError, match="sinfo .* -p gpu: exit status 1"):
        slurm_power.excluded(type("Ctx", (), {"slurm": Fake()})(),
                             "SuspendExcNodes         = (null)\nSuspendExcParts         = gpu\n")


#: ``scontrol -a -o -d show job`` of Slurm 22.05, copied from the tests' cluster: job 1 on
#: cpus 0-1 of n3, jobs 2 and 3 on cpus 0 and 1 of n4, job 5 on cpu 0 of n1 and of n2 (one
#: allocation for both), each line as scontrol ends it (a space, a line feed). Jobs 2 and
#: 3 (one cpu each on n4, submitted with job 1) are job 1's record with their id,
#: priority, node, cpu count and cpu (`_one_cpu_of_n4`): scontrol's text exactly.
_SHOW_JOBS_D = tuple(line + " \n" for line in (
    "JobId=1 JobName=sbatch UserId=root(0) GroupId=root(0) MCS_label=N/A "
        "Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None "
        "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 "
        "DerivedExitCode=0:0 RunTime=00:00:01 TimeLimit=00:10:00 TimeMin=N/A "
        "SubmitTime=2026-12-07T12:57:51 EligibleTime=2026-12-07T12:57:51 "
        "AccrueTime=2026-12-07T12:57:51 StartTime=2026-12-07T12:57:52 "
        "EndTime=2026-12-07T13:07:52 Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
        "LastSchedEval=2026-12-07T12:57:52 Scheduler=Backfill Partition=secret "
        "AllocNode:Sid=localhost:17784 ReqNodeList=n3 ExcNodeList=(null) NodeList=n3 "
        "BatchHost=n3 NumNodes=1 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
        "TRES=cpu=2,node=1,billing=2 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* "
        "JOB_GRES=(null)   Nodes=n3 CPU_IDs=0-1 Mem=0 GRES= MinCPUsNode=1 MinMemoryNode=0 "
        "MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 "
        "Licenses=(null) Network=(null) Command=(null) WorkDir=/tmp/pbsplug-slurm "
        "StdErr=/dev/null StdIn=/dev/null StdOut=/dev/null Power=",
    "JobId=5 JobName=sbatch UserId=root(0) GroupId=root(0) MCS_label=N/A "
        "Priority=4294901755 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None "
        "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 "
        "DerivedExitCode=0:0 RunTime=00:00:00 TimeLimit=365-00:00:00 TimeMin=N/A "
        "SubmitTime=2026-12-07T12:57:52 EligibleTime=2026-12-07T12:57:52 "
        "AccrueTime=2026-12-07T12:57:52 StartTime=2026-12-07T12:57:53 "
        "EndTime=2027-12-07T12:57:53 Deadline=N/A SuspendTime=None SecsPreSuspend=0 "
        "LastSchedEval=2026-12-07T12:57:53 Scheduler=Backfill Partition=all "
        "AllocNode:Sid=localhost:17784 ReqNodeList=n[1-2] ExcNodeList=(null) NodeList=n[1-2] "
        "BatchHost=n1 NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
        "TRES=cpu=2,node=2,billing=2 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* "
        "JOB_GRES=(null)   Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES= MinCPUsNode=1 MinMemoryNode=0 "
        "MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 "
        "Licenses=(null) Network=(null) Command=(null) WorkDir=/tmp/pbsplug-slurm "
        "StdErr=/dev/null StdIn=/dev/null StdOut=/dev/null Power=",
))


def _one_cpu_of_n4(job_id: int, cpu: int) -> str:
    return (_SHOW_JOBS_D[0].replace("=2 ", "=1 ").replace("TRES=cpu=2,", "TRES=cpu=1,")
            .replace("JobId=1 ", f"JobId={job_id} ").replace("n3 ", "n4 ")
            .replace("=4294901759 ", f"={4294901760 - job_id} ")
            .replace("CPU_IDs=0-1 ", f"CPU_IDs={cpu} "))


SHOW_JOB_D = "".join((_SHOW_JOBS_D[0], _one_cpu_of_n4(2, 0), _one_cpu_of_n4(3, 1),
                      _SHOW_JOBS_D[1]))


def test_a_slurm_nodes_jobs_are_the_engines_form_one_entry_a_cpu_the_job_holds_there():
    """A vnode's ``jobs`` on pbsplug's engine (as on PBS) is one ``<job id>/<cpu>`` entry a
    cpu a job holds there, in the cpus' order; on Slurm it was the bare ids squeue gives.
    Each is now a CPU id Slurm's allocation names (``scontrol -a -o -d show job``), with
    the adapter's job id (no server part: its events' ``job.id``); squeue still says which
    jobs hold a node, and a job whose cpus there do not read (none given, or read twice:
    a job's text can forge a record) is one entry, ``<id>/0``."""
    running = "3|n4\n2|n4\n1|n3\n5|n[1-2]\n"
    fake = _PowerSlurm(running=running, detail=SHOW_JOB_D)
    ctx = type("Ctx", (), {"slurm": fake})()
    assert slurm_power.running_jobs(ctx) == {
        "n4": ["2/0", "3/1"], "n3": ["1/0", "1/1"], "n1": ["5/0"], "n2": ["5/0"]}
    assert ("scontrol", "-a", "-o", "-d", "show", "job") in fake.asked
    forged = SHOW_JOB_D + SHOW_JOB_D.splitlines()[0].replace("CPU_IDs=0-1", "CPU_IDs=0") + "\n"
    fake = _PowerSlurm(running=running + "9|n1\n", detail=forged)
    assert slurm_power.running_jobs(type("Ctx", (), {"slurm": fake})()) == {
        "n4": ["2/0", "3/1"], "n3": ["1/0"], "n1": ["5/0", "9/0"], "n2": ["5/0"]}



#: The rest of a pending job's ``scontrol -a -o -d show job`` record past its name, as
#: 22.05 wrote it for job 9 (`_pending_record`), a line feed ending it.
_PENDING_REST = (
    " UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=0 Nice=0 Account=(null) "
    "QOS=(null) JobState=PENDING Reason=JobHeldUser Dependency=(null) Requeue=1 Restarts=0 "
    "BatchFlag=1 Reboot=0 ExitCode=0:0 DerivedExitCode=0:0 RunTime=00:00:00 "
    "TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-12-07T13:58:15 EligibleTime=Unknown "
    "AccrueTime=Unknown StartTime=Unknown EndTime=Unknown Deadline=N/A SuspendTime=None "
    "SecsPreSuspend=0 LastSchedEval=2026-12-07T13:58:15 Scheduler=Main Partition=all "
    "AllocNode:Sid=localhost:6019 ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=1 "
    "NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,mem=1000M,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* "
    "CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) "
    "DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) "
    "Command=(null) WorkDir=/tmp/pbsplug-slurm StdErr=/tmp/pbsplug-slurm/slurm-9.out "
    "StdIn=/dev/null StdOut=/tmp/pbsplug-slurm/slurm-9.out Power= \n")


def _pending_record(job_id: int, name: str) -> str:
    """A held job's record as 22.05 writes it, its name as its owner set it (``sbatch -H
    -J``; a line break in it is written as it is, so the name starts a line)."""
    return f"JobId={job_id} JobName={name}{_PENDING_REST}"


#: 22.05's record of a running job whose name forges an allocation (job 10 on the tests'
#: cluster, ``sbatch -w n1 -J 'x NodeList=z Nodes=a[0-99999] CPU_IDs=0-65535'``), on cpu 1
#: of n1 here (cpu 0 is job 5's in `SHOW_JOB_D`).
_FORGING_NAME = (
    "JobId=10 JobName=x NodeList=z Nodes=a[0-99999] CPU_IDs=0-65535 UserId=root(0) "
    "GroupId=root(0) MCS_label=N/A Priority=4294901752 Nice=0 Account=(null) QOS=(null) "
    "JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 "
    "Reboot=0 ExitCode=0:0 DerivedExitCode=0:0 RunTime=00:00:02 TimeLimit=UNLIMITED "
    "TimeMin=N/A SubmitTime=2026-12-07T13:58:15 EligibleTime=2026-12-07T13:58:15 "
    "AccrueTime=2026-12-07T13:58:15 StartTime=2026-12-07T13:58:15 EndTime=Unknown "
    "Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-07T13:58:15 "
    "Scheduler=Main Partition=all AllocNode:Sid=localhost:6019 ReqNodeList=n1 "
    "ExcNodeList=(null) NodeList=n1 BatchHost=n1 NumNodes=1 NumCPUs=1 NumTasks=1 "
    "CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,node=1,billing=1 Socks/Node=* "
    "NtasksPerN:B:S:C=0:0:*:* CoreSpec=* JOB_GRES=(null)   Nodes=n1 CPU_IDs=1 Mem=0 GRES= "
    "MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
    "OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) "
    "WorkDir=/tmp/pbsplug-slurm StdErr=/tmp/pbsplug-slurm/slurm-10.out StdIn=/dev/null "
    "StdOut=/tmp/pbsplug-slurm/slurm-10.out Power= \n")

_HOLDING = "3|n4\n2|n4\n1|n3\n5|n[1-2]\n"


def _expanded(monkeypatch, fake):
    """The hostlists the power run expands from scontrol's job records (`_Hostnames`, and
    `expand_hostlist` where the power module calls it itself; once scontrol -d was asked,
    squeue's are expanded before), each with the names it made, in a list."""
    calls = []
    detail = ("scontrol", "-a", "-o", "-d", "show", "job")

    def seen(text, names):
        if detail in fake.asked:
            calls.append((text, len(names or ())))
        return names

    monkeypatch.setattr(fake, "hostnames",
                        lambda text: seen(text, _Hostnames.hostnames(fake, text)))
    monkeypatch.setattr(slurm_power, "expand_hostlist",
                        lambda text, *limit: seen(text, expand_hostlist(text, *limit)),
                        raising=False)
    return calls


def test_a_job_name_that_forges_an_allocation_is_left_out_before_anything_is_expanded(
        monkeypatch):
    """A job's name comes before Slurm's NodeList in its record, so a name with ``NodeList=
    Nodes=a[0-99999] CPU_IDs=0-65535`` added allocations, and each was expanded (up to a
    million names, 65,536 cpus) before the record was found forged: any user made root's
    periodic run slow and large. The record, its NodeList there twice, is left out before
    any of its hostlists is expanded; its job is one entry, the others as they were."""
    fake = _PowerSlurm(running=_HOLDING + "10|n1\n", detail=SHOW_JOB_D + _FORGING_NAME)
    calls = _expanded(monkeypatch, fake)
    assert slurm_power.running_jobs(type("Ctx", (), {"slurm": fake})()) == {
        "n4": ["2/0", "3/1"], "n3": ["1/0", "1/1"], "n1": ["5/0", "10/0"], "n2": ["5/0"]}
    assert [text for text, _ in calls if "a[" in text] == []


def test_a_power_run_expands_no_more_nodes_than_squeue_named(monkeypatch):
    """However an allocation reads, one run expands at most as many node names from
    scontrol's allocations as squeue named (job, node) pairs: the rest is not expanded, its
    job one entry a node."""
    wide = SHOW_JOB_D.replace("Nodes=n[1-2] CPU_IDs=0", "Nodes=n[1-99999] CPU_IDs=0")
    fake = _PowerSlurm(running=_HOLDING, detail=wide)
    calls = _expanded(monkeypatch, fake)
    assert slurm_power.running_jobs(type("Ctx", (), {"slurm": fake})()) == {
        "n4": ["2/0", "3/1"], "n3": ["1/0", "1/1"], "n1": ["5/0"], "n2": ["5/0"]}
    assert 0 < sum(count for _, count in calls) <= 5  # (2, 3 on n4, 1 on n3, 5 on n1, n2)


def test_the_records_of_jobs_that_hold_no_node_are_not_parsed(monkeypatch):
    """Every record scontrol wrote was parsed, pending jobs' too (100,000 of them were 109
    MB and 7 s a run). A record whose leading JobId is no job squeue named as holding a
    node is skipped before it is parsed."""
    parsed = []

    def parse(line):
        parsed.append(line.split(" ", 1)[0])
        return parse_line(line)

    monkeypatch.setattr(slurm_power, "parse_line", parse)
    pending = "".join(_pending_record(n, "sbatch") for n in range(11, 14))
    fake = _PowerSlurm(running=_HOLDING, detail=pending + SHOW_JOB_D)
    assert slurm_power.running_jobs(type("Ctx", (), {"slurm": fake})()) == {
        "n4": ["2/0", "3/1"], "n3": ["1/0", "1/1"], "n1": ["5/0"], "n2": ["5/0"]}
    assert sorted(parsed) == ["JobId=1", "JobId=2", "JobId=3", "JobId=5"]


@pytest.mark.parametrize("name", [
    "x\nJobId=1 JobName=y",  # a line as a record starts: job 1 is asked for alone
    "x\nJobId=1 NodeList=n9 Nodes=n3 CPU_IDs=5",  # the review's: no record's start
])
def test_another_jobs_name_with_a_line_break_leaves_a_jobs_cpus_as_they_are(name):
    """A job name with a line break then ``JobId=1 ...`` (22.05 writes it as it is) made
    job 1 read twice, and job 1 was one entry, ``1/0``, on a node where it holds two cpus.
    A record is a job's by its own leading fields alone; a job whose record starts two
    lines is asked for alone, its answer's first line its record."""
    fake = _PowerSlurm(running=_HOLDING, detail=_pending_record(9, name) + SHOW_JOB_D,
                       alone={"1": SHOW_JOB_D.split("\n", 1)[0] + "\n"})
    assert slurm_power.running_jobs(type("Ctx", (), {"slurm": fake})()) == {
        "n4": ["2/0", "3/1"], "n3": ["1/0", "1/1"], "n1": ["5/0"], "n2": ["5/0"]}


def _one_cpu_of(job_id: int, node: str) -> str:
    """Job `job_id`'s record on cpu 1 of `node` alone, as 22.05 writes it."""
    return _one_cpu_of_n4(job_id, 1).replace("n4 ", f"{node} ")


def test_every_job_another_jobs_name_forges_a_record_of_is_asked_for_alone_once():
    """Ten jobs read twice were asked for alone a run, and the rest were one entry a node,
    ``<id>/0``: one user's job name with a line break then ``JobId=<id> JobName=y`` for
    each running job made every node's cpus past the tenth job wrong. Each job squeue named
    that is read twice is asked for alone now, once however often it is forged; a job
    squeue did not name is never asked for: a run asks scontrol no more than once more a
    job squeue named holding a node."""
    named = range(1, 31)
    running = "".join(f"{j}|m{j}\n" for j in named)
    name = "x" + "".join(f"\nJobId={j} JobName=y" for j in named) * 50 + "".join(
        f"\nJobId={k} JobName=z" for k in range(1000, 6000))  # (jobs squeue did not name)
    detail = _pending_record(99, name) + "".join(_one_cpu_of(j, f"m{j}") for j in named)
    fake = _PowerSlurm(running=running, detail=detail,
                       alone={str(j): _one_cpu_of(j, f"m{j}") for j in named})
    assert slurm_power.running_jobs(type("Ctx", (), {"slurm": fake})()) == {
        f"m{j}": [f"{j}/1"] for j in named}
    alone = [args[6] for args in fake.asked if len(args) == 7 and args[0] == "scontrol"]
    assert sorted(alone, key=int) == [str(j) for j in named]


def _fake_scontrol(folder: Path, answers: dict[str, str], stall_after: int = 0) -> Path:
    """An scontrol that reads commands on its input as 22.05's does: it echoes each
    (``scontrol: <line>``), answers ``show job <id>`` with ``answers[<id>]`` and says
    "invalid keyword" of any other line on stderr; each run adds a line to ``runs``.
    With `stall_after`, it stops answering (sleeps) after that many jobs."""
    for asked, text in answers.items():
        (folder / f"answer-{asked}").write_text(text)
    stall = (f'[ "$n" -ge {stall_after} ] && exec sleep 600\n' if stall_after else "")
    script = folder / "scontrol"
    script.write_text(
        f'#!/bin/sh\necho run >> "{folder}/runs"\nn=0\n'
        'while IFS= read -r line; do\n  echo "scontrol: $line"\n  case "$line" in\n'
        f'    "show job "*) {stall}      n=$((n+1))\n'
        f'      cat "{folder}/answer-${{line#show job }}" 2>/dev/null;;\n'
        '    *) echo "invalid keyword: $line" >&2;;\n  esac\ndone\n')
    script.chmod(0o755)
    return script


def test_the_jobs_read_twice_are_asked_for_alone_through_one_scontrol_process(tmp_path):
    """Each job read twice was asked for alone by a scontrol process of its own: one
    user's held job names forging every running job's record cost a process a running job
    of the site (10,000 jobs: over a minute), under the lock ResumeProgram waits on. They
    are asked through one process now, fed a ``show job <id>`` line each; the answers
    are told apart by a random line scontrol echoes, so a job's text that forges another
    job's record (``JobId=2 ...`` in job 1's name) is not taken for that job's."""
    named = range(1, 31)
    running = "".join(f"{j}|m{j}\n" for j in named)
    name = "x" + "".join(f"\nJobId={j} JobName=y" for j in named)
    detail = _pending_record(99, name) + "".join(_one_cpu_of(j, f"m{j}") for j in named)
    answers = {str(j): _one_cpu_of(j, f"m{j}") for j in named}
    # job 1's own name forges job 2's record on another cpu: it comes first in the stream
    answers["1"] = _one_cpu_of(1, "m1").replace("JobName=", "JobName=a\n" + _one_cpu_of(
        2, "m2").replace("CPU_IDs=1 ", "CPU_IDs=0 ").rstrip("\n") + " JobName=", 1)
    _fake_scontrol(tmp_path, answers)

    class Dump(Slurm):
        def run(self, *args, check=True):
            if args[:1] == ("squeue",):
                return running if "CF,R,CG,RS,SI,SO,ST" in args else ""
            assert args == ("scontrol", "-a", "-o", "-d", "show", "job"), args
            return detail

    ctx = type("Ctx", (), {"slurm": Dump(bin_dir=str(tmp_path), env=None)})()
    # (job 1's own record stops at its name's line break: no allocation read, one entry)
    assert slurm_power.running_jobs(ctx) == {f"m{j}": [f"{j}/{int(j > 1)}"] for j in named}
    assert (tmp_path / "runs").read_text() == "run\n"


def test_jobs_not_answered_alone_in_time_are_one_entry_a_node_logged_once(tmp_path, caplog,
                                                                        monkeypatch):
    """One scontrol process for every job read twice, with an overall deadline: the jobs
    it has not answered by then are one entry a node (``<id>/0``), in one log line."""
    named = range(1, 6)
    running = "".join(f"{j}|m{j}\n" for j in named)
    detail = _pending_record(99, "x" + "".join(f"\nJobId={j} JobName=y" for j in named)) + (
        "".join(_one_cpu_of(j, f"m{j}") for j in named))
    _fake_scontrol(tmp_path, {str(j): _one_cpu_of(j, f"m{j}") for j in named}, stall_after=2)

    class Dump(Slurm):
        def run(self, *args, check=True):
            if args[:1] == ("squeue",):
                return running if "CF,R,CG,RS,SI,SO,ST" in args else ""
            return detail

    monkeypatch.setattr(slurm_power, "ALONE_SECONDS", 4.0)
    ctx = type("Ctx", (), {"slurm": Dump(bin_dir=str(tmp_path), env=None)})()
    with caplog.at_level(logging.WARNING, "pbsplug.slurm"):
        got = slurm_power.running_jobs(ctx)
    assert got == {"m1": ["1/1"], "m2": ["2/1"], "m3": ["3/0"], "m4": ["4/0"], "m5": ["5/0"]}
    late = [r.getMessage() for r in caplog.records if "not answered alone" in r.getMessage()]
    assert late == ["periodic: 3 of the 5 jobs read twice not answered alone within 4 s (3 "
                    "first); each is one entry on each of its nodes"]


#: ``scontrol show config`` of Slurm 22.05 (no ``--json``: "unrecognized option"), its
#: first line and those around PrivateData and SlurmUser, copied from the tests' cluster
#: run with PrivateData=jobs,cloud (Slurm writes its flags in its own order).
SHOW_CONFIG_PRIVATE_JOBS = "".join(line + "\n" for line in (
    "Configuration data as of 2026-12-07T12:58:39",
    "PriorityParameters      = (null)",
    "PrioritySiteFactorParameters = (null)",
    "PrioritySiteFactorPlugin = (null)",
    "PriorityType            = priority/basic",
    "PrivateData             = cloud,jobs",
    "ProctrackType           = proctrack/linuxproc",
    "Prolog                  = (null)",
    "PrologEpilogTimeout     = 65534",
    "PrologSlurmctld         = (null)",
    "PrologFlags             = (null)",
    "PropagatePrioProcess    = 0",
    "PropagateResourceLimits = ALL",
    "PropagateResourceLimitsExcept = (null)",
    "RebootProgram           = (null)",
    "ReconfigFlags           = (null)",
    "RequeueExit             = (null)",
    "RequeueExitHold         = (null)",
    "ResumeFailProgram       = (null)",
    "ResumeProgram           = (null)",
    "ResumeRate              = 300 nodes/min",
    "ResumeTimeout           = 60 sec",
    "ResvEpilog              = (null)",
    "ResvOverRun             = 0 min",
    "ResvProlog              = (null)",
    "ReturnToService         = 2",
    "RoutePlugin             = route/default",
    "SchedulerParameters     = nohold_on_prolog_fail,batch_sched_delay=0,bf_interval=1",
    "SchedulerTimeSlice      = 30 sec",
    "SchedulerType           = sched/backfill",
    "ScronParameters         = (null)",
    "SelectType              = select/cons_tres",
    "SelectTypeParameters    = CR_CORE",
    "SlurmUser               = root(0)",
    "SlurmctldAddr           = (null)",
))

class _PowerSlurm(_Hostnames):
    """Slurm's commands as the power programs use them, `Slurm.run`'s way: a command that
    fails raises `SlurmError` naming it, its exit status and what it said, unless asked
    with check=False, which returns its (empty) output."""

    def __init__(self, config="", nodes=None, squeue_fails=False, suspended="", running="",
                 detail="", alone=None):
        self.config, self.squeue_fails = config, squeue_fails
        self.nodes = nodes if nodes is not None else [{"name": "n1", "state": "idle"}]
        #: ``squeue -h -a -t S -o %A|%N``'s answer, and that of the states holding cpus
        #: (what 22.05 prints: id|nodes lines, the nodes a hostlist)
        self.suspended, self.running = suspended, running
        #: ``scontrol -a -o -d show job``'s answer (`SHOW_JOB_D`), and that of ``... show
        #: job <id>`` by id
        self.detail, self.alone = detail, alone or {}
        self.asked: list[tuple[str, ...]] = []

    def jobs_alone(self, job_ids, seconds):
        """`Slurm.jobs_alone`: each job's first line in `alone` (asked as run's would be)."""
        found = {}
        for job_id in job_ids:
            try:
                found[job_id] = self.run("scontrol", "-a", "-o", "-d", "show", "job",
                                         job_id).split("\n", 1)[0]
            except SlurmError:
                pass
        return found, []

    def run(self, *args, check=True):
        self.asked.append(args)
        if args == ("scontrol", "-a", "-o", "-d", "show", "job"):
            return self.detail
        if args[:6] == ("scontrol", "-a", "-o", "-d", "show", "job"):
            if args[6] not in self.alone:  # (22.05's words, for a job it does not know)
                raise SlurmError(f"/usr/bin/{' '.join(args)}: exit status 1: "
                                 "slurm_load_jobs error: Invalid job id specified")
            return self.alone[args[6]]
        if args[0] == "scontrol":
            return "SuspendExcNodes         = (null)\nSuspendExcParts         = (null)\n" + (
                self.config)
        if args[0] == "squeue" and self.squeue_fails:
            if check:
                raise SlurmError(f"/usr/bin/{' '.join(args)}: exit status 1: slurm_load_jobs "
                                 "error: Unable to contact slurm controller")
            return ""
        if args[:5] == ("squeue", "-h", "-a", "-t", "S"):
            return self.suspended
        if args[:5] == ("squeue", "-h", "-a", "-t", "CF,R,CG,RS,SI,SO,ST"):
            return self.running
        return ""

    def cluster_json(self, command):
        return {"nodes": self.nodes}

    def reservations(self):
        return []


@pytest.mark.parametrize("script,argv,first", [
    ("periodic", [], "periodic job -: /usr/bin/squeue -h -a -t S -o %A|%N: exit status 1: "),
    ("suspend", ["n1"], "suspend job -: SuspendProgram n1: kept up, but Slurm now counts them "
                        "as powered down: /usr/bin/squeue -h -a -t S -o %A|%N: "
                        "exit status 1: "),
])
def test_a_failed_squeue_is_the_power_runs_error_and_nothing_is_powered_off(
        tmp_path, caplog, script, argv, first):
    """pending_jobs ran squeue unchecked: one that failed (slurmctld busy, a timeout) read as
    no pending jobs, and the plugin could power off the idle nodes they wait for. It is the
    run's error now, one line naming the command and what it said, and no decision is taken
    (the nodes stay up)."""
    fired = []

    class Runner:
        def fire(self, event):
            fired.append(event.type)
            raise AssertionError("fired with no pending jobs")

    ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, Runner(),
                               _PowerSlurm(squeue_fails=True))
    answer = slurm_bridge.dispatch(ctx, {"script": script, "env": {}, "argv": argv})
    assert answer["exit"] == 1 and fired == []
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.startswith(first) and line.endswith("Unable to contact slurm controller")
    assert "\n" not in line
    assert "n1" not in slurm_power._off_record(ctx)


def test_suspendprogram_keeps_up_a_node_with_a_suspended_job(tmp_path, caplog):
    """Slurm shows a node whose only job is suspended IDLE, and its SuspendProgram may be
    asked to power it off (an admin's state=power_down). It read no suspended jobs: the
    plugins' decision saw n1 and n2 idle and its driver powered them off under jobs 7 and 8.
    They are kept up now, each in one line naming it and its jobs (the periodic run's
    squeue, one function), and only n3 is decided on."""
    fired = []

    class Runner:
        def fire(self, event):
            fired.append(sorted(event.vnode_list))
            return Outcome("periodic", True, changes={"vnode_list": {
                name: {"state": "sleep"} for name in event.vnode_list}})

    nodes = [{"name": f"n{i}", "state": "idle"} for i in (1, 2, 3)]
    fake = _PowerSlurm(nodes=nodes, suspended="7|n[1-2]\n8|n2\n")
    ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, Runner(), fake)
    with caplog.at_level(logging.INFO, logger="pbsplug.slurm"):
        assert slurm_power.suspend(ctx, {}, ["n[1-3]"])["exit"] == 0
    assert ("squeue", "-h", "-a", "-t", "S", "-o", "%A|%N") in fake.asked
    assert fired == [["n3"]]
    assert set(slurm_power._off_record(ctx)) == {"n3"}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "SuspendProgram n1: kept up: it has a suspended job (7), not idle (the resume needs "
        "it); Slurm now counts it as powered down (docs/slurm.md)",
        "SuspendProgram n2: kept up: it has suspended jobs (7, 8), not idle (the resume "
        "needs it); Slurm now counts it as powered down (docs/slurm.md)"]
    # Every node asked for holds one: no decision at all, and nothing recorded as off.
    fired.clear()
    assert slurm_power.suspend(ctx, {}, ["n[1-2]"])["exit"] == 0
    assert fired == [] and set(slurm_power._off_record(ctx)) == {"n3"}


def test_suspendprogram_names_a_nodes_first_suspended_jobs_and_counts_the_rest(caplog):
    """A node holding many suspended jobs (oversubscribed) is one line of bounded length;
    many such nodes are the first few lines and one counting the rest."""
    many = {"n1": [str(i) for i in range(100, 130)]}
    many.update({f"m{i}": ["9"] for i in range(20)})
    assert slurm_power._without_suspended(["n1", "n2", *(f"m{i}" for i in range(20))],
                                          many) == ["n2"]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == slurm_power.LOGGED_LEFT_OUT + 1
    assert lines[0].startswith("SuspendProgram n1: kept up: it has suspended jobs (100, 101,")
    assert "109 and 20 more), not idle" in lines[0]
    assert lines[-1] == ("SuspendProgram: 16 more nodes with suspended jobs kept up (not "
                         "logged one by one)")


@pytest.mark.parametrize("answer", [
    {"nodes": ["junk", {"name": "cn8", "state": {"base": "IDLE"}}]},  # none read
    {"sinfo": [{"nodes": {"nodes": []}}]},  # 24.05's shape, not read yet
    SlurmError("/usr/bin/sinfo --json: exit status 1: Socket timed out"),
])
def test_resume_wakes_the_nodes_slurm_names_when_sinfo_gives_no_node(monkeypatch, caplog,
                                                                     answer):
    """An answer of sinfo --json with no node read (or a failed sinfo) was ResumeProgram's
    error: it woke none of the nodes Slurm named for a job, which waited out ResumeTimeout
    before Slurm marked them DOWN and requeued it. Slurm's argument is its decision: each
    node it names is woken as one sinfo does not list, with one line saying so."""
    import contextlib

    class Fake:
        def cluster_json(self, command):
            if isinstance(answer, Exception):
                raise answer
            return answer

    fired, woken = [], {}
    for name, value in (("_hostlist", lambda ctx, text: text.split(",")),
                        ("_resume_jobs", lambda env, hosts, ctx: {}),
                        ("config_value", lambda ctx, key: "60"),
                        ("_locked", lambda ctx: contextlib.nullcontext()),
                        ("_off_record", lambda ctx: {}),
                        ("_woken_record", lambda ctx: woken),
                        ("_save_off", lambda *args: None), ("_save_record", lambda *args: None),
                        ("_fire", lambda ctx, vnodes, jobs, *rest: fired.append(
                            {n: v["state"] for n, v in vnodes.items()})),
                        ("_woke", lambda out, waiting: list(waiting))):
        monkeypatch.setattr(slurm_power, name, value)
    ctx = type("Ctx", (), {"slurm": Fake()})()
    assert slurm_power.resume(ctx, {}, ["cn8,cn9"])["exit"] == 0
    assert fired == [{"cn8": "sleep", "cn9": "sleep"}] and set(woken) == {"cn8", "cn9"}
    lines = [r.getMessage() for r in caplog.records
             if r.levelno >= logging.WARNING and r.getMessage().startswith("ResumeProgram")]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith("ResumeProgram cn[8-9]: Slurm's nodes not read (")
    assert lines[0].endswith("); each is woken as Slurm asks")


def test_nodes_in_a_state_of_suspendexcstates_are_not_poweroff_eligible(tmp_path,
                                                                        monkeypatch):
    """SuspendExcStates (slurm.conf, Slurm 23.02 and later: node states kept out of power
    saving) was not read: a DOWN or drained node was poweroff_eligible to the plugin. Each
    node whose base state or one of its flags is named there is not; the others are, as
    before, in each shape sinfo --json has written."""
    nodes = [{"name": "n1", "state": "idle"},
             {"name": "n2", "state": "idle", "state_flags": ["DRAIN"]},  # 22.05
             {"name": "n3", "state": ["DOWN", "NOT_RESPONDING"]},  # 23.02
             {"name": "n4", "state": ["IDLE", "RESERVED"]},
             {"name": "n5", "state": ["IDLE", "MAINTENANCE"]}]
    seen = {}

    def fire(ctx, vnodes, jobs=None, resvs=None):
        seen.update({n: v["poweroff_eligible"] for n, v in vnodes.items()})
        return Outcome("periodic", True)

    monkeypatch.setattr(slurm_power, "_fire", fire)
    for value, eligible in (("down,DRAIN,Reserved", {"n1", "n5"}),
                            ("(null)", {"n1", "n2", "n3", "n4", "n5"}),
                            ("MAINTENANCE", {"n1", "n2", "n3", "n4"})):
        seen.clear()
        config = f"SuspendExcStates        = {value}\n"
        ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, None,
                                   _PowerSlurm(config, nodes))
        assert slurm_power.periodic(ctx, {}, [])["exit"] == 0
        assert {n for n, e in seen.items() if e} == eligible, value
    # a Slurm before 23.02 has no such line: every node eligible, as before
    ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, None, _PowerSlurm("", nodes))
    slurm_power.periodic(ctx, {}, [])
    assert all(seen.values())


def test_suspendexcstates_names_read_as_slurmctld_reads_them(tmp_path, monkeypatch, caplog):
    """scontrol show config shows SuspendExcStates as slurm.conf gave it, and slurmctld
    takes a name in any case, cut short or longer ('maint', 'DRAINED', 'do'): those named no
    state here exactly, so a node in maintenance or drained was poweroff_eligible while
    Slurm kept it up. 'IDLE', which slurmctld ignores, kept every idle node up here. Each
    name is read as slurmctld reads it now; one it ignores is ignored, in one log line."""
    nodes = [{"name": "n1", "state": "idle"},
             {"name": "n2", "state": "idle", "state_flags": ["DRAIN"]},
             {"name": "n3", "state": ["DOWN", "NOT_RESPONDING"]},
             {"name": "n4", "state": ["IDLE", "RESERVED"]},
             {"name": "n5", "state": ["IDLE", "MAINTENANCE"]},
             {"name": "n6", "state": ["IDLE", "PLANNED"]}]
    seen = {}

    def fire(ctx, vnodes, jobs=None, resvs=None):
        seen.update({n: v["poweroff_eligible"] for n, v in vnodes.items()})
        return Outcome("periodic", True)

    monkeypatch.setattr(slurm_power, "_fire", fire)
    everyone = {"n1", "n2", "n3", "n4", "n5", "n6"}
    for value, kept in (("maint", {"n5"}), ("Drained", {"n2"}), ("do", {"n3"}),
                        ("not_resp,RES", {"n3", "n4"}), ("pl", {"n6"}),
                        ("IDLE", set()), ("down,IDLE,Bogus", {"n3"})):
        seen.clear()
        caplog.clear()
        ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, None,
                                   _PowerSlurm(f"SuspendExcStates        = {value}\n", nodes))
        assert slurm_power.periodic(ctx, {}, [])["exit"] == 0
        assert {n for n, e in seen.items() if e} == everyone - kept, value
        lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        if "IDLE" in value:
            assert lines[0].startswith("SuspendExcStates: 'IDLE'")
            assert lines[0].endswith(": no state Slurm keeps up (slurmctld ignores it too); "
                                     "ignored")
        else:
            assert not lines
    assert [slurm_power.exc_state(t) for t in ("d", "CO", "p", "dOwN", "DOWNS", "FAILING")] \
        == ["DRAIN", None, None, "DOWN", None, "FAIL"]


def test_a_flood_of_sinfo_nodes_or_resume_file_jobs_left_out_is_counted(tmp_path, caplog):
    """sinfo's nodes and SLURM_RESUME_FILE's jobs left out were logged one line each, with no
    cap: an answer of thousands filled the log. Each is capped as squeue's lines are: the
    first `LOGGED_LEFT_OUT` one by one, then one line counts the rest."""
    shown = slurm_power.LOGGED_LEFT_OUT

    class Fake(_Hostnames):
        def cluster_json(self, command):
            return {"nodes": [{"name": "n1", "state": "idle"}, *([7] * 100)]}

    ctx = type("Ctx", (), {"slurm": Fake()})()
    assert [n["name"] for n in slurm_power.slurm_nodes(ctx)] == ["n1"]
    assert caplog.messages == [
        *(f"sinfo --json: node {n}: 7 is not a node with a name; left out"
          for n in range(1, shown + 1)),
        f"sinfo --json: {100 - shown} more nodes left out (not logged one by one)"]
    caplog.clear()
    path = tmp_path / "resume.json"
    path.write_text(json.dumps({"jobs": [{"job_id": 11, "nodes": "n1"}, *([7] * 100)]}))
    jobs = slurm_power._resume_jobs({"SLURM_RESUME_FILE": str(path)}, ["n1", "n2"], ctx)
    assert _wanted(jobs) == {"11": "(n1:ncpus=1)", "slurm-resume": "(n2:ncpus=1)"}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        *(f"resume: SLURM_RESUME_FILE {path}: job {n} left out: a JSON number, not an "
          "object" for n in range(1, shown + 1)),
        f"resume: SLURM_RESUME_FILE {path}: {100 - shown} more jobs left out (not logged "
        "one by one)"]


def test_one_more_item_left_out_is_counted_in_the_singular(caplog):
    """Past `LOGGED_LEFT_OUT` items left out, the count line said "1 more lines"."""
    shown = slurm_power.LOGGED_LEFT_OUT
    text = "".join(f"{n}|2026-11-24T02:25:13\n" for n in range(shown + 1))
    ctx = type("Ctx", (), {"slurm": type("Fake", (_Hostnames,), {
        "run": lambda self, *args, check=True: text})()})()
    assert slurm_power.pending_jobs(ctx) == {}
    assert caplog.messages[-1] == "squeue: 1 more line left out (not logged one by one)"
    assert len(caplog.messages) == shown + 1


@pytest.mark.parametrize("count", [1, 2, 100])
def test_the_resume_files_jobs_wanting_hosts_are_logged_up_to_the_cap(tmp_path, caplog,
                                                                      count):
    """Each job of SLURM_RESUME_FILE that wants hosts was one info line, with no cap (the
    jobs left out were capped): a file of thousands filled the log. They are capped the
    same way: the first `LOGGED_LEFT_OUT` one by one, then one line counts the rest; each
    job's hosts are one hostlist."""
    caplog.set_level(logging.INFO, logger="pbsplug.slurm")
    shown = slurm_power.LOGGED_LEFT_OUT
    total = shown + count
    path = tmp_path / "resume.json"
    path.write_text(json.dumps({"jobs": [{"job_id": 10 + n, "nodes": f"n[{n}00-{n}09]"}
                                         for n in range(1, total + 1)]}))
    hosts = [f"n{n}0{i}" for n in range(1, total + 1) for i in range(10)]
    ctx = type("Ctx", (), {"slurm": _Hostnames()})()
    jobs = slurm_power._resume_jobs({"SLURM_RESUME_FILE": str(path)}, hosts, ctx)
    assert len(jobs) == total and "slurm-resume" not in jobs
    assert caplog.messages == [
        *(f"resume: job {10 + n} wants n[{n}00-{n}09] (SLURM_RESUME_FILE)"
          for n in range(1, shown + 1)),
        f"resume: SLURM_RESUME_FILE {path}: {count} more job{'s' * (count != 1)} with hosts "
        "to wake (not logged one by one)"]


def test_the_power_programs_name_many_hosts_as_one_hostlist(tmp_path, caplog, monkeypatch):
    """SuspendProgram's "kept up" error and warning and ResumeProgram's wake-all warning
    named each host: 300 nodes were one line of about 1,500 characters. They name them as
    one Slurm hostlist."""
    ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, None,
                               _PowerSlurm(squeue_fails=True))
    answer = slurm_bridge.dispatch(ctx, {"script": "suspend", "env": {}, "argv": ["n[1-300]"]})
    assert answer["exit"] == 1
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.startswith("suspend job -: SuspendProgram n[1-300]: kept up, but Slurm ")
    caplog.clear()
    monkeypatch.setattr(slurm_power, "_fire", lambda *args: Outcome("periodic", True))
    ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, None, _PowerSlurm())
    assert slurm_power.suspend(ctx, {}, ["n[001-300],login"])["exit"] == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "SuspendProgram login,n[001-300]: the plugins' decision keeps them up, but Slurm "
        "now counts them as powered down (docs/slurm.md)"]
    caplog.clear()

    class Fails(_PowerSlurm):
        def cluster_json(self, command):
            raise SlurmError("/usr/bin/sinfo --json: exit status 1: Socket timed out")

    hosts = expand_hostlist("n[1-300]")
    assert slurm_power._resume_nodes(type("Ctx", (), {"slurm": Fails()})(), hosts,
                                     False) is None
    assert caplog.messages == ["ResumeProgram n[1-300]: Slurm's nodes not read (/usr/bin/sinfo "
                               "--json: exit status 1: Socket timed out); each is woken as "
                               "Slurm asks"]


@pytest.mark.parametrize("name", ["\u00b2", "1\u00b2", "a\x00b"])
def test_slurmuser_names_passwd_cannot_look_up_are_no_user_not_a_traceback(name):
    """Install and the programs looked SlurmUser up with code of their own each, taking any
    str.isdigit() name as a uid: int('\u00b2') was a ValueError out of both (and getpwnam
    of a name with a NUL). One lookup (`slurm_read.passwd_entry`) serves both now."""
    with pytest.raises(slurm.SlurmInstallError, match="no such user on this host"):
        slurm.user_entry(name)
    config = {"slurm_user": {"name": name}}
    assert slurm_bridge.slurm_user_entry(config) is None
    with pytest.raises(OSError, match="is no user on this host: run install again"):
        slurm_bridge.slurm_user_entry(config, refuse_missing=True)
    assert slurm.user_entry("0").pw_name == "root"  # a uid, as slurm.conf may give it
    assert slurm_bridge.slurm_user_entry({"slurm_user": {"name": "0"}}) is None  # root


def test_a_slurmuser_named_by_digits_is_that_user_first_as_slurm_reads_it(monkeypatch):
    """Slurm looks SlurmUser up by name first, and as a uid only when no user has that
    name. pbsplug took a name of digits for a uid first: a user named '1000' (uid 5000)
    was taken for uid 1000's user (here root), not the one slurmctld runs as. A number no
    user is named is still a uid, as strtol reads it."""
    import pwd

    real = pwd.getpwnam
    digits = pwd.struct_passwd(("1000", "x", 5000, 5000, "", "/home/n", "/bin/sh"))

    def getpwnam(name):
        return digits if name == "1000" else real(name)

    def getpwuid(uid):
        if uid not in (0, 1000):
            raise KeyError(uid)
        return pwd.struct_passwd(("root", "x", 0, 0, "", "/root", "/bin/sh"))

    monkeypatch.setattr(pwd, "getpwnam", getpwnam)
    monkeypatch.setattr(pwd, "getpwuid", getpwuid)
    assert slurm.user_entry("1000").pw_uid == 5000
    assert slurm_bridge.slurm_user_entry({"slurm_user": {"name": "1000"}}).pw_uid == 5000
    assert slurm.user_entry("0").pw_name == "root"
    assert slurm.user_entry(" +0").pw_name == "root"  # (strtol's reading)
    for name in ("0x0", "1e3", "0 ", str(1 << 32)):
        with pytest.raises(slurm.SlurmInstallError, match="no such user on this host"):
            slurm.user_entry(name)


def test_a_root_run_meeting_slurmusers_state_folder_says_to_run_as_slurmuser(tmp_path):
    """With a SlurmUser that is not root its power programs write the state folder, so it is
    SlurmUser's; root (an admin running 'pbsplug slurm periodic' by hand) is refused it, and
    the refusal says to run it as SlurmUser, not to make the folder root's (which would stop
    SlurmUser's programs). A folder writable by others is refused as before."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root (a folder of another uid's)")
    folder = tmp_path / "state"
    folder.mkdir(mode=0o755)
    os.chown(folder, 64998, 64998)  # a bare uid stands for SlurmUser
    ctx = type("Ctx", (), {"power_dir": folder})()
    with pytest.raises(safedirs.UnsafeFolder) as caught:
        with slurm_power._locked(ctx):
            pass
    message = str(caught.value)
    assert "\n" not in message
    assert str(folder) in message and "uid 64998" in message
    assert "run this as SlurmUser" in message and "not as root" in message
    assert not (folder / "power.lock").exists()
    os.chmod(folder, 0o777)
    with pytest.raises(safedirs.UnsafeFolder) as caught:
        with slurm_power._locked(ctx):
            pass
    assert "SlurmUser" not in str(caught.value)


# -- a SlurmUser that is not root ----------------------------------------------------------

def test_slurmuser_is_read_from_slurm_conf_and_every_bad_input_is_one_line(tmp_path):
    _slurm_user()  # (the packages' user, read back below)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nslurmuser = slurm   # the packages' user\n")
    assert slurm.read_slurm_user(conf) == "slurm"
    conf.write_text("ClusterName=x\n#SlurmUser=slurm\n")
    assert slurm.read_slurm_user(conf) == "root"  # Slurm's default
    conf.write_text("SlurmUser=pbsplug-no-such-user\n")
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.read_slurm_user(conf)
    assert str(caught.value) == (
        f"SlurmUser=pbsplug-no-such-user in {conf}: no such user on this host (slurmctld runs "
        "its programs as that user): create it, or correct slurm.conf")
    conf.write_text('SlurmUser="a b"\n')
    with pytest.raises(slurm.SlurmInstallError, match=r"^SlurmUser='a b' in .*: expected a "
                                                      r"user name$"):
        slurm.read_slurm_user(conf)
    # Several settings on one line: Slurm 22.05 refuses the line ('Parse error', slurmctld
    # does not start), so no SlurmUser is read from it: one line naming the file and line
    conf.write_text("ClusterName=x\nControlMachine=c SlurmUser=nobody\n")
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.read_slurm_user(conf)
    assert str(caught.value) == (
        f"{conf}:2: 'ControlMachine=c SlurmUser=nobody': SlurmUser shares its line with "
        "other settings; Slurm reads one Key=value a line (but on NodeName, PartitionName... "
        "lines) and refuses this one ('Parse error'): put each on a line of its own and run "
        "install again")
    conf.write_text('SlurmUser="nobody" SlurmdUser=root\n')
    with pytest.raises(slurm.SlurmInstallError, match=r"^.*:1: .*SlurmUser shares its line"):
        slurm.read_slurm_user(conf)
    # A node line's pairs are the node's; a quoted value and a comment are read as Slurm does
    conf.write_text('SlurmUser="nobody"  # quoted\nNodeName=n1 Features=aslurmuser=x\n')
    assert slurm.read_slurm_user(conf) == "nobody"
    for missing_conf in (tmp_path / "absent.conf", tmp_path):  # absent; a folder
        with pytest.raises(slurm.SlurmInstallError) as caught:
            slurm.read_slurm_user(missing_conf)
        message = str(caught.value)
        assert message.startswith(f"{missing_conf}: cannot read slurm.conf (")
        assert "\n" not in message and "give --slurm-conf" in message


def test_slurmuser_is_read_from_the_included_files_with_no_scontrol(tmp_path):
    """With Include lines, SlurmUser was asked of 'scontrol show config', which needs a
    running slurmctld (and says what it read when it started): now the included files are
    read where their lines stand and the last SlurmUser read wins, as Slurm 22.05 does;
    scontrol is never run (there is none in /nowhere)."""
    conf = tmp_path / "slurm.conf"
    (tmp_path / "more.conf").write_text("SlurmUser=nobody\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deeper.conf").write_text("SlurmUser=root\n")
    conf.write_text("ClusterName=x\nSlurmUser=root\nInclude more.conf\n")
    assert slurm.read_slurm_user(conf) == "nobody"  # the included file's, read last
    conf.write_text("ClusterName=x\nInclude more.conf\nSlurmUser=root\n")
    assert slurm.read_slurm_user(conf) == "root"  # slurm.conf's, read after it
    (tmp_path / "more.conf").write_text("SlurmUser=nobody\nInclude sub/deeper.conf\n")
    conf.write_text("Include more.conf\n")
    assert slurm.read_slurm_user(conf) == "root"  # nested: the deeper file's, read last
    (tmp_path / "sub" / "deeper.conf").write_text("SlurmUser=pbsplug-no-such-user\n")
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.read_slurm_user(conf)
    assert str(caught.value) == (
        f"SlurmUser=pbsplug-no-such-user in {tmp_path}/sub/deeper.conf:1: no such user on "
        "this host (slurmctld runs its programs as that user): create it, or correct "
        "slurm.conf")
    conf.write_text("Include absent.conf\n")
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.read_slurm_user(conf)
    assert str(caught.value).startswith(f"{conf}:1: Include absent.conf: cannot read "
                                        f"{tmp_path}/absent.conf (")
    assert "\n" not in str(caught.value)


def _slurm_user(name: str = "slurm"):
    """The passwd entry of Debian's SlurmUser, its packages installed first where they are
    not (`install_packages`): these tests may run before any that starts the real Slurm,
    as on a fresh machine."""
    import pwd

    from pbsplug.testing import missing

    from .slurm_cluster import install_packages

    try:
        return pwd.getpwnam(name)
    except KeyError:
        why = install_packages()
    try:
        return pwd.getpwnam(name)
    except KeyError:
        missing(f"needs the user {name} (Debian's slurmctld package makes it)"
                + (f": {why}" if why else ""))


def _earlier_state(shared_tmp: Path):
    """As root: SlurmUser's passwd entry, and a --state-dir holding an earlier install's
    power records and lock (root's)."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: hands folders to SlurmUser")
    pw = _slurm_user()
    state = shared_tmp / "state"
    state.mkdir()
    (state / "power_off.json").write_text('{"n3": 1700000000}')
    (state / "power.lock").write_text("")
    return pw, state


def test_the_plan_gives_slurmusers_programs_a_home_and_log_of_their_own(dists, tmp_path):
    plugins = _plugins(dists, tmp_path)
    asked = []

    def read() -> str:
        asked.append(1)
        return "slurm"

    _slurm_user()
    p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)], bin_dir="/usr/bin",
                   slurm_conf="", state_dir="/var/spool/x", log_file="/var/log/x.log",
                   run_dir="/run/x", slurm_user=read)
    assert asked == [1]  # the power programs run as SlurmUser: it is asked
    assert p.config["power_dir"] == "/var/spool/x/power"
    assert p.config["slurm_user"] == {"name": "slurm", "home": "/var/spool/x/slurmuser",
                                      "log_file": "/var/spool/x/slurmuser/x.log"}
    assert os.path.isabs(p.config["home"])
    p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)], bin_dir="/usr/bin",
                   slurm_conf="", state_dir="/var/spool/x", log_file="/var/log/x.log",
                   run_dir="/run/x")
    assert "slurm_user" not in p.config and p.config["power_dir"] == "/var/spool/x/power"
    node_only = dists.enabled("nodeonly", "from pbsplug import hookimpl\n\n@hookimpl\n"
                              "def execjob_begin(event):\n    pass\n", tmp_path)
    p = slurm.plan(node_only, tmp_path / "programs", dirs=[str(dists.root)],
                   bin_dir="/usr/bin", slurm_conf="", state_dir="/var/spool/x", log_file="",
                   run_dir="/run/x", slurm_user=lambda: pytest.fail("SlurmUser asked"))
    assert "slurm_user" not in p.config and "power_dir" not in p.config


def test_the_bridge_sets_pbsplug_home_for_the_user_that_runs_the_events(monkeypatch):
    monkeypatch.delenv("PBSPLUG_HOME", raising=False)
    config = {"plugins": {}, "home": "/var/spool/root-home",
              "slurm_user": {"name": "slurm", "home": "/var/spool/x/slurmuser",
                             "log_file": ""}}
    slurm_bridge.load(config)  # root: the install's home
    assert os.environ["PBSPLUG_HOME"] == "/var/spool/root-home"
    slurm_bridge.load(config, as_slurm_user=True)  # root's periodic, run as SlurmUser
    assert os.environ["PBSPLUG_HOME"] == "/var/spool/x/slurmuser"
    old = {"plugins": {}}  # an earlier install's config: the environment as it is
    monkeypatch.setenv("PBSPLUG_HOME", "/elsewhere")
    ctx = slurm_bridge.load({**old, "state_dir": "/var/spool/x"})
    assert os.environ["PBSPLUG_HOME"] == "/elsewhere"
    assert ctx.power_dir == Path("/var/spool/x")  # its records where it kept them


def test_install_makes_slurmusers_folders_and_moves_an_earlier_installs_records(shared_tmp):
    """Run as root: --state-dir stays root's (HealthCheckProgram runs as root); power and
    slurmuser under it, and a state_dir the site gave a plugin run as SlurmUser, become
    SlurmUser's, through a descriptor; an earlier install's records move into power."""
    pw, state = _earlier_state(shared_tmp)
    plugin_state = shared_tmp / "plugin-state"
    plugin_state.mkdir()
    (plugin_state / "power_booting.json").write_text('{"booting": {}}')
    p = slurm.Plan(shared_tmp / "programs", {
        "plugins": {"parts": {"config": {"state_dir": str(plugin_state)},
                              "attributes": {"events": ["periodic"]}}},
        "power_dir": str(state / "power"),
        "slurm_user": {"name": "slurm", "home": str(state / "slurmuser"),
                       "log_file": str(state / "slurmuser" / "x.log")}}, {}, {})
    done = slurm.prepare_state(p, str(state))
    assert any("moved power_off.json" in line for line in done)
    for folder in (state / "power", state / "slurmuser", plugin_state):
        info = folder.stat()
        assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (pw.pw_uid, pw.pw_gid,
                                                                     0o755), folder
    assert state.stat().st_uid == 0  # HealthCheckProgram's, root's
    moved = state / "power" / "power_off.json"
    assert moved.read_text() == '{"n3": 1700000000}' and moved.stat().st_uid == pw.pw_uid
    assert (plugin_state / "power_booting.json").stat().st_uid == pw.pw_uid
    assert (state / "power.lock").stat().st_uid == 0  # the earlier lock is left alone
    assert slurm.prepare_state(p, str(state))  # again: nothing to move, nothing refused
    # A folder of a third user's is not taken over; a link is not followed.
    os.chown(state / "slurmuser", 65534, 65534)
    with pytest.raises(slurm.SlurmInstallError, match=r"owned by uid 65534"):
        slurm.prepare_state(p, str(state))
    os.rmdir(state / "slurmuser")
    os.symlink("/etc", state / "slurmuser")
    with pytest.raises(slurm.SlurmInstallError, match=r"is not a folder \(a link"):
        slurm.prepare_state(p, str(state))
    assert Path("/etc").stat().st_uid == 0
    # A folder two plugins share, one run as SlurmUser and one as root: refused.
    p.config["plugins"]["node"] = {"config": {"state_dir": str(plugin_state) + "/"},
                                   "attributes": {"events": ["execjob_begin"]}}
    os.unlink(state / "slurmuser")
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.prepare_state(p, str(state))
    assert str(caught.value) == (
        f"state_dir {plugin_state} is plugin parts's, which runs as SlurmUser, and plugin "
        "node's, which runs as root: give them folders of their own")


@pytest.mark.parametrize("root_event", ["execjob_begin", "exechost_startup",
                                        "execjob_launch"])
def test_install_gives_slurmuser_no_state_dir_of_a_plugin_that_also_runs_as_root(
        shared_tmp, root_event):
    """A plugin whose hooks run as SlurmUser (slurmctld's programs) and as root (slurmd's,
    the task worker) had its state_dir handed to SlurmUser on every host install ran on:
    on a node, a folder of SlurmUser's where root's hooks run; on a controller that is also
    a node, one folder that cannot be both users'. Refused in one line naming the plugin,
    its hooks and the two users, before anything is made."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: install hands folders to SlurmUser as root")
    _slurm_user()
    state = shared_tmp / "state"
    plugin_state = shared_tmp / "plugin-state"
    p = slurm.Plan(shared_tmp / "programs", {
        "plugins": {"both": {"config": {"state_dir": str(plugin_state)},
                             "attributes": {"events": ["periodic", "queuejob", root_event]}}},
        "power_dir": str(state / "power"),
        "slurm_user": {"name": "slurm", "home": str(state / "slurmuser"),
                       "log_file": str(state / "slurmuser" / "x.log")}}, {}, {})
    expected = (
        f"plugin both's hooks run as SlurmUser slurm (periodic) and as root ({root_event}): "
        f"its state_dir {plugin_state} cannot be both users'; leave state_dir unset (each "
        "user's programs then keep the plugin's state in their own pbsplug home) or set its "
        "events to one user's")
    for check in (slurm.check_state_dirs, slurm.prepare_state):
        with pytest.raises(slurm.SlurmInstallError) as caught:
            check(p, str(state))
        assert str(caught.value) == expected
    assert not plugin_state.exists() and not state.exists()
    # Without a state_dir, or with a SlurmUser of root's, there is nothing to hand over.
    del p.config["plugins"]["both"]["config"]["state_dir"]
    slurm.check_state_dirs(p, str(state))
    p.config["plugins"]["both"]["config"]["state_dir"] = str(plugin_state)
    del p.config["slurm_user"]
    slurm.check_state_dirs(p, str(state))


def test_status_names_each_slurmuser_folder_of_the_wrong_owner_or_mode(dists, tmp_path,
                                                                      shared_tmp, monkeypatch):
    """`pbsplug slurm status` compared the programs and slurm.conf only: the folders install
    hands to SlurmUser could be root's (install run as another user, a restored backup) or
    open to everyone, and it said "installed" while every power program failed. One line
    per folder, naming it, the owner found and the owner expected."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: install hands folders to SlurmUser")
    import socket

    _slurm_user()
    monkeypatch.setenv("PBSPLUG_HOME", str(tmp_path / "home"))  # (install records there)
    state = shared_tmp / "state"
    plugins = _plugins(dists, tmp_path)
    p = slurm.plan(plugins, shared_tmp / "programs", dirs=[str(dists.root)],
                   bin_dir="/usr/bin", slurm_conf="", state_dir=str(state), log_file="",
                   run_dir="/run/x", native=False, slurm_user="slurm")
    slurm.write_programs(p)
    slurm.prepare_state(p, str(state))
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"SlurmctldHost={socket.gethostname().split('.')[0]}\nSlurmUser=slurm\n")

    def problems() -> list[str]:
        return [line for line in slurm.status(p, conf)[0]["problems"]
                if not line.startswith("slurm.conf lacks")]

    assert problems() == []
    fix = "run 'pbsplug slurm install' again, as root, on the controller"
    power, own = state / "power", state / "slurmuser"
    os.chown(power, 0, 0)
    own.chmod(0o777)
    assert problems() == [
        f"{power} (the power programs' folder) is a folder owned by root, mode 0755; "
        f"expected a folder owned by slurm, writable by no one else: {fix}",
        f"{own} (SlurmUser's pbsplug home) is a folder owned by slurm, mode 0777; expected "
        f"a folder owned by slurm, writable by no one else: {fix}"]
    rows = slurm.status(p, conf)
    assert rows[0]["state"] == "differs"
    own.rmdir()
    os.symlink("/etc", own)
    assert problems()[1].startswith(f"{own} (SlurmUser's pbsplug home) is a link owned by root")
    own.unlink()
    assert problems()[1] == (f"{own} (SlurmUser's pbsplug home) is missing on this host, a "
                             f"controller: {fix}")
    conf.write_text("SlurmctldHost=elsewhere\n")  # (a node: the folders are the controller's)
    assert len(problems()) == 1


def test_install_records_where_the_plugins_run_as_slurmuser_for_roots_commands(
        dists, tmp_path, shared_tmp, monkeypatch):
    """Root's commands (`pbsplug power status`) read a plugin's records in the pbsplug home
    of the user its hooks run as (`pbsplug.hook_home`): install records, in the installer's
    home, each plugin whose hooks run as a SlurmUser that is not root, with that user's
    home; an install without one, and uninstall, remove the record."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: install hands folders to SlurmUser")
    from pbsplug import hook_home

    pw = _slurm_user()
    home = tmp_path / "home"
    monkeypatch.setenv("PBSPLUG_HOME", str(home))
    state = shared_tmp / "state"
    # parts: periodic (SlurmUser's) and node events (root's); nodeonly: root's alone
    dists.add("nodeonly", "from pbsplug import hookimpl\n\n@hookimpl\n"
                          "def execjob_begin(event):\n    pass\n")
    plugins = dists.enabled("parts", MIXED, tmp_path, also=("nodeonly",))

    def install(user: str) -> list[str]:
        p = slurm.plan(plugins, shared_tmp / "programs", dirs=[str(dists.root)],
                       bin_dir="/usr/bin", slurm_conf="", state_dir=str(state), log_file="",
                       run_dir="/run/x", native=False, slurm_user=user)
        slurm.write_programs(p)
        return slurm.prepare_state(p, str(state))

    done = install("slurm")
    assert done[-1] == (f"recorded in {home}/hook_homes.json that parts run as slurm with the "
                        f"pbsplug home {state}/slurmuser (root's commands read their records "
                        "there)")
    away = hook_home("parts")
    assert (away.user, away.uid, away.home) == ("slurm", pw.pw_uid, state / "slurmuser")
    assert hook_home("nodeonly") is None  # root's hooks: root's home
    # SlurmUser root again (its folders made root's first: install refuses another user's)
    for folder in (state / "power", state / "slurmuser"):
        for path in (folder, *folder.iterdir()):
            os.chown(path, 0, 0)
    install("root")
    assert hook_home("parts") is None and not (home / "hook_homes.json").exists()
    install("slurm")
    assert any("hook_homes.json" in line
               for line in slurm.uninstall(shared_tmp / "programs", None))
    assert hook_home("parts") is None


def test_the_config_is_readable_by_slurmusers_group_alone(dists, tmp_path, shared_tmp):
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: the config's group is SlurmUser's")
    pw = _slurm_user()
    plugins = _plugins(dists, tmp_path)
    p = slurm.plan(plugins, shared_tmp / "programs", dirs=[str(dists.root)],
                   bin_dir="/usr/bin", slurm_conf="", state_dir=str(shared_tmp / "state"),
                   log_file="", run_dir="/run/x", native=False, slurm_user="slurm")
    slurm.write_programs(p)
    info = (shared_tmp / "programs" / slurm.CONFIG_NAME).stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, pw.pw_gid, 0o640)
    p = slurm.plan(plugins, shared_tmp / "programs", dirs=[str(dists.root)],
                   bin_dir="/usr/bin", slurm_conf="", state_dir=str(shared_tmp / "state"),
                   log_file="", run_dir="/run/x", native=False)
    slurm.write_programs(p)
    info = (shared_tmp / "programs" / slurm.CONFIG_NAME).stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, 0, 0o600)


@pytest.mark.parametrize("where", ["state-dir", "root's hooks/tmp", "the programs' folder",
                                   "the log's folder"])
def test_install_gives_slurmuser_no_folder_roots_programs_use(shared_tmp, where):
    """Hostile review: a state_dir the site gives a plugin run as SlurmUser that is a folder
    root's programs use (--state-dir itself: HealthCheckProgram's marks; the pbsplug home's
    hooks/tmp: root's plugins' records; the programs' folder: the config; the log's folder)
    or above one, is refused, and nothing is handed over: SlurmUser would own what root's
    programs read."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: hands folders to SlurmUser")
    _slurm_user()
    state = shared_tmp / "state"
    home = shared_tmp / "home"
    programs = shared_tmp / "programs"
    logs = shared_tmp / "log"
    for folder in (state, home / "hooks" / "tmp", programs, logs):
        folder.mkdir(parents=True)
    (home / "hooks" / "tmp" / "cpuset.json").write_text("{}")
    (programs / slurm.CONFIG_NAME).write_text("{}")
    folder = {"state-dir": state, "root's hooks/tmp": home / "hooks" / "tmp",
              "the programs' folder": programs, "the log's folder": logs}[where]
    p = slurm.Plan(programs, {
        "plugins": {"parts": {"config": {"state_dir": str(folder)},
                              "attributes": {"events": ["periodic"]}}},
        "home": str(home), "log_file": str(logs / "x.log"),
        "power_dir": str(state / "power"),
        "slurm_user": {"name": "slurm", "home": str(state / "slurmuser"),
                       "log_file": str(state / "slurmuser" / "x.log")}}, {}, {})
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.prepare_state(p, str(state))
    message = str(caught.value)
    assert "\n" not in message and f"state_dir {folder}" in message and "parts" in message
    for path in (folder, *folder.iterdir()):
        assert path.stat().st_uid == 0, path
    # Above one of them: refused as well.
    p.config["plugins"]["parts"]["config"]["state_dir"] = str(shared_tmp)
    with pytest.raises(slurm.SlurmInstallError):
        slurm.prepare_state(p, str(state))
    assert shared_tmp.stat().st_uid == 0


def test_the_config_is_not_given_to_a_group_slurmuser_shares(dists, tmp_path, shared_tmp):
    """Hostile review: the config is 0640 for SlurmUser's primary group; when that group is
    other users' too (nogroup, users), they would read it (root's alone before): install
    refuses in one line naming them, and writes nothing readable to them."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: the config's group is SlurmUser's")
    import grp
    import pwd

    pw = _slurm_user("nobody")
    others = sorted({u.pw_name for u in pwd.getpwall() if u.pw_gid == pw.pw_gid
                     and u.pw_uid not in (0, pw.pw_uid)}
                    | set(grp.getgrgid(pw.pw_gid).gr_mem) - {"nobody"})
    if not others:
        from pbsplug.testing import missing

        missing("nobody's primary group is no one else's here (Debian's nogroup has _apt)")
    plugins = _plugins(dists, tmp_path)
    p = slurm.plan(plugins, shared_tmp / "programs", dirs=[str(dists.root)],
                   bin_dir="/usr/bin", slurm_conf="", state_dir=str(shared_tmp / "state"),
                   log_file="", run_dir="/run/x", native=False, slurm_user="nobody")
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.write_programs(p)
    message = str(caught.value)
    assert "\n" not in message and others[0] in message and "nobody" in message
    assert not (shared_tmp / "programs" / slurm.CONFIG_NAME).exists()


def test_a_slurmuser_of_uid_0_is_root(dists, tmp_path):
    """Hostile review: SlurmUser=0 (or another name of uid 0) is root: its programs are
    root's, with root's home and log, not a SlurmUser's folders (a root Prolog took
    <state-dir>/slurmuser as its pbsplug home and log: root's programs disagreed on where
    their plugins' records are)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("SlurmUser=0\n")
    assert slurm.read_slurm_user(conf) == "root"
    p = slurm.plan(_plugins(dists, tmp_path), tmp_path / "programs", dirs=[str(dists.root)],
                   bin_dir="/usr/bin", slurm_conf="", state_dir="/var/spool/x",
                   log_file="/var/log/x.log", run_dir="/run/x", slurm_user="0")
    assert "slurm_user" not in p.config
    # A config that recorded one (an install before this check): root's programs root's.
    assert slurm_bridge.slurm_user_uid({"slurm_user": {"name": "0"}}) is None


def test_upgrading_a_site_whose_state_folder_an_earlier_pbsplug_had_slurmuser_own(shared_tmp):
    """Hostile review (the upgrade): an earlier pbsplug's docs had --state-dir SlurmUser's
    with a SlurmUser that is not root (its power programs wrote their records there).
    Install refuses it saying what to do (make it root's), and once it is, moves
    SlurmUser's records into <state-dir>/power as it does root's: the power programs do
    not forget the nodes they powered off."""
    pw, state = _earlier_state(shared_tmp)
    for path in (state, state / "power_off.json", state / "power.lock"):
        os.chown(path, pw.pw_uid, pw.pw_gid)
    p = slurm.Plan(shared_tmp / "programs", {
        "plugins": {}, "power_dir": str(state / "power"),
        "slurm_user": {"name": "slurm", "home": str(state / "slurmuser"),
                       "log_file": str(state / "slurmuser" / "x.log")}}, {}, {})
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.prepare_state(p, str(state))
    message = str(caught.value)
    assert "\n" not in message and "slurm's" in message and f"chown root: {state}" in message
    os.chown(state, 0, 0)
    done = slurm.prepare_state(p, str(state))
    assert any("moved power_off.json" in line for line in done)
    moved = state / "power" / "power_off.json"
    assert moved.read_text() == '{"n3": 1700000000}' and moved.stat().st_uid == pw.pw_uid


def test_a_root_periodic_drops_to_slurmuser_before_it_loads_a_plugin(tmp_path, monkeypatch):
    """Hostile review: a root 'pbsplug slurm periodic' with a SlurmUser that is not root
    opens root's log as root, then becomes SlurmUser, and only then loads the plugins: their
    imports and configure hooks ran as root with PBSPLUG_HOME set to SlurmUser's folder,
    whose files (a plugin's records or settings under <home>) SlurmUser writes."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: the run as root is what is checked")
    from pbsplug.cli import main

    log_file = tmp_path / "root.log"
    config = {"installed_by": slurm.INSTALLED_BY, "plugins": {}, "log_file": str(log_file),
              "state_dir": str(tmp_path / "state"),
              "slurm_user": {"name": "nobody", "home": str(tmp_path / "su"),
                             "log_file": str(tmp_path / "su" / "x.log")}}
    (tmp_path / slurm.CONFIG_NAME).write_text(json.dumps(config))
    steps: list[str] = []
    real_load = slurm_bridge.load

    def load(config, mode="inprocess", as_slurm_user=None):
        steps.append("load as " + ("root" if "become" not in steps else "SlurmUser"))
        return real_load(config, mode, as_slurm_user)

    monkeypatch.setattr(slurm_bridge, "load", load)
    monkeypatch.setattr(slurm_bridge, "become_slurm_user", lambda c: steps.append("become"))
    monkeypatch.setattr(slurm_bridge, "dispatch", lambda ctx, request: {"exit": 0})
    monkeypatch.delenv("PBSPLUG_HOME", raising=False)
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        assert main(["slurm", "periodic", "--dir", str(tmp_path)]) in (0, None)
        assert steps == ["become", "load as SlurmUser"]
        assert any(getattr(h, "_pbsplug_slurm", False) for h in root.handlers)
        assert log_file.exists()  # root's log, opened as root
    finally:
        for handler in root.handlers[:]:
            if handler not in before:
                root.removeHandler(handler)


def test_a_root_periodic_names_slurmuser_as_the_install_recorded_it(tmp_path, monkeypatch):
    """A root 'pbsplug slurm periodic' names SlurmUser as who would run a plugin's code it
    refuses. It looked the recorded name up to a uid and that uid back to a name: a second
    name of the same uid (passwd aliases) was told by the first name the host lists for
    the uid. The name is kept from the one lookup now; a SlurmUser recorded as a uid is
    still told by the host's name for it."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: the run as root is what is checked")
    import pwd

    from pbsplug.adapters import rootpaths
    from pbsplug.cli import main

    real_getpwnam = pwd.getpwnam
    nobody = real_getpwnam("nobody")  # (its second name, as passwd may hold one)
    alias = pwd.struct_passwd(("pbsplug-alias", "x", nobody.pw_uid, nobody.pw_gid, "", "/",
                               "/usr/sbin/nologin"))
    monkeypatch.setattr(pwd, "getpwnam",
                        lambda name: alias if name == alias.pw_name else real_getpwnam(name))
    real_run_by = rootpaths.run_by
    users: list[str] = []

    def run_by(user, paths):
        users.append(user)
        return real_run_by(user, paths)

    def become(config):
        raise OSError("stopped here")

    monkeypatch.setattr(rootpaths, "run_by", run_by)
    monkeypatch.setattr(slurm_bridge, "become_slurm_user", become)
    monkeypatch.setattr(slurm_bridge, "open_log", lambda path: None)
    for recorded, told in (("pbsplug-alias", "pbsplug-alias"),
                           (str(nobody.pw_uid), "nobody")):
        config = {"installed_by": slurm.INSTALLED_BY, "plugins": {},
                  "state_dir": str(tmp_path / "state"),
                  "slurm_user": {"name": recorded, "home": str(tmp_path / "su"),
                                 "log_file": str(tmp_path / "su" / "x.log")}}
        (tmp_path / slurm.CONFIG_NAME).write_text(json.dumps(config))
        users.clear()
        assert main(["slurm", "periodic", "--dir", str(tmp_path)]) == 2
        assert users == ["root", told], recorded


def test_a_root_periodic_refuses_a_recorded_slurmuser_this_host_lacks(tmp_path, monkeypatch,
                                                                      capsys):
    """A root 'pbsplug slurm periodic' looks SlurmUser up once (slurm_bridge.slurm_user_entry)
    and becomes the user it found; become_slurm_user looked the name up again, with its own
    error for a user this host lacks, which never showed: the first lookup's None for such
    a user had the event run as root, in place of SlurmUser. Now that lookup refuses it, in
    one line."""
    if os.geteuid() != 0:
        from pbsplug.testing import missing

        missing("needs root: the run as root is what is checked")
    from pbsplug.cli import main

    ran: list[str] = []
    monkeypatch.setattr(slurm_bridge, "open_log", lambda path: None)
    monkeypatch.setattr(slurm_bridge, "become_slurm_user", lambda pw: ran.append("become"))
    monkeypatch.setattr(slurm_bridge, "dispatch", lambda ctx, r: ran.append("event") or {})
    config = {"installed_by": slurm.INSTALLED_BY, "plugins": {},
              "state_dir": str(tmp_path / "state"),
              "slurm_user": {"name": "pbsplug-no-such-user", "home": str(tmp_path / "su"),
                             "log_file": str(tmp_path / "su" / "x.log")}}
    (tmp_path / slurm.CONFIG_NAME).write_text(json.dumps(config))
    assert main(["slurm", "periodic", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert ran == [] and err.count("\n") == 1, err
    assert "SlurmUser 'pbsplug-no-such-user', as 'pbsplug slurm install' recorded it, is " \
        "no user on this host: run install again" in err
    # a program's own question (is this process SlurmUser?) is still a plain no
    assert slurm_bridge.slurm_user_uid(config) is None


# -- the site's own programs, run first --------------------------------------------------------

CHAINS = """
import os
from pbsplug import PluginInfo, hookimpl
plugin_info = PluginInfo(api="1.0", events=("execjob_begin", "execjob_launch", "execjob_end",
                                             "exechost_periodic", "periodic"))
def _mark(event, what):
    with open(os.environ["CHAINS_MARKS"], "a") as fh:
        fh.write(f"{what} {event.job.id}\\n")
@hookimpl
def execjob_begin(event):
    _mark(event, "begin")
@hookimpl
def execjob_launch(event):
    pass
@hookimpl
def execjob_end(event):
    _mark(event, "end")
@hookimpl
def exechost_periodic(event):
    pass
@hookimpl
def periodic(event):
    pass
"""


def _chain_plan(dists, tmp_path, conf_text, native=False):
    plugins = dists.enabled("chains", CHAINS, tmp_path)
    conf = tmp_path / "slurm.conf"
    conf.write_text(conf_text)
    return slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)],
                      bin_dir="/usr/bin", slurm_conf="", state_dir="/var/spool/x",
                      log_file="/var/log/x", run_dir="/run/x", native=native, site_conf=conf)


def test_install_records_the_sites_programs_its_lines_replace(dists, tmp_path):
    """Each slurm.conf line install replaces names a program of the site's: pbsplug's
    program for that script runs it first (recorded in the config and built into the
    program), but for the power programs, which the power plugin takes over."""
    conf = ("ClusterName=c\nProlog=/etc/slurm/prolog.sh  # the site's\n"
            'Epilog="/etc/slurm/epilog.d/*"\nHealthCheckProgram=/usr/sbin/nhc\n'
            "TaskProlog=/etc/slurm/task.sh\nSuspendProgram=/usr/sbin/site-suspend\n"
            "#pbsplug-replaced# PrologSlurmctld=/x\n")
    p = _chain_plan(dists, tmp_path, conf)
    assert p.config["site_programs"] == {
        "prolog": "/etc/slurm/prolog.sh", "epilog": "/etc/slurm/epilog.d/*",
        "health_check": "/usr/sbin/nhc", "task_prolog": "/etc/slurm/task.sh"}
    assert "site='/etc/slurm/prolog.sh'" in p.programs["prolog"]
    assert "site='/etc/slurm/epilog.d/*'" in p.programs["epilog"]
    assert "site='/etc/slurm/task.sh'" in p.programs["task_prolog"]
    assert "site=" not in p.programs["suspend"]
    assert any(rp.path == "/usr/sbin/nhc" and "HealthCheckProgram" in rp.what
               for rp in p.root_paths)
    assert any(rp.path == "/etc/slurm/epilog.d" for rp in p.root_paths)  # a match's folder
    why = {line.split("=", 1)[0]: slurm.replaced_why(p, line)
           for line in slurm.replaced_lines(conf, p.conf_lines)}
    assert why == {"Prolog": "; pbsplug's Prolog runs it first",
                   "Epilog": "; pbsplug's Epilog runs it first",
                   "HealthCheckProgram": "; pbsplug's HealthCheckProgram runs it first",
                   "TaskProlog": "; pbsplug's TaskProlog runs it first",
                   "SuspendProgram": "; not run: the power plugin takes over power"}
    assert any("the site's Prolog /etc/slurm/prolog.sh is not on this host" in n
               for n in p.notes)
    assert "the site's HealthCheckProgram /usr/sbin/nhc runs first, within slurmd's 60 s for " \
        "the whole HealthCheckProgram: the time it takes is time pbsplug's exechost events " \
        "do not have" in p.notes
    # An install over an earlier one reads the site's lines it kept: the same record.
    merged = slurm.merge_conf(conf, p.conf_lines)
    again = _chain_plan(dists, tmp_path, merged)
    assert again.config["site_programs"] == p.config["site_programs"]
    assert again.programs == p.programs


@pytest.mark.parametrize("line, why", [
    ("Prolog=prolog.sh", "Prolog='prolog.sh': pbsplug's Prolog would run it first, as Slurm "
                         "ran it: expected an absolute path or a glob pattern of one"),
    ("HealthCheckProgram=nhc", "HealthCheckProgram='nhc': pbsplug's HealthCheckProgram "
                               "would run it first, as Slurm ran it: expected an absolute "
                               "path; "),
])
def test_a_site_program_that_is_no_absolute_path_is_one_line(dists, tmp_path, line, why):
    with pytest.raises(slurm.SlurmInstallError) as caught:
        _chain_plan(dists, tmp_path, line + "\n")
    assert why in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"{tmp_path / 'slurm.conf'}:1: ")  # file:line


def test_a_line_naming_pbsplugs_own_program_is_not_chained(dists, tmp_path):
    programs = tmp_path / "programs"
    p = _chain_plan(dists, tmp_path, f"Prolog={programs}/prolog-native\nEpilog={programs}/*\n")
    assert "site_programs" not in p.config and "site=" not in p.programs["prolog"]
    assert sum("names pbsplug's own program" in n for n in p.notes) == 2


def test_a_pattern_matching_both_pbsplugs_programs_and_the_sites_is_refused(dists, tmp_path):
    """--dir in the folder of the site's Prolog pattern (prolog.d/*): the site's programs
    there would no longer run (the pattern left out, as naming pbsplug's own), and chained
    the pattern would run pbsplug's programs too. One line, naming the line and a site
    program. Before, the pattern was dropped with a note, and the site's prologs with it."""
    folder = tmp_path / "prolog.d"
    folder.mkdir()
    (folder / "10-site").write_text("#!/bin/sh\n")
    (folder / "10-site").chmod(0o755)
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.plan(dists.enabled("chains", CHAINS, tmp_path), folder,
                   dirs=[str(dists.root)], bin_dir="/usr/bin", slurm_conf="",
                   state_dir="/var/spool/x", log_file="/var/log/x", run_dir="/run/x",
                   native=False, site_conf=_conf(tmp_path, f"Prolog={folder}/*\n"))
    assert str(caught.value) == (
        f"{tmp_path}/slurm.conf:1: Prolog={folder}/*: the pattern matches pbsplug's "
        f"programs in --dir {folder} and the site's {folder}/10-site, which pbsplug's "
        "Prolog could not run without running its own again: choose a --dir the pattern "
        "does not match and run install again")


def _conf(tmp_path, text):
    (tmp_path / "slurm.conf").write_text(text)
    return tmp_path / "slurm.conf"


def test_a_site_program_another_user_could_change_is_refused(dists, tmp_path):
    from pbsplug.adapters.rootpaths import unsafe

    site = tmp_path / "nhc"
    site.write_text("#!/bin/sh\n")
    site.chmod(0o757)
    p = _chain_plan(dists, tmp_path, f"HealthCheckProgram={site}\n")
    found = [(rp.path, problem) for rp, problem in unsafe(p.root_paths)
             if "HealthCheckProgram" in rp.what]
    assert found and found[-1][0] == str(site) and "writable" in found[-1][1]


def test_a_line_that_sets_a_key_of_pbsplugs_with_others_is_refused_and_left_alone(
        dists, tmp_path):
    """Slurm 22.05 reads one Key=value a line outside NodeName, PartitionName... lines
    (`Epilog=... HealthCheckInterval=300` is its 'Parse error': slurmctld does not start).
    install would replace such a line whole, losing the other settings with it: it refuses
    the line in one line naming it, before anything is written; node and partition lines,
    whose pairs are theirs, are left alone."""
    site = ("ClusterName=c\nNodeName=n[1-4] CPUs=2 State=UNKNOWN\n"
            "PartitionName=debug Nodes=ALL Default=YES\n"
            "Epilog=/etc/slurm/epilog KillWait=30\n")
    with pytest.raises(slurm.SlurmInstallError) as caught:
        _chain_plan(dists, tmp_path, site)
    conf = tmp_path / "slurm.conf"
    assert str(caught.value) == (
        f"{conf}:4: 'Epilog=/etc/slurm/epilog KillWait=30': Epilog shares its "
        "line with other settings, which install would replace with it; Slurm reads one "
        "Key=value a line (but on NodeName, PartitionName... lines) and refuses this one "
        "('Parse error'): put each on a line of its own and run install again")
    assert not (tmp_path / "programs").exists() and conf.read_text() == site
    lines = {"Epilog": "/p/epilog", "Prolog": "/p/prolog"}
    with pytest.raises(slurm.SlurmInstallError, match=r"^slurm.conf:4: 'Epilog=.*shares"):
        slurm.merge_conf(site, lines)
    with pytest.raises(slurm.SlurmInstallError, match=rf"^{conf}:4: 'Epilog=.*shares"):
        slurm.apply_conf(conf, lines)
    assert conf.read_text() == site
    # Each on a line of its own: only the Epilog's line is replaced, the node lines kept.
    split = site.replace(" KillWait", "\nKillWait")
    p = _chain_plan(dists, tmp_path, split)
    assert p.config["site_programs"]["epilog"] == "/etc/slurm/epilog"
    merged = slurm.merge_conf(split, p.conf_lines)
    assert merged.startswith(split.replace("Epilog=", slurm.REPLACED + "Epilog="))
    assert slurm.unmerge_conf(merged) == split


@pytest.mark.parametrize("written, value", [
    ("Prolog=/etc/slurm/pro\\#log  # the site's", "/etc/slurm/pro#log"),
    ("Prolog=\\\n/etc/slurm/prolog", "/etc/slurm/prolog"),
    ('prolog+=  "/etc/slurm/a prolog" \\\n', "/etc/slurm/a prolog"),
])
def test_a_sites_line_is_read_as_slurm_reads_it_and_replaced_whole(dists, tmp_path, written,
                                                                  value):
    """The value chained is the one Slurm runs: an escaped '#' is no comment, a line
    ending in a backslash goes on on the next, an operator before '=' is allowed. Every
    line of a continued line is kept as a comment (one alone would leave the next line to
    Slurm, which refuses it), and uninstall puts back each byte."""
    site = f"ClusterName=c\n{written}\nEpilog=/etc/slurm/epilog\n"
    p = _chain_plan(dists, tmp_path, site)
    assert p.config["site_programs"]["prolog"] == value
    merged = slurm.merge_conf(site, p.conf_lines)
    kept = [line for line in merged.splitlines()[1:] if line.startswith(slurm.REPLACED)]
    assert kept == [slurm.REPLACED + line
                    for line in written.split("\n") + ["Epilog=/etc/slurm/epilog"]]
    assert slurm.unmerge_conf(merged) == site
    assert slurm.replaced_lines(site, p.conf_lines)[0] == written
    assert [slurm.replaced_why(p, line) for line in slurm.replaced_lines(site, p.conf_lines)
            ][:2] == ["; pbsplug's Prolog runs it first", "; pbsplug's Epilog runs it first"]
    assert _chain_plan(dists, tmp_path, merged).config == p.config  # an install over it


def test_a_line_continued_over_200000_lines_is_read_whole(tmp_path):
    """A continued line's pieces were added to its text one by one, each copying the text
    so far: 200,000 continued lines took 4 s to read (0.4 s now, joined once), and
    install, status and uninstall read slurm.conf's lines. (No time is asserted: what is
    read is.)"""
    n = 200_000
    text = ("ClusterName=c\nProlog=/etc/slurm/pro\\\n" + "l\\\n" * n + "og  # a comment\n"
            "NodeName=n1 \\\n" + "Weight=1 \\\n" * n + "State=UNKNOWN\n")
    read = slurm.conf_lines(text)
    assert [(first, end) for first, end, _ in read] == [
        (0, 1), (1, n + 3), (n + 3, 2 * n + 5), (2 * n + 5, 2 * n + 6)]
    assert read[1][2] == "Prolog=/etc/slurm/pro" + "l" * n + "og  "
    assert read[2][2] == "NodeName=n1 " + "Weight=1 " * n + "State=UNKNOWN"
    conf = tmp_path / "slurm.conf"
    conf.write_text(text)
    settings = slurm.site_settings(slurm.SlurmConf(conf))
    assert [(s.line, s.key, s.value[-5:], s.alone) for s in settings] == [
        (1, "ClusterName", "c", True), (2, "Prolog", "lllog", True),
        (n + 4, "NodeName", "n1", False)]
    assert settings[1].text == text.split("\n", 1)[1].split("\nNodeName", 1)[0]


#: Physical lines whose mixes cover how install's marks and Slurm's continuations meet: a
#: replaced line continued (its next line replaced or not), pbsplug's block after a
#: continued line, escapes, comments, blanks and carriage returns.
_CONF_LINES = ["Prolog=/a \\", "Epilog=/b", "  \\\\", "x\\\\\\  ", "# c \\", "a\\#b \\",
               "\r", "", "\\", "NodeName=n1 \\\r", "Weight=1"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from(_CONF_LINES),
    st.sampled_from(_CONF_LINES).map(lambda line: slurm.REPLACED + line),
    st.lists(st.sampled_from(_CONF_LINES), max_size=3).map(
        lambda block: "\n".join([slurm.BEGIN, *block, slurm.END])),
    st.just(slurm.BEGIN), st.just(slurm.END)), max_size=12))
def test_slurm_conf_as_the_site_wrote_it_is_read_from_the_pass_over_it_as_it_is(parts):
    """`SlurmConf.lines(site=True)` reads slurm.conf as the site wrote it from the pass over
    it as it is (status asks for both): the same text and lines as a parse of
    `unmerge_conf`'s text, whatever the marks and continuations."""
    text = "\n".join(parts)
    with tempfile.TemporaryDirectory(prefix="pbsplug-conf-") as folder:
        path = Path(folder) / "slurm.conf"
        path.write_bytes(text.encode())
        view = slurm.SlurmConf(path)
        assert view.lines() == (text, slurm.conf_lines(text))
        site = slurm.unmerge_conf(text)
        assert view.lines(site=True) == (site, slurm.conf_lines(site))


def test_a_program_an_included_file_sets_is_chained_and_named(dists, tmp_path):
    """Slurm reads an Include'd file where its line stands (a relative name from the
    including file's folder, %c the ClusterName in lower case) and the last value read
    wins: the site's Prolog set there is the one pbsplug's runs first, not an earlier
    line's of slurm.conf. The included files are never edited: pbsplug's line, at the end
    of slurm.conf, is read after them; install names each such line, file and number."""
    (tmp_path / "site.d").mkdir()
    (tmp_path / "site.d" / "jobs.conf").write_text(
        "# the site's job programs\nProlog=/etc/slurm/prolog.d/*\nInclude more.conf\n")
    (tmp_path / "site.d" / "more.conf").write_text("Epilog=/etc/slurm/epilog\n")
    (tmp_path / "big.conf").write_text("HealthCheckProgram=/usr/sbin/nhc\n")
    site = ("ClusterName=Big\nProlog=/etc/slurm/old-prolog\nInclude site.d/jobs.conf\n"
            f"Include {tmp_path}/%c.conf\n")
    p = _chain_plan(dists, tmp_path, site)
    assert p.config["site_programs"] == {
        "prolog": "/etc/slurm/prolog.d/*", "epilog": "/etc/slurm/epilog",
        "health_check": "/usr/sbin/nhc"}
    named = [(s.file, s.line, s.text, slurm.replaced_why(p, s.text))
             for s in slurm.included_settings(p)]
    assert named == [
        (f"{tmp_path}/site.d/jobs.conf", 2, "Prolog=/etc/slurm/prolog.d/*",
         "; pbsplug's Prolog runs it first"),
        (f"{tmp_path}/site.d/more.conf", 1, "Epilog=/etc/slurm/epilog",
         "; pbsplug's Epilog runs it first"),
        (f"{tmp_path}/big.conf", 1, "HealthCheckProgram=/usr/sbin/nhc",
         "; pbsplug's HealthCheckProgram runs it first")]
    assert [slurm.replaced_why(p, line) for line in slurm.replaced_lines(site, p.conf_lines)
            ] == ["; Slurm did not run it: a line read after it sets Prolog"]
    merged = slurm.merge_conf(site, p.conf_lines)
    assert "Include site.d/jobs.conf\n" in merged and slurm.unmerge_conf(merged) == site
    # An Include Slurm could not follow either is one line, naming it.
    with pytest.raises(slurm.SlurmInstallError) as caught:
        _chain_plan(dists, tmp_path, site + "include nowhere.conf\n")
    assert str(caught.value) == (
        f"{tmp_path}/slurm.conf:5: Include nowhere.conf: cannot read {tmp_path}/nowhere.conf "
        "(No such file or directory), which may set a program pbsplug's would run first; "
        "Slurm cannot read it either: correct the line (or the file) and run install again")
    (tmp_path / "site.d" / "more.conf").write_text("Epilog=/etc/slurm/epilog KillWait=30\n")
    with pytest.raises(slurm.SlurmInstallError) as caught:  # (Slurm refuses it too)
        _chain_plan(dists, tmp_path, site)
    assert str(caught.value).startswith(
        f"{tmp_path}/site.d/more.conf:1: 'Epilog=/etc/slurm/epilog KillWait=30': Epilog "
        "shares its line with other settings; Slurm reads one Key=value a line")
    (tmp_path / "site.d" / "more.conf").write_text("Include jobs.conf\n")
    with pytest.raises(slurm.SlurmInstallError, match="the files include each other"):
        _chain_plan(dists, tmp_path, site)


def test_an_include_of_a_name_no_system_call_takes_is_one_line(dists, tmp_path):
    """An Include naming a file with a NUL byte in it: one line naming the line, as for
    one that cannot be read, never a traceback."""
    with pytest.raises(slurm.SlurmInstallError) as caught:
        _chain_plan(dists, tmp_path, "ClusterName=c\nInclude a\x00b.conf\n")
    assert str(caught.value).startswith(
        f"{tmp_path}/slurm.conf:2: Include a\x00b.conf: cannot read {tmp_path}/a\x00b.conf "
        "(embedded null byte), which may set a program pbsplug's would run first")


def _hang_guarded(call):
    """`call()`, or TimeoutError after 30 s (a hang guard, not a timing)."""
    def hung(signum, frame):
        raise TimeoutError("hung")

    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        return call()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


@pytest.mark.parametrize("kind", ["fifo", "zero", "large"])
def test_an_include_of_no_regular_file_or_too_large_a_file_is_one_line(dists, tmp_path,
                                                                        monkeypatch, kind):
    """An Include naming a FIFO hung install (reading it waits for a writer), /dev/zero
    read until a MemoryError's traceback, and a file was read however large: each is one
    line naming the line and the file."""
    name, why = {"fifo": ("q.fifo", "a FIFO, not a regular file"),
                 "zero": ("/dev/zero", "a character device, not a regular file"),
                 "large": ("big.conf", "more than 1000 bytes, the most pbsplug reads of it")
                 }[kind]
    if kind == "fifo":
        os.mkfifo(tmp_path / name)
    elif kind == "large":
        (tmp_path / name).write_text("# a comment\n" * 100)
    monkeypatch.setattr(slurm, "CONF_MAX", 1000, raising=False)
    with pytest.raises(slurm.SlurmInstallError) as caught:
        _hang_guarded(lambda: _chain_plan(dists, tmp_path, f"ClusterName=c\nInclude {name}\n"))
    target = name if name.startswith("/") else f"{tmp_path}/{name}"
    assert str(caught.value) == (
        f"{tmp_path}/slurm.conf:2: Include {name}: cannot read {target} ({why}), which may "
        "set a program pbsplug's would run first; Slurm cannot read it either: correct the "
        "line (or the file) and run install again")


def test_a_slurm_conf_that_is_no_regular_file_is_one_line(tmp_path):
    """slurm.conf itself a FIFO: install's read of SlurmUser there hung; one line now."""
    conf = tmp_path / "slurm.conf"
    os.mkfifo(conf)
    with pytest.raises(slurm.SlurmInstallError) as caught:
        _hang_guarded(lambda: slurm.read_slurm_user(conf))
    assert str(caught.value) == (
        f"{conf}: cannot read slurm.conf (a FIFO, not a regular file); install reads "
        "SlurmUser there (give --slurm-conf)")
    assert _hang_guarded(lambda: slurm.site_settings(conf)) == []



@pytest.mark.parametrize("as_slurm_user", [False, True])
def test_status_and_install_with_a_slurm_conf_that_is_no_regular_file_say_so_in_one_line(
        cli, dists, home, tmp_path, as_slurm_user):
    """slurm.conf a FIFO: status printed the raw OSError ('status: [Errno 22] a FIFO, not
    a regular file: ...'), and so did install --apply. Each is one line now, as install's
    refusal to read SlurmUser there is: the file, what is wrong, what reads it. (A plugin
    with a script slurmctld runs as SlurmUser: SlurmUser is read first.)"""
    conf = tmp_path / "slurm.conf"
    os.mkfifo(conf)
    plugin = ("parts", MIXED) if as_slurm_user else ("probe", PROBE)
    options = _install_options(dists, home, tmp_path, conf, *plugin)
    for command, reads in (
            (("status",), "status reads SlurmUser there" if as_slurm_user
             else "status compares pbsplug's lines with it"),
            (("install", "--allow-unsafe-paths", "--apply"),
             "install reads SlurmUser there" if as_slurm_user
             else "install merges pbsplug's lines into it")):
        done = cli("slurm", *command, *options)  # (cli's timeout: a hang guard)
        assert done.returncode == 2, done.stdout
        assert done.stderr == (f"pbsplug: error: {conf}: cannot read slurm.conf (a FIFO, not "
                               f"a regular file); {reads} (give --slurm-conf)\n"), command


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_uninstall_with_a_slurm_conf_that_is_no_regular_file_says_so_in_one_line(
        cli, tmp_path, kind):
    """uninstall printed the raw OSError ('uninstall: [Errno 22] a FIFO, not a regular
    file: ...') where install and status say what is wrong in their one line; uninstall
    says it as they do now, and removes nothing."""
    conf = tmp_path / "slurm.conf"
    os.mkfifo(conf) if kind == "fifo" else conf.mkdir()
    done = cli("slurm", "uninstall", "--dir", str(tmp_path / "programs"), "--slurm-conf",
               str(conf))  # (cli's timeout: a hang guard)
    assert done.returncode == 2, done.stdout
    assert done.stderr == (f"pbsplug: error: uninstall: {conf}: cannot read slurm.conf (a "
                           f"{'FIFO' if kind == 'fifo' else 'folder'}, not a regular file); "
                           "uninstall removes pbsplug's lines from it (give --slurm-conf)\n")

PROBE = ("from pbsplug import PluginInfo, hookimpl\n"
         "plugin_info = PluginInfo(events=('execjob_begin',))\n"
         "@hookimpl\ndef execjob_begin(event):\n    pass\n")


def _listing(top: Path) -> list[tuple]:
    """Every path under `top` (links not followed): its kind, mode, owner, size and mtime."""
    out = []
    for folder, dirs, files in os.walk(top):
        for name in sorted(dirs + files):
            info = os.lstat(os.path.join(folder, name))
            out.append((os.path.relpath(os.path.join(folder, name), top), info.st_mode,
                        info.st_uid, info.st_gid, info.st_size, info.st_mtime_ns))
    return sorted(out)


@pytest.mark.parametrize("kind", ["fifo", "missing", "folder", "link", "immutable folder"])
def test_an_install_apply_refused_over_slurm_conf_writes_nothing(cli, dists, home, tmp_path,
                                                                  kind):
    """install --apply wrote its programs and config, then refused slurm.conf (no regular
    file, missing, a link): a refused install leaves everything as it was. In a folder it
    cannot write in (immutable here: root too is refused), it said 'pbsplug's lines merged'
    and exited 0. (No plugin here needs SlurmUser, whose reading refused it first.)"""
    etc = tmp_path / "etc"
    etc.mkdir()
    conf, shared = etc / "slurm.conf", etc / "shared.conf"
    if kind == "fifo":
        os.mkfifo(conf)
    elif kind == "folder":
        conf.mkdir()
    elif kind == "link":
        shared.write_text("ClusterName=c\n")
        conf.symlink_to(shared)
    elif kind == "immutable folder":
        conf.write_text("ClusterName=c\n")
    why = {"fifo": "a FIFO, not a regular file", "missing": "No such file or directory",
           "folder": "a folder, not a regular file"}.get(kind)
    options = _install_options(dists, home, tmp_path, conf)
    before = _listing(tmp_path)
    if kind == "immutable folder":
        from pbsplug.testing import missing

        made = subprocess.run(["chattr", "+i", str(etc)], capture_output=True, text=True)
        if made.returncode:
            missing(f"chattr +i {etc}: {made.stderr.strip()}")
    try:
        done = cli("slurm", "install", "--allow-unsafe-paths", "--apply", *options)
    finally:
        if kind == "immutable folder":
            subprocess.run(["chattr", "-i", str(etc)], check=True)
    assert done.returncode == 2, done.stdout
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    if why:
        assert done.stderr == (f"pbsplug: error: {conf}: cannot read slurm.conf ({why}); "
                               "install merges pbsplug's lines into it (give --slurm-conf)\n")
    elif kind == "link":
        assert f"{conf} is a symbolic link to {shared}" in done.stderr
    else:
        assert done.stderr == (f"pbsplug: error: {conf}: install cannot write in its folder "
                               f"{etc} (it writes the new slurm.conf there, then renames it "
                               "over the old): left as it is\n")
    assert _listing(tmp_path) == before
    assert "wrote " not in done.stdout


def test_an_install_refused_over_its_state_folder_writes_nothing(cli, dists, home, tmp_path):
    """A plugin with power programs: install made the state folder only after it had
    written the programs and the config, and refused a --state-dir another user could
    change only then. It is checked with the rest, before anything is written."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\n")
    options = list(_install_options(dists, home, tmp_path, conf, "parts", MIXED))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    options[options.index("--state-dir") + 1] = str(shared / "state")
    before = _listing(tmp_path)
    for apply in ((), ("--apply",)):
        done = cli("slurm", "install", "--allow-unsafe-paths", *apply, *options)
        assert done.returncode == 2, done.stdout
        assert done.stderr == (
            f"pbsplug: error: refusing the state folder (--state-dir) {shared / 'state'}: "
            f"{shared} is writable by everyone (owner uid 0 (root), mode 0777), so another "
            "user could plant or change what is in it; make it and every folder above it "
            "root's and writable by no one else (a folder above it may be sticky, as /tmp "
            "is), or choose another folder\n"), apply
        assert _listing(tmp_path) == before, apply


def _install_options(dists, home, tmp_path, conf, name="probe", text=PROBE) -> tuple:
    """`slurm install`'s options for a site with plugin `name` enabled, slurm.conf `conf`
    and a stand-in scontrol (never run here), everything else under `tmp_path`."""
    dists.add(name, text)
    (home / "site.toml").write_text(f"[plugins.{name}]\nenabled = true\n")
    dists.root.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "scontrol").chmod(0o755)
    return ("--no-native", "--dir", str(tmp_path / "programs"), "--bin-dir", str(bin_dir),
            "--slurm-conf", str(conf), "--state-dir", str(tmp_path / "state"),
            "--log-file", str(tmp_path / "log"), "--run-dir", str(tmp_path / "run"),
            "--site-dir", str(dists.root))


def test_install_names_the_included_line_pbsplugs_overrides(cli, dists, home, tmp_path):
    """install's output: the included file's line, by file and number, that pbsplug's line
    overrides, and what becomes of the program it names; the file is left as it is."""
    included = tmp_path / "prolog.conf"
    included.write_text("Prolog=/etc/slurm/site-prolog\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\nInclude prolog.conf\n")
    options = _install_options(dists, home, tmp_path, conf)
    done = cli("slurm", "install", *options, "--allow-unsafe-paths", "--apply")
    assert done.returncode == 0, done.stderr
    assert (f"{included}:1: left as it is, pbsplug's line in {conf} overrides it: "
            "Prolog=/etc/slurm/site-prolog; pbsplug's Prolog runs it first\n") in done.stdout
    assert included.read_text() == "Prolog=/etc/slurm/site-prolog\n"
    config = json.loads((tmp_path / "programs" / slurm.CONFIG_NAME).read_text())
    assert config["site_programs"] == {"prolog": "/etc/slurm/site-prolog"}


def test_status_names_each_setting_read_after_pbsplugs_lines(dists, tmp_path, shared_tmp):
    """Slurm uses the last value read: a line below pbsplug's block, or in a file an Include
    line below it names, overrides pbsplug's line, and status said "installed" while Slurm
    ran the site's program (or interval) instead of pbsplug's. One line per key, naming the
    file, line and key (the last such setting: Slurm's), and ``overridden`` in --json; an
    install --apply again puts pbsplug's lines last."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\nHealthCheckInterval=60\n")
    (tmp_path / "late.conf").write_text("Prolog=/etc/slurm/late-prolog\n")

    def plan():
        return slurm.plan(_plugins(dists, tmp_path), shared_tmp / "programs",
                          dirs=[str(dists.root)], bin_dir="/usr/bin", slurm_conf="",
                          state_dir=str(shared_tmp / "state"), log_file="",
                          run_dir="/run/x", native=False, site_conf=conf)

    p = plan()
    slurm.write_programs(p)
    slurm.apply_conf(conf, p.conf_lines)
    assert slurm.status(p, conf)[0]["overridden"] == []
    assert slurm.status(p, conf)[0]["state"] == "installed"
    with conf.open("a") as fh:  # a line of the site's, added after install
        fh.write("HealthCheckInterval=30\n")
    assert slurm.status(p, conf)[0]["state"] == "differs"  # (it said "installed")
    with conf.open("a") as fh:
        fh.write("Include late.conf\nHealthCheckInterval=300\n")
    p = plan()
    rows = slurm.status(p, conf)
    assert rows[0]["state"] == "differs"
    fix = ("run 'pbsplug slurm install --apply' again (pbsplug's lines go last, a program "
           "the line names runs first)")
    n = len(conf.read_text().splitlines())
    assert [line for line in rows[0]["problems"] if "is set again" in line] == [
        f"{tmp_path}/late.conf:1: Prolog is set again after pbsplug's Prolog line in {conf} "
        "and overrides it (Slurm uses the last value read): Prolog=/etc/slurm/late-prolog; "
        + fix,
        f"{conf}:{n}: HealthCheckInterval is set again after pbsplug's HealthCheckInterval "
        f"line in {conf} and overrides it (Slurm uses the last value read): "
        "HealthCheckInterval=300; " + fix]
    assert rows[0]["overridden"] == [
        {"file": f"{tmp_path}/late.conf", "line": 1, "key": "Prolog",
         "value": "/etc/slurm/late-prolog", "pbsplug_value": p.conf_lines["Prolog"]},
        {"file": str(conf), "line": n, "key": "HealthCheckInterval", "value": "300",
         "pbsplug_value": "7"}]
    slurm.write_programs(p)
    slurm.apply_conf(conf, p.conf_lines)  # pbsplug's lines last again
    rows = slurm.status(p, conf)
    assert rows[0]["overridden"] == [] and rows[0]["state"] == "installed"
    assert p.config["site_programs"] == {"prolog": "/etc/slurm/late-prolog"}


def test_status_finds_pbsplugs_lines_as_slurm_reads_them(dists, tmp_path, shared_tmp):
    """status looked for each of pbsplug's lines with a pattern over slurm.conf's text (the
    whole line Key=value, any case): a line Slurm reads as pbsplug's with a comment after
    it, its value quoted, or continued on the next line, was 'slurm.conf lacks', and a
    value in another case (a path Slurm does not find) was found. It reads slurm.conf's
    own lines as Slurm does now (`SlurmConf.lines`)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\n")
    p = slurm.plan(_plugins(dists, tmp_path), shared_tmp / "programs", dirs=[str(dists.root)],
                   bin_dir="/usr/bin", slurm_conf="", state_dir=str(shared_tmp / "state"),
                   log_file="", run_dir="/run/x", native=False, site_conf=conf)
    slurm.write_programs(p)
    slurm.apply_conf(conf, p.conf_lines)
    merged = conf.read_text()
    prolog = p.conf_lines["Prolog"]
    assert f"\nProlog={prolog}\n" in merged and slurm.status(p, conf)[0]["problems"] == []
    for written in (f"Prolog={prolog}  # pbsplug's", f'prolog = "{prolog}"',
                    f"Prolog={prolog[:5]}\\\n{prolog[5:]}"):
        conf.write_text(merged.replace(f"\nProlog={prolog}\n", f"\n{written}\n"))
        assert slurm.status(p, conf)[0]["problems"] == [], written
    conf.write_text(merged.replace(f"\nProlog={prolog}\n", f"\nProlog={prolog.upper()}\n"))
    assert slurm.status(p, conf)[0]["problems"] == [f"slurm.conf lacks Prolog={prolog}"]


def test_status_reads_a_slurm_conf_with_bytes_that_are_no_utf8(dists, tmp_path, shared_tmp):
    """install keeps a slurm.conf's bytes that are no UTF-8 (a Latin-1 comment, which Slurm
    reads); status read it as UTF-8 and failed ("'utf-8' codec can't decode byte 0xe9")."""
    conf = tmp_path / "slurm.conf"
    conf.write_bytes(b"ClusterName=c\n# caf\xe9\n")
    p = slurm.plan(_plugins(dists, tmp_path), shared_tmp / "programs", dirs=[str(dists.root)],
                   bin_dir="/usr/bin", slurm_conf="", state_dir=str(shared_tmp / "state"),
                   log_file="", run_dir="/run/x", native=False, site_conf=conf)
    slurm.write_programs(p)
    slurm.apply_conf(conf, p.conf_lines)
    assert b"# caf\xe9\n" in conf.read_bytes()
    assert slurm.status(p, conf)[0]["state"] == "installed"


def test_status_cli_says_which_line_overrides_pbsplugs(cli, dists, home, tmp_path):
    """The same through `pbsplug slurm status`: a 'differs:' line, and ``overridden`` added
    to each row of --json."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\n")
    options = _install_options(dists, home, tmp_path, conf)
    done = cli("slurm", "install", *options, "--allow-unsafe-paths", "--apply")
    assert done.returncode == 0, done.stderr
    with conf.open("a") as fh:
        fh.write("Prolog=/etc/slurm/late-prolog\n")
    n = len(conf.read_text().splitlines())
    done = cli("slurm", "status", *options)
    assert done.returncode == 0, done.stderr
    assert (f"    differs: {conf}:{n}: Prolog is set again after pbsplug's Prolog line in "
            f"{conf} and overrides it (Slurm uses the last value read): "
            "Prolog=/etc/slurm/late-prolog; run 'pbsplug slurm install --apply' again") \
        in done.stdout
    done = cli("slurm", "status", "--json", *options)
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)[0]
    assert row["state"] == "differs"
    assert row["overridden"] == [{"file": str(conf), "line": n, "key": "Prolog",
                                  "value": "/etc/slurm/late-prolog",
                                  "pbsplug_value": f"{tmp_path}/programs/prolog"}]


def test_install_says_why_pbsplug_sets_the_keys_that_name_no_program(cli, dists, home,
                                                                    tmp_path):
    """A site's HealthCheckInterval, HealthCheckNodeState, SuspendTime, SuspendRate or
    ResumeRate line was replaced (or, in an included file, overridden) and listed by install
    with no word of why: each now says the value pbsplug sets and why (the plugins' smallest
    freq; every node; Slurm's idle timer and rate limits out of the power plugin's way)."""
    (tmp_path / "power.conf").write_text("SuspendTime=600\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\nHealthCheckInterval=300\nHealthCheckNodeState=IDLE\n"
                    "SuspendRate=5\nResumeRate=5\nInclude power.conf\n")
    options = _install_options(dists, home, tmp_path, conf, "parts", MIXED)  # freq=7
    done = cli("slurm", "install", *options, "--allow-unsafe-paths", "--apply")
    assert done.returncode == 0, done.stderr
    rate = "no rate limit of Slurm's: the power plugin's max_concurrent_nodes is the limit"
    replaced = f"{conf}: replaced (kept as a comment): "
    for line in (
            f"{replaced}HealthCheckInterval=300; pbsplug sets it to 7: HealthCheckProgram "
            "runs exechost_periodic every HealthCheckInterval: the smallest freq of the "
            "plugins' exechost_periodic and exechost_startup hooks",
            f"{replaced}HealthCheckNodeState=IDLE; pbsplug sets it to ANY: exechost_periodic "
            "runs on every node, busy or idle, as in PBS",
            f"{replaced}SuspendRate=5; pbsplug sets it to 0: {rate}",
            f"{replaced}ResumeRate=5; pbsplug sets it to 0: {rate}",
            f"{tmp_path}/power.conf:1: left as it is, pbsplug's line in {conf} overrides it: "
            "SuspendTime=600; pbsplug sets it to 8640000: Slurm's own idle timer kept out "
            "of the way (100 days): the power plugin's decision powers nodes off"):
        assert line + "\n" in done.stdout, line


def test_install_names_the_lines_it_replaces_with_apply_or_without(cli, dists, home, tmp_path):
    """Without --apply install prints pbsplug's lines and the site's lines --apply would
    replace; with it, the lines it replaced: the same lines, in the same words, both ways.
    An included file's line is named both ways, and left as it is."""
    (tmp_path / "more.conf").write_text("HealthCheckInterval=300\n")
    conf = tmp_path / "slurm.conf"
    site = "ClusterName=c\nProlog=/etc/slurm/site-prolog\nInclude more.conf\n"
    conf.write_text(site)
    options = _install_options(dists, home, tmp_path, conf, "parts", MIXED)  # freq=7
    why = (f"{tmp_path}/more.conf:1: left as it is, pbsplug's line in {conf} overrides it: "
           "HealthCheckInterval=300; pbsplug sets it to 7: HealthCheckProgram runs "
           "exechost_periodic every HealthCheckInterval")
    for apply, done_word in ((False, "--apply replaces"), (True, "replaced")):
        done = cli("slurm", "install", *options, "--allow-unsafe-paths",
                   *(["--apply"] if apply else []))
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert (f"{conf}: {done_word} (kept as a comment): Prolog=/etc/slurm/site-prolog; "
                "pbsplug's Prolog runs it first\n") in out
        assert why in out
        assert (f"add to {conf} (or run again with --apply):\n" in out) is not apply
        assert ("pbsplug's lines merged" in out) is apply
        assert (conf.read_text() == site) is not apply


#: `pbsplug` with `slurm.read_conf` wrapped to log each path it reads to the file argv[1],
#: `slurm._read_settings` each reading of slurm.conf's settings ('parse <path>'; not of
#: what it includes, read within), `slurm.merge_conf` each merge ('merge <path>'), and
#: `slurm._line_reads` each pass over a whole file's text ('lines <its first line>').
_COUNTING = """
import sys
import tempfile
from pbsplug.adapters import slurm
real, parse, merge = slurm.read_conf, slurm._read_settings, slurm.merge_conf
lines = slurm._line_reads
def read_conf(path):
    with open(sys.argv[1], "a") as log:
        log.write(f"{path}\\n")
    return real(path)
def _read_settings(view, path, text, out, stack):
    if len(stack) == 1:
        with open(sys.argv[1], "a") as log:
            log.write(f"parse {path}\\n")
    return parse(view, path, text, out, stack)
def merge_conf(text, lines, path="slurm.conf"):
    with open(sys.argv[1], "a") as log:
        log.write(f"merge {path}\\n")
    return merge(text, lines, path)
def _line_reads(text):
    if "\\n" in text:  # (a file's, not one line's: replaced_why...)
        with open(sys.argv[1], "a") as log:
            log.write(f"lines {text.split(chr(10), 1)[0]}\\n")
    return lines(text)
slurm.read_conf, slurm._read_settings = read_conf, _read_settings
slurm.merge_conf, slurm._line_reads = merge_conf, _line_reads
from pbsplug.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_install_and_status_read_slurm_conf_and_its_included_files_once(dists, home,
                                                                        tmp_path):
    """install --apply read slurm.conf six times (the plan, SlurmUser twice, the
    controllers, the lines it replaces, the apply) and status five (and the included file
    at each but two): a file changed meanwhile gave one run two views of it. Each file is
    read once a run now (--apply reads slurm.conf once more just before it writes, only
    to tell whether its text has changed since: `SlurmConf.changed`). And parsed once:
    install parsed slurm.conf's settings three times (the plan, SlurmUser, the
    controllers), status four (status parses the file as it is, pbsplug's lines in, once
    more: `overriding_settings`). --apply merged pbsplug's lines into it twice (the check
    before anything is written, then the write): once now, and that text is written.
    And each file's text is parsed into lines once: install parsed slurm.conf's (with
    pbsplug's lines undone) three times (its settings, the merge, the replaced lines),
    status parsed the included file twice. And status parsed slurm.conf twice, through
    each of two texts: as the site wrote it, and as it is; the first is read from the
    pass over the second now (`SlurmConf.lines`). And each run parsed a line of several
    settings (a NodeName line, here continued) again to tell whether it sets SlurmUser
    (`_pair_keys`); its parse is kept now (`ConfSetting.read`)."""
    (tmp_path / "more.conf").write_text("HealthCheckInterval=300\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=c\nSlurmctldHost={socket.gethostname()}\n"
                    "Include more.conf\nProlog=/etc/slurm/site-prolog\n"
                    "NodeName=n1 \\\n  CPUs=2\n")
    options = _install_options(dists, home, tmp_path, conf, "parts", MIXED)
    env = dists.env(PBSPLUG_HOME=str(home))
    log = tmp_path / "reads.log"
    for command in (("install", "--allow-unsafe-paths", "--apply"), ("status",)):
        log.unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-c", _COUNTING, str(log), "slurm", *command,
                               *options], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert sorted(log.read_text().splitlines()) == [
            str(tmp_path / "more.conf"), *[str(conf)] * (2 if "--apply" in command else 1),
            "lines ClusterName=c",
            "lines HealthCheckInterval=300",
            *[f"merge {conf}"] * (1 if "--apply" in command else 0),
            *[f"parse {conf}"] * (1 if command[0] == "install" else 2)], command
    assert "parts: " in done.stdout  # (status ran to its end)



def test_one_view_of_slurm_conf_and_apply_refuses_a_file_changed_since(tmp_path):
    """A `SlurmConf` reads each file once: an edit made while install runs is not seen
    halfway, and --apply, which would write the file as install read it, refuses to lose
    it, in one line."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\n")
    view = slurm.SlurmConf(conf)
    assert [s.key for s in slurm.site_settings(view)] == ["ClusterName"]
    edited = "ClusterName=c\nProlog=/etc/slurm/site-prolog\n"
    conf.write_text(edited)  # another's edit, while install runs
    assert [s.key for s in slurm.site_settings(view)] == ["ClusterName"]
    assert slurm.replaced_lines(view.text(), {"Prolog": "/p/prolog"}) == []
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.apply_conf(view, {"Prolog": "/p/prolog"})
    assert str(caught.value) == (f"{conf} changed while install ran, after install read it: "
                                 "left as it is; run install again")
    assert conf.read_text() == edited
    slurm.apply_conf(conf, {"Prolog": "/p/prolog"})  # a path: read afresh
    assert conf.read_text().startswith(f"ClusterName=c\n{slurm.REPLACED}Prolog=/etc/slurm/")


def test_a_slurm_conf_error_is_a_fresh_one_at_each_ask(tmp_path):
    """A `SlurmConf` keeps the error of a file it could not read, or of its settings, and
    raised that very object at each later ask: its traceback grew by every raise, and each
    reader's raise changed the one all readers share. Each ask raises a fresh copy now,
    with the same one line."""
    import traceback

    def asked(ask, kind):
        with pytest.raises(kind) as caught:
            ask()
        return caught.value

    missing = slurm.SlurmConf(tmp_path / "missing.conf")
    (tmp_path / "slurm.conf").write_text("ClusterName=c\nInclude gone.conf\n")
    included = slurm.SlurmConf(tmp_path / "slurm.conf")
    for ask, kind in ((missing.text, FileNotFoundError),
                      (lambda: included.text(tmp_path / "gone.conf"), FileNotFoundError),
                      (included.settings, slurm.SlurmInstallError)):
        raised = [asked(ask, kind) for _ in range(3)]
        assert raised[1] is not raised[0] and raised[2] is not raised[1]
        assert len({str(e) for e in raised}) == 1 and "\n" not in str(raised[0])
        assert [len(traceback.extract_tb(e.__traceback__)) for e in raised] == [
            len(traceback.extract_tb(raised[0].__traceback__))] * 3
    assert [e.filename for e in (asked(missing.text, OSError), asked(missing.text, OSError))
            ] == [str(tmp_path / "missing.conf")] * 2
    message = (f"{tmp_path / 'missing.conf'}: cannot read slurm.conf (No such file or "
               "directory); status compares (give --slurm-conf)")
    for _ in range(2):
        with pytest.raises(slurm.SlurmInstallError) as caught:
            missing.checked_text("status compares")
        assert str(caught.value) == message


def test_apply_tells_a_change_of_slurm_conf_by_its_text_not_its_mtime(tmp_path):
    """A change was told by slurm.conf's inode, size and mtime: a ``touch`` (or a save with
    nothing changed) while install ran refused --apply, and an edit of the same size within
    one step of the filesystem's timestamps (a second on some; here the mtime put back, as
    such a filesystem shows it) was missed, and --apply wrote the file as it was before
    the edit. Its text is compared now."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c\nSlurmctldDebug=info\n")
    view = slurm.SlurmConf(conf)
    view.text()
    os.utime(conf, ns=(conf.stat().st_atime_ns, conf.stat().st_mtime_ns + 10**9))  # touch
    slurm.apply_conf(view, {"Prolog": "/p/prolog"})
    assert "Prolog=/p/prolog" in conf.read_text()

    conf.write_text("ClusterName=c\nSlurmctldDebug=info\n")
    view = slurm.SlurmConf(conf)
    view.text()
    was = conf.stat()
    edited = "ClusterName=c\nSlurmctldDebug=warn\n"  # (the same size)
    with open(conf, "r+") as same_file:
        same_file.write(edited)
    os.utime(conf, ns=(was.st_atime_ns, was.st_mtime_ns))
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.apply_conf(view, {"Prolog": "/p/prolog"})
    assert str(caught.value) == (f"{conf} changed while install ran, after install read it: "
                                 "left as it is; run install again")
    assert conf.read_text() == edited


def test_uninstall_reads_slurm_conf_through_the_one_view_and_refuses_a_file_changed_since(
        tmp_path):
    """uninstall read slurm.conf on its own and wrote back what it read: an edit made in
    between was lost. It reads through a `SlurmConf` now, as install, and refuses so in one
    line; its output is unchanged."""
    conf = tmp_path / "slurm.conf"
    merged = slurm.merge_conf("ClusterName=c\nProlog=/site/prolog\n", {"Prolog": "/p/prolog"})
    conf.write_text(merged)
    view = slurm.SlurmConf(conf)
    assert view.text() == merged
    edited = merged + "SlurmctldDebug=info\n"
    conf.write_text(edited)  # another's edit, after uninstall read the file
    with pytest.raises(slurm.SlurmInstallError) as caught:
        slurm.uninstall(tmp_path / "programs", view)
    assert str(caught.value) == (f"{conf} changed while uninstall ran, after uninstall read "
                                 "it: left as it is; run uninstall again")
    assert conf.read_text() == edited
    assert slurm.uninstall(tmp_path / "programs", slurm.SlurmConf(conf)) == [
        f"{conf}: pbsplug's lines removed, the site's own restored"]
    assert conf.read_text() == "ClusterName=c\nProlog=/site/prolog\nSlurmctldDebug=info\n"

def _bridge_ctx(dists, tmp_path):
    plugins = dists.enabled("chains", CHAINS, tmp_path)
    p = slurm.plan(plugins, tmp_path / "programs", dirs=[str(dists.root)], bin_dir="/nowhere",
                   slurm_conf="", state_dir=str(tmp_path / "state"), log_file="",
                   run_dir="/run/x")
    sys.path.insert(0, str(dists.root))
    try:
        return slurm_bridge.load(p.config)
    finally:
        sys.path.remove(str(dists.root))


@pytest.mark.parametrize("script, runs", [("prolog", False), ("epilog", True)])
def test_a_failed_site_program_stops_a_prolog_not_an_epilog(dists, tmp_path, monkeypatch,
                                                            caplog, script, runs):
    """The site's program failed (the request says so): the script exits with its status
    (Slurm's own rule then applies, as without pbsplug), one log line says so; a Prolog's
    events do not run, an Epilog's do (the node's cleanup)."""
    marks = tmp_path / "marks"
    monkeypatch.setenv("CHAINS_MARKS", str(marks))
    ctx = _bridge_ctx(dists, tmp_path)
    env = {"SLURM_JOB_ID": "5", "SLURM_JOB_USER": "bob", "SLURM_JOB_PARTITION": "debug",
           "SLURMD_NODENAME": "n1"}
    assert slurm_bridge.dispatch(ctx, {"script": script, "env": env})["exit"] == 0
    assert marks.read_text() == ("begin 5\n" if script == "prolog" else "end 5\n")
    marks.unlink()
    caplog.set_level(logging.INFO, logger="pbsplug.slurm")
    answer = slurm_bridge.dispatch(ctx, {"script": script, "env": env, "site_status": 3,
                                         "site_program": "/etc/slurm/site"})
    assert answer["exit"] == 3
    assert marks.exists() == runs
    said = [r.getMessage() for r in caplog.records if "/etc/slurm/site" in r.getMessage()]
    assert said == [f"{script} job 5: the site's program /etc/slurm/site exited 3: "
                    + ("pbsplug's events run all the same" if runs else
                       "pbsplug's events do not run") + "; the script exits 3"]


def test_the_public_task_workers_requests_say_nothing_of_a_site_program(dists, tmp_path,
                                                                        caplog):
    """Any local user may send the task worker a request: one that says a site program
    failed is not believed (it had root log that user's words as the site's program and
    answer before TaskProlog's own checks); it is TaskProlog's, refused for not coming
    through the socket."""
    ctx = _bridge_ctx(dists, tmp_path)
    ctx.config = {**ctx.config, "public": True}
    caplog.set_level(logging.INFO, logger="pbsplug.slurm")
    answer = slurm_bridge.dispatch(ctx, {"script": "task_prolog", "env": {},
                                         "site_status": 3, "site_program": "/from/a/user"})
    assert answer["exit"] == 1 and "did not come through the socket" in answer["error"]
    assert not [r for r in caplog.records if "/from/a/user" in r.getMessage()]


@pytest.mark.parametrize("site_exit, last", [(0, "echo"), (3, "echo"), (0, "printf")])
def test_taskprolog_prints_the_sites_lines_then_pbsplugs(tmp_path, site_exit, last):
    """The site's TaskProlog runs first, as the job's user: its lines come out first, and
    pbsplug's after them win where both set a name (its last line ends with a line break
    even where the site's program wrote none: Slurm reads one line at a time). A failed
    one is the script's status and pbsplug's execjob_launch is not asked for."""
    import marshal
    import threading

    site = tmp_path / "site-task"
    site.write_text(f"#!/bin/sh\necho export SITE=1\n{last} 'export BOTH=site'\n"
                    f"exit {site_exit}\n")
    site.chmod(0o755)
    sock = tmp_path / "task.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock))
    server.listen(1)
    server.settimeout(60 if site_exit == 0 else 0.2)
    asked = []

    def answer():
        try:
            conn, _ = server.accept()
        except OSError:
            return
        while conn.recv(65536):
            pass
        asked.append(True)
        conn.sendall(marshal.dumps({"exit": 0, "stdout": "export BOTH=pbsplug\n"}))
        conn.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    program = tmp_path / "task_prolog"
    program.write_text(slurm_program.task_program_text(
        sys.executable, str(Path(slurm_program.__file__).parent), str(sock), str(site)))
    program.chmod(0o755)
    try:
        done = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    finally:
        thread.join(timeout=60)
        server.close()
    if site_exit == 0:
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == "export SITE=1\nexport BOTH=site\nexport BOTH=pbsplug\n"
    else:
        assert done.returncode == 3 and not asked
        assert done.stdout == "export SITE=1\nexport BOTH=site\n"
        assert done.stderr == (f"pbsplug TaskProlog: the site's TaskProlog {site} exited 3: "
                               "pbsplug's execjob_launch does not run\n")


def _site_task_prolog(tmp_path, body):
    """pbsplug's TaskProlog run once with a site TaskProlog of `body` that exits 3 (so that
    no task worker is asked): what it printed."""
    site = tmp_path / "site-task"
    site.write_text(f"#!/bin/sh\n{body}\nexit 3\n")
    site.chmod(0o755)
    program = tmp_path / "task_prolog"
    program.write_text(slurm_program.task_program_text(
        sys.executable, str(Path(slurm_program.__file__).parent), str(tmp_path / "no.sock"),
        str(site)))
    program.chmod(0o755)
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    return done.stdout


def test_the_sites_program_gets_sigpipe_and_sigxfsz_as_a_program_does(tmp_path):
    """Python ignores SIGPIPE and SIGXFSZ in itself; the site's program it runs gets them
    back, as subprocess gives them (a `loop | head -1` in it ends)."""
    out = _site_task_prolog(
        tmp_path, "echo export SIGIGN=$(grep SigIgn /proc/self/status | cut -f2)")
    plain = subprocess.run(["sh", "-c", "grep SigIgn /proc/self/status | cut -f2"],
                           capture_output=True, text=True, timeout=60).stdout
    assert out == f"export SIGIGN={plain}"


def test_task_prolog_takes_no_word_that_the_site_ran_and_shows_it_to_no_one(tmp_path):
    """TaskProlog runs as the job's user, who shapes its environment: a PBSPLUG_SITE_RAN
    there, even one with TaskProlog's own pid (set by the process that execs it), never
    stops the site's TaskProlog, which does not see it either (the Prolog's rule)."""
    site = tmp_path / "site-task"
    site.write_text("#!/bin/sh\necho export SEEN=${PBSPLUG_SITE_RAN-none}\nexit 3\n")
    site.chmod(0o755)
    program = tmp_path / "task_prolog"
    program.write_text(slurm_program.task_program_text(
        sys.executable, str(Path(slurm_program.__file__).parent), str(tmp_path / "no.sock"),
        str(site)))
    program.chmod(0o755)
    done = subprocess.run(["/bin/sh", "-c", 'PBSPLUG_SITE_RAN="$$ 0 x" exec "$0"',
                           str(program)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "export SEEN=none\n"), done.stderr


def test_controller_names_are_read_as_slurm_reads_slurm_conf(tmp_path):
    # SlurmctldHost in an included file (a site's common layout) is the controller too.
    (tmp_path / "ctl.conf").write_text("SlurmctldHost=head(10.0.0.1)\n# SlurmctldHost=old\n"
                                       "SlurmctldHost=backup\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nInclude ctl.conf\n")
    assert slurm.controller_names(conf) == ["head", "backup"]
    conf.write_text("ClusterName=x\nInclude missing.conf\n")  # (Slurm does not start)
    assert slurm.controller_names(conf) == []
    assert slurm.controller_names(tmp_path / "none.conf") == []


class _GlobT(ctypes.Structure):
    _fields_ = [("gl_pathc", ctypes.c_size_t), ("gl_pathv", ctypes.POINTER(ctypes.c_char_p)),
                ("gl_offs", ctypes.c_size_t), ("rest", ctypes.c_char * 256)]


def _glob3(pattern: str) -> list[str]:
    """What the C library's glob(3) matches, as Slurm and the C launcher call it."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    found = _GlobT()
    if libc.glob(pattern.encode(), 0, None, ctypes.byref(found)) != 0:
        return []
    try:
        return [found.gl_pathv[i].decode() for i in range(found.gl_pathc)]
    finally:
        libc.globfree(ctypes.byref(found))


@pytest.mark.parametrize("tail", ["p*", "[^a]*", "[!a]*", "p\\*x", "p\\?x", "[]a]*", "[a-c]",
                                  "\\[b]", "[^]a]*", "p[*]x", "[b", "*"])
def test_a_site_pattern_matches_what_glob3_matches(tmp_path, tail):
    # The Python program and the C launcher run the same site programs for a pattern.
    for name in ("a", "b", "c", "^", "]", "p*x", "p?x", "pzx", "[b]", "[b"):
        (tmp_path / name).write_text("")
    pattern = f"{tmp_path}/{tail}"
    assert slurm_program.site_programs("prolog", pattern) == _glob3(pattern)


_JOBS = ("other users' jobs", "their suspended and pending jobs")
_RESERVATIONS = ("the reservations it may not use", "those reservations")


@pytest.mark.parametrize("config,uid,hidden", [
    (SHOW_CONFIG_PRIVATE_JOBS, 65534, [_JOBS]),
    (SHOW_CONFIG_PRIVATE_JOBS, 0, []),  # root sees every job
    (SHOW_CONFIG_PRIVATE_JOBS.replace("root(0)", "slurm(64030)"), 64030, []),  # SlurmUser
    (SHOW_CONFIG_PRIVATE_JOBS.replace("root(0)", "slurm(64030)"), 65534, [_JOBS]),
    (SHOW_CONFIG_PRIVATE_JOBS.replace("cloud,jobs", "cloud"), 65534, []),
    (SHOW_CONFIG_PRIVATE_JOBS.replace("cloud,jobs", "cloud,reservations"), 65534,
     [_RESERVATIONS]),
    (SHOW_CONFIG_PRIVATE_JOBS.replace("cloud,jobs", "cloud,reservations"), 0, []),
    (SHOW_CONFIG_PRIVATE_JOBS.replace("cloud,jobs", "accounts,cloud,events,jobs,nodes,"
                                      "partitions,reservations,usage,users"), 65534,
     [_JOBS, _RESERVATIONS]),
])
def test_privatedata_jobs_refuses_the_power_decision_of_a_user_it_hides_jobs_from(
        tmp_path, caplog, monkeypatch, config, uid, hidden):
    """Slurm's PrivateData=jobs shows a caller that is neither root nor SlurmUser only its
    own jobs, squeue's -a or not: 'pbsplug slurm periodic' run as such a user saw no other
    user's suspended or pending job, and the plugin could power off their nodes. Such a run
    is refused now, in one line naming the setting and what it hides, and nothing is fired;
    root and SlurmUser (``SlurmUser = slurm(64030)``) see every job and decide as before.
    PrivateData=reservations (only the reservations a caller may use shown) is refused so
    too: the decision keeps a reservation's nodes up."""
    fired = []

    class Runner:
        def fire(self, event):
            fired.append(event.type)
            return Outcome("periodic", True)

    # (the caller's uid as slurm_power reads it, the rest of os as it is)
    monkeypatch.setattr(slurm_power, "os", type("Os", (), {
        "__getattr__": lambda self, name: getattr(os, name), "geteuid": lambda self: uid})())
    ctx = slurm_bridge.Context({"state_dir": str(tmp_path)}, Runner(),
                               _PowerSlurm(config=config))
    answer = slurm_bridge.dispatch(ctx, {"script": "periodic", "env": {}, "argv": []})
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    if not hidden:
        assert answer["exit"] == 0 and fired == ["periodic"] and lines == []
        return
    assert answer["exit"] == 1 and fired == []
    [line] = lines
    assert "PrivateData=" in line and "\n" not in line
    assert (f"in slurm.conf hides {' and '.join(h[0] for h in hidden)} from uid {uid} "
            "(neither root nor SlurmUser): the power decision would not see "
            f"{' and '.join(h[1] for h in hidden)} and could power off their nodes" in line)


def test_jobs_alone_takes_an_answers_first_record_only_when_it_is_the_ids(tmp_path):
    """`Slurm.jobs_alone` took each answer's first line whatever job it was of; as
    `Slurm.alone` (`_own_record`), a first record that is not the id's is no answer."""
    part0 = JOB.replace("JobId=3 JobName=", "JobId=7 HetJobId=7 HetJobOffset=0 JobName=")
    part1 = JOB.replace("JobId=3 JobName=", "JobId=8 HetJobId=7 HetJobOffset=1 JobName=")
    (tmp_path / "answer-7").write_text(f"{part0}\n{part1}\n")
    (tmp_path / "answer-9").write_text(f"{part1}\n{part0}\n")
    (tmp_path / "scontrol").write_text(
        "#!/bin/sh\nwhile IFS= read -r line; do\n  case \"$line\" in\n"
        f"    \"show job \"*) cat \"{tmp_path}/answer-${{line#show job }}\" ;;\n"
        "    *) echo \"scontrol: $line\" ;;\n  esac\ndone\n")
    (tmp_path / "scontrol").chmod(0o755)
    found, late = Slurm(bin_dir=str(tmp_path), env=None).jobs_alone(["7", "9"], 30)
    assert found == {"7": part0} and late == []


def _het_slurm(tmp_path, refusals: dict[str, str], after: dict[str, str]):
    """Stand-in scontrol and scancel for a heterogeneous job 7 whose part 1 (job 8) runs:
    each command line in `refusals` exits 1 with that text on stderr, and the parts'
    ``JobState`` become `after`'s (``{"8": "PENDING"}``) once one of them was run, as
    22.05 requeues some parts of a requeue it answers with an error."""
    part0 = JOB.replace("JobId=3 JobName=", "JobId=7 HetJobId=7 HetJobOffset=0 JobName=")
    part1 = JOB.replace("JobId=3 JobName=", "JobId=8 HetJobId=7 HetJobOffset=1 JobName=")
    for job_id, record in (("7", f"{part0}\n{part1}\n"), ("8", f"{part1}\n")):
        (tmp_path / f"answer-{job_id}").write_text(record)
    for job_id, record in (("7", f"{part0}\n"), ("8", f"{part1}\n")):
        state = after.get(job_id, "RUNNING")
        (tmp_path / f"after-{job_id}").write_text(
            record.replace("JobState=RUNNING", f"JobState={state}"))
    rest = f'[ "$2 $3" = "show job" ] && {{ cat "{tmp_path}/answer-$4"; exit 0; }}\n'
    for line, why in refusals.items():
        rest += (f'[ "$*" = "{line.split(" ", 1)[1]}" ] && {{ cp {tmp_path}/after-8 '
                 f'{tmp_path}/answer-8; echo "{why}" >&2; exit 1; }}\n')
    return _noting_slurm(tmp_path, rest + "exit 0\n")


@pytest.mark.parametrize("case", ["part 0 --no-requeue", "requeued by part 0's Prolog",
                                  "text: requeuehold"])
def test_a_stop_slurm_answers_with_an_error_but_made_is_no_failure(tmp_path, caplog, case):
    """22.05, a heterogeneous job 7 whose part 1 (job 8) a hook stops. Part 0
    ``--no-requeue``: ``scontrol requeue 7`` (``requeuehold 7``) exits 1 ``Requested
    operation is presently disabled`` but requeues part 1. With ``PrologFlags=Alloc``
    part 0's Prolog requeued the job first: ``requeue 7`` exits 1 ``Job is pending
    execution``. The adapter took either for a job that cannot be requeued, ran ``scancel
    7+1`` on the pending part, which Slurm refuses (``Operation not permitted on individual
    component``), and the Prolog exited 1: the node drained for a job a hook merely judged
    (the reviewer's reproducers, r3, on the real Slurm). The job is read back now: a part
    pending is stopped, exit 0, and no log says it was cancelled."""
    requeue = "scontrol requeuehold 7" if case.startswith("text") else "scontrol requeue 7"
    why = ("Job is pending execution" if "part 0's" in case
           else "Requested operation is presently disabled for job 7")
    calls, slurm_ = _het_slurm(tmp_path, {
        requeue: why,
        "scancel 7+1": "Operation not permitted on individual component of heterogeneous job"},
        {"8": "PENDING"})
    ctx = type("Ctx", (), {"slurm": slurm_})()
    caplog.set_level(logging.INFO, logger="pbsplug")
    if case.startswith("text"):
        answer = slurm_bridge._held_for_its_text(ctx, "8", JobTextError("split"), "Prolog")
    else:
        out = Outcome(event="execjob_begin", accepted=False, hook="h", kind="reject",
                      message="no", consequence="requeue")
        answer = slurm_bridge._host_failure(ctx, out, "8", "n1", "Prolog")
    assert answer == {"exit": 0, "stdout": "", "error": ""}
    acted = [line for line in calls.read_text().splitlines() if " show job " not in line]
    assert acted[1:] == [requeue], acted
    assert "cancelled" not in caplog.text
    assert "job 8 is PENDING: not stopped again" in caplog.text


def test_a_part_still_running_after_a_refused_stop_is_cancelled_or_a_failure(tmp_path,
                                                                             caplog):
    """A requeue refused for a part read back running is a job that cannot be requeued:
    cancelled, as PBS deletes a job it cannot rerun, and logged so; a cancel refused with
    the part still running is the stop's failure (exit 1, the documented rule: Slurm's
    own stops the job rather than let it run unchecked); a hook's delete refused for a part
    already pending is no failure."""
    calls, slurm_ = _het_slurm(tmp_path, {"scontrol requeue 7": "presently disabled"}, {})
    ctx = type("Ctx", (), {"slurm": slurm_})()
    caplog.set_level(logging.INFO, logger="pbsplug")
    out = Outcome(event="execjob_begin", accepted=False, hook="h", kind="reject",
                  message="no", consequence="requeue")
    assert slurm_bridge._host_failure(ctx, out, "8", "n1", "Prolog")["exit"] == 0
    assert calls.read_text().splitlines()[-1] == "scancel 7+1"
    assert "job 8 cannot be requeued (" in caplog.text and "): cancelled" in caplog.text
    calls.unlink()
    calls, slurm_ = _het_slurm(tmp_path, {"scontrol requeue 7": "presently disabled",
                                          "scancel 7+1": "not permitted"}, {})
    ctx = type("Ctx", (), {"slurm": slurm_})()
    answer = slurm_bridge._host_failure(ctx, out, "8", "n1", "Prolog")
    assert answer["exit"] == 1 and "could not be stopped" in answer["error"]
    calls.unlink()
    calls, slurm_ = _het_slurm(tmp_path, {"scancel 7+1": "not permitted"}, {"8": "PENDING"})
    ctx = type("Ctx", (), {"slurm": slurm_})()
    delete = Outcome(event="execjob_begin", accepted=False, hook="h", kind="reject",
                     message="no", consequence="delete")
    assert slurm_bridge._host_failure(ctx, delete, "8", "n1", "Prolog")["exit"] == 0
