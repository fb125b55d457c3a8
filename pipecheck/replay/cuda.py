"""A spec at fixed parameters, elected lane and choices -> one self-contained CUDA program.

The program runs the spec's roles as warps of one CTA (or of each CTA of a cluster), with
every mbarrier wait bounded, and prints its outcome as JSON (outcome.py, docs/replay.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

from ..core.diagnostics import Span, SpecError, error
from ..lang.check import CheckedKernel
from ..lang.consts import binop
from ..lang.lower import RoleCode, resolve_roles
from ..model.ir import RBuiltin, RChoice, RConst, RElect, RExpr, ROp, RRef, RRing, RVar, Site
from ..model.ir import (TCGEN05_OPS, ARRIVE, ARRIVE_DROP, BAR_ARRIVE, COMMIT_GROUP, COMPLETE_TX, CP_ASYNC, CP_ASYNC_ARRIVE,
                        EXPECT_TX, FENCE_INIT, FENCE_PROXY, INIT, INVAL, MMA, MMA_COMMIT, MMA_WAIT, READ, TMA_LOAD,
                        TMA_STORE, WAIT, WAIT_GROUP, WRITE)
from ..model.threads import FULL_MASK, lowest_lane
from ..pipeline.verify import load_checked

SMEM_LIMIT = 227 * 1024  # SEMANTICS 6: per-block SMEM of sm_90
NTAG = 64  # tile tags are kept modulo this many global source regions
SAMPLES = 16  # words each reading thread checks per buffer
MAX_STORES = 4096


@dataclass(frozen=True)
class ReplayOptions:
    overrides: tuple[tuple[str, int], ...] = ()
    elect_lane: int | None = None  # None: the lowest lane of each mask (what the H200 does)
    choices: tuple[tuple[str, tuple[int, ...]], ...] = ()
    wait_cycles: int = 1 << 26  # budget of one bounded mbarrier wait (clock64 cycles)
    host_timeout_ms: int = 2000  # the watchdog for waits that cannot be bounded (bar.sync, elect, cluster barrier)


@dataclass
class Emitted:
    """The program and what the runner and the conformance test need to know about it."""

    source: str
    config: dict  # {"params", "elect_lane", "choices"}: the configuration replayed
    kernel: CheckedKernel
    notes: list[str] = field(default_factory=list)


def refuse(construct: str, why: str, span: Span | None) -> SpecError:
    return error("replay", f"replay cannot run {construct} on sm_90 faithfully: {why}", span)


# ---------------------------------------------------------------- layout


@dataclass(frozen=True)
class _Layout:
    bar_base: dict[str, int]  # byte offset of element 0
    buf_base: dict[str, int]
    buf_stride: dict[str, int]  # bytes between elements (>= declared bytes and >= any load into it)
    buf_words: dict[str, int]  # words a read checks (the smallest load into the buffer, else its size)
    total: int


def _count(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


# ---------------------------------------------------------------- emitter


class _Emitter:
    def __init__(self, k: CheckedKernel, codes: list[RoleCode], sites: list[Site], opts: ReplayOptions):
        self.k = k
        self.codes = codes
        self.sites = sites
        self.opts = opts
        self.lines: list[str] = []
        self.ind = 1
        self.used_sites: dict[int, int] = {}
        self.notes: list[str] = []
        self.bars = {b.name: b for b in k.barriers}
        self.bufs = {b.name: b for b in k.buffers}
        self.choices = dict(opts.choices)
        self.role_choose: dict[str, int] = {}
        self.code: RoleCode | None = None  # the role being emitted
        self.lay = self.layout()

    # -- helpers
    def span(self, site: int) -> Span | None:
        return self.sites[site].span if 0 <= site < len(self.sites) else None

    def sid(self, site: int) -> int:
        return self.used_sites.setdefault(site, len(self.used_sites))

    def out(self, text: str) -> None:
        self.lines.append("  " * self.ind + text)

    def const(self, e: RExpr | None, what: str, site: int) -> int:
        v = _fold(e)
        if v is not None:
            return v
        raise refuse(what, "its value must be a constant at fixed parameters (an immediate operand in PTX)", self.span(site))

    def expr(self, e: RExpr | None) -> str:
        if e is None:
            return "0"
        if isinstance(e, RConst):
            return f"{int(e.value)}LL"
        if isinstance(e, RVar):
            return f"v{e.slot}"
        if isinstance(e, RBuiltin):
            return f"b_{e.name}"
        if isinstance(e, RElect):
            return f"el{e.site}"
        if isinstance(e, RRing):
            phase0 = e.phase0 if isinstance(e.phase0, int) else self.expr(e.phase0)
            if e.attr == "count":
                return f"v{e.slot}"
            if e.attr == "index":
                return f"(v{e.slot} % {e.stages}LL)"
            return f"(((v{e.slot} / {e.stages}LL) + ({phase0})) & 1LL)"
        if isinstance(e, RChoice):
            decl = next(c for c in self.k.kchooses if c.name == e.name)
            flat = "0LL"
            for i, d in zip(e.index, decl.dims):
                flat = f"(({flat}) * {d}LL + ({self.expr(i)}))"
            return f"kc_{e.name}[{flat}]"
        if isinstance(e, ROp):
            a = [self.expr(x) for x in e.args]
            if len(a) == 1:
                return f"({e.op}{a[0]})" if e.op != "!" else f"((long long)!({a[0]}))"
            if e.op == "?:":
                return f"(({a[0]}) ? ({a[1]}) : ({a[2]}))"
            if e.op in ("min", "max"):
                return f"pc_{e.op}({a[0]}, {a[1]})"
            if e.op in ("&&", "||", "==", "!=", "<", "<=", ">", ">="):
                return f"((long long)(({a[0]}) {e.op} ({a[1]})))"
            return f"(({a[0]}) {e.op} ({a[1]}))"
        raise TypeError(e)

    def flat(self, ref: RRef, dims: tuple[int, ...]) -> str:
        f = "0LL"
        for i, d in zip(ref.indices, dims):
            f = f"(({f}) * {d}LL + ({self.expr(i)}))"
        return f

    def bar_addr(self, ref: RRef) -> str:
        b = self.bars[ref.name]
        return f"(smem_base + {self.lay.bar_base[b.name]}u + 8u * (unsigned)({self.flat(ref, b.dims)}))"

    def buf_addr(self, ref: RRef) -> str:
        b = self.bufs[ref.name]
        return f"(smem_base + {self.lay.buf_base[b.name]}u + {self.lay.buf_stride[b.name]}u * (unsigned)({self.flat(ref, b.dims)}))"

    def remote(self, ref: RRef) -> str | None:
        return None if ref.cta is None else self.expr(ref.cta)

    # -- layout
    def layout(self) -> _Layout:
        k = self.k
        bar_base: dict[str, int] = {}
        off = 0
        for b in k.barriers:
            bar_base[b.name] = off
            off += 8 * _count(b.dims)
        off = _align(max(off, 16), 128)
        loads: dict[str, list[int]] = {}
        for code in self.codes:
            self._collect_loads(code.body, loads)
        buf_base: dict[str, int] = {}
        stride: dict[str, int] = {}
        words: dict[str, int] = {}
        for b in k.buffers:
            if b.space != "smem":
                raise refuse(f"TMEM buffer '{b.name}'", "tensor memory exists on sm_100 only", b.span)
            sizes = loads.get(b.name, [])
            stride[b.name] = _align(max([b.bytes] + sizes), 128)
            words[b.name] = max(1, min([b.bytes] + sizes) // 4)
            if b.over is not None:
                continue
            buf_base[b.name] = off
            off += stride[b.name] * _count(b.dims)
        for b in k.buffers:
            if b.over is None:
                continue
            target, lead = b.over
            if target not in buf_base:
                raise refuse(f"'smem {b.name} ... over {target}'", "only a buffer over another buffer is replayed "
                             "(a buffer over barrier memory needs inval and re-init of the same bytes)", b.span)
            tb = self.bufs[target]
            idx = 0
            for i, d in zip(lead + (0,) * (len(tb.dims) - len(lead)), tb.dims):
                idx = idx * d + i
            buf_base[b.name] = buf_base[target] + stride[target] * idx
        if off > SMEM_LIMIT:
            raise refuse("this spec", f"its buffers need {off} bytes of SMEM, more than the {SMEM_LIMIT} of one block",
                         k.span)
        return _Layout(bar_base, buf_base, stride, words, off)

    def _collect_loads(self, body, loads: dict[str, list[int]]) -> None:
        for s in body:
            if s[0] == "block":
                self._collect_loads(s[1], loads)
            elif s[0] == "for":
                self._collect_loads(s[4], loads)
            elif s[0] == "if":
                self._collect_loads(s[2], loads)
                self._collect_loads(s[3], loads)
            elif s[0] == "op" and s[1] in (TMA_LOAD, CP_ASYNC):
                ref = s[2][0]
                n = s[2][2] if s[1] == TMA_LOAD else None
                if n is None:
                    loads.setdefault(ref.name, [])
                    continue
                nbytes = self.const(n, "a tma_load whose byte count", s[3])
                if nbytes <= 0 or nbytes % 16:
                    raise refuse(f"a tma_load of {nbytes} bytes", "cp.async.bulk copies a positive multiple of 16 bytes",
                                 self.span(s[3]))
                loads.setdefault(ref.name, []).append(nbytes)

    # -- statements
    def block(self, body) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: tuple) -> None:
        kind = s[0]
        if kind == "block":
            self.block(s[1])
        elif kind == "let":
            _, slot, v, site = s
            self.out(f"v{slot} = {self.expr(v)};")
        elif kind == "choose":
            _, slot, lo, hi, site = s
            assert self.code is not None
            name = self.code.slot_names[slot]
            lo_v, hi_v = self.const(lo, f"choose {name}'s range", site), self.const(hi, f"choose {name}'s range", site)
            if name in self.choices:
                val = self.choices[name][0]
                if not lo_v <= val <= hi_v:
                    raise error("usage", f"--choose {name}={val} is outside {lo_v}..{hi_v}", self.span(site))
            else:
                val = lo_v
            self.role_choose[name] = val
            self.out(f"v{slot} = {val}LL;  // choose {name} in {lo_v}..{hi_v}: fixed for this replay")
        elif kind == "ring":
            self.out(f"v{s[1]} = 0;")
        elif kind == "advance":
            self.out(f"++v{s[1]};")
        elif kind == "for":
            _, slot, lo, hi, body, site = s
            self.out(f"for (v{slot} = {self.expr(lo)}; v{slot} < {self.expr(hi)}; ++v{slot}) {{")
            self.ind += 1
            self.block(body)
            self.ind -= 1
            self.out("}")
        elif kind == "if":
            _, cond, then, other, site = s
            self.out(f"if ({self.expr(cond)}) {{")
            self.ind += 1
            self.block(then)
            self.ind -= 1
            if other:
                self.out("} else {")
                self.ind += 1
                self.block(other)
                self.ind -= 1
            self.out("}")
        elif kind == "coll":
            self.coll(s[1], s[2])
        elif kind == "op":
            self.op(s[1], s[2], s[3])
        elif kind == "exit":
            self.out(f"PC_AT({self.sid(s[1])}); return;  // exit")
        elif kind == "break":
            self.out("break;")
        else:
            raise AssertionError(kind)

    def coll(self, key: tuple, site: int) -> None:
        sid = self.sid(site)
        what = key[0]
        if what == "elect":
            _, mask, esite = key
            lane = self.opts.elect_lane if self.opts.elect_lane is not None else lowest_lane(mask)
            if not mask >> lane & 1:
                raise error("usage", f"--elect-lane {lane} is not in elect's member mask {mask:#010x}", self.span(site))
            sub = mask & ~((1 << lane) - 1) & FULL_MASK
            # All lanes of the mask meet (elect.sync is warp-collective); then the lanes at or
            # above the forced lane elect among themselves: elect.sync picks the lowest lane of
            # its mask on the H200, so that is the forced lane. Lanes below it are non-elected.
            self.out(f"el{esite} = 0;")
            self.out(f"if (({mask:#x}u >> b_lane) & 1u) {{ PC_COLL({sid}); __syncwarp({mask:#x}u); PC_AT({sid}); }}")
            self.out(f"if (({sub:#x}u >> b_lane) & 1u) el{esite} = pc_elect({sub:#x}u);")
            self.out(f"if (el{esite} && b_lane != {lane}) pc_record_elect(slot, {sid}, (int)b_lane);")
        elif what == "syncwarp":
            self.out(f"if (({key[1]:#x}u >> b_lane) & 1u) {{ PC_COLL({sid}); __syncwarp({key[1]:#x}u); PC_AT({sid}); }}")
        elif what == "syncthreads":
            self.out(f"PC_COLL({sid}); asm volatile(\"bar.sync 0;\" ::: \"memory\"); PC_AT({sid});")
        elif what == "cluster_sync":
            self.out(f"PC_COLL({sid}); asm volatile(\"barrier.cluster.arrive.release;\\n\\tbarrier.cluster.wait.acquire;\" ::: \"memory\"); PC_AT({sid});")
        elif what == "setmaxnreg":
            raise refuse(f"'setmaxnreg {key[1]} {key[2]}'", "it needs every warp of the warpgroup at the statement, "
                         "which the replay's bounded waits cannot promise (a warp that gave up a wait skips it), and "
                         "the replayed kernel is not compiled for a register budget", self.span(site))
        elif what == "bar":
            bid, n = self.bar_operands(key[1], key[2], "bar_sync", site)
            self.out(f"PC_COLL({sid}); asm volatile(\"bar.sync %0, %1;\" :: \"r\"({bid}), \"r\"({n}) : \"memory\"); PC_AT({sid});")
        else:
            raise refuse(f"'{what}'", "no PTX counterpart in the replay", self.span(site))

    def bar_operands(self, bid_e: RExpr, n_e: RExpr, what: str, site: int) -> tuple[str, str]:
        """C++ operands of bar.sync / bar.arrive. PTX takes the id and the count in registers, so
        they may differ per role instance (FA3's `bar_sync 9 + instance, 256`); each instance's
        values must be known here, so that every one is checked against the PTX rules."""
        assert self.code is not None
        role = self.k.roles[self.code.role_index]
        pairs = set()
        for inst in range(role.instances):
            bid, n = _fold(bid_e, inst), _fold(n_e, inst)
            if bid is None or n is None:
                raise refuse(f"{what} with this barrier id or thread count", "each role instance's value must be a "
                             "constant at fixed parameters (it may depend on `instance` only)", self.span(site))
            pairs.add((bid, n))
        for bid, n in sorted(pairs):
            if not 0 <= bid <= 15:
                raise refuse(f"{what} {bid}, {n}", "named barrier ids are 0..15", self.span(site))
            if n <= 0 or n % 32:
                raise refuse(f"{what} {bid}, {n}", "PTX bar counts whole warps (a positive multiple of 32)",
                             self.span(site))
        ids, counts = {b for b, _ in pairs}, {n for _, n in pairs}
        return (str(next(iter(ids))) if len(ids) == 1 else f"(unsigned)({self.expr(bid_e)})",
                str(next(iter(counts))) if len(counts) == 1 else f"(unsigned)({self.expr(n_e)})")

    def op(self, op: str, args: tuple, site: int) -> None:
        sid = self.sid(site)
        text = self.sites[site].text if 0 <= site < len(self.sites) else op
        self.out(f"// {text}")
        if op == WAIT:
            ref, parity = args
            self.out(f"{{ const unsigned bar = {self.bar_addr(ref)}, par = (unsigned)({self.expr(parity)}) & 1u;")
            self.out(f"  if (!pc_wait(bar, par, wait_cycles)) {{ pc_record_hang(slot, {sid}, bar - smem_base, par); "
                     f"pc_give_up(); return; }} }}")
        elif op == ARRIVE:
            ref, count, tx = args
            r = self.remote(ref)
            cnt = self.expr(count)
            if tx is not None:
                if isinstance(count, RConst) and count.value == 1:
                    self.out(f"pc_arrive_tx({self.bar_addr(ref)}, (unsigned)({self.expr(tx)}), {r or '-1'});")
                    return
                self.out(f"pc_expect_tx({self.bar_addr(ref)}, (unsigned)({self.expr(tx)}), {r or '-1'});")
            self.out(f"pc_arrive({self.bar_addr(ref)}, (unsigned)({cnt}), {r or '-1'});")
        elif op == EXPECT_TX:
            ref, nbytes = args
            self.out(f"pc_expect_tx({self.bar_addr(ref)}, (unsigned)({self.expr(nbytes)}), {self.remote(ref) or '-1'});")
        elif op == COMPLETE_TX:
            ref, nbytes = args
            self.out(f"pc_complete_tx({self.bar_addr(ref)}, (unsigned)({self.expr(nbytes)}), {self.remote(ref) or '-1'});")
        elif op == ARRIVE_DROP:
            ref, count = args
            if ref.cta is not None:
                raise refuse("a remote arrive_drop", "mbarrier.arrive_drop on another CTA is not emitted", self.span(site))
            self.out(f"pc_arrive_drop({self.bar_addr(ref)}, (unsigned)({self.expr(count)}));")
        elif op == TMA_LOAD:
            buf, tile, nbytes, bar, mcast = args[:5]
            if bar.cta is not None and buf.cta is None:
                raise refuse("'tma_load ... cta_group 2' (the SM100 2-SM load: lands in the issuing CTA and completes "
                             "on its pair leader's barrier)", "cta_group::2 copies are sm_100 only", self.span(site))
            if bar.cta is not None or buf.cta is not None:
                raise refuse("'tma_load ... on cta' (a TMA load landing in a peer CTA's shared memory and barrier, "
                             "the 2-SM load)", "the generated copies land in the issuing CTA only", self.span(site))
            self.out(f"pc_tma_load({self.buf_addr(buf)}, {self.buf_id(buf.name)}, gsrc, {self.expr(tile)}, (unsigned)({self.expr(nbytes)}), "
                     f"{self.bar_addr(bar)}, {self.expr(mcast) if mcast is not None else '-1'});")
        elif op == READ:
            buf, tile = args
            self.read(buf, tile, sid)
        elif op == WRITE:
            buf, tile = args
            words = self.lay.buf_stride[buf.name] // 4
            bid = self.buf_id(buf.name)
            self.out(f"pc_write({self.buf_addr(buf)}, {bid}, {words}, {self.expr(tile)});")
            self.out(f"last_tag[{bid}] = pc_tag({bid}, {self.expr(tile)});")
        elif op == TMA_STORE:
            buf, tile = args[0], args[1]
            nbytes = self.bufs[buf.name].bytes
            if nbytes % 16:
                raise refuse(f"a tma_store of {nbytes} bytes", "cp.async.bulk copies a multiple of 16 bytes", self.span(site))
            expect = f"pc_tag({self.buf_id(buf.name)}, {self.expr(tile)})" if tile is not None else f"last_tag[{self.buf_id(buf.name)}]"
            self.out(f"pc_tma_store({self.buf_addr(buf)}, {nbytes}u, {expect}, {sid}, slot, gdst, stores, nstores);")
        elif op == COMMIT_GROUP:
            self.out("asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\");")
        elif op == WAIT_GROUP:
            n = self.const(args[0], "wait_group's pending count", site)
            read = ".read" if args[1] else ""
            self.out(f"asm volatile(\"cp.async.bulk.wait_group{read} {n};\" ::: \"memory\");")
        elif op == FENCE_PROXY:
            self.out("asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");")
        elif op == FENCE_INIT:
            self.out("asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");")
        elif op == INIT:
            ref, count = args
            if ref.cta is not None:
                raise refuse("'init ... on cta'", "mbarrier.init reaches the CTA's own SMEM only", self.span(site))
            self.out(f"asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\" :: \"r\"({self.bar_addr(ref)}), "
                     f"\"r\"((unsigned)({self.expr(count)})) : \"memory\");")
        elif op == INVAL:
            self.out(f"asm volatile(\"mbarrier.inval.shared::cta.b64 [%0];\" :: \"r\"({self.bar_addr(args[0])}) : \"memory\");")
        elif op == BAR_ARRIVE:
            bid, n = self.bar_operands(args[0], args[1], "bar_arrive", site)
            self.out(f"asm volatile(\"bar.arrive %0, %1;\" :: \"r\"({bid}), \"r\"({n}) : \"memory\");")
        elif op == MMA:
            operands, outs, group = args
            if group == 2:
                raise refuse("'mma_async ... cta_group 2' (tcgen05.mma.cta_group::2: one MMA over a CTA pair)",
                             "tcgen05 does not exist on the H200", self.span(site))
            if not self.k.arch.startswith("sm_90"):
                raise refuse("mma_async on sm_100 (tcgen05.mma / UMMA)", "tcgen05 does not exist on the H200", self.span(site))
            if outs:
                raise refuse("mma_async with an output operand", "TMEM accumulators are sm_100 only", self.span(site))
            # wgmma reads its SMEM operands asynchronously until wgmma.wait_group; the replay
            # checks them synchronously at issue (docs/replay.md: approximations).
            for ref, tile in operands:
                if tile is not None:
                    self.read(ref, tile, sid)
            self.out("pc_mma_issued(pc_wgc); ++mma_n;")
        elif op == MMA_WAIT:
            # wgmma.wait_group: the MMAs it retires were checked at issue by every thread of the
            # warpgroup; wait until all of them have been (the MMA is one warpgroup operation)
            self.out(f"pc_mma_wait(pc_wgc, pc_wgm * (mma_n - ({self.expr(args[0])})), wait_cycles);")
        elif op == MMA_COMMIT:
            raise refuse("mma_commit (tcgen05.commit)", "tcgen05 does not exist on the H200", self.span(site))
        elif op == CP_ASYNC:
            buf, tile = args[0], args[1]
            self.out(f"pc_cp_async({self.buf_addr(buf)}, {self.buf_id(buf.name)}, gsrc, {self.expr(tile)}, {self.lay.buf_stride[buf.name] // 4}u);")
        elif op == CP_ASYNC_ARRIVE:
            ref = args[0]
            self.out(f"asm volatile(\"cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\" :: \"r\"({self.bar_addr(ref)}) : \"memory\");")
        elif op in TCGEN05_OPS:
            raise refuse(f"'{op}' (tcgen05)", "tcgen05 does not exist on the H200 (sm_90a)", self.span(site))
        else:
            raise refuse(f"'{op}'", "no PTX counterpart in the replay", self.span(site))

    def read(self, buf: RRef, tile: RExpr, sid: int) -> None:
        words = self.lay.buf_words[buf.name]
        self.out(f"pc_read({self.buf_addr(buf)}, {self.buf_id(buf.name)}, {words}, {self.expr(tile)}, b_thread, slot, {sid});")

    def buf_id(self, name: str) -> int:
        return [b.name for b in self.k.buffers].index(name)

    # -- the program
    def role_fn(self, code: RoleCode) -> list[str]:
        self.code = code
        role = self.k.roles[code.role_index]
        self.lines = []
        self.ind = 1
        self.block(code.body)
        body = self.lines
        nvars = len(code.slot_names)
        esites = sorted({int(x) for x in _elect_sites(code.body)})
        head = [f"__device__ __forceinline__ void role_{code.role_index}(  // role {role.name}",
                "    unsigned smem_base, const int4* gsrc, int4* gdst, int* stores, unsigned* nstores,",
                "    long long wait_cycles, int slot, unsigned* last_tag, long long b_thread, long long b_instance,",
                "    long long b_cta, long long b_cta_x, long long b_cta_y) {",
                "  const long long b_lane = b_thread % 32, b_warp = b_thread / 32, b_warpgroup = b_thread / 128;",
                "  (void)b_lane; (void)b_warp; (void)b_warpgroup; (void)b_instance; (void)b_cta; (void)b_cta_x; (void)b_cta_y;"]
        if nvars:
            head.append("  long long " + ", ".join(f"v{i} = 0" for i in range(nvars)) + ";")
        if esites:
            head.append("  int " + ", ".join(f"el{i} = 0" for i in esites) + ";")
        if _has(code.body, "op", MMA) or _has(code.body, "op", MMA_WAIT):
            # this thread's warpgroup: its operand-check counter and how many threads it has
            head += ["  unsigned* const pc_wgc = pc_wg_reads + ((slot % PC_THREADS) - (int)(b_thread % 128)) / 32;",
                     f"  const long long pc_wgm = pc_min(128LL, {role.threads}LL - 128LL * b_warpgroup);",
                     "  long long mma_n = 0;"]
        return head + body + ["}"]


def _fold(e: RExpr | None, instance: int | None = None) -> int | None:
    """The value of an expression over constants only (parameters are constants here), and
    over the builtin `instance` when its value is given."""
    if isinstance(e, RConst):
        return int(e.value)
    if isinstance(e, RBuiltin) and e.name == "instance" and instance is not None:
        return instance
    if not isinstance(e, ROp):
        return None
    args = [_fold(a, instance) for a in e.args]
    if any(a is None for a in args):
        return None
    vals: list[int] = [a for a in args if a is not None]
    if len(vals) == 1:
        return -vals[0] if e.op == "-" else int(not vals[0])
    if e.op == "?:":
        return vals[1] if vals[0] else vals[2]
    if e.op in ("min", "max"):
        return min(vals) if e.op == "min" else max(vals)
    if e.op == "&&":
        return int(bool(vals[0]) and bool(vals[1]))
    if e.op == "||":
        return int(bool(vals[0]) or bool(vals[1]))
    try:
        return binop(e.op, vals[0], vals[1], Span("", 0, 0))
    except SpecError:
        return None


def _sm100_form(s: tuple) -> str | None:
    """What makes a resolved op sm_100-only beyond its opcode: a CTA pair's MMA or 2-SM load (`cta_group 2`),
    cluster launch control (`try_cancel`); None for others."""
    if s[1] == MMA and s[2][2] == 2:
        return "tcgen05.mma.cta_group::2: one MMA over a CTA pair"
    if s[1] == TMA_LOAD and len(s[2]) > 5:
        return "clusterlaunchcontrol.try_cancel"
    if s[1] == TMA_LOAD and s[2][3].cta is not None and s[2][0].cta is None:
        return "the 2-SM load completing on the pair leader's barrier"
    return None


def _first_op(body, ops) -> tuple[str, int] | None:
    """The first statement of a resolved body whose op is one of `ops` or an sm_100-only form: (op, site)."""
    for s in body:
        hit = None
        if s[0] == "op":
            hit = (s[1], s[3]) if s[1] in ops or _sm100_form(s) else None
        elif s[0] == "block":
            hit = _first_op(s[1], ops)
        elif s[0] == "for":
            hit = _first_op(s[4], ops)
        elif s[0] == "if":
            hit = _first_op(s[2], ops) or _first_op(s[3], ops)
        if hit is not None:
            return hit
    return None


def _elect_sites(body) -> list[int]:
    out: list[int] = []
    for s in body:
        if s[0] == "coll" and s[1][0] == "elect":
            out.append(s[1][2])
        elif s[0] == "block":
            out += _elect_sites(s[1])
        elif s[0] == "for":
            out += _elect_sites(s[4])
        elif s[0] == "if":
            out += _elect_sites(s[2]) + _elect_sites(s[3])
    return out


def emit(path: str, opts: ReplayOptions = ReplayOptions()) -> Emitted:
    """Emit the CUDA program replaying `path`; raises SpecError (code `replay` when refused)."""
    sources: dict[str, str] = {}
    k = load_checked(path, dict(opts.overrides), sources)
    if opts.elect_lane is not None and not 0 <= opts.elect_lane < 32:
        raise error("usage", f"--elect-lane {opts.elect_lane} is not a lane (0..31)", None)
    codes, sites = resolve_roles(k, sources)
    for code in codes:  # an sm_100-only statement is named before the arch (the spec would not run on sm_90)
        hit = _first_op(code.body, TCGEN05_OPS)
        if hit is not None:
            raise refuse(f"'{sites[hit[1]].text}' (sm_100 only)", "tcgen05, CTA-pair (cta_group::2) forms and "
                         "cluster launch control do not exist on the H200 (sm_90a)", sites[hit[1]].span)
    if not k.arch.startswith("sm_90"):
        raise refuse(f"a spec for {k.arch}", "the replay targets the H200 (sm_90a)", k.span)
    em = _Emitter(k, codes, sites, opts)
    kchoice_vals = _kernel_choices(k, em.choices)
    fns: list[str] = []
    for code in codes:
        fns += em.role_fn(code)
    src = _program(k, em, fns, kchoice_vals, opts, path)
    config = {"params": {p.name: p.value for p in k.params},
              "elect_lane": opts.elect_lane,
              "choices": {**{n: list(v) for n, v in kchoice_vals.items()}, **{n: [v] for n, v in sorted(em.role_choose.items())}}}
    return Emitted(src, config, k, em.notes)


def _kernel_choices(k: CheckedKernel, given: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for c in k.kchooses:
        n = _count(c.dims)
        vals = given.get(c.name, (c.lo,))
        if len(vals) == 1:
            vals = vals * n
        if len(vals) != n:
            raise error("usage", f"--choose {c.name} needs 1 or {n} values, not {len(vals)}", c.span)
        for v in vals:
            if not c.lo <= v <= c.hi:
                raise error("usage", f"--choose {c.name}: {v} is outside {c.lo}..{c.hi}", c.span)
        out[c.name] = tuple(vals)
    return out


def role_threads(threads: int) -> int:
    """Threads a role instance occupies: whole warps, so `lane` is the hardware lane."""
    return _align(threads, 32)


def _program(k: CheckedKernel, em: _Emitter, fns: list[str], kchoices: dict[str, tuple[int, ...]],
             opts: ReplayOptions, path: str) -> str:
    from .prelude import PRELUDE, host_main

    roles = []
    start = 0
    for ri, role in enumerate(k.roles):
        padded = role_threads(role.threads)
        roles.append((ri, role, start, padded))
        start += padded * role.instances
    nthreads = start
    if nthreads > 1024:
        raise refuse("this spec", f"its roles need {nthreads} threads (whole warps per role instance), more than 1024",
                     k.span)
    uses_syncthreads = any(_has(c.body, "coll", "syncthreads") for c in em.codes)
    if uses_syncthreads and any(r.threads % 32 for r in k.roles):
        raise refuse("syncthreads with a role that is not whole warps",
                     "the padding lanes of a partial warp would not take part in bar.sync 0", k.span)
    cx = k.cluster[0]
    cy = k.cluster[1] if len(k.cluster) > 1 else 1
    csize = cx * cy
    sites = [(em.sites[s].span, em.sites[s].text) for s, _ in sorted(em.used_sites.items(), key=lambda kv: kv[1])]
    site_table = ",\n  ".join(json.dumps(f"{sp}" if sp else "?") + ", " + json.dumps(t) for sp, t in sites) or '"?", "?"'
    role_table = ",\n  ".join(f"{{{json.dumps(r.name)}, {start}, {padded}, {r.threads}, {r.instances}}}"
                              for ri, r, start, padded in roles)
    lines = [f"// Generated by `pipecheck replay` from {path}; edits are lost on the next emission.",
             f"// kernel {k.name}: {', '.join(f'{p.name}={p.value}' for p in k.params) or 'no parameters'}; "
             f"elect lane {opts.elect_lane if opts.elect_lane is not None else 'lowest of the mask'}",
             f"#define PC_THREADS {nthreads}",
             f"#define PC_CLUSTER {csize}",
             f"#define PC_CX {cx}",
             f"#define PC_CY {cy}",
             f"#define PC_SMEM {max(em.lay.total, 128)}",
             f"#define PC_NTAG {NTAG}",
             f"#define PC_SAMPLES {SAMPLES}",
             f"#define PC_MAX_STORES {MAX_STORES}",
             f"#define PC_NBUF {max(1, len(k.buffers))}",
             f"#define PC_NSITES {max(1, len(sites))}",
             f"#define PC_NROLES {len(roles)}",
             f"#define PC_REGION {max([em.lay.buf_stride[b.name] for b in k.buffers] + [16])}",
             f"#define PC_WAIT_CYCLES {opts.wait_cycles}LL",
             f"#define PC_HOST_TIMEOUT_MS {opts.host_timeout_ms}",
             PRELUDE,
             f"static const char* const pc_sites[] = {{\n  {site_table}\n}};",
             f"static const PcRole pc_roles[] = {{\n  {role_table}\n}};",
             "static const char* const pc_buffers[] = {" + (", ".join(json.dumps(b.name) for b in k.buffers) or '"?"') + "};",
             f"#define PC_NBARS {max(1, len(k.barriers))}",
             "static const PcBarrier pc_barriers[] = {" + (", ".join(
                 f"{{{json.dumps(b.name)}, {em.lay.bar_base[b.name]}, {_count(b.dims)}}}" for b in k.barriers)
                 or '{"?", -8, 0}') + "};",
             f"static const char* const pc_spec = {json.dumps(path)};",
             f"static const char* const pc_config = {json.dumps(json.dumps(_config_json(k, opts, kchoices, em), sort_keys=True))};"]
    for name, vals in kchoices.items():
        lines.append(f"__device__ const long long kc_{name}[{len(vals)}] = {{{', '.join(f'{v}LL' for v in vals)}}};")
    lines += fns
    cluster_attr = f"__cluster_dims__({cx}, {cy}, 1) " if csize > 1 else ""
    lines += [f"extern \"C\" __global__ void {cluster_attr}__launch_bounds__(PC_THREADS) pc_kernel(",
              "    const int4* gsrc, int4* gdst, int* stores, unsigned* nstores, PcSlot* slots, long long wait_cycles) {",
              "  extern __shared__ __align__(1024) unsigned char smem[];",
              "  __shared__ unsigned last_tag[PC_NBUF];",
              "  const unsigned smem_base = (unsigned)__cvta_generic_to_shared(smem);",
              "  const int tid = threadIdx.x;",
              "  const unsigned rank = pc_cluster_rank();",
              "  const int slot = (int)rank * PC_THREADS + tid;",
              "  // every buffer starts out holding no tile; barriers are initialised at kernel start",
              "  for (int i = tid; i < PC_SMEM / 4; i += blockDim.x) ((unsigned*)smem)[i] = PC_FRESH;",
              "  if (tid < PC_NBUF) last_tag[tid] = PC_FRESH;",
              "  if (tid < 32) pc_wg_reads[tid] = 0;",
              "  pc_slots[slot].start_ns = pc_now_ns();"]
    for b in k.barriers:
        if b.noinit:
            continue
        n = _count(b.dims)
        count = f"{b.count}u"
        for rank in range(len(b.per_cta) - 1, 0, -1):  # a count that depends on the CTA: chosen by cluster rank
            count = f"(rank == {rank}u ? {b.per_cta[rank]}u : {count})"
        lines.append(f"  if (tid == 0) for (int i = 0; i < {n}; ++i) pc_init(smem_base + {em.lay.bar_base[b.name]}u + 8u * i, {count});")
    lines += ["  asm volatile(\"fence.mbarrier_init.release.cluster;\" ::: \"memory\");",
              "  asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");",
              "  __syncthreads();"]
    if csize > 1:
        lines.append("  asm volatile(\"barrier.cluster.arrive.release;\\n\\tbarrier.cluster.wait.acquire;\" ::: \"memory\");")
    lines.append("  PC_AT(-1);")
    for ri, role, start, padded in roles:
        end = start + padded * role.instances
        lines += [f"  if (tid >= {start} && tid < {end}) {{",
                  f"    const int inst = (tid - {start}) / {padded}, t = (tid - {start}) % {padded};",
                  f"    if (t < {role.threads}) role_{ri}(smem_base, gsrc, gdst, stores, nstores, wait_cycles, slot, last_tag, "
                  f"t, inst, rank, rank % {cx}, (rank / {cx}) % {cy});",
                  "  }"]
    lines += ["  slots[slot].state = PC_DONE;", "  __threadfence_system();", "}", host_main()]
    return "\n".join(lines) + "\n"


def _config_json(k: CheckedKernel, opts: ReplayOptions, kchoices: dict, em: _Emitter) -> dict:
    return {"params": {p.name: p.value for p in k.params}, "elect_lane": opts.elect_lane,
            "choices": {**{n: list(v) for n, v in kchoices.items()}, **{n: [v] for n, v in sorted(em.role_choose.items())}}}


def _has(body, kind: str, what: str) -> bool:
    """Whether a resolved body holds a statement `(kind, what, ...)`: an op by opcode, a collective by name."""
    for s in body:
        if s[0] == kind and (s[1] if kind == "op" else s[1][0]) == what:
            return True
        if s[0] == "block" and _has(s[1], kind, what):
            return True
        if s[0] == "for" and _has(s[4], kind, what):
            return True
        if s[0] == "if" and (_has(s[2], kind, what) or _has(s[3], kind, what)):
            return True
    return False
