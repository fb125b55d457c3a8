"""`pipecheck timeline`: the ASAP schedule's phases and the no-overlap warning on a serialized ring."""
from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, cli

SERIALIZED = ROOT / "examples" / "bugs" / "serialized_ring.pipe"
HEADER = re.compile(r"^#\s*timeline:\s*(?P<what>\S+)\s*$", re.M)
WITH_HEADER = sorted(p for d in ("specs", "examples") for p in (ROOT / d).rglob("*.pipe") if HEADER.search(p.read_text()))


def timeline(path, *args) -> tuple[int, dict]:
    code, out, err = cli("timeline", str(path), "--format", "json", *args)
    assert code in (0, 1, 3), err
    return code, json.loads(out)


def test_planted_serialized_ring_is_flagged():
    code, data = timeline(SERIALIZED)
    assert code == 1
    assert data["overlap"]["complete"] and data["overlap"]["max_in_flight"] == 0
    assert data["overlap"]["compute_states"] > 0
    assert [w["code"] for w in data["warnings"]] == ["no-overlap"] and data["warnings"][0]["line"] == 24
    code, out, _ = cli("timeline", str(SERIALIZED))
    assert "serialized_ring.pipe:24:5: warning: ring 'st' has 4 stages" in out and "[no-overlap]" in out


@pytest.mark.parametrize("path", [ROOT / "examples" / "ring.pipe", ROOT / "specs" / "cutlass_3722_fixed.pipe"],
                         ids=lambda p: p.name)
def test_correct_rings_are_not_flagged(path):
    code, data = timeline(path, "--max-states", "5000")
    assert code == 0 and data["warnings"] == []
    assert data["overlap"]["max_in_flight"] >= 2  # a reachable state: consumers compute while later stages load


def test_small_correct_ring_exhaustive():
    code, data = timeline(ROOT / "examples" / "ring.pipe", "-D", "STAGES=2", "-D", "K_TILES=3")
    assert code == 0 and data["overlap"]["complete"] and data["overlap"]["max_in_flight"] == 1


def test_same_ring_with_one_stage_is_not_a_warning():
    code, data = timeline(SERIALIZED, "-D", "STAGES=1")
    assert code == 0 and data["warnings"] == []  # one stage cannot overlap: nothing declared is wasted


def test_schedule_phases():
    code, data = timeline(ROOT / "examples" / "ring.pipe", "--max-states", "2000")
    sch = data["schedule"]
    assert sch["ended"] == "done"
    pro, steady, epi = sch["prologue"], sch["steady"], sch["epilogue"]
    assert pro[0] == 1 and pro[1] + 1 == steady[0] and steady[1] + 1 == epi[0]
    assert epi[1] == sch["rounds"][-1]["round"]
    loads = [r["round"] for r in sch["rounds"] for e in r["events"] if "tma_load" in e["action"]]
    assert len(loads) == 8 and sum(1 for r in loads if r < steady[0]) == 4  # the prologue fills the 4 stages
    assert sch["loads_in_steady"] == 4 and loads[-1] == steady[1]
    code, out, _ = cli("timeline", str(ROOT / "examples" / "ring.pipe"), "--max-states", "2000")
    assert re.search(r"^prologue \(rounds 1-\d+\)$", out, re.M) and "steady state (rounds" in out
    assert re.search(r"^epilogue \(rounds? ", out, re.M)


def test_latency_changes_the_schedule():
    a = timeline(ROOT / "examples" / "ring.pipe", "--max-states", "100", "--load-latency", "1")[1]
    b = timeline(ROOT / "examples" / "ring.pipe", "--max-states", "100", "--load-latency", "8")[1]
    assert a["schedule"]["rounds"][-1]["round"] < b["schedule"]["rounds"][-1]["round"]


@pytest.mark.parametrize("path", WITH_HEADER, ids=lambda p: str(p.relative_to(ROOT)))
def test_timeline_headers(path):
    want = HEADER.search(path.read_text()).group("what")
    code, data = timeline(path)
    assert (["no-overlap"] if want == "no-overlap" else []) == [w["code"] for w in data["warnings"]]


def test_verify_does_not_report_no_overlap():
    code, out, _ = cli("verify", str(SERIALIZED))
    assert code == 0 and ": verified (" in out
