import pickle
import weakref

import pytest

from pbsplug import AttributeReadOnly, Event, Job, Vnode
from pbsplug.objects import Queue, Reservation, Server, apply_to_attrs


def test_pbs_names_and_unset_attributes_read_none():
    job = Job("1.srv", {"Job_Name": "sim", "Resource_List": {"ncpus": 4, "walltime": "01:00:00"}})
    assert job.id == "1.srv" and job.Job_Name == "sim"
    assert job.comment is None
    assert job.Resource_List["ncpus"] == 4
    assert job.Resource_List["mem"] is None
    assert job.Resource_List.seconds("walltime") == 3600
    assert job.Resource_List.bytes("mem") is None


def test_changes_are_recorded_and_replayed_on_a_copy():
    vn = Vnode("n1", {"state": "free", "resources_available": {"ncpus": 8}})
    copy = Vnode("n1", vn.to_dict() | {})
    vn.state = "offline"
    vn.comment = "broken"
    vn.resources_available["ncpus"] = 4
    vn.resources_available["mem"] = "16gb"
    del vn.resources_available["mem"]
    changes = vn.take_changes()
    assert changes == {"state": "offline", "comment": "broken",
                       "resources_available": {"ncpus": 4, "mem": None}}
    assert vn.take_changes() == {}
    copy.apply_changes(pickle.loads(pickle.dumps(changes)))
    assert copy.to_dict() == vn.to_dict()


def test_setting_none_unsets():
    job = Job("1.s", {"comment": "x"})
    job.comment = None
    assert "comment" not in job and job.changes() == {"comment": None}


def test_id_and_name_are_read_only():
    job = Job("1.s")
    with pytest.raises(AttributeReadOnly):
        job.id = "2.s"
    with pytest.raises(AttributeError):
        Vnode("n").name = "m"


def test_event_guards_follow_the_event():
    ev = Event.from_dict("jobobit", {"job": {"id": "1.s", "Exit_status": 0}})
    with pytest.raises(AttributeReadOnly, match="jobobit"):
        ev.job.comment = "x"
    ev = Event.from_dict("queuejob", {"job": {"id": "1.s"}})
    ev.job.Job_Name = "renamed"
    with pytest.raises(AttributeReadOnly, match="job_state"):
        ev.job.job_state = "R"
    ev = Event.from_dict("modifyvnode", {"vnode": {"name": "n1"}, "vnode_o": {"name": "n1"}})
    with pytest.raises(AttributeReadOnly):
        ev.vnode.state = "offline"


def test_rerun_and_delete_only_on_the_execution_host():
    ev = Event.from_dict("execjob_begin", {"job": {"id": "1.s"}, "vnode_list": {}})
    ev.job.rerun()
    assert ev.take_changes()["job"]["_action"] == "rerun"
    ev = Event.from_dict("queuejob", {"job": {"id": "1.s"}})
    with pytest.raises(AttributeReadOnly, match="execution-host"):
        ev.job.delete()


def test_a_periodic_job_list_job_takes_rerun_and_delete_only_on_the_host():
    """A server periodic's queued jobs refuse job.rerun()/job.delete(), as the event's own
    job does in a server event (PBS gives them only in MoM hooks): never taken and dropped.
    An exechost_periodic's running jobs take them."""
    ev = Event.from_dict("periodic", {"vnode_list": {}, "resv_list": {},
                                      "job_list": {"1.s": {"job_state": "Q"}}})
    for call in ("rerun", "delete"):
        with pytest.raises(AttributeReadOnly, match=f"job.{call}.. is allowed only in "
                           "execution-host events"):
            getattr(ev.job_list["1.s"], call)()
    ev = Event.from_dict("exechost_periodic", {"vnode_list": {},
                                               "job_list": {"1.s": {"job_state": "R"}}})
    ev.job_list["1.s"].rerun()
    assert ev.job_list["1.s"].action == "rerun"


def test_event_round_trip_through_plain_data():
    data = {"job": {"id": "3.s", "Resource_List": {"select": "1:ncpus=2"}},
            "vnode_list": {"n1": {"state": "free"}}, "vnode_list_fail": {},
            "progname": "/bin/sh", "argv": ["sh", "job.sh"], "env": {"A": "1"}}
    ev = Event.from_dict("execjob_launch", data)
    again = Event.from_dict("execjob_launch", pickle.loads(pickle.dumps(ev.to_dict())))
    assert again.to_dict() == ev.to_dict()


def test_launch_pid_is_read_only_and_travels_as_plain_data():
    ev = Event.from_dict("execjob_launch", {"job": {"id": "3.s"}, "pid": 4242})
    assert ev.pid == 4242 and ev.to_dict()["pid"] == 4242
    with pytest.raises(AttributeReadOnly, match="event.pid is read-only"):
        ev.pid = 1
    assert Event.from_dict("execjob_launch", {"job": {"id": "3.s"}}).pid is None


