"""Solve a policy problem posed on the allocation polytope: extra rows, extra variables, optional cones."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from hetsched.solvers import ConicProblem, Solution, solve
from hetsched.decide.gavel.formulation import Polytope
from hetsched.decide.gavel.rows import Rows, stack


def solve_on_polytope(poly: Polytope, c: np.ndarray, rows: Sequence[Rows] = (), *, extra_vars: int = 0,
                      soc: Sequence[Rows] = (), soc_sizes: Sequence[int] = (), solver: str = "ecos") -> Solution:
    """minimise c'[x y]  s.t.  `rows` (<=), the polytope of x, second-order cones `soc` (sizes `soc_sizes`).

    `c` covers the polytope's variables and then `extra_vars` more (epigraph variables and the like).
    Rows come first in the problem, so `Solution.z[:k]` are the duals of the first k of them.
    """
    nv = poly.num_vars + extra_vars
    lin = [*rows, *poly.ineq]
    G, h = stack([*lin, *soc], nv)
    A, b = stack(poly.eq, nv) if poly.eq else (None, None)
    return solve(ConicProblem(np.asarray(c, float), G, h, l=sum(r.num_rows for r in lin), q=list(soc_sizes),
                              A=A, b=b), solver)


def epigraph_objective(poly: Polytope, sign: float = -1.0) -> np.ndarray:
    """c for one extra variable t (the last one): minimise `sign` * t."""
    c = np.zeros(poly.num_vars + 1)
    c[-1] = sign
    return c
