"""Hypothesis strategies for fuzzing: well-formed specs, free grammar derivations, mutated corpus specs.

Well-formed specs pass `pipecheck check` by construction and must get a verdict; the other
two kinds may be anything, and must get a verdict or a located error (fuzz/oracle.py judges).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
CORPUS = tuple(sorted(p for d in ("specs", "examples") for p in (ROOT / d).rglob("*.pipe")))


@dataclass(frozen=True)
class Input:
    """One fuzz input: the spec's bytes and how it was made (`wellformed`, `grammar`, `bytes`, `tokens`)."""

    kind: str
    data: bytes
    origin: str = ""  # the corpus file a mutation started from


# --- well-formed specs: a protocol assembled from components, each valid on its own

_SHAPES = {"thread": 1, "warp": 32, "warpgroup": 128}


@st.composite
def _ring(draw, out: list[str], roles: list[str], budget: list[int], cluster: int, arch: str) -> None:
    """A TMA-load stage ring: full/empty barriers, a producer role, consumer roles (knobs may add bugs)."""
    n = len(roles)
    stages = draw(st.integers(1, 3))
    tiles = draw(st.integers(1, 4))
    consumers = draw(st.integers(1, 2))
    cshape = draw(st.sampled_from(["thread", "warp", "warpgroup"] if budget[0] >= 256 + 32 else ["thread", "warp"]))
    pshape = draw(st.sampled_from(["thread", "warp"]))
    budget[0] -= consumers * _SHAPES[cshape] + _SHAPES[pshape]
    tile = draw(st.sampled_from([1024, 4096, 16384]))
    s, k = f"S{n}", f"K{n}"
    out.append(f"  param {s} = {stages} in 1..4")
    out.append(f"  param {k} = {tiles} in 1..4")
    out.append(f"  smem A{n}[{s}] bytes {tile}")
    cons_arrivals = consumers * cluster
    full_count = draw(st.sampled_from([1, 1, 1, 2]))  # 2: a wrong count (hang)
    out.append(f"  mbarrier full{n}[{s}] count {full_count}")
    out.append(f"  mbarrier empty{n}[{s}] count {cons_arrivals}")
    kchoose = draw(st.booleans())
    if kchoose:
        out.append(f"  choose work{n}[4]")  # two rings: 2^8 configurations, well under the limit
    # producer: the loop body is built inside out, so branches nest correctly
    pphase = draw(st.sampled_from([1, 1, 1, 0]))  # 0: the classic wrong start phase
    core: list[str] = []
    if draw(st.integers(0, 9)) > 0:
        core.append(f"wait empty{n}[st.index] parity st.phase")
    nbytes = tile * (2 if cluster == 2 else 1)
    expect = draw(st.sampled_from([nbytes, nbytes, nbytes, tile // 2]))
    if draw(st.booleans()):
        core.append(f"arrive full{n}[st.index] expect_tx {expect}")
    else:
        core += [f"expect_tx full{n}[st.index] {expect}", f"arrive full{n}[st.index]"]
    if cluster == 2:
        for c in (0, 1):
            core.append(f"if cta == {c} {{ tma_load A{n}[st.index] tile k bytes {tile} barrier full{n}[st.index] "
                        "multicast 0b11 }")
    else:
        core.append(f"tma_load A{n}[st.index] tile k bytes {tile} barrier full{n}[st.index]")
    if pshape == "warp":
        core = _wrap(draw(st.sampled_from(["elect()", "lane == 0", "elect(0xffffffff)"])), core)
    core.append("advance st")
    if kchoose:  # both roles skip the same tiles, advancing only on work
        core = _wrap(f"work{n}[k]", core)
    body = [f"ring st({s}, phase = {pphase})", f"for k in 0 .. {k} {{", *("  " + x for x in core), "}"]
    if draw(st.booleans()):  # producer_tail
        body.append(f"for s in 0 .. {s} {{ wait empty{n}[st.index] parity st.phase; advance st }}")
    out.append(f"  role prod{n} {pshape} {{")
    out.extend("    " + x for x in body)
    out.append("  }")
    # consumers
    core = []
    parity = draw(st.sampled_from(["st.phase", "st.phase", "st.phase", "1 - st.phase"]))
    core.append(f"wait full{n}[st.index] parity {parity}")
    use = draw(st.sampled_from(["read", "mma"] if cshape == "warpgroup" and arch.startswith("sm_90") else ["read"]))
    if use == "mma":
        core.append(f"mma_async A{n}[st.index] tile k")
        if draw(st.integers(0, 4)) > 0:
            core.append("mma_wait 0")
    else:
        core.append(f"read A{n}[st.index] tile k")
    who = {"thread": "true", "warp": "lane == 0", "warpgroup": "thread == 0"}[cshape]
    if cluster == 2:
        core.append(f"if {who} {{ arrive empty{n}[st.index] on cta 0; arrive empty{n}[st.index] on cta 1 }}")
    else:
        twice = f"; arrive empty{n}[st.index]" if draw(st.integers(0, 9)) == 0 else ""  # a double arrive
        core.append(f"if {who} {{ arrive empty{n}[st.index]{twice} }}")
    core.append("advance st")
    if kchoose:
        core = _wrap(f"work{n}[k]", core)
    body = [f"ring st({s})", f"for k in 0 .. {k} {{", *("  " + x for x in core), "}"]
    out.append(f"  role cons{n}[{consumers}] {cshape} {{" if consumers > 1 else f"  role cons{n} {cshape} {{")
    out.extend("    " + x for x in body)
    out.append("  }")
    roles.append(f"prod{n}")
    roles.append(f"cons{n}")


def _wrap(cond: str, lines: list[str]) -> list[str]:
    return [f"if {cond} {{", *("  " + x for x in lines), "}"]


@st.composite
def _epilogue(draw, out: list[str], roles: list[str], budget: list[int]) -> None:
    """A TMA store epilogue: write, fence, tma_store, bulk groups, named barriers."""
    n = len(roles)
    shape = draw(st.sampled_from(["warp", "warpgroup"] if budget[0] >= 128 else ["warp"]))
    size = _SHAPES[shape]
    budget[0] -= size
    stages = draw(st.integers(1, 2))
    tiles = draw(st.integers(1, 3))
    bar = draw(st.integers(1, 15))
    out.append(f"  smem D{n}[{stages}] bytes 8192")
    b = [f"    for t in 0 .. {tiles} {{"]
    b.append(f"      if thread == 0 {{ wait_group_read {draw(st.sampled_from([stages - 1, 0, stages]))} }}")
    b.append(f"      bar_sync {bar}, {size if draw(st.integers(0, 5)) else size * 2}")
    b.append(f"      write D{n}[t % {stages}] tile t")
    if draw(st.integers(0, 5)):
        b.append("      fence_proxy_async")
    b.append(f"      bar_sync {bar}, {size}")
    b.append(f"      if thread == 0 {{ tma_store D{n}[t % {stages}] tile t; commit_group }}")
    b.append("    }")
    if draw(st.integers(0, 5)):
        b.append(f"    if thread == 0 {{ {draw(st.sampled_from(['wait_group_read 0', 'wait_group 0']))} }}")
    out.append(f"  role epi{n} {shape} {{")
    out.extend(b)
    out.append("  }")
    roles.append(f"epi{n}")


@st.composite
def _handoff(draw, out: list[str], roles: list[str], budget: list[int]) -> None:
    """Two warps hand a buffer over with a named barrier (bar_arrive / bar_sync), syncwarp, elect and choose."""
    n = len(roles)
    budget[0] -= 64
    bar = draw(st.integers(1, 15))
    out.append(f"  smem H{n} bytes 2048")
    w = [f"  role put{n} warp {{"]
    if draw(st.booleans()):
        w.append("    choose skip")
        w.append("    if skip { syncwarp }")
    w.append(f"    write H{n} tile 0")
    if draw(st.booleans()):
        w.append("    syncwarp")
    w.append(f"    bar_arrive {bar}, 64")
    w.append("  }")
    r = [f"  role get{n} warp {{"]
    r.append(f"    bar_sync {bar}, {draw(st.sampled_from([64, 64, 64, 32]))}")
    r.append(f"    if elect() {{ read H{n} tile {draw(st.sampled_from([0, 0, 0, 1]))} }}")
    r.append("  }")
    out.extend(w + r)
    roles.extend([f"put{n}", f"get{n}"])


@st.composite
def _init(draw, out: list[str], roles: list[str], budget: list[int], cluster: int) -> None:
    """An explicitly initialised barrier: init, fence_barrier_init, syncthreads / cluster_sync, arrive, wait."""
    n = len(roles)
    budget[0] -= 33
    out.append(f"  smem B{n} bytes 4096")
    out.append(f"  mbarrier go{n} count 1 noinit")
    sync = "cluster_sync" if cluster == 2 else "syncthreads"
    p = [f"  role ini{n} thread {{", f"    init go{n} count 1"]
    if draw(st.integers(0, 4)):
        p.append("    fence_barrier_init")
    p.append(f"    {sync}")
    p.append(f"    arrive go{n} expect_tx 4096")
    p.append(f"    tma_load B{n} tile 0 bytes 4096 barrier go{n}")
    p.append("  }")
    c = [f"  role use{n} warp {{", f"    {sync}", f"    wait go{n} parity 0", f"    read B{n} tile 0", "  }"]
    out.extend(p + c)
    roles.extend([f"ini{n}", f"use{n}"])


@st.composite
def wellformed_specs(draw) -> str:
    """A spec that `pipecheck check` accepts: one to three protocol components in one kernel."""
    arch = draw(st.sampled_from(["sm_90", "sm_90", "sm_100"]))
    cluster = draw(st.sampled_from([1, 1, 1, 2]))
    out = ["kernel fuzz {", f"  arch {arch}"]
    if cluster == 2:
        out.append("  cluster 2")
    roles: list[str] = []
    budget = [1024]
    parts = draw(st.lists(st.sampled_from(["ring", "epilogue", "handoff", "init"]), min_size=1, max_size=2))
    for part in parts:
        if part == "ring" and budget[0] >= 64:
            draw(_ring(out, roles, budget, cluster, arch))
        elif part == "epilogue" and budget[0] >= 32 and cluster == 1:
            draw(_epilogue(out, roles, budget))
        elif part == "handoff" and budget[0] >= 64:
            draw(_handoff(out, roles, budget))
        elif part == "init" and budget[0] >= 33:
            draw(_init(out, roles, budget, cluster))
    if not roles:
        draw(_handoff(out, roles, budget))
    out.append("}")
    return "\n".join(out) + "\n"


# --- free derivations of the grammar: any statement anywhere, names mostly declared

_KEYWORDS = ("kernel", "arch", "param", "const", "smem", "tmem", "mbarrier", "cluster", "role", "choose", "tensormap",
             "proc", "import", "let", "ring", "advance", "for", "in", "if", "else", "wait", "parity", "arrive", "count",
             "expect_tx", "on", "cta", "complete_tx", "arrive_drop", "tma_load", "tile", "bytes", "map", "barrier",
             "multicast", "tma_store", "read", "write", "mma_async", "into", "mma_wait", "mma_commit", "cp_async",
             "cp_async_arrive", "commit_group", "wait_group", "wait_group_read", "fence_proxy_async",
             "fence_barrier_init", "syncwarp", "syncthreads", "cluster_sync", "bar_sync", "bar_arrive", "init", "inval",
             "exit", "noinit", "over", "true", "false", "elect", "min", "max")
_BUILTINS = ("lane", "warp", "thread", "instance", "cta", "warpgroup", "k", "st.index", "st.phase", "st.count", "P", "C")


@st.composite
def _expr(draw, depth: int = 0) -> str:
    if depth > 3 or draw(st.integers(0, 2)) == 0:
        return draw(st.one_of(st.integers(-3, 40).map(str), st.sampled_from(_BUILTINS),
                              st.sampled_from(["0x10", "0b11", "4 KiB", "1_000", str(2**20), str(2**64), "true"])))
    kind = draw(st.integers(0, 4))
    a = draw(_expr(depth + 1))
    if kind == 0:
        return f"({a})"
    if kind == 1:
        return f"{draw(st.sampled_from(['-', '!']))}{a}"
    if kind == 2:
        return f"{draw(st.sampled_from(['min', 'max', 'elect']))}({a}, {draw(_expr(depth + 1))})"
    if kind == 3:
        return f"({a} ? {draw(_expr(depth + 1))} : {draw(_expr(depth + 1))})"
    op = draw(st.sampled_from(["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "==", "!=", "<", ">=", "&&", "||"]))
    return f"({a} {op} {draw(_expr(depth + 1))})"  # comparisons do not chain: keep each operation whole


def _ref(draw, names: tuple[str, ...]) -> str:
    name = draw(st.sampled_from(names))
    return name + "".join(f"[{draw(_expr(2))}]" for _ in range(draw(st.integers(0, 2))))


@st.composite
def _stmt(draw, depth: int) -> str:
    bars, bufs = ("full", "empty", "nb"), ("A", "D", "T")
    e = lambda: draw(_expr(1))  # noqa: E731
    kinds = ["let", "choose", "ring", "advance", "wait", "arrive", "expect_tx", "complete_tx", "arrive_drop",
             "tma_load", "tma_store", "read", "write", "mma_async", "mma_wait", "mma_commit", "commit_group",
             "wait_group", "wait_group_read", "fence", "syncwarp", "syncthreads", "cluster_sync", "bar_sync",
             "bar_arrive", "init", "inval", "exit", "call", "cp_async", "cp_async_arrive"]
    if depth < 3:
        kinds += ["for", "if", "if_else"]
    k = draw(st.sampled_from(kinds))
    b = lambda: _ref(draw, bars)  # noqa: E731
    m = lambda: _ref(draw, bufs)  # noqa: E731
    if k == "let":
        return f"let {draw(st.sampled_from(['x', 'y', 'k', 'lane']))} = {e()}"
    if k == "choose":
        return f"choose c{draw(st.integers(0, 2))}" + (f" in {e()} .. {e()}" if draw(st.booleans()) else "")
    if k == "ring":
        return f"ring st({e()}" + (f", phase = {e()})" if draw(st.booleans()) else ")")
    if k == "advance":
        return f"advance {draw(st.sampled_from(['st', 'x', 'full']))}"
    if k == "wait":
        return f"wait {b()} parity {e()}" + (f" on cta {e()}" if draw(st.integers(0, 5)) == 0 else "")
    if k == "arrive":
        opts = draw(st.lists(st.sampled_from([f"count {e()}", f"expect_tx {e()}", f"on cta {e()}"]), max_size=2))
        return " ".join([f"arrive {b()}", *opts])
    if k in ("expect_tx", "complete_tx"):
        return f"{k} {b()} {e()}"
    if k == "arrive_drop":
        return f"arrive_drop {b()}" + (f" count {e()}" if draw(st.booleans()) else "")
    if k == "tma_load":
        opts = draw(st.lists(st.sampled_from([f"bytes {e()}", f"barrier {b()}", f"multicast {e()}", "map tm"]),
                             max_size=3))
        return " ".join([f"tma_load {m()} tile {e()}", *opts])
    if k == "tma_store":
        opts = draw(st.lists(st.sampled_from([f"tile {e()}", f"bytes {e()}", f"barrier {b()}"]), max_size=2))
        return " ".join([f"tma_store {m()}", *opts])
    if k in ("read", "write", "cp_async"):
        return f"{k} {m()} tile {e()}"
    if k == "mma_async":
        ops = ", ".join(f"{m()} tile {e()}" for _ in range(draw(st.integers(1, 2))))
        return f"mma_async {ops}" + (f" into {m()}" if draw(st.booleans()) else "")
    if k in ("mma_wait", "wait_group", "wait_group_read"):
        return f"{k} {e()}"
    if k == "mma_commit":
        return f"mma_commit {b()}" + (f" multicast {e()}" if draw(st.booleans()) else "")
    if k == "cp_async_arrive":
        return f"cp_async_arrive {b()}"
    if k in ("commit_group", "syncthreads", "cluster_sync", "exit"):
        return k
    if k == "fence":
        return draw(st.sampled_from(["fence_proxy_async", "fence_barrier_init"]))
    if k == "syncwarp":
        return "syncwarp" + (f"({e()})" if draw(st.booleans()) else "")
    if k in ("bar_sync", "bar_arrive"):
        return f"{k} {e()}, {e()}"
    if k == "init":
        return f"init {b()} count {e()}"
    if k == "inval":
        return f"inval {b()}"
    if k == "call":
        return f"{draw(st.sampled_from(['step', 'nope', 'step']))}({', '.join(draw(st.lists(_expr(2), max_size=2)))})"
    body = draw(st.lists(_stmt(depth + 1), max_size=3))
    inner = "\n".join("  " + s for s in body)
    if k == "for":
        return f"for k in {e()} .. {e()} {{\n{inner}\n}}"
    if k == "if":
        return f"if {e()} {{\n{inner}\n}}"
    other = "\n".join("  " + s for s in draw(st.lists(_stmt(depth + 1), max_size=2)))
    return f"if {e()} {{\n{inner}\n}} else {{\n{other}\n}}"


@st.composite
def grammar_specs(draw) -> str:
    """A derivation of the grammar with declared names and random values: often rejected, never a crash."""
    out = ["kernel g {", f"  arch {draw(st.sampled_from(['sm_90', 'sm_90', 'sm_100', 'sm_100a', 'sm_80']))}"]
    if draw(st.booleans()):
        out.append(f"  cluster {draw(st.sampled_from(['2', '1', '[2, 1]', '3', '0']))}")
    lo = draw(st.integers(0, 2))
    hi = lo + draw(st.integers(0, 4))
    out.append(f"  param P = {draw(st.integers(lo, hi))} in {lo}..{hi}")
    out.append(f"  const C = {draw(st.one_of(_expr(1), st.sampled_from(['2', '64', '4 KiB'])))}")
    out.append(f"  smem A[P] bytes {draw(st.sampled_from(['4096', 'C', '0', '300 KiB']))}")
    out.append("  smem D[2] bytes 1024")
    out.append("  tmem T[2] bytes 1024" if draw(st.booleans()) else "  smem T bytes 64 over D[0]")
    out.append(f"  mbarrier full[P] count {draw(st.sampled_from(['1', '2', 'C', '0']))}")
    out.append(f"  mbarrier empty[P] count {draw(st.sampled_from(['1', '2', '128']))}")
    out.append(f"  mbarrier nb count 1{draw(st.sampled_from(['', ' noinit']))}")
    if draw(st.booleans()):
        out.append("  choose kc[4] in 0..2")
    if draw(st.booleans()):
        out.append("  tensormap tm { dtype bf16 dims [64, 64] strides [128] box [64, 64] }")
    if draw(st.booleans()):
        out.append("  proc step(b, i) {\n    arrive b[i]\n  }")
    for r in range(draw(st.integers(1, 3))):
        shape = draw(st.sampled_from(["thread", "warp", "warpgroup", "threads 3", "warps 2", "thread", "warp",
                                      "warpgroup 2"]))
        inst = draw(st.sampled_from(["", "", "", "[2]", "[0]"]))
        stmts = draw(st.lists(_stmt(0), min_size=1, max_size=6))
        body = "\n".join("    " + line for s in stmts for line in s.splitlines())
        out.append(f"  role r{r}{inst} {shape} {{\n{body}\n  }}")
    out.append("}")
    return "\n".join(out) + "\n"


# --- mutations of the corpus

_TOKEN = re.compile(rb"0x[0-9a-fA-F]+|0b[01]+|[0-9][0-9_]*|[A-Za-z_][A-Za-z0-9_]*|\"[^\"\n]*\"|#[^\n]*|//[^\n]*|"
                    rb"==|!=|<=|>=|<<|>>|&&|\|\||\.\.|\s+|.", re.S)
_SPECIAL_TOKENS = (b"0", b"-1", b"1048575", b"1048576", b"4294967296", b"18446744073709551616", b"9" * 40, b"{", b"}",
                   b"(", b")", b"[", b"]", b",", b";", b"..", b"\"lib/cutlass_sm90.pipe\"", b"\"nope.pipe\"",
                   b"\xff", b"\x00", "é".encode(), b"\t", b"\n")


@st.composite
def byte_mutations(draw) -> Input:
    """A corpus spec with a few byte-level edits: flips, inserts, deletes, duplicated or cut chunks."""
    path = draw(st.sampled_from(CORPUS))
    data = bytearray(path.read_bytes())
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        op = draw(st.integers(0, 5))
        i = draw(st.integers(0, len(data) - 1))
        if op == 0:
            data[i] = draw(st.integers(0, 255))
        elif op == 1:
            data[i:i] = bytes(draw(st.lists(st.integers(0, 255), min_size=1, max_size=4)))
        elif op == 2:
            del data[i:i + draw(st.integers(1, 16))]
        elif op == 3:
            j = draw(st.integers(i, min(len(data), i + 200)))
            data[j:j] = data[i:j]
        elif op == 4:
            del data[i:]
        else:
            data[i] = draw(st.sampled_from(b"{}()[];,.=#\n \"0"))
    return Input("bytes", bytes(data), str(path.relative_to(ROOT)))


@st.composite
def token_mutations(draw) -> Input:
    """A corpus spec with a few token-level edits: delete, duplicate, swap, replace by a keyword or a boundary number."""
    path = draw(st.sampled_from(CORPUS))
    toks = [t for t in _TOKEN.findall(path.read_bytes())]
    meaningful = [i for i, t in enumerate(toks) if not t.isspace() and not t.startswith((b"#", b"//"))]
    for _ in range(draw(st.integers(1, 4))):
        if not meaningful:
            break
        i = draw(st.sampled_from(meaningful))
        op = draw(st.integers(0, 4))
        if op == 0:
            toks[i] = b""
        elif op == 1:
            toks[i] = toks[i] + b" " + toks[i]
        elif op == 2:
            j = draw(st.sampled_from(meaningful))
            toks[i], toks[j] = toks[j], toks[i]
        elif op == 3:
            toks[i] = draw(st.sampled_from(_KEYWORDS)).encode()
        else:
            toks[i] = draw(st.sampled_from(_SPECIAL_TOKENS))
    return Input("tokens", b"".join(toks), str(path.relative_to(ROOT)))


def inputs() -> st.SearchStrategy[Input]:
    """Every kind of input, in the proportions the fuzz run uses."""
    return st.one_of(
        wellformed_specs().map(lambda s: Input("wellformed", s.encode())),
        grammar_specs().map(lambda s: Input("grammar", s.encode())),
        byte_mutations(),
        token_mutations(),
    )
