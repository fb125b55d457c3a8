"""Explorations in forked processes, their results in the order they were asked for (--jobs).

The configuration classes of a parameter point are independent searches (pipeline/verify.py,
pipeline/ptx.py): on a machine with several cores they run at once, each in a child forked
from the run (it inherits the model already built, nothing is pickled on the way in), and
the child sends back its `Exploration`. The caller reads the results in the order of its
calls, so what it makes of them, and the report, is the same whatever the number of
processes (pipeline/searches.py `run_in_order` says how the cause budget stays exact).

Only where `fork` exists (Linux, macOS); elsewhere, or with one process, the calls run in
this process, one after another. A child that dies before sending its result (killed for
memory, a signal) is not a result: its call runs again here.
"""
from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..core.forks import available, can_fork, can_fork_beside, orphan_dies

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = ["Beside", "available", "beside", "can_fork", "in_order", "outcome"]

# multiprocessing is imported where a child is started, not here: it costs 14 ms at start-up, and a run
# with one process, or one search, never needs it

def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", what the call returned) or ("raise", the exception it raised)."""
    try:
        return ("ok", call())
    except Exception as exc:  # noqa: BLE001 - the caller raises it in its turn
        return ("raise", exc)


def _child(call: Callable[[], Any], conn: Connection) -> None:
    try:
        out: tuple = ("ok", call())
    except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it in order
        out = ("raise", exc)
    try:
        conn.send(out)
    except Exception as exc:  # noqa: BLE001 - an exception that does not pickle: say what it was
        conn.send(("raise", RuntimeError(f"{type(out[1]).__name__}: {out[1]}") if out[0] == "raise" else exc))
    conn.close()
    # out at once: no exit handlers, no flushing of streams the parent (or a thread of its, the progress
    # display) may have held a lock on when it forked
    os._exit(0)


def in_order(calls: Iterable[Callable[[], Any]], jobs: int) -> Iterator[tuple[str, Any]]:
    """The `outcome` of each call, in order; at most `jobs` children at once, the calls taken from `calls` only
    as children are started (a lazy iterable is read a few calls ahead of the results, no further). An exception
    is an outcome, not raised here: the iterator goes on past it. Closing it early stops the children still
    running."""
    source = iter(calls)
    if jobs <= 1 or not can_fork():
        for call in source:
            yield outcome(call)
        return
    first, second = next(source, None), next(source, None)
    if second is None:  # one call: no process to start for it
        if first is not None:
            yield outcome(first)
        return
    source = itertools.chain((first, second), source)
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("fork")
    running: dict[Connection, tuple[int, Any]] = {}  # the parent's end of each child's pipe -> (turn, process)
    done: dict[int, tuple] = {}
    waiting: dict[int, Callable[[], Any]] = {}  # the calls started and not yet given back, by turn
    started = 0
    more = True
    try:
        turn = 0
        while True:
            while turn not in done:
                while more and len(running) < jobs:
                    call = next(source, None)
                    if call is None:
                        more = False
                        break
                    sys.stdout.flush()  # a child must not write out what the parent had buffered
                    sys.stderr.flush()
                    ours, theirs = ctx.Pipe(duplex=False)
                    proc = ctx.Process(target=_child, args=(call, theirs), daemon=True)
                    proc.start()
                    theirs.close()
                    running[ours] = (started, proc)
                    waiting[started] = call
                    started += 1
                if turn >= started:
                    return  # every call given back
                for conn in wait(list(running)):
                    i, proc = running.pop(conn)
                    try:
                        done[i] = conn.recv()
                    except Exception:  # noqa: BLE001 - it died without a result, or one that does not unpickle
                        done[i] = ("again",)  # run it here
                    conn.close()
                    proc.join()
            out = done.pop(turn)
            call = waiting.pop(turn)
            turn += 1
            yield outcome(call) if out[0] == "again" else out
    finally:
        for conn, (_, proc) in running.items():
            proc.terminate()
            proc.join()
            conn.close()


class Beside:
    """A call running in a forked child beside this process (`beside`): `result()` waits for its outcome, `cancel()`
    stops it."""

    def __init__(self, proc: Any, conn: "Connection", tag: Any):
        self._proc, self._conn = proc, conn
        self.tag = tag  # what the call is, as its caller names it
        self._out: tuple | None = None

    def result(self) -> tuple[str, Any] | None:
        """The call's `outcome`, or None when the child died without one."""
        if self._out is None:
            try:
                self._out = self._conn.recv()
            except Exception:  # noqa: BLE001 - it died, or sent what does not unpickle: the caller runs the call itself
                self._out = ("again",)
            self._conn.close()
            self._proc.join()
        return None if self._out[0] == "again" else self._out

    def cancel(self) -> None:
        if self._out is None:
            self._out = ("again",)
            self._proc.terminate()
            self._proc.join()
            self._conn.close()


def _beside_child(call: Callable[[], Any], conn: Connection, idle: bool) -> None:
    orphan_dies()
    if idle:
        os.nice(IDLE_NICE)
    _child(call, conn)


# the niceness of a child that takes only what the run leaves idle: beside a busy process of the run it gets a tenth of
# a CPU (Linux's scheduler weights), beside an idle one all of it
IDLE_NICE = 10


def beside(call: Callable[[], Any], tag: Any = None, idle: bool = False) -> Beside | None:
    """Start `call` in a forked child that runs beside this process (on a machine with a second CPU for it), or
    None where that cannot be: one CPU, no `fork`, or not Linux (where a child could outlive a run that is stopped).
    `idle`: the child runs at a lower priority (`IDLE_NICE`), on what the run's own processes leave idle."""
    if not can_fork_beside():
        return None
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    sys.stdout.flush()
    sys.stderr.flush()
    ours, theirs = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_beside_child, args=(call, theirs, idle), daemon=True)
    proc.start()
    theirs.close()
    return Beside(proc, ours, tag)
