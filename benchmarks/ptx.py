"""pipecheck on the compiled kernels of tests/data/ptx at their defaults (no flags but the row's), one
table: verdict, finding codes, states, configurations, wall seconds of the whole process.

    python benchmarks/ptx.py [--only NAME] [--timeout S]

The figures of docs/ptx.md and the README come from this script (one run, 2-core machine).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PTX = ROOT / "tests" / "data" / "ptx"
LOWEST = ["--elect", "lowest"]
ROWS = [  # (file, flags)
    ("cutlass_sm90_pingpong", []),
    ("cutlass_sm90_pingpong", LOWEST),
    ("cutlass_sm90_pingpong_fixed", []),
    ("cutlass_sm90_pingpong_bug_release_before_wait", LOWEST),
    ("cutlass_sm90_pingpong_bug_consumer_count", LOWEST),
    ("cutlass_sm90_pingpong_bug_no_load_tail", LOWEST),
    ("cutlass_sm90_cooperative", []),
    ("cutlass_sm90_cooperative", LOWEST),
    ("cutlass_sm90_cooperative_fixed", []),
    ("cutlass_sm90_cooperative_bug_release_before_wait", LOWEST),
    ("cutlass_sm90_cooperative_bug_consumer_count", LOWEST),
    ("cutlass_sm90_cooperative_bug_no_load_tail", LOWEST),
    ("cute_dsl_tma_pipeline", []),
    ("cute_dsl_tma_pipeline_bug_release_before_wait", []),
    ("cute_dsl_tma_pipeline_bug_consumer_count", []),
]


def run(name: str, flags: list[str], timeout: float) -> dict:
    cmd = [sys.executable, "-m", "pipecheck", "verify", str(PTX / f"{name}.ptx"), "--format", "json", *flags]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"verdict": f"timeout (> {timeout:.0f} s)", "codes": "", "states": "", "configs": "",
                "params": "", "s": timeout}
    secs = time.perf_counter() - t0
    try:
        data = json.loads(done.stdout)
    except ValueError:
        return {"verdict": f"error (exit {done.returncode})", "codes": done.stderr.strip()[:60], "states": "",
                "configs": "", "params": "", "s": secs}
    codes = ", ".join(sorted({f["code"] for f in data["findings"]}))
    conds = sorted({f["condition"] for f in data["findings"] if f.get("condition")})
    return {"verdict": data["verdict"], "codes": codes + (f" ({'; '.join(conds)})" if conds else ""),
            "states": data["stats"]["states"], "configs": data["stats"]["configurations"],
            "params": " ".join(f"{k}={v}" for k, v in data["params"].items()), "s": secs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", help="only rows of this file name (repeatable)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per row (default 900)")
    args = ap.parse_args(argv)
    print("| kernel | flags | parameters | verdict | codes | states | configurations | s |")
    print("|---|---|---|---|---|---:|---:|---:|")
    for name, flags in ROWS:
        if args.only and name not in args.only:
            continue
        r = run(name, flags, args.timeout)
        states = f"{r['states']:,}" if isinstance(r["states"], int) else r["states"]
        print(f"| {name} | {' '.join(flags)} | {r['params']} | {r['verdict']} | {r['codes']} | {states} | "
              f"{r['configs']} | {r['s']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
