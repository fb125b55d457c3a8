"""What every report says about an issue: where, when, why, and the schedule that shows it."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.diagnostics import Note, Span, call_site, called_from
from ..core.words import ranges
from ..pipeline.configurations import elect_call
from ..model.threads import Config
from ..pipeline.result import Issue, Result
from ..model.ir import ARRIVE, FENCE_INIT, INIT, MMA, READ, TMA_LOAD, TMA_STORE, WAIT, WRITE
from .trace import ASYNC, Trace, barrier_line, barrier_short, blocked_rows, build, involved_barriers
from .waitfor import explain_hang


@dataclass
class IssueView:
    issue: Issue
    span: Span | None
    trace: Trace
    why: str
    when: str
    barriers: list[str]
    config_text: str
    # inside procedures: `span` is the user's call, and these notes lead down to the statement (core.call_site)
    chain: tuple[Note, ...] = ()


@dataclass(frozen=True)
class Row:
    """One row of a counterexample timeline, in the form every report draws it."""

    label: str  # the step number, or "end" for a thread still blocked when the trace stops
    line: int  # the spec line of the statement (0: none, e.g. a CTA exit)
    column: str  # the role instance (or trace.ASYNC)
    cell: str  # what happened, without the line
    barriers: tuple[str, ...]  # the barriers the step touched, as they are after it
    failing: bool  # the step that raised the finding, or a thread blocked forever at a hang


_WARP_MEET = ("coll:syncwarp", "coll:elect", "fence_init")


def _same_run(a, b) -> bool:
    return b.column == a.column and b.who == a.who and b.kind == a.kind and not b.effects and not a.effects \
        and not a.kind.startswith("coll")


def timeline_rows(result: Result, v: IssueView) -> list[Row]:
    """The trace as rows: one per step, then one per thread class still blocked at a hang."""
    model = v.issue.run.model
    trace = v.trace
    sites = result.sites
    failing = trace.failing_step()
    rows = []
    fold = getattr(result, "ptx", None) is not None
    steps = trace.steps
    k = 0
    if fold:
        setup = setup_row(model, trace, sites)
        if setup is not None:
            rows.append(setup[0])
            k = setup[1]
    while k < len(steps):
        st = steps[k]
        if fold:  # warps meeting at syncwarp / elect.sync and fencing their inits: one row per run
            j = k
            while j + 1 < len(steps) and st.kind in _WARP_MEET and steps[j + 1].kind in _WARP_MEET \
                    and steps[j + 1].column == st.column and not steps[j].findings and not steps[j + 1].findings:
                j += 1
            if j > k:
                counts: dict[str, int] = {}
                whos: list[str] = []
                for x in steps[k:j + 1]:
                    t = x.text.split(" (PTX line")[0]
                    counts[t] = counts.get(t, 0) + 1
                    if x.who not in whos:
                        whos.append(x.who)
                cell = f"{', '.join(w for w in whos if w) or 'all'}: " + ", ".join(
                    f"{n} x {t}" if n > 1 else t for t, n in counts.items())
                line = sites[st.site].span.line if 0 <= st.site < len(sites) else 0
                rows.append(Row(f"{st.index}-{steps[j].index}", line, st.column, cell, (), False))
                k = j + 1
                continue
            j = k  # one thread class running several steps of one kind (inits, arrivals): one row
            while j + 1 < len(steps) and _same_run(st, steps[j + 1]):
                j += 1
            if j - k >= 2 and not any(x.findings for x in steps[k:j + 1]):
                last = steps[j]
                line = sites[st.site].span.line if 0 <= st.site < len(sites) else 0
                cell = f"{st.who + ': ' if st.who else ''}{st.text} ... {last.text} ({j - k + 1} steps)"
                after = trace.states[last.index - 1]
                touched = sorted({g for x in steps[k:j + 1] for g in x.touched})
                touched = touched if len(touched) <= 2 else []  # (a dozen inits: the table at the end has them)
                rows.append(Row(f"{st.index}-{last.index}", line, st.column, cell,
                                tuple(barrier_short(model, after, g) for g in touched), False))
                k = j + 1
                continue
        k += 1
        line = sites[st.site].span.line if 0 <= st.site < len(sites) else 0
        cell = f"{st.who}: {st.text}" if st.who else st.text
        if st.effects:
            cell += " => " + "; ".join(st.effects)
        for f in st.findings:
            cell += f"  <-- {f.code}"
        after = trace.states[st.index - 1]
        rows.append(Row(str(st.index), line, st.column, cell,
                        tuple(barrier_short(model, after, g) for g in st.touched), st.index == failing))
    if v.issue.code == "hang":
        for column, who, what, site in blocked_rows(model, trace.final):
            line = sites[site].span.line if 0 <= site < len(sites) else 0
            rows.append(Row("end", line, column, f"{who + ': ' if who else ''}{what}", (), True))
    return rows


_SETUP = (INIT, FENCE_INIT)
SPAN = ""  # the column of a row that spans every role's column (the kernel's set-up)


def setup_row(model, trace: Trace, sites) -> tuple[Row, int] | None:
    """A compiled kernel's set-up as one row: the steps before the protocol starts (barrier inits, their
    fence, warps meeting at syncwarp / elect.sync / a CTA barrier), up to the last CTA-wide meeting among
    them, with the barriers it initialised and the lanes elect.sync chose. None when that is under 6 steps
    or a finding is raised in it. Returns the row and the number of steps it covers."""
    steps = trace.steps
    end = 0
    for k, st in enumerate(steps):
        if st.findings or st.column == ASYNC or not (st.kind in _SETUP or st.kind.startswith("coll")):
            break
        if any(e == "everyone arrived: released" for e in st.effects):
            end = k + 1
    if end < 6:
        return None
    inits = [st for st in steps[:end] if st.kind == INIT]
    after = trace.states[end - 1]
    counts: dict[int, list[str]] = {}
    for st in sorted(inits, key=lambda x: x.barrier):
        b = after.bars[st.barrier] if 0 <= st.barrier < len(after.bars) else None
        if b is not None:
            counts.setdefault(b.expected, []).append(model.layout.bar_names[st.barrier])
    parts = []
    if inits:
        by_count = "; ".join(f"count {n}: {_names(names)}" for n, names in counts.items())
        parts.append(f"{len(inits)} barrier{'s' if len(inits) != 1 else ''} initialised ({by_count})")
    elected = sorted({st.text for st in steps[:end] if st.kind == "coll:elect"})
    if elected:
        parts.append(", ".join(elected))
    others = []
    for st in steps[:end - 1]:
        t = st.text.split(" (PTX line")[0]
        if st.kind not in (INIT, "coll:elect") and t not in others:
            others.append(t)
    if others:
        parts.append("then " + ", ".join(others))
    last = steps[end - 1]
    cell = "set-up: " + "; ".join(parts) + f"; {last.text.split(' (PTX line')[0]}: every thread met"
    line = sites[last.site].span.line if 0 <= last.site < len(sites) else 0
    return Row(f"{steps[0].index}-{last.index}", line, SPAN, cell, (), False), end


def _names(names: list[str]) -> str:
    """`mainloop_pipeline.full_barriers[0..5]`: an array's consecutive elements as one range."""
    out: list[list] = []
    for n in names:
        base, _, idx = n.rpartition("[")
        if idx.endswith("]") and idx[:-1].isdigit() and out and out[-1][0] == base and out[-1][2] + 1 == int(idx[:-1]):
            out[-1][2] += 1
            continue
        if idx.endswith("]") and idx[:-1].isdigit():
            out.append([base, int(idx[:-1]), int(idx[:-1])])
        else:
            out.append([n, None, None])
    return ", ".join(b if lo is None else f"{b}[{lo}]" if lo == hi else f"{b}[{lo}..{hi}]" for b, lo, hi in out)


