"""The real compiled kernels of the PTX corpus on an H200: forced-lane replay, capture, conformance
(docs/replay.md, "Real kernels"; issue 20).

    python benchmarks/hw/run_ptx_h200.py build     # here (pipecheck, nvcc, CUTLASS 4.2): patched cubins, harnesses
    python3 benchmarks/hw/run_ptx_h200.py run      # on the H200 (python stdlib only): capture, then every configuration
    python benchmarks/hw/run_ptx_h200.py compare   # here: pipecheck's verdict on the captured launch, per configuration

`build` writes build/ptxhw/: for each configuration the corpus PTX patched by `pipecheck replay
--emit-ptx` (every elect.sync electing the forced lane, every mbarrier wait bounded) and assembled by
ptxas, its sites table, one host harness per GEMM family (benchmarks/hw/cutlass_gemm_harness.cu, built
with the same CUTLASS 4.2 headers as the corpus), the capture interposer, and plan.json. `run` first runs
each family's harness on the unpatched PTX under the interposer (the launch record: module, grid, block,
cluster, the Params bytes), then each configuration RUNS times, and writes ptx-outcomes.json. `compare`
runs `pipecheck verify build/ptxhw/capture-FAMILY/launch-0.json` with the configuration's lane and merges
verdicts and outcomes into tests/hw/h200.json under "ptx".
"""
from __future__ import annotations

import argparse
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
BUILD = ROOT / "build/ptxhw"
CORPUS = ROOT / "tests/data/ptx"
PROBLEM = (256, 256, 832)  # M, N, K: 13 k-tiles on the 6-stage ring (2 x 6 + 1), as pipecheck's defaults
SM_COUNT = 2  # two persistent CTAs of two tiles each
WAIT_CYCLES = 1 << 26

# (name, corpus entry, family, forced lane or None for the hardware's election, why this row)
CONFIGS = [
    ("pingpong-lane0", "cutlass_sm90_pingpong", "pingpong", 0, "#3722 kernel, the lane the H200 elects"),
    ("pingpong-lane3", "cutlass_sm90_pingpong", "pingpong", 3, "#3722 kernel, a lane PTX allows"),
    ("pingpong-hw", "cutlass_sm90_pingpong", "pingpong", None, "#3722 kernel, elect.sync as compiled"),
    ("pingpong-fixed-lane0", "cutlass_sm90_pingpong_fixed", "pingpong", 0, "#3722's fix"),
    ("pingpong-fixed-lane3", "cutlass_sm90_pingpong_fixed", "pingpong", 3, "#3722's fix"),
    ("pingpong-bug-consumer-count-lane0", "cutlass_sm90_pingpong_bug_consumer_count", "pingpong", 0, "planted bug"),
    ("pingpong-bug-release-before-wait-lane0", "cutlass_sm90_pingpong_bug_release_before_wait", "pingpong", 0,
     "planted bug"),
    ("cooperative-lane0", "cutlass_sm90_cooperative", "cooperative", 0, "#3722 kernel, the lane the H200 elects"),
    ("cooperative-lane3", "cutlass_sm90_cooperative", "cooperative", 3, "#3722 kernel, a lane PTX allows"),
    ("cooperative-fixed-lane0", "cutlass_sm90_cooperative_fixed", "cooperative", 0, "#3722's fix"),
    ("cooperative-fixed-lane3", "cutlass_sm90_cooperative_fixed", "cooperative", 3, "#3722's fix"),
    ("cooperative-bug-consumer-count-lane0", "cutlass_sm90_cooperative_bug_consumer_count", "cooperative", 0,
     "planted bug"),
    ("cooperative-bug-release-before-wait-lane0", "cutlass_sm90_cooperative_bug_release_before_wait", "cooperative",
     0, "planted bug"),
]
FAMILIES = {"pingpong": "cutlass_sm90_pingpong", "cooperative": "cutlass_sm90_cooperative"}


def _entry(ptx: Path) -> str:
    m = re.search(r"^\.(?:visible\s+)?entry\s+([\w$]+)", ptx.read_text(), re.M)
    if not m:
        raise SystemExit(f"{ptx}: no .entry")
    return m.group(1)


