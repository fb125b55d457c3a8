"""Every spec in specs/ and examples/ gets the verdict and finding codes its header states."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT, expectations, verify_json

SPECS = sorted(p for d in ("specs", "examples") for p in (ROOT / d).rglob("*.pipe") if "lib" not in p.parts)
CASES = [(p, args, what) for p in SPECS for args, what in expectations(p)]


def test_every_spec_states_what_it_expects():
    missing = [str(p.relative_to(ROOT)) for p in SPECS if not expectations(p)]
    assert not missing, f"specs without an `# expect:` header line: {missing}"


@pytest.mark.parametrize("path,args,what", CASES, ids=[f"{p.relative_to(ROOT)}{' ' + ' '.join(a) if a else ''}"
                                                      for p, a, _ in CASES])
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
