"""The round kernels the core calls: compiled/_rounds.c's loops, one compiled implementation of each.

Each is the reference loop of compiled/kernels.py in C, with the same floating-point operations in the same order, so a
run's results do not depend on whether they ran (tests/test_kernels.py runs the C and numpy paths,
tests/test_round_kernels.py each kernel against its reference loop). C, not numba, because a process that loads
numba's compiled code pays about 0.4 CPU-s once (numba's registries, SciPy's BLAS it imports with its worker
threads): a fifth of a paper-scale Gavel run, and as much as a whole Synergy run. The kernels take C-contiguous
float64, int64 and bool arrays and check every index; anything else is a TypeError or IndexError, never a second,
unchecked kernel. Callers ask `ENABLED` whether to run them: False in a build without a C compiler and with
`HETSCHED_KERNELS=0`, and then they run the numpy code, the reference the loops stand in for.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

try:
    from hetsched.compiled import _rounds
except ImportError:                     # built without a C compiler: the numpy path
    _rounds = None

ENABLED = _rounds is not None and os.environ.get("HETSCHED_KERNELS", "1") != "0"


class QuietRounds(NamedTuple):
    """What `quiet_rounds` reads and writes: the round that ran, the scheduler's walk (`PrioritySelect.walk_state`),
    the result's accounts (`Result.accounts`) and the simulator's clock and rules."""

    entry: np.ndarray               # the running round's entries, GPU type columns, steps, finish and end times
    gpu_type: np.ndarray
    steps: np.ndarray
    finish: np.ndarray
    ends: np.ndarray
    round_start: float
    budget: int                     # further rounds allowed while nothing happens
    members: np.ndarray             # the scheduler's entries, rates and the time each received (PrioritySelect.walk_state)
    etput: np.ndarray
    escale: np.ndarray
    scale: np.ndarray
    remaining: np.ndarray
    t: np.ndarray
    S: np.ndarray
    alloc: np.ndarray
    deficit: np.ndarray
    in_alloc: np.ndarray
    ok: np.ndarray
    need_priority: bool
    capacity: np.ndarray
    order: np.ndarray
    mt: np.ndarray                  # the shuffled type order's generator state (empty: no shuffle)
    acc: np.ndarray                 # the result's per-job accounts and prices (Result.accounts)
    prices: np.ndarray
    priced: bool
    round_s: float
    next_arrival: float             # inf: none
    need_update: bool               # the reset gate (docs/rules.md#reset)
    last_reset: float
    min_reset: float
    busy: float                     # busy GPU-seconds so far


def quiet_rounds(state: QuietRounds):
    """Credit the running round, then run up to `state.budget` more while nothing happens between them (the
    reference loop: compiled/kernels.py `quiet_rounds`). Returns (clock, last round's start, extra rounds, completed
    slots, their finish times, busy GPU-seconds)."""
    return _rounds.quiet_rounds(*state)


if _rounds is not None:
    select_walk = _rounds.select_walk
    run_tasks = _rounds.run_tasks
    gpu_seconds = _rounds.gpu_seconds
    account_tasks = _rounds.account_tasks
    credit_tasks = _rounds.credit_tasks
    mark_started = _rounds.mark_started
    codes_of = _rounds.codes_of
    las_program = _rounds.las_program
    single_rows = _rounds.single_rows
    proportional_rates = _rounds.proportional_rates
