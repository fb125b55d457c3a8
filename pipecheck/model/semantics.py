"""The mbarrier rules of SEMANTICS.md section 1, as pure functions on small tuples.

This is the only module that knows how a phase completes, what faults, and how parity
waits behave; `model` calls it for every barrier operation.
"""
from __future__ import annotations

from typing import NamedTuple

MAX_COUNT = (1 << 20) - 1  # PTX ISA 9.7.13.15.2: arrival counts 1 .. 2^20-1
MAX_TX = (1 << 20) - 1  # tx-count range +-(2^20-1)


class Barrier(NamedTuple):
    """One mbarrier: `phase` completed phases, `pending` arrivals owed, `tx` bytes owed (signed)."""

    phase: int
    pending: int
    expected: int
    tx: int
    arrivers: frozenset  # thread classes that arrived in the current phase


# Events an operation can raise; the model turns them into findings.
COMPLETED = "completed"
FAULT_OVER = "fault-count-above-pending"  # H200 mbar 9
FAULT_TX_ONLY = "fault-arrive-while-only-tx-pending"  # H200 mbar 12
FAULT_TX_RANGE = "fault-tx-range"  # H200 mbar 13
FAULT_UNINIT = "fault-uninitialised"  # H200 mbar 17
DOUBLE = "double-arrive"
DROP_TO_ZERO = "expected-count-zero"  # PTX 9.7.13.15.14: undefined
FAULTS = frozenset({FAULT_OVER, FAULT_TX_ONLY, FAULT_TX_RANGE, FAULT_UNINIT})


def init(count: int) -> Barrier:
    """PTX 9.7.13.15.9: phase 0, pending = expected = count, tx 0."""
    return Barrier(0, count, count, 0, frozenset())


def _complete_if_ready(b: Barrier, events: list[str]) -> Barrier:
    # A phase completes only when pending == 0 and tx == 0 exactly (H200 mbar 4, 5).
    if b.pending == 0 and b.tx == 0:
        events.append(COMPLETED)
        return Barrier(b.phase + 1, b.expected, b.expected, 0, frozenset())
    return b


def arrive(b: Barrier | None, count: int, who, events: list[str], tx: int = 0, first: bool = True) -> Barrier | None:
    """One thread's `arrive [count c] [expect_tx tx]` (PTX 9.7.13.15.7, .13).

    `who` names the arriving thread (its class and ring round) for the double-arrival check
    (None: a thread that cannot arrive twice in one round, left out of the record);
    `first=False` for the later threads of one class arriving together, which are distinct
    threads (the class is recorded once per phase)."""
    if b is None:
        events.append(FAULT_UNINIT)
        return None
    if tx:
        b = b._replace(tx=b.tx + tx)
        if abs(b.tx) > MAX_TX:
            events.append(FAULT_TX_RANGE)
            return b
    if b.pending == 0:
        events.append(FAULT_TX_ONLY)
        return b
    if count > b.pending:
        events.append(FAULT_OVER)
        return b
    record = first and who is not None
    if record and who in b.arrivers:
        events.append(DOUBLE)
    b = Barrier(b.phase, b.pending - count, b.expected, b.tx, b.arrivers | {who} if record else b.arrivers)
    return _complete_if_ready(b, events)


def expect_tx(b: Barrier | None, nbytes: int, events: list[str]) -> Barrier | None:
    """`expect_tx b`: tx += b, no arrival (PTX 9.7.13.15.11); may complete a phase waiting on tx."""
    if b is None:
        events.append(FAULT_UNINIT)
        return None
    b = b._replace(tx=b.tx + nbytes)
    if abs(b.tx) > MAX_TX:
        events.append(FAULT_TX_RANGE)
        return b
    return _complete_if_ready(b, events)


def complete_tx(b: Barrier | None, nbytes: int, events: list[str]) -> Barrier | None:
    """Bytes landing (PTX 9.7.13.15.12): tx -= b, then the completion check; bytes after a
    completion count against the next phase (H200 mbar 6)."""
    if b is None:
        events.append(FAULT_UNINIT)
        return None
    b = b._replace(tx=b.tx - nbytes)
    if abs(b.tx) > MAX_TX:
        events.append(FAULT_TX_RANGE)
        return b
    return _complete_if_ready(b, events)


def arrive_drop(b: Barrier | None, count: int, who, events: list[str], first: bool = True) -> Barrier | None:
    """`arrive_drop c`: expected -= c for later phases, then arrive c (PTX 9.7.13.15.14; H200 mbar 18)."""
    if b is None:
        events.append(FAULT_UNINIT)
        return None
    expected = b.expected - count
    if expected <= 0:
        events.append(DROP_TO_ZERO)
        expected = max(expected, 0)
    return arrive(b._replace(expected=expected), count, who, events, first=first)


def wait_passes(b: Barrier, parity: int, later: int = 0) -> bool:
    """`wait parity p` (try_wait.parity) passes iff p != phase mod 2 (PTX 9.7.13.15.16; H200 mbar 8);
    `later` asks it of the barrier after that many more completions."""
    return ((b.phase + later) & 1) != (parity & 1)


def alias(b: Barrier, intended: int) -> int:
    """How far a waiter for the completion of phase `intended` is off the barrier's window.

    0 when the barrier is in or just past that phase (the parity is meaningful); >0 when the
    barrier is that many phases too far ahead, <0 when the waiter is ahead of the barrier.
    """
    if b.phase > intended + 1:
        return b.phase - intended - 1
    if b.phase < intended:
        return b.phase - intended
    return 0
