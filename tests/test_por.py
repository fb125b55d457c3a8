"""The partial-order reduction never changes what is found: reduced and full exploration agree.

For each spec (at small parameters, so the full state space stays small) both searches
run to completion, past findings too, and must report the same verdict and the same set
of (code, line) findings. Persistent-set search preserves every reachable finding of an
acyclic system (por.py); this test is the check that the footprints the model declares
make that theorem apply.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from pipecheck.explore import Limits
from pipecheck.verify import Options, verify_file
from conftest import ROOT

SPECS = sorted(p for d in ("specs", "examples") for p in (ROOT / d).rglob("*.pipe") if "lib" not in p.parts)
SMALL = {"STAGES": 2, "K_TILES": 3}


def outcome(path: Path, reduce: bool, overrides: dict) -> tuple[str, set]:
    text = path.read_text()
    ov = tuple((k, v) for k, v in overrides.items() if f"param {k}" in text)
    opts = Options(overrides=ov, limits=Limits(max_states=400_000, stop_at_first=False, past_findings=True), reduce=reduce)
    r = verify_file(str(path), opts)
    assert r.stopped is None, f"{path.name}: the full search is too large for this test"
    lines = {(i.code, r.sites[i.finding.site].span.line if i.finding.site >= 0 else 0) for i in r.issues}
    return r.verdict, lines


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_reduction_preserves_findings(path: Path):
    assert outcome(path, True, SMALL) == outcome(path, False, SMALL)
