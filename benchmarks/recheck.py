"""The `--lockstep` re-check of a run's findings with its probe (search/explore.py `_probe`, session 27) and with its
search alone (as before), the two runs alternating, in one table: the re-check's seconds, the whole run's CPU seconds,
and which probe schedule answered (or that none did and the search decided).

    python benchmarks/recheck.py [--runs N] [--only SUBSTRING] [SPEC ARGS ...]

The rows are every spec of specs/ and examples/ whose header expects findings, at each of its header's flags (as
benchmarks/corpus.py lists them), or the rows given. Each run is `--jobs 1`, so the re-check runs in the run's own
process after its search and its seconds are its own. The verdict of every re-check must be the same in both columns
(the probe only answers where a schedule shows a finding, and then the search would not have verified either); the
script says so where it is not. The seconds are the fewest of `--runs` runs.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the child: pipecheck's CLI, timing the re-check (`verify._scheduling_run`) and noting what the probe did; with
# "search", the probe shows nothing, so the re-check is the depth-first search of before
CHILD = """
import contextlib, io, json, sys, time
from pipecheck.search import explore
from pipecheck.pipeline import verify
mode = sys.argv[1]
info = {"probe": None, "recheck": 0.0, "verdicts": []}
probe = explore._probe
def probed(*args):
    if mode == "search":
        return None
    hit = probe(*args)
    info["probe"] = len(hit[0].path) if hit else "none"
    return hit
explore._probe = probed
run = verify._scheduling_run
def timed(*args, **kw):
    t = time.perf_counter()
    try:
        r = run(*args, **kw)
        info["verdicts"].append(r.verdict)
        return r
    finally:
        info["recheck"] += time.perf_counter() - t
verify._scheduling_run = timed
from pipecheck.cli import main
sys.argv = ["pipecheck"] + sys.argv[2:]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
print(json.dumps(info))
"""


def _run(mode: str, row: str) -> tuple[dict, float]:
    """(what the child says, the CPU seconds of the process) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([sys.executable, "-c", CHILD, mode, "verify", *shlex.split(row), "--jobs", "1"], cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), cpu
    except (ValueError, IndexError):
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:]}, cpu


def _best(runs: list) -> tuple[dict, float]:
    """(What the child said on the run with the fewest re-check seconds, the fewest CPU seconds) of one row's runs
    in one mode; a run that failed, where one did."""
    failed = [run for run in runs if "error" in run[0]]
    if failed:
        return failed[0]
    return min((info for info, _ in runs), key=lambda info: info["recheck"]), min(cpu for _, cpu in runs)


def _rows(only: str) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from benchmarks.corpus import cases
    return [" ".join([str(p.relative_to(ROOT))] + args) for p, args, what in cases(only)
            if not what.startswith("verified") and "(slow)" not in what]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1, help="runs per row and mode (the fewest seconds count)")
    ap.add_argument("--only", default="", help="only specs whose path contains this")
    ap.add_argument("rows", nargs="*", help="a spec and its flags, one quoted argument per row")
    args = ap.parse_args(argv)
    rows = args.rows or _rows(args.only)
    print("| spec | re-check s, search | with the probe | ratio | run CPU s, search | with the probe | "
          "probe |")
    print("|---|---:|---:|---:|---:|---:|---|")
    totals = [0.0, 0.0, 0.0, 0.0]
    differ = []
    for row in rows:
        runs: dict[str, list] = {"search": [], "probe": []}
        for _ in range(args.runs):
            for mode, done in runs.items():
                done.append(_run(mode, row))
        (a, cpu_a), (b, cpu_b) = (_best(runs[mode]) for mode in ("search", "probe"))
        if "error" in a or "error" in b:
            print(f"| {row} | error: {a.get('error') or b.get('error')} | | | | | |")
            continue
        if a["verdicts"] != b["verdicts"]:
            differ.append(row)
        if not a["verdicts"]:  # no finding to re-check (or one the re-check is not for)
            continue
        ratio = b["recheck"] / a["recheck"] if a["recheck"] else float("nan")
        what = "none: the search decided" if b["probe"] == "none" else f"{b['probe']} steps"
        print(f"| {row} | {a['recheck']:.3f} | {b['recheck']:.3f} | {ratio:.2f} | {cpu_a:.2f} | {cpu_b:.2f} | {what} |")
        for k, v in enumerate((a["recheck"], b["recheck"], cpu_a, cpu_b)):
            totals[k] += v
    print(f"| all rows | {totals[0]:.2f} | {totals[1]:.2f} | {totals[1] / totals[0]:.2f} | {totals[2]:.1f} | "
          f"{totals[3]:.1f} | |" if totals[0] else "| all rows | | | | | | |")
    if differ:
        print(f"\nthe re-check's verdicts differ on {len(differ)} row(s): " + "; ".join(differ))
        return 1
    print("\nEvery re-check's verdict is the same with and without the probe.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
