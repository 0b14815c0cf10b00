"""The allocation polytope shared by the LP policies, built vectorised over *units*.

A unit is either one job or a class of identical jobs (same throughputs, scale factor, weight, ...). Jobs of
a class get the same allocation; for the symmetric (convex) policy problems an optimal symmetric solution
always exists, so solving over classes loses nothing and keeps the problem size independent of the number of
jobs.

Space sharing never uses Gavel's O(jobs^2) job-pair variables (ARCHITECTURE.md). Two equivalent forms, the
smaller one is built:

* unit pairs (few units, the usual case for classes): `y[k, l, j]` is the total time fraction that jobs of
  unit k share GPUs of type j with jobs of unit l (k <= l). Each job of k gets `y / mult_k` of it (twice that
  when k == l, which needs two jobs or more). No coupling rows at all.
* unit-key pairs (many units): `z[k, b, j]` is the time a job of unit k shares type j with *some* job of
  key b (same scale factor). Consistency rows (time paired with b from a's side equals b's side) and, within
  one key, "no job pairs with itself" keep it decomposable. O(units x keys) variables.

Either way `decompose_pairs` turns the solution into O(jobs) job pairs per unit or key pair and GPU type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hetsched.compiled import kernels
from hetsched.errors import HetschedError
from hetsched.decide.gavel import pair_kernels, polytope_kernel
from hetsched.decide.gavel.base import Allocation, PolicyView
from hetsched.decide.gavel.rows import Rows
from hetsched.decide.gavel.units import Units

# Pair time fractions below this are interior-point noise (1e-5 of a 360-s round is 4 ms): dropped when
# decomposing, which only lowers GPU usage, so allocations stay feasible.
PAIR_EPS = 1e-5


@dataclass
class Polytope:
    """Variables, base constraints and per-unit linear maps of the allocation polytope.

    Variables: `x[k, j]` (unit k alone on type j, per job), then the pair variables `pair_vars` (rows
    `(unit, partner unit, gpu)` if `unit_pairs`, else `(unit, partner key, gpu)`), then auxiliaries.
    `ineq` (`<=` blocks): capacity (n), time (u), same-key pairing (unit-key form only), non-negativity.
    `eq`: pair consistency between different keys (unit-key form only). `effective` holds one row per unit:
    `E @ x` is the unit's effective throughput (steps/s per job), `T @ x` its time fraction.
    """

    view: PolicyView
    units: Units
    num_vars: int
    ineq: list[Rows]
    eq: list[Rows]
    effective: Rows
    pair_vars: np.ndarray
    num_aux: int
    unit_pairs: bool = False

    @property
    def E(self) -> sp.csr_matrix:
        return self.effective.matrix(self.num_vars)

    @property
    def T(self) -> sp.csr_matrix:
        """Each unit's total time fraction per job (the time rows)."""
        return self.ineq[1].matrix(self.num_vars)

    @property
    def col_type(self) -> np.ndarray:
        """The GPU type column of every variable (auxiliary variables: 0)."""
        n = self.view.num_types
        return np.concatenate([np.tile(np.arange(n), self.units.size), self.pair_vars[:, 2],
                               np.zeros(self.num_aux, np.intp)]).astype(np.intp)

    def allocation(self, x: np.ndarray) -> Allocation:
        """Expand a solution vector into per-job fractions and job pairs."""
        view, units = self.view, self.units
        n = view.num_types
        alone = x[: units.size * n].reshape(units.size, n)[units.of_job]
        z = x[units.size * n: units.size * n + len(self.pair_vars)]
        pairs, x_pairs = decompose_pairs(view, units, self.pair_vars, z, unit_pairs=self.unit_pairs)
        return Allocation(view.job_ids, view.gpu_types, alone, pairs, x_pairs)


def _require_colocation(view: PolicyView) -> None:
    if view.colocated is None or view.type_code is None:
        raise HetschedError("space sharing needs co-location throughputs in the policy view")


