"""Promela (SPIN) models of the benchmark families, for the pipecheck-vs-SPIN benchmark.

`ring_model(stages, k_tiles, consumers, variant)` returns the Promela text of the `ring`
kernel (one producer warp, `consumers` consumer warpgroups, a `stages`-deep ring of
full/empty mbarriers, `k_tiles` iterations), in the variant `"fixed"`
(`let leader = issuer`) or `"bug3722"` (`let leader = lane == 0`, CUTLASS issue #3722).

`pingpong_model(stages, k_tiles, tiles, variant)` returns the Promela text of the CUTLASS
SM90 pingpong kernel of benchmarks/specs/pingpong_*.pipe (variant `"fixed"`,
`"release_before_read"` or `"no_store_drain"`); its section below says how it is built.
`umma_model(stages, k_tiles, tiles, variant, acc_stages=2, epi=1)` returns the Promela text
of the Blackwell SM100 UMMA GEMM of benchmarks/specs/umma_*.pipe (variant `"fixed"`,
`"early_acc_release"` or `"no_store_drain"`); its section below says how it is built.
The rest of this docstring is about the ring.

The model mirrors pipecheck's semantics (SEMANTICS.md sections 1-3) at pipecheck's thread
granularity; comments in the generated text say which Promela statement is which step.

Processes:

- ``P`` / ``Pn``: the producer's elected issuer lane. ``P`` is also the leader (variant
  fixed, or bug3722 when elect.sync picked lane 0): wait empty, arrive.expect_tx on full,
  issue the TMA load. ``Pn`` is bug3722 with a lane other than 0 elected: wait empty, issue
  the load, no arrive. The election is made once, nondeterministically, in ``init``.
  Lane 0 as a non-issuing leader executes no visible step in the loop (``if issuer`` is
  false), and lanes that are neither issuer nor leader do nothing, so neither has a process.
- ``W0(c)`` / ``WR(c)``: consumer warpgroup c as two thread classes, thread 0 (wait full,
  issue the MMA, mma_wait, arrive on empty) and threads 1..127 moving together (wait full,
  issue the MMA, mma_wait). The MMA starts when the second class issues it.
- ``X``: the asynchronous units. A TMA load lands (the buffer gets its tag, then
  complete_tx(TILE) on full[i], one event); a warpgroup's MMA completes. Any enabled event
  may fire at any point, interleaved with everything. ``X`` loops forever at an ``end``
  label, so only a thread blocked at a wait makes an invalid end state (a hang).

Compactness: barriers store only what a rule reads. The phase count is kept mod 2 (all that
`wait parity` reads; this benchmark asks for no phase-alias check); expected counts are
constants; empty[] has no tx field (nothing expects or completes bytes on it, so its tx is
always 0). Steps that touch only a thread's own registers (the loop test, `advance`) are
fused into the neighbouring visible step; every visible step (a wait, a barrier op, a load
issue, an MMA issue, an async completion) stays its own transition, so every interleaving
of visible steps is explored. A single-thread barrier op and an async event are each one
`d_step`: they are one indivisible action in the semantics.

Two keyword options exist for the README's experiments only (the benchmark rows use the
defaults): `elect_other_first` lists the "lane other than 0" election first (it changes
only SPIN's depth-first order, not the state space), and `lockstep_warpgroups` fuses each
warpgroup's two thread classes into one process. The latter is *not* pipecheck's
semantics (threads of a warpgroup are scheduled independently, SEMANTICS.md section 2); it
shows how much of the state space the thread-0 / threads-1..127 interleavings account for.
"""

from __future__ import annotations

TILE = 16384
VARIANTS = ("fixed", "bug3722")


def _full_complete(i: str) -> str:
    """Completion check after an op on full[i]: pending == 0 and tx == 0 -> next phase."""
    return (f"if :: fpend[{i}] == 0 && ftx[{i}] == 0 -> fph[{i}] = 1 - fph[{i}]; "
            f"fpend[{i}] = 1 :: else -> skip fi")


def _producer(name: str, leader: bool) -> str:
    """The issuer lane's loop; the arrive on full is generated only for the leader."""
    if leader:
        arrive = (
            "     d_step {                         /* arrive full[idx] expect_tx TILE */\n"
            "       ftx[IDX] = ftx[IDX] + TILE;\n"
            "       assert(fpend[IDX] > 0);        /* arrive-fault: arrive while pending == 0 */\n"
            "       fpend[IDX] = fpend[IDX] - 1;\n"
            f"       {_full_complete('IDX')}\n"
            "     };\n")
        what = "issuer and leader"
    else:
        arrive = "     /* not the leader (lane 0 is): no arrive on full[idx] */\n"
        what = "issuer, lane != 0"
    return (
        f"proctype {name}() {{                 /* producer warp: {what} */\n"
        "  byte k;\n"
        "  do\n"
        "  :: k < K && eph[IDX] != 1 - PAR ->  /* wait empty[idx] parity st.phase (from 1) */\n"
        f"{arrive}"
        "     d_step {                         /* tma_load A[idx] tile k (issue); advance st */\n"
        "       assert(ld[IDX] == 0);          /* model capacity: one load in flight per buffer */\n"
        "       ld[IDX] = k + 1; k++\n"
        "     }\n"
        "  :: k == K -> break\n"
        "  od\n"
        "}\n")


