"""Forced-lane replay of a compiled kernel: the same PTX, with every `elect.sync` electing a chosen lane and
every mbarrier wait bounded (docs/replay.md, "Real kernels").

The rewrite is textual and local, so that everything else the compiler emitted runs as it was:

* `elect.sync d|p, mask;` becomes a warp sync on the mask (elect.sync is a collective: the lanes of the
  mask meet there) and an election of lane N when N is in the mask, else of the lowest lane of the mask
  (what the H200 does; counted in `__pipecheck_fallback` so that the host can say the forced lane was
  not available).
* `mbarrier.try_wait` / `mbarrier.test_wait` keep their instruction; when it reports the phase as not
  complete, the thread's wait clock (`%clock64` when its current wait began, reset by every wait that
  passes) is compared with a cycle budget. A thread over budget writes one record (the wait site, the
  barrier's offset in pipecheck's shared-memory layout, the parity, its thread and CTA, `%globaltimer`)
  to the host-mapped buffer whose address the host stores in `__pipecheck_rec`, waits for its bulk
  stores, lingers so copies it issued land, and exits: no wait of the kernel can spin forever (the
  bounded-wait pattern of shared/hw/probes.cu).

The sites table gives, for each wait and election, its PTX line and CUDA source position, so that a
record names the same wait pipecheck's counterexample names. Pure: text in, text and table out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..core.diagnostics import SpecError, Span, error
from ..ptx.frontend import _shared_layout, select_entry
from ..ptx.parse import parse_ptx

REC_BYTES = 32  # site s32, barrier offset u32, parity u32, tid u32, cta u32, kind u32, globaltimer u64
KIND_WAIT = 0
NO_PARITY = 0xFFFFFFFF  # a phase-token wait: the parity is not an operand

_WAIT = re.compile(r"^(?P<indent>\s*)(?P<guard>@!?%?[\w$]+\s+)?(?P<op>mbarrier\.(?:try_wait|test_wait)(?P<mods>(?:\.[\w:]+)*))"
                   r"\s+(?P<dst>[^,\s]+)\s*,\s*\[(?P<addr>[^\]]+)\]\s*,\s*(?P<arg>[^,;\s]+)\s*(?P<rest>,[^;]*)?;(?P<tail>.*)$")
_ELECT = re.compile(r"^(?P<indent>\s*)(?P<guard>@!?%?[\w$]+\s+)?elect\.sync\s+(?P<d>[^|\s]+)\s*\|\s*(?P<p>[^,\s]+)\s*,"
                    r"\s*(?P<mask>[^;\s]+)\s*;(?P<tail>.*)$")
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(.*)$")
_INLINED = re.compile(r"inlined_at\s+(\d+)\s+(\d+)\s+(\d+)")
_FUNC = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(?:entry|func)\b")


@dataclass(frozen=True)
class Site:
    """One rewritten instruction: `id` is what a record carries."""

    id: int
    kind: str  # wait | elect
    ptx_line: int
    instruction: str
    source: str  # `file:line` of the innermost .loc, "" without line info
    chain: tuple[str, ...]  # the inlined-at call sites, innermost first
    parity: str = ""  # the parity operand of a wait, as written
    address: str = ""  # the barrier address operand of a wait, as written


@dataclass
class PatchedPtx:
    text: str
    entry: str
    elect_lane: int | None
    wait_cycles: int
    sites: list[Site] = field(default_factory=list)
    shared: dict[str, int] = field(default_factory=dict)  # pipecheck's offsets of the .shared symbols

    def table(self) -> dict:
        """The sites table as JSON data (`--emit-ptx out.ptx` writes it to `out.ptx.sites.json`)."""
        return {
            "schema": "pipecheck-ptx-sites/1",
            "entry": self.entry,
            "elect_lane": self.elect_lane,
            "wait_cycles": self.wait_cycles,
            "record_bytes": REC_BYTES,
            "shared": self.shared,
            "sites": [{"id": s.id, "kind": s.kind, "ptx_line": s.ptx_line, "instruction": s.instruction,
                       "source": s.source, "chain": list(s.chain), "parity": s.parity, "address": s.address}
                      for s in self.sites],
        }


def _u32(operand: str, reg: str) -> list[str]:
    """Instructions that put a 32-bit shared address operand (`%r5`, `%rd5`, `sym`, `%r5+8`) into `reg`."""
    base, _, off = operand.replace(" ", "").partition("+")
    out = []
    if base.startswith("%rd"):
        out.append(f"cvt.u32.u64 {reg}, {base};")
    else:
        out.append(f"mov.u32 {reg}, {base};")
    if off:
        out.append(f"add.u32 {reg}, {reg}, {off};")
    return out


def _wait_block(site: int, m: re.Match, shared: dict[str, int], cycles: int) -> list[str]:
    """The bounded form of one wait instruction (one PTX scope; labels are local to it)."""
    dst = m.group("dst")
    parity = m.group("arg") if ".parity" in m.group("mods") else None
    L = f"$PC_W{site}"
    out = ["{",
           ".reg .pred %pcp;", ".reg .b64 %pcc, %pcr, %pcq;",
           ".reg .b32 %pco, %pcb, %pcbest, %pcoff, %pci, %pcu, %pcv, %pct;"]
    if m.group("guard"):
        g = m.group("guard").strip()
        neg = g[1:].startswith("!")
        out.append(f"@{'' if neg else '!'}{g[1:].lstrip('!')} bra {L}_END;")
    out.append(f"{m.group('op')} {dst}, [{m.group('addr')}], {m.group('arg')}{m.group('rest') or ''};")
    if dst == "_":
        raise ValueError("wait without a destination predicate")
    out += [f"@{dst} mov.u64 %pc_t0, 0;", f"@{dst} bra {L}_END;",
            "mov.u64 %pcc, %clock64;",
            "setp.eq.u64 %pcp, %pc_t0, 0;", "@%pcp mov.u64 %pc_t0, %pcc;",
            "sub.u64 %pcc, %pcc, %pc_t0;", f"setp.lt.u64 %pcp, %pcc, {cycles};", f"@%pcp bra {L}_END;"]
    # Over budget: the barrier's offset in pipecheck's layout (the nearest .shared symbol at or below it).
    out += _u32(m.group("addr"), "%pco")
    out += ["mov.u32 %pcbest, 0;", "mov.u32 %pcoff, %pco;"]
    for name, off in sorted(shared.items(), key=lambda kv: (kv[1], kv[0])):
        out += [f"mov.u32 %pcb, {name};", "setp.ge.u32 %pcp, %pco, %pcb;", "setp.ge.and.u32 %pcp, %pcb, %pcbest, %pcp;",
                "@%pcp mov.u32 %pcbest, %pcb;", "@%pcp sub.u32 %pcoff, %pco, %pcb;", f"@%pcp add.u32 %pcoff, %pcoff, {off};"]
    out += ["ld.global.u64 %pcr, [__pipecheck_rec];", "setp.eq.u64 %pcp, %pcr, 0;", f"@%pcp bra {L}_GIVEUP;",
            "mov.u32 %pct, %ctaid.z;", "mov.u32 %pcu, %nctaid.y;", "mov.u32 %pcv, %ctaid.y;",
            "mad.lo.u32 %pct, %pct, %pcu, %pcv;", "mov.u32 %pcu, %nctaid.x;", "mov.u32 %pcv, %ctaid.x;",
            "mad.lo.u32 %pct, %pct, %pcu, %pcv;",
            "mov.u32 %pcu, %ntid.x;", "mov.u32 %pcv, %ntid.y;", "mul.lo.u32 %pcu, %pcu, %pcv;",
            "mov.u32 %pcv, %ntid.z;", "mul.lo.u32 %pcu, %pcu, %pcv;",
            "mov.u32 %pcv, %tid.x;", "mad.lo.u32 %pci, %pct, %pcu, %pcv;",
            "ld.global.u32 %pcu, [__pipecheck_cap];", "setp.ge.u32 %pcp, %pci, %pcu;", f"@%pcp bra {L}_GIVEUP;",
            f"mul.wide.u32 %pcq, %pci, {REC_BYTES};", "add.u64 %pcr, %pcr, %pcq;",
            "st.global.u32 [%pcr+4], %pcoff;"]
    if parity is None:
        out.append(f"st.global.u32 [%pcr+8], {NO_PARITY};")
    elif parity.lstrip("-").isdigit():
        out.append(f"st.global.u32 [%pcr+8], {int(parity) & 1};")
    else:
        out += [f"and.b32 %pcu, {parity}, 1;", "st.global.u32 [%pcr+8], %pcu;"]
    out += ["st.global.u32 [%pcr+12], %pcv;", "st.global.u32 [%pcr+16], %pct;", f"st.global.u32 [%pcr+20], {KIND_WAIT};",
            "mov.u64 %pcq, %globaltimer;", "st.global.u64 [%pcr+24], %pcq;",
            "membar.sys;", f"st.global.u32 [%pcr], {site};", "membar.sys;",
            f"{L}_GIVEUP:",
            "cp.async.bulk.wait_group 0;",
            "mov.u64 %pcc, %clock64;",
            f"{L}_LINGER:",
            "mov.u64 %pcq, %clock64;", "sub.u64 %pcq, %pcq, %pcc;", "setp.lt.u64 %pcp, %pcq, 4000000;",
            f"@%pcp bra {L}_LINGER;",
            "exit;",
            f"{L}_END:",
            "}"]
    return out


def _elect_block(site: int, m: re.Match, lane: int) -> list[str]:
    L = f"$PC_E{site}"
    d, p, mask = m.group("d"), m.group("p"), m.group("mask")
    out = ["{", ".reg .b32 %pcem, %pcel, %pceb, %pced;", ".reg .pred %pcep;"]
    if m.group("guard"):
        g = m.group("guard").strip()
        neg = g[1:].startswith("!")
        out.append(f"@{'' if neg else '!'}{g[1:].lstrip('!')} bra {L}_END;")
    out += [f"mov.b32 %pcem, {mask};",
            "bar.warp.sync %pcem;",
            "mov.u32 %pcel, %laneid;",
            "neg.s32 %pceb, %pcem;", "and.b32 %pceb, %pceb, %pcem;", "bfind.u32 %pceb, %pceb;",
            f"shr.b32 %pced, %pcem, {lane};", "and.b32 %pced, %pced, 1;", "setp.ne.u32 %pcep, %pced, 0;",
            f"selp.u32 %pced, {lane}, %pceb, %pcep;",
            "@!%pcep red.global.add.u32 [__pipecheck_fallback], 1;"]
    if p != "_":
        out.append(f"setp.eq.u32 {p}, %pcel, %pced;")
    if d != "_":
        out.append(f"mov.u32 {d}, %pced;")
    out += [f"{L}_END:", "}"]
    return out


def _source(loc: re.Match | None, files: dict[int, str]) -> tuple[str, tuple[str, ...]]:
    if loc is None or loc.group(2) == "0":
        return "", ()

    def name(idx: str, line: str) -> str:
        path = files.get(int(idx), f"file{idx}")
        return f"{path.rsplit('/', 1)[-1]}:{line}"

    chain = tuple(name(f, ln) for f, ln, _ in _INLINED.findall(loc.group(4)))
    return name(loc.group(1), loc.group(2)), chain


def patch(text: str, path: str, *, entry: str | None = None, elect_lane: int | None = None,
          wait_cycles: int = 1 << 26, capacity_note: bool = True) -> PatchedPtx:
    """The bounded, forced-lane PTX of `text` (read from `path`); a `SpecError` for PTX the front end
    refuses to parse or an entry that is not there."""
    if elect_lane is not None and not 0 <= elect_lane < 32:
        raise error("rule", f"--elect-lane {elect_lane}: a lane is 0..31", Span(path, 1, 1))
    module = parse_ptx(text, path)
    fn = select_entry(module, entry)
    shared = _shared_layout(module, fn)
    files: dict[int, str] = dict(module.files)
    lines = text.splitlines()
    out: list[str] = []
    sites: list[Site] = []
    loc: re.Match | None = None
    pending_func = False
    declared_global = False
    for no, line in enumerate(lines, start=1):
        lm = _LOC.match(line)
        if lm:
            loc = lm
        if _FUNC.match(line):
            pending_func = True
        if pending_func and line.rstrip().endswith(";"):
            pending_func = False  # a prototype: no body follows
        if not declared_global and line.strip().startswith(".address_size"):
            out.append(line)
            out += ["", "// pipecheck replay: the host-mapped hang records, their capacity and the elections that fell back",
                    ".visible .global .align 8 .u64 __pipecheck_rec;",
                    ".visible .global .align 4 .u32 __pipecheck_cap;",
                    ".visible .global .align 4 .u32 __pipecheck_fallback;"]
            declared_global = True
            continue
        if pending_func and line.strip() == "{":
            out.append(line)
            out.append(".reg .b64 %pc_t0;  // pipecheck replay: when this thread's current mbarrier wait began")
            out.append("mov.u64 %pc_t0, 0;")
            pending_func = False
            continue
        wm = _WAIT.match(line)
        if wm:
            src, chain = _source(loc, files)
            sid = len(sites)
            sites.append(Site(sid, "wait", no, line.strip(), src, chain, wm.group("arg") if ".parity" in wm.group("mods") else "",
                              wm.group("addr").strip()))
            indent = wm.group("indent")
            out.append(f"{indent}// pipecheck replay: wait site {sid} (PTX line {no}), bounded by {wait_cycles} cycles")
            out += [indent + s for s in _wait_block(sid, wm, shared, wait_cycles)]
            continue
        em = _ELECT.match(line)
        if em and elect_lane is not None:
            src, chain = _source(loc, files)
            sid = len(sites)
            sites.append(Site(sid, "elect", no, line.strip(), src, chain))
            indent = em.group("indent")
            out.append(f"{indent}// pipecheck replay: elect site {sid} (PTX line {no}) elects lane {elect_lane}")
            out += [indent + s for s in _elect_block(sid, em, elect_lane)]
            continue
        out.append(line)
    if not declared_global:
        raise error("syntax", "PTX: no .address_size directive: cannot place the replay's records", Span(path, 1, 1))
    if not any(s.kind == "wait" for s in sites):
        raise error("rule", "PTX: the kernel has no mbarrier wait to bound", Span(path, fn.line, 1))
    return PatchedPtx("\n".join(out) + "\n", fn.name, elect_lane, wait_cycles, sites, shared)


__all__ = ["PatchedPtx", "Site", "patch", "REC_BYTES", "NO_PARITY", "SpecError"]
