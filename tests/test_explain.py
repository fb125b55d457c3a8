"""`pipecheck explain`: every declared barrier with its arrivers and waiters, read off the lowered model."""
from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, SPEC_FILES, cli

EXPLAINED = [ROOT / "specs" / "cutlass_3722.pipe", ROOT / "examples" / "ring.pipe"] + sorted(
    (ROOT / "specs").glob("*pingpong*.pipe"))
ALL_SPECS = SPEC_FILES


def contract(path, *args) -> dict:
    code, out, err = cli("explain", str(path), "--format", "json", *args)
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["schema"] == "pipecheck-contract/1"
    return data


def declared_barriers(path) -> dict[str, int]:
    """Declared mbarrier arrays and their element counts, from the checked kernel (not the explain output)."""
    import pipecheck
    k = pipecheck.load(str(path)).kernel
    out = {}
    for b in k.barriers:
        n = 1
        for d in b.dims:
            n *= d
        out[b.name] = n * k.cluster_size
    return out


@pytest.mark.parametrize("path", EXPLAINED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_barrier_appears_with_arrivers_and_waiters(path):
    data = contract(path)
    declared = declared_barriers(path)
    for cfg in data["configurations"]:
        listed: dict[str, int] = {}
        for g in cfg["barriers"]:
            listed[g["array"]] = listed.get(g["array"], 0) + len(g["elements"])
        assert listed == declared, cfg["condition"]
    # in the configuration the hardware runs (the first: the lowest elected lane), every barrier has both sides
    first = data["configurations"][0]
    for g in first["barriers"]:
        sides = {p["side"] for p in g["parties"]}
        assert "waits" in sides and "arrives" in sides, (g["array"], g["parties"])


@pytest.mark.parametrize("name", ["examples/ring.pipe", "specs/cutlass_3722_fixed.pipe", "specs/cutlass_mixed_input.pipe"])
def test_correct_specs_have_no_flag(name):
    data = contract(ROOT / name)
    assert all(g["flag"] is None for cfg in data["configurations"] for g in cfg["barriers"]) and not data["warnings"]


def test_3722_contract():
    data = contract(ROOT / "specs" / "cutlass_3722.pipe")
    lane0, other = data["configurations"]
    assert lane0["condition"] == "elect() (line 36, 47) elects lane 0"
    assert other["condition"] == "elect() (line 36, 47) elects a lane in 1..31"
    full, empty = lane0["barriers"]
    assert full["elements"] == ["full[0]", "full[1]", "full[2]", "full[3]"] and full["count"] == 1
    assert full["init"] == "kernel start" and full["stage"] and full["phases"] == [2, 2]
    rows = [(p["side"], p["role"], p["threads"], p["per_phase"]) for p in full["parties"]]
    assert rows == [("arrives", "producer", "lane 0", "1 arrival, expect_tx 32768 B"),
                    ("tx", "producer", "lane 0", "2 TMA loads (A, B), 32768 B"),
                    ("waits", "consumer[0]", "all 128 threads", "from parity 0"),
                    ("waits", "consumer[1]", "all 128 threads", "from parity 0")]
    rows = [(p["side"], p["role"], p["threads"], p["per_phase"]) for p in empty["parties"]]
    assert rows == [("arrives", "consumer[0]", "thread 0", "1 arrival"),
                    ("arrives", "consumer[1]", "thread 0", "1 arrival"),
                    ("waits", "producer", "lane 0", "from parity 1 (passes at once: starts free)")]
    # the #3722 hang, statically: when lane 1..31 is elected nobody arrives on full
    full_bad = other["barriers"][0]
    assert {p["side"] for p in full_bad["parties"]} == {"tx", "waits"}
    assert "no role arrives on it" in full_bad["flag"]
    assert data["warnings"] and data["warnings"][0]["line"] == 31


def test_explain_text_table_and_exit_codes():
    code, out, _ = cli("explain", str(ROOT / "specs" / "cutlass_3722.pipe"))
    assert code == 1  # a stage barrier is flagged
    head = next(line for line in out.splitlines() if line.strip().startswith("barrier"))
    assert re.split(r"\s{2,}", head.strip()) == ["barrier", "count", "phases", "init", "side", "role", "threads",
                                                 "per phase", "lines"]
    assert "full[0..3] *" in out and "warning: stage barrier full[0..3]" in out and "[stage-roles]" in out
    code, out, _ = cli("explain", str(ROOT / "specs" / "cutlass_3722_fixed.pipe"))
    assert code == 0 and "in every configuration:" in out and "*" not in out


def test_flags_a_stage_barrier_with_two_waiting_roles():
    data = contract(ROOT / "examples" / "bugs" / "refill_without_wait.pipe")
    flags = {g["array"]: g["flag"] for g in data["configurations"][0]["barriers"]}
    assert "2 roles wait on it (consumer and producer)" in flags["full"]
    assert "no role waits on it" in flags["empty"]


@pytest.mark.parametrize("path", ALL_SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_explain_runs_on_every_spec(path):
    code, out, err = cli("explain", str(path))
    assert code in (0, 1) and err == "" and "protocol contract" in out


def test_rich_table_when_forced():
    code, out, _ = cli("explain", str(ROOT / "examples" / "ring.pipe"), "--color", "always")
    assert code == 0 and "\x1b[" in out and "full[0..3]" in re.sub(r"\x1b\[[0-9;]*m", "", out)


def test_explain_spec_error_exits_2(spec):
    code, out, err = cli("explain", str(spec("kernel k {\n  role p warp { arrive nope }\n}\n")))
    assert code == 2 and "t.pipe:2:" in err and "Traceback" not in err


def test_graph_draws_the_contract():
    code, out, _ = cli("graph", str(ROOT / "specs" / "cutlass_3722.pipe"))
    assert code == 0 and out.startswith("flowchart LR")
    lane0 = out[:out.index("subgraph s1")]
    assert re.search(r"c0_r\d -->\|arrives\| c0_b\d", lane0) and lane0.count("-->|releases|") == 3
    buggy = out[out.index("subgraph s1"):]
    # with a lane in 1..31 elected, the producer only sends TMA bytes to full, which is flagged
    assert buggy.count("-->|arrives|") == 2 and "style c1_b1 stroke:#d1242f" in buggy
    code, out, _ = cli("graph", str(ROOT / "examples" / "ring.pipe"), "--format", "dot")
    assert out.startswith("digraph protocol {") and out.count("->") == 7


# --- the store side (issue 19): TMA stores, bulk groups and store rings in explain and graph

def test_explain_shows_the_store_side():
    code, out, _ = cli("explain", str(ROOT / "examples" / "epilogue.pipe"))
    assert code == 0
    assert ("store ring D[0..1]: 2 stages, 4 TMA stores by epilogue; before a stage is written again: wait_group_read 1 "
            "(at most 1 older store reading SMEM); before exit: wait_group_read 0") in out
    assert ("epilogue thread 0: write D[0] x2, D[1] x2; fence_proxy_async x4; tma_store D[0] x2, D[1] x2; 4 bulk groups "
            "(commit_group); wait_group_read 1 x4, then wait_group_read 0") in out
    assert "epilogue threads 1-127: write D[0] x2, D[1] x2; fence_proxy_async x4" in out


def test_explain_json_and_graph_show_the_store_side():
    import json
    spec = str(ROOT / "specs" / "cutlass_sm90_pingpong.pipe")
    data = json.loads(cli("explain", spec, "--elect", "lowest", "--format", "json")[1])
    [conf] = data["configurations"]
    assert conf["store_rings"] and conf["store_rings"][0].startswith("store ring D[0..1]: 2 stages")
    assert {s["role"] for s in conf["stores"] if "tma_store" in s["does"]} == {"math[0]", "math[1]"}
    out = cli("graph", spec, "--elect", "lowest")[1]
    assert "D (store ring, 2 stages, bulk groups)" in out and "|tma_store + commit_group|" in out
    assert "|wait_group_read 1|" in out
    dot = cli("graph", spec, "--elect", "lowest", "--format", "dot")[1]
    assert "shape=parallelogram" in dot and 'label="tma_store + commit_group"' in dot


def test_a_spec_without_stores_has_no_store_side():
    out = cli("explain", str(ROOT / "examples" / "ring.pipe"))[1]
    assert "store side" not in out
