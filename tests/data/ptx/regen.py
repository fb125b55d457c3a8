#!/usr/bin/env python3
"""Regenerate pipecheck's corpus of real compiled PTX (tests/data/ptx/).

Usage:
    python tests/data/ptx/regen.py [--only NAME]... [--jobs N] [--list] [--manifest-only]
                                   [--cutlass-source DIR]

Stdlib only.  Needs `nvcc` (13.0 was used) on PATH and the PyPI package (pins in
requirements.txt beside this script)
`nvidia-cutlass==4.2.0.0`, whose wheel carries CUTLASS's C++ tree under
`<site-packages>/cutlass_library/source/` (include/, examples/, tools/).  The CuTe DSL
entries also need `nvidia-cutlass-dsl` (4.8.1 was used); without it they are skipped with
a message and the CUTLASS entries are still built.  No GPU is needed.

What it builds (see KERNELS below and NOTES.md / src/patch_*/PATCH.md):

* CUTLASS C++ kernels: src/cutlass_sm90_{pingpong,cooperative}.cu, each compiled with

      nvcc -std=c++17 -arch=sm_90a --ptx -O3 -lineinfo --expt-relaxed-constexpr -DNDEBUG \
           [-I<src/patch_X>] -I<cutlass_library/source>/include  <src>.cu -o <name>.ptx

  The patch dir, when there is one, comes first on the include path, so its header copies
  (src/patch_X/cutlass/...) shadow CUTLASS's originals (every CUTLASS include of those
  headers is a full "cutlass/..." quoted path, so the including file's own directory never
  finds the original first; the script checks that the patched file, not the original,
  is the one named in the PTX's .file table).
* sm_100a entries (an entry's "arch" replaces -arch=sm_90a): src/cutlass_sm100_2sm.cu (CUTLASS's
  2-SM UMMA GEMM, the flags above) and src/umma_2sm_mini.cu (plain nvcc with its -D variants).
* CuTe DSL kernels: src/cute_dsl_tma_pipeline.py, run once per variant in a scratch
  directory with CUTE_DSL_ARCH=sm_90a; it calls
  cute.compile(..., options="--keep-ptx --generate-line-info") on fake tensors
  (cute.runtime.make_fake_compact_tensor, make_fake_stream: no GPU, no torch) and the kept
  *.sm_90a.ptx is copied here.

Post-processing (the only edits made to the compiler's output; nothing is stripped):

1. `.file` lines.  nvcc/the DSL write absolute paths of the build machine, e.g.
       .file 10 "/.../site-packages/cutlass_library/source/include/cutlass/pipeline/sm90_pipeline.hpp"
   Each path is rewritten, keeping the .file index number and anything after the quoted
   name, to a path relative to one of these roots:
       <cutlass_library/source>/...  ->  cutlass/...   (cutlass/include/cutlass/pipeline/sm90_pipeline.hpp)
       tests/data/ptx/src/...        ->  src/...       (src/patch_fixed/cutlass/gemm/kernel/...hpp,
                                                        src/cute_dsl_tma_pipeline.py)
       the CUDA toolkit (nvcc's own TOP, from `nvcc --dryrun`)
                                     ->  cuda/...      (cuda/targets/x86_64-linux/include/sm_30_intrinsics.hpp)
       the nvidia-cutlass-dsl package dir           -> cutlass_dsl/...
   Paths are normalised (os.path.normpath, so `bin/../targets` collapses) before matching.
   A .file path under none of these roots is an error: the corpus must not depend on where
   site-packages or this checkout live.
2. nvcc's per-translation-unit hash.  nvcc names internal-linkage symbols
   `_ZN<len>_INTERNAL_<8 hex>_<len>_<file>_cu_...` and `_GLOBAL__N__<8 hex>_...`; the 8 hex
   digits are a hash of the source file's absolute path (measured: the same file at two
   paths gives two hashes; editing it, touching it or changing flags does not).  They are
   replaced by `00000000` (same length, so the mangled lengths stay valid), both in the
   text and, byte for byte, in the `.section .debug_str` strings (`.b8 95,90,...` lines,
   where -lineinfo stores the mangled names that `.loc ... function_name` refers to; each
   `.b8` line keeps its byte count).  In this corpus the hash appears only in the unused
   one-byte `.global` objects that libcu++ defines (cuda::std ranges CPOs, cute::_ ...)
   and in debug strings, never in an instruction.

Finally the script checks that no absolute path of this machine is left in the PTX and
writes MANIFEST.json: for every entry its name, kind, source, patch dir, patched headers,
flags (paths as placeholders), nvcc version, cutlass / cutlass-dsl version, line count,
`brkpt` count and sha256 of the committed file.  --only NAME (repeatable) rebuilds those
entries and updates just their records (the manifest is re-read when the builds are done,
so records written meanwhile by another run survive); --manifest-only compiles nothing
and recomputes the records from the .ptx files present.

Parallelism: --jobs N (default 2) compiles run at once.  One nvcc compile of these
kernels took 37-58 s and ~2.9 GB RSS (one core, machine otherwise lightly loaded); with
--jobs 2 on a 2-core machine busy with other work, 150-170 s each and 13.7 min for the
whole corpus.  A DSL compile takes 2-10 s.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "src")

NVCC_FLAGS = [
    "-std=c++17",
    "-arch=sm_90a",
    "--ptx",
    "-O3",
    "-lineinfo",
    "--expt-relaxed-constexpr",
    "-DNDEBUG",
]


def _cutlass(name, cu, patch=None, note="", expect=(), arch="sm_90a"):
    return {"name": name, "kind": "nvcc", "source": "src/" + cu, "arch": arch,
            "patch": ("src/" + patch) if patch else None, "note": note, "expect": list(expect)}


def _arch(flags, k):
    """The flags with the entry's -arch (sm_90a unless the entry names another, e.g. sm_100a)."""
    return [f"-arch={k.get('arch', 'sm_90a')}" if f.startswith("-arch=") else f for f in flags]


