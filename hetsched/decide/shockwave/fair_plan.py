"""Several GPU types: a plan within the gap of the window program's LP bound, built without the solver's search
(docs/rules.md#fair-plan). The rounds the welfare gains most from, per GPU, until the plan is within the gap; then
every round left, one at a time, to the job with the least share of the window. Which plan the planner keeps then
depends on no search path, and no job waits while a round it could use is free."""

from __future__ import annotations

import heapq

import numpy as np

from hetsched.decide.shockwave.fair_stages import share_steps, tie_weights
from hetsched.decide.shockwave.milp import WindowInputs, log_segments, type_tiebreak
from hetsched.decide.shockwave.whole_window import planned_objective, utility


#: HiGHS's absolute MIP gap (`mip_abs_gap`, its default): it stops there too, e.g. where the optimum is 0.
ABS_GAP = 1e-6


def fair_plan(inp: WindowInputs, lower: float, *, capacity, rounds: int, round_s: float, k: float,
              bases: tuple[float, ...], log_origin: float, gap: float) -> np.ndarray | None:
    """(N, W) round counts whose objective c'x is within `gap` of `lower`, a bound on the window program's optimum
    (c'x - lower <= max(gap |c'x|, ABS_GAP), as HiGHS stops), or None where this construction does not reach it.
    In a fair-finish attempt (`inp.ftf_slack_s`) every job's bound is met first, or None."""
    speed = np.asarray(inp.speed, float)
    N, W = speed.shape
    if N == 0:
        return None
    g = inp.gpus.astype(np.int64)
    room = np.asarray(capacity, np.int64) * rounds           # GPU-rounds per type: the program's capacity rows
    tie = type_tiebreak(speed, rounds)
    d, rem = inp.mean_epoch_s, inp.remaining_s
    most = np.maximum(inp.epochs.astype(float) - inp.progress, 0.0)       # epochs left: P_j's bound
    fastest_first = np.argsort(-speed, axis=1, kind="stable")
    n = np.zeros((N, W), np.int64)

    def planned(j):                          # P_j as the program has it at n
        return min(most[j], round_s * float(speed[j] @ n[j]) / d[j])

    def fits(j, w):
        return speed[j, w] > 0 and room[w] >= g[j] and n[j].sum() < rounds

    def add(j, w, rounds_=1):
        n[j, w] += rounds_
        room[w] -= rounds_ * g[j]

    def value():
        return planned_objective(inp, n, rounds, round_s, k, bases, log_origin)[0] + float((tie * n).sum())

    def allowed(v):                          # as HiGHS stops: its relative gap, or its absolute one
        return np.maximum(gap * np.abs(v), ABS_GAP)

    def within(v):
        return v - lower <= allowed(v)

    if inp.ftf_slack_s is not None:          # the attempt: each job's fair-finish bound, d_j P_j >= need_j
        need = rem - inp.ftf_slack_s
        for j in np.argsort(-need / np.maximum(round_s * speed.max(axis=1), 1e-12), kind="stable").tolist():
            for w in fastest_first[j].tolist():
                while d[j] * planned(j) < need[j] and fits(j, w):
                    add(j, w)
            if d[j] * planned(j) < need[j]:
                return None
    # One more round of job j on type w: how much it lowers the objective, its utility term (a row of `lift` changes
    # only when j gains a round) plus its makespan term (which moves for every job when the two jobs with the most
    # time left change), per GPU where it fits (`score`).
    segments, weight = log_segments(bases, log_origin), inp.priority / (N * rounds)
    lift = np.zeros((N, W))
    after = np.zeros((N, W))                 # remaining time after that round

    def jobs(rows):                          # their rows of `lift` and `after`; their remaining time now
        done = (speed[rows] * n[rows]).sum(axis=1)
        P = np.minimum(round_s * done / d[rows], most[rows])
        P2 = np.minimum(round_s * (done[:, None] + speed[rows]) / d[rows, None], most[rows, None])
        U = utility(inp.progress[rows], inp.epochs[rows], np.concatenate((P[:, None], P2), axis=1), segments)
        lift[rows] = weight[rows, None] * (U[:, 1:] - U[:, :1]) - tie[rows]
        after[rows] = rem[rows, None] - d[rows, None] * P2
        return rem[rows] - d[rows] * P

    every = slice(None)                      # rows: slices, which index as views
    loss = jobs(every)                       # remaining time after the plan so far
    score = np.zeros((N, W))

    def makespan(rows):                      # score[rows] from lift and the makespan term; the top two losses
        top = np.sort(loss)[-2:] if N > 1 else np.array([0.0, loss[0]])
        others = np.where(loss[rows] >= top[-1], top[0], top[-1])      # the most time left of the other jobs
        M = max(0.0, top[-1])
        gain = lift[rows] - k * (np.maximum(0.0, np.maximum(others[:, None], after[rows])) - M)
        fit = (gain > 0) & (room[None, :] >= g[rows, None]) & (n[rows].sum(axis=1) < rounds)[:, None]
        score[rows] = np.where(fit, gain / g[rows, None], -np.inf)
        return gain, top

    def run(j, w, alone):                    # rounds j takes on w one after another while it stays the choice
        rest = score.copy()
        rest[j] = -np.inf                     # the other jobs' scores only fall meanwhile (type w's room)
        rival = int(np.argmax(rest))
        T = int(min(rounds - n[j].sum(), room[w] // g[j]))
        done = (speed[j] * n[j]).sum()
        P = np.minimum(round_s * (done + speed[j, w] * np.arange(T + 1)) / d[j], most[j])
        G = weight[j] * np.diff(utility(inp.progress[j:j + 1], inp.epochs[j:j + 1], P[None, :], segments)[0]) \
            - tie[j, w]
        chosen = (G / g[j] > rest.flat[rival]) | ((G / g[j] == rest.flat[rival]) & (j * W + w < rival))
        if not alone:                         # j has the most time left: the makespan term falls with it, until the
            left = rem[j] - d[j] * P          # second most is the most (the other jobs' gains move from there)
            G = G - k * (np.maximum(0.0, np.maximum(top[0], left[1:])) - np.maximum(0.0, left[:-1]))
            chosen &= left[:-1] > top[0]
        chosen &= G > 0
        estimate = v - np.cumsum(G)
        inside = estimate - lower <= allowed(estimate) * (1 + 1e-9)
        take = min(int(np.argmin(chosen[1:])) + 1 if not chosen[1:].all() else T,
                   int(np.argmax(inside)) + 1 if inside.any() else T)
        return take, float(estimate[take - 1])

    gain, top = makespan(every)
    v = value()
    while not within(v):                     # the welfare's most valuable round per GPU, one at a time
        j, w = divmod(int(np.argmax(score)), W)
        if score[j, w] == -np.inf:
            return None
        # j's rounds move neither the makespan term nor the other jobs' gains (alone), or move the makespan term
        # only (j alone has the most time left): a run of them; else one, and every gain again
        alone = N > 1 and loss[j] < top[0]
        take, estimate = run(j, w, alone) if alone or N > 1 and loss[j] > top[0] else (1, v - float(gain[j, w]))
        add(j, w, take)
        # c'x after them, to rounding: the exact value decides at the gap
        v = value() if estimate - lower <= allowed(estimate) * (1 + 1e-9) else estimate
        loss[j] = jobs(slice(j, j + 1))[0]
        if alone:
            gain[j] = makespan(slice(j, j + 1))[0][0]
            score[room[w] < g, w] = -np.inf
        else:
            gain, top = makespan(every)
    # every round left to the job with the least share (steps of its fastest rate), the most time left first, until
    # its planned epochs cover the epochs it has left (plain numbers: one round at a time)
    q = share_steps(speed).astype(np.int64)
    heap = list(zip((q * n).sum(axis=1).tolist(), tie_weights(rem).tolist(), range(N)))
    q, rates, gang = q.tolist(), speed.tolist(), g.tolist()
    left, count, done = room.tolist(), n.sum(axis=1).tolist(), (speed * n).sum(axis=1).tolist()
    full = (most * d / round_s).tolist()     # the rate-weighted rounds that cover them
    heapq.heapify(heap)
    fastest = fastest_first.tolist()
    while heap:
        share, r, j = heapq.heappop(heap)
        if count[j] >= rounds or done[j] >= full[j]:
            continue
        w = next((w for w in fastest[j] if rates[j][w] > 0 and left[w] >= gang[j]), None)
        if w is not None:
            n[j, w] += 1
            left[w] -= gang[j]
            count[j] += 1
            done[j] += rates[j][w]
            heapq.heappush(heap, (share + q[j][w], r, j))
    v = value()
    return n if within(v) else None
