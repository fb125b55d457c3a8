"""`pipecheck explain`: the protocol contract of a spec as a table, per barrier.

For each barrier: its count, who initialises it, who arrives (role, thread class, arrivals
per phase), who completes tx on it (loads, bytes per phase), who waits (from which parity),
and a warning on each stage barrier without exactly one producer and one consumer role.
The facts come from the lowered thread classes of each configuration (graphs.protocol_contract).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from ..core.diagnostics import Diagnostic, render
from ..core.words import ranges
from ..lang.check import CheckedKernel
from ..lang.lower import resolve_roles
from ..model.ir import EvalError, Site
from ..pipeline.configurations import config_classes, describe, elect_sites
from ..pipeline.verify import load_checked
from .contract import BarrierContract, StoreParty, StoreRing, protocol_contract, protocol_graph, stage_flags, store_contract

SCHEMA = "pipecheck-contract/1"
HEADINGS = ("barrier", "count", "phases", "init", "side", "role", "threads", "per phase", "lines")


@dataclass(frozen=True)
class PartyRow:
    side: str
    unit: str
    threads: str
    per_phase: str
    lines: tuple[int, ...]


@dataclass
class BarrierGroup:
    """Elements of one barrier array that play the same part: `full[0..3]`."""

    array: str
    elements: list[str]
    count: int
    init: str
    phases: tuple[int, int]
    stage: bool
    parties: list[PartyRow]
    flag: str = ""

    @property
    def label(self) -> str:
        if len(self.elements) == 1:
            return self.elements[0]
        first, last = self.elements[0], self.elements[-1]
        head = first[:first.rindex("[")] if first.endswith("]") else first
        lo = first[len(head):].strip("[]")
        hi = last[len(head):].strip("[]") if last.startswith(head) else last
        if lo.isdigit() and hi.isdigit() and len(self.elements) == int(hi) - int(lo) + 1:
            return f"{head}[{lo}..{hi}]"
        return ", ".join(self.elements)


@dataclass(frozen=True)
class StoreRow:
    """The store side of one role instance's threads that do the same: `epilogue thread 0: tma_store D[0] x2 ...`."""

    unit: str
    threads: str
    does: str
    lines: tuple[int, ...]


@dataclass
class Contract:
    condition: str  # "" when every configuration has this contract
    groups: list[BarrierGroup]
    elements: list[BarrierContract] = field(default_factory=list)
    stores: list[StoreRow] = field(default_factory=list)  # the store side: TMA stores, bulk groups, drains
    rings: list[str] = field(default_factory=list)  # each store ring in a sentence
    store_rings: list[StoreRing] = field(default_factory=list)  # the same as data (for `graph`)


@dataclass
class Explanation:
    spec: str
    kernel: CheckedKernel
    sites: list[Site]
    sources: dict[str, str]
    contracts: list[Contract] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return any(g.flag for c in self.contracts for g in c.groups)



def _threads(kernel: CheckedKernel, role: str, members: tuple[int, ...]) -> str:
    decl = next(r for r in kernel.roles if r.name == role)
    unit = "lane" if decl.threads <= 32 else "thread"
    if decl.threads == 1:
        return "the thread"
    if len(members) == decl.threads:
        return f"all {decl.threads} {unit}s"
    return f"{unit}{'s' if len(members) > 1 else ''} {ranges(members)}"


