"""Every spec in specs/ and examples/ gets the verdict and finding codes its header states."""
from __future__ import annotations

import re
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
