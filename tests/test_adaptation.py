"""Shockwave's batch-size schedules, oracle profiles and runtime switching (spec/shockwave.md s.2, A2-A5)."""

import math

import numpy as np
import pytest

from hetsched.rates.adaptation.profile import epoch_profile
from hetsched.rates.adaptation.runtime import RuntimeAdaptation
from hetsched.rates.adaptation.schedules import (GNS_TABLE, accordion_pattern, convert_gns_json, gns_batch_at,
                                                 gns_pattern, gns_rules, is_critical, iterations_per_epoch)
from hetsched.errors import SpecError
from hetsched.model.jobs import AdaptationMode, Job
from hetsched.model.throughputs import load_throughputs
from hetsched.traces import read_trace

CANONICAL = "data/traces/shockwave_120_40_25.csv"


@pytest.fixture(scope="module")
def tacc():
    return load_throughputs("shockwave_tacc")


def runs(pattern):
    """[(batch size, epochs), ...] of a per-epoch schedule."""
    out = []
    for b in pattern:
        if out and out[-1][0] == b:
            out[-1][1] += 1
        else:
            out.append([b, 1])
    return [tuple(r) for r in out]


def test_gns_keeps_the_last_epoch_only_in_a_later_segment():
    # Spec s.2.3: job 0 (LM bs10, 23 epochs) goes 10 x 11, 20 x 10, 40 x 1, then 10 x 1.
    assert runs(gns_pattern("LM", 10, 23, 1)) == [(10, 11), (20, 10), (40, 1), (10, 1)]
    # The last epoch inside the first segment is scaled (A2).
    assert runs(gns_pattern("LM", 10, 15, 1)) == [(10, 11), (20, 4)]
    assert gns_pattern("LM", 10, 11, 1) == [10] * 11                     # E must exceed the threshold
    assert gns_pattern("Transformer", 16, 500, 1) == [16] * 500            # no table entry
    assert max(gns_pattern("ResNet-18", 16, 400, 1)) == 256                # capped at the model's maximum


def test_gns_batch_at_equals_the_pattern_everywhere():
    for (model, bs0, sf) in gns_rules():
        for epochs in (5, 12, 32, 61, 112, 222, 760):
            pattern = gns_pattern(model, bs0, epochs, sf)
            assert [gns_batch_at(model, bs0, sf, epochs, e) for e in range(epochs)] == pattern


def test_accordion_profile_and_runtime_regimes():
    pattern = accordion_pattern("LM", 10, 50)
    assert pattern[:16] == [10] * 16 and pattern[16:] == [80] * 34        # first 30 % always critical
    assert accordion_pattern("Transformer", 32, 40) == [32] * 40
    assert is_critical("Recommendation", 512, 65) and not is_critical("Recommendation", 512, 65, runtime=True)
    assert is_critical("ResNet-50", 32, 31) and not is_critical("ResNet-50", 32, 40)


def test_gns_table_is_the_artifacts(shared_dir, tmp_path):
    out = tmp_path / "gns.csv"
    assert convert_gns_json(shared_dir / "data" / "shockwave" / "gns_table.json", out) == 77
    assert out.read_text() == GNS_TABLE.read_text()
    assert len(gns_rules()) == 33


def test_canonical_profiles_match_the_specs_statistics(tacc):
    # Spec s.2.5: mean isolated duration after adaptation 3,929 s, epochs 2..8,583 (median 99),
    # one batch size for 53 jobs and two for 48, total work 635,794 GPU-s.
    jobs = read_trace(CANONICAL)
    profiles = [epoch_profile(j, tacc) for j in jobs]
    iso = np.array([p.isolated_s for p in profiles])
    epochs = np.array([p.epochs for p in profiles])
    distinct = np.array([len(set(p.batch_sizes.tolist())) for p in profiles])
    assert round(iso.mean()) == 3930 and epochs.min() == 2 and epochs.max() == 8583 and np.median(epochs) == 99
    assert (distinct == 1).sum() == 53 and (distinct == 2).sum() == 48
    assert round(sum(p.isolated_s * j.scale_factor for p, j in zip(profiles, jobs))) == 635795


