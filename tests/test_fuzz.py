"""Fuzzing: generated and mutated specs never crash pipecheck; well-formed ones get a verdict (fuzz/oracle.py).

The default run takes a small fixed-seed slice of each kind of input; the `slow` test runs
10,000 inputs (as `python -m fuzz.run` does, which also counts crashes instead of stopping).
"""
from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, given, settings

from conftest import ROOT

sys.path.insert(0, str(ROOT))
from fuzz import oracle, specgen  # noqa: E402

SLICE = {"wellformed": 20, "grammar": 40, "bytes": 50, "tokens": 50}


@pytest.fixture(scope="module")
def box():
    with oracle.Sandbox() as b:
        yield b


def _check(inp: specgen.Input, box: oracle.Sandbox) -> None:
    out = oracle.judge(inp, box)
    assert not out.problems, (f"{inp.kind} input ({inp.origin or 'generated'}), pipecheck {' '.join(out.command)}: "
                              f"{out.problems}\n--- input\n{inp.data.decode('utf-8', 'replace')}\n--- stderr\n{out.stderr}")


def _fixed(n: int):
    return settings(max_examples=n, derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


@_fixed(SLICE["wellformed"])
@given(specgen.wellformed_specs())
def test_wellformed_specs_get_a_verdict(box, text):
    _check(specgen.Input("wellformed", text.encode()), box)


@_fixed(SLICE["grammar"])
@given(specgen.grammar_specs())
def test_grammar_derivations_never_crash(box, text):
    _check(specgen.Input("grammar", text.encode()), box)


@_fixed(SLICE["bytes"])
@given(specgen.byte_mutations())
def test_byte_mutations_of_the_corpus_never_crash(box, inp):
    _check(inp, box)


@_fixed(SLICE["tokens"])
@given(specgen.token_mutations())
def test_token_mutations_of_the_corpus_never_crash(box, inp):
    _check(inp, box)


@pytest.mark.parametrize("kind,code,stderr,problem", [
    ("grammar", 2, "pipecheck: error: the spec nests too deeply\n", "an error without a location"),
    ("grammar", 2, "pipecheck: internal error: KeyError: 3\n", "an error without a location"),
    ("grammar", 2, "", "exit 2 without a located error"),
    ("grammar", 2, "{path}:9:1: error: beyond the end [syntax]\n", "a location outside the input"),
    ("grammar", 2, "{path}:2:40: error: past the line's end [syntax]\n", "a location outside the input"),
    ("grammar", 4, "", "exit code 4"),
    ("wellformed", 2, "{path}:1:1: error: rejected [rule]\n", "a well-formed spec got no verdict"),
])
def test_the_oracle_catches_each_broken_contract(box, kind, code, stderr, problem):
    # the oracle is what makes a fuzz run mean something: each way to break the contract is caught
    data = b"kernel k {\n  role r thread { }\n}\n"
    path = box.dir / "input.pipe"
    got = oracle._contract(specgen.Input(kind, data), path, box, code, "", stderr.format(path=path), ("check",))
    assert any(p.startswith(problem) for p in got), got


def test_the_oracle_accepts_a_located_error(box):
    data = b"kernel k {\n  role r thread { }\n}\n"
    path = box.dir / "input.pipe"
    err = f"{path}:2:3: error: fine [syntax]\n    2 |   role r thread {{ }}\n          ^\n"
    assert oracle._contract(specgen.Input("grammar", data), path, box, 2, "", err, ("check",)) == []


@pytest.mark.slow
@settings(max_examples=10_000, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(specgen.inputs())
def test_10000_inputs_never_crash(box, inp):
    _check(inp, box)


# --- the differential oracle (fuzz/differential.py): every way of verifying a spec agrees

from fuzz import differential  # noqa: E402

ELECT_BUG = """kernel k {
  param K = 1 in 1..2
  smem A bytes 1024
  mbarrier full count 1
  role producer warp {
    let issuer = elect()
    for k in 0 .. K {
      if issuer {
        if lane == 0 { arrive full expect_tx 1024 }
        tma_load A tile k bytes 1024 barrier full
      }
    }
  }
  role consumer thread {
    wait full parity 0
    read A tile 0
  }
}
"""


@settings(max_examples=5, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(specgen.wellformed_specs())
def test_differential_slice_agrees(tmp_path_factory, text):
    # a fixed-seed slice of `python -m fuzz.run --differential`: reductions, --lockstep, --every and bmc
    path = tmp_path_factory.mktemp("diff") / "gen.pipe"
    path.write_text(text)
    c = differential.compare_guarded(path, 60)
    assert not c.disagreements, "\n".join(map(str, c.disagreements)) + "\n--- spec\n" + text
    assert c.compared or c.skipped


def test_the_differential_oracle_reports_a_difference(tmp_path, monkeypatch):
    # a "reduction" that changes the semantics (--elect lowest hides the elect bug) must be reported,
    # with the flags and both verdicts
    path = tmp_path / "elect.pipe"
    path.write_text(ELECT_BUG)
    monkeypatch.setitem(differential.REDUCTIONS, "--elect lowest", dict(reduce=True, symmetry=True, elect="lowest"))
    c = differential.compare(path, bmc=False, every=False)
    bad = [d for d in c.disagreements if d.flags.startswith("--elect lowest")]
    assert len(bad) == 1 and len(c.disagreements) == 1, c.disagreements
    assert bad[0].reference.verdict == "findings" and bad[0].other.verdict == "verified"
    assert "hang" in str(bad[0]) and "-D K=1" in str(bad[0])


def test_the_differential_oracle_compares_every_and_bmc(tmp_path):
    path = tmp_path / "elect.pipe"
    path.write_text(ELECT_BUG)
    c = differential.compare(path)
    assert not c.disagreements, c.disagreements
    assert "--engine bmc" in c.compared and any(x.startswith("--every K") for x in c.compared + c.skipped)
