"""The text report: verdict, each finding with its caret, condition, reason, and timeline.

Plain text for pipes and files; `rich_text` draws the same content for a terminal, from the
parts defined here. Both are deterministic: no timings, no terminal probing here.
"""
from __future__ import annotations

import textwrap

from ..core.diagnostics import Diagnostic, Note, render
from ..pipeline.result import Result
from .common import IssueView, Row, finding_notes, parameter_lines, timeline_rows, view

COLUMN_WIDTH = 30
BARRIER_WIDTH = 24
BARRIERS = "barriers after the step"


def header(result: Result) -> str:
    every = result.every
    if every is not None and every.witness_k is None and result.verdict != "findings":  # for every value of the bound
        params = ", ".join(f"{k}={v}" for k, v in result.params.items() if k != every.name)
        head = f"{result.spec}: kernel {result.kernel.name}" + (f" ({params})" if params else "")
        stats = f"{every.states} states with the loop-offset abstraction"
        if result.verdict == "verified":
            return f"{head}: verified for every {every.name} in {every.lo}..{every.hi} ({stats})"
        return f"{head}: inconclusive for every {every.name}: stopped by {result.stopped} after {stats}; no finding so far"
    line = _header(result)
    if every is not None and every.witness_k is not None:
        line = (f"--every {every.name}: the loop-offset run ({every.states} states) found {', '.join(every.codes)}; "
                f"{every.name} = {every.witness_k} is the smallest value with a finding:\n" + line)
    return line


def _header(result: Result) -> str:
    params = ", ".join(f"{k}={v}" for k, v in result.params.items())
    head = f"{result.spec}: kernel {result.kernel.name}" + (f" ({params})" if params else "")
    runs = len(result.runs)
    states = f"{result.states} states"
    if result.stopped:  # how far a stopped search got: states and BFS depth
        states += f", depth {max((r.exploration.depth for r in result.runs), default=0)}"
    stats = f"{states}, {runs} configuration{'s' if runs != 1 else ''}"
    plan = result.plan
    if plan is not None and plan.incomplete:  # a stopped --all-params sweep: how much of it was done
        stats += f", {len(plan.complete)} of {len(plan.points)} parameter points explored"
    if result.verdict == "verified":
        return f"{head}: verified ({stats})"
    if result.verdict == "inconclusive":
        where = f" in {result.stopped_in}," if getattr(result, "stopped_in", "") else ""  # outside the search
        return f"{head}: inconclusive: stopped by {result.stopped}{where} after {stats}; no finding so far"
    codes = ", ".join(dict.fromkeys([i.code for i in result.issues] + [d.code for d in result.static]))
    n = len(result.issues) + len(result.static)  # static findings (symbolic/static.py) count too
    tail = f"; stopped by {result.stopped}, so the search is incomplete" if result.stopped else ""
    return f"{head}: {n} finding{'s' if n != 1 else ''} ({codes}) ({stats}{tail})"


def render_rows(columns: list[str], rows: list[Row], width: int = COLUMN_WIDTH,
                bar_width: int = BARRIER_WIDTH) -> list[str]:
    """One column per role instance (and one for async completions), the spec line, and the barriers."""
    names = [c[:width].ljust(width) for c in columns]
    head = f" step | line | {' | '.join(names)} | {BARRIERS}"
    rule = "-" * len(head)
    lines = [head, rule]
    ended = False
    for r in rows:
        if r.label == "end" and not ended:
            lines.append(rule)
            ended = True
        parts = textwrap.wrap(r.cell, width) or [""]
        bars: list[str] = []
        for b in r.barriers:
            bars.extend(textwrap.wrap(b, bar_width) or [""])
        for k in range(max(len(parts), len(bars))):
            part = parts[k] if k < len(parts) else ""
            cells = [part.ljust(width) if c == r.column else " " * width for c in columns]
            label = f"{r.label:>5} | {str(r.line) if r.line else '':>4}" if k == 0 else "      |     "
            bar = bars[k] if k < len(bars) else ""
            lines.append(f"{label} | {' | '.join(cells)} | {bar}".rstrip())
    return lines


def issue_head(result: Result, v: IssueView) -> list[str]:
    """The diagnostic with its caret and notes, and the reason: what every text-like report prints first."""
    f = v.issue.finding
    notes = list(v.chain)  # inside procedures: from the user's call down to the statement
    if v.when:
        notes.append(Note(f"when: {v.when}"))
    notes.extend(finding_notes(result, v.issue))
    diag = Diagnostic("error", f.code, f.message, v.span, tuple(notes))
    out = [render(diag, result.sources)]
    if v.why:
        out.extend(textwrap.wrap("why: " + v.why, 100, subsequent_indent="     "))
    return out


def counterexample_title(v: IssueView) -> str:
    cfg = f" ({v.config_text})" if v.config_text else ""
    return f"counterexample: {len(v.trace.steps)} steps{cfg}"


def render_issue(result: Result, v: IssueView) -> list[str]:
    out = issue_head(result, v)
    out.append("")
    out.append(counterexample_title(v))
    out.extend("  " + line for line in render_rows(v.trace.columns, timeline_rows(result, v)))
    if v.barriers:
        out.append("barriers at the failure:")
        out.extend("  " + b for b in v.barriers)
    return out


def render_result(result: Result, max_issues: int = 10) -> str:
    """The whole report as plain text (`rich_text.render_result_rich` draws the same for a terminal)."""
    out = [header(result)] + parameter_lines(result)
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
