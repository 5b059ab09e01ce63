import pytest

from pbsplug import HookAttributeError, HookAttributes
from pbsplug.hookattrs import format_hk, parse_hk, resolve_attributes

BASE = HookAttributes(events=("execjob_begin", "execjob_end"))


def test_pbs_defaults():
    attrs = HookAttributes()
    assert (attrs.order, attrs.alarm, attrs.freq, attrs.user, attrs.fail_action) == (
        1, 30, 120, "pbsadmin", ())
    assert attrs.enabled is False  # pbsplug: off until the site enables it


@pytest.mark.parametrize("overrides,message", [
    ({"order": 0}, "order given (0) is outside the acceptable range of [1, 1000] for type 'site'."),
    ({"order": 1001}, "order given (1001) is outside the acceptable range of [1, 1000]"),
    ({"type": "pbs", "order": 2001}, "[-1000, 2000] for type 'pbs'"),
    ({"alarm": 0}, "set_hook_alarm: alarm value '0' of a hook must be > 0"),
    ({"alarm": "ten"}, "invalid value 'ten' for hook attribute 'alarm'"),
    ({"freq": 60}, "Can't set hook freq value to '60': hook event must contain at least"
                   "'exechost_periodic' or 'periodic'"),
    ({"freq": "-5"}, "invalid value '-5' for hook attribute 'freq'"),
    ({"user": "pbsuser"}, "Can't set hook user value to 'pbsuser': hook event must contain at "
                          "least execjob_prologue,execjob_epilogue,execjob_preterm"),
    ({"user": "root"}, "invalid value 'root' for hook attribute 'user'"),
    ({"fail_action": "clear_vnodes_upon_recovery"},
     "Can't set hook fail_action value to 'clear_vnodes_upon_recovery': hook event must "
     "contain at least one of exechost_startup"),
    ({"fail_action": "reboot"}, "Can't set hook fail_action value to 'reboot'"),
    ({"fail_action": ["none", "offline_vnodes"]}, "'none' together with another value"),
    ({"events": "execjob_begin,bogus"}, "invalid argument (bogus) to event"),
    ({"events": "provision,execjob_begin"}, "'provision' event cannot be combined"),
    ({"enabled": "maybe"}, "expected true|t|y|1|false|f|n|0"),
    ({"isolation": "thread"}, "expected process or inprocess"),
    ({"colour": "red"}, "unknown hook attribute 'colour'"),
])
def test_pbs_rules_in_pbs_words(overrides, message):
    with pytest.raises(HookAttributeError) as err:
        resolve_attributes("myhook", BASE, overrides)
    assert message in str(err.value)
    assert err.value.code == 15136


def test_valid_combinations():
    attrs = resolve_attributes("h", BASE, {"fail_action": "offline_vnodes,scheduler_restart_cycle",
                                           "enabled": "T", "order": "100", "alarm": 300})
    assert attrs.fail_action == ("offline_vnodes", "scheduler_restart_cycle")
    assert attrs.enabled and attrs.order == 100
    periodic = resolve_attributes("p", HookAttributes(events=("periodic",)), {"freq": "300"})
    assert periodic.freq == 300
    user = resolve_attributes("u", HookAttributes(events=("execjob_prologue",)),
                              {"user": "pbsuser"})
    assert user.mode_for("execjob_prologue") == "process"
    assert resolve_attributes("h", BASE, {"fail_action": "none"}).fail_action == ()


def test_event_before_freq_order_matters_as_in_pbs():
    base = HookAttributes(events=("queuejob",))
    with pytest.raises(HookAttributeError):
        resolve_attributes("h", base, [("freq", "60"), ("event", "queuejob")])
    attrs = resolve_attributes("h", base, [("event", "periodic"), ("freq", "60")])
    assert attrs.freq == 60


def test_site_name_cannot_use_pbs_prefix():
    with pytest.raises(HookAttributeError, match="cannot use PBS as a prefix"):
        resolve_attributes("PBSfoo", BASE, {})


def test_default_modes():
    """Every event runs its hooks in a forked process unless the site opts a hook in."""
    assert BASE.mode_for("execjob_begin") == "process"
    assert HookAttributes(events=("queuejob",)).mode_for("queuejob") == "process"
    assert HookAttributes(events=("periodic",)).mode_for("periodic") == "process"
    assert HookAttributes(isolation="inprocess").mode_for("queuejob") == "inprocess"
    assert HookAttributes(isolation="inprocess", user="pbsuser").mode_for(
        "execjob_prologue") == "process"


def test_hk_written_as_pbs_writes_it():
    attrs = HookAttributes(enabled=False, events=("execjob_begin", "execjob_end"), order=100,
                           alarm=300, fail_action=("offline_vnodes",), type="pbs")
    assert format_hk("PBS_cray_atom", attrs) == (
        "hook_name=PBS_cray_atom\ntype=pbs\nenabled=false\nfail_action=offline_vnodes\n"
        "event=execjob_begin,execjob_end\norder=100\nalarm=300\n")


def test_hk_round_trip():
    attrs = HookAttributes(enabled=True, events=("periodic",), freq=300, order=7, debug=True)
    pairs = parse_hk(format_hk("pw", attrs), "pw.HK", ["pw"])
    back = resolve_attributes("pw", HookAttributes(), pairs)
    assert back == attrs


def test_hk_missing_attributes_mean_pbs_defaults():
    pairs = parse_hk("hook_name=h\n# a comment\nevent=queuejob\n", "h.HK", ["h"])
    attrs = resolve_attributes("h", HookAttributes(order=50), pairs)
    assert attrs.enabled is True and attrs.events == ("queuejob",)


def test_hk_integrity_check():
    with pytest.raises(HookAttributeError, match="failed integrity check"):
        parse_hk("hook_name=other\nenabled=true\n", "x.HK", ["cray_atom", "PBS_cray_atom"])
    with pytest.raises(HookAttributeError, match="x.HK:2: 'garbage' is not attr=value"):
        parse_hk("hook_name=h\ngarbage\n", "x.HK", ["h"])
