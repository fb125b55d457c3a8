"""Blackwell and cluster constructs (issue 18): each construct's real outcome, and its bad input.

Barrier init seen by the async proxy, tcgen05 fences and tensor memory, setmaxnreg, per-CTA barrier
counts and TMA loads completing on a peer CTA's barrier; the golden corpus has a correct and a buggy
example of each (examples/), these tests pin what each rule looks at.
"""
from __future__ import annotations

from pathlib import Path

from conftest import ROOT, cli, verify_json, write_spec


def codes(data: dict) -> set[str]:
    return {f["code"] for f in data["findings"]} | {f["code"] for f in data["static"]}


def lines(data: dict, code: str) -> set[int]:
    return {f["location"]["line"] for f in data["findings"] if f["code"] == code}


# ---------------------------------------------------------------- barrier init and the async proxy
INIT = """
kernel k {{
  arch sm_90
  smem A bytes 4096
  mbarrier full count 1 noinit
  role producer thread {{
    init full count 1
    {fence}
    syncthreads
    arrive full expect_tx 4096
    tma_load A tile 0 bytes 4096 barrier full
    wait full parity 0
    read A tile 0
  }}
}}
"""


def test_init_without_fence_is_missing_init_fence_even_for_the_initialising_thread(tmp_path):
    data = verify_json(write_spec(tmp_path, INIT.format(fence="")))
    assert codes(data) == {"missing-init-fence"}
    assert lines(data, "missing-init-fence") == {11}  # the tma_load


def test_either_fence_makes_the_init_visible_to_the_async_proxy(tmp_path):
    for fence in ("fence_barrier_init", "fence_proxy_async"):
        data = verify_json(write_spec(tmp_path, INIT.format(fence=fence), f"{fence}.pipe"))
        assert data["verdict"] == "verified", (fence, data["findings"])


def test_a_fence_after_the_load_is_too_late(tmp_path):
    text = INIT.format(fence="").replace("    read A tile 0", "    fence_proxy_async\n    read A tile 0")
    assert codes(verify_json(write_spec(tmp_path, text))) == {"missing-init-fence"}


def test_the_examples_of_barrier_init():
    assert verify_json(ROOT / "examples/barrier_init_async.pipe")["verdict"] == "verified"
    data = verify_json(ROOT / "examples/bugs/barrier_init_no_async_fence.pipe")
    assert codes(data) == {"missing-init-fence"}
    consequences = {c["code"] for f in data["findings"] for c in f.get("consequences", ())}
    assert "uninit-barrier" in consequences  # the consumers' waits: the generic rule wants a fence too


def test_missing_init_fence_from_bmc(tmp_path):
    data = verify_json(write_spec(tmp_path, INIT.format(fence="")), "--engine", "bmc")
    assert codes(data) == {"missing-init-fence"}


# ---------------------------------------------------------------- tcgen05 fences and tensor memory
T5 = """
kernel k {{
  arch sm_100
  smem AB bytes 4096
  tmem ACC bytes 4096
  mbarrier full count 1
  mbarrier acc_full count 1
  role mma thread {{
    arrive full expect_tx 4096
    tma_load AB tile 0 bytes 4096 barrier full
    wait full parity 0
    mma_async AB tile 0 into ACC tile 0
    mma_commit acc_full
  }}
  role epilogue warp {{
    wait acc_full parity 0
    {after}
    read ACC tile 0
    {before}
    bar_sync 1, 32
    {dealloc}
  }}
}}
"""


def t5(tmp_path, name: str, after: str = "tcgen05_after_thread_sync", before: str = "tcgen05_before_thread_sync",
       dealloc: str = "tcgen05_after_thread_sync\n    tmem_dealloc") -> dict:
    return verify_json(write_spec(tmp_path, T5.format(after=after, before=before, dealloc=dealloc), name))


def test_fenced_tcgen05_work_verifies(tmp_path):
    assert t5(tmp_path, "ok.pipe")["verdict"] == "verified"