_SPLIT_CONSUMERS = """\
/* mma_async A[idx] tile k by one thread class of warpgroup c: the MMA starts when the
   second class issues it, and from then reads A[idx] until X completes it */
inline mma_issue(c) {
  d_step {
    if
    :: mi[c] == 0 -> mi[c] = 1
    :: else ->
       mi[c] = 0;
       assert(tag[IDX] >= k + 1);     /* stale-read: tile k has not landed in A[idx] */
       assert(tag[IDX] <= k + 1);     /* overwrite: a later tile already landed there */
       mb[c] = IDX + 1
    fi
  }
}

/* mma_wait 0 in iteration k: the warpgroup's k-th MMA (0-based) completed. The two classes
   never drift apart by a whole MMA (the next one needs both), so the parity suffices. */
#define MMA_DONE (md[c] != k % 2)

proctype W0(byte c) {                 /* consumer warpgroup c: thread 0 */
  byte k;
  do
  :: k < K && fph[IDX] != PAR ->      /* wait full[idx] parity st.phase (from 0) */
     mma_issue(c);
     MMA_DONE;                        /* mma_wait 0 */
     d_step {                         /* arrive empty[idx]; advance st */
       assert(epend[IDX] > 0);        /* arrive-fault */
       epend[IDX] = epend[IDX] - 1;
       if :: epend[IDX] == 0 -> eph[IDX] = 1 - eph[IDX]; epend[IDX] = C :: else -> skip fi;
       k++
     }
  :: k == K -> break
  od
}

proctype WR(byte c) {                 /* consumer warpgroup c: threads 1..127 */
  byte k;
  do
  :: k < K && fph[IDX] != PAR ->      /* wait full[idx] parity st.phase */
     mma_issue(c);
     d_step { MMA_DONE -> k++ }       /* mma_wait 0; advance st */
  :: k == K -> break
  od
}
"""

_LOCKSTEP_CONSUMERS = """\
proctype W(byte c) {                  /* ABLATION: warpgroup c as one lockstep process */
  byte k;
  do
  :: k < K && fph[IDX] != PAR ->      /* wait full[idx] parity st.phase (from 0) */
     d_step {                         /* mma_async A[idx] tile k: the MMA starts */
       assert(tag[IDX] >= k + 1);     /* stale-read */
       assert(tag[IDX] <= k + 1);     /* overwrite */
       mb[c] = IDX + 1
     };
     mb[c] == 0;                      /* mma_wait 0 */
     d_step {                         /* arrive empty[idx]; advance st */
       assert(epend[IDX] > 0);        /* arrive-fault */
       epend[IDX] = epend[IDX] - 1;
       if :: epend[IDX] == 0 -> eph[IDX] = 1 - eph[IDX]; epend[IDX] = C :: else -> skip fi;
       k++
     }
  :: k == K -> break
  od
}
"""


def ring_model(stages: int, k_tiles: int, consumers: int, variant: str, *,
               elect_other_first: bool = False, lockstep_warpgroups: bool = False) -> str:
    """Return the Promela text of the ring kernel for the given parameters."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    for name, value in (("stages", stages), ("k_tiles", k_tiles), ("consumers", consumers)):
        if not 1 <= value <= 254:
            raise ValueError(f"{name} must be in 1..254 (byte fields), not {value}")
    s, k_n, c_n = stages, k_tiles, consumers

    # X: one option per stage (its load lands), one per warpgroup (its MMA completes)
    events = []
    for i in range(s):
        no_reader = " && ".join(f"mb[{c}] != {i + 1}" for c in range(c_n))
        events.append(
            f"  :: d_step {{ ld[{i}] != 0 ->          /* the TMA load into A[{i}] lands */\n"
            f"       assert({no_reader});  /* overwrite: an MMA is reading A[{i}] */\n"
            f"       tag[{i}] = ld[{i}]; ld[{i}] = 0;\n"
            f"       ftx[{i}] = ftx[{i}] - TILE;    /* complete_tx(TILE) on full[{i}] */\n"
            f"       {_full_complete(str(i))} }}")
    for c in range(c_n):
        md = "" if lockstep_warpgroups else f"; md[{c}] = 1 - md[{c}]"
        events.append(f"  :: d_step {{ mb[{c}] != 0 -> mb[{c}] = 0{md} }}"
                      f"  /* warpgroup {c}'s MMA completes */")

    if variant == "fixed":
        producers = _producer("P", True)
        election = "  run P();              /* leader = issuer: the elected lane does not matter */"
    else:
        producers = _producer("P", True) + _producer("Pn", False)
        options = ["  :: run P()            /* lane 0 elected: the issuer is the leader */",
                   "  :: run Pn()           /* another lane elected: it is not the leader */"]
        if elect_other_first:
            options.reverse()
        election = ("  if                    /* elect.sync: PTX leaves the lane open */\n"
                    + "\n".join(options) + "\n  fi;")

    if lockstep_warpgroups:
        consumer_text = _LOCKSTEP_CONSUMERS
        mma_vars = "byte  mb[C];         /* warpgroup c: its in-flight MMA reads A[mb - 1]; 0 = none */"
        spawn = "\n".join(f"  run W({c});" for c in range(c_n))
    else:
        consumer_text = _SPLIT_CONSUMERS
        mma_vars = (
            "bit   mi[C];         /* warpgroup c: one of its two thread classes issued the next MMA */\n"
            "byte  mb[C];         /* warpgroup c: its in-flight MMA reads A[mb - 1]; 0 = none */\n"
            "bit   md[C];         /* warpgroup c: completed MMAs mod 2 */")
        spawn = "\n".join(f"  run W0({c}); run WR({c});" for c in range(c_n))

    notes = " (ablation: lockstep warpgroups)" if lockstep_warpgroups else ""
    return f"""\
/* pipecheck benchmark: ring kernel, STAGES={s} K_TILES={k_n} CONSUMERS={c_n}, variant {variant}{notes} */
#define S    {s}
#define K    {k_n}
#define C    {c_n}
#define TILE {TILE}
#define IDX  (k % S)          /* ring index of iteration k */
#define PAR  ((k / S) % 2)    /* consumer ring phase at k; the producer's is 1 - PAR */