def _per(total: int, phases: int) -> str:
    if phases <= 0:
        return f"{total} in all"
    return str(total // phases) if total % phases == 0 else f"{total}/{phases}"


def _plural(n: str, word: str) -> str:
    return f"{n} {word}" + ("" if n == "1" else "s")


def _party_rows(kernel: CheckedKernel, c: BarrierContract, sites: list[Site]) -> list[PartyRow]:
    """One row per role instance and side; classes of one instance that do the same per thread share a row."""
    merged: dict[tuple, dict] = {}
    phases = c.phases
    for p in c.parties:
        n = max(len(p.threads), 1)
        key = (p.side, p.unit, p.role, p.arrivals // n, p.expect // n, p.delivered // n, p.loads // n, p.waits,
               p.first_parity, p.buffers)
        m = merged.setdefault(key, {"threads": [], "sites": [], "arrivals": 0, "expect": 0, "delivered": 0,
                                    "loads": 0, "party": p})
        m["threads"].extend(p.threads)
        m["sites"].extend(p.sites)
        for f in ("arrivals", "expect", "delivered", "loads"):
            m[f] += getattr(p, f)
    order = {"inits": 0, "arrives": 1, "tx": 2, "waits": 3}
    rows = []
    for m in merged.values():
        p = m["party"]
        if p.side == "arrives":
            detail = []
            if m["arrivals"]:
                detail.append(_plural(_per(m["arrivals"], phases), "arrival"))
            if m["expect"]:
                detail.append(f"expect_tx {_per(m['expect'], phases)} B")
            text = ", ".join(detail) or "no arrival"
        elif p.side == "tx":
            bufs = f" ({', '.join(p.buffers)})" if p.buffers else ""
            loads = _plural(_per(m["loads"], phases), "TMA load") + bufs if m["loads"] else "complete_tx"
            text = f"{loads}, {_per(m['delivered'], phases)} B"
        elif p.side == "waits":
            text = f"from parity {p.first_parity}" + (" (passes at once: starts free)" if p.first_parity == 1 else "")
        else:
            text = "init"
        threads = tuple(sorted(set(m["threads"])))
        lines = tuple(sorted({sites[s].span.line for s in m["sites"] if 0 <= s < len(sites)}))
        rows.append((order[p.side], p.unit, threads[0], PartyRow(p.side, p.unit, _threads(kernel, p.role, threads),
                                                                   text, lines)))
    rows.sort(key=lambda r: r[:3])
    return [r[3] for r in rows]


def _groups(kernel: CheckedKernel, contracts: list[BarrierContract], sites: list[Site]) -> list[BarrierGroup]:
    flags = stage_flags(contracts)
    groups: list[BarrierGroup] = []
    index: dict[tuple, BarrierGroup] = {}
    for c in contracts:
        rows = _party_rows(kernel, c, sites)
        init = "kernel start"
        if c.noinit:
            inits = [r for r in rows if r.side == "inits"]
            init = ", ".join(f"{r.unit} {r.threads}" for r in inits) or "never"
        rows = [r for r in rows if r.side != "inits"]
        sig = (c.array, c.count, init, c.stage, flags.get(c.gid, ""),
               tuple((r.side, r.unit, r.threads, r.per_phase) for r in rows))
        g = index.get(sig)
        if g is None:
            g = index[sig] = BarrierGroup(c.array, [], c.count, init, (c.phases, c.phases), c.stage, rows,
                                          flags.get(c.gid, ""))
            groups.append(g)
        else:
            g.phases = (min(g.phases[0], c.phases), max(g.phases[1], c.phases))
            g.parties = [PartyRow(a.side, a.unit, a.threads, a.per_phase, tuple(sorted(set(a.lines) | set(b.lines))))
                         for a, b in zip(g.parties, rows)]
        g.elements.append(c.name)
    return groups


def _times(items: tuple[tuple[str, int], ...]) -> str:
    return ", ".join(f"{name} x{n}" if n > 1 else name for name, n in items)


def _store_rows(kernel: CheckedKernel, parties: list[StoreParty], sites: list[Site]) -> list[StoreRow]:
    """Classes of one role instance that do the same on the store side, merged into one row."""
    merged: dict[tuple, list] = {}
    for p in parties:
        does = []
        if p.writes:
            does.append("write " + _times(p.writes))
        if p.fences:
            does.append(f"fence_proxy_async x{p.fences}" if p.fences > 1 else "fence_proxy_async")
        if p.stores:
            does.append("tma_store " + _times(p.stores))
        if p.commits:
            does.append(f"{p.commits} bulk group{'s' if p.commits != 1 else ''} (commit_group)")
        if p.waits:
            does.append(", then ".join(f"{w} {n}" + (f" x{k}" if k > 1 else "") for w, n, k in p.waits))
        lines = tuple(sorted({sites[s].span.line for s in p.sites if 0 <= s < len(sites) and sites[s].span}))
        key = (p.unit, p.role, "; ".join(does))
        entry = merged.setdefault(key, [set(), set()])
        entry[0].update(p.threads)
        entry[1].update(lines)
    return [StoreRow(unit, _threads(kernel, role, tuple(sorted(members))), does, tuple(sorted(lines)))
            for (unit, role, does), (members, lines) in merged.items()]


def _ring_text(r: StoreRing) -> str:
    first, last = r.elements[0], r.elements[-1]
    label = f"{r.array}[{first[len(r.array):].strip('[]')}..{last[len(r.array):].strip('[]')}]" \
        if len(r.elements) > 1 else first
    text = (f"store ring {label}: {len(r.elements)} stage{'s' if len(r.elements) != 1 else ''}, {r.stores} TMA "
            f"store{'s' if r.stores != 1 else ''} by {', '.join(r.units)}")
    if r.reuse_wait is not None:
        word, n = r.reuse_wait
        still = "reading SMEM" if word == "wait_group_read" else "in flight"
        text += f"; before a stage is written again: {word} {n} (at most {n} older store{'s' if n != 1 else ''} {still})"
    elif len(r.elements) > 0 and r.stores > len(r.elements):
        text += "; no wait_group before a stage is written again"
    text += f"; before exit: {r.tail_wait[0]} {r.tail_wait[1]}" if r.tail_wait is not None else \
        "; no wait_group after the last store"
    return text


def explain_file(path: str, overrides: dict[str, int], elect: str = "any", ptx_options=None) -> Explanation:
    """The contract of every configuration of a spec (or of a compiled kernel at its defaults, read and
    lowered without a search); raises SpecError when the input is wrong."""
    from ..core.diagnostics import error
    from ..pipeline.ptx import is_kernel_file, verify_ptx
    from ..pipeline.result import Options
    if is_kernel_file(path):
        opts = ptx_options if ptx_options is not None else Options()
        res = verify_ptx(path, replace(opts, overrides=tuple(overrides.items()), elect=elect, explore=False))
        kernel, sites, sources = res.kernel, res.sites, res.sources
        cclasses, esites = res.config_classes, res.esites  # type: ignore[attr-defined]
    else:
        sources = {}
        kernel = load_checked(path, overrides, sources)
        codes, sites = resolve_roles(kernel, sources)
        try:
            cclasses = config_classes(kernel, codes, elect)
        except EvalError as exc:
            raise error("value", str(exc), sites[exc.site].span if 0 <= exc.site < len(sites) else None) from None
        esites = elect_sites(codes, sites)
    everything = [cfg for cc in cclasses for cfg in cc.members]
    out = Explanation(path, kernel, sites, sources)
    seen: dict[str, Contract] = {}
    for cc in cclasses:
        try:
            raw = protocol_contract(kernel, cc.classes)
            groups = _groups(kernel, raw, sites)
            sparties, srings = store_contract(kernel, cc.classes)
            srows, rtexts = _store_rows(kernel, sparties, sites), [_ring_text(r) for r in srings]
        except EvalError as exc:
            raise error("value", str(exc), sites[exc.site].span if 0 <= exc.site < len(sites) else None) from None
        key = json.dumps([[g.label, g.init, g.flag, [list(map(str, p.__dict__.values())) for p in g.parties]]
                          for g in groups] + [[r.unit, r.threads, r.does] for r in srows] + rtexts)
        if key in seen:
            seen[key].members.extend(cc.members)  # type: ignore[attr-defined]
            continue
        contract = Contract("", groups, raw, srows, rtexts, srings)
        contract.members = list(cc.members)  # type: ignore[attr-defined]
        seen[key] = contract
        out.contracts.append(contract)
    if len(out.contracts) > 1:
        for c in out.contracts:
            c.condition = describe(c.members, everything, esites)  # type: ignore[attr-defined]
    return out


def _title(e: Explanation) -> str:
    params = ", ".join(f"{p.name}={p.value}" for p in e.kernel.params)
    return f"{e.spec}: kernel {e.kernel.name}" + (f" ({params})" if params else "") + ": protocol contract"


def table_rows(c: Contract) -> list[tuple[str, ...]]:
    rows = []
    for g in c.groups:
        phases = str(g.phases[0]) if g.phases[0] == g.phases[1] else f"{g.phases[0]}-{g.phases[1]}"
        head = (g.label + (" *" if g.flag else ""), str(g.count), phases, g.init)
        if not g.parties:
            rows.append(head + ("-", "nobody", "", "", ""))
        for k, p in enumerate(g.parties):
            rows.append((head if k == 0 else ("", "", "", "")) +
                        (p.side, p.unit, p.threads, p.per_phase, ", ".join(map(str, p.lines))))
    return rows


def warnings(e: Explanation) -> list[Diagnostic]:
    out = []
    for c in e.contracts:
        for g in c.groups:
            if g.flag:
                decl = e.kernel.barrier(g.array)
                when = f" (when {c.condition})" if c.condition else ""
                out.append(Diagnostic("warning", "stage-roles", f"stage barrier {g.label} lacks exactly one producer "
                                      f"role and one consumer role: {g.flag}{when}", decl.span if decl else None))
    return out


def render_explain(e: Explanation, color: bool = False, width: int | None = None) -> str:
    if color:
        return _render_rich(e, width)
    out = [_title(e)]
    for c in e.contracts:
        out.append("")
        out.append(f"when {c.condition}:" if c.condition else "in every configuration:" if len(e.contracts) == 1
                   else "")
        if c.groups:
            rows = [HEADINGS] + table_rows(c)
            widths = [max(len(r[i]) for r in rows) for i in range(len(HEADINGS))]
            for k, r in enumerate(rows):
                out.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
                if k == 0:
                    out.append("  " + "  ".join("-" * w for w in widths))
        out.extend(store_lines(c))
    ws = warnings(e)
    if ws:
        out.append("")
        out.append("* stage barrier without exactly one producer role and one consumer role:")
        out.extend(render(d, e.sources) for d in ws)
    return "\n".join(out) + "\n"


def store_lines(c: Contract) -> list[str]:
    """The store side: each store ring, then what each role's threads write, store, commit and drain."""
    if not c.stores and not c.rings:
        return []
    out = ["  store side (TMA stores, bulk groups):"]
    out += [f"    {r}" for r in c.rings]
    for r in c.stores:
        lines = f" (line{'s' if len(r.lines) != 1 else ''} {', '.join(map(str, r.lines))})" if r.lines else ""
        out.append(f"    {r.unit} {r.threads}: {r.does}{lines}")
    return out


def _render_rich(e: Explanation, width: int | None) -> str:
    from rich.table import Table
    from rich.text import Text

    from .rich_text import console_for
    console, buf = console_for(width)
    console.print(Text(_title(e), style="bold"))
    for c in e.contracts:
        title = f"when {c.condition}" if c.condition else "in every configuration"
        table = Table(title=title, title_justify="left", header_style="bold")
        for n, h in enumerate(HEADINGS):  # a barrier's name is never split, at any terminal width
            table.add_column(h, overflow="fold", no_wrap=n == 0)
        for r in table_rows(c):
            table.add_row(*(Text(x) for x in r), style="bold red" if r[0].endswith("*") else None)
        if c.groups:
            console.print(table)
        for line in store_lines(c):
            console.print(Text(line))
    for d in warnings(e):
        console.print(Text(render(d, e.sources), style="yellow"))
    return buf.getvalue()


def to_dict(e: Explanation) -> dict:
    return {
        "schema": SCHEMA, "spec": e.spec, "kernel": e.kernel.name,
        "params": {p.name: p.value for p in e.kernel.params},
        "configurations": [{
            "condition": c.condition or None,
            "barriers": [{
                "array": g.array, "elements": g.elements, "count": g.count, "init": g.init,
                "phases": list(g.phases), "stage": g.stage, "flag": g.flag or None,
                "parties": [{"side": p.side, "role": p.unit, "threads": p.threads, "per_phase": p.per_phase,
                             "lines": list(p.lines)} for p in g.parties],
            } for g in c.groups],
            "store_rings": list(c.rings),
            "stores": [{"role": r.unit, "threads": r.threads, "does": r.does, "lines": list(r.lines)} for r in c.stores],
        } for c in e.contracts],
        "warnings": [{"message": d.message, "line": d.span.line if d.span else None} for d in warnings(e)],
    }


EDGE_LABEL = {"arrives": "arrives", "tx": "TMA bytes", "waits": "releases", "stores": "tma_store + commit_group"}


def render_graph(e: Explanation, fmt: str) -> str:
    """`pipecheck graph`: roles and barriers of each configuration's contract, as Mermaid or DOT."""
    out = ["flowchart LR"] if fmt == "mermaid" else ["digraph protocol {", "  rankdir=LR;",
                                                     '  node [fontname="Helvetica", fontsize=11];']
    for k, c in enumerate(e.contracts):
        g = protocol_graph(c.elements)
        flagged = {gr.array for gr in c.groups if gr.flag}
        title = c.condition or "every configuration"
        for r in c.store_rings:  # the store side: role -> store ring (TMA stores) -> role (the drain that frees a stage)
            ring = ("store", r.array)
            g.add_node(ring, count=len(r.elements))
            for unit in r.units:
                g.add_node(("role", unit))
                g.add_edge(("role", unit), ring, side="stores")
                if r.reuse_wait is not None or r.tail_wait is not None:
                    g.add_edge(ring, ("role", unit), side=" ".join(map(str, r.reuse_wait or r.tail_wait)))
        kinds = {"role": "r", "barrier": "b", "store": "s"}
        ids = {n: f"c{k}_{kinds[n[0]]}{i}" for i, n in enumerate(sorted(g.nodes))}
        if fmt == "mermaid":
            out.append(f'  subgraph s{k} ["{title}"]')
            for n, nid in ids.items():
                if n[0] == "role":
                    out.append(f'    {nid}(["{n[1]}"])')
                elif n[0] == "store":
                    out.append(f'    {nid}[/"{n[1]} (store ring, {g.nodes[n]["count"]} stages, bulk groups)"/]')
                else:
                    out.append(f'    {nid}[["{n[1]} (count {g.nodes[n]["count"]})"]]')
            for a, b, d in sorted(g.edges(data=True), key=lambda x: (ids[x[0]], ids[x[1]], x[2]["side"])):
                out.append(f"    {ids[a]} -->|{EDGE_LABEL.get(d['side'], d['side'])}| {ids[b]}")
            for n, nid in ids.items():
                if n[0] == "barrier" and n[1] in flagged:
                    out.append(f"    style {nid} stroke:#d1242f,stroke-width:3px")
            out.append("  end")
        else:
            out.append(f"  subgraph cluster_{k} {{")
            out.append(f'    label="{title}";')
            for n, nid in ids.items():
                if n[0] == "role":
                    out.append(f'    {nid} [label="{n[1]}", shape=box, style=rounded];')
                elif n[0] == "store":
                    out.append(f'    {nid} [label="{n[1]} (store ring, {g.nodes[n]["count"]} stages, bulk groups)", '
                               'shape=parallelogram];')
                else:
                    color = ', color="#d1242f", penwidth=3' if n[1] in flagged else ""
                    out.append(f'    {nid} [label="{n[1]} (count {g.nodes[n]["count"]})", shape=box3d{color}];')
            for a, b, d in sorted(g.edges(data=True), key=lambda x: (ids[x[0]], ids[x[1]], x[2]["side"])):
                style = ", style=dashed" if d["side"] in ("tx", "stores") else ""
                out.append(f'    {ids[a]} -> {ids[b]} [label="{EDGE_LABEL.get(d["side"], d["side"])}"{style}];')
            out.append("  }")
    if fmt != "mermaid":
        out.append("}")
    return "\n".join(out) + "\n"
