"""The findings a step raises: barrier events, phase aliasing, reads and writes of buffers in use.

A mixin of model.Model (it reads the model's classes, layout and MMA units); pure functions of a state.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import semantics as S
from .compiled import CInstr
from .findings import Finding

if TYPE_CHECKING:
    from .model import State

EMPTY = -1  # tile tag of a buffer nothing has written
CLOBBERED = -2  # tile tag of a buffer whose storage was written through an alias


class Hazards:
    def _bar_events(self, events: list[str], c: int, site: int, gid: int, before, count: int = 1
                    ) -> tuple[list[Finding], str | None]:
        findings = []
        halted = None
        name = self._bar_name(gid)
        who = self.classes[c].label if c >= 0 else "an asynchronous arrival"
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

    def _alias_finding(self, s: State, c: int, ins: CInstr, env: tuple, gid: int, off: int, passing: bool) -> Finding:
        b = s.bars[gid]
        intended = ins.c(env)
        name = self._bar_name(gid)
        who = self.classes[c].label
        verb = "passes its wait on" if passing else "waits on"
        parity = ins.b(env) & 1
        means = "a first wait that passes at once" if intended < 0 else f"the completion of phase {intended}"
        if off > 0:
            why = (f"{name} has already completed {b.phase} phase(s) but the waiter's ring means {means}: "
                   f"the waiter is {off} phase(s) behind, so parity {parity} now stands for a later phase")
        else:
            why = (f"{name} has completed only {b.phase} phase(s) but the waiter's ring means {means}: "
                   f"the waiter is {-off} phase(s) ahead, so parity {parity} stands for an earlier phase")
        return Finding("phase-alias", f"{who} {verb} {name}: {why}", ins.site, c, (gid,))

    def _use(self, s: State, c: int, gid: int, site: int, what: str) -> list[Finding]:
        """Using a barrier: its CTA must still run, and its init must be visible to this thread."""
        out = []
        cta = gid // self.layout.nbar if self.layout.nbar else 0
        if s.exited[cta]:
            out.append(Finding("exit-inflight", f"{self.classes[c].label} {what} {self._bar_name(gid)} after CTA {cta} "
                               "exited: undefined (may corrupt or fault); wait for the peers (producer_tail) before exiting",
                               site, c, (gid,)))
        for bar, init_cls, st in s.vis:
            if bar == gid and init_cls != c and not (st == "cta" and self.classes[c].cta == cta):
                how = ("fence_barrier_init and a syncthreads/cluster_sync" if st == 0 else
                       "a syncthreads/cluster_sync after its fence_barrier_init" if st == 1 else
                       "a cluster_sync (the init is only visible inside its own CTA)")
                out.append(Finding("uninit-barrier", f"{self.classes[c].label} {what} {self._bar_name(gid)} before "
                                   f"{self.classes[init_cls].label}'s init of it is visible: missing {how}",
                                   site, c, (gid,)))
        return out

    def _read_hazards(self, s: State, c: int, site: int, buf: int, want: int | None, what: str,
                      who: str | None = None) -> list[Finding]:
        """A read (or the start of an async reader) of `buf` expecting tile `want`."""
        if want is None:
            return []
        name = self._buf_name(buf)
        who = who or self.classes[c].label
        have = s.bufs[buf]
        if have == want:
            for op in s.flight:
                if op[0] == buf and op[1] != want:
                    kind = "TMA load" if op[3] >= 0 else "cp.async copy"
                    return [Finding("overwrite", f"{who} {what} {name} for tile {want} while the {kind} of tile {op[1]} "
                                    "into it is in flight: the tile is being replaced under its reader", site, c,
                                    notes=((f"the {kind} of tile {op[1]}", op[4]),))]
            for u, (_, _, inflight) in enumerate(s.mmas):
                for seq, ops, msite, mc, out in inflight:
                    if out is not None and out[0] == buf:
                        return [Finding("overwrite", f"{who} {what} {name} for tile {want} while an mma_async of "
                                        f"{self.unit_label[u]} writes tile {out[1]} into it", site, c)]
            return []
        if have == CLOBBERED:
            return [Finding("overwrite", f"{who} {what} {name} for tile {want}, but its storage was overwritten through "
                            "a buffer declared over it", site, c)]
        landing = any(op[0] == buf and op[1] == want for op in s.flight)
        holds = "nothing yet" if have == EMPTY else f"tile {have}"
        if landing or have == EMPTY or have < want:
            state = "is still in flight" if landing else "has not been issued or has not landed"
            return [Finding("stale-read", f"{who} {what} {name} for tile {want}, but the copy of tile {want} "
                            f"{state} ({name} holds {holds})", site, c)]
        return [Finding("overwrite", f"{who} {what} {name} for tile {want}, but {name} already holds tile {have}: "
                        f"a later copy overwrote tile {want} before it was read", site, c)]

    def _write_hazards(self, s: State, c: int, site: int, buf: int, what: str, landing: bool) -> list[Finding]:
        """Writing `buf` (and whatever shares its storage) while someone may still read it."""
        out: list[Finding] = []
        for b in (buf,) + self.layout.overlaps[buf]:
            name = self._buf_name(b) if b == buf else f"{self._buf_name(buf)} (the storage of {self._buf_name(b)})"
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
                        out.append(Finding("overwrite", f"{what} {name} while the mma_async of {self.unit_label[u]} "
                                           f"still reads tile {t} from it", site, c,
                                           notes=(("the mma_async that is still reading", msite),)))
            if not landing:
                for op in s.flight:
                    if op[0] == b:
                        out.append(Finding("overwrite", f"{what} {name} while the copy of tile {op[1]} into it is in "
                                           "flight", site, c, notes=(("the copy", op[4]),)))
                        break
        for gid in self.layout.bar_overlaps[buf]:
            if s.bars[gid] is not None:
                out.append(Finding("overwrite", f"{what} {self._buf_name(buf)}, which reuses the memory of mbarrier "
                                   f"{self._bar_name(gid)} while it is still live: inval it first", site, c, (gid,)))
        return out

    def _tags(self, bufs: tuple, buf: int, tag: int) -> tuple:
        out = list(bufs)
        out[buf] = tag
        for h in self.layout.overlaps[buf]:
            out[h] = CLOBBERED
        return tuple(out)
