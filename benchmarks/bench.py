"""pipecheck against SPIN on the ring, pingpong and umma families, in one run: verdicts, states, wall time, peak memory, ratios.

Each row runs SPIN on the Promela model of benchmarks/spin/promela.py (spin -a, gcc -O2
-DSAFETY, pan with its default partial-order reduction) and pipecheck on the same
protocol (benchmarks/specs/ring_*.pipe, pingpong_*.pipe, umma_*.pipe) as whole
processes, one after the other, and prints a table per family. Ratios are pipecheck /
SPIN, from the same run.

The ring family: one producer warp, C consumer warpgroups, an S-stage ring, K k-tiles
(SPIN capped at 16 GB). The pingpong family: CUTLASS SM90 pingpong, S stages, K k-tiles
per work tile, T work tiles alternating between two math warpgroups, the ordered
barrier and the TMA-store epilogue; variants fixed, release_before_read, no_store_drain
(SPIN capped at 3 GB, pan -DMEMLIM=3072; pipecheck at --pc-timeout s and --pc-max-states).
The umma family, the one pipecheck's reductions were not tuned on: a Blackwell SM100 UMMA
GEMM (TMA producer warp, tcgen05 MMA warp, EPI epilogue warpgroups; S stages, K k-tiles, T
work tiles, 2 TMEM accumulator stages); variants fixed, early_acc_release, no_store_drain
(SPIN capped at 3 GB and --umma-timeout s a row, pipecheck as for pingpong).

    python benchmarks/bench.py                  # every row of both families (SPIN capped at --timeout s per row)
    python benchmarks/bench.py --family ring    # only the ring family (what bench.py ran before --family)
    python benchmarks/bench.py --family pingpong --timeout 600 --pc-timeout 900
    python benchmarks/bench.py --family umma    # the umma family (~15 min: SPIN capped at --umma-timeout 120 s a row)
    python benchmarks/bench.py --quick          # only the small rows
    python benchmarks/bench.py --family umma --variant no_store_drain   # only that variant's rows
    python benchmarks/bench.py --reductions     # also pipecheck with each reduction switched off
    python benchmarks/bench.py --only-reductions --reduction-row 4/8/2   # only that table
    python benchmarks/bench.py --only-every     # --every K_TILES against ordinary runs at K = 16, 32, 64
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "spin"))
sys.dont_write_bytecode = True
from promela import pingpong_model, ring_model, umma_model  # noqa: E402
from run import machine, run_spin  # noqa: E402

ROWS = [  # (S, K, C, variant)
    (2, 4, 2, "fixed"),
    (4, 8, 2, "fixed"),
    (4, 16, 2, "fixed"),
    (4, 16, 4, "fixed"),
    (6, 24, 4, "fixed"),
    (4, 16, 2, "bug3722"),
]
QUICK = ROWS[:3] + ROWS[5:]

PINGPONG_ROWS = [  # (S, K, T, variant)
    (2, 2, 2, "fixed"),   # below the brief's range: rows SPIN finishes within 3 GB
    (2, 1, 4, "fixed"),
    (4, 3, 4, "fixed"),
    (5, 6, 4, "fixed"),
    (6, 9, 6, "fixed"),
    (7, 15, 8, "fixed"),
    (7, 16, 8, "fixed"),  # sizes next to the rows above, which the reduction was not tuned on (benchmarks/sizes.py)
    (8, 24, 8, "fixed"),
    (4, 3, 4, "release_before_read"),
    (7, 15, 8, "release_before_read"),
    (4, 3, 4, "no_store_drain"),
    (7, 15, 8, "no_store_drain"),
    (7, 16, 8, "no_store_drain"),
]
PINGPONG_QUICK = [r for r in PINGPONG_ROWS if r[:3] in ((2, 2, 2), (4, 3, 4))]
PINGPONG_MEMLIM_MB = 3072  # pan -DMEMLIM: SPIN's memory cap on the pingpong rows
PINGPONG_SPECS = {"fixed": "pingpong_fixed", "release_before_read": "pingpong_bug_release_before_read",
                  "no_store_drain": "pingpong_bug_no_store_drain"}
# what each assertion of pingpong_model and umma_model checks (the word before the colon of its comment), as
# pipecheck's finding code
SPIN_ASSERTIONS = ("stale-read", "overwrite", "store-reuse", "arrive-fault")

UMMA_ROWS = [  # (S, K, T, EPI, variant); ACC_STAGES = 2 (the specs' default)
    (2, 2, 2, 1, "fixed"),
    (2, 2, 4, 1, "fixed"),
    (3, 3, 4, 1, "fixed"),
    (4, 4, 4, 1, "fixed"),   # SPIN: past 3 GB at about 180 s
    (8, 16, 8, 1, "fixed"),  # SPIN: past 3 GB at about 110 s
    (1, 1, 1, 2, "fixed"),   # two epilogue warpgroups: the only size SPIN finishes (1/1/2, 2/1/2 run out of 3 GB)
    (4, 4, 4, 2, "fixed"),
    (3, 3, 4, 1, "early_acc_release"),
    (8, 16, 8, 1, "early_acc_release"),
    (4, 4, 4, 2, "early_acc_release"),
    (3, 3, 4, 1, "no_store_drain"),
    (8, 16, 8, 1, "no_store_drain"),
    (4, 4, 4, 2, "no_store_drain"),
]
UMMA_QUICK = [r for r in UMMA_ROWS if r[:4] in ((2, 2, 2, 1), (3, 3, 4, 1), (1, 1, 1, 2))]
UMMA_MEMLIM_MB = 3072  # pan -DMEMLIM on the umma rows, as on the pingpong rows
UMMA_TIMEOUT_S = 120.0  # SPIN's time cap per umma row: keeps the family near 15 minutes on the 2-core machine
UMMA_SPECS = {"fixed": "umma_fixed", "early_acc_release": "umma_bug_early_acc_release",
              "no_store_drain": "umma_bug_no_store_drain"}


def ensure_spin() -> None:
    if shutil.which("spin") is None:
        print("installing SPIN (apt-get install -y spin) ...", file=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "spin"], check=True, capture_output=True)


def measure(s: int, k: int, c: int, variant: str, extra: list[str], timeout_s: float) -> dict:
    """Run pipecheck in a child Python that reports its own peak RSS, so SPIN's memory never counts."""
    spec = HERE / "specs" / f"ring_{variant}.pipe"
    ks = ["-D", f"K_TILES={k}"] if k is not None else ["--every", "K_TILES"]
    return run_pipecheck(spec, ["-D", f"STAGES={s}", *ks, "-D", f"CONSUMERS={c}"], extra, timeout_s)


