"""Pollux's search, one compiled loop per step (docs/rules.md#pollux): repair, duplicate removal, fitness and
NSGA-II's rank and crowding. The random draws stay in numpy (pollux.py), so runs with and without numba match."""

from __future__ import annotations

import numpy as np

from hetsched.compiled.jit import compiled

MAX_NODES = 16


@compiled
def repair(s, max_r, caps, order):
    """In place: each entry within its virtual node's GPUs; a job's replicas within its limit (first nodes kept)
    and on at most 16 nodes; then, jobs in `order`, at most one job spanning nodes on a node and the node's GPUs."""
    P, J, V = s.shape
    spread = np.zeros(J, dtype=np.bool_)
    for p in range(P):
        for j in range(J):
            running, nodes, used = 0, 0, 0
            for v in range(V):
                x = min(max(s[p, j, v], 0), caps[v])
                x = min(x, max(max_r[j] - running, 0))
                if x > 0:
                    nodes += 1
                    if nodes > MAX_NODES:
                        x = 0
                s[p, j, v] = x
                running += x
                used += 1 if x > 0 else 0
            spread[j] = used > 1
        for v in range(V):
            spanning, taken = 0, 0
            for t in range(J):
                j = order[t]
                x = s[p, j, v]
                if x > 0 and spread[j]:
                    spanning += 1
                    if spanning > 1:
                        x = 0
                x = min(x, max(caps[v] - taken, 0))
                s[p, j, v] = x
                taken += x
    return s


@compiled
def _row_hash(row):
    h = np.uint64(1469598103934665603)
    for x in row:
        h = (h ^ np.uint64(x + 1)) * np.uint64(1099511628211)
    return h


@compiled
def new_rows(kids, pop):
    """Mask of the children that are neither in the population nor repeats of an earlier child."""
    K, P = kids.shape[0], pop.shape[0]
    pop_hash = np.empty(P, dtype=np.uint64)
    for i in range(P):
        pop_hash[i] = _row_hash(pop[i])
    keep = np.zeros(K, dtype=np.bool_)
    kid_hash = np.empty(K, dtype=np.uint64)
    for k in range(K):
        h = _row_hash(kids[k])
        kid_hash[k] = h
        fresh = True
        for i in range(P):
            if pop_hash[i] == h and np.array_equal(pop[i], kids[k]):
                fresh = False
                break
        if fresh:
            for i in range(k):
                if keep[i] and kid_hash[i] == h and np.array_equal(kids[i], kids[k]):
                    fresh = False
                    break
        keep[k] = fresh
    return keep


@compiled
def fitness(states, tables, base, factor, p, min_speedup, total_gpus):
    """(-utility, GPUs used / GPUs) per state (states: P x J x V): the power mean of the jobs' speedups, a running
    job that moves discounted by its restart factor."""
    P, J, V = states.shape
    out = np.empty((P, 2))
    running = np.zeros(J, dtype=np.bool_)
    for j in range(J):
        running[j] = base[j].sum() > 0
    top = tables.shape[2] - 1
    for q in range(P):
        acc, used = 0.0, 0
        for j in range(J):
            nodes, reps, moved = 0, 0, False
            for v in range(V):
                x = states[q, j, v]
                if x > 0:
                    nodes += 1
                    reps += x
                if x != base[j, v]:
                    moved = True
            speed = tables[j, nodes, min(reps, top)]
            if moved and running[j]:
                speed *= factor[j]
            acc += max(speed, min_speedup) ** p
            used += reps
        out[q, 0] = -((acc / J) ** (1.0 / p))
        out[q, 1] = used / total_gpus
    return out


@compiled
def rank_crowding(objs):
    """NSGA-II's non-dominated rank (0 = the Pareto front) and crowding distance of every state."""
    n, m = objs.shape
    count = np.zeros(n, dtype=np.int64)                            # how many states dominate each
    beats = np.zeros((n, n), dtype=np.bool_)
    for i in range(n):
        for j in range(n):
            no_worse, better = True, False
            for k in range(m):
                if objs[i, k] > objs[j, k]:
                    no_worse = False
                    break
                if objs[i, k] < objs[j, k]:
                    better = True
            if no_worse and better:
                beats[i, j] = True
                count[j] += 1
    rank = np.full(n, -1, dtype=np.int64)
    level, left = 0, n
    while left > 0:
        front = np.flatnonzero((count == 0) & (rank < 0))
        for i in front:
            rank[i] = level
        left -= len(front)
        for i in front:
            for j in range(n):
                if beats[i, j]:
                    count[j] -= 1
        level += 1
    crowd = np.zeros(n)
    for lv in range(level):
        members = np.flatnonzero(rank == lv)
        if len(members) <= 2:
            crowd[members] = np.inf
            continue
        for k in range(m):
            order = members[np.argsort(objs[members, k], kind="mergesort")]
            span = objs[order[-1], k] - objs[order[0], k]
            crowd[order[0]] = np.inf
            crowd[order[-1]] = np.inf
            if span > 0:
                for t in range(1, len(order) - 1):
                    crowd[order[t]] += (objs[order[t + 1], k] - objs[order[t - 1], k]) / span
    return rank, crowd
