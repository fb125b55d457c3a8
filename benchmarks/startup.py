"""Start-up: the whole-process seconds of `pipecheck verify SPEC --max-states 1` (the search stops at
its first state, so this bounds the time to the first state from above: it also holds the report
and the exit), beside `python -c pass` (the interpreter and site, the floor no change of ours moves).

    python benchmarks/startup.py [--runs N] [--tree DIR ...] [SPEC ...]

`warm`: the user's cache holds the files' syntax trees and the compiled record methods (every run
after the first); `cold`: an empty cache (the first run after an install or an edit of the spec).
Each `--tree DIR` is another checkout of pipecheck timed in the same run (PYTHONPATH=DIR), its runs
alternating with the others' so that the machine's load falls on all alike; the table gives each
tree's medians and its ratio to the first. Byte code is compiled first (`compileall`), as an
installed package has it.
"""
from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = ["specs/cutlass_3722.pipe", "specs/cutlass_sm90_pingpong.pipe", "examples/ring.pipe",
         "specs/deepgemm_sm90_fp8.pipe", "specs/fa3_forward.pipe", "specs/cutlass_sm100_2sm_clc_gemm.pipe",
         "tests/data/ptx/cute_dsl_tma_pipeline.ptx"]


def _timed(cmd: list[str], env: dict) -> float:
    # run in the tree (`python -m` puts the working directory first on the path); the spec paths are the same
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=env.get("PYTHONPATH", ROOT), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="*", default=SPECS)
    ap.add_argument("--runs", type=int, default=7, help="runs of each command (the median is shown)")
    ap.add_argument("--tree", action="append", default=[], help="another checkout to time beside this one")
    args = ap.parse_args(argv)
    trees = [ROOT, *[Path(t).resolve() for t in args.tree]]
    for t in trees:
        compileall.compile_dir(str(t / "pipecheck"), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        warm_env = [{**base, "PYTHONPATH": str(t), "XDG_CACHE_HOME": os.path.join(tmp, f"warm{i}")}
                    for i, t in enumerate(trees)]
        floor = [_timed([sys.executable, "-c", "pass"], base) for _ in range(args.runs)]
        rows = []
        for spec in args.specs:
            cmd = [sys.executable, "-m", "pipecheck", "verify", spec, "--max-states", "1"]
            for env in warm_env:
                _timed(cmd, env)  # fills the warm cache
            warm: list[list[float]] = [[] for _ in trees]
            cold: list[list[float]] = [[] for _ in trees]
            for r in range(args.runs):
                for i, env in enumerate(warm_env):
                    warm[i].append(_timed(cmd, env))
                    cold_env = {**env, "XDG_CACHE_HOME": os.path.join(tmp, f"cold{i}-{r}-{len(rows)}")}
                    cold[i].append(_timed(cmd, cold_env))
            rows.append((spec, [statistics.median(w) for w in warm], [statistics.median(c) for c in cold]))
    print(f"python -c pass: {statistics.median(floor):.3f} s (median of {args.runs})")
    head = "| spec |" + "".join(f" warm {i} | cold {i} |" for i in range(len(trees)))
    if len(trees) > 1:
        head += "".join(f" warm {i}/0 |" for i in range(1, len(trees)))
    print(head)
    print("|---|" + "---:|" * (2 * len(trees) + len(trees) - 1))
    for spec, warm_s, cold_s in rows:
        line = f"| {spec} |" + "".join(f" {w:.3f} | {c:.3f} |" for w, c in zip(warm_s, cold_s))
        line += "".join(f" {w / warm_s[0]:.2f} |" for w in warm_s[1:])
        print(line)
    for i, t in enumerate(trees):
        print(f"tree {i}: {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