def _unit_key_candidates(view: PolicyView, units: Units) -> np.ndarray:
    """Rows (unit, key, gpu), C order, where a job of the unit can share the type with a job of the key."""
    colocated = view.colocated
    key = view.type_code[units.first]
    num_keys = colocated.shape[0]
    key_sf = np.zeros(num_keys)
    key_sf[view.type_code] = view.scale_factor
    col = np.nan_to_num(colocated[key])                       # (u, K, n, 2)
    ok = (col[..., 0] > 0) & (col[..., 1] > 0)
    ok &= (key_sf[None, :] == view.scale_factor[units.first][:, None])[:, :, None]
    present = np.zeros(num_keys, bool)
    present[view.type_code] = True
    ok &= present[None, :, None]
    return np.argwhere(ok)


def _unit_pair_candidates(view: PolicyView, units: Units) -> np.ndarray:
    """Rows (unit k, unit l >= k, gpu), C order, that can share the type; k == l needs two jobs in the unit."""
    key = view.type_code[units.first]
    col = np.nan_to_num(view.colocated[key[:, None], key[None, :]])        # (u, u, n, 2)
    sf = view.scale_factor[units.first]
    ok = (col[..., 0] > 0) & (col[..., 1] > 0) & (sf[:, None] == sf[None, :])[:, :, None]
    ok &= np.triu(np.ones((units.size, units.size), bool))[:, :, None]
    diag = np.arange(units.size)
    ok[diag, diag] &= (units.mult >= 2)[:, None]
    return np.argwhere(ok)


def build_polytope(view: PolicyView, units: Units, packing: bool = False, pair_form: str | None = None) -> Polytope:
    """The polytope over `units`; with `packing`, the smaller of the two pair forms (module docstring).

    `pair_form` ("unit" or "key") forces one form (tests compare them).
    """
    if pair_form not in (None, "unit", "key"):
        raise HetschedError(f"pair_form must be 'unit' or 'key', not {pair_form!r}")
    if packing:
        _require_colocation(view)
    m_u, n = units.size, view.num_types
    s = view.scale_factor[units.first].astype(float)
    mult = units.mult
    unit_pairs = packing and (pair_form == "unit" or pair_form is None and m_u <= 2 * len(np.unique(view.type_code)))
    if unit_pairs and kernels.ENABLED:                 # the same rows, compiled (polytope_kernel.py)
        return _unit_pair_polytope(view, units, s)
    n_alone = m_u * n
    ku = np.repeat(np.arange(m_u), n)
    ju = np.tile(np.arange(n), m_u)
    alone = np.arange(n_alone)
    tput = view.throughput[units.first]
    # COO parts of capacity, time and E; the alone block first: sum_k mult_k s_k x_kj <= N_j, sum_j x_kj <= 1.
    cap = [(mult[ku] * s[ku], ju, alone)]
    time = [(np.ones(n_alone), ku, alone)]
    eff = [(tput.ravel(), ku, alone)]
    if not packing:
        pv = np.zeros((0, 3), dtype=np.intp)
    elif unit_pairs:
        pv = _unit_pair_candidates(view, units)
    else:
        pv = _unit_key_candidates(view, units)
    pu, pk, pj = pv[:, 0], pv[:, 1], pv[:, 2]
    n_pair = len(pv)
    pidx = n_alone + np.arange(n_pair)
    extra_rows: list[Rows] = []
    eq_rows: list[Rows] = []
    n_aux = 0
    if unit_pairs and n_pair:
        # y = summed time of k-l job pairs: holds s GPUs; each k job gets y / mult_k (2 y / mult_k if k == l).
        key = view.type_code[units.first]
        col = np.nan_to_num(view.colocated[key[pu], key[pk], pj])            # (p, 2): own, partner
        share_k = np.where(pu == pk, 2.0, 1.0) / mult[pu]
        share_l = 1.0 / mult[pk]
        off = pu != pk
        cap.append((s[pu], pj, pidx))
        time += [(share_k, pu, pidx), (share_l[off], pk[off], pidx[off])]
        eff += [(share_k * col[:, 0], pu, pidx), ((share_l * col[:, 1])[off], pk[off], pidx[off])]
    elif n_pair:
        # z = per-job time of a unit-k job with some key-b job; the pair holds its s GPUs once.
        key = view.type_code[units.first]
        cap.append((0.5 * mult[pu] * s[pu], pj, pidx))
        time.append((np.ones(n_pair), pu, pidx))
        eff.append((np.nan_to_num(view.colocated[key[pu], pk, pj, 0]), pu, pidx))
        n_aux, extra_rows, eq_rows = _unit_key_coupling(view, units, pv, n_alone)
    nv = n_alone + n_pair + n_aux

    def assemble(parts, rhs):
        return Rows.of(*(np.concatenate(p) for p in zip(*parts)), rhs)

    ineq = [assemble(cap, view.capacity), assemble(time, np.ones(m_u)), *extra_rows,
            Rows.identity(np.arange(nv), -1.0)]
    return Polytope(view, units, nv, ineq, eq_rows, assemble(eff, np.zeros(m_u)), pv, n_aux, bool(unit_pairs))


