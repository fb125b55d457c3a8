"""What a run of the pipeline is given and returns: options, the runs per configuration class, the
issues (a finding with its witness and condition), and the result the reports render.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.diagnostics import Diagnostic, Span, SpecError, error
from ..core.records import record
from ..lang.check import CheckedKernel
from ..model.findings import Finding
from ..model.ir import EvalError, Site
from ..model.system import Model
from ..model.threads import Config
from ..search.explore import Exploration, Found, Limits
from ..symbolic import sweep
from ..symbolic.terms import Point
from .configurations import ConfigClass, ElectSite

VERDICTS = ("verified", "findings", "inconclusive")
EXIT_CODES = {"verified": 0, "findings": 1, "inconclusive": 3}


@record
class Options:
    overrides: tuple[tuple[str, int], ...] = ()
    elect: str = "any"  # "any": every lane PTX allows; "lowest": the H200's observed choice
    limits: Limits = Limits(max_states=2_000_000, stop_at_first=True)
    reduce: bool = True  # partial-order reduction (switchable for measurement)
    all_params: bool = False  # every value of every declared parameter range, not only the defaults
    ranges: tuple[tuple[str, int, int], ...] = ()  # -D NAME=LO..HI: narrow a range for all_params
    explore: bool = True  # False: static checks only (`pipecheck check`)
    engine: str = "explicit"  # "bmc": bounded model checking in z3 (symbolic/bmc.py), to `depth` steps
    depth: int = 30  # the bound of the bmc engine, in transitions
    lockstep: bool = False  # each warp reconverges at the end of every branch (--lockstep)
    check_scheduling: bool = True  # say which findings need independent thread scheduling
    only: tuple[Config, ...] | None = None  # explore only the configuration classes holding these
    symmetry: bool = True  # identical role instances are interchangeable (switchable for measurement)
    # "classes": threads with the same code move as counted classes (the counter abstraction);
    # "warps" / "threads": each warp / thread of a class is its own process (for measurement)
    counter: str = "classes"
    compact: bool = True  # the visited set stores states as interned ids (compact.py), not as tuples
    stats: bool = False  # --stats: keep the visited states for a census of where they come from (search/census.py)
    every: str | None = None  # --every K: one folded exploration for every value of this loop bound (every.py)
    # PTX and CUDA kernels (pipeline/ptx.py): which entry, the launch the PTX does not state, nvcc's extra flags
    entry: str | None = None
    block: tuple[int, int, int] | None = None
    cluster: tuple[int, int, int] | None = None
    grid: tuple[int, int, int] | None = None
    nvcc_flags: tuple[str, ...] = ()
    # states explored past the first finding of a configuration, also past the transitions that raised
    # findings, to find its cause and consequences (pipeline/causes.py); 0: stop at the first finding
    cause_budget: int = 2_000
    # processes for the configuration classes of one parameter point (pipeline/searches.py): the result is the
    # same for every number; the CLI's default is the CPUs it may use
    jobs: int = 1
    fail_on: str = "latent"  # which findings make `verify` exit 1: "error", "latent" (errors too), "any" (warnings too)
    # a yes/no run (the lockstep re-check, pipeline/verify.py): only its verdict is read, so its findings are not
    # collected into issues (no condition is worked out, no witness replayed)
    verdict_only: bool = False

    @property
    def meetings(self) -> bool:
        """Whether a warp meeting every lane stands at is one move (model.system.Model.meeting): part of the
        reduction, and not for bmc, whose witnesses are replayed one class's arrival at a time."""
        return self.reduce and self.engine != "bmc"

    @property
    def chains(self) -> bool:
        """Whether a thread group that alone is persistent runs on through its private steps in one move
        (search/chains.py): part of the reduction, not for bmc (the same condition as `meetings`)."""
        return self.meetings


@dataclass
class Run:
    """One configuration class explored."""

    cclass: ConfigClass
    model: Model
    exploration: Exploration
    point: Point = ()  # the parameter values it ran with
    system: object = None  # what was explored: the model, possibly wrapped by symmetry (for replaying witnesses)

    @property
    def config(self) -> Config:
        return self.cclass.representative


@dataclass
class Issue:
    """One finding as reported: its shortest witness and the configurations that show it."""

    finding: Finding
    witness: Found
    run: Run
    configs: list[Config]
    condition: str
    on_hardware: bool | None  # whether the H200's elect choice shows it; None without elect()
    needs_independent_scheduling: bool = False  # gone when every warp reconverges after each branch
    where: frozenset = frozenset()  # (point, config) pairs that show it
    consequences: list["Issue"] = field(default_factory=list)  # what it leads to, grouped under it (causes.py)
    led_by: str = ""  # for a consequence: how it follows from its cause ("on its schedule", ...)
    fix: str = ""  # the usual fix of a known bug pattern, or ""
    latent: tuple[str, ...] = ()  # why it is latent (needs what the H200 does not do), or () for an error

    @property
    def severity(self) -> str:
        return "latent" if self.latent else "error"

    @property
    def code(self) -> str:
        return self.finding.code


@dataclass
class Result:
    spec: str
    kernel: CheckedKernel
    options: Options
    verdict: str
    issues: list[Issue]
    runs: list[Run]
    sites: list[Site]
    sources: dict[str, str]
    esites: list[ElectSite]
    seconds: float
    stopped: str | None = None
    static: list[Diagnostic] = field(default_factory=list)
    plan: sweep.Plan | None = None  # parameter points and regions, and the time of each symbolic step
    every: object = None  # every.Every: what a --every run said for all values of the bound
    ptx: object = None  # pipeline.ptx.PtxInfo: for a PTX kernel, the parameters chosen and what was compiled
    stopped_in: str = ""  # where a limit stopped the run outside the search: "lowering (...), after 20.0 s and 480 MB"

    @property
    def exit_code(self) -> int:
        """1 for findings only when one of them reaches `Options.fail_on` (docs/errors.md, "Exit codes")."""
        if self.verdict == "findings" and not self.fails:
            return 0
        return EXIT_CODES[self.verdict]

    @property
    def fails(self) -> bool:
        """Whether a finding reaches the --fail-on level: `error` only errors, `latent` (the default) errors and
        latent findings, `any` also warnings."""
        level = self.options.fail_on
        if any(i.severity == "error" for i in self.issues):
            return True
        if any(d.severity == "error" for d in self.static):
            return True
        if level in ("latent", "any") and self.issues:
            return True
        return level == "any" and bool(self.static)

    @property
    def all_issues(self) -> list[Issue]:
        """Every finding: each cause followed by what it leads to (`issues` holds the causes only)."""
        return [j for i in self.issues for j in [i] + i.consequences]

    @property
    def states(self) -> int:
        return sum(r.exploration.states for r in self.runs)

    @property
    def params(self) -> dict[str, int]:
        return {p.name: p.value for p in self.kernel.params}


def site_span(sites: list[Site], idx: int) -> Span | None:
    return sites[idx].span if 0 <= idx < len(sites) else None


def spec_error(exc: SpecError | EvalError, sites: list[Site]) -> SpecError:
    if isinstance(exc, SpecError):
        return exc
    return error(getattr(exc, "code", "value"), str(exc), site_span(sites, exc.site))
