"""The differential oracle: one well-formed spec verified several ways that must agree.

At small parameters, the plain search (no reduction, no symmetry, tuples) is the reference;
each reduction, `--every` against ordinary runs, and bmc against explicit within its bound
must give the same verdict and the same (code, line) findings. `compare` lists every difference.
"""
from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from pipecheck.core.diagnostics import SpecError
from pipecheck.model.ir import EvalError
from pipecheck.pipeline.result import Options, Result
from pipecheck.pipeline.verify import load_checked, verify_file
from pipecheck.search.explore import Limits

FULL_LIMIT = 4_000  # states of the plain search per configuration; above it the spec is compared by verdict only
SMALL = 2  # ranged parameters are set to min(default, SMALL), within their range
BMC_DEPTH = 10  # the bound of the bmc comparison (transitions)
BMC_CLASSES = 3  # configuration classes compared with bmc per spec
VARIANT_LIMIT = 20_000  # states of a reduced run (a process per warp can need several times the plain search)
EVERY_SPAN = 4  # ordinary runs at the first EVERY_SPAN values of a --every range

# every reduction, each against the plain search (the names are the CLI flags that turn them off)
REDUCTIONS = {
    "default (por, symmetry, counting, compact)": dict(reduce=True, symmetry=True, compact=True),
    "--no-symmetry": dict(reduce=True, symmetry=False, compact=True),
    "--no-reduction": dict(reduce=False, symmetry=True, compact=True),
    "--no-compact": dict(reduce=True, symmetry=True, compact=False),
    "--counter warps": dict(reduce=True, symmetry=True, compact=True, counter="warps"),
}


@dataclass(frozen=True)
class Outcome:
    verdict: str  # verified | findings | inconclusive | error (a spec error at these parameters) | refused
    findings: frozenset = frozenset()  # (code, line)

    def __str__(self) -> str:
        codes = ", ".join(f"{c}@{ln}" for c, ln in sorted(self.findings))
        return self.verdict + (f" ({codes})" if codes else "")


@dataclass(frozen=True)
class Disagreement:
    flags: str  # how the second run differed from the reference
    reference: Outcome
    other: Outcome
    params: tuple[tuple[str, int], ...]

    @property
    def kind(self) -> str:
        """'verdict', 'codes' (same verdict, other finding codes) or 'locations' (same codes, other lines)."""
        return classify(self.reference, self.other)

    def __str__(self) -> str:
        ps = " ".join(f"-D {k}={v}" for k, v in self.params)
        return f"[{self.kind}] {self.flags} {ps}: reference {self.reference}, this run {self.other}"


KINDS = ("verdict", "codes", "locations")  # worst first


def classify(reference: Outcome, other: Outcome) -> str:
    if reference.verdict != other.verdict:
        return "verdict"
    if {c for c, _ in reference.findings} != {c for c, _ in other.findings}:
        return "codes"
    return "locations"


@dataclass
class Comparison:
    """What `compare` did with one spec: the comparisons made, skipped, and the disagreements."""

    params: tuple[tuple[str, int], ...] = ()
    compared: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    seconds: float = 0.0


def _outcome(r: Result) -> Outcome:
    issues = getattr(r, "all_issues", r.issues)  # causes and the consequences grouped under them
    lines = frozenset((i.code, r.sites[i.finding.site].span.line if 0 <= i.finding.site < len(r.sites)
                       and r.sites[i.finding.site].span else 0) for i in issues)
    static = frozenset((d.code, d.span.line if d.span else 0) for d in r.static)
    return Outcome(r.verdict, lines | static)


def small_params(path: str) -> tuple[tuple[str, int], ...]:
    """Every ranged parameter at min(default, SMALL), clamped to its range."""
    kernel = load_checked(path, {}, {})
    out = []
    for p in kernel.params:
        if p.lo is not None and p.hi is not None:
            out.append((p.name, max(p.lo, min(p.value, SMALL, p.hi))))
    return tuple(out)


def _run(path: str, ov, past: bool, max_states: int = FULL_LIMIT, **how) -> Result:
    limits = Limits(max_states=max_states, stop_at_first=not past, past_findings=past)
    return verify_file(path, Options(overrides=tuple(ov), limits=limits, check_scheduling=False, **how))


