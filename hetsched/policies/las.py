"""LAS / max-min fairness (spec/gavel.md s.2.5-2.6): maximise the minimum normalised effective throughput."""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from ..solvers import ConicProblem, solve
from .base import Allocation, PolicyView, VariantPolicy, empty_allocation
from .formulation import build_polytope, make_units
from .fallback import fallback_allocation
from .shares import proportional_throughput

log = logging.getLogger(__name__)


def las_coefficients(view: PolicyView) -> np.ndarray:
    """Per-job factor on effective throughput: s_i / (w_i prop_i) in the artifact's float order."""
    prop = proportional_throughput(view)
    with np.errstate(divide="ignore"):
        inv_prop = np.where(prop > 0, 1.0 / prop, 0.0)
    return (1.0 / view.priority_weight) * inv_prop * view.scale_factor


class MaxMinFairness(VariantPolicy):
    """LAS: max-min of normalised effective throughput (heterogeneity-aware, agnostic, or with space sharing).

    The agnostic variant sees every throughput as 1 (spec s.2.5).
    """

    def allocate(self, view: PolicyView) -> Allocation:
        if view.num_jobs == 0:
            return empty_allocation(view)
        v = self.effective_view(view)
        units = make_units(v, aggregate=self.aggregate)
        if not self.packing and units.size == v.num_jobs:
            return self._allocate_per_job(v)
        poly = build_polytope(v, units, packing=self.packing)
        coef = las_coefficients(v)[units.first]
        G, A, E = poly.pad(1)
        nv = poly.num_vars + 1
        # t - coef_k * E_k x <= 0 for every unit; maximise t.
        epi = sp.hstack([-sp.diags(coef) @ poly.E, sp.csr_matrix(np.ones((units.size, 1)))]).tocsr()
        c = np.zeros(nv)
        c[-1] = -1.0
        problem = ConicProblem(c, sp.vstack([epi, G]).tocsc(), np.concatenate([np.zeros(units.size), poly.h]),
                               l=units.size + G.shape[0], A=A.tocsc() if A.shape[0] else None, b=poly.b)
        sol = solve(problem, self.solver)
        if not sol.ok:
            return fallback_allocation(self, view, sol.status)
        return poly.allocation(sol.x[:-1])

    def _allocate_per_job(self, v: PolicyView) -> Allocation:
        """The per-job LP laid out exactly as cvxpy hands Gavel's problem to ECOS.

        Variables `[t', x (column-major)]`, minimise t' with rows `-t' - C_i x_i <= 0`, `-x <= 0`, capacity,
        time. Same data, same interior-point path: the artifact's allocations to the last digits, which keeps
        per-job JCTs reproducible (spec s.12, amendments 1-2).
        """
        m, n = v.throughput.shape
        weights = (1.0 / v.priority_weight) * np.where(proportional_throughput(v) > 0,
                                                     1.0 / np.where(proportional_throughput(v) > 0,
                                                                    proportional_throughput(v), 1.0), 0.0)
        C = (v.throughput * weights[:, None]) * v.scale_factor[:, None]
        k = m * n
        col = 1 + (np.arange(n)[None, :] * m + np.arange(m)[:, None])     # x[i, j] -> column-major index
        rows = np.concatenate([np.arange(m), np.repeat(np.arange(m), n), m + np.arange(k),
                               m + k + np.tile(np.arange(n), m), m + k + n + np.repeat(np.arange(m), n)])
        cols = np.concatenate([np.zeros(m, np.intp), col.ravel(), 1 + np.arange(k), col.ravel(), col.ravel()])
        data = np.concatenate([-np.ones(m), -C.ravel(), -np.ones(k), v.scale_factor.repeat(n).astype(float),
                               np.ones(k)])
        G = sp.csc_matrix((data, (rows, cols)), shape=(2 * m + k + n, k + 1))
        h = np.concatenate([np.zeros(m + k), v.capacity.astype(float), np.ones(m)])
        c = np.zeros(k + 1)
        c[0] = 1.0
        sol = solve(ConicProblem(c, G, h, l=G.shape[0]), self.solver)
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
