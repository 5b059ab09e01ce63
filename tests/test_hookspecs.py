"""The hook specs, their reference (docs/hooks.md) and their tests cannot drift apart.

Every spec has a docstring; docs/hooks.md has one heading per spec with its exact current
signature, in the module's order, and an event table that agrees with `pbsplug.EVENTS`; every
event is a one-``event`` spec and the other way round; every spec has a test named
``test_hook_<name>`` somewhere in the suite (found by parsing, not by grepping).
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from pbsplug import EVENTS, hookspecs

ROOT = Path(__file__).resolve().parent.parent
HOOKS_MD = ROOT / "docs" / "hooks.md"
HEADING = re.compile(r"^### `(.+)`[ \t]*$", re.MULTILINE)


def specs() -> dict[str, object]:
    """Every hook spec, in declaration order."""
    return {name: obj for name, obj in vars(hookspecs).items()
            if callable(obj) and hasattr(obj, "pbsplug_spec")}


def signature(fn) -> str:
    return str(inspect.signature(fn)).replace("'", "")


def documented_signatures(text: str) -> list[str]:
    """The ``### `NAME(SIGNATURE)` `` headings of a hook reference, in order."""
    return HEADING.findall(text)


def hook_test_names(root: Path) -> set[str]:
    """Names of the test functions pytest would collect (module level, or methods of a
    class) in the suite's files; a function nested in another is no test."""
    files = [*root.glob("tests/**/*.py"), *root.glob("plugins/*/tests/**/*.py")]
    names = set()
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        nodes = list(tree.body)
        nodes += [n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body]
        names.update(n.name for n in nodes
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name.startswith("test_"))
    return names


def untested(spec_names, test_names: set[str]) -> list[str]:
    """Specs with no ``test_hook_<name>`` nor ``test_hook_<name>_...`` test."""
    return [name for name in spec_names
            if not any(t == f"test_hook_{name}" or t.startswith(f"test_hook_{name}_")
                       for t in test_names)]


def test_every_spec_has_a_docstring():
    missing = [name for name, fn in specs().items() if not (fn.__doc__ or "").strip()]
    assert not missing, f"hook specs without a docstring: {', '.join(missing)}"


def test_hooks_md_documents_every_spec_with_its_current_signature():
    expected = {f"{name}{signature(fn)}" for name, fn in specs().items()}
    documented = set(documented_signatures(HOOKS_MD.read_text()))
    assert not expected - documented, (
        "docs/hooks.md lacks a '### `NAME(SIGNATURE)`' heading for: "
        + "; ".join(sorted(expected - documented)))
    assert not documented - expected, (
        "docs/hooks.md documents hooks or signatures that pbsplug.hookspecs does not have: "
        + "; ".join(sorted(documented - expected)))


def test_hooks_md_follows_the_order_of_the_spec_module():
    names = [heading.split("(", 1)[0] for heading in documented_signatures(HOOKS_MD.read_text())]
    assert names == list(specs())


def test_hooks_md_event_table_agrees_with_events():
    """The summary table: | `event` | side | `objects`... | on reject | on exception/alarm |"""
    rows = {}
    for line in HOOKS_MD.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 5 and cells[0].strip("`") in EVENTS:
            rows[cells[0].strip("`")] = cells[1:]
    expected = {name: [spec.side, ", ".join(f"`{o}`" for o in spec.objects),
                       f"`{spec.on_reject}`", f"`{spec.on_error}`"]
                for name, spec in EVENTS.items()}
    assert rows == expected


def test_every_event_is_a_spec_taking_one_event_and_only_events_are():
    params = {name: list(inspect.signature(fn).parameters) for name, fn in specs().items()}
    not_specs = [e for e in EVENTS if params.get(e) != ["event"]]
    assert not not_specs, f"events without a spec taking one `event`: {', '.join(not_specs)}"
    strays = [name for name, p in params.items() if p == ["event"] and name not in EVENTS]
    assert not strays, f"event-style specs missing from pbsplug.EVENTS: {', '.join(strays)}"


def test_every_spec_has_a_test_named_after_it():
    missing = untested(specs(), hook_test_names(ROOT))
    assert not missing, (
        "hook specs without a test named test_hook_<name> (or test_hook_<name>_...) in "
        "tests/ or plugins/*/tests/: " + ", ".join(missing))


def test_the_checks_themselves_catch_drift(tmp_path):
    """The helpers above see what they must: a missing test, a test in a class or a plugin's
    tests, a near-miss name, and headings only of the exact form."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(
        "def test_hook_queuejob_refuses():\n    pass\n"
        "def test_hook_runjobs():\n    pass\n"
        "def helper_test_hook_jobobit():\n    def test_hook_jobobit():\n        pass\n")
    plugin_tests = tmp_path / "plugins" / "x" / "tests" / "deep"
    plugin_tests.mkdir(parents=True)
    (plugin_tests / "test_b.py").write_text(
        "class TestX:\n    async def test_hook_periodic(self):\n        pass\n")
    names = hook_test_names(tmp_path)
    assert untested(["queuejob", "runjob", "jobobit", "periodic"], names) == [
        "runjob", "jobobit"]
    text = "### `a(event: Event) -> None`\n#### `b()`\n### a(event)\n ### `c()`\n### `d(x: int)`"
    assert documented_signatures(text) == ["a(event: Event) -> None", "d(x: int)"]