def _safe(fn):
    """A run's Result, or an Outcome saying it errored at these parameters (a spec error is data here)."""
    try:
        return fn()
    except (SpecError, EvalError) as exc:
        codes = getattr(exc, "diagnostics", ())
        return Outcome("error", frozenset((d.code, d.span.line if d.span else 0) for d in codes))


def compare(path: str | Path, bmc: bool = True, every: bool = True) -> Comparison:
    """Verify `path` at small parameters every way; return what disagreed with the plain search."""
    start = time.perf_counter()
    path = str(path)
    cmp = Comparison()
    try:
        ov = small_params(path)
    except (SpecError, EvalError):
        cmp.skipped.append("rejected by check")
        return cmp
    cmp.params = ov
    _reductions(path, ov, cmp)
    if every:
        _every(path, ov, cmp)
    if bmc:
        _bmc(path, ov, cmp)
    cmp.seconds = time.perf_counter() - start
    return cmp


def _reductions(path: str, ov, cmp: Comparison) -> None:
    plain = dict(reduce=False, symmetry=False, compact=False)
    full = _safe(lambda: _run(path, ov, True, **plain))
    past = True
    if isinstance(full, Result) and full.stopped is not None:  # too large past findings: compare verdicts only
        past = False
        full = _safe(lambda: _run(path, ov, False, **plain))
    if isinstance(full, Result) and full.stopped is not None:
        cmp.skipped.append(f"reductions: the plain search passes {FULL_LIMIT} states")
        return
    ref = full if isinstance(full, Outcome) else _outcome(full)
    for name, how in REDUCTIONS.items():
        got = _safe(lambda: _run(path, ov, past, max_states=VARIANT_LIMIT, **how))
        if isinstance(got, Result) and got.stopped is not None:
            cmp.skipped.append(f"{name}: passes {VARIANT_LIMIT} states")
            continue
        out = got if isinstance(got, Outcome) else _outcome(got)
        cmp.compared.append(name)
        same = out == ref if past or ref.verdict == "error" else out.verdict == ref.verdict
        if not same:
            cmp.disagreements.append(Disagreement(name + ("" if past else " (verdicts only)"), ref, out, ov))
    # --lockstep is its own semantics: its reduced search against its plain search
    lock = _safe(lambda: _run(path, ov, past, lockstep=True, **plain))
    if isinstance(lock, Result) and lock.stopped is None:
        lref = _outcome(lock)
        got = _safe(lambda: _run(path, ov, past, max_states=VARIANT_LIMIT, lockstep=True))
        if not (isinstance(got, Result) and got.stopped is not None):
            out = got if isinstance(got, Outcome) else _outcome(got)
            cmp.compared.append("--lockstep")
            if (out != lref) if past else (out.verdict != lref.verdict):
                cmp.disagreements.append(Disagreement("--lockstep against --lockstep --no-reduction --no-symmetry",
                                                      lref, out, ov))


def _every(path: str, ov, cmp: Comparison) -> None:
    kernel = load_checked(path, dict(ov), {})
    for p in kernel.params:
        if p.lo is None or p.hi is None or p.hi <= p.lo:
            continue
        rest = tuple((k, v) for k, v in ov if k != p.name)
        try:
            folded = verify_file(path, Options(overrides=rest, every=p.name, check_scheduling=False,
                                               limits=Limits(max_states=VARIANT_LIMIT, stop_at_first=True)))
        except (SpecError, EvalError) as exc:  # refused by name: not a loop bound the abstraction folds
            first = exc.diagnostics[0].message if isinstance(exc, SpecError) and exc.diagnostics else str(exc)
            cmp.skipped.append(f"--every {p.name}: refused ({first[:80]})")
            continue
        if folded.stopped is not None:
            cmp.skipped.append(f"--every {p.name}: passes {VARIANT_LIMIT} states")
            continue
        if folded.every is not None and folded.every.witness_k is None and folded.static and not folded.every.codes:
            # the checks over parameters alone speak for every value: an ordinary run must show them too
            r = _safe(lambda: _run(path, rest + ((p.name, p.lo),), False, max_states=VARIANT_LIMIT))
            cmp.compared.append(f"--every {p.name}")
            want = {d.code for d in folded.static}
            have = {c for c, _ in r.findings} if isinstance(r, Outcome) else {d.code for d in r.static}
            if not want <= have:
                cmp.disagreements.append(Disagreement(f"--every {p.name} (static findings) against -D {p.name}={p.lo}",
                                                      Outcome("findings", frozenset((c, 0) for c in have)),
                                                      Outcome(folded.verdict, frozenset((c, 0) for c in want)), rest))
            continue
        first, stopped = None, False
        hi = min(p.hi, p.lo + EVERY_SPAN - 1)
        for k in range(p.lo, hi + 1):
            r = _safe(lambda: _run(path, rest + ((p.name, k),), False, max_states=VARIANT_LIMIT))
            if isinstance(r, Outcome):
                continue
            if r.stopped is not None:
                stopped = True
                break
            if r.verdict == "findings":
                first = k
                break
        witness = folded.every.witness_k if folded.every is not None else None
        if stopped or (first is None and witness is not None and witness > hi) or (first is None and hi < p.hi
                                                                                   and folded.verdict != "verified"):
            cmp.skipped.append(f"--every {p.name}: the ordinary runs do not cover its witness")
            continue
        cmp.compared.append(f"--every {p.name}")
        if first is None and hi < p.hi:  # verified by the fold; the ordinary runs only cover lo..hi
            continue
        if witness != first or (first is None) != (folded.verdict == "verified"):
            ref = Outcome("findings" if first is not None else "verified",
                          frozenset({("first " + p.name, first)}) if first is not None else frozenset())
            got = Outcome(folded.verdict, frozenset({("first " + p.name, witness)}) if witness is not None else
                          frozenset())
            cmp.disagreements.append(Disagreement(f"--every {p.name} against -D {p.name}={p.lo}..{hi}", ref, got,
                                                  rest))


