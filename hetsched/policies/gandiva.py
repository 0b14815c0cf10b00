"""Gandiva baseline (docs/rules.md#gandiva): random pairing under contention, equal time share, type-agnostic."""

from __future__ import annotations

import random

import numpy as np

from hetsched.policies.base import Allocation, Policy, PolicyView
from hetsched.policies.shares import isolated_fractions


class Gandiva(Policy):
    """Gandiva: equal time share; when over-subscribed, jobs are paired at random and bad pairs are broken."""

    packing = True
    heterogeneity_aware = True   # the artifact visits types in fixed order (it is a "Packing" policy)
    stateful = True

    def __init__(self, seed: int = 0):
        self._rng = random.Random(seed)
        self._pairs: set[tuple[int, int]] = set()   # remembered pairs of job ids

    def _pair_quality(self, view: PolicyView, i: int, k: int) -> float:
        """Sum over all GPU types of T_i^pair/T_i + T_k^pair/T_k (the artifact's test; 0 if any part is 0)."""
        total = 0.0
        tput = view.pair_throughput(i, k)
        for j in range(view.num_types):
            a, b = view.throughput[i, j], view.throughput[k, j]
            if a <= 0 or b <= 0 or tput[j, 0] <= 0 or tput[j, 1] <= 0:
                return 0.0
            total += tput[j, 0] / a + tput[j, 1] / b
        return total

    def allocate(self, view: PolicyView) -> Allocation:
        m, n = view.num_jobs, view.num_types
        if view.scale_factor.sum() <= view.capacity.sum():
            self._pairs.clear()
            return Allocation(view.job_ids, view.gpu_types, isolated_fractions(view))
        index = {int(j): i for i, j in enumerate(view.job_ids.tolist())}
        kept = set()
        for a, b in sorted(self._pairs):
            if a in index and b in index and self._pair_quality(view, index[a], index[b]) >= 1.0:
                kept.add((a, b))
        self._pairs = kept
        paired = {j for p in kept for j in p}
        unassigned = [j for j in view.job_ids.tolist() if j not in paired]
        for _ in range(len(unassigned)):
            if len(unassigned) < 2:
                break
            a, b = self._rng.sample(unassigned, 2)
            if view.scale_factor[index[a]] == view.scale_factor[index[b]]:
                self._pairs.add((min(a, b), max(a, b)))
                unassigned.remove(a)
                unassigned.remove(b)
        combos = len(self._pairs) + len(unassigned)
        share = (view.capacity / combos)[None, :]
        x = np.zeros((m, n))
        singles = np.array([index[j] for j in unassigned], dtype=np.intp)
        if len(singles):
            x[singles] = share / view.scale_factor[singles][:, None]
        pairs = np.array(sorted((index[a], index[b]) for a, b in self._pairs), dtype=np.intp).reshape(-1, 2)
        x_pairs = share / view.scale_factor[pairs[:, 0]][:, None] if len(pairs) else np.zeros((0, n))
        cap = lambda rows: rows / np.maximum(1.0, rows.sum(axis=1))[:, None]  # noqa: E731
        return Allocation(view.job_ids, view.gpu_types, cap(x), pairs, cap(x_pairs))
