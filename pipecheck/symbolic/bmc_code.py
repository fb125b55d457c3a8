"""The bmc engine's view of each thread class: its code unrolled into a graph of local states.

A class's control flow reads only its own registers, so running its code with the model's
own `settle` gives a finite graph of (pc, registers) nodes whose operands are concrete.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..model import semantics as S
from ..model.ir import (ARRIVE, ARRIVE_DROP, BAR_ARRIVE, COLL, COLL_WAIT, COMMIT_GROUP, COMPLETE_TX, CP_ASYNC,
                        CP_ASYNC_ARRIVE, END, EXPECT_TX, FENCE_INIT, FENCE_PROXY, INIT, INVAL, LOCAL_OPS, MMA,
                        MMA_COMMIT, MMA_WAIT, READ, TMA_LOAD, TMA_STORE, WAIT, WAIT_GROUP, WRITE, EvalError)
from ..model.system import Model

LOCAL = "local"  # a class that starts before a `choose`: its first step is the choice


class Unsupported(Exception):
    """A behaviour of the model this engine does not encode (it stops inconclusive, saying which)."""


@dataclass
class Node:
    """One local state (pc, registers) of a thread class, with its instruction's operands made concrete."""

    pc: int
    env: tuple
    op: str
    succ: list[int] = field(default_factory=list)  # outcomes after it fires (COLL: after the last arrival)
    wait_node: int = -1  # COLL: where the class waits when it is not the last to arrive
    args: dict = field(default_factory=dict)
    error: EvalError | None = None


@dataclass
class ClassCode:
    nodes: list[Node]
    start: int
    ends: list[int]
    dist: list[int] = field(default_factory=list)  # fewest steps from the start: deeper nodes need no encoding yet

    def live(self, t: int) -> list[int]:
        """The nodes the class can stand at after t steps."""
        return [i for i, d in enumerate(self.dist) if d <= t]

    def ends_by(self, t: int) -> list[int]:
        return [i for i in self.ends if self.dist[i] <= t]


def _operands(model: Model, c: int, n: Node) -> tuple:
    """Fill n.args the way model._thread evaluates the instruction; return the registers after it."""
    ins = model.code[c][n.pc]
    cl = model.classes[c]
    cta, m, env, a, op = cl.cta, cl.size, n.env, n.args, n.op
    lay = model.layout
    nxt = env
    if op is WAIT:
        a.update(gid=ins.a(env, cta), parity=ins.b(env) & 1, intended=ins.c(env) if ins.c is not None else None)
    elif op is ARRIVE:
        a.update(gid=ins.a(env, cta), count=ins.b(env), tx=ins.c(env) if ins.c is not None else 0,
                 who=(c, ins.d(env) if ins.d is not None else None))
    elif op is ARRIVE_DROP:
        a.update(gid=ins.a(env, cta), count=ins.b(env), who=(c, ins.d(env) if ins.d is not None else None))
    elif op in (EXPECT_TX, COMPLETE_TX):
        a.update(gid=ins.a(env, cta), n=ins.b(env))
    elif op is TMA_LOAD:
        buf, tag, nbytes, bar = ins.a(env, cta), ins.b(env), ins.c(env), ins.d(env, cta)
        mask = ins.e(env) if ins.e is not None else None
        places = lay.load_targets(buf, bar, mask)  # model.Model: the same places
        if not places:
            raise EvalError(f"multicast mask {mask:#x} names no CTA of the cluster", ins.site)
        a["uses"] = [g for _, g in places]
        a["flights"] = [(b, tag, nbytes, g, ins.site, c, -1) for b, g in places for _ in range(m)]
    elif op is CP_ASYNC:
        seq = env[ins.d]
        a["flights"] = [(ins.a(env, cta), ins.b(env), 0, -1, ins.site, c, seq)]
        nxt = env[:ins.d] + (seq + 1,) + env[ins.d + 1:]
    elif op is CP_ASYNC_ARRIVE:
        gid, upto = ins.a(env, cta), env[ins.d]
        a["commit"] = ("cp", c, upto, (gid,), ins.site, c, (c, ("cp", upto)), m)
    elif op is READ:
        a.update(buf=ins.a(env, cta), want=ins.b(env))
    elif op is WRITE:
        a.update(buf=ins.a(env, cta), tag=ins.b(env))
    elif op is TMA_STORE:
        a.update(buf=ins.a(env, cta), want=ins.b(env) if ins.b is not None else None)
    elif op is COMMIT_GROUP:
        a["n"] = env[ins.b]
        nxt = env[:ins.b] + (env[ins.b] + 1,) + env[ins.b + 1:]
    elif op is WAIT_GROUP:
        a.update(limit=env[ins.b] - ins.a(env), read_only=bool(ins.c))
    elif op is MMA:
        seq = env[ins.b]
        result = tuple((r(env, cta), t(env) if t is not None else None) for r, t in ins.c)
        a.update(unit=model.mma_unit[c], seq=seq, result=result,
                 ops=tuple((r(env, cta), t(env) if t is not None else None) for r, t in ins.a))
        nxt = env[:ins.b] + (seq + 1,) + env[ins.b + 1:]
    elif op is MMA_WAIT:
        a.update(unit=model.mma_unit[c], need=env[ins.b] - ins.a(env))
    elif op is MMA_COMMIT:
        gid = ins.a(env, cta)
        bars = (gid,)
        if ins.e is not None:
            bars = tuple(lay.bar_in(k, gid) for k in lay.ctas(ins.e(env)))
        who = (c, ins.d(env) if ins.d is not None else ("commit", env[ins.b]))
        a["commit"] = ("mma", model.mma_unit[c], env[ins.b], bars, ins.site, c, who, 1)
    elif op is INIT:
        gid, count = ins.a(env, cta), ins.b(env)
        if not 1 <= count <= S.MAX_COUNT:
            raise EvalError(f"init count {count} is outside 1..{S.MAX_COUNT}", ins.site)
        a.update(gid=gid, count=count)
    elif op is INVAL:
        a["gid"] = ins.a(env, cta)
    elif op in (FENCE_PROXY, FENCE_INIT, LOCAL):
        pass
    elif op is COLL or op is BAR_ARRIVE:
        key, count = model.coll_key(c, ins, env) if op is COLL else (("b", cta, ins.b(env)), ins.c(env))
        if key[0] == "b" and ins.a != "syncthreads" and (count <= 0 or count % 32):
            raise EvalError(f"a named barrier's thread count must be a positive multiple of 32, not {count}", ins.site)
        a.update(key=key, n=count)
    else:
        raise Unsupported(f"'{op}' ({ins.text})")
    return nxt


