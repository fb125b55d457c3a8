"""A single-file HTML report: the finding, then the counterexample drawn as an SVG timeline.

One lane per role instance and one per barrier the trace touches; barrier lanes show each
phase as a band, the failing step (or, at a hang, the blocked end) is highlighted in red.
No scripts, no external resources: the file can be attached to a bug report as it is.
"""
from __future__ import annotations

from html import escape

from ..core.diagnostics import Diagnostic, render
from ..pipeline.result import Result
from .common import SPAN, IssueView, timeline_rows, view
from .text import BARRIERS, header
from .trace import ASYNC, Trace
from ..model.threads import who_threads

CELL = 36  # px per step
RIGHT = 230  # px for each barrier's state at the end
LANE = 30  # px per lane
GUTTER = 150  # px for lane names
TOP = 34  # px for the step axis

SHORT = {"wait": "wait", "arrive": "arrive", "expect_tx": "expect", "complete_tx": "tx", "arrive_drop": "drop",
         "tma_load": "load", "read": "read", "mma": "mma", "mma_wait": "mwait", "land": "lands",
         "mma_done": "mma✓", "exit": "exit", "coll:elect": "elect", "coll:syncwarp": "sync", "coll:bar": "bar",
         "coll:syncthreads": "sync", "bar_arrive": "bar"}

CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 24px; color: #1b1f24; }
h1 { font-size: 20px; margin: 0 0 4px 0; } h2 { font-size: 17px; margin: 28px 0 6px 0; }
.verdict-findings { color: #b3261e; } .verdict-verified { color: #1a7f37; } .verdict-inconclusive { color: #9a6700; }
pre { background: #f6f8fa; padding: 10px; border-radius: 6px; white-space: pre-wrap; font-size: 12.5px; }
.why { max-width: 980px; line-height: 1.45; }
.svgbox { overflow-x: auto; border: 1px solid #d0d7de; border-radius: 6px; padding: 8px; background: #fff;
          scroll-snap-type: x proximity; }
.svgbox.from-end { direction: rtl; } .svgbox > .svgwrap { direction: ltr; position: relative; display: inline-block; }
.fail-anchor { position: absolute; top: 0; width: 1px; height: 1px; scroll-snap-align: center; }
a.to-failing { font-size: 12.5px; }
table.steps { border-collapse: collapse; font-size: 12.5px; margin-top: 10px; }
table.steps th, table.steps td { border: 1px solid #d0d7de; padding: 3px 6px; vertical-align: top; text-align: left; }
table.steps tr.failing td { background: #ffebe9; color: #8c1d18; font-weight: 600; }
td.num { text-align: right; color: #57606a; }
svg text { font-family: Menlo, Consolas, 'DejaVu Sans Mono', monospace; }
"""


def _x(step: int) -> int:
    return GUTTER + (step - 1) * CELL


def never_moved(model, trace: Trace) -> dict[str, str]:
    """Per role instance, the threads that took no step in the schedule (`warps 1-3`), when some did not."""
    moved = {(st.column, st.who) for st in trace.steps}
    idle: dict[str, list] = {}
    for cl in model.classes:
        if (cl.unit, cl.who) not in moved:
            idle.setdefault(cl.unit, []).append(cl)
    out = {}
    for unit, cls in idle.items():
        members = {t for cl in cls for t in cl.members}
        out[unit] = who_threads(cls[0], members) or "all its threads"
    return out


def failing_column(v: IssueView) -> int | None:
    """The step column to open the timeline at: the failing step, or the `end` column of a hang."""
    failing = v.trace.failing_step()
    return len(v.trace.steps) + 1 if v.issue.code == "hang" else failing


def _svg(result: Result, v: IssueView) -> str:
    model = v.issue.run.model
    trace: Trace = v.trace
    n = len(trace.steps)
    hang = v.issue.code == "hang"
    ncols = n + (1 if hang else 0)
    roles = list(trace.columns)
    bars = sorted({g for st in trace.steps for g in st.touched})
    lanes = [("role", c) for c in roles] + [("barrier", model.layout.bar_names[g]) for g in bars]
    width = GUTTER + ncols * CELL + RIGHT
    height = TOP + len(lanes) * LANE + 24
    failing = trace.failing_step()
    idle = never_moved(model, trace)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="counterexample timeline">']
    out.append(f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>')
    # the failing column first, so everything else draws over the band
    if failing is not None:
        out.append(f'<rect class="failing-band" x="{_x(failing)}" y="{TOP - 6}" width="{CELL}" '
                   f'height="{len(lanes) * LANE + 8}" fill="#ffd7d5"/>')
    if hang:
        out.append(f'<rect class="failing-band" x="{_x(n + 1)}" y="{TOP - 6}" width="{CELL}" '
                   f'height="{len(lanes) * LANE + 8}" fill="#ffd7d5"/>')
    out.append('<g class="axis">')
    for i in range(1, ncols + 1):
        label = "end" if hang and i == n + 1 else str(i)
        out.append(f'<text x="{_x(i) + CELL // 2}" y="{TOP - 12}" font-size="10" text-anchor="middle" '
                   f'fill="#57606a">{label}</text>')
    out.append("</g>")
    for li, (kind, name) in enumerate(lanes):
        y = TOP + li * LANE
        shade = "#f6f8fa" if li % 2 == 0 else "#ffffff"
        lane_class = "lane" if kind == "role" else "lane barrier-lane"
        out.append(f'<g class="{lane_class}" data-lane="{escape(name)}">')
        out.append(f'<rect x="0" y="{y}" width="{width}" height="{LANE}" fill="{shade}" fill-opacity="0.6"/>')
        title = "TMA / wgmma" if name == ASYNC else name
        lazy = idle.get(name) if kind == "role" else None
        out.append(f'<text x="8" y="{y + LANE // 2 + (0 if lazy else 4)}" font-size="12" font-weight="bold" '
                   f'fill="{"#0b4f8a" if kind == "barrier" else "#1b1f24"}">{escape(title)}</text>')
        if lazy:  # threads of this instance that never moved: often the ones a hang or an alias is about
            out.append(f'<g class="never-moved"><title>{escape(f"{name} {lazy} never moved in this schedule")}</title>'
                       f'<text x="8" y="{y + LANE - 3}" font-size="9" fill="#8c1d18">never moved: {escape(lazy)}</text>'
                       f'<rect x="{GUTTER}" y="{y + 1}" width="{ncols * CELL}" height="2" fill="#d1242f" '
                       f'fill-opacity="0.5"/></g>')
        if kind == "role":
            for st in trace.steps:
                if st.column != name:
                    continue
                fail = st.index == failing
                fill = "#d1242f" if fail else ("#8250df" if st.column == ASYNC else "#218bff")
                cls = "step failing" if fail else "step"
                line = result.sites[st.site].span.line if 0 <= st.site < len(result.sites) else 0
                tip = f"{st.index}: {st.who + ': ' if st.who else ''}{st.text}" + (f" (line {line})" if line else "")
                if st.effects:
                    tip += " => " + "; ".join(st.effects)
                out.append(f'<g class="{cls}" data-step="{st.index}"><title>{escape(tip)}</title>'
                           f'<rect x="{_x(st.index) + 2}" y="{y + 4}" width="{CELL - 4}" height="{LANE - 8}" rx="4" '
                           f'fill="{fill}"/><text x="{_x(st.index) + CELL // 2}" y="{y + LANE // 2 + 3}" '
                           f'font-size="8.5" text-anchor="middle" fill="#ffffff">'
                           f'{escape(SHORT.get(st.kind, st.kind[:5]))}</text></g>')
            if hang:
                for r in timeline_rows(result, v):
                    if r.label == "end" and r.column == name:
                        out.append(f'<g class="blocked failing" data-step="end"><title>{escape(r.cell)}</title>'
                                   f'<rect x="{_x(n + 1) + 2}" y="{y + 4}" width="{CELL - 4}" height="{LANE - 8}" '
                                   f'rx="4" fill="#d1242f"/><text x="{_x(n + 1) + CELL // 2}" y="{y + LANE // 2 + 3}" '
                                   f'font-size="8.5" text-anchor="middle" fill="#ffffff">stuck</text></g>')
                        break
        else:
            gid = bars[li - len(roles)]
            out.extend(_phases(model, trace, gid, y, ncols))
            for st in trace.steps:
                if gid in st.touched:
                    cx = _x(st.index) + CELL // 2
                    out.append(f'<circle class="touch" cx="{cx}" cy="{y + LANE - 7}" r="2.5" fill="#0b4f8a">'
                               f'<title>{escape(f"step {st.index}: {st.text}")}</title></circle>')
            b = trace.final.bars[gid]
            end = "not initialised" if b is None else f"phase {b.phase}: {b.pending}/{b.expected} pending, tx {b.tx}"
            out.append(f'<text class="final" x="{_x(ncols) + CELL + 8}" y="{y + LANE // 2 + 4}" font-size="10.5" '
                       f'fill="#0b4f8a">{escape(end)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def _phases(model, trace: Trace, gid: int, y: int, ncols: int) -> list[str]:
    """Bands of constant phase along one barrier's lane; a tick where a phase completes."""
    out = []
    states = [trace.initial] + trace.states + ([trace.final] * (ncols - len(trace.states)))
    start = 1
    for i in range(1, ncols + 1):
        b = states[i - 1].bars[gid] if i - 1 < len(states) else None
        nxt = states[i].bars[gid] if i < len(states) and i < ncols else None
        phase = None if b is None else b.phase
        nphase = None if nxt is None else nxt.phase
        if i == ncols or nphase != phase:
            x0, x1 = _x(start), _x(i) + CELL
            fill = "#e3e8ee" if phase is None else ("#b6e3ff" if phase % 2 == 0 else "#ffe7a3")
            label = "uninitialised" if phase is None else f"phase {phase}"
            pending = "" if b is None else f", {b.pending}/{b.expected} pending, tx {b.tx} at its end"
            out.append(f'<g class="phase" data-phase="{"" if phase is None else phase}"><title>'
                       f'{escape(model.layout.bar_names[gid])}: {label} (steps {start}-{i}){escape(pending)}</title>'
                       f'<rect x="{x0 + 1}" y="{y + 6}" width="{x1 - x0 - 2}" height="{LANE - 12}" rx="3" '
                       f'fill="{fill}" stroke="#8c959f" stroke-width="0.5"/>'
                       f'<text x="{x0 + 6}" y="{y + LANE // 2 + 3}" font-size="9" fill="#1b1f24">'
                       f'{label if x1 - x0 > 50 else ("" if phase is None else phase)}</text></g>')
            start = i + 1
    return out


def _table(result: Result, v: IssueView) -> str:
    rows = timeline_rows(result, v)
    cols = v.trace.columns
    out = ['<table class="steps"><thead><tr><th>step</th><th>line</th>']
    out.extend(f"<th>{escape(c)}</th>" for c in cols)
    out.append(f"<th>{escape(BARRIERS)}</th></tr></thead><tbody>")
    for r in rows:
        cls = ' class="failing"' if r.failing else ""
        cells = ("".join(f"<td>{escape(r.cell) if c == r.column else ''}</td>" for c in cols) if r.column != SPAN
                 else f'<td colspan="{len(cols)}">{escape(r.cell)}</td>')
        out.append(f'<tr{cls}><td class="num">{escape(r.label)}</td><td class="num">{r.line or ""}</td>{cells}'
                   f'<td>{"<br/>".join(escape(b) for b in r.barriers)}</td></tr>')
    out.append("</tbody></table>")
    return "".join(out)


def _issue(result: Result, v: IssueView, k: int) -> str:
    f = v.issue.finding
    parts = [f'<section class="finding" id="finding-{k}" data-code="{escape(f.code)}">',
             f"<h2>{escape(f.code)}: {escape(f.message)}</h2>"]
    parts.append(f"<pre>{escape(render(Diagnostic(v.issue.severity, f.code, f.message, v.span, v.chain), result.sources))}</pre>")
    if v.when:
        parts.append(f'<p class="when"><b>when:</b> {escape(v.when)}</p>')
    if v.why:
        parts.append(f'<p class="why"><b>why:</b> {escape(v.why)}</p>')
    if v.issue.fix:
        parts.append(f'<p class="fix"><b>usual fix:</b> {escape(v.issue.fix)}</p>')
    if v.issue.consequences:
        parts.append('<p class="leads"><b>leads to:</b></p><ul class="consequences">')
        for c in v.issue.consequences:
            line = result.sites[c.finding.site].span.line if 0 <= c.finding.site < len(result.sites) else 0
            parts.append(f'<li data-code="{escape(c.code)}"><b>{escape(c.code)}</b>{" (latent)" if c.severity == "latent" else ""}'
                         f'{f", line {line}" if line else ""}: {escape(c.finding.message)} ({escape(c.led_by)}; '
                         f'{c.witness.steps} steps)</li>')
        parts.append("</ul>")
    title = f"counterexample: {len(v.trace.steps)} steps" + (f" ({v.config_text})" if v.config_text else "")
    parts.append(f"<h3>{escape(title)}</h3>")
    col = failing_column(v)
    anchor = ""
    box = "svgbox"
    if col is not None:  # no scripts: the box opens at its end when the failing step is in the later half, and
        # the failing step is a scroll-snap point and a link target
        x = _x(col) + CELL // 2
        anchor = f'<span class="fail-anchor" id="finding-{k}-failing" style="left: {x}px"></span>'
        total = GUTTER + (len(v.trace.steps) + (1 if v.issue.code == "hang" else 0)) * CELL + RIGHT
        box += " from-end" if x > total / 2 else ""
        label = "the blocked end" if v.issue.code == "hang" else f"step {col}"
        parts.append(f'<p><a class="to-failing" href="#finding-{k}-failing">go to {label}</a></p>')
    parts.append(f'<div class="{box}"><div class="svgwrap">{anchor}{_svg(result, v)}</div></div>')
    parts.append(_table(result, v))
    if v.barriers:
        parts.append("<h3>barriers at the failure</h3><ul>")
        parts.extend(f"<li><code>{escape(b)}</code></li>" for b in v.barriers)
        parts.append("</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def render_html(results: list[Result], max_issues: int = 10) -> str:
    title = "pipecheck: " + ", ".join(r.spec for r in results)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"/>',
           f"<title>{escape(title)}</title>", f"<style>{CSS}</style></head><body>"]
    for result in results:
        out.append(f'<article class="spec" data-spec="{escape(result.spec)}" data-verdict="{result.verdict}">')
        out.append(f'<h1 class="verdict-{result.verdict}">{escape(header(result))}</h1>')
        for d in result.static:
            out.append(f"<pre>{escape(render(d, result.sources))}</pre>")
        for k, issue in enumerate(result.issues[:max_issues]):
            out.append(_issue(result, view(result, issue), k + 1))
        out.append("</article>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