def test_a_profile_is_each_epochs_samples_over_its_rate(tacc):
    job = Job(0, 0.0, "ResNet-18 (batch size 32)", 2, total_steps=40 * iterations_per_epoch("ResNet-18", 32),
              mode=AdaptationMode.ACCORDION)
    profile = epoch_profile(job, tacc)
    pattern = accordion_pattern("ResNet-18", 32, 40)
    assert profile.batch_sizes.tolist() == pattern and len(set(pattern)) == 2
    expected = [50_000 / b / tacc.get(f"ResNet-18 (batch size {b})", 2, "v100") for b in pattern]
    assert profile.durations.tolist() == expected                          # bit for bit, epoch by epoch


def test_a_profile_too_long_to_keep_or_without_a_rate_is_refused(tacc):
    with pytest.raises(SpecError, match=r"job 7: 1e\+15 steps .* epochs; the planner keeps a profile entry per epoch"):
        epoch_profile(Job(7, 0.0, "ResNet-18 (batch size 64)", 1, total_steps=1e15), tacc)
    wisr = load_throughputs("shockwave_wisr")
    missing = [b for b in (16, 32, 64, 128, 256) if not wisr.get(f"Transformer (batch size {b})", 1, "v100") > 0]
    assert missing                                                         # the case below needs one
    job = Job(3, 0.0, f"Transformer (batch size {missing[0]})", 1, total_steps=1000.0)
    with pytest.raises(SpecError, match="job 3: .* has no throughput on v100"):
        epoch_profile(job, wisr)


def test_switch_preserves_epochs_and_rounds_partial_epochs_up(tacc):
    job = Job(0, 0.0, "LM (batch size 10)", 1, total_steps=134583.0, mode=AdaptationMode.GNS)
    ad = RuntimeAdaptation(tacc)
    ad.add_job(job)
    ipe = iterations_per_epoch("LM", 10)                                  # 5968
    done = 11 * ipe + 100                                                 # into epoch 12
    ad.evaluate(lambda _: done)
    assert ad.flagged(0)
    sw = ad.switch(0, done)
    assert (sw.old_batch_size, sw.new_batch_size, sw.job_type) == (10, 20, "LM (batch size 20)")
    new_ipe = iterations_per_epoch("LM", 20)
    epochs = math.ceil(134583 / ipe)
    assert math.ceil(sw.total_steps / new_ipe) == epochs                  # the epoch count is kept
    assert sw.total_steps - sw.remaining_steps == 12 * new_ipe            # the partial epoch counts as done
    assert not ad.flagged(0)


def test_cap_guard_and_static_jobs(tacc):
    ad = RuntimeAdaptation(tacc)
    ad.add_job(Job(1, 0.0, "LM (batch size 80)", 1, total_steps=1e6, mode=AdaptationMode.ACCORDION))
    ad.add_job(Job(2, 0.0, "LM (batch size 10)", 1, total_steps=1e6))
    ad.evaluate(lambda _: 1e5)
    assert not ad.flagged(1) and not ad.flagged(2)


def test_adaptive_jobs_in_a_run_with_fixed_batch_sizes_are_refused(tacc):
    """Under Gavel's round rules an accordion or GNS job ran at its first batch size, as if static, without a
    word (the runtime already refused such a submission)."""
    from hetsched import ClusterSpec, HetschedError
    from hetsched.sim.simulator import SimulationConfig, simulate

    jobs = read_trace("data/traces/shockwave_120_40_25.csv")[:12]
    adaptive = next(j for j in jobs if j.mode != AdaptationMode.STATIC)
    cluster = ClusterSpec.parse("v100=8")
    refusal = f"job {adaptive.job_id} adapts its batch size \\({adaptive.mode.value}\\)"
    with pytest.raises(HetschedError, match=refusal):
        simulate(jobs, cluster, "gavel", tacc, SimulationConfig.for_system("gavel"))
    with pytest.raises(HetschedError, match=refusal):          # a stream is not looked ahead for the rules
        simulate(iter(jobs), cluster, "gavel", tacc)
    assert simulate(jobs, cluster, "gavel", tacc, SimulationConfig.for_system("shockwave")).jobs
    from dataclasses import replace
    static = [replace(j, mode=AdaptationMode.STATIC) for j in jobs]
    assert len(simulate(static, cluster, "gavel", tacc).jobs) == len(jobs)
