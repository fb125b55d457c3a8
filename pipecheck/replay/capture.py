"""`pipecheck capture -- CMD`: build the launch interposer (capture.c) with the machine's C compiler and
run CMD under it, so that each kernel launch CMD makes through the driver API lands in a directory as
`launch-K.json` (+ `.params`, + the module image) that `pipecheck verify DIR/launch-K.json` checks with
the launch's real parameter values (docs/replay.md, "Capture").
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..core.diagnostics import error


def _cuda_include() -> Path | None:
    nvcc = shutil.which("nvcc")
    for root in ([Path(nvcc).resolve().parent.parent] if nvcc else []) + [Path("/usr/local/cuda")]:
        if (root / "include" / "cuda.h").is_file():
            return root / "include"
    return None


def build_interposer(out: Path) -> Path:
    """Compile capture.c into `out` (a shared object for LD_PRELOAD)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    inc = _cuda_include()
    if cc is None or inc is None:
        raise error("usage", "pipecheck capture needs a C compiler and the CUDA toolkit's cuda.h (nvcc on PATH)", None)
    src = Path(__file__).with_name("capture.c")
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [cc, "-shared", "-fPIC", "-O2", f"-I{inc}", str(src), "-o", str(out), "-ldl", "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise error("usage", f"building the launch interposer failed: {' '.join(cmd)}\n{r.stderr.strip()}", None)
    return out


def run_captured(cmd: list[str], directory: Path, max_launches: int = 16) -> tuple[int, list[Path]]:
    """Run `cmd` with the interposer preloaded; (its exit status, the launch records it left)."""
    directory.mkdir(parents=True, exist_ok=True)
    so = build_interposer(directory / ".pipecheck_capture.so")
    env = dict(os.environ)
    env["LD_PRELOAD"] = f"{so}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else str(so)
    env["PIPECHECK_CAPTURE_DIR"] = str(directory)
    env["PIPECHECK_CAPTURE_MAX"] = str(max_launches)
    try:
        rc = subprocess.run(cmd, env=env).returncode
    except OSError as exc:
        raise error("usage", f"cannot run {cmd[0]}: {exc.strerror}", None) from None
    return rc, sorted(directory.glob("launch-*.json"), key=lambda p: int(p.stem.split("-")[1]))


__all__ = ["build_interposer", "run_captured"]
