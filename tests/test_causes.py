"""Cause first, severity, no false notes, compact reports (issue 17): on specs of each kind in tests/data/causes."""
from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, cli, expectations, verify_json, write_spec

DATA = ROOT / "tests" / "data" / "causes"


def _codes(data: dict) -> set[str]:
    return {f["code"] for f in data["findings"]} | {f["code"] for f in data["static"]}


@pytest.mark.parametrize("path", sorted(DATA.glob("*.pipe")), ids=lambda p: p.name)
def test_each_spec_gets_what_its_header_states(path):
    for args, what in expectations(path):
        data = verify_json(path, *args)
        want = set() if what == "verified" else {c.strip() for c in what.split(",")}
        assert _codes(data) == want, (args, [f["message"] for f in data["findings"]])


# ---------------------------------------------------------------- 1. cause first

def test_release_before_mma_wait_leads_with_the_overwrite_and_groups_the_symptoms():
    data = verify_json(DATA / "early_release_three_stages.pipe")
    [root] = data["findings"]
    assert root["code"] == "overwrite"
    assert "mma_wait" in root["fix"]
    led = [c["code"] for c in root["consequences"]]
    assert "phase-alias" in led and "hang" in led
    # the symptoms' schedules are shorter than the cause's: it leads because it is the cause, not the first seen
    alias = next(c for c in root["consequences"] if c["code"] == "phase-alias")
    assert len(alias["trace"]) < len(root["trace"])
    assert all(c["led_by"] for c in root["consequences"])


def test_without_a_budget_the_search_stops_at_the_first_finding():
    data = verify_json(DATA / "early_release_three_stages.pipe", "--cause-budget", "0")
    assert all(f["consequences"] == [] for f in data["findings"])
    assert data["semantics"]["cause_budget"] == 0


def test_the_state_count_is_the_one_of_the_first_finding():
    with_budget = verify_json(DATA / "early_release_three_stages.pipe")
    without = verify_json(DATA / "early_release_three_stages.pipe", "--cause-budget", "0")
    assert with_budget["stats"]["states"] == without["stats"]["states"]
    assert with_budget["findings"][0]["trace"] == without["findings"][0]["trace"]


def test_a_phase_alias_that_leads_to_a_hang_is_one_issue():
    data = verify_json(DATA / "warpgroup_waits_one_arrives.pipe")
    [root] = data["findings"]
    assert root["code"] == "phase-alias"
    assert [c["code"] for c in root["consequences"]] == ["hang"]


def test_a_hang_left_by_an_exited_peer_goes_with_the_exit_and_the_fix_is_a_producer_tail():
    data = verify_json(DATA / "pair_loop_lengths_differ.pipe")
    [root] = data["findings"]
    assert root["code"] == "exit-inflight"
    assert "producer tail" in root["fix"]
    assert [c["code"] for c in root["consequences"]] == ["hang"]
    code, out, _ = cli("verify", str(DATA / "pair_loop_lengths_differ.pipe"))
    assert code == 1 and "leads to:" in out and "usual fix: a producer tail" in out


def test_the_budget_is_deterministic():
    a = cli("verify", str(DATA / "early_release_three_stages.pipe"), "--format", "json")
    b = cli("verify", str(DATA / "early_release_three_stages.pipe"), "--format", "json")
    assert a == b


# ---------------------------------------------------------------- 4. no false claims

def test_the_lockstep_note_is_decided_at_the_failing_point():
    data = verify_json(DATA / "single_thread_hang_at_one_tile.pipe", "--all-params")
    [hang] = data["findings"]
    assert hang["code"] == "hang"
    assert hang["needs_independent_scheduling"] is False
    assert "independent thread scheduling" not in (hang["when"] or "")


def test_the_lockstep_note_still_shows_where_lockstep_removes_the_finding():
    data = verify_json(ROOT / "examples" / "bugs" / "lane_falls_behind.pipe")
    assert data["findings"][0]["needs_independent_scheduling"] is True
    assert data["findings"][0]["severity"] == "latent"


def test_writing_over_a_live_barrier_is_the_barrier_lifetime_finding():
    data = verify_json(DATA / "scratch_over_live_barrier.pipe")
    [f] = data["findings"]
    assert f["code"] == "uninit-barrier"
    assert "inval" in f["message"] and "TMA" not in f["why"] and "reader" not in f["why"]
    assert "inval" in f["fix"]


@pytest.mark.parametrize("late,dropped", [(0, False), (1, True)])
def test_dropped_arrivals_are_claimed_only_when_some_had_arrived(late, dropped):
    data = verify_json(DATA / "reinit_live_barrier.pipe", "-D", f"LATE={late}")
    [f] = data["findings"]
    assert f["code"] == "uninit-barrier"
    assert ("silently dropped" in f["message"]) is dropped


def test_why_fits_an_accumulator(spec):
    data = verify_json(ROOT / "examples" / "bugs" / "umma_acc_no_wait.pipe")
    f = data["findings"][0]
    assert f["code"] == "overwrite" and "accumulator" in f["why"] and "TMA load" not in f["why"]


def test_why_fits_a_writer(tmp_path):
    p = write_spec(tmp_path, """
kernel writer_under_wgmma {
  arch sm_90
  smem A bytes 8192
  mbarrier full count 1
  role producer thread {
    arrive full expect_tx 8192
    tma_load A tile 0 bytes 8192 barrier full
  }
  role consumer warpgroup {
    wait full parity 0
    mma_async A tile 0
    write A tile 1
    mma_wait 0
  }
}
""")
    data = verify_json(p)
    f = next(f for f in data["findings"] if f["code"] == "overwrite" and " writes A " in f["message"])
    assert "mma_wait" in f["why"] and "TMA load replaced" not in f["why"]


