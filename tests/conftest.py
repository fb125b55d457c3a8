"""Shared helpers: run the CLI in-process and read spec headers."""
from __future__ import annotations

import io
import json
import re
import shlex
from pathlib import Path

import pytest

from pipecheck.cli import run

ROOT = Path(__file__).resolve().parent.parent
# every spec of the corpus: specs/ and examples/, without the procedure libraries
SPEC_FILES = sorted(p for d in ("specs", "examples") for p in (ROOT / d).rglob("*.pipe") if "lib" not in p.parts)
HEAVY = re.compile(r"^#\s*heavy:")
EXPECT = re.compile(r"^#\s*expect(?:\[(?P<args>[^\]]*)\])?:\s*(?P<what>.+?)\s*$")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def verify_json(path: str | Path, *args: str) -> dict:
    code, out, err = cli("verify", str(path), "--format", "json", *args)
    assert code in (0, 1, 3), err
    data = json.loads(out)
    assert data["exit_code"] == code
    return data


def expectations(path: Path) -> list[tuple[list[str], str]]:
    """The `# expect[ARGS]: WHAT` lines of a spec's header comment."""
    return [(shlex.split(m.group("args") or ""), m.group("what"))
            for m in map(EXPECT.match, header_lines(path)) if m]


def write_spec(tmp_path: Path, text: str, name: str = "t.pipe") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.fixture
def spec(tmp_path):
    return lambda text, name="t.pipe": write_spec(tmp_path, text, name)


def header_lines(path: Path) -> list[str]:
    """The comment lines at the top of a spec, up to its first statement."""
    out = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            if line.strip():
                break
            continue
        out.append(line)
    return out


def corpus(*, unreduced: bool = False) -> list:
    """Every spec of specs/ and examples/, as pytest params. With `unreduced`, specs whose header says
    `# heavy:` (searches without the reductions are too large for the default run, even at the smallest
    parameters) are marked slow: the default CI run skips them, `pytest -m slow` runs them."""
    out = []
    for p in SPEC_FILES:
        marks = [pytest.mark.slow] if unreduced and any(HEAVY.match(l) for l in header_lines(p)) else []
        out.append(pytest.param(p, marks=marks, id=str(p.relative_to(ROOT))))
    return out
