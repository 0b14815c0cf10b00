"""The rank program from its LP relaxation (docs/rules.md#rank-rounding): a plan that keeps every count and the
capacity, taken without the MILP only where it is within the gap of the LP's bound; and the shared HiGHS
instance's clock, which an LP's time limit must not inherit."""

import numpy as np
import pytest
import scipy.sparse as sp

from hetsched.decide.shockwave import milp
from hetsched.decide.shockwave.milp import rank_program
from hetsched.decide.shockwave.rank_rounding import rounded_plan
from hetsched.decide.shockwave.solve import _highs, solve_milp


def _instance(seed: int, jobs: int = 60, capacity: int = 32, rounds: int = 8):
    """Mixed gang sizes (1, 2, 4, 8), counts that fill the window to about 95 %, priorities over three decades."""
    rng = np.random.default_rng(seed)
    gpus = rng.choice([1, 2, 4, 8], size=jobs, p=[0.55, 0.25, 0.15, 0.05])
    n = np.zeros(jobs, np.int64)
    room = int(0.95 * capacity * rounds)
    for j in rng.permutation(jobs):
        n[j] = min(rounds, rng.integers(1, rounds + 1), room // gpus[j])
        room -= n[j] * gpus[j]
    return n, gpus, 10.0 ** rng.uniform(0, 3, size=jobs), capacity, rounds


def _cost(y, n, priority, rounds):
    live = n > 0
    return float(((priority[live] / n[live])[:, None] * np.arange(1, rounds + 1) * y[live]).sum())


def _optimum(n, gpus, priority, capacity, rounds):
    """The rank program's optimum, by the MILP at gap 0."""
    live = np.flatnonzero(n > 0)
    L, R = len(live), rounds
    var = np.arange(L * R)
    rows = np.r_[np.repeat(np.arange(L), R), L + np.tile(np.arange(R), L)]
    A = sp.csr_matrix((np.r_[np.ones(L * R), np.repeat(gpus[live], R).astype(float)], (rows, np.r_[var, var])),
                      shape=(L + R, L * R))
    c = ((priority[live] / n[live])[:, None] * np.arange(1, R + 1)).ravel()
    res = solve_milp(c, A, np.r_[n[live], np.full(R, -np.inf)], np.r_[n[live], np.full(R, capacity)], np.zeros(L * R),
                     np.ones(L * R), np.ones(L * R, bool), gap=0.0, time_limit_s=60.0)
    assert res.status == "optimal"
    return res.objective


@pytest.mark.parametrize("seed", range(6))
def test_the_plan_keeps_counts_and_capacity_and_is_within_the_gap_of_the_optimum(seed):
    n, gpus, priority, capacity, rounds = _instance(seed)
    y = rank_program(n, gpus, priority, capacity=capacity, rounds=rounds, gap=1e-3, time_limit_s=30.0)
    assert (y.sum(axis=1) == n).all()
    assert (gpus @ y <= capacity).all()
    assert _cost(y, n, priority, rounds) <= (1 + 1e-3) * _optimum(n, gpus, priority, capacity, rounds) + 1e-9


def test_a_certified_plan_skips_the_milp_and_one_that_is_not_goes_to_it(monkeypatch):
    """Over the six instances, count the MILPs: a plan within the gap of the LP's bound calls none, and the
    others call HiGHS's MILP with the rounded plan as the start."""
    calls = []

    def counted(*args, **kwargs):
        calls[-1].append((bool(args[6].any()), kwargs.get("start") is not None))
        return solve_milp(*args, **kwargs)

    monkeypatch.setattr(milp, "solve_milp", counted)
    for seed in range(6):
        calls.append([])
        rank_program(*_instance(seed)[:3], capacity=32, rounds=8, gap=1e-3, time_limit_s=30.0)
    assert all(c[0] == (False, False) for c in calls)                  # the LP first
    skipped = [c for c in calls if len(c) == 1]
    assert skipped, calls                                               # some are taken from the LP's rounding
    assert all(c[1][0] for c in calls if len(c) > 1), calls            # the rest are MILPs


def test_rounding_moves_a_small_job_to_make_room_for_a_split_gang():
    """Three rounds of 4 GPUs. The LP splits job U (2 GPUs, 2 rounds) over rounds 0 and 2, each with 1 GPU left:
    the repair moves the cheap 1-GPU job S from round 0 to round 1 so that U fits in round 0, which costs less
    than making room in round 2."""
    #             r0   r1   r2
    x = np.array([[1.0, 0.0, 0.0],     # S: 1 GPU
                  [1.0, 0.0, 0.0],     # T: 2 GPUs
                  [0.5, 1.0, 0.5],     # U: 2 GPUs, 2 rounds
                  [0.0, 0.0, 1.0],     # V: 1 GPU
                  [0.0, 0.0, 1.0]])    # W: 2 GPUs
    a = np.array([0.1, 1.0, 1.0, 0.1, 1.0])
    cost = a[:, None] * np.arange(1, 4)
    gpus, n = np.array([1, 2, 2, 1, 2]), np.array([1, 1, 2, 1, 1])
    y = rounded_plan(x, cost, gpus, n, capacity=4)
    assert y.astype(int).tolist() == [[0, 1, 0], [1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 0, 1]]
    full = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])      # both rounds full: no job can make room
    assert rounded_plan(full, np.ones((3, 2)), np.array([2, 2, 1]), np.ones(3, np.int64), capacity=2) is None


def test_an_lp_after_many_solves_on_the_shared_instance_is_not_out_of_time():
    """HiGHS's run clock goes on over the shared instance's solves, and an LP reads its time limit on it: LPs well
    within a 20-ms limit are solved until that clock has run past twice the limit, and none may stop at the limit
    before its own solve has taken it (on a busy machine one may really take that long)."""
    limit = 0.02
    A = sp.csr_matrix(np.ones((1, 50)))
    start = _highs().getRunTime()
    solves = 0
    while _highs().getRunTime() - start < 2 * limit:
        res = solve_milp(np.arange(50, dtype=float), A, np.array([10.0]), np.array([10.0]), np.zeros(50),
                         np.ones(50), np.zeros(50, bool), gap=1e-3, time_limit_s=limit)
        assert res.status == "optimal" or res.seconds >= limit, (solves, res.status, res.seconds)
        solves += 1
        assert solves < 100_000
