"""A finding: what one transition (or a terminal state) of the model reveals.

Findings are data; the explorer keeps the first (shortest) occurrence of each key and the
reports turn them into diagnostics, timelines and sentences.
"""
from __future__ import annotations

from dataclasses import field

from ..core.records import record


@record
class Finding:
    code: str
    message: str
    site: int = -1  # index into the model's sites; -1 when no statement is to blame
    cls: int = -1  # the thread class that acted, or -1
    barriers: tuple[int, ...] = ()  # barrier ids whose state explains it
    notes: tuple[tuple[str, int], ...] = ()  # (message, site) pairs
    # what the hazard harms, for the reports' "why": "stage" (a tile its reader still needs), "accumulator"
    # (an MMA result being read while the MMA writes it), "writer" (a thread's write into storage still in use),
    # "alias" (storage written through a buffer declared over it); "" when the code says it all
    victim: str = field(default="", compare=False)
    # why current hardware may not show it although PTX allows it (pipeline/causes.py: a latent finding), or ""
    latent: str = field(default="", compare=False)

    @property
    def key(self) -> tuple:
        return (self.code, self.site)
