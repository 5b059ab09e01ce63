"""Start-up of the ``pbsplug`` command with 5 plugins installed (prints figures; never asserts).

Five plugin distributions are installed into a temporary folder on PYTHONPATH, laid out as pip
lays them out (a module and a ``.dist-info`` with METADATA and entry_points.txt, as
tests/conftest.py does), and a site config in a temporary PBSPLUG_HOME enables all five. Each
command is the venv's console script run as a new process; the figure is its wall time,
from spawn to exit. ``python -c pass`` (the interpreter alone) is the baseline, measured in
the same run, and commands take turns so that a slow moment of the machine is shared.

Goals (issue 2): it sets no figure for start-up. Its rule is that ``pbsplug --version`` and
``pbsplug --help`` import no plugin ("plugins imported" counts the plugin modules each command
imported); ``plugins list`` imports the five it reports on.

    .venv/bin/python benchmarks/bench_startup.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

N_PLUGINS = 5
BIN = Path(sys.executable).parent
PBSPLUG = str(BIN / "pbsplug")
# Each plugin module notes its import in a file, so the table can say which commands load
# plugins.
SOURCE = textwrap.dedent("""
    import os

    from pbsplug import hookimpl

    with open(os.path.join(os.environ["BENCH_IMPORT_LOG"], __name__), "w"):
        pass


    @hookimpl
    def queuejob(event):
        pass
""")
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import pbsplug'": [sys.executable, "-c", "import pbsplug"],
    "pbsplug --version": [PBSPLUG, "--version"],
    "pbsplug --help": [PBSPLUG, "--help"],
    "pbsplug plugins list": [PBSPLUG, "plugins", "list"],
}


def install(root: Path) -> tuple[Path, Path]:
    """5 plugin distributions in root/site-packages, a site config enabling them in
    root/home; returns both folders."""
    site_packages, home = root / "site-packages", root / "home"
    site_packages.mkdir()
    home.mkdir()
    tables = []
    for i in range(N_PLUGINS):
        name = f"noop{i}"
        module = f"pbsplug_{name}"
        (site_packages / f"{module}.py").write_text(SOURCE)
        info = site_packages / f"{module}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: pbsplug-{name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[pbsplug]\n{name} = {module}\n")
        tables.append(f"[plugins.{name}]\nenabled = true\n")
    (home / "site.toml").write_text("\n".join(tables))
    return site_packages, home


def run(argv: list[str], env: dict[str, str], log_dir: Path) -> tuple[float, int]:
    """Wall seconds of one run of `argv`, and how many plugin modules it imported."""
    for mark in log_dir.iterdir():
        mark.unlink()
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"bench: {' '.join(argv)} exited {proc.returncode}:\n{proc.stderr}")
    if argv[-2:] == ["plugins", "list"] and proc.stdout.count("enabled") != N_PLUGINS:
        raise SystemExit(f"bench: expected {N_PLUGINS} enabled plugins:\n{proc.stdout}")
    return elapsed, len(list(log_dir.iterdir()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="pbsplug-bench-") as tmp:
        site_packages, home = install(Path(tmp))
        log_dir = Path(tmp) / "imports"
        log_dir.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
        env["PYTHONPATH"] = os.pathsep.join([str(site_packages)] + (
            [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env["PBSPLUG_HOME"] = str(home)
        env["BENCH_IMPORT_LOG"] = str(log_dir)

        times: dict[str, list[float]] = {label: [] for label in COMMANDS}
        imported: dict[str, int] = {}
        for argv in COMMANDS.values():  # warm the page cache, untimed
            run(argv, env, log_dir)
        for _ in range(args.repeat):
            for label, argv in COMMANDS.items():
                elapsed, imported[label] = run(argv, env, log_dir)
                times[label].append(elapsed)

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus, "
          f"{platform.processor() or 'cpu'}, load {load}; {N_PLUGINS} plugins installed and "
          f"enabled; median (and best) of {args.repeat}")
    baseline = statistics.median(times["python -c pass"])
    print(f"{'command':<28} {'ms':>8} {'best':>8} {'over python':>12} {'plugins imported':>17}")
    for label in COMMANDS:
        median, best = statistics.median(times[label]), min(times[label])
        over = "" if label == "python -c pass" else f"+{(median - baseline) * 1e3:.1f}"
        print(f"{label:<28} {median * 1e3:>8.1f} {best * 1e3:>8.1f} {over:>12} "
              f"{imported[label]:>17}")


if __name__ == "__main__":
    main()
