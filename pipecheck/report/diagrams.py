"""A counterexample as a Mermaid sequence diagram or a Graphviz DOT happens-before graph.

Both draw the same trace as the text timeline: roles and barriers as participants (or
lanes), each step with its number and spec line, the failing step highlighted.
"""
from __future__ import annotations

from ..pipeline.result import Result
from .common import IssueView
from .trace import ASYNC, blocked_rows

_ARRIVING = ("arrive", "expect_tx", "complete_tx", "arrive_drop")


def _mm(text: str) -> str:
    """Mermaid message text: no statement separators or entity markers."""
    return text.replace(";", ",").replace("#", "no. ").replace("\n", " ")


def _line(result: Result, site: int) -> str:
    return f" (line {result.sites[site].span.line})" if 0 <= site < len(result.sites) else ""


def mermaid(result: Result, v: IssueView) -> str:
    model = v.issue.run.model
    trace = v.trace
    ids: dict[str, str] = {}
    out = ["sequenceDiagram"]
    title = f"{v.issue.code}: counterexample of {len(trace.steps)} steps"
    if v.config_text:
        title += f" ({v.config_text})"
    out.append(f"    title {_mm(title)}")

    def pid(name: str, prefix: str) -> str:
        if name not in ids:
            ids[name] = f"{prefix}{len(ids)}"
            label = "TMA and wgmma" if name == ASYNC else name
            out.append(f"    participant {ids[name]} as {_mm(label)}")
        return ids[name]

    for c in trace.columns:
        if c != ASYNC:
            pid(c, "R")
    bars = sorted({st.barrier for st in trace.steps if st.barrier >= 0})
    for g in bars:
        pid(model.layout.bar_names[g], "B")
    if ASYNC in trace.columns:
        pid(ASYNC, "A")
    failing = trace.failing_step()
    for st in trace.steps:
        who = pid(st.column, "R")
        text = _mm(f"{st.index}: " + (f"{st.who}: " if st.who else "") + st.text + _line(result, st.site))
        bar = pid(model.layout.bar_names[st.barrier], "B") if st.barrier >= 0 else None
        body: list[str] = []
        if st.kind == "wait" and bar:
            body.append(f"{bar}-->>{who}: {text}")
        elif st.kind in _ARRIVING and bar:
            body.append(f"{who}->>{bar}: {text}")
        elif st.kind == "tma_load":
            body.append(f"{who}-)" + pid(ASYNC, "A") + f": {text}")
        elif st.kind == "land" and bar:
            body.append(f"{who}->>{bar}: {text}")
        else:
            body.append(f"Note over {who}: {text}")
        for e in st.effects:
            target = bar if bar and e.startswith(model.layout.bar_names[st.barrier]) else who
            body.append(f"Note over {target}: {_mm(e)}")
        if st.index == failing:
            body.append(f"Note over {who}: {_mm(', '.join(f.code for f in st.findings))}: {_mm(v.issue.finding.message)}")
            out.append("    rect rgb(255, 221, 221)")
            out.extend("        " + b for b in body)
            out.append("    end")
        else:
            out.extend("    " + b for b in body)
    if v.issue.code == "hang":
        out.append("    rect rgb(255, 221, 221)")
        for column, who, what, site in blocked_rows(model, trace.final):
            out.append(f"        Note over {pid(column, 'R')}: {_mm('blocked: ' + (who + ': ' if who else '') + what + _line(result, site))}")
        out.append("    end")
    return "\n".join(out) + "\n"


def _dq(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot(result: Result, v: IssueView) -> str:
    """Steps as nodes in one cluster per role instance; edges: program order, load -> landing, and the
    step that completed a barrier phase -> the wait it released."""
    model = v.issue.run.model
    trace = v.trace
    failing = trace.failing_step()
    out = ["digraph counterexample {", "  rankdir=TB;", '  node [shape=box, style="rounded,filled", fillcolor=white, '
           'fontname="Helvetica", fontsize=10];', '  edge [fontname="Helvetica", fontsize=9];',
           f"  label={_dq(f'{v.issue.code}: ' + v.issue.finding.message)};", "  labelloc=t;"]
    by_col: dict[str, list[str]] = {c: [] for c in trace.columns}
    for st in trace.steps:
        label = f"{st.index}: " + (f"{st.who}: " if st.who else "") + st.text + _line(result, st.site)
        if st.effects:
            label += "\n=> " + "; ".join(st.effects)
        color = "#ffdddd" if st.index == failing else "white"
        by_col.setdefault(st.column, []).append(f"s{st.index}")
        by_col[st.column][-1] = f"  s{st.index} [label={_dq(label)}, fillcolor={_dq(color)}];"
    blocked = blocked_rows(model, trace.final) if v.issue.code == "hang" else []
    for k, (column, who, what, site) in enumerate(blocked):
        label = "blocked: " + (f"{who}: " if who else "") + what + _line(result, site)
        by_col.setdefault(column, []).append(f"  end{k} [label={_dq(label)}, shape=octagon, fillcolor=\"#ffdddd\"];")
    for i, (column, nodes) in enumerate(by_col.items()):
        out.append(f"  subgraph cluster_{i} {{")
        out.append(f"    label={_dq(column)}; style=dashed;")
        out.extend("  " + n for n in nodes)
        out.append("  }")
    last: dict[str, str] = {}
    for st in trace.steps:
        node = f"s{st.index}"
        if st.column in last:
            out.append(f"  {last[st.column]} -> {node};")
        last[st.column] = node
    for k, (column, *_rest) in enumerate(blocked):
        if column in last:
            out.append(f"  {last[column]} -> end{k};")
    issued: dict[int, list[int]] = {}
    completed: dict[int, int] = {}
    for st in trace.steps:
        if st.kind == "tma_load":
            issued.setdefault(st.buffer, []).append(st.index)
        elif st.kind == "land" and issued.get(st.buffer):
            out.append(f"  s{issued[st.buffer].pop(0)} -> s{st.index} [style=dashed, color=blue, label=\"lands\"];")
        if st.kind == "wait" and st.barrier in completed:
            name = model.layout.bar_names[st.barrier]
            out.append(f"  s{completed[st.barrier]} -> s{st.index} [style=dashed, color=darkgreen, label={_dq(name)}];")
        before = trace.state_before(st.index)
        after = trace.states[st.index - 1]
        for g in st.touched:
            b0, b1 = before.bars[g], after.bars[g]
            if b0 is not None and b1 is not None and b1.phase > b0.phase:
                completed[g] = st.index
    out.append("}")
    return "\n".join(out) + "\n"