def run_pipecheck(spec: Path, defines: list[str], extra: list[str], timeout_s: float) -> dict:
    """`pipecheck verify spec defines --format json extra` as a whole process: verdict, states, wall, peak MB.

    The verdict is the finding codes, or pipecheck's verdict; `stopped` is pipecheck's reason for
    stopping early (timeout, max-states), or None."""
    code = ("import resource,subprocess,sys,time,json;t=time.perf_counter();"
            "p=subprocess.run(sys.argv[1:],capture_output=True,text=True);"
            "w=time.perf_counter()-t;"
            "m=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024;"
            "print(json.dumps({'out':p.stdout,'err':p.stderr,'wall':w,'peak':m}))")
    cmd = [sys.executable, "-c", code, sys.executable, "-m", "pipecheck", "verify", str(spec),
           *defines, "--format", "json", *extra]
    try:
        wrapper = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"verdict": "timeout", "states": None, "wall_s": timeout_s, "peak_mb": None}
    info = json.loads(wrapper.stdout)
    try:
        data = json.loads(info["out"])
    except json.JSONDecodeError:
        return {"verdict": "error: " + info["err"].strip()[-200:], "states": None, "wall_s": info["wall"],
                "peak_mb": info["peak"]}
    codes = sorted({f["code"] for f in data["findings"]})
    every = data.get("every") or {}
    return {"verdict": ", ".join(codes) if codes else data["verdict"],
            "states": every.get("states", data["stats"]["states"]), "witness": every.get("witness"),
            "wall_s": info["wall"], "peak_mb": info["peak"], "stopped": data.get("stopped"),
            "static": sorted({f["code"] for f in data.get("static", [])})}


def fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def ratio(a, b) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.4f}"


SWITCHES = [  # (label, extra arguments): each reduction switched off in turn
    ("all on", []),
    ("--no-reduction (partial-order)", ["--no-reduction"]),
    ("--no-symmetry", ["--no-symmetry"]),
    ("--counter warps", ["--counter", "warps"]),
    ("--no-counter-abstraction (a process per thread)", ["--no-counter-abstraction"]),
    ("--no-compact", ["--no-compact"]),
    ("--no-reduction --no-compact", ["--no-reduction", "--no-compact"]),
]


def reductions_table(row: str, timeout_s: float) -> None:
    """pipecheck on one ring row with each reduction switched off in turn: states, time, memory.

    Bytes per state: peak memory above a 2/4/2 run with every reduction on (the interpreter,
    the code and the tables), divided by the states visited; only meaningful for runs of many states."""
    s, k, c = (int(x) for x in row.split("/"))
    base = measure(2, 4, 2, "fixed", [], 600)
    print()
    print(f"pipecheck on ring fixed {s}/{k}/{c} with each reduction switched off in turn "
          f"(capped at {timeout_s:.0f} s a run; baseline memory {base['peak_mb']:.0f} MB at 2/4/2):")
    print("| switch | verdict | states | s | states/s | MB | bytes/state above baseline |")
    print("|---|---|---|---|---|---|---|")
    for label, extra in SWITCHES:
        pc = measure(s, k, c, "fixed", extra + ["--max-states", "3000000"], timeout_s)
        rate = pc["states"] / pc["wall_s"] if pc["states"] and pc["wall_s"] else None
        per = None
        if pc["states"] and pc["peak_mb"] is not None and pc["states"] >= 10_000:
            per = max(0.0, pc["peak_mb"] - base["peak_mb"]) * 2**20 / pc["states"]
        verdict = pc["verdict"] if pc["verdict"] != "timeout" else f"timeout (> {timeout_s:.0f} s)"
        print(f"| {label} | {verdict} | {fmt(pc['states'], ',')} | {fmt(pc['wall_s'], '.2f')} | {fmt(rate, ',.0f')} | "
              f"{fmt(pc['peak_mb'], ',.0f')} | {fmt(per, ',.0f')} |", flush=True)


EVERY_ROWS = [(4, 2, "fixed"), (4, 4, "fixed"), (6, 4, "fixed"), (4, 2, "bug3722")]  # (S, C, variant)
EVERY_KS = (16, 32, 64)  # the declared range of K_TILES ends at 64


def every_table(timeout_s: float) -> None:
    """`--every K_TILES` (one run for every K) next to ordinary runs at a few K, for the same S/C."""
    print()
    print("pipecheck --every K_TILES (the loop-offset abstraction: one run for every K_TILES >= 1) next to ordinary "
          f"runs at K_TILES = {', '.join(map(str, EVERY_KS))} (whole processes, capped at {timeout_s:.0f} s a run):")
    cols = "".join(f" K={k} states | K={k} s |" for k in EVERY_KS)
    print(f"| S/C | model | --every verdict | --every states | --every s | --every MB |{cols}")
    print("|" + "---|" * (6 + 2 * len(EVERY_KS)))
    for s, c, variant in EVERY_ROWS:
        ev = measure(s, None, c, variant, [], timeout_s)
        verdict = ev["verdict"] + (f" (smallest K: {ev['witness']})" if ev.get("witness") else "")
        cells = ""
        for k in EVERY_KS:
            pc = measure(s, k, c, variant, [], timeout_s)
            cells += f" {fmt(pc['states'], ',')} | {fmt(pc['wall_s'], '.2f')} |"
        print(f"| {s}/{c} | {variant} | {verdict} | {fmt(ev['states'], ',')} | {fmt(ev['wall_s'], '.2f')} | "
              f"{fmt(ev['peak_mb'], ',.0f')} |{cells}", flush=True)
    print()
    print("The --every state count is that of the folded exploration, which does not depend on K; a finding is "
          "shown by an ordinary run at the smallest K with a finding (included in the time).")


