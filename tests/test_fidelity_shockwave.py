"""The Shockwave canonical run (../shared/fidelity/shockwave/expected_canonical.csv): our simulator on the
artifact's 120-job trace, 32 V100s, tacc throughputs and tacc_32gpus configuration, vs its stored numbers.

Tolerances are the issue's and are not tuned: the four baselines the artifact reproduces bit for bit within
0.5 % on makespan and average JCT and exactly on the unfair fraction; Themis and AlloX within 2 %; Shockwave
(a MILP under a time limit and gap, so solver-dependent) within 5 %, worst rho within the span of the artifact's own
runs (1.496-1.874; until issue 69, within 10 % of the stored 1.784), unfair within one job.

Shockwave's numbers are the median of five runs with MILP solver seeds 0-4. At k = 1e-3 the makespan term is
worth about 14 and the gap 1e-3 of that is about 0.014, while one round of NSW progress for one job is worth about
0.003: within the gap the solver returns one of many near-optimal plans, and the per-job outcomes move
with it (worst rho 1.52-1.71 over 12 HiGHS seeds here). The artifact's stored value is one such draw: its reruns
gave 1.733 (HiGHS) and 1.874 (SCIP), and its comparison directory 1.496 (spec s.7.3, s.8).
"""

import csv
import dataclasses
import statistics

import pytest

from hetsched.experiments import shockwave as W
from hetsched.experiments.sweep import run_one

from conftest import _shared

EXACT = {"max_min_fairness", "min_total_duration", "max_sum_throughput_perf", "gandiva_fair"}
NEAR = {"finish_time_fairness", "allox"}


def _expected():
    path = _shared() / "fidelity" / "shockwave" / "expected_canonical.csv"
    if not path.exists():
        return [pytest.param(None, id="missing-shared")]
    with open(path) as f:
        return [pytest.param(row, id=row["policy"]) for row in csv.DictReader(f)]


# Worst rho in the artifact's own simulated runs of this case besides the stored one (spec s.7.3 and s.8): its
# HiGHS and SCIP reruns and its comparison directory. Our median must fall within their span: which plan within
# the gap a run follows is a draw (issue 69), and the stored 1.784 is one of them.
ARTIFACT_RHO_RUNS = (1.733, 1.874, 1.496)
_RUNS: dict[str, dict] = {}
SHOCKWAVE_SEEDS = range(5)
METRICS = ("makespan_s", "avg_jct_s", "worst_ftf_rho", "unfair_fraction")


def _run(policy: str) -> dict:
    if policy not in _RUNS:
        (config,) = W.configs("canonical", [policy])
        if policy != "shockwave":
            _RUNS[policy] = run_one(config)
        else:
            runs = [run_one(dataclasses.replace(config, seed=s)) for s in SHOCKWAVE_SEEDS]
            _RUNS[policy] = {**runs[0], **{m: statistics.median(r[m] for r in runs) for m in METRICS},
                             "seeds": {m: [r[m] for r in runs] for m in METRICS}}
    return _RUNS[policy]


@pytest.mark.parametrize("row", _expected())
def test_canonical_case(row, shared_dir):
    assert row is not None
    ours = _run(row["policy"])
    makespan, jct = float(row["makespan_s"]), float(row["avg_jct_s"])
    rho, unfair_pct = float(row["worst_ftf_rho"]), float(row["unfair_pct_rho_gt_1.05"])
    n = ours["num_jobs"]
    assert n == 120 and not ours["saturated"]
    p = row["policy"]
    if p in EXACT:
        checks = {"makespan_s": ours["makespan_s"] == pytest.approx(makespan, rel=0.005),
                  "avg_jct_s": ours["avg_jct_s"] == pytest.approx(jct, rel=0.005),
                  "unfair": round(100 * ours["unfair_fraction"], 2) == pytest.approx(unfair_pct, abs=0.01)}
    elif p in NEAR:
        checks = {"makespan_s": ours["makespan_s"] == pytest.approx(makespan, rel=0.02),
                  "avg_jct_s": ours["avg_jct_s"] == pytest.approx(jct, rel=0.02)}
    else:
        checks = {"makespan_s": ours["makespan_s"] == pytest.approx(makespan, rel=0.05),
                  "avg_jct_s": ours["avg_jct_s"] == pytest.approx(jct, rel=0.05),
                  "unfair": abs(ours["unfair_fraction"] * n - unfair_pct / 100 * n) <= 1 + 1e-9,
                  "worst_ftf_rho": min(ARTIFACT_RHO_RUNS + (rho,)) <= ours["worst_ftf_rho"]
                  <= max(ARTIFACT_RHO_RUNS + (rho,))}
    failed = [metric for metric, ok in checks.items() if not ok]
    assert not failed, (p, failed, {m: ours[m] for m in METRICS}, ours.get("seeds"))


