"""Finish-time fairness of elastic runs (docs/rules.md#elastic-ftf): the share and time alone as the rule states
them, and on a real Helios workload the draft's order between Sia and Gavel+TJ."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hetsched.decide.elastic import fairness
from hetsched.decide.elastic.apps import load_applications
from hetsched.decide.elastic.cluster import ElasticCluster
from hetsched.decide.elastic.jobs import RIGID, ElasticJob
from hetsched.decide.elastic.result import ElasticResult
from hetsched.sim.elastic import prepare, simulate_elastic
from hetsched.decide.elastic.workloads import load_workload

CLUSTER = ElasticCluster.parse("sia_hetero")


def _job(category="adaptive"):
    return ElasticJob("j", load_applications()["cifar10"], 0.0, 2, 256, category)


def test_a_share_between_whole_gpus_time_shares_the_whole_ones():
    on_two = fairness.isolated_s(_job(), "t4", 2.0, CLUSTER)
    assert fairness.isolated_s(_job(), "t4", 2.5, CLUSTER) == pytest.approx(on_two * 2 / 2.5, rel=1e-12)
    on_one = fairness.isolated_s(_job(), "t4", 1.0, CLUSTER)
    assert fairness.isolated_s(_job(), "t4", 0.5, CLUSTER) == pytest.approx(2 * on_one, rel=1e-12)
    assert on_two < on_one                                    # cifar10 gains from a second GPU
    # A rigid job runs at its own count, whatever the share: on 2 GPUs for a share of 1, twice as long as alone.
    rigid = fairness.isolated_s(_job(RIGID), "t4", 1.0, CLUSTER)
    assert rigid == pytest.approx(2 * fairness.isolated_s(_job(RIGID), "t4", 2.0, CLUSTER), rel=1e-12)


def test_contention_is_averaged_over_the_decisions_in_a_jobs_lifetime():
    result = ElasticResult(pd.DataFrame(), np.array([0, 2, 4, 6, 1]), 60.0, "sia", "sia_hetero")
    assert fairness.mean_contention(result, 100.0, 200.0) == 3.0        # decisions at 120 (2) and 180 (4)
    assert fairness.mean_contention(result, 0.0, 90.0) == 1.0           # the one at 60 saw none: itself
    assert fairness.mean_contention(result, 250.0, 260.0) == 1.0        # no decision inside


def test_on_helios_sia_leaves_fewer_jobs_unfair_than_gavel_tj_and_its_worst_is_lower():
    """The draft (Fig. 8): Sia worst rho 1.2 and under 0.3 % unfair, Gavel 27.8 and 15 %."""
    frame = load_workload("helios-1")
    summaries = {}
    for name in ("sia", "gavel+tj"):
        policy, jobs, round_s = prepare(name, CLUSTER, frame)
        result = simulate_elastic(jobs, CLUSTER, policy, round_s)
        rho = fairness.finish_time_fairness(result, jobs, CLUSTER)
        assert len(rho) == 160 and (rho["rho"] > 0).all() and (rho["contention"] >= 1).all()
        summaries[name] = fairness.summary(rho["rho"])
    sia, gavel = summaries["sia"], summaries["gavel+tj"]
    assert sia["ftf_unfair"] < 0.02 < 0.05 < gavel["ftf_unfair"], summaries
    assert sia["ftf_worst"] < gavel["ftf_worst"], summaries
