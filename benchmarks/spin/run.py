"""Run SPIN on a Promela model and report verdict, states, depth, time and memory.

`run_spin(model_text, workdir, timeout_s)` writes `model.pml` into `workdir`, then runs

    spin -a model.pml
    gcc -O2 -DSAFETY -DMEMLIM=16384 -o pan pan.c
    ./pan -m<max_depth> [-w<hash_bits>]

and returns a dict (see `run_spin`). `-DMEMLIM=16384` is the ring benchmark's 16 GB cap: pan
stops by itself when its allocations reach 16 GiB (`memlim_mb=` sets another: the pingpong
rows of benchmarks/bench.py use 3072). No -DCOLLAPSE, no bitstate or
hash-compact (those would change what is measured or give up exhaustiveness), no -i/-I:
the search is SPIN's default depth-first search with partial-order reduction, which stops at
the first error, so for a failing model the times are the time to the first counterexample.

`python3.11 run.py` prints the benchmark table (see README.md).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.dont_write_bytecode = True  # leave no __pycache__ beside the benchmark
sys.path.insert(0, str(Path(__file__).resolve().parent))
from promela import ring_model  # noqa: E402

MEMLIM_MB = 16384
CFLAGS = ["-O2", "-DSAFETY", f"-DMEMLIM={MEMLIM_MB}"]


def _timed(cmd: list[str], cwd: Path, timeout_s: float) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=max(timeout_s, 1.0))
    return time.perf_counter() - t0, proc


def _run_pan(cmd: list[str], cwd: Path, timeout_s: float) -> tuple[float, int, int, str, bool]:
    """Run pan; on timeout send SIGINT (pan then prints its statistics), SIGKILL 30 s later.

    Returns (wall seconds, exit status, peak RSS in KiB of pan alone, output, timed_out).
    os.wait4 gives the rusage of this one child, so gcc's memory never counts here.
    """
    out_path = cwd / "pan.out"
    timed_out = threading.Event()
    with open(out_path, "w") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)

        def interrupt() -> None:
            timed_out.set()
            proc.send_signal(signal.SIGINT)

        def kill() -> None:
            proc.send_signal(signal.SIGKILL)

        soft = threading.Timer(max(timeout_s, 0.0), interrupt)
        hard = threading.Timer(max(timeout_s, 0.0) + 30.0, kill)
        soft.start()
        hard.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            soft.cancel()
            hard.cancel()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return wall, proc.returncode, usage.ru_maxrss, out_path.read_text(), timed_out.is_set()


def _num(pattern: str, text: str, kind: type = int) -> int | float | None:
    m = re.findall(pattern, text)
    return kind(m[-1]) if m else None


def _final_processes(replay: str, model_text: str) -> list[str]:
    """The processes at the end of a replayed trail: name, line and that line's comment."""
    lines = model_text.splitlines()
    found = []
    for name, line, valid in re.findall(
            r"proc\s+\d+ \((\w+):\d+\) \S+:(\d+) \(state \d+\)( <valid end state>)?", replay):
        if name == "init" or name == ":init:":
            continue
        n = int(line)
        src = lines[n - 1] if 0 < n <= len(lines) else ""
        if src.strip() == "do" and n < len(lines):  # blocked in a loop: its first guard
            src = lines[n]
        m = re.search(r"/\*\s*(.*?)\s*\*/", src)
        where = m.group(1) if m else src.strip()
        found.append(f"{name} at line {line}: {where}" + (" [valid end]" if valid else ""))
    return found


def _cflags(memlim_mb: int) -> list[str]:
    return [f"-DMEMLIM={memlim_mb}" if f.startswith("-DMEMLIM=") else f for f in CFLAGS]


def _failed_assertion(replay: str, model_text: str) -> str | None:
    """The comment on the source line of the assertion the replayed trail violates."""
    m = re.search(r"spin: \S+:(\d+), Error: assertion violated", replay)
    if not m:
        return None
    lines = model_text.splitlines()
    n = int(m.group(1))
    src = lines[n - 1] if 0 < n <= len(lines) else ""
    c = re.search(r"/\*\s*(.*?)\s*\*/", src)
    return c.group(1) if c else src.strip()


