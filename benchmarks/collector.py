"""The cycle collector's share of a run: each spec verified with Python's cycle collector paused (what pipecheck
does, core/collector.py) and running (as before session 26), the two runs alternating, in one table: states, the
search's seconds (`--stats`), the whole process's CPU seconds and its peak memory, and the ratios.

    python benchmarks/collector.py [--runs N] [SPEC ARGS ...]

Each row is `--jobs 1` (one process: the peak memory is the search's own). The states must be the same in both
columns (the collector frees nothing a search needs); the script says so when they are not. The seconds are the
fewest of `--runs` runs.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    "benchmarks/specs/pingpong_fixed.pipe -D STAGES=7 -D K_TILES=15 -D TILES=8",
    "benchmarks/specs/pingpong_fixed.pipe -D STAGES=8 -D K_TILES=24 -D TILES=8",
    "benchmarks/specs/umma_fixed.pipe -D STAGES=8 -D K_TILES=16 -D TILES=8 -D EPI=1",
    "benchmarks/specs/ring_fixed.pipe -D STAGES=6 -D K_TILES=24 -D CONSUMERS=4",
    "specs/cutlass_sm90_cooperative.pipe --elect lowest",
    "specs/fa4_forward_sm100.pipe",
    "specs/deepgemm_sm90_fp8.pipe --lockstep",
]
# the child: pipecheck's CLI, with the collector left running when asked (the pause made a no-op)
CHILD = """
import sys
if sys.argv[1] == "running":
    import contextlib
    from pipecheck.core import collector
    collector.paused = contextlib.nullcontext
from pipecheck.cli import main
sys.argv = ["pipecheck"] + sys.argv[2:]
main()
"""


def _run(mode: str, row: str) -> tuple[tuple[int | None, float | None], float, float]:
    """((states, search seconds), CPU seconds of the process, peak MB) of one run."""
    args = shlex.split(row)
    cmd = [sys.executable, "-c", CHILD, mode, "verify", *args, "--stats", "--jobs", "1"]
    p = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read() if p.stdout else ""
    _, _, usage = os.wait4(p.pid, 0)
    m = re.search(r": (\d+) states, .*?([\d.]+) s \(", out)
    cpu = usage.ru_utime + usage.ru_stime
    found = (int(m.group(1)), float(m.group(2))) if m else (None, None)
    return found, cpu, usage.ru_maxrss / 1024


def _best(runs: list) -> tuple[int | None, float | None, float, float]:
    """(States of the first run, the fewest search and CPU seconds, the most peak MB) of one row's runs in one mode;
    no search seconds where a run's `--stats` line was missing."""
    searches = [search for (_, search), _, _ in runs]
    search = None if None in searches else min(searches)
    return runs[0][0][0], search, min(cpu for _, cpu, _ in runs), max(mb for _, _, mb in runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", nargs="*", default=ROWS, help="a spec and its flags, one quoted argument per row")
    ap.add_argument("--runs", type=int, default=3, help="runs of each row and mode (the fewest seconds are shown)")
    args = ap.parse_args(argv)
    print("| spec | states | search s, paused | search s, running | ratio | CPU s, paused | CPU s, running | ratio "
          "| peak MB, paused | peak MB, running |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    same = True
    for row in args.rows:
        runs: dict[str, list] = {"paused": [], "running": []}
        for _ in range(args.runs):
            for mode, done in runs.items():
                done.append(_run(mode, row))
        p, r = (_best(runs[mode]) for mode in ("paused", "running"))
        same = same and p[0] == r[0]
        states = f"{p[0]:,}" if p[0] == r[0] else f"{p[0]} / {r[0]} (differ)"
        search = f"{p[1]:.3f} | {r[1]:.3f} | {p[1] / r[1]:.3f}" if p[1] and r[1] else "? | ? | ?"
        cpu = f"{p[2]:.2f} | {r[2]:.2f} | {p[2] / r[2]:.3f}"
        print(f"| {row} | {states} | {search} | {cpu} | {p[3]:.0f} | {r[3]:.0f} |", flush=True)
    if not same:
        print("the states differ between the modes: a search depends on when the collector runs (a bug)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
