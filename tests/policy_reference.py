"""Independent job-level formulations of the policy problems (Gavel's way: one row per job *pair*),
solved with scipy's HiGHS. The library solves type-level problems with ECOS; tests compare the two."""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import linprog

from hetsched.decide.gavel import PolicyView


def combos(view: PolicyView, packing: bool):
    """Singles, then every pair of jobs with equal scale factors and positive pair throughput somewhere."""
    m = view.num_jobs
    rows = [(i,) for i in range(m)]
    if packing:
        for i, k in itertools.combinations(range(m), 2):
            if view.scale_factor[i] == view.scale_factor[k]:
                t = view.pair_throughput(i, k)
                if ((t[:, 0] > 0) & (t[:, 1] > 0)).any():
                    rows.append((i, k))
    return rows


def job_level(view: PolicyView, packing: bool, throughput=None):
    """Variables x[c, j]; returns (A_ub, b_ub, E) with E[i] = effective throughput of job i (linear in x)."""
    T = view.throughput if throughput is None else throughput
    cs = combos(view, packing)
    m, n = view.num_jobs, view.num_types
    nv = len(cs) * n
    E = np.zeros((m, nv))
    time = np.zeros((m, nv))
    cap = np.zeros((n, nv))
    for c, members in enumerate(cs):
        for j in range(n):
            col = c * n + j
            if len(members) == 1:
                E[members[0], col] = T[members[0], j]
            else:
                t = view.pair_throughput(*members)[j]
                if t[0] <= 0 or t[1] <= 0:
                    continue  # the mechanism never runs such a pair
                E[members[0], col], E[members[1], col] = t
            for i in members:
                time[i, col] = 1.0
            cap[j, col] = view.scale_factor[members[0]]
    return cs, np.vstack([time, cap]), np.concatenate([np.ones(m), view.capacity]), E


def maximise_min(view, coef, packing, throughput=None, lower=None):
    """max t s.t. coef_i E_i(x) >= t; optional lower bounds E_i >= lower_i."""
    cs, A, b, E = job_level(view, packing, throughput)
    nv = A.shape[1]
    A_ub = np.vstack([np.hstack([A, np.zeros((A.shape[0], 1))]),
                      np.hstack([-coef[:, None] * E, np.ones((len(coef), 1))])])
    b_ub = np.concatenate([b, np.zeros(len(coef))])
    if lower is not None:
        A_ub = np.vstack([A_ub, np.hstack([-E, np.zeros((len(coef), 1))])])
        b_ub = np.concatenate([b_ub, -lower])
    c = np.zeros(nv + 1)
    c[-1] = -1
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=[(0, None)] * nv + [(None, None)], method="highs")
    assert res.status == 0, res.message
    return res.x[-1], E @ res.x[:-1]


def max_theta(view, packing, throughput=None):
    cs, A, b, E = job_level(view, packing, throughput)
    scale = view.remaining_steps.max()
    R = view.remaining_steps / scale          # well-scaled theta for HiGHS's absolute tolerances
    nv = A.shape[1]
    A_ub = np.vstack([np.hstack([A, np.zeros((A.shape[0], 1))]), np.hstack([-E, R[:, None]])])
    b_ub = np.concatenate([b, np.zeros(len(R))])
    c = np.zeros(nv + 1)
    c[-1] = -1
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=[(0, None)] * (nv + 1), method="highs")
    assert res.status == 0, res.message
    return scale / res.x[-1]


def ftf_rho(view, D, packing, throughput=None, tol=1e-10):
    """min max_i (t_i + R_i/E_i)/D_i by bisection on rho over LP feasibility."""
    cs, A, b, E = job_level(view, packing, throughput)
    t, R = view.time_since_arrival, view.remaining_steps

    def feasible(rho):
        slack = rho * D - t
        if np.any(slack <= 0):
            return False
        need = R / slack
        res = linprog(np.zeros(A.shape[1]), A_ub=np.vstack([A, -E]), b_ub=np.concatenate([b, -need]),
                      bounds=(0, None), method="highs")
        return res.status == 0

    lo, hi = 0.0, 1.0
    while not feasible(hi):
        lo, hi = hi, hi * 2
    while hi - lo > tol * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


def max_sum(view, weights_per_type, packing):
    cs, A, b, E = job_level(view, packing)
    n = view.num_types
    col_w = np.tile(weights_per_type, len(cs))
    res = linprog(-(E.sum(axis=0) * col_w), A_ub=A, b_ub=b, bounds=(0, None), method="highs")
    assert res.status == 0
    return -res.fun


def water_filling_levels(view, coef_norm, packing):
    """Lexicographic max-min of s_i * nE_i / w_i by the textbook method: raise, then test each job alone."""
    cs, A, b, E = job_level(view, packing)
    m = view.num_jobs
    nE = E * coef_norm[:, None]                     # s_i/(w_i prop_i) * E_i
    level = np.zeros(m)
    frozen = np.zeros(m, bool)
    nv = A.shape[1]
    while not frozen.all():
        act = ~frozen
        # max t s.t. nE_i >= level_i + t (active), nE_i >= level_i (frozen)
        A_ub = np.vstack([np.hstack([A, np.zeros((A.shape[0], 1))]),
                          np.hstack([-nE, act[:, None].astype(float)])])
        b_ub = np.concatenate([b, -level])
        c = np.zeros(nv + 1)
        c[-1] = -1
        res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=[(0, None)] * nv + [(None, None)], method="highs")
        level[act] += res.x[-1]
        for i in np.flatnonzero(act):
            c2 = np.zeros(nv)
            c2[:] = -nE[i]
            r2 = linprog(c2, A_ub=np.vstack([A, -nE]), b_ub=np.concatenate([b, -level]), bounds=(0, None),
                         method="highs")
            if -r2.fun <= level[i] * (1 + 1e-7) + 1e-9:
                frozen[i] = True
    return np.sort(level)
