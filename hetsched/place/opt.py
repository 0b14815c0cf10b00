"""Synergy-OPT (docs/rules.md#opt) on HiGHS: the best CPU/memory point per job, then a server assignment.

Program 1 picks one (CPUs per GPU, GB per GPU) grid point per job to maximise the summed relative throughput
under the cluster's CPU and memory budgets, never below the job's fair-share throughput. Jobs of the same
(model, GPU count) class are interchangeable, so the integer program is solved over classes: `n[k, p]` jobs
of class k at point p. That is the artifact's per-job program with its symmetry removed (hundreds of
integer variables instead of tens of thousands) and it is cached by the class counts. Which job of a class
gets which point is arbitrary in the artifact (the solver's choice); here earlier jobs in the policy's order
get the higher-throughput points.

Program 2 spreads the chosen demands over servers (fractions allowed, as in the artifact). It never changes
a job's speed in simulation: with cluster-wide budgets met, the uniform spread is already feasible.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.optimize import linprog

from hetsched.errors import SolverError
from hetsched.solvers import clock, new_highs
from hetsched.model.profiles import CPU_LEVELS, MEM_LEVELS

CPU = np.repeat(np.asarray(CPU_LEVELS, float), len(MEM_LEVELS))       # per grid point (row-major c, m)
MEM = np.tile(np.asarray(MEM_LEVELS, float), len(CPU_LEVELS))


def fair_index(levels, value: float) -> int:
    """The grid index of the fair share (exact match, as the artifact looks it up)."""
    for i, v in enumerate(levels):
        if v == value:
            return i
    raise SolverError(f"Synergy-OPT: the fair share {value:g} per GPU is not a grid point of {tuple(levels)}; "
                      f"the artifact's lookup fails there too")


class ProgramOne:
    """Program 1 over job classes as one persistent HiGHS model; a solve only changes the class counts.

    Columns are the Pareto-optimal grid points of each class (points at or above the fair-share throughput
    that no cheaper point matches); rows: the CPU budget, the memory budget, and one row per class fixing how
    many of its jobs run. HiGHS re-solves warm from the last basis. Results are cached by the counts.
    """

    def __init__(self, grids: list[np.ndarray], gpus: list[int], cpu_budget: float, mem_budget: float,
                 fair_cpu: float, fair_mem: float):
        import highspy

        self.grids = [np.asarray(g, float).ravel() for g in grids]
        self.gpus = list(gpus)
        self.budgets = (float(cpu_budget), float(mem_budget))
        fc, fm = fair_index(CPU_LEVELS, fair_cpu), fair_index(MEM_LEVELS, fair_mem)
        self.cols = [(k, p) for k, grid in enumerate(self.grids)
                     for p in pareto_points(grid, grid[fc * len(MEM_LEVELS) + fm])]
        self.best = {}
        for k, p in self.cols:
            if k not in self.best or self.grids[k][p] > self.grids[k][self.best[k]]:
                self.best[k] = p
        K, P = len(self.grids), len(self.cols)
        tput = np.array([self.grids[k][p] for k, p in self.cols])
        g = np.array([self.gpus[k] for k, _ in self.cols], float)
        self.cpu = np.array([CPU[p] for _, p in self.cols]) * g
        self.mem = np.array([MEM[p] for _, p in self.cols]) * g
        h = new_highs()
        h.setOptionValue("time_limit", 30.0)
        inf = highspy.kHighsInf
        # Maximise throughput; a tiny tie-break prefers cheaper points among equal throughputs.
        cost = -tput + 1e-7 * (self.cpu / max(cpu_budget, 1.0) + self.mem / max(mem_budget, 1.0))
        h.addVars(P, np.zeros(P), np.full(P, inf))
        h.changeColsCost(P, np.arange(P, dtype=np.int32), cost)
        h.changeColsIntegrality(P, np.arange(P, dtype=np.int32),
                                np.full(P, highspy.HighsVarType.kInteger))
        idx = np.arange(P, dtype=np.int32)
        h.addRow(-inf, self.budgets[0], P, idx, self.cpu)
        h.addRow(-inf, self.budgets[1], P, idx, self.mem)
        for k in range(K):
            members = np.array([i for i, (kk, _) in enumerate(self.cols) if kk == k], np.int32)
            h.addRow(0.0, 0.0, len(members), members, np.ones(len(members)))
        self.highs = h
        self.solve = lru_cache(maxsize=8192)(self._solve)

    def _solve(self, counts: tuple[int, ...]) -> list[list[tuple[int, int]]]:
        grids, gpus = self.grids, self.gpus
        best = self.best
        if all(k in best or not n for k, n in enumerate(counts)) and \
                sum(CPU[best[k]] * gpus[k] * n for k, n in enumerate(counts) if n) <= self.budgets[0] and \
                sum(MEM[best[k]] * gpus[k] * n for k, n in enumerate(counts) if n) <= self.budgets[1]:
            return [[(best[k], n)] if n else [] for k, n in enumerate(counts)]   # everyone at its best point
        h = self.highs
        K = len(counts)
        c = np.asarray(counts, float)
        h.changeRowsBounds(K, np.arange(2, 2 + K, dtype=np.int32), c, c)
        with clock.timed():
            h.run()
        import highspy

        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise SolverError(f"Synergy-OPT: program 1 has no solution ({h.modelStatusToString(h.getModelStatus())});"
                              f" the jobs' fair shares need more than the budgets {self.budgets[0]:g} CPUs / "
                              f"{self.budgets[1]:g} GB")
        n = np.rint(np.asarray(h.getSolution().col_value)).astype(int)
        out: list[list[tuple[int, int]]] = [[] for _ in counts]
        for (k, p), v in zip(self.cols, n.tolist()):
            if v > 0:
                out[k].append((p, v))
        for k, pts in enumerate(out):
            pts.sort(key=lambda pv: -grids[k][pv[0]])
        return out


def choose_points(grids: list[np.ndarray], gpus: list[int], counts: list[int], cpu_budget: float,
                  mem_budget: float, fair_cpu: float, fair_mem: float) -> list[list[tuple[int, int]]]:
    """For each class: the grid points (flat index, how many jobs) of an optimal solution of program 1.

    `grids[k]` is class k's 9x5 relative-throughput grid, `gpus[k]` its GPU count, `counts[k]` its jobs.
    """
    key = (tuple(np.ascontiguousarray(g, float).ravel().tobytes() for g in grids), tuple(map(int, gpus)),
           float(cpu_budget), float(mem_budget), float(fair_cpu), float(fair_mem))
    program = _PROGRAMS.get(key)
    if program is None:
        program = _PROGRAMS[key] = ProgramOne(grids, gpus, cpu_budget, mem_budget, fair_cpu, fair_mem)
    return program.solve(tuple(map(int, counts)))


_PROGRAMS: dict[tuple, ProgramOne] = {}


def pareto_points(grid: np.ndarray, floor: float) -> list[int]:
    """Grid points at or above `floor` that no other such point beats with fewer or equal CPUs and memory."""
    allowed = [int(p) for p in np.flatnonzero(grid >= floor)]
    keep = []
    for p in allowed:
        dominated = any(grid[q] >= grid[p] and CPU[q] <= CPU[p] and MEM[q] <= MEM[p] and
                        (grid[q] > grid[p] or CPU[q] < CPU[p] or MEM[q] < MEM[p]) for q in allowed)
        if not dominated:
            keep.append(p)
    return keep


def spread_over_servers(gpus: np.ndarray, cpus: np.ndarray, mem: np.ndarray, server_gpus: float,
                        server_cpus: float, server_mem: float, num_servers: int) -> np.ndarray:
    """Program 2: fractions `x[s, j]` of job j on server s within each server's capacity (HiGHS LP)."""
    J, S = len(gpus), num_servers
    if J == 0:
        return np.zeros((S, 0))
    # Variables x[s, j] row-major; per-server capacity rows, one row per job summing to 1.
    eye_s = np.kron(np.eye(S), np.ones((1, J)))
    a_ub = np.vstack([eye_s * np.tile(gpus, S), eye_s * np.tile(cpus, S), eye_s * np.tile(mem, S)])
    b_ub = np.concatenate([np.full(S, server_gpus), np.full(S, server_cpus), np.full(S, server_mem)])
    a_eq = np.kron(np.ones((1, S)), np.eye(J))
    with clock.timed():
        res = linprog(np.zeros(S * J), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.ones(J), bounds=(0, 1),
                      method="highs")
    if res.status != 0:
        raise SolverError(f"Synergy-OPT: program 2 (server assignment) is infeasible ({res.message})")
    return res.x.reshape(S, J)
