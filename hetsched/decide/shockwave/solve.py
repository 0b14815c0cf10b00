"""The planner's MILP back ends: HiGHS (one instance per thread, its options per solve) and SCIP, behind one
`solve_milp` (docs/rules.md#planner-programs). The programs themselves are built in `milp.py`."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hetsched.errors import SolverError, SpecError
from hetsched.solvers import clock


@dataclass
class MilpResult:
    x: np.ndarray | None
    status: str               # "optimal", "feasible" (time limit or gap with an incumbent), "infeasible", "error"
    seconds: float = 0.0
    objective: float = float("nan")     # c'x of the returned x
    bound: float = float("nan")         # the solver's proven lower bound on the optimum (its dual bound)

    @property
    def ok(self) -> bool:
        return self.x is not None


_LOCAL = threading.local()


def _highs():
    """One HiGHS instance per thread, emptied before each model (a new instance costs ~0.1 ms and a stdout
    redirect; openb's replay builds ~26,000 small models). Same solutions as a fresh instance."""
    h = getattr(_LOCAL, "highs", None)
    if h is None:
        from hetsched.solvers import new_highs

        h = _LOCAL.highs = new_highs()
    h.clearModel()
    h.clearSolver()
    return h


def set_options(h, options: tuple) -> None:
    """Set (name, value) HiGHS options on the thread's shared instance (`_highs`); an unknown name or a value of
    the wrong kind is a SpecError. After a solve with options, the next one starts from HiGHS's defaults again
    (with this project's silence and one thread); without any, nothing is touched."""
    import highspy

    if not options and not getattr(_LOCAL, "custom", False):
        return
    h.resetOptions()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    if h is getattr(_LOCAL, "highs", None):
        _LOCAL.custom = bool(options)
    for name, value in options:
        if h.setOptionValue(name, value) != highspy.HighsStatus.kOk:
            raise SpecError(f"planner: HiGHS has no option {name!r} taking {value!r} (solver_options)")


def solve_milp(c: np.ndarray, A: sp.csr_matrix, row_lo: np.ndarray, row_hi: np.ndarray, col_lo: np.ndarray,
               col_hi: np.ndarray, integer: np.ndarray, *, gap: float, time_limit_s: float,
               start: np.ndarray | None = None, solver: str = "highs", seed: int = 0,
               options: tuple = ()) -> MilpResult:
    """minimise c'x  s.t.  row_lo <= A x <= row_hi, col_lo <= x <= col_hi, x[integer] integral. `seed` is the
    solver's random seed: different seeds may return different solutions within the gap. `options`: further
    (name, value) HiGHS options (`PlannerConfig.solver_options`), set after the ones above."""
    if solver == "scip":
        return _solve_scip(c, A, row_lo, row_hi, col_lo, col_hi, integer, gap, time_limit_s, seed)
    import highspy

    h = _highs()
    set_options(h, options)
    h.setOptionValue("mip_rel_gap", float(gap))
    # HiGHS's run clock goes on over the shared instance's solves (`_highs`), and an LP's time limit is read on it
    # (the MILP's on its own): an LP's limit counts from now (docs/rules.md#rank-rounding).
    clock_s = h.getRunTime()
    h.setOptionValue("time_limit", float(time_limit_s) + (0.0 if integer.any() else clock_s))
    h.setOptionValue("random_seed", int(seed))
    n = len(c)
    inf = highspy.kHighsInf
    h.addVars(n, np.where(np.isfinite(col_lo), col_lo, -inf), np.where(np.isfinite(col_hi), col_hi, inf))
    idx = np.arange(n, dtype=np.int32)
    h.changeColsCost(n, idx, np.asarray(c, float))
    ints = np.flatnonzero(integer).astype(np.int32)
    if len(ints):
        h.changeColsIntegrality(len(ints), ints, np.full(len(ints), highspy.HighsVarType.kInteger))
    if not sp.isspmatrix_csr(A):
        A = sp.csr_matrix(A)
    h.addRows(A.shape[0], np.where(np.isfinite(row_lo), row_lo, -inf), np.where(np.isfinite(row_hi), row_hi, inf),
              A.nnz, A.indptr[:-1].astype(np.int32), A.indices.astype(np.int32), A.data.astype(float))
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = list(map(float, start))
        sol.value_valid = True
        h.setSolution(sol)
    with clock.timed():
        h.run()
    status = h.getModelStatus()
    ms = highspy.HighsModelStatus
    seconds = h.getRunTime() - clock_s
    if status == ms.kInfeasible:
        return MilpResult(None, "infeasible", seconds)
    info = h.getInfo()
    bound = info.mip_dual_bound if len(ints) else info.objective_function_value
    if status == ms.kOptimal:
        return MilpResult(np.asarray(h.getSolution().col_value), "optimal", seconds, info.objective_function_value,
                          bound)
    if info.primal_solution_status == 2:               # a feasible incumbent (time limit, interrupted, ...)
        return MilpResult(np.asarray(h.getSolution().col_value), "feasible", seconds, info.objective_function_value,
                          bound)
    return MilpResult(None, "infeasible" if status == ms.kTimeLimit else "error", seconds)


def _solve_scip(c, A, row_lo, row_hi, col_lo, col_hi, integer, gap, time_limit_s, seed) -> MilpResult:
    try:
        from pyscipopt import Model, quicksum
    except ImportError:
        raise SolverError("solver 'scip' needs pyscipopt (pip install pyscipopt); the default is 'highs'") from None
    m = Model()
    m.hideOutput()
    m.setParam("limits/gap", float(gap))
    m.setParam("limits/time", float(time_limit_s))
    if seed:        # the seed shift alone left the canonical run identical over seeds 0-2: permute the model too
        m.setParam("randomization/randomseedshift", int(seed))
        m.setParam("randomization/permutationseed", int(seed))
        m.setParam("randomization/permutevars", True)
        m.setParam("randomization/permuteconss", True)
    xs = [m.addVar(lb=None if not np.isfinite(lo) else float(lo), ub=None if not np.isfinite(hi) else float(hi),
                   vtype="I" if integer[i] else "C") for i, (lo, hi) in enumerate(zip(col_lo, col_hi))]
    A = sp.csr_matrix(A)
    for r in range(A.shape[0]):
        cols, vals = A.indices[A.indptr[r]:A.indptr[r + 1]], A.data[A.indptr[r]:A.indptr[r + 1]]
        expr = quicksum(float(v) * xs[k] for k, v in zip(cols, vals))
        if np.isfinite(row_lo[r]):
            m.addCons(expr >= float(row_lo[r]))
        if np.isfinite(row_hi[r]):
            m.addCons(expr <= float(row_hi[r]))
    m.setObjective(quicksum(float(v) * x for v, x in zip(c, xs) if v), "minimize")
    with clock.timed():
        m.optimize()
    if m.getNSols() == 0:
        return MilpResult(None, "infeasible" if m.getStatus() in ("infeasible", "timelimit") else "error",
                          m.getSolvingTime())
    best = m.getBestSol()
    return MilpResult(np.array([best[x] for x in xs]), "optimal" if m.getStatus() == "optimal" else "feasible",
                      m.getSolvingTime(), m.getSolObjVal(best), m.getDualbound())
