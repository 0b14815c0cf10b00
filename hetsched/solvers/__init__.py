"""Conic/LP problems in sparse form and the open-source back ends that solve them.

A problem is `minimise c'x  s.t.  G x + s = h, s in K;  A x = b` with K = R+^l x SOC(q_1) x ... (ECOS's form).
Policies build these matrices vectorised and never depend on a particular solver. Interior-point back ends
without crossover (ECOS, Clarabel) return the central point of a degenerate optimal face, as Gavel's cvxpy+ECOS
did; HiGHS (LPs only) returns a vertex.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import scipy.sparse as sp

from hetsched.errors import SolverError
from hetsched.solvers import clock, ecos_workspaces

log = logging.getLogger(__name__)


@dataclass
class ConicProblem:
    c: np.ndarray
    G: sp.csc_matrix
    h: np.ndarray
    l: int                                   # noqa: E741  number of non-negative rows (first rows of G)
    q: list[int] = field(default_factory=list)  # second-order cone sizes (rows after the first l)
    A: sp.csc_matrix | None = None
    b: np.ndarray | None = None

    @property
    def is_lp(self) -> bool:
        return not self.q


@dataclass
class Solution:
    x: np.ndarray | None
    status: str          # "optimal", "inaccurate", "infeasible", "unbounded", "error"
    objective: float
    solver: str
    z: np.ndarray | None = None   # duals of the G rows (interior-point back ends)

    @property
    def ok(self) -> bool:
        return self.status in ("optimal", "inaccurate") and self.x is not None


def _solve_ecos(p: ConicProblem, tol: float) -> Solution:
    import ecos

    kwargs = dict(verbose=False, feastol=tol, abstol=tol, reltol=tol, max_iters=200)
    dims = {"l": p.l, "q": list(p.q), "e": 0}
    with clock.timed():
        if p.A is not None and p.A.shape[0]:
            sol = ecos.solve(p.c, p.G, p.h, dims, p.A, p.b, **kwargs)
        else:
            sol = ecos.solve(p.c, p.G, p.h, dims, **kwargs)
    flag = sol["info"]["exitFlag"]
    status = {0: "optimal", 10: "inaccurate", 1: "infeasible", 2: "unbounded", 11: "infeasible",
              12: "unbounded"}.get(flag, "error")
    x = sol["x"] if status in ("optimal", "inaccurate") else None
    return Solution(x, status, float(p.c @ x) if x is not None else np.nan, "ecos", sol["z"] if x is not None else None)


def _solve_clarabel(p: ConicProblem, tol: float) -> Solution:
    import clarabel

    cones = [clarabel.NonnegativeConeT(p.l)] + [clarabel.SecondOrderConeT(k) for k in p.q]
    G, h = p.G, p.h
    if p.A is not None and p.A.shape[0]:
        G = sp.vstack([p.A, p.G]).tocsc()
        h = np.concatenate([p.b, p.h])
        cones = [clarabel.ZeroConeT(p.A.shape[0])] + cones
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = tol
    n = p.c.shape[0]
    P, G = sp.csc_matrix((n, n)), G.tocsc()
    with clock.timed():                                     # its setup (equilibration, KKT) and the solve
        result = clarabel.DefaultSolver(P, p.c, G, h, cones, settings).solve()
    name = str(result.status)
    status = ("optimal" if name == "Solved" else "inaccurate" if name == "AlmostSolved"
              else "infeasible" if "PrimalInfeasible" in name else "unbounded" if "DualInfeasible" in name
              else "error")
    x = np.asarray(result.x) if status in ("optimal", "inaccurate") else None
    z = np.asarray(result.z)[G.shape[0] - p.G.shape[0]:] if x is not None else None
    return Solution(x, status, float(p.c @ x) if x is not None else np.nan, "clarabel", z)


def _solve_highs(p: ConicProblem, tol: float) -> Solution:
    from scipy.optimize import linprog

    if not p.is_lp:
        raise SolverError("highs solves linear programs only; use ecos or clarabel for cone programs")
    A_eq = p.A if p.A is not None and p.A.shape[0] else None
    with clock.timed():
        res = linprog(p.c, A_ub=p.G, b_ub=p.h, A_eq=A_eq, b_eq=p.b if A_eq is not None else None,
                      bounds=(None, None), method="highs")
    status = {0: "optimal", 2: "infeasible", 3: "unbounded"}.get(res.status, "error")
    x = res.x if status == "optimal" else None
    return Solution(x, status, float(res.fun) if x is not None else np.nan, "highs")


def solve_lp_csc(c: np.ndarray, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, num_rows: int,
                 h: np.ndarray, solver: str = "ecos", tol: float = 1e-8) -> Solution:
    """`min c'x s.t. G x <= h` with G given as raw CSC arrays (skips scipy's checks on the hot path)."""
    if solver != "ecos":
        G = sp.csc_matrix((data, indices, indptr), shape=(num_rows, len(c)))
        return solve(ConicProblem(c, G, h, l=num_rows), solver, tol)
    with clock.timed():
        sol = _ecos_csc(c, data, indices, indptr, num_rows, h, tol)
    flag = sol["info"]["exitFlag"]
    status = {0: "optimal", 10: "inaccurate", 1: "infeasible", 2: "unbounded"}.get(flag, "error")
    if status == "error":               # as in solve(): let Clarabel try before a policy falls back
        G = sp.csc_matrix((data, indices, indptr), shape=(num_rows, len(c)))
        return solve(ConicProblem(c, G, h, l=num_rows), "clarabel", tol)
    x = sol["x"] if status in ("optimal", "inaccurate") else None
    return Solution(x, status, float(c @ x) if x is not None else np.nan, "ecos", sol["z"] if x is not None else None)


def _ecos_csc(c, data, indices, indptr, num_rows, h, tol) -> dict:
    """ECOS on `G x <= h`: in a kept workspace when it can (the same numbers, no setup), else a fresh one."""
    reused = ecos_workspaces.solve(c, data, indices, indptr, num_rows, h, tol)
    if reused is not None:
        return {"info": {"exitFlag": reused[0]}, "x": reused[1], "z": reused[2]}
    import _ecos

    try:
        return _ecos.csolve((num_rows, len(c), 0), c, data, indices, indptr, h, {"l": num_rows, "q": [], "e": 0},
                            verbose=False, feastol=tol, abstol=tol, reltol=tol, max_iters=200)
    except Exception as exc:
        log.warning("ecos failed: %s", exc)
        return {"info": {"exitFlag": -99}}


BACKENDS: dict[str, Callable[[ConicProblem, float], Solution]] = {
    "ecos": _solve_ecos, "clarabel": _solve_clarabel, "highs": _solve_highs,
}


DEFAULT_SOLVER = "ecos"


def solve(problem: ConicProblem, solver: str = DEFAULT_SOLVER, tol: float = 1e-8) -> Solution:
    """Solve with one back end; errors inside the solver become status "error", never exceptions."""
    try:
        backend = BACKENDS[solver]
    except KeyError:
        raise SolverError(f"unknown solver {solver!r}; available: {', '.join(BACKENDS)}") from None
    try:
        sol = backend(problem, tol)
    except SolverError:
        raise
    except Exception as exc:  # a crashing native solver must not crash a simulation
        log.warning("%s failed: %s", solver, exc)
        sol = Solution(None, "error", np.nan, solver)
    if not sol.ok and solver == "ecos" and sol.status == "error":
        # ECOS occasionally stalls on badly scaled cone programs; Clarabel (also interior point) usually copes.
        log.info("ecos returned %s; retrying with clarabel", sol.status)
        return solve(problem, "clarabel", tol)
    return sol


def new_highs():
    """A silent `highspy.Highs` with one thread. The constructor prints a banner on the process's stdout, which
    would corrupt `hetsched simulate --json`. HiGHS fixes its thread pool at the first solve of a process, and a
    later instance that asks for another thread count fails every solve ("error"): Synergy-OPT followed by
    Shockwave's planner in one process did. So every instance asks for the same count."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    return h
