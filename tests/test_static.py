"""Static checks: tx bytes per barrier phase, tx and count ranges, the SMEM budget, tensor map descriptors."""
from __future__ import annotations

import pytest

from pipecheck.pipeline.verify import Options, verify_file
from conftest import ROOT, cli, verify_json


def static(path, *args) -> list[dict]:
    return verify_json(path, *args)["static"]


def codes(path, *args) -> set[str]:
    return {f["code"] for f in static(path, *args)}


@pytest.mark.parametrize("name", ["specs/cutlass_3722_fixed.pipe", "specs/cutlass_mixed_input.pipe", "examples/ring.pipe",
                                  "examples/bugs/double_arrive.pipe", "examples/bugs/stale_read.pipe"])
def test_balanced_protocols_have_no_static_finding(name):
    r = verify_file(str(ROOT / name), Options(explore=False))
    assert r.static == []


def test_3722_bytes_land_unannounced_only_for_lanes_1_to_31():
    (f,) = static(ROOT / "specs" / "cutlass_3722.pipe")
    assert f["code"] == "expect-tx-mismatch"
    assert f["location"]["line"] == 42  # the first tma_load: no expect_tx announces its phase
    assert "32768 bytes land but no expect_tx announces them" in f["message"]
    assert "elects a lane in 1..31" in f["message"]
    assert static(ROOT / "specs" / "cutlass_3722.pipe", "--elect", "lowest") == []


def test_oob_box_is_counted_whole():
    (f,) = static(ROOT / "examples" / "bugs" / "oob_expect_tx.pipe")
    assert f["code"] == "expect-tx-mismatch" and f["location"]["line"] == 32
    assert "announces 2304 bytes" in f["message"] and "deliver 8192" in f["message"]
    assert "out-of-bounds elements included" in f["message"]


MULTICAST = """
kernel k {{
  cluster 2
  smem A bytes 4096
  mbarrier full count 1
  role p thread {{
    arrive full expect_tx {announce}
    if cta == 0 {{ tma_load A tile 0 bytes 4096 barrier full multicast 3 }}
    wait full parity 0
  }}
}}
"""


def test_multicast_charges_each_cta_the_bytes_that_land_there(spec):
    assert codes(spec(MULTICAST.format(announce=4096))) == set()
    (f,) = static(spec(MULTICAST.format(announce=8192)))  # bytes x cluster size: both CTAs hang (H200 multicast 2)
    assert f["code"] == "expect-tx-mismatch"
    assert "cta0.full" in f["message"] and "announces 8192" in f["message"] and "deliver 4096" in f["message"]


def test_bytes_announced_for_a_load_that_never_comes(spec):
    path = spec("""
kernel k {
  smem A[2] bytes 1024
  mbarrier full[2] count 1
  role p thread {
    ring st(2)
    for k in 0 .. 3 {
      arrive full[st.index] expect_tx 1024
      if k < 2 { tma_load A[st.index] tile k bytes 1024 barrier full[st.index] }
      advance st
    }
  }
}
""")
    (f,) = static(path)
    assert "full[0] phase 1: expect_tx announces 1024 bytes but no load completes bytes on it" in f["message"]


def test_one_phase_owing_more_than_the_tx_range(spec):
    path = spec("""
kernel k {
  smem A[2] bytes 100000                  # fits the SMEM budget: a kernel that cannot launch is not checked further
  mbarrier full count 1
  role p thread {
    arrive full expect_tx 600000;           # `;`: else `expect_tx` reads as the arrive's option
    expect_tx full 600000
    tma_load A[0] tile 0 bytes 100000 barrier full
    tma_load A[1] tile 0 bytes 100000 barrier full
    wait full parity 0
  }
}
""")
    assert "tx-range" in codes(path)


def test_tx_range_over_a_parameter_range_gives_the_region_and_a_witness(spec):
    path = spec("""
kernel k {
  param T = 4 in 1..512
  smem A bytes 4096
  mbarrier b count 1
  role p thread {
    arrive b expect_tx T * 4096
    tma_load A tile 0 bytes T * 4096 barrier b
    wait b parity 0
  }
}
""")
    assert codes(path) == set()  # T = 4 is fine
    found = [f for f in static(path, "--all-params") if f["code"] == "tx-range"]
    assert found and "(only when T >= 256; witness: T=256)" in found[0]["message"]
    assert cli("check", str(path), "--all-params")[0] == 1


def test_arrival_count_range_over_parameters(spec):
    path = spec("""
kernel k {
  param W = 1 in 1..4096
  mbarrier b count W * 512
  role p thread { arrive b count W * 512  wait b parity 0 }
}
""")
    found = [f for f in static(path, "--all-params", "-D", "W=1..3000") if f["code"] == "arrive-fault"]
    assert found and all("W >= 2048" in f["message"] for f in found)


def test_smem_budget_reports_the_largest_configuration_that_fits():
    path = ROOT / "specs" / "cutlass_3722_fixed.pipe"
    assert codes(path) == set()  # STAGES = 4 fits
    (f,) = [f for f in static(path, "--all-params", "-D", "K_TILES=3..4") if f["code"] == "smem-budget"]
    assert "262272 bytes" in f["message"] and "232448" in f["message"]
    assert "the largest configuration that fits is STAGES=7 (229488 bytes)" in f["message"]
    assert "only when STAGES == 8" in f["message"]


