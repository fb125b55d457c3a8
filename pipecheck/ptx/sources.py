"""CUDA source positions of PTX instructions: `.file`/`.loc` resolved to files that can be read, the
inlined-at chain as call sites, and names for barriers, buffers and the kernel in the user's terms.

A `.file` path is looked up as written, beside the PTX file, and, for CUTLASS headers written as
`cutlass/include/...` (the corpus) or absolute paths of another machine, under the installed
`cutlass_library` sources.
"""
from __future__ import annotations

import collections
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


# `full_barriers[i].init(` / `barrier_ptr_[d * Length + l].init(`: the array a barrier init walks
_INIT_ELEMENT = re.compile(r"([A-Za-z_]\w*)\s*\[[^\]]*\]\s*(?:\.|->)\s*init\s*\(")
# `MainloopPipeline mainloop_pipeline(shared_storage.pipelines.mainloop, ...)`: the object a kernel constructs
_DECLARATION = re.compile(r"(?:[A-Za-z_][\w:<>, ]*?\s+)([A-Za-z_]\w*)\s*[({](?!\s*\))")
# `ab_pipeline = pipeline.PipelineTmaAsync.create(`: a pipeline object made by a call
_ASSIGNED = re.compile(r"([A-Za-z_]\w*)\s*=\s*[\w.]*(?:[Pp]ipeline|[Bb]arrier)\w*(?:\.create)?\s*\(")
_GENERIC_ARRAY = re.compile(r"^_?barrier(?:s|_ptr)?_?$")
BARRIER_BYTES = 8


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


_TOOLKIT = re.compile(r"(^cuda/|/cuda(-[\d.]+)?/(targets/[^/]+/)?include/|/include/cccl/)")


def toolkit_header(path: str) -> bool:
    """A header of the CUDA toolkit (libcu++'s `cuda/barrier`, `sm_90_intrinsics.h`, ...): not the user's code."""
    return bool(_TOOLKIT.search(path))


def _user_frame(spans: list[Span]) -> int:
    """The innermost frame of an inlined-at chain outside the CUDA toolkit's headers (libcu++ wraps its
    `mbarrier` asm in several layers; the user's `bar.wait(std::move(token))` is the line to show)."""
    return next((k for k, sp in enumerate(spans) if not toolkit_header(sp.file)), 0)


class SourceMap:
    def __init__(self, module: X.Module, ptx_path: str, sources: dict[str, str]):
        self.module = module
        self.ptx = ptx_path
        self.sources = sources
        self.dir = Path(ptx_path).resolve().parent
        self.found: dict[int, str | None] = {}
        self._sites: dict[int, tuple[object, Site]] = {}  # id(op) -> (op, its site): the entry keeps op alive

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
        """The instruction's site: its source line (the user's frame of its inlined-at chain) and what it is."""
        hit = self._sites.get(id(op))
        if hit is None:
            hit = self._sites[id(op)] = (op, self._site(op))
        return hit[1]

    def _site(self, op) -> Site:
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
        k = _user_frame(spans)
        fn = locs[min(k, len(locs) - 1)].function
        proc = short_function(self.module.strings.get(fn, fn)) if fn else None
        return Site(spans[k], text, tuple(spans[k + 1:]), proc)

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
        spans = spans[_user_frame(spans):]
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

    def barrier_labels(self, lo: int, nbar: int, inits: dict[int, int], body) -> tuple[str, ...]:
        """Each barrier (8 bytes apart from `lo`) by the source expression that initialises it, walking the
        inlined-at chain outward: `mainloop_pipeline.full_barriers[2]` (the array whose `.init(` the chain
        passes and the object the kernel constructs around it); `mbar@OFFSET` where the source says nothing.

        nvcc writes a full chain only where the source line changes: in an unrolled loop that initialises
        `full_barriers[i]` and `empty_barriers[i]` in turn, every init after the first two carries the
        chain of the last one. So the inits of one object are taken in program order: an init whose chain
        names another array than the init before it starts that array at its address; any other init
        extends the array whose run (8 bytes apart) it continues."""
        groups: dict[tuple, list[tuple[int, int, str]]] = {}
        for off, site in inits.items():
            if lo <= off < lo + BARRIER_BYTES * nbar and site is not None and site >= 0 \
                    and body.ops[site].loc is not None:
                got = self._init_expression(body.ops[site].loc)
                if got is not None:
                    obj, array, frames = got
                    groups.setdefault((obj, frames), []).append((site, off, array))
        named: dict[int, str] = {}
        for (obj, _), members in groups.items():
            runs: list[tuple[str, list[int]]] = []
            prev = None
            for _, off, array in sorted(members):
                # the run this address continues: any run where nvcc did not write the chain afresh (the same
                # array as the init before), else only a run of the array the chain names
                run = next((r for r in runs if r[1][-1] + BARRIER_BYTES == off and (array == prev or r[0] == array)),
                           None)
                if run is None:
                    run = (array, [])
                    runs.append(run)
                run[1].append(off)
                prev = array
            arrays = [r[0] for r in runs]
            for array, offs in runs:
                name = ".".join(p for p in (obj, array) if p)
                if arrays.count(array) > 1 or not name:
                    continue  # two runs of one name: the addresses say which is which, the names do not
                for k, off in enumerate(sorted(offs)):
                    named[off] = f"{name}[{k}]" if len(offs) > 1 or array else name
        labels = [named.get(lo + BARRIER_BYTES * k, f"mbar@{lo + BARRIER_BYTES * k}") for k in range(nbar)]
        seen = collections.Counter(labels)
        return tuple(name if seen[name] == 1 else f"mbar@{lo + BARRIER_BYTES * k}" for k, name in enumerate(labels))

    def _init_expression(self, loc: X.Loc) -> tuple[str, str, tuple] | None:
        """(object, array, the chain's frames) of a barrier init: `full_barriers[i].init(...)` gives the
        array; the outermost declaration `Type name(...)` on the way to the kernel gives the object."""
        frames = self.chain(loc)
        spans = [self.span(f) for f in frames]
        texts = [self.line_text(sp) for sp in spans]
        array, at = "", -1
        for k, t in enumerate(texts):
            m = _INIT_ELEMENT.search(t)
            if m and not m.group(1).startswith("this"):
                array, at = m.group(1), k
                break
        if at < 0:  # no array element on the way (CuTe DSL: `ab_pipeline = PipelineTmaAsync.create(...)`):
            for k, t in enumerate(texts):  # the object the kernel assigns, its barriers numbered in address order
                m = _ASSIGNED.match(t)
                if m:
                    return m.group(1), "", tuple((sp.file, sp.line) if sp is not None else None for sp in spans[k:])
            return None
        obj = ""
        for t in texts[at + 1:]:
            m = _DECLARATION.match(t)
            if m:
                obj = m.group(1)
        if _GENERIC_ARRAY.match(array) and obj:
            array = ""
        key = tuple((sp.file, sp.line) if sp is not None else None for sp in spans[at + 1:])
        return obj, array, key

    def buffer_label(self, lo: int, hi: int, what: str, site: int, body) -> str:
        return f"smem[{lo}..{hi})"

    def kernel_name(self, mangled: str) -> str:
        m = re.search(r"(Kernel\w+?)(?:E|EE)", mangled)
        base = "cutlass::device_kernel" if mangled.startswith("_ZN7cutlass13device_kernel") else short_function(mangled)
        if m:
            return f"{base}<{m.group(1)}>"
        return base if len(base) < 80 else base[:77] + "..."



