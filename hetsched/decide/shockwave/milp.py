"""The planner's two programs, built as sparse matrices and solved by HiGHS (docs/rules.md#planner-programs).

The artifact's model has a binary x[j, r] per job and round plus SOS2 binaries for the log. The objective
sees a job's rounds only through n_j = sum_r x[j, r], and the weighted log is concave, so its piecewise-linear
hypograph needs no binaries. `window_program` therefore has N integer n_j and 3N + 1 continuous columns, with
the capacity over the whole window (sum_j w_j n_j <= G R) in place of the per-round one. That is a relaxation:
with mixed gang sizes some count vectors do not pack into rounds (tests/test_planner.py has such cases). The
rounds are assigned afterwards by `rank_program`, the artifact's own second MILP (it keeps n_j and puts
high-priority jobs first); when the counts do not pack, it keeps as many planned GPU-rounds as fit instead.
On the canonical and scale traces every count vector packed (see the issue note).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hetsched.decide.shockwave.fair_stages import (STAGE_STOPPED, bound_value, closed_gap, exact_options,
                                                  ftf_within_gap, share_within_gap)
from hetsched.decide.shockwave.rank_rounding import rounded_plan
from hetsched.decide.shockwave.solve import solve_milp   # called through this module's name (benchmarks patch it)

log = logging.getLogger(__name__)


@dataclass
class WindowInputs:
    """Per-job data of one re-solve (arrays of length N)."""

    gpus: np.ndarray           # w_j
    epochs: np.ndarray         # E_j
    progress: np.ndarray       # p_j^0 (epochs done)
    mean_epoch_s: np.ndarray   # d-bar_j
    remaining_s: np.ndarray    # R-hat_j
    priority: np.ndarray       # weights on the log utility (1 without the relaxation)
    ftf_slack_s: np.ndarray | None = None   # FTF attempt: Rem_j <= share * (rhomax FT-bar_j - t_next)
    speed: np.ndarray | None = None         # (N, W) rate on each GPU type relative to the profile's; None: one type
    # Which plan within the gap (R32a): "solver", where HiGHS stops; "ftf" or "share", the lexicographic stages' one
    # plan; "ftf" with `ftf_ratio` = (a, b, rhomax): a job's predicted finish-time ratio after the window is
    # a_j - b_j P_j (NaN: none).
    fairness: str = "solver"
    ftf_ratio: tuple[np.ndarray, np.ndarray, float] | None = None


def _csr(rows: np.ndarray, cols: np.ndarray, data: np.ndarray, num_rows: int, num_cols: int) -> sp.csr_matrix:
    """The CSR matrix scipy builds from these COO triplets (entries sorted by row, then column; no duplicates
    here), without its conversion's overhead."""
    order = np.lexsort((cols, rows))
    indptr = np.zeros(num_rows + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=num_rows), out=indptr[1:])
    return sp.csr_matrix((data[order], cols[order], indptr), shape=(num_rows, num_cols))


