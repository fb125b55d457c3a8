"""Counterexample schedules as people read them: numbered steps, per-role columns, effects.

A trace is replayed from its action path through the model, so every step shows the
concrete barrier, buffer and tile it touched and the spec line it came from.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..model.findings import Finding
from ..model.ir import (ARRIVE, ARRIVE_DROP, BAR_ARRIVE, COLL, COMMIT_GROUP, COMPLETE_TX, CP_ASYNC, CP_ASYNC_ARRIVE,
                        END, EXPECT_TX, FENCE_INIT, FENCE_PROXY, INIT, INVAL, MMA, MMA_COMMIT, MMA_WAIT, READ,
                        TMA_LOAD, TMA_STORE, WAIT, WAIT_GROUP, WRITE)
from ..model.state import State
from ..model.system import Model
from ..model.threads import Config, who_threads
from ..search.explore import replay

ASYNC = "async (TMA, wgmma)"


@dataclass(frozen=True)
class Step:
    index: int
    column: str  # the role instance, or ASYNC
    who: str  # the thread class within it
    text: str
    site: int  # -1 for async completions
    effects: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    kind: str = ""  # the operation: wait, arrive, tma_load, land, mma, mma_done, coll, exit, ...
    barrier: int = -1  # the barrier it waits on, arrives on or completes tx on; -1 for none
    buffer: int = -1  # the buffer it loads, lands in or reads; -1 for none
    touched: tuple[int, ...] = ()  # barriers whose state the step changed or read (waits), in id order


@dataclass
class Trace:
    steps: list[Step]
    final: State
    initial: State
    columns: list[str] = field(default_factory=list)
    states: list[State] = field(default_factory=list)  # the state after each step

    def state_before(self, index: int) -> State:
        """The state before step `index` (1-based)."""
        return self.initial if index <= 1 else self.states[index - 2]

    def failing_step(self) -> int | None:
        """The index of the step that raised a finding, or None (a hang is a state, not a step)."""
        return next((st.index for st in reversed(self.steps) if st.findings), None)


def _bar(model: Model, gid: int) -> str:
    return model.layout.bar_names[gid]


def _buf(model: Model, gid: int) -> str:
    return model.layout.buf_names[gid]


def describe_thread_step(model: Model, s: State, c: int, gi: int, config: Config | None = None) -> tuple[str, int]:
    (pc, env), m = s.locs[c][gi]
    ins = model.code[c][pc]
    cl = model.classes[c]
    cta = cl.cta
    op = ins.op
    if op is WAIT:
        return f"wait {_bar(model, ins.a(env, cta))} parity {ins.b(env) & 1}", ins.site
    if op is ARRIVE:
        text = f"arrive {_bar(model, ins.a(env, cta))}"
        count = ins.b(env)
        if count != 1:
            text += f" count {count}"
        if ins.c is not None:
            text += f" expect_tx {ins.c(env)}"
        if m > 1:
            text += f" (x{m} threads)"
        return text, ins.site
    if op is EXPECT_TX:
        return f"expect_tx {_bar(model, ins.a(env, cta))} {ins.b(env)}", ins.site
    if op is COMPLETE_TX:
        return f"complete_tx {_bar(model, ins.a(env, cta))} {ins.b(env)}", ins.site
    if op is ARRIVE_DROP:
        return f"arrive_drop {_bar(model, ins.a(env, cta))} count {ins.b(env)}", ins.site
    if op is TMA_LOAD:
        text = f"tma_load {_buf(model, ins.a(env, cta))} tile {ins.b(env)} ({ins.c(env)} B -> {_bar(model, ins.d(env, cta))})"
        if ins.e is not None:
            text += f" multicast {ins.e(env):#x}"
        return text, ins.site
    if op is READ or op is WRITE:
        return f"{op} {_buf(model, ins.a(env, cta))} tile {ins.b(env)}", ins.site
    if op is TMA_STORE:
        tile = f" tile {ins.b(env)}" if ins.b is not None else ""
        return f"tma_store {_buf(model, ins.a(env, cta))}{tile}", ins.site
    if op is CP_ASYNC:
        return f"cp_async {_buf(model, ins.a(env, cta))} tile {ins.b(env)}", ins.site
    if op is WAIT_GROUP:
        return f"wait_group{'_read' if ins.c else ''} {ins.a(env)}", ins.site
    if op is MMA_COMMIT:
        return f"mma_commit {_bar(model, ins.a(env, cta))}", ins.site
    if op in (COMMIT_GROUP, FENCE_PROXY, FENCE_INIT):
        return ins.text or op, ins.site
    if op is INIT:
        return f"init {_bar(model, ins.a(env, cta))} count {ins.b(env)}", ins.site
    if op is INVAL:
        return f"inval {_bar(model, ins.a(env, cta))}", ins.site
    if op is MMA:
        ops = ", ".join(f"{_buf(model, r(env, cta))}" + (f" tile {t(env)}" if t is not None else "") for r, t in ins.a)
        return f"mma_async {ops}", ins.site
    if op is MMA_WAIT:
        return f"mma_wait {ins.a(env)}", ins.site
    if op is COLL:
        kind = ins.a
        if kind == "elect":
            if config is None:
                return "elect()", ins.site
            return f"elect() (lane {config.elected(ins.b, False)} is elected)", ins.site
        if kind == "syncwarp":
            return "syncwarp", ins.site
        if kind == "bar":
            return f"bar_sync {ins.b(env)}, {ins.c(env)}", ins.site
        if kind == "reconv":
            return "reconverge (--lockstep)", ins.site
        return kind, ins.site
    if op is BAR_ARRIVE:
        return f"bar_arrive {ins.b(env)}, {ins.c(env)}", ins.site
    return ins.text or op, ins.site


def _operands(model: Model, s: State, c: int, gi: int) -> tuple[str, int, int]:
    """(kind, barrier, buffer) of the thread step about to run."""
    (pc, env), _ = s.locs[c][gi]
    ins = model.code[c][pc]
    cta = model.classes[c].cta
    op = ins.op
    if op in (WAIT, ARRIVE, EXPECT_TX, COMPLETE_TX, ARRIVE_DROP):
        return op, ins.a(env, cta), -1
    if op is TMA_LOAD:
        return op, ins.d(env, cta), ins.a(env, cta)
    if op in (READ, WRITE, TMA_STORE, CP_ASYNC):
        return op, -1, ins.a(env, cta)
    if op in (MMA_COMMIT, CP_ASYNC_ARRIVE, INIT, INVAL):
        return op, ins.a(env, cta), -1
    if op is MMA:
        return op, -1, ins.a[0][0](env, cta) if ins.a else -1
    if op is COLL:
        return f"coll:{ins.a}", -1, -1
    return op, -1, -1


def barrier_short(model: Model, s: State, gid: int) -> str:
    """A barrier's state in a few characters: `full[0] ph1 0/1 tx0`."""
    b = s.bars[gid]
    name = _bar(model, gid)
    if b is None:
        return f"{name} uninit"
    return f"{name} ph{b.phase} {b.pending}/{b.expected} tx{b.tx}"


