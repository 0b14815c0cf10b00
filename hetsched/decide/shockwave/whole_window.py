"""Several GPU types: a plan with each job on one type for the whole window, taken without the solver when its
objective is within the gap of a bound on the window program's optimum (docs/rules.md#whole-window-plan)."""

from __future__ import annotations

import numpy as np

from hetsched.decide.shockwave.milp import WindowInputs, log_segments, type_tiebreak


def planned_objective(inp: WindowInputs, n: np.ndarray, rounds: int, round_s: float, k: float,
                      bases: tuple[float, ...], log_origin: float) -> tuple[float, np.ndarray]:
    """(c'x, P): the window program's objective (without its type tie-break) at round counts n[j, w] with every
    other column at its best, and the planned epochs P_j, as large as n and the epochs left allow."""
    P = np.minimum(round_s * (inp.speed * n).sum(axis=1) / inp.mean_epoch_s,
                   np.maximum(inp.epochs.astype(float) - inp.progress, 0.0))
    U = utility(inp.progress, inp.epochs, P, log_segments(bases, log_origin))
    M = max(0.0, float((inp.remaining_s - inp.mean_epoch_s * P).max()))
    return k * M - float((inp.priority * U).sum()) / (len(n) * rounds), P


def utility(progress: np.ndarray, epochs: np.ndarray, P: np.ndarray, segments: tuple) -> np.ndarray:
    """U_j, the piecewise-linear log (`log_segments`) of job j's progress after P_j planned epochs: the program's
    hypograph at its best. P is (N,), or (N, W) for one value per job and type."""
    b, vals, slope = segments
    shape = (-1,) + (1,) * (P.ndim - 1)
    f = (progress.reshape(shape) + P) / epochs.astype(float).reshape(shape)
    return np.minimum(0.0, (vals[:-1] + slope * (f[..., None] - b[:-1])).min(axis=-1))


def bound_counts(speed: np.ndarray, gpus: np.ndarray, capacity: np.ndarray, rounds: int) -> np.ndarray:
    """Each job alone: its rounds on its fastest types, as many as the window's capacity of a type allows it
    (g_j n_jw <= G_w R), at most R in all. Every P_j is then as large as any plan makes it, so the objective there
    bounds the window program's optimum from below."""
    N, W = speed.shape
    most = np.minimum(rounds, capacity[None, :] * rounds // gpus[:, None])
    most = np.where(speed > 0, most, 0)
    n = np.zeros((N, W), np.int64)
    left = np.full(N, rounds, np.int64)
    for w in np.argsort(-speed, axis=1, kind="stable").T:        # each job's i-th fastest type
        take = np.minimum(left, most[np.arange(N), w])
        n[np.arange(N), w] = take
        left -= take
    return n


def whole_window_counts(speed: np.ndarray, gpus: np.ndarray, capacity: np.ndarray, rounds: int,
                        order: np.ndarray) -> np.ndarray:
    """Jobs in `order` take, for all R rounds, the fastest type with room for their gang in every round."""
    N, W = speed.shape
    free = capacity.astype(np.int64).tolist()
    n = np.zeros((N, W), np.int64)
    fastest_first = np.argsort(-speed, axis=1, kind="stable").tolist()
    rates, need = speed.tolist(), gpus.tolist()
    for j in order.tolist():
        for w in fastest_first[j]:
            if rates[j][w] > 0 and free[w] >= need[j]:
                n[j, w] = rounds
                free[w] -= need[j]
                break
    return n


def whole_window_plan(inp: WindowInputs, *, capacity, rounds: int, round_s: float, k: float,
                      bases: tuple[float, ...], log_origin: float, gap: float, slack: float) -> np.ndarray | None:
    """(N, W) round counts within `gap` of the window program's optimum, or None. Two orders, one for each term of
    the objective: by priority (the utilities' weights), then by remaining time; and by remaining time (the
    makespan term). Of the two plans that run every job in every round at (1 - slack) x its fastest rate or more
    and meet the fair-finish bounds, the cheaper is kept when c'x - bound <= gap |c'x|."""
    speed = np.asarray(inp.speed, float)
    cap = np.asarray(capacity, np.int64)
    gpus = inp.gpus.astype(np.int64)
    if len(gpus) == 0:
        return None
    tie = type_tiebreak(speed, rounds)
    top = speed.max(axis=1)
    best, best_value = None, np.inf
    longest = np.argsort(-inp.remaining_s, kind="stable")
    by_priority = np.lexsort((-inp.remaining_s, -inp.priority))
    # equal priorities (every fair-finish attempt) give the same order twice: one plan
    for order in (longest,) if np.array_equal(by_priority, longest) else (by_priority, longest):
        n = whole_window_counts(speed, gpus, cap, rounds, order)
        if (n.sum(axis=1) < rounds).any() or ((speed * n).sum(axis=1) < (1.0 - slack) * rounds * top).any():
            continue
        value, P = planned_objective(inp, n, rounds, round_s, k, bases, log_origin)
        value += float((tie * n).sum())
        if inp.ftf_slack_s is not None and (inp.remaining_s - inp.mean_epoch_s * P > inp.ftf_slack_s).any():
            continue
        if value < best_value:
            best, best_value = n, value
    if best is None:
        return None
    lower, _ = planned_objective(inp, bound_counts(speed, gpus, cap, rounds), rounds, round_s, k, bases, log_origin)
    return best if best_value - lower <= gap * abs(best_value) else None
