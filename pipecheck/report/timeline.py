"""`pipecheck timeline`: the as-soon-as-possible schedule in prologue, steady state and
epilogue, and the overlap of loads with compute over all reachable states.

The schedule runs every thread as soon as it can, lands each TMA load a fixed number of
rounds after its issue and completes each wgmma likewise. The overlap analysis explores
the model without partial-order reduction (the reduction lands loads early, so it would
under-count loads in flight) and reports the most loads in flight while a consumer computes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.diagnostics import Diagnostic, Span, error, render
from ..lang.lower import resolve_roles
from ..model.ir import (ARRIVE, ARRIVE_DROP, CP_ASYNC_ARRIVE, END, MMA, MMA_COMMIT, READ, RING, TMA_LOAD, WAIT,
                        EvalError, RRing)
from ..model.state import State
from ..model.system import Model
from ..pipeline.configurations import ConfigClass, config_classes, describe, elect_sites
from ..pipeline.verify import load_checked
from ..search.explore import Limits, explore
from .trace import ASYNC, describe_thread_step

SCHEMA = "pipecheck-timeline/1"
RELEASES = (ARRIVE, ARRIVE_DROP, MMA_COMMIT, CP_ASYNC_ARRIVE)


@dataclass(frozen=True)
class Ring:
    """The ring whose stages the TMA loads fill: its name, depth and declaration."""

    name: str
    stages: int
    span: Span | None


@dataclass
class Round:
    index: int
    events: list[tuple[str, str, int]] = field(default_factory=list)  # (column, text, site)
    in_flight: int = 0  # distinct stages with a load in flight at the round's end
    computing: bool = False


@dataclass
class Schedule:
    rounds: list[Round]
    columns: list[str]
    prologue: tuple[int, int]  # inclusive round ranges; (0, -1) when empty
    steady: tuple[int, int]
    epilogue: tuple[int, int]
    loads_in_steady: int
    ended: str  # "done" | "blocked" | "fault" | "limit"
    max_overlap: int  # most stages in flight while a consumer computes, in this schedule


@dataclass
class Overlap:
    max_in_flight: int  # most distinct stages with a TMA load in flight while a consumer computes
    states: int
    complete: bool
    stopped: str | None
    compute_states: int  # reachable states in which some consumer computes


@dataclass
class TimelineResult:
    spec: str
    kernel_name: str
    params: dict[str, int]
    condition: str
    ring: Ring | None
    schedule: Schedule
    overlap: Overlap
    load_latency: int
    mma_latency: int
    sources: dict[str, str]

    @property
    def warning(self) -> Diagnostic | None:
        r = self.ring
        if r is None or r.stages < 2 or not self.overlap.complete or self.overlap.compute_states == 0:
            return None
        if self.overlap.max_in_flight > 0:
            return None
        return Diagnostic("warning", "no-overlap", f"ring '{r.name}' has {r.stages} stages, but no TMA load is ever in "
                          "flight while a consumer computes: the ring never holds more than the stage being computed, "
                          "so loads and compute are serialized", r.span)

    @property
    def exit_code(self) -> int:
        if self.warning is not None:
            return 1
        if self.overlap.max_in_flight == 0 and not self.overlap.complete:
            return 3
        return 0


# ---------------------------------------------------------------- what "a consumer computes" means


def compute_points(model: Model) -> list[frozenset[int]]:
    """Per class, the reads and mma_async issues that come after a wait on a stage a TMA load fills.

    A forward data-flow over the class's program: a wait on a load barrier enters the
    region, a release (arrive) leaves it; reads and wgmma issues inside it are compute.
    """
    load_bars = {i.args[3].name for cl in model.classes for i in cl.program.instrs if i.op == TMA_LOAD}
    out: list[frozenset[int]] = []
    for cl in model.classes:
        instrs = cl.program.instrs
        if not any(i.op in (READ, MMA) for i in instrs):
            out.append(frozenset())
            continue
        n = len(instrs)
        succ = cl.program.successors()
        inside = [False] * n
        changed = True
        while changed:
            changed = False
            for pc, ins in enumerate(instrs):
                here = inside[pc]
                if ins.op == WAIT and ins.args[0].name in load_bars:
                    after = True
                elif ins.op in RELEASES:
                    after = False
                else:
                    after = here
                for s in succ[pc]:
                    if after and not inside[s]:
                        inside[s] = True
                        changed = True
        # computing: about to read the stage it waited for, or issuing its wgmma (running ones are in state.mmas);
        # a thread at its wait, at mma_wait or about to release holds the stage but does not compute on it
        out.append(frozenset(pc for pc in range(n) if inside[pc] and instrs[pc].op in (READ, MMA)))
    return out


def _metrics(model: Model, points: list[frozenset[int]], s: State) -> tuple[bool, int]:
    """(whether a consumer computes in s, distinct stages with a load in flight)."""
    computing = any(inflight or forming for _, forming, inflight in s.mmas)
    if not computing:
        for c, groups in enumerate(s.locs):
            pts = points[c]
            if pts and any(pc in pts for (pc, _), _ in groups):
                computing = True
                break
    return computing, len({entry[3] for entry in s.flight})


class _Observed:
    """The model as the explorer sees it, measuring every state the explorer expands."""

    def __init__(self, model: Model, points: list[frozenset[int]]):
        self.model = model
        self.points = points
        self.best = 0
        self.compute_states = 0

    def initial(self) -> State:
        return self.model.initial()

    def successors(self, s: State) -> list:
        computing, flying = _metrics(self.model, self.points, s)
        if computing:
            self.compute_states += 1
            self.best = max(self.best, flying)
        return self.model.successors(s)

    def terminal_findings(self, s: State) -> tuple:
        return ()

    def step(self, s: State, action):
        return self.model.step(s, action)


def overlap(model: Model, max_states: int, timeout: float | None) -> Overlap:
    points = compute_points(model)
    obs = _Observed(model, points)
    exp = explore(obs, Limits(max_states=max_states, timeout=timeout, stop_at_first=False, past_findings=True))
    return Overlap(obs.best, exp.states, exp.complete, exp.stopped, obs.compute_states)


# ---------------------------------------------------------------- the as-soon-as-possible schedule


def asap(model: Model, cclass: ConfigClass, load_latency: int, mma_latency: int, max_rounds: int = 5000) -> Schedule:
    """Every thread moves as soon as it can; loads land `load_latency` rounds after issue, wgmma complete
    `mma_latency` rounds after they form. Deterministic: classes in order, the first outcome of a choice."""
    points = compute_points(model)
    config = cclass.representative
    s = model.initial()
    issued: dict[tuple, list[int]] = {}
    formed: dict[tuple[int, int], int] = {}
    rounds: list[Round] = []
    columns: list[str] = []
    ended = "limit"
    loaded: set[int] = set()
    first_refill = last_load = 0
    best = 0
    r = 0
    while r < max_rounds:
        r += 1
        if s.halted is not None:
            ended = "fault"
            break
        succ = model.successors(s)
        if not succ:
            done = all(model.code[c][pc].op is END for c, groups in enumerate(s.locs) for (pc, _), _ in groups)
            ended = "done" if done else "blocked"
            break
        movers: list[tuple] = []
        seen: set = set()
        for a, _, _ in succ:
            if a[0] == "t":
                ident = ("t", a[1], s.locs[a[1]][a[2]][0])
                if ident not in seen:
                    seen.add(ident)
                    movers.append(ident)
            elif a[0] == "l":
                entry = s.flight[a[1]]
                if issued.get(entry) and issued[entry][0] + load_latency <= r and ("l", entry) not in seen:
                    seen.add(("l", entry))
                    movers.append(("l", entry))
            elif a[0] == "m":
                seq = s.mmas[a[1]][2][0][0]
                if formed.get((a[1], seq), 0) + mma_latency <= r:
                    movers.append(("m", a[1]))
            else:
                movers.append((a[0], a[1]))  # store steps, commit arrivals, CTA exits
        rnd = Round(r)
        for ident in movers:
            action = _find(model, s, ident)
            if action is None:
                continue  # another move this round disabled it (rare: a phase flipped twice)
            if action[0] == "t":
                c, gi = action[1], action[2]
                text, site = describe_thread_step(model, s, c, gi, config)
                cl = model.classes[c]
                column = cl.unit
                text = f"{cl.who}: {text}" if cl.who else text
                (pc, env), _ = s.locs[c][gi]
                ins = model.code[c][pc]
                if ins.op is TMA_LOAD:
                    buf = ins.a(env, cl.cta)
                    if buf in loaded and not first_refill:
                        first_refill = r
                    loaded.add(buf)
                    last_load = r
            elif action[0] == "l":
                buf, tag, nbytes, bar, site, *_ = ident[1]
                column, text = ASYNC, f"{model.layout.buf_names[buf]} tile {tag} lands"
                issued[ident[1]].pop(0)
            elif action[0] == "m":
                column, text, site = ASYNC, f"wgmma of {model.classes[s.mmas[action[1]][2][0][3]].unit} completes", -1
            elif action[0] == "s":
                column, text, site = ASYNC, "a TMA store advances", -1
            elif action[0] == "k":
                column, text, site = ASYNC, "a commit arrives", -1
            else:
                column, text, site = ASYNC, f"CTA {action[1]} exits", -1
            before = s
            s, _ = model.step(s, action)
            for entry in s.flight:
                n_before = sum(1 for e in before.flight if e == entry)
                n_after = sum(1 for e in s.flight if e == entry)
                while len(issued.setdefault(entry, [])) < n_after and n_after > n_before:
                    issued[entry].append(r)
                    n_before += 1
            for u, (_, _, inflight) in enumerate(s.mmas):
                for seq, *_ in inflight:
                    formed.setdefault((u, seq), r)
            if column not in columns:
                columns.append(column)
            rnd.events.append((column, text, site))
        rnd.computing, rnd.in_flight = _metrics(model, points, s)
        if rnd.computing:
            best = max(best, rnd.in_flight)
        if rnd.events:
            rounds.append(rnd)
    for cl in model.classes:
        if cl.unit not in columns:
            columns.append(cl.unit)
    if ASYNC in columns:
        columns.remove(ASYNC)
        columns.append(ASYNC)
    end = rounds[-1].index if rounds else 0
    if first_refill:
        pro, steady, epi = (1, first_refill - 1), (first_refill, last_load), (last_load + 1, end)
    else:
        pro, steady, epi = (1, last_load), (0, -1), (last_load + 1, end)
    loads = sum(1 for rd in rounds if steady[0] <= rd.index <= steady[1]
                for col, text, _ in rd.events if "tma_load" in text)
    return Schedule(rounds, columns, pro, steady, epi, loads, ended, best)


def _find(model: Model, s: State, ident: tuple):
    kind = ident[0]
    if kind == "t":
        c, loc = ident[1], ident[2]
        for gi, (l2, _) in enumerate(s.locs[c]):
            if l2 == loc:
                for a, _, _ in model.successors(s):
                    if a[0] == "t" and a[1] == c and a[2] == gi:
                        return a
        return None
    if kind == "l":  # in flight is not enough: a fault earlier in the round halts the kernel, landings too
        if ident[1] in s.flight:
            action = ("l", s.flight.index(ident[1]))
            return action if any(a == action for a, _, _ in model.successors(s)) else None
        return None
    for a, _, _ in model.successors(s):
        if a[0] == kind and a[1] == ident[1]:
            return a
    return None


# ---------------------------------------------------------------- the pipeline for one spec


def find_ring(model: Model) -> Ring | None:
    """The ring that indexes the barriers TMA loads complete on, with its declaration."""
    for cl in model.classes:
        for ins in cl.program.instrs:
            if ins.op != TMA_LOAD:
                continue
            ring = _ring_in(ins.args[3].indices)
            if ring is None:
                continue
            decl = next((i for i in cl.program.instrs if i.op == RING and i.args[0] == ring.slot), None)
            span = model.sites[decl.site].span if decl is not None and 0 <= decl.site < len(model.sites) else None
            return Ring(ring.name, ring.stages, span)
    return None


def _ring_in(exprs) -> RRing | None:
    from ..model.ir import ROp
    for e in exprs:
        if isinstance(e, RRing) and e.attr == "index":
            return e
        if isinstance(e, ROp):
            found = _ring_in(e.args)
            if found is not None:
                return found
    return None


def timeline_file(path: str, overrides: dict[str, int], elect: str = "lowest", load_latency: int = 4,
                  mma_latency: int = 2, max_states: int = 200_000, timeout: float | None = None) -> TimelineResult:
    from ..pipeline.ptx import is_kernel_file, verify_ptx
    from ..pipeline.result import Options
    sources: dict[str, str] = {}
    if is_kernel_file(path):  # a compiled kernel: read, evaluated at its parameters and lowered, not searched
        res = verify_ptx(path, Options(overrides=tuple(overrides.items()), elect=elect, explore=False))
        kernel, sites, sources = res.kernel, res.sites, res.sources
        codes = None
    else:
        kernel = load_checked(path, overrides, sources)
        codes, sites = resolve_roles(kernel, sources)

    def fail(exc: EvalError):
        return error("value", str(exc), sites[exc.site].span if 0 <= exc.site < len(sites) else None)

    try:
        if codes is None:
            cclasses, esites = res.config_classes, res.esites  # type: ignore[attr-defined]
        else:
            cclasses = config_classes(kernel, codes, elect)
            esites = elect_sites(codes, sites)
        everything = [cfg for cc in cclasses for cfg in cc.members]
        first = cclasses[0]
        model = Model(kernel, first.classes, sites)
        schedule = asap(model, first, load_latency, mma_latency)
        best = Overlap(0, 0, True, None, 0)
        for cc in cclasses:
            m = model if cc is first else Model(kernel, cc.classes, sites)
            o = overlap(m, max_states, timeout)
            best = Overlap(max(best.max_in_flight, o.max_in_flight), best.states + o.states,
                           best.complete and o.complete, best.stopped or o.stopped,
                           best.compute_states + o.compute_states)
    except EvalError as exc:
        raise fail(exc) from None
    condition = describe(first.members, everything, esites) if len(cclasses) > 1 else ""
    return TimelineResult(path, kernel.name, {p.name: p.value for p in kernel.params}, condition, find_ring(model),
                          schedule, best, load_latency, mma_latency, sources)


# ---------------------------------------------------------------- rendering


def _span_text(rng: tuple[int, int]) -> str:
    return "none" if rng[1] < rng[0] else f"rounds {rng[0]}-{rng[1]}" if rng[1] > rng[0] else f"round {rng[0]}"


def overlap_text(t: TimelineResult) -> str:
    o = t.overlap
    depth = f" (ring '{t.ring.name}', {t.ring.stages} stages)" if t.ring else " (no ring of stages found)"
    how = (f"over all {o.states} reachable states, without reduction" if o.complete else
           f"over the first {o.states} reachable states (stopped by {o.stopped}; a lower bound)")
    best = max(o.max_in_flight, t.schedule.max_overlap)
    if o.compute_states == 0 and t.schedule.max_overlap == 0:
        return f"overlap: no reachable state has a consumer computing{depth}; nothing to overlap ({how})"
    return f"overlap: at most {best} other stage(s) with a TMA load in flight while a consumer computes{depth}, {how}"


def render_timeline(t: TimelineResult, width: int = 30) -> str:
    params = ", ".join(f"{k}={v}" for k, v in t.params.items())
    head = f"{t.spec}: kernel {t.kernel_name}" + (f" ({params})" if params else "")
    sch = t.schedule
    out = [f"{head}: as-soon-as-possible schedule, TMA loads land {t.load_latency} rounds after issue, wgmma complete "
           f"{t.mma_latency} rounds after they form" + (f"; configuration: {t.condition}" if t.condition else "")]
    for name, rng in (("prologue", sch.prologue), ("steady state", sch.steady), ("epilogue", sch.epilogue)):
        rounds = [rd for rd in sch.rounds if rng[0] <= rd.index <= rng[1]]
        extra = ""
        if name == "steady state" and rounds and sch.loads_in_steady:
            extra = f"; {sch.loads_in_steady} loads issued, one every {(rng[1] - rng[0] + 1) / sch.loads_in_steady:.1f} rounds"
        out.append("")
        out.append(f"{name} ({_span_text(rng)}{extra})")
        if not rounds:
            continue
        cols = sch.columns
        out.append(f"  round | {' | '.join(c[:width].ljust(width) for c in cols)} | in flight")
        for rd in rounds:
            cells = []
            for c in cols:
                texts = [text for col, text, _ in rd.events if col == c]
                cells.append("; ".join(texts))
            lines_needed = max(1, *(len(_wrap(x, width)) for x in cells))
            wrapped = [_wrap(x, width) for x in cells]
            for k in range(lines_needed):
                label = f"{rd.index:>5}" if k == 0 else "     "
                row = " | ".join((w[k] if k < len(w) else "").ljust(width) for w in wrapped)
                flight = (f"{rd.in_flight}" + (" (computing)" if rd.computing else "")) if k == 0 else ""
                out.append(f"  {label} | {row} | {flight}".rstrip())
    out.append("")
    if sch.ended == "blocked":
        out.append("the schedule ends with threads blocked (run `pipecheck verify` for the finding)")
    elif sch.ended == "fault":
        out.append("the schedule ends in a fault (run `pipecheck verify` for the finding)")
    out.append(overlap_text(t))
    w = t.warning
    if w is not None:
        out.append(render(w, t.sources))
    elif t.exit_code == 3:
        out.append("inconclusive: no overlap seen, but the search stopped before it covered every state "
                   "(raise --max-states)")
    return "\n".join(out) + "\n"


def _wrap(text: str, width: int) -> list[str]:
    import textwrap
    return textwrap.wrap(text, width) or [""]


def to_dict(t: TimelineResult) -> dict:
    sch = t.schedule
    w = t.warning
    return {
        "schema": SCHEMA, "spec": t.spec, "kernel": t.kernel_name, "params": t.params,
        "configuration": t.condition or None,
        "latency": {"tma_load": t.load_latency, "wgmma": t.mma_latency},
        "ring": None if t.ring is None else {"name": t.ring.name, "stages": t.ring.stages},
        "schedule": {
            "ended": sch.ended, "prologue": list(sch.prologue), "steady": list(sch.steady),
            "epilogue": list(sch.epilogue), "loads_in_steady": sch.loads_in_steady,
            "rounds": [{"round": rd.index, "in_flight": rd.in_flight, "computing": rd.computing,
                        "events": [{"role": c, "action": x} for c, x, _ in rd.events]} for rd in sch.rounds],
        },
        "overlap": {"max_in_flight": max(t.overlap.max_in_flight, sch.max_overlap), "states": t.overlap.states,
                    "complete": t.overlap.complete, "stopped": t.overlap.stopped,
                    "compute_states": t.overlap.compute_states},
        "warnings": [] if w is None else [{"code": w.code, "message": w.message,
                                           "line": w.span.line if w.span else None}],
        "exit_code": t.exit_code,
    }
