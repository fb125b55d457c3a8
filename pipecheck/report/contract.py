"""The protocol contract behind `explain` and `graph`: per barrier, which classes initialise,
arrive, complete tx and wait, read off the lowered programs; `protocol_graph` draws it as
roles -> barriers -> roles.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.words import join_words
from ..lang.check import CheckedKernel
from ..model.ir import (ADVANCE, ARRIVE, ARRIVE_DROP, BRANCH, CHOOSE, COMMIT_GROUP, COMPLETE_TX, CP_ASYNC_ARRIVE, END,
                        EXPECT_TX, FENCE_PROXY, INIT, INVAL, JUMP, LET, MMA, MMA_COMMIT, MMA_WAIT, RING, TMA_LOAD,
                        TMA_STORE, WAIT, WAIT_GROUP, WRITE, EvalError, Instr, RExpr, ROp, RRef, RRing, compile_expr)
from ..model.threads import ThreadClass

if TYPE_CHECKING:
    import networkx as nx


# Each thread class's program is run on its own, every wait assumed to pass: no shared data
# decides control flow except waits (the reduction relies on the same fact), so this yields
# exactly the barrier operations the class performs over the whole kernel, in order.

MAX_WALK_STEPS = 2_000_000
MAX_PATHS = 16  # `choose` forks explored per class; beyond this the first value stands for the rest

BARRIER_OPS = (WAIT, ARRIVE, EXPECT_TX, COMPLETE_TX, ARRIVE_DROP, TMA_LOAD, INIT, INVAL, MMA_COMMIT, CP_ASYNC_ARRIVE)
ARRIVING_OPS = (ARRIVE, ARRIVE_DROP, MMA_COMMIT, CP_ASYNC_ARRIVE)
# the store side: TMA stores, the bulk groups that complete them, the waits that drain them, and the ordinary
# writes and proxy fences before them (BarOps with barrier -1)
STORE_OPS = (TMA_STORE, COMMIT_GROUP, WAIT_GROUP, WRITE, FENCE_PROXY)


@dataclass(frozen=True)
class BarOp:
    """One barrier operation of one thread of a class, with concrete barrier and bytes."""

    kind: str  # wait | arrive | expect_tx | complete_tx | arrive_drop | tma_load | init | inval | mma_commit | ...
    barrier: int  # flat barrier id (cta * per-cta count + offset)
    arrivals: int = 0  # arrivals this op makes on `barrier`, per thread
    tx: int = 0  # bytes announced (arrive.expect_tx, expect_tx) or delivered (tma_load, complete_tx)
    parity: int = -1  # waits
    site: int = -1
    stage: bool = False  # its barrier index came from a ring's `index`: a stage of a ring
    buffer: str = ""  # tma_load: the destination buffer; tma_store, write: the buffer element ("D[1]")
    pending: int = -1  # wait_group: the bulk groups it lets stay in flight
    read: bool = False  # wait_group: only until they have read SMEM (wait_group_read)


def _uses_ring_index(e) -> bool:
    if isinstance(e, RRing):
        return e.attr == "index"
    if isinstance(e, ROp):
        return any(_uses_ring_index(a) for a in e.args)
    return False


class _Walker:
    def __init__(self, kernel: CheckedKernel, cl: ThreadClass):
        self.k = kernel
        self.cl = cl
        self.per_cta = sum(b.size for b in kernel.barriers)
        self.base: dict[str, int] = {}
        n = 0
        for b in kernel.barriers:
            self.base[b.name] = n
            n += b.size
        self.fns: dict = {}

    def ev(self, e: RExpr, env: list) -> int:
        f = self.fns.get(e)
        if f is None:
            f = self.fns[e] = compile_expr(e)
        return f(tuple(env))

    def bar(self, ref: RRef, env: list, site: int) -> tuple[int, bool]:
        decl = self.k.barrier(ref.name)
        flat = 0
        for i, d in zip(ref.indices, decl.dims):
            v = self.ev(i, env)
            if not 0 <= v < d:
                raise EvalError(f"index {v} of '{ref.name}' is out of range 0..{d - 1}", site)
            flat = flat * d + v
        cta = self.cl.cta if ref.cta is None else self.ev(ref.cta, env)
        if not 0 <= cta < self.k.cluster_size:
            raise EvalError(f"CTA {cta} is outside the cluster of {self.k.cluster_size}", site)
        return cta * self.per_cta + self.base[ref.name] + flat, any(_uses_ring_index(i) for i in ref.indices)

    def run(self) -> list[list[BarOp]]:
        prog = self.cl.program
        env0: list = [None] * prog.nslots
        for ins in prog.instrs:
            if ins.op in (MMA, MMA_WAIT):
                env0[ins.args[-1]] = 0
        paths: list[list[BarOp]] = []
        stack: list[tuple[int, list, list[BarOp]]] = [(0, env0, [])]
        steps = 0
        while stack:
            pc, env, ops = stack.pop()
            while True:
                steps += 1
                if steps > MAX_WALK_STEPS:
                    raise EvalError("a role runs over two million steps; explain cannot summarise it", -1)
                ins = prog.instrs[pc]
                op, a = ins.op, ins.args
                if op == END:
                    paths.append(ops)
                    break
                if op == LET:
                    env[a[0]] = self.ev(a[1], env)
                elif op == RING:
                    env[a[0]] = 0
                elif op == ADVANCE:
                    env[a[0]] += 1
                elif op == BRANCH:
                    if not self.ev(a[0], env):
                        pc = ins.target
                        continue
                elif op == JUMP:
                    pc = ins.target
                    continue
                elif op == CHOOSE:
                    lo, hi = self.ev(a[1], env), self.ev(a[2], env)
                    if lo > hi:
                        raise EvalError(f"choose range {lo}..{hi} is empty", ins.site)
                    if len(paths) + len(stack) < MAX_PATHS:
                        for v in range(hi, lo, -1):
                            fork = list(env)
                            fork[a[0]] = v
                            stack.append((pc + 1, fork, list(ops)))
                    env[a[0]] = lo
                elif op == MMA:
                    env[a[-1]] += 1
                elif op in BARRIER_OPS:
                    ops.extend(self.barrier_op(ins, env))
                elif op in STORE_OPS:
                    ops.append(self.store_op(ins, env))
                pc += 1
        return paths

    def store_op(self, ins: Instr, env: list) -> BarOp:
        op, a, site = ins.op, ins.args, ins.site
        if op in (TMA_STORE, WRITE):
            ref = a[0]
            decl = self.k.buffer(ref.name)
            idx = [self.ev(i, env) for i in ref.indices]
            if decl is not None:
                for v, d in zip(idx, decl.dims):
                    if not 0 <= v < d:
                        raise EvalError(f"index {v} of '{ref.name}' is out of range 0..{d - 1}", site)
            return BarOp(op, -1, site=site, buffer=ref.name + "".join(f"[{v}]" for v in idx))
        if op == WAIT_GROUP:
            return BarOp(op, -1, site=site, pending=self.ev(a[0], env), read=bool(a[1]))
        return BarOp(op, -1, site=site)

    def barrier_op(self, ins: Instr, env: list) -> list[BarOp]:
        op, a, site = ins.op, ins.args, ins.site
        if op == TMA_LOAD:
            gid, stage = self.bar(a[3], env, site)
            nbytes = self.ev(a[2], env)
            buf = a[0].name
            if a[4] is None:
                return [BarOp(op, gid, 0, nbytes, -1, site, stage, buf)]
            mask = self.ev(a[4], env)
            off = gid % self.per_cta
            return [BarOp(op, k * self.per_cta + off, 0, nbytes, -1, site, stage, buf)
                    for k in range(self.k.cluster_size) if mask >> k & 1]
        gid, stage = self.bar(a[0], env, site)
        if op == WAIT:
            return [BarOp(op, gid, 0, 0, self.ev(a[1], env) & 1, site, stage)]
        if op == ARRIVE:
            tx = self.ev(a[2], env) if a[2] is not None else 0
            return [BarOp(op, gid, self.ev(a[1], env), tx, -1, site, stage)]
        if op in (EXPECT_TX, COMPLETE_TX):
            return [BarOp(op, gid, 0, self.ev(a[1], env), -1, site, stage)]
        if op == ARRIVE_DROP:
            return [BarOp(op, gid, self.ev(a[1], env), 0, -1, site, stage)]
        if op == INIT:
            return [BarOp(op, gid, self.ev(a[1], env), 0, -1, site, stage)]
        if op == MMA_COMMIT:
            if len(a) > 1 and a[1] is not None:
                mask = self.ev(a[1], env)
                off = gid % self.per_cta
                return [BarOp(op, k * self.per_cta + off, 1, 0, -1, site, stage)
                        for k in range(self.k.cluster_size) if mask >> k & 1]
            return [BarOp(op, gid, 1, 0, -1, site, stage)]
        if op == CP_ASYNC_ARRIVE:
            return [BarOp(op, gid, 1, 0, -1, site, stage)]
        return [BarOp(op, gid, 0, 0, -1, site, stage)]  # inval


def class_barrier_ops(kernel: CheckedKernel, cl: ThreadClass) -> list[list[BarOp]]:
    """Every barrier operation one thread of the class performs, per path through its `choose`s."""
    return _Walker(kernel, cl).run()


@dataclass(frozen=True)
class Party:
    """One thread class's part in one barrier's protocol."""

    side: str  # "arrives" | "tx" | "waits" | "inits"
    cls: int  # thread class id
    role: str  # the role's name
    unit: str  # the role instance: "consumer[1]"
    threads: tuple[int, ...]  # members, thread index within the role instance
    arrivals: int = 0  # arrivals over the whole kernel (all its threads)
    expect: int = 0  # bytes announced over the whole kernel
    delivered: int = 0  # bytes delivered (loads, complete_tx) over the whole kernel
    loads: int = 0  # TMA loads completing on it
    buffers: tuple[str, ...] = ()
    waits: int = 0  # waits per thread over the whole kernel
    first_parity: int = -1
    sites: tuple[int, ...] = ()


@dataclass
class BarrierContract:
    """Who initialises, arrives on, completes tx on and waits on one barrier (one element)."""

    gid: int
    name: str  # element name, e.g. "full[2]" or "cta1.full[2]"
    array: str
    count: int
    noinit: bool
    parties: list[Party]
    stage: bool  # used as a stage of a ring

    @property
    def arrivals(self) -> int:
        return sum(p.arrivals for p in self.parties if p.side == "arrives")

    @property
    def phases(self) -> int:
        """Phases the kernel takes it through: from the arrivals it gets, or (when those do not add up to a whole
        phase) from how often its most frequent waiter waits."""
        by_arrivals = self.arrivals // self.count if self.count > 0 else 0
        # a first wait on parity 1 is on the phase before phase 0, which a fresh barrier has "completed"
        by_waits = max((p.waits - (p.first_parity == 1) for p in self.parties if p.side == "waits"), default=0)
        return max(by_arrivals, by_waits)

    def roles(self, side: str) -> list[str]:
        return sorted({p.role for p in self.parties if p.side == side})


def protocol_contract(kernel: CheckedKernel, classes: list[ThreadClass]) -> list[BarrierContract]:
    """The barrier contract of one configuration, derived from its lowered thread classes."""
    contracts: list[BarrierContract] = []
    names: list[tuple[str, str, int, bool]] = []
    for cta in range(kernel.cluster_size):
        for b in kernel.barriers:
            for off in range(b.size):
                idx = []
                rem = off
                for d in reversed(b.dims):
                    idx.append(rem % d)
                    rem //= d
                name = b.labels[off] if getattr(b, "labels", ()) else b.name + "".join(f"[{i}]" for i in reversed(idx))
                count = b.counts[off] if getattr(b, "counts", ()) else b.count_in(cta)
                names.append((f"cta{cta}.{name}" if kernel.cluster_size > 1 else name, b.name, count, b.noinit))
    for gid, (name, array, count, noinit) in enumerate(names):
        contracts.append(BarrierContract(gid, name, array, count, noinit, [], False))
    for cl in classes:
        paths = class_barrier_ops(kernel, cl)
        ops = max(paths, key=len) if paths else []  # the longest path through its chooses: most of its protocol
        acc: dict[tuple[int, str], dict] = {}
        for o in ops:
            if o.barrier < 0:  # the store side (store_contract)
                continue
            side = {WAIT: "waits", INIT: "inits", INVAL: "inits", TMA_LOAD: "tx", COMPLETE_TX: "tx",
                    EXPECT_TX: "arrives"}.get(o.kind, "arrives")
            d = acc.setdefault((o.barrier, side), {"arrivals": 0, "expect": 0, "delivered": 0, "loads": 0,
                                                    "buffers": [], "waits": 0, "first": -1, "sites": []})
            n = cl.size
            if o.kind in ARRIVING_OPS:
                d["arrivals"] += o.arrivals * n
            if o.kind in (ARRIVE, EXPECT_TX):
                d["expect"] += o.tx * n
            if o.kind in (TMA_LOAD, COMPLETE_TX):
                d["delivered"] += o.tx * n
            if o.kind == TMA_LOAD:
                d["loads"] += n
                if o.buffer not in d["buffers"]:
                    d["buffers"].append(o.buffer)
            if o.kind == WAIT:
                d["waits"] += 1
                if d["first"] < 0:
                    d["first"] = o.parity
            if o.site not in d["sites"]:
                d["sites"].append(o.site)
            if o.stage:
                contracts[o.barrier].stage = True
        for (gid, side), d in sorted(acc.items()):
            contracts[gid].parties.append(Party(side, cl.id, cl.role_name, cl.unit, cl.members, d["arrivals"],
                                                d["expect"], d["delivered"], d["loads"], tuple(d["buffers"]),
                                                d["waits"], d["first"], tuple(d["sites"])))
    return contracts


@dataclass(frozen=True)
class StoreParty:
    """One thread class's part on the store side: what it writes, stores, commits and drains."""

    cls: int
    role: str
    unit: str  # the role instance
    threads: tuple[int, ...]
    stores: tuple[tuple[str, int], ...]  # buffer element -> TMA stores of one thread over the kernel
    commits: int  # commit_group per thread: bulk groups
    waits: tuple[tuple[str, int, int], ...]  # ("wait_group_read" | "wait_group", pending, times), in order
    writes: tuple[tuple[str, int], ...]  # buffer element -> ordinary writes per thread
    fences: int  # fence_proxy_async per thread
    sites: tuple[int, ...]