def compile_package() -> None:
    """Byte-compile pipecheck as `pip install` does, so no row pays for compiling its sources
    (an editable install under PYTHONDONTWRITEBYTECODE would recompile them in every process)."""
    import importlib.util
    spec = importlib.util.find_spec("pipecheck")
    if spec is not None and spec.origin is not None:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(spec.origin).parent)],
                       check=False, capture_output=True)


def spin_code(spin: dict) -> str:
    """SPIN's verdict in pipecheck's words: an assertion of pingpong_model is named by the finding it checks."""
    if spin["verdict"] == "assertion" and spin.get("assertion"):
        word = spin["assertion"].split(":", 1)[0].strip()
        if word in SPIN_ASSERTIONS:
            return word
    return spin["verdict"]


def ring_table(args: argparse.Namespace) -> None:
    """The ring family's table (what bench.py printed before --family)."""
    rows = QUICK if args.quick else ROWS
    head = ("| S/K/C | model | SPIN verdict | pipecheck verdict | SPIN states | pipecheck states | SPIN s | pipecheck s"
            " | SPIN MB | pipecheck MB | time ratio | states ratio | pipecheck states/s |")
    print(head)
    print("|" + "---|" * 13)
    for s, k, c, variant in rows:
        with tempfile.TemporaryDirectory() as tmp:
            spin = run_spin(ring_model(s, k, c, variant), Path(tmp), args.timeout,
                            hash_bits=27 if c >= 3 else None)
        pc = measure(s, k, c, variant, [], max(args.timeout, 600))
        spin_verdict = spin["verdict"] + ("" if spin["verdict"] != "timeout" else f" (> {args.timeout:.0f} s)")
        print(f"| {s}/{k}/{c} | {variant} | {spin_verdict} | {pc['verdict']} | {fmt(spin['states'], ',')} | "
              f"{fmt(pc['states'], ',')} | {fmt(spin['total_s'], '.2f')} | {fmt(pc['wall_s'], '.2f')} | "
              f"{fmt(spin['peak_rss_mb'], ',.0f')} | {fmt(pc['peak_mb'], ',.0f')} | "
              f"{ratio(pc['wall_s'], spin['total_s'])}{' (bound)' if spin['verdict'] == 'timeout' else ''} | "
              f"{ratio(pc['states'], spin['states'])} | "
              f"{fmt(pc['states'] / pc['wall_s'] if pc['states'] else None, ',.0f')} |", flush=True)
    print()
    print("Times are whole processes (interpreter start, parse, every configuration, report). A SPIN row that "
          "reached the cap shows the states SPIN had stored and the time at the cap: its time ratio is an upper "
          "bound (marked), and its state count is a lower bound of SPIN's state space.")


