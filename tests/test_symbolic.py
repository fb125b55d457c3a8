"""z3 configuration classes: elected-lane classes, parameter regions, and the conditions of findings."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipecheck.pipeline.configurations import config_classes
from pipecheck.lang.lower import build_classes, lane_profile, resolve_roles
from pipecheck.lang.parse import load_spec
from pipecheck.symbolic.classes import lane_partition, param_classes, param_predicates, points_text
from pipecheck.symbolic.terms import ParamSpace
from pipecheck.pipeline.verify import Options, load_checked, verify_file
from conftest import ROOT, SPEC_FILES, cli, verify_json

SPECS = SPEC_FILES
FULL = 0xFFFFFFFF


def _load(path: str | Path):
    sources: dict = {}
    k = load_checked(str(path), {}, sources)
    codes, sites = resolve_roles(k, sources)
    return k, codes


def _masks(codes) -> list[int]:
    return sorted({m for c in codes for m in c.elect_masks})


def test_3722_lane_classes_come_from_z3_with_their_reason():
    k, codes = _load(ROOT / "specs" / "cutlass_3722.pipe")
    p = lane_partition(k, codes, [FULL], {})
    assert [c.lanes for c in p.classes] == [(0,), tuple(range(1, 32))]
    assert p.classes[1].where == ("lane == 0 is false",)
    assert p.solver_calls > 2  # the classes were enumerated by the solver, not by a lane loop


def test_3722_names_the_lane_condition():
    data = verify_json(ROOT / "specs" / "cutlass_3722.pipe")
    hang = next(f for f in data["findings"] if f["code"] == "hang")
    assert hang["condition"] == "elect() (line 36, 47) elects a lane in 1..31"
    assert hang["on_hardware"] is False


def _brute(k, codes, mask: int) -> list[tuple[int, ...]]:
    groups: dict = {}
    for lane in range(32):
        if mask >> lane & 1:
            groups.setdefault(lane_profile(k, codes, mask, lane), []).append(lane)
    return sorted(tuple(g) for g in groups.values())


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_z3_lane_classes_equal_brute_force_profiles(path: Path):
    k, codes = _load(path)
    for m in _masks(codes):
        assert sorted(c.lanes for c in lane_partition(k, codes, [m], {}).classes) == _brute(k, codes, m)


ROLE = """
kernel k {{
  mbarrier b count 1
  role p warp {{
    let pick = elect({mask})
    if {pred} {{ if pick {{ arrive b }} }}
    wait b parity 0
  }}
}}
"""

PREDICATES = st.sampled_from(["lane == 0", "lane < 4", "lane % 2 == 0", "(lane & 5) == 1", "lane >= 16 && lane != 20",
                              "lane / 8 == 2", "!(lane > 3)", "lane * 3 % 7 == 1", "(lane == 3 ? 1 : 0) == 1"])


@given(pred=PREDICATES, mask=st.sampled_from(["", "0xF0F0F0F0", "0x3"]))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_lane_classes_match_brute_force_on_generated_predicates(tmp_path_factory, pred, mask):
    path = tmp_path_factory.mktemp("s") / "t.pipe"
    path.write_text(ROLE.format(pred=pred, mask=mask))
    k, codes = _load(path)
    m = _masks(codes)[0]
    assert sorted(c.lanes for c in lane_partition(k, codes, [m], {}).classes) == _brute(k, codes, m)


TWO_MASKS = """
kernel k {
  mbarrier b count 2
  role p warp {
    let a = elect()
    let c = elect(0xF)
    if a { arrive b }
    if c && lane < 2 { arrive b }
    wait b parity 0
  }
}
"""


def test_every_orbit_member_builds_the_representatives_classes(spec):
    """Soundness of the lane classes with two masks: each member's thread classes are the representative's, renamed."""
    k, codes = _load(spec(TWO_MASKS))
    classes = config_classes(k, codes, "any")
    members = sum(len(cc.members) for cc in classes)
    assert members == 32 * 4  # every (elect() lane, elect(0xF) lane) choice is covered once
    assert len(classes) < members
    for cc in classes:
        want = sorted((cl.size, cl.warp, cl.program.key()) for cl in cc.classes)
        for cfg in cc.members:
            got = sorted((cl.size, cl.warp, cl.program.key()) for cl in build_classes(k, codes, cfg, False))
            assert got == want, (cc.representative, cfg)


# ---------------------------------------------------------------- parameters


def _space(path: Path, sweep: bool = True):
    sources: dict = {}
    kast, procs = load_spec(str(path), sources)
    k = load_checked(str(path), {}, {})
    space = ParamSpace(kast, k, sweep)
    return kast, k, space, sources


def test_parameter_regions_split_where_the_spec_branches():
    kast, k, space, sources = _space(ROOT / "examples" / "bugs" / "single_tile_expect_tx.pipe")
    preds = param_predicates(kast, k, space, sources)
    assert "K_TILES == 1" in [p.text for p in preds]
    regions = param_classes(space, preds).regions
    assert sorted(r.text for r in regions) == ["K_TILES == 1", "K_TILES >= 2"]
    assert len(space.points()) == 2 * 16


def test_no_branch_on_parameters_is_one_region():
    kast, k, space, sources = _space(ROOT / "specs" / "cutlass_3722.pipe")
    regions = param_classes(space, param_predicates(kast, k, space, sources)).regions
    assert [r.text for r in regions] == [""]  # `for k in 1 .. K_TILES` always runs: K_TILES >= 3
    assert len(space.points()) == 7 * 14


def test_without_all_params_the_space_is_the_default_point():
    _, _, space, _ = _space(ROOT / "specs" / "cutlass_3722.pipe", sweep=False)
    assert space.points() == [(("STAGES", 4), ("K_TILES", 8))]


def _pts(*pairs):
    return [(("A", a), ("B", b)) for a, b in pairs]


def test_points_text_forms():
    every = _pts(*[(a, b) for a in (1, 2, 3) for b in (1, 2)])
    assert points_text(_pts((1, 1), (1, 2)), every) == "A == 1"
    assert points_text(_pts((2, 1), (3, 1), (2, 2), (3, 2)), every) == "A >= 2"
    assert points_text(_pts((1, 2), (3, 2)), every) == "A != 2 and B == 2"  # a formula before a list of values
    assert points_text(every, every) == ""
    regions = [("A == 1", set(_pts((1, 1), (1, 2)))), ("B == 1", set(_pts((1, 1), (2, 1), (3, 1))))]
    assert points_text(_pts((1, 1), (1, 2), (2, 1), (3, 1)), every, regions) == "A == 1 or B == 1"
    assert points_text(_pts((1, 1), (2, 2)), every) == "A == B"
    grid = _pts(*[(a, b) for a in range(1, 7) for b in range(1, 7)])
    mod3 = [p for p in grid if (p[0][1] + p[1][1]) % 3 == 0]  # no comparison of A and B says this
    assert points_text(mod3, grid).startswith(f"{len(mod3)} of 36 parameter values")


def test_all_params_states_the_k_tiles_condition_and_the_narrowed_range_verifies():
    path = ROOT / "examples" / "bugs" / "single_tile_expect_tx.pipe"
    data = verify_json(path, "--all-params", "-D", "STAGES=2")  # STAGES pinned: the sweep covers K_TILES 1..16
    every = data["findings"] + [c for f in data["findings"] for c in f.get("consequences", [])]  # causes first
    hang = next(f for f in every if f["code"] == "hang")
    assert hang["condition"] == "K_TILES == 1 (witness: K_TILES=1)"
    static = next(f for f in data["static"] if f["code"] == "expect-tx-mismatch")
    assert "only when K_TILES == 1" in static["message"] and "24576" in static["message"]
    assert verify_json(path, "--all-params", "-D", "STAGES=3", "-D", "K_TILES=2..9")["verdict"] == "verified"
    assert verify_json(path)["verdict"] == "verified"  # the default K_TILES = 8 does not show it


def test_a_parameter_that_changes_nothing_is_explored_once(spec):
    path = spec("""
