"""tcgen05 ordering and tensor memory (sm_100): the fences a thread sync needs around tcgen05 work, and
TMEM freed while a reader or an MMA may still use it. A component of `Model`, pure functions of a state.

State.t5 holds sorted entries: ("w", class) the class has done tcgen05 work; ("d", class) a tcgen05 op of the
class not yet followed by tcgen05_before_thread_sync; ("n", class) the class passed a thread sync that orders
another thread's tcgen05 work and has not run tcgen05_after_thread_sync since; ("c", barrier, class) the
class's tcgen05 work arrives on the barrier (an arrive after tcgen05 work, a tcgen05.commit); ("a", key, class)
the class arrived at the current generation of the thread sync `key` (a named barrier, syncthreads,
cluster_sync) after tcgen05 work, so that generation orders tcgen05 work; ("f", cta) the CTA's TMEM is
deallocated.
"""
from __future__ import annotations

from typing import Sequence

from .findings import Finding
from .ir import BAR_ARRIVE, COLL, MMA, READ, TCGEN05_OPS, TMEM_ALLOC, TMEM_DEALLOC, WRITE
from .layout import Layout
from .state import State

# the collectives that are thread syncs in the sense of PTX ISA 9.7.16.6.4 (named barriers, the CTA, the cluster)
SYNC_KINDS = ("bar", "syncthreads", "cluster_sync")


