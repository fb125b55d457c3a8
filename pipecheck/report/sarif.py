"""The SARIF 2.1.0 report: one log, one run, one result per finding, the trace as a code flow.

Code-scanning tools (GitHub, VS Code's SARIF viewer) show each result at its spec line;
the counterexample is a codeFlow with one threadFlow per role instance whose locations
carry the global step number as `executionOrder`, so a viewer can replay the interleaving.
"""
from __future__ import annotations

import json
from pathlib import PurePath
from typing import Iterable

from ..core.diagnostics import FINDINGS, SPEC_ERRORS, Diagnostic, Span
from ..core.version import __version__
from ..pipeline.result import Result
from .common import finding_notes, view
from .trace import blocked_rows

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFO_URI = "https://github.com/pipecheck/pipecheck"
WARNINGS = frozenset({"no-overlap"})


def _uri(path: str) -> str:
    p = PurePath(path)
    if p.is_absolute():
        return "file://" + p.as_posix()
    return p.as_posix()


def _region(span: Span) -> dict:
    region = {"startLine": max(span.line, 1), "startColumn": max(span.col, 1)}
    if span.end_line >= span.line and span.end_line > 0:
        region["endLine"] = span.end_line
        if span.end_col > 0 and (span.end_line > span.line or span.end_col > span.col):
            region["endColumn"] = span.end_col
    return region


def _location(span: Span | None, message: str | None = None) -> dict:
    loc: dict = {}
    if span is not None and span.file:
        loc["physicalLocation"] = {"artifactLocation": {"uri": _uri(span.file)}, "region": _region(span)}
    if message:
        loc["message"] = {"text": message}
    return loc


def _rules() -> list[dict]:
    rules = []
    for code, text in {**FINDINGS, **SPEC_ERRORS}.items():
        level = "warning" if code in WARNINGS else "error"
        rules.append({"id": code, "name": "".join(w.capitalize() for w in code.split("-")),
                      "shortDescription": {"text": text},
                      "helpUri": f"{INFO_URI}/blob/main/README.md#findings",
                      "defaultConfiguration": {"level": level}})
    return rules


def _code_flow(result: Result, issue, v) -> dict:
    model = issue.run.model
    sites = result.sites
    flows: dict[str, list[dict]] = {c: [] for c in v.trace.columns}
    for st in v.trace.steps:
        after = v.trace.states[st.index - 1]
        span = sites[st.site].span if 0 <= st.site < len(sites) else None
        text = f"{st.who}: {st.text}" if st.who else st.text
        if st.effects:
            text += " => " + "; ".join(st.effects)
        tfl: dict = {"location": _location(span, text), "executionOrder": st.index, "kinds": [st.kind or "step"]}
        state = {}
        for g in st.touched:
            b = after.bars[g]
            name = model.layout.bar_names[g]
            state[name] = {"text": "not initialised" if b is None else
                           f"phase {b.phase}, {b.pending} of {b.expected} arrivals pending, tx {b.tx}"}
        if state:
            tfl["state"] = state
        if st.findings:
            tfl["importance"] = "essential"
        flows.setdefault(st.column, []).append(tfl)
    if issue.code == "hang":
        last = len(v.trace.steps)
        for k, (column, who, what, site) in enumerate(blocked_rows(model, v.trace.final)):
            span = sites[site].span if 0 <= site < len(sites) else None
            flows.setdefault(column, []).append({
                "location": _location(span, f"{who + ': ' if who else ''}{what}"),
                "executionOrder": last + 1 + k, "kinds": ["blocked"], "importance": "essential"})
    thread_flows = [{"id": column, "message": {"text": column}, "locations": locs}
                    for column, locs in flows.items() if locs]
    title = f"counterexample: {len(v.trace.steps)} steps" + (f" ({v.config_text})" if v.config_text else "")
    if not thread_flows:  # a finding in the initial state: SARIF wants at least one location
        thread_flows = [{"id": "initial", "locations": [{"location": _location(v.span, "initial state")}]}]
    return {"message": {"text": title}, "threadFlows": thread_flows}