_RELEASED = "everyone arrived: released"


def _effects(model: Model, before: State, after: State) -> tuple[str, ...]:
    out = []
    for gid, (b0, b1) in enumerate(zip(before.bars, after.bars)):
        if b0 is not None and b1 is not None and b1.phase > b0.phase:
            for ph in range(b0.phase, b1.phase):
                out.append(f"{_bar(model, gid)} completes phase {ph}")
    for k0, a0, n0 in before.colls:
        if not any(k == k0 for k, _, _ in after.colls):
            out.append(_RELEASED)
    return tuple(out)


def build(model: Model, path: tuple, config: Config | None = None, system=None) -> Trace:
    s = model.initial()
    init = s
    steps: list[Step] = []
    columns: list[str] = []
    states: list[State] = []
    # replay through the system the witness was found in (symmetry renames classes as it goes)
    for i, (action, after, findings) in enumerate(replay(system if system is not None else model, path)):
        bar = buf = -1
        meeting = None
        if action[0] == "t":
            c, gi = action[1], action[2]
            cl = model.classes[c]
            text, site = describe_thread_step(model, s, c, gi, config)
            kind, bar, buf = _operands(model, s, c, gi)
            column, who = cl.unit, cl.who
            meeting = model.meeting(s, c, gi)
            if meeting is not None:  # a warp meeting taken as one move: every lane of it moves
                who = who_threads(cl, frozenset(t for mc, _ in meeting for t in model.classes[mc].members))
        elif action[0] == "l":
            buf, tag, nbytes, bar, lsite, src, _ = s.flight[action[1]]
            column, site, kind = ASYNC, lsite, "land"
            if bar >= 0:
                who, text = "TMA", f"{_buf(model, buf)} tile {tag} lands ({nbytes} B -> {_bar(model, bar)})"
            else:
                who, text = "cp.async", f"{_buf(model, buf)} tile {tag} lands"
        elif action[0] == "m":
            done, forming, inflight = s.mmas[action[1]]
            seq, ops, msite, mc, result = inflight[0]
            column, who, site, kind = ASYNC, "mma", msite, "mma_done"
            text = f"{model.unit_label[action[1]]}'s mma_async #{seq} completes"
            if result:  # both CTAs' halves with cta_group 2
                buf = result[0][0]
                text += f" (writes tile {result[0][1]} into {' and '.join(_buf(model, b) for b, _ in result)})"
        elif action[0] == "s":
            c, seq, buf, tag, stage, ssite = s.stores[action[1]]
            column, who, site, kind = ASYNC, "TMA store", ssite, "store_read" if stage == 0 else "store_done"
            text = f"store of tile {tag} from {_buf(model, buf)} " + ("has read its SMEM" if stage == 0 else "completes")
        elif action[0] == "k":
            ckind, unit, upto, bars, ksite, c, _, _ = s.commits[action[1]]
            column, who, site, kind = ASYNC, "commit" if ckind == "mma" else "cp.async", ksite, "commit_arrive"
            bar = bars[0]
            text = f"{model.classes[c].label}'s arrival on {', '.join(_bar(model, g) for g in bars)} comes"
        else:
            column, who, site, kind = ASYNC, "CTA", -1, "exit"
            text = f"CTA {action[1]} exits"
        if column not in columns:
            columns.append(column)
        touched = {gid for gid, (b0, b1) in enumerate(zip(s.bars, after.bars)) if b0 != b1}
        if kind == WAIT and bar >= 0:
            touched.add(bar)
        effects = _effects(model, s, after)
        if meeting is not None and _RELEASED not in effects:  # the whole warp arrived in this one move
            effects += (_RELEASED,)
        steps.append(Step(i + 1, column, who, text, site, effects, tuple(findings), kind, bar, buf,
                          tuple(sorted(touched))))
        states.append(after)
        s = after
    for cl in model.classes:
        if cl.unit not in columns and any(model.code[cl.id][pc].op is not END for (pc, _), _ in s.locs[cl.id]):
            columns.append(cl.unit)
    if ASYNC in columns:
        columns.remove(ASYNC)
        columns.append(ASYNC)
    return Trace(steps, s, init, columns, states)


