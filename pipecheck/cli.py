"""The command line: `run(argv, stdout, stderr) -> exit code`; only `main` exits.

Exit codes: 0 verified, 1 findings, 2 spec or usage error, 3 inconclusive (a limit was hit).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Sequence, TextIO

from .core.diagnostics import Diagnostic, SpecError, render
from .core.version import __version__
from .pipeline.result import Options, Result
from .pipeline.limits import LimitReached
from .pipeline.verify import load_checked, verify_file
from .pipeline.workers import available
from .search.explore import Limits

EXIT_VERIFIED, EXIT_FINDINGS, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # no SystemExit from inside run()
        raise _UsageError(message)


def _define(value: str) -> tuple[str, int] | tuple[str, int, int]:
    if "=" not in value:
        raise argparse.ArgumentTypeError(f"-D takes NAME=VALUE, not {value!r}")
    name, _, v = value.partition("=")
    try:
        if ".." in v:  # NAME=LO..HI narrows a range for --all-params
            lo, _, hi = v.partition("..")
            return name.strip(), int(lo.strip(), 0), int(hi.strip(), 0)
        return name.strip(), int(v.strip(), 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"-D {name}: {v!r} is not an integer (or LO..HI)") from None


def _choice(value: str) -> tuple[str, tuple[int, ...]]:
    name, eq, v = value.partition("=")
    try:
        if not eq:
            raise ValueError
        return name.strip(), tuple(int(x.strip(), 0) for x in v.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--choose takes NAME=V or NAME=V,V,..., not {value!r}") from None


def _positive_int(value: str) -> int:
    try:
        n = int(value, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return n


def _non_negative_int(value: str) -> int:
    try:
        n = int(value, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return n


def _seconds(value: str) -> float:
    import math
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(x) or x <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number of seconds")
    return x


def _params(args) -> tuple[tuple, tuple]:
    """-D values (pinned parameters) and -D ranges (narrowed, --all-params only)."""
    values = tuple(d for d in args.defines if len(d) == 2)
    ranges = tuple(d for d in args.defines if len(d) == 3)
    if ranges and not getattr(args, "all_params", False):
        raise _UsageError(f"-D {ranges[0][0]}={ranges[0][1]}..{ranges[0][2]}: a range needs --all-params")
    return values, ranges


def _dims(value: str) -> tuple[int, int, int]:
    try:
        parts = [int(x) for x in value.replace("x", ",").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: expected N or X,Y,Z") from None
    if not 1 <= len(parts) <= 3 or any(x <= 0 for x in parts):
        raise argparse.ArgumentTypeError(f"{value!r}: expected one to three positive numbers")
    return tuple(parts + [1] * (3 - len(parts)))  # type: ignore[return-value]


def _kernel_flags(p: argparse.ArgumentParser) -> None:
    """Options of a compiled kernel (.ptx, .cu): which entry, and the launch the PTX does not state."""
    p.add_argument("--entry", default=None, metavar="NAME", help="the kernel of a module with several")
    p.add_argument("--block", type=_dims, default=None, metavar="X[,Y,Z]",
                   help="threads per CTA (default: the entry's .reqntid/.maxntid)")
    p.add_argument("--cluster", type=_dims, default=None, metavar="X[,Y,Z]",
                   help="CTAs per cluster (default: .reqnctapercluster, else 1)")
    p.add_argument("--grid", type=_dims, default=None, metavar="X[,Y,Z]",
                   help="CTAs in the grid that the kernel sees in %%nctaid (default: one cluster)")
    p.add_argument("--nvcc", dest="nvcc_flags", action="append", default=[], metavar="FLAG",
                   help="an extra nvcc flag for a .cu file, e.g. --nvcc=-I/path/include (repeatable)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pipecheck", description="Model checker for TMA/mbarrier pipeline protocols.")
    p.add_argument("--version", action="store_true", help=f"print the version (pipecheck {__version__}) and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    v = sub.add_parser("verify", help="explore every schedule and report hangs, races and faults")
    v.add_argument("specs", nargs="+", metavar="SPEC")
    v.add_argument("-D", dest="defines", action="append", type=_define, default=[], metavar="NAME=VALUE",
                   help="override a parameter (NAME=LO..HI narrows its range for --all-params)")
    v.add_argument("--all-params", action="store_true",
                   help="verify every value of every declared parameter range, with the condition of each finding")
    v.add_argument("--elect", type=_elect, default="any", metavar="any|lowest|N",
                   help="any: every lane PTX allows elect.sync to pick (default); lowest: the H200's observed choice; "
                        "N: lane N where the mask has it, else the lowest (what `replay --elect-lane N` runs)")
    v.add_argument("--format", choices=["text", "json", "sarif", "html", "mermaid", "dot"], default="text",
                   help="text (default), json (schema pipecheck-result/1), sarif (2.1.0), html (one file with an SVG "
                        "timeline), mermaid or dot (the counterexample of one finding, see --finding)")
    v.add_argument("--finding", type=_positive_int, default=1, metavar="N", help="which finding mermaid and dot draw (1 = first)")
    v.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    _terminal_options(v)
    v.add_argument("--max-states", type=_positive_int, default=2_000_000,
                   help="stop (exit 3) after this many states per configuration")
    v.add_argument("--timeout", type=_seconds, default=None, help="stop (exit 3) after this many seconds")
    v.add_argument("--max-memory", type=_positive_int, default=None, metavar="MB",
                   help="stop (exit 3) above this resident memory")
    v.add_argument("--jobs", "-j", type=_positive_int, default=None, metavar="N",
                   help="explore up to N configuration classes at once, each in its own process (default: the CPUs "
                        "this process may use, or 1 with --max-memory, which holds per process); a lone search has its "
                        "wide frontiers expanded by N processes; with 2 or more, the lockstep re-check of a "
                        "configuration's findings starts beside its search; the report is the same for every N")
    v.add_argument("--all", action="store_true",
                   help="keep exploring after the first finding of each configuration, to list every distinct one")
    v.add_argument("--cause-budget", type=_non_negative_int, default=2_000, metavar="STATES",
                   help="states explored past the first finding of a configuration, also past the transitions that "
                        "raised findings, to lead with the cause and list what it leads to (default 2000; 0: stop at "
                        "the first finding)")
    v.add_argument("--fail-on", choices=["error", "latent", "any"], default="latent",
                   help="which findings exit 1: error (only those that show with lockstep warps and the H200's "
                        "election), latent (errors and latent findings, the default), any (warnings too)")
    v.add_argument("--no-reduction", action="store_true", help="explore every interleaving (for measurement)")
    v.add_argument("--no-symmetry", action="store_true", help="do not merge states that differ only by which "
                   "identical role instance is which (for measurement)")
    v.add_argument("--counter", choices=["classes", "warps", "threads"], default="classes",
                   help="classes: threads with the same code move as one counted class (default); warps / threads: "
                        "each warp / thread of a class is its own process (for measurement)")
    v.add_argument("--no-counter-abstraction", dest="counter", action="store_const", const="threads",
                   help="the same as --counter threads")
    v.add_argument("--no-compact", action="store_true", help="keep visited states as tuples instead of interned ids "
                   "(for measurement)")
    v.add_argument("--lockstep", action="store_true",
                   help="each warp reconverges at the end of every branch (default: lanes run apart after divergence)")
    v.add_argument("--every", metavar="PARAM", default=None,
                   help="verify every value of a loop-bound parameter at once (the loop-offset abstraction); a "
                        "finding is shown at the smallest value with one")
    v.add_argument("--engine", choices=["explicit", "bmc"], default="explicit",
                   help="explicit: breadth-first search (default); bmc: bounded model checking in z3 to --depth steps")
    v.add_argument("--depth", type=_positive_int, default=30, help="the bound of --engine bmc (transitions)")
    v.add_argument("--stats", action="store_true",
                   help="print states, time and rate to stderr, and where the states come from (per role instance "
                        "and thread class, which classes split and where, the reduction's sets)")
    _kernel_flags(v)
    v.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help="states, states/s and depth on stderr while exploring (auto: when stderr is a terminal)")
    e = sub.add_parser("explain", help="the protocol contract: per barrier, who initialises, arrives, completes tx, waits")
    e.add_argument("spec", metavar="SPEC")
    e.add_argument("-D", dest="defines", action="append", type=_define, default=[], metavar="NAME=VALUE")
    e.add_argument("--elect", type=_elect, default="any", metavar="any|lowest|N")
    e.add_argument("--format", choices=["text", "json"], default="text")
    _terminal_options(e)
    g = sub.add_parser("graph", help="roles and barriers of the protocol contract as a Mermaid or DOT graph")
    g.add_argument("spec", metavar="SPEC")
    g.add_argument("-D", dest="defines", action="append", type=_define, default=[], metavar="NAME=VALUE")
    g.add_argument("--elect", type=_elect, default="any", metavar="any|lowest|N")
    g.add_argument("--format", choices=["mermaid", "dot"], default="mermaid")
    t = sub.add_parser("timeline", help="the as-soon-as-possible schedule (prologue, steady state, epilogue) and how "
                                        "many loads overlap compute; exit 1 on a no-overlap warning")
    t.add_argument("spec", metavar="SPEC")
    t.add_argument("-D", dest="defines", action="append", type=_define, default=[], metavar="NAME=VALUE")
    t.add_argument("--elect", type=_elect, default="any", metavar="any|lowest|N")
    t.add_argument("--load-latency", type=int, default=4, metavar="ROUNDS", help="rounds from a TMA load's issue to its "
                   "landing in the schedule (default 4)")
    t.add_argument("--mma-latency", type=int, default=2, metavar="ROUNDS", help="rounds a wgmma runs (default 2)")
    t.add_argument("--max-states", type=_positive_int, default=200_000,
                   help="states the overlap analysis explores (without reduction) per configuration")
    t.add_argument("--timeout", type=_seconds, default=None, help="seconds the overlap analysis may take")
    t.add_argument("--format", choices=["text", "json"], default="text")
    r = sub.add_parser("replay", help="emit a CUDA program that replays the spec at fixed parameters, elected lane "
                                      "and choices on an sm_90 GPU, or a compiled kernel's PTX with a forced lane and "
                                      "bounded waits (docs/replay.md)")
    r.add_argument("spec", metavar="SPEC", help="a .pipe spec, or a compiled kernel (.ptx) with --emit-ptx")
    emit_to = r.add_mutually_exclusive_group(required=True)
    emit_to.add_argument("--emit-cuda", metavar="FILE", help="write the program here ('-' for stdout)")
    emit_to.add_argument("--emit-ptx", metavar="FILE",
                         help="a .ptx kernel: write it with every elect.sync electing --elect-lane and every mbarrier "
                              "wait bounded by --wait-cycles; the wait and election sites go to FILE.sites.json")
    r.add_argument("--entry", default=None, metavar="NAME", help="the kernel of a module with several entries")
    r.add_argument("-D", dest="defines", action="append", type=_define, default=[], metavar="NAME=VALUE")
    r.add_argument("--elect-lane", type=int, default=None, metavar="N",
                   help="force every elect() to elect lane N (default: the lowest lane of the mask, as on the H200)")
    r.add_argument("--choose", action="append", type=_choice, default=[], metavar="NAME=V[,V...]",
                   help="fix a choose (a kernel-scope array takes one value for all elements or one per element; "
                        "default: the low end of its range)")
    r.add_argument("--wait-cycles", type=int, default=1 << 26, metavar="N",
                   help="clock64 cycles one mbarrier wait may take before the replay records a hang")
    r.add_argument("--host-timeout-ms", type=int, default=2000, metavar="MS",
                   help="how long the host waits for the kernel before it reports a hang in a collective")
    cap = sub.add_parser("capture", help="run a program with a launch interposer that records each kernel launch "
                                         "(module PTX, shape, parameter bytes) for `pipecheck verify DIR/launch-K.json`")
    cap.add_argument("--dir", default="pipecheck-capture", metavar="DIR", help="where the records go")
    cap.add_argument("--max-launches", type=_positive_int, default=16, metavar="N", help="launches recorded (default 16)")
    cap.add_argument("program", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the program and its arguments")
    c = sub.add_parser("check", help="parse and check specs without exploring")
    c.add_argument("specs", nargs="+", metavar="SPEC")
    c.add_argument("-D", dest="defines", action="append", type=_define, default=[], metavar="NAME=VALUE")
    c.add_argument("--all-params", action="store_true", help="run the static checks over every declared parameter range")
    return p


def _terminal_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="draw the report with colour and tables (auto: when stdout is a terminal and NO_COLOR is unset)")


def _use_color(choice: str, stream: TextIO) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _width() -> int:
    import shutil
    return max(80, shutil.get_terminal_size((160, 40)).columns)


def _spec_error(exc: SpecError, sources: dict[str, str], stderr: TextIO) -> None:
    for d in exc.diagnostics:
        stderr.write(render(d, sources) + "\n")


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    try:
        return _run(argv, stdout, stderr)
    except RecursionError:
        stderr.write("pipecheck: error: the spec nests too deeply to analyse (expressions or blocks)\n")
        return EXIT_ERROR
    except MemoryError:
        stderr.write("pipecheck: error: out of memory; limit the search with --max-states or --max-memory\n")
        return EXIT_INCONCLUSIVE
    except Exception as exc:  # noqa: BLE001 - a bug in pipecheck, never the user's fault: no traceback
        if os.environ.get("PIPECHECK_DEBUG"):
            raise
        stderr.write(f"pipecheck: internal error: {type(exc).__name__}: {exc}\n"
                     "please report it with the spec; PIPECHECK_DEBUG=1 shows the traceback\n")
        return EXIT_ERROR


def _run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    if list(argv)[:1] == ["--version"]:  # before the parser: it requires a command
        stdout.write(f"pipecheck {__version__}\n")
        return EXIT_VERIFIED
    try:
        args = _parser().parse_args(list(argv))
    except _UsageError as exc:
        stderr.write(f"pipecheck: error: {exc}\n")
        return EXIT_ERROR
    except SystemExit as exc:  # --help
        return EXIT_VERIFIED if not exc.code else EXIT_ERROR
    if args.command == "capture":
        return _capture(args, stdout, stderr)
    try:
        _params(args)
    except _UsageError as exc:
        stderr.write(f"pipecheck: error: {exc}\n")
        return EXIT_ERROR
    if args.command == "check":
        return _check(args, stdout, stderr)
    if args.command == "explain":
        return _explain(args, stdout, stderr)
    if args.command == "graph":
        return _graph(args, stdout, stderr)
    if args.command == "timeline":
        return _timeline(args, stdout, stderr)
    if args.command == "replay":
        return _replay(args, stdout, stderr)
    return _verify(args, stdout, stderr)


def _elect(text: str) -> str:
    if text in ("any", "lowest") or (text.isdigit() and 0 <= int(text) < 32):
        return text if not text.isdigit() else str(int(text))
    raise argparse.ArgumentTypeError(f"expected any, lowest or a lane 0..31, got {text!r}")


def _replay(args, stdout: TextIO, stderr: TextIO) -> int:
    if args.emit_ptx is not None:
        return _replay_ptx(args, stdout, stderr)
    from .replay.cuda import ReplayOptions, emit
    values, _ = _params(args)
    opts = ReplayOptions(overrides=values, elect_lane=args.elect_lane, choices=tuple(args.choose),
                         wait_cycles=args.wait_cycles, host_timeout_ms=args.host_timeout_ms)
    try:
        emitted = emit(args.spec, opts)
    except SpecError as exc:
        _spec_error(exc, _sources_of(args.spec), stderr)
        return EXIT_ERROR
    if args.emit_cuda == "-":
        stdout.write(emitted.source)
    else:
        try:
            with open(args.emit_cuda, "w", encoding="utf-8") as f:
                f.write(emitted.source)
        except OSError as exc:
            stderr.write(f"pipecheck: error: cannot write {args.emit_cuda}: {exc.strerror}\n")
            return EXIT_ERROR
    return EXIT_VERIFIED


def _capture(args, stdout: TextIO, stderr: TextIO) -> int:
    from pathlib import Path
    from .replay.capture import run_captured
    cmd = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not cmd:
        stderr.write("pipecheck: error: capture: no program given (pipecheck capture [--dir DIR] -- CMD ...)\n")
        return EXIT_ERROR
    try:
        rc, launches = run_captured(cmd, Path(args.dir), args.max_launches)
    except SpecError as exc:
        _spec_error(exc, {}, stderr)
        return EXIT_ERROR
    stdout.write(f"pipecheck: {cmd[0]} exited with {rc}; {len(launches)} launch(es) recorded in {args.dir}"
                 + "".join(f"\n  pipecheck verify {p}" for p in launches) + "\n")
    return EXIT_VERIFIED if launches else EXIT_ERROR


def _replay_ptx(args, stdout: TextIO, stderr: TextIO) -> int:
    import json
    from .replay.ptx_patch import patch
    if not args.spec.endswith(".ptx"):
        stderr.write(f"pipecheck: error: --emit-ptx rewrites a compiled kernel (.ptx); {args.spec} is not one "
                     "(compile it with nvcc -ptx -lineinfo first)\n")
        return EXIT_ERROR
    try:
        text = open(args.spec, encoding="utf-8").read()
    except OSError as exc:
        stderr.write(f"pipecheck: error: cannot read {args.spec}: {exc.strerror}\n")
        return EXIT_ERROR
    try:
        patched = patch(text, args.spec, entry=args.entry, elect_lane=args.elect_lane, wait_cycles=args.wait_cycles)
    except SpecError as exc:
        _spec_error(exc, {args.spec: text}, stderr)
        return EXIT_ERROR
    table = json.dumps(patched.table(), indent=1) + "\n"
    if args.emit_ptx == "-":
        stdout.write(patched.text)
        return EXIT_VERIFIED
    try:
        with open(args.emit_ptx, "w", encoding="utf-8") as f:
            f.write(patched.text)
        with open(args.emit_ptx + ".sites.json", "w", encoding="utf-8") as f:
            f.write(table)
    except OSError as exc:
        stderr.write(f"pipecheck: error: cannot write {args.emit_ptx}: {exc.strerror}\n")
        return EXIT_ERROR
    waits = sum(s.kind == "wait" for s in patched.sites)
    elects = len(patched.sites) - waits
    lane = "the hardware's choice" if args.elect_lane is None else f"lane {args.elect_lane}"
    stderr.write(f"pipecheck: wrote {args.emit_ptx}: {waits} mbarrier waits bounded by {args.wait_cycles} cycles, "
                 f"{elects} elect.sync electing {lane}; sites in {args.emit_ptx}.sites.json\n")
    return EXIT_VERIFIED


def _check(args, stdout: TextIO, stderr: TextIO) -> int:
    values, ranges = _params(args)
    worst = EXIT_VERIFIED
    for spec in args.specs:
        sources: dict[str, str] = {}
        try:
            result = verify_file(spec, Options(overrides=values, all_params=args.all_params, ranges=ranges, explore=False))
        except SpecError as exc:
            try:
                load_checked(spec, {}, sources)
            except Exception:  # noqa: BLE001 - only to collect source text for the caret
                pass
            _spec_error(exc, sources, stderr)
            worst = EXIT_ERROR
            continue
        kernel = result.kernel
        if result.static:  # the static findings (byte accounting, SMEM budget, tensor maps, ranges)
            for d in result.static:
                stdout.write(render(d, result.sources) + "\n")
            codes = ", ".join(dict.fromkeys(d.code for d in result.static))
            stdout.write(f"{spec}: {len(result.static)} static finding(s) ({codes})\n")
            worst = max(worst, EXIT_FINDINGS)
            continue
        ptx = getattr(result, "ptx", None)
        if ptx is not None:  # a compiled kernel: its launch, barriers and parameter values
            nbar = sum(math.prod(b.dims) for b in kernel.barriers)
            params = ", ".join(f"{p.name}={p.value}" for p in kernel.params)
            stdout.write(f"{spec}: ok: kernel {kernel.name}, {kernel.arch}, block {'x'.join(map(str, ptx.block))}, "
                         f"cluster {'x'.join(map(str, ptx.cluster))}, {nbar} barriers, {len(result.esites)} elect.sync"
                         f"{', ' + params if params else ''}\n")
            continue
        roles = ", ".join(f"{r.name}[{r.instances}]x{r.threads}" if r.instances > 1 else f"{r.name}x{r.threads}"
                          for r in kernel.roles)
        stdout.write(f"{spec}: ok: kernel {kernel.name}, {kernel.arch}, roles {roles}\n")
    return worst


def _sources_of(spec: str) -> dict[str, str]:
    sources: dict[str, str] = {}
    try:
        load_checked(spec, {}, sources)
    except Exception:  # noqa: BLE001 - only to collect source text for the caret
        pass
    return sources


def _explain(args, stdout: TextIO, stderr: TextIO) -> int:
    """The contract table; exit 1 when a stage barrier lacks one producer and one consumer role."""
    from .report.explain import explain_file, render_explain, to_dict
    try:
        e = explain_file(args.spec, dict(_params(args)[0]), args.elect)
    except SpecError as exc:
        _spec_error(exc, _sources_of(args.spec), stderr)
        return EXIT_ERROR
    if args.format == "json":
        import json
        stdout.write(json.dumps(to_dict(e), indent=2) + "\n")
    else:
        color = _use_color(args.color, stdout)
        stdout.write(render_explain(e, color, _width() if color else None))
    return EXIT_FINDINGS if e.flagged else EXIT_VERIFIED


def _graph(args, stdout: TextIO, stderr: TextIO) -> int:
    from .report.explain import explain_file, render_graph
    try:
        e = explain_file(args.spec, dict(_params(args)[0]), args.elect)
    except SpecError as exc:
        _spec_error(exc, _sources_of(args.spec), stderr)
        return EXIT_ERROR
    stdout.write(render_graph(e, args.format))
    return EXIT_VERIFIED


def _timeline(args, stdout: TextIO, stderr: TextIO) -> int:
    """Exit 0 when loads overlap compute, 1 on a no-overlap warning, 3 when the search stopped before showing either."""
    from .report.timeline import render_timeline, timeline_file, to_dict
    if args.load_latency < 1 or args.mma_latency < 1:
        stderr.write("pipecheck: error: latencies are at least 1 round\n")
        return EXIT_ERROR
    try:
        t = timeline_file(args.spec, dict(_params(args)[0]), args.elect, args.load_latency, args.mma_latency,
                          args.max_states, args.timeout)
    except SpecError as exc:
        _spec_error(exc, _sources_of(args.spec), stderr)
        return EXIT_ERROR
    if args.format == "json":
        import json
        stdout.write(json.dumps(to_dict(t), indent=2) + "\n")
    else:
        stdout.write(render_timeline(t))
    return t.exit_code


def _verify(args, stdout: TextIO, stderr: TextIO) -> int:
    values, ranges = _params(args)
    options = Options(
        overrides=values, elect=args.elect,
        limits=Limits(max_states=args.max_states, timeout=args.timeout, max_memory_mb=args.max_memory,
                      stop_at_first=not args.all),
        reduce=not args.no_reduction, lockstep=args.lockstep, symmetry=not args.no_symmetry,
        counter=args.counter, compact=not args.no_compact,
        all_params=args.all_params, ranges=ranges, engine=args.engine, depth=args.depth, every=args.every,
        entry=args.entry, block=args.block, cluster=args.cluster, grid=args.grid, nvcc_flags=tuple(args.nvcc_flags),
        cause_budget=args.cause_budget, fail_on=args.fail_on, stats=args.stats,
        jobs=args.jobs if args.jobs is not None else 1 if args.max_memory is not None else available(),
    )
    out = stdout
    if args.output:
        try:
            out = open(args.output, "w", encoding="utf-8")
        except OSError as exc:
            stderr.write(f"pipecheck: error: cannot write {args.output}: {exc.strerror}\n")
            return EXIT_ERROR
    try:
        code = _verify_all(args, options, out, stderr)
    finally:
        if out is not stdout:
            out.close()
    if out is not stdout:  # say where the report went (stdout stays empty)
        stderr.write(f"pipecheck: wrote the {args.format} report to {args.output}\n")
    return code


def _verify_all(args, options: Options, out: TextIO, stderr: TextIO) -> int:
    codes = []
    results: list[Result] = []
    errors: list[Diagnostic] = []
    color = args.format == "text" and _use_color(args.color, out)
    show = args.progress == "always" or (args.progress == "auto" and bool(getattr(stderr, "isatty", None))
                                          and stderr.isatty())
    for spec in args.specs:
        try:
            if show:
                from .report.progress import Progress
                with Progress(stderr, spec) as progress:
                    result = verify_file(spec, options, progress)
            else:
                result = verify_file(spec, options)
        except LimitReached as hit:  # a limit stopped the run before the spec was even checked
            line = f"{spec}: inconclusive: stopped by {hit.limit} in {hit.where}; no finding so far\n"
            (out if args.format == "text" else stderr).write(line)
            codes.append(EXIT_INCONCLUSIVE)
            continue
        except SpecError as exc:
            sources: dict[str, str] = {}
            try:
                load_checked(spec, {}, sources)
            except SpecError:
                pass
            except Exception:  # noqa: BLE001 - only to collect source text for the caret
                pass
            _spec_error(exc, sources, stderr)
            errors.extend(exc.diagnostics)
            codes.append(EXIT_ERROR)
            continue
        results.append(result)
        if args.format == "text":
            if color:
                from .report.rich_text import render_result_rich
                out.write(render_result_rich(result, width=_width()))
            else:
                from .report.text import render_result
                out.write(render_result(result))
        elif args.format == "json":
            from .report.json_report import render_json
            out.write(render_json(result))
        elif args.format in ("mermaid", "dot"):
            out.write(_diagram(result, args.format, args.finding, stderr))
        if args.stats:
            _stats(result, stderr)
        codes.append(result.exit_code)
    if args.format == "sarif":
        from .report.sarif import render_sarif
        out.write(render_sarif(results, errors))
    elif args.format == "html":
        from .report.html import render_html
        if results:
            out.write(render_html(results))
    return _worst(codes)


def _worst(codes: list[int]) -> int:
    return max(codes, key=lambda c: {0: 0, 3: 1, 1: 2, 2: 3}[c]) if codes else EXIT_ERROR


def _diagram(result: Result, fmt: str, n: int, stderr: TextIO) -> str:
    from .report.common import view
    from .report.diagrams import dot, mermaid
    comment = "%%" if fmt == "mermaid" else "//"
    if not result.issues:
        return f"{comment} {result.spec}: {result.verdict}: no counterexample to draw\n"
    if not 1 <= n <= len(result.issues):
        stderr.write(f"pipecheck: note: {result.spec} has {len(result.issues)} finding(s); drawing the first\n")
        n = 1
    v = view(result, result.issues[n - 1])
    return (mermaid if fmt == "mermaid" else dot)(result, v)


def _stats(result: Result, stderr: TextIO) -> None:
    from .search.census import census, render_census
    for n, run in enumerate(result.runs):
        e = run.exploration
        # a run with findings reports the states to its first finding; the seconds are of the whole search, which
        # went on past it (`--cause-budget`): the rate is of every state explored
        past = e.extra.get("after_first", 0)
        rate = (e.states + past) / e.seconds if e.seconds > 0 else 0.0
        then = f" to the first finding; {past} states past it" if "after_first" in e.extra else ""
        stderr.write(f"{result.spec}: {e.states} states, {e.transitions} transitions, depth {e.depth}{then}"
                     f"{'; ' if then else ', '}{e.seconds:.3f} s ({rate:,.0f} states/s)\n")
        data = census(run.model, e)
        if data is not None:
            head = result.spec if len(result.runs) == 1 else f"{result.spec} (configuration class {n + 1})"
            stderr.write(render_census(data, head))
    if result.plan is not None:  # the symbolic steps: classes found and the time each took
        p = result.plan
        lanes = sorted({len(r.cclass.partition.classes) for r in result.runs if r.cclass.partition is not None})
        times = ", ".join(f"{k} {v:.3f} s" for k, v in p.seconds.items())
        stderr.write(f"{result.spec}: {len(p.points)} parameter point(s), {len(p.pclasses.regions) or 1} parameter "
                     f"region(s), lane classes {lanes or '-'}; {times}\n")
    ptx = getattr(result, "ptx", None)
    if ptx is not None and ptx.seconds:  # the PTX front end's phases before the points' own
        times = ", ".join(f"{k} {v:.3f} s" for k, v in ptx.seconds)
        stderr.write(f"{result.spec}: PTX front end: {times}; then the parameter points (classes, regions, "
                     "searches)\n")
    stderr.write(f"{result.spec}: total {result.seconds:.3f} s\n")


def main() -> None:
    sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))


if __name__ == "__main__":
    main()
