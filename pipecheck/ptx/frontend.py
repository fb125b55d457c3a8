"""The PTX front end from file to thread classes: parse, flatten the entry, evaluate it, slice the
protocol, then, per configuration (the lane each `elect.sync` member mask picks), group threads into
classes and write their programs with the barriers and buffers resolved.

`load_ptx` does the work that does not depend on the configuration once; `classes_for` is what the
pipeline calls per configuration.
"""
from __future__ import annotations


import functools
import itertools
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from ..core.diagnostics import Span, SpecError, error
from ..model.ir import (COLL, END, INIT, MMA, PROBE, READ, TMA_LOAD, TMA_STORE, WRITE, ARRIVE, ARRIVE_DROP,
                        BRANCH, COMPLETE_TX, EXPECT_TX, INVAL, JUMP, LET, WAIT, Instr, Program, RConst, RExpr, ROp,
                        RRef, Site, compile_expr)
from ..model.kernel import CLC_CHOICE, BarrierDecl, BufferDecl
from ..model.threads import Config, ThreadClass, class_label
from . import syntax as X
from .decode import PROTO_K, prepare, successors
from .evaluate import CLUSTER_SHIFT, PARAM_BASE, Evaluation, Launch, ParamRead, Static, evaluate, static_parts
from .flatten import Body, flatten
from .lower import ClassCode, Emitter, Identity, Plan, SmemRef, evaluate_for, partition, plan
from .parse import parse_ptx
from .slice import Slice, protocol_slice
from .sources import BARRIER_BYTES, SourceMap

MAX_WALK = 400_000  # instructions one class's discovery walk may run (docs/errors.md)


@dataclass(frozen=True)
class PtxParam:
    """A kernel parameter the protocol depends on: the bytes at one offset of the parameter space."""

    name: str  # param_12
    value: int
    default: int
    lo: int | None
    hi: int | None
    span: Span | None
    offset: int = 0
    width: int = 32
    source: str = ""  # the CUDA source line that reads it
    steers: bool = True  # the protocol slice reads it (False: stated only because it was set or captured)


@dataclass(frozen=True)
class PtxRole:
    """A warpgroup of the block: the PTX front end's role (`wg0`, `wg1`, ...)."""

    name: str
    threads: int
    instances: int = 1


@dataclass(frozen=True)
class PtxKernel:
    """The `model.kernel.KernelShape` of a PTX entry, and what reports say about it."""

    name: str
    file: str
    arch: str
    cluster: tuple[int, ...]
    buffers: tuple[BufferDecl, ...]
    barriers: tuple[BarrierDecl, ...]
    params: tuple[PtxParam, ...]
    block: tuple[int, int, int]
    span: Span
    kchooses: tuple = ()
    roles: tuple[PtxRole, ...] = ()  # the block's warpgroups
    bar_offsets: tuple[int, ...] = ()  # each barrier's byte offset in shared memory (the hardware's `mbar@N`)

    @property
    def cluster_size(self) -> int:
        return math.prod(self.cluster)

    def barrier(self, name: str) -> BarrierDecl | None:
        return next((b for b in self.barriers if b.name == name), None)

    def buffer(self, name: str) -> BufferDecl | None:
        return next((b for b in self.buffers if b.name == name), None)


@dataclass
class PtxProgram:
    """An entry evaluated and sliced at one parameter point; `classes_for` lowers it per configuration."""

    path: str
    module: X.Module
    entry: X.Function
    body: Body
    launch: Launch
    ev: Evaluation
    sl: Slice
    plan: Plan
    sources: SourceMap
    sites: list[Site]
    site_index: dict[int, int]
    copy_bytes: dict[int, int]  # TMA load site -> bytes it delivers
    params: list[PtxParam]
    kernel: PtxKernel | None = None
    cache: dict = field(default_factory=dict)
    regions: "Regions | None" = None

    @property
    def threads(self) -> int:
        return math.prod(self.launch.block)

    @property
    def masks(self) -> list[int]:
        return self.plan.elect_masks

    @property
    def uses_clc(self) -> bool:
        return any(self.ev.reach[i] and d.what == "query_cancel" for i, d in enumerate(self.ev.decoded))



# ---------------------------------------------------------------- loading


def _body_shared(scope: X.Scope | None) -> list[X.Global]:
    """`.shared` variables declared in the kernel's body (nvcc puts a function's `__shared__` there)."""
    out: list[X.Global] = []
    for item in scope.items if scope is not None else ():
        if isinstance(item, X.Scope):
            out.extend(_body_shared(item))
        elif isinstance(item, X.Decl) and item.kind == "shared":
            align = next((int(b) for a, b in zip(item.words, item.words[1:]) if a == ".align" and b.isdigit()), 1)
            typ = next((w for w in item.words if w[:2] in (".b", ".u", ".s", ".f") and w[2:].isdigit()), ".b8")
            out.extend(X.Global("shared", n, align, typ, item.dims, False, item.line) for n in item.names)
    return out


