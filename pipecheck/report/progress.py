"""Live progress of a long exploration on a terminal: states, states per second, depth.

Drawn with rich on stderr (stdout stays the report, byte for byte); the CLI only creates
one when stderr is a terminal or `--progress always` asks for it.
"""
from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.progress import Progress as RichProgress
from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

MIN_WIDTH = 80  # a narrower terminal (or COLUMNS) wraps the line rather than cutting the figures off
FIXED = 14  # the spinner, the elapsed time and the gaps between the columns


def shorten(name: str, room: int) -> str:
    """The spec's name in at most `room` characters, keeping its end (the file name): '…/specs/ring.pipe'."""
    if len(name) <= room:
        return name
    if room <= 1:
        return ""
    return "…" + name[len(name) - room + 1:]


class Progress:
    """A context manager whose instances are the `progress(states, depth, seconds)` callback of verify_file.

    The figures come first and the spec's name fills what is left of the line, so a long path
    never pushes states/s and depth off a narrow terminal."""

    def __init__(self, stream: TextIO, spec: str):
        self.spec = spec
        width = max(MIN_WIDTH, Console(file=stream, force_terminal=True).width)
        console = Console(file=stream, force_terminal=True, highlight=False, emoji=False, width=width)
        self.width = width
        self._bar = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                 console=console, transient=True, refresh_per_second=4)
        self._task = self._bar.add_task(self.line("starting"), total=None)
        self.updates = 0

    def line(self, figures: str) -> str:
        name = shorten(self.spec, self.width - FIXED - len(figures) - 2)
        return f"{figures}: {name}" if name else figures

    def __enter__(self) -> "Progress":
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def __call__(self, states: int, depth: int, seconds: float) -> None:
        rate = states / seconds if seconds > 0 else 0.0
        self.updates += 1
        self._bar.update(self._task, description=self.line(f"{states:,} states, {rate:,.0f} states/s, depth {depth}"))
        self._bar.refresh()
