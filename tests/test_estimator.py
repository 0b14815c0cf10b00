"""The co-location throughput estimator (spec/gavel.md s.5)."""

import numpy as np
import pytest

from hetsched.rates.estimator import ThroughputEstimator, complete_matrix

GPUS = ("k80", "p100", "v100")


def test_matrix_completion_recovers_a_low_rank_matrix():
    rng = np.random.default_rng(0)
    M = np.clip(rng.uniform(0.2, 0.6, (20, 3)) @ rng.uniform(0.2, 0.6, (3, 30)), 0, 1)
    mask = rng.uniform(size=M.shape) < 0.6
    filled = complete_matrix(np.where(mask, M, 0), mask, rank=3)
    column_means = np.nanmean(np.where(mask, M, np.nan), axis=0)
    mean_fill_error = np.abs(np.broadcast_to(column_means, M.shape) - M)[~mask].mean()
    assert np.abs(filled - M)[~mask].mean() < 0.1 * mean_fill_error
    assert np.array_equal(filled[mask], M[mask])


def test_full_profiling_with_all_references_matches_each_type_to_itself(gavel_table):
    est = ThroughputEstimator(gavel_table, GPUS, num_reference=26, profiling_fraction=1.0)
    for job_type in est.job_types:
        assert est.match(job_type) == job_type
        a, b = job_type, est.job_types[0]
        np.testing.assert_allclose(est.pair(a, b, "v100"), gavel_table.pair(a, b, 1, "v100"))


@pytest.mark.parametrize("num_reference", [4, 11, 16])
def test_profiled_cells_are_the_right_ones_with_few_references(gavel_table, num_reference):
    """The artifact indexes the wrong cells below 26 references; here each revealed cell is the true one."""
    est = ThroughputEstimator(gavel_table, GPUS, num_reference=num_reference, profiling_fraction=1.0, seed=3)
    for job_type in est.job_types[:8]:
        row, mask = est.profile(job_type)
        assert mask.all()
        for w, g in enumerate(GPUS):
            for r, ref in enumerate(est.references):
                own = gavel_table.pair(job_type, ref, 1, g)[0] / gavel_table.get(job_type, 1, g)
                assert row[w * num_reference + r] == pytest.approx(own)
        if job_type in est.references:
            assert est.match(job_type) == job_type


def test_partial_profiling_matches_better_than_chance(gavel_table):
    """With 20% of cells profiled and 16 references, matched rows are much closer than random references."""
    est = ThroughputEstimator(gavel_table, GPUS, num_reference=16, profiling_fraction=0.2, seed=0)
    refs = [est._index[r] for r in est.references]
    matched, chance = [], []
    for a in est.job_types:
        row = est.Z[est._index[a]]
        matched.append(np.abs(row - est.Z[est._index[est.match(a)]]).mean())
        chance.append(np.mean([np.abs(row - est.Z[r]).mean() for r in refs]))
    assert np.mean(matched) < 0.75 * np.mean(chance)


def test_simulation_with_estimated_colocation(gavel_table):
    from hetsched import ClusterSpec
    from hetsched.sim.metrics import average_jct
    from hetsched.sim.simulator import simulate
    from hetsched.traces import GavelGenerator

    jobs = GavelGenerator(seed=0, mean_interarrival_s=2400, throughputs=gavel_table).jobs(40)
    oracle = simulate(jobs, ClusterSpec.parse("4:4:4"), "max_min_fairness_packed", gavel_table)
    estimated = simulate(jobs, ClusterSpec.parse("4:4:4"), "max_min_fairness_packed", gavel_table,
                         estimate_colocation=(16, 0.2))
    assert np.isfinite(average_jct(estimated))
    assert average_jct(estimated) == pytest.approx(average_jct(oracle), rel=0.5)
    assert estimated.jobs_frame()["finish_time_s"].notna().all()