@dataclass(frozen=True)
class StoreRing:
    """A buffer array that TMA stores go out of, stage by stage: its depth and the drain before each reuse."""

    array: str
    elements: tuple[str, ...]
    stores: int  # over the kernel, all classes
    units: tuple[str, ...]  # who stores
    reuse_wait: tuple[str, int] | None  # the loosest wait of the storers before a stage is written again
    tail_wait: tuple[str, int] | None  # their last wait (the drain before exit), if it comes after the last store


def store_contract(kernel: CheckedKernel, classes: list[ThreadClass]) -> tuple[list[StoreParty], list[StoreRing]]:
    """The store side of one configuration: per class its stores, bulk groups and drains; per buffer its ring."""
    parties: list[StoreParty] = []
    per_array: dict[str, dict] = {}
    for cl in classes:
        paths = class_barrier_ops(kernel, cl)
        ops = [o for o in (max(paths, key=len) if paths else []) if o.barrier < 0]
        if not ops:
            continue
        stores: dict[str, int] = {}
        writes: dict[str, int] = {}
        waits: list[list] = []
        commits = fences = 0
        sites: list[int] = []
        last_store = max((i for i, o in enumerate(ops) if o.kind == TMA_STORE), default=-1)
        for i, o in enumerate(ops):
            if o.site not in sites:
                sites.append(o.site)
            if o.kind == TMA_STORE:
                stores[o.buffer] = stores.get(o.buffer, 0) + 1
                arr = per_array.setdefault(o.buffer.split("[")[0], {"elements": [], "stores": 0, "units": [],
                                                                    "reuse": None, "tail": None})
                if o.buffer not in arr["elements"]:
                    arr["elements"].append(o.buffer)
                arr["stores"] += cl.size
                if cl.unit not in arr["units"]:
                    arr["units"].append(cl.unit)
            elif o.kind == WRITE:
                writes[o.buffer] = writes.get(o.buffer, 0) + 1
            elif o.kind == COMMIT_GROUP:
                commits += 1
            elif o.kind == FENCE_PROXY:
                fences += 1
            elif o.kind == WAIT_GROUP:
                word = "wait_group_read" if o.read else "wait_group"
                if waits and waits[-1][0] == word and waits[-1][1] == o.pending:
                    waits[-1][2] += 1
                else:
                    waits.append([word, o.pending, 1])
                for arr in per_array.values() if last_store >= 0 else ():  # the drains of the storing threads
                    if cl.unit in arr["units"]:
                        if i > last_store >= 0:
                            arr["tail"] = (word, o.pending)
                        elif arr["reuse"] is None or o.pending > arr["reuse"][1]:
                            arr["reuse"] = (word, o.pending)
        parties.append(StoreParty(cl.id, cl.role_name, cl.unit, cl.members, tuple(sorted(stores.items())), commits,
                                  tuple(tuple(w) for w in waits), tuple(sorted(writes.items())), fences,
                                  tuple(sites)))
    rings = [StoreRing(name, tuple(a["elements"]), a["stores"], tuple(a["units"]), a["reuse"], a["tail"])
             for name, a in sorted(per_array.items())]
    return parties, rings