kernel k {
  param UNUSED = 1 in 1..5
  mbarrier b count 1
  role p thread { arrive b  wait b parity 0 }
}
""")
    r = verify_file(str(path), Options(all_params=True))
    assert r.verdict == "verified" and len(r.runs) == 5
    assert len({id(run.exploration) for run in r.runs}) == 1  # equal models: one exploration stands for all


def test_a_range_needs_all_params_and_must_lie_inside_the_declared_one():
    ring = str(ROOT / "examples" / "ring.pipe")
    code, _, err = cli("verify", ring, "-D", "K_TILES=2..4")
    assert code == 2 and "needs --all-params" in err
    code, _, err = cli("verify", ring, "--all-params", "-D", "K_TILES=0..4")
    assert code == 2 and "declared range (1..16)" in err


def test_too_many_points_is_a_usage_error(spec):
    path = spec("""
kernel k {
  param A = 1 in 1..100
  param B = 1 in 1..100
  mbarrier b count 1
  role p thread { arrive b  wait b parity 0 }
}
""")
    code, _, err = cli("verify", str(path), "--all-params")
    assert code == 2 and "-D NAME=LO..HI" in err and "Traceback" not in err


def test_a_spec_error_inside_the_range_is_a_finding_with_its_point(spec):
    path = spec("""
