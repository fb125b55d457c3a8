"""Every spec in specs/ and examples/ gets the verdict and finding codes its header states."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from conftest import ROOT, SPEC_FILES, expectations, header_lines, verify_json

SPECS = SPEC_FILES
SLOW = re.compile(r"^#\s*slow:")  # a header line saying why this spec's default run takes minutes
CASES = [pytest.param(p, args, what, id=f"{p.relative_to(ROOT)}{' ' + ' '.join(args) if args else ''}",
                      marks=[pytest.mark.slow] if any(SLOW.match(l) for l in header_lines(p)) else [])
         for p in SPECS for args, what in expectations(p)]


def test_every_spec_states_what_it_expects():
    missing = [str(p.relative_to(ROOT)) for p in SPECS if not expectations(p)]
    assert not missing, f"specs without an `# expect:` header line: {missing}"


@pytest.mark.parametrize("path,args,what", CASES)
def test_golden(path: Path, args: list[str], what: str):
    data = verify_json(path, *args)
    if what == "verified":
        assert data["verdict"] == "verified", [f["message"] for f in data["findings"]]
        assert data["findings"] == []
    else:
        want = {c.strip() for c in what.split(",")}
        got = {f["code"] for f in data["findings"]} | {f["code"] for f in data["static"]}
        assert data["verdict"] == "findings"
        assert got == want, f"{path.name}: expected {sorted(want)}, got {sorted(got)}"


# ---------------------------------------------------------------- compiled kernels (tests/data/ptx)
# A PTX file cannot carry a header of its own (tests/data/ptx/regen.py writes it from the compiler's
# output), so its expectations sit in its MANIFEST.json entry, written by regen.py from the corpus
# table there: (ARGS, WHAT, WHEN), WHEN a text the finding's condition must contain.
PTX_DIR = ROOT / "tests" / "data" / "ptx"
PTX_CASES = [pytest.param(PTX_DIR / e["file"], shlex.split(args), what, when, id=f"ptx/{e['file']} {args}".strip())
             for e in json.loads((PTX_DIR / "MANIFEST.json").read_text())["entries"]
             for args, what, when in e.get("expect", [])]


def test_every_compiled_kernel_states_what_it_expects():
    entries = json.loads((PTX_DIR / "MANIFEST.json").read_text())["entries"]
    assert {e["file"] for e in entries} == {p.name for p in PTX_DIR.glob("*.ptx")}
    assert [e["file"] for e in entries if not e.get("expect")] == []


@pytest.mark.parametrize("path,args,what,when", PTX_CASES)
def test_golden_ptx(path: Path, args: list[str], what: str, when: str):
    data = verify_json(path, *args)
    if what == "verified":
        assert data["verdict"] == "verified", [f["message"] for f in data["findings"]]
        return
    if what == "inconclusive":  # read whole and searched, no finding within the bound its args set
        assert data["verdict"] == "inconclusive" and not data["findings"], [f["message"] for f in data["findings"]]
        return
    want = {c.strip() for c in what.split(",")}
    got = {f["code"] for f in data["findings"]}
    assert data["verdict"] == "findings"
    assert got == want, f"{path.name}: expected {sorted(want)}, got {sorted(got)}"
    if when:
        assert any(when in (f["condition"] or "") for f in data["findings"]), [f["condition"] for f in data["findings"]]
    else:
        assert all(f["condition"] is None for f in data["findings"]), [f["condition"] for f in data["findings"]]