def _sh(cmd: list[str], **kw) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def build(jobs_harness: bool = True) -> None:
    """Here: patched cubins, sites tables, harnesses, interposer, plan.json."""
    import cutlass_library  # noqa: F401 - nvidia-cutlass==4.2.0.0 (the corpus's headers)
    cut = Path(cutlass_library.__file__).parent / "source"
    BUILD.mkdir(parents=True, exist_ok=True)
    plan = {"problem": PROBLEM, "sm_count": SM_COUNT, "wait_cycles": WAIT_CYCLES, "families": {}, "configs": []}
    for name, corpus, family, lane, why in CONFIGS:
        ptx = BUILD / f"{name}.ptx"
        cmd = [sys.executable, "-m", "pipecheck", "replay", str(CORPUS / f"{corpus}.ptx"), "--emit-ptx", str(ptx),
               "--wait-cycles", str(WAIT_CYCLES)] + ([] if lane is None else ["--elect-lane", str(lane)])
        _sh(cmd)
        _sh(["ptxas", "-arch=sm_90a", str(ptx), "-o", str(BUILD / f"{name}.cubin")], stderr=subprocess.DEVNULL)
        plan["configs"].append({"name": name, "corpus": corpus, "family": family, "elect_lane": lane, "why": why,
                                "image": f"{name}.cubin", "sites": f"{name}.ptx.sites.json",
                                "entry": _entry(CORPUS / f"{corpus}.ptx")})
    stub = BUILD / "libcuda.so"
    _sh(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(stub), str(ROOT / "benchmarks/hw/libcuda_stub.c")])
    _sh(["gcc", "-shared", "-fPIC", "-O2", "-I/usr/local/cuda/include", str(ROOT / "pipecheck/replay/capture.c"),
         "-o", str(BUILD / "pipecheck_capture.so"), "-ldl", "-lpthread"])
    procs = []
    for family, corpus in FAMILIES.items():
        shutil.copy(CORPUS / f"{corpus}.ptx", BUILD / f"{corpus}.ptx")
        plan["families"][family] = {"harness": f"harness_{family}", "ptx": f"{corpus}.ptx", "entry": _entry(CORPUS / f"{corpus}.ptx")}
        exe = BUILD / f"harness_{family}"
        if exe.exists() and exe.stat().st_mtime > (ROOT / "benchmarks/hw/cutlass_gemm_harness.cu").stat().st_mtime:
            continue
        cmd = ["nvcc", "-std=c++17", "-arch=sm_90a", "-O2", "--expt-relaxed-constexpr",
               f"-DPC_KERNEL_SOURCE=\"{corpus}.cu\"", f"-I{CORPUS / 'src'}", f"-I{cut / 'include'}",
               f"-I{cut / 'tools/util/include'}", str(ROOT / "benchmarks/hw/cutlass_gemm_harness.cu"),
               "-o", str(exe), f"-L{BUILD}", "-lcuda"]
        print("+", " ".join(cmd), flush=True)
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(BUILD / f"harness_{family}.log", "w")))
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"a harness build failed: see {BUILD}/harness_*.log")
    (BUILD / "plan.json").write_text(json.dumps(plan, indent=1) + "\n")
    shutil.copy(Path(__file__), BUILD / "run_ptx_h200.py")
    print(f"built {len(CONFIGS)} configurations in {BUILD}")