bit   fph[S];        /* full[i]: completed phases mod 2 (all that `wait parity` reads) */
bit   fpend[S] = 1;  /* full[i]: pending arrivals; expected = 1 */
short ftx[S];        /* full[i]: tx bytes still owed, signed */
bit   eph[S];        /* empty[i]: completed phases mod 2 */
byte  epend[S] = C;  /* empty[i]: pending arrivals; expected = C; tx always 0 (no bytes) */
byte  tag[S];        /* A[i]: tile + 1 of the data in the buffer, 0 = never loaded */
byte  ld[S];         /* the TMA load into A[i] in flight: tile + 1, 0 = none */
{mma_vars}

{producers}
{consumer_text}
proctype X() {{                        /* asynchronous units: TMA loads, wgmma */
end:
  do
{chr(10).join(events)}
  od
}}

init {{
  atomic {{
  run X();
{election}
{spawn}
  }}
}}
"""


# ---------------------------------------------------------------- the pingpong family
#
# pingpong_model(stages, k_tiles, tiles, variant): benchmarks/specs/pingpong_<variant>.pipe
# (variant "fixed", "release_before_read" = pingpong_bug_release_before_read.pipe,
# "no_store_drain" = pingpong_bug_no_store_drain.pipe), at the same abstraction as the ring:
#
# - P: the producer warp's elected lane (issuer and leader: which lane does not matter, so
#   one process). Per k-tile: wait empty, arrive.expect_tx on full (A + B bytes), issue the A
#   load, issue the B load; then load_tail's S waits on empty. load() elects per work tile;
#   elect.sync is the same lane every time and the other 31 lanes do nothing else, so the
#   collective is unobservable and has no process.
# - W<g>S / W<g>N: the four warps of math warpgroup g, each one process (its 32 lanes move
#   together, SIMT). pipecheck splits this warpgroup by warp, not into a thread-0 class and
#   the rest as in the ring: every thread arrives on empty and on the order barrier (cluster
#   of 1: empty counts 128 threads) and writes D, and a signalling class is split by warp
#   (docs/semantics.md, "Threads"). W<g>S is warp 0 (issue_tma_store: the store pipeline's
#   acquire, the TMA store and its drain); W<g>N is a warp of warps 1..3 (three processes).
#   Barriers counted in threads count here in warps: 128 threads = 4 warp arrivals.
# - X: the asynchronous units: an A or B load lands (overwrite check against every wgmma in
#   flight; the tag; complete_tx), a warpgroup's oldest wgmma completes, a warpgroup's TMA
#   store finishes reading D.
#
# A warpgroup's work-tile rounds are unrolled (the count, (T + 1 - g) / 2, is known when the
# text is generated), and a warpgroup without a tile (g = 1 when T = 1) has no process: a
# loop exit of its own would be one more transition, interleaved with everything, that
# pipecheck does not have (it runs local steps as part of the visible step before them).
# For the same reason the K loop leaves through its last visible step (the order arrive),
# and a warp released by bar.sync goes on with its next visible step, guarded by the
# barrier's generation: pipecheck moves every waiter when the last thread arrives.
# fence.proxy.async and commit_group touch only the warp's own state and are fused into the
# D write and the TMA store issue; the fence is not checked (no planted bug is about it).

PINGPONG_VARIANTS = ("fixed", "release_before_read", "no_store_drain")
BYTES_A = 8192   # 128x64 fp8 A k-tile (benchmarks/specs/pingpong_*.pipe)
BYTES_B = 8192   # 128x64 fp8 B k-tile


def _warp_arrive(bar: str, i: str, what: str, guard: str = "", then: str = "") -> str:
    """One warp's arrive (32 lanes, one step) on a barrier of 128 threads, counted in warps."""
    head = f"{guard} -> " if guard else ""
    tail = f";\n       {then}" if then else ""
    return (f"d_step {{ {head}                      /* {what} */\n"
            f"       assert({bar}pend[{i}] > 0);     /* arrive-fault: fewer than 32 arrivals pending */\n"
            f"       {bar}pend[{i}] = {bar}pend[{i}] - 1;\n"
            f"       if :: {bar}pend[{i}] == 0 -> {bar}ph[{i}] = 1 - {bar}ph[{i}]; {bar}pend[{i}] = 4 "
            f":: else -> skip fi{tail} }}")


_PINGPONG_COMMON = """\
/* a consumer warp of warpgroup g in its work-tile round i (tile t = 2i + g), at k-tile k */
#define CC   ((2 * i + g) * K + k)        /* the mainloop ring's count: rd starts K ahead for g = 1 */
#define RIDX (CC % S)                     /* rd.index */
#define RPAR ((CC / S) % 2)               /* rd.phase */
#define PIDX ((CC - 2) % S)               /* rel.index once mma_issue advanced k: the previous stage */
#define OPH  ((1 - g + i) % 2)            /* order.phase in round i: group 0 starts at 1, group 1 at 0 */
#define BAR_PASSED (nbg != gen)           /* bar.sync: the generation this warp arrived in completed */

/* mma_async A[rd.index] tile CC, B[rd.index] tile CC by one warp of warpgroup g; advance rd.
   The wgmma starts when the fourth warp issues it and from then reads A and B[idx] until X
   completes it. A warp can be at most one wgmma ahead of another (its warpgroup_wait<1>
   needs the one before to complete, which needs every warp), so two issue counters, by
   wgmma number mod 2, suffice. */
inline mma_issue() {
  d_step {
    ni[2 * g + (i * K + k) % 2] = ni[2 * g + (i * K + k) % 2] + 1;
    if
    :: ni[2 * g + (i * K + k) % 2] == 4 ->
       ni[2 * g + (i * K + k) % 2] = 0;
       assert(tagA[RIDX] >= CC + 1 && tagB[RIDX] >= CC + 1);  /* stale-read: k-tile CC not landed */
       assert(tagA[RIDX] <= CC + 1 && tagB[RIDX] <= CC + 1);  /* overwrite: a later k-tile landed */
       if
       :: mb0[g] == 0 -> mb0[g] = RIDX + 1
       :: else -> assert(mb1[g] == 0); mb1[g] = RIDX + 1      /* model capacity: two in flight */
       fi
    :: else -> skip
    fi;
    k++
  }
}

/* bar.sync 1, 128 (the epilogue barrier; both warpgroups use id 1), the arrival: the fourth
   warp completes the generation. The warp then waits for BAR_PASSED as the guard of its next
   step. Exact here because the epilogue order barrier lets one warpgroup at a time into the
   epilogue, so a generation completes only once all four warps passed the one before. */
inline bar_arrive() {
  d_step { gen = nbg; nbc++; if :: nbc == 4 -> nbc = 0; nbg = 1 - nbg :: else -> skip fi }
}
"""