def _dsl(name, variant, note="", expect=()):
    return {"name": name, "kind": "cute-dsl", "source": "src/cute_dsl_tma_pipeline.py",
            "variant": variant, "patch": None, "note": note, "expect": list(expect)}


def _mini(name, defines, note="", expect=(), source="mini.cu", arch="sm_90a"):
    return {"name": name, "kind": "nvcc-plain", "source": "src/" + source, "defines": list(defines), "arch": arch,
            "patch": None, "note": note, "expect": list(expect)}


def _libcudacxx(name, defines, note="", expect=()):
    return _mini(name, ["-std=c++17", *defines], note, expect, "cuda_barrier_tma.cu")


# What `pipecheck verify FILE ARGS` must find on each file, checked by tests/test_golden.py: a list of
# (ARGS, WHAT, WHEN) with WHAT `verified` or the finding codes, and WHEN a text the issue's
# condition contains ("" for none). The CUTLASS rows run at one k-tile and one tile (seconds);
# the default parameters (13 k-tiles, 2 tiles) take minutes (docs/ptx.md has the figures).
SMALL = "-D param_12=64 -D param_1656=1"
LANE = "elects a lane in 1..31"


PP = "cutlass_sm90_pingpong.cu"
CO = "cutlass_sm90_cooperative.cu"
KERNELS = [
    _cutlass("cutlass_sm90_pingpong", PP, None,
             "unmodified CUTLASS 4.2; carries the #3722 leader mismatch",
             expect=[(SMALL, "hang", LANE), (SMALL + " --elect lowest", "verified", "")]),
    _cutlass("cutlass_sm90_cooperative", CO, None,
             "unmodified CUTLASS 4.2; carries the #3722 leader mismatch",
             expect=[(SMALL, "hang", LANE), (SMALL + " --elect lowest", "verified", "")]),
    _cutlass("cutlass_sm90_pingpong_fixed", PP, "patch_fixed",
             "mainloop is_leader from lane_predicate for the mainloop producer warp",
             expect=[(SMALL, "verified", "")]),
    _cutlass("cutlass_sm90_cooperative_fixed", CO, "patch_fixed",
             "mainloop is_leader from lane_predicate for the mainloop producer warp",
             expect=[(SMALL, "verified", "")]),
    _cutlass("cutlass_sm90_pingpong_bug_release_before_wait", PP,
             "patch_bug_release_before_wait",
             "planted: consumer_release before warpgroup_wait in the collective's mma()",
             expect=[("-D param_12=449 -D param_1656=1 --elect lowest", "overwrite", "")]),
    _cutlass("cutlass_sm90_cooperative_bug_release_before_wait", CO,
             "patch_bug_release_before_wait",
             "planted: consumer_release before warpgroup_wait in the collective's mma()",
             expect=[("-D param_12=385 -D param_1656=1 --elect lowest", "overwrite", "")]),
    _cutlass("cutlass_sm90_pingpong_bug_consumer_count", PP, "patch_bug_consumer_count",
             "planted: empty-barrier arrival count 256 instead of 128 (one warpgroup too many)",
             expect=[(SMALL + " --elect lowest", "hang", "")]),
    _cutlass("cutlass_sm90_cooperative_bug_consumer_count", CO, "patch_bug_consumer_count",
             "planted: empty-barrier arrival count 128 instead of 256 (one warpgroup too few)",
             expect=[(SMALL + " --elect lowest", "hang", "")]),
    _cutlass("cutlass_sm90_pingpong_bug_no_load_tail", PP, "patch_bug_no_load_tail",
             "planted: collective_mainloop.load_tail(...) call removed",
             expect=[(SMALL + " --elect lowest", "verified", "")]),
    _cutlass("cutlass_sm90_cooperative_bug_no_load_tail", CO, "patch_bug_no_load_tail",
             "planted: collective_mainloop.load_tail(...) call removed",
             expect=[(SMALL + " --elect lowest", "verified", "")]),
    _dsl("cute_dsl_tma_pipeline", "ok",
         "CuTe DSL: TMA producer warp + one wgmma consumer warpgroup on PipelineTmaAsync",
             expect=[("", "verified", "")]),
    _dsl("cute_dsl_tma_pipeline_bug_release_before_wait", "bug_release_before_wait",
         "planted: consumer_release before warpgroup.wait_group (reads still in flight)",
             expect=[("", "overwrite", "")]),
    _dsl("cute_dsl_tma_pipeline_bug_consumer_count", "bug_consumer_count",
         "planted: empty-barrier consumer arrival count 2 warps too many (6 instead of 4)",
             expect=[("", "hang", "")]),
    _mini("mini_ok", ["-DCOUNT=64"], "a small protocol: one barrier, every thread arrives and waits",
          expect=[("", "verified", "")]),
    _mini("mini_bug_count", ["-DCOUNT=65"], "planted: the barrier counts one arrival more than the block has",
          expect=[("", "hang", "")]),
    _mini("mini_bug_assert", ["-DCOUNT=64", "-DASSERT_ONE_WARP"], "planted: a device assert that the second warp fails",
          expect=[("", "trap", "")]),
    _mini("mini_bug_no_fence", ["-DCOUNT=64", "-DNO_FENCE"], "planted: no fence.mbarrier_init after the init",
          expect=[("", "uninit-barrier", "")]),
    _libcudacxx("cuda_barrier_tma", [], "libcu++ cuda::barrier + TMA as the CUDA Programming Guide writes it: "
                "phase-token waits with a back-off loop", expect=[("", "verified", "")]),
    _libcudacxx("cuda_barrier_tma_bug_count", ["-DBUG_COUNT"],
                "planted: init(&bar, blockDim.x + 1), one arrival more than the block has",
                expect=[("", "hang", "")]),
    _libcudacxx("cuda_barrier_tma_bug_no_sync", ["-DBUG_NO_SYNC"],
                "planted: no __syncthreads between the threads' writes and thread 0's TMA store",
                expect=[("", "missing-proxy-fence, store-reuse", "")]),
    _mini("lane_ring", [], "a 2-stage TMA ring whose consumer warp reads ab[s][lane * 4] (s the loop-carried stage): "
          "its lanes are one thread class", source="lane_ring.cu", expect=[("", "verified", "")]),
    _mini("umma_2sm_mini", [], "sm_100a 2-SM UMMA ring on a 2x1x1 cluster: cta_group::2 loads onto the even CTA's "
          "full barrier, its pair MMA, the commit multicast to both CTAs", source="umma_2sm_mini.cu", arch="sm_100a",
          expect=[("", "verified", ""), ("-D param_128=5", "verified", "")]),
    _mini("umma_2sm_mini_bug_commit_own_only", ["-DCOMMIT_OWN_ONLY"],
          "planted: the pair MMA's commit multicast to the even CTA only (mask 0b01)", source="umma_2sm_mini.cu",
          arch="sm_100a", expect=[("", "hang", "")]),
    _mini("umma_2sm_mini_bug_peer_skips_empty_wait", ["-DPEER_SKIPS_EMPTY_WAIT"],
          "planted: the odd CTA's producer loads without waiting for the stage's release", source="umma_2sm_mini.cu",
          arch="sm_100a", expect=[("-D param_128=5", "overwrite, stale-read", "")]),
    _mini("clc_mini", [], "sm_100a persistent kernel scheduled by cluster launch control: try_cancel, every warp "
          "decodes the response (query_cancel) and releases it after a __syncwarp", source="clc_mini.cu",
          arch="sm_100a", expect=[("", "verified", "")]),
    _mini("clc_mini_bug_read_before_wait", ["-DBUG_READ_BEFORE_WAIT"],
          "planted: the consumer decodes the response before waiting for it (before the response lands: stale-read; "
          "while the next one is in flight: overwrite)", source="clc_mini.cu", arch="sm_100a",
          expect=[("", "overwrite, stale-read", "clc in {1, 2}")]),
    _mini("clc_mini_bug_no_clc_release", ["-DBUG_NO_CLC_RELEASE"],
          "planted: the consumer never releases the response", source="clc_mini.cu", arch="sm_100a",
          expect=[("", "hang", "clc in {1, 2}")]),
    _mini("clc_mini_bug_no_syncwarp", ["-DBUG_NO_SYNCWARP"],
          "planted: lane 0 releases the response without a __syncwarp (the other lanes may not have read it)",
          source="clc_mini.cu", arch="sm_100a", expect=[("", "overwrite", "clc in {1, 2}")]),
    _cutlass("cutlass_sm100_2sm", "cutlass_sm100_2sm.cu", None,
             "unmodified CUTLASS 4.2 SM100 2-SM UMMA GEMM (256x128x64 on a 2x1x1 cluster, static persistent "
             "scheduler); uninit-barrier: tmem_deallocation_result_barrier is initialised after the last "
             "fence_barrier_init and the peer CTA's MMA warp arrives on it remotely (docs/ptx.md)",
             expect=[("--elect lowest --max-states 6000", "uninit-barrier", "")], arch="sm_100a"),
    _cutlass("cutlass_sm100_2sm_clc", "cutlass_sm100_2sm_clc.cu", None,
             "unmodified CUTLASS 4.2 SM100 2-SM UMMA GEMM with the default tile scheduler (cluster launch control); "
             "read whole, its search does not end within the bound (docs/ptx.md)",
             expect=[("--elect lowest --max-states 1500", "inconclusive", "")], arch="sm_100a"),
]


