"""The bmc engine agrees with the explicit model: same verdict, same shortest depth, within the bound.

The reference is a breadth-first search of the model itself (every interleaving, no
reduction) cut at the bound: the depth of its first finding, or none. The bmc engine must
find a finding exactly when that search does, at the same depth, and every witness it
reports must replay through the model to that finding.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipecheck.configs import config_classes
from pipecheck.explore import Limits, replay
from pipecheck.lower import resolve_roles
from pipecheck.model import Model
from pipecheck.symbolic import bmc
from pipecheck.verify import load_checked
from conftest import ROOT, cli

SPECS = sorted(p for d in ("specs", "examples") for p in (ROOT / d).rglob("*.pipe") if "lib" not in p.parts)


def first_finding_depth(model: Model, bound: int) -> tuple[int | None, bool]:
    """(depth of the shortest finding within the bound, or None; whether every execution ends within it)."""
    level, seen, d = [model.initial()], set(), 0
    seen.add(level[0])
    while level:
        nxt = []
        for s in level:
            succ = model.successors(s)
            if not succ and model.terminal_findings(s):
                return d, True
            for _, t, findings in succ:
                if findings:
                    if d + 1 <= bound:
                        return d + 1, True
                elif t not in seen:
                    seen.add(t)
                    nxt.append(t)
        if d == bound:
            return None, not nxt
        level, d = nxt, d + 1
    return None, True


def models(path: Path, smallest: bool = True):
    sources: dict = {}
    k = load_checked(str(path), {}, sources)
    if smallest:  # the smallest declared values keep the bound meaningful (STAGES >= 2 to keep a ring)
        ov = {p.name: max(p.lo, 2) if p.name == "STAGES" else p.lo for p in k.params if p.lo is not None}
        k = load_checked(str(path), ov, sources)
    codes, sites = resolve_roles(k, sources)
    return [Model(k, cc.classes, sites) for cc in config_classes(k, codes, "any")]


def agree(model: Model, bound: int) -> None:
    want, complete = first_finding_depth(model, bound)
    got = bmc.search(model, Limits(), bound)
    assert got.stopped not in ("bmc-unsupported", "bmc-replay-failed", "timeout"), got.stopped
    if want is None:
        assert got.found == []
        assert got.stopped == (None if complete else "depth-bound")
    else:
        assert got.found and got.depth == want
        for f in got.found:  # the witness replays through the model to the finding it reports
            steps = replay(model, f.path)
            final = steps[-1][1] if steps else model.initial()
            shown = model.terminal_findings(final) if f.terminal else steps[-1][2]
            assert f.finding in shown


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_engines_agree_on_every_spec(path: Path):
    for model in models(path):
        agree(model, 8)


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_engines_agree_on_every_spec_deeper(path: Path):
    for model in models(path):
        agree(model, 16)


GENERATED = """
kernel gen {{
  smem A[{S}] bytes 1024
  mbarrier full[{S}] count {fc}
  mbarrier empty[{S}] count {ec}
  role producer thread {{
    ring st({S}, phase = {pp})
    for k in 0 .. {K} {{
      {wait_empty}
      arrive full[st.index]{expect}
      tma_load A[st.index] tile k bytes 1024 barrier full[st.index]
      advance st
    }}
  }}
  role consumer {shape} {{
    ring st({S})
    {elect}
    for k in 0 .. {K} {{
      {wait_full}
      read A[st.index] tile k
      {release}
      advance st
    }}
  }}
}}
"""


@st.composite
def protocols(draw) -> str:
    warp = draw(st.booleans())
    release = draw(st.sampled_from(["arrive empty[st.index]", "", "arrive empty[st.index]\n      arrive empty[st.index]"]))
    if warp:
        release = "\n".join(f"if pick {{ {r.strip()} }}" for r in release.splitlines() if r.strip())
    return GENERATED.format(
        S=draw(st.integers(1, 2)), K=draw(st.integers(1, 2)), fc=draw(st.integers(1, 2)), ec=draw(st.integers(1, 2)),
        pp=draw(st.sampled_from([1, 1, 0])),
        wait_empty=draw(st.sampled_from(["wait empty[st.index] parity st.phase", ""])),
        expect=draw(st.sampled_from([" expect_tx 1024", " expect_tx 1024", " expect_tx 512", ""])),
        shape="warp" if warp else "thread", elect="let pick = elect()" if warp else "",
        wait_full=draw(st.sampled_from(["wait full[st.index] parity st.phase", "wait full[st.index] parity st.phase",
                                        "wait full[st.index] parity 1 - st.phase", ""])),
        release=release)


@given(text=protocols())
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_engines_agree_on_generated_protocols(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("g") / "gen.pipe"
    path.write_text(text)
    for model in models(path, smallest=False):
        agree(model, 12)


def test_bmc_from_the_command_line(spec):
    code, out, _ = cli("verify", str(ROOT / "examples" / "bugs" / "stale_read.pipe"), "--engine", "bmc",
                       "-D", "K_TILES=1", "--depth", "6")
    assert code == 1 and "[stale-read]" in out and "counterexample: 2 steps" in out
    tiny = spec("""
kernel k {
  smem A bytes 1024
  mbarrier full count 1
  role p thread {
    arrive full expect_tx 1024
    tma_load A tile 0 bytes 1024 barrier full
    wait full parity 0
    read A tile 0
  }
}
""")
    code, out, _ = cli("verify", str(tiny), "--engine", "bmc")
    assert code == 0, out  # every execution ends within the bound: a proof
    code, out, _ = cli("verify", str(ROOT / "examples" / "ring.pipe"), "--engine", "bmc", "--depth", "3")
    assert code == 3 and "depth-bound" in out
