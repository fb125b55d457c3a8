"""The user's cache (`core.cache`): parsed spec files and PTX modules, PTX defaults, compiled kernels."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, cli

from pipecheck.core import cache
from pipecheck.core.diagnostics import SpecError
from pipecheck.lang import syntax
from pipecheck.lang.parse import parse_text

RING = (ROOT / "examples" / "ring.pipe").read_text()


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "pipecheck"


def _trees(home: Path) -> list[Path]:
    return sorted(p for d in home.glob("trees-*") for p in d.iterdir())


def test_a_cached_tree_equals_a_fresh_parse(cache_home):
    first = parse_text(RING, "ring.pipe")
    assert len(_trees(cache_home)) == 1
    second = parse_text(RING, "ring.pipe")
    assert second == first == syntax.parse(RING, "ring.pipe")
    assert second is not first  # read back from the entry, not kept in the process
    assert len(_trees(cache_home)) == 1


def test_the_key_holds_the_text_and_the_name_shown(cache_home):
    parse_text(RING, "ring.pipe")
    other = parse_text(RING, "specs/ring.pipe")
    assert other.path == "specs/ring.pipe"
    assert all(s.file == "specs/ring.pipe" for s in [other.span, other.kernels[0].span])
    edited = parse_text(RING.replace("1..8", "1..7", 1), "ring.pipe")
    assert edited != parse_text(RING, "ring.pipe")
    assert len(_trees(cache_home)) == 3


def test_a_damaged_entry_is_parsed_afresh(cache_home):
    good = parse_text(RING, "ring.pipe")
    for p in _trees(cache_home):
        p.write_bytes(b"\x80\x05not a pickle")
    assert parse_text(RING, "ring.pipe") == good
    for p in _trees(cache_home):
        p.write_bytes(b"")
    assert parse_text(RING, "ring.pipe") == good


def test_a_syntax_error_is_never_stored_and_reads_the_same_twice(cache_home):
    bad = RING + "\n}\n"
    messages = []
    for _ in range(2):
        with pytest.raises(SpecError) as exc:
            parse_text(bad, "bad.pipe")
        messages.append([(d.message, d.span) for d in exc.value.diagnostics])
    assert messages[0] == messages[1] and messages[0]
    assert _trees(cache_home) == []


def test_no_cache_directory_costs_only_the_parse(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where the directory should be
    assert cache.cache_dir("trees-test") is None
    assert parse_text(RING, "ring.pipe") == syntax.parse(RING, "ring.pipe")


def test_a_full_directory_keeps_its_most_recently_used_half(cache_home):
    for i in range(5):
        cache.write("t", f"k{i}", b"x", keep=4)
        os.utime(cache_home / "t" / f"k{i}", ns=(i * 10**9, i * 10**9))
    assert sorted(p.name for p in (cache_home / "t").iterdir()) == ["k3", "k4"]
    assert cache.read("t", "k3") == b"x" and cache.read("t", "k0") is None


def test_a_run_with_its_files_cached_does_not_import_lark(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    spec = ROOT / "specs" / "cutlass_3722.pipe"
    probe = ("import sys; from pipecheck.lang.parse import load_spec; load_spec(sys.argv[1]); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'lark' or m == 'pipecheck.lang.syntax')[:1])")
    runs = [subprocess.run([sys.executable, "-c", probe, str(spec)], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    assert runs[0].stdout.strip() != "[]"  # the first run parses, with lark
    assert runs[1].stdout.strip() == "[]"


def test_a_ptx_module_is_read_back_not_parsed_again(cache_home, monkeypatch):
    from pipecheck.ptx import parse as ptx_parse

    text = (ROOT / "tests" / "data" / "ptx" / "mini_ok.ptx").read_text()
    first = ptx_parse.parse_ptx(text, "mini_ok.ptx")

    def no_parse(text, file):
        raise AssertionError("parsed again")

    monkeypatch.setattr(ptx_parse, "_parse", no_parse)
    assert ptx_parse.parse_ptx(text, "mini_ok.ptx") == first
    with pytest.raises(AssertionError):  # another text is parsed
        ptx_parse.parse_ptx(text + "\n", "mini_ok.ptx")


def test_ptx_defaults_read_back_give_the_same_report(cache_home):
    ptx = str(ROOT / "tests" / "data" / "ptx" / "cute_dsl_tma_pipeline.ptx")
    runs = [cli("verify", ptx, "--format", "json", "--max-states", "300") for _ in range(2)]
    assert [r[0] for r in runs] == [runs[0][0]] * 2 and runs[0][1] == runs[1][1]
    assert len(list((cache_home).glob("ptx-defaults-*/*"))) == 1
    rc, out, _ = cli("verify", ptx, "--format", "json", "--max-states", "300", "-D", "param_8=3")
    assert len(list((cache_home).glob("ptx-defaults-*/*"))) == 2  # a value set by hand is another key


def test_no_cache_when_asked_or_when_others_may_write(cache_home, monkeypatch):
    monkeypatch.setenv("PIPECHECK_NO_CACHE", "1")
    assert cache.cache_dir("t-off") is None
    monkeypatch.delenv("PIPECHECK_NO_CACHE")
    where = cache.cache_dir("t-open")
    assert where is not None and where.stat().st_mode & 0o077 == 0
    where.chmod(0o777)
    cache._made.cache_clear()
    assert cache.cache_dir("t-open") is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_a_compiled_kernel_is_kept_until_it_or_a_header_changes(cache_home, tmp_path, monkeypatch):
    from pipecheck.ptx import nvcc

    src = tmp_path / "mini.cu"
    src.write_text('#include "count.h"\n' + (ROOT / "tests" / "data" / "ptx" / "src" / "mini.cu").read_text())
    header = tmp_path / "count.h"
    header.write_text("#define COUNT 64\n")
    ran: list[list[str]] = []
    real = subprocess.run

    def spy(cmd, *a, **kw):
        ran.append(list(cmd))
        return real(cmd, *a, **kw)

    monkeypatch.setattr(nvcc.subprocess, "run", spy)

    def compiles() -> tuple[bytes, bool]:
        ran.clear()
        out, _ = nvcc.compile_cuda(str(src), (f"-I{tmp_path}",))
        return Path(out).read_bytes(), any("-ptx" in c for c in ran)

    first, compiled = compiles()
    assert compiled
    again, compiled = compiles()
    assert again == first and not compiled  # read back: only the header listing ran
    header.write_text("#define COUNT 65\n")
    edited, compiled = compiles()
    assert compiled and edited != first
