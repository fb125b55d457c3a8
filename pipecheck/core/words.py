"""English for messages: numbers as ranges (`1-3,5`) and names joined with "and"."""
from __future__ import annotations

from typing import Iterable


def ranges(xs: Iterable[int]) -> str:
    """`0,2-31` for the lanes 0, 2, 3, ..., 31."""
    parts = []
    start = prev = None
    for x in sorted(xs):
        if start is None:
            start = prev = x
        elif x == prev + 1:
            prev = x
        else:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = x
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def join_words(items: list[str]) -> str:
    """`a, b and c`; `nobody` for none."""
    if not items:
        return "nobody"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`; did you mean 'full'?` when one candidate is close to `name` (a typo), else ''.

    Deterministic: candidates are sorted first, so equally close ones resolve the same way every run."""
    import difflib  # only when a name is wrong

    pool = sorted({c for c in candidates if c and c != name})
    close = difflib.get_close_matches(name, pool, n=1, cutoff=0.7)
    if not close and len(name) <= 4:  # short names: one transposition or letter is already far in ratio
        close = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""
