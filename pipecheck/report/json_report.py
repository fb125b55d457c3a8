"""The JSON report (schema pipecheck-result/1, documented in docs/json-schema.md)."""
from __future__ import annotations

import json

from ..diagnostics import Span
from ..verify import Result
from .common import view

SCHEMA = "pipecheck-result/1"


def _loc(span: Span | None) -> dict | None:
    if span is None:
        return None
    return {"file": span.file, "line": span.line, "col": span.col, "end_line": span.end_line, "end_col": span.end_col}


def to_dict(result: Result) -> dict:
    findings = []
    for issue in result.issues:
        v = view(result, issue)
        steps = []
        for st in v.trace.steps:
            steps.append({
                "step": st.index, "role": st.column, "threads": st.who, "action": st.text,
                "location": _loc(result.sites[st.site].span) if 0 <= st.site < len(result.sites) else None,
                "effects": list(st.effects), "findings": [f.code for f in st.findings],
            })
        findings.append({
            "code": issue.code, "severity": "error", "message": issue.finding.message,
            "location": _loc(v.span), "condition": issue.condition or None, "on_hardware": issue.on_hardware,
            "configuration": v.config_text or None, "why": v.why, "trace": steps, "barriers": v.barriers,
            "needs_independent_scheduling": issue.needs_independent_scheduling,
        })
    static = [{"code": d.code, "severity": d.severity, "message": d.message, "location": _loc(d.span)} for d in result.static]
    return {
        "schema": SCHEMA,
        "spec": result.spec,
        "kernel": result.kernel.name,
        "arch": result.kernel.arch,
        "params": result.params,
        "semantics": {"elect": result.options.elect, "reduction": result.options.reduce,
                      "lockstep": result.options.lockstep},
        "verdict": result.verdict,
        "exit_code": result.exit_code,
        "stopped": result.stopped,
        "findings": findings,
        "static": static,
        "stats": {
            "configurations": len(result.runs),
            "states": result.states,
            "transitions": sum(r.exploration.transitions for r in result.runs),
            "depth": max((r.exploration.depth for r in result.runs), default=0),
        },
    }


def render_json(result: Result) -> str:
    return json.dumps(to_dict(result), indent=2, sort_keys=False) + "\n"
