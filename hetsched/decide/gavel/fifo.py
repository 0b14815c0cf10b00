"""FIFO (docs/rules.md#fifo): jobs in arrival (id) order take whole GPUs until the head does not fit.

`fifo_perf` gives each job the fastest type with room; `fifo_packed` then pairs queued jobs with running ones
when their combined normalised throughput exceeds 1.5. `fifo` (heterogeneity-agnostic) picks a type uniformly
at random among those with room and keeps a job's type while it runs. This is the *intended* baseline: the
artifact's `fifo` draws the random type but then uses a stale loop variable, so it mostly runs on V100s
(docs/rules.md#fifo) and its stored FIFO curves are worse than this baseline.
"""

from __future__ import annotations

import random

import numpy as np

from hetsched.decide.gavel.base import Allocation, Policy, PolicyView

PACKING_THRESHOLD = 1.5


class FIFO(Policy):
    """FIFO: first come, first served on whole GPUs; no back-filling of idle GPUs by later jobs."""

    fills_idle_gpus = False

    def __init__(self, heterogeneity_aware: bool = True, packing: bool = False, seed: int = 0):
        self.heterogeneity_aware = heterogeneity_aware or packing
        self.packing = packing
        self.stateful = not self.heterogeneity_aware
        self._rng = random.Random(seed)
        self._assigned: dict[int, int] = {}   # agnostic mode: job id -> GPU type index, kept while it runs

    def allocate(self, view: PolicyView) -> Allocation:
        m, n = view.num_jobs, view.num_types
        x = np.zeros((m, n))
        free = view.capacity.astype(float).copy()
        ids = view.job_ids.tolist()
        if not self.heterogeneity_aware:
            active = set(ids)
            self._assigned = {j: t for j, t in self._assigned.items() if j in active}
            for i, job in enumerate(ids):
                if job in self._assigned:
                    x[i, self._assigned[job]] = 1.0
                    free[self._assigned[job]] -= view.scale_factor[i]
        queue = [i for i in np.argsort(view.job_ids, kind="stable") if x[i].sum() == 0]
        head = 0
        for head, i in enumerate(queue):
            s = view.scale_factor[i]
            fits = [j for j in range(n) if free[j] >= s and view.throughput[i, j] > 0]
            if not fits:
                break
            if self.heterogeneity_aware:
                j = max(fits, key=lambda t: view.throughput[i, t])
            else:
                j = self._rng.choice(fits)
                self._assigned[ids[i]] = j
            x[i, j] = 1.0
            free[j] -= s
        else:
            head = len(queue)
        if not self.packing:
            return Allocation(view.job_ids, view.gpu_types, x)
        return self._pack(view, x, queue[head:])

    def _pack(self, view: PolicyView, x: np.ndarray, waiting: list[int]) -> Allocation:
        """Pair each waiting job (in order) with the running single that gains most; stop at the first miss."""
        pairs, x_pairs = [], []
        singles = {int(i): int(np.argmax(x[i])) for i in np.flatnonzero(x.sum(axis=1) > 0)}
        for i in waiting:
            best, best_gain = None, PACKING_THRESHOLD
            for k, j in singles.items():
                if view.scale_factor[k] != view.scale_factor[i]:
                    continue
                own, other = view.pair_throughput(i, k)[j]
                if view.throughput[i, j] <= 0 or view.throughput[k, j] <= 0 or own <= 0 or other <= 0:
                    continue
                gain = own / view.throughput[i, j] + other / view.throughput[k, j]
                if gain > best_gain:
                    best, best_gain = k, gain
            if best is None:
                break
            j = singles.pop(best)
            x[best, j] = 0.0
            row = np.zeros(view.num_types)
            row[j] = 1.0
            pairs.append((min(i, best), max(i, best)))
            x_pairs.append(row)
        return Allocation(view.job_ids, view.gpu_types, x, np.array(pairs, dtype=np.intp).reshape(-1, 2),
                          np.array(x_pairs).reshape(-1, view.num_types))
