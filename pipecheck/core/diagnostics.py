"""Spans, diagnostics and the registry of finding and error codes.

Every message pipecheck prints about a spec is a `Diagnostic`; `render` turns one into
the `file:line:col: error: ... [code]` form with the source line and a caret.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .records import record


@dataclass(frozen=True, order=True)
class Span:
    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@record
class Note:
    message: str
    span: Span | None = None


@record
class Diagnostic:
    severity: str  # "error" | "warning"
    code: str
    message: str
    span: Span | None = None
    notes: tuple[Note, ...] = field(default=())

    def sort_key(self) -> tuple:
        s = self.span
        return (s.file, s.line, s.col) if s else ("", 0, 0), self.code, self.message


class SpecError(Exception):
    """Raised by a stage that cannot produce its product; carries the diagnostics."""

    def __init__(self, diagnostics: Sequence[Diagnostic]):
        super().__init__("\n".join(d.message for d in diagnostics))
        self.diagnostics = tuple(diagnostics)


def error(code: str, message: str, span: Span | None, *notes: Note) -> SpecError:
    return SpecError([Diagnostic("error", code, message, span, tuple(notes))])


# Findings: what verification reports about a protocol (DESIGN.md, "What it finds").
FINDINGS: dict[str, str] = {
    "hang": "threads wait forever: every live thread is blocked and no in-flight async operation can unblock one",
    "stale-read": "a thread reads an SMEM buffer whose TMA load for this tile has not landed",
    "overwrite": "an async write lands on a buffer while the tile it replaces is still to be read, or while an async reader is reading it",
    "double-arrive": "a thread arrives twice on one barrier within one phase",
    "arrive-fault": "an arrive exceeds the pending count, arrives while only tx is pending, or hits an uninitialised barrier: the kernel faults",
    "tx-range": "the tx-count leaves +-(2^20-1)",
    "phase-alias": "a waiter waits on a parity two or more phases behind the barrier, or one phase ahead of it",
    "store-reuse": "SMEM is written while a TMA store that reads it has not drained",
    "missing-proxy-fence": "SMEM written by ordinary stores reaches a TMA store without fence.proxy.async",
    "exit-inflight": "a CTA exits with async copies in flight, undrained bulk groups, or peers still able to arrive on its barriers",
    "trap": "a thread reaches `trap`, `brkpt` or a failed device-side assert: the kernel stops with an error",
    "uninit-barrier": "a barrier is used before its init is visible, or re-initialised while live",
    "missing-tcgen05-fence": "tcgen05 work ordered across a thread sync without tcgen05_before_thread_sync before it or tcgen05_after_thread_sync after it",
    "tmem-free-inflight": "tensor memory is deallocated while an MMA or another thread may still access it",
    "missing-init-fence": "a TMA load completes on a barrier whose init no fence_barrier_init / fence_proxy_async made visible to the async proxy",
    "expect-tx-mismatch": "the bytes expected on a barrier phase differ from the bytes delivered to it",
    "smem-budget": "stage buffers plus barriers exceed the per-block SMEM of the target arch",
    "tma-descriptor": "a declared tensor map breaks a cuTensorMapEncodeTiled rule",
    "no-overlap": "the ring never has more than one load in flight while compute runs",
}

# Errors in the spec itself (exit code 2).
SPEC_ERRORS: dict[str, str] = {
    "syntax": "the text does not parse",
    "name": "a name is undefined, defined twice, or of the wrong kind",
    "value": "a value is out of its allowed range or not computable",
    "rule": "the spec breaks a rule of the hardware that the language rejects",
    "import": "an imported file cannot be read",
    "limit": "the spec is larger or nests deeper than pipecheck reads (docs/errors.md lists each limit)",
    "usage": "a command-line argument is wrong",
    "replay": "a construct `pipecheck replay` cannot run faithfully as CUDA on sm_90",
}

ALL_CODES: dict[str, str] = {**FINDINGS, **SPEC_ERRORS}


def call_site(span: Span | None, calls: Sequence[tuple[Span, str]]) -> tuple[Span | None, tuple[Note, ...]]:
    """Where a finding inside procedures is shown: at the user's call (the outermost), then a note per call
    down the chain and one at the statement itself, in the procedure's file. Without calls, the statement."""
    if span is None or not calls:
        return span, ()
    notes = []
    for k, (at, proc) in enumerate(calls):
        inner = calls[k + 1] if k + 1 < len(calls) else None
        if inner is not None:
            notes.append(Note(f"in procedure '{proc}', called at {at.file}:{at.line}: its call of '{inner[1]}'",
                              inner[0]))
        else:
            notes.append(Note(f"in procedure '{proc}', called at {at.file}:{at.line}: the statement", span))
    return calls[0][0], tuple(notes)


def called_from(calls: Sequence[tuple[Span, str]]) -> str:
    """` (in procedure 'P', called at spec.pipe:15)`: where a note inside procedures comes from; '' outside."""
    if not calls:
        return ""
    at, proc = calls[0]
    return f" (in procedure '{proc}', called at {at.file}:{at.line})"


def source_lines(text: str) -> list[str]:
    """A file's lines as locations count them: split at "\n" only (the parsers count no other line break:
    a form feed or a \x1c inside a line is not one, as `str.splitlines` would have it), a "\r" before it dropped."""
    return [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]


def _source_line(sources: Mapping[str, str], span: Span) -> str | None:
    text = sources.get(span.file)
    if text is None:
        return None
    lines = source_lines(text)
    if 1 <= span.line <= len(lines):
        return lines[span.line - 1]
    return None


def render(diag: Diagnostic, sources: Mapping[str, str]) -> str:
    """Format a diagnostic as `file:line:col: severity: message [code]` with a caret."""
    out: list[str] = []
    where = f"{diag.span}: " if diag.span else ""
    out.append(f"{where}{diag.severity}: {diag.message} [{diag.code}]")
    if diag.span:
        out.extend(_caret(sources, diag.span))
    for note in diag.notes:
        nwhere = f"{note.span}: " if note.span else ""
        out.append(f"{nwhere}note: {note.message}")
        if note.span:
            out.extend(_caret(sources, note.span))
    return "\n".join(out)


def _caret(sources: Mapping[str, str], span: Span) -> list[str]:
    line = _source_line(sources, span)
    if line is None:
        return []
    width = 1
    if span.end_line == span.line and span.end_col > span.col:
        width = span.end_col - span.col
    prefix = f"{span.line:5d} | "
    expanded = line.expandtabs(1)
    return [prefix + expanded, " " * len(prefix) + " " * (span.col - 1) + "^" + "~" * (width - 1)]
