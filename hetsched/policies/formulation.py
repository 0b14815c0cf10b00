"""The allocation polytope shared by the LP policies, built vectorised over *units*.

A unit is either one job or a class of identical jobs (same throughputs, scale factor, weight, ...). Jobs of
a class get the same allocation; for the symmetric (convex) policy problems an optimal symmetric solution
always exists, so solving over classes loses nothing and keeps the problem size independent of the number of
jobs.

Space sharing is modelled at job-type level (ARCHITECTURE.md): variable `z[k, b, j]` is the time fraction a
job of unit k shares its GPUs of type j with *some* job of key b (same scale factor). Consistency (time
paired with b from a's side equals b's side) and, within one key, "no job pairs with itself" make any
solution decomposable into job pairs (`decompose_pairs`). The LP therefore has O(units x keys) variables
instead of Gavel's O(jobs^2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import HetschedError
from .base import Allocation, PolicyView

# Pair time fractions below this are interior-point noise (1e-5 of a 360-s round is 4 ms): dropped when
# decomposing, which only lowers GPU usage, so allocations stay feasible.
PAIR_EPS = 1e-5


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
    _, first, of_job, counts = np.unique(rows, axis=0, return_index=True, return_inverse=True,
                                         return_counts=True)
    # Keep units in order of their first job, so results do not depend on np.unique's sort.
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return Units(rank[of_job.ravel()], first[order], counts[order].astype(float))


@dataclass
class Polytope:
    """Variables, base constraints and per-unit linear maps of the allocation polytope.

    Rows of `G x <= h`: capacity (n), time (u), same-key pairing (one per same-key pair var), non-negativity.
    `A x = b`: pair consistency between different keys. `E @ x` is each unit's effective throughput (steps/s
    per job), `T @ x` each unit's total time fraction.
    """

    view: PolicyView
    units: Units
    num_vars: int
    G: sp.csr_matrix
    h: np.ndarray
    A: sp.csr_matrix
    b: np.ndarray
    E: sp.csr_matrix
    T: sp.csr_matrix
    pair_vars: np.ndarray   # (p, 3): unit, partner key, gpu type
    num_aux: int

    def pad(self, extra: int) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
        """G, A and E with `extra` zero columns appended (for epigraph variables)."""
        def widen(M):
            return sp.hstack([M, sp.csr_matrix((M.shape[0], extra))]).tocsr()
        return widen(self.G), widen(self.A), widen(self.E)

    def allocation(self, x: np.ndarray) -> Allocation:
        """Expand a solution vector into per-job fractions and job pairs."""
        view, units = self.view, self.units
        n = view.num_types
        alone = x[: units.size * n].reshape(units.size, n)[units.of_job]
        pairs, x_pairs = decompose_pairs(view, units, self.pair_vars, x[units.size * n: units.size * n
                                                                          + len(self.pair_vars)])
        return Allocation(view.job_ids, view.gpu_types, alone, pairs, x_pairs)


def _pair_candidates(view: PolicyView, units: Units) -> np.ndarray:
    if view.colocated is None or view.type_code is None:
        raise HetschedError("space sharing needs co-location throughputs in the policy view")
    key = view.type_code[units.first]
    num_keys = view.colocated.shape[0]
    key_sf = np.zeros(num_keys)
    key_sf[view.type_code] = view.scale_factor
    col = np.nan_to_num(view.colocated[key])                  # (u, K, n, 2)
    ok = (col[..., 0] > 0) & (col[..., 1] > 0)
    ok &= (key_sf[None, :] == view.scale_factor[units.first][:, None])[:, :, None]
    present = np.zeros(num_keys, bool)
    present[view.type_code] = True
    ok &= present[None, :, None]
    return np.argwhere(ok)                                    # rows (unit, key, gpu) in C order


def build_polytope(view: PolicyView, units: Units, packing: bool = False) -> Polytope:
    m_u, n = units.size, view.num_types
    s = view.scale_factor[units.first].astype(float)
    mult = units.mult
    n_alone = m_u * n
    pv = _pair_candidates(view, units) if packing else np.zeros((0, 3), dtype=np.intp)
    n_pair = len(pv)
    key = view.type_code[units.first] if packing else None
    same = pv[:, 1] == key[pv[:, 0]] if packing else np.zeros(0, bool)
    # One auxiliary variable per (key, gpu) that has same-key pair variables: the key's total paired time.
    if n_pair and same.any():
        aux_keys, aux_of_var = np.unique(pv[same][:, 1] * n + pv[same][:, 2], return_inverse=True)
    else:
        aux_keys, aux_of_var = np.zeros(0, np.intp), np.zeros(0, np.intp)
    n_aux = len(aux_keys)
    nv = n_alone + n_pair + n_aux

    ku = np.repeat(np.arange(m_u), n)
    ju = np.tile(np.arange(n), m_u)
    pu, pk, pj = pv[:, 0], pv[:, 1], pv[:, 2]
    pidx = n_alone + np.arange(n_pair)

    # Capacity: sum_k mult_k s_k (x_kj + 1/2 sum_b z_kbj) <= N_j  (a pair holds its GPUs once).
    cap = sp.csr_matrix((np.concatenate([mult[ku] * s[ku], 0.5 * mult[pu] * s[pu]]),
                         (np.concatenate([ju, pj]), np.concatenate([np.arange(n_alone), pidx]))), shape=(n, nv))
    # Time: each job is scheduled at most all the time.
    time = sp.csr_matrix((np.ones(n_alone + n_pair), (np.concatenate([ku, pu]),
                                                       np.arange(n_alone + n_pair))), shape=(m_u, nv))
    blocks, rhs = [cap, time], [view.capacity.astype(float), np.ones(m_u)]
    eq_blocks, eq_rhs = [], []
    if n_aux:
        # aux_(a,j) = sum_{l in a} mult_l z_{l,a,j};  2 z_{k,a,j} <= aux_(a,j) (no job pairs with itself).
        sv = np.flatnonzero(same)
        aux_col = n_alone + n_pair + aux_of_var
        eq_blocks.append(sp.csr_matrix(
            (np.concatenate([mult[pu[sv]], -np.ones(n_aux)]),
             (np.concatenate([aux_of_var, np.arange(n_aux)]), np.concatenate([pidx[sv], n_alone + n_pair
                                                                               + np.arange(n_aux)]))),
            shape=(n_aux, nv)))
        eq_rhs.append(np.zeros(n_aux))
        blocks.append(sp.csr_matrix((np.concatenate([2 * np.ones(len(sv)), -np.ones(len(sv))]),
                                     (np.tile(np.arange(len(sv)), 2), np.concatenate([pidx[sv], aux_col]))),
                                    shape=(len(sv), nv)))
        rhs.append(np.zeros(len(sv)))
    if n_pair and (~same).any():
        # Consistency: time that a-jobs spend with b-jobs equals the time b-jobs spend with a-jobs.
        dv = np.flatnonzero(~same)
        a, b = key[pu[dv]], pk[dv]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        rows, row_of = np.unique((lo * (hi.max() + 1) + hi) * n + pj[dv], return_inverse=True)
        sign = np.where(a < b, 1.0, -1.0)
        eq_blocks.append(sp.csr_matrix((sign * mult[pu[dv]], (row_of, pidx[dv])), shape=(len(rows), nv)))
        eq_rhs.append(np.zeros(len(rows)))
    blocks.append(-sp.eye(nv, format="csr"))
    rhs.append(np.zeros(nv))

    tput = view.throughput[units.first]
    own = np.nan_to_num(view.colocated[key[pu], pk, pj, 0]) if n_pair else np.zeros(0)
    E = sp.csr_matrix((np.concatenate([tput.ravel(), own]),
                       (np.concatenate([ku, pu]), np.arange(n_alone + n_pair))), shape=(m_u, nv))
    A = sp.vstack(eq_blocks).tocsr() if eq_blocks else sp.csr_matrix((0, nv))
    b = np.concatenate(eq_rhs) if eq_rhs else np.zeros(0)
    return Polytope(view, units, nv, sp.vstack(blocks).tocsr(), np.concatenate(rhs), A, b, E, time, pv, n_aux)


def _split(cut_a: np.ndarray, cut_b: np.ndarray, total: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Overlay two partitions of [0, total): segments (owner in a, owner in b, length)."""
    points = np.unique(np.concatenate([[0.0], cut_a[cut_a < total], cut_b[cut_b < total], [total]]))
    lengths = np.diff(points)
    mid = points[:-1] + lengths / 2
    return np.searchsorted(cut_a, mid, side="right"), np.searchsorted(cut_b, mid, side="right"), lengths


