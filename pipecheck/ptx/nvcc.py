"""`pipecheck verify kernel.cu`: compile a CUDA file to PTX with the machine's nvcc first
(`-ptx -lineinfo`, the arch of the target, and the user's extra flags), into a temporary directory.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

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
    cmd = [nvcc, *DEFAULT_FLAGS, f"-arch={arch}", "-ptx", "-lineinfo", *flags, path, "-o", str(out)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise error("limit", f"nvcc did not finish within {timeout:.0f} s", Span(path, 1, 1)) from None
    if done.returncode != 0 or not out.is_file():
        first = next((ln for ln in done.stderr.splitlines() if "error" in ln), done.stderr.strip()[:300])
        raise error("syntax", f"nvcc failed on {path}: {first}", Span(path, 1, 1))
    return str(out), " ".join(cmd)
