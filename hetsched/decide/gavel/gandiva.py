"""Gandiva baseline (docs/rules.md#gandiva): random pairing under contention, equal time share, type-agnostic."""

from __future__ import annotations

import random
from itertools import chain, compress

import numpy as np

from hetsched.errors import HetschedError
from hetsched.decide.gavel.base import Allocation, Policy, PolicyView
from hetsched.decide.gavel.shares import isolated_fractions


class Gandiva(Policy):
    """Gandiva: equal time share; when over-subscribed, jobs are paired at random and bad pairs are broken."""

    packing = True
    heterogeneity_aware = True   # the artifact visits types in fixed order (it is a "Packing" policy)
    stateful = True

    def __init__(self, seed: int = 0):
        self._rng = random.Random(seed)
        self._pairs: set[tuple[int, int]] = set()   # remembered pairs of job ids

    @staticmethod
    def pair_quality(view: PolicyView, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """Per pair (rows first[p], second[p]): the sum over GPU types of T_i^pair/T_i + T_k^pair/T_k, added type
        by type in the artifact's order; 0 if any part is 0 (unmeasured pair rates count as 0)."""
        if view.colocated is None or view.type_code is None:
            raise HetschedError("gandiva: the policy view carries no co-location throughputs")
        pair = np.nan_to_num(view.colocated[view.type_code[first], view.type_code[second]], nan=0.0)  # (p, n, 2)
        own, other = view.throughput[first], view.throughput[second]
        ok = ((own > 0) & (other > 0) & (pair[..., 0] > 0) & (pair[..., 1] > 0)).all(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            part = pair[..., 0] / own + pair[..., 1] / other
        total = np.zeros(len(first))
        for j in range(view.num_types):
            total += part[:, j]
        return np.where(ok, total, 0.0)

    def allocate(self, view: PolicyView) -> Allocation:
        m, n = view.num_jobs, view.num_types
        if view.scale_factor.sum() <= view.capacity.sum():
            self._pairs.clear()
            return Allocation(view.job_ids, view.gpu_types, isolated_fractions(view))
        ids = view.job_ids.tolist()
        scale = dict(zip(ids, view.scale_factor.tolist()))               # the jobs present, by id
        rows_of = _RowsOf(view.job_ids)
        present = [p for p in self._pairs if p[0] in scale and p[1] in scale]
        rows = rows_of(chain.from_iterable(present), 2 * len(present)).reshape(-1, 2)
        good = self.pair_quality(view, rows[:, 0], rows[:, 1]) >= 1.0
        kept = self._pairs = set(compress(present, good.tolist()))
        paired = set(chain.from_iterable(kept))
        unassigned = [j for j in ids if j not in paired]
        for _ in range(len(unassigned)):
            if len(unassigned) < 2:
                break
            a, b = self._rng.sample(unassigned, 2)
            if scale[a] == scale[b]:
                self._pairs.add((min(a, b), max(a, b)))
                unassigned.remove(a)
                unassigned.remove(b)
        combos = len(self._pairs) + len(unassigned)
        share = (view.capacity / combos)[None, :]
        x = np.zeros((m, n))
        singles = rows_of(unassigned, len(unassigned))
        if len(singles):
            x[singles] = share / view.scale_factor[singles][:, None]
        pairs = rows_of(chain.from_iterable(self._pairs), 2 * len(self._pairs)).reshape(-1, 2)
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]               # by first row, then second
        x_pairs = share / view.scale_factor[pairs[:, 0]][:, None] if len(pairs) else np.zeros((0, n))
        cap = lambda rows: rows / np.maximum(1.0, rows.sum(axis=1))[:, None]  # noqa: E731
        return Allocation(view.job_ids, view.gpu_types, cap(x), pairs, cap(x_pairs))


class _RowsOf:
    """View rows of job ids (any order of the view's ids)."""

    def __init__(self, job_ids: np.ndarray):
        self.ids, self.order = job_ids, np.argsort(job_ids, kind="stable")

    def __call__(self, ids, count: int) -> np.ndarray:
        """The rows of the `count` job ids that `ids` yields."""
        flat = np.fromiter(ids, np.int64, count)
        return self.order[np.searchsorted(self.ids, flat, sorter=self.order)]
