"""Synergy's orderings and mechanisms on the shared simulator: every combination runs, repeats identical rounds
exactly, respects capacity, and behaves as the spec says where it says something checkable."""

import numpy as np
import pytest

from hetsched import HetschedError, Job
from hetsched.io.cluster_ini import synergy_cluster
from hetsched.core.registry import make_policy
from hetsched.decide.synergy.ordering import ORDERINGS
from hetsched.sim.simulator import simulate
from hetsched.traces.generators.synergy import SynergyGenerator

MECHANISMS = ("", "+fair", "+tune", "+opt")


@pytest.fixture(scope="module")
def multi_stream():
    return SynergyGenerator(jobs_per_hour=2.5, multi_gpu=True).jobs(220)


@pytest.fixture(scope="module")
def single_stream():
    return SynergyGenerator(jobs_per_hour=3.5).jobs(260)


def jcts(result):
    return {j: r.jct_s for j, r in result.jobs.items()}


@pytest.mark.parametrize("ordering", sorted(ORDERINGS))
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_combination_finishes_and_repeats_rounds_exactly(ordering, mechanism, multi_stream):
    policy = ordering + mechanism
    cluster = synergy_cluster(servers=4)
    fast = simulate(multi_stream, cluster, policy, record_timeline=True)
    slow = simulate(multi_stream, cluster, policy, record_timeline=False, macro_rounds=False)
    assert jcts(fast) == jcts(slow)
    assert fast.num_rounds == slow.num_rounds
    frame = fast.jobs_frame()
    assert frame["finish_time_s"].notna().all()
    np.testing.assert_allclose(frame["steps_done"], frame["total_steps"])
    assert (frame["finish_time_s"] % 300 == 0).all()                 # JCTs end on the round grid
    tl = fast.timeline_frame()
    assert (tl.groupby("start_s")["num_gpus"].sum() <= 32).all()
    stats = fast.resource_stats
    assert 0 < stats["avg_gpu_alloc_pct"] <= 100 and 0 < stats["avg_cpu_alloc_pct"] <= 100 + 1e-9


def test_tune_beats_fair_and_never_runs_slower_than_fair(single_stream):
    cluster = synergy_cluster(servers=2)
    tune = simulate(single_stream, cluster, "FIFO+tune")
    fair = simulate(single_stream, cluster, "FIFO+fair")
    t, f = np.mean(list(jcts(tune).values())), np.mean(list(jcts(fair).values()))
    assert t < f
    # Under FIFO with single-GPU jobs, both run the earliest min(N, 16) runnable jobs each round: TUNE never
    # leaves a GPU idle (amendment 9).
    for result in (tune, fair):
        frame = result.jobs_frame().set_index("job_id")
        for start, rows in result.timeline_frame().groupby("start_s"):
            active = frame[(frame["arrival_time_s"] <= start) & (frame["finish_time_s"] > start)]
            expected = set(active.sort_values("arrival_time_s").index[:16])
            assert set(rows["job_id"]) == expected


def test_greedy_leaves_gpus_idle_when_cpus_run_out():
    jobs = [Job(i, 0.0, "alexnet", 1, 10_000) for i in range(8)]
    result = simulate(jobs, synergy_cluster(servers=1), "FIFO", round_s=300)
    starts = sorted(r.start_time_s for r in result.jobs.values())
    assert starts[:2] == [0.0, 0.0] and starts[2] > 0          # 2 x 12 CPUs fill the server's 24


def test_starvation_guard_reorders(monkeypatch):
    from hetsched.decide.synergy.server_rounds import ServerRounds
    monkeypatch.setattr(ServerRounds, "starvation_s", 3000.0)
    long = Job(0, 0.0, "res50", 1, 50_000)
    shorts = [Job(i, 0.0 + i, "res50", 1, 300) for i in range(1, 40)]
    result = simulate([long] + shorts, synergy_cluster(servers=1, gpus=1, cpus=3, dram_gb=62.5,
                                                       storage_mbps=62.5), "SRTF+fair")
    # Without the guard the long job would wait for all 39 short ones (~39 rounds).
    assert result.jobs[0].start_time_s <= 3300 + 300


def test_las_packs_only_the_gpu_fill_and_opt_is_an_upper_bound(single_stream):
    cluster = synergy_cluster(servers=2)
    opt = simulate(single_stream, cluster, "FIFO+opt", record_timeline=False)
    tune = simulate(single_stream, cluster, "FIFO+tune", record_timeline=False)
    fair = simulate(single_stream, cluster, "FIFO+fair", record_timeline=False)
    mean = lambda r: np.mean(list(jcts(r).values()))  # noqa: E731
    assert mean(opt) <= mean(tune) * 1.02 and mean(tune) < mean(fair)


