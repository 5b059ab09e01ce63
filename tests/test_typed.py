"""pbsplug is typed for plugin authors' type checkers: the `py.typed` marker ships with the
package, and what a checker reads of `pbsplug`'s names is what `__getattr__` gives."""

import ast
import sys
from pathlib import Path

import pbsplug

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_the_marker_is_in_the_package_and_its_data():
    assert (Path(pbsplug.__file__).parent / "py.typed").is_file()
    with open(ROOT / "pyproject.toml", "rb") as fh:
        package_data = tomllib.load(fh)["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["pbsplug"]


def test_the_checkers_names_are_those_getattr_gives():
    """Each public name is imported under TYPE_CHECKING from the module `__getattr__` takes
    it from, so that a checker reads its annotations (through `__getattr__` alone, every name
    is `Any` to it)."""
    tree = ast.parse(Path(pbsplug.__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
    typed = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.dump(node)
        for alias in node.names:
            assert alias.asname == alias.name, alias.name  # (re-exported: `X as X`)
            typed[alias.name] = f"{node.module}.{alias.name}" if node.module else alias.name
    runtime = {name: f"{module}.{name}" for name, module in pbsplug._MODULE_OF.items()}
    runtime.update({name: name for name in pbsplug._SUBMODULES})
    assert typed == runtime