def stage_flags(contracts: list[BarrierContract]) -> dict[int, str]:
    """Stage barriers without exactly one producer role (arriving) and one consumer role (waiting): why, per gid."""
    out: dict[int, str] = {}
    for c in contracts:
        if not c.stage:
            continue
        arrivers, waiters = c.roles("arrives"), c.roles("waits")
        problems = []
        if not arrivers:
            tx = c.roles("tx")
            problems.append("no role arrives on it" + (f" (only the TMA bytes of {join_words(tx)} land on it)" if tx else "")
                            + ", so its phases never complete")
        elif len(arrivers) > 1:
            problems.append(f"{len(arrivers)} roles arrive on it ({join_words(arrivers)})")
        if not waiters:
            problems.append("no role waits on it")
        elif len(waiters) > 1:
            problems.append(f"{len(waiters)} roles wait on it ({join_words(waiters)})")
        if problems:
            out[c.gid] = "; ".join(problems)
    return out


def protocol_graph(contracts: list[BarrierContract]) -> "nx.MultiDiGraph":
    """Role instances and barrier arrays: role -> barrier for arrivals and tx, barrier -> role for the waits it releases.

    Nodes are ("role", unit) and ("barrier", array); each edge has `side` and the `lines` of its statements.
    """
    import networkx as nx  # only `explain` draws the contract
    g = nx.MultiDiGraph()
    seen: set = set()
    for c in contracts:
        bar = ("barrier", c.array)
        g.add_node(bar, count=c.count, stage=c.stage)
        for p in c.parties:
            if p.side == "inits":
                continue
            role = ("role", p.unit)
            g.add_node(role)
            key = (p.unit, c.array, p.side)
            if key in seen:
                continue
            seen.add(key)
            if p.side == "waits":
                g.add_edge(bar, role, side="waits")
            else:
                g.add_edge(role, bar, side=p.side)
    return g