def _bmc(path: str, ov, cmp: Comparison) -> None:
    """bmc to BMC_DEPTH steps against the plain search's shortest witness in each configuration class."""
    plain = _safe(lambda: _run(path, ov, False, max_states=FULL_LIMIT, reduce=False, symmetry=False))
    if isinstance(plain, Outcome):
        return
    runs = plain.runs[:BMC_CLASSES]  # z3 per class is slow: the first few classes (kernel choices) only
    got = _safe(lambda: _run(path, ov, False, engine="bmc", depth=BMC_DEPTH,
                             only=tuple(r.config for r in runs)))
    if isinstance(got, Outcome):
        return
    if [r.config for r in got.runs] != [r.config for r in runs]:
        cmp.skipped.append("bmc: the configuration classes differ")
        return
    for a, b in zip(runs, got.runs):
        e, z = a.exploration, b.exploration
        if z.stopped in ("bmc-unsupported", "timeout") or (e.stopped not in (None, "first-finding")):
            cmp.skipped.append(f"bmc: {z.stopped or e.stopped}")
            continue
        want = min((f.steps for f in e.found), default=None)
        if want is not None and want > BMC_DEPTH:
            want = None
        have = z.depth if z.found else None
        cmp.compared.append("--engine bmc")
        if want != have or z.stopped == "bmc-replay-failed":
            ref = Outcome("findings" if want is not None else "verified",
                          frozenset({("depth", want)}) if want is not None else frozenset())
            out = Outcome(("findings" if have is not None else "verified") if z.stopped != "bmc-replay-failed"
                          else "bmc-replay-failed", frozenset({("depth", have)}) if have is not None else frozenset())
            cmp.disagreements.append(Disagreement(f"--engine bmc --depth {BMC_DEPTH} (configuration "
                                                  f"{a.cclass.representative})", ref, out, ov))
            return


class Watchdog(BaseException):
    """One spec ran past its CPU budget."""


def compare_guarded(path: str | Path, cpu_seconds: int = 120, **kw) -> Comparison:
    """`compare` with a CPU watchdog (ITIMER_VIRTUAL): a spec past it is skipped, and says so. The watchdog may fire
    inside a z3 call, whose ctypes layer wraps it in another exception (an ArgumentError, an exception group): so
    whatever comes out once it has fired counts as the watchdog."""
    fired: list = []

    def alarm(signum, frame):
        fired.append(True)
        raise Watchdog()

    old = signal.signal(signal.SIGVTALRM, alarm)
    signal.setitimer(signal.ITIMER_VIRTUAL, cpu_seconds, 1.0)
    try:
        try:
            return compare(path, **kw)
        finally:  # the repeating timer may fire here too: the outer handler catches that
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    except BaseException:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        if not fired:
            raise
        c = Comparison()
        c.skipped.append(f"watchdog: past {cpu_seconds} CPU seconds")
        return c
    finally:
        signal.signal(signal.SIGVTALRM, old)
