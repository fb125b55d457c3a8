"""The text report drawn with rich for a terminal: styled verdict, the timeline as a table.

Same content as `text.render_result`; only called when stdout is a terminal or colour is
forced, so rich is imported here and nowhere on the path of `pipecheck check`.
"""
from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..core.diagnostics import render
from ..pipeline.result import Result
from .common import SPAN, IssueView, Row, parameter_lines, role_lines, timeline_rows, view
from .text import BARRIERS, counterexample_title, header, issue_head

VERDICT_STYLE = {"verified": "bold green", "findings": "bold red", "inconclusive": "bold yellow"}


def console_for(width: int | None) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, color_system="standard", width=width or 160,
                   highlight=False, emoji=False, soft_wrap=False), buf


def timeline_table(columns: list[str], rows: list[Row], title: str) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False, header_style="bold", expand=False)
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("line", justify="right", no_wrap=True, style="dim")
    for c in columns:
        table.add_column(c, overflow="fold", max_width=34)
    table.add_column(BARRIERS, style="cyan", overflow="fold", max_width=28)
    ended = False
    for r in rows:
        if r.label == "end" and not ended:
            table.add_section()
            ended = True
        # a row across every column (a compiled kernel's set-up) stands in the first, which folds it
        cells = [Text(r.cell) if c == r.column or (r.column == SPAN and k == 0) else Text("")
                 for k, c in enumerate(columns)]
        style = "bold red" if r.failing else None
        table.add_row(Text(r.label), Text(str(r.line) if r.line else ""), *cells, Text("\n".join(r.barriers)),
                      style=style)
    return table


def _issue(console: Console, result: Result, v: IssueView) -> None:
    lines = issue_head(result, v)
    first, rest = lines[0].split("\n", 1) if "\n" in lines[0] else (lines[0], "")
    console.print(Text(first, style="bold red"))
    if rest:
        console.print(Text(rest))
    for line in lines[1:]:
        console.print(Text(line, style="italic"))
    console.print()
    console.print(timeline_table(v.trace.columns, timeline_rows(result, v), counterexample_title(v)))
    if v.barriers:
        console.print(Text("barriers at the failure:", style="bold"))
        for b in v.barriers:
            console.print(Text("  " + b, style="cyan"))


def render_result_rich(result: Result, max_issues: int = 10, width: int | None = None) -> str:
    console, buf = console_for(width)
    console.print(Text(header(result), style=VERDICT_STYLE.get(result.verdict, "bold")))
    for line in parameter_lines(result) + role_lines(result):
        console.print(Text(line))
    for d in result.static:
        console.print()
        console.print(Text(render(d, result.sources)))
    for issue in result.issues[:max_issues]:
        console.print()
        _issue(console, result, view(result, issue))
    if len(result.issues) > max_issues:
        console.print()
        console.print(Text(f"... and {len(result.issues) - max_issues} more findings (use --format json for all)"))
    return buf.getvalue()