def _unit_pair_polytope(view: PolicyView, units: Units, s: np.ndarray) -> Polytope:
    """`build_polytope`'s unit-pair form from the compiled build: the same variables, rows and entries."""
    key = view.type_code[units.first]
    pv, cap, time, eff = polytope_kernel.unit_pair_polytope(view.throughput[units.first], s, units.mult, key,
                                                            view.colocated)
    m_u, nv = units.size, units.size * view.num_types + len(pv)
    ineq = [Rows.of(*cap, view.capacity), Rows.of(*time, np.ones(m_u)), Rows.identity(np.arange(nv), -1.0)]
    return Polytope(view, units, nv, ineq, [], Rows.of(eff, time[1], time[2], np.zeros(m_u)), pv, 0, True)


def _unit_key_coupling(view: PolicyView, units: Units, pv: np.ndarray, n_alone: int):
    """Auxiliary variables and rows that make unit-key pair time decomposable into job pairs.

    Returns (number of auxiliaries, inequality blocks, equality blocks).
    """
    n = view.num_types
    mult = units.mult
    pu, pk, pj = pv[:, 0], pv[:, 1], pv[:, 2]
    n_pair = len(pv)
    pidx = n_alone + np.arange(n_pair)
    key = view.type_code[units.first]
    same = pk == key[pu]
    # One auxiliary per (key, gpu) with same-key pair variables: the key's total paired time.
    if same.any():
        aux_keys, aux_of_var = np.unique(pk[same] * n + pj[same], return_inverse=True)
    else:
        aux_keys, aux_of_var = np.zeros(0, np.intp), np.zeros(0, np.intp)
    n_aux = len(aux_keys)
    ineq, eq = [], []
    if n_aux:
        # aux_(a,j) = sum_{l in a} mult_l z_{l,a,j};  2 z_{k,a,j} <= aux_(a,j) (no job pairs with itself).
        sv = np.flatnonzero(same)
        aux = n_alone + n_pair + np.arange(n_aux)
        eq.append(Rows.of(np.concatenate([mult[pu[sv]], -np.ones(n_aux)]),
                          np.concatenate([aux_of_var, np.arange(n_aux)]), np.concatenate([pidx[sv], aux]),
                          np.zeros(n_aux)))
        ineq.append(Rows.of(np.concatenate([2 * np.ones(len(sv)), -np.ones(len(sv))]),
                            np.tile(np.arange(len(sv)), 2), np.concatenate([pidx[sv], aux[aux_of_var]]),
                            np.zeros(len(sv))))
    if (~same).any():
        # Consistency: time that a-jobs spend with b-jobs equals the time b-jobs spend with a-jobs.
        dv = np.flatnonzero(~same)
        a, b = key[pu[dv]], pk[dv]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        rows, row_of = np.unique((lo * (hi.max() + 1) + hi) * n + pj[dv], return_inverse=True)
        sign = np.where(a < b, 1.0, -1.0)
        eq.append(Rows.of(sign * mult[pu[dv]], row_of.ravel(), pidx[dv], np.zeros(len(rows))))
    return n_aux, ineq, eq