def test_a_tcgen05_ld_after_a_commit_barrier_needs_the_after_fence(tmp_path):
    data = t5(tmp_path, "after.pipe", after="")
    assert codes(data) == {"missing-tcgen05-fence"}
    assert lines(data, "missing-tcgen05-fence") == {18}  # the read of ACC
    assert "tcgen05_after_thread_sync" in data["findings"][0]["message"]


def test_tcgen05_work_before_a_sync_needs_the_before_fence(tmp_path):
    data = t5(tmp_path, "before.pipe", before="")
    assert codes(data) == {"missing-tcgen05-fence"}
    assert lines(data, "missing-tcgen05-fence") == {20}  # the bar_sync


def test_a_wait_on_a_tma_barrier_needs_no_tcgen05_fence(tmp_path):
    # the mma thread's mma_async follows a wait on `full`, which only a TMA load completes
    assert t5(tmp_path, "tma.pipe")["findings"] == []


def test_without_any_tcgen05_statement_the_fences_are_not_checked(tmp_path):
    data = t5(tmp_path, "plain.pipe", after="", before="", dealloc="")
    assert data["verdict"] == "verified"


def test_tmem_used_after_tmem_dealloc_is_tmem_free_inflight(tmp_path):
    text = T5.format(after="tcgen05_after_thread_sync", before="tcgen05_before_thread_sync", dealloc="").replace(
        "  role mma thread {\n", "  role mma thread {\n    tmem_dealloc\n    tcgen05_before_thread_sync\n", 1)
    data = verify_json(write_spec(tmp_path, text))
    assert codes(data) == {"tmem-free-inflight"}
    assert lines(data, "tmem-free-inflight") == {14}  # the mma_async into ACC


def test_tmem_dealloc_while_an_mma_writes_it_is_tmem_free_inflight(tmp_path):
    text = T5.format(after="tcgen05_after_thread_sync", before="tcgen05_before_thread_sync", dealloc="").replace(
        "    mma_commit acc_full\n", "    tmem_dealloc\n    tcgen05_before_thread_sync\n    mma_commit acc_full\n", 1)
    data = verify_json(write_spec(tmp_path, text))
    assert codes(data) == {"tmem-free-inflight"}


# A CUTLASS-style TMEM allocation: the MMA warp allocates right after the kernel's first sync and publishes the
# address through a named barrier to the epilogue warp, which then uses the TMEM (a tcgen05.st). {pre} stands before the
# alloc; {before} / {after} around the publishing barrier.
ALLOC = """
kernel k {{
  arch sm_100
  tmem ACC bytes 4096
  role mma warp {{
    syncthreads
    {pre}
    tmem_alloc
    {before}
    bar_arrive 1, 64
  }}
  role epilogue warp {{
    syncthreads
    bar_sync 1, 64
    {after}
    write ACC tile 0
  }}
}}
"""


def alloc(tmp_path, pre: str = "", before: str = "", after: str = "tcgen05_after_thread_sync") -> dict:
    return verify_json(write_spec(tmp_path, ALLOC.format(pre=pre, before=before, after=after)))


def test_a_tmem_alloc_after_the_first_sync_needs_no_after_fence(tmp_path):
    # no tcgen05 operation comes before the syncthreads, so it orders none after it (PTX ISA 9.7.16.6.3); and
    # tcgen05.alloc is a synchronous tcgen05 instruction (9.7.16.6.1), which neither fence orders
    data = alloc(tmp_path)
    assert data["verdict"] == "verified", [f["message"] for f in data["findings"]]


def test_a_tmem_alloc_needs_no_before_fence_but_its_readers_need_the_after_fence(tmp_path):
    # the alloc is tcgen05 work the named barrier orders before the epilogue's tcgen05.st (asynchronous)
    data = alloc(tmp_path, after="")
    assert codes(data) == {"missing-tcgen05-fence"}
    assert lines(data, "missing-tcgen05-fence") == {16}  # the write of ACC, not the alloc's bar_arrive