def test_names_resolve_through_the_one_registry():
    p = make_policy("tetris+tune+place")
    assert p.name == "TETRIS+tune+place" and p.mechanism == "tune" and p.placement
    assert make_policy("DRF").mechanism == "greedy"
    with pytest.raises(HetschedError, match="ORDERING"):
        make_policy("FIFO+tune+fair")
    with pytest.raises(HetschedError, match="unknown policy"):
        make_policy("SJF+tune")


def test_rejects_clusters_it_cannot_schedule():
    jobs = [Job(0, 0.0, "alexnet", 1, 100)]
    from hetsched import ClusterSpec
    with pytest.raises(HetschedError, match="cpu_cores"):
        simulate(jobs, ClusterSpec.parse("8:0:0"), "FIFO+tune")
    with pytest.raises(HetschedError, match="no model .*--rules gavel"):      # and where such a job runs
        simulate([Job(0, 0.0, "ResNet-50 (batch size 64)", 1, 100)], synergy_cluster(servers=1), "FIFO+tune")


def test_a_job_pinned_to_a_gpu_type_the_pool_lacks_is_refused():
    """Synergy's server rounds ran a job pinned to k80s on the pool's v100s; every other stage refused it."""
    pinned = [Job(0, 0.0, "alexnet", 1, 100, pinned_gpu_types="k80")]
    with pytest.raises(HetschedError, match=r"job 0: pinned to GPU types \['k80'\], none of which this cluster"):
        simulate(pinned, synergy_cluster(servers=1), "FIFO+tune")
    allowed = [Job(0, 0.0, "alexnet", 1, 100, pinned_gpu_types="k80|v100")]
    assert simulate(allowed, synergy_cluster(servers=1), "FIFO+tune").jobs[0].jct_s > 0


@pytest.mark.parametrize("policy", ["SRTF+fair", "LAS+fair", "FTF+fair", "TETRIS+fair", "LAS+tune", "FTF+opt"])
def test_merged_rounds_are_exact_on_a_queueing_single_gpu_stream(policy, single_stream):
    """Single-GPU jobs under heavy load: merged rounds (set-only or order-stable) give the same JCTs."""
    cluster = synergy_cluster(servers=2)
    fast = simulate(single_stream[:160], cluster, policy, record_timeline=False)
    slow = simulate(single_stream[:160], cluster, policy, record_timeline=False, macro_rounds=False)
    assert jcts(fast) == jcts(slow)
    assert fast.num_recomputes < slow.num_recomputes


def test_opt_artifact_budget_reproduces_the_artifacts_failure(single_stream):
    from hetsched import SolverError
    from hetsched.core.registry import make_policy
    policy = make_policy("LAS+opt", opt_artifact_budget=True)
    with pytest.raises(SolverError, match="not a grid point"):
        simulate(single_stream[:20], synergy_cluster(servers=2), policy, record_timeline=False)
    fine = make_policy("FIFO+opt", opt_artifact_budget=True)      # FIFO and SRTF pass the real budgets
    assert simulate(single_stream[:20], synergy_cluster(servers=2), fine, record_timeline=False).jobs


def test_active_slots_follow_admissions_and_departures_with_reused_slots():
    """The runnable jobs in admission order are kept incrementally (joins appended, departures masked out): the
    same list as the scheduler's slot table gives, through churn in which freed slots are taken again at once."""
    import random

    from hetsched import ClusterSpec
    from hetsched.core.registry import build_scheduler, pipeline_for
    from hetsched.model.throughputs import load_throughputs
    from hetsched.sim.simulator import SimulationConfig

    cluster = ClusterSpec.load("2x4/24/500@v100")
    table = load_throughputs("gavel_simulation")
    core = build_scheduler(pipeline_for("FIFO+tune", SimulationConfig(), cluster), cluster, table,
                           gpu_types=tuple(table.gpu_types))
    rounds, rng, next_id, patched = core.decide, random.Random(5), 0, 0
    for step in range(600):                              # past 256 jobs, where the list is patched, not rebuilt
        if step < 300:
            core.add_job(Job(next_id, float(next_id), "res18", 1, 1e6))
            next_id += 1
        for _ in range(rng.randint(0, 4)):
            core.add_job(Job(next_id, float(next_id), "res18", 1, 1e6))
            next_id += 1
        for job_id in rng.sample(sorted(core.jobs), min(len(core.jobs), rng.randint(0, 4))):
            core.remove_job(job_id)
            if rng.random() < 0.5:                     # a job joins at once (it takes the slot just freed)
                core.add_job(Job(next_id, float(next_id), "res18", 1, 1e6))
                next_id += 1
        if step % 3:
            want = np.fromiter(core.slot.values(), np.int64, len(core.slot))
            assert rounds.active_slots().tolist() == want.tolist()
            patched += len(want) >= 256
    assert patched > 100