def _flatten(groups: np.ndarray, sizes: np.ndarray, start: np.ndarray, flat_jobs: np.ndarray):
    """For combo c, the jobs `flat_jobs[start[groups[c]] : ... + sizes[groups[c]]]`: (combo id, job)."""
    count = sizes[groups]
    combo = np.repeat(np.arange(len(groups)), count)
    within = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    return combo, flat_jobs[start[groups][combo] + within]


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


def _cross(a: tuple, b: tuple, num: int, shift: float):
    """Two sides' (combo, job, supply) laid end to end on [0, T_c): whoever overlaps is paired.

    Returns (job of a, job of b, combo, length) per overlap interval.
    """
    (ca, ja, sa), (cb, jb, sb) = a, b
    if kernels.ENABLED:                          # the same arithmetic, compiled (pair_kernels.py)
        return pair_kernels.cross(ca, ja, sa, cb, jb, sb, num, shift)
    ends_a, tot_a = _ends(ca, sa, num)
    ends_b, tot_b = _ends(cb, sb, num)
    combo, start, length = _intervals(np.concatenate([ca, cb]), np.concatenate([ends_a, ends_b]),
                                      np.minimum(tot_a, tot_b), shift)
    mid = start + length / 2 + combo * shift
    ia = np.minimum(np.searchsorted(ends_a + ca * shift, mid, side="right"), len(ja) - 1)
    ib = np.minimum(np.searchsorted(ends_b + cb * shift, mid, side="right"), len(jb) - 1)
    return ja[ia], jb[ib], combo, length


def _folded(a: tuple, num: int, shift: float):
    """One side laid on [0, T_c), folded in half: the owner of u pairs with the owner of u + T_c/2.

    No job meets itself as long as each job's share is at most T_c / 2.
    """
    ca, ja, sa = a
    if kernels.ENABLED:
        return pair_kernels.folded(ca, ja, sa, num, shift)
    ends, tot = _ends(ca, sa, num)
    half = tot / 2
    folded = np.where(ends < half[ca], ends, ends - half[ca])
    combo, start, length = _intervals(ca, folded, half, shift)
    mid = start + length / 2
    shifted = ends + ca * shift
    lo = np.minimum(np.searchsorted(shifted, mid + combo * shift, side="right"), len(ja) - 1)
    hi = np.minimum(np.searchsorted(shifted, mid + half[combo] + combo * shift, side="right"), len(ja) - 1)
    return ja[lo], ja[hi], combo, length


