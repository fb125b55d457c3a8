"""Live progress of a long exploration on a terminal: states, states per second, depth.

Drawn with rich on stderr (stdout stays the report, byte for byte); the CLI only creates
one when stderr is a terminal or `--progress always` asks for it.
"""
from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.progress import Progress as RichProgress
from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn


class Progress:
    """A context manager whose instances are the `progress(states, depth, seconds)` callback of verify_file."""

    def __init__(self, stream: TextIO, spec: str):
        self.spec = spec
        console = Console(file=stream, force_terminal=True, highlight=False, emoji=False)
        self._bar = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                 console=console, transient=True, refresh_per_second=4)
        self._task = self._bar.add_task(f"{spec}: starting", total=None)
        self.updates = 0

    def __enter__(self) -> "Progress":
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def __call__(self, states: int, depth: int, seconds: float) -> None:
        rate = states / seconds if seconds > 0 else 0.0
        self.updates += 1
        self._bar.update(self._task, description=f"{self.spec}: {states:,} states, {rate:,.0f} states/s, depth {depth}")
        self._bar.refresh()
