"""The findings a step raises: barrier events, phase aliasing, reads and writes of buffers in use.

Pure functions of a state, given where things live (the layout) and how threads and MMA units are named.
"""
from __future__ import annotations

from typing import Sequence

from . import semantics as S
from .compiled import CInstr
from .findings import Finding
from .layout import Layout
from .state import ANY_TILE, CLOBBERED, EMPTY, State, seen_in_warp



class Hazards:
    def __init__(self, layout: Layout, labels: Sequence[str], unit_labels: Sequence[str], ctas: Sequence[int],
                 several: Sequence[bool], warps: Sequence[tuple] = ()):
        self.layout = layout
        self.warps = warps  # per thread class: (cta, role, instance, warp), what its warp meetings are keyed by
        self.labels = labels  # per thread class
        self.several = several  # per thread class: its label names several threads ("lanes 1-31"), not a role
        self.ctas = ctas  # per thread class: its CTA
        self.unit_labels = unit_labels  # per MMA unit

    def barrier_events(self, events: list[str], c: int, site: int, gid: int, before, count: int = 1
                    ) -> tuple[list[Finding], str | None]:
        findings = []
        halted = None
        name = self.layout.bar_names[gid]
        who = self.labels[c] if c >= 0 else "an asynchronous arrival"
        for ev in events:
            if ev == S.DOUBLE:
                findings.append(Finding("double-arrive", f"{who} arrives on {name} twice in phase {before.phase}: the "
                                        "extra arrival counts toward completing the phase early", site, c, (gid,)))
            elif ev == S.FAULT_OVER:
                findings.append(Finding("arrive-fault", f"{who} arrives on {name} with count {count}, but only "
                                        f"{before.pending} arrival(s) are pending: the kernel faults (H200 mbar 9)",
                                        site, c, (gid,)))
                halted = "arrive-fault"
            elif ev == S.FAULT_TX_ONLY:
                findings.append(Finding("arrive-fault", f"{who} arrives on {name} while its phase owes no arrivals, only "
                                        f"{before.tx} tx bytes: the kernel faults (H200 mbar 12)", site, c, (gid,)))
                halted = "arrive-fault"
            elif ev == S.FAULT_TX_RANGE:
                findings.append(Finding("tx-range", f"the tx-count of {name} leaves +-(2^20-1): the kernel faults "
                                        "(H200 mbar 13)", site, c, (gid,)))
                halted = "tx-range"
            elif ev == S.FAULT_UNINIT:
                findings.append(Finding("arrive-fault", f"{who} uses {name}, which is not initialised: the kernel "
                                        "faults (H200 mbar 17)", site, c, (gid,)))
                halted = "arrive-fault"
            elif ev == S.DROP_TO_ZERO:
                findings.append(Finding("arrive-fault", f"arrive_drop lowers the expected count of {name} to 0: "
                                        "undefined (PTX 9.7.13.15.14)", site, c, (gid,)))
        return findings, halted

    def phase_alias(self, s: State, c: int, ins: CInstr, env: tuple, gid: int, off: int, passing: bool) -> Finding:
        b = s.bars[gid]
        intended = ins.c(env)
        name = self.layout.bar_names[gid]
        who = self.labels[c]
        plural = self.several[c]
        verb = ("pass their wait on" if plural else "passes its wait on") if passing else ("wait on" if plural else "waits on")
        parity = ins.b(env) & 1
        means = "a first wait that passes at once" if intended < 0 else f"the completion of phase {intended}"
        if off > 0:
            why = (f"{name} has already completed {b.phase} phase(s) but the waiter's ring means {means}: "
                   f"the waiter is {off} phase(s) behind, so parity {parity} now stands for a later phase")
        else:
            why = (f"{name} has completed only {b.phase} phase(s) but the waiter's ring means {means}: "
                   f"the waiter is {-off} phase(s) ahead, so parity {parity} stands for an earlier phase")
        return Finding("phase-alias", f"{who} {verb} {name}: {why}", ins.site, c, (gid,))

    def barrier_use(self, s: State, c: int, gid: int, site: int, what: str) -> list[Finding]:
        """Using a barrier: its CTA must still run, and its init must be visible to this thread."""
        out = []
        cta = gid // self.layout.nbar if self.layout.nbar else 0
        if s.exited[cta]:
            out.append(Finding("exit-inflight", f"{self.labels[c]} {what} {self.layout.bar_names[gid]} after CTA {cta} "
                               "exited: undefined (may corrupt or fault); wait for the peers (producer_tail) before exiting",
                               site, c, (gid,)))
        for bar, init_cls, st in s.vis:
            if bar == gid and init_cls != c and not (st == "cta" and self.ctas[c] == cta) \
                    and not (seen_in_warp(st) and st[1:] == self.warps[c]):
                how = ("fence_barrier_init and a syncthreads/cluster_sync" if st == 0 else
                       "a syncthreads/cluster_sync after its fence_barrier_init" if st == 1 else
                       "a syncthreads/cluster_sync (a warp's meeting makes the init visible to that warp only)"
                       if seen_in_warp(st) else
                       "a cluster_sync (the init is only visible inside its own CTA)")
                out.append(Finding("uninit-barrier", f"{self.labels[c]} {what} {self.layout.bar_names[gid]} before "
                                   f"{self.labels[init_cls]}'s init of it is visible: missing {how}",
                                   site, c, (gid,)))
        return out

    def async_init_visible(self, s: State, c: int, gid: int, site: int, use: list[Finding]) -> list[Finding]:
        """An async-proxy operation (a TMA load's complete_tx) on a barrier whose init no fence ordered before it.

        mbarrier.init is a generic-proxy write; the async proxy sees it only after fence.mbarrier_init or
        fence.proxy.async by the initialising thread (PTX ISA 9.7.9.25.2 proxies, 9.7.13.4 fence), whatever
        syncthreads lies between. A use the generic rule already reports (uninit-barrier) is not repeated."""
        if any(f.code == "uninit-barrier" and gid in f.barriers for f in use):
            return []
        for bar, init_cls, st in s.vis:
            if bar == gid and st == 0:
                who = "its own" if init_cls == c else f"{self.labels[init_cls]}'s"
                return [Finding("missing-init-fence", f"{self.labels[c]}'s TMA load completes on "
                                f"{self.layout.bar_names[gid]}, but {who} init of it was not followed by "
                                "fence_barrier_init or fence_proxy_async: the async proxy may not see the init "
                                "(a syncthreads orders only the generic proxy)", site, c, (gid,))]
        return []

    def read_hazards(self, s: State, c: int, site: int, buf: int, want: int | None, what: str,
                      who: str | None = None) -> list[Finding]:
        """A read (or the start of an async reader) of `buf` expecting tile `want`."""
        if want is None:
            return []
        if want == ANY_TILE:  # no tile named (PTX): any landed data is right, read after it landed
            return self._race(s, c, site, buf, what, who)
        name = self.layout.buf_names[buf]
        who = who or self.labels[c]
        have = s.bufs[buf]
        if have == want:
            for op in s.flight:
                if op[0] == buf and op[1] != want:
                    kind = "TMA load" if op[3] >= 0 else "cp.async copy"
                    return [Finding("overwrite", f"{who} {what} {name} for tile {want} while the {kind} of tile {op[1]} "
                                    "into it is in flight: the tile is being replaced under its reader", site, c,
                                    notes=((f"the {kind} of tile {op[1]}", op[4]),), victim="stage")]
            for u, (_, _, inflight) in enumerate(s.mmas):
                for seq, ops, msite, mc, outs in inflight:
                    for ob, otag in outs:
                        if ob == buf:
                            return [Finding("overwrite", f"{who} {what} {name} for tile {want} while an mma_async of "
                                            f"{self.unit_labels[u]} writes tile {otag} into it", site, c,
                                            victim="accumulator")]
            return []
        if have == CLOBBERED:
            return [Finding("overwrite", f"{who} {what} {name} for tile {want}, but its storage was overwritten through "
                            "a buffer declared over it", site, c, victim="alias")]
        landing = any(op[0] == buf and op[1] == want for op in s.flight)
        holds = "nothing yet" if have == EMPTY else f"tile {have}"
        if landing or have == EMPTY or have < want:
            state = "is still in flight" if landing else "has not been issued or has not landed"
            return [Finding("stale-read", f"{who} {what} {name} for tile {want}, but the copy of tile {want} "
                            f"{state} ({name} holds {holds})", site, c)]
        return [Finding("overwrite", f"{who} {what} {name} for tile {want}, but {name} already holds tile {have}: "
                        f"a later copy or write replaced tile {want} before it was read", site, c, victim="stage")]

    def _race(self, s: State, c: int, site: int, buf: int, what: str, who: str | None) -> list[Finding]:
        name = self.layout.buf_names[buf]
        who = who or self.labels[c]
        have = s.bufs[buf]
        for op in s.flight:
            if op[0] == buf:
                kind = "TMA load" if op[3] >= 0 else "cp.async copy"
                if have == EMPTY:
                    return [Finding("stale-read", f"{who} {what} {name} while the {kind} into it is still in flight: "
                                    "no wait orders the read after the copy lands", site, c,
                                    notes=((f"the {kind}", op[4]),))]
                # the buffer holds landed data and a copy is replacing it: the read races with that copy
                return [Finding("overwrite", f"{who} {what} {name} while the {kind} of new data into it is in flight: "
                                "the stage was released before its reads were done, or the reader did not wait for "
                                "the new data", site, c, notes=((f"the {kind}", op[4]),), victim="stage")]
        if have == EMPTY and self.layout.landed[buf]:
            return [Finding("stale-read", f"{who} {what} {name}, which no copy or store has written yet", site, c)]
        if have == CLOBBERED:
            return [Finding("overwrite", f"{who} {what} {name}, but its storage was overwritten through a buffer "
                            "over it", site, c, victim="alias")]
        for u, (_, _, inflight) in enumerate(s.mmas):
            for seq, ops, msite, mc, outs in inflight:
                if any(ob == buf for ob, _ in outs):
                    return [Finding("overwrite", f"{who} {what} {name} while an mma_async of {self.unit_labels[u]} "
                                    "writes into it", site, c, victim="accumulator")]
        return []

    def write_hazards(self, s: State, c: int, site: int, buf: int, what: str, landing: bool) -> list[Finding]:
        """Writing `buf` (and whatever shares its storage) while someone may still read it."""
        out: list[Finding] = []
        for b in (buf,) + self.layout.overlaps[buf]:
            name = self.layout.buf_names[b] if b == buf else f"{self.layout.buf_names[buf]} (the storage of {self.layout.buf_names[b]})"
            for cls_, seq, sbuf, tag, stage, ssite in s.stores:
                if sbuf == b and stage == 0:
                    out.append(Finding("store-reuse", f"{what} {name} while the TMA store of tile {tag} still reads it: "
                                       "wait_group_read before reusing the buffer", site, c,
                                       notes=(("the TMA store that is still reading", ssite),)))
                    break
            for u, (_, _, inflight) in enumerate(s.mmas):
                for seq, ops, msite, mc, mout in inflight:
                    if any(ob == b for ob, _ in ops):
                        t = next(t for ob, t in ops if ob == b)
                        out.append(Finding("overwrite", f"{what} {name} while the mma_async of {self.unit_labels[u]} "
                                           f"still reads {'from it' if t == ANY_TILE else f'tile {t} from it'}", site, c,
                                           notes=(("the mma_async that is still reading", msite),),
                                           victim="stage" if landing else "writer"))
            if not landing:
                for op in s.flight:
                    if op[0] == b:
                        out.append(Finding("overwrite", f"{what} {name} while the copy of tile {op[1]} into it is in "
                                           "flight", site, c, notes=(("the copy", op[4]),), victim="writer"))
                        break
        for gid in self.layout.bar_overlaps[buf]:
            if s.bars[gid] is not None:  # a barrier's lifetime, not a tile's: the barrier-lifetime finding
                out.append(Finding("uninit-barrier", f"{what} {self.layout.buf_names[buf]}, which reuses the memory of "
                                   f"mbarrier {self.layout.bar_names[gid]} while the barrier is still live (initialised, "
                                   "never invalidated): the write corrupts its phase and counts; inval it after its "
                                   "last use, and only then reuse its memory", site, c, (gid,)))
        return out

    def retag(self, bufs: tuple, buf: int, tag: int) -> tuple:
        out = list(bufs)
        out[buf] = tag
        for h in self.layout.overlaps[buf]:
            out[h] = CLOBBERED
        return tuple(out)