def decompose_pairs(view: PolicyView, units: Units, pair_vars: np.ndarray, z: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Turn type-level pair time into job pairs with O(jobs) pairs per key pair and GPU type."""
    n = view.num_types
    if not len(pair_vars):
        return np.zeros((0, 2), np.intp), np.zeros((0, n))
    keep = z > PAIR_EPS
    pu, pk, pj = (col[keep] for col in pair_vars.T)
    if not len(pu):
        return np.zeros((0, 2), np.intp), np.zeros((0, n))
    key_of_unit = view.type_code[units.first]
    Z = np.zeros((units.size, view.colocated.shape[0], n))
    Z[pu, pk, pj] = z[keep]
    # Jobs of each key, grouped by unit (a stable order, so decompositions are reproducible).
    order = np.lexsort((np.arange(view.num_jobs), units.of_job))
    by_key = {int(a): order[view.type_code[order] == a] for a in np.unique(view.type_code)}
    a_keys = key_of_unit[pu]
    lo, hi = np.minimum(a_keys, pk), np.maximum(a_keys, pk)
    combos = np.unique(np.stack([lo, hi, pj], axis=1), axis=0)
    out_i, out_k, out_j, out_v = [], [], [], []
    for a, b, j in combos.tolist():
        jobs_a = by_key[a]
        sup_a = Z[units.of_job[jobs_a], b, j]
        jobs_a, sup_a = jobs_a[sup_a > 0], sup_a[sup_a > 0]
        if not len(jobs_a):
            continue
        cut_a = np.cumsum(sup_a)
        if a == b:
            # Point u in [0, total/2) pairs the owner of u with the owner of u + total/2; no job meets itself
            # because each job's share is at most total/2 (the same-key constraint).
            total = cut_a[-1]
            half = total / 2
            points = np.unique(np.concatenate([[0.0], cut_a[cut_a < half], cut_a[(cut_a > half) & (cut_a < total)]
                                               - half, [half]]))
            length = np.diff(points)
            mid = points[:-1] + length / 2
            i_side = jobs_a[np.minimum(np.searchsorted(cut_a, mid, side="right"), len(jobs_a) - 1)]
            k_side = jobs_a[np.minimum(np.searchsorted(cut_a, mid + half, side="right"), len(jobs_a) - 1)]
        else:
            jobs_b = by_key[b]
            sup_b = Z[units.of_job[jobs_b], a, j]
            jobs_b, sup_b = jobs_b[sup_b > 0], sup_b[sup_b > 0]
            if not len(jobs_b):
                continue
            cut_b = np.cumsum(sup_b)
            total = min(cut_a[-1], cut_b[-1])
            owner_a, owner_b, length = _split(cut_a, cut_b, total)
            i_side = jobs_a[np.minimum(owner_a, len(jobs_a) - 1)]
            k_side = jobs_b[np.minimum(owner_b, len(jobs_b) - 1)]
        ok = (length > PAIR_EPS) & (i_side != k_side)
        out_i.append(i_side[ok])
        out_k.append(k_side[ok])
        out_j.append(np.full(ok.sum(), j))
        out_v.append(length[ok])
    if not out_i:
        return np.zeros((0, 2), np.intp), np.zeros((0, n))
    i, k = np.concatenate(out_i), np.concatenate(out_k)
    lo, hi = np.minimum(i, k), np.maximum(i, k)
    pairs, inverse = np.unique(np.stack([lo, hi], axis=1), axis=0, return_inverse=True)
    x_pairs = np.zeros((len(pairs), n))
    np.add.at(x_pairs, (inverse.ravel(), np.concatenate(out_j)), np.concatenate(out_v))
    return pairs, x_pairs