def run_spin(model_text: str, workdir: Path, timeout_s: float, *,
             max_depth: int = 100_000, hash_bits: int | None = None,
             memlim_mb: int = MEMLIM_MB) -> dict:
    """Verify `model_text` with SPIN in `workdir` (created if needed).

    `memlim_mb` is pan's -DMEMLIM (16384 by default, the ring benchmark's 16 GB cap; the
    pingpong rows of benchmarks/bench.py use 3072).

    Returns a dict with:
      verdict         "verified" | "hang" | "assertion", or when the search did not finish:
                      "timeout" | "out-of-memory" | "depth-limit" | "error"
      error           pan's error line ("invalid end state (at depth 64)", "assertion
                      violated ..."), or None
      error_depth     depth of the first counterexample, or None
      states          states stored
      transitions     transitions taken (stored + matched)
      depth           depth reached
      state_vector    bytes per state vector
      spin_s, gcc_s, pan_s, total_s   wall seconds of spin -a, gcc, pan, and their sum
      pan_elapsed_s   pan's own elapsed time
      peak_rss_mb     peak resident memory of pan (os.wait4 rusage of that process)
      pan_memory_mb   pan's own "total actual memory usage"
      rusage_children_maxrss_mb   resource.getrusage(RUSAGE_CHILDREN).ru_maxrss, for
                      reference (largest of all children so far, gcc included)
      pan_args        the pan command line
      trail_procs     for a counterexample: each process where the replayed trail
                      (spin -t) leaves it, with the comment of its source line
      assertion       for a violated assertion: the comment on its source line in the
                      model ("overwrite: a wgmma is reading A[0]"), or None
      output          pan's output (the last 4000 characters)
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in ("pan", "pan.out", "model.pml.trail"):
        (workdir / stale).unlink(missing_ok=True)
    (workdir / "model.pml").write_text(model_text)
    deadline = time.perf_counter() + timeout_s
    result: dict = {"verdict": "error", "error": None, "error_depth": None, "states": None,
                    "transitions": None, "depth": None, "state_vector": None,
                    "spin_s": None, "gcc_s": None, "pan_s": None, "total_s": None,
                    "pan_elapsed_s": None, "peak_rss_mb": None, "pan_memory_mb": None,
                    "rusage_children_maxrss_mb": None, "pan_args": None, "trail_procs": None,
                    "assertion": None, "output": ""}

    for key, cmd in (("spin_s", ["spin", "-a", "model.pml"]),
                     ("gcc_s", ["gcc", *_cflags(memlim_mb), "-o", "pan", "pan.c"])):
        try:
            result[key], proc = _timed(cmd, workdir, deadline - time.perf_counter())
        except subprocess.TimeoutExpired:
            result["verdict"] = "timeout"
            return result
        if proc.returncode != 0:
            result["output"] = (proc.stdout + proc.stderr)[-4000:]
            return result
    spin_s, gcc_s = result["spin_s"], result["gcc_s"]

    pan_cmd = ["./pan", f"-m{max_depth}"] + ([f"-w{hash_bits}"] if hash_bits else [])
    result["pan_args"] = " ".join(pan_cmd)
    pan_s, rc, maxrss_kib, out, timed_out = _run_pan(pan_cmd, workdir,
                                                      deadline - time.perf_counter())
    result["pan_s"] = pan_s
    result["total_s"] = spin_s + gcc_s + pan_s
    result["peak_rss_mb"] = maxrss_kib / 1024
    result["rusage_children_maxrss_mb"] = (
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    result["output"] = out[-4000:]
    result["states"] = _num(r"(\d+) states, stored", out)
    result["transitions"] = _num(r"(\d+) transitions \(= stored\+matched\)", out)
    result["depth"] = _num(r"depth reached (\d+)", out)
    result["state_vector"] = _num(r"State-vector (\d+) byte", out)
    result["pan_elapsed_s"] = _num(r"pan: elapsed time ([\d.e+]+) seconds", out, float)
    result["pan_memory_mb"] = _num(r"([\d.]+)\s+total actual memory usage", out, float)

    err = re.search(r"pan:1: (.*)", out)
    if err:
        result["error"] = err.group(1).strip()
        result["error_depth"] = _num(r"\(at depth (\d+)\)", err.group(1))
        if "invalid end state" in err.group(1):
            result["verdict"] = "hang"
        elif "assertion violated" in err.group(1):
            result["verdict"] = "assertion"
        else:
            result["verdict"] = "error"
        if (workdir / "model.pml.trail").exists():
            replay = subprocess.run(["spin", "-t", "model.pml"], cwd=workdir,
                                    capture_output=True, text=True, timeout=60)
            result["trail_procs"] = _final_processes(replay.stdout, model_text)
            result["assertion"] = _failed_assertion(replay.stdout, model_text)
    elif "reached -DMEMLIM bound" in out:
        result["verdict"] = "out-of-memory"
    elif timed_out or "Interrupted" in out:
        result["verdict"] = "timeout"
    elif "max search depth too small" in out:
        result["verdict"] = "depth-limit"
    elif rc == 0 and _num(r"errors: (\d+)", out) == 0:
        result["verdict"] = "verified"
    return result


# ---------------------------------------------------------------- the benchmark table

ROWS = [  # (label, S, K, C, variant, ring_model options, pan hash bits)
    ("fixed", 2, 4, 2, "fixed", {}, None),
    ("fixed", 4, 8, 2, "fixed", {}, None),
    ("fixed", 4, 16, 2, "fixed", {}, None),
    ("fixed", 4, 16, 4, "fixed", {}, 27),
    ("fixed", 6, 24, 4, "fixed", {}, 27),
    ("bug3722", 4, 16, 2, "bug3722", {}, None),
    ("bug3722, other lane first", 4, 16, 2, "bug3722", {"elect_other_first": True}, None),
]
EXTRA_ROWS = [
    ("fixed", 4, 16, 3, "fixed", {}, 27),
    ("ablation: lockstep wg", 4, 16, 4, "fixed", {"lockstep_warpgroups": True}, 27),
    ("ablation: lockstep wg", 6, 24, 4, "fixed", {"lockstep_warpgroups": True}, 27),
    ("ablation: lockstep wg", 4, 16, 4, "bug3722", {"lockstep_warpgroups": True}, 27),
]


def _fmt(x: float | int | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def machine() -> str:
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    spin = subprocess.run(["spin", "-V"], capture_output=True, text=True).stdout.strip()
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return (f"nproc {os.cpu_count()}, {mem_kib / 1048576:.1f} GiB memory, {cpu}, "
            f"{platform.system()} {platform.release()}; {spin}; {gcc}; Python {platform.python_version()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="SPIN side of the pipecheck benchmark")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds per row, spin -a + gcc + pan (default 300)")
    ap.add_argument("--extra", action="store_true",
                    help="also run 4/16/3 and the lockstep-warpgroup ablation rows")
    ap.add_argument("--quick", action="store_true", help="skip the C=4 rows")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where the models and pan binaries go (default: a temp dir)")
    args = ap.parse_args(argv)
    if shutil.which("spin") is None:
        print("spin not found: apt-get install -y spin", file=sys.stderr)
        return 2
    base = args.workdir or Path(tempfile.mkdtemp(prefix="spin-bench-"))
    rows = ROWS + (EXTRA_ROWS if args.extra else [])
    if args.quick:
        rows = [r for r in rows if r[3] < 4]
    print(f"machine: {machine()}")
    print(f"cflags: {' '.join(CFLAGS)}; timeout {args.timeout:.0f} s per row\n")
    head = (f"| {'model':<26} | S/K/C   | {'verdict':<13} | {'states':>11} | {'depth':>5} "
            f"| spin -a s | gcc s | pan s  | total s | pan RSS MB | {'pan args':<19} |")
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    notes: list[str] = []
    for label, s, k, c, variant, opts, wbits in rows:
        text = ring_model(s, k, c, variant, **opts)
        name = f"{variant}-{s}-{k}-{c}" + "".join(f"-{o}" for o in sorted(opts))
        r = run_spin(text, base / name, args.timeout, hash_bits=wbits)
        verdict = r["verdict"]
        if r["error_depth"] is not None:
            verdict += f" @{r['error_depth']}"
        print(f"| {label:<26} | {f'{s}/{k}/{c}':<7} | {verdict:<13} | {_fmt(r['states'], ',d'):>11} "
              f"| {_fmt(r['depth'], 'd'):>5} | {_fmt(r['spin_s'], '.2f'):>9} "
              f"| {_fmt(r['gcc_s'], '.2f'):>5} | {_fmt(r['pan_s'], '.2f'):>6} "
              f"| {_fmt(r['total_s'], '.2f'):>7} | {_fmt(r['peak_rss_mb'], ',.0f'):>10} "
              f"| {r['pan_args'] or '-':<19} |", flush=True)
        if r["trail_procs"]:
            notes.append(f"{label} {s}/{k}/{c}: pan: {r['error']}; at the end of the trail: "
                         + "; ".join(r["trail_procs"]))
        if r["verdict"] in ("timeout", "out-of-memory", "depth-limit"):
            notes.append(f"{label} {s}/{k}/{c}: stopped ({r['verdict']}) after "
                         f"{_fmt(r['pan_s'], '.0f')} s with {_fmt(r['states'], ',d')} states "
                         f"stored, pan's own memory count {_fmt(r['pan_memory_mb'], ',.0f')} MB")
    print()
    for note in notes:
        print(f"- {note}")
    print(f"\nmodels and pan output under {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
