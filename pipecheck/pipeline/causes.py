"""Cause first: the findings of a failing configuration grouped under the one that causes them, with the
usual fix of a known bug pattern, and whether each is an error on current hardware or latent.

Pure functions of the runs' explorations; witnesses are replayed through the explored system.
"""
from __future__ import annotations

from ..model.ir import END
from ..search.explore import replay
from .result import Issue, Run

# codes that name the statement that broke the protocol, before the symptoms that follow from it: a thread
# falling phases behind, a CTA exit with work in flight, threads waiting forever
CAUSE_ORDER = ("arrive-fault", "tx-range", "uninit-barrier", "missing-init-fence", "double-arrive", "stale-read",
               "overwrite", "store-reuse", "missing-proxy-fence", "tmem-free-inflight", "missing-tcgen05-fence", "trap", "exit-inflight", "phase-alias", "hang")
SYMPTOMS = ("phase-alias", "hang")
HAZARDS = CAUSE_ORDER[:CAUSE_ORDER.index("exit-inflight")]

# states explored past first findings in one spec, over all its configurations (Options.cause_budget is the
# most for one), so a sweep over parameters stays bounded: a search that starts while some of it is left goes
# on for its whole budget (pipeline/searches.py), so a spec explores at most TOTAL + cause_budget past them
TOTAL = 6_000


def rank(code: str) -> int:
    return CAUSE_ORDER.index(code) if code in CAUSE_ORDER else len(CAUSE_ORDER)


def antecedents(run: Run, found) -> tuple[tuple | None, tuple | None, bool, frozenset]:
    """(the first finding raised earlier on the witness, a phase-alias of the same terminal state) as keys,
    whether a CTA had exited when a hang's threads were left waiting, and the thread classes left waiting."""
    system = run.system if run.system is not None else run.model
    try:
        steps = replay(system, found.path)
    except KeyError:  # a witness of the reduced system that the plain one does not replay: claim nothing
        return None, None, False, frozenset()
    earlier = steps if found.terminal else steps[:-1]
    first = next((f.key for _, _, fs in earlier for f in fs if f.key != found.finding.key), None)
    alias, exited, blocked = None, False, frozenset()
    if found.terminal and found.finding.code == "hang":
        final = steps[-1][1] if steps else system.initial()
        alias = next((f.key for f in system.terminal_findings(final) if f.code == "phase-alias"), None)
        exited = any(getattr(final, "exited", ()))
        model = run.model
        blocked = frozenset(c for c, groups in enumerate(final.locs)
                            for (pc, _), _ in groups if model.code[c][pc].op is not END)
    return first, alias, exited, blocked


def group(issues: list[Issue]) -> list[Issue]:
    """The causes, each with its consequences, ordered cause first.

    A finding is a consequence of another when (1) its shortest schedule passes the transition that raised
    the other first; (2) it is a hang whose final state has a waiter two phases behind (the phase-alias);
    (3) it is a hang or a phase-alias and every configuration showing it also shows a hazard that names a
    statement (overwrite, stale-read, ...): the broken hand-over shows as the hazard, and a shorter schedule
    of the same configurations as threads falling behind or waiting forever; for a hang whose schedule ends
    with a CTA gone, an exit-inflight of the same configurations counts as such a hazard."""
    by_key = {i.finding.key: i for i in issues}
    parent: dict[int, tuple[Issue, str]] = {}
    exits: set[int] = set()
    for i in issues:
        first, alias, exited, blocked = antecedents(i.run, i.witness)
        if exited:
            exits.add(id(i))
        lost = [a for a in issues if a.code == "phase-alias" and a.finding.cls in blocked and i.where <= a.where]
        if first in by_key and by_key[first] is not i:
            parent[id(i)] = (by_key[first], f"on its shortest schedule, after the {by_key[first].code}")
        elif alias in by_key and by_key[alias] is not i:
            parent[id(i)] = (by_key[alias], "the waiters that fell behind then wait forever")
        elif lost and i.where:
            parent[id(i)] = (lost[0], "the threads that lost their phase are among those left waiting")
    for i in issues:
        if id(i) in parent or i.code not in SYMPTOMS:
            continue
        # a hang left behind by an exited CTA goes with the exit (a peer waits for arrivals it will not make)
        kinds = HAZARDS + (("exit-inflight",) if id(i) in exits else ())
        covers = [h for h in issues if h.code in kinds and id(h) not in parent and i.where and i.where <= h.where]
        if covers:
            h = min(covers, key=lambda h: (rank(h.code), h.witness.steps))
            parent[id(i)] = (h, f"in the same configurations (a {'shorter' if i.witness.steps < h.witness.steps else 'longer'} schedule)")

    def root(i: Issue) -> Issue:
        seen = {id(i)}
        while id(i) in parent and id(parent[id(i)][0]) not in seen:
            i = parent[id(i)][0]
            seen.add(id(i))
        return i

    roots = [i for i in issues if root(i) is i]
    for i in issues:
        r = root(i)
        if r is not i:
            i.led_by = parent[id(i)][1]
            r.consequences.append(i)
    for r in roots:
        r.consequences.sort(key=lambda c: (rank(c.code), c.witness.steps, c.finding.site, c.finding.message))
        r.fix = usual_fix(r)
    roots.sort(key=lambda i: (rank(i.code), i.witness.steps, i.finding.site, i.finding.message))
    return roots


