"""The H200 observations (tests/data/h200_vectors.json) replayed through the model.

Barrier vectors go straight through pipecheck.semantics; TMA and elect scenarios run as
small specs through the whole pipeline. Each test names the probe it reproduces.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipecheck.model import semantics as S
from conftest import ROOT, verify_json

DATA = json.loads((Path(__file__).parent / "data" / "h200_vectors.json").read_text())
FAULT_EVENTS = {"arrive-fault": {S.FAULT_OVER, S.FAULT_TX_ONLY, S.FAULT_UNINIT}, "tx-range": {S.FAULT_TX_RANGE}}


def _apply(vector: dict) -> None:
    b: S.Barrier | None = None
    last_events: list[str] = []
    steps = vector["steps"]
    for i, step in enumerate(steps):
        op = step[0]
        events: list[str] = []
        if op == "init":
            b = S.init(step[1])  # re-init of a live barrier resets it (H200 mbar 16)
        elif op == "uninitialised":
            b = None
        elif op == "arrive":
            b = S.arrive(b, step[1], who=len(last_events) + id(step), events=events)
        elif op == "arrive_tx":
            b = S.arrive(b, 1, who=id(step), events=events, tx=step[1])
        elif op == "expect_tx":
            b = S.expect_tx(b, step[1], events)
        elif op == "complete_tx":
            b = S.complete_tx(b, step[1], events)
        elif op == "arrive_drop":
            b = S.arrive_drop(b, step[1], who=id(step), events=events)
        elif op == "check":
            assert b is not None
            for parity, passes in step[1].items():
                assert S.wait_passes(b, int(parity)) == passes, (vector["id"], parity, b)
            continue
        elif op == "fault":
            assert set(last_events) & FAULT_EVENTS[step[1]], (vector["id"], last_events)
            return
        else:
            raise AssertionError(f"unknown step {op}")
        faults_next = i + 1 < len(steps) and steps[i + 1][0] == "fault"
        assert faults_next or not set(events) & S.FAULTS, (vector["id"], op, events)
        last_events = events


@pytest.mark.parametrize("vector", DATA["barrier_vectors"], ids=lambda v: f"{v['probe']}:{v['id']}")
def test_barrier_vector(vector):
    _apply(vector)


def test_every_barrier_vector_is_a_distinct_probe():
    ids = [v["id"] for v in DATA["barrier_vectors"]]
    assert len(ids) == len(set(ids)) >= 16


TMA_SPEC = """
kernel tma {{
  mbarrier full count 1
  smem A bytes 8192
  role producer thread {{
    arrive full expect_tx {expect}
    tma_load A tile 0 bytes {delivered} barrier full
  }}
  role consumer warpgroup {{
    wait full parity 0
  }}
}}
"""


@pytest.mark.parametrize("sc", [s for s in DATA["scenarios"] if s["id"] in ("tma-bytes-match", "tma-expect-too-small",
                                                                          "tma-expect-too-large")],
                         ids=lambda s: f"{s['probe']}:{s['id']}")
def test_tma_byte_accounting(sc, spec):
    """bulk 0-2: the phase completes iff expect_tx equals the bytes delivered."""
    data = verify_json(spec(TMA_SPEC.format(expect=sc["expect_tx"], delivered=sc["delivered"])))
    assert (data["verdict"] == "verified") == sc["phase0_completes"]
    if not sc["phase0_completes"]:
        assert [f["code"] for f in data["findings"]] == ["hang"]


def test_expect_zero_completes_at_the_arrival(spec):
    """bulk 3: with expect_tx 0 the phase completes at the arrival, before the data: nobody hangs, and the CTA
    can exit (and a reader can read) before the bytes land."""
    data = verify_json(spec(TMA_SPEC.format(expect=0, delivered=4096)))
    assert {f["code"] for f in data["findings"]} == {"exit-inflight"}


def test_expect_zero_lets_a_reader_read_stale_data(spec):
    text = TMA_SPEC.format(expect=0, delivered=4096).replace("wait full parity 0", "wait full parity 0\n    read A tile 0")
    data = verify_json(spec(text))
    assert {f["code"] for f in data["findings"]} == {"stale-read"}


OOB_SPEC = """
kernel oob {{
  tensormap tm {{ dtype bf16  dims [96, 100]  strides [192]  box [64, 64] }}
  mbarrier full count 1
  smem A bytes 8192
  role producer thread {{
    arrive full expect_tx {expect}
    tma_load A tile 0 map tm barrier full
  }}
  role consumer thread {{ wait full parity 0 }}
}}
"""


@pytest.mark.parametrize("sc", [s for s in DATA["scenarios"] if s["id"].startswith("tma-oob")], ids=lambda s: s["probe"])
def test_tma_box_counts_out_of_bounds(sc, spec):
    """oob 1, 2: a box half outside the tensor delivers the whole box (8192 B), not the in-bounds 2304 B."""
    data = verify_json(spec(OOB_SPEC.format(expect=sc["expect_tx"])))
    assert (data["verdict"] == "verified") == sc["phase0_completes"]


def test_elect_lowest_picks_lane_zero():
    """H200 elect: elect.sync elected the lowest lane of the mask every time; --elect lowest pins that."""
    data = verify_json(ROOT / "specs" / "cutlass_3722.pipe", "--elect", "lowest")
    assert data["verdict"] == "verified"
    assert data["stats"]["configurations"] == 1


def test_issuer_not_leader_hangs():
    """H200 leader: the #3722 shape with the issuer on lane 3 hung on hardware; PTX allows any lane."""
    data = verify_json(ROOT / "specs" / "cutlass_3722.pipe")
    assert [f["code"] for f in data["findings"]] == ["hang"]
    f = data["findings"][0]
    assert "1..31" in f["condition"] and f["on_hardware"] is False


