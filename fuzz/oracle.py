"""Runs one fuzz input through the CLI in-process, with limits, and judges the outcome.

A crash is: an exception out of `cli.run`, an internal error, an exit code outside
{0, 1, 2, 3}, an error without a file:line:col inside the input, or no verdict for a
well-formed spec. `judge` returns the list of what went wrong (empty: fine).
"""
from __future__ import annotations

import io
import re
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipecheck.cli import run

from .specgen import ROOT, Input

LOCATED = re.compile(r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning): ", re.M)
UNLOCATED = re.compile(r"^pipecheck: (?:error|internal error)", re.M)
LIMITS = ("--max-states", "300", "--timeout", "3")
# the commands an input is run with, chosen by a hash of its bytes so a run is reproducible
COMMANDS = (
    ("verify",), ("verify",), ("verify",), ("verify", "--format", "json"), ("verify", "--format", "sarif"),
    ("verify", "--all"), ("check",), ("explain",), ("timeline", "--max-states", "300"),
)


class Watchdog(BaseException):
    """Raised by the timer when one input runs past the watchdog: not an Exception, so `run` lets it out."""


@dataclass
class Outcome:
    code: int | None
    problems: list[str]
    seconds: float
    command: tuple[str, ...]
    stdout: str = ""
    stderr: str = ""


class Sandbox:
    """A temporary directory with the corpus's `lib/` beside it, so mutated specs can still import."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pipecheck-fuzz-"))
        shutil.copytree(ROOT / "specs" / "lib", self.dir / "lib")

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _alarm(signum, frame):
    raise Watchdog()


def _command(data: bytes) -> tuple[str, ...]:
    import zlib
    return COMMANDS[zlib.crc32(data) % len(COMMANDS)]


def _inside(texts: dict[str, str], file: str, line: int, col: int) -> bool:
    text = texts.get(file)
    if text is None:
        return False
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return False
    return 1 <= col <= len(lines[line - 1]) + 1


def judge(inp: Input, box: Sandbox, watchdog: int = 60) -> Outcome:
    """Run `inp` and list every way the outcome breaks the contract."""
    import time
    path = box.dir / "input.pipe"
    path.write_bytes(inp.data)
    command = _command(inp.data)
    limits = LIMITS if command[0] == "verify" else ()
    argv = [command[0], str(path), *command[1:], *limits]
    out, err = io.StringIO(), io.StringIO()
    problems: list[str] = []
    code: int | None = None
    # CPU seconds, not wall seconds: a loaded machine must not make an input a crash. The timer repeats,
    # because a signal that lands in a gc callback is swallowed (the input then runs on).
    old = signal.signal(signal.SIGVTALRM, _alarm)
    signal.setitimer(signal.ITIMER_VIRTUAL, watchdog, 1.0)
    start = time.perf_counter()
    try:
        code = run(argv, out, err)
    except Watchdog:
        problems.append(f"slow: still running after {watchdog} CPU seconds")
    except BaseException as exc:  # noqa: BLE001 - anything out of run() is the crash we look for
        problems.append(f"exception out of run(): {type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)
    seconds = time.perf_counter() - start
    stdout, stderr = out.getvalue(), err.getvalue()
    if code is not None:
        problems += _contract(inp, path, box, code, stdout, stderr, command)
    return Outcome(code, problems, seconds, tuple(argv[:1] + argv[2:]), stdout, stderr)


def _contract(inp: Input, path: Path, box: Sandbox, code: int, stdout: str, stderr: str,
              command: tuple[str, ...]) -> list[str]:
    problems = []
    if code not in (0, 1, 2, 3):
        problems.append(f"exit code {code}")
    if "Traceback" in stdout + stderr:
        problems.append("a traceback in the output")
    for m in UNLOCATED.finditer(stderr):
        line = stderr[m.start():].split("\n", 1)[0]
        problems.append(f"an error without a location: {line}")
    texts = {str(path): inp.data.decode("utf-8", "replace")}
    for lib in (box.dir / "lib").glob("*.pipe"):
        texts[str(lib)] = lib.read_text()
    located = list(LOCATED.finditer(stderr))
    if code == 2 and not located and not problems:
        problems.append("exit 2 without a located error")
    for m in located + list(LOCATED.finditer(stdout)):
        file, line, col = m["file"], int(m["line"]), int(m["col"])
        if not _inside(texts, file, line, col):
            problems.append(f"a location outside the input: {file}:{line}:{col}")
    if inp.kind == "wellformed" and code not in (0, 1, 3):
        first = (located[0].group(0) + stderr[located[0].end():].split("\n", 1)[0]) if located else stderr[:300]
        problems.append(f"a well-formed spec got no verdict (exit {code}): {first}")
    return problems