kernel k {
  param N = 4 in 1..4
  mbarrier b[N] count 1
  role p thread { arrive b[2]  wait b[2] parity 0 }
}
""")
    assert cli("verify", str(path))[0] == 0
    data = verify_json(path, "--all-params")
    assert data["verdict"] == "findings"
    messages = [f["message"] for f in data["static"]]
    assert any("out of range" in m and "N=1" in m for m in messages), messages


# ---------------------------------------------------------------- conditions as formulas (issue 17)
import itertools
import re
from dataclasses import replace

from pipecheck.symbolic.predicates import smallest

CONDITIONS = sorted((ROOT / "tests" / "data" / "conditions").glob("*.pipe"))


def _holds(formula: str, env: dict[str, int]) -> bool:
    """A condition's formula evaluated at one point (`valid[1]` is the element of a choice)."""
    py = re.sub(r"(\w+)\[(\d+)\]", r"\1__\2", formula)
    return bool(eval(py, {"__builtins__": {}}, {re.sub(r"(\w+)\[(\d+)\]", r"\1__\2", k): v for k, v in env.items()}))


def _atoms_in(formula: str) -> int:
    return len(re.split(r" and | or ", formula))


_OPS = {"==": int.__eq__, "!=": int.__ne__, "<": int.__lt__, "<=": int.__le__, ">": int.__gt__, ">=": int.__ge__}


@st.composite
def _grid_and_formula(draw):
    names = ["P", "Q", "R"][:draw(st.integers(1, 3))]
    ranges = [range(draw(st.integers(0, 2)), draw(st.integers(3, 6))) for _ in names]
    rows = list(itertools.product(*ranges))

    def atom():
        a = draw(st.sampled_from(range(len(names))))
        op = draw(st.sampled_from(sorted(_OPS)))
        if len(names) > 1 and draw(st.booleans()):
            b = draw(st.sampled_from([i for i in range(len(names)) if i != a]))
            return lambda r: _OPS[op](r[a], r[b])
        c = draw(st.sampled_from(list(ranges[a])))
        return lambda r: _OPS[op](r[a], c)

    first, second = atom(), atom()
    join = draw(st.sampled_from(["one", "and", "or"]))
    holds = {"one": first, "and": lambda r: first(r) and second(r), "or": lambda r: first(r) or second(r)}[join]
    return names, rows, [i for i, r in enumerate(rows) if holds(r)], 1 if join == "one" else 2


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_grid_and_formula())
def test_the_formula_found_holds_at_exactly_the_failing_points_and_is_no_larger(case):
    names, rows, hit, size = case
    found = smallest(names, rows, hit)
    if not hit or len(hit) == len(rows):
        assert found is None  # nothing to say: never, or always
        return
    assert found is not None, (names, hit)
    assert [i for i, r in enumerate(rows) if _holds(found, dict(zip(names, r)))] == hit, found
    assert _atoms_in(found) <= size, found
    assert smallest(names, rows, hit) == found  # deterministic


def test_a_set_no_small_formula_fits_is_left_to_the_list():
    rows = list(itertools.product(range(1, 7), range(1, 7)))
    assert smallest(["A", "B"], rows, [i for i, (a, b) in enumerate(rows) if (a * b) % 5 == 1]) is None


def _condition(finding: dict) -> str:
    return re.sub(r" \(witness: [^)]*\)$", "", finding["condition"] or "")


