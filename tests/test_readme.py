"""The README's example plugin works when pasted: its blocks are written out and tested."""

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"<!-- readme-example: (\S+) -->\n```python\n(.*?)```", re.S)


def test_readme_example_plugin_passes_its_own_test(tmp_path):
    blocks = BLOCK.findall(README.read_text())
    assert [name for name, _ in blocks] == ["pbsplug_walltime_guard.py",
                                            "test_walltime_guard.py"]
    for name, code in blocks:
        (tmp_path / name).write_text(code)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(tmp_path)], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
