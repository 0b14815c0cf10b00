"""Finish-time fairness, Themis-style (docs/rules.md#ftf): minimise the largest finish-time ratio rho.

rho_i(x) = (t_i + R_i / E_i(x)) / (C_i + R_i / iso_i), where C_i is the isolated time the job has accrued
(kept across calls, like the artifact: one policy object per simulation). Solved in one second-order cone
program: rho >= t_i/D_i + v_i and v_i * E_i(x) D_i / R_i >= 1 (a rotated cone per job).
"""

from __future__ import annotations

import numpy as np

from hetsched.decide.gavel.base import Allocation, PolicyView, VariantPolicy, empty_allocation
from hetsched.decide.gavel.fallback import fallback_allocation
from hetsched.decide.gavel.formulation import build_polytope
from hetsched.decide.gavel.units import make_units
from hetsched.decide.gavel.lp import solve_on_polytope
from hetsched.decide.gavel.rows import Rows
from hetsched.decide.gavel.makespan import reference_throughput
from hetsched.decide.gavel.shares import isolated_fractions, isolated_throughput


class FinishTimeFairness(VariantPolicy):
    """Finish-time fairness (Themis): min-max of rho = shared JCT / isolated JCT."""

    stateful = True

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._state: dict[int, tuple[float, float, float]] = {}  # job -> (C_i, R_prev, iso_prev)

    def agnostic_throughput(self, view: PolicyView) -> np.ndarray:
        return reference_throughput(view)

    def _isolated_time(self, view: PolicyView, iso: np.ndarray) -> np.ndarray:
        C = np.zeros(view.num_jobs)
        for i, job in enumerate(view.job_ids.tolist()):
            c, r_prev, iso_prev = self._state.get(job, (0.0, view.remaining_steps[i], iso[i]))
            if iso_prev > 0:
                c += (r_prev - view.remaining_steps[i]) / iso_prev
            C[i] = c
        self._state = {job: (C[i], view.remaining_steps[i], iso[i]) for i, job in enumerate(view.job_ids.tolist())}
        return C

    def rho_denominator(self, view: PolicyView) -> np.ndarray:
        v = self.effective_view(view)
        iso = isolated_throughput(v)
        C = self._isolated_time(v, iso)
        with np.errstate(divide="ignore", invalid="ignore"):
            return C + np.where(iso > 0, v.remaining_steps / iso, np.inf)

    def allocate(self, view: PolicyView) -> Allocation:
        if view.num_jobs == 0:
            return empty_allocation(view)
        v = self.effective_view(view)
        D = self.rho_denominator(view)
        R = v.remaining_steps
        live = np.isfinite(D) & (R > 0) & (D > 0)
        if not live.any():
            return Allocation(view.job_ids, view.gpu_types, isolated_fractions(view))
        units = make_units(v, [view.time_since_arrival, D, R], aggregate=self.aggregate)
        poly = build_polytope(v, units, packing=self.packing)
        k = np.flatnonzero(live[units.first])
        first = units.first[k]
        num = len(k)
        nv = poly.num_vars + 1 + num           # [x, rho, v_1..v_num]
        rho, vcol = poly.num_vars, poly.num_vars + 1 + np.arange(num)
        idx = np.arange(num)
        # t_i/D_i + v_i - rho <= 0
        lin = Rows.identity(vcol, 1.0, -view.time_since_arrival[first] / D[first]).with_column(rho, -1.0)
        # Rotated cone v_i * e_i >= 1 with e_i = E_i(x) D_i / R_i, written as ||(2, v - e)|| <= v + e.
        e = poly.effective.select(k).scaled(D[first] / R[first])
        soc = Rows.of(np.concatenate([-e.data, e.data, -np.ones(num), -np.ones(num)]),
                      np.concatenate([3 * e.row, 3 * e.row + 2, 3 * idx, 3 * idx + 2]),
                      np.concatenate([e.col, e.col, vcol, vcol]), np.tile([0.0, 2.0, 0.0], num))
        c = np.zeros(nv)
        c[rho] = 1.0
        sol = solve_on_polytope(poly, c, [lin], extra_vars=1 + num, soc=[soc], soc_sizes=[3] * num,
                                solver=self.solver)
        if not sol.ok:
            return fallback_allocation(self, view, sol.status)
        return poly.allocation(sol.x[: poly.num_vars])

    def objective(self, view: PolicyView, allocation: Allocation) -> float:
        """max_i rho_i (uses the state of the last `allocate`, without advancing it)."""
        v = self.effective_view(view)
        iso = isolated_throughput(v)
        C = np.array([self._state.get(j, (0.0, 0, 0))[0] for j in view.job_ids.tolist()])
        with np.errstate(divide="ignore", invalid="ignore"):
            D = C + np.where(iso > 0, v.remaining_steps / iso, np.inf)
            eff = allocation.effective_throughput(v)
            rho = (view.time_since_arrival + v.remaining_steps / eff) / D
        rho = rho[np.isfinite(D) & (v.remaining_steps > 0)]
        return float(np.max(rho)) if len(rho) else float("nan")
