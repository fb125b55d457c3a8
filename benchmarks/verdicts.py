"""Verdicts of the golden rows: every tests/data/ptx/*.ptx row of MANIFEST.json and every specs/*.pipe
`# expect[FLAGS]:` line, each as verdict, finding codes, states and CPU seconds, one JSON line a row.

Run it on two versions of the code and compare (`--compare OLD NEW`): a reduction must leave the
verdict and the finding codes of every row as they were (states and time may differ).

    PYTHONPATH=$PWD python benchmarks/verdicts.py --out new.jsonl [--only SUBSTRING]
    python benchmarks/verdicts.py --compare old.jsonl new.jsonl
"""
from __future__ import annotations

import argparse
import io
import json
import re
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPECT = re.compile(r"^#\s*expect(?:\[(?P<args>[^\]]*)\])?:\s*(?P<what>.+?)\s*$")


def rows() -> list[tuple[str, list[str]]]:
    out = []
    manifest = json.loads((ROOT / "tests/data/ptx/MANIFEST.json").read_text())
    for e in manifest["entries"]:
        for args, _what, _when in e.get("expect", []):
            out.append((f"tests/data/ptx/{e['file']}", shlex.split(args)))
    for p in sorted((ROOT / "specs").glob("*.pipe")):
        for line in p.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                break
            m = EXPECT.match(line)
            if m:
                out.append((f"specs/{p.name}", shlex.split(m.group("args") or "")))
    return out


def one(path: str, args: list[str]) -> dict:
    from pipecheck.cli import run
    out, err = io.StringIO(), io.StringIO()
    t0 = time.process_time()
    code = run(["verify", str(ROOT / path), "--format", "json", *args], out, err)
    cpu = time.process_time() - t0
    try:
        data = json.loads(out.getvalue())
    except ValueError:
        return {"row": f"{path} {' '.join(args)}".strip(), "exit": code, "error": err.getvalue()[-400:]}
    return {"row": f"{path} {' '.join(args)}".strip(), "exit": code, "verdict": data["verdict"],
            "codes": sorted({f["code"] for f in data["findings"]} | {f["code"] for f in data.get("static", [])}),
            "conditions": sorted({f.get("condition") or "" for f in data["findings"]}),
            "states": data.get("stats", {}).get("states"), "cpu_s": round(cpu, 2)}


def compare(old: Path, new: Path) -> int:
    a = {r["row"]: r for r in map(json.loads, old.read_text().splitlines())}
    b = {r["row"]: r for r in map(json.loads, new.read_text().splitlines())}
    bad = 0
    print("| row | verdict | codes | states before | states after | CPU s before | CPU s after |")
    print("|---|---|---|---:|---:|---:|---:|")
    for row in a:
        if row not in b:
            continue
        x, y = a[row], b[row]
        same = all(x.get(k) == y.get(k) for k in ("exit", "verdict", "codes", "conditions"))
        bad += not same
        mark = "" if same else " **DIFFERS**"
        print(f"| {row} | {y.get('verdict')}{mark} | {', '.join(y.get('codes', []))} | {x.get('states')} | "
              f"{y.get('states')} | {x.get('cpu_s')} | {y.get('cpu_s')} |")
    print(f"\n{len(set(a) & set(b))} rows compared, {bad} differ")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--only", default="")
    ap.add_argument("--compare", nargs=2)
    ns = ap.parse_args()
    if ns.compare:
        return compare(Path(ns.compare[0]), Path(ns.compare[1]))
    with open(ns.out, "w") if ns.out else sys.stdout as f:
        for path, args in rows():
            if ns.only not in f"{path} {' '.join(args)}":
                continue
            r = one(path, args)
            print(json.dumps(r), file=f, flush=True)
            print(r["row"], r.get("verdict"), r.get("states"), r.get("cpu_s"), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
