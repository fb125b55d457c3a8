"""The public Python API: pipecheck.load, pipecheck.verify and the Report object."""
from __future__ import annotations

import inspect
import json

import pytest

import pipecheck
from conftest import ROOT, cli

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
    assert [s.index for s in f.steps] == list(range(1, 23))  # the producer warp's first elect() is one step
    # the B tile landing on full[0] after the A tile: no arrival announced their bytes
    land = next(s for s in f.steps if s.barriers == ("full[0] ph0 1/1 tx-32768",))
    assert land.role == "async (TMA, wgmma)" and land.location.line == 43


def test_verify_a_path_with_semantics_options():
    report = pipecheck.verify(SPEC, elect="lowest")
    assert report.ok and report.findings == [] and report.states > 0
    assert pipecheck.verify(SPEC, params={"STAGES": 2}).params["STAGES"] == 2


def test_report_renderings_agree():
    report = pipecheck.verify(SPEC)
    assert report.to_dict()["verdict"] == "findings"
    assert json.loads(report.to_json()) == report.to_dict()  # to_json is JSON text: what --format json prints
    assert report.to_json() == cli("verify", SPEC, "--format", "json")[1]
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


# every option of `pipecheck verify` that changes what is verified is a keyword of pipecheck.verify
CLI_TO_API = {"defines": "params", "all": "all_findings", "no_reduction": "reduction", "no_symmetry": "symmetry",
              "no_compact": "compact"}
RENDERING = {"specs", "format", "finding", "output", "color", "stats"}  # Report methods: text(), to_json(), ...


def test_verify_takes_every_option_of_the_cli():
    from dataclasses import fields
    from pipecheck.cli import _parser
    from pipecheck.pipeline.result import Options
    sub = next(a for a in _parser()._actions if a.dest == "command").choices["verify"]
    keywords = set(inspect.signature(pipecheck.verify).parameters) | {f.name for f in fields(Options)}
    dests = {a.dest for a in sub._actions if a.dest != "help"} - RENDERING
    missing = sorted(d for d in dests if CLI_TO_API.get(d, d) not in keywords)
    assert not missing, f"pipecheck verify options without a keyword in pipecheck.verify: {missing}"
    assert "ranges" in keywords  # -D N=LO..HI


RING = str(ROOT / "examples" / "ring.pipe")
SMALL = {"STAGES": 2, "K_TILES": 2}


@pytest.mark.parametrize("kw,flags", [
    (dict(lockstep=True), ["--lockstep"]),
    (dict(reduction=False, symmetry=False, compact=False), ["--no-reduction", "--no-symmetry", "--no-compact"]),
    (dict(counter="warps", elect="lowest"), ["--counter", "warps", "--elect", "lowest"]),
    (dict(all_params=True, ranges={"STAGES": (1, 2), "K_TILES": (1, 2)}, params={}),
     ["--all-params", "-D", "STAGES=1..2", "-D", "K_TILES=1..2"]),
    (dict(every="K_TILES", params={"STAGES": 2, "CONSUMERS": 1}),
     ["--every", "K_TILES", "-D", "STAGES=2", "-D", "CONSUMERS=1"]),
    (dict(engine="bmc", depth=6), ["--engine", "bmc", "--depth", "6"]),
    (dict(max_states=50, all_findings=True), ["--max-states", "50", "--all"]),
], ids=["lockstep", "no-reductions", "counter", "all-params", "every", "bmc", "limits"])
def test_verify_options_mean_what_the_flags_mean(kw, flags):
    # the same run from Python and from the command line: the same JSON, byte for byte
    params = kw.pop("params", SMALL)
    spec = str(ROOT / "benchmarks" / "specs" / "ring_fixed.pipe") if "every" in kw else RING
    report = pipecheck.verify(spec, params=params, **kw)
    defines = [x for k, v in params.items() for x in ("-D", f"{k}={v}")] if "-D" not in flags else []
    code, out, _ = cli("verify", spec, "--format", "json", *defines, *flags)
    assert report.exit_code == code
    assert report.to_json() == out


def test_limits_in_every_phase_from_python():
    # more than 1 MB from the first tick: stopped while checking (LimitReached) or later (an inconclusive report)
    try:
        report = pipecheck.verify(str(ROOT / "examples" / "ring.pipe"), max_memory=1)
    except pipecheck.LimitReached as exc:
        assert exc.limit == "max-memory" and exc.phase == "checking"
    else:
        assert report.verdict == "inconclusive" and report.result.stopped == "max-memory"


def test_max_memory_before_the_spec_is_checked_raises_limit_reached(tmp_path):
    body = "\n".join("    syncwarp" for _ in range(100_000))
    path = tmp_path / "big.pipe"
    path.write_text("kernel big {\n  smem A bytes 1024\n  role p warp {\n" + body + "\n  }\n}\n")
    with pytest.raises(pipecheck.LimitReached) as exc:
        pipecheck.verify(str(path), timeout=0.5)
    assert exc.value.limit == "timeout" and exc.value.phase == "checking"


def test_wrong_options_raise():
    for kw in (dict(counter="lanes"), dict(engine="spin"), dict(max_states=0), dict(timeout=-1), dict(depth=0)):
        with pytest.raises(ValueError):
            pipecheck.verify(SPEC, **kw)
    with pytest.raises(TypeError):
        pipecheck.verify(SPEC, no_such_option=True)


def test_readme_api_example_runs(monkeypatch):
    # the README's Python example, as it is written there
    readme = (ROOT / "README.md").read_text()
    code = readme.split("## Use it from Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(ROOT)
    printed = []
    exec(compile(code, "README.md", "exec"), {"print": lambda *a, **k: printed.append(" ".join(map(str, a)))})
    assert printed, "the README example prints nothing"