def unroll(model: Model, c: int, limit: int = 20_000) -> ClassCode:
    """The graph of a class's local states, from the model's own initial state and `settle`."""
    code = model.code[c]
    cl = model.classes[c]
    index: dict[tuple, int] = {}
    nodes: list[Node] = []
    todo: list[int] = []

    def node(pc: int, env: tuple, op: str | None = None) -> int:
        key = (pc, env)
        if key not in index:
            if len(nodes) >= limit:
                raise Unsupported(f"{cl.label} has more than {limit} local states")
            index[key] = len(nodes)
            nodes.append(Node(pc, env, op or code[pc].op))
            todo.append(index[key])
        return index[key]

    ((pc0, env0), _), = model.initial().locs[c]
    start = node(pc0, env0, LOCAL if code[pc0].op in LOCAL_OPS else None)
    while todo:
        n = nodes[todo.pop()]
        try:
            if n.op is END:
                continue
            if n.op is COLL_WAIT:
                n.succ = [node(pc, e) for pc, e in model.settle(c, n.pc + 1, n.env)]
                continue
            if n.op == LOCAL:
                n.succ = [node(pc, e) for pc, e in model.settle(c, n.pc, n.env)]
                continue
            nxt = _operands(model, c, n)
            if n.op is COLL:
                n.wait_node = node(n.pc + 1, model.canon(c, n.pc + 1, n.env))
                n.succ = [node(pc, e) for pc, e in model.settle(c, n.pc + 2, n.env)]
            else:
                n.succ = [node(pc, e) for pc, e in model.settle(c, n.pc + 1, nxt)]
        except ZeroDivisionError:
            n.error = EvalError("division by zero", code[n.pc].site)
        except EvalError as exc:
            n.error = exc
    ends = [i for i, n in enumerate(nodes) if n.op is END]
    return ClassCode(nodes, start, ends, _distances(nodes, start, cl.label))


def _distances(nodes: list[Node], start: int, label: str) -> list[int]:
    """Fewest moves from the start to each node; a cycle would let one node fire twice, which the encoding
    (one slot per asynchronous operation a node issues) does not allow."""
    big = 1 << 30
    dist = [big] * len(nodes)
    dist[start] = 0
    order: list[int] = []
    state = [0] * len(nodes)  # 0 new, 1 on the stack, 2 done
    stack = [(start, 0)]
    while stack:  # iterative DFS for a topological order (and cycle detection)
        i, k = stack.pop()
        n = nodes[i]
        nxt = n.succ + ([n.wait_node] if n.wait_node >= 0 else [])
        if k == 0:
            state[i] = 1
        if k < len(nxt):
            stack.append((i, k + 1))
            j = nxt[k]
            if state[j] == 1:
                raise Unsupported(f"{label}'s code returns to a local state it left (a loop that changes no register)")
            if state[j] == 0:
                stack.append((j, 0))
        else:
            state[i] = 2
            order.append(i)
    for i in reversed(order):  # every move (and a collective's release) takes a class one node further
        n = nodes[i]
        for j in n.succ + ([n.wait_node] if n.wait_node >= 0 else []):
            dist[j] = min(dist[j], dist[i] + 1)
    return dist
