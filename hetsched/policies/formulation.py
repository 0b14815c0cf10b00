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


def _segments(keys: np.ndarray, partners: np.ndarray, gpus: np.ndarray, Z: np.ndarray, flat_jobs: np.ndarray,
              key_start: np.ndarray, key_size: np.ndarray, unit_of_job: np.ndarray):
    """For every combo c, the jobs of key `keys[c]` with positive pair time toward `partners[c]` on `gpus[c]`,
    flattened: (combo id, job, supply), combos in order, jobs in key order."""
    sizes = key_size[keys]
    combo = np.repeat(np.arange(len(keys)), sizes)
    within = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    jobs = flat_jobs[key_start[keys][combo] + within]
    supply = Z[unit_of_job[jobs], partners[combo], gpus[combo]]
    keep = supply > 0
    return combo[keep], jobs[keep], supply[keep]


def _ends(combo: np.ndarray, supply: np.ndarray, num_combos: int) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative ends of each job's interval within its combo, and each combo's total."""
    cs = np.cumsum(supply)
    totals = np.bincount(combo, weights=supply, minlength=num_combos)
    before = np.cumsum(totals) - totals
    return cs - before[combo], totals


def _intervals(points_combo: np.ndarray, points: np.ndarray, limit: np.ndarray, shift: float):
    """Distinct breakpoints per combo in [0, limit[c]] -> consecutive intervals (combo, start, length)."""
    c = np.concatenate([points_combo, np.arange(len(limit)), np.arange(len(limit))])
    v = np.concatenate([points, np.zeros(len(limit)), limit])
    keep = v <= limit[c]
    key = np.unique(v[keep] + c[keep] * shift)
    combo = np.floor(key / shift + 1e-12).astype(np.int64)
    start = key[:-1] - combo[:-1] * shift
    same = combo[1:] == combo[:-1]
    length = np.diff(key)
    return combo[:-1][same], start[same], length[same]


def decompose_pairs(view: PolicyView, units: Units, pair_vars: np.ndarray, z: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Turn type-level pair time into job pairs with O(jobs) pairs per key pair and GPU type (vectorised).

    For key pair (a, b) on a GPU type, lay a-jobs' pair times end to end on [0, T) and b-jobs' likewise and pair
    whoever overlaps. Within one key, pair the owner of u with the owner of u + T/2 for u in [0, T/2): no job meets
    itself because each job's share is at most T/2 (the same-key constraint of the polytope).
    """
    n = view.num_types
    empty = np.zeros((0, 2), np.intp), np.zeros((0, n))
    keep = z > PAIR_EPS
    if not len(pair_vars) or not keep.any():
        return empty
    pu, pk, pj = (col[keep] for col in pair_vars.T)
    key_of_unit = view.type_code[units.first]
    Z = np.zeros((units.size, view.colocated.shape[0], n))
    Z[pu, pk, pj] = z[keep]
    order = np.lexsort((np.arange(view.num_jobs), units.of_job, view.type_code))   # jobs by key, then unit
    key_size = np.bincount(view.type_code, minlength=view.colocated.shape[0])
    key_start = np.cumsum(key_size) - key_size
    a_keys = key_of_unit[pu]
    combos = np.unique(np.stack([np.minimum(a_keys, pk), np.maximum(a_keys, pk), pj], axis=1), axis=0)
    shift = float(view.num_jobs) + 2.0
    out = []
    args = (Z, order, key_start, key_size, units.of_job)
    cross = combos[combos[:, 0] != combos[:, 1]]
    if len(cross):
        a, b, j = cross.T
        ca, ja, sa = _segments(a, b, j, *args)
        cb, jb, sb = _segments(b, a, j, *args)
        ends_a, tot_a = _ends(ca, sa, len(cross))
        ends_b, tot_b = _ends(cb, sb, len(cross))
        combo, start, length = _intervals(np.concatenate([ca, cb]), np.concatenate([ends_a, ends_b]),
                                          np.minimum(tot_a, tot_b), shift)
        mid = start + length / 2 + combo * shift
        ia = np.minimum(np.searchsorted(ends_a + ca * shift, mid, side="right"), len(ja) - 1)
        ib = np.minimum(np.searchsorted(ends_b + cb * shift, mid, side="right"), len(jb) - 1)
        out.append((ja[ia], jb[ib], cross[combo, 2], length))
    same = combos[combos[:, 0] == combos[:, 1]]
    if len(same):
        a, _, j = same.T
        ca, ja, sa = _segments(a, a, j, *args)
        ends, tot = _ends(ca, sa, len(same))
        half = tot / 2
        folded = np.where(ends < half[ca], ends, ends - half[ca])
        combo, start, length = _intervals(ca, folded, half, shift)
        mid = start + length / 2
        shifted = ends + ca * shift
        lo = np.minimum(np.searchsorted(shifted, mid + combo * shift, side="right"), len(ja) - 1)
        hi = np.minimum(np.searchsorted(shifted, mid + half[combo] + combo * shift, side="right"), len(ja) - 1)
        out.append((ja[lo], ja[hi], same[combo, 2], length))
    if not out:
        return empty
    i, k, jj, v = (np.concatenate(parts) for parts in zip(*out))
    ok = (v > PAIR_EPS) & (i != k)
    i, k, jj, v = i[ok], k[ok], jj[ok], v[ok]
    if not len(i):
        return empty
    pairs, inverse = np.unique(np.stack([np.minimum(i, k), np.maximum(i, k)], axis=1), axis=0, return_inverse=True)
    x_pairs = np.zeros((len(pairs), n))
    np.add.at(x_pairs, (inverse.ravel(), jj), v)
    return pairs, x_pairs
