"""CUDA source positions of PTX instructions: `.file`/`.loc` resolved to files that can be read, the
inlined-at chain as call sites, and names for barriers, buffers and the kernel in the user's terms.

A `.file` path is looked up as written, beside the PTX file, and, for CUTLASS headers written as
`cutlass/include/...` (the corpus) or absolute paths of another machine, under the installed
`cutlass_library` sources.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from ..core.diagnostics import Span
from ..model.ir import Site
from . import syntax as X


@functools.cache
def _cutlass_source() -> Path | None:
    try:
        import importlib.util
        spec = importlib.util.find_spec("cutlass_library")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0]) / "source"
    return root if root.is_dir() else None


def _candidates(path: str, ptx_dir: Path) -> list[Path]:
    p = Path(path)
    out = [p] if p.is_absolute() else [ptx_dir / p, Path.cwd() / p]
    parts = p.parts
    src = _cutlass_source()
    if src is not None:
        for marker in ("include", "examples", "tools"):
            if marker in parts:
                k = parts.index(marker)
                out.append(src.joinpath(*parts[k:]))
    cuda = Path("/usr/local/cuda")
    if parts and parts[0] == "cuda":
        out.append(cuda.joinpath(*parts[1:]))
    return out


def short_function(mangled: str) -> str:
    """`cutlass::canonical_warp_idx_sync` from `_ZN7cutlass23canonical_warp_idx_syncEv` (nested names only)."""
    m = re.match(r"_ZN?K?((?:\d+[A-Za-z_][A-Za-z0-9_]*)+)", mangled)
    if not m:
        return mangled[:60]
    names = []
    s = m.group(1)
    while s:
        n = re.match(r"(\d+)", s)
        if not n:
            break
        k = int(n.group(1))
        start = len(n.group(1))
        names.append(s[start:start + k])
        s = s[start + k:]
    return "::".join(names)


class SourceMap:
    def __init__(self, module: X.Module, ptx_path: str, sources: dict[str, str]):
        self.module = module
        self.ptx = ptx_path
        self.sources = sources
        self.dir = Path(ptx_path).resolve().parent
        self.found: dict[int, str | None] = {}

    def file(self, idx: int) -> str | None:
        """The display name of `.file idx`, with its text loaded into `sources` when it can be read."""
        if idx in self.found:
            return self.found[idx]
        path = self.module.files.get(idx)
        shown = None
        if path is not None:
            shown = path
            for cand in _candidates(path, self.dir):
                try:
                    if cand.is_file():
                        self.sources.setdefault(path, cand.read_text(errors="replace"))
                        break
                except OSError:
                    continue
        self.found[idx] = shown
        return shown

    def span(self, loc: X.Loc) -> Span | None:
        f = self.file(loc.file)
        if f is None or loc.line <= 0:
            return None
        return Span(f, loc.line, max(loc.col, 1))

    def chain(self, loc: X.Loc | None) -> list[X.Loc]:
        out = []
        while loc is not None:
            out.append(loc)
            loc = loc.inlined_at
        return out

    def site(self, op) -> Site:
        text = op.opcode
        if text == "trap.assert":
            text = "a failed assert (__assertfail)"
        elif text.startswith(("trap", "brkpt")):
            text = f"`{text}`"
        if text.startswith("pipecheck.wait"):
            text = "mbarrier.try_wait" + text[len("pipecheck.wait"):] + " (spin loop)"
        text = f"{text} (PTX line {op.line})"
        locs = self.chain(op.loc)
        spans = [s for s in (self.span(l) for l in locs) if s is not None]
        if not spans:
            return Site(Span(self.ptx, op.line, op.col + 1), text)
        fn = locs[0].function
        proc = short_function(self.module.strings.get(fn, fn)) if fn else None
        return Site(spans[0], text, tuple(spans[1:]), proc)

    def where(self, loc: X.Loc | None) -> str:
        """`tuple_algorithms.hpp:785: `return a;`, in sm90_gemm_...hpp:613: `auto k_tile_count = ...``: the
        innermost source line of an instruction with its text, and the kernel statement it is inlined into;
        "" without line info."""
        spans = [sp for sp in (self.span(x) for x in self.chain(loc)) if sp is not None]
        if not spans:
            return ""

        def one(span: Span) -> str:
            text = self.line_text(span)
            return f"{span.file.rsplit('/', 1)[-1]}:{span.line}" + (f": `{text}`" if text else "")
        # the innermost line, and the kernel's own statement it was inlined into (the frame just inside
        # the outermost, which for CUTLASS is `device_kernel.h`'s call of the kernel)
        out = one(spans[0])
        if len(spans) >= 3:
            out += f", in {one(spans[-2])}"
        return out

    def line_text(self, span: Span | None) -> str:
        if span is None:
            return ""
        text = self.sources.get(span.file)
        if text is None:
            return ""
        lines = text.splitlines()
        return lines[span.line - 1].strip() if 1 <= span.line <= len(lines) else ""

    def barrier_label(self, offset: int, init_site: int | None, body) -> str:
        label = f"mbar@{offset}"
        if init_site is not None and init_site >= 0:
            src = self.line_text(self.span(body.ops[init_site].loc) if body.ops[init_site].loc else None)
            m = re.search(r"([A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:->|\.)?)\s*(?:\.|->)?\s*init\(", src) if src else None
            if m:
                label += f" ({m.group(1).rstrip('.').rstrip('->')})"
        return label

    def buffer_label(self, lo: int, hi: int, what: str, site: int, body) -> str:
        return f"smem[{lo}..{hi})"

    def kernel_name(self, mangled: str) -> str:
        m = re.search(r"(Kernel\w+?)(?:E|EE)", mangled)
        base = "cutlass::device_kernel" if mangled.startswith("_ZN7cutlass13device_kernel") else short_function(mangled)
        if m:
            return f"{base}<{m.group(1)}>"
        return base if len(base) < 80 else base[:77] + "..."



