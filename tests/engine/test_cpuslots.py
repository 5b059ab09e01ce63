"""A vnode's ``jobs``, one entry a CPU, numbered as OpenPBS 23.06 numbers them (checked on the
real one: the sequences below are what its pbsnodes printed)."""

from __future__ import annotations

import json

from pbsplug.engine.cpuslots import CpuSlots


def test_the_slots_of_jobs_that_start_and_end_on_one_vnode_as_openpbs():
    slots = CpuSlots()
    running = [("603.vm", "(vm:ncpus=1)"), ("604.vm", "(vm:ncpus=2)"),
               ("605.vm", "(vm:ncpus=1)")]
    assert slots.jobs_on(running, {"vm": 6}) == {
        "vm": ["603.vm/0", "604.vm/1", "604.vm/2", "605.vm/3"]}
    running = [r for r in running if r[0] != "604.vm"]
    assert slots.jobs_on(running, {"vm": 6}) == {"vm": ["603.vm/0", "605.vm/3"]}
    running += [("606.vm", "(vm:ncpus=1)"), ("607.vm", "(vm:ncpus=2)")]
    assert slots.jobs_on(running, {"vm": 6}) == {
        "vm": ["603.vm/0", "606.vm/1", "607.vm/2", "605.vm/3", "607.vm/4"]}
    # A job of no CPU is put on slot 0, and listed first there (the latest first).
    running.append(("608.vm", "(vm:ncpus=0:mem=1048576kb)"))
    assert slots.jobs_on(running, {"vm": 6}) == {
        "vm": ["608.vm/0", "603.vm/0", "606.vm/1", "607.vm/2", "605.vm/3", "607.vm/4"]}


def test_slots_are_kept_whatever_the_order_given_later():
    """A job's slots are its own until it ends: a job seen again keeps them."""
    slots = CpuSlots()
    slots.jobs_on([("1.s", "(n:ncpus=1)")], {"n": 2})
    assert slots.jobs_on([("2.s", "(n:ncpus=1)"), ("1.s", "(n:ncpus=1)")], {"n": 2}) == {
        "n": ["1.s/0", "2.s/1"]}


def test_chunks_on_several_vnodes_and_a_vnode_with_too_few_cpus():
    """Each chunk looks from slot 0 of its vnode; past the last slot a CPU goes on the last
    one (a vnode whose ncpus was lowered under its jobs); a vnode that is gone is left out."""
    slots = CpuSlots()
    got = slots.jobs_on([("1.s", "(a:ncpus=2)+(b:ncpus=3)+(gone:ncpus=1)")],
                        {"a": 4, "b": 2})
    assert got == {"a": ["1.s/0", "1.s/1"], "b": ["1.s/0", "1.s/1", "1.s/1"]}
    # The rest of a host given whole (no resources) is slot 0 without its CPU.
    got = slots.jobs_on([("1.s", "(a:ncpus=2)+(b:ncpus=3)"), ("2.s", "(a:ncpus=1)+(c)")],
                        {"a": 4, "b": 2, "c": 0})
    assert got["a"] == ["1.s/0", "1.s/1", "2.s/2"] and got["c"] == ["2.s/0"]


def test_pbsnodes_and_qmgr_list_each_cpu_of_a_running_job(engine):
    """``jobs = 1.host/0, 2.host/1, 2.host/2`` in pbsnodes and qmgr; pbsnodes -F json
    names each job once (OpenPBS 23.06, checked). A CPU freed goes to the next job."""
    for name in engine.client("stat_nodes"):
        engine.client("node_state", names=[name], offline=True)
    engine.pbs("qmgr", "-c", "create node r1 resources_available.ncpus = 4", check=True)

    def run(ncpus: int) -> str:
        job_id = engine.submit("sleep 300\n", Resource_List={"select": f"1:ncpus={ncpus}"})
        engine.wait(job_id, "R")
        return job_id

    one, two = run(1), run(2)
    listed = f"{one}/0, {two}/1, {two}/2"
    assert f"\n     jobs = {listed}\n" in engine.pbs("pbsnodes", "-v", "r1", check=True).stdout
    assert f"\n    jobs = {listed}\n" in engine.pbs("qmgr", "-c", "list node r1",
                                                   check=True).stdout
    doc = json.loads(engine.pbs("pbsnodes", "-av", "-F", "json", check=True).stdout)
    assert doc["nodes"]["r1"]["jobs"] == [one, two]
    engine.client("delete", ids=[one])
    engine.wait(one)
    three = run(1)
    assert engine.client("stat_nodes", names=["r1"])["r1"]["jobs"] == [
        f"{three}/0", f"{two}/1", f"{two}/2"]
    engine.client("delete", ids=[two, three])
