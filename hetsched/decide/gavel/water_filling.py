"""Hierarchical max-min fairness by water filling (docs/rules.md#water-filling), with a dual-based bottleneck test.

Each iteration raises the levels of all unfrozen jobs together (one LP) and freezes the bottleneck jobs: those
that cannot rise further while every other job keeps its level. Gavel finds them with a MILP (GLPK); here an
interior-point LP returns a strictly complementary pair, so a job is a bottleneck exactly when its level
constraint has a positive dual (its slack is zero in every optimum). Entities (users, teams) get weights; inside
an entity jobs share by `fairness` (weights) or `fifo` (the oldest job gets the entity's share).
"""

from __future__ import annotations

import numpy as np

from hetsched.decide.gavel.base import Allocation, PolicyView, VariantPolicy, empty_allocation
from hetsched.decide.gavel.fallback import fallback_allocation
from hetsched.decide.gavel.formulation import build_polytope
from hetsched.decide.gavel.units import make_units
from hetsched.decide.gavel.las import las_coefficients
from hetsched.decide.gavel.lp import epigraph_objective, solve_on_polytope
from hetsched.decide.gavel.shares import proportional_throughput


class WaterFilling(VariantPolicy):
    """Max-min fairness by water filling: lexicographic max-min, optionally hierarchical over entities."""

    uses_entities = True      # the core passes each job's entity and the entities' weights

    def __init__(self, heterogeneity_aware: bool = True, packing: bool = False, entity_policy: str = "fairness",
                 solver: str = "ecos"):
        if entity_policy not in ("fairness", "fifo"):
            raise ValueError(f"entity_policy must be 'fairness' or 'fifo', got {entity_policy!r}")
        super().__init__(heterogeneity_aware, packing, solver)
        self.entity_policy = entity_policy
        self.iterations = 0

    def _weights(self, view: PolicyView, frozen: np.ndarray) -> np.ndarray:
        """Per-job weights for this iteration (docs/rules.md#water-filling)."""
        w = view.priority_weight.astype(float).copy()
        if view.entity is None:
            return np.where(frozen, 0.0, w)
        ew = view.entity_weight if view.entity_weight is not None else np.ones(view.entity.max() + 1)
        out = np.zeros(view.num_jobs)
        for e in np.unique(view.entity):
            members = np.flatnonzero((view.entity == e) & ~frozen)
            if not len(members):
                continue
            if self.entity_policy == "fifo":
                out[members[np.argmin(view.job_ids[members])]] = ew[e]
            else:
                out[members] = ew[e] * w[members] / w[members].sum()
        return out

    def allocate(self, view: PolicyView) -> Allocation:
        m = view.num_jobs
        if m == 0:
            return empty_allocation(view)
        v = self.effective_view(view)
        extra = [] if v.entity is None else [v.entity]
        if v.entity is not None and self.entity_policy == "fifo":
            extra.append(v.job_ids)
        units = make_units(v, extra)
        poly = build_polytope(v, units, packing=self.packing)
        first = units.first
        prop = proportional_throughput(v)[first]
        nE = poly.effective.scaled(np.where(prop > 0, 1.0 / np.where(prop > 0, prop, 1), 0.0))   # normalised
        s = v.scale_factor[first].astype(float)
        level = np.zeros(units.size)
        frozen = np.zeros(units.size, bool)
        x_best = None
        self.iterations = 0
        for _ in range(units.size + 1):
            w = self._weights(v, frozen[units.of_job])[first]
            active = ~frozen & (w > 0)
            if not active.any():
                break
            k = np.flatnonzero(active)
            mu = s[k] / w[k]
            # c - mu_k (nE_k x - L_k) <= 0 for active units; nE_k x >= L_k for all units.
            epi = nE.select(k).scaled(-mu).with_column(poly.num_vars, 1.0).with_rhs(-mu * level[k])
            low = nE.scaled(-1.0).with_rhs(-level)
            sol = solve_on_polytope(poly, epigraph_objective(poly), [epi, low], extra_vars=1, solver=self.solver)
            self.iterations += 1
            if not sol.ok:
                if x_best is None:
                    return fallback_allocation(self, view, sol.status)
                break
            x_best = sol.x[:-1]
            c = sol.x[-1]
            level[k] += max(c, 0.0) / mu
            dual = sol.z[: len(k)]
            slack = epi.rhs - epi.matrix(poly.num_vars + 1) @ sol.x
            bottleneck = dual / max(dual.max(), 1e-300) > slack / max(slack.max(), abs(c), 1e-300)
            if not bottleneck.any():
                bottleneck[np.argmax(dual)] = True
            frozen[k[bottleneck]] = True
        return poly.allocation(x_best)

    def objective(self, view: PolicyView, allocation: Allocation) -> float:
        """min_i of s_i * normalised effective throughput / w_i (the LAS objective)."""
        v = self.effective_view(view)
        return float(np.min(las_coefficients(v) * allocation.effective_throughput(v)))
