"""A compact encoding of states for the visited set: each part of a state as a small number.

Every thread class's place, barrier, buffer tag and the async sets are interned: equal parts
get one id, kept once. A state becomes the bytes of its ids (4 bytes a part), so a visited
state costs tens of bytes instead of a tree of tuples. Encoding is injective (equal bytes
only for equal states), so exploration visits exactly the same states (`--no-compact`).
"""
from __future__ import annotations

from array import array
from typing import Any

# Fields of model.State that are tuples of per-object values: interned element by element.
_PER_ELEMENT = frozenset({"locs", "bars", "bufs", "mmas", "exited"})


class Interner:
    """Maps states (NamedTuples of tuples) to bytes; one table per field, or per field and element."""

    def __init__(self, census: bool = False) -> None:
        self.whole: list[dict[Any, int]] | None = None  # per field interned as a whole
        self.split: list[list[dict[Any, int]]] = []  # per field interned element by element
        self.layout: list[bool] = []  # per field: element by element?
        self.fields: tuple[str, ...] = ()
        # --stats: explore keeps the visited keys, for `search.census` to say where the space comes from
        self.census = census

    def _setup(self, state: Any) -> None:
        fields = getattr(state, "_fields", ())
        self.fields = tuple(fields)
        self.layout = [name in _PER_ELEMENT for name in fields] or [False]
        self.whole = [{} for _ in self.layout]
        self.split = [[] for _ in self.layout]

    def __call__(self, state: Any) -> bytes:
        if self.whole is None:
            self._setup(state)
        whole, split = self.whole, self.split
        assert whole is not None
        if len(self.layout) == 1:
            state = (state,)
        ids = []
        for k, value in enumerate(state):
            if self.layout[k]:
                tables = split[k]
                ids.append(len(value))  # the length first, so different lengths never collide
                while len(tables) < len(value):
                    tables.append({})
                for j, v in enumerate(value):
                    t = tables[j]
                    i = t.get(v)
                    if i is None:
                        i = t[v] = len(t)
                    ids.append(i)
            else:
                t = whole[k]
                i = t.get(value)
                if i is None:
                    i = t[value] = len(t)
                ids.append(i)
        return array("I", ids).tobytes()

    @property
    def parts(self) -> int:
        """How many distinct parts are kept (the tables' cost, shared by every state)."""
        return sum(len(t) for t in self.whole or ()) + sum(len(t) for ts in self.split for t in ts)


    def decode(self, key: bytes) -> list[tuple[int, ...] | int]:
        """A visited key back to its ids: per field, the id of its value, or for a per-element field the ids
        of its elements (a tuple)."""
        ids = array("I")
        ids.frombytes(key)
        out: list[tuple[int, ...] | int] = []
        at = 0
        for per in self.layout:
            if per:
                n = ids[at]
                out.append(tuple(ids[at + 1:at + 1 + n]))
                at += 1 + n
            else:
                out.append(ids[at])
                at += 1
        return out

    def values(self, field: str, element: int | None = None) -> list:
        """The distinct values a field (or one element of a per-element field) took, by id."""
        k = self.fields.index(field)
        table = self.split[k][element] if element is not None else (self.whole or [])[k]
        out: list = [None] * len(table)
        for v, i in table.items():
            out[i] = v
        return out