def test_smem_budget_at_fixed_parameters_and_swizzle_alignment(spec):
    path = spec("""
kernel k {
  tensormap t { dtype bf16  dims [4096, 4096]  strides [8192]  box [64, 100]  swizzle 128 }
  smem A[3] bytes 64 * 100 * 2
  smem B[20] bytes 10000
  mbarrier full count 1
  role p thread {
    arrive full expect_tx 12800
    tma_load A[0] tile 0 map t barrier full
    wait full parity 0
  }
}
""")
    (f,) = static(path)
    # A's 12800-byte stages are 1024-aligned under the 128B swizzle: 3 x 13312; B's 10000 round up to 10112
    assert f["code"] == "smem-budget" and "A: 3 x 13312 bytes" in f["message"] and "B: 20 x 10112 bytes" in f["message"]


TMAP = """
kernel k {{
  tensormap t {{ {fields} }}
  smem A bytes 65536
  mbarrier full count 1
  role p thread {{
    arrive full expect_tx 1024
    complete_tx full 1024
    wait full parity 0
  }}
}}
"""


@pytest.mark.parametrize("fields,needle", [
    ("dtype bf16 dims [1000, 512] strides [1000] box [64, 64]",
     "strides[0] = 1000 is not a multiple of 16 bytes: strides are in bytes, and 1000 looks like a count of bf16 elements"),
    ("dtype bf16 dims [96, 100] strides [96] box [64, 64]",
     "strides[0] = 96 bytes is less than the 192 bytes dimension 0 spans"),
    ("dtype f32 dims [64, 64, 8] strides [256, 1024] box [64, 64, 1]", "strides[1] = 1024 bytes is less than the 16384"),
    ("dtype bf16 dims [4096, 4096] strides [8192] box [64, 300]", "box[1] = 300 is outside 1..256"),
    ("dtype bf16 dims [4096, 4096] strides [8192] box [4, 64]", "the inner box row is 8 bytes"),
    ("dtype bf16 dims [4096, 4096] strides [8192] box [128, 64] swizzle 64",
     "the inner box row is 256 bytes (128 x bf16), wider than the 64-byte span of swizzle 64B"),
    ("dtype bf16 dims [4096, 4096] strides [8192] box [64, 64] element_strides [1, 9]", "element_strides[1] = 9"),
    ("dtype bf16 dims [4096, 4096] strides [8192] box [64, 64] interleave 32", "rank 2"),
    ("dtype int8 dims [4096, 4096] strides [4096] box [64, 64] oob_fill nan", "NaN out-of-bounds fill"),
    ("dtype bf16 dims [4096, 4096] strides [8192] box [64, 64] stride [8192]", "unknown field 'stride'"),
    ("dtype bf16 dims [4096, 4096] box [64, 64]", "strides has 0 entries"),
    ("dtype bf99 dims [4096] box [64]", "unknown dtype 'bf99'"),
])
def test_tensor_map_rules(spec, fields, needle):
    found = static(spec(TMAP.format(fields=fields)))
    assert any(f["code"] == "tma-descriptor" and needle in f["message"] for f in found), [f["message"] for f in found]


def test_a_correct_tensor_map_has_no_finding(spec):
    assert codes(spec(TMAP.format(fields="dtype bf16 dims [4096, 4096] strides [8192] box [64, 64] swizzle 128"))) == set()


def test_the_element_stride_example_names_the_stride():
    (f,) = static(ROOT / "examples" / "bugs" / "tensormap_element_strides.pipe")
    assert f["code"] == "tma-descriptor" and f["location"]["line"] == 21
    assert "strides[0] = 1000" in f["message"] and "1000 x 2 = 2000 bytes" in f["message"]


def test_check_exits_1_on_static_findings_and_0_without():
    code, out, _ = cli("check", str(ROOT / "examples" / "bugs" / "tensormap_element_strides.pipe"))
    assert code == 1 and "[tma-descriptor]" in out and "^" in out
    assert cli("check", str(ROOT / "examples" / "ring.pipe"))[0] == 0


def test_static_findings_alone_make_the_verdict_findings():
    data = verify_json(ROOT / "examples" / "bugs" / "tensormap_element_strides.pipe")
    assert data["findings"] == [] and data["verdict"] == "findings" and data["exit_code"] == 1


def test_a_role_choice_leaves_the_accounting_silent(spec):
    path = spec("""
kernel k {
  smem A bytes 1024
  mbarrier full count 1
  role p thread {
    choose n in 0..1
    arrive full expect_tx 1024
    if n == 1 { tma_load A tile 0 bytes 1024 barrier full }
    wait full parity 0
  }
}
""")
    assert "expect-tx-mismatch" not in codes(path)  # each value of n would need its own accounting
    assert verify_json(path)["verdict"] == "findings"  # the model still finds the hang at n = 0
