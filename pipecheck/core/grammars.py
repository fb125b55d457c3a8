"""The lark grammars' text: beside the package in a source checkout, package data in an installed wheel."""
from __future__ import annotations

from importlib import resources
from pathlib import Path


def grammar_text(name: str) -> str:
    """The text of grammars/NAME (`pipe.lark`, `ptx.lark`)."""
    beside = Path(__file__).resolve().parent.parent.parent / "grammars" / name
    if beside.is_file():
        return beside.read_text()
    return (resources.files("pipecheck.grammars") / name).read_text()