def ptx_parameters(result: Result) -> list[tuple]:
    """A compiled kernel's parameters as (parameter, its default's `Choice` or None, point): the point is
    `set` (-D), `launch` (the bytes of a captured launch), `loops-once` (the run that reported ran each loop
    once) or `default`."""
    ptx = getattr(result, "ptx", None)
    if ptx is None:
        return []
    why = {f"param_{c.offset}": c for c in ptx.choices}
    captured = getattr(ptx, "captured", ())
    swept = dict(getattr(ptx, "swept", ()))
    return [(p, why.get(p.name), "swept" if p.name in swept else "set" if p.name in ptx.overrides else
             "launch" if p.name in captured else "loops-once" if p.name in ptx.smallest else "default")
            for p in result.kernel.params]


def parameter_lines(result: Result) -> list[str]:
    """A compiled kernel's parameters: the value each has, why (a default that runs a loop, or -D) and the
    CUDA line that reads it."""
    out = []
    quiet: list[str] = []  # values of a captured launch that the protocol does not read
    for p, c, point in ptx_parameters(result):
        if point == "launch" and not getattr(p, "steers", True):
            quiet.append(f"{p.name}={p.value}")
            continue
        if point == "swept":
            vals = dict(result.ptx.swept)[p.name]
            shown = ", ".join(map(str, vals)) if len(vals) <= 4 else f"{vals[0]}, {vals[1]}, ..., {vals[-1]}"
            step = f" in steps of {vals[2] - vals[1]}" if len(vals) > 3 and vals[2] - vals[1] == vals[-2] - vals[-3] else ""
            reason = f"swept over {len(vals)} values ({shown}{step}) by --all-params" + (f"; {c.why}" if c else "")
            out.append(f"  {p.name}: {reason}" + (f"; read at {p.source}" if p.source else ""))
            continue
        if point == "set":
            reason = "set with -D"
        elif point == "launch":
            reason = f"from the captured launch {result.ptx.launch}"
        elif point == "loops-once" and c is not None:
            reason = (f"its loop once, tried before the default {c.value} ({c.why}), which runs when this "
                      "point verifies")
        else:
            reason = (c.why if c is not None else "") or "default"
        source = f"; read at {p.source}" if p.source else ""
        out.append(f"  {p.name} = {p.value}: {reason}{source}")
    if quiet:
        shown = ", ".join(quiet[:6]) + (f" and {len(quiet) - 6} more" if len(quiet) > 6 else "")
        out.append(f"  from the captured launch too, read by no barrier, buffer or loop of the protocol: {shown}")
    return ["parameters:"] + out if out else []


