"""Maximum total throughput, optionally per dollar and subject to SLOs (docs/rules.md#throughput-sum)."""

from __future__ import annotations

import logging

import numpy as np

from hetsched.decide.gavel.base import Allocation, Policy, PolicyView, empty_allocation
from hetsched.decide.gavel.fallback import fallback_allocation
from hetsched.decide.gavel.formulation import build_polytope
from hetsched.decide.gavel.units import make_units
from hetsched.decide.gavel.lp import solve_on_polytope
from hetsched.decide.gavel.rows import Rows

log = logging.getLogger(__name__)


class MaxSumThroughput(Policy):
    """Max total throughput: maximise sum_i E_i(x) (per $/h of each GPU type with `normalize_by_cost`)."""

    partitionable = True

    def __init__(self, normalize_by_cost: bool = False, slos: bool = False, packing: bool = False,
                 solver: str = "ecos", aggregate: bool | None = None):
        self.normalize_by_cost = normalize_by_cost
        self.slos = slos
        self.packing = packing
        self.solver = solver
        self.aggregate = aggregate

    def _cost_weights(self, view: PolicyView) -> np.ndarray:
        if not self.normalize_by_cost:
            return np.ones(view.num_types)
        prices = view.prices if view.prices is not None else np.zeros(view.num_types)
        if np.any(prices <= 0) and not getattr(self, "_warned_prices", False):
            self._warned_prices = True             # once per run, not once per round
            log.warning("policy %s: no price for some GPU types; treating them as cost 1 (give --prices)",
                        self.name)
        return np.where(prices > 0, 1.0 / np.where(prices > 0, prices, 1.0), 1.0)

    def _objective_vector(self, view: PolicyView, poly) -> np.ndarray:
        """Per-variable value of throughput (per dollar): E rows weighted by the unit's size and the type's price."""
        E = poly.effective
        w = self._cost_weights(view)[poly.col_type[E.col]] * poly.units.mult[E.row]
        c = np.zeros(poly.num_vars)
        np.add.at(c, E.col, E.data * w)
        return c

    def _deadline_rows(self, view: PolicyView, poly) -> Rows | None:
        if not self.slos or view.deadline_s is None:
            return None
        left = view.deadline_s[poly.units.first] - view.now
        has = np.isfinite(left)
        if not has.any():
            return None
        need = view.remaining_steps[poly.units.first][has] / np.maximum(left[has], 1e-9)
        k = np.flatnonzero(has)
        rows = poly.effective.select(k)
        return rows.scaled(-1.0).with_rhs(-need)       # E_k x >= R_k / (deadline_k - now)

    def allocate(self, view: PolicyView) -> Allocation:
        if view.num_jobs == 0:
            return empty_allocation(view)
        extra = [view.deadline_s, view.remaining_steps] if self.slos and view.deadline_s is not None else None
        units = make_units(view, [np.nan_to_num(e, nan=-1.0) for e in extra] if extra else None, self.aggregate)
        poly = build_polytope(view, units, packing=self.packing)
        c = -self._objective_vector(view, poly)
        rows = self._deadline_rows(view, poly)
        sol = None
        if rows is not None:
            sol = solve_on_polytope(poly, c, [rows], solver=self.solver)
            if not sol.ok:
                log.info("policy %s: SLOs cannot all be met; solving without them", self.name)
        if sol is None or not sol.ok:
            sol = solve_on_polytope(poly, c, solver=self.solver)
        if not sol.ok:
            return fallback_allocation(self, view, sol.status)
        return poly.allocation(sol.x)

    def objective(self, view: PolicyView, allocation: Allocation) -> float:
        """Total steps/s (per $/h when normalised by cost)."""
        if not self.normalize_by_cost:
            return float(allocation.effective_throughput(view).sum())
        w = self._cost_weights(view)
        value = ((view.throughput * allocation.x) @ w).sum()
        for p, (i, k) in enumerate(allocation.pairs):
            value += (view.pair_throughput(i, k).sum(axis=1) * allocation.x_pairs[p]) @ w
        return float(value)
