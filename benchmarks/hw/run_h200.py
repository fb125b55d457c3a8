"""Replay every replayable configuration of specs/ and examples/ on an H200 and record the
outcomes in tests/hw/h200.json (docs/replay.md); one command, one device call, < 10 minutes.

    python benchmarks/hw/run_h200.py            # emit, build (in parallel), run each 5 times
    python benchmarks/hw/run_h200.py --plan     # list the configurations, build nothing

Configurations: parameters at their defaults; every elect() forced to lane 0 and to lane 3
where the spec elects; each `choose` enumerated up to --max-choices combinations.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import itertools
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipecheck.diagnostics import SpecError  # noqa: E402
from pipecheck.replay.cuda import ReplayOptions, emit  # noqa: E402
from pipecheck.replay.outcome import config_key, parse_outcomes  # noqa: E402

NVCC_FLAGS = ["-O2", "-gencode=arch=compute_90a,code=sm_90a"]
ELECT_LANES = (0, 3)


@dataclass
class Job:
    spec: str
    opts: ReplayOptions
    name: str
    config: dict | None = None
    source: str = ""
    refused: str = ""
    build_error: str = ""
    binary: Path | None = None


def spec_files(root: Path) -> list[Path]:
    return sorted(p for d in ("specs", "examples") for p in (root / d).rglob("*.pipe") if "lib" not in p.parts)


def _role_chooses(body) -> list[tuple[str, int, int]]:
    from pipecheck.ir import RConst
    out: list[tuple[str, int, int]] = []
    for s in body:
        if s[0] == "choose" and isinstance(s[2], RConst) and isinstance(s[3], RConst):
            out.append((s[1], s[2].value, s[3].value))
        elif s[0] == "block":
            out += _role_chooses(s[1])
        elif s[0] == "for":
            out += _role_chooses(s[4])
        elif s[0] == "if":
            out += _role_chooses(s[2]) + _role_chooses(s[3])
    return out


def header_overrides(spec: Path) -> list[tuple[tuple[str, int], ...]]:
    """The defaults, plus each `# expect[-D NAME=V ...]` header that pins parameters (and nothing else)."""
    out: list[tuple[tuple[str, int], ...]] = [()]
    for line in spec.read_text(encoding="utf-8").splitlines():
        m = re.match(r"#\s*expect\[([^\]]*)\]:", line)
        if not m:
            continue
        words = m.group(1).split()
        if len(words) % 2 or any(w != "-D" for w in words[::2]):
            continue
        pins = []
        for w in words[1::2]:
            name, _, v = w.partition("=")
            if not re.fullmatch(r"-?\d+", v):
                break
            pins.append((name, int(v)))
        else:
            if tuple(pins) not in out:
                out.append(tuple(pins))
    return out


def configurations(spec: Path, max_choices: int) -> list[tuple[int | None, tuple]]:
    """(elected lane, choices) pairs to replay for one spec."""
    from pipecheck.lower import resolve_roles
    from pipecheck.verify import load_checked
    sources: dict[str, str] = {}
    try:
        k = load_checked(str(spec), {}, sources)
        codes, _ = resolve_roles(k, sources)
    except SpecError:
        return [(None, ())]
    elects = any(c.elect_masks for c in codes)
    lanes: list[int | None] = list(ELECT_LANES) if elects else [None]
    axes: list[tuple[str, list[tuple[int, ...]]]] = []
    for c in k.kchooses:
        n = 1
        for d in c.dims:
            n *= d
        # every element at the same value, then each value-pattern up to the limit
        vals = [tuple([v] * n) for v in range(c.lo, c.hi + 1)]
        vals += [p for p in itertools.product(range(c.lo, c.hi + 1), repeat=n) if len(set(p)) > 1]
        axes.append((c.name, vals))
    for code in codes:
        for slot, lo, hi in _role_chooses(code.body):
            name = code.slot_names[slot]
            if all(name != a[0] for a in axes):
                axes.append((name, [(v,) for v in range(lo, hi + 1)]))
    combos = list(itertools.islice(itertools.product(*[v for _, v in axes]), max_choices))
    return [(lane, tuple(zip([a[0] for a in axes], combo))) for lane in lanes for combo in combos]


def plan(root: Path, max_choices: int) -> list[Job]:
    jobs = []
    for spec in spec_files(root):
        rel = spec.relative_to(root).as_posix()
        for pins, (lane, choices) in itertools.product(header_overrides(spec), configurations(spec, max_choices)):
            name = rel.replace("/", "__").removesuffix(".pipe") + "".join(f"__{n}{v}" for n, v in pins)
            name += "" if lane is None else f"__elect{lane}"
            name += "".join(f"__{n}{'_'.join(map(str, v))}" for n, v in choices)
            job = Job(rel, ReplayOptions(overrides=pins, elect_lane=lane, choices=choices), name)
            try:
                em = emit(rel, job.opts)
                job.source, job.config = em.source, em.config
            except SpecError as exc:
                job.refused = "; ".join(d.message for d in exc.diagnostics)
            jobs.append(job)
    return jobs


def build(job: Job, out: Path) -> Job:
    src = out / f"{job.name}.cu"
    src.write_text(job.source, encoding="utf-8")
    binary = out / job.name
    p = subprocess.run(["nvcc", *NVCC_FLAGS, str(src), "-o", str(binary)], capture_output=True, text=True)
    if p.returncode != 0:
        job.build_error = (p.stderr or p.stdout)[-2000:]
    else:
        job.binary = binary
    return job


def run(job: Job, runs: int, timeout_s: float) -> list[dict]:
    """`runs` launches; a process that hangs or faults ends, so the rest are launched afresh."""
    out: list[dict] = []
    while len(out) < runs:
        try:
            p = subprocess.run([str(job.binary), str(runs - len(out))], capture_output=True, text=True,
                               timeout=timeout_s)
            got = parse_outcomes(p.stdout)
            if not got:
                got = [{"outcome": "faulted", "fault": f"no outcome printed (exit {p.returncode}): {p.stderr[-300:]}"}]
        except subprocess.TimeoutExpired:
            got = [{"outcome": "hung", "watchdog": True, "fault": None, "note": "killed by the runner's timeout"}]
        out += got
    for i, o in enumerate(out):
        o["run"] = i
    return out[:runs]


def machine() -> dict:
    def cmd(*args: str) -> str:
        try:
            return subprocess.run(list(args), capture_output=True, text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    smi = cmd("nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader")
    nvcc = cmd("nvcc", "--version")
    return {"gpu": smi.splitlines()[0] if smi else "", "nvidia_smi": smi, "cuda_version": cmd("nvidia-smi").split("CUDA Version:")[-1].split("|")[0].strip() if smi else "",
            "nvcc": nvcc.splitlines()[-1] if nvcc else "", "host": platform.node(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="launches per configuration (default 5)")
    ap.add_argument("--max-choices", type=int, default=4, help="choose combinations per spec and elected lane")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="parallel nvcc builds")
    ap.add_argument("--build-dir", default="build/hw", help="where programs are emitted and built")
    ap.add_argument("--output", default=str(ROOT / "tests/hw/h200.json"))
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds one program may run before it is killed")
    ap.add_argument("--plan", action="store_true", help="list the configurations and refusals, build nothing")
    ap.add_argument("--only", default="", help="only specs whose path contains this text")
    args = ap.parse_args(argv)

    t0 = time.time()
    jobs = [j for j in plan(ROOT, args.max_choices) if args.only in j.spec]
    runnable = [j for j in jobs if not j.refused]
    print(f"{len(jobs)} configurations, {len(runnable)} replayable, {len(jobs) - len(runnable)} refused", flush=True)
    if args.plan:
        for j in jobs:
            print(f"  {'REFUSED ' if j.refused else ''}{j.spec} [{config_key(j.config) if j.config else j.name}]"
                  + (f": {j.refused}" if j.refused else ""))
        return 0
    out_dir = ROOT / args.build_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(lambda j: build(j, out_dir), runnable))
    print(f"built in {time.time() - t0:.0f} s; {sum(1 for j in runnable if j.build_error)} build failures", flush=True)
    records = []
    for j in jobs:
        rec: dict = {"spec": j.spec, "name": j.name, "config": j.config or {}}
        if j.refused:
            rec["refused"] = j.refused
        elif j.build_error:
            rec["runs"] = [{"build_error": j.build_error}]
        else:
            t1 = time.time()
            rec["runs"] = run(j, args.runs, args.timeout)
            rec["seconds"] = round(time.time() - t1, 2)
            print(f"  {j.name}: {', '.join(r.get('outcome', '?') for r in rec['runs'])}", flush=True)
        records.append(rec)
    doc = {"schema": "pipecheck-hw-conformance/1", "machine": machine(), "runs_per_configuration": args.runs,
           "seconds": round(time.time() - t0, 1), "configurations": records}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.output} in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
