"""CPU seconds spent inside the optimisation back ends: the LP/cone solvers (ECOS, Clarabel, HiGHS's LP), the MILP
solvers (HiGHS, SCIP) and SciPy's matching solver (AlloX).

A run reports them as `solver_cpu_s` beside its `cpu_s`: the part of a run that hetsched's own code does not
spend, and that no change to it can remove while the solver and the problems it is given stay the same. Only the
back end's own calls are timed, with the solver's own setup (ECOS's and Clarabel's factorisation set-up) but
not our building of the arrays it is given. One counter per process: runs in one process are sequential, and
sweep workers are processes.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import NamedTuple

_seconds = 0.0
_calls = 0


@contextmanager
def timed():
    """Count the CPU time of the enclosed back-end call."""
    global _seconds, _calls
    start = time.process_time()
    try:
        yield
    finally:
        _seconds += time.process_time() - start
        _calls += 1


class Mark(NamedTuple):
    cpu_s: float             # the process's CPU time
    solver_cpu_s: float      # of which inside back ends
    solver_calls: int


def reading() -> Mark:
    """The process's CPU time and the back ends' share of it so far; a run reports the difference of two."""
    return Mark(time.process_time(), _seconds, _calls)


def since(mark: Mark) -> dict:
    """A run's row fields `cpu_s`, `solver_cpu_s` and `solver_calls` since `mark` (a `reading()`)."""
    return {k: now - then for k, now, then in zip(Mark._fields, reading(), mark)}
