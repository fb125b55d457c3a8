"""The long fuzz run: N inputs of every kind through the CLI, counting crashes; prints count, crashes, time.

    python -m fuzz.run -n 10000 --seed 1 [--kind wellformed|grammar|bytes|tokens] [--save DIR]
    python -m fuzz.run --differential -n 1000 --seed 1   # the differential oracle (fuzz/differential.py)

Each crashing input is written to DIR (default fuzz/crashes/) with the problems beside it; with
--differential, each spec whose runs disagree (default fuzz/disagreements/). Exit 0 when nothing
crashed or disagreed, 1 otherwise. docs/errors.md records the figures of the last long runs.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from . import oracle, specgen

KINDS = {
    "wellformed": lambda: specgen.wellformed_specs().map(lambda s: specgen.Input("wellformed", s.encode())),
    "grammar": lambda: specgen.grammar_specs().map(lambda s: specgen.Input("grammar", s.encode())),
    "bytes": specgen.byte_mutations,
    "tokens": specgen.token_mutations,
}


DEFAULT_SAVE = Path(__file__).resolve().parent / "crashes"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fuzz.run", description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=10_000, help="inputs to run (default 10000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kind", choices=sorted(KINDS), action="append", help="only these kinds (default: all, equally)")
    p.add_argument("--save", type=Path, default=DEFAULT_SAVE)
    p.add_argument("--watchdog", type=int, default=30, help="CPU seconds one input may take before it counts as a crash "
                   "(--differential: before the spec is skipped, and the skip counted)")
    p.add_argument("--differential", action="store_true",
                   help="verify N well-formed specs (generated, or mutated ones that check accepts) every way and "
                        "count the disagreements")
    args = p.parse_args(argv)
    if args.differential:
        return differential_main(args.n, args.seed, args.kind or ["wellformed", "bytes", "tokens"],
                                 args.save if args.save != DEFAULT_SAVE else DEFAULT_SAVE.parent / "disagreements",
                                 args.watchdog)
    kinds = args.kind or sorted(KINDS)
    strategy = st.one_of(*(KINDS[k]() for k in kinds))
    counts: collections.Counter = collections.Counter()
    codes: collections.Counter = collections.Counter()
    crashes: list[tuple[specgen.Input, oracle.Outcome]] = []
    slowest = [0.0, ""]
    start = time.perf_counter()

    @settings(max_examples=args.n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @seed(args.seed)
    @given(strategy)
    def one(inp: specgen.Input) -> None:
        out = oracle.judge(inp, box, args.watchdog)
        counts[inp.kind] += 1
        codes[out.code] += 1
        if out.seconds > slowest[0]:
            slowest[:] = [out.seconds, inp.kind + (f" from {inp.origin}" if inp.origin else "")]
        if out.problems:
            crashes.append((inp, out))
            _save(args.save, len(crashes), inp, out)
        n = sum(counts.values())
        if n % 500 == 0:
            print(f"  {n} inputs, {len(crashes)} crashes, {time.perf_counter() - start:.0f} s", file=sys.stderr,
                  flush=True)

    with oracle.Sandbox() as box:
        one()
    seconds = time.perf_counter() - start
    total = sum(counts.values())
    print(f"inputs: {total} ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
    print(f"exit codes: {', '.join(f'{k}: {v}' for k, v in sorted(codes.items(), key=lambda kv: str(kv[0])))}")
    print(f"crashes: {len(crashes)}")
    for inp, out in crashes[:20]:
        print(f"  {inp.kind} {inp.origin}: {out.problems[0][:160]}")
    print(f"time: {seconds:.1f} s ({seconds / max(total, 1) * 1000:.0f} ms per input; slowest {slowest[0]:.1f} s, "
          f"{slowest[1]})")
    return 1 if crashes else 0


def differential_main(n: int, seed_: int, kinds: list[str], save: Path, cpu_seconds: int = 120) -> int:
    """Run the differential oracle until `n` specs were compared (inputs `check` rejects do not count)."""
    from . import differential
    strategy = st.one_of(*(KINDS[k]() for k in kinds))
    stats: collections.Counter = collections.Counter()
    skips: collections.Counter = collections.Counter()
    found: list[tuple[specgen.Input, differential.Comparison]] = []
    start = time.perf_counter()

    @settings(max_examples=50 * n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @seed(seed_)
    @given(strategy)
    def one(inp: specgen.Input) -> None:
        if stats["specs"] >= n:
            return
        path = box.dir / "input.pipe"
        path.write_bytes(inp.data)
        c = differential.compare_guarded(path, cpu_seconds)
        if c.skipped == ["rejected by check"]:
            stats["rejected"] += 1
            return
        stats["specs"] += 1
        stats[f"specs {inp.kind}"] += 1
        stats["comparisons"] += len(c.compared)
        for why in c.skipped:
            skips[why.split(":")[0]] += 1
        if c.disagreements:
            found.append((inp, c))
            save.mkdir(parents=True, exist_ok=True)
            stem = save / f"disagreement-{len(found):04d}"
            stem.with_suffix(".pipe").write_bytes(inp.data)
            stem.with_suffix(".txt").write_text(f"kind: {inp.kind} {inp.origin}\n" +
                                                "".join(f"{d}\n" for d in c.disagreements))
        if stats["specs"] % 25 == 0:
            print(f"  {stats['specs']} specs, {len(found)} with disagreements, {time.perf_counter() - start:.0f} s",
                  file=sys.stderr, flush=True)

    with oracle.Sandbox() as box:
        one()
    seconds = time.perf_counter() - start
    total = stats["specs"]
    kinds_text = ", ".join(f"{k} {stats['specs ' + k]}" for k in kinds)
    print(f"specs compared: {total} ({kinds_text}; {stats['rejected']} mutated inputs rejected by check, not counted)")
    print(f"comparisons: {stats['comparisons']}; skipped: " +
          (", ".join(f"{k} {v}" for k, v in sorted(skips.items())) or "none"))
    kinds_found = collections.Counter(d.kind for _, c in found for d in c.disagreements)
    worst = collections.Counter(min((d.kind for d in c.disagreements), key=differential.KINDS.index) for _, c in found)
    print(f"specs with a disagreement: {len(found)} (by the worst: verdict {worst['verdict']}, finding codes "
          f"{worst['codes']}, finding lines only {worst['locations']}); disagreements: "
          f"{sum(kinds_found.values())} (verdict {kinds_found['verdict']}, codes {kinds_found['codes']}, "
          f"lines {kinds_found['locations']})")
    for inp, c in found[:20]:
        print(f"  {inp.kind} {inp.origin}: {c.disagreements[0]}")
    print(f"time: {seconds:.1f} s ({seconds / max(total, 1):.2f} s per spec)")
    return 1 if found else 0


def _save(where: Path, n: int, inp: specgen.Input, out: oracle.Outcome) -> None:
    where.mkdir(parents=True, exist_ok=True)
    (where / f"crash-{n:04d}.pipe").write_bytes(inp.data)
    (where / f"crash-{n:04d}.txt").write_text(
        f"kind: {inp.kind} {inp.origin}\ncommand: {' '.join(out.command)}\nexit: {out.code}\n"
        + "".join(f"problem: {p}\n" for p in out.problems) + "--- stderr\n" + out.stderr[-4000:])


if __name__ == "__main__":
    sys.exit(main())
