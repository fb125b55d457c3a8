"""pytest plugin: `.pipe` specs as test items; an item passes when `pipecheck verify` does.

Opt in with `pytest --pipecheck` (or `pipecheck = true` in the ini file) so installing
pipecheck never changes which files a project's test run collects. A failing item shows
the text report. A spec whose header states `# expect: CODES` passes when verify reports
exactly those findings, so known-bug regression specs can live in the same suite.

In CI, bound a search by states (`pipecheck_max_states`, or `--max-states` in `pipecheck_args`),
never by wall time: a `--timeout` stops a run at a different point on a loaded machine, so the
same spec passes on one run and is inconclusive on the next. A `--timeout` gets a warning.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any, Iterator

import pytest

EXPECT = re.compile(r"^#\s*expect(?:\[(?P<args>[^\]]*)\])?:\s*(?P<what>.+?)\s*$")


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("pipecheck")
    group.addoption("--pipecheck", action="store_true", default=False,
                    help="collect *.pipe specs as tests that pass when pipecheck verifies them")
    parser.addini("pipecheck", type="bool", default=False, help="collect *.pipe specs (same as --pipecheck)")
    parser.addini("pipecheck_args", type="args", default=[],
                  help="extra `pipecheck verify` arguments for every spec, e.g. --elect lowest")
    parser.addini("pipecheck_max_states", default="",
                  help="--max-states for every spec (the bound to use in CI: the same on every machine, unlike "
                       "--timeout)")


def _enabled(config: Any) -> bool:
    return bool(config.getoption("--pipecheck") or config.getini("pipecheck"))


def pytest_collect_file(file_path: Path, parent: Any):
    if file_path.suffix == ".pipe" and _enabled(parent.config):
        return PipeFile.from_parent(parent, path=file_path)
    return None


def expectations(path: Path) -> list[tuple[list[str], str]]:
    """The `# expect[ARGS]: WHAT` lines of the header comment (docs/language.md, Headers)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            if line.strip():
                break
            continue
        m = EXPECT.match(line)
        if m:
            out.append((shlex.split(m.group("args") or ""), m.group("what")))
    return out


class PipeFile(pytest.File):
    def collect(self) -> Iterator["PipeItem"]:
        text = self.path.read_text(encoding="utf-8")
        if not re.search(r"^\s*kernel\s", text, re.M):
            return  # a library of procedures (specs/lib/): imported by specs, not a kernel to verify
        cases = expectations(self.path) or [([], "verified")]
        for args, what in cases:
            name = "verify" + (f"[{' '.join(args)}]" if args else "")
            yield PipeItem.from_parent(self, name=name, args=args, expect=what)


class PipeFailure(Exception):
    pass


class PipeItem(pytest.Item):
    def __init__(self, *, args: list[str], expect: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.args = args
        self.expect = expect

    def runtest(self) -> None:
        import io
        import json

        from .cli import run
        extra = list(self.config.getini("pipecheck_args"))
        bound = str(self.config.getini("pipecheck_max_states")).strip()
        if bound and not any(a == "--max-states" or a.startswith("--max-states=") for a in extra + self.args):
            extra += ["--max-states", bound]
        if any(a == "--timeout" or a.startswith("--timeout=") for a in extra + self.args):
            import warnings
            warnings.warn(pytest.PytestWarning(
                f"{self.path.name}: --timeout bounds the search by wall time, so its verdict changes with machine "
                "load; bound it by states instead (pipecheck_max_states, or --max-states)"))
        argv = ["verify", str(self.path), *extra, *self.args]
        out, err = io.StringIO(), io.StringIO()
        code = run(argv + ["--format", "json"], out, err)
        if code == 2:
            raise PipeFailure(err.getvalue())
        data = json.loads(out.getvalue())
        got = {f["code"] for f in data["findings"]} | {d["code"] for d in data.get("static", [])}
        if self.expect.strip() == "verified":
            ok = data["verdict"] == "verified"
        else:
            ok = data["verdict"] == "findings" and got == {c.strip() for c in self.expect.split(",")}
        if not ok:
            text = io.StringIO()
            run(argv + ["--format", "text", "--color", "never"], text, io.StringIO())
            want = "verified" if self.expect.strip() == "verified" else f"exactly {self.expect}"
            hint = ""
            if data.get("stopped") == "max-states":
                hint = " (stopped by --max-states: raise pipecheck_max_states, or reduce the spec's parameters)"
            raise PipeFailure(f"expected {want}, got {data['verdict']}{hint}"
                              + (f" ({', '.join(sorted(got))})" if got else "") + "\n\n" + text.getvalue())

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, PipeFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"pipecheck {self.name} {self.path.name}"
