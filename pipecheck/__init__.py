"""pipecheck: a model checker for TMA/mbarrier pipeline protocols of Hopper and Blackwell kernels.

The public API: `load` a spec, `verify` it, read the `Report` (verdict, findings with
their counterexample steps) or render it as text, JSON, SARIF or HTML. Reports (rich,
networkx) are imported only when one is rendered.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from .core.version import __version__
__all__ = ["Finding", "Location", "Report", "Spec", "SpecError", "Step", "load", "verify", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .lang.check import CheckedKernel
    from .pipeline.result import Result


def __getattr__(name: str) -> Any:
    if name == "SpecError":
        from .core.diagnostics import SpecError
        return SpecError
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
        """Barrier arrays and their init counts."""
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

    def to_json(self) -> dict:
        """The pipecheck-result/1 document (docs/json-schema.md)."""
        from .report.json_report import to_dict
        return to_dict(self.result)

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


def verify(spec: "Spec | str", *, elect: str = "any", max_states: int = 2_000_000, timeout: float | None = None,
           all_findings: bool = False, params: Mapping[str, int] | None = None) -> Report:
    """Explore every schedule of a spec (a `Spec` or a path) and return its `Report`; raises SpecError."""
    from .search.explore import Limits
    from .pipeline.verify import verify_file
    from .pipeline.result import Options
    if elect not in ("any", "lowest"):
        raise ValueError("elect is 'any' or 'lowest'")
    if isinstance(spec, Spec):
        path, overrides = spec.path, dict(spec.overrides)
    else:
        path, overrides = str(spec), {}
    overrides.update(params or {})
    options = Options(overrides=tuple(overrides.items()), elect=elect,
                      limits=Limits(max_states=max_states, timeout=timeout, stop_at_first=not all_findings))
    return Report(verify_file(path, options))