def decompose_pairs(view: PolicyView, units: Units, pair_vars: np.ndarray, z: np.ndarray,
                    unit_pairs: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Turn pair-variable time into job pairs: O(jobs) pairs per unit (or key) pair and GPU type, vectorised.

    For a pair of groups on a GPU type, lay one group's job times end to end on [0, T) and the other's likewise
    and pair whoever overlaps; a group paired with itself is folded in half (`_folded`).
    """
    n = view.num_types
    empty = np.zeros((0, 2), np.intp), np.zeros((0, n))
    keep = z > PAIR_EPS
    if not len(pair_vars) or not keep.any():
        return empty
    shift = float(view.num_jobs) + 2.0
    if unit_pairs and kernels.ENABLED:              # the parts and the fractions below in one compiled call
        return pair_kernels.unit_pairs(units.of_job, units.mult, pair_vars[keep], z[keep], shift,
                                       np.int64(view.num_jobs), n, PAIR_EPS)
    if unit_pairs:
        parts = _unit_pair_parts(units, pair_vars[keep], z[keep], shift)
    else:
        parts = _unit_key_parts(view, units, pair_vars[keep], z[keep], shift)
    if not parts:
        return empty
    i, k, jj, v = (np.concatenate(p) for p in zip(*parts))
    if kernels.ENABLED:
        return pair_kernels.pair_fractions(i, k, jj, v, np.int64(view.num_jobs), n, PAIR_EPS)
    ok = (v > PAIR_EPS) & (i != k)
    i, k, jj, v = i[ok], k[ok], jj[ok], v[ok]
    if not len(i):
        return empty
    m = np.int64(view.num_jobs)
    codes, inverse = np.unique(np.minimum(i, k) * m + np.maximum(i, k), return_inverse=True)
    x_pairs = np.zeros((len(codes), n))
    np.add.at(x_pairs, (inverse.ravel(), jj), v)
    return np.stack([codes // m, codes % m], axis=1), x_pairs


def _unit_pair_parts(units: Units, pv: np.ndarray, y: np.ndarray, shift: float) -> list:
    """Unit-pair form: each job of k holds y / mult_k of the (k, l, j) time (2 y / mult_k when k == l)."""
    order = np.argsort(units.of_job, kind="stable")                 # jobs by unit, then id
    size = units.mult.astype(np.int64)
    start = np.cumsum(size) - size
    out = []
    for same in (False, True):
        sel = (pv[:, 0] == pv[:, 1]) == same
        if not sel.any():
            continue
        k, l, j = pv[sel].T
        total = y[sel]
        ca, ja = _flatten(k, size, start, order)
        sa = (total * (2.0 if same else 1.0) / units.mult[k])[ca]
        if same:
            i1, i2, combo, length = _folded((ca, ja, sa), len(k), shift)
        else:
            cb, jb = _flatten(l, size, start, order)
            i1, i2, combo, length = _cross((ca, ja, sa), (cb, jb, (total / units.mult[l])[cb]), len(k), shift)
        out.append((i1, i2, j[combo], length))
    return out


def _unit_key_parts(view: PolicyView, units: Units, pv: np.ndarray, z: np.ndarray, shift: float) -> list:
    """Unit-key form: per key pair (a, b) and type, a-jobs' times against b-jobs' times (folded if a == b)."""
    n = view.num_types
    num_keys = view.colocated.shape[0]
    pu, pk, pj = pv.T
    Z = np.zeros((units.size, num_keys, n))
    Z[pu, pk, pj] = z
    order = np.lexsort((np.arange(view.num_jobs), units.of_job, view.type_code))   # jobs by key, then unit
    key_size = np.bincount(view.type_code, minlength=num_keys)
    key_start = np.cumsum(key_size) - key_size
    a_keys = view.type_code[units.first][pu]
    combos = np.unique(np.stack([np.minimum(a_keys, pk), np.maximum(a_keys, pk), pj], axis=1), axis=0)

    def side(keys, partners, gpus):
        combo, jobs = _flatten(keys, key_size, key_start, order)
        supply = Z[units.of_job[jobs], partners[combo], gpus[combo]]
        kept = supply > 0
        return combo[kept], jobs[kept], supply[kept]

    out = []
    cross = combos[combos[:, 0] != combos[:, 1]]
    if len(cross):
        a, b, j = cross.T
        i1, i2, combo, length = _cross(side(a, b, j), side(b, a, j), len(cross), shift)
        out.append((i1, i2, j[combo], length))
    same = combos[combos[:, 0] == combos[:, 1]]
    if len(same):
        a, _, j = same.T
        i1, i2, combo, length = _folded(side(a, a, j), len(same), shift)
        out.append((i1, i2, j[combo], length))
    return out