# --------------------------------------------------------------------------- environment

def find_cutlass_source(override=None):
    if override:
        return os.path.abspath(override)
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.origin:
        sys.exit("regen.py: cutlass_library not importable; pip install nvidia-cutlass==4.2.0.0")
    root = os.path.join(os.path.dirname(spec.origin), "source")
    if not os.path.isdir(os.path.join(root, "include", "cutlass")):
        sys.exit(f"regen.py: no CUTLASS include tree under {root}")
    return root


def cutlass_version(source):
    """nvidia-cutlass wheel version and the CUTLASS_MAJOR/MINOR/PATCH of its version.h."""
    try:
        wheel = importlib.metadata.version("nvidia-cutlass")
    except importlib.metadata.PackageNotFoundError:
        wheel = None
    hdr = {}
    try:
        with open(os.path.join(source, "include", "cutlass", "version.h")) as f:
            for m in re.finditer(r"#define\s+CUTLASS_(MAJOR|MINOR|PATCH)\s+(\d+)", f.read()):
                hdr[m.group(1)] = m.group(2)
    except OSError:
        pass
    header = ".".join(hdr.get(k, "?") for k in ("MAJOR", "MINOR", "PATCH")) if hdr else None
    return {"nvidia-cutlass": wheel, "version.h": header}


