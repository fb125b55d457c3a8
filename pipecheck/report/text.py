"""The text report: verdict, each finding with its caret, condition, reason, and timeline."""
from __future__ import annotations

import textwrap

from ..diagnostics import Diagnostic, Note, render
from ..trace import Trace, blocked_rows
from ..verify import Result
from .common import IssueView, view

COLUMN_WIDTH = 34


def header(result: Result) -> str:
    params = ", ".join(f"{k}={v}" for k, v in result.params.items())
    head = f"{result.spec}: kernel {result.kernel.name}" + (f" ({params})" if params else "")
    runs = len(result.runs)
    stats = f"{result.states} states, {runs} configuration{'s' if runs != 1 else ''}"
    if result.verdict == "verified":
        return f"{head}: verified ({stats})"
    if result.verdict == "inconclusive":
        return f"{head}: inconclusive: stopped by {result.stopped} after {stats}; no finding so far"
    codes = ", ".join(dict.fromkeys([i.code for i in result.issues] + [d.code for d in result.static]))
    n = len(result.issues) + len(result.static)  # static findings (symbolic/static.py) count too
    tail = f"; stopped by {result.stopped}, so the search is incomplete" if result.stopped else ""
    return f"{head}: {n} finding{'s' if n != 1 else ''} ({codes}) ({stats}{tail})"


def render_timeline(trace: Trace, sites, blocked=(), width: int = COLUMN_WIDTH) -> list[str]:
    """One column per role instance (and one for async completions); each step names its spec line."""
    cols = trace.columns
    lines = []
    head = " step | " + " | ".join(c[:width].ljust(width) for c in cols)
    lines.append(head)
    lines.append("-" * len(head))

    def row(label: str, column: str, cell: str) -> None:
        wrapped = textwrap.wrap(cell, width) or [""]
        for k, part in enumerate(wrapped):
            cells = [part.ljust(width) if c == column else " " * width for c in cols]
            prefix = f"{label:>5} | " if k == 0 else "      | "
            lines.append((prefix + " | ".join(cells)).rstrip())

    for st in trace.steps:
        where = f" @{sites[st.site].span.line}" if 0 <= st.site < len(sites) else ""
        who = f"{st.who}: " if st.who else ""
        cell = f"{who}{st.text}{where}"
        if st.effects:
            cell += " => " + "; ".join(st.effects)
        for f in st.findings:
            cell += f"  <-- {f.code}"
        row(str(st.index), st.column, cell)
    if blocked:
        lines.append("-" * len(head))
        for column, who, what, site in blocked:
            where = f" @{sites[site].span.line}" if 0 <= site < len(sites) else ""
            row("end", column, f"{who + ': ' if who else ''}{what}{where}")
    return lines


def render_issue(result: Result, v: IssueView) -> list[str]:
    f = v.issue.finding
    notes = []
    if v.when:
        notes.append(Note(f"when: {v.when}"))
    for msg, site in f.notes:
        notes.append(Note(msg, result.sites[site].span if 0 <= site < len(result.sites) else None))
    diag = Diagnostic("error", f.code, f.message, v.span, tuple(notes))
    out = [render(diag, result.sources)]
    if v.why:
        out.extend(textwrap.wrap("why: " + v.why, 100, subsequent_indent="     "))
    cfg = f" ({v.config_text})" if v.config_text else ""
    out.append("")
    out.append(f"counterexample: {len(v.trace.steps)} steps{cfg}")
    blocked = blocked_rows(v.issue.run.model, v.trace.final) if f.code == "hang" else ()
    out.extend("  " + line for line in render_timeline(v.trace, result.sites, blocked))
    if v.barriers:
        out.append("barriers at the failure:")
        out.extend("  " + b for b in v.barriers)
    return out


def render_result(result: Result, max_issues: int = 10) -> str:
    out = [header(result)]
    for d in result.static:
        out.append("")
        out.append(render(d, result.sources))
    for issue in result.issues[:max_issues]:
        out.append("")
        out.extend(render_issue(result, view(result, issue)))
    if len(result.issues) > max_issues:
        out.append("")
        out.append(f"... and {len(result.issues) - max_issues} more findings (use --format json for all)")
    return "\n".join(out) + "\n"
