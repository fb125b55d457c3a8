"""pipecheck's verdict on every real-kernel configuration of tests/hw/h200.json "ptx", at the launch the
interposer captured (tests/hw/ptx/), in parallel: codes, the waits its hangs block in, seconds.

    python benchmarks/hw/ptx_model_verdicts.py [-j JOBS] [--first] [NAME ...]

--first: the default run's findings (the first and what follows it within the cause budget) instead of
every distinct finding of the whole state space (what tests/test_conformance.py computes).

Prints one JSON line per configuration and a markdown table (docs/replay.md, "Real kernels").
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HW = ROOT / "tests/hw/h200.json"


def one(row: dict, complete: bool = True) -> dict:
    from pipecheck.replay.outcome import launch_for_row, ptx_model_verdict
    with tempfile.TemporaryDirectory() as d:
        t = time.process_time()
        verdict, blocked = ptx_model_verdict(str(launch_for_row(ROOT, row, Path(d))), row["elect_lane"],
                                             complete=complete)
        return {"name": row["name"], "codes": list(verdict.codes), "may_complete": verdict.may_complete,
                "blocked": blocked, "cpu_s": round(time.process_time() - t, 1), "complete": complete}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--first", action="store_true", help="the default run's findings, not every one")
    args = ap.parse_args(argv)
    rows = json.loads(HW.read_text())["ptx"]["configurations"]
    rows = [r for r in rows if not args.names or r["name"] in args.names]
    out = []
    with cf.ProcessPoolExecutor(max_workers=args.jobs) as ex:
        for res in ex.map(one, rows, [not args.first] * len(rows)):
            print(json.dumps(res), flush=True)
            out.append(res)
    print("\n| configuration | pipecheck | blocks on | CPU s |\n|---|---|---|---:|")
    for r in out:
        waits = ", ".join(f"mbar@{b} p{p}" for b, p in r["blocked"]) or "-"
        print(f"| `{r['name']}` | {', '.join(r['codes']) or 'verified'} | {waits} | {r['cpu_s']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
