"""The window program's second, lexicographic stages (docs/rules.md#planner-fairness): with the welfare held within
the gap of its exact optimum, one plan chosen by a fairness objective, solved to optimality, so that the plan does
not depend on where the solver's search stops. `fairness: "ftf"` and `fairness: "share"`."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from hetsched.decide.shockwave.solve import MilpResult, solve_milp
from hetsched.errors import SpecError


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
    """The welfare's bound: within `gap` of the first stage's exact optimum, that optimum read to `BOUND_DIGITS`
    significant digits. HiGHS proves the optimum to its tolerances, so its last digits move with the path (3e-9 of
    58.6 on the comparison's Gavel stream), and a plan on the bound's edge would move with them."""
    value = bound_value(res.objective)
    return value + gap * abs(value)


def bound_value(value: float) -> float:
    """An optimum HiGHS proved, read to `BOUND_DIGITS` significant digits: its last digits move with the path."""
    if value != 0.0:
        step = 10.0 ** (np.floor(np.log10(abs(value))) - BOUND_DIGITS + 1)
        value = float(np.round(value / step) * step)
    return value


#: Significant digits of the first stage's optimum that the welfare's bound keeps (`_limit`).
BOUND_DIGITS = 7


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
    s_j a job's rounds counted at its fastest type's rate as a share of the window's R, solved to optimality with a
    tie-break on the round counts below one step of share; in whole numbers, which HiGHS resolves exactly. Returns
    (x, exact), `stage_answer`. `speed` is (N, W); the n[j, w] are the first N W columns; `remaining_s` orders the
    tie-break. On one type s_j = n_j / R; on several, in steps of 1/SHARE_STEPS (`_share_in_steps`)."""
    if speed.shape[1] == 1:           # s_j = n_j / R: steps of whole rounds, weights by remaining time
        q, weights = np.ones(speed.shape), tie_weights(remaining_s)[:, None]
    else:
        q, weights = share_steps(speed), type_tie_weights(speed, remaining_s)
    return _share_in_steps(res, c, A, row_lo, row_hi, col_lo, col_hi, integer, q, weights, rounds, gap=gap, **solve)


#: The share stages' time limit, in multiples of the planner's (docs/rules.md R32a): an exact answer that the
#: limit cuts short would depend on the machine's speed.
STAGE_TIME_FACTOR = 4


def tie_weights(remaining_s: np.ndarray) -> np.ndarray:
    """The whole-round share stage's tie-break weights: 1 for the job with the longest remaining time, up to N for
    the shortest (equal times by job order), so that among plans of equal share the rounds go to the jobs with the
    most left, as the work-conserving fill gives spare GPUs."""
    w = np.empty(len(remaining_s))
    w[np.argsort(-np.asarray(remaining_s, float), kind="stable")] = np.arange(1, len(remaining_s) + 1)
    return w


#: On several GPU types a round's share is counted in steps of 1/SHARE_STEPS of a round at the job's fastest rate.
SHARE_STEPS = 20


def share_steps(speed: np.ndarray) -> np.ndarray:
    """(N, W) steps of share a round of job j on type w counts: its rate there in 1/SHARE_STEPS of its fastest."""
    return np.rint(SHARE_STEPS * speed / np.maximum(speed.max(axis=1, keepdims=True), 1e-12))


def type_tie_weights(speed: np.ndarray, remaining_s: np.ndarray) -> np.ndarray:
    """(N, W) tie-break weights of the several-type share stage: p_j 2^(t_jw - 1), with p_j the r_j-th prime of
    those >= 2^(W - 1), r_j = `tie_weights` (1 for the job with the most time left), and t_jw the type's rank for
    the job (1 for its fastest): rounds go to the jobs with more time left and to faster types. The products keep
    two jobs trading a round between the same two types from being a tie (p_j would have to divide a difference of
    powers of 2 below it), and the powers of 2 keep one job moving a round off its middle type to each side from
    being one when its steps per type are evenly spaced, which rounding to SHARE_STEPS makes common (with weights
    r_j W + t_jw the first was a tie, with p_j t_jw the second)."""
    N, W = speed.shape
    type_rank = np.empty((N, W))
    type_rank[np.arange(N)[:, None], np.argsort(-speed, axis=1, kind="stable")] = np.arange(W)
    primes = _primes_from(2 ** (W - 1), N)
    return primes[tie_weights(remaining_s).astype(np.int64) - 1][:, None] * 2.0 ** type_rank


def _primes_from(low: int, count: int) -> np.ndarray:
    """The first `count` primes >= `low`."""
    found, p = [], max(2, low)
    while len(found) < count:
        if all(p % d for d in range(2, int(p ** 0.5) + 1)):
            found.append(p)
        p += 1
    return np.array(found, float)


def _share_in_steps(res, c, A, row_lo, row_hi, col_lo, col_hi, integer, q: np.ndarray, weights: np.ndarray,
                    rounds: int, *, gap: float, **solve) -> tuple[np.ndarray, bool]:
    """The share stage in whole numbers, which HiGHS resolves exactly (a fractional tie-break's steps were below its
    tolerances, docs/rules.md#planner-fairness): a round of job j on type w counts q_jw steps, and the stage is the
    largest K (N m + sum_jw q_jw n_jw) - sum_jw w_jw n_jw with m <= sum_w q_jw n_jw an integer column and the
    tie-break `weights` w below one step of the rest (K = 1 + R sum_j max_w w_jw: a job's rounds add up to at most
    R), to optimality. q and w are (N, W); on one type q = 1 and w = `tie_weights`, on several q counts
    1/SHARE_STEPS of a round at the job's fastest rate and w = `type_tie_weights`."""
    N, W = q.shape
    NW, cols = N * W, len(c)
    K = 1.0 + rounds * float(weights.max(axis=1).sum())
    if K * (N + 1) * q.max() * rounds >= 2.0 ** 53:
        raise SpecError(f"fairness 'share': {N} jobs on {W} GPU types are too many for the stage's whole numbers "
                         "(docs/rules.md#planner-fairness); use fairness 'solver'")
    m, width = cols, cols + 1
    jobs = np.arange(N)
    A2 = sp.vstack(_within_gap(c, A, 1) + [
        sp.csr_matrix((np.r_[np.ones(N), -q.ravel()], (np.r_[jobs, np.repeat(jobs, W)],
                                                         np.r_[np.full(N, m), np.arange(NW)])), shape=(N, width))],
                   format="csr")
    # rows after A: welfare <= limit; m - sum_w q_jw n_jw <= 0
    c2 = np.zeros(width)
    c2[:NW], c2[m] = (weights - K * q).ravel(), -K * N
    options = exact_options(solve.pop("options", ()))
    solve["time_limit_s"] = STAGE_TIME_FACTOR * solve["time_limit_s"]
    res2 = solve_milp(c2, A2, np.r_[row_lo, -np.inf, np.full(N, -np.inf)], np.r_[row_hi, _limit(res, gap), np.zeros(N)],
                      np.r_[col_lo, 0.0], np.r_[col_hi, float(q.max()) * rounds], np.r_[integer, True], gap=0.0,
                      options=options, **solve)
    return stage_answer(res, res2, cols)