def test_exact_baselines_match_every_printed_digit(shared_dir):
    """Beyond the tolerance: Gavel and Gandiva-Fair match makespan, rounds and worst rho to the printed digits
    (spec s.8 and A9)."""
    for policy, makespan, rounds, rho in (("max_min_fairness", 33207.7, 277, 2.947),
                                          ("gandiva_fair", 32367.4, 270, 1.854)):
        ours = _run(policy)
        assert round(ours["makespan_s"], 1) == makespan and ours["num_rounds"] == rounds
        assert round(ours["worst_ftf_rho"], 3) == rho
        assert ours["batch_size_switches"] == 108          # 107 effective + 1 on a job finishing (A4)


def test_allox_matches_the_printed_digits(shared_dir):
    """AlloX as the artifact's code runs it (docs/rules.md#allox: a gang gets 1 / s of its type and is matched
    again at every call; the artifact's layout of the cost matrix) gives the stored makespan and rounds to the
    printed digits, the unfair fraction exactly and worst rho within one unit of its last digit; the average JCT
    is 0.24 % above the stored one. The reading before (a gang got 1.0 and held one worker) was 0.49 % off on
    makespan, 5 jobs off on the unfair count and 0.10 off on worst rho."""
    (row,) = [r for r in csv.DictReader(open(_shared() / "fidelity" / "shockwave" / "expected_canonical.csv"))
              if r["policy"] == "allox"]
    ours = _run("allox")
    assert round(ours["makespan_s"], 1) == float(row["makespan_s"]) and ours["num_rounds"] == int(row["n_rounds"])
    assert round(100 * ours["unfair_fraction"], 2) == float(row["unfair_pct_rho_gt_1.05"])
    assert ours["worst_ftf_rho"] == pytest.approx(float(row["worst_ftf_rho"]), abs=1e-3)
    assert ours["avg_jct_s"] == pytest.approx(float(row["avg_jct_s"]), rel=3e-3)


def test_utilization_counts_the_preemption_penalty(shared_dir):
    """Utilization is busy GPU time over GPU time, where busy time is what the cluster's accounting credits: a
    penalised micro-task counts E - 20 s (A1). The deterministic baselines match the artifact's stored
    utilization (spec s.7.2, in data/paper/shockwave_reference.csv): LAS, MST and Gandiva-Fair to the printed
    three digits, OSSP (whose makespan is 0.11 % short) 0.001 above. Counting the wall time gave 0.667 for LAS."""
    ref = W.reference().query("figure == 'canonical'").set_index("policy")["utilization"]
    for policy in sorted(EXACT):
        assert round(_run(policy)["utilization"], 3) == pytest.approx(ref[policy], abs=1.5e-3), policy


@pytest.mark.parametrize("policy", ["max_sum_throughput_perf", "max_min_fairness"])
def test_scale_trace_baselines_solve_the_per_job_problem(policy, shared_dir, monkeypatch):
    """The 220-job trace keeps more than 128 jobs active, where our LPs would group identical jobs into classes: the
    same optimum, another point of its degenerate face, and MST's average JCT 1 % off, LAS's unfair count 2 jobs
    off. Under Shockwave's rules the LP baselines solve the artifact's per-job problem at any number of jobs
    (docs/rules.md#per-job-solves), so the run does not depend on the grouping threshold."""
    from hetsched.core.views import PolicyViews
    from hetsched.decide.gavel import las, units

    seen = []
    view = PolicyViews.view
    monkeypatch.setattr(PolicyViews, "view", lambda self, now: seen.append(len(self.sched.jobs)) or view(self, now))
    (config,) = W.configs("scale_64", [policy])
    ours = run_one(config)
    assert max(seen) > units.AGGREGATE_ABOVE
    for module in (units, las):                       # las reads the threshold before it asks for classes
        monkeypatch.setattr(module, "AGGREGATE_ABOVE", 10**9)
    per_job = run_one(config)
    for metric in ("makespan_s", "avg_jct_s", "unfair_fraction", "worst_ftf_rho"):
        assert ours[metric] == per_job[metric], metric