def test_a_sync_after_asynchronous_tcgen05_work_still_orders_it(tmp_path):
    # the same first syncthreads, now after a tcgen05.st of the MMA warp: the alloc after it is synchronous and
    # needs no fence, but the unfenced tcgen05.st before the sync is reported there
    text = ALLOC.format(pre="", before="", after="tcgen05_after_thread_sync").replace(
        "  role mma warp {\n    syncthreads\n", "  role mma warp {\n    write ACC tile 0\n    syncthreads\n", 1)
    data = verify_json(write_spec(tmp_path, text, "st.pipe"))
    assert codes(data) == {"missing-tcgen05-fence"}
    assert lines(data, "missing-tcgen05-fence") == {7}  # the syncthreads after the tcgen05.st


def test_only_a_generation_with_tcgen05_work_before_it_needs_the_after_fence(tmp_path):
    # two generations of one named barrier: the first follows no tcgen05 work, the second the producer's
    # fenced tcgen05.st; only the consumer's tcgen05.ld after the second needs tcgen05_after_thread_sync
    text = """
kernel k {
  arch sm_100
  tmem ACC bytes 4096
  role producer warp {
    bar_sync 1, 64
    write ACC tile 0
    tcgen05_before_thread_sync
    bar_sync 1, 64
  }
  role consumer warp {
    bar_sync 1, 64
    write ACC tile 0
    bar_sync 1, 64
    AFTER
    read ACC tile 0
  }
}
"""
    # the consumer's own tcgen05.st right after the first generation needs no fence; its arrival at the
    # second without tcgen05_before_thread_sync is reported, and so is its read after it without the after fence
    data = verify_json(write_spec(tmp_path, text.replace("AFTER", "tcgen05_after_thread_sync"), "a.pipe"))
    assert lines(data, "missing-tcgen05-fence") == {14}  # the consumer's second bar_sync: its tcgen05.st unfenced
    fenced = text.replace("    write ACC tile 0\n    bar_sync 1, 64\n    AFTER",
                          "    write ACC tile 0\n    tcgen05_before_thread_sync\n    bar_sync 1, 64\n    AFTER")
    assert verify_json(write_spec(tmp_path, fenced.replace("AFTER", "tcgen05_after_thread_sync"),
                                  "b.pipe"))["verdict"] == "verified"
    data = verify_json(write_spec(tmp_path, fenced.replace("AFTER", ""), "c.pipe"))
    assert codes(data) == {"missing-tcgen05-fence"}
    assert lines(data, "missing-tcgen05-fence") == {17}  # the read after the second generation


def test_the_examples_of_tcgen05():
    assert verify_json(ROOT / "examples/tcgen05_ordering.pipe")["verdict"] == "verified"
    assert codes(verify_json(ROOT / "examples/bugs/tcgen05_no_after_fence.pipe")) == {"missing-tcgen05-fence"}
    assert codes(verify_json(ROOT / "examples/bugs/tmem_free_no_sync.pipe")) == {"tmem-free-inflight"}


def test_tcgen05_statements_on_sm90_are_a_rule_error_with_a_location(tmp_path):
    text = T5.format(after="tcgen05_after_thread_sync", before="", dealloc="").replace("arch sm_100", "arch sm_90")
    path = write_spec(tmp_path, text)
    code, out, err = cli("check", str(path))
    assert code == 2
    assert f"{path}:17:5: error: 'tcgen05_after_thread_sync' is a tcgen05 instruction" in err
    assert "[rule]" in err and "Traceback" not in err


def test_a_misspelt_tcgen05_statement_is_a_syntax_error_with_a_location(tmp_path):
    path = write_spec(tmp_path, T5.format(after="tcgen05_after_thread_snyc", before="", dealloc=""))
    code, out, err = cli("check", str(path))
    assert code == 2
    assert f"{path}:17:5: error:" in err and "[syntax]" in err and "Traceback" not in err


def test_bmc_and_replay_refuse_tcgen05_by_name(tmp_path):
    path = write_spec(tmp_path, T5.format(after="tcgen05_after_thread_sync", before="", dealloc=""))
    code, out, err = cli("verify", str(path), "--engine", "bmc")
    assert code == 2 and "--engine bmc does not model tcgen05 ordering" in err and ":17:5:" in err
    code, out, err = cli("replay", "--emit-cuda", str(tmp_path / "out.cu"), str(path))
    assert code == 2 and "'tcgen05_after_thread_sync' (sm_100 only)" in err and "[replay]" in err


