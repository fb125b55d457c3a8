"""The lark grammars' text: beside the package in a source checkout, package data in an installed wheel."""
from __future__ import annotations

from pathlib import Path


def grammar_path(name: str) -> Path:
    """The file of grammars/NAME: beside the package in a checkout, else the installed package data."""
    beside = Path(__file__).resolve().parent.parent.parent / "grammars" / name
    if beside.is_file():
        return beside
    from importlib import resources  # an install: only then (its import is a few milliseconds of start-up)
    return Path(str(resources.files("pipecheck.grammars") / name))


def grammar_text(name: str) -> str:
    """The text of grammars/NAME (`pipe.lark`, `ptx.lark`)."""
    return grammar_path(name).read_text()
