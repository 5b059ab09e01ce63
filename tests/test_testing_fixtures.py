"""pbsplug.testing's fixtures take the arguments docs/plugin-authors.md names."""

from pbsplug.testing import site_toml


def test_local_engine_takes_the_site_config_as_site_toml(local_engine):
    engine = local_engine(site_toml="trace_file = \"trace.jsonl\"\n", env=None)
    assert (engine.root / "site.toml").read_text() == "trace_file = \"trace.jsonl\"\n"
    job_id = engine.submit("true\n")
    assert engine.wait(job_id)["Exit_status"] == 0


def test_site_toml_enables_the_plugin_with_its_attributes_and_config():
    text = site_toml("my_policy", {"key": 1}, freq=1)
    assert "[plugins.my_policy]" in text and "enabled = true" in text
    assert "freq = 1" in text and "key = 1" in text
