"""Every case of ../shared/fidelity/synergy/expected.csv: our simulator on the artifact's job stream vs its number.

The stream is the artifact's recorded 9 jobs/h run (read from the file, as the artifact's `--replay_trace`
does); the cluster is its `default_cluster.ini`. Tolerances are the file's; nothing here is tuned. The
full-precision values of spec/synergy.md s.8 item 10 are checked too, since the match is exact.
"""

import re

import numpy as np
import pytest

from hetsched.io.cluster_ini import read_cluster_ini
from hetsched.sim.simulator import simulate
from hetsched.traces import read_trace

from conftest import _shared

METRICS = {"avg_jct_h": lambda jct: jct.mean(), "p99_jct_h": lambda jct: np.percentile(jct, 99)}


def _parse(line: str) -> dict[str, str]:
    """One row of expected.csv. Its cluster column holds unquoted commas, so fields are found around the
    window column (`4000-4999`): case, trace, cluster..., policy, round_s, window, metric, value, tolerance, note."""
    parts = line.rstrip("\n").split(",")
    w = next(i for i, p in enumerate(parts) if re.fullmatch(r"\d+-\d+", p))
    return {"case": parts[0], "trace": parts[1], "cluster": ",".join(parts[2:w - 2]), "policy": parts[w - 2],
            "round_s": parts[w - 1], "window_job_ids": parts[w], "metric": parts[w + 1], "value": parts[w + 2],
            "tolerance_rel": parts[w + 3], "note": ",".join(parts[w + 4:])}


def _cases():
    path = _shared() / "fidelity" / "synergy" / "expected.csv"
    if not path.exists():
        return [pytest.param(None, id="missing-shared")]
    lines = path.read_text().splitlines()[1:]
    return [pytest.param(row, id=row["case"]) for row in map(_parse, lines) if row["case"]]


_RUNS: dict[str, object] = {}


def _run(policy, shared_dir):
    if policy not in _RUNS:
        jobs = read_trace(shared_dir / "fidelity" / "synergy" / "philly_derived_single_9.0jph_seed42.csv")
        cluster = read_cluster_ini(shared_dir / "data" / "synergy" / "configs" / "default_cluster.ini")
        _RUNS[policy] = simulate(jobs, cluster, policy, round_s=300.0, window=(4000, 5000), record_timeline=False)
    return _RUNS[policy]


@pytest.mark.parametrize("case", _cases())
def test_fidelity_case(case, shared_dir):
    assert case is not None
    lo, hi = (int(v) for v in case["window_job_ids"].split("-"))
    assert float(case["round_s"]) == 300 and "16 servers x (8 GPU, 24 CPU, 500 GB)" == case["cluster"]
    result = _run(case["policy"], shared_dir)
    jct = np.array([result.jobs[j].jct_s for j in range(lo, hi + 1)]) / 3600.0
    assert np.isfinite(jct).all()
    ours = METRICS[case["metric"]](jct)
    theirs = float(case["value"])
    print(f"\n[fidelity] {case['case']}: ours {ours:.10g} artifact {theirs:.10g} ({ours / theirs - 1:+.2e})")
    assert ours == pytest.approx(theirs, rel=float(case["tolerance_rel"]))


def test_full_precision_targets(shared_dir):
    """spec/synergy.md s.8 item 10: mean, p50, p99, p99.9 and the simulation end, FIFO+tune and FIFO+fair."""
    targets = {"FIFO+tune": (21.876600555555555, 10.82611, 156.93307777777775, 170.61199750000023, 704.9, 8457),
               "FIFO+fair": (81.08860055555556, 70.70264, 214.61023, 230.53716, 770.0, 9238)}
    for policy, (mean, p50, p99, p999, end_h, rounds) in targets.items():
        result = _run(policy, shared_dir)
        jct = np.array([result.jobs[j].jct_s for j in range(4000, 5000)]) / 3600.0
        assert jct.mean() == pytest.approx(mean, rel=1e-12)
        assert np.percentile(jct, 50) == pytest.approx(p50, abs=1e-5)
        assert np.percentile(jct, 99) == pytest.approx(p99, abs=1e-5)
        assert np.percentile(jct, 99.9) == pytest.approx(p999, abs=1e-5)
        assert result.makespan_s / 3600 == pytest.approx(end_h, abs=0.05)
        assert result.num_rounds == rounds


def test_allocation_statistics_match_the_artifacts_replay(shared_dir):
    """spec s.6.3: the replayed FIFO+tune run allocates 95.6 % of GPUs, 63.8 % of CPUs, 52.3 % of memory."""
    stats = _run("FIFO+tune", shared_dir).resource_stats
    assert stats["avg_gpu_alloc_pct"] == pytest.approx(95.6, abs=0.05)
    assert stats["avg_cpu_alloc_pct"] == pytest.approx(63.8, abs=0.05)
    assert stats["avg_mem_alloc_pct"] == pytest.approx(52.3, abs=0.05)
    fair = _run("FIFO+fair", shared_dir).resource_stats
    assert fair["avg_cpu_alloc_pct"] == pytest.approx(97.2, abs=0.05)


@pytest.mark.parametrize("policy,hours", [("FIFO+fair", 20.063), ("FIFO+tune", 17.896), ("FIFO+opt", 17.896)])
def test_smoke_test_on_32_gpus(policy, hours, shared_dir):
    """spec s.6.3: the artifact on deployment.ini (32 GPUs), 1.5 jobs/h, jobs 0-39 (3 decimals printed)."""
    from hetsched.traces.generators.synergy import SynergyGenerator
    cluster = read_cluster_ini(shared_dir / "data" / "synergy" / "configs" / "deployment.ini")
    result = simulate(iter(SynergyGenerator(jobs_per_hour=1.5)), cluster, policy, window=(0, 40),
                      record_timeline=False)
    jct = np.array([result.jobs[j].jct_s for j in range(40)]) / 3600.0
    assert round(jct.mean(), 3) == hours
