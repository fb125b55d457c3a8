"""The expansions of one breadth-first search spread over forked processes (--jobs), in the search's own order.

`explore` takes the states of its frontier in turn and, for each, its successors. Working them out (the reduction's
persistent set, the model's moves, the symmetric canon) is nearly all of a search's time, and it is a function of
the state and the seed order it was reached with alone (search/por.py `Reduced.expand`): so children forked from the
search can work out the states at the head of the frontier while the search takes in the results of those before
them. `spread` takes batches from the head of the frontier, one for the search's own process and one for each child
in turn, and gives back each state with its successors in the frontier's order; the search does with them exactly
what it does with states it expands itself, so it visits the same states in the same order, and finds the same
witnesses, whatever the number of processes.

The children inherit the search's system as it was when they were forked (nothing of it is pickled); states go to
them and successors come back pickled, one batch at a time. A child that dies (killed for memory, a signal) is not
an answer: its batches and every later one are expanded by the search itself. An exception a child raises is
raised by the search, in turn. Only where a child can die with its parent (Linux, `fork`, a second CPU).
"""
from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ..core.forks import can_fork_beside, orphan_dies

Entry = tuple  # a frontier entry: (state, its index, its depth, the seed order it was reached with)
Expand = Callable[[Any, Any], tuple]  # (state, seed order) -> (successors, their seed order, note)

BATCH = 48  # frontier states in one batch, at most: each costs a few milliseconds to expand
AHEAD = 2  # batches out at once per process: one to work on, one waiting
HERE = -1  # a batch the search's own process works out
# with no batch out, a frontier of fewer states than this per process is expanded here: each process keeps its own
# caches of the model's moves and the reduction's walks, so a state handed out costs a child about half as much again
# as the search's process, where its neighbours were expanded (pingpong 7/15/8: 1.57x the CPU when every frontier of
# two or more states a process was shared, no gain in time; with this bound it never is, and no child is forked)
NARROW = 8


def in_turn(frontier: deque, take: Callable[[], Entry], expand: Expand) -> Iterator[tuple[Entry, tuple]]:
    """Each frontier entry taken in turn with its expansion, worked out here."""
    while frontier:
        entry = take()
        yield entry, expand(entry[0], entry[3])


def spread(frontier: deque, expand: Expand, children: int) -> Iterator[tuple[Entry, tuple]]:
    """Each entry taken from the head of `frontier` with its expansion, in the frontier's order, the expansions
    worked out by this process and `children` forked ones (the caller appends to `frontier` between the entries it is
    given). Where no child can be started, everything is worked out here."""
    if children < 1 or not can_fork_beside():
        yield from in_turn(frontier, frontier.popleft, expand)
        return
    share = children + 1
    conns: list = []  # the search's end of each child's pipe, once they are forked
    procs: list = []
    # the batches taken from the frontier, in its order: (the child working it out, or HERE, its entries)
    out: deque[tuple[int, list[Entry]]] = deque()
    batch: list[Entry] = []  # the batch being given back, from `given` on
    given = 0
    turn = HERE  # whose batch the next one is: this process's, then each child's in turn
    alive = True
    try:
        while True:
            if not out and alive and 0 < len(frontier) < NARROW * share:  # too few to share: the head, here
                batch, given = [frontier.popleft()], 1
                yield batch[0], expand(batch[0][0], batch[0][3])
                continue
            if not conns and frontier:
                # forked when a frontier first is wide enough to share: a search whose frontiers never are does not
                # pay for them (after a fork, every page of the search's memory it writes to is copied)
                conns, procs = _start(expand, children)
            while alive and frontier and len(out) < AHEAD * share:
                n = max(1, min(BATCH, len(frontier) // share))
                part = [frontier.popleft() for _ in range(min(n, len(frontier)))]
                if turn != HERE:
                    try:
                        conns[turn].send([(e[0], e[3]) for e in part])
                    except OSError:  # that child is gone
                        alive = False
                        frontier.extendleft(reversed(part))
                        break
                out.append((turn, part))
                turn = turn + 1 if turn + 1 < children else HERE
            if not out:
                break
            who, batch = out.popleft()
            given = 0
            got = None
            if alive and who != HERE:
                try:
                    got = conns[who].recv()
                except (EOFError, OSError):  # it died without an answer: this batch, and all to come, are done here
                    alive = False
            results = got[1] if got is not None else None
            while given < len(batch):
                entry = batch[given]
                if results is None:  # this process's batch (while the children work out theirs), or a dead child's
                    result = expand(entry[0], entry[3])
                elif given < len(results):
                    result = results[given]
                else:  # at the entry after those: the search raises it there, as it would itself
                    raise got[2]
                given += 1
                yield entry, result
        yield from in_turn(frontier, frontier.popleft, expand)  # after a child died: the rest here
    finally:
        # what was handed out and not given back goes back to the head of the frontier: the search reports it
        # left there, unexpanded
        unread = batch[given:] + [e for _, part in out for e in part]
        frontier.extendleft(reversed(unread))
        for conn in conns:
            conn.close()
        for proc in procs:
            proc.terminate()
            proc.join()


def _start(expand: Expand, children: int) -> tuple[list, list]:
    """Fork `children` processes expanding states: (the search's end of each one's pipe, the processes)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    sys.stdout.flush()  # a child must not write out what the search's process had buffered
    sys.stderr.flush()
    conns, procs = [], []
    for _ in range(children):
        ours, theirs = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=_child, args=(expand, theirs), daemon=True)
        proc.start()
        theirs.close()
        conns.append(ours)
        procs.append(proc)
    return conns, procs


def _child(expand: Expand, conn: Any) -> None:
    orphan_dies()
    # a thread reads the batches as they come, so the search's process never waits to hand one over while this one
    # waits to hand back an answer the search has not read yet (large states fill a pipe: neither would go on)
    import queue
    import threading

    batches: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        while True:
            try:
                batches.put(conn.recv())
            except (EOFError, OSError):
                batches.put(None)
                return

    threading.Thread(target=read, daemon=True).start()
    while True:
        batch = batches.get()
        if batch is None:
            break
        done: list = []
        answer: tuple = ("ok", done)
        try:
            for state, recent in batch:
                done.append(expand(state, recent))
        except BaseException as exc:  # noqa: BLE001 - the search raises it in its turn
            answer = ("raise", done, exc)
        try:
            conn.send(answer)
        except Exception as exc:  # noqa: BLE001 - what does not pickle: say what it was
            failed = answer[2] if answer[0] == "raise" else exc
            conn.send(("raise", [], RuntimeError(f"{type(failed).__name__} in a child expanding states: {failed}")))
    # out at once: no exit handlers, no flushing of streams the search's process may have held a lock on
    os._exit(0)
