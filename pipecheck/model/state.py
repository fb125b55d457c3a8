"""The state of the model and the names of its actions, shared by the transition system and
every component that reads or rewrites states (findings, asynchronous events, reductions).
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

EMPTY = -1  # tile tag of a buffer nothing has written
CLOBBERED = -2  # tile tag of a buffer whose storage was written through an alias
ANY_TILE = -3  # what a read expects when it names no tile (PTX): whatever landed, after it landed
FAR_K = 1 << 40  # --every: the loop bound of a state nowhere near the end of its loops (loop_offset.FAR, and above)


class State(NamedTuple):
    locs: tuple  # per class: tuple of ((pc, registers), count), sorted
    bars: tuple  # per barrier id: semantics.Barrier | None (not initialised, or invalidated)
    bufs: tuple  # per buffer id: tile tag
    flight: tuple  # sorted copies in flight: (buffer, tag, bytes, barrier (-1: cp.async), site, class, cp seq)
    colls: tuple  # sorted partly-arrived collectives: (key, arrived, expected)
    mmas: tuple  # per MMA unit: (done, forming, inflight)
    stores: tuple  # sorted bulk stores: (class, group (-1 open), buffer, tag, stage 0 reading / 1 writing, site)
    dirty: tuple  # sorted generic-proxy writes not yet fenced: (buffer, class, passed a sync since)
    vis: tuple  # sorted barriers initialised but not yet visible to all: (barrier, initialiser, state)
    commits: tuple  # sorted arrivals owed on completion: (kind, unit or class, upto, barriers, site, class)
    exited: tuple  # per CTA
    halted: str | None  # a fault ended the kernel
    t5: tuple = ()  # sorted tcgen05 ordering and TMEM entries (model/tcgen05.py)


# Actions: ("t", class, group, outcome) a thread class step; ("l", i) copy i lands; ("m", unit) an MMA
# group completes; ("s", i) bulk store i finishes reading (stage 0) or writing (stage 1); ("k", i) commit i
# arrives; ("x", cta) a CTA whose threads have all finished exits.
Action = tuple


def _group_order(g):
    (pc, env), cnt = g
    return (pc, tuple(-(1 << 62) if v is None else v for v in env), cnt)


def merge_groups(groups: Iterable) -> tuple:
    acc: dict = {}
    for loc, cnt in groups:
        if cnt <= 0:
            continue
        acc[loc] = acc.get(loc, 0) + cnt
    items = list(acc.items())
    if len(items) > 1:
        items.sort(key=_group_order)
    return tuple(items)


def regroup(groups: tuple, gi: int, loc: tuple, m: int) -> tuple:
    if len(groups) == 1:
        return ((loc, m),)
    g = list(groups)
    del g[gi]
    g.append((loc, m))
    return merge_groups(g)


def seen_in_warp(st) -> bool:
    """A barrier init's visibility record (`State.vis`) that a warp's meeting made visible to that warp only:
    `("warp", cta, role, instance, warp)`."""
    return type(st) is tuple and st[0] == "warp"
