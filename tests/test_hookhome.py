"""`pbsplug.hook_home`: where an adapter's install recorded that a plugin's hooks run as
another user, with a pbsplug home of theirs (kernel API 1.8)."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from pbsplug import HookHome, hook_home
from pbsplug.hookhome import RECORD, forget_hook_homes, record_hook_homes


def test_a_recorded_plugin_runs_as_its_user_with_its_home_and_others_with_this_ones(tmp_path):
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert hook_home("power", tmp_path) is None  # no record: this process's home
    path = record_hook_homes({"power": (me, "/var/spool/x/slurmuser")}, "an install",
                             tmp_path)
    assert path == tmp_path / RECORD and path.stat().st_mode & 0o777 == 0o644
    assert hook_home("power", tmp_path) == HookHome(
        "power", Path("/var/spool/x/slurmuser"), me, os.geteuid(), "an install")
    assert hook_home("cpuset", tmp_path) is None
    assert not forget_hook_homes("another install", tmp_path) and path.exists()
    assert record_hook_homes({}, "an install", tmp_path) is None  # nothing runs elsewhere
    assert not path.exists() and hook_home("power", tmp_path) is None


@pytest.mark.parametrize("text,why", [
    ("[", "not a record of where plugins' hooks run (not JSON: Expecting value"),
    ('{"plugins": []}', 'not a record of where plugins\' hooks run (no "plugins" object)'),
    ('{"plugins": {"power": {"user": "root", "home": "relative"}}}',
     "plugin 'power': expected {\"user\": name, \"home\": absolute path}"),
    ('{"plugins": {"power": {"user": "pbsplug-no-such-user", "home": "/x"}}}',
     "plugin power's hooks run as 'pbsplug-no-such-user', who is no user on this host"),
    # (pwd.getpwnam and the folder's stat raised ValueError: "embedded null byte", all that
    # pbsplug power status said)
    ('{"plugins": {"power": {"user": "root\\u0000", "home": "/x"}}}',
     "plugin 'power': a NUL character in its user or home, found {\"user\": \"root\\u0000\""),
    ('{"plugins": {"power": {"user": "root", "home": "/x\\u0000y"}}}',
     "plugin 'power': a NUL character in its user or home"),
    # (a lone surrogate: pwd's UnicodeEncodeError, a home a later stat raised it for)
    ('{"plugins": {"power": {"user": "root\\ud800", "home": "/x"}}}',
     "plugin 'power': a character no name or path holds (a lone surrogate) in its user or "
     "home, found {\"user\": \"root\\ud800\""),
    ('{"plugins": {"power": {"user": "root", "home": "/x\\udfff"}}}',
     "plugin 'power': a character no name or path holds"),
])
def test_a_record_that_cannot_be_used_is_one_line_naming_it(tmp_path, text, why):
    (tmp_path / RECORD).write_text(text)
    with pytest.raises(OSError) as caught:
        hook_home("power", tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / RECORD}: ") and why in message, message
    assert "\n" not in message


@pytest.mark.parametrize("text, why", [
    ('{"plugins": {"power": {"user": "root", "home": "/x"}}, "plugins": {}}',
     'the key "plugins" twice in one object'),
    ('{"plugins": {"power": {"user": "root", "home": "/x", "n": NaN}}}',
     "NaN is not a JSON number"),
    ('{"plugins": {"power": {"user": "root", "home": "/x", "n": %s}}}' % ("9" * 2000),
     "a number of 2,000 digits (at most 1,000)"),
    ('{"plugins": {"power": {"user": "root", "home": "/x", "n": %s}}}'
     % ("[" * 600 + "]" * 600), "arrays or objects nested more than 100 levels deep"),
], ids=["a key twice", "NaN", "2000 digits", "600 deep"])
def test_a_record_json_loads_took_but_jsontext_refuses_is_one_line_naming_it(tmp_path, text,
                                                                              why):
    """Root reads the record of a service user's home: json.loads took a key twice (the
    last one), NaN, a 2,000-digit integer and nesting 600 deep without a word."""
    (tmp_path / RECORD).write_text(text)
    with pytest.raises(OSError) as caught:
        hook_home("power", tmp_path)
    assert str(caught.value) == (f"{tmp_path / RECORD}: not a record of where plugins' hooks "
                                 f"run ({why}); run the install that wrote it again, or "
                                 "remove it")


def test_a_record_that_is_not_utf8_is_one_line_naming_it(tmp_path):
    """A byte that is not UTF-8 was UnicodeDecodeError, not the one-line OSError."""
    (tmp_path / RECORD).write_bytes(b'{"plugins": {}, "x": "caf\xe9"}')
    with pytest.raises(OSError) as caught:
        hook_home("power", tmp_path)
    assert str(caught.value) == (f"{tmp_path / RECORD}: not a record of where plugins' hooks "
                                 "run (not UTF-8 text (byte 0xe9 at offset 25)); run the "
                                 "install that wrote it again, or remove it")


def test_a_record_another_user_could_have_written_is_refused(tmp_path):
    (tmp_path / RECORD).write_text(json.dumps({"plugins": {}}))
    os.chmod(tmp_path / RECORD, 0o666)
    with pytest.raises(OSError, match="writable by others"):
        hook_home("power", tmp_path)
