"""POP partitions (hetsched/decide/gavel/pop.py, docs/rules.md#pop)."""

import numpy as np
import pytest

from hetsched import ClusterSpec
from hetsched.core.registry import make_policy
from hetsched.errors import HetschedError
from hetsched.decide.gavel.pop import Partitioned, partition_of, sub_view
from hetsched.decide.gavel.view import view_from_jobs
from hetsched.sim.metrics import average_jct
from hetsched.sim.simulator import simulate
from hetsched.traces import GavelGenerator


def _view(table, n=90, cluster="8:8:8", seed=0):
    jobs = GavelGenerator(seed=seed, mean_interarrival_s=60, multi_gpu=True, throughputs=table).jobs(n)
    rng = np.random.default_rng(seed)
    remaining = [j.total_steps * rng.uniform(0.1, 1.0) for j in jobs]
    return view_from_jobs(jobs, ClusterSpec.parse(cluster), table, now=jobs[-1].arrival_time_s + 1.0,
                          remaining_steps=remaining)


def test_partitions_are_stable_balanced_and_seeded():
    ids = np.arange(20_000)
    part = partition_of(ids, 8)
    assert part.min() == 0 and part.max() == 7
    assert np.all(np.abs(np.bincount(part, minlength=8) - 2500) < 125)          # within 5 % of even
    np.testing.assert_array_equal(partition_of(ids[::-7], 8), part[::-7])          # per job, not per batch
    assert (partition_of(ids, 8, seed=1) != part).mean() > 0.5


def test_a_sub_view_keeps_its_jobs_pair_rates(gavel_table):
    view = _view(gavel_table)
    idx = np.flatnonzero(partition_of(view.job_ids, 3) == 1)
    sub = sub_view(view, idx, 1 / 3)
    np.testing.assert_array_equal(sub.capacity, view.capacity / 3)
    assert sub.type_code.max() + 1 == sub.colocated.shape[0] == len(np.unique(view.type_code[idx]))
    for a in range(0, len(idx), 5):
        for b in range(1, len(idx), 7):
            np.testing.assert_array_equal(sub.pair_throughput(a, b), view.pair_throughput(idx[a], idx[b]))


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "max_min_fairness_packed", "finish_time_fairness_perf",
                                    "max_sum_throughput_perf", "min_total_duration_perf"])
def test_partitioned_allocations_fit_and_do_not_beat_the_whole_problem(policy, gavel_table):
    view = _view(gavel_table)
    whole = make_policy(policy)
    best = whole.allocate(view)
    k = 4
    pop = make_policy(policy, partitions=k)
    assert isinstance(pop, Partitioned) and pop.name == whole.name
    allocation = pop.allocate(view)
    part = partition_of(view.job_ids, k)
    assert np.all(allocation.time_per_job() <= 1 + 1e-6)
    for p in range(k):                                     # each partition within its 1/k of every type
        mine = part == p
        used = view.scale_factor[mine] @ allocation.x[mine]
        if len(allocation.pairs):
            inside = mine[allocation.pairs]
            assert np.all(inside[:, 0] == inside[:, 1])    # pairs form within a partition
            used = used + view.scale_factor[allocation.pairs[inside[:, 0], 0]] @ allocation.x_pairs[inside[:, 0]]
        assert np.all(used <= view.capacity / k + 1e-6)
    score, ours = whole.objective(view, best), whole.objective(view, allocation)
    sense = -1 if policy.startswith(("finish_time", "min_total")) else 1
    assert sense * (ours - score) <= 1e-6 * abs(score)    # the whole problem's optimum is never beaten


def test_one_partition_is_the_policy_itself(gavel_table):
    view = _view(gavel_table)
    np.testing.assert_array_equal(Partitioned(lambda: make_policy("gavel"), 1).allocate(view).x,
                                  make_policy("gavel").allocate(view).x)
    assert not isinstance(make_policy("gavel", partitions=1), Partitioned)


def test_a_stateful_policy_keeps_one_state_per_partition(gavel_table):
    view = _view(gavel_table)
    pop = make_policy("finish_time_fairness_perf", partitions=3)
    pop.allocate(view)
    part = partition_of(view.job_ids, 3)
    for p, policy in enumerate(pop.parts):
        assert set(policy._state) == set(view.job_ids[part == p].tolist())
    assert np.isnan(pop.objective(view, pop.allocate(view)))


@pytest.mark.parametrize("name", ["allox", "gandiva", "gavel_fifo", "FIFO+tune", "shockwave"])
def test_policies_that_are_not_one_lp_are_refused(name):
    with pytest.raises(HetschedError, match="cannot be partitioned"):
        make_policy(name, partitions=2)


@pytest.mark.parametrize("k", [0, -2, 1.5, True])
def test_bad_partition_counts_are_refused(k):
    with pytest.raises(HetschedError, match="partitions must be a positive integer"):
        make_policy("gavel", partitions=k)


def test_a_partitioned_run_completes_close_to_the_whole_one(gavel_table):
    jobs = lambda: GavelGenerator(seed=0, mean_interarrival_s=600, throughputs=gavel_table).jobs(400)  # noqa: E731
    cluster = ClusterSpec.parse("12:12:12")
    whole = simulate(jobs(), cluster, "gavel", gavel_table, window=(100, 300), record_timeline=False)
    pop = simulate(jobs(), cluster, make_policy("gavel", partitions=2), gavel_table, window=(100, 300),
                   record_timeline=False)
    assert pop.jobs_frame()["job_id"].between(100, 299).sum() == 200
    assert average_jct(pop) == pytest.approx(average_jct(whole), rel=0.1)
    assert average_jct(pop) != average_jct(whole)
