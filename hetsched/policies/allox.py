"""AlloX baseline (spec/gavel.md s.2.13): min-cost matching of jobs to (GPU, position) slots.

Gavel's AlloX accepts single-GPU jobs only; Shockwave runs it (alpha = 0.2) on multi-GPU streams, so a job that
keeps its allocation here holds all `scale_factor` GPUs, and a matched gang that no longer fits its type waits."""

from __future__ import annotations

import numpy as np

from ..errors import HetschedError
from .base import Allocation, Policy, PolicyView


class AlloX(Policy):
    """AlloX: jobs keep a full allocation once given; the rest are matched to GPUs to minimise total JCT."""

    stateful = True

    def __init__(self, alpha: float = 1.0):
        if not 0 < alpha <= 1:
            raise HetschedError(f"allox: alpha must be in (0, 1], got {alpha}")
        self.alpha = alpha
        self._running: dict[int, int] = {}   # job id -> GPU type index

    def allocate(self, view: PolicyView) -> Allocation:
        m, n = view.num_jobs, view.num_types
        ids = view.job_ids.tolist()
        x = np.zeros((m, n))
        free = view.capacity.astype(int).copy()
        active = set(ids)
        self._running = {j: t for j, t in self._running.items() if j in active}
        for i, job in enumerate(ids):
            if job in self._running:
                x[i, self._running[job]] = 1.0
                free[self._running[job]] -= int(view.scale_factor[i])      # a gang holds all its GPUs
        waiting = [i for i in range(m) if ids[i] not in self._running]
        waiting.sort(key=lambda i: -view.time_since_arrival[i])           # oldest first
        # The artifact truncates with max(...) where min(...) was surely meant: with alpha = 1 nothing is cut.
        waiting = waiting[: max(int(self.alpha * m), int(free.sum()))]
        workers = np.repeat(np.arange(n), np.maximum(free, 0))
        if not waiting or not len(workers):
            return Allocation(view.job_ids, view.gpu_types, x)
        from scipy.optimize import linear_sum_assignment   # imported here: scipy.optimize is slow to import

        # Slot (worker k, position q) costs q * p_ik, q = 1 for the job that runs last on k. Identical workers of
        # a type share their jobs round-robin in an optimal schedule, so a type with F free GPUs needs at most
        # ceil(len(waiting) / F) positions per GPU: the matrix has O(jobs x types) columns, not O(jobs x GPUs).
        slots_w, slots_q = [], []
        for j in range(n):
            if free[j] <= 0:
                continue
            depth = -(-len(waiting) // int(free[j]))
            for q in range(1, depth + 1):
                slots_w.extend(np.flatnonzero(workers == j).tolist())
                slots_q.extend([q] * int(free[j]))
        slots_w, slots_q = np.array(slots_w), np.array(slots_q)
        tput = view.throughput[np.ix_(waiting, workers[slots_w])]
        p = view.remaining_steps[waiting][:, None] / np.where(tput > 0, tput, 1e-10)
        cost = p * slots_q[None, :]
        rows, cols = linear_sum_assignment(cost)
        block, worker = slots_q[cols], slots_w[cols]
        first_on_worker: dict[int, tuple[int, int]] = {}
        for r, q, w in zip(rows, block, worker):
            if w not in first_on_worker or q > first_on_worker[w][0]:
                first_on_worker[w] = (q, r)
        for w, (_, r) in first_on_worker.items():
            i, t = waiting[r], workers[w]
            if view.scale_factor[i] > free[t]:
                continue                                   # a gang that no longer fits waits for a later call
            free[t] -= int(view.scale_factor[i])
            x[i, t] = 1.0
            self._running[ids[i]] = int(t)
        return Allocation(view.job_ids, view.gpu_types, x)
