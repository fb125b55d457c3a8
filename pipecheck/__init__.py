"""pipecheck: a model checker for TMA/mbarrier pipeline protocols of Hopper and Blackwell kernels.

The public API: `load` a spec, `verify` it, read the `Report` (verdict, findings with
their counterexample steps) or render it as text, JSON, SARIF or HTML. Reports (rich,
networkx) are imported only when one is rendered.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .core.version import __version__
__all__ = ["Finding", "LimitReached", "Location", "Report", "Spec", "SpecError", "Step", "load", "verify", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .lang.check import CheckedKernel
    from .pipeline.result import Result


def __getattr__(name: str) -> Any:
    if name == "SpecError":
        from .core.diagnostics import SpecError
        return SpecError
    if name == "LimitReached":
        from .pipeline.limits import LimitReached
        return LimitReached
    raise AttributeError(f"module 'pipecheck' has no attribute {name!r}")


@dataclass(frozen=True)
class Location:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Spec:
    """A parsed and checked spec: its kernel, parameters (after overrides), barriers and roles."""

    path: str
    overrides: tuple[tuple[str, int], ...]
    kernel: "CheckedKernel" = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def params(self) -> dict[str, int]:
        return {p.name: p.value for p in self.kernel.params}

    @property
    def barriers(self) -> dict[str, int]:
        """Barrier arrays and their init counts (CTA 0's, where the count depends on the CTA)."""
        return {b.name: b.count for b in self.kernel.barriers}

    @property
    def roles(self) -> dict[str, tuple[int, int]]:
        """Role name -> (instances, threads per instance)."""
        return {r.name: (r.instances, r.threads) for r in self.kernel.roles}


@dataclass(frozen=True)
class Step:
    """One step of a counterexample: which role instance (and which of its threads) did what, where."""

    index: int
    role: str
    threads: str
    action: str
    location: Location | None
    effects: tuple[str, ...]
    barriers: tuple[str, ...]  # the barriers it touched, as they are after it


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    location: Location | None
    condition: str  # "" when it shows in every configuration
    on_hardware: bool | None  # whether the H200's elect choice shows it; None when no elect() is involved
    why: str
    steps: tuple[Step, ...]  # the shortest schedule that shows it


class Report:
    """What `verify` returns: the verdict, the findings, and every rendering of them."""

    def __init__(self, result: "Result"):
        self.result = result

    @property
    def verdict(self) -> str:
        """'verified', 'findings' or 'inconclusive'."""
        return self.result.verdict

    @property
    def ok(self) -> bool:
        return self.result.verdict == "verified"

    @property
    def exit_code(self) -> int:
        return self.result.exit_code

    @property
    def states(self) -> int:
        return self.result.states

    @property
    def params(self) -> dict[str, int]:
        return self.result.params

    @property
    def findings(self) -> list[Finding]:
        from .report.common import view
        from .report.trace import barrier_short
        out = []
        for issue in self.result.issues:
            v = view(self.result, issue)
            model = issue.run.model
            steps = []
            for st in v.trace.steps:
                span = self.result.sites[st.site].span if 0 <= st.site < len(self.result.sites) else None
                loc = Location(span.file, span.line, span.col) if span else None
                after = v.trace.states[st.index - 1]
                steps.append(Step(st.index, st.column, st.who, st.text, loc, st.effects,
                                  tuple(barrier_short(model, after, g) for g in st.touched)))
            loc = Location(v.span.file, v.span.line, v.span.col) if v.span else None
            out.append(Finding(issue.code, issue.finding.message, loc, issue.condition, issue.on_hardware, v.why,
                               tuple(steps)))
        return out

    def text(self, color: bool = False) -> str:
        if color:
            from .report.rich_text import render_result_rich
            return render_result_rich(self.result)
        from .report.text import render_result
        return render_result(self.result)

    def to_dict(self) -> dict:
        """The pipecheck-result/1 document (docs/json-schema.md) as Python data."""
        from .report.json_report import to_dict
        return to_dict(self.result)

    def to_json(self) -> str:
        """The pipecheck-result/1 document as JSON text: the bytes `pipecheck verify --format json` prints."""
        from .report.json_report import render_json
        return render_json(self.result)

    def sarif(self) -> dict:
        from .report.sarif import to_sarif
        return to_sarif([self.result])

    def html(self) -> str:
        from .report.html import render_html
        return render_html([self.result])

    def __repr__(self) -> str:
        return f"<pipecheck.Report {self.result.spec}: {self.verdict}, {len(self.result.issues)} finding(s)>"


def load(path: str, **params: int) -> Spec:
    """Parse and check a spec, with parameter overrides (`load("ring.pipe", STAGES=6)`); raises SpecError."""
    from .pipeline.verify import load_checked
    overrides = tuple(params.items())
    kernel = load_checked(str(path), dict(overrides), {})
    return Spec(str(path), overrides, kernel)


def verify(spec: "Spec | str", *, elect: str = "any", params: Mapping[str, int] | None = None,
           ranges: Mapping[str, tuple[int, int]] | None = None, all_params: bool = False,
           max_states: int = 2_000_000, timeout: float | None = None, max_memory: int | None = None,
           all_findings: bool = False, reduction: bool = True, symmetry: bool = True, counter: str = "classes",
           compact: bool = True, lockstep: bool = False, every: str | None = None, engine: str = "explicit",
           depth: int = 30, entry: str | None = None, block: tuple[int, int, int] | None = None,
           cluster: tuple[int, int, int] | None = None, grid: tuple[int, int, int] | None = None,
           nvcc_flags: tuple[str, ...] = (), progress: Callable[[int, int, float], None] | None = None,
           **options: Any) -> Report:
    """Explore every schedule of a spec (a `Spec` or a path: .pipe, .ptx, .cu) and return its `Report`.

    Every option of `pipecheck verify` is a keyword of the same name (`--no-reduction` is
    `reduction=False`, `--all` is `all_findings=True`, `-D N=LO..HI` is `ranges={"N": (LO, HI)}`);
    `progress(states, depth, seconds)` is called while exploring. Raises SpecError for a wrong
    spec, ValueError for a wrong option, and `pipecheck.LimitReached` when `timeout` or
    `max_memory` stops the run before the spec is even checked."""
    from dataclasses import fields, replace
    from .search.explore import Limits
    from .pipeline.verify import verify_file
    from .pipeline.result import Options
    if not (elect in ("any", "lowest") or (str(elect).isdigit() and 0 <= int(elect) <= 31)):
        raise ValueError("elect is 'any', 'lowest' or a lane 0..31")
    for name, value, allowed in (("counter", counter, ("classes", "warps", "threads")),
                                 ("engine", engine, ("explicit", "bmc"))):
        if value not in allowed:
            raise ValueError(f"{name} is one of {', '.join(map(repr, allowed))}")
    for name, value in (("max_states", max_states), ("max_memory", max_memory), ("depth", depth)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive integer")
    if timeout is not None and not (timeout > 0 and timeout != float("inf")):
        raise ValueError("timeout must be a positive number of seconds")
    if isinstance(spec, Spec):
        path, overrides = spec.path, dict(spec.overrides)
    else:
        path, overrides = str(spec), {}
    overrides.update(params or {})
    if ranges and not all_params:
        raise ValueError("ranges narrow the parameter ranges of all_params=True")
    known = {f.name for f in fields(Options)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"verify() got an unexpected keyword argument {unknown[0]!r}")
    opts = Options(overrides=tuple(overrides.items()), elect=str(elect),
                   limits=Limits(max_states=max_states, timeout=timeout, max_memory_mb=max_memory,
                                 stop_at_first=not all_findings),
                   reduce=reduction, symmetry=symmetry, counter=counter, compact=compact, lockstep=lockstep,
                   all_params=all_params, ranges=tuple((n, lo, hi) for n, (lo, hi) in (ranges or {}).items()),
                   engine=engine, depth=depth, every=every, entry=entry, block=block, cluster=cluster, grid=grid,
                   nvcc_flags=tuple(nvcc_flags))
    if options:  # Options fields without a keyword of their own (newer CLI flags), set as they are named there
        opts = replace(opts, **options)
    return Report(verify_file(path, opts, progress))
