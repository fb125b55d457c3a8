"""The asynchronous events of the model: copies landing, wgmma groups completing, bulk stores
draining, commit arrivals firing, CTAs exiting: each returns (action, next state, findings).
"""
from __future__ import annotations

from typing import Any, Sequence

from . import semantics as S
from .findings import Finding
from .hazards import Hazards
from .layout import Layout
from .state import Action, State


# benchmarks/hw/probe_store_exit.cu: 5 x 8,448 CTAs each exiting with a 96 KB bulk store of its shared memory in
# flight, that memory reused at once by later CTAs: no word of any store came out wrong
STORE_EXIT = ("the H200 kept a CTA's shared memory until its bulk stores had read it (benchmarks/hw/"
              "probe_store_exit.cu: no wrong word in 5 x 8,448 CTAs exiting with a 96 KB store in flight); the CUDA "
              "Programming Guide still makes the exit undefined")


class AsyncEvents:
    def __init__(self, layout: Layout, hazards: Hazards, labels: Sequence[str], unit_cta: Sequence[int],
                 unit_labels: Sequence[str], store_writes: bool = True, ordered_stores: bool = True,
                 tcgen05: "Any" = None):
        self.layout = layout
        self.tcgen05 = tcgen05  # model.tcgen05.Tcgen05Order: an MMA writing TMEM after it was deallocated
        # bulk stores finish in commit order (`store_ready`); off, every order (a reduction, off with the others)
        self.ordered_stores = ordered_stores
        # whether a bulk store's second stage (writing global memory) is observed: only a wait_group without
        # .read waits for it; otherwise a store is done once it finished reading shared memory
        self.store_writes = store_writes
        self.hazards = hazards
        self.labels = labels  # per thread class
        self.unit_cta = unit_cta  # per MMA unit
        self.unit_labels = unit_labels

    def land(self, s: State, i: int) -> tuple[Action, State, tuple[Finding, ...]]:
        buf, tag, nbytes, bar, site, src, seq = s.flight[i]
        flight = s.flight[:i] + s.flight[i + 1:]
        kind = "TMA load" if bar >= 0 else "cp.async copy"
        findings = self.hazards.write_hazards(s, src, site, buf, f"the {kind} of tile {tag} lands in", landing=True)
        t = s._replace(flight=flight, bufs=self.hazards.retag(s.bufs, buf, tag))
        if bar >= 0:
            events: list[str] = []
            before = t.bars[bar]
            nb = S.complete_tx(before, nbytes, events)
            f, halted = self.hazards.barrier_events(events, -1, site, bar, before, nbytes)
            findings.extend(f)
            t = t._replace(bars=t.bars[:bar] + (nb,) + t.bars[bar + 1:], halted=halted)
        return ("l", i), t, tuple(findings)

    def mma_done(self, s: State, u: int) -> tuple[Action, State, tuple[Finding, ...]]:
        done, forming, inflight = s.mmas[u]
        seq, ops, site, c, result = inflight[0]
        mmas = s.mmas[:u] + ((done + 1, forming, inflight[1:]),) + s.mmas[u + 1:]
        t = s._replace(mmas=mmas)
        findings: tuple = ()
        for buf, tag in result:  # both CTAs' accumulator halves with cta_group 2
            findings += tuple(self.hazards.write_hazards(t, c, site, buf, f"the mma_async of {self.unit_labels[u]} writes tile "
                                                  f"{tag} into", landing=True))
            if self.tcgen05 is not None:
                findings += tuple(self.tcgen05.use_after_free(t, c, buf, site, "completes an mma_async into"))
            t = t._replace(bufs=self.hazards.retag(t.bufs, buf, tag if tag is not None else t.bufs[buf]))
        return ("m", u), t, findings

    def store_ready(self, s: State, i: int) -> bool:
        """Whether store i may take its next step now: a class's bulk stores finish each stage (reading
        SMEM, then writing) in the order they were committed (group, then place in the group).

        This keeps every finding: a thread observes a store's progress only through `wait_group` (or
        `.read`), which waits for every group older than its N most recent (PTX 9.7.9.27.2), so a
        younger store finishing first enables no wait sooner; holding it back keeps its buffer read
        (or its write pending) longer, which only adds hazards, and each such schedule is one the
        hardware may take. What it saves is the orders of completions nobody can tell apart.

        Unordered (`ordered_stores` off: the plain search), only the first of identical entries steps."""
        if not self.ordered_stores:
            return i == 0 or s.stores[i] != s.stores[i - 1]
        c, seq, buf, tag, stage, site = s.stores[i]
        key = (seq, buf, tag, site)
        for j, (c2, seq2, buf2, tag2, stage2, site2) in enumerate(s.stores):
            if j != i and c2 == c and stage2 <= stage:
                k2 = (seq2, buf2, tag2, site2)
                if k2 < key or (k2 == key and j < i):
                    return False
        return True

    def store_step(self, s: State, i: int) -> tuple[Action, State, tuple[Finding, ...]]:
        c, seq, buf, tag, stage, site = s.stores[i]
        rest = s.stores[:i] + s.stores[i + 1:]
        if stage == 0 and self.store_writes:
            rest = tuple(sorted(rest + ((c, seq, buf, tag, 1, site),)))
        return ("s", i), s._replace(stores=rest), ()

    def commit_ready(self, s: State, k: tuple) -> bool:
        kind, who, upto = k[0], k[1], k[2]
        if kind == "mma":
            return s.mmas[who][0] >= upto
        return not any(op[5] == who and op[3] < 0 and op[6] < upto for op in s.flight)

    def commit_fire(self, s: State, i: int) -> tuple[Action, State, tuple[Finding, ...]]:
        kind, unit, upto, bars, site, c, who, m = s.commits[i]
        commits = s.commits[:i] + s.commits[i + 1:]
        findings: list[Finding] = []
        new = list(s.bars)
        halted = None
        for gid in bars:
            cta = gid // self.layout.nbar
            if s.exited[cta]:
                findings.append(Finding("exit-inflight", f"{self.labels[c]}'s {'tcgen05.commit' if kind == 'mma' else 'cp.async'} "
                                        f"arrival reaches {self.layout.bar_names[gid]} after CTA {cta} exited: undefined",
                                        site, c, (gid,)))
                continue
            recorded = -1
            for _ in range(m):  # one arrival per thread that issued it
                events: list[str] = []
                before = new[gid]
                first = before is None or before.phase != recorded
                if before is not None:
                    recorded = before.phase
                new[gid] = S.arrive(before, 1, who, events, first=first)
                f, h = self.hazards.barrier_events(events, c, site, gid, before)
                findings.extend(f)
                halted = halted or h
                if h:
                    break
        t5 = self.tcgen05.commit(s.t5, bars, c) if kind == "mma" and self.tcgen05 is not None else s.t5
        return ("k", i), s._replace(commits=commits, bars=tuple(new), halted=halted, t5=t5), tuple(findings)

    def exit(self, s: State, cta: int) -> tuple[Action, State, tuple[Finding, ...]]:
        """A CTA exits once its last thread has finished: nothing may still be in flight into or out of it."""
        out = []
        pb, pr = self.layout.nbuf, self.layout.nbar
        for buf, tag, nbytes, bar, site, src, seq in s.flight:
            if buf // pb == cta:
                what = f"the TMA load of tile {tag} into {self.layout.buf_names[buf]} ({nbytes} bytes)" if bar >= 0 else \
                    f"the cp.async copy of tile {tag} into {self.layout.buf_names[buf]}"
                out.append(Finding("exit-inflight", f"CTA {cta} exits while {what} is still in flight: undefined "
                                   "behaviour (may corrupt or fault)", site, src))
                break
        for u, (done, forming, inflight) in enumerate(s.mmas):
            # the unit's CTA, or a peer whose SMEM or TMEM a cta_group 2 MMA of the unit reads or writes
            if inflight and (self.unit_cta[u] == cta or any(b // pb == cta for q in inflight for b, _ in q[1] + q[4])):
                out.append(Finding("exit-inflight", f"CTA {cta} exits while an mma_async of {self.unit_labels[u]} still "
                                   "reads its shared memory", inflight[0][2], inflight[0][3]))
                break
        for c, seq, buf, tag, stage, site in s.stores:
            if stage == 0 and buf // pb == cta:
                out.append(Finding("exit-inflight", f"CTA {cta} exits while the TMA store of tile {tag} still reads "
                                   f"{self.layout.buf_names[buf]}: drain it with wait_group_read 0 (producer_tail)", site, c,
                                   latent=STORE_EXIT))
                break
        for kind, who, upto, bars, site, c, _, _ in s.commits:
            if any(g // pr == cta for g in bars):
                out.append(Finding("exit-inflight", f"CTA {cta} exits while an arrival on its barrier "
                                   f"{self.layout.bar_names[bars[0]]} is still owed", site, c))
                break
        exited = s.exited[:cta] + (True,) + s.exited[cta + 1:]
        return ("x", cta), s._replace(exited=exited), tuple(out)
