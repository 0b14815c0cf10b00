"""Small helpers that turn a polytope plus objective rows into a solved allocation."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..solvers import ConicProblem, Solution, solve
from .formulation import Polytope


def solve_on_polytope(poly: Polytope, c_extra: np.ndarray, rows: sp.spmatrix | None, rhs: np.ndarray | None,
                      c_poly: np.ndarray | None = None, extra_vars: int = 0, soc_rows: sp.spmatrix | None = None,
                      soc_rhs: np.ndarray | None = None, soc_sizes: list[int] | None = None,
                      solver: str = "ecos") -> Solution:
    """minimise c_poly'x + c_extra'y  s.t. polytope(x), rows [x y] <= rhs, optional SOC rows on [x y]."""
    G, A, _ = poly.pad(extra_vars)
    nv = poly.num_vars + extra_vars
    c = np.zeros(nv)
    if c_poly is not None:
        c[: poly.num_vars] = c_poly
    if extra_vars:
        c[poly.num_vars:] = c_extra
    lin = [rows] if rows is not None else []
    lin_rhs = [rhs] if rhs is not None else []
    Gs = sp.vstack(lin + [G] + ([soc_rows] if soc_rows is not None else [])).tocsc()
    h = np.concatenate(lin_rhs + [poly.h] + ([soc_rhs] if soc_rhs is not None else []))
    num_lin = sum(r.shape[0] for r in lin) + G.shape[0]
    problem = ConicProblem(c, Gs, h, l=num_lin, q=list(soc_sizes or []),
                           A=A.tocsc() if A.shape[0] else None, b=poly.b if A.shape[0] else None)
    return solve(problem, solver)


def widen(M: sp.spmatrix, total: int) -> sp.csr_matrix:
    """M with zero columns appended up to `total` columns."""
    return sp.hstack([M, sp.csr_matrix((M.shape[0], total - M.shape[1]))]).tocsr()
