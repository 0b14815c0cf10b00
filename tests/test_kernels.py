"""The compiled round kernels (hetsched/core/kernels.py) give the numpy path's results bit for bit."""

import numpy as np
import pandas as pd
import pytest

from hetsched import ClusterSpec
from hetsched.core import kernels
from hetsched.model.cluster import GAVEL_GCP_PRICES
from hetsched.sim.simulator import simulate
from hetsched.traces import GavelGenerator

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="numba is not installed or HETSCHED_KERNELS=0")


def _keys(rng, n):
    """Keys with ties, NaN, inf and signed zeros, as priorities, deficits and allocations can have."""
    pool = np.array([0.0, -0.0, 1.0, 2.5, -3.0, np.inf, -np.inf, np.nan, 1e-300, 7.0])
    return [np.where(rng.random(n) < 0.5, rng.choice(pool, n), rng.integers(-3, 4, n).astype(float))
            for _ in range(3)]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_rank_is_numpys_lexsort(compiled):
    rank = kernels._rank if compiled else kernels._rank.py_func
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 3, 7, 64, 301):
        for _ in range(20 if n < 100 else 3):
            k3, k2, k1 = _keys(rng, n)
            np.testing.assert_array_equal(rank(k3, k2, k1), np.lexsort((k1, k2, k3)))


def _walk_numpy(t, S, alloc, deficit, blocked, ok, need_priority, first, escale, capacity, order, num_slots):
    """The numpy select (core/select.py) on the same arrays, through a stand-in scheduler."""
    from hetsched.core.select import PrioritySelect

    class State(PrioritySelect):
        _has_pairs = False

    s = State()
    s.t, s.S, s.alloc, s.deficit, s._blocked, s.ok = t, S, alloc, deficit, blocked, ok
    s.members = np.stack([first, np.full(len(first), -1)], axis=1)
    s.escale, s.capacity, s.remaining = escale, capacity, np.zeros(num_slots)
    s._all_single_gpu = bool((escale == 1).all())
    s.policy = type("P", (), {"fills_idle_gpus": not need_priority})()
    enabled, kernels.ENABLED = kernels.ENABLED, False
    try:
        return s.select(list(order))
    finally:
        kernels.ENABLED = enabled


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_select_walk_is_the_numpy_walk(compiled):
    walk = kernels.select_walk if compiled else kernels.select_walk.py_func
    rng = np.random.default_rng(1)
    for trial in range(200):
        n, m = int(rng.integers(1, 40)), int(rng.integers(1, 4))
        t = rng.choice([0.0, 360.0, 720.0, 1080.0], (n, m))
        S = rng.choice([0.0, 360.0, 3600.0], m)
        alloc = np.where(rng.random((n, m)) < 0.3, 0.0, rng.choice([0.25, 0.5, 1.0 / 3], (n, m)))
        deficit = rng.choice([0.0, -1.0, 5.0], (n, m))
        blocked = rng.random((n, m)) < 0.1
        ok = rng.random((n, m)) < 0.9
        escale = rng.choice([1, 1, 2, 4, 8], n) if trial % 2 else np.ones(n, np.int64)
        capacity = rng.integers(0, 12, m).astype(float)
        first = rng.permutation(n + 5)[:n]
        order = rng.permutation(m).astype(np.int64)
        need = bool(trial % 3 == 0)
        args = (t, S, alloc, deficit, blocked, ok, need, first, escale, capacity, order, n + 5)
        with np.errstate(divide="ignore", invalid="ignore"):
            want = _walk_numpy(*args)
            got = walk(*args)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def _run(policy, table, cluster="8:8:8", prices=None, **kw):
    spec = ClusterSpec.parse(cluster)
    if prices:
        spec = ClusterSpec.load(cluster, prices_per_hour={g: prices[g] for g in spec.gpu_types})
    jobs = GavelGenerator(seed=3, mean_interarrival_s=700, multi_gpu=True, throughputs=table).jobs(160)
    return simulate(jobs, spec, policy, table, record_timeline=False, **kw)


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "max_min_fairness", "fifo", "fifo_perf",
                                    "finish_time_fairness_perf", "allox", "max_min_fairness_packed", "gandiva"])
def test_simulations_match_the_numpy_path(policy, gavel_table, monkeypatch):
    """Whole runs (multi-GPU jobs, priced GPUs; pairs fall back to numpy round by round) agree exactly."""
    kw = {"prices": dict(GAVEL_GCP_PRICES), "window": (20, 120)}
    fast = _run(policy, gavel_table, **kw)
    monkeypatch.setattr(kernels, "ENABLED", False)
    slow = _run(policy, gavel_table, **kw)
    pd.testing.assert_frame_equal(fast.jobs_frame(), slow.jobs_frame(), check_exact=True)
    assert (fast.num_rounds, fast.num_recomputes) == (slow.num_rounds, slow.num_recomputes)
    assert (fast.busy_gpu_seconds, fast.makespan_s) == (slow.busy_gpu_seconds, slow.makespan_s)
