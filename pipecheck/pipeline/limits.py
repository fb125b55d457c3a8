"""--timeout and --max-memory in every phase of a run, not only in the search.

A `Watch` reads the clock and the resident memory every 0.05 s (a wall-clock timer signal)
and, past a limit, raises `LimitReached` in whatever phase runs: checking, lowering, class
building, static checks, z3. The search checks the same limits itself and stops with what it
has, so there the watch only steps in after a grace period (one state with a huge expansion).
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from contextvars import ContextVar

from ..search.explore import Limits, rss_mb

TICK = 0.05  # seconds between reads of the clock and the memory
SEARCH_GRACE = 1.0  # seconds past --timeout before the watch interrupts a search that has not stopped itself
MEMORY_GRACE = 1.25  # ... and the factor past --max-memory
WRAP_UP = 2.0  # seconds a stopped run has to collect and report what it found before the watch steps in again


class LimitReached(BaseException):
    """A limit passed outside the search. Not an Exception: no `except Exception` in a stage swallows it."""

    def __init__(self, limit: str, phase: str, detail: str, seconds: float, rss: float):
        super().__init__(f"stopped by {limit} in {phase}")
        self.limit, self.phase, self.detail, self.seconds, self.rss = limit, phase, detail, seconds, rss

    @property
    def where(self) -> str:
        """'lowering (parameter point 1 of 1, 0 configuration(s) explored) at 20.0 s, 480 MB'"""
        at = f" ({self.detail})" if self.detail else ""
        return f"{self.phase}{at} at {self.seconds:.1f} s, {self.rss:.0f} MB"


_current: ContextVar["Watch | None"] = ContextVar("pipecheck_watch", default=None)


class Watch:
    """The limits of one run, armed by `with watch(limits):`; `phase()` names what runs now.

    Before anything is found the watch interrupts the phase that overruns (nothing is lost but
    the time). Once a finding is in hand (`found()`) it only marks the limit (`tripped`), which
    the pipeline reads between configurations, so the finding is reported; it interrupts only
    if the run goes on WRAP_UP seconds past the limit all the same."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.start = time.perf_counter()
        self.name, self.detail = "checking", "reading and checking the spec"
        self.tripped: str | None = None
        self.lenient = False  # a finding is in hand
        self.extra = 0.0  # seconds granted past --timeout (wrap_up)
        self.armed = False
        self.stash: dict = {}  # what the run has so far (kernel, runs), for the report of a stopped run
        self._old = None

    def phase(self, name: str, detail: str = "") -> None:
        """Enter the next phase; a limit already passed stops the run here, in the phase that ends (the first
        tick may come after a fast phase, so without this the stop would fall on whichever phase is slow)."""
        if self.armed and not self.lenient:
            why = self._verdict()
            if why is not None:
                raise LimitReached(why, self.name, self.detail, time.perf_counter() - self.start, rss_mb())
        self.name, self.detail = name, detail

    def found(self) -> None:
        self.lenient = True

    def wrap_up(self) -> None:
        """The run now collects and reports what it has: WRAP_UP more seconds before the watch steps in."""
        if self.limits.timeout is not None:
            self.extra = max(self.extra, time.perf_counter() - self.start - self.limits.timeout) + WRAP_UP

    def _over(self, slack: float, factor: float) -> str | None:
        elapsed = time.perf_counter() - self.start
        if self.limits.timeout is not None and elapsed > self.limits.timeout + max(slack, self.extra):
            return "timeout"
        if self.limits.max_memory_mb is not None and rss_mb() > self.limits.max_memory_mb * factor:
            return "max-memory"
        return None

    def _verdict(self) -> str | None:
        """The limit to stop the run for now, or None."""
        if self.tripped is None:
            self.tripped = self._over(0.0, 1.0)
        searching = self.name in ("search", "bmc")
        if self.lenient or self.extra:
            return self._over(WRAP_UP, MEMORY_GRACE)
        # the search stops itself at the limit and keeps its states: a grace before interrupting it
        return self._over(SEARCH_GRACE, MEMORY_GRACE) if searching else self.tripped

    def _tick(self, signum, frame) -> None:
        why = self._verdict()
        if why is not None and not _in_finaliser(frame):
            raise LimitReached(why, self.name, self.detail, time.perf_counter() - self.start, rss_mb())

    def _z3_guard(self) -> None:
        """A thread beside the run: a z3 call does not return to Python (where the timer's signal is handled)
        until it ends, so past a limit this interrupts z3, and the signal then stops the run."""
        while not self._done.wait(4 * TICK):
            z3 = sys.modules.get("z3")
            if z3 is not None and self._verdict() is not None:
                try:
                    z3.main_ctx().interrupt()
                except Exception:  # noqa: BLE001 - best effort: the signal still stops the run after z3 returns
                    pass

    def __enter__(self) -> "Watch":
        self._token = _current.set(self)
        wanted = self.limits.timeout is not None or self.limits.max_memory_mb is not None
        # a signal handler can only be installed from the main thread, and a timer someone else armed
        # (a test harness) is left alone: the search still honours the limits then
        if wanted and threading.current_thread() is threading.main_thread() \
                and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) \
                and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None):
            self._old = signal.signal(signal.SIGALRM, self._tick)
            signal.setitimer(signal.ITIMER_REAL, TICK, TICK)
            self.armed = True
            self._done = threading.Event()
            threading.Thread(target=self._z3_guard, name="pipecheck-z3-guard", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disarm()
        if self._old is not None:
            signal.signal(signal.SIGALRM, self._old)
            self._old = None
        _current.reset(self._token)

    def disarm(self) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self._done.set()
            self.armed = False


class _Inner:
    """Inside a run that already has a watch (a re-run, --every's runs): the same watch, nothing armed."""

    def __init__(self, watch: Watch):
        self.watch = watch

    def __enter__(self) -> Watch:
        return self.watch

    def __exit__(self, *exc: object) -> None:
        return None


def watch(limits: Limits) -> "Watch | _Inner":
    """The run's watch: a new one at the outermost call, the same one inside."""
    outer = _current.get()
    return _Inner(outer) if outer is not None else Watch(limits)


def current() -> Watch | None:
    return _current.get()


def phase(name: str, detail: str = "") -> None:
    """Say what the run does now (for the message when a limit stops it); a no-op without a watch."""
    w = _current.get()
    if w is not None:
        w.phase(name, detail)


def found() -> None:
    """A finding is in hand: from now on a limit stops the run between configurations, keeping it."""
    w = _current.get()
    if w is not None:
        w.found()


def tripped() -> str | None:
    """The limit passed ("timeout", "max-memory"), or None."""
    w = _current.get()
    return w.tripped if w is not None else None


def wrap_up() -> None:
    w = _current.get()
    if w is not None:
        w.wrap_up()


def stash(**parts) -> None:
    """Keep what the run has so far (kernel, runs, sites, sources) for the report if a limit stops it."""
    w = _current.get()
    if w is not None:
        w.stash.update(parts)


def _in_finaliser(frame) -> bool:
    """Whether the signal landed in a `__del__` (z3 frees its objects there) or a garbage-collector callback
    (hypothesis installs one): Python would print the exception as ignored and go on, so the next tick raises
    it instead."""
    while frame is not None:
        if frame.f_code.co_name == "__del__" or frame.f_code.co_name.endswith("callback"):
            return True
        frame = frame.f_back
    return False