def pingpong_table(args: argparse.Namespace, family: str = "pingpong") -> None:
    """The pingpong family's table: the same columns as the ring's, S/K/T for S/K/C.

    family "umma": the same table for the umma family (S/K/T/EPI, umma_model, benchmarks/specs/umma_*.pipe)."""
    if family == "umma":
        rows = UMMA_QUICK if args.quick else UMMA_ROWS
        memlim, spin_timeout, label, key = args.umma_memlim, args.umma_timeout, "S/K/T/EPI", "umma"
        what = "umma_*.pipe; umma_model in benchmarks/spin/promela.py; ACC_STAGES=2"
    else:
        rows = PINGPONG_QUICK if args.quick else PINGPONG_ROWS
        memlim, spin_timeout, label, key = args.pingpong_memlim, args.timeout, "S/K/T", "pingpong"
        what = "pingpong_*.pipe; pingpong_model in benchmarks/spin/promela.py"
    if args.variant:
        rows = [r for r in rows if r[-1] in args.variant]
    print(f"{key} family (benchmarks/specs/{what}): SPIN capped at {spin_timeout:.0f} s and {memlim} MB "
          f"(pan -DMEMLIM={memlim}) per row; pipecheck at --timeout {args.pc_timeout:.0f} --max-states "
          f"{args.pc_max_states}")
    print()
    head = (f"| {label} | model | SPIN verdict | pipecheck verdict | SPIN states | pipecheck states | SPIN s | pipecheck s"
            " | SPIN MB | pipecheck MB | time ratio | states ratio | pipecheck states/s | pipecheck s, defaults"
            " | its ratio |")
    print(head)
    print("|" + "---|" * 15)
    notes = []
    for row in rows:
        if key == "umma":
            s, k, t, e, variant = row
            model = umma_model(s, k, t, variant, epi=e)
            spec = HERE / "specs" / f"{UMMA_SPECS[variant]}.pipe"
            defines = ["-D", f"STAGES={s}", "-D", f"K_TILES={k}", "-D", f"TILES={t}", "-D", f"EPI={e}"]
        else:
            s, k, t, variant = row
            model = pingpong_model(s, k, t, variant)
            spec = HERE / "specs" / f"{PINGPONG_SPECS[variant]}.pipe"
            defines = ["-D", f"STAGES={s}", "-D", f"K_TILES={k}", "-D", f"TILES={t}"]
        size = "/".join(str(x) for x in row[:-1])
        with tempfile.TemporaryDirectory() as tmp:
            spin = run_spin(model, Path(tmp), spin_timeout, memlim_mb=memlim)
        bounds = ["--timeout", str(args.pc_timeout), "--max-states", str(args.pc_max_states)]
        # a bug row stops at the first counterexample, as pan does (--cause-budget 0); the last two columns are the
        # run at the defaults, which goes on for 2,000 states past it to lead with the cause and list what follows
        first = ["--cause-budget", "0"] if variant != "fixed" else []
        pc = run_pipecheck(spec, defines, bounds + first, args.pc_timeout + 300)
        full = run_pipecheck(spec, defines, bounds, args.pc_timeout + 300) if first else pc
        spin_done = spin["verdict"] in ("verified", "hang", "assertion")
        pc_done = pc["verdict"] != "timeout" and pc.get("stopped") is None
        spin_verdict = spin_code(spin)
        if spin["verdict"] == "timeout":
            spin_verdict += f" (> {spin_timeout:.0f} s)"
        elif spin["verdict"] == "out-of-memory":
            spin_verdict += f" ({memlim} MB)"
        pc_verdict = pc["verdict"] + (f" ({pc['stopped']})" if pc.get("stopped") else "")
        if pc.get("static"):
            pc_verdict += f" (static: {', '.join(pc['static'])})"
        mark = {(True, True): "", (False, True): " (bound)", (True, False): " (lower bound)",
                (False, False): " (neither finished)"}[(spin_done, pc_done)]
        print(f"| {size} | {variant} | {spin_verdict} | {pc_verdict} | {fmt(spin['states'], ',')} | "
              f"{fmt(pc['states'], ',')} | {fmt(spin['total_s'], '.2f')} | {fmt(pc['wall_s'], '.2f')} | "
              f"{fmt(spin['peak_rss_mb'], ',.0f')} | {fmt(pc['peak_mb'], ',.0f')} | "
              f"{ratio(pc['wall_s'], spin['total_s'])}{mark} | "
              f"{ratio(pc['states'], spin['states'])} | "
              f"{fmt(pc['states'] / pc['wall_s'] if pc['states'] else None, ',.0f')} | "
              f"{fmt(full['wall_s'], '.2f')} | {ratio(full['wall_s'], spin['total_s'])}{mark} |", flush=True)
        if full["verdict"] != pc["verdict"]:
            notes.append(f"{size} {variant}: pipecheck at the defaults said {full['verdict']}")
        if spin["error"]:
            notes.append(f"{size} {variant}: pan: {spin['error']}"
                         + (f" [{spin['assertion']}]" if spin.get("assertion") else ""))
    print()
    print("Times are whole processes (interpreter start, parse, every configuration, report). SPIN's verdict names "
          "the violated assertion by the pipecheck finding it checks (its comment in the model). A SPIN row that ran "
          "out of memory or time shows the states stored and the time at that point: a lower bound of SPIN's state "
          "space and time, so the time ratio is an upper bound (bound). A pipecheck row that stopped (inconclusive) "
          "likewise shows its states and time at the stop: that ratio is a lower bound; where neither finished the "
          "ratios compare two partial searches. A bug row's search stops at the first counterexample in both tools "
          "(SPIN depth-first, pipecheck breadth-first, --cause-budget 0); `pipecheck s, defaults` is the same row at "
          "pipecheck's defaults, which explore 2,000 states past the first finding for its cause and consequences "
          "(the same as the first column on a fixed row).")
    for note in notes:
        print(f"- {note}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=("ring", "pingpong", "umma", "all"), default="all",
                    help="which family's table (default all: the ring's, the pingpong's, then the umma's)")
    ap.add_argument("--quick", action="store_true", help="only the small rows")
    ap.add_argument("--variant", action="append", help="the pingpong and umma tables: only the rows of this variant "
                    "(fixed, release_before_read, no_store_drain, early_acc_release; may be given again)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per SPIN row (default 300)")
    ap.add_argument("--pc-timeout", type=float, default=900.0,
                    help="pingpong: pipecheck --timeout per row, seconds (default 900)")
    ap.add_argument("--pc-max-states", type=int, default=2_000_000,
                    help="pingpong: pipecheck --max-states per row (default 2000000, pipecheck's own default)")
    ap.add_argument("--pingpong-memlim", type=int, default=PINGPONG_MEMLIM_MB,
                    help=f"pingpong: SPIN's memory cap in MB, pan -DMEMLIM (default {PINGPONG_MEMLIM_MB})")
    ap.add_argument("--umma-memlim", type=int, default=UMMA_MEMLIM_MB,
                    help=f"umma: SPIN's memory cap in MB, pan -DMEMLIM (default {UMMA_MEMLIM_MB})")
    ap.add_argument("--umma-timeout", type=float, default=UMMA_TIMEOUT_S,
                    help=f"umma: seconds per SPIN row (default {UMMA_TIMEOUT_S:.0f}; --timeout is the other families')")
    ap.add_argument("--reductions", action="store_true", help="also time pipecheck with each reduction off")
    ap.add_argument("--only-reductions", action="store_true", help="only the reductions table (no SPIN)")
    ap.add_argument("--reduction-row", default="4/8/2", help="S/K/C of the reductions table (default 4/8/2)")
    ap.add_argument("--reduction-timeout", type=float, default=300.0, help="seconds per reductions-table run")
    ap.add_argument("--every", action="store_true", help="also the --every K_TILES table (one run for every K)")
    ap.add_argument("--only-every", action="store_true", help="only the --every K_TILES table (no SPIN)")
    args = ap.parse_args(argv)
    compile_package()
    if args.only_every:
        print(f"machine: {machine()}; python {platform.python_version()}")
        every_table(max(args.timeout, 600))
        return 0
    if args.only_reductions:
        print(f"machine: {machine()}; python {platform.python_version()}")
        reductions_table(args.reduction_row, args.reduction_timeout)
        return 0
    ensure_spin()
    print(f"machine: {machine()}")
    print(f"python {platform.python_version()}; SPIN: spin -a, gcc -O2 -DSAFETY, pan with partial-order reduction;"
          f" SPIN capped at {args.umma_timeout if args.family == 'umma' else args.timeout:.0f} s per row")
    print()
    if args.family in ("ring", "all"):
        ring_table(args)
        if args.reductions:
            reductions_table(args.reduction_row, args.reduction_timeout)
        if args.every:
            every_table(max(args.timeout, 600))
    if args.family in ("pingpong", "all"):
        if args.family == "all":
            print()
        pingpong_table(args)
    if args.family in ("umma", "all"):
        if args.family == "all":
            print()
        pingpong_table(args, "umma")
    return 0


if __name__ == "__main__":
    sys.exit(main())
