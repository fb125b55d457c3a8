"""Hardware outcomes of replayed configurations, and the rules that say whether one agrees
with pipecheck's verdict for the same configuration (docs/replay.md, "Agreement rules").
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

SCHEMA = "pipecheck-replay-outcome/1"
KINDS = ("completed", "hung", "wrong_data", "faulted")

# What each finding can look like on hardware.
CODE_KIND: Mapping[str, str] = {
    "hang": "hung", "expect-tx-mismatch": "hung",
    "arrive-fault": "faulted", "tx-range": "faulted",
    "stale-read": "wrong_data", "overwrite": "wrong_data", "store-reuse": "wrong_data",
    "missing-proxy-fence": "wrong_data",
}
# A protocol slip whose effect depends on the schedule: an early phase, a waiter that passes wrongly.
PROTOCOL_CODES: Mapping[str, tuple[str, ...]] = {
    "double-arrive": ("hung", "wrong_data"), "phase-alias": ("hung", "wrong_data"),
}
# Undefined behaviour (SEMANTICS 1, 4): any outcome is consistent with the model.
UNDEFINED_CODES = frozenset({"exit-inflight", "uninit-barrier", "missing-init-fence", "missing-tcgen05-fence",
                             "tmem-free-inflight"})
# Static findings with no run-time effect in the replay (descriptors are replayed as 1-D copies).
STATIC_CODES = frozenset({"tma-descriptor", "smem-budget", "no-overlap"})
# Kinds that, when every execution of the model shows one, every run must show.
DETERMINISTIC = frozenset({"hung", "faulted"})


def run_kinds(outcome: Mapping) -> frozenset[str]:
    """The kinds of behaviour one run showed ('invalid' when the replay did not run the configuration)."""
    if outcome.get("outcome") == "invalid":
        return frozenset({"invalid"})
    kinds = set()
    if outcome.get("fault"):
        kinds.add("faulted")
    if outcome.get("hangs") or outcome.get("watchdog"):
        kinds.add("hung")
    if outcome.get("wrong_data") or outcome.get("store_wrong_data"):
        kinds.add("wrong_data")
    return frozenset(kinds or {"completed"})


def ptx_run_kinds(outcome: Mapping) -> frozenset[str]:
    """The kinds of one run of a real kernel (benchmarks/hw/cutlass_gemm_harness.cu). The harness checks
    D after every run; after a hang the threads that timed out gave up without storing their tiles, so
    a wrong D there is the give-up's consequence, not an observation (the run is `hung`)."""
    kinds = run_kinds(outcome)
    return kinds - {"wrong_data"} if "hung" in kinds else kinds


def run_events(outcome: Mapping) -> list[tuple[str, float | None]]:
    """(kind, microseconds from the run's start) of each record of a run. A fault or a watchdog
    ends the run, so it comes after every record (inf); a store checked by the host after the
    kernel, or a record printed without a time, has None (its time is unknown)."""
    out: list[tuple[str, float | None]] = []
    for h in outcome.get("hangs") or ():
        out.append(("hung", h.get("t_us")))
    for w in outcome.get("wrong_data") or ():
        out.append(("wrong_data", w.get("t_us")))
    for _ in outcome.get("store_wrong_data") or ():
        out.append(("wrong_data", None))
    if outcome.get("watchdog"):
        out.append(("hung", float("inf")))
    if outcome.get("fault"):
        out.append(("faulted", float("inf")))
    return out