def nvcc_version():
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None, None
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Cuda compilation tools, release [\d.]+, V[\d.]+", out)
    return nvcc, (m.group(0) if m else out.strip().splitlines()[-1])


def cuda_toolkit_root(nvcc):
    """The toolkit dir nvcc itself uses (its `TOP`; nvcc on PATH may be a wrapper script)."""
    r = subprocess.run([nvcc, "--dryrun", "-E", "-x", "cu", os.devnull],
                       capture_output=True, text=True)
    m = re.search(r"^#\$ TOP=(.*)$", r.stdout + r.stderr, re.M)
    if m:
        return os.path.normpath(m.group(1).strip())
    return os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(nvcc)), ".."))


def dsl_info():
    """(package dir, version) of nvidia-cutlass-dsl, or (None, None)."""
    try:
        ver = importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        return None, None
    spec = importlib.util.find_spec("cutlass")
    pkg = os.path.dirname(spec.origin) if spec and spec.origin else None
    # .../nvidia_cutlass_dsl/dsl_packages/cutlass/__init__.py -> .../nvidia_cutlass_dsl
    if pkg and os.path.basename(os.path.dirname(pkg)) == "dsl_packages":
        pkg = os.path.dirname(os.path.dirname(pkg))
    return pkg, ver


# --------------------------------------------------------------------------- post-process