def test_read_before_wait_is_stale():
    """H200 nowait: reading right after the issue read stale words in 20 of 20 runs."""
    data = verify_json(ROOT / "examples" / "bugs" / "stale_read.pipe")
    assert [f["code"] for f in data["findings"]] == ["stale-read"]


MULTICAST_SPEC = """
kernel mc {{
  cluster 2
  mbarrier full count 1
  smem A bytes {nbytes}
  role loader thread {{
    arrive full expect_tx (cta == 0 ? {e0} : {e1})
    if cta == 0 {{ tma_load A tile 0 bytes {nbytes} barrier full multicast 0b11 }}
  }}
  role waiter warpgroup {{ wait full parity 0 }}
}}
"""


@pytest.mark.parametrize("sc", [s for s in DATA["scenarios"] if s["id"].startswith("multicast")], ids=lambda s: s["probe"])
def test_multicast_charges_each_cta_its_own_bytes(sc, spec):
    """multicast 0-2: each CTA's barrier is charged the bytes landing in that CTA."""
    e0, e1 = sc["expect_tx"]
    data = verify_json(spec(MULTICAST_SPEC.format(nbytes=sc["bytes"], e0=e0, e1=e1)), "--all")
    hung = " ".join(f["message"] for f in data["findings"] if f["code"] == "hang")
    for cta, completes in enumerate(sc["completes"]):
        assert (f"cta{cta}.waiter" in hung) != completes, (sc["id"], hung)
    assert (data["verdict"] == "verified") == all(sc["completes"])


@pytest.mark.parametrize("wait,expect", [("", "store-reuse"), ("wait_group_read 0", None), ("wait_group 0", None)])
def test_store_reuse_needs_a_drain(wait, expect, spec):
    """drain: rewriting SMEM under an undrained TMA store corrupted 1171/1320 H200 block-runs; both waits fix it."""
    text = f"""
kernel st {{
  smem D bytes 4096
  role epi thread {{
    write D tile 0
    fence_proxy_async
    tma_store D tile 0
    commit_group
    {wait}
    write D tile 1
    fence_proxy_async
    tma_store D tile 1
    commit_group
    wait_group_read 0
  }}
}}
"""
    data = verify_json(spec(text))
    assert [f["code"] for f in data["findings"]] == ([expect] if expect else [])


def test_remote_arrive_after_exit_is_reported():
    """remote 1: an arrive on an exited peer's barrier is undefined (no fault seen in one run): exit-inflight."""
    data = verify_json(ROOT / "examples" / "bugs" / "remote_arrive_after_exit.pipe")
    # each CTA's consumer releases a stage of the peer (lines 41 and 42): both arrivals can come after the exit
    assert {f["code"] for f in data["findings"]} == {"exit-inflight"}
    assert all("after CTA" in f["message"] for f in data["findings"])


def test_every_scenario_has_a_test():
    covered = {"tma-bytes-match", "tma-expect-too-small", "tma-expect-too-large", "tma-expect-zero", "tma-oob-full-box",
               "tma-oob-in-bounds-only", "elect-lowest-lane", "issuer-not-leader-hangs", "read-before-wait-is-stale",
               "multicast-per-cta-bytes", "multicast-one-cta-doubled", "multicast-times-cluster", "store-reuse-corrupts",
               "remote-arrive-after-peer-exit"}
    assert {s["id"] for s in DATA["scenarios"]} == covered