def kinds_up_to_first_finding(outcome: Mapping, findings: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(kinds a run showed up to its first event of a kind in `findings`, kinds it showed only after).

    pipecheck does not explore past a transition that raised a finding (explore.Limits.past_findings
    is off), so what a run shows after the first event the verdict predicts is a consequence the
    model does not follow:
    a stale read that lets the consumers run two phases ahead (a later hang), or the kernel
    faulting on a copy still in flight after it. A kind with an unknown time is never a
    consequence; without a timed event of a predicted kind nothing is one."""
    kinds = run_kinds(outcome)
    if "invalid" in kinds:
        return kinds, frozenset()
    events = run_events(outcome)
    times = [t for k, t in events if k in findings and t is not None]
    if not times:
        return kinds, frozenset()
    first = min(times)
    before = {k for k, t in events if t is None or t <= first}
    return frozenset(before), frozenset({k for k, _ in events} - before)


def parse_outcomes(text: str) -> list[dict]:
    """The JSON lines a replay program printed (other lines are ignored)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if obj.get("schema") == SCHEMA:
            out.append(obj)
    return out


def config_key(config: Mapping) -> str:
    """A configuration as a person writes it: `K_TILES=8 STAGES=4 elect=3 has_work=1`."""
    parts = [f"{k}={v}" for k, v in sorted(config.get("params", {}).items())]
    lane = config.get("elect_lane")
    parts.append(f"elect={'lowest' if lane is None else lane}")
    parts += [f"{k}={','.join(str(x) for x in v)}" for k, v in sorted(config.get("choices", {}).items())]
    return " ".join(parts)


@dataclass(frozen=True)
class ModelVerdict:
    codes: tuple[str, ...]  # the distinct finding codes pipecheck reports for the configuration
    may_complete: bool  # some execution finishes with no hang and no fault


@dataclass(frozen=True)
class Expectation:
    may: frozenset[str]  # kinds a run may show
    must: frozenset[str]  # every run shows one of these (empty: no constraint)
    undefined: bool  # undefined behaviour: anything goes


def expectation(verdict: ModelVerdict) -> Expectation:
    may: set[str] = set()
    undefined = False
    for code in verdict.codes:
        if code in CODE_KIND:
            may.add(CODE_KIND[code])
        elif code in PROTOCOL_CODES:
            may.update(PROTOCOL_CODES[code])
        elif code in UNDEFINED_CODES:
            undefined = True
    if verdict.may_complete or not may:
        may.add("completed")
    must = frozenset(k for k in may if k in DETERMINISTIC) if not verdict.may_complete else frozenset()
    return Expectation(frozenset(may), must, undefined)


@dataclass(frozen=True)
class Judgement:
    status: str  # agree | not-observed | undefined | explained | disagree | invalid
    reason: str

    @property
    def ok(self) -> bool:
        return self.status not in ("disagree", "invalid")


def judge(verdict: ModelVerdict, runs: Sequence[frozenset[str]], explained: str | None = None) -> Judgement:
    """Compare one configuration's verdict with the kinds its hardware runs showed."""
    if not runs:
        return Judgement("invalid", "no hardware run recorded")
    if any("invalid" in r for r in runs):
        return Judgement("invalid", "the replay did not run this configuration (the forced election did not hold)")
    exp = expectation(verdict)
    if exp.undefined:
        return Judgement("undefined", "pipecheck reports undefined behaviour ("
                         + ", ".join(c for c in verdict.codes if c in UNDEFINED_CODES) + "): any outcome agrees")
    problems = []
    for i, kinds in enumerate(runs):
        extra = sorted(kinds - exp.may)
        if extra:
            problems.append(f"run {i} showed {', '.join(extra)}, which pipecheck's verdict "
                            f"({', '.join(verdict.codes) or 'verified'}) does not allow")
        if exp.must and not kinds & exp.must:
            problems.append(f"run {i} showed {', '.join(sorted(kinds))}, but every execution of the model "
                            f"ends {' or '.join(sorted(exp.must))}")
    if problems:
        if explained:
            return Judgement("explained", explained)
        return Judgement("disagree", "; ".join(problems))
    seen = set().union(*runs)
    missing = sorted(exp.may - seen - {"completed"})
    if missing:
        return Judgement("not-observed", f"{', '.join(missing)} possible in the model, not seen in {len(runs)} runs")
    return Judgement("agree", f"{', '.join(sorted(seen))} in all {len(runs)} runs" if len(seen) == 1
                     else f"{', '.join(sorted(seen))} across {len(runs)} runs")


# ---------------------------------------------------------------- explained differences


def explained_differences(markdown: str) -> dict[tuple[str, str], str]:
    """(spec, configuration) -> explanation, from the table under "Explained differences" in docs/semantics.md.

    A row reads `| spec | configuration | pipecheck | hardware | explanation |`; configuration `*`
    stands for every configuration of the spec.
    """
    out: dict[tuple[str, str], str] = {}
    in_section = False
    for line in markdown.splitlines():
        if line.startswith("#"):
            in_section = "explained differences" in line.lower()
            continue
        if not in_section or not line.startswith("|"):
            continue
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or cells[0] in ("spec", "") or re.fullmatch(r"-+", cells[0].replace(":", "")):
            continue
        out[(cells[0], cells[1])] = cells[4]
    return out


def explanation_for(table: Mapping[tuple[str, str], str], spec: str, key: str) -> str | None:
    return table.get((spec, key)) or table.get((spec, "*"))


# ---------------------------------------------------------------- pipecheck's side


def model_verdict(spec: str, config: Mapping, max_states: int = 500_000) -> ModelVerdict:
    """pipecheck's verdict for exactly this configuration: its finding codes, and whether any
    execution completes (a clean terminal state is reachable)."""
    from ..search.explore import Limits
    from ..lang.lower import resolve_roles
    from ..model.threads import Config, lowest_lane
    from ..pipeline.verify import load_checked, verify_file
    from ..pipeline.result import Options

    params = tuple(sorted((k, int(v)) for k, v in config.get("params", {}).items()))
    sources: dict[str, str] = {}
    kernel = load_checked(spec, dict(params), sources)
    codes, _ = resolve_roles(kernel, sources)
    masks = sorted({m for c in codes for m in c.elect_masks})
    lane = config.get("elect_lane")
    elect = tuple((m, lowest_lane(m) if lane is None else int(lane)) for m in masks)
    kchoices = {c.name for c in kernel.kchooses}
    choices = tuple((n, tuple(v)) for n, v in config.get("choices", {}).items() if n in kchoices)
    cfg = Config(elect, tuple(sorted(choices, key=lambda c: [k.name for k in kernel.kchooses].index(c[0]))))
    # every distinct finding (not only the first); which need lanes to run apart does not matter here
    result = verify_file(spec, Options(overrides=params, only=(cfg,), check_scheduling=False,
                                       limits=Limits(max_states=2_000_000, stop_at_first=False)))
    found = tuple(dict.fromkeys(i.code for i in result.all_issues))
    static = tuple(dict.fromkeys(d.code for d in result.static))
    runs = [r for r in result.runs if cfg in r.cclass.members]
    may = any(_may_complete(r.system if r.system is not None else r.model, max_states) for r in runs) if runs else True
    return ModelVerdict(tuple(dict.fromkeys(found + static)), may)


def launch_for_row(root: Path, row: dict, out_dir: Path) -> Path:
    """A recorded real-kernel configuration (tests/hw/h200.json "ptx") as a launch record to verify: its
    family's captured launch (tests/hw/ptx/launch-FAMILY.json: shape and parameter bytes) with the
    configuration's own corpus PTX as the module."""
    rec_dir = root / "tests/hw/ptx"
    rec = json.loads((rec_dir / f"launch-{row['family']}.json").read_text())
    rec["image"] = str(root / "tests/data/ptx" / f"{row['corpus']}.ptx")
    rec["params"] = str(rec_dir / f"launch-{row['family']}.params")
    out = out_dir / f"launch-{row['name']}.json"
    out.write_text(json.dumps(rec))
    return out


def ptx_model_verdict(kernel: str, elect_lane: int | None, max_states: int = 500_000,
                      complete: bool = True) -> tuple[ModelVerdict, list]:
    """pipecheck's verdict for a compiled kernel (a .ptx, or a captured launch) with every elect.sync
    electing `elect_lane` (None: the lowest lane, the H200's choice), and the barrier waits its hang
    counterexamples block in, as (barrier offset, parity) pairs. `complete`: every distinct finding of the
    whole state space; otherwise the default run's (the first finding and what follows it within the cause
    budget), a subset of them."""
    from ..search.explore import Limits
    from ..pipeline.verify import verify_file
    from ..pipeline.result import Options

    elect = "lowest" if elect_lane is None else str(elect_lane)
    result = verify_file(kernel, Options(elect=elect, check_scheduling=False,
                                         limits=Limits(max_states=2_000_000, stop_at_first=not complete)))
    codes = tuple(dict.fromkeys(i.code for i in result.all_issues))
    from ..search.footprints import Footprints
    from ..search.por import Reduced
    # the reduction keeps every terminal state (stubborn sets preserve deadlocks, docs/performance.md), so a
    # completing execution exists in the reduced graph exactly when it exists at all
    may = any(_may_complete(Reduced(r.system if r.system is not None else r.model, Footprints(r.model)), max_states)
              for r in result.runs) if result.runs else True
    blocked = []
    names = {n: off for n, off in zip(result.kernel.barriers[0].labels, getattr(result.kernel, "bar_offsets", ()))}
    wait = re.compile(r"(%s) parity (\d)" % "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))
    for issue in result.all_issues:
        if issue.code == "hang" and names:
            blocked += [(names[m.group(1)], int(m.group(2))) for m in wait.finditer(issue.finding.message)]
    return ModelVerdict(codes, may), sorted(set(blocked))


def _may_complete(system, max_states: int) -> bool:
    """Depth-first (a completing execution, when there is one, is found at once): is a terminal
    state with every thread finished, no hang and no fault reachable?

    Transitions that fault are not followed. Past `max_states` the answer is True (lenient: the
    agreement rules then ask nothing of every run)."""
    start = system.initial()
    seen = {start}
    todo: list = [start]
    while todo:
        s = todo.pop()
        succ = system.successors(s)
        if not succ:
            if getattr(s, "halted", None) is None and not system.terminal_findings(s):
                return True
            continue
        # clean steps last onto the stack, so they are tried first: a completing execution is
        # usually reached without wandering through the fallout of a finding
        for _action, t, findings in sorted(succ, key=lambda a: not a[2]):
            if any(CODE_KIND.get(getattr(f, "code", "")) == "faulted" for f in findings):
                continue
            if t not in seen:
                if len(seen) >= max_states:
                    return True
                seen.add(t)
                todo.append(t)
    return False


# ---------------------------------------------------------------- a recorded hardware file


@dataclass(frozen=True)
class Recorded:
    spec: str
    config: dict
    runs: tuple[dict, ...]

    @property
    def key(self) -> str:
        return config_key(self.config)


def load_recorded(path: Path) -> tuple[dict, list[Recorded]]:
    """tests/hw/h200.json: (machine description, recorded configurations)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    recs = [Recorded(c["spec"], c["config"], tuple(c.get("runs", ()))) for c in data.get("configurations", [])]
    return data.get("machine", {}), recs


def judge_recorded(rec: Recorded, verdict: ModelVerdict, table: Mapping[tuple[str, str], str]) -> Judgement:
    if any(r.get("build_error") for r in rec.runs) or not rec.runs:
        return Judgement("invalid", "the program did not build or run: " + str(rec.runs[0].get("build_error", "")
                                                                              if rec.runs else "no runs"))
    may = expectation(verdict).may
    split = [kinds_up_to_first_finding(r, frozenset(may - {"completed"})) for r in rec.runs]
    # a kind the verdict allows is compared wherever it showed; one it does not allow only up to
    # the run's first predicted finding
    kept = [before | (after & may) for before, after in split]
    j = judge(verdict, kept, explanation_for(table, rec.spec, rec.key))
    later = [f"run {i}: {', '.join(sorted(after - may))}" for i, (_, after) in enumerate(split) if after - may]
    if later:
        j = Judgement(j.status, f"{j.reason}; after the first finding (not followed by the model): {'; '.join(later)}")
    return j


def summarize(judgements: Iterable[tuple[Recorded, Judgement]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, j in judgements:
        out[j.status] = out.get(j.status, 0) + 1
    return out