# ---------------------------------------------------------------- 5. severity and --fail-on

def test_a_warp_falling_behind_its_warpgroup_is_latent_not_an_error_on_current_hardware():
    data = verify_json(DATA / "warpgroup_waits_one_arrives.pipe")
    [f] = data["findings"]
    assert f["severity"] == "latent" and any("warp" in r for r in f["latent"])
    assert "manifests on current hardware" not in json.dumps(data)
    code, out, _ = cli("verify", str(DATA / "warpgroup_waits_one_arrives.pipe"))
    assert code == 1 and re.search(r":\d+:\d+: latent: ", out)


@pytest.mark.parametrize("fail_on,code", [("error", 0), ("latent", 1), ("any", 1)])
def test_fail_on_selects_which_findings_exit_1(fail_on, code):
    got, out, _ = cli("verify", str(DATA / "warpgroup_waits_one_arrives.pipe"), "--fail-on", fail_on)
    assert got == code
    data = verify_json(DATA / "warpgroup_waits_one_arrives.pipe", "--fail-on", fail_on)
    assert data["verdict"] == "findings" and data["exit_code"] == code


def test_an_error_fails_whatever_the_level():
    for level in ("error", "latent", "any"):
        code, _, _ = cli("verify", str(DATA / "early_release_three_stages.pipe"), "--fail-on", level)
        assert code == 1
    data = verify_json(DATA / "early_release_three_stages.pipe")
    assert data["findings"][0]["severity"] == "error" and data["findings"][0]["latent"] == []


def test_fail_on_takes_only_its_levels():
    code, _, err = cli("verify", str(DATA / "early_release_three_stages.pipe"), "--fail-on", "warning")
    assert code == 2 and "invalid choice" in err and "Traceback" not in err


# ---------------------------------------------------------------- 6. compact reports

def test_a_hang_names_roles_and_warp_ranges():
    data = verify_json(DATA / "consumer_warps_wait_forever.pipe")
    [f] = data["findings"]
    assert f["message"].startswith("consumer[0..1] warps 1-3 wait on go parity 0 forever")
    assert [(b["role"], b["threads"]) for b in f["blocked"]] == [("consumer[0]", "warps 1-3"), ("consumer[1]", "warps 1-3")]


def test_the_text_timeline_fits_120_columns_for_four_roles():
    code, out, _ = cli("verify", str(DATA / "consumer_warps_wait_forever.pipe"))
    assert code == 1
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.lstrip().startswith("step |"))
    end = next(i for i, l in enumerate(lines) if l.startswith("barriers at the failure"))
    table = lines[start:end]
    assert table[0].count("|") == 7  # step, line, four roles, async, barriers
    assert max(len(l) for l in table) <= 120


def test_the_html_timeline_opens_at_the_failing_step_and_marks_warps_that_never_moved(tmp_path):
    out = tmp_path / "r.html"
    code, _, _ = cli("verify", str(DATA / "consumer_warps_wait_forever.pipe"), "--format", "html", "-o", str(out))
    assert code == 1
    html = out.read_text()
    assert 'id="finding-1-failing"' in html and 'href="#finding-1-failing"' in html
    assert "scroll-snap-align" in html and "<script" not in html
    assert "never moved" in html


def test_sarif_carries_severity_fix_and_consequences():
    code, out, _ = cli("verify", str(DATA / "warpgroup_waits_one_arrives.pipe"),
                       str(DATA / "early_release_three_stages.pipe"), "--format", "sarif")
    assert code == 1
    results = json.loads(out)["runs"][0]["results"]
    latent = next(r for r in results if r["ruleId"] == "phase-alias")
    assert latent["level"] == "warning" and latent["properties"]["severity"] == "latent"
    cause = next(r for r in results if r["ruleId"] == "overwrite")
    assert cause["level"] == "error" and "mma_wait" in cause["properties"]["fix"]
    assert {c["code"] for c in cause["properties"]["consequences"]} >= {"phase-alias", "hang"}


STORE_EXIT = """
kernel store_exit {
  arch sm_90
  smem D bytes 4096
  role epilogue thread {
    write D tile 0
    fence_proxy_async
    tma_store D tile 0
    commit_group
    DRAIN
  }
}
"""


def test_a_cta_exiting_with_its_store_in_flight_is_latent(tmp_path):
    """The H200 kept a CTA's shared memory until its bulk stores had read it (benchmarks/hw/probe_store_exit.cu):
    the exit-inflight of a store is latent, with the measurement as its reason; drained, the kernel verifies."""
    data = verify_json(write_spec(tmp_path, STORE_EXIT.replace("DRAIN", "")))
    (issue,) = data["findings"]
    assert issue["code"] == "exit-inflight" and issue["severity"] == "latent"
    assert any("probe_store_exit.cu" in why for why in issue["latent"])
    assert verify_json(write_spec(tmp_path, STORE_EXIT.replace("DRAIN", "wait_group_read 0")))["verdict"] == "verified"
    code, out, err = cli("verify", str(write_spec(tmp_path, STORE_EXIT.replace("DRAIN", ""))), "--fail-on", "error")
    assert code == 0 and "latent on current hardware: the H200 kept" in out, out + err