class Tcgen05Order:
    def __init__(self, layout: Layout, programs: Sequence, labels: Sequence[str], ctas: Sequence[int], wgmma: bool):
        self.layout = layout
        self.labels = labels
        self.ctas = ctas
        tmem = {name for name, (base, _) in layout.buf_base.items() if layout.nbuf and layout.space[base] == "tmem"}

        def touches(ins) -> bool:
            if ins.op in (TMEM_ALLOC, TMEM_DEALLOC):
                return True
            if ins.op is MMA:
                return not wgmma
            return ins.op in (READ, WRITE) and ins.args[0].name in tmem

        # the fence rules hold only where the spec states tcgen05 ordering at all: a kernel with a tcgen05 fence
        # or a TMEM statement (the corpus's sm_100 specs model neither; docs/semantics.md)
        self.active = any(i.op in TCGEN05_OPS for p in programs for i in p.instrs)
        workers = [any(touches(i) for i in p.instrs) for p in programs]
        self.workers = tuple(workers)  # per class, whether it does tcgen05 work (`work`): its arrivals may order it
        # a thread sync can order tcgen05 work only where a class that does tcgen05 work takes part in one (a
        # quick test; whether one generation does is decided when it completes, `released`)
        self.sync_carries = any(works and any(i.op is BAR_ARRIVE or (i.op is COLL and i.args[0] in SYNC_KINDS)
                                              for i in p.instrs) for p, works in zip(programs, workers))
        self.tmem_ctas = {b: b // layout.nbuf for b in range(layout.nbuf * layout.ncta) if layout.space[b] == "tmem"}

    def is_tmem(self, buf: int) -> bool:
        return buf in self.tmem_ctas

    # ------------------------------------------------------------ the fences (PTX ISA 9.7.16.6.4)
    def work(self, s: State, c: int, site: int, what: str, asynchronous: bool = True) -> tuple[list[Finding], tuple]:
        """Class c issues tcgen05 work: after a sync it needs tcgen05_after_thread_sync first; until
        tcgen05_before_thread_sync it may not be ordered before another thread by a sync. Both fences order
        only the asynchronous tcgen05 operations on their own side (mma, ld, st, cp, shift; PTX ISA 9.7.16.6.3);
        tcgen05.alloc / dealloc are synchronous (9.7.16.6.1) and need neither, though a thread that ran one has
        done tcgen05 work that a sync orders before another thread's tcgen05 operations."""
        if not self.active:
            return [], s.t5
        if not asynchronous:
            return [], s.t5 if ("w", c) in s.t5 else tuple(sorted(set(s.t5) | {("w", c)}))
        findings = []
        if ("n", c) in s.t5:
            findings.append(Finding("missing-tcgen05-fence", f"{self.labels[c]} {what} after a thread sync with no "
                                    "tcgen05_after_thread_sync between: the tcgen05 operation is not ordered after "
                                    "the other threads' tcgen05 work the sync was meant to order it after "
                                    "(PTX ISA 9.7.16.6.4)", site, c))
        t5 = tuple(sorted(set(s.t5) - {("n", c)} | {("d", c), ("w", c)}))
        return findings, t5

    def sync(self, s: State, c: int, site: int, what: str, gid: int = -1, key: tuple | None = None
             ) -> tuple[list[Finding], tuple]:
        """Class c arrives at a thread sync (an mbarrier arrive on `gid`, or the generation of the collective
        `key`: a named barrier, syncthreads, cluster_sync): its tcgen05 work must be fenced before; the mbarrier
        or the collective's generation then orders that work."""
        if not self.active or ("w", c) not in s.t5:
            return [], s.t5
        t5 = set(s.t5)
        if gid >= 0:
            t5.add(("c", gid, c))
        if key is not None:
            t5.add(("a", key, c))
        findings = []
        if ("d", c) in t5:
            findings.append(Finding("missing-tcgen05-fence", f"{self.labels[c]} {what} after tcgen05 work with no "
                                    "tcgen05_before_thread_sync between: the sync does not order that work before "
                                    "the threads it releases (PTX ISA 9.7.16.6.4)", site, c))
            t5.discard(("d", c))
        return findings, tuple(sorted(t5))

    def commit(self, t5: tuple, bars, c: int) -> tuple:
        """Class c's tcgen05.commit arrives on these barriers: a wait on them orders the MMAs' work."""
        if not self.active:
            return t5
        return tuple(sorted(set(t5) | {("c", g, c) for g in bars}))

    def passed(self, t5: tuple, classes: Sequence[int]) -> tuple:
        """These classes passed a thread sync that orders tcgen05 work: they need tcgen05_after_thread_sync."""
        if not self.active:
            return t5
        return tuple(sorted(set(t5) | {("n", k) for k in classes}))

    def released(self, t5: tuple, key: tuple, classes: Sequence[int], again: int = -1) -> tuple:
        """A generation of the thread sync `key` completed and released these classes. It orders tcgen05 work
        across it only when a thread that arrived at it had done tcgen05 work before (PTX ISA 9.7.16.6.3: the
        fences order tcgen05 operations relative to the sync; with none before it there is nothing for
        tcgen05_after_thread_sync to order after, e.g. a tmem_alloc after the kernel's first cluster sync).
        Class `again` has threads arriving at the next generation as well: its record stays for that one."""
        if not self.active or not self.sync_carries:
            return t5
        gen = [e for e in t5 if e[0] == "a" and e[1] == key]
        if not gen:
            return t5
        keep = {("a", key, again)} & set(gen)
        return tuple(sorted((set(t5) - set(gen)) | keep | {("n", k) for k in classes}))

    def passes_barrier(self, s: State, gid: int, c: int) -> bool:
        """Whether a wait of class c on the barrier orders another class's tcgen05 work before it."""
        return self.active and any(e[0] == "c" and e[1] == gid and e[2] != c for e in s.t5)

    def fence(self, s: State, c: int, before: bool) -> tuple:
        drop = ("d", c) if before else ("n", c)
        return tuple(e for e in s.t5 if e != drop) if drop in s.t5 else s.t5

    # ------------------------------------------------------------ tensor memory (PTX ISA 9.7.16.7.1)
    def freed(self, s: State, buf: int) -> bool:
        return buf in self.tmem_ctas and ("f", self.tmem_ctas[buf]) in s.t5

    def use_after_free(self, s: State, c: int, buf: int, site: int, what: str) -> list[Finding]:
        if not self.freed(s, buf):
            return []
        who = self.labels[c] if c >= 0 else "an mma_async"
        return [Finding("tmem-free-inflight", f"{who} {what} {self.layout.buf_names[buf]} after the CTA's tensor "
                        "memory was deallocated: no sync orders the tmem_dealloc after every TMEM access",
                        site, c)]

    def dealloc(self, s: State, c: int, cta: int, site: int) -> tuple[list[Finding], tuple]:
        findings = []
        for _, _, inflight in s.mmas:
            for seq, ops, msite, mc, outs in inflight:
                hit = next((ob for ob, _ in outs if self.tmem_ctas.get(ob) == cta), None)
                if hit is not None:
                    findings.append(Finding("tmem-free-inflight", f"{self.labels[c]} deallocates the CTA's tensor "
                                            f"memory while an mma_async still writes {self.layout.buf_names[hit]}: "
                                            "wait for its tcgen05.commit before tmem_dealloc", site, c,
                                            notes=(("the mma_async", msite),)))
                    break
            if findings:
                break
        return findings, tuple(sorted(set(s.t5) | {("f", cta)}))

    def alloc(self, s: State, cta: int) -> tuple:
        return tuple(e for e in s.t5 if e != ("f", cta))

