"""Makespan (docs/rules.md#makespan): one LP in theta = 1/T instead of Gavel's 5% bisection."""

from __future__ import annotations

import numpy as np

from hetsched.decide.gavel.base import Allocation, PolicyView, VariantPolicy, empty_allocation
from hetsched.decide.gavel.fallback import fallback_allocation
from hetsched.decide.gavel.formulation import build_polytope
from hetsched.decide.gavel.units import make_units
from hetsched.decide.gavel.lp import epigraph_objective, solve_on_polytope


def reference_throughput(view: PolicyView, reference_gpu: str = "v100") -> np.ndarray:
    """Heterogeneity-agnostic throughputs: every type gets the job's reference-GPU throughput.

    Gavel hard-codes 'v100'; on clusters without it, each job's fastest type stands in.
    """
    if reference_gpu in view.gpu_types:
        col = view.throughput[:, view.gpu_types.index(reference_gpu)]
    else:
        col = view.throughput.max(axis=1)
    return np.repeat(col[:, None], view.num_types, axis=1)


class MinTotalDuration(VariantPolicy):
    """Makespan: maximise theta with E_i(x) >= theta * R_i for every job (T = 1/theta), solved exactly.

    `bisection=True` is the artifacts' search instead: feasibility LPs on T with 5 % precision, keeping the
    (central) point ECOS returns for the smallest feasible T. Shockwave's OSSP baseline needs it to match.
    """

    def __init__(self, *args, bisection: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.bisection = bisection

    def agnostic_throughput(self, view: PolicyView) -> np.ndarray:
        return reference_throughput(view)

    def allocate(self, view: PolicyView) -> Allocation:
        if view.num_jobs == 0:
            return empty_allocation(view)
        v = self.effective_view(view)
        if self.bisection:
            return self._bisect(view, v)
        units = make_units(v, [v.remaining_steps], aggregate=self.aggregate)
        poly = build_polytope(v, units, packing=self.packing)
        # Scale so theta is O(1): theta' = theta * R_max.
        r = v.remaining_steps[units.first] / max(v.remaining_steps.max(), 1e-12)
        rows = poly.effective.scaled(-1.0).with_column(poly.num_vars, r)  # theta' r_k - E_k x <= 0
        sol = solve_on_polytope(poly, epigraph_objective(poly), [rows], extra_vars=1, solver=self.solver)
        if not sol.ok:
            return fallback_allocation(self, view, sol.status)
        return poly.allocation(sol.x[:-1])

    def _bisect(self, view: PolicyView, v: PolicyView) -> Allocation:
        """Gavel's search (docs/rules.md#makespan): lo = 100 s, hi = 1e6 s, halve while 1.05 lo < hi; if nothing
        is feasible, the next decade. Any status but optimal counts as infeasible."""
        units = make_units(v, [v.remaining_steps], aggregate=False)
        poly = build_polytope(v, units, packing=self.packing)
        need = poly.effective.scaled(-1.0)
        zero = np.zeros(poly.num_vars)
        lo, hi = 100.0, 1e6
        for _ in range(12):                                    # up to 1e18 s
            best = None
            while 1.05 * lo < hi:
                T = (lo + hi) / 2
                sol = solve_on_polytope(poly, zero, [need.with_rhs(-v.remaining_steps[units.first] / T)],
                                        solver=self.solver)
                if sol.status == "optimal":
                    hi, best = T, sol.x
                else:
                    lo = T
            if best is not None:
                return poly.allocation(best)
            lo, hi = hi, hi * 10
        return fallback_allocation(self, view, "infeasible")

    def objective(self, view: PolicyView, allocation: Allocation) -> float:
        """The makespan in seconds implied by the allocation: max_i R_i / E_i."""
        v = self.effective_view(view)
        eff = allocation.effective_throughput(v)
        with np.errstate(divide="ignore"):
            return float(np.max(np.where(eff > 0, v.remaining_steps / eff, np.inf)))
