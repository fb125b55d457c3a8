"""Replay every replayable configuration of specs/ and examples/ on an H200 and record the
outcomes in tests/hw/h200.json (docs/replay.md); one command, one device call, < 10 minutes.

    python benchmarks/hw/run_h200.py prepare      # here (needs pipecheck): emit build/hw/*.cu and plan.json
    python benchmarks/hw/run_h200.py build        # optional, here: build the programs (when the GPU host has no nvcc)
    python3 benchmarks/hw/run_h200.py run         # on the H200 (python stdlib, nvcc if not built): build, run
    python benchmarks/hw/run_h200.py              # both, on a machine that has pipecheck and the GPU
    python benchmarks/hw/run_h200.py prepare --list   # what would be replayed and what is refused

Configurations: parameters at their defaults and at each `# expect[-D NAME=V]` header; every
elect() forced to lane 0 and to lane 3 where the spec elects; each `choose` enumerated up to
--max-choices combinations. The `run` step imports nothing of pipecheck, so the GPU machine
needs no Python packages: carry build/hw to it.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import itertools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTCOME_SCHEMA = "pipecheck-replay-outcome/1"
DEFAULT_OUTPUT = ROOT / "tests/hw/h200.json"
NVCC_FLAGS = ["-O2", "-gencode=arch=compute_90a,code=sm_90a"]
ELECT_LANES = (0, 3)


# ---------------------------------------------------------------- prepare (needs pipecheck)


def spec_files(root: Path) -> list[Path]:
    return sorted(p for d in ("specs", "examples") for p in (root / d).rglob("*.pipe") if "lib" not in p.parts)


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


def _role_chooses(body) -> list[tuple[int, int, int]]:
    from pipecheck.model.ir import RConst
    out: list[tuple[int, int, int]] = []
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


def configurations(spec: str, pins: tuple, max_choices: int) -> list[tuple[int | None, tuple]]:
    """(elected lane, choices) pairs to replay for one spec at these parameters."""
    from pipecheck.core.diagnostics import SpecError
    from pipecheck.lang.lower import resolve_roles
    from pipecheck.pipeline.verify import load_checked
    sources: dict[str, str] = {}
    try:
        k = load_checked(spec, dict(pins), sources)
        codes, _ = resolve_roles(k, sources)
    except SpecError:
        return [(None, ())]
    lanes: list[int | None] = list(ELECT_LANES) if any(c.elect_masks for c in codes) else [None]
    axes: list[tuple[str, list[tuple[int, ...]]]] = []
    for c in k.kchooses:
        n = 1
        for d in c.dims:
            n *= d
        # every element at one value first, then mixed patterns, up to the limit
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


def prepare(out_dir: Path, max_choices: int, only: str) -> list[dict]:
    """Emit every configuration's program into out_dir; plan.json lists them (and the refusals)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from pipecheck.core.diagnostics import SpecError
    from pipecheck.replay.cuda import ReplayOptions, emit
    os.chdir(ROOT)
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for spec in spec_files(ROOT):
        rel = spec.relative_to(ROOT).as_posix()
        if only not in rel:
            continue
        for pins in header_overrides(spec):
            for lane, choices in configurations(rel, pins, max_choices):
                name = rel.replace("/", "__")[: -len(".pipe")] + "".join(f"__{n}{v}" for n, v in pins)
                name += "" if lane is None else f"__elect{lane}"
                name += "".join(f"__{n}{'_'.join(map(str, v))}" for n, v in choices)
                job: dict = {"spec": rel, "name": name}
                try:
                    em = emit(rel, ReplayOptions(overrides=pins, elect_lane=lane, choices=choices))
                    job["config"] = em.config
                    (out_dir / f"{name}.cu").write_text(em.source, encoding="utf-8")
                except SpecError as exc:
                    job["config"] = {"params": dict(pins), "elect_lane": lane, "choices": {n: list(v) for n, v in choices}}
                    job["refused"] = "; ".join(d.message for d in exc.diagnostics)
                jobs.append(job)
    for probe in sorted((ROOT / "benchmarks/hw").glob("probe_*.cu")):  # hardware probes the docs cite
        shutil.copyfile(probe, out_dir / probe.name)
    (out_dir / "plan.json").write_text(json.dumps({"jobs": jobs}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return jobs


# ---------------------------------------------------------------- run (python stdlib + nvcc only)


def build(job: dict, out_dir: Path) -> None:
    src, binary = out_dir / f"{job['name']}.cu", out_dir / job["name"]
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if binary.exists() and (nvcc is None or binary.stat().st_mtime >= src.stat().st_mtime):
        return  # built here beforehand (the `build` step) and carried along
    if nvcc is None:
        job["build_error"] = "no nvcc on this machine and no prebuilt program (run the build step first)"
        return
    try:
        p = subprocess.run([nvcc, *NVCC_FLAGS, str(src), "-o", str(binary)], capture_output=True, text=True)
    except OSError as exc:
        job["build_error"] = f"nvcc: {exc}"
        return
    if p.returncode != 0:
        job["build_error"] = (p.stderr or p.stdout)[-2000:]


def probe_jobs(out_dir: Path) -> list[dict]:
    """The probes prepare copied next to the programs (benchmarks/hw/probe_*.cu), as build jobs."""
    return [{"name": p.stem, "probe": True} for p in sorted(out_dir.glob("probe_*.cu"))]


def run_probes(out_dir: Path, timeout_s: float) -> dict[str, object]:
    """Each probe prints one JSON object; a probe that fails is recorded with its error."""
    out: dict[str, object] = {}
    for job in probe_jobs(out_dir):
        binary = out_dir / job["name"]
        if not binary.exists():
            out[job["name"]] = {"error": "not built"}
            continue
        try:
            p = subprocess.run([str(binary)], capture_output=True, text=True, timeout=timeout_s)
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            out[job["name"]] = json.loads(lines[-1]) if lines else {"error": f"exit {p.returncode}: {p.stderr[-300:]}"}
        except (subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            out[job["name"]] = {"error": str(exc)[:300]}
        print(f"  probe {job['name']}: {json.dumps(out[job['name']])[:300]}", flush=True)
    return out


def _outcomes(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if obj.get("schema") == OUTCOME_SCHEMA:
                out.append(obj)
    return out


def run_program(binary: Path, runs: int, timeout_s: float) -> list[dict]:
    """`runs` launches; a process that hangs in a collective or faults ends, so the rest start afresh."""
    out: list[dict] = []
    while len(out) < runs:
        try:
            p = subprocess.run([str(binary), str(runs - len(out))], capture_output=True, text=True, timeout=timeout_s)
            got = _outcomes(p.stdout) or [{"outcome": "faulted", "watchdog": False,
                                           "fault": f"no outcome printed (exit {p.returncode}): {p.stderr[-300:]}"}]
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
    header = cmd("nvidia-smi")
    cuda = header.split("CUDA Version:")[1].split("|")[0].strip() if "CUDA Version:" in header else ""
    nvcc = cmd(shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc", "--version")
    first = smi.splitlines()[0].split(", ") if smi else []
    return {"gpu": first[0] if first else "", "driver": first[1] if len(first) > 1 else "", "cuda": cuda,
            "nvidia_smi": smi, "nvcc": nvcc.splitlines()[-1] if nvcc else "", "host": platform.node(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def run_all(out_dir: Path, output: Path, runs: int, jobs_n: int, timeout_s: float, deadline_s: float,
            first_pass: int = 3) -> int:
    """Two passes: every configuration `first_pass` times, then the rest of `runs` each while the
    deadline allows, so a slow configuration never keeps a later one from running at all."""
    t0 = time.time()
    jobs = json.loads((out_dir / "plan.json").read_text(encoding="utf-8"))["jobs"]
    runnable = [j for j in jobs if not j.get("refused")]
    print(f"{len(jobs)} configurations, {len(runnable)} replayable, {len(jobs) - len(runnable)} refused", flush=True)
    with cf.ThreadPoolExecutor(max_workers=max(1, jobs_n)) as pool:
        list(pool.map(lambda j: build(j, out_dir), runnable + probe_jobs(out_dir)))
    probes = run_probes(out_dir, timeout_s)
    print(f"built in {time.time() - t0:.0f} s; {sum(1 for j in runnable if j.get('build_error'))} build failures",
          flush=True)
    done: dict[str, list[dict]] = {}
    spent: dict[str, float] = {}
    for target in (min(first_pass, runs), runs):
        for j in runnable:
            if j.get("build_error") or time.time() - t0 > deadline_s:
                continue
            have = done.setdefault(j["name"], [])
            if len(have) >= target:
                continue
            t1 = time.time()
            have += run_program(out_dir / j["name"], target - len(have), timeout_s)
            spent[j["name"]] = spent.get(j["name"], 0.0) + time.time() - t1
            print(f"  [{time.time() - t0:5.0f} s] {j['name']}: {', '.join(r.get('outcome', '?') for r in have)}",
                  flush=True)
    records = []
    for j in jobs:
        rec = {k: j[k] for k in ("spec", "name", "config", "refused") if k in j}
        if j.get("build_error"):
            rec["runs"] = [{"build_error": j["build_error"]}]
        elif not j.get("refused") and not done.get(j["name"]):
            rec["not_run"] = f"the run's deadline of {deadline_s:.0f} s had passed"
        elif not j.get("refused"):
            rec["runs"] = [{**r, "run": i} for i, r in enumerate(done[j["name"]])]
            rec["seconds"] = round(spent[j["name"]], 2)
        records.append(rec)
    info = machine()
    if not info["gpu"] and output == DEFAULT_OUTPUT:
        print(f"no GPU answered nvidia-smi: {DEFAULT_OUTPUT} is not written (pass --output to keep this run)",
              file=sys.stderr)
        return 1
    doc = {"schema": "pipecheck-hw-conformance/1", "machine": info, "runs_per_configuration": runs,
           "seconds": round(time.time() - t0, 1), "configurations": records, "probes": probes}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {output} in {time.time() - t0:.0f} s", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", nargs="?", choices=["prepare", "build", "run", "all"], default="all")
    ap.add_argument("--runs", type=int, default=5, help="launches per configuration (default 5)")
    ap.add_argument("--first-pass", type=int, default=3,
                    help="launches per configuration in the first pass over all of them (default 3)")
    ap.add_argument("--max-choices", type=int, default=4, help="choose combinations per spec and elected lane")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="parallel nvcc builds")
    ap.add_argument("--build-dir", default=str(ROOT / "build/hw"), help="where programs are emitted and built")
    ap.add_argument("--output", default=str(DEFAULT_OUTPUT))
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds one program may run before it is killed")
    ap.add_argument("--only", default="", help="only specs whose path contains this text")
    ap.add_argument("--deadline", type=float, default=480.0,
                    help="seconds after which the remaining configurations are recorded as not run (default 480, "
                         "so one device call of 10 minutes always ends with the file written)")
    ap.add_argument("--list", action="store_true", help="with prepare: print the configurations and refusals")
    args = ap.parse_args(argv)
    out_dir = Path(args.build_dir)
    if args.step in ("prepare", "all"):
        jobs = prepare(out_dir, args.max_choices, args.only)
        n_ref = sum(1 for j in jobs if j.get("refused"))
        print(f"prepared {len(jobs)} configurations in {out_dir} ({len(jobs) - n_ref} replayable, {n_ref} refused)")
        if args.list:
            for j in jobs:
                c = j["config"]
                key = " ".join([f"{k}={v}" for k, v in sorted(c["params"].items())]
                               + [f"elect={'lowest' if c['elect_lane'] is None else c['elect_lane']}"]
                               + [f"{k}={','.join(map(str, v))}" for k, v in sorted(c["choices"].items())])
                print(f"  {'REFUSED ' if j.get('refused') else ''}{j['spec']} [{key}]"
                      + (f": {j['refused']}" if j.get("refused") else ""))
    if args.step == "build":  # without a GPU: build here, carry the binaries (build/hw, ~1 MB each)
        jobs = [j for j in json.loads((out_dir / "plan.json").read_text(encoding="utf-8"))["jobs"] if not j.get("refused")]
        jobs += probe_jobs(out_dir)
        with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(lambda j: build(j, out_dir), jobs))
        failed = [j["name"] for j in jobs if j.get("build_error")]
        print(f"built {len(jobs) - len(failed)} programs in {out_dir}; failures: {', '.join(failed) or 'none'}")
        return 1 if failed else 0
    if args.step in ("run", "all"):
        return run_all(out_dir, Path(args.output), args.runs, args.jobs, min(args.timeout, args.deadline), args.deadline,
                       args.first_pass)
    return 0


if __name__ == "__main__":
    sys.exit(main())