def _tma_producer(who: str, count: str, tail: str) -> str:
    """The TMA producer warp's elected lane of the pingpong and umma models: per k-tile it waits empty[idx], arrives
    on full[idx] with the A + B bytes and issues the two loads; then the tail waits (`tail`: CUTLASS's name for it).
    `who` and `count` are the comments on the proctype and its counter."""
    return f"""\
proctype P() {{                        /* producer warp: {who} */
  byte c;                             /* {count} */
  do
  :: c < T * K && eph[IDX] != 1 - PAR ->  /* producer_acquire: wait empty[idx] parity phase */
     d_step {{                         /* arrive full[idx] expect_tx BYTES_A + BYTES_B */
       ftx[IDX] = ftx[IDX] + BYTES_A + BYTES_B;
       assert(fpend[IDX] > 0);        /* arrive-fault */
       fpend[IDX] = fpend[IDX] - 1;
       {_full_complete('IDX')}
     }};
     d_step {{ assert(ldA[IDX] == 0); ldA[IDX] = c + 1 }};      /* tma_load A[idx] tile c (issue) */
     d_step {{ assert(ldB[IDX] == 0); ldB[IDX] = c + 1; c++ }}  /* tma_load B[idx] tile c; advance */
  :: c >= T * K && c < T * K + S - 1 && eph[IDX] != 1 - PAR -> c++  /* {tail}: wait empty */
  :: c == T * K + S - 1 && eph[IDX] != 1 - PAR -> break      /* {tail}: the last wait */
  od
}}
"""


def _pingpong_round(store_warp: bool, variant: str, last: bool) -> str:
    """One work-tile round of one consumer warp: order wait, mma(), mma_tail, the epilogue."""
    empty_prev = _warp_arrive("e", "PIDX", "consumer_release: arrive empty[rel.index]; advance rel")
    empty_last = _warp_arrive("e", "(CC - 1) % S", "mma_tail: release the last stage")
    empty_now = _warp_arrive("e", "RIDX", "BUG: arrive empty[rd.index] before the wgmma reads it")
    mma_turn = _warp_arrive("o", "1 - g", "k == K: order arrive, math_order[0][other]: the MMA turn",
                            guard="k == K")
    out = ["  oph[g] != OPH;                      /* order wait: math_order[0][g] parity order.phase */"]
    if variant == "release_before_read":
        out += [
            "  fph[RIDX] != RPAR;                  /* mma() prologue: wait full[rd.index] parity rd.phase */",
            f"  {empty_now};",
            "  mma_issue();",
            "  do",
            "  :: k < K && fph[RIDX] != RPAR ->    /* consumer_wait */",
            f"     {empty_now};",
            "     mma_issue();",
            "     mc[g] + 1 >= i * K + k           /* warpgroup_wait<1> */",
            f"  :: {mma_turn}; break",
            "  od;",
            "  mc[g] >= i * K + K;                 /* mma_tail: warpgroup_wait<0>; every stage was released */",
        ]
    else:
        out += [
            "  fph[RIDX] != RPAR;                  /* mma() prologue: wait full[rd.index] parity rd.phase */",
            "  mma_issue();",
            "  do",
            "  :: k < K && fph[RIDX] != RPAR ->    /* consumer_wait */",
            "     mma_issue();",
            "     mc[g] + 1 >= i * K + k;          /* warpgroup_wait<1> */",
            f"     {empty_prev}",
            f"  :: {mma_turn}; break",
            "  od;",
            "  mc[g] >= i * K + K;                 /* mma_tail: warpgroup_wait<0> */",
            f"  {empty_last};",
        ]
    out.append("  oph[2 + g] != OPH;                  /* order wait: math_order[1][g] parity order.phase */")
    if store_warp:
        out.append("  sr[g] == 0;                         /* store producer_acquire: wait_group.read 0 */")
    out += [
        "  bar_arrive();                       /* bar.sync 1, 128 */",
        "  d_step { BAR_PASSED -> gen = 0;     /* write D tile t; fence.proxy.async */",
        "    assert(sr[0] == 0 && sr[1] == 0)  /* store-reuse: a TMA store still reads D */",
        "  };",
        "  bar_arrive();                       /* bar.sync 1, 128 */",
    ]
    epi_what = "order arrive, math_order[1][other]: the epilogue turn; next round"
    if store_warp:
        out.append("  d_step { BAR_PASSED -> gen = 0; sr[g] = 1 };  /* tma_store D tile t; commit_group */")
        if variant == "no_store_drain":
            out.append("  /* BUG: no store_tail before the hand-over */")
        else:
            out.append("  sr[g] == 0;                         /* store_tail: wait_group.read 0 */")
        out.append(f"  {_warp_arrive('o', '3 - g', epi_what, then='i++; k = 0')}" + (";" if not last else ""))
    else:
        note = ("BUG: no store_tail (none of its own to drain anyway)" if variant == "no_store_drain"
                else "store_tail: no stores of its own, passes")
        out.append(f"  {_warp_arrive('o', '3 - g', epi_what + '; ' + note, guard='BAR_PASSED', then='gen = 0; i++; k = 0')}"
                   + (";" if not last else ""))
    return "\n".join(out) + "\n"


