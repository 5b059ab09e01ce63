"""`pbsplug demo` (the README's `make demo`): real jobs, the installed plugins at work, and
nothing left behind."""

from __future__ import annotations

import glob
import subprocess

from .conftest import PBSPLUG
from .test_server import plugin


def test_the_demo_runs_every_job_with_the_installed_plugins_and_cleans_up(dists):
    plugin(dists, "counter", """
        @hookimpl
        def queuejob(event):
            event.job.Account_Name = "demo"

        @hookimpl
        def execjob_begin(event):
            pass
        """, ("queuejob", "execjob_begin"))
    before = set(glob.glob("/tmp/pbsplug-demo-*"))
    done = subprocess.run([PBSPLUG, "demo"], capture_output=True, text=True,
                          env=dists.env(COLUMNS="200"), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "plugins enabled: counter" in out
    for name, status in (("hello", "0"), ("vscatter", "0"), ("overtime", "271"),
                         ("fails", "3"), ("held", "0"), ("deleted", "271")):
        rows = [line for line in out.splitlines() if line.startswith(f"│ {name} ")]
        assert rows and all(f"│ {status} " in row for row in rows), (name, rows)
    assert "walltime" in out and "exceeded limit 00:00:02" in out
    # the summary's hook runs: 10 submissions through queuejob, 10 starts through begin
    assert any("counter" in line and "queuejob" in line and " 10 " in line
               for line in out.splitlines()), out
    assert any("counter" in line and "execjob_begin" in line for line in out.splitlines())
    assert set(glob.glob("/tmp/pbsplug-demo-*")) == before  # its home is gone
    leftover = subprocess.run(["pgrep", "-f", "pbsplug-demo-"], capture_output=True)
    assert leftover.stdout == b""  # no server or job left running