# ---------------------------------------------------------------- setmaxnreg
NREG = """
kernel k {{
  arch sm_90a
  role r warpgroups 2 {{
    {body}
  }}
}}
"""


def test_setmaxnreg_meets_per_warpgroup(tmp_path):
    data = verify_json(write_spec(tmp_path, NREG.format(body="setmaxnreg inc 232")))
    assert data["verdict"] == "verified"


def test_setmaxnreg_in_a_divergent_branch_hangs(tmp_path):
    data = verify_json(write_spec(tmp_path, NREG.format(body="if warp != 5 { setmaxnreg dec 40 }")))
    assert codes(data) == {"hang"}
    assert "setmaxnreg" in data["findings"][0]["message"]


def test_two_setmaxnreg_statements_do_not_meet(tmp_path):
    body = "if warp < 2 { setmaxnreg dec 40 } else { setmaxnreg dec 40 }"
    assert codes(verify_json(write_spec(tmp_path, NREG.format(body=body)))) == {"hang"}


def test_setmaxnreg_examples_and_engines():
    assert verify_json(ROOT / "examples/setmaxnreg.pipe")["verdict"] == "verified"
    bug = ROOT / "examples/bugs/setmaxnreg_divergent.pipe"
    assert codes(verify_json(bug)) == {"hang"}


def test_setmaxnreg_divergence_from_bmc(tmp_path):
    data = verify_json(write_spec(tmp_path, NREG.format(body="if warp != 5 { setmaxnreg dec 40 }")), "--engine", "bmc")
    assert codes(data) == {"hang"}


def test_setmaxnreg_bad_input_is_located(tmp_path):
    for body, word in (("setmaxnreg up 40", "`inc` or `dec`"), ("setmaxnreg inc 41", "multiple of 8 in 24..256")):
        path = write_spec(tmp_path, NREG.format(body=body), "bad.pipe")
        code, out, err = cli("check", str(path))
        assert code == 2 and f"{path}:5:" in err and word in err and "Traceback" not in err, err


def test_replay_refuses_setmaxnreg_by_name(tmp_path):
    code, out, err = cli("replay", "--emit-cuda", str(tmp_path / "o.cu"), str(ROOT / "examples/setmaxnreg.pipe"))
    assert code == 2 and "'setmaxnreg dec 40'" in err and "[replay]" in err


# ---------------------------------------------------------------- per-CTA barrier counts
CTA_COUNT = """
kernel k {{
  cluster 2
  mbarrier b count {count}
  role r[2] thread {{
    if instance <= cta {{ arrive b }}
    wait b parity 0
  }}
}}
"""


def test_a_count_may_depend_on_the_cta(tmp_path):
    assert verify_json(write_spec(tmp_path, CTA_COUNT.format(count="cta + 1")))["verdict"] == "verified"
    data = verify_json(write_spec(tmp_path, CTA_COUNT.format(count="2 - cta"), "swapped.pipe"))
    assert codes(data) == {"hang"}  # CTA 0 waits for a second arrival that never comes
    assert "cta0.b" in data["findings"][0]["message"]


def test_a_per_cta_count_from_bmc_and_in_the_generated_cuda(tmp_path):
    path = write_spec(tmp_path, CTA_COUNT.format(count="2 - cta"))
    assert codes(verify_json(path, "--engine", "bmc")) == {"hang"}
    code, out, err = cli("replay", "--emit-cuda", str(tmp_path / "o.cu"), str(path))
    assert code == 0, err
    assert "(rank == 1u ? 1u : 2u)" in (tmp_path / "o.cu").read_text()


