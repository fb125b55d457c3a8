"""Classes found per spec and the time each symbolic check takes (docs/symbolic.md quotes this).

Run: python benchmarks/symbolic.py [--all-params SPEC ...]
Prints one markdown row per spec in specs/ and examples/: elected-lane classes (and z3 calls),
parameter points and regions over the declared ranges, and the seconds of each step; then,
for each SPEC after --all-params, the wall time of `verify --all-params`.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from pipecheck.pipeline.configurations import config_classes
from pipecheck.lang.lower import resolve_roles
from pipecheck.pipeline.verify import Options, verify_file

ROOT = Path(__file__).resolve().parent.parent


def row(path: Path) -> str:
    t = time.perf_counter()
    r = verify_file(str(path), Options(all_params=True, explore=False))  # the static sweep over every range
    total = time.perf_counter() - t
    k = r.plan.kernel
    codes, _ = resolve_roles(k, r.sources)
    t0 = time.perf_counter()
    classes = config_classes(k, codes, "any")  # the lane split at the default point, on its own
    t_lanes = time.perf_counter() - t0
    part = next((c.partition for c in classes if c.partition is not None), None)
    lanes = "-"
    if part is not None:
        lanes = f"{len(part.classes)} ({', '.join(_lanes(c.lanes) for c in part.classes)}; {part.solver_calls} calls)"
    s = r.plan.seconds
    codes_found = ", ".join(sorted({d.code for d in r.static})) or "-"
    return (f"| {path.relative_to(ROOT)} | {lanes} | {len(r.plan.points)} | {len(r.plan.pclasses.regions) or 1} | "
            f"{t_lanes:.3f} | {s['param-classes']:.3f} | {s['param-checks']:.3f} | {s['classes']:.3f} | "
            f"{s['byte-accounting']:.3f} | {total:.2f} | {codes_found} |")


def _lanes(lanes: tuple[int, ...]) -> str:
    return str(lanes[0]) if len(lanes) == 1 else f"{lanes[0]}..{lanes[-1]}" if lanes[-1] - lanes[0] + 1 == len(lanes) \
        else f"{len(lanes)} lanes"


def main(argv: list[str]) -> None:
    specs = sorted(p for d in ("specs", "examples") for p in (ROOT / d).rglob("*.pipe") if "lib" not in p.parts)
    print("| spec | lane classes (z3 calls) | parameter points | regions | lane split s | regions s | "
          "param checks s | classes over all points s | byte accounting s | static sweep s | static findings |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for p in specs:
        print(row(p))
    if "--all-params" in argv:
        for spec in argv[argv.index("--all-params") + 1:]:
            t = time.perf_counter()
            r = verify_file(spec, Options(all_params=True))
            print(f"\nverify --all-params {spec}: {r.verdict}, {len(r.plan.points)} points, {len(r.runs)} runs, "
                  f"{len({id(x.exploration) for x in r.runs})} explorations, {r.states} states, "
                  f"{time.perf_counter() - t:.1f} s; codes {sorted({i.code for i in r.issues} | {d.code for d in r.static})}")


if __name__ == "__main__":
    main(sys.argv[1:])
