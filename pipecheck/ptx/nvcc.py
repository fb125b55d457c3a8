"""`pipecheck verify kernel.cu`: compile a CUDA file to PTX with the machine's nvcc first
(`-ptx -lineinfo`, the arch of the target, and the user's extra flags), into a temporary directory.

The PTX is kept in the user's cache (`core.cache`, `nvcc-ptx`) keyed by nvcc's version, the command, and
the path and bytes of every file the compile reads (`nvcc -M`: the source and each header it includes,
CUTLASS's and the toolkit's among them). A second run of an unchanged kernel lists its headers (a
preprocessor pass, seconds) instead of compiling it (CUTLASS's pingpong: half a minute); any edit of
the kernel or of a header it includes compiles again.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..core import cache
from ..core.diagnostics import Span, error

DEFAULT_FLAGS = ("-std=c++17", "-O3", "--expt-relaxed-constexpr")


def compile_cuda(path: str, flags: tuple[str, ...], arch: str = "sm_90a", timeout: float | None = None) -> tuple[str, str]:
    """(the PTX file written, the command run). Raises a located SpecError when nvcc fails or is missing."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise error("usage", "pipecheck verify on a .cu file needs nvcc on PATH (or compile it yourself with "
                    "`nvcc -ptx -lineinfo` and verify the .ptx)", Span(path, 1, 1))
    out_dir = Path(tempfile.mkdtemp(prefix="pipecheck-nvcc-"))
    out = out_dir / (Path(path).stem + ".ptx")
    head, tail = [*DEFAULT_FLAGS, f"-arch={arch}"], [*flags, path]
    cmd = [nvcc, *head, "-ptx", "-lineinfo", *tail, "-o", str(out)]
    key = _key(nvcc, head + tail, timeout)
    kept = cache.read(_CACHE, key, touch=True) if key is not None else None
    if kept is not None:
        out.write_bytes(kept)
        return str(out), " ".join(cmd)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise error("limit", f"nvcc did not finish within {timeout:.0f} s", Span(path, 1, 1)) from None
    if done.returncode != 0 or not out.is_file():
        first = next((ln for ln in done.stderr.splitlines() if "error" in ln), done.stderr.strip()[:300])
        raise error("syntax", f"nvcc failed on {path}: {first}", Span(path, 1, 1))
    if key is not None:
        cache.write(_CACHE, key, out.read_bytes(), keep=_KEEP)
    return str(out), " ".join(cmd)


_CACHE = "nvcc-ptx"
_KEEP = 32  # compiled kernels kept (their PTX, 0.5-5 MB each)


def _key(nvcc: str, args: list[str], timeout: float | None) -> str | None:
    """The cache key of a compile: nvcc's version, the arguments, and every file the compile reads; None when
    nvcc cannot list them (then the kernel is compiled, and not kept)."""
    try:
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
        deps = subprocess.run([nvcc, *args, "-M"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if deps.returncode != 0 or not version:
        return None
    files = dependencies(deps.stdout)
    if not files:
        return None
    # the paths too: the PTX's `.file` lines name them
    return cache.code_digest([Path(f) for f in files], version, *args, *files).hex()[:40]


def dependencies(make_rule: str) -> list[str]:
    """The prerequisites of the make rule `nvcc -M` prints (continued lines joined, escaped spaces kept)."""
    text = make_rule.replace("\\\n", " ")
    _, sep, rest = text.partition(": ")
    if not sep:
        return []
    return [w.replace("\\ ", " ") for w in re.findall(r"(?:\\ |\S)+", rest)]
