"""The rank program's plan from its LP relaxation (docs/rules.md#rank-rounding): the rounds the LP gives a job whole
are kept, the rounds it splits are repaired by moving other jobs between rounds, and the plan is taken without the
MILP when its cost is within the gap of the LP's bound."""

from __future__ import annotations

import numpy as np


def rounded_plan(x: np.ndarray, cost: np.ndarray, gpus: np.ndarray, n: np.ndarray, capacity: int) -> np.ndarray | None:
    """(L, R) round sets from the LP's (L, R) solution `x`, with costs `cost` and gang sizes `gpus`: each job keeps
    the rounds where x is 1; a job the LP splits takes its missing rounds (the job with the steepest costs first),
    each in the round that costs least once the jobs in it that must make room have moved, each to its cheapest
    round with room. None when some job's rounds cannot be completed that way."""
    y = x > 1.0 - 1e-7
    room = capacity - gpus @ y
    missing = n - y.sum(axis=1)
    if (room < 0).any() or (missing < 0).any():
        return None
    short = np.flatnonzero(missing > 0)
    short = short[np.argsort(-(cost[short, -1] - cost[short, 0]), kind="stable")]
    for j in short.tolist():
        for _ in range(int(missing[j])):
            best = None
            for r in np.flatnonzero(~y[j]).tolist():
                found = _join(y, room, cost, gpus, j, r)
                if found is not None and (best is None or found[0] < best[0]):
                    best = found
            if best is None:
                return None
            _, y, room = best
    return y


def _join(y: np.ndarray, room: np.ndarray, cost: np.ndarray, gpus: np.ndarray, j: int, r: int):
    """(cost of the change, y, room) with job j in round r, on copies: where r lacks room, the jobs in it move out
    first, cheapest per GPU freed first, each to a round with room it is not in. None when no such move is left."""
    y, room = y.copy(), room.copy()
    total = cost[j, r]
    while room[r] < gpus[j]:
        movers = np.flatnonzero(y[:, r])
        dest = ~y[movers] & (room[None, :] >= gpus[movers, None])
        dest[:, r] = False
        if not dest.any():
            return None
        extra = np.where(dest, (cost[movers] - cost[movers, r][:, None]) / gpus[movers, None], np.inf)
        k, to = divmod(int(np.argmin(extra)), extra.shape[1])
        i, g = int(movers[k]), int(gpus[movers[k]])
        y[i, r], y[i, to] = False, True
        room[r] += g
        room[to] -= g
        total += cost[i, to] - cost[i, r]
    y[j, r] = True
    room[r] -= gpus[j]
    return total, y, room
