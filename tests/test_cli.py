"""The command line: exit codes, formats, and errors with file:line:col and no traceback."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, cli

LOCATION = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): error: .+ \[[a-z-]+\]$", re.M)


def test_verified_exits_0():
    code, out, err = cli("verify", str(ROOT / "examples" / "ring.pipe"))
    assert code == 0, out + err
    assert ": verified (" in out


def test_findings_exit_1_and_name_the_lane_condition():
    code, out, err = cli("verify", str(ROOT / "specs" / "cutlass_3722.pipe"))
    assert code == 1
    assert "[hang]" in out
    assert "elects a lane in 1..31" in out and "latent" in out
    assert "why:" in out and "counterexample:" in out and "barriers at the failure:" in out


def test_json_is_versioned_and_complete():
    code, out, _ = cli("verify", str(ROOT / "specs" / "cutlass_3722.pipe"), "--format", "json")
    data = json.loads(out)
    assert data["schema"] == "pipecheck-result/1"
    assert data["params"] == {"STAGES": 4, "K_TILES": 8}
    assert data["semantics"]["elect"] == "any"
    f = data["findings"][0]
    assert f["code"] == "hang" and f["location"]["line"] > 0 and f["trace"]
    assert all({"step", "role", "action", "location"} <= set(s) for s in f["trace"])


def test_define_overrides_a_parameter():
    code, out, _ = cli("verify", str(ROOT / "examples" / "ring.pipe"), "-D", "STAGES=2", "-D", "K_TILES=3")
    assert code == 0 and "STAGES=2, K_TILES=3" in out


@pytest.mark.parametrize("argv,needle", [
    (["verify", "nope.pipe"], "cannot read nope.pipe"),
    (["verify", "examples/ring.pipe", "-D", "STAGES=99"], "outside the declared range 1..8"),
    (["verify", "examples/ring.pipe", "-D", "NOPE=1"], "has no parameter 'NOPE'"),
    (["verify", "examples/ring.pipe", "-D", "STAGES"], "NAME=VALUE"),
    (["frobnicate"], "invalid choice"),
])
def test_usage_errors_exit_2(argv, needle, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = cli(*argv)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err


def test_an_override_outside_its_range_is_one_error_not_one_per_use(monkeypatch):
    monkeypatch.chdir(ROOT)
    code, _, err = cli("verify", "specs/deepgemm_sm90_fp8.pipe", "-D", "STAGES=1")  # STAGES sizes five arrays
    assert code == 2
    assert err.count("error:") == 1 and "outside the declared range 3..8" in err


MALFORMED = {
    "syntax": ("kernel k {\n  role p warp {\n    wait full[0] parity\n  }\n}\n", 4, "unexpected"),
    "unclosed": ("kernel k {\n  role p warp {\n", 2, "'}' is missing"),
    "undefined": ("kernel k {\n  mbarrier full count 1\n  role p warp {\n    wait empty parity 0\n  }\n}\n", 4, "not declared"),
    "store-barrier": ("kernel k {\n  smem D bytes 1024\n  mbarrier b count 1\n  role p thread {\n    tma_store D barrier b\n  }\n}\n",
                      5, "bulk groups"),
    "remote-wait": ("kernel k {\n  cluster 2\n  mbarrier b count 1\n  role p thread {\n    wait b parity 0 on cta 1\n  }\n}\n",
                    5, "own CTA"),
    "count-range": ("kernel k {\n  mbarrier b count 1048576\n  role p thread { arrive b }\n}\n", 2, "1..1048575"),
    "expect-no-load": ("kernel k {\n  mbarrier b count 1\n  role p thread { arrive b expect_tx 64 }\n}\n", 3, "no tma_load"),
    "bad-char": ("kernel k { role p thread { arrive b @ } }\n", 1, "unexpected character"),
    "role-shape": ("kernel k {\n  role p warps { }\n}\n", 2, "needs a count"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_spec_reports_location(name, spec):
    text, line, needle = MALFORMED[name]
    path = spec(text)
    code, out, err = cli("verify", str(path))
    assert code == 2, err
    assert "Traceback" not in err
    m = LOCATION.search(err)
    assert m, err
    assert int(m.group("line")) == line, err
    assert needle in err
    assert "^" in err  # a caret under the source


def test_check_command(spec):
    code, out, _ = cli("check", str(ROOT / "specs" / "cutlass_3722_fixed.pipe"))
    assert code == 0 and "ok: kernel cutlass_sm90_mainloop_fixed" in out
    code, out, _ = cli("check", str(ROOT / "specs" / "cutlass_3722.pipe"))  # static findings exit 1
    assert code == 1 and "[expect-tx-mismatch]" in out


def test_max_states_is_inconclusive():
    code, out, _ = cli("verify", str(ROOT / "examples" / "ring.pipe"), "--max-states", "20")
    assert code == 3
    assert "inconclusive: stopped by max-states" in out


def test_console_script_entry_point():
    proc = subprocess.run([sys.executable, "-m", "pipecheck", "verify", str(ROOT / "examples" / "ring.pipe")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# --- releases (issue 19): one version everywhere, a changelog entry and a tag name for pre-commit

def test_version_is_one_number_everywhere():
    import pipecheck
    from pipecheck.core.version import __version__
    code, out, err = cli("--version")
    assert (code, out, err) == (0, f"pipecheck {__version__}\n", "")
    assert pipecheck.__version__ == __version__ and re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'attr = "pipecheck.core.version.__version__"' in pyproject
    first = re.search(r"^## (\S+) \(\d{4}-\d\d-\d\d\)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert first and first.group(1) == __version__  # the newest entry is this version
    for doc in ("README.md", ".pre-commit-hooks.yaml"):  # the pre-commit snippet names its tag
        assert f"rev: v{__version__}" in (ROOT / doc).read_text(), doc
    data = json.loads(cli("verify", str(ROOT / "examples" / "ring.pipe"), "--format", "json")[1])
    assert data["tool"]["version"] == __version__


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_output_file_says_where_it_wrote(tmp_path, fmt):
    target = tmp_path / f"report.{fmt}"
    code, out, err = cli("verify", str(ROOT / "examples" / "ring.pipe"), "--format", fmt, "-o", str(target))
    assert code == 0 and out == ""
    assert err == f"pipecheck: wrote the {fmt} report to {target}\n"
    assert "verified" in target.read_text()