def test_the_examples_of_per_cta_counts():
    data = verify_json(ROOT / "examples/leader_empty_counts.pipe")
    assert data["verdict"] == "verified"
    bug = verify_json(ROOT / "examples/bugs/leader_empty_own_count.pipe")
    assert codes(bug) == {"arrive-fault", "overwrite", "stale-read"}
    # the stale-read's schedule is longer: the search meets it past the first finding (within the default budget since
    # session 25; 2,000-3,000 states past it before), and a larger budget lists the same
    longer = verify_json(ROOT / "examples/bugs/leader_empty_own_count.pipe", "--cause-budget", "3000")
    assert codes(longer) == {"arrive-fault", "overwrite", "stale-read"}


def test_a_per_cta_count_out_of_range_names_the_cta_and_its_location(tmp_path):
    path = write_spec(tmp_path, CTA_COUNT.format(count="cta - 1"), "bad.pipe")
    code, out, err = cli("check", str(path))
    assert code == 2 and f"{path}:4:20: error: mbarrier b is initialised with count -1 in CTA 0" in err
    assert "[rule]" in err and "Traceback" not in err
    path = write_spec(tmp_path, CTA_COUNT.format(count="lane + 1"), "lane.pipe")
    code, out, err = cli("check", str(path))
    assert code == 2 and f"{path}:4:20:" in err and "'lane'" in err and "Traceback" not in err


# ---------------------------------------------------------------- TMA loads landing in a peer CTA (2-SM load)
PEER_LOAD = """
kernel k {{
  cluster 2
  smem A bytes 4096
  mbarrier full count 1
  role r thread {{
    if cta == 0 {{
      tma_load A tile 7 bytes 4096 barrier full on cta 1
    }} else {{
      {peer}
    }}
  }}
}}
"""
PEER_WAITS = "arrive full expect_tx {n}\n      wait full parity 0\n      read A tile 7"


def test_a_load_on_a_peer_cta_lands_in_its_buffer_and_completes_its_barrier(tmp_path):
    data = verify_json(write_spec(tmp_path, PEER_LOAD.format(peer=PEER_WAITS.format(n=4096))))
    assert data["verdict"] == "verified", data["findings"]
    # the issuing CTA's own barrier and buffer are not touched: a read there is stale
    text = PEER_LOAD.format(peer=PEER_WAITS.format(n=4096)).replace(
        "barrier full on cta 1\n", "barrier full on cta 1\n      read A tile 7\n")
    assert codes(verify_json(write_spec(tmp_path, text, "own.pipe"))) == {"stale-read"}


def test_a_peer_load_expecting_half_its_bytes_hangs(tmp_path):
    data = verify_json(write_spec(tmp_path, PEER_LOAD.format(peer=PEER_WAITS.format(n=2048))))
    assert codes(data) == {"hang", "expect-tx-mismatch"}
    assert any("cta1.full" in f["message"] for f in data["findings"])


def test_a_peer_that_exits_under_the_load_is_exit_inflight(tmp_path):
    data = verify_json(write_spec(tmp_path, PEER_LOAD.format(peer="arrive full expect_tx 4096")))
    assert "exit-inflight" in codes(data)


def test_the_examples_of_the_two_sm_load():
    assert verify_json(ROOT / "examples/two_sm_load.pipe")["verdict"] == "verified"
    bug = ROOT / "examples/bugs/two_sm_load_half_bytes.pipe"
    assert codes(verify_json(bug)) == {"hang", "expect-tx-mismatch"}


def test_the_peer_load_from_bmc(tmp_path):
    assert verify_json(write_spec(tmp_path, PEER_LOAD.format(peer=PEER_WAITS.format(n=4096))),
                       "--engine", "bmc")["verdict"] == "verified"
    data = verify_json(write_spec(tmp_path, PEER_LOAD.format(peer=PEER_WAITS.format(n=2048)), "half.pipe"),
                       "--engine", "bmc")
    assert codes(data) == {"hang", "expect-tx-mismatch"}


def test_a_peer_load_with_a_multicast_mask_is_a_rule_error_with_a_location(tmp_path):
    text = PEER_LOAD.format(peer="").replace("barrier full on cta 1", "barrier full multicast 0b11 on cta 1")
    path = write_spec(tmp_path, text, "bad.pipe")
    code, out, err = cli("check", str(path))
    assert code == 2 and f"{path}:8:" in err and "multicast" in err and "[rule]" in err and "Traceback" not in err
    path = write_spec(tmp_path, PEER_LOAD.format(peer="").replace("on cta 1", "on cta"), "syntax.pipe")
    code, out, err = cli("check", str(path))
    assert code == 2 and f"{path}:" in err and "[syntax]" in err and "Traceback" not in err


