"""The public Python API: pipecheck.load, pipecheck.verify and the Report object."""
from __future__ import annotations

import pytest

import pipecheck
from conftest import ROOT

SPEC = str(ROOT / "specs" / "cutlass_3722.pipe")


def test_load_checks_and_applies_overrides():
    spec = pipecheck.load(SPEC, STAGES=3)
    assert spec.name == "cutlass_sm90_mainloop"
    assert spec.params == {"STAGES": 3, "K_TILES": 8}
    assert spec.barriers == {"full": 1, "empty": 2}
    assert spec.roles == {"producer": (1, 32), "consumer": (2, 128)}


def test_verify_returns_findings_with_their_schedule():
    report = pipecheck.verify(pipecheck.load(SPEC))
    assert report.verdict == "findings" and not report.ok and report.exit_code == 1
    [f] = report.findings
    assert f.code == "hang" and f.location.line == 58 and str(f.location).endswith("cutlass_3722.pipe:58:5")
    assert f.condition == "elect() (line 36, 47) elects a lane in 1..31" and f.on_hardware is False
    assert "no thread ever reaches the arrive on full" in f.why
    assert [s.index for s in f.steps] == list(range(1, 24))
    # the B tile landing on full[0] after the A tile: no arrival announced their bytes
    land = next(s for s in f.steps if s.barriers == ("full[0] ph0 1/1 tx-32768",))
    assert land.role == "async (TMA, wgmma)" and land.location.line == 43


def test_verify_a_path_with_semantics_options():
    report = pipecheck.verify(SPEC, elect="lowest")
    assert report.ok and report.findings == [] and report.states > 0
    assert pipecheck.verify(SPEC, params={"STAGES": 2}).params["STAGES"] == 2


def test_report_renderings_agree():
    report = pipecheck.verify(SPEC)
    assert report.to_json()["verdict"] == "findings"
    assert "hang" in [r["ruleId"] for r in report.sarif()["runs"][0]["results"]]
    assert "<svg" in report.html() and "[hang]" in report.text()


def test_spec_errors_raise():
    with pytest.raises(pipecheck.SpecError) as exc:
        pipecheck.load(str(ROOT / "nope.pipe"))
    assert "cannot read" in str(exc.value)
    with pytest.raises(ValueError):
        pipecheck.verify(SPEC, elect="highest")


def test_limits_make_it_inconclusive():
    report = pipecheck.verify(str(ROOT / "examples" / "ring.pipe"), max_states=20)
    assert report.verdict == "inconclusive" and report.exit_code == 3