@pytest.mark.parametrize("path", [p for p in CONDITIONS if "param " in p.read_text()], ids=lambda p: p.stem)
def test_a_sweeps_condition_is_a_formula_that_agrees_with_every_point_run_alone(path: Path):
    data = verify_json(path, "--all-params", "--all", "--max-states", "20000")
    assert data["findings"], "the spec is here to fail somewhere"
    kernel = load_checked(str(path), {}, {})
    ranges = {p.name: range(p.lo, p.hi + 1) for p in kernel.params}
    alone = {}
    for values in itertools.product(*ranges.values()):
        env = dict(zip(ranges, values))
        args = [a for n, v in env.items() for a in ("-D", f"{n}={v}")]
        point = verify_json(path, *args, "--all", "--max-states", "20000")
        alone[values] = {(f["code"], f["location"]["line"]) for f in point["findings"]}
    for f in data["findings"]:
        formula = _condition(f)
        assert formula and "parameter values" not in formula and " in {" not in formula, formula
        for values, seen in alone.items():
            shows = (f["code"], f["location"]["line"]) in seen
            assert _holds(formula, dict(zip(ranges, values))) == shows, (formula, values)


def test_a_choice_condition_is_a_formula_over_the_choices_elements():
    path = ROOT / "tests" / "data" / "conditions" / "choice_pair.pipe"
    result = verify_file(str(path), Options())
    assert result.issues
    every = {cfg for run in result.runs for cfg in run.cclass.members}
    for issue in result.issues:
        assert " in {" not in issue.condition, issue.condition
        for cfg in every:
            env = {f"{name}[{i}]": v for name, vals in cfg.choices for i, v in enumerate(vals)}
            assert _holds(issue.condition, env) == (cfg in issue.configs), (issue.condition, cfg)


_SCOPE = re.compile(r"^(?P<formula>.*), at the (?P<seen>\d+) of (?P<total>\d+) parameter points explored "
                    r"\(the sweep is incomplete: stopped by (?P<limit>[a-z-]+), so the points not explored may show "
                    r"it too\)(?: \(witness: [^)]*\))?$")


@pytest.mark.parametrize("path", [p for p in CONDITIONS if p.stem in ("handshake_lengths", "refill_without_wait")],
                         ids=lambda p: p.stem)  # the two whose points need more states as their parameters grow
def test_a_sweep_a_limit_stopped_says_so_and_states_no_condition_as_if_complete(path: Path):
    kernel = load_checked(str(path), {}, {})
    total = 1
    for p in kernel.params:
        total *= p.hi - p.lo + 1
    stopped_with_findings = 0
    for limit in range(4, 40, 3):  # small enough that some points need more states than this
        data = verify_json(path, "--all-params", "--max-states", str(limit))
        if data["stopped"] is None:
            continue
        stopped_with_findings += bool(data["findings"])
        for f in data["findings"]:
            m = _SCOPE.match(f["condition"])
            assert m and int(m["total"]) == total and int(m["seen"]) < total, f["condition"]
            assert "only when" not in f["when"] and f["when"].startswith("seen with "), f["when"]
            # the formula is right about every point the sweep explored completely, as a run of that point alone
            if m["formula"] == "any parameter values":
                continue
            plan = verify_file(str(path), Options(all_params=True, limits=replace(Options().limits,
                                                                                   max_states=limit))).plan
            assert plan is not None and plan.complete is not None and len(plan.complete) <= int(m["seen"])
            for point in plan.complete:
                args = [a for n, v in point for a in ("-D", f"{n}={v}")]
                alone = verify_json(path, *args, "--max-states", str(limit))
                shows = any((g["code"], g["location"]["line"]) == (f["code"], f["location"]["line"])
                            for g in alone["findings"])
                assert _holds(m["formula"], dict(point)) == shows, (m["formula"], point)
    assert stopped_with_findings, "some limit must stop the sweep after a finding"


@pytest.mark.parametrize("path", CONDITIONS + [ROOT / "specs" / "cutlass_3722.pipe"], ids=lambda p: p.stem)
def test_the_h200s_election_is_named_only_where_the_condition_names_an_elected_lane(path: Path):
    args = ["--all-params", "--max-states", "20000"] if "param " in path.read_text() and "cutlass" not in path.name else []
    data = verify_json(path, *args)
    assert data["findings"]
    for f in data["findings"]:
        names_lane = "elect" in (f["condition"] or "")
        assert ("H200" in (f["when"] or "")) == names_lane, (f["condition"], f["when"])
        assert (f["on_hardware"] is not None) == names_lane, (f["condition"], f["on_hardware"])
