"""The text report: verdict, each finding with its caret, condition, reason, and timeline.

Plain text for pipes and files; `rich_text` draws the same content for a terminal, from the
parts defined here. Both are deterministic: no timings, no terminal probing here.
"""
from __future__ import annotations

import math
import re
import textwrap
from dataclasses import replace

from ..core.diagnostics import Diagnostic, Note, render
from ..pipeline.result import Result
from .trace import ASYNC
from .common import SPAN, IssueView, Row, finding_notes, parameter_lines, role_lines, timeline_rows, view

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
    swept = dict(getattr(getattr(result, "ptx", None), "swept", ()) or ())
    quiet = {p.name for p in result.kernel.params if not getattr(p, "steers", True)}  # a launch's other bytes
    params = ", ".join(f"{k}={swept[k][0]}..{swept[k][-1]}" if k in swept else f"{k}={v}"
                       for k, v in result.params.items() if k not in quiet)
    head = f"{result.spec}: kernel {result.kernel.name}" + (f" ({params})" if params else "")
    runs = len(result.runs)
    states = f"{result.states} states"
    if result.stopped:  # how far a stopped search got: states and BFS depth
        states += f", depth {max((r.exploration.depth for r in result.runs), default=0)}"
    stats = f"{states}, {runs} configuration{'s' if runs != 1 else ''}"
    plan = result.plan
    if plan is not None and plan.incomplete:  # a stopped --all-params sweep: how much of it was done
        stats += f", {len(plan.complete)} of {len(plan.points)} parameter points explored"
    if swept:  # a compiled kernel's sweep: how many points
        stats += f", {math.prod(len(vals) for vals in swept.values())} parameter points"
    if result.verdict == "verified":
        return f"{head}: verified ({stats})"
    if result.verdict == "inconclusive":
        where = f" in {result.stopped_in}," if getattr(result, "stopped_in", "") else ""  # outside the search
        return f"{head}: inconclusive: stopped by {result.stopped}{where} after {stats}; no finding so far"
    codes = ", ".join(dict.fromkeys([i.code + (" (latent)" if i.latent else "") for i in result.issues] +
                                    [d.code for d in result.static]))
    n = len(result.issues) + len(result.static)  # static findings (symbolic/static.py) count too
    led = sum(len(i.consequences) for i in result.issues)
    also = f", leading to {led} more" if led else ""
    tail = f"; stopped by {result.stopped}, so the search is incomplete" if result.stopped else ""
    policy = "" if result.fails else f"; none reaches --fail-on {result.options.fail_on}, so the exit code is 0"
    return f"{head}: {n} finding{'s' if n != 1 else ''} ({codes}{also}) ({stats}{tail}{policy})"


TEXT_WIDTH = 120  # the text timeline fits this many columns (with its indent) up to four roles and async
_SHORT = [  # the compact cell wording, when the columns must narrow to fit TEXT_WIDTH
    (re.compile(r"\bthreads (\d)"), r"t\1"), (re.compile(r"\bthread (\d)"), r"t\1"),
    (re.compile(r"\blanes (\d)"), r"l\1"), (re.compile(r"\blane (\d)"), r"l\1"),
    (re.compile(r"\bwarps (\d)"), r"w\1"), (re.compile(r"\bwarp (\d)"), r"w\1"),
    (re.compile(r" parity (\d)"), r" p\1"), (re.compile(r"\((\d+) B -> ([^)]*)\)"), r"(\1B)"),
    (re.compile(r"elect\(\) \(l(\d+) is elected\)"), r"elect()=l\1"), (re.compile(r" expect_tx "), " +tx "),
    (re.compile(r"completes phase "), "ph "), (re.compile(r"everyone arrived: released"), "all met"),
    (re.compile(r"^TMA: "), ""), (re.compile(r" lands "), " in "),
    # a compiled kernel's barrier names: `mainloop_pipeline.full_barriers[0]` -> `mainloop.full[0]`
    (re.compile(r"\b(\w+)_pipeline\."), r"\1."), (re.compile(r"\b(\w+?)_barriers?(\[[\d.]+\])"), r"\1\2"),
]