_WORK = ((TMA_LOAD, "TMA loads"), (MMA, "MMAs"), (READ, "reads"), (TMA_STORE, "TMA stores"), (WRITE, "writes"),
         (ARRIVE, "arrives"), (WAIT, "waits"))


def role_lines(result: Result) -> list[str]:
    """A compiled kernel's roles as the code computes them: per warpgroup, what each of its warps does (TMA
    loads, MMAs, stores, barrier traffic) and which of its threads do it, in the configuration of the first
    finding (or the first one explored)."""
    if getattr(result, "ptx", None) is None or not result.runs:
        return []
    run = result.issues[0].run if result.issues else result.runs[0]
    model = run.model
    out = []
    for wg, role in enumerate(getattr(result.kernel, "roles", ())):
        warps: dict[int, list] = {}
        for cl in model.classes:
            if cl.role != wg or cl.cta != 0:
                continue
            ops = {ins.op for ins in cl.program.instrs}
            for t in cl.members:
                warps.setdefault(t // 32, []).append((t, ops))
        if not warps:
            continue
        parts = []
        for w in sorted(warps):
            threads = warps[w]
            doing = []
            for op, word in _WORK:
                who = sorted(t for t, ops in threads if op in ops)
                if who:
                    doing.append(word + ("" if len(who) == len(threads) else f" ({_threads_text(who, 128 * wg)})"))
            parts.append((w, ", ".join(doing) or "no barrier or buffer work"))
        merged: list[list] = []
        for w, text in parts:
            if merged and merged[-1][2] == text and merged[-1][1] + 1 == w:
                merged[-1][1] = w
            else:
                merged.append([w, w, text])
        kinds = {op for ws in warps.values() for _, ops in ws for op in ops}
        title = ("consumer" if MMA in kinds else "producer" if TMA_LOAD in kinds else
                 "epilogue" if TMA_STORE in kinds else "")
        base = 4 * wg
        text = "; ".join(f"warp{'s' if a != b else ''} {base + a}{'-' + str(base + b) if a != b else ''}: {t}"
                         for a, b, t in merged)
        out.append(f"  {role.name} (threads {128 * wg}-{128 * wg + role.threads - 1}){': ' + title if title else ''}: "
                   f"{text}")
    cfg = config_text(result, run.config)
    return [f"roles (the warpgroups, and what each warp's code does{', ' + cfg if cfg else ''}):"] + out if out else []


def _threads_text(ts: list[int], base: int) -> str:
    return ("thread " if len(ts) == 1 else "threads ") + ranges(base + t for t in ts)


def config_text(result: Result, config: Config) -> str:
    parts = []
    for mask, lane in config.elect:
        parts.append(f"{elect_call(mask, result.esites)} elects lane {lane}")
    for name, vals in config.choices:
        parts.append(f"{name} = {vals[0] if len(vals) == 1 else list(vals)}")
    return ", ".join(parts)


def when_text(result: Result, issue: Issue) -> str:
    text = _condition_text(issue, result)
    if issue.needs_independent_scheduling:
        its = ("it needs independent thread scheduling: lanes of one warp running apart after a branch "
               "(with --lockstep, where each warp reconverges after every branch, it does not happen)")
        text = f"{text}; {its}" if text else its
    from ..pipeline.causes import BEHIND
    if BEHIND in issue.latent:
        its = ("it needs one warp to fall two or more phases behind the rest of its role instance, which the "
               "barrier it waits on allows (nothing waits for that warp) but the H200 was not seen to do")
        text = f"{text}; {its}" if text else its
    if issue.finding.latent and issue.finding.latent in issue.latent:  # what the H200 was measured not to do
        its = f"latent on current hardware: {issue.finding.latent}"
        text = f"{text}; {its}" if text else its
    return text


def _condition_text(issue: Issue, result: Result) -> str:
    if not issue.condition:
        if issue.on_hardware is None or len(result.runs) <= 1:
            return ""
        return "in every configuration"
    plan = result.plan
    # a sweep a limit stopped has no "only when": the condition holds over the points it explored (sweep.cover)
    text = f"seen with {issue.condition}" if plan is not None and plan.incomplete else f"only when {issue.condition}"
    if issue.on_hardware is False:
        text += "; the H200 elects the lowest lane of the mask, so this is latent on current hardware (PTX does not promise which lane)"
    elif issue.on_hardware is True and not issue.latent:
        text += "; this includes the H200's choice (the lowest lane), so it manifests on current hardware"
    elif issue.on_hardware is True:
        text += "; this includes the H200's choice of lane (the lowest)"
    return text


def why_text(result: Result, issue: Issue, trace: Trace, ctext: str) -> str:
    f = issue.finding
    model = issue.run.model
    if f.code == "hang":
        return explain_hang(model, trace.final, ctext)
    if f.code == "stale-read":
        if "TMA store" in f.message:
            return ("the TMA store is not ordered after the writes of the data it stores: the writers must finish "
                    "(and fence_proxy_async) before the sync that precedes the store")
        return ("the read is not ordered after the load's barrier phase: it must wait on the barrier the TMA "
                "completes on, with the parity of the phase that load belongs to")
    if f.code == "overwrite":
        return _overwrite_why(f.victim)
    if f.code == "uninit-barrier" and "reuses the memory" in f.message:
        return ("a barrier lives from its init to its inval: its 8 bytes may back other data only after the inval, "
                "and the inval only after every arrival, landing and wait on it has completed")
    if f.code == "double-arrive":
        return ("an arrival beyond the one each thread owes per phase counts toward completing the phase early, "
                "before every participant has arrived (SEMANTICS 1: separate arrivals carry into the count)")
    if f.code == "arrive-fault":
        return "the hardware faults on this arrive (an unspecified launch failure on the H200), ending the kernel"
    if f.code == "tx-range":
        return "the transaction count must stay within +-(2^20-1); the H200 faults past it"
    if f.code == "phase-alias":
        return ("a parity wait can only tell the current phase from the one before; a waiter further behind "
                "(or ahead) passes or blocks on the wrong phase")
    if f.code == "exit-inflight":
        if "after CTA" in f.message:
            return ("a CTA must not exit while other CTAs of its cluster can still arrive on its barriers: the peer's "
                    "releases of the last stages arrive after this CTA ended (the producer needs a tail that waits "
                    "for them)")
        if "TMA store" in f.message:
            return ("a CTA must not exit while its TMA stores still read its shared memory: the storing thread "
                    "drains its bulk groups (wait_group_read 0) before the CTA ends")
        return ("a CTA must not exit while bulk copies into or out of its shared memory are in flight "
                "(CUDA Programming Guide): wait for the load's barrier, or drain it, before the last thread ends")
    return ""


def _overwrite_why(victim: str) -> str:
    """The reason of an overwrite, for what it harms (Finding.victim)."""
    if victim == "accumulator":
        return ("the accumulator was handed back to the MMA (or never waited on) before its reader was done with it: "
                "the reader must wait on the barrier the MMA's commit arrives on, and release the accumulator only "
                "after its last read, before the MMA writes the next tile into it")
    if victim == "writer":
        return ("the write is not ordered after the asynchronous operation still using the buffer: wait for it to "
                "finish (mma_wait for a wgmma reading it, the copy's barrier for a load into it) before writing")
    if victim == "alias":
        return ("the buffer shares its storage with one declared over it, and the write through the other name came "
                "before the last read of this one: order it after that read (its release barrier or a sync)")
    return ("the stage was handed back to the producer (or never waited on) before every reader was done with "
            "it, so the next TMA load replaced the tile under its reader")


def finding_notes(result: Result, issue: Issue) -> list[Note]:
    """The finding's own notes ("the TMA load of tile 2"), each saying which call of the user's it is under."""
    out = []
    for msg, s in issue.finding.notes:
        site = result.sites[s] if 0 <= s < len(result.sites) else None
        out.append(Note(msg + called_from(site.calls), site.span) if site is not None else Note(msg))
    return out


def view(result: Result, issue: Issue) -> IssueView:
    model = issue.run.model
    trace = build(model, issue.witness.path, issue.run.config, issue.run.system)
    ctext = config_text(result, issue.run.config)
    site = result.sites[issue.finding.site] if 0 <= issue.finding.site < len(result.sites) else None
    span, chain = call_site(site.span, site.calls) if site is not None else (None, ())
    bars = [barrier_line(model, trace.final, gid) for gid in involved_barriers(model, trace, issue.finding)[:8]]
    return IssueView(issue, span, trace, why_text(result, issue, trace, ctext), when_text(result, issue), bars, ctext,
                     chain)
