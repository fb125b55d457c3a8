"""What a forked child of a run needs to know of the machine: how many CPUs, whether `fork` exists, and how a
child dies with its parent. Used by the searches in parallel (pipeline/workers.py) and the expansions of one
search spread over processes (search/pool.py)."""
from __future__ import annotations

import os
import sys


def available() -> int:
    """The processes this machine can run at once (the CPUs this process may use)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS: no affinity
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    # multiprocessing is imported only here and where a child is started: it costs 14 ms at start-up, and a run
    # with one process never needs it
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def can_fork_beside() -> bool:
    """Whether a child may run beside this process: a second CPU for it, `fork`, and Linux (elsewhere a child could
    outlive a run that is stopped: `orphan_dies`)."""
    return available() >= 2 and sys.platform.startswith("linux") and can_fork()


def orphan_dies() -> None:
    """Linux: this process is killed when the one that forked it dies (prctl PR_SET_PDEATHSIG), so a child started
    beside a run never outlives it."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
