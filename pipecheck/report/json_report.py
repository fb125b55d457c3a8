"""The JSON report (schema pipecheck-result/1, documented in docs/json-schema.md).

`result.schema.json` beside this module is the same schema as JSON Schema (draft 2020-12);
tests validate every report against it, so the document and the output cannot drift.
"""
from __future__ import annotations

import json

from ..core.diagnostics import Span
from ..core.version import __version__
from ..model.state import State
from ..model.system import Model
from ..pipeline.result import Result
from .common import finding_notes, ptx_parameters, view
from .trace import blocked_rows

SCHEMA = "pipecheck-result/1"


def _loc(span: Span | None) -> dict | None:
    if span is None:
        return None
    return {"file": span.file, "line": span.line, "col": span.col, "end_line": span.end_line, "end_col": span.end_col}


def _barrier(model: Model, s: State, gid: int) -> dict:
    b = s.bars[gid]
    name = model.layout.bar_names[gid]
    if b is None:
        return {"name": name, "initialised": False}
    return {"name": name, "initialised": True, "phase": b.phase, "pending": b.pending, "expected": b.expected,
            "tx": b.tx}


def _finding(result: Result, issue) -> dict:
    v = view(result, issue)
    model = issue.run.model
    steps = []
    for st in v.trace.steps:
        after = v.trace.states[st.index - 1]
        steps.append({
            "step": st.index, "role": st.column, "threads": st.who, "kind": st.kind, "action": st.text,
            "location": _loc(result.sites[st.site].span) if 0 <= st.site < len(result.sites) else None,
            "effects": list(st.effects), "findings": [f.code for f in st.findings],
            "barriers": [_barrier(model, after, g) for g in st.touched],
        })
    blocked = []
    if issue.code == "hang":
        for column, who, what, site in blocked_rows(model, v.trace.final):
            blocked.append({"role": column, "threads": who, "state": what,
                            "location": _loc(result.sites[site].span) if 0 <= site < len(result.sites) else None})
    return {
        "code": issue.code, "severity": issue.severity, "latent": list(issue.latent), "message": issue.finding.message,
        "location": _loc(v.span), "condition": issue.condition or None, "on_hardware": issue.on_hardware,
        "configuration": v.config_text or None, "when": v.when or None, "why": v.why or None,
        "fix": issue.fix or None,
        "notes": [{"message": n.message, "location": _loc(n.span)} for n in v.chain]  # the call chain first
        + [{"message": n.message, "location": _loc(n.span)} for n in finding_notes(result, issue)],
        "trace": steps, "blocked": blocked, "barriers": v.barriers,
        "needs_independent_scheduling": issue.needs_independent_scheduling,
        "led_by": issue.led_by or None,
        "consequences": [_finding(result, c) for c in issue.consequences],
    }


def to_dict(result: Result) -> dict:
    findings = [_finding(result, issue) for issue in result.issues]
    static = [{"code": d.code, "severity": d.severity, "message": d.message, "location": _loc(d.span)} for d in result.static]
    out = {
        "schema": SCHEMA,
        "tool": {"name": "pipecheck", "version": __version__},
        "spec": result.spec,
        "kernel": result.kernel.name,
        "arch": result.kernel.arch,
        "params": result.params,
        "semantics": {"elect": result.options.elect, "reduction": result.options.reduce,
                      "lockstep": result.options.lockstep, "symmetry": result.options.symmetry,
                      "counter": result.options.counter, "compact": result.options.compact,
                      "engine": result.options.engine,
                      "all_findings": not result.options.limits.stop_at_first,
                      "cause_budget": result.options.cause_budget, "fail_on": result.options.fail_on},
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
            "limits": {"max_states": result.options.limits.max_states, "timeout": result.options.limits.timeout,
                       "max_memory_mb": result.options.limits.max_memory_mb},
        },
    }
    if getattr(result, "stopped_in", ""):  # a limit stopped the run outside the search (pipeline/limits.py)
        out["stopped_in"] = result.stopped_in
    ptx = getattr(result, "ptx", None)
    if ptx is not None:  # a compiled kernel: its entry, launch and where each parameter value comes from
        params = []
        for p, c, point in ptx_parameters(result):
            params.append({"name": p.name, "offset": p.offset, "value": p.value, "default": (c.value if c.searched else None) if c else p.value,
                           "point": point, "why": (c.why if c.searched else None) if c else "", "read_at": p.source})
        out["ptx"] = {"entry": ptx.entry, "ptx": ptx.ptx if (ptx.command or ptx.launch) else result.spec,
                      "nvcc": ptx.command or None, "block": list(ptx.block), "cluster": list(ptx.cluster),
                      "parameters": params}
        if ptx.launch:
            out["ptx"]["launch"] = ptx.launch
    e = result.every
    if e is not None:  # --every: what the loop-offset run said for every value of the bound
        out["every"] = {"param": e.name, "from": e.lo, "to": e.hi, "states": e.states, "found": list(e.codes),
                        "witness": e.witness_k, "stopped": e.stopped}
    return out


def render_json(result: Result) -> str:
    return json.dumps(to_dict(result), indent=2, sort_keys=False) + "\n"
