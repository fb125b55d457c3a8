"""Promela (SPIN) model of the TMA + mbarrier stage ring, for the pipecheck-vs-SPIN benchmark.

`ring_model(stages, k_tiles, consumers, variant)` returns the Promela text of the `ring`
kernel (one producer warp, `consumers` consumer warpgroups, a `stages`-deep ring of
full/empty mbarriers, `k_tiles` iterations), in the variant `"fixed"`
(`let leader = issuer`) or `"bug3722"` (`let leader = lane == 0`, CUTLASS issue #3722).

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


if __name__ == "__main__":
    import sys

    argv = sys.argv[1:]
    if len(argv) != 4 or argv[3] not in VARIANTS:
        sys.exit("usage: python3.11 promela.py STAGES K_TILES CONSUMERS fixed|bug3722")
    sys.stdout.write(ring_model(int(argv[0]), int(argv[1]), int(argv[2]), argv[3]))
