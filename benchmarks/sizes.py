"""pipecheck over a grid of sizes of one spec (default: the pingpong family's fixed protocol), against a second
checkout in the same run: verdicts, states and whole-process wall time of each, and their ratios.

The benchmark's own rows (bench.py) are a handful of sizes; a reduction tuned on them can do much worse on sizes
next to them. This grid is the sizes we did not tune on.

    python benchmarks/sizes.py [--base DIR] [--spec PATH --names A,B,C] [--grid a/b/c,...] [--timeout S] [--jobs N]

`--base DIR`: another checkout (a `git worktree`), run with PYTHONPATH=DIR, each row right after this tree's
(the machine is noisy: compare within a row).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC = HERE / "specs" / "pingpong_fixed.pipe"
# STAGES/K_TILES/TILES: the benchmark's rows (7/15/8, 6/9/6) among sizes next to them
GRID = ("7/15/8,6/15/8,6/20/8,7/16/8,7/17/8,7/18/8,7/20/8,7/25/8,8/8/4,8/12/4,8/16/4,8/16/8,8/24/8,5/20/8,"
        "4/30/8,6/9/6,3/15/8")


def run(tree: Path, spec: Path, names: list[str], size: str, timeout: float, jobs: int) -> dict:
    defines = [x for name, value in zip(names, size.split("/"), strict=True) for x in ("-D", f"{name}={value}")]
    cmd = [sys.executable, "-m", "pipecheck", "verify", str(spec), *defines, "--format", "json", "--jobs", str(jobs)]
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tree)
    except subprocess.TimeoutExpired:
        return {"verdict": f"timeout (> {timeout:.0f} s)", "states": None, "s": timeout}
    secs = time.perf_counter() - t0
    try:
        data = json.loads(done.stdout)
    except ValueError:
        return {"verdict": f"error (exit {done.returncode})", "states": None, "s": secs}
    codes = sorted({f["code"] for f in data["findings"]})
    return {"verdict": ", ".join(codes) if codes else data["verdict"], "states": data["stats"]["states"], "s": secs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, help="a second checkout to run each row against (PYTHONPATH)")
    ap.add_argument("--spec", type=Path, default=SPEC, help="the spec (default: the pingpong family's fixed one)")
    ap.add_argument("--names", default="STAGES,K_TILES,TILES",
                    help="the parameters a size sets, in order (default %(default)s; the ring: STAGES,K_TILES,CONSUMERS)")
    ap.add_argument("--grid", default=GRID, help="comma-separated sizes, values in the order of --names "
                    "(default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run before it is cut off")
    ap.add_argument("--jobs", type=int, default=2, help="pipecheck --jobs (default 2, pipecheck's own default)")
    args = ap.parse_args(argv)
    spec = args.spec.resolve()
    names = args.names.split(",")
    print(f"{spec.relative_to(ROOT) if spec.is_relative_to(ROOT) else spec}, --jobs {args.jobs}, "
          f"timeout {args.timeout:.0f} s per run")
    print()
    if args.base:
        print(f"| {'/'.join(names)} | verdict | base verdict | states | base states | s | base s | time ratio | states/s |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    else:
        print(f"| {'/'.join(names)} | verdict | states | s | states/s |")
        print("|---|---|---:|---:|---:|")
    for size in args.grid.split(","):
        size = size.strip()
        me = run(ROOT, spec, names, size, args.timeout, args.jobs)
        rate = f"{me['states'] / me['s']:,.0f}" if me["states"] else "-"
        states = f"{me['states']:,}" if me["states"] is not None else "-"
        if args.base:
            base = run(args.base.resolve(), spec, names, size, args.timeout, args.jobs)
            bstates = f"{base['states']:,}" if base["states"] is not None else "-"
            print(f"| {size} | {me['verdict']} | {base['verdict']} | {states} | {bstates} | {me['s']:.2f} | "
                  f"{base['s']:.2f} | {me['s'] / base['s']:.3f} | {rate} |", flush=True)
        else:
            print(f"| {size} | {me['verdict']} | {states} | {me['s']:.2f} | {rate} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