def test_launch_changes_and_new_vnodes_cross_over():
    data = {"job": {"id": "3.s"}, "vnode_list": {"n1": {"state": "free"}},
            "progname": "/bin/sh", "argv": ["sh"], "env": {"A": "1"}}
    here, there = Event.from_dict("execjob_launch", data), Event.from_dict("execjob_launch", data)
    there.env["B"] = "2"
    there.argv.append("-x")
    changes = there.take_changes()
    here.apply_changes(changes)
    assert here.env == {"A": "1", "B": "2"} and here.argv == ["sh", "-x"]

    start, copy = (Event.from_dict("exechost_startup", {"vnode_list": {}}) for _ in range(2))
    start.vnode_list["h[0]"] = Vnode("h[0]", {"resources_available": {"ncpus": 2}})
    copy.apply_changes(start.take_changes())
    assert copy.vnode_list["h[0]"].resources_available["ncpus"] == 2


@pytest.mark.parametrize("data,match", [
    ({"job": {"Job_Name": "x"}}, "'job': a job needs 'id'"),
    ({"job": [1]}, "'job': expected a JSON object"),
    ({"vnode": {"name": "n"}}, "queuejob does not carry 'vnode'"),
    ({"job": {"id": 5}}, "must be a string"),
])
def test_event_input_errors_name_the_key(data, match):
    with pytest.raises(ValueError, match=match):
        Event.from_dict("queuejob", data)


def test_unknown_event():
    with pytest.raises(ValueError, match="unknown event 'qeuejob'"):
        Event("qeuejob")


def test_vnode_list_read_only_where_the_event_says():
    ev = Event.from_dict("execjob_attach", {"job": {"id": "1"}, "pid": 4})
    assert ev.vnode_list is None and ev.pid == 4
    ev = Event.from_dict("periodic", {"vnode_list": {"n1": {}}, "resv_list": {}})
    ev.vnode_list["n1"].state = "offline"
    assert ev.take_changes() == {"vnode_list": {"n1": {"state": "offline"}}}


def test_objects_survive_pickling_with_their_resources():
    """A scheduler process gets its snapshot pickled: resources must still read PBS's way
    (an unset one is None) after the trip."""
    import pickle

    job = Job("1.s", {"queue": "q", "Resource_List": {"select": "1:ncpus=2"}})
    back = pickle.loads(pickle.dumps(job))
    assert (back.id, back.queue, back.Resource_List["select"]) == ("1.s", "q", "1:ncpus=2")
    assert back.Resource_List["walltime"] is None
    vnode = pickle.loads(pickle.dumps(Vnode("n1", {"resources_available": {"ncpus": 4}})))
    assert vnode.resources_available["ncpus"] == 4 and vnode.resources_available["mem"] is None


def test_only_queuejob_routes_a_job_and_movejob_may_write_its_destination():
    """modifyjob's job.queue was stored unchecked (a user's job ran in another user's
    reservation); movejob's job carries the destination, which the server keeps."""
    from pbsplug.events import EVENTS

    assert EVENTS["queuejob"].may_write_job("queue")
    assert EVENTS["movejob"].may_write_job("queue")
    for name in ("modifyjob", "postqueuejob", "runjob", "execjob_begin"):
        assert not EVENTS[name].may_write_job("queue"), name


def test_a_hooks_changes_apply_to_plain_attributes_resource_by_resource():
    """One rule for the engine's and the simulator's hook changes (queuejob in a replay,
    a runjob refusal, the execution-host events): a resource mapping's entries one by one
    (a hook that set walltime alone leaves the select), None unsets one, other
    attributes whole, an attribute set to None unset (it was stored as None, which no
    object shows), the runner's own ``_`` names left out."""
    from pbsplug.objects import apply_to_attrs

    attrs = {"Resource_List": {"select": "2:ncpus=1", "mem": "1gb"}, "comment": "x",
             "Account_Name": "a", "resources_used": {"cput": "00:00:09"}}
    apply_to_attrs(attrs, {"Resource_List": {"walltime": "00:00:50", "mem": None},
                           "comment": "y", "_action": "rerun", "Account_Name": None,
                           "resources_used": None})
    assert attrs == {"Resource_List": {"select": "2:ncpus=1", "walltime": "00:00:50"},
                     "comment": "y"}
    apply_to_attrs(attrs, {"resources_used": {"cput": "00:00:01"}})
    assert attrs["resources_used"] == {"cput": "00:00:01"}