def _outcomes(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:  # (a harness built before the fix printed a non-finite error as a bare inf)
                out.append(json.loads(re.sub(r":\s*(-?inf|nan)\b", ": null", line)))
            except ValueError:
                pass
    return out


def run(build_dir: Path, output: Path, runs: int) -> None:
    """On the H200 (stdlib only): capture each family's launch, then every configuration `runs` times."""
    build_dir = build_dir.resolve()
    plan = json.loads((build_dir / "plan.json").read_text())
    M, N, K = plan["problem"]
    sm = str(plan["sm_count"])
    result = {"schema": "pipecheck-ptx-outcomes/1", "machine": {}, "problem": plan["problem"], "sm_count": plan["sm_count"],
              "wait_cycles": plan["wait_cycles"], "runs_per_configuration": runs, "captures": {}, "configurations": []}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        result["machine"] = {"gpu": smi, "host": platform.node(), "python": platform.python_version()}
    except (OSError, subprocess.SubprocessError):
        pass
    t0 = time.time()
    for family, f in plan["families"].items():
        cap = build_dir / f"capture-{family}"
        cap.mkdir(exist_ok=True)
        env = dict(os.environ, LD_PRELOAD=str(build_dir / "pipecheck_capture.so"), PIPECHECK_CAPTURE_DIR=str(cap),
                   PIPECHECK_CAPTURE_MAX="1")
        p = subprocess.run([str(build_dir / f["harness"]), str(build_dir / f["ptx"]), f["entry"], str(M), str(N), str(K),
                            "1", "20000", sm], capture_output=True, text=True, env=env, timeout=120)
        result["captures"][family] = {"outcomes": _outcomes(p.stdout), "stderr": p.stderr[-2000:],
                                      "files": sorted(x.name for x in cap.iterdir())}
        print(family, "capture:", p.stdout.strip()[:300], flush=True)
    for c in plan["configs"]:
        f = plan["families"][c["family"]]
        try:
            p = subprocess.run([str(build_dir / f["harness"]), str(build_dir / c["image"]), c["entry"], str(M), str(N),
                                str(K), str(runs), "10000", sm], capture_output=True, text=True, timeout=240)
            outs, err = _outcomes(p.stdout), (p.stderr[-1500:] + f" [exit {p.returncode}] " + p.stdout[-1500:]
                                                  if not _outcomes(p.stdout) else p.stderr[-2000:])
        except subprocess.TimeoutExpired:
            outs, err = [], "harness timed out"
        sites = json.loads((build_dir / c["sites"]).read_text())["sites"]
        for o in outs:
            for h in o.get("hangs", ()):
                s = sites[h["site"]] if 0 <= h["site"] < len(sites) else {}
                h["ptx_line"], h["source"], h["chain"] = s.get("ptx_line"), s.get("source"), s.get("chain")
        row = dict(c, outcomes=outs, stderr=err)
        result["configurations"].append(row)
        kinds = sorted({o.get("outcome") for o in outs})
        print(f"{c['name']}: {kinds} {[h['bar'] for o in outs[:1] for h in o.get('hangs', ())]}", flush=True)
    result["seconds"] = round(time.time() - t0, 1)
    output.write_text(json.dumps(result, indent=1) + "\n")


def compare(outcomes: Path, output: Path) -> None:
    """Here: pipecheck's verdict on each family's captured launch at each configuration's lane."""
    data = json.loads(outcomes.read_text())
    rows = []
    for c in data["configurations"]:
        launch = outcomes.parent / f"capture-{c['family']}" / "launch-0.json"
        ptx_name = f"{c['corpus']}.ptx"
        # the captured launch names the unpatched family module; check this configuration's own PTX at its bytes
        rec = json.loads(launch.read_text())
        local = outcomes.parent / f"capture-{c['family']}" / f"launch-{c['corpus']}.json"
        rec["image"] = os.path.relpath(CORPUS / ptx_name, local.parent)
        local.write_text(json.dumps(rec, indent=1) + "\n")
        elect = ["--elect", "lowest" if c["elect_lane"] is None else str(c["elect_lane"])]
        cmd = [sys.executable, "-m", "pipecheck", "verify", str(local), "--format", "json", "--max-states", "400000"] + elect
        t = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
        res = json.loads(p.stdout) if p.stdout.startswith("{") else {"verdict": "error", "findings": []}
        rows.append({"name": c["name"], "verdict": res.get("verdict"), "codes": [f["code"] for f in res.get("findings", [])],
                     "seconds": round(time.time() - t, 1), "findings": res.get("findings", [])})
        print(c["name"], rows[-1]["verdict"], rows[-1]["codes"], flush=True)
    output.write_text(json.dumps(rows, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["build", "run", "compare"])
    ap.add_argument("--build-dir", type=Path, default=BUILD)
    ap.add_argument("--output", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    if args.step == "build":
        build()
    elif args.step == "run":
        run(args.build_dir, args.output or args.build_dir / "ptx-outcomes.json", args.runs)
    else:
        compare(args.output or args.build_dir / "ptx-outcomes.json", args.build_dir / "ptx-verdicts.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