FILE_RE = re.compile(r'^(\s*\.file\s+\d+\s+")([^"]*)(".*)$')
HASH_RE = re.compile(r"_INTERNAL_([0-9a-f]{8})_")
HASH_BYTES_RE = re.compile(rb"_INTERNAL_([0-9a-f]{8})_")
B8_RE = re.compile(r"^\.b8 ([0-9]+(?:,[0-9]+)*)$")


def rewrite(ptx, roots):
    """Apply the two documented rewrites; return (text, list of unmapped paths)."""
    unmapped = []
    lines = ptx.split("\n")
    for i, line in enumerate(lines):
        m = FILE_RE.match(line)
        if not m:
            continue
        path = m.group(2)
        if not os.path.isabs(path):
            continue
        norm = os.path.normpath(path)
        for root, prefix in roots:
            if norm == root or norm.startswith(root + os.sep):
                rel = os.path.relpath(norm, root).replace(os.sep, "/")
                lines[i] = m.group(1) + prefix + rel + m.group(3)
                break
        else:
            unmapped.append(path)
    hashes = set(HASH_RE.findall("\n".join(lines)))
    # The same names also sit, as decimal bytes, in the `.section .debug_str` strings
    # (`$L__info_stringN:` followed by `.b8 95,90,78,...` lines, 40 bytes a line, a string
    # possibly running over several lines): rewrite them there too, byte for byte, keeping
    # every line's byte count.
    i = 0
    while i < len(lines):
        if not B8_RE.match(lines[i]):
            i += 1
            continue
        j = i
        while j < len(lines) and B8_RE.match(lines[j]):
            j += 1
        counts, data = [], []
        for line in lines[i:j]:
            vals = [int(v) for v in B8_RE.match(line).group(1).split(",")]
            counts.append(len(vals))
            data.extend(vals)
        blob = bytes(data)
        hashes |= {h.decode() for h in HASH_BYTES_RE.findall(blob)}
        new = blob
        for h in hashes:
            for pre in (b"_INTERNAL_", b"_GLOBAL__N__"):
                new = new.replace(pre + h.encode() + b"_", pre + b"00000000_")
        if new != blob:
            out, k = [], 0
            for n in counts:
                out.append(".b8 " + ",".join(str(b) for b in new[k:k + n]))
                k += n
            lines[i:j] = out
        i = j
    text = "\n".join(lines)
    for h in sorted(hashes):
        text = text.replace("_INTERNAL_" + h + "_", "_INTERNAL_00000000_")
        text = text.replace("_GLOBAL__N__" + h + "_", "_GLOBAL__N__00000000_")
    return text, unmapped