def _pingpong_warp(name: str, g: int, rounds: int, store_warp: bool, variant: str) -> str:
    """The process of one consumer warp of warpgroup g: its rounds, unrolled."""
    what = "warp 0 (issue_tma_store)" if store_warp else "one of warps 1..3"
    text = [f"proctype {name}() {{                /* math warpgroup {g}: {what} */",
            f"  byte g = {g}; byte i, k; bit gen;"]
    for r in range(rounds):
        last = r == rounds - 1 and not (store_warp and variant == "no_store_drain")
        text.append(f"  /* round {r}: work tile {2 * r + g} */")
        text.append(_pingpong_round(store_warp, variant, last).rstrip("\n"))
    if store_warp and variant == "no_store_drain":
        text.append("  sr[g] == 0                          /* store_tail once, after the last tile */")
    text.append("}")
    return "\n".join(text) + "\n"


def pingpong_model(stages: int, k_tiles: int, tiles: int, variant: str) -> str:
    """Return the Promela text of the pingpong kernel (benchmarks/specs/pingpong_*.pipe)."""
    if variant not in PINGPONG_VARIANTS:
        raise ValueError(f"variant must be one of {PINGPONG_VARIANTS}, not {variant!r}")
    for name, value in (("stages", stages), ("k_tiles", k_tiles), ("tiles", tiles)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")
    if tiles * k_tiles + stages > 254:
        raise ValueError("tiles * k_tiles + stages must stay below 255 (byte counters and tags)")
    s, k_n, t_n = stages, k_tiles, tiles

    events = []
    for i in range(s):
        no_reader = " && ".join(f"mb{j}[{g}] != {i + 1}" for g in range(2) for j in range(2))
        for buf, nbytes in (("A", "BYTES_A"), ("B", "BYTES_B")):
            events.append(
                f"  :: d_step {{ ld{buf}[{i}] != 0 ->        /* the TMA load into {buf}[{i}] lands */\n"
                f"       assert({no_reader});  /* overwrite: a wgmma is reading {buf}[{i}] */\n"
                f"       tag{buf}[{i}] = ld{buf}[{i}]; ld{buf}[{i}] = 0;\n"
                f"       ftx[{i}] = ftx[{i}] - {nbytes};  /* complete_tx on full[{i}] */\n"
                f"       {_full_complete(str(i))} }}")
    for g in range(2):
        events.append(f"  :: d_step {{ mb0[{g}] != 0 -> mb0[{g}] = mb1[{g}]; mb1[{g}] = 0; mc[{g}]++ }}"
                      f"  /* warpgroup {g}'s oldest wgmma completes */")
    for g in range(2):
        events.append(f"  :: d_step {{ sr[{g}] != 0 -> sr[{g}] = 0 }}"
                      f"  /* warpgroup {g}'s TMA store has read D */")

    warps, spawn = [], []
    for g in range(2):
        rounds = (t_n + 1 - g) // 2
        if rounds == 0:
            spawn.append(f"  /* math warpgroup {g} has no work tile: no process */")
            continue
        warps.append(_pingpong_warp(f"W{g}S", g, rounds, True, variant))
        warps.append(_pingpong_warp(f"W{g}N", g, rounds, False, variant))
        spawn.append(f"  run W{g}S(); run W{g}N(); run W{g}N(); run W{g}N();")

    return f"""\
/* pipecheck benchmark: CUTLASS SM90 pingpong, STAGES={s} K_TILES={k_n} TILES={t_n}, variant {variant} */
#define S       {s}
#define K       {k_n}
#define T       {t_n}
#define BYTES_A {BYTES_A}
#define BYTES_B {BYTES_B}
#define IDX     (c % S)          /* the producer ring's index at count c */
#define PAR     ((c / S) % 2)    /* the consumer phase at count c; the producer's is 1 - PAR */

bit   fph[S];        /* full[i]: completed phases mod 2 (all that `wait parity` reads) */
bit   fpend[S] = 1;  /* full[i]: pending arrivals; expected = 1 */
short ftx[S];        /* full[i]: tx bytes still owed, signed */
bit   eph[S];        /* empty[i]: completed phases mod 2 */
byte  epend[S] = 4;  /* empty[i]: pending arrivals in warps; expected = 128 threads; no tx */
bit   oph[4];        /* math_order[d][g] at 2d + g (d: 0 the MMA turn, 1 the epilogue turn) */
byte  opend[4] = 4;  /* math_order: pending arrivals in warps; expected = 128 threads */
byte  tagA[S];       /* A[i]: k-tile + 1 of the data in the buffer, 0 = never loaded */
byte  tagB[S];
byte  ldA[S];        /* the TMA load into A[i] in flight: k-tile + 1, 0 = none */
byte  ldB[S];
byte  ni[4];         /* warpgroup g: warps that issued its wgmma number m, at 2g + m % 2 */
byte  mb0[2];        /* warpgroup g: its oldest in-flight wgmma reads A/B[mb0 - 1]; 0 = none */
byte  mb1[2];        /* warpgroup g: the one after it */
byte  mc[2];         /* warpgroup g: completed wgmmas */
byte  nbc;           /* named barrier 1: warps arrived in this generation */
bit   nbg;           /* named barrier 1: completed generations mod 2 */
bit   sr[2];         /* warpgroup g: its TMA store (issued by warp 0) still reads D */

{_tma_producer('the elected lane, issuer and leader', 'mainloop_pipe_producer_state.count: t * K + k', 'load_tail')}
{_PINGPONG_COMMON}
{chr(10).join(warps)}
proctype X() {{                        /* asynchronous units: TMA loads, wgmma, TMA stores */
end:
  do
{chr(10).join(events)}
  od
}}

init {{
  atomic {{
  run X();
  run P();                            /* leader = the elected lane: which lane does not matter */
{chr(10).join(spawn)}
  }}
}}
"""



# ---------------------------------------------------------------- the umma family
#
# umma_model(stages, k_tiles, tiles, variant, acc_stages=2, epi=1): benchmarks/specs/umma_<variant>.pipe
# (variant "fixed" = umma_fixed.pipe, "early_acc_release" = umma_bug_early_acc_release.pipe,
# "no_store_drain" = umma_bug_no_store_drain.pipe): a Blackwell SM100 UMMA GEMM, 1-CTA, at the
# same abstraction as the pingpong model:
#
# - P: the producer warp's elected lane (the other 31 lanes do nothing; the election is
#   unobservable, no process). Per k-tile: wait empty, arrive.expect_tx on full (A + B bytes),
#   the A load issue, the B load issue; then producer_tail's S waits on empty.
# - M: the MMA warp's elected lane. Per work tile (unrolled): wait acc_empty[a]; per k-tile
#   wait full, tcgen05.mma (issue), tcgen05.commit to empty; after the last k-tile
#   tcgen05.commit to acc_full[a]; then the acc producer_tail (a wait on every acc stage).
#   tcgen05.mma is asynchronous: an issued MMA reads its A/B stage until it completes and then
#   writes ACC[a]; the thread's MMAs complete in issue order (mi issued, md completed, globals:
#   the in-flight MMAs are numbers md .. mi - 1). A tcgen05.commit is a pending arrival that
#   fires once every MMA issued before it completed (md >= the issue count at the commit).
# - E<g>S / E<g>N: the four warps of epilogue warpgroup g, each one process (32 lanes together),
#   as in the pingpong model: E<g>S is warp 0 (the store issuer: the store pipeline's acquire,
#   the TMA store, the store_tail), E<g>N a warp of warps 1..3 (three processes). acc_empty
#   counts 128 * EPI threads = 4 * EPI warp arrivals. Work tiles unrolled.
# - X: the asynchronous units: an A or B load lands (overwrite check against the in-flight MMAs
#   reading the stage; the tag; complete_tx), the oldest MMA completes (writes its tile into
#   ACC), a pending tcgen05.commit fires (any ready one, in any order), warpgroup g's oldest TMA
#   store finishes reading D.
#
# empty[] and acc_full[] have count 1 and no tx: their pending count is 1 before every arrival
# (no arrive-fault is possible), so only their phase parity is kept. bar.sync 1 + g, 128 as in
# the pingpong model (generation bit per warpgroup; exact, every warp of the warpgroup takes
# part in every generation). fence.proxy.async and commit_group are fused into the D write and
# the store issue.

UMMA_VARIANTS = ("fixed", "early_acc_release", "no_store_drain")
UMMA_BYTES_A = 8192   # 128x64 fp8 A k-tile (benchmarks/specs/umma_*.pipe)
UMMA_BYTES_B = 8192   # 128x64 fp8 B k-tile
UMMA_D_STAGES = 2     # D buffers per epilogue warpgroup (the specs' const D_STAGES)


def _umma_mma(tiles: int, acc_stages: int) -> str:
    """The MMA warp's elected lane: its work tiles unrolled, the K loop a do-loop over k."""
    out = ["proctype M() {                      /* MMA warp: the elected lane */",
           "  byte k;"]
    for t in range(tiles):
        a, ph = t % acc_stages, (1 + t // acc_stages) % 2
        out += [
            f"  /* work tile {t}: ACC[{a}] */",
            f"  aeph[{a}] != {ph};                     /* wait acc_empty[{a}] parity {ph} (acc producer_acquire) */",
            "  do",
            "  :: k < K && fph[MIDX] != MPAR ->     /* wait full[rd.index] parity rd.phase */",
            "     d_step {                          /* mma_async A/B[rd.index] tile mi into ACC: issue */",
            "       assert(tagA[MIDX] >= mi + 1 && tagB[MIDX] >= mi + 1);  /* stale-read: k-tile mi not landed */",
            "       assert(tagA[MIDX] <= mi + 1 && tagB[MIDX] <= mi + 1);  /* overwrite: a later k-tile landed */",
            "       assert(ldA[MIDX] == 0 && ldB[MIDX] == 0);  /* overwrite: a load into the stage is in flight */",
            f"       sin[MIDX]++; ain[{a}]++; mi++",
            "     };",
            "     d_step {                          /* mma_commit empty[rd.index]; advance rd */",
            "       assert(ec[(mi - 1) % S] == 0);  /* model capacity: one commit owed per stage */",
            "       ec[(mi - 1) % S] = mi + 1; k++",
            "     }",
            f"  :: d_step {{ k == K ->                /* mma_commit acc_full[{a}]; advance acc */",
            f"       assert(afc[{a}] == 0);          /* model capacity: one commit owed per acc stage */",
            f"       afc[{a}] = mi + 1; k = 0 }}; break",
            "  od;",
        ]
    tail = [f"  aeph[{(tiles + s) % acc_stages}] != {(1 + (tiles + s) // acc_stages) % 2}"
            for s in range(acc_stages)]
    out.append(";\n".join(tail) + "                 /* acc producer_tail: wait every acc stage */")
    out.append("}")
    return "\n".join(out) + "\n"


def _umma_epi_warp(name: str, g: int, store_warp: bool, tiles: int, acc_stages: int, variant: str) -> str:
    """One warp of epilogue warpgroup g: its work tiles, unrolled."""
    what = "warp 0 (issue_tma_store)" if store_warp else "one of warps 1..3"
    ds = UMMA_D_STAGES
    out = [f"proctype {name}() {{                 /* epilogue warpgroup {g}: {what} */",
           f"  bit gen;                            /* bar.sync {1 + g}: the generation this warp arrived in */"]
    for t in range(tiles):
        a, ph, j = t % acc_stages, (t // acc_stages) % 2, t % ds
        out.append(f"  /* work tile {t}: ACC[{a}], D[{g}][{j}] */")
        if t > 0 and not store_warp:
            out.append(f"  d_step {{ nbg[{g}] != gen && afph[{a}] != {ph} -> gen = 0 }};  "
                       f"/* bar.sync passed; wait acc_full[{a}] parity {ph} */")
        else:
            out.append(f"  afph[{a}] != {ph};                     /* wait acc_full[{a}] parity {ph} (acc consumer_wait) */")
        read = (f"  d_step {{                            /* read ACC[{a}] tile {t}: tcgen05.ld + tcgen05.wait::ld */\n"
                f"    assert(acct[{a}] >= {t + 1});         /* stale-read: tile {t} not in ACC[{a}] yet */\n"
                f"    assert(acct[{a}] <= {t + 1});         /* overwrite: a later tile's MMA already wrote ACC[{a}] */\n"
                f"    assert(ain[{a}] == 0)              /* overwrite: an MMA still writes ACC[{a}] */\n"
                "  };")
        release = (f"  d_step {{                            /* arrive acc_empty[{a}] (acc consumer_release) */\n"
                   f"    assert(aepend[{a}] > 0);           /* arrive-fault */\n"
                   f"    aepend[{a}]--;\n"
                   f"    if :: aepend[{a}] == 0 -> aeph[{a}] = 1 - aeph[{a}]; aepend[{a}] = AEC :: else -> skip fi\n"
                   "  };")
        if variant == "early_acc_release":
            out += [release.replace("(acc consumer_release)", "BUG: before the read"), read]
        else:
            out += [read, release]
        if store_warp:
            if variant == "no_store_drain":
                out.append("  /* BUG: no store producer_acquire (wait_group.read DS - 1) */")
            else:
                out.append(f"  sr[{g}] < DS;                         /* store producer_acquire: wait_group.read DS - 1 */")
        out += [
            f"  bar_arrive({g});                      /* bar.sync {1 + g}, 128 */",
            f"  d_step {{ nbg[{g}] != gen -> gen = 0;  /* write D[{g}][{j}] tile {t}; fence.proxy.async */",
            f"    assert(sr[{g}] < DS)                /* store-reuse: an earlier tile's TMA store still reads D[{g}][{j}] */",
            "  };",
            f"  bar_arrive({g});                      /* bar.sync {1 + g}, 128 */",
        ]
        if store_warp:
            out.append(f"  d_step {{ nbg[{g}] != gen -> gen = 0; sr[{g}]++ }};  /* tma_store D[{g}][{j}] tile {t}; commit_group */")
    if store_warp:
        out.append(f"  sr[{g}] == 0                         /* store_tail: wait_group.read 0 */")
    else:
        out[-1] = out[-1].rstrip(";").replace(f"bar_arrive({g});", f"bar_arrive({g}) ")
    out.append("}")
    return "\n".join(out) + "\n"


def umma_model(stages: int, k_tiles: int, tiles: int, variant: str, acc_stages: int = 2, epi: int = 1) -> str:
    """Return the Promela text of the SM100 UMMA GEMM (benchmarks/specs/umma_*.pipe)."""
    if variant not in UMMA_VARIANTS:
        raise ValueError(f"variant must be one of {UMMA_VARIANTS}, not {variant!r}")
    for name, value in (("stages", stages), ("k_tiles", k_tiles), ("tiles", tiles)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, not {value}")
    if acc_stages not in (1, 2) or epi not in (1, 2):
        raise ValueError("acc_stages and epi must be 1 or 2")
    if tiles * k_tiles + stages > 254:
        raise ValueError("tiles * k_tiles + stages must stay below 255 (byte counters and tags)")
    s, k_n, t_n, a_n, e_n = stages, k_tiles, tiles, acc_stages, epi

    events = []
    for i in range(s):
        for buf, nbytes in (("A", "BYTES_A"), ("B", "BYTES_B")):
            events.append(
                f"  :: d_step {{ ld{buf}[{i}] != 0 ->        /* the TMA load into {buf}[{i}] lands */\n"
                f"       assert(sin[{i}] == 0);         /* overwrite: an MMA is reading {buf}[{i}] */\n"
                f"       tag{buf}[{i}] = ld{buf}[{i}]; ld{buf}[{i}] = 0;\n"
                f"       ftx[{i}] = ftx[{i}] - {nbytes};  /* complete_tx on full[{i}] */\n"
                f"       {_full_complete(str(i))} }}")
    events.append("  :: d_step { md < mi ->              /* the oldest MMA completes: writes its tile into ACC */\n"
                  "       sin[md % S]--; ain[(md / K) % AS]--; acct[(md / K) % AS] = md / K + 1; md++ }")
    for i in range(s):
        events.append(f"  :: d_step {{ ec[{i}] != 0 && md + 1 >= ec[{i}] -> eph[{i}] = 1 - eph[{i}]; ec[{i}] = 0 }}"
                      f"  /* tcgen05.commit arrives on empty[{i}] */")
    for a in range(a_n):
        events.append(f"  :: d_step {{ afc[{a}] != 0 && md + 1 >= afc[{a}] -> afph[{a}] = 1 - afph[{a}]; afc[{a}] = 0 }}"
                      f"  /* tcgen05.commit arrives on acc_full[{a}] */")
    for g in range(e_n):
        events.append(f"  :: d_step {{ sr[{g}] != 0 -> sr[{g}]-- }}"
                      f"  /* epilogue warpgroup {g}'s oldest TMA store has read D */")

    warps, spawn = [], []
    for g in range(e_n):
        warps.append(_umma_epi_warp(f"E{g}S", g, True, t_n, a_n, variant))
        warps.append(_umma_epi_warp(f"E{g}N", g, False, t_n, a_n, variant))
        spawn.append(f"  run E{g}S(); run E{g}N(); run E{g}N(); run E{g}N();")

    return f"""\
/* pipecheck benchmark: SM100 UMMA GEMM, STAGES={s} K_TILES={k_n} TILES={t_n} ACC_STAGES={a_n} EPI={e_n}, variant {variant} */
#define S       {s}
#define K       {k_n}
#define T       {t_n}
#define AS      {a_n}
#define E       {e_n}
#define DS      {UMMA_D_STAGES}
#define AEC     {4 * e_n}               /* acc_empty: 128 * EPI threads = 4 * EPI warp arrivals */
#define BYTES_A {UMMA_BYTES_A}
#define BYTES_B {UMMA_BYTES_B}
#define IDX     (c % S)          /* the producer ring's index at count c */
#define PAR     ((c / S) % 2)    /* the consumer phase at count c; the producer's is 1 - PAR */
#define MIDX    (mi % S)         /* the MMA lane's rd.index: mi = t * K + k */
#define MPAR    ((mi / S) % 2)   /* its rd.phase */

bit   fph[S];        /* full[i]: completed phases mod 2 (all that `wait parity` reads) */
bit   fpend[S] = 1;  /* full[i]: pending arrivals; expected = 1 */
short ftx[S];        /* full[i]: tx bytes still owed, signed */
bit   eph[S];        /* empty[i]: completed phases mod 2 (count 1, no tx: pending is always 1) */
bit   afph[AS];      /* acc_full[a]: completed phases mod 2 (count 1, no tx) */
bit   aeph[AS];      /* acc_empty[a]: completed phases mod 2 */
byte  aepend[AS] = AEC;  /* acc_empty[a]: pending arrivals in warps */
byte  tagA[S];       /* A[i]: k-tile + 1 of the data in the buffer, 0 = never loaded */
byte  tagB[S];
byte  ldA[S];        /* the TMA load into A[i] in flight: k-tile + 1, 0 = none */
byte  ldB[S];
byte  mi;            /* tcgen05.mma issued by the MMA lane (in order: k-tile numbers t * K + k) */
byte  md;            /* of those, completed (they complete in issue order) */
byte  sin[S];        /* in-flight MMAs reading A/B[i] (a function of mi, md) */
byte  ain[AS];       /* in-flight MMAs writing ACC[a] (a function of mi, md) */
byte  acct[AS];      /* ACC[a]: tile + 1 the last completed MMA wrote, 0 = none */
byte  ec[S];         /* tcgen05.commit owed to empty[i]: fires once md + 1 >= ec; 0 = none */
byte  afc[AS];       /* tcgen05.commit owed to acc_full[a]: the same */
byte  sr[E];         /* epilogue warpgroup g: its TMA stores still reading D (finish in commit order) */
byte  nbc[E];        /* named barrier 1 + g: warps arrived in this generation */
bit   nbg[E];        /* named barrier 1 + g: completed generations mod 2 */

{_tma_producer('the elected lane', 'mainloop producer count: t * K + k', 'producer_tail')}
{_umma_mma(t_n, a_n)}
/* bar.sync 1 + g, 128, the arrival: the fourth warp completes the generation. The warp then
   waits for its generation to complete (nbg[g] != gen) as the guard of its next step. */
inline bar_arrive(g) {{
  d_step {{ gen = nbg[g]; nbc[g]++; if :: nbc[g] == 4 -> nbc[g] = 0; nbg[g] = 1 - nbg[g] :: else -> skip fi }}
}}

{chr(10).join(warps)}
proctype X() {{                        /* asynchronous units: TMA loads, tcgen05.mma, commits, TMA stores */
end:
  do
{chr(10).join(events)}
  od
}}

init {{
  atomic {{
  run X();
  run P();
  run M();
{chr(10).join(spawn)}
  }}
}}
"""

if __name__ == "__main__":
    import sys

    argv = sys.argv[1:]
    if len(argv) == 5 and argv[0] == "pingpong" and argv[4] in PINGPONG_VARIANTS:
        sys.stdout.write(pingpong_model(int(argv[1]), int(argv[2]), int(argv[3]), argv[4]))
    elif len(argv) in (5, 7) and argv[0] == "umma" and argv[4] in UMMA_VARIANTS:
        extra = (int(argv[5]), int(argv[6])) if len(argv) == 7 else ()
        sys.stdout.write(umma_model(int(argv[1]), int(argv[2]), int(argv[3]), argv[4], *extra))
    elif len(argv) == 4 and argv[3] in VARIANTS:
        sys.stdout.write(ring_model(int(argv[0]), int(argv[1]), int(argv[2]), argv[3]))
    else:
        sys.exit("usage: python3.11 promela.py STAGES K_TILES CONSUMERS fixed|bug3722\n"
                 "       python3.11 promela.py pingpong STAGES K_TILES TILES "
                 "fixed|release_before_read|no_store_drain\n"
                 "       python3.11 promela.py umma STAGES K_TILES TILES "
                 "fixed|early_acc_release|no_store_drain [ACC_STAGES EPI]")