def test_replay_refuses_the_two_sm_load_by_name(tmp_path):
    code, out, err = cli("replay", "--emit-cuda", str(tmp_path / "o.cu"), str(ROOT / "examples/two_sm_load.pipe"))
    assert code == 2 and "'tma_load ... on cta'" in err and "[replay]" in err and ":37:9:" in err


# ---------------------------------------------------------------- tcgen05 with cta_group::2 (a CTA pair)
PAIR = """
kernel k {{
  arch sm_100
  cluster 2
  smem A bytes 4096
  tmem ACC bytes 4096
  mbarrier full count 1
  mbarrier acc_full count 1
  role mma thread {{
    if cta == 0 {{
      arrive full expect_tx 8192
    }}
    tma_load A tile 0 bytes 4096 barrier full cta_group 2
    if cta == {leader} {{
      wait full parity 0
      mma_async A tile 0 into ACC tile 0 cta_group 2
      mma_commit acc_full{mask}
    }}
  }}
  role epi warp {{
    {wait}
    read ACC tile 0
  }}
}}
"""


def pair(tmp_path, name: str, leader: int = 0, mask: str = " multicast 0b11",
         wait: str = "wait acc_full parity 0") -> Path:
    return write_spec(tmp_path, PAIR.format(leader=leader, mask=mask, wait=wait), name)


def test_a_pair_mma_reads_both_ctas_and_writes_both_halves(tmp_path):
    assert verify_json(pair(tmp_path, "ok.pipe"))["verdict"] == "verified"
    # the leader's MMA needs the peer's half landed: without the leader's expect_tx counting it, it reads early
    text = PAIR.format(leader=0, mask=" multicast 0b11", wait="wait acc_full parity 0").replace(
        "expect_tx 8192", "expect_tx 4096")
    data = verify_json(write_spec(tmp_path, text, "half.pipe"))
    assert "stale-read" in codes(data) and lines(data, "stale-read") == {16}  # the mma_async


def test_a_commit_that_misses_the_peer_leaves_its_epilogue_hanging(tmp_path):
    data = verify_json(pair(tmp_path, "nomask.pipe", mask=""))
    assert codes(data) == {"hang"}
    assert "cta1.epi" in data["findings"][0]["message"] and "acc_full" in data["findings"][0]["message"]


def test_the_peer_reading_its_half_before_the_commit_is_a_stale_read(tmp_path):
    data = verify_json(pair(tmp_path, "early.pipe", wait="if cta == 0 {\n      wait acc_full parity 0\n    }"))
    assert "stale-read" in codes(data)
    assert any(f["code"] == "stale-read" and "cta1.ACC" in f["message"] for f in data["findings"])


def test_a_pair_mma_from_the_odd_cta_is_a_rule_error_with_a_location(tmp_path):
    path = pair(tmp_path, "odd.pipe", leader=1)
    code, out, err = cli("verify", str(path))
    assert code == 2 and f"{path}:16:7:" in err and "[rule]" in err and "CTA 1" in err and "Traceback" not in err


def test_cta_group_2_needs_an_even_cluster_and_sm_100(tmp_path):
    for old, new, line in (("cluster 2", "cluster 3", 13), ("cluster 2", "cluster 1", 13), ("arch sm_100", "arch sm_90", 13)):
        path = write_spec(tmp_path, PAIR.format(leader=0, mask="", wait="").replace(old, new), "bad.pipe")
        code, out, err = cli("check", str(path))
        assert code == 2 and f"{path}:{line}:" in err and "[rule]" in err and "Traceback" not in err, (new, err)
    path = write_spec(tmp_path, PAIR.format(leader=0, mask="", wait="").replace("cta_group 2\n", "cta_group 3\n"))
    code, out, err = cli("check", str(path))
    assert code == 2 and f"{path}:13:" in err and "1 or 2" in err