def _shared_symbols(module: X.Module, entry: X.Function | None = None) -> list[tuple[int, int, str]]:
    """(address, bytes, name) of each `.shared` symbol: static variables (the module's, then the kernel body's)
    from 0 in declaration order, dynamic smem (0 bytes declared) after them."""
    out: list[tuple[int, int, str]] = []
    addr = 0
    dynamic = []
    for g in list(module.globals) + _body_shared(entry.body if entry is not None else None):
        if g.space != "shared":
            continue
        if g.extern or (g.dims and g.dims[-1] == 0):
            dynamic.append(g)
            continue
        a = max(g.align, 1)
        addr = (addr + a - 1) // a * a
        width = {".b8": 1, ".u8": 1, ".s8": 1, ".b16": 2, ".u16": 2, ".b64": 8, ".u64": 8}.get(g.type, 4)
        size = width * math.prod(d for d in g.dims if d) if g.dims else width
        out.append((addr, size, g.name))
        addr += size
    for g in dynamic:
        a = max(g.align, 16)
        addr = (addr + a - 1) // a * a
        out.append((addr, 0, g.name))
    return out


def _shared_layout(module: X.Module, entry: X.Function | None = None) -> dict[str, int]:
    return {name: addr for addr, _, name in _shared_symbols(module, entry)}


def _symbol_label(symbols: list[tuple[int, int, str]], off: int, default: str) -> str:
    """A barrier the source names only by its variable (`__shared__ cuda::barrier<...> bar`): `bar`, or
    `bars[k]` in an array of them, from the `.shared` symbol at its address (nvcc's local name
    `_ZZ<function>E<n><name>`)."""
    for lo, size, name in symbols:
        if lo <= off < lo + size:
            m = re.search(r"E(\d+)([A-Za-z_]\w*)$", name)
            short = m.group(2)[:int(m.group(1))] if m else name
            return short if size <= BARRIER_BYTES else f"{short}[{(off - lo) // BARRIER_BYTES}]"
    return default


def _param_bases(entry: X.Function) -> dict[str, int]:
    out: dict[str, int] = {}
    off = 0
    for p in entry.params:
        a = max(p.align, 1)
        off = (off + a - 1) // a * a
        out[p.name] = PARAM_BASE + off
        off += p.size
    return out


def select_entry(module: X.Module, name: str | None) -> X.Function:
    entries = module.entries()
    if not entries:
        raise error("rule", "PTX: the module has no kernel (.entry) with a body", Span(module.path, 1, 1))
    if name is None:
        if len(entries) > 1:
            listing = ", ".join(e.name if len(e.name) < 60 else e.name[:57] + "..." for e in entries)
            raise error("usage", f"PTX: the module has {len(entries)} kernels; name one with --entry ({listing})",
                        Span(module.path, entries[1].line, 1))
        return entries[0]
    hit = [e for e in entries if e.name == name or name in e.name]
    if len(hit) != 1:
        raise error("usage", f"PTX: no single kernel named {name!r} in the module "
                    f"({len(hit)} match)", Span(module.path, 1, 1))
    return hit[0]


@dataclass(frozen=True)
class LaunchOptions:
    entry: str | None = None
    block: tuple[int, int, int] | None = None
    cluster: tuple[int, int, int] | None = None
    grid: tuple[int, int, int] | None = None
    overrides: tuple[tuple[str, int], ...] = ()  # -D param_12=832


def read_module(path: str, sources: dict[str, str]) -> X.Module:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise error("import", f"cannot read {path}: {exc.strerror}", None) from None
    sources[path] = text
    return parse_ptx(text, path)


@dataclass
class Parsed:
    """A PTX entry read and flattened, with what the launch adds; evaluated per parameter point by `at`."""

    path: str
    module: X.Module
    entry: X.Function
    body: Body
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    grid: tuple[int, int, int]
    shared: dict[str, int]
    bases: dict[str, int]
    sources: dict[str, str]

    @functools.cached_property
    def static(self) -> Static:
        """What every evaluation of the body reads of it alone (decoded instructions, blocks), made once."""
        return static_parts(self.body)

    @functools.cached_property
    def srcmap(self) -> SourceMap:
        """The source positions of the module's instructions, shared by the evaluations at every point."""
        return SourceMap(self.module, self.path, self.sources)


def parse_entry(path: str, opts: LaunchOptions, sources: dict[str, str]) -> Parsed:
    module = read_module(path, sources)
    entry = select_entry(module, opts.entry)
    body = prepare(flatten(module, entry))
    if not any(op.base == "mbarrier" or op.opcode.startswith(("pipecheck.wait", "cp.async.bulk", "bar.", "barrier."))
               for op in body.ops):
        raise error("rule", "PTX: the kernel has no mbarrier, named-barrier or TMA instruction: there is no protocol "
                    "to check", Span(path, entry.line, 1))
    block = opts.block or _block(entry, path)
    # a kernel of CTA pairs (`.cta_group::2` MMAs, commits, loads) with no cluster directive (CUTLASS's SM100
    # kernels take the cluster shape at launch) runs on one pair by default
    pair = next((op for op in body.ops if "cta_group::2" in op.mods and op.base in ("tcgen05", "cp")), None)
    declared = entry.directives.get("reqnctapercluster")
    cluster = opts.cluster or tuple((declared or ((2, 1, 1) if pair is not None else (1, 1, 1))) + (1, 1))[:3]  # type: ignore
    if pair is not None and math.prod(cluster) % 2:
        raise error("rule", f"PTX line {pair.line}: `{pair.opcode}` works on a CTA pair (ranks 2k and 2k+1 of the "
                    f"cluster, PTX ISA 9.7.16), but the cluster has {math.prod(cluster)} CTA(s): give an even one "
                    "with --cluster", Span(path, pair.line, pair.col + 1))
    grid = opts.grid or tuple(cluster)  # one cluster of CTAs: every tile of a persistent loop runs on it
    return Parsed(path, module, entry, body, tuple(block), tuple(cluster), tuple(grid),  # type: ignore[arg-type]
                  _shared_layout(module, entry), _param_bases(entry), sources)


