"""Invariants any faithful run satisfies (docs/rules.md#invariants), on small streams of each system, and the
checks catch a run that breaks them."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from hetsched import ClusterSpec, load_throughputs
from hetsched.core.run_config import SimulationConfig
from hetsched.io.cluster_ini import synergy_cluster
from hetsched.sim.invariants import violations
from hetsched.sim.simulator import simulate
from hetsched.traces.generators.gavel import GavelGenerator
from hetsched.traces.generators.synergy import SynergyGenerator

TABLE = load_throughputs("gavel_simulation")
CLUSTER = ClusterSpec.parse("8:8:8")


@pytest.fixture(scope="module")
def gavel_jobs():
    return GavelGenerator(seed=0, mean_interarrival_s=1500, multi_gpu=True).jobs(40)


@pytest.fixture(scope="module")
def las_run(gavel_jobs):
    return simulate(gavel_jobs, CLUSTER, "max_min_fairness_perf")


@pytest.mark.parametrize("policy", ["fifo_perf", "finish_time_fairness_perf", "gandiva", "allox",
                                    "max_min_fairness_packed"])
def test_gavel_policies_keep_every_invariant(policy, gavel_jobs):
    assert violations(simulate(gavel_jobs, CLUSTER, policy), CLUSTER, TABLE) == []


def test_shockwave_and_tune_keep_capacity_and_work(gavel_jobs):
    shockwave = simulate(gavel_jobs[:12], CLUSTER, "shockwave", config=SimulationConfig.for_system("shockwave"))
    assert violations(shockwave, CLUSTER, TABLE) == []
    servers = ClusterSpec.load("2x4/12/500@v100+2x4/12/500@p100+2x4/12/500@k80")
    assert violations(simulate(gavel_jobs, servers, "gavel+tune"), servers, TABLE) == []


@pytest.mark.parametrize("policy", ["FIFO+tune", "SRTF+fair", "LAS"])
def test_synergy_server_rounds_keep_capacity_and_work(policy):
    cluster = synergy_cluster(servers=2)
    result = simulate(SynergyGenerator(jobs_per_hour=3.5).jobs(60), cluster, policy)
    assert violations(result, cluster, TABLE) == []


@pytest.mark.parametrize("policy", ["FIFO", "DRF", "SRTF+tune"])
def test_orderings_under_gavels_rules_keep_every_invariant(policy, gavel_jobs):
    """A bare ordering places greedily: its jobs run above their table rates when they get CPU above the fair
    share, so the rate checks do not apply (they reported ~1.85x on 16-core V100 servers, read from its name)."""
    servers = ClusterSpec.load("2x4/16/200@v100+2x4/48/300@k80")
    result = simulate(gavel_jobs[:30], servers, policy, TABLE, SimulationConfig.for_system("gavel"))
    assert len(result.jobs) == 30 and violations(result, servers, TABLE) == []


def test_the_checks_catch_a_broken_run(las_run):
    assert violations(las_run, CLUSTER, TABLE) == []
    tl = las_run.timeline
    first = tl["round"] == tl["round"][0]

    crowded = copy.copy(las_run)                       # one round's placements twice: more GPUs than exist
    crowded.timeline = {k: np.concatenate([v, v[first], v[first], v[first]]) for k, v in tl.items()}
    assert any(v.startswith("capacity") for v in violations(crowded, CLUSTER, TABLE))

    fast = copy.copy(las_run)                           # a round credited ten times the steps
    fast.timeline = {**tl, "steps": np.where(first, tl["steps"] * 10, tl["steps"])}
    found = violations(fast, CLUSTER, TABLE)
    assert any(v.startswith("rates") for v in found) and any(v.startswith("work") for v in found)

    early = copy.deepcopy(las_run)                      # a job recorded as done right after it arrived
    job = next(iter(early.jobs.values()))
    job.finish_time_s = job.arrival_time_s + 1.0
    found = violations(early, CLUSTER, TABLE)
    assert any(v.startswith("alone") for v in found)


@pytest.mark.parametrize("policy", ["max_min_fairness_packed", "finish_time_fairness_packed", "gandiva",
                                    "max_min_fairness_perf"])
def test_pinned_jobs_run_only_on_their_types_also_in_pairs(policy):
    """Space-sharing pairs took the table's co-location rates, which know no pins: max_min_fairness_packed ran
    K80-pinned jobs on V100s in 2,593 pair rows of this run (docs/rules.md#pins)."""
    jobs = GavelGenerator(seed=2, mean_interarrival_s=300, throughputs=TABLE).jobs(30)
    jobs = [j.with_(pinned_gpu_types="k80") if j.job_id % 3 == 0 else j for j in jobs]
    cluster = ClusterSpec.parse("v100=4,k80=4")
    result = simulate(jobs, cluster, policy, TABLE)
    assert violations(result, cluster, TABLE) == []
    assert result.jobs_frame()["pinned_gpu_types"].tolist().count("k80") == 10
    pinned = result.timeline_frame().query("job_id % 3 == 0")
    assert len(pinned) and set(pinned["gpu_type"]) == {"k80"}


def test_the_pin_check_catches_a_job_run_off_its_types(las_run):
    moved = copy.copy(las_run)
    moved.jobs = {j: copy.copy(r) for j, r in las_run.jobs.items()}
    first = las_run.timeline_frame().iloc[0]
    moved.jobs[int(first["job_id"])].pinned_gpu_types = "|".join(g for g in ("v100", "p100", "k80")
                                                                 if g != first["gpu_type"])
    assert any(v.startswith(f"pins: job {int(first['job_id'])} ran on {first['gpu_type']}")
               for v in violations(moved, CLUSTER, TABLE))
