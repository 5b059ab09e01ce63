"""ATOM's ``exclusive`` over every vnode sharing value and job place: the scheduler's rule
(pbs-behavior.md §4), written out by hand as a table, one row per sharing value."""

from __future__ import annotations

import socket

import pytest

from pbsplug import Job, Vnode
from pbsplug_cray_atom import job_is_exclusive, local_vnode

HOST = socket.gethostname().split(".", 1)[0]

PLACES = (None, "free", "pack", "scatter", "vscatter", "excl", "shared", "exclhost",
          "scatter:excl", "pack:shared", "vscatter:exclhost", "free:shared:group=switch")
#                       None free pack scat vsca excl shar exhs s:ex p:sh v:eh f:sh
TABLE = {
    None:               "F    F    F    F    F    T    F    T    T    F    T    F",
    "default_shared":   "F    F    F    F    F    T    F    T    T    F    T    F",
    "default_excl":     "T    T    T    T    T    T    F    T    T    F    T    F",
    "default_exclhost": "T    T    T    T    T    T    F    T    T    F    T    F",
    "ignore_excl":      "F    F    F    F    F    F    F    F    F    F    F    F",
    "force_excl":       "T    T    T    T    T    T    T    T    T    T    T    T",
    "force_exclhost":   "T    T    T    T    T    T    T    T    T    T    T    T",
}
CASES = [(sharing, place, flag == "T") for sharing, row in TABLE.items()
         for place, flag in zip(PLACES, row.split(), strict=True)]


@pytest.mark.parametrize("sharing,place,exclusive", CASES)
def test_exclusive(sharing, place, exclusive):
    job = Job("1.s", {"Resource_List": {"select": "1:ncpus=1"} | (
        {"place": place} if place else {})})
    vnodes = {HOST: Vnode(HOST, {"sharing": sharing} if sharing else {})}
    assert job_is_exclusive(job, vnodes) is exclusive


def test_the_local_vnode_is_the_hosts_own():
    own, numa, other = Vnode(HOST), Vnode(f"{HOST}[1]"), Vnode("n7")
    assert local_vnode({"n7": other, HOST: own, f"{HOST}[1]": numa}) is own
    assert local_vnode({"n7": other, f"{HOST}[1]": numa}) is numa
    assert local_vnode({"n7": other}) is other  # vnodes named freely, as on the local engine
    assert local_vnode({}) is None


def test_no_vnode_reads_as_default_sharing():
    job = Job("1.s", {"Resource_List": {"place": "excl"}})
    assert job_is_exclusive(job, {}) is True
    assert job_is_exclusive(Job("2.s", {}), {}) is False
