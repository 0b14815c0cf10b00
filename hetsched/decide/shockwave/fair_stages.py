"""The window program's second, lexicographic stages (docs/rules.md#planner-fairness): with the welfare held within
the gap of its exact optimum, one plan chosen by a fairness objective, solved to optimality, so that the plan does
not depend on where the solver's search stops. `fairness: "ftf"` and `fairness: "share"`."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hetsched.decide.shockwave.solve import MilpResult, solve_milp


def _within_gap(c: np.ndarray, A: sp.csr_matrix, extra: int) -> list:
    """The first stage's rows with `extra` new columns, and the welfare row c'x (its bounds: (-inf, `_limit`])."""
    width = len(c) + extra
    nz = np.flatnonzero(c)
    return [sp.hstack([A, sp.csr_matrix((A.shape[0], extra))], format="csr"),
            sp.csr_matrix((c[nz], (np.zeros(len(nz), np.int64), nz)), shape=(1, width))]


def closed_gap(options) -> tuple:
    """HiGHS options with its absolute gap closed too (its default, 1e-6, leaves small steps to the search path)."""
    return tuple(options or ()) + (("mip_abs_gap", 0.0),)


def exact_options(options) -> tuple:
    """`closed_gap`, and HiGHS's MIP feasibility tolerance at 1e-9 (its default, 1e-6, let the exact rank program
    stop at plans up to 7e-7 of their cost above the optimum, at a different one on each path)."""
    return closed_gap(options) + (("mip_feasibility_tolerance", 1e-9),)


#: The window program's status where a lexicographic stage did not prove its optimum (its time limit).
STAGE_STOPPED = "stage stopped"


def stage_answer(res: MilpResult, res2: MilpResult, cols: int) -> tuple[np.ndarray, bool]:
    """(x, exact): the second stage's plan, or the first stage's where the second found none; exact when both
    stages proved their optimum. A stage that stopped at its time limit keeps the incumbent it had, which depends
    on the solver's path and the machine's speed (docs/rules.md#planner-fairness)."""
    exact = res.status == "optimal" and res2.status == "optimal"
    return (res2.x[:cols] if res2.ok else res.x), exact


def _limit(res: MilpResult, gap: float) -> float:
    """The welfare's bound: within `gap` of the first stage's exact optimum."""
    return res.objective + gap * abs(res.objective)


def ftf_within_gap(res, c, A, row_lo, row_hi, col_lo, col_hi, integer, ftf_ratio, P_: int, NW: int, *, gap: float,
                   **solve) -> tuple[np.ndarray, bool]:
    """`fairness: "ftf"`. `res` is the window program solved to optimality; among the plans within `gap` of that
    optimum, the one whose jobs' predicted finish-time ratios exceed rhomax least: the smallest N max_j e_j +
    sum_j e_j, e_j >= a_j - b_j P_j - rhomax, e_j >= 0, solved to optimality with a tie-break on the round counts
    far below the rest. Returns (x, exact), `stage_answer`."""
    a, b, rhomax = ftf_ratio
    cols, jobs = len(c), np.flatnonzero(np.isfinite(a) & np.isfinite(b))
    N, L = len(a), len(jobs)
    e, z = cols + np.arange(L), cols + L
    each, width = np.r_[np.arange(L), np.arange(L)], cols + L + 1
    rows = _within_gap(c, A, L + 1) + [
        sp.csr_matrix((np.r_[np.ones(L), b[jobs]], (each, np.r_[e, P_ + jobs])), shape=(L, width)),
        sp.csr_matrix((np.r_[np.ones(L), -np.ones(L)], (each, np.r_[np.full(L, z), e])), shape=(L, width))]
    # rows after A: welfare <= limit; e_j + b_j P_j >= a_j - rhomax; z - e_j >= 0
    c2 = np.zeros(width)
    c2[e], c2[z] = 1.0, float(N)
    c2[:NW] = 1e-4 * np.arange(1, NW + 1) / NW
    res2 = solve_milp(c2, sp.vstack(rows, format="csr"), np.r_[row_lo, -np.inf, a[jobs] - rhomax, np.zeros(L)],
                      np.r_[row_hi, _limit(res, gap), np.full(2 * L, np.inf)], np.r_[col_lo, np.zeros(L + 1)],
                      np.r_[col_hi, np.full(L + 1, np.inf)], np.r_[integer, np.zeros(L + 1, bool)], gap=0.0, **solve)
    return stage_answer(res, res2, cols)


def share_within_gap(res, c, A, row_lo, row_hi, col_lo, col_hi, integer, speed: np.ndarray, rounds: int,
                     remaining_s: np.ndarray, *, gap: float, **solve) -> tuple[np.ndarray, bool]:
    """`fairness: "share"`. Among the plans within `gap` of the optimum `res`, the one that gives the worst-off
    job the largest share of the window, then the jobs together the largest: the largest N min_j s_j + sum_j s_j,
    s_j = sum_w n_jw speed_jw / (R max_w speed_jw), a job's rounds counted at its fastest type's rate, solved to
    optimality with a tie-break on the round counts below one round of share. Returns (x, exact),
    `stage_answer`. `speed` is (N, W); the n[j, w] are the first N W columns. On one type the stage is
    `_share_in_whole_rounds`, with `remaining_s` ordering its tie-break."""
    N, W = speed.shape
    if W == 1:
        return _share_in_whole_rounds(res, c, A, row_lo, row_hi, col_lo, col_hi, integer, rounds, remaining_s,
                                      gap=gap, **solve)
    NW, cols = N * W, len(c)
    rel = (speed / np.maximum(speed.max(axis=1, keepdims=True), 1e-12)).ravel()
    s, t = cols + np.arange(N), cols + N
    jobs, width = np.arange(N), cols + N + 1
    rows = _within_gap(c, A, N + 1) + [
        sp.csr_matrix((np.r_[np.ones(N), -rel / rounds], (np.r_[jobs, np.repeat(jobs, W)], np.r_[s, np.arange(NW)])),
                      shape=(N, width)),
        sp.csr_matrix((np.r_[np.ones(N), -np.ones(N)], (np.r_[jobs, jobs], np.r_[np.full(N, t), s])),
                      shape=(N, width))]
    # rows after A: welfare <= limit; s_j - sum_w rel_jw n_jw / R <= 0; t - s_j <= 0
    c2 = np.zeros(width)
    c2[s], c2[t] = -1.0, -float(N)
    # The tie-break adds up to less than one round's share (1 / R) over any plan, and its steps are resolved
    # because the stage closes its absolute gap too (HiGHS's default leaves 1e-6).
    c2[:NW] = np.arange(1, NW + 1) / (rounds * rounds * NW * NW)
    options = closed_gap(solve.pop("options", ()))
    res2 = solve_milp(c2, sp.vstack(rows, format="csr"), np.r_[row_lo, -np.inf, np.full(2 * N, -np.inf)],
                      np.r_[row_hi, _limit(res, gap), np.zeros(2 * N)], np.r_[col_lo, np.zeros(N + 1)],
                      np.r_[col_hi, np.full(N + 1, np.inf)], np.r_[integer, np.zeros(N + 1, bool)], gap=0.0,
                      options=options, **solve)
    return stage_answer(res, res2, cols)


#: The whole-round share stage's time limit, in multiples of the planner's (docs/rules.md R32a): an exact answer
#: that the limit cuts short would depend on the machine's speed.
STAGE_TIME_FACTOR = 4


def tie_weights(remaining_s: np.ndarray) -> np.ndarray:
    """The whole-round share stage's tie-break weights: 1 for the job with the longest remaining time, up to N for
    the shortest (equal times by job order), so that among plans of equal share the rounds go to the jobs with the
    most left, as the work-conserving fill gives spare GPUs."""
    w = np.empty(len(remaining_s))
    w[np.argsort(-np.asarray(remaining_s, float), kind="stable")] = np.arange(1, len(remaining_s) + 1)
    return w


def _share_in_whole_rounds(res, c, A, row_lo, row_hi, col_lo, col_hi, integer, rounds: int, remaining_s, *,
                           gap: float, **solve) -> tuple[np.ndarray, bool]:
    """`share_within_gap` on one GPU type, where a job's share is n_j / R: the stage's objective in whole numbers,
    the largest K (N m + sum_j n_j) - sum_j w_j n_j with m <= n_j an integer column (R t) and w the weights 1..N
    by remaining time (`tie_weights`), below one step of the first part (K = 1 + sum_j w_j max n_j). HiGHS
    resolves a whole-number objective exactly, where the fractional tie-break's steps were below its tolerances
    (docs/rules.md#planner-fairness)."""
    N, cols = int(integer.sum()), len(c)
    m, width = cols, cols + 1
    weights = tie_weights(remaining_s)
    K = 1.0 + float(weights @ col_hi[:N])
    jobs = np.arange(N)
    rows = _within_gap(c, A, 1) + [
        sp.csr_matrix((np.r_[np.ones(N), -np.ones(N)], (np.r_[jobs, jobs], np.r_[np.full(N, m), jobs])),
                      shape=(N, width))]
    # rows after A: welfare <= limit; m - n_j <= 0
    c2 = np.zeros(width)
    c2[:N], c2[m] = weights - K, -K * N
    options = exact_options(solve.pop("options", ()))
    solve["time_limit_s"] = STAGE_TIME_FACTOR * solve["time_limit_s"]
    res2 = solve_milp(c2, sp.vstack(rows, format="csr"), np.r_[row_lo, -np.inf, np.full(N, -np.inf)],
                      np.r_[row_hi, _limit(res, gap), np.zeros(N)], np.r_[col_lo, 0.0], np.r_[col_hi, float(rounds)],
                      np.r_[integer, True], gap=0.0, options=options, **solve)
    return stage_answer(res, res2, cols)
