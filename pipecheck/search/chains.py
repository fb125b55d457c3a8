"""A thread group's run of private steps, taken as one move of the reduced search.

Where the reduction finds that one thread group alone is a persistent set (`por.persistent`), and its move
changes nothing but where the group stands (a read, a wait or an MMA wait that passes), the group's next
statement is weighed against the same reach: what the other processes can do before the group moves is
the same as before the step, since they stand where they stood and nothing they read changed (barriers,
collectives, MMA units, bulk stores, copies, records). When that statement commutes with all of it
(`por.commutes`), the group alone is persistent in the state after the step too, and the state needs no
processes, closure or visited entry of its own: the two steps are one move. The run goes on while each
step changes only the group's place, and ends with the first step that changes anything else, raises a
finding, or is not the group's only move.

A run never crosses a step other groups move with (a --lockstep statement, a warp meeting, any
collective or named barrier), a `choose`, or a place where the group joins another group of its class.
Each state the run passes through is one a persistent-set search would have explored with that group's
move alone, so the reduced search visits the same terminal states and findings (docs/performance.md,
"Private runs as one move"). A run is an action ("c", (step, step, ...)); `Model.steps` replays it one
step at a time for the report.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..model.ir import (ARRIVE, ARRIVE_DROP, COMMIT_GROUP, COMPLETE_TX, CP_ASYNC, CP_ASYNC_ARRIVE, EXPECT_TX,
                        FENCE_PROXY, MMA, MMA_COMMIT, MMA_WAIT, READ, TMA_LOAD, TMA_STORE, WAIT, WAIT_GROUP, WRITE)
from .explore import CHAIN

if TYPE_CHECKING:
    from ..model.state import State
    from ..model.system import Model

# the statements a run may take: one future operation each, a move of the group alone (any of them may end
# the run by changing more than where the group stands)
_RUNS = frozenset({READ, WAIT, MMA_WAIT, WAIT_GROUP, ARRIVE, ARRIVE_DROP, EXPECT_TX, COMPLETE_TX, TMA_LOAD, MMA,
                   MMA_COMMIT, COMMIT_GROUP, TMA_STORE, WRITE, FENCE_PROXY, CP_ASYNC, CP_ASYNC_ARRIVE})


def private(before: "State", after: "State") -> bool:
    """Whether a step changed nothing but where thread groups stand (a model step keeps every other part
    of the state as the same object when it does not change it)."""
    return all(x is y for x, y in zip(before[1:], after[1:]))


def moved(before: tuple, after: tuple, m: int) -> tuple[int, tuple] | None:
    """(index, place) of the group of `m` threads a step moved within its class's groups, or None where it
    joined a group already there (the count no longer `m`: another future)."""
    new = [g for g in after if g not in before]
    if len(new) != 1 or new[0][1] != m:
        return None
    return after.index(new[0]), new[0][0]


def follow(model: "Model", op_of: Callable[["State", tuple], Any], s: "State", move: tuple,
           groups: tuple[tuple[int, int], ...], commutes: Callable[[list], bool]) -> tuple:
    """The move of thread groups that alone are a persistent set in `s` (one group, or the lanes of a warp in
    --lockstep, whose move is the first's), run on through their private steps (see the module doc): `move`
    is (action, state, findings) of their one move; `groups` the (class, group index) of each, the mover first;
    `op_of(state, desc)` the reduction's operation of a future description; `commutes(footprints)` whether
    operations with those footprints commute with what the other processes can do before the groups move, as
    weighed in `s`."""
    action, t, found = move
    if found or action[0] != "t" or not private(s, t) or len({c for c, _ in groups}) != len(groups):
        return move
    counts = [s.locs[c][gi][1] for c, gi in groups]
    steps = [action]
    before = s
    while True:
        nxt = _next_step(model, op_of, before, t, groups, counts, commutes)
        if nxt is None:
            break
        a, u, f = nxt
        steps.append(a)
        found += f
        before, t = t, u
        if f or not private(before, t):
            break
    if len(steps) == 1:
        return move
    return (CHAIN, tuple(steps)), t, found


def _next_step(model: "Model", op_of: Callable[["State", tuple], Any], before: "State", t: "State",
               groups: tuple[tuple[int, int], ...], counts: list[int], commutes: Callable[[list], bool]) -> tuple | None:
    """The groups' one move in `t`, reached from `before` by their last step, where a run may take it: each group
    still itself (`moved`), its statement one of `_RUNS` (`_runs_on`), commuting with the reach, and the only
    move the model gives them; else None."""
    places = []
    for (c, _), m in zip(groups, counts):
        here = moved(before.locs[c], t.locs[c], m)
        if here is None:
            return None
        places.append(here)
    if not _runs_on(model, t, groups, places):
        return None
    footprints = []
    for (c, _), m, (_, (pc, env)) in zip(groups, counts, places):
        descs = model.statement(c, pc, env, m)
        if descs is None:
            return None
        footprints.extend(op_of(t, d).footprint for d in descs)
    if not commutes(footprints):
        return None
    nxt = model.group_successors(t, groups[0][0], places[0][0])
    return nxt[0] if len(nxt) == 1 else None


def _runs_on(model: "Model", t: "State", groups: tuple[tuple[int, int], ...], places: list[tuple[int, tuple]]) -> bool:
    """Whether the groups' next statements in `t` are one move of theirs alone that a run may take: a statement of
    `_RUNS` for each, and for several groups, a --lockstep statement of exactly these lanes (for one, none), whose
    move takes these very groups (it runs the first group of each class standing at its place)."""
    pcs = []
    for (c, _), (_, (pc, _)) in zip(groups, places):
        if model.code[c][pc].op not in _RUNS:
            return False
        pcs.append((c, pc))
    together = model.partners.get(pcs[0])
    if len(pcs) == 1:
        return together is None
    return together is not None and list(together) == pcs and all(
        model.group_at(t, c, pc) == gi for (c, pc), (gi, _) in zip(pcs, places))
