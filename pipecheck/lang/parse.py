"""A spec's files to syntax trees: `load_spec` reads a file and the files it imports.

`parse_text` is pure: the syntax tree of one file's text (`lang.syntax`, lark), kept in the
user's cache directory (`core.cache`) keyed by the text, the file's name as shown, and the
code and grammar that built it, so that a spec parsed before starts without importing lark
or parsing again. A file with a syntax error is never stored: its error is found afresh.
"""
from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

from ..core import cache
from ..core.grammars import grammar_path
from ..core.diagnostics import Note, Span, error
from ..core.version import __version__
from . import ast as A
from .limits import MAX_IMPORT_DEPTH, MAX_NESTING, MAX_SPEC_CHARS

__all__ = ["MAX_IMPORT_DEPTH", "MAX_NESTING", "MAX_SPEC_CHARS", "load_spec", "parse_text"]

_CACHE = f"trees-{sys.implementation.cache_tag}"
_KEEP = 1024  # files' trees kept (20-50 KB each): past it the least recently used half goes


@functools.cache
def _code_digest() -> bytes:
    """What a cached tree depends on besides its text: the code that builds and defines it, and lark's."""
    here = Path(__file__).resolve().parent
    core = here.parent / "core"
    paths = [here / "syntax.py", here / "ast.py", here / "limits.py", core / "diagnostics.py", core / "records.py",
             core / "grammars.py", grammar_path("pipe.lark")]
    spec = importlib.util.find_spec("lark")
    if spec is not None and spec.origin:
        paths.append(Path(spec.origin))  # lark's version is in its __init__
    return cache.code_digest(paths, __version__, sys.version)


def parse_text(text: str, file: str) -> A.SpecFile:
    """Parse one file's text into a `SpecFile`; raises SpecError with diagnostics."""
    def parse() -> A.SpecFile:
        from . import syntax  # lark: only when the cache misses
        return syntax.parse(text, file)

    key = _code_digest() + file.encode("utf-8", "surrogatepass") + b"\0" + text.encode("utf-8", "surrogatepass")
    return cache.kept(_CACHE, key, parse, lambda t: isinstance(t, A.SpecFile) and t.path == file, keep=_KEEP)


def load_spec(path: str | Path, sources: dict[str, str] | None = None) -> tuple[A.Kernel, dict[str, A.Proc]]:
    """Read a spec and its imports; returns its one kernel and every visible procedure.

    `sources` (if given) receives the text of every file read, for rendering diagnostics.
    """
    path = Path(path)
    sources = sources if sources is not None else {}
    procs: dict[str, A.Proc] = {}
    seen: set[Path] = set()

    def visit(p: Path, display: str, depth: int, via: A.Import | None) -> A.SpecFile:
        try:
            data = p.read_bytes()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if via is None:
                raise error("usage", f"cannot read {display}: {reason}", None) from None
            raise error("import", f"cannot import {via.path!r}: {reason}", via.span) from None
        text = _decode(data, display, sources)
        sources[display] = text
        spec = parse_text(text, display)
        for imp in spec.imports:
            if depth >= MAX_IMPORT_DEPTH:
                raise error("import", f"imports nest deeper than {MAX_IMPORT_DEPTH} files", imp.span)
            target = _resolve_import(p, imp)
            if target.resolve() in seen:
                continue
            seen.add(target.resolve())
            sub = visit(target, _display(target), depth + 1, imp)
            if sub.kernels:
                raise error("import", f"{imp.path!r} defines a kernel; only procedures can be imported", imp.span)
        for proc in spec.procs:
            if proc.name in procs:
                prev = procs[proc.name]
                raise error("name", f"procedure '{proc.name}' is defined twice", proc.span,
                            Note("first defined here", prev.span))
            procs[proc.name] = proc
        return spec

    seen.add(path.resolve())
    top = visit(path, _display(path), 0, None)
    if len(top.kernels) != 1:
        what = "no kernel" if not top.kernels else f"{len(top.kernels)} kernels"
        span = top.kernels[1].span if len(top.kernels) > 1 else Span(_display(path), 1, 1)
        raise error("syntax", f"a spec holds exactly one kernel; this file has {what}", span)
    kernel = top.kernels[0]
    for item in kernel.items:
        if isinstance(item, A.Proc):
            if item.name in procs:
                raise error("name", f"procedure '{item.name}' is defined twice", item.span,
                            Note("first defined here", procs[item.name].span))
            procs[item.name] = item
    return kernel, procs


def _decode(data: bytes, display: str, sources: dict[str, str]) -> str:
    """The file's text; a byte that is not UTF-8 is an error at its own line and column."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        sources[display] = data.decode("utf-8", "replace")  # for the caret
        before = data[:exc.start].decode("utf-8", "replace")
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        raise error("syntax", f"byte 0x{data[exc.start]:02x} is not UTF-8 text (spec files are UTF-8)",
                    Span(display, line, col, line, col + 1)) from None
    if len(text) > MAX_SPEC_CHARS:
        lines = text.count("\n", 0, MAX_SPEC_CHARS) + 1
        raise error("limit", f"the file holds {len(text):,} characters; a spec may hold at most {MAX_SPEC_CHARS:,}",
                    Span(display, lines, 1))
    return text


def _display(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _resolve_import(base: Path, imp: A.Import) -> Path:
    """Imports are relative to the importing file; `lib/x.pipe` also searches parents' specs/."""
    candidates = [base.parent / imp.path]
    for parent in [base.parent, *base.parent.parents]:
        candidates.append(parent / "specs" / imp.path)
    for c in candidates:
        if c.is_file():
            return c
    return candidates[0]
