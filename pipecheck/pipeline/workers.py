"""Explorations in forked processes, their results in the order they were asked for (--jobs).

The configuration classes of a parameter point are independent searches (pipeline/verify.py,
pipeline/ptx.py): on a machine with several cores they run at once, each in a child forked
from the run (it inherits the model already built, nothing is pickled on the way in), and
the child sends back its `Exploration`. The caller reads the results in the order of its
calls, so what it makes of them, and the report, is the same whatever the number of
processes (pipeline/verify.py `_in_order` says how the cause budget stays exact).

Only where `fork` exists (Linux, macOS); elsewhere, or with one process, the calls run in
this process, one after another. A child that dies before sending its result (killed for
memory, a signal) is not a result: its call runs again here.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any


def available() -> int:
    """The processes this machine can run at once (the CPUs this process may use)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS: no affinity
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


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


def in_order(calls: Sequence[Callable[[], Any]], jobs: int) -> Iterator[Any]:
    """The value of each call, in order; at most `jobs` children at once. An exception a call raised is
    raised here when its turn comes. Closing the iterator early stops the children still running."""
    if jobs <= 1 or len(calls) <= 1 or not can_fork():
        for call in calls:
            yield call()
        return
    ctx = multiprocessing.get_context("fork")
    sys.stdout.flush()  # a child must not write out what the parent had buffered
    sys.stderr.flush()
    running: dict[Connection, tuple[int, Any]] = {}  # the parent's end of each child's pipe -> (call, process)
    done: dict[int, tuple] = {}
    started = 0
    try:
        for turn in range(len(calls)):
            while turn not in done:
                while started < len(calls) and len(running) < jobs:
                    ours, theirs = ctx.Pipe(duplex=False)
                    proc = ctx.Process(target=_child, args=(calls[started], theirs), daemon=True)
                    proc.start()
                    theirs.close()
                    running[ours] = (started, proc)
                    started += 1
                for conn in wait(list(running)):
                    i, proc = running.pop(conn)
                    try:
                        done[i] = conn.recv()
                    except (EOFError, OSError):  # it died without a result: run it here
                        done[i] = ("again",)
                    conn.close()
                    proc.join()
            out = done.pop(turn)
            if out[0] == "again":
                yield calls[turn]()
            elif out[0] == "raise":
                raise out[1]
            else:
                yield out[1]
    finally:
        for conn, (_, proc) in running.items():
            proc.terminate()
            proc.join()
            conn.close()