def fit(columns: list[str], indent: int = 2) -> tuple[int, int, bool]:
    """(cell width, barrier width, compact wording): the default widths when they fit TEXT_WIDTH, else narrower
    columns with the compact wording (html and json keep every word)."""
    n = len(columns)
    if indent + 15 + n * (COLUMN_WIDTH + 3) + BARRIER_WIDTH <= TEXT_WIDTH:
        return COLUMN_WIDTH, BARRIER_WIDTH, False
    bar = 17
    return max(10, (TEXT_WIDTH - indent - 15 - 3 * n - bar) // n), bar, True


def compact(text: str) -> str:
    for pattern, repl in _SHORT:
        text = pattern.sub(repl, text)
    return text


def render_rows(columns: list[str], rows: list[Row], width: int = COLUMN_WIDTH,
                bar_width: int = BARRIER_WIDTH, short: bool = False) -> list[str]:
    """One column per role instance (and one for async completions), the spec line, and the barriers."""
    if short:
        said: dict[str, str] = {}  # (a long witness says the same things many times)

        def short_of(text: str) -> str:
            hit = said.get(text)
            if hit is None:
                hit = said[text] = compact(text)
            return hit
        rows = [replace(r, cell=short_of(r.cell), barriers=tuple(short_of(b) for b in r.barriers)) for r in rows]
    names = [("async" if short and c == ASYNC else c)[:width].ljust(width) for c in columns]
    lw = max([5] + [len(r.label) for r in rows])  # the step column: as wide as its widest range ("126-143")
    head = f"{'step':>{lw}} | line | {' | '.join(names)} | {'barriers after' if short else BARRIERS}"
    rule = "-" * len(head)
    lines = [head, rule]
    ended = False
    for r in rows:
        if r.label == "end" and not ended:
            lines.append(rule)
            ended = True
        if r.column == SPAN:  # across every role's column (a compiled kernel's set-up)
            span = len(columns) * (width + 3) - 3
            for k, part in enumerate(textwrap.wrap(r.cell, span) or [""]):
                label = f"{r.label:>{lw}} | {str(r.line) if r.line else '':>4}" if k == 0 else " " * (lw + 1) + "|     "
                lines.append(f"{label} | {part}".rstrip())
            continue
        parts = textwrap.wrap(r.cell, width) or [""]
        bars: list[str] = []
        for b in r.barriers:
            bars.extend(textwrap.wrap(b, bar_width) or [""])
        for k in range(max(len(parts), len(bars))):
            part = parts[k] if k < len(parts) else ""
            cells = [part.ljust(width) if c == r.column else " " * width for c in columns]
            label = f"{r.label:>{lw}} | {str(r.line) if r.line else '':>4}" if k == 0 else " " * (lw + 1) + "|     "
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
    diag = Diagnostic(v.issue.severity, f.code, f.message, v.span, tuple(notes))
    out = [render(diag, result.sources)]
    if v.why:
        out.extend(textwrap.wrap("why: " + v.why, 100, subsequent_indent="     "))
    if v.issue.fix:
        out.extend(textwrap.wrap("usual fix: " + v.issue.fix, 100, subsequent_indent="     "))
    out.extend(consequence_lines(result, v.issue))
    return out


def consequence_lines(result: Result, issue) -> list[str]:
    """What the cause also leads to, one line each (the schedules are in --format json and html)."""
    out = []
    if issue.consequences:
        out.append("leads to:")
    for c in issue.consequences:
        span = result.sites[c.finding.site].span if 0 <= c.finding.site < len(result.sites) else None
        where = f"line {span.line}: " if span is not None else ""
        sev = " (latent)" if c.latent and not issue.latent else ""
        out.extend(textwrap.wrap(f"- {c.code}{sev}, {where}{c.finding.message} ({c.led_by}; "
                                 f"{c.witness.steps} steps)", 100, initial_indent="  ", subsequent_indent="    "))
    return out


def counterexample_title(v: IssueView) -> str:
    cfg = f" ({v.config_text})" if v.config_text else ""
    return f"counterexample: {len(v.trace.steps)} steps{cfg}"


def render_issue(result: Result, v: IssueView) -> list[str]:
    out = issue_head(result, v)
    out.append("")
    out.append(counterexample_title(v))
    width, bar_width, short = fit(v.trace.columns)
    out.extend("  " + line for line in render_rows(v.trace.columns, timeline_rows(result, v), width, bar_width, short))
    if v.barriers:
        out.append("barriers at the failure:")
        out.extend("  " + b for b in v.barriers)
    return out


def render_result(result: Result, max_issues: int = 10) -> str:
    """The whole report as plain text (`rich_text.render_result_rich` draws the same for a terminal)."""
    out = [header(result)] + parameter_lines(result) + role_lines(result)
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