def log_segments(bases: tuple[float, ...], log_origin: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bases, log values, slopes) of the log's piecewise-linear form; the first base's value is log(log_origin)."""
    b = np.asarray(bases, float)
    with np.errstate(divide="ignore"):
        vals = np.log(b)
    vals[0] = np.log(log_origin)
    return b, vals, np.diff(vals) / np.diff(b)


def type_tiebreak(speed: np.ndarray, rounds: int) -> np.ndarray:
    """(N, W) cost of a round of job j on type w: among equally good plans, rounds on a job's faster types (far
    below the rest of the objective)."""
    return 1e-7 / (len(speed) * rounds) * (1.0 - speed / np.maximum(speed.max(axis=1, keepdims=True), 1e-12))


def window_program(inp: WindowInputs, *, capacity, rounds: int, round_s: float, k: float,
                   bases: tuple[float, ...], log_origin: float, gap: float, time_limit_s: float,
                   solver: str = "highs", start: np.ndarray | None = None, seed: int = 0, options: tuple = ()
                   ) -> tuple[np.ndarray | None, str]:
    """Rounds n[j, w] per job and GPU type that maximise sum_j prio_j U_j / (N R) - k max_j Rem_j; None when
    infeasible. `capacity` is the GPUs per type (a number for one type).

    Columns: n (N x W, integer in [0, R]), P (N planned epochs), U (N log utility), M (max remaining seconds).
    With several types a job's rounds on them add up to at most R, and a round on type w is worth speed[j, w]
    profile rounds (the planner chooses the GPU type per job, which the artifact, V100-only, never had to).
    """
    N = len(inp.gpus)
    speed = np.ones((N, 1)) if inp.speed is None else np.asarray(inp.speed, float)
    NW = N * speed.shape[1]                          # n[j, w] come first, then P
    c, A, lo, hi, col_lo, col_hi, integer = _window_model(inp, capacity, rounds, round_s, k, bases, log_origin)
    ftf = inp.fairness == "ftf" and inp.ftf_ratio is not None
    second = ftf or inp.fairness == "share"          # a lexicographic second stage (docs/rules.md#planner-fairness)
    # "share" closes the absolute gap too: its welfare bound must not move with where HiGHS stops within 1e-6
    first = closed_gap(options) if inp.fairness == "share" else options
    res = solve_milp(c, A, lo, hi, col_lo, col_hi, integer, gap=0.0 if second else gap,
                     time_limit_s=time_limit_s, start=start, solver=solver, seed=seed, options=first)
    if not res.ok:
        return None, res.status
    x, exact = res.x, True
    stage = dict(gap=gap, time_limit_s=time_limit_s, solver=solver, seed=seed, options=options)
    if ftf:
        x, exact = ftf_within_gap(res, c, A, lo, hi, col_lo, col_hi, integer, inp.ftf_ratio, NW, NW, **stage)
    elif second:
        x, exact = share_within_gap(res, c, A, lo, hi, col_lo, col_hi, integer, speed, rounds, inp.remaining_s,
                                    **stage)
    n = np.rint(x[:NW]).astype(np.int64).reshape(speed.shape)
    return (n[:, 0] if inp.speed is None else n), res.status if exact else STAGE_STOPPED


def window_lp_bound(inp: WindowInputs, *, capacity, rounds: int, round_s: float, k: float,
                    bases: tuple[float, ...], log_origin: float, time_limit_s: float, options: tuple = (),
                    **_) -> float | None:
    """The optimum of `window_program`'s LP relaxation (HiGHS, without presolve, which costs these small LPs more
    than it saves, unless `options` say otherwise), a lower bound on the program's, read to `BOUND_DIGITS`
    significant digits (`bound_value`); None where HiGHS proves none (docs/rules.md#fair-plan)."""
    c, A, lo, hi, col_lo, col_hi, integer = _window_model(inp, capacity, rounds, round_s, k, bases, log_origin)
    res = solve_milp(c, A, lo, hi, col_lo, col_hi, np.zeros_like(integer), gap=0.0, time_limit_s=time_limit_s,
                     options=(("presolve", "off"),) + tuple(options))
    return bound_value(res.objective) if res.status == "optimal" else None


def _window_model(inp: WindowInputs, capacity, rounds: int, round_s: float, k: float, bases: tuple[float, ...],
                  log_origin: float) -> tuple:
    """`window_program`'s (c, A, row_lo, row_hi, col_lo, col_hi, integer)."""
    N = len(inp.gpus)
    speed = np.ones((N, 1)) if inp.speed is None else np.asarray(inp.speed, float)
    W = speed.shape[1]
    cap = np.atleast_1d(np.asarray(capacity, float))
    NW = N * W
    cols = NW + 2 * N + 1
    P_, U_, M_ = NW, NW + N, NW + 2 * N          # n[j, w] come first
    j = np.arange(N)
    nj = (j[:, None] * W + np.arange(W)[None, :])            # n[j, w] columns
    b, vals, slope = log_segments(bases, log_origin)         # S segments
    S = len(slope)
    E = inp.epochs.astype(float)
    rows, cols_, data, lo, hi = [], [], [], [], []

    def block(r, c, v, lower, upper):
        rows.append(np.asarray(r) + sum(len(x) for x in lo))
        cols_.append(np.asarray(c))
        data.append(np.asarray(v, float))
        lo.append(np.asarray(lower, float))
        hi.append(np.asarray(upper, float))

    # plan: d_j P_j - round_s sum_w speed_jw n_jw <= 0
    cat = np.concatenate
    block(cat([j, np.repeat(j, W)]), cat([P_ + j, nj.ravel()]),
          cat([inp.mean_epoch_s, -round_s * speed.ravel()]), np.full(N, -np.inf), np.zeros(N))
    # capacity over the window, per type: sum_j w_j n_jw <= G_w R
    block(np.tile(np.arange(W), N), nj.ravel(), np.repeat(inp.gpus, W), np.full(W, -np.inf), cap * rounds)
    if W > 1:                                               # a job runs on one type per round
        block(np.repeat(j, W), nj.ravel(), np.ones(NW), np.full(N, -np.inf), np.full(N, float(rounds)))
    # log hypograph: U_j - slope_s / E_j P_j <= val_s + slope_s (p_j / E_j - base_s)
    rr = (j[:, None] * S + np.arange(S)[None, :]).ravel()
    block(cat([rr, rr]), cat([np.repeat(U_ + j, S), np.repeat(P_ + j, S)]),
          cat([np.ones(N * S), (-slope[None, :] / E[:, None]).ravel()]), np.full(N * S, -np.inf),
          (vals[:-1][None, :] + slope[None, :] * (inp.progress[:, None] / E[:, None] - b[:-1][None, :])).ravel())
    # makespan epigraph: M + d_j P_j >= R-hat_j
    block(cat([j, j]), cat([np.full(N, M_), P_ + j]), cat([np.ones(N), inp.mean_epoch_s]), inp.remaining_s,
          np.full(N, np.inf))
    if inp.ftf_slack_s is not None:      # R-hat_j - d_j P_j <= slack_j
        block(j, P_ + j, inp.mean_epoch_s, inp.remaining_s - inp.ftf_slack_s, np.full(N, np.inf))
    A = _csr(cat(rows), cat(cols_), cat(data), sum(len(x) for x in lo), cols)
    c = np.zeros(cols)
    c[U_:U_ + N] = -inp.priority / (N * rounds)
    c[M_] = k
    if W > 1:            # among equally good plans, rounds on a job's faster types (a tie-break far below the rest)
        c[:NW] = type_tiebreak(speed, rounds).ravel()
    col_lo = np.zeros(cols)
    col_lo[U_:U_ + N] = vals[0]
    col_hi = cat([np.where(speed.ravel() > 0, float(rounds), 0.0), np.maximum(E - inp.progress, 0.0), np.zeros(N),
                  [np.inf]])
    integer = np.zeros(cols, bool)
    integer[:NW] = True
    return c, A, cat(lo), cat(hi), col_lo, col_hi, integer


def fair_finish_reachable(inp: WindowInputs, rounds: int, round_s: float, ftf_slack_s: np.ndarray) -> bool | None:
    """Whether every job can meet its fair-finish bound (R-hat_j - d_j P_j <= slack_j) with as many epochs as the
    window allows it alone (every round on its fastest type): False means the window program's fair-finish
    attempt is infeasible, which the solver need not prove (docs/rules.md#planner-programs); None when a job is
    within 1e-6 of its bound, where the solver decides."""
    top = np.ones(len(inp.gpus)) if inp.speed is None else inp.speed.max(axis=1)
    epochs = np.minimum(np.maximum(inp.epochs - inp.progress, 0.0), round_s * rounds * top / inp.mean_epoch_s)
    need = inp.remaining_s - ftf_slack_s                   # d_j P_j must reach it
    excess = need - inp.mean_epoch_s * epochs
    tol = 1e-6 * np.maximum(1.0, np.abs(need))
    if (excess > tol).any():
        return False
    return None if (excess > -tol).any() or np.isnan(excess).any() else True


def uncontended_counts(inp: WindowInputs, capacity: np.ndarray, rounds: int) -> np.ndarray | None:
    """Several GPU types, when every job fits on its fastest type at once (docs/rules.md#planner-programs): each
    job on that type in every round is an optimum of `window_program`, since it makes every P_j as large as it
    can be (utility up, makespan term down) at a tie-break cost of 0, and it meets the fair-finish bounds
    whenever any plan does. None when jobs contend for a type."""
    speed = inp.speed
    N, W = speed.shape
    fastest = np.argmax(speed, axis=1)                     # the first of equally fast types, as typed_rounds
    if N == 0 or (speed[np.arange(N), fastest] <= 0).any():
        return None
    if (np.bincount(fastest, weights=inp.gpus, minlength=W) > np.asarray(capacity, float)).any():
        return None
    n = np.zeros((N, W), np.int64)
    n[np.arange(N), fastest] = rounds
    return n


def typed_rounds(n: np.ndarray, gpus: np.ndarray, priority: np.ndarray, speed: np.ndarray, capacity: np.ndarray,
                 rounds: int) -> np.ndarray:
    """Several GPU types: (N, R) type index per job and round (-1 = not planned). Jobs in order of priority per
    planned round take, fastest type first, their earliest rounds where they are free and the type has room."""
    N, W = n.shape
    total = n.sum(axis=1)
    live = np.flatnonzero(total > 0)
    order = live[np.argsort(-priority[live] / total[live], kind="stable")]
    used = np.zeros((W, rounds), np.int64)
    plan = np.full((N, rounds), -1, np.int64)
    fastest_first = np.argsort(-speed, axis=1, kind="stable")
    counts = n.tolist()
    for j in order.tolist():
        for w in fastest_first[j].tolist():
            if counts[j][w] == 0:
                continue
            room = np.flatnonzero((plan[j] < 0) & (used[w] + gpus[j] <= capacity[w]))[: counts[j][w]]
            plan[j, room] = w
            used[w, room] += gpus[j]
    return plan


def greedy_rounds(n: np.ndarray, gpus: np.ndarray, order: np.ndarray, capacity: int, rounds: int) -> np.ndarray:
    """Jobs in `order` take their n_j earliest rounds with room; a job that does not fit everywhere gets fewer."""
    used = np.zeros(rounds, np.int64)
    y = np.zeros((len(n), rounds), bool)
    for j in order.tolist():
        room = np.flatnonzero(used + gpus[j] <= capacity)[: n[j]]
        y[j, room] = True
        used[room] += gpus[j]
    return y


def rank_program(n: np.ndarray, gpus: np.ndarray, priority: np.ndarray, *, capacity: int, rounds: int,
                 gap: float, time_limit_s: float, solver: str = "highs", seed: int = 0,
                 options: tuple = (), exact: bool = False) -> np.ndarray:
    """(N, R) rounds per job: keep n_j rounds each, minimise sum_j prio_j mean(round index of j); the LP's plan,
    rounded, where it is within the gap (docs/rules.md#rank-rounding), else the MILP's. `exact`: the MILP, to
    optimality, with a tie-break between equally ranked jobs far below the rest (one answer whatever the solver's
    path, docs/rules.md#planner-fairness)."""
    N = len(n)
    live = np.flatnonzero(n > 0)
    order = live[np.argsort(-priority[live] / n[live], kind="stable")]
    greedy = greedy_rounds(n, gpus, order, capacity, rounds)
    if len(live) == 0 or (greedy.sum(axis=1) == n).all() and np.ptp(gpus[live]) == 0:
        return greedy                     # equal gang sizes: the greedy order is optimal (exchange argument)
    L, R = len(live), rounds
    a = priority[live] / n[live]
    start = greedy[live].ravel().astype(float) if (greedy.sum(axis=1) == n).all() else None
    if not exact:
        plan, within = _lp_rank(n[live], gpus[live], a, capacity, R, gap, time_limit_s, greedy[live] if start is not
                                None else None)
        if within:
            y = np.zeros((N, R), bool)
            y[live] = plan
            return y
        start = plan.ravel().astype(float) if plan is not None else start
    c, A, lo, hi = _rank_model(n[live], gpus[live], a, capacity, R)
    if exact:
        c = c + 1e-6 * c.max() * ((np.arange(1, L + 1) / L)[:, None] * (np.arange(1, R + 1) / R)[None, :]).ravel()
        gap, options = 0.0, exact_options(options)
    res = solve_milp(c, A, lo, hi, np.zeros(L * R), np.ones(L * R), np.ones(L * R, bool), gap=gap,
                     time_limit_s=time_limit_s, start=start, solver=solver, seed=seed, options=options)
    if not res.ok:
        # The counts do not pack: keep as many planned GPU-rounds as fit (at most n_j per job), earlier rounds
        # to higher-priority jobs as a tie-break far below one GPU-round.
        log.info("rank program %s: the round counts do not pack; keeping as many as fit", res.status)
        order_cost = c / max(c.max(), 1e-12) * 1e-3
        c_fit = -np.repeat(gpus[live].astype(float), R) + order_cost
        res = solve_milp(c_fit, A, np.r_[np.zeros(L), lo[L:]], hi, np.zeros(L * R), np.ones(L * R),
                         np.ones(L * R, bool), gap=gap, time_limit_s=time_limit_s, solver=solver, seed=seed,
                         options=options)
        if not res.ok:
            return greedy
    plan = np.rint(res.x).reshape(L, R) > 0.5
    y = np.zeros((N, R), bool)
    y[live] = alike_in_order(plan, n[live], gpus[live], a) if exact else plan
    return y


def alike_in_order(y: np.ndarray, n: np.ndarray, gpus: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Jobs alike in rank cost a_j, rounds and gang size can swap their round sets at no cost, and the exact
    program's tie-break between them is below HiGHS's tolerances: the set with the earliest rounds (smallest sum,
    then first in order) goes to the last of them, as the tie-break asks (docs/rules.md#planner-fairness)."""
    groups: dict = {}
    for j in np.flatnonzero(n > 0).tolist():
        groups.setdefault((float(a[j]), int(n[j]), int(gpus[j])), []).append(j)
    for jobs in groups.values():
        if len(jobs) > 1:
            earliest = sorted(jobs, key=lambda j: (int(np.flatnonzero(y[j]).sum()), np.flatnonzero(y[j]).tolist()))
            y[jobs[::-1]] = y[earliest]
    return y


def _rank_model(n: np.ndarray, gpus: np.ndarray, a: np.ndarray, capacity: int, R: int):
    """The rank program's (c, A, row_lo, row_hi) over y[l, r] (column l R + r): n_l rounds each, the capacity
    per round, cost a_l (r + 1)."""
    L = len(n)
    var = np.arange(L * R)
    A = sp.csr_matrix((np.r_[np.ones(L * R), np.repeat(gpus, R).astype(float)],
                       (np.r_[np.repeat(np.arange(L), R), L + np.tile(np.arange(R), L)], np.r_[var, var])),
                      shape=(L + R, L * R))
    lo = np.r_[n.astype(float), np.full(R, -np.inf)]
    hi = np.r_[n.astype(float), np.full(R, float(capacity))]
    return (a[:, None] * np.arange(1, R + 1)[None, :]).ravel(), A, lo, hi


def _lp_rank(n: np.ndarray, gpus: np.ndarray, a: np.ndarray, capacity: int, R: int, gap: float, time_limit_s: float,
             greedy: np.ndarray | None) -> tuple[np.ndarray | None, bool]:
    """(plan, within the gap) from the LP relaxation (docs/rules.md#rank-rounding): the cheaper of the LP's rounded
    plan and the greedy one (None: it does not pack). Jobs planned for every round are in every round of any plan:
    they leave the LP, their GPUs off the capacity and their cost a constant."""
    whole = n == R
    rest = np.flatnonzero(~whole)
    room = capacity - int(gpus[whole].sum())
    const = float(a[whole].sum()) * R * (R + 1) / 2
    if len(rest) == 0:
        return (np.ones((len(n), R), bool), True) if room >= 0 else (None, False)
    c, A, lo, hi = _rank_model(n[rest], gpus[rest], a[rest], room, R)
    m = len(c)
    lp = solve_milp(c, A, lo, hi, np.zeros(m), np.ones(m), np.zeros(m, bool), gap=gap, time_limit_s=time_limit_s,
                    options=(("presolve", "off"),))
    plans = [] if greedy is None else [greedy]
    if lp.ok:
        part = rounded_plan(lp.x.reshape(len(rest), R), c.reshape(len(rest), R), gpus[rest], n[rest], room)
        if part is not None:
            plan = np.ones((len(n), R), bool)
            plan[rest] = part
            plans.append(plan)
    if not plans:
        return None, False
    cost = a[:, None] * np.arange(1, R + 1)[None, :]
    values = [float((cost * p).sum()) for p in plans]
    best = int(np.argmin(values))                          # the first of equally cheap plans: the greedy one
    return plans[best], lp.ok and values[best] - (lp.objective + const) <= gap * abs(values[best])


def artifact_window_program(inp: WindowInputs, *, capacity: int, rounds: int, round_s: float, k: float,
                            bases: tuple[float, ...], log_origin: float, gap: float, time_limit_s: float,
                            solver: str = "highs", start=None, seed: int = 0,
                            options: tuple = ()) -> tuple[np.ndarray | None, str]:
    """The artifact's own model (docs/rules.md#planner-programs): x[j, r] binaries per round and an SOS2 lambda
    formulation of the log. Same optimum as `window_program`, far larger; kept to measure what the reformulation
    changes."""
    N, R = len(inp.gpus), rounds
    B = len(bases)
    b, vals, _ = log_segments(bases, log_origin)
    X = 0                                  # x[j, r] at X + j R + r
    P_ = N * R
    L_ = P_ + N                            # lambda[j, b]
    Z_ = L_ + N * B                        # z[j, b]
    M_ = Z_ + N * B
    cols = M_ + 1
    j = np.arange(N)
    rows, cc, data, lo, hi = [], [], [], [], []
    count = [0]

    def block(r, c, v, lower, upper):
        rows.append(np.asarray(r) + count[0])
        cc.append(np.asarray(c))
        data.append(np.asarray(v, float))
        lo.append(np.asarray(lower, float))
        hi.append(np.asarray(upper, float))
        count[0] += len(lo[-1])

    xr = X + j[:, None] * R + np.arange(R)[None, :]
    block(np.tile(np.arange(R), N), xr.ravel(), np.repeat(inp.gpus, R), np.full(R, -np.inf), np.full(R, capacity))
    block(np.r_[j, np.repeat(j, R)], np.r_[P_ + j, xr.ravel()], np.r_[inp.mean_epoch_s, np.full(N * R, -round_s)],
          np.full(N, -np.inf), np.zeros(N))
    lam = L_ + j[:, None] * B + np.arange(B)[None, :]
    z = Z_ + j[:, None] * B + np.arange(B)[None, :]
    E = inp.epochs.astype(float)
    block(np.r_[np.repeat(j, B), j], np.r_[lam.ravel(), P_ + j], np.r_[np.tile(b, N), -1.0 / E],
          inp.progress / E, inp.progress / E)
    block(np.repeat(j, B), lam.ravel(), np.ones(N * B), np.ones(N), np.ones(N))
    block(np.r_[np.arange(N * B), np.arange(N * B)], np.r_[lam.ravel(), z.ravel()],
          np.r_[np.ones(N * B), -np.ones(N * B)], np.full(N * B, -np.inf), np.zeros(N * B))
    block(np.repeat(j, B), z.ravel(), np.ones(N * B), np.full(N, -np.inf), np.full(N, 2.0))
    pairs = [(a, c) for a in range(B) for c in range(a + 2, B)]
    pr = np.arange(N * len(pairs))
    ja = np.repeat(j, len(pairs))
    a_idx = np.tile([a for a, _ in pairs], N)
    c_idx = np.tile([c for _, c in pairs], N)
    block(np.r_[pr, pr], np.r_[Z_ + ja * B + a_idx, Z_ + ja * B + c_idx], np.ones(2 * len(pr)),
          np.full(len(pr), -np.inf), np.ones(len(pr)))
    block(np.r_[j, j], np.r_[np.full(N, M_), P_ + j], np.r_[np.ones(N), inp.mean_epoch_s], inp.remaining_s,
          np.full(N, np.inf))
    if inp.ftf_slack_s is not None:
        block(j, P_ + j, inp.mean_epoch_s, inp.remaining_s - inp.ftf_slack_s, np.full(N, np.inf))
    A = sp.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(cc))), shape=(count[0], cols))
    c = np.zeros(cols)
    c[lam.ravel()] = -(inp.priority[:, None] * vals[None, :]).ravel() / (N * R)
    c[M_] = k
    col_lo = np.zeros(cols)
    col_hi = np.r_[np.ones(N * R), np.full(N, np.inf), np.ones(N * B), np.ones(N * B), np.inf]
    integer = np.zeros(cols, bool)
    integer[:N * R] = True
    integer[Z_:Z_ + N * B] = True
    res = solve_milp(c, A, np.concatenate(lo), np.concatenate(hi), col_lo, col_hi, integer, gap=gap,
                     time_limit_s=time_limit_s, solver=solver, seed=seed, options=options)
    if not res.ok:
        return None, res.status
    return np.rint(res.x[:N * R]).reshape(N, R).sum(axis=1).astype(np.int64), res.status