def test_the_attributes_after_a_hook_are_what_its_object_would_show():
    """`attrs_after` (a request's object after its hooks, made of their changes, never of
    the event's object): what `to_dict` shows after the same writes, in a new dict that
    shares nothing with the attributes or the changes it is made of."""
    from pbsplug.objects import attrs_after

    before = {"Resource_List": {"select": "2:ncpus=1", "mem": "1gb"}, "comment": "x",
              "Variable_List": {"A": "1"}, "Account_Name": "a"}
    job = Job("1.s", before)
    job.Resource_List["walltime"] = "00:00:50"
    del job.Resource_List["mem"]
    job.Account_Name = None
    job.Variable_List = {"A": "2"}
    job.resources_used = {"cput": "00:00:01"}
    changes = job.changes()
    after = attrs_after(before, {**changes, "_action": "rerun"})
    assert after == {k: v for k, v in job.to_dict().items() if k != "id"}
    assert "Account_Name" not in after
    after["Resource_List"]["x"] = after["Variable_List"]["B"] = 1
    assert before["Resource_List"] == {"select": "2:ncpus=1", "mem": "1gb"}
    assert "x" not in changes["Resource_List"] and "B" not in changes["Variable_List"]


def test_a_resource_mapping_unset_then_set_entry_by_entry_keeps_only_the_new_entries():
    """``job.Resource_List = None`` then ``job.Resource_List["ncpus"] = 2``: the job asks
    ncpus=2 alone, in the object and in what a replay of its changes makes (`attrs_after`,
    a request's stored attributes; another process's copy). The record said only
    ``{"ncpus": 2}``, so the replay kept the old walltime and select with it."""
    from pbsplug.objects import attrs_after

    before = {"Resource_List": {"select": "1:ncpus=1", "walltime": "01:00:00"}}
    job = Job("1.s", before)
    job.Resource_List = None
    job.Resource_List["ncpus"] = 2
    assert job.to_dict()["Resource_List"] == {"ncpus": 2}
    assert attrs_after(before, job.changes())["Resource_List"] == {"ncpus": 2}
    copy = Job("1.s", before)
    copy.apply_changes(job.changes())  # (as a forked hook's record is replayed)
    assert copy.to_dict() == job.to_dict()


def test_a_resource_mapping_set_then_unset_replays_as_no_entry_where_it_was_never_set():
    """A hook that sets ``resources_used["cput"]`` and then unsets ``resources_used`` on a
    job that had none records ``{"cput": None}``. Replayed where the mapping is not set
    (the caller's attributes, `apply_to_attrs`; the caller's object, `apply_changes`), it
    leaves no entry: the replay took the record whole there, None values and all, and
    the stored job showed ``cput`` set to null."""
    job = Job("1.s", {})
    job.resources_used["cput"] = "00:00:05"
    job.resources_used = None
    changes = job.changes()
    attrs: dict = {}
    apply_to_attrs(attrs, changes)
    assert attrs == {"resources_used": {}}
    copy = Job("1.s", {})
    copy.apply_changes(changes)
    assert copy.to_dict().get("resources_used") in (None, {})


@pytest.mark.parametrize("cls", [Job, Vnode, Queue, Server, Reservation])
def test_no_hook_object_has_an_attribute_of_its_own(cls):
    """Every hook object holds everything in its slots, as a vnode and a job do: an
    attribute of the Python object's own (``obj._x = 1``, past the attribute names a hook
    may use), which no change record, copy nor pickle carries, is refused with the same
    AttributeError for each, and none has a ``__dict__``; an attribute of PBS's kind (a
    plugin's own name) is set and recorded as on a job."""
    obj = cls("o1", {})
    with pytest.raises(AttributeError, match=f"^'{cls.__name__}' object has no attribute '_x'"):
        obj._x = 1
    assert not hasattr(obj, "__dict__")
    with pytest.raises(TypeError, match="weak reference"):  # (docs/plugin-authors.md)
        weakref.ref(obj)
    obj.site_note = "x"
    assert obj.site_note == "x" and obj.changes() == {"site_note": "x"}


@pytest.mark.parametrize("slot", ["_owner", "_attr"])
def test_a_resource_mapping_stays_its_objects(slot):
    """A resource mapping records each write on its own object and attribute: a hook's
    assignment or deletion of the slots that name them (``_owner``, ``_attr``) is refused,
    where it had a write to one vnode's mapping recorded on another vnode (or under
    another attribute, checked as that one), and stored where the record did not say."""
    vnode, other = Vnode("n0", {"resources_available": {"ncpus": 1}}), Vnode("n1", {})
    mapping = vnode.resources_available
    with pytest.raises(AttributeError, match=f"^'Resources' object attribute '{slot}'"):
        setattr(mapping, slot, other if slot == "_owner" else "resources_assigned")
    with pytest.raises(AttributeError, match=f"^'Resources' object attribute '{slot}'"):
        delattr(mapping, slot)
    mapping["ncpus"] = 7
    assert vnode.changes() == {"resources_available": {"ncpus": 7}}
    assert other.changes() == {}