def usual_fix(issue: Issue) -> str:
    """The fix kernel engineers apply for a known pattern, from the finding and what it leads to."""
    f = issue.finding
    msg = f.message
    if f.code == "exit-inflight":
        if "TMA store" in msg or "bulk" in msg:
            return ("drain the CTA's TMA stores before it exits: wait_group_read 0 (or wait_group 0) in the storing "
                    "thread after its last commit_group (PipelineTmaStore::producer_tail)")
        if "after CTA" in msg or "arrive" in msg:
            return ("a producer tail: before the producer's CTA exits, wait on each stage's empty barrier for the "
                    "releases still owed to it (PipelineTmaAsync::producer_tail), or end with a cluster sync")
        return ("wait on the barrier the copy completes on (or drain it) before the last thread of the CTA ends; "
                "a producer with loads in flight needs a producer tail (PipelineTmaAsync::producer_tail)")
    if f.code == "overwrite":
        if "mma_async" in msg and ("TMA load" in msg or "copy" in msg):
            return ("release the stage (arrive on its empty barrier) only after mma_wait retires the wgmma that reads "
                    "it: CUTLASS waits warpgroup_wait<1> and then releases the previous stage")
        if "writes" in msg and "ACC" in msg or "accumulator" in msg:
            return "wait for the accumulator's full barrier before reading it, and release it (its empty barrier) after"
    if f.code == "missing-proxy-fence":
        return ("fence_proxy_async in every thread that wrote the buffer, after its writes and before the sync that "
                "precedes the TMA store")
    if f.code == "missing-tcgen05-fence":
        return ("tcgen05_before_thread_sync after the tcgen05 work and before the sync (arrive, bar_sync, syncthreads); "
                "tcgen05_after_thread_sync after the sync (wait, bar_sync) and before the next tcgen05 operation")
    if f.code == "tmem-free-inflight":
        return ("order tmem_dealloc after every TMEM access: each accessing warp runs tcgen05_before_thread_sync and a "
                "sync (bar_sync / syncthreads) the deallocating warp also passes, then tcgen05_after_thread_sync")
    if f.code == "missing-init-fence":
        return ("fence_barrier_init (or fence_proxy_async) in the initialising thread after its inits and before the "
                "sync, so the TMA unit (async proxy) sees them (DeepGEMM: fence_view_async_shared after init)")
    if f.code == "uninit-barrier" and "reuses the memory" in msg:
        return "inval the barrier after its last use (every arrival, landing and wait done), then reuse its memory"
    if f.code == "uninit-barrier" and "re-initialises" in msg:
        return "inval the barrier after its last use before initialising it again, or keep one init for its life"
    if f.code == "uninit-barrier":
        return "fence_barrier_init after the inits, then a syncthreads (a cluster_sync for remote users) before any use"
    if f.code in ("double-arrive", "arrive-fault") and _remote(issue):
        return ("count every arrival a phase receives in the barrier's init: a release from each CTA of the cluster "
                "(multicast) is an arrival too, so the count is consumers x CTAs that release the stage")
    if f.code == "store-reuse":
        return "wait_group_read before writing the buffer again (PipelineTmaStore::producer_acquire)"
    return ""


def _remote(issue: Issue) -> bool:
    m = issue.finding.message
    who = m.split(" arrives on ")[0] if " arrives on " in m else ""
    bar = m.split(" arrives on ")[1].split(" ")[0] if " arrives on " in m else ""
    return bool(who[:3] == "cta" and bar[:3] == "cta" and who.split(".")[0] != bar.split(".")[0])


LANE = "it needs a lane the H200 does not elect (elect.sync elected the lowest lane of the mask on every H200 run)"
APART = "it needs lanes of one warp to run apart after a branch (independent thread scheduling; gone with --lockstep)"
BEHIND = "it needs a warp to fall two or more phases behind the rest of its role instance"


def mark_latent(issues: list[Issue]) -> None:
    """Severity: a finding is latent when it needs what the H200 was not seen to do; else an error.

    A consequence is as latent as its cause, and also by its own reasons."""
    for i in issues:
        i.latent = _latent(i)
        for c in i.consequences:
            c.latent = tuple(dict.fromkeys(_latent(c) + i.latent))


def _latent(i: Issue) -> tuple[str, ...]:
    out = []
    if i.on_hardware is False:
        out.append(LANE)
    if i.needs_independent_scheduling:
        out.append(APART)
    if warp_behind(i):
        out.append(BEHIND)
    if i.finding.latent:
        out.append(i.finding.latent)
    return tuple(out)


def warp_behind(i: Issue) -> bool:
    """A phase-alias whose waiters hold a whole warp that no other thread of their role instance shares, while
    other threads of the instance went on: one warp fell behind its warpgroup (or larger role), as the waiting
    warps of a producer warpgroup can when one elected thread does the arrivals (TileLang's lowering)."""
    f = i.finding
    if f.code != "phase-alias" or f.cls < 0 or "behind" not in f.message:
        return False
    classes = i.run.model.classes
    cl = classes[f.cls]
    peers = [k for k in classes if (k.cta, k.role, k.instance) == (cl.cta, cl.role, cl.instance) and k.id != cl.id]
    if not peers or cl.role_threads <= 32:
        return False
    mine = {t // 32 for t in cl.members}
    theirs = {t // 32 for k in peers for t in k.members}
    return bool(mine - theirs)