def test_a_peer_exiting_under_the_pair_mma_is_exit_inflight(tmp_path):
    # the leader waits for its own commit; the peer's epilogue does nothing, so CTA 1 may exit while the MMA reads it
    text = PAIR.format(leader=0, mask="", wait="").replace("    read ACC tile 0\n", "").replace(
        "      mma_commit acc_full\n", "      mma_commit acc_full\n      wait acc_full parity 0\n")
    data = verify_json(write_spec(tmp_path, text, "exit.pipe"), "--all")
    assert any(f["code"] == "exit-inflight" and "CTA 1 exits while an mma_async" in f["message"]
               for f in data["findings"] + [c for f in data["findings"] for c in f.get("consequences", ())])


def test_the_examples_of_the_pair_mma():
    assert verify_json(ROOT / "examples/umma_2sm.pipe")["verdict"] == "verified"
    assert codes(verify_json(ROOT / "examples/bugs/umma_2sm_commit_not_multicast.pipe")) == {"hang"}
    data = verify_json(ROOT / "examples/bugs/umma_2sm_peer_skips_empty_wait.pipe")
    assert codes(data) == {"overwrite", "stale-read"}
    assert any("cta1.AB" in f["message"] for f in data["findings"] if f["code"] == "overwrite")


def test_the_pair_mma_from_bmc(tmp_path):
    assert verify_json(pair(tmp_path, "ok.pipe"), "--engine", "bmc")["verdict"] == "verified"
    assert codes(verify_json(pair(tmp_path, "nomask.pipe", mask=""), "--engine", "bmc")) == {"hang"}
    early = pair(tmp_path, "early.pipe", wait="if cta == 0 {\n      wait acc_full parity 0\n    }")
    assert "stale-read" in codes(verify_json(early, "--engine", "bmc"))


def test_replay_refuses_the_pair_mma_by_name(tmp_path):
    code, out, err = cli("replay", "--emit-cuda", str(tmp_path / "o.cu"), str(pair(tmp_path, "ok.pipe")))
    assert code == 2 and "cta_group 2" in err and "[replay]" in err and "Traceback" not in err


# ---------------------------------------------------------------- cluster launch control (try_cancel, query_cancel)
CLC = """
kernel k {{
  arch sm_100
  clc {bound}
  param STAGES = 2 in 1..2
  param MAX_TILES = 4 in 1..8
  smem R[STAGES] bytes 16
  smem A bytes 4096
  mbarrier clc_full[STAGES] count 1
  mbarrier clc_empty[STAGES] count 2
  role sched thread {{
    ring st(STAGES, phase = 1)
    for n in 0 .. MAX_TILES {{
      {acquire}
      arrive clc_full[st.index] expect_tx 16
      try_cancel R[st.index] tile n barrier clc_full[st.index]
      let cst = st.index
      let cph = st.phase ^ 1
      wait clc_full[cst] parity cph
      let more = query_cancel R[cst] tile n
      arrive clc_empty[cst]
      advance st
      if !more {{ break }}
    }}
  }}
  role worker thread {{
    ring st(STAGES)
    for n in 0 .. MAX_TILES {{
      write A tile n
      {wait}
      let more = query_cancel R[st.index] tile n
      arrive clc_empty[st.index]
      advance st
      if !more {{ break }}
    }}
  }}
}}
"""


def clc(tmp_path, name: str, bound: int = 2, acquire: str = "wait clc_empty[st.index] parity st.phase",
        wait: str = "wait clc_full[st.index] parity st.phase") -> Path:
    return write_spec(tmp_path, CLC.format(bound=bound, acquire=acquire, wait=wait), name)


def test_a_clc_tile_loop_verifies_for_every_count_of_canceled_clusters(tmp_path):
    data = verify_json(clc(tmp_path, "ok.pipe"))
    assert data["verdict"] == "verified", data["findings"]
    assert data["stats"]["configurations"] == 3  # clc 0, 1 and 2 clusters taken over