def blocked_rows(model: Model, s: State) -> list[tuple[str, str, str, int]]:
    """(column, who, what it is stuck on, site) for every unfinished thread class at the end of a trace."""
    merged: dict[tuple, list] = {}  # threads of one instance stuck alike: one row (`warps 1-3`, not a row per warp)
    for c, groups in enumerate(s.locs):
        for (pc, env), m in groups:
            ins = model.code[c][pc]
            if ins.op is END:
                continue
            cl = model.classes[c]
            key = (cl.unit, model.describe_block(s, c, pc, env), ins.site)
            if key not in merged:
                merged[key] = [cl, set(), []]
            merged[key][1].update(cl.members)
            merged[key][2].append(cl.who)
    out = []
    for (unit, what, site), (cl, members, whos) in merged.items():
        who = who_threads(cl, members) or (whos[0] if len(whos) == 1 else "")
        out.append((unit, who, what, site))
    return out


def barrier_line(model: Model, s: State, gid: int) -> str:
    b = s.bars[gid]
    name = _bar(model, gid)
    offsets = getattr(model.kernel, "bar_offsets", ())
    if gid < len(offsets) and not name.startswith("mbar@"):  # a compiled kernel's barrier: its address too
        name += f" (mbar@{offsets[gid]})"
    if b is None:
        return f"{name}: not initialised"
    state = f"phase {b.phase} (parity {b.phase & 1} open)"
    return f"{name}: {state}, {b.pending} of {b.expected} arrivals pending, tx {b.tx}"


def involved_barriers(model: Model, trace: Trace, finding: Finding) -> list[int]:
    """Barriers to show at the failure: those the finding names, then those the trace touched."""
    out = list(finding.barriers)
    for gid, (b0, b1) in enumerate(zip(trace.initial.bars, trace.final.bars)):
        if b0 is None and b1 is not None and b1.phase == 0 and b1.pending == b1.expected and b1.tx == 0:
            continue  # initialised by the kernel and not used since: nothing to see
        if b0 != b1 and gid not in out:
            out.append(gid)
    return out