def path_roots(cutlass_src, nvcc, dsl_pkg):
    roots = [(os.path.normpath(SRC), "src/"), (os.path.normpath(cutlass_src), "cutlass/")]
    if nvcc:
        roots.append((cuda_toolkit_root(nvcc), "cuda/"))
    if dsl_pkg:
        roots.append((os.path.normpath(dsl_pkg), "cutlass_dsl/"))
    # longest root first, so src/ (inside the checkout) wins over any enclosing root
    roots.sort(key=lambda r: -len(r[0]))
    return roots


# --------------------------------------------------------------------------- builders

def build_nvcc(k, ctx, tmp):
    out = os.path.join(tmp, k["name"] + ".ptx")
    cmd = [ctx["nvcc"], *_arch(NVCC_FLAGS, k)]
    if k["patch"]:
        cmd.append("-I" + os.path.join(HERE, k["patch"]))
    cmd += ["-I" + os.path.join(ctx["cutlass_src"], "include"),
            os.path.join(HERE, k["source"]), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"nvcc failed ({r.returncode}):\n{' '.join(cmd)}\n{r.stderr[-4000:]}")
    with open(out) as f:
        return f.read()


PLAIN_FLAGS = ["-arch=sm_90a", "-ptx", "-lineinfo", "-O3"]


def build_plain(k, ctx, tmp):
    """A CUDA file that needs no CUTLASS: nvcc with the `-D` defines of the entry."""
    out = os.path.join(tmp, k["name"] + ".ptx")
    cmd = [ctx["nvcc"], *_arch(PLAIN_FLAGS, k), *k["defines"], os.path.join(HERE, k["source"]), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"nvcc failed ({r.returncode}):\n{' '.join(cmd)}\n{r.stderr[-4000:]}")
    with open(out) as f:
        return f.read()


def build_dsl(k, ctx, tmp):
    work = os.path.join(tmp, k["name"])
    os.makedirs(work)
    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a")
    cmd = [sys.executable, os.path.join(HERE, k["source"]), "--variant", k["variant"]]
    r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"DSL compile failed ({r.returncode}):\n{' '.join(cmd)}\n"
                           f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    found = [os.path.join(dp, f) for dp, _, fs in os.walk(work) for f in fs
             if f.endswith(".sm_90a.ptx")]
    if len(found) != 1:
        raise RuntimeError(f"expected one *.sm_90a.ptx in {work}, found {found}")
    with open(found[0]) as f:
        return f.read()