def test_the_roles_agree_on_the_answer_so_the_loop_length_follows_clc(tmp_path):
    # a worker that ignores the answer runs all 4 tiles; the scheduler stops after the first failed response, so
    # the worker waits for a response that never comes unless all 3 of clc 3's responses before the 4th succeed
    text = CLC.format(bound=3, acquire="wait clc_empty[st.index] parity st.phase",
                      wait="wait clc_full[st.index] parity st.phase").replace(
        "      advance st\n      if !more { break }\n    }\n  }\n}", "      advance st\n    }\n  }\n}")
    data = verify_json(write_spec(tmp_path, text, "ignores.pipe"))
    assert codes(data) == {"hang"}
    assert data["findings"][0]["condition"] == "clc != 3"


def test_reading_the_response_before_its_barrier_is_a_stale_read(tmp_path):
    data = verify_json(clc(tmp_path, "stale.pipe", wait=""))
    assert codes(data) >= {"stale-read"}
    assert lines(data, "stale-read") == {31}  # the worker's query_cancel


def test_reusing_the_response_before_the_consumers_read_it_is_an_overwrite(tmp_path):
    data = verify_json(clc(tmp_path, "reuse.pipe", acquire=""), "--all")
    assert "overwrite" in codes(data)
    assert 31 in lines(data, "overwrite")


def test_clc_from_bmc(tmp_path):
    assert codes(verify_json(clc(tmp_path, "stale.pipe", wait=""), "--engine", "bmc")) == {"stale-read"}
    assert codes(verify_json(clc(tmp_path, "reuse.pipe", acquire=""), "--engine", "bmc")) == {"overwrite"}


def test_clc_rules_are_errors_with_locations(tmp_path):
    base = CLC.format(bound=2, acquire="", wait="")
    cases = [(base.replace("sm_100", "sm_90"), 16, "sm_100 only"),
             (base.replace("  clc 2\n", ""), 15, "`clc N`"),
             (base.replace("R[STAGES] bytes 16", "R[STAGES] bytes 32"), 16, "16 bytes"),
             (base.replace("  role worker thread {\n", "  role worker thread {\n    break\n"), 27, "`break`"),
             (base.replace("clc 2", "clc 99"), 4, "outside 0..16")]
    for text, line, words in cases:
        path = write_spec(tmp_path, text, "bad.pipe")
        code, out, err = cli("check", str(path))
        assert code == 2 and f"{path}:{line}:" in err and words in err and "Traceback" not in err, (words, err)


def test_break_leaves_the_innermost_loop(tmp_path):
    text = """
kernel k {
  smem A[2] bytes 4096
  mbarrier full[2] count 1
  role r thread {
    for i in 0 .. 2 {
      for j in 0 .. 5 {
        if j == 1 { break }
        arrive full[i] expect_tx 4096
        tma_load A[i] tile i bytes 4096 barrier full[i]
        wait full[i] parity 0
        read A[i] tile i
      }
    }
  }
}
"""
    assert verify_json(write_spec(tmp_path, text))["verdict"] == "verified"  # j = 1 breaks: one phase per barrier
    assert codes(verify_json(write_spec(tmp_path, text.replace("j == 1", "j == 2"), "two.pipe"))) >= {"hang"}


def test_the_examples_of_cluster_launch_control():
    data = verify_json(ROOT / "examples/clc_scheduler.pipe")
    assert data["verdict"] == "verified" and data["stats"]["configurations"] == 3
    assert codes(verify_json(ROOT / "examples/bugs/clc_read_before_wait.pipe")) == {"stale-read"}
    assert codes(verify_json(ROOT / "examples/bugs/clc_response_reuse.pipe")) == {"overwrite"}


def test_replay_and_every_refuse_clc_by_name(tmp_path):
    code, out, err = cli("replay", "--emit-cuda", str(tmp_path / "o.cu"), str(clc(tmp_path, "ok.pipe")))
    assert code == 2 and "'try_cancel" in err and "[replay]" in err and ":16:" in err
    code, out, err = cli("verify", str(clc(tmp_path, "ok.pipe")), "--every", "MAX_TILES")
    assert code == 2 and "`break`" in err and "Traceback" not in err
