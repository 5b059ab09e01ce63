import pytest

from pbsplug import ConfigError, load_site
from pbsplug.hookattrs import HookAttributeError, HookAttributes
from pbsplug.settings import Setting, read_cf, validate_config
from pbsplug.siteconfig import default_home, site_path


def write(tmp_path, text, name="site.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_missing_default_file_is_an_empty_site(tmp_path, monkeypatch):
    monkeypatch.setenv("PBSPLUG_HOME", str(tmp_path))
    monkeypatch.delenv("PBSPLUG_SITE", raising=False)
    site = load_site()
    assert not site.exists and site.plugins == {} and not site.is_enabled("any")
    assert site_path() == tmp_path / "site.toml" and default_home() == tmp_path


def test_explicit_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_site(tmp_path / "nope.toml")


def test_site_path_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("PBSPLUG_SITE", str(tmp_path / "env.toml"))
    assert site_path(tmp_path / "arg.toml") == tmp_path / "arg.toml"
    assert site_path() == tmp_path / "env.toml"


def test_plugins_tables(tmp_path):
    path = write(tmp_path, """
enable_all_installed = true
[plugins.a]
enabled = false
order = 5
[plugins.b]
config_file = "b.CF"
[plugins.b.config]
x = 1
""")
    site = load_site(path)
    assert site.is_enabled("b") and not site.is_enabled("a") and site.is_enabled("other")
    assert site.plugins["a"].attributes == {"order": 5}
    assert site.plugins["b"].config_file == tmp_path / "b.CF"
    assert site.plugins["b"].config == {"x": 1}


def test_every_error_names_file_key_and_value(tmp_path):
    path = write(tmp_path, """
enable_all_installed = "yes"
colour = 3
[plugins.a]
enabled = 1
alarm = 0
frobnicate = true
[plugins.b]
config = 7
""")
    with pytest.raises(ConfigError) as err:
        load_site(path)
    text = str(err.value)
    lines = text.splitlines()
    assert len(lines) == 6, text
    assert all(line.startswith(str(path)) for line in lines)
    assert 'enable_all_installed = "yes": expected a bool' in text
    assert "colour = 3: unknown key" in text
    assert "plugins.a.enabled = 1: expected true or false" in text
    assert "plugins.a.alarm = 0: set_hook_alarm: alarm value '0' of a hook must be > 0" in text
    assert "plugins.a.frobnicate = true: unknown key" in text
    assert "plugins.b.config = 7: expected a table" in text


def test_malformed_toml(tmp_path):
    path = write(tmp_path, "[plugins.a\nenabled = true\n")
    with pytest.raises(ConfigError, match=f"{path}: \\(syntax\\).*not valid TOML"):
        load_site(path)


HUGE = "9" * 5000  # (more digits than int() reads: 4300)


@pytest.mark.parametrize("text, line, why", [
    # tomllib raises a plain ValueError for an integer past 4300 digits: it was the
    # command's error, naming neither the file nor a syntax problem, then Python's words.
    (f"[plugins.a]\nenabled = true\n[plugins.a.config]\nn = {HUGE}\n", "(syntax)",
     "not valid TOML: an integer of 5,000 digits, more than the 4,300 read (at line 4)"),
    (f"[plugins.a]\nenabled = true\n[plugins.a.config]\nn = -1_{HUGE}\n", "(syntax)",
     "not valid TOML: an integer of 5,001 digits, more than the 4,300 read (at line 4)"),
    # (a hook attribute's digits as a string: int() of them raised)
    *[(f'[plugins.a]\nenabled = true\n{key} = "{sign}{HUGE}"\n', "plugins.a",
       f"invalid value '{sign}{HUGE[:37 - len(sign)]}...' for hook attribute '{key}': out of "
       "range") for key, sign in (("order", ""), ("order", "-"), ("alarm", "+"), ("freq", ""))],
    # (5000 zeros and a 7: no number past a long, and int() refused them all the same)
    (f'[plugins.a]\nenabled = true\norder = "{"0" * 5000}7"\n', "plugins.a",
     f"invalid value '{'0' * 37}...' for hook attribute 'order': out of range"),
    # (a plugin's JSON .CF file: json.loads raised the same ValueError; read with
    # `pbsplug.jsontext`, an integer of more than 1,000 digits is refused)
    ('[plugins.a]\nenabled = true\nconfig_file = "a.CF"\n', "(line 2)",
     "not valid JSON: a number of 5,000 digits (at most 1,000)"),
])
def test_a_number_python_will_not_read_is_the_files_error(tmp_path, text, line, why):
    write(tmp_path, f'{{"x": 1,\n "n": {HUGE}}}\n', "a.CF")
    path = write(tmp_path, text)
    with pytest.raises((ConfigError, HookAttributeError)) as err:
        site = load_site(path)
        site.plugin_config_values("a")
        site.hook_attributes("a", HookAttributes())
    message = str(err.value)
    assert message.endswith(why) and line in message and "\n" not in message, message
    assert "Exceeds the limit" not in message


def test_a_long_integers_line_is_the_parsed_texts(tmp_path, monkeypatch):
    """The line named is the one of the text the parser read, even when the file is rewritten
    after it (the line was found by reading the file a second time)."""
    import types

    from pbsplug import siteconfig

    path = write(tmp_path, f"[plugins.a]\nenabled = true\n[plugins.a.config]\nn = {HUGE}\n")

    def rewritten(parse):
        def wrapper(*args, **kwargs):
            try:
                return parse(*args, **kwargs)
            finally:
                path.write_text(f"n = {HUGE}\n")
        return wrapper

    real = siteconfig.tomllib
    monkeypatch.setattr(siteconfig, "tomllib", types.SimpleNamespace(
        load=rewritten(real.load), loads=rewritten(real.loads),
        TOMLDecodeError=real.TOMLDecodeError))
    with pytest.raises(ConfigError) as err:
        load_site(path)
    assert str(err.value).endswith("(at line 4)"), str(err.value)


# (digits in a string, a comment, a key, a float, a date or a hex number are no integer the
# parser read: the line named was the first line holding a long digit run)
@pytest.mark.parametrize("before", [
    f's = "{HUGE}"', f"s = '{HUGE}'", f"# {HUGE}", f"x = 1  # {HUGE}",
    f's = """\n{HUGE}\nx = {HUGE}\n"""', f"s = '''\n{HUGE}\nx = {HUGE}\n'''",
    f's = """a\\"""{HUGE}\\\n  {HUGE}""""', f"s = '''{HUGE}'''''",
    f"{HUGE} = 1", f'a.{HUGE}."{HUGE}" = 1', f"[t.{HUGE}]\n[[u.{HUGE}]]",
    f"x = {HUGE}.5\ny = {HUGE}e3\nz = 0x{HUGE}",
    f'x = {{ {HUGE} = 1, y = [1, "{HUGE}"] }}\nd = [1979-05-27 07:32:00, 1]',
])
def test_a_long_integers_line_is_its_own_not_a_strings_or_a_comments(tmp_path, before):
    lines = f"[plugins.a]\nenabled = true\n[plugins.a.config]\n{before}\n".count("\n")
    path = write(tmp_path, f"[plugins.a]\nenabled = true\n[plugins.a.config]\n{before}\n"
                 f"n = [\n  1, # {HUGE}\n  -{HUGE}_\n]\n")
    with pytest.raises(ConfigError) as err:
        load_site(path)
    assert str(err.value).endswith(
        f"an integer of 5,000 digits, more than the 4,300 read (at line {lines + 3})"), \
        str(err.value)[:300]


def test_a_long_integers_line_is_found_in_one_pass(tmp_path):
    """Megabytes of strings and comments holding long digit runs, then the integer: read
    once (a check of each run against the text before it would read some 10 GB)."""
    parts = [f's{i} = "{HUGE}"  # {HUGE}\nl{i} = \'{HUGE}\'\nm{i} = """\n{HUGE}"""\n'
             f"k{i} = '''{HUGE}\n{HUGE}'''\n" for i in range(300)]
    text = f"[plugins.a]\nenabled = true\n[plugins.a.config]\n{''.join(parts)}n = {HUGE}\n"
    assert len(text) > 8_000_000
    with pytest.raises(ConfigError) as err:
        load_site(write(tmp_path, text))
    assert str(err.value).endswith(f"(at line {text.count(chr(10))})"), str(err.value)[-300:]


SCHEMA = {
    "post_timeout": Setting(float, 30.0, gt=0),
    "mode": Setting(str, "on", choices=("on", "off")),
    "hosts": Setting(list, [], items=str),
    "limit": Setting(int),
}


def test_schema_types_defaults_and_limits():
    config, issues = validate_config(SCHEMA, {"post_timeout": 5, "limit": 3}, "f")
    assert issues == []
    assert config == {"post_timeout": 5.0, "mode": "on", "hosts": [], "limit": 3}
    assert isinstance(config["post_timeout"], float)


@pytest.mark.parametrize("values,key,expected", [
    ({"post_timeout": 0, "limit": 1}, "post_timeout", "expected a number > 0"),
    ({"post_timeout": "30", "limit": 1}, "post_timeout", "expected a number"),
    ({"mode": "maybe", "limit": 1}, "mode", "one of 'on', 'off'"),
    ({"hosts": ["a", 2], "limit": 1}, "hosts", "a list of strings"),
    ({"limit": True}, "limit", "expected an integer"),
    ({"limit": 1, "typo": 1}, "typo", "unknown key; known keys: hosts, limit, mode, post_timeout"),
    ({}, "limit", "missing"),
    ({"post_timeout": float("inf"), "limit": 1}, "post_timeout", "> 0, a finite number"),
    ({"post_timeout": float("nan"), "limit": 1}, "post_timeout", "> 0, a finite number"),
    ({"post_timeout": 10 ** 400, "limit": 1}, "post_timeout", "expected a number > 0"),
])
def test_schema_errors(values, key, expected):
    _, issues = validate_config(SCHEMA, values, "conf.CF")
    assert len(issues) == 1
    assert issues[0].key == key and expected in str(issues[0])
    assert str(issues[0]).startswith("conf.CF: ")


@pytest.mark.parametrize("value, shown", [
    (10 ** 400, "1" + "0" * 196 + "..."),
    ("x" * 1_000_000, '"' + "x" * 196 + "..."),
    (["y" * 1000], '["' + "y" * 195 + "..."),
    (10 ** 5000, "<int>"),  # (past Python's 4300 digits: no repr at all)
], ids=["400 digits", "1 MB", "a list", "5000 digits"])
def test_a_config_error_quotes_a_bounded_part_of_the_value(tmp_path, value, shown):
    """A bad value was quoted in full: a 400-digit number, a 1 MB string in the line of
    a config error (and in the server's log, the plugin listing). It is cut at
    `values.QUOTE_MAX` characters, ending in an ellipsis; so is an unknown key."""
    _, issues = validate_config(SCHEMA, {"post_timeout": value, "limit": 1}, "conf.CF")
    assert str(issues[0]) == f"conf.CF: post_timeout = {shown}: expected a number > 0"
    _, issues = validate_config(SCHEMA, {"k" * 10_000: 1, "limit": 1}, "conf.CF")
    assert str(issues[0]).startswith(f"conf.CF: {'k' * 197}... = 1: unknown key")
    bad = "{" + "9" * 100_000 + "}"  # (the line quoted near a JSON error)
    with pytest.raises(ConfigError) as err:
        read_cf(write(tmp_path, bad, "d.CF"))
    assert len(str(err.value)) < 400


def test_a_cf_files_long_number_is_named_at_its_line(tmp_path):
    """A digit string before it (an id in a string) was taken for the number too long."""
    text = '{"id": "' + "7" * 1500 + '",\n "n": 2,\n "m": ' + "9" * 1200 + "}"
    path = write(tmp_path, text, "d.CF")
    with pytest.raises(ConfigError) as err:
        read_cf(path)
    assert "(line 3)" in str(err.value) and 'm\\": 999' in str(err.value), err.value


@pytest.mark.parametrize("setting, expected", [
    (Setting(int, 1, gt=0, le=10 * 365 * 86400), "an integer > 0 and <= 315360000"),
    (Setting(int, 1, ge=0, le=1e9), "an integer >= 0 and <= 1000000000"),
    (Setting(float, 1.0, le=10 * 365 * 86400), "a number <= 315360000"),
    (Setting(float, 1.0, ge=0.001, le=1e9), "a number >= 0.001 and <= 1e+09"),
    (Setting(float, 1.0, gt=0.1234567), "a number > 0.1234567"),
])
def test_bounds_are_written_as_their_values(setting, expected):
    """An integer bound read ``<= 3.1536e+08`` (``:g``); a float's ``:g`` also rounded
    0.1234567 to 0.123457, a bound that is not the one checked."""
    assert setting.expected() == expected


def test_a_config_error_naming_a_key_with_a_line_break_is_one_line():
    """A TOML key may hold a line break (``"a\\nb" = 1``): the unknown key's error was two
    lines (the plugin listing, the server's log). Such a key is quoted as a value is."""
    _, issues = validate_config(SCHEMA, {"a\nb": 1, "limit": 1}, "conf.CF")
    assert str(issues[0]).startswith("conf.CF: 'a\\nb' = 1: unknown key")
    assert "\n" not in str(issues[0])


def test_cf_files(tmp_path):
    good = write(tmp_path, '{"post_timeout": 10}', "a.CF")
    assert read_cf(good) == {"post_timeout": 10}
    bad = write(tmp_path, '{"post_timeout": 10,,}', "b.CF")
    with pytest.raises(ConfigError, match=f"{bad}: \\(line 1\\).*not valid JSON"):
        read_cf(bad)
    with pytest.raises(ConfigError, match="expected a JSON object"):
        read_cf(write(tmp_path, "[1, 2]", "c.CF"))
    with pytest.raises(ConfigError, match="cannot be read"):
        read_cf(tmp_path / "missing.CF")


def test_unreadable_site(tmp_path):
    path = tmp_path / "site.toml"
    path.mkdir()  # unreadable as a file, even for root
    with pytest.raises(ConfigError, match=f"{path}: \\(file\\).*cannot be read"):
        load_site(path)


# -- the kernel's path checks (kernel API 1.9) ---------------------------------------------------
# (read from pbsplug by name in each test: a kernel without them fails these tests only)

@pytest.mark.parametrize("value", ["/", "/var/run/x", "/var/run/x/", "//srv", "/a/./b",
                                   "/a/.../b", "/a/..b", "/a/b..", "/with space/é"])
def test_an_absolute_path_is_taken(value):
    import pbsplug

    assert pbsplug.absolute_path(value) is None
    assert pbsplug.absolute_path_or_empty(value) is None


@pytest.mark.parametrize("value, problem", [
    ("", "expected an absolute path"),
    ("var/run", "expected an absolute path"),
    ("./x", "expected an absolute path"),
    ("~/x", "expected an absolute path"),
    (" /x", "expected an absolute path"),
    ("/a/../b", "expected a path without '..'"),
    ("/..", "expected a path without '..'"),
    ("/a/..", "expected a path without '..'"),
    ("/a\0b", "expected a path without a NUL character"),
])
def test_a_path_that_is_not_absolute_is_refused(value, problem):
    """'..' is refused too: root checks and makes a path level by level as written, and
    '..' after a symbolic link names the link target's parent, another folder."""
    import pbsplug

    assert pbsplug.absolute_path(value) == problem


@pytest.mark.parametrize("value, problem", [
    ("", None),
    ("var/run", 'expected an absolute path or ""'),
    ("/a/../b", "expected a path without '..'"),
    ("/a\0b", "expected a path without a NUL character"),
])
def test_a_path_or_empty(value, problem):
    import pbsplug

    assert pbsplug.absolute_path_or_empty(value) == problem


def test_a_bad_path_is_a_config_error_naming_the_key():
    import pbsplug

    schema = {"state_dir": Setting(str, "", check=pbsplug.absolute_path_or_empty),
              "root": Setting(str, "/sys", check=pbsplug.absolute_path)}
    config, issues = validate_config(schema, {}, "conf.CF")
    assert issues == [] and config == {"state_dir": "", "root": "/sys"}
    _, issues = validate_config(schema, {"state_dir": "rec", "root": "/sys/../x"}, "conf.CF")
    assert [str(i) for i in issues] == [
        'conf.CF: state_dir = "rec": expected an absolute path or ""',
        "conf.CF: root = \"/sys/../x\": expected a path without '..'"]
    _, issues = validate_config(schema, {"root": "/a\0b"}, "conf.CF")
    assert [str(i) for i in issues] == [
        'conf.CF: root = "/a\\u0000b": expected a path without a NUL character']
    assert pbsplug.KERNEL_API >= (1, 9)
    assert {"absolute_path", "absolute_path_or_empty"} <= set(pbsplug.__all__)