def build(k, ctx):
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pipecheck-ptx-") as tmp:
        raw = {"nvcc": build_nvcc, "nvcc-plain": build_plain, "cute-dsl": build_dsl}[k["kind"]](k, ctx, tmp)
    text, unmapped = rewrite(raw, ctx["roots"])
    if unmapped:
        raise RuntimeError(f"{k['name']}: .file paths under no known root: {unmapped}")
    for bad in ctx["forbidden"]:
        if bad in text:
            raise RuntimeError(f"{k['name']}: absolute path {bad!r} left in the PTX")
    if k["patch"]:
        # the patched headers, not the originals, must be the ones compiled
        names = re.findall(r'^\s*\.file\s+\d+\s+"([^"]*)"', text, re.M)
        for rel in patched_headers(k):
            if k["patch"] + "/" + rel not in names and any(
                    n == "cutlass/include/" + rel for n in names):
                raise RuntimeError(f"{k['name']}: original {rel} compiled, not the patch copy")
    path = os.path.join(HERE, k["name"] + ".ptx")
    with open(path, "w") as f:
        f.write(text)
    return k, text, time.monotonic() - t0


def patched_headers(k):
    if not k["patch"]:
        return []
    root = os.path.join(HERE, k["patch"])
    out = []
    for dp, _, fs in os.walk(root):
        for f in fs:
            if f.endswith((".hpp", ".h")):
                out.append(os.path.relpath(os.path.join(dp, f), root).replace(os.sep, "/"))
    return sorted(out)


