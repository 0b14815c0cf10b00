"""Units: jobs grouped into classes of identical rows (throughputs, scale factor, weight, type, extras), so that
the LP policies solve over classes, not jobs (see formulation.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetsched.compiled import kernels
from hetsched.compiled.jit import compiled
from hetsched.decide.gavel.base import PolicyView


@dataclass(frozen=True)
class Units:
    """Jobs grouped into units: `of_job[i]` is job i's unit, `first[k]` a member, `mult[k]` the unit's size."""

    of_job: np.ndarray
    first: np.ndarray
    mult: np.ndarray

    @property
    def size(self) -> int:
        return len(self.first)


#: With `aggregate=None`, classes are formed above this many jobs. Below it the per-job problem is as fast and
#: its interior-point solution is the one Gavel's cvxpy+ECOS returns (bit-for-bit means on the fidelity cases).
AGGREGATE_ABOVE = 128


def make_units(view: PolicyView, extra: list[np.ndarray] | None = None, aggregate: bool | None = None) -> Units:
    """Group jobs whose rows (throughputs, scale factor, weight, type, extras) are identical."""
    m = view.num_jobs
    if aggregate is None:
        aggregate = m > AGGREGATE_ABOVE
    if not aggregate or m == 0:
        idx = np.arange(m)
        return Units(idx, idx, np.ones(m))
    columns = [view.throughput, view.scale_factor[:, None], view.priority_weight[:, None]]
    if view.type_code is not None:
        columns.append(view.type_code[:, None])
    columns += [np.asarray(e, float).reshape(m, -1) for e in (extra or [])]
    rows = np.hstack([np.asarray(c, float) for c in columns])
    if kernels.ENABLED:                     # the same units, compiled (NaN-free rows; NaN keeps numpy's rule below)
        of_job, first, counts = _groups_by_first(rows)
        if len(of_job) == m:
            return Units(of_job, first, counts)
    first, of_job, counts = identical_rows(rows)
    # Keep units in order of their first job, so results do not depend on the grouping's sort.
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return Units(rank[of_job.ravel()], first[order], counts[order].astype(float))


def identical_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Groups of equal rows, as `np.unique(rows, axis=0, return_index, return_inverse, return_counts)` gives
    them (the groups' order aside): each group's first row, each row's group, each group's size. A stable
    lexsort and one comparison of neighbours is several times faster than the structured sort of `axis=0`."""
    if np.isnan(rows).any():                       # NaN equals nothing there; keep numpy's own rule
        _, first, of_job, counts = np.unique(rows, axis=0, return_index=True, return_inverse=True,
                                             return_counts=True)
        return first, of_job.ravel(), counts
    order = np.lexsort(rows.T[::-1])
    ranked = rows[order]
    starts = np.r_[True, (ranked[1:] != ranked[:-1]).any(axis=1)]
    of_job = np.empty(len(rows), np.int64)
    of_job[order] = np.cumsum(starts) - 1
    first = order[starts]                          # stable: the earliest row of each group
    counts = np.diff(np.r_[np.flatnonzero(starts), len(rows)])
    return first, of_job, counts


@compiled
def _groups_by_first(rows):
    """`make_units`' grouping in one pass: a row joins the group of the first earlier row it equals (a hash table
    on the rows' bits, -0.0 as 0.0), so groups come in order of their first rows, as there. Empty arrays if a row
    has a NaN (NaN equals nothing; numpy's rule decides then)."""
    m, d = rows.shape
    of_job = np.empty(m, np.int64)
    first = np.empty(m, np.int64)
    counts = np.zeros(m)
    size = 1
    while size < 2 * m:
        size *= 2
    table = np.full(size, -1, np.int64)             # slot -> group
    bits = (rows + 0.0).view(np.int64)              # + 0.0: -0.0 hashes as 0.0, which it equals
    u = 0
    for i in range(m):
        h = 0
        for c in range(d):
            if rows[i, c] != rows[i, c]:
                return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
            b = bits[i, c]
            h = ((h * 1000003) ^ ((b ^ (b >> 33)) & 0x7FFFFFFF)) & 0x7FFFFFFF   # low and high bits (sign too)
        slot = ((h * 0x9E3779B) >> 13) & (size - 1)     # multiplicative mix: integral floats end in zeros
        while True:
            g = table[slot]
            if g < 0:
                table[slot] = g = u
                first[u] = i
                u += 1
                break
            same = True
            for c in range(d):
                if rows[first[g], c] != rows[i, c]:
                    same = False
                    break
            if same:
                break
            slot = (slot + 1) & (size - 1)
        of_job[i] = g
        counts[g] += 1.0
    return of_job, first[:u], counts[:u]
