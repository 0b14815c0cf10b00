"""LAS / max-min fairness (docs/rules.md#las): maximise the minimum normalised effective throughput."""

from __future__ import annotations

import functools
import logging

import numpy as np

from hetsched.compiled import kernels, round_kernels
from hetsched.solvers import solve_lp_csc
from hetsched.decide.gavel.base import Allocation, PolicyView, VariantPolicy, empty_allocation
from hetsched.decide.gavel.formulation import build_polytope
from hetsched.decide.gavel.units import AGGREGATE_ABOVE, make_units
from hetsched.decide.gavel.fallback import fallback_allocation
from hetsched.decide.gavel.lp import epigraph_objective, solve_on_polytope
from hetsched.decide.gavel.shares import proportional_throughput

log = logging.getLogger(__name__)


def las_coefficients(view: PolicyView) -> np.ndarray:
    """Per-job factor on effective throughput: s_i / (w_i prop_i) in the artifact's float order."""
    prop = proportional_throughput(view)
    with np.errstate(divide="ignore"):
        inv_prop = np.where(prop > 0, 1.0 / prop, 0.0)
    return (1.0 / view.priority_weight) * inv_prop * view.scale_factor


@functools.lru_cache(maxsize=256)
def _cvxpy_layout(m: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CSC structure of the per-job LAS problem in cvxpy's ECOS layout (depends only on m and n).

    Column 0 is t' (rows 0..m-1, value -1); column 1 + j*m + i is x[i, j] with four rows: its epigraph row i,
    its non-negativity row m + j*m + i, capacity row m+k+j and time row m+k+n+i. Returns (indices, indptr,
    data template, positions of each x column's first entry).
    """
    k = m * n
    j, i = np.divmod(np.arange(k), m)
    indices = np.empty(m + 4 * k, np.int64)
    indices[:m] = np.arange(m)
    indices[m:] = np.stack([i, m + np.arange(k), m + k + j, m + k + n + i], axis=1).ravel()
    data = np.empty(m + 4 * k)
    data[:m] = -1.0
    data[m:] = np.tile([0.0, -1.0, 0.0, 1.0], k)
    indptr = np.concatenate([[0], m + 4 * np.arange(k + 1)]).astype(np.int64)
    for arr in (indices, indptr, data):
        arr.setflags(write=False)
    return indices, indptr, data, m + 4 * np.arange(k)


def _program(v: PolicyView, prop: np.ndarray, m: int, n: int, template: np.ndarray, x_cols: np.ndarray):
    """The per-job program's data, right-hand sides and objective in numpy (the reference of
    `kernels.las_program`): epigraph coefficients -C with C_ij = T_ij w_i s_i, capacity coefficients s_i."""
    weights = (1.0 / v.priority_weight) * np.where(prop > 0, 1.0 / np.where(prop > 0, prop, 1.0), 0.0)
    C = (v.throughput * weights[:, None]) * v.scale_factor[:, None]
    data = template.copy()
    data[x_cols] = -C.T.ravel()                                   # epigraph coefficients
    data[x_cols + 2] = np.repeat(v.scale_factor[None, :], n, axis=0).ravel()   # capacity rows
    h = np.zeros(2 * m + m * n + n)
    h[m + m * n: m + m * n + n] = v.capacity
    h[m + m * n + n:] = 1.0
    c = np.zeros(m * n + 1)
    c[0] = 1.0
    return data, h, c


class MaxMinFairness(VariantPolicy):
    """LAS: max-min of normalised effective throughput (heterogeneity-aware, agnostic, or with space sharing).

    The agnostic variant sees every throughput as 1 (docs/rules.md#las).
    """

    def allocate(self, view: PolicyView) -> Allocation:
        if view.num_jobs == 0:
            return empty_allocation(view)
        v = self.effective_view(view)
        if not self.packing and not (self.aggregate or (self.aggregate is None and v.num_jobs > AGGREGATE_ABOVE)):
            return self._allocate_per_job(v)              # no classes asked for (make_units would give one per job)
        # Packed problems always use classes: their per-job form has no fidelity role and is several times slower.
        units = make_units(v, aggregate=self.aggregate if self.aggregate is not None else (self.packing or None))
        if not self.packing and units.size == v.num_jobs:
            return self._allocate_per_job(v)
        poly = build_polytope(v, units, packing=self.packing)
        coef = las_coefficients(v)[units.first]
        # t - coef_k * E_k x <= 0 for every unit; maximise t.
        epi = poly.effective.scaled(-coef).with_column(poly.num_vars, 1.0)
        sol = solve_on_polytope(poly, epigraph_objective(poly), [epi], extra_vars=1, solver=self.solver)
        if not sol.ok:
            return fallback_allocation(self, view, sol.status)
        return poly.allocation(sol.x[:-1])

    def _allocate_per_job(self, v: PolicyView) -> Allocation:
        """The per-job LP laid out exactly as cvxpy hands Gavel's problem to ECOS.

        Variables `[t', x (column-major)]`, minimise t' with rows `-t' - C_i x_i <= 0`, `-x <= 0`, capacity,
        time. Same data, same interior-point path: the artifact's allocations to the last digits, which keeps
        per-job JCTs reproducible (docs/rules.md#proportional, docs/rules.md#las).
        """
        m, n = v.throughput.shape
        prop = proportional_throughput(v)
        indices, indptr, data, x_cols = _cvxpy_layout(m, n)
        if round_kernels.ENABLED:                           # the same arithmetic, compiled (compiled/_rounds.c)
            data, h, c = round_kernels.las_program(v.throughput, v.priority_weight, v.scale_factor, prop, v.capacity,
                                             data, x_cols)
        else:
            data, h, c = _program(v, prop, m, n, data, x_cols)
        sol = solve_lp_csc(c, data, indices, indptr, 2 * m + m * n + n, h, self.solver)
        if not sol.ok:
            return fallback_allocation(self, v, sol.status)
        x = sol.x[1:].reshape(n, m).T
        return Allocation(v.job_ids, v.gpu_types, x)

    def objective(self, view: PolicyView, allocation: Allocation) -> float:
        """min_i of s_i * effective throughput / (w_i * prop_i)."""
        if view.num_jobs == 0:
            return float("nan")
        v = self.effective_view(view)
        return float(np.min(las_coefficients(v) * allocation.effective_throughput(v)))
