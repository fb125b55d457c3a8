"""Integration: the pytest plugin collects .pipe specs; the pre-commit hooks run `pipecheck check`."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT, cli

RING = (ROOT / "examples" / "ring.pipe").read_text()


def pytest_run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_specs_are_collected_only_when_asked(tmp_path):
    (tmp_path / "ring.pipe").write_text(RING.replace("# expect: verified\n", ""))
    proc = pytest_run(tmp_path)
    assert "no tests ran" in proc.stdout, proc.stdout  # installing pipecheck changes nothing by itself
    proc = pytest_run(tmp_path, "--pipecheck")
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr


def test_a_failing_spec_shows_the_report(tmp_path):
    bug = RING.replace("# expect: verified\n", "").replace("mma_wait 0", "")  # release before wgmma is done
    (tmp_path / "bug.pipe").write_text(bug)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "procs.pipe").write_text("proc nothing() { }\n")  # a library: not a test
    proc = pytest_run(tmp_path, "--pipecheck", "-rN")
    assert proc.returncode == 1, proc.stdout
    assert "1 failed" in proc.stdout and "passed" not in proc.stdout
    assert "expected verified, got findings" in proc.stdout and "counterexample:" in proc.stdout


def test_expect_headers_and_ini_options(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\npipecheck = true\npipecheck_args = -D K_TILES=3\n")
    (tmp_path / "3722.pipe").write_text((ROOT / "specs" / "cutlass_3722.pipe").read_text())
    proc = pytest_run(tmp_path, "-vv")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3722.pipe::verify PASSED" in proc.stdout and "3722.pipe::verify[--elect lowest] PASSED" in proc.stdout


def test_pre_commit_hook_runs_pipecheck_check():
    yaml = pytest.importorskip("yaml")
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    check = hooks["pipecheck-check"]
    assert check["entry"] == "pipecheck check" and check["language"] == "python"
    files = re.compile(check["files"])
    exclude = re.compile(check["exclude"])
    # this repository's specs, as pre-commit would pass them (tests/data holds deliberately malformed inputs)
    specs = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.pipe")
                   if files.search(str(p.relative_to(ROOT))) and not exclude.search(str(p.relative_to(ROOT)))
                   and not str(p.relative_to(ROOT)).startswith("tests/data/"))
    assert "specs/cutlass_3722.pipe" in specs
    argv = shlex.split(check["entry"])[1:] + [str(ROOT / s) for s in specs]
    code, out, err = cli(*argv)  # what pre-commit runs, in-process
    assert code in (0, 1) and not err, err  # 1: some regression specs carry bugs the static checks see
    assert out.count(": ok: kernel") + out.count(" static finding(s) (") == len(specs)
    assert shlex.split(hooks["pipecheck-verify"]["entry"])[:2] == ["pipecheck", "verify"]


def test_max_states_ini_bounds_every_spec_and_timeout_warns(tmp_path):
    # CI bounds searches by states (the same everywhere), not wall time (issue 16, item 4)
    (tmp_path / "pytest.ini").write_text("[pytest]\npipecheck = true\npipecheck_max_states = 20\n")
    (tmp_path / "ring.pipe").write_text(RING.replace("# expect: verified\n", ""))
    proc = pytest_run(tmp_path, "-rN")
    assert proc.returncode == 1 and "1 failed" in proc.stdout, proc.stdout + proc.stderr
    assert "expected verified, got inconclusive (stopped by --max-states" in proc.stdout
    (tmp_path / "pytest.ini").write_text("[pytest]\npipecheck = true\npipecheck_args = --timeout 600\n")
    proc = pytest_run(tmp_path)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr
    assert "bound it by states instead" in proc.stdout
