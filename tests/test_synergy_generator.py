"""Synergy's job stream generator reproduces the artifact's recorded stream (spec/synergy.md s.3.2, s.7)."""

from collections import Counter

import pytest

from hetsched import SpecError
from hetsched.model.profiles import load_sensitivity
from hetsched.traces import make_generator, read_trace, write_trace
from hetsched.traces.generators.synergy import ClassSplit, SynergyGenerator


def test_the_9_jobs_per_hour_stream_is_the_artifacts(shared_dir, tmp_path):
    ref_path = shared_dir / "fidelity" / "synergy" / "philly_derived_single_9.0jph_seed42.csv"
    ref = read_trace(ref_path)
    assert len(ref) == 7023
    ours = SynergyGenerator(jobs_per_hour=9.0, seed=42).jobs(len(ref))
    assert [(j.job_id, j.job_type, j.arrival_time_s, j.total_steps, j.scale_factor) for j in ours] == \
        [(j.job_id, j.job_type, j.arrival_time_s, j.total_steps, j.scale_factor) for j in ref]
    out = tmp_path / "stream.csv"
    write_trace(ours, out, "synergy")
    assert out.read_bytes() == ref_path.read_bytes()


def test_streams_are_deterministic_and_rate_dependent():
    a = SynergyGenerator(jobs_per_hour=3.0).jobs(300)
    b = SynergyGenerator(jobs_per_hour=3.0).jobs(300)
    c = SynergyGenerator(jobs_per_hour=6.0).jobs(300)
    assert a == b
    # The same seed draws the same durations and classes; only the gaps scale with the rate.
    assert [j.job_type for j in a] == [j.job_type for j in c]
    assert [j.total_steps for j in a] == [j.total_steps for j in c]
    assert a[-1].arrival_time_s > c[-1].arrival_time_s * 1.8
    assert all(float(j.arrival_time_s).is_integer() for j in a)


def test_class_split_follows_the_targets():
    table = load_sensitivity(3)
    for split in ((20, 70, 10), (33, 33, 33), (50, 0, 50)):
        models = [ClassSplit(split, table).next() for _ in range(1)]  # fresh object works
        cs = ClassSplit(split, table)
        models = [cs.next() for _ in range(1000)]
        tasks = Counter(table[m].task for m in models)
        for task, pct in zip(("image", "language", "speech"), split):
            assert tasks[task] / 1000 == pytest.approx(pct / 100, abs=0.011)
    cs = ClassSplit((20, 70, 10), table)
    first = [cs.next() for _ in range(6)]
    assert first[0] == "alexnet"               # ties go to image first
    assert first[:5] == ["alexnet", "gnmt", "transformer", "m5", "lstm"]   # the recorded stream starts so


def test_durations_are_gavel_like():
    jobs = SynergyGenerator(jobs_per_hour=9.0).jobs(4000)
    d = [j.duration_s for j in jobs]
    assert min(d) >= 60 * 10 ** 1.5 and max(d) <= 60 * 10 ** 4
    long = sum(x > 60 * 1000 for x in d) / len(d)
    assert long == pytest.approx(0.2, abs=0.03)


def test_multi_gpu_streams():
    synthetic = SynergyGenerator(jobs_per_hour=4.0, multi_gpu=True).jobs(2000)
    counts = Counter(j.scale_factor for j in synthetic)
    assert set(counts) == {1, 2, 4, 8}
    assert counts[1] / 2000 == pytest.approx(0.7, abs=0.04)
    from_trace = SynergyGenerator(jobs_per_hour=4.0, multi_gpu=True, philly_gpus=[1, 2, 4, 16]).jobs(8)
    assert [j.scale_factor for j in from_trace] == [1, 2, 4, 16, 1, 2, 4, 16]
    # With the trace's GPU counts the durations and classes are the single-GPU stream's.
    single = SynergyGenerator(jobs_per_hour=4.0).jobs(4)
    assert [j.total_steps for j in from_trace[:4]] == [j.total_steps for j in single]


def test_ratio_profiles_change_iteration_counts():
    r3 = SynergyGenerator(jobs_per_hour=9.0, ratio=3).jobs(20)
    r6 = SynergyGenerator(jobs_per_hour=9.0, ratio=6).jobs(20)
    alex3 = next(j for j in r3 if j.job_type == "alexnet")
    alex6 = next(j for j in r6 if j.job_type == "alexnet")
    assert alex6.total_steps == int(alex3.duration_s / 0.34)


@pytest.mark.parametrize("kwargs", [dict(jobs_per_hour=0), dict(split=(10, 10)), dict(split=(-1, 50, 51)),
                                    dict(ratio=0), dict(ratio=-1)])
def test_bad_parameters(kwargs):
    with pytest.raises(SpecError):
        SynergyGenerator(**kwargs).jobs(1)


def test_registered_by_name():
    assert make_generator("synergy", jobs_per_hour=2.0).jobs(3)[0].job_type == "alexnet"
