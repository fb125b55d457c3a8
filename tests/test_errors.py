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
