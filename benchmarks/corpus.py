"""Every spec of specs/ and examples/ at each `# expect[FLAGS]:` line of its header, as a user runs it: whole
process, one run each; a table of wall time, CPU time, states, states/s, peak memory and verdict, and the rows over
the issue-16 bound (10 s per spec at its header's flags).

    python benchmarks/corpus.py [--timeout 120] [--only SUBSTRING] [--over 10]

The wall-clock limit only cuts off a run that is far over the bound (the row says `limit`); it never decides a
verdict. Times are of this machine at this load: compare rows of one run, not runs of different days.
"""
from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

from pipecheck.pytest_plugin import expectations

ROOT = Path(__file__).resolve().parent.parent
SLOW = re.compile(r"^#\s*slow:")  # the header says why its default run takes minutes (pytest -m slow runs it)


def cases(only: str) -> list[tuple[Path, list[str], str]]:
    specs = sorted(p for d in ("specs", "examples") for p in (ROOT / d).rglob("*.pipe") if "lib" not in p.parts)
    out = []
    for p in specs:
        if only and only not in str(p):
            continue
        slow = " (slow)" if any(SLOW.match(line) for line in p.read_text().splitlines()[:60]) else ""
        out.extend((p, args, what + slow) for args, what in expectations(p))  # the header, as the pytest plugin reads it
    return out


def run_one(path: Path, args: list[str], timeout: float) -> dict:
    cmd = [sys.executable, "-m", "pipecheck", "verify", str(path), "--format", "json", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"wall": time.perf_counter() - t0, "verdict": "limit", "states": None, "cpu": None, "rss": None}
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        data = json.loads(proc.stdout)
        verdict, states = data["verdict"], data["stats"]["states"]
    except (ValueError, KeyError):
        verdict, states = f"exit {proc.returncode}", None
    return {"wall": wall, "cpu": cpu, "verdict": verdict, "states": states, "rss": after.ru_maxrss / 1024}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=120.0, help="wall-clock seconds before a row is cut off")
    ap.add_argument("--only", default="", help="only specs whose path contains this")
    ap.add_argument("--over", type=float, default=10.0, help="the bound a row is flagged over (seconds)")
    a = ap.parse_args(argv)
    rows = []
    print("| spec | flags | verdict | states | wall s | CPU s | states/s |")
    print("|---|---|---|---:|---:|---:|---:|")
    for path, args, what in cases(a.only):
        r = run_one(path, args, a.timeout)
        r["slow"] = what.endswith("(slow)")
        rows.append((path, args, r))
        rate = f"{r['states'] / r['cpu']:,.0f}" if r["states"] and r["cpu"] else ""
        states = f"{r['states']:,}" if r["states"] is not None else ""
        cpu = f"{r['cpu']:.1f}" if r["cpu"] is not None else ""
        print(f"| {path.relative_to(ROOT)}{' (slow)' if r['slow'] else ''} | {' '.join(args)} | {r['verdict']} | {states} | {r['wall']:.1f} | {cpu} | "
              f"{rate} |", flush=True)
    over = [(p, args, r) for p, args, r in rows if r["wall"] > a.over]
    walls = sorted(r["wall"] for _, _, r in rows)
    print(f"\n{len(rows)} runs; median {walls[len(walls) // 2]:.1f} s, max {walls[-1]:.1f} s; "
          f"{len(over)} over {a.over:g} s" + (":" if over else ""))
    for p, args, r in over:
        print(f"  {p.relative_to(ROOT)} {' '.join(args)}: {r['wall']:.1f} s ({r['verdict']}"
              f"{', a slow row' if r['slow'] else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
