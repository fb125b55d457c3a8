"""The error catalogue: every example under tests/data/errors/ exits 2 with the message and location its header
states, and docs/errors.md documents every example and every error code."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from conftest import ROOT, cli
from pipecheck.core.diagnostics import SPEC_ERRORS

EXAMPLES = sorted((ROOT / "tests" / "data" / "errors").glob("*.pipe"))
HEADER = re.compile(r"^# error: (?:(?P<line>\d+):(?P<col>\d+): )?(?P<message>.+) \[(?P<code>[a-z-]+)\]$")
DOCS = (ROOT / "docs" / "errors.md").read_text()


def _header(path: Path) -> tuple[re.Match, list[str]]:
    lines = path.read_text().splitlines()
    m = HEADER.match(lines[0])
    assert m, f"{path.name}: the first line must be `# error: LINE:COL: MESSAGE [code]`"
    command = ["check"]
    if lines[1].startswith("# command: "):
        command = shlex.split(lines[1][len("# command: "):])
    return m, command


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_each_example_gives_its_documented_error(path: Path):
    want, command = _header(path)
    code, out, err = cli(command[0], str(path), *command[1:])
    assert code == 2 and out == "", err
    first = err.splitlines()[0]
    if want["line"]:
        loc = re.match(r"^(?P<file>.+):(?P<line>\d+):(?P<col>\d+): error: (?P<rest>.*)$", first)
        assert loc and loc["file"].endswith(f"errors/{path.name}"), first
        assert (loc["line"], loc["col"]) == (want["line"], want["col"]), first
        assert loc["rest"] == f"{want['message']} [{want['code']}]"
        assert f"{int(want['line']):5d} | " in err, "the source line with a caret follows"
    else:
        assert first == f"error: {want['message']} [{want['code']}]"


def test_every_error_code_has_an_example_and_a_section():
    codes = {_header(p)[0]["code"] for p in EXAMPLES}
    assert codes == set(SPEC_ERRORS), f"codes without an example: {set(SPEC_ERRORS) - codes}"
    for code in SPEC_ERRORS:
        assert f"### `{code}`" in DOCS, f"docs/errors.md has no section for [{code}]"


def test_every_example_is_in_the_catalogue():
    for path in EXAMPLES:
        want, _ = _header(path)
        assert f"tests/data/errors/{path.name}" in DOCS, f"docs/errors.md does not cite {path.name}"
        # the catalogue may shorten a long message's tail with "...", never its start
        assert want["message"][:40] in DOCS, f"{path.name}: message not in the docs"


# ---------------------------------------------------------------- the mistakes people make (issue 17)
# A kernel where every statement kind stands once; each test below breaks it in one general way.
_BODY = """\
kernel k {{
  param N = 2 in 1..4
  const TILE = 64
  smem A[2] bytes TILE
  mbarrier full[2] count 1
  mbarrier empty[2] count 1
  role r warp {{
    ring st(2)
    let leader = lane == 0
    for t in 0 .. N {{
      if leader {{
        wait empty[st.index] parity st.phase
        arrive full[st.index] expect_tx TILE
        tma_load A[st.index] tile t bytes TILE barrier full[st.index]
      }} else {{
        syncwarp
      }}
{extra}      advance st
    }}
  }}
}}
"""
_STATEMENTS = ["ring st2(2)", "let x = 1", "wait full[0] parity 0", "arrive empty[0]", "advance st",
               "read A[0] tile 0", "write A[0] tile 0", "commit_group", "wait_group 0", "wait_group_read 0",
               "fence_proxy_async", "syncwarp", "syncthreads", "bar_sync 1, 32", "bar_arrive 1, 32",
               "mma_wait 0", "inval full[0]", "exit", "choose c", "tma_store A[0] tile 0", "arrive_drop empty[0]",
               "complete_tx full[0] 64", "expect_tx full[0] 64", "fence_barrier_init", "cluster_sync"]


def _typos(word: str) -> list[str]:
    """A letter swapped with the next, a letter dropped, a letter doubled: inside the word, never at its start."""
    out = []
    for i in range(1, len(word) - 1):
        if word[i] != word[i + 1] and word[i].isalpha() and word[i + 1].isalpha():
            out.append(word[:i] + word[i + 1] + word[i] + word[i + 2:])
            break
    out.append(word[:-2] + word[-1])
    out.append(word[:2] + word[1] + word[2:])
    return out


def test_the_body_checks(spec):
    assert cli("check", str(spec(_BODY.format(extra=""))))[0] == 0


@pytest.mark.parametrize("statement", _STATEMENTS)
def test_a_misspelled_statement_keyword_is_named_with_the_keyword_meant(spec, statement: str):
    keyword = statement.split()[0]
    assert cli("check", str(spec(_BODY.format(extra=f"      {statement}\n"))))[0] in (0, 1), statement
    for typo in _typos(keyword):
        text = _BODY.format(extra=f"      {typo}{statement[len(keyword):]}\n")
        code, out, err = cli("check", str(spec(text)))
        first = err.splitlines()[0]
        assert code == 2 and "Traceback" not in err, err
        assert first.endswith(f"did you mean '{keyword}'? [syntax]"), (typo, first)
        line = text.splitlines().index(f"      {typo}{statement[len(keyword):]}") + 1
        assert f":{line}:7: error: '{typo}' is not a statement keyword" in first, (typo, first)


@pytest.mark.parametrize("option,typo", [("expect_tx", "expect_xt"), ("tile", "tlie"), ("parity", "partiy"),
                                         ("barrier", "barier"), ("bytes", "btyes")])
def test_a_misspelled_option_is_matched_against_the_options_the_statement_takes(spec, option: str, typo: str):
    line = {"expect_tx": "arrive full[st.index] expect_tx TILE", "parity": "wait empty[st.index] parity st.phase",
            "tile": "tma_load A[st.index] tile t bytes TILE barrier full[st.index]"}.get(
        option, "tma_load A[st.index] tile t bytes TILE barrier full[st.index]")
    text = _BODY.format(extra="").replace(line, line.replace(f" {option} ", f" {typo} ", 1))
    code, _, err = cli("check", str(spec(text)))
    assert code == 2 and f"did you mean '{option}'?" in err.splitlines()[0], err


@pytest.mark.parametrize("item,typo", [("param", "parma"), ("smem", "smme"), ("mbarrier", "mbarier"),
                                       ("role", "rloe"), ("const", "cosnt")])
def test_a_misspelled_kernel_item_is_named(spec, item: str, typo: str):
    text = _BODY.format(extra="").replace(f"  {item} ", f"  {typo} ", 1)
    code, _, err = cli("check", str(spec(text)))
    assert code == 2 and err.splitlines()[0].endswith(f"unexpected '{typo}'; did you mean '{item}'? [syntax]"), err


# (what is misspelled, its replacement in the body, the name the message must suggest)
_NAME_CASES = [
    ("barrier in a wait", ("wait empty[", "wait emtpy["), "empty"),
    ("barrier of a load", (" barrier full[st", " barrier ful[st"), "full"),
    ("buffer", ("tma_load A[", "tma_load AA["), "A"),
    ("parameter", ("0 .. N {", "0 .. NN {"), "N"),
    ("constant", ("expect_tx TILE", "expect_tx TIEL"), "TILE"),
    ("local", ("if leader {", "if leadr {"), "leader"),
    ("ring", ("advance st", "advance sst"), "st"),
    ("ring field", ("parity st.phase", "parity st.phse"), "phase"),
    ("ring base", ("parity st.phase", "parity stt.phase"), "st"),
    ("function", ("lane == 0", "mn(lane, 1) == 0"), "min"),
]


@pytest.mark.parametrize("what,edit,meant", _NAME_CASES, ids=[c[0] for c in _NAME_CASES])
def test_an_undeclared_name_close_to_a_declared_one_is_suggested(spec, what: str, edit: tuple[str, str], meant: str):
    text = _BODY.format(extra="").replace(*edit)
    code, _, err = cli("check", str(spec(text)))
    first = err.splitlines()[0]
    assert code == 2 and "[name]" in first and first.endswith(f"did you mean '{meant}'? [name]"), first


def test_names_inside_a_procedure_are_suggested_by_the_names_its_body_uses(spec):
    lib = spec("proc release(bars, state) {\n  arrive bars[stat.index]\n}\n", "lib.pipe")
    text = _BODY.format(extra="      release(empty, st)\n").replace("kernel k", f'import "{lib.name}"\nkernel k')
    code, _, err = cli("check", str(spec(text)))
    assert code == 2 and err.splitlines()[0].endswith("'stat' is not defined; did you mean 'state'? [name]"), err
    code, _, err = cli("check", str(spec(text.replace("release(empty", "relaese(empty"))))
    assert code == 2 and "procedure 'relaese' is not defined; did you mean 'release'?" in err, err


def test_a_name_far_from_every_declared_one_gets_no_guess(spec):
    code, _, err = cli("check", str(spec(_BODY.format(extra="").replace("wait empty[", "wait zzzz["))))
    assert code == 2 and "did you mean" not in err and "mbarrier 'zzzz' is not declared" in err


def _closing_braces(text: str) -> list[tuple[int, int]]:
    """Each '}' of the text (line index, column) with the (line, col) of the '{' it closes, 1-based."""
    out, stack = [], []
    for i, line in enumerate(text.splitlines()):
        for j, ch in enumerate(line):
            if ch == "{":
                stack.append((i + 1, j + 1))
            elif ch == "}":
                out.append(((i, j), stack.pop()))
    return out


@pytest.mark.parametrize("which", range(5))
def test_a_missing_close_brace_is_reported_at_the_brace_it_leaves_open(spec, which: int):
    body = _BODY.format(extra="      read A[0] tile 0\n")
    closes = _closing_braces(body)
    assert len(closes) == 5
    (li, col), opener = closes[which]
    lines = body.splitlines()
    lines[li] = lines[li][:col] + lines[li][col + 1:].lstrip(" ")  # `} else {` becomes `else {`, as a person deletes
    text = "\n".join(lines) + "\n"
    code, out, err = cli("check", str(spec(text)))
    assert code == 2 and "Traceback" not in err, err
    located = re.findall(r"^\S+:(\d+):(\d+): (?:error|note): ", err, re.M)
    assert (str(opener[0]), str(opener[1])) in located, (which, opener, err)
    assert "'{'" in err, err


def test_a_form_feed_in_a_comment_is_no_line_break(tmp_path):
    """Locations count lines at "\\n" only, as the parser does: a form feed or a \\x1c in a comment (a byte
    mutation of the fuzzer) does not move the unclosed-brace finder's line (it used str.splitlines)."""
    p = tmp_path / "ff.pipe"
    p.write_text("kernel k {\n  # a form feed \x0c and a \x1c here\n  role p warp {\n    for i in 0 .. 2 {\n"
                 "      syncthreads\n  }\n}\n")
    code, out, err = cli("check", str(p))
    assert code == 2
    assert f"{p}:4:21: error: this '{{' is never closed" in err
    assert "    for i in 0 .. 2 {" in err  # the source line shown is line 4 as "\n" counts it