def _diag_result(d: Diagnostic, index: dict[str, int]) -> dict:
    res: dict = {"ruleId": d.code, "level": "warning" if d.severity == "warning" else "error",
                 "message": {"text": d.message}}
    if d.code in index:
        res["ruleIndex"] = index[d.code]
    loc = _location(d.span)
    if loc:
        res["locations"] = [loc]
    related = [_location(n.span, n.message) | {"id": i} for i, n in enumerate(d.notes)]
    if related:
        res["relatedLocations"] = related
    return res


def to_sarif(results: Iterable[Result], errors: Iterable[Diagnostic] = ()) -> dict:
    """A SARIF log for several specs' results and spec errors (which are results too: a spec that
    does not parse is something to fix at its line)."""
    rules = _rules()
    index = {r["id"]: i for i, r in enumerate(rules)}
    out_results: list[dict] = []
    notifications: list[dict] = []
    artifacts: list[str] = []
    verdicts: dict[str, str] = {}
    for result in results:
        if result.spec not in artifacts:
            artifacts.append(result.spec)
        verdicts[result.spec] = result.verdict
        for d in result.static:
            out_results.append(_diag_result(d, index))
        for issue in result.issues:
            v = view(result, issue)
            msg = issue.finding.message
            if v.when:
                msg += f" ({v.when})"
            # a latent finding (it needs what the H200 was not seen to do) is a warning to code scanning
            res: dict = {"ruleId": issue.code, "ruleIndex": index.get(issue.code, -1),
                         "level": "warning" if issue.latent else "error", "message": {"text": msg}}
            loc = _location(v.span)
            res["locations"] = [loc] if loc else [_location(None, result.spec)]
            notes = [(n.message, n.span) for n in v.chain]  # inside procedures: the calls down to the statement
            notes += [(n.message, n.span) for n in finding_notes(result, issue)]
            related = [_location(span, m) | {"id": i} for i, (m, span) in enumerate(notes)]
            if related:
                res["relatedLocations"] = related
            res["codeFlows"] = [_code_flow(result, issue, v)]
            res["partialFingerprints"] = {"pipecheck/v1": f"{issue.code}:{result.kernel.name}:"
                                                           f"{v.span.line if v.span else 0}"}
            res["properties"] = {"condition": issue.condition or None, "on_hardware": issue.on_hardware,
                                 "why": v.why or None, "barriers": v.barriers, "params": result.params,
                                 "severity": issue.severity, "latent": list(issue.latent), "fix": issue.fix or None,
                                 "consequences": [{"code": c.code, "message": c.finding.message,
                                                   "line": result.sites[c.finding.site].span.line
                                                   if 0 <= c.finding.site < len(result.sites) else None}
                                                  for c in issue.consequences]}
            out_results.append(res)
        if result.verdict == "inconclusive":
            notifications.append({"level": "warning", "message": {
                "text": f"{result.spec}: inconclusive: stopped by {result.stopped} after {result.states} states"}})
    for d in errors:
        if d.span is not None and d.span.file not in artifacts:
            artifacts.append(d.span.file)
        out_results.append(_diag_result(d, index))
    run = {
        "tool": {"driver": {"name": "pipecheck", "version": __version__, "semanticVersion": __version__,
                            "informationUri": INFO_URI, "rules": rules}},
        "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
        "artifacts": [{"location": {"uri": _uri(a)}} for a in artifacts],
        "results": out_results,
        "columnKind": "unicodeCodePoints",
        "properties": {"verdicts": verdicts},
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def render_sarif(results: Iterable[Result], errors: Iterable[Diagnostic] = ()) -> str:
    return json.dumps(to_sarif(results, errors), indent=2) + "\n"
