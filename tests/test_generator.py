"""Gavel's generator reproduces the artifact's job streams (spec/gavel.md s.4.1-4.2)."""

from collections import Counter

import pytest

from hetsched import SpecError
from hetsched.model.catalog import GAVEL_JOB_TEMPLATES
from hetsched.traces import GavelGenerator, make_generator
from hetsched.traces.canonical import parse_canonical_csv


def assert_same_stream(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert (a.job_id, a.job_type, a.scale_factor) == (b.job_id, b.job_type, b.scale_factor)
        assert a.arrival_time_s == pytest.approx(b.arrival_time_s, rel=1e-6, abs=1e-9)
        assert a.total_steps == pytest.approx(b.total_steps, rel=1e-6)
        assert a.priority_weight == b.priority_weight


def test_continuous_seed0_lam1500_matches_the_artifact(shared_dir, gavel_table):
    ref = parse_canonical_csv((shared_dir / "fidelity/gavel/continuous_seed0_lam1500.jobs.csv").read_bytes())
    assert len(ref) == 6000
    ours = GavelGenerator(seed=0, mean_interarrival_s=1500, throughputs=gavel_table).jobs(6000)
    assert_same_stream(ours, ref)


def test_static_seed0_n100_matches_the_artifact(shared_dir, gavel_table):
    ref = parse_canonical_csv((shared_dir / "fidelity/gavel/static_seed0_n100.jobs.csv").read_bytes())
    ours = GavelGenerator(seed=0, static=True, throughputs=gavel_table).jobs(100)
    assert_same_stream(ours, ref)
    assert all(j.arrival_time_s == 0.0 for j in ours)


def test_stream_is_deterministic_and_seed_dependent(gavel_table):
    a = GavelGenerator(seed=3, mean_interarrival_s=900, throughputs=gavel_table).jobs(50)
    b = GavelGenerator(seed=3, mean_interarrival_s=900, throughputs=gavel_table).jobs(50)
    c = GavelGenerator(seed=4, mean_interarrival_s=900, throughputs=gavel_table).jobs(50)
    assert a == b and a != c


def test_multi_gpu_stream_properties(gavel_table):
    jobs = GavelGenerator(seed=1, mean_interarrival_s=1000, multi_gpu=True, throughputs=gavel_table).jobs(4000)
    counts = Counter(j.scale_factor for j in jobs)
    for s, p in {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}.items():
        assert counts[s] / len(jobs) == pytest.approx(p, abs=0.025)
    distributed = {t.job_type for t in GAVEL_JOB_TEMPLATES if t.distributed}
    assert all(j.job_type in distributed for j in jobs if j.scale_factor > 1)
    arrivals = [j.arrival_time_s for j in jobs]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0.0
    mean_gap = arrivals[-1] / (len(jobs) - 1)
    assert mean_gap == pytest.approx(1000, rel=0.06)


def test_single_gpu_stream_is_the_multi_gpu_stream_with_s_forced_to_1(gavel_table):
    """The scale-factor draw happens for single-GPU streams too, so durations line up."""
    single = GavelGenerator(seed=0, mean_interarrival_s=1500, throughputs=gavel_table).jobs(200)
    multi = GavelGenerator(seed=0, mean_interarrival_s=1500, multi_gpu=True, throughputs=gavel_table).jobs(200)
    assert [j.duration_s for j in single[:1]] == [j.duration_s for j in multi[:1]]
    assert [j.arrival_time_s for j in single] == [j.arrival_time_s for j in multi]


def test_priorities_and_slos(gavel_table):
    jobs = GavelGenerator(seed=0, mean_interarrival_s=600, multi_priority=True, slos=True,
                          throughputs=gavel_table).jobs(2000)
    high = sum(j.priority_weight == 5.0 for j in jobs) / len(jobs)
    assert high == pytest.approx(0.2, abs=0.03)
    assert {j.slo_factor for j in jobs} == {1.2, 2.0, 10.0}
    assert all(j.deadline_s == j.slo_factor * j.duration_s + j.arrival_time_s for j in jobs)


def test_generator_options_are_validated():
    with pytest.raises(SpecError, match="mean_interarrival_s"):
        GavelGenerator(seed=0)
    with pytest.raises(Exception, match="available: gavel"):
        make_generator("philly")