def record(k, text, ctx):
    if k["kind"] == "nvcc-plain":
        flags = ["nvcc", *_arch(PLAIN_FLAGS, k), *k["defines"], k["source"], "-o", k["name"] + ".ptx"]
        tool = ctx["nvcc_version"]
        version = None
    elif k["kind"] == "nvcc":
        flags = ["nvcc", *_arch(NVCC_FLAGS, k)] + (["-I<tests/data/ptx>/" + k["patch"]] if k["patch"] else []) \
            + ["-I<cutlass_library/source>/include", k["source"], "-o", k["name"] + ".ptx"]
        tool = ctx["nvcc_version"]
        version = ctx["cutlass_version"]
    else:
        flags = ["CUTE_DSL_ARCH=sm_90a", "python", k["source"], "--variant", k["variant"],
                 "(cute.compile(..., options=\"--keep-ptx\"))"]
        m = re.search(r"^//\s*(Cuda compilation tools.*)$", text, re.M)
        tool = m.group(1).strip() if m else None
        version = {"nvidia-cutlass-dsl": ctx["dsl_version"]}
    return {
        "name": k["name"],
        "file": k["name"] + ".ptx",
        "kind": k["kind"],
        "source": k["source"],
        "variant": k.get("variant"),
        "patch": k["patch"],
        "patched_headers": patched_headers(k),
        "note": k["note"],
        "expect": [list(e) for e in k.get("expect", [])],
        "flags": flags,
        "compiler": tool,
        "cutlass_version": version,
        "lines": text.count("\n") + (0 if text.endswith("\n") else 1),
        "brkpt": len(re.findall(r"^\s*brkpt\b", text, re.M)),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


# --------------------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="build only this entry (repeatable)")
    ap.add_argument("--jobs", type=int, default=2, help="compiles at once (default 2)")
    ap.add_argument("--list", action="store_true", help="list the entries and exit")
    ap.add_argument("--manifest-only", action="store_true",
                    help="compile nothing: rewrite MANIFEST.json records from the .ptx files "
                         "present (tool versions are those installed now)")
    ap.add_argument("--cutlass-source", metavar="DIR",
                    help="CUTLASS tree with include/ (default: installed cutlass_library/source)")
    args = ap.parse_args(argv)

    if args.list:
        for k in KERNELS:
            print(f"{k['name']:50s} {k['kind']:9s} {k['source']} {k['patch'] or ''}")
        return 0
    todo = KERNELS
    if args.only:
        names = {k["name"] for k in KERNELS}
        bad = [n for n in args.only if n not in names]
        if bad:
            sys.exit(f"regen.py: unknown entries {bad}; see --list")
        todo = [k for k in KERNELS if k["name"] in args.only]

    ctx = {}
    if any(k["kind"] in ("nvcc", "nvcc-plain") for k in todo):
        ctx["cutlass_src"] = find_cutlass_source(args.cutlass_source)
        ctx["cutlass_version"] = cutlass_version(ctx["cutlass_src"])
        ctx["nvcc"], ctx["nvcc_version"] = nvcc_version()
        if not ctx["nvcc"]:
            sys.exit("regen.py: nvcc not on PATH")
    else:
        ctx["cutlass_src"] = find_cutlass_source(args.cutlass_source) \
            if importlib.util.find_spec("cutlass_library") or args.cutlass_source else HERE
        ctx["nvcc"] = shutil.which("nvcc")
    ctx["dsl_pkg"], ctx["dsl_version"] = dsl_info()
    if ctx["dsl_version"] is None:
        skipped = [k["name"] for k in todo if k["kind"] == "cute-dsl"]
        if skipped:
            print("regen.py: nvidia-cutlass-dsl is not installed; skipping "
                  + ", ".join(skipped), file=sys.stderr)
        todo = [k for k in todo if k["kind"] != "cute-dsl"]
    ctx["roots"] = path_roots(ctx["cutlass_src"], ctx["nvcc"], ctx["dsl_pkg"])
    forbidden = {HERE, os.path.dirname(os.path.dirname(os.path.dirname(HERE)))}
    forbidden |= {r for r, _ in ctx["roots"]}
    forbidden |= {os.path.dirname(os.__file__)}  # the stdlib dir, i.e. this Python's prefix
    ctx["forbidden"] = sorted(f for f in forbidden if len(f) > 1)

    failed = []
    records = {}
    t_all = time.monotonic()
    if args.manifest_only:
        for k in todo:
            path = os.path.join(HERE, k["name"] + ".ptx")
            if not os.path.exists(path):
                failed.append(k["name"])
                print(f"MISSING {path}", file=sys.stderr)
                continue
            with open(path) as f:
                records[k["name"]] = record(k, f.read(), ctx)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futs = {pool.submit(build, k, ctx): k for k in todo}
            for fut in concurrent.futures.as_completed(futs):
                k = futs[fut]
                try:
                    _, text, secs = fut.result()
                except Exception as e:  # report and go on with the others
                    failed.append(k["name"])
                    print(f"FAILED {k['name']}: {e}", file=sys.stderr)
                    continue
                rec = record(k, text, ctx)
                records[k["name"]] = rec
                print(f"{k['name']:50s} {rec['lines']:6d} lines  brkpt={rec['brkpt']}  "
                      f"{secs:6.1f} s", flush=True)

    # Read the manifest only now (not at start), so that a run with --only keeps the
    # records another run wrote meanwhile.
    manifest_path = os.path.join(HERE, "MANIFEST.json")
    try:
        with open(manifest_path) as f:
            manifest = {e["name"]: e for e in json.load(f)["entries"]}
    except (OSError, ValueError, KeyError):
        manifest = {}
    manifest.update(records)
    order = [k["name"] for k in KERNELS]
    entries = sorted(manifest.values(),
                     key=lambda e: order.index(e["name"]) if e["name"] in order else 1 << 30)
    with open(manifest_path, "w") as f:
        json.dump({"generated_by": "tests/data/ptx/regen.py", "entries": entries}, f, indent=2)
        f.write("\n")
    print(f"{len(records)} {'recorded' if args.manifest_only else 'built'}, {len(failed)} failed, "
          f"{time.monotonic() - t_all:.1f} s wall", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