def param_bytes(values: Mapping[int, tuple[int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for off, (v, n) in values.items():
        for k in range(n):
            out[off + k] = (v >> (8 * k)) & 0xFF
    return out


def evaluate_at(pz: Parsed, values: Mapping[int, tuple[int, int]]) -> Evaluation:
    launch = Launch(pz.block, pz.cluster, pz.grid, param_bytes(values))
    return evaluate(pz.body, launch, pz.shared, pz.bases, pz.static)


def program_at(pz: Parsed, values: Mapping[int, tuple[int, int]], defaults: Mapping[int, tuple[int, int]],
               every_site: bool = False) -> PtxProgram:
    """The entry evaluated and sliced at these parameter values (offset -> (value, bytes)). `every_site`: a
    site for every instruction, reached or not, so that the sites of two parameter points are the same list
    (a sweep reports the findings of all its points against one)."""
    ev = evaluate_at(pz, values)
    srcmap = pz.srcmap
    params = _params(ev, pz.body, srcmap, defaults, {f"param_{o}": v for o, (v, _) in values.items()})
    sl = protocol_slice(ev)
    pl = plan(ev, sl)
    sites, site_index = _sites(pz.body, sl, ev, srcmap, every_site)
    steering = {r.offset for r in ev.param_reads if r.op in sl.ops}
    prog = PtxProgram(pz.path, pz.module, pz.entry, pz.body, ev.launch, ev, sl, pl, srcmap, sites, site_index, {},
                      [q if q.offset in steering else replace(q, steers=False) for q in params
                       if q.offset in steering or values.get(q.offset) != defaults.get(q.offset)])  # what the user set is always stated
    prog.copy_bytes = _copy_bytes(prog)
    return prog


def load_ptx(path: str, opts: LaunchOptions, sources: dict[str, str], defaults: Mapping[int, tuple[int, int]] | None = None
             ) -> PtxProgram:
    """Parse and evaluate one entry at `defaults` (offset -> (value, bytes)) with `opts.overrides` applied."""
    pz = parse_entry(path, opts, sources)
    values = dict(defaults or {})
    for name, v in opts.overrides:
        off = _param_offset(name)
        width = values.get(off, (0, 4))[1]
        values[off] = (v, width)
    return program_at(pz, values, defaults or {})


def _param_offset(name: str) -> int:
    try:
        return int(name.split("_", 1)[1])
    except (IndexError, ValueError):
        raise error("usage", f"-D {name}: PTX parameters are named param_<byte offset> (e.g. param_12)", None) from None


def _block(entry: X.Function, path: str) -> tuple[int, int, int]:
    for key in ("reqntid", "maxntid"):
        v = entry.directives.get(key)
        if v:
            t = tuple(v) + (1, 1)
            return (t[0], t[1], t[2])
    raise error("usage", "PTX: the kernel declares no .reqntid/.maxntid; give the block size with --block N",
                Span(path, entry.line, 1))


def _params(ev: Evaluation, body: Body, srcmap: SourceMap, defaults: Mapping[int, tuple[int, int]],
            overrides: Mapping[str, int]) -> list[PtxParam]:
    """The parameter bytes the protocol slice reads: one parameter per offset read, with the CUDA line
    that reads it."""
    seen: dict[int, ParamRead] = {}
    for r in sorted(ev.param_reads, key=lambda r: (r.offset, r.op)):
        seen.setdefault(r.offset, r)
    out = []
    for off, r in sorted(seen.items()):
        name = f"param_{off}"
        default = defaults.get(off, (0, 0))[0]
        value = overrides.get(name, default)
        op = body.ops[r.op]
        out.append(PtxParam(name, value, default, None, None, Span(body.file, op.line, op.col + 1), off, r.width,
                            srcmap.where(op.loc)))
    return out


def _sites(body: Body, sl: Slice, ev: Evaluation, srcmap: SourceMap, every: bool = False
           ) -> tuple[list[Site], dict[int, int]]:
    sites: list[Site] = []
    index: dict[int, int] = {}
    for i, op in enumerate(body.ops):
        if not ev.reach[i] and not every:
            continue
        index[i] = len(sites)
        sites.append(srcmap.site(op))
    return sites, index


def _copy_bytes(prog: PtxProgram) -> dict[int, int]:
    """The bytes each TMA load delivers. A tensor copy's box is in its descriptor, which the PTX does not show;
    the kernel's own expect_tx on the same barrier says how many bytes its copies deliver together, so each of the
    copies that complete on that barrier register gets an equal share (docs/ptx.md)."""
    ev, body = prog.ev, prog.body
    out: dict[int, int] = {}
    by_bar: dict[str, list[int]] = {}
    expects: dict[str, list[int]] = {}
    for i, d in enumerate(ev.decoded):
        if not ev.reach[i] or d.kind != PROTO_K:
            continue
        roles = dict(d.roles)
        b = roles.get("bar")
        key = _operand_key(b)
        if d.what == "tma_load":
            if "size" in roles:
                v = ev.value(i, roles["size"])
                if isinstance(v, int):
                    out[i] = v
                    continue
            by_bar.setdefault(key, []).append(i)
        elif d.what in ("arrive", "expect_tx") and "tx" in roles:
            expects.setdefault(key, []).append(i)
    # a barrier register with no expect_tx of its own: the expect_tx on a register of the same address
    # (CUTLASS's SM100 mainloop recomputes the full barrier's address for its copies)
    by_value: dict = {}
    for key, ex in expects.items():
        for e in ex:
            v = ev.value(e, dict(ev.decoded[e].roles)["bar"])
            if isinstance(v, (int, RExpr)):  # a run-time address (DYN) equals no other that is known
                by_value.setdefault(v, set()).add(key)
    for key, copies in by_bar.items():
        ex = expects.get(key, [])
        if not ex:
            v = ev.value(copies[0], dict(ev.decoded[copies[0]].roles)["bar"])
            same = by_value.get(v, set()) if isinstance(v, (int, RExpr)) else set()
            # (an unrolled loop announces the same barrier from several registers)
            ex = [e for key2 in sorted(same) for e in expects[key2]]
        if not ex:  # a run-time barrier address recomputed for the copies: the expect_tx every path to them ran last
            ex = sorted({e for i in copies for e in _last_expects(prog, i)})
        vals = set()
        for e in ex:
            v = ev.value(e, dict(ev.decoded[e].roles)["tx"])
            if isinstance(v, int):
                vals.add(v)
        if len(vals) != 1:
            i = copies[0]
            how = "no expect_tx on the same barrier register" if not vals else f"expect_tx values {sorted(vals)} differ"
            raise error("rule", f"PTX line {body.ops[i].line}: the bytes of this TMA load are not visible in the PTX "
                        f"(they are in its tensor map) and {how}: pipecheck cannot balance its barrier's tx-count",
                        body.span(i))
        # the 2-SM loads of both CTAs of a pair complete on the leader's barrier: its expect_tx counts both halves
        share = next(iter(vals)) // (len(copies) * (2 if all(ev.decoded[i].pair for i in copies) else 1))
        for i in copies:
            out[i] = share
    return out


def _last_expects(prog: PtxProgram, i: int, limit: int = 4000) -> set[int]:
    """The expect_tx (or arrive.expect_tx) instructions that a path to instruction i runs last (CUTLASS's
    producer_acquire announces a stage's bytes, then issues its copies; in a CTA pair only the leader announces,
    so a path that skips the announcement and reaches the entry adds none); empty when more than `limit`
    instructions are walked."""
    ev, ops = prog.ev, prog.body.ops
    preds: dict[int, list[int]] = prog.cache.get("preds")  # type: ignore[assignment]
    if preds is None:
        preds = {}
        for j in range(len(ops)):
            for k in successors(ops, j):
                preds.setdefault(k, []).append(j)
        prog.cache["preds"] = preds
    found: set[int] = set()
    seen, stack = {i}, list(preds.get(i, ()))
    while stack:
        j = stack.pop()
        if j in seen or not ev.reach[j]:
            continue
        seen.add(j)
        d = ev.decoded[j]
        if d.kind == PROTO_K and d.what in ("arrive", "expect_tx") and "tx" in dict(d.roles):
            found.add(j)
            continue
        if len(seen) > limit:
            return set()
        stack.extend(preds.get(j, ()))
    return found


def _operand_key(o) -> str:
    if isinstance(o, X.Reg):
        return o.name
    if isinstance(o, X.BinOp):
        return f"{_operand_key(o.a)}{o.op}{_operand_key(o.b)}"
    if isinstance(o, X.Imm):
        return str(o.value)
    if isinstance(o, X.Sym):
        return o.name
    return repr(o)


# ---------------------------------------------------------------- per configuration


def identity(prog: PtxProgram, cta: int, tid: int, config: Config) -> Identity:
    clc = dict(config.choices).get(CLC_CHOICE, (0,))[0]
    return Identity(tid, cta, {m: config.elected(m, False) for m in prog.masks}, clc)


def class_codes(prog: PtxProgram, config: Config) -> list[tuple[int, int, tuple[int, ...], ClassCode]]:
    """(cta, warpgroup, member threads, code) for every class of the configuration, before resolution; kept in
    `prog.cache` (the regions, every configuration's classes and the defaults all ask for them)."""
    hit = prog.cache.get(("class codes", config))
    if hit is None:
        hit = prog.cache[("class codes", config)] = _class_codes(prog, config)
    return hit


def _class_codes(prog: PtxProgram, config: Config) -> list[tuple[int, int, tuple[int, ...], ClassCode]]:
    T = prog.threads
    ncta = math.prod(prog.launch.cluster)
    groups: dict[tuple, list[int]] = {}
    order: list[tuple] = []
    for cta in range(ncta):
        idents = {t: identity(prog, cta, t, config) for t in range(T)}
        try:
            parts = partition(prog.ev, prog.sl, prog.plan, list(range(T)), idents)
        except (ArithmeticError, KeyError) as exc:
            raise error("rule", f"PTX: a thread's value cannot be evaluated ({exc})", Span(prog.path, 1, 1)) from None
        for part in parts:
            by_wg: dict[int, list[int]] = {}
            for t in part:
                by_wg.setdefault(t // 128, []).append(t)
            for wg, mem in by_wg.items():
                memo: dict = {}
                sig = tuple(evaluate_for(e, idents[mem[0]], memo) for e in prog.plan.nodes)
                key = (cta, wg, sig, mem[0])
                groups[key] = mem
                order.append(key)
    order.sort(key=lambda k: (k[0], groups[k][0]))
    # warps whose lanes run different code: there the `.sync` of wgmma instructions is a meeting
    # of the warp's lanes (PTX 9.7.15: the thread waits until all threads in the warp execute it)
    codes_in_warp: dict[tuple[int, int], int] = {}
    for key in order:
        for w in {t // 32 for t in groups[key]}:
            codes_in_warp[(key[0], w)] = codes_in_warp.get((key[0], w), 0) + 1
    out = []
    for key in order:
        cta, wg, sig, _ = key
        members = groups[key]
        split = any(codes_in_warp[(cta, t // 32)] > 1 for t in members)
        ck = prog.cache.get(("code", sig, cta, split, config.choices))
        if ck is None:
            em = Emitter(prog.ev, prog.sl, prog.plan, identity(prog, cta, members[0], config),
                         lambda i: prog.site_index.get(i, -1), T, warp_split=split)
            ck = em.run()
            ck.rep = members[0]
            prog.cache[("code", sig, cta, split, config.choices)] = ck
        out.append((cta, wg, tuple(members), ck))
    return out


@dataclass
class Regions:
    """Where barriers and buffers are in shared memory, found from every class's accesses."""

    bar_lo: int
    nbar: int
    bar_labels: tuple[str, ...]
    buffers: list[tuple[int, int, str]]  # (start, end, label), sorted; the last element of `smem` is "elsewhere"
    counts: tuple[int, ...] = ()  # per barrier, the count its init sets (0: none, or several)
    landed: tuple[bool, ...] = ()  # per buffer: a TMA load (or try_cancel) lands in it

    @property
    def edges(self) -> list[int]:
        """Every buffer's start and end, sorted."""
        return sorted({x for lo, hi, _ in self.buffers for x in (lo, hi)})

    def buffer_index(self, addr: int) -> int:
        for k, (lo, hi, _) in enumerate(self.buffers):
            if lo <= addr < hi:
                return k
        return len(self.buffers)


class WalkTooLong(Exception):
    pass


def concrete_walk(code: ClassCode, max_steps: int):
    """Run a class's program once with every wait passing (a probe reads "completed"): yields each
    instruction that is not a local step, with the evaluator of expressions at that point. Raises
    `WalkTooLong` past `max_steps` instructions."""
    instrs = code.instrs
    env = [0] * max(1, len(code.slot_names))
    fns: dict = {}

    def ev(e):
        if e is None:
            return None
        if isinstance(e, RConst):
            return e.value
        f = fns.get(e)
        if f is None:
            f = fns[e] = compile_expr(e)
        return f(tuple(env))
    pc = 0
    steps = 0
    while instrs[pc].op != END:
        steps += 1
        if steps > max_steps:
            raise WalkTooLong()
        ins = instrs[pc]
        op = ins.op
        if op == LET:
            env[ins.args[0]] = ev(ins.args[1])
            pc += 1
            continue
        if op == JUMP:
            pc = ins.target
            continue
        if op == BRANCH:
            pc = pc + 1 if ev(ins.args[0]) else ins.target
            continue
        if op == PROBE:
            env[ins.args[2]] = 1
        yield ins, ev
        pc += 1


def _walk(prog: PtxProgram, code: ClassCode, cta: int, seen: dict) -> None:
    """Record the concrete address of every barrier and buffer operand of a class's run (addresses the
    evaluation left to run time: stage-indexed rings)."""
    try:
        for ins, ev in concrete_walk(code, MAX_WALK):
            for a in ins.args:
                if isinstance(a, SmemRef):
                    seen.setdefault((a.kind, a.site), set()).add(ev(a.addr))
                elif isinstance(a, tuple):
                    for x in a:
                        if isinstance(x, tuple) and x and isinstance(x[0], SmemRef):
                            seen.setdefault((x[0].kind, x[0].site), set()).add(ev(x[0].addr))
            if ins.op == INIT:
                seen.setdefault(("init", ins.args[0].site), set()).add((ev(ins.args[0].addr), ev(ins.args[1])))
    except WalkTooLong:
        raise error("limit", f"PTX: one thread class runs more than {MAX_WALK} instructions before it ends: a loop "
                    "bound from a kernel parameter may be too large (set it with -D param_<offset>=N)",
                    Span(prog.path, 1, 1)) from None


def _local(addr: int) -> tuple[int | None, int]:
    """(target CTA or None for the thread's own, CTA-local offset) of a shared or shared::cluster address."""
    if addr >> CLUSTER_SHIFT:
        return (addr >> CLUSTER_SHIFT) - 1, addr & ((1 << CLUSTER_SHIFT) - 1)
    return None, addr


def find_regions(prog: PtxProgram, configs: list[Config]) -> Regions:
    seen: dict = {}
    for config in configs:
        for cta, wg, members, code in class_codes(prog, config):
            key = ("walked", id(code), cta)
            if key in prog.cache:
                continue
            prog.cache[key] = True
            _walk(prog, code, cta, seen)
    bars: set[int] = set()
    inits: dict[int, int] = {}
    counts: dict[int, set] = {}
    for (kind, site), vals in seen.items():
        if kind == "bar":
            bars.update(_local(v)[1] for v in vals if v is not None)
        elif kind == "init":
            for a, cnt in vals:
                inits[_local(a)[1]] = site
                counts.setdefault(_local(a)[1], set()).add(cnt)
    if not bars:
        raise error("rule", "PTX: no barrier operation is reached by any thread with these parameters", Span(prog.path, 1, 1))
    lo, hi = min(bars), max(bars)
    if any((b - lo) % BARRIER_BYTES for b in bars):
        raise error("rule", "PTX: barrier addresses are not 8-byte aligned relative to each other", Span(prog.path, 1, 1))
    nbar = (hi - lo) // BARRIER_BYTES + 1
    symbols = _shared_symbols(prog.module, prog.entry)
    labels = tuple(_symbol_label(symbols, lo + BARRIER_BYTES * k, label) if label.startswith("mbar@") else label
                   for k, label in enumerate(prog.sources.barrier_labels(lo, nbar, inits, prog.body)))
    # buffers: each TMA load's destination with its bytes; each TMA store's source up to the next region
    loads: dict[int, tuple[int, int]] = {}
    for (kind, site), vals in seen.items():
        if kind == "buf" and prog.ev.decoded[site].what == "tma_load":
            nb = prog.copy_bytes.get(site, 0)
            for v in vals:
                a = _local(v)[1]
                loads[a] = (max(loads.get(a, (0, 0))[0], nb), site)
    stores: dict[int, int] = {}
    for (kind, site), vals in seen.items():
        if kind == "buf" and prog.ev.decoded[site].what == "tma_store":
            for v in vals:
                stores.setdefault(_local(v)[1], site)
    starts = sorted(set(loads) | set(stores))
    regions: list[tuple[int, int, str]] = []
    bar_end = hi + BARRIER_BYTES
    for k, s in enumerate(starts):
        nxt = starts[k + 1] if k + 1 < len(starts) else 1 << CLUSTER_SHIFT
        if s in loads and loads[s][0] > 0:
            end = min(s + loads[s][0], nxt)
            site = loads[s][1]
            what = "TMA load"
        else:
            end = nxt if s >= bar_end or nxt <= lo else min(nxt, lo)
            site = stores.get(s, loads.get(s, (0, -1))[1])
            what = "TMA store"
        if lo <= s < bar_end:
            raise error("rule", f"PTX line {prog.body.ops[site].line}: a {what} uses shared memory at offset {s}, which "
                        "is a barrier's", prog.body.span(site))
        regions.append((s, end, prog.sources.buffer_label(s, end, what, site, prog.body)))
    init_counts = tuple(next(iter(counts[a])) if len(counts.get(a, ())) == 1 else 0
                        for a in (lo + BARRIER_BYTES * k for k in range(nbar)))
    return Regions(lo, nbar, labels, regions, init_counts, tuple(s in loads for s, _, _ in regions))


def _pair_cta(ref: SmemRef, own_cta: int) -> int | None:
    """The CTA a CTA-local address names when the instruction targets the pair (SmemRef.to), or None (its own)."""
    k = own_cta + 1 if ref.to == "peer" else own_cta - own_cta % 2 if ref.to == "leader" else own_cta
    return None if k == own_cta else k


def _bar_ref(reg: Regions, ref: SmemRef, own_cta: int, body: Body) -> RRef:
    e = ref.addr
    if isinstance(e, RConst):
        cta, off = _local(e.value)
        if cta is None:
            cta = _pair_cta(ref, own_cta)
        k = (off - reg.bar_lo) // BARRIER_BYTES
        if (off - reg.bar_lo) % BARRIER_BYTES or not 0 <= k < reg.nbar:
            raise error("rule", f"PTX line {body.ops[ref.site].line}: a barrier operation on shared memory at offset "
                        f"{off}, where no barrier is", body.span(ref.site))
        return RRef("mbar", (RConst(k),), RConst(cta) if cta is not None and cta != own_cta else None)
    low = ROp("&", (e, RConst((1 << CLUSTER_SHIFT) - 1)))
    idx = ROp(">>", (ROp("-", (low, RConst(reg.bar_lo))), RConst(3)))
    hi = ROp(">>", (e, RConst(CLUSTER_SHIFT)))
    local = _pair_cta(ref, own_cta)
    cta_e = ROp("?:", (hi, ROp("-", (hi, RConst(1))), RConst(own_cta if local is None else local)))
    return RRef("mbar", (idx,), cta_e)


def _buf_index_expr(reg: Regions, a: RExpr) -> RExpr:
    out: RExpr = RConst(len(reg.buffers))
    for k in range(len(reg.buffers) - 1, -1, -1):
        lo, hi, _ = reg.buffers[k]
        out = ROp("?:", (ROp("&&", (ROp(">=", (a, RConst(lo))), ROp("<", (a, RConst(hi))))), RConst(k), out))
    return out


def _buf_ref(reg: Regions, ref: SmemRef, own_cta: int) -> RRef:
    e = ref.addr
    if ref.kind == "desc":  # a wgmma matrix descriptor: start address >> 4 in bits 0..13
        if isinstance(e, RConst):
            e = RConst((e.value & 0x3FFF) << 4)
        else:
            e = ROp("<<", (ROp("&", (e, RConst(0x3FFF))), RConst(4)))
    if isinstance(e, RConst):
        cta, off = _local(e.value)
        if cta is None:
            cta = _pair_cta(ref, own_cta)
        return RRef("smem", (RConst(reg.buffer_index(off)),), RConst(cta) if cta is not None and cta != own_cta else None)
    low = ROp("&", (e, RConst((1 << CLUSTER_SHIFT) - 1)))
    peer = _pair_cta(ref, own_cta)
    return RRef("smem", (_buf_index_expr(reg, low),), None if peer is None else RConst(peer))


def delta_ranges(prog: PtxProgram, code: ClassCode, cta: int, members: tuple[int, ...], config: Config
                 ) -> tuple[tuple[int, int, int], ...]:
    """(access, lo, hi) for each read/write whose address differs among the class's members by their identity
    (`lower.addr_only`): member t's address is the program's (written for thread `code.rep`) plus a delta in lo..hi
    (0 included: the program's own address)."""
    out = []
    rep = identity(prog, cta, code.rep, config)
    idents = [identity(prog, cta, t, config) for t in members if t != code.rep]
    for i, e in sorted(prog.plan.addr_delta.items()):
        if isinstance(e, RConst) or not idents:
            continue
        try:
            r0 = evaluate_for(e, rep)
            ds = [evaluate_for(e, ident) - r0 for ident in idents]
        except (ArithmeticError, KeyError) as exc:
            raise error("rule", f"PTX line {prog.body.ops[i].line}: a thread's address cannot be evaluated ({exc})",
                        prog.body.span(i)) from None
        lo, hi = min(0, *ds), max(0, *ds)
        if (lo, hi) != (0, 0):
            out.append((i, lo, hi))
    return tuple(out)


def _region_of(reg: Regions, a: RExpr) -> RExpr:
    """How many buffer ends lie at or below address a: equal for two addresses exactly when every address
    between them is in one buffer, or in one gap between buffers."""
    out: RExpr = RConst(0)
    for b in reg.edges:
        out = ROp("+", (out, ROp(">=", (a, RConst(b)))))
    return out


def _checked_buf_ref(reg: Regions, ref: SmemRef, own_cta: int, lo: int, hi: int, body: Body) -> RRef:
    """A read/write's buffer for a class whose members' addresses are the program's plus lo..hi: the same for all
    of them, which the program checks where the address is known only at run time (`ir._chk` refuses the run)."""
    r = _buf_ref(reg, ref, own_cta)
    m = (1 << CLUSTER_SHIFT) - 1
    line = body.ops[ref.site].line
    e = ref.addr
    if isinstance(e, RConst):
        a, b = (e.value & m) + lo, (e.value & m) + hi
        ends = reg.edges
        if not (0 <= a and b <= m and sum(a >= x for x in ends) == sum(b >= x for x in ends)):
            raise error("rule", f"PTX line {line}: threads of one class access different buffers here (offsets "
                        f"{a}..{b}): pipecheck cannot model them as one class", body.span(ref.site))
        return r
    low = ROp("&", (e, RConst(m)))
    a, b = ROp("+", (low, RConst(lo))), ROp("+", (low, RConst(hi)))
    ok = ROp("&&", (ROp("&&", (ROp(">=", (a, RConst(0))), ROp("<=", (b, RConst(m))))),
                    ROp("==", (_region_of(reg, a), _region_of(reg, b)))))
    return RRef(r.name, (ROp("chk", (ok, r.indices[0], RConst(line))),), r.cta)


def _resolve(prog: PtxProgram, code: ClassCode, cta: int, ranges: tuple[tuple[int, int, int], ...] = ()) -> Program:
    reg = prog.regions
    assert reg is not None
    spread = {i: (lo, hi) for i, lo, hi in ranges}
    out = []
    for ins in code.instrs:
        args = []
        for a in ins.args:
            if isinstance(a, SmemRef) and a.kind == "buf" and ins.op in (READ, WRITE) and a.site in spread:
                args.append(_checked_buf_ref(reg, a, cta, *spread[a.site], prog.body))
            elif isinstance(a, SmemRef):
                args.append(_bar_ref(reg, a, cta, prog.body) if a.kind == "bar" else _buf_ref(reg, a, cta))
            elif isinstance(a, tuple) and a and isinstance(a[0], tuple) and a[0] and isinstance(a[0][0], SmemRef):
                args.append(tuple(dict.fromkeys((_buf_ref(reg, r, cta), t) for r, t in a)))  # each buffer once
            else:
                args.append(a)
        if ins.op == TMA_LOAD and args[2] is None:
            args[2] = RConst(prog.copy_bytes.get(_flat_of(prog, ins.site), 0))
        out.append(Instr(ins.op, tuple(args), ins.site, ins.target))
    out = _merge_accesses(out)
    return Program(tuple(out), max(1, len(code.slot_names)), tuple(code.slot_names) or ("_",), unrecorded=True)


def _merge_accesses(instrs: list[Instr]) -> list[Instr]:
    """Consecutive shared-memory accesses of one thread to the same buffer (an epilogue's 16 `st.shared` of a
    sub-tile) are one access: nothing another thread could observe happens between them. The repeats become
    jumps to the next instruction (pcs stay where branches expect them)."""
    targets = {i.target for i in instrs if i.op in (JUMP, BRANCH)}
    out = list(instrs)
    last: Instr | None = None
    for pc, ins in enumerate(instrs):
        if pc in targets:
            last = None
        if ins.op in (READ, WRITE):
            if last is not None and last.op == ins.op and last.args == ins.args:
                out[pc] = Instr(JUMP, (), ins.site, pc + 1)
                continue
            last = ins
        elif ins.op not in (LET, JUMP):
            last = None
    return out


def _flat_of(prog: PtxProgram, site: int) -> int:
    inv = prog.cache.get("flat_of")
    if inv is None:
        inv = prog.cache["flat_of"] = {v: k for k, v in prog.site_index.items()}
    return inv.get(site, -1)


def kernel_of(prog: PtxProgram) -> PtxKernel:
    reg = prog.regions
    assert reg is not None
    span = Span(prog.path, prog.entry.line, 1)
    labels = tuple(label for _, _, label in reg.buffers) + ("other shared memory",)
    landed = (reg.landed or (True,) * len(reg.buffers)) + (False,)  # "other shared memory": no copy lands there
    buffers = (BufferDecl("smem", (len(reg.buffers) + 1,), 0, None, span, labels=labels, landed=landed),)
    barriers = (BarrierDecl("mbar", (reg.nbar,), 0, True, span, labels=reg.bar_labels, counts=reg.counts),)
    arch = prog.module.target.split(",")[0] or "sm_90a"
    T = prog.threads
    roles = tuple(PtxRole(f"wg{w}", min(128, T - 128 * w)) for w in range((T + 127) // 128))
    return PtxKernel(prog.sources.kernel_name(prog.entry.name), prog.path, arch, tuple(prog.launch.cluster), buffers,
                     barriers, tuple(prog.params), prog.launch.block, span, roles=roles,
                     bar_offsets=tuple(reg.bar_lo + BARRIER_BYTES * k for k in range(reg.nbar)))


def classes_for(prog: PtxProgram, config: Config, lockstep: bool = False) -> list[ThreadClass]:
    """The thread classes of one configuration, with resolved programs."""
    out: list[ThreadClass] = []
    T = prog.threads
    clustered = math.prod(prog.launch.cluster) > 1
    for cta, wg, members, code in class_codes(prog, config):
        ranges = delta_ranges(prog, code, cta, members, config)
        key = ("prog", id(code), cta, ranges)
        program = prog.cache.get(key)
        if program is None:
            program = _resolve(prog, code, cta, ranges)
            # one object per distinct program: the configurations' classes then compare by identity
            program = prog.cache[key] = prog.cache.setdefault(("program", program), program)
        role_threads = min(128, T - 128 * wg)
        local = [t - 128 * wg for t in members]
        signalling = any(i.op in (ARRIVE, EXPECT_TX, COMPLETE_TX, ARRIVE_DROP, TMA_LOAD, WRITE, TMA_STORE, INIT, INVAL)
                         or (i.op == COLL and i.args[0] == "bar") for i in program.instrs)
        split = signalling or any(i.op == COLL and i.args[0] in ("elect", "syncwarp") for i in program.instrs)
        parts: dict = {}
        for t in local:
            parts.setdefault(t // 32 if split else None, []).append(t)
        for w, mem in sorted(parts.items(), key=lambda kv: kv[1][0]):
            warp = w if w is not None else (mem[0] // 32 if len({t // 32 for t in mem}) == 1 else None)
            label, unit, who = class_label(f"wg{wg}", 1, role_threads, clustered, 0, cta, tuple(mem))
            out.append(ThreadClass(id=len(out), cta=cta, role=wg, role_name=f"wg{wg}", instance=0, members=tuple(mem),
                                   warp=warp, warpgroup=0, program=program, signalling=signalling, label=label,
                                   role_threads=role_threads, instances=1, unit=unit, who=who))
    return out


def configurations(prog: PtxProgram, elect: str) -> list[Config]:
    """Every elected lane of each elect.sync mask (or the one `--elect` fixes), and, in a kernel scheduled by
    cluster launch control, every count 0..CLC_DEFAULT of clusters taken over (`clc` in docs/semantics.md)."""
    masks = prog.masks
    clc = [((CLC_CHOICE, (k,)),) for k in range(CLC_DEFAULT + 1)] if prog.uses_clc else [()]
    if elect == "lowest" or not masks:
        picks = [tuple((m, _lowest(m)) for m in masks)]
    elif elect.isdigit():  # one lane forced where the mask has it (`replay --elect-lane N`)
        lane = int(elect)
        picks = [tuple((m, lane if m >> lane & 1 else _lowest(m)) for m in masks)]
    else:
        lanes = [[k for k in range(32) if m >> k & 1] for m in masks]
        picks = [tuple(zip(masks, pick)) for pick in itertools.product(*lanes)]
    return [Config(pick, c) for c in clc for pick in picks]


CLC_DEFAULT = 2  # a CLC-scheduled CTA runs 1..3 tiles: its own, and up to two clusters' it takes over


def _lowest(m: int) -> int:
    return next((k for k in range(32) if m >> k & 1), 0)


__all__ = ["LaunchOptions", "PtxKernel", "PtxParam", "PtxProgram", "Regions", "classes_for", "configurations",
           "find_regions", "kernel_of", "load_ptx", "SpecError", "field", "WAIT", "MMA", "READ", "TMA_STORE"]
