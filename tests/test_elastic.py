"""Elastic jobs (hetsched/decide/elastic): the goodput model, Sia's integer program, placement, the job model and bad input."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import approx_fprime

from hetsched.decide.elastic import goodput
from hetsched.decide.elastic.apps import load_applications
from hetsched.decide.elastic.cluster import ElasticCluster, place
from hetsched.decide.elastic.jobs import Allocation, ElasticJob
from hetsched.decide.elastic.sia import SiaPolicy, configurations
from hetsched.sim.elastic import jobs_from_frame, simulate_elastic
from hetsched.core.pipeline import CompositionError
from hetsched.errors import HetschedError, SpecError
from hetsched.model.cluster import ClusterSpec
from hetsched.model.jobs import Job
from hetsched.sim.simulator import simulate

TRUE = np.array([0.02, 3e-4, 0.05, 4e-3, 0.01, 2e-3, 2.5])


def _samples(params, configs):
    nodes, replicas, atomic = (np.array(c, dtype=float) for c in zip(*configs))
    accum = goodput.accum_time(params, atomic)
    step = np.exp(goodput.log_step_time(params, accum, goodput.network_time(params, nodes, replicas)))
    return nodes, replicas, atomic, step, step - accum


def test_the_fit_gradient_is_the_loss_derivative():
    nodes, replicas, atomic, step, sync = _samples(TRUE, [(1, 1, 32), (1, 4, 64), (2, 8, 64), (3, 12, 128)])
    step = step * np.array([1.1, 0.9, 1.05, 1.0])             # not the model's own times: errors are not 0
    across = (nodes > 1).astype(float)
    within = ((nodes <= 1) & (replicas > 1)).astype(float)
    args = (atomic, np.log(step - sync), np.log(step), across, within, np.maximum(replicas - 2, 1e-8))
    point = np.array([0.03, 2e-4, 0.04, 3e-3, 0.02, 1e-3, 1.7])
    numeric = approx_fprime(point, lambda p: goodput._objective(p, *args)[0], 1e-9)
    assert np.allclose(goodput._objective(point, *args)[1], numeric, rtol=1e-3, atol=1e-4)


def test_the_fit_predicts_the_step_times_it_was_fitted_to():
    configs = [(1, 1, 32), (1, 1, 128), (1, 2, 64), (1, 4, 64), (2, 8, 64), (3, 12, 128), (2, 16, 32)]
    nodes, replicas, atomic, step, sync = _samples(TRUE, configs)
    fitted = goodput.fit_params(nodes, replicas, atomic, step, sync)
    predicted = _samples(fitted, configs)[3]
    assert np.allclose(predicted, step, rtol=0.1)          # the priors (retrogress, gamma) bias it a little


def test_a_repeated_fit_or_question_gives_the_first_answer_unshared(monkeypatch):
    """The memos (goodput._FITS, _BEST) answer a repeat with what the computation gives, as copies (a fit) or
    read-only arrays (a batch-size question): a caller cannot change the next caller's answer."""
    configs = [(1, 1, 32), (1, 2, 64), (2, 8, 64)]
    samples = _samples(TRUE, configs)
    monkeypatch.setattr(goodput, "_FITS", {})
    first = goodput.fit_params(*samples)
    first[0] = -1.0
    again = goodput.fit_params(*samples)
    assert again[0] > 0 and len(goodput._FITS) == 1
    np.testing.assert_array_equal(again, goodput._fit(*samples))
    monkeypatch.setattr(goodput, "_BEST", {})
    ask = (again, 1.0, 4.0, 128, 4096, [1, 1, 2], [1, 4, 8], (16, 256))
    good, atomic, steps = goodput.best_goodput(*ask)
    assert goodput.best_goodput(*ask)[0] is good and len(goodput._BEST) == 1
    with pytest.raises(ValueError):
        good[0] = 0.0
    fresh = goodput._best_goodput(again, 1.0, 4.0, 128, 4096, np.array([1, 1, 2]), np.array([1, 4, 8]), 16, 256)
    for got, want in zip((good, atomic, steps), fresh):
        np.testing.assert_array_equal(got, want)


def test_one_batch_size_seen_splits_compute_evenly_and_fixes_unseen_links():
    nodes, replicas, atomic, step, sync = _samples(TRUE, [(1, 1, 64)])
    fitted = goodput.fit_params(nodes, replicas, atomic, step, sync)
    assert fitted[0] == pytest.approx(float((step - sync)[0]) / 2)
    assert fitted[4] == pytest.approx(1e-8) and fitted[5] == pytest.approx(1e-8)   # no multi-GPU sample


def test_efficiency_is_one_at_the_initial_batch_and_falls_with_scale():
    assert goodput.efficiency(1.0, 4.0, 128, 128) == pytest.approx(1.0)
    values = goodput.efficiency(1.0, 4.0, np.array([128, 256, 1024, 4096]), 128)
    assert np.all(np.diff(values) < 0)


def test_best_goodput_stays_inside_the_atomic_batch_range():
    good, atomic, steps = goodput.best_goodput(TRUE, 1.0, 50.0, 128, 4096, [1, 1, 2], [1, 4, 16], (32, 256))
    assert np.all(good > 0) and np.all((atomic >= 32) & (atomic <= 256))
    assert np.all(np.asarray([1, 4, 16]) * atomic * (steps + 1) <= 4096 * 1.02)


def test_sia_table1_example_picks_the_paper_optimum():
    """The paper's Table 1: J1 -> (1,4,B), J2 -> (1,2,A) on one node of 2 A GPUs and one of 4 B GPUs."""
    policy = SiaPolicy(ElasticCluster.parse("1x2@t4+1x4@rtx"))
    assert [c for c in policy.configs] == [("t4", 1, 1), ("t4", 1, 2), ("rtx", 1, 1), ("rtx", 1, 2), ("rtx", 1, 4)]
    goodputs = np.array([[1, 1.5, 1.5, 2.5, 3.5], [1.2, 2.1, 1, 1.9, 3.6]])
    picks = policy.choose(goodputs, np.zeros_like(goodputs))
    assert [policy.configs[k] for k in picks] == [("rtx", 1, 4), ("t4", 1, 2)]


def test_a_pinned_job_keeps_its_configuration_and_capacity_holds():
    policy = SiaPolicy(ElasticCluster.parse("1x2@t4+1x4@rtx"))
    goodputs = np.array([[1, 1.5, 1.5, 2.5, 3.5], [1.2, 2.1, 1, 1.9, 3.6], [1, 1, 1, 1, 1]])
    pinned = np.zeros_like(goodputs)
    pinned[1, 4] = 1                                        # J2 restoring on 4 B GPUs
    picks = policy.choose(goodputs, pinned)
    assert picks[1] == 4
    used = {}
    for k in picks[picks >= 0]:
        t, _, g = policy.configs[k]
        used[t] = used.get(t, 0) + g
    assert used.get("t4", 0) <= 2 and used.get("rtx", 0) <= 4


def test_configurations_of_the_paper_cluster():
    configs = configurations(ElasticCluster.parse("sia_hetero"))
    counts = {t: sum(c[0] == t for c in configs) for t in ("t4", "rtx", "a100")}
    assert counts == {"t4": 8, "rtx": 6, "a100": 5} and len(configs) == 19


def test_placement_keeps_unchanged_jobs_and_gives_whole_nodes_first():
    cluster = ElasticCluster.parse("3x8@rtx")
    current = {"a": Allocation("rtx", ((1, 2),)), "b": None}
    out = place(cluster, current, {"a": ("rtx", 2), "b": ("rtx", 16), "c": ("rtx", 4)})
    assert out["a"] == current["a"]
    assert sorted(n for n, _ in out["b"].nodes) == [0, 2] and out["b"].placement == (8, 8)
    assert out["c"].nodes == ((1, 4),)


def test_cluster_names_and_errors():
    assert str(ElasticCluster.parse("sia_hetero")) == "6x4@t4+3x8@rtx+2x8@a100"
    assert ElasticCluster.parse("sia_homo").total_gpus == 64
    with pytest.raises(SpecError, match="NODESxGPUS@TYPE"):
        ElasticCluster.parse("6x4")
    with pytest.raises(SpecError, match="no measurements for GPU type 'h100'"):
        ElasticCluster.parse("2x8@h100", {"t4", "a100"})


def _frame(rows):
    return pd.DataFrame(rows, columns=["name", "submit_s", "app", "num_replicas", "batch_size"])


def test_a_job_alone_finishes_with_its_gpu_time_accounted():
    apps = load_applications()
    cluster = ElasticCluster.parse("1x4@t4")
    jobs = jobs_from_frame(_frame([("bert-0", 0.0, "bert", 1, 12)]), apps, cluster)
    result = simulate_elastic(jobs, cluster, SiaPolicy(cluster))
    job = jobs[0]
    assert job.epoch == apps["bert"].max_epochs and job.progress == pytest.approx(apps["bert"].target_progress)
    rounds = len(result.contention)
    assert 0 < result.jobs["gpu_hours"][0] * 3600 <= rounds * 60 * 4
    assert job.restarts is not None and result.jobs["completion_s"][0] > 60   # admitted at the first boundary


def test_a_waiting_job_starts_at_the_round_its_restart_factor_lets_it_even_with_nothing_else_running():
    """R80/R82: at age >= S every configuration is multiplied by r = age / (age + S); a lone cifar10 job (S = 30 s)
    pays once r >= 1.1^-2, at age 142.8 s, so the decision at 180 s starts it. Rounds with a job waiting are
    decided: the run neither stops as stuck nor jumps to the next arrival (which used to give 'no job can run')."""
    cluster = ClusterSpec.load("4x4/8/64@t4")
    alone = simulate([Job(0, 0.0, "cifar10", 1, 1.0)], cluster, "sia").jobs_frame()
    assert alone["start_time_s"].tolist() == [180.0]
    later = simulate([Job(0, 0.0, "cifar10", 1, 1.0), Job(1, 50_000.0, "bert", 1, 1.0)], cluster, "sia").jobs_frame()
    assert later["start_time_s"].tolist() == [180.0, 50_040.0]
    assert later["finish_time_s"][0] == alone["finish_time_s"][0]
    policy = SiaPolicy(ElasticCluster.parse("4x4@t4"))
    job = ElasticJob("0", load_applications()["cifar10"], 0.0, 1, 128)
    assert policy.start_age(job) == pytest.approx(30 * 1.1 ** -2 / (1 - 1.1 ** -2))
    assert SiaPolicy(ElasticCluster.parse("4x4@t4"), lam=0.9).start_age(job) is None    # 0.9^-2 > 1: never


@pytest.mark.parametrize("policy", ["sia", "pollux", "gavel+tj"])
def test_a_time_scaled_run_is_the_applications_run_compressed_exactly(policy):
    """R86a: with time_scale k, one second of the clock stands for k seconds of the applications' training; the
    same jobs arriving k times sooner, in rounds k times shorter, finish k times sooner (k = 16: exact in floats)."""
    from hetsched.decide.elastic.names import ELASTIC_ROUND_S

    cluster, k = ClusterSpec.load("2x4/8/64@t4+1x4/8/64@a100"), 16.0
    jobs = [Job(i, 120.0 * i, app, 1 + i % 2, 1.0) for i, app in enumerate(["ncf", "cifar10", "bert", "ncf"])]
    own = simulate(jobs, cluster, policy).jobs_frame()["jct_s"].to_numpy()
    fast = [j.with_(arrival_time_s=j.arrival_time_s / k) for j in jobs]
    scaled = simulate(fast, cluster, policy, round_s=ELASTIC_ROUND_S[policy] / k, time_scale=k).jobs_frame()
    assert (scaled["jct_s"].to_numpy() * k == own).all() and len(set(own)) > 2


def test_shockwave_tj_runs_the_rigid_jobs_on_the_core_planner_at_their_measured_time_alone():
    """R83b: a lone rigid job under Shockwave+TJ takes its time alone from the measured traces (the core's first
    round pays no preemption penalty); under Gavel+TJ's elastic rounds the same job waits for the next 360-s
    decision and pays its application's restore first. Three 48-GPU jobs on 64 GPUs take turns and all finish."""
    from hetsched.decide.elastic import shockwave_tj
    from hetsched.sim.elastic import prepare, run_shockwave_tj, simulate_elastic

    cluster = ElasticCluster.parse("sia_homo")
    lone = pd.DataFrame({"name": ["a"], "submit_s": [100.0], "app": ["cifar10"], "num_replicas": [4],
                         "batch_size": [512]})
    policy, jobs, round_s = prepare("gavel+tj", cluster, lone)
    alone = shockwave_tj.alone_s(jobs[0], "t4", cluster)
    assert run_shockwave_tj(jobs, cluster).jobs["jct_s"].tolist() == [alone]
    gavel = simulate_elastic(jobs, cluster, policy, round_s).jobs["jct_s"][0]
    assert gavel == (360.0 - 100.0) + load_applications()["cifar10"].rescale_s + alone
    three = pd.DataFrame({"name": list("abc"), "submit_s": [100.0] * 3, "app": ["cifar10"] * 3,
                          "num_replicas": [48] * 3, "batch_size": [4096] * 3})
    _, jobs, _ = prepare("gavel+tj", cluster, three)
    result = run_shockwave_tj(jobs, cluster)
    assert len(result.jobs) == 3 and (result.jobs["jct_s"] > shockwave_tj.alone_s(jobs[0], "t4", cluster)).sum() >= 2
    with pytest.raises(HetschedError, match="one GPU type"):
        run_shockwave_tj(jobs, ElasticCluster.parse("sia_hetero"))


def test_a_grid_origin_moves_every_decision():
    """R82: decisions at origin + k x round after 0 (the runtime's grid): an ncf job arriving on the default grid is
    decided at once, at age 0; on a grid 0.01 s earlier it waits for the next decision, at age ~1 round, when its
    restart factor keeps it out (R80) until it is old enough (30 app-s x 1.1^-2 / (1 - 1.1^-2) = 142.8 app-s)."""
    cluster, job = ClusterSpec.load("1x4/8/64@t4"), [Job(0, 2.0, "ncf", 1, 1.0)]
    starts = [simulate(job, cluster, "sia", round_s=2.0, time_scale=30.0, round_origin_s=origin)
              .jobs_frame()["start_time_s"][0] for origin in (0.0, 1.99, -0.01)]
    assert starts == [2.0, 7.99, 7.99]


def test_fixed_rounds_are_refused_and_a_lease_start_adds_to_each_new_lease_s_restore():
    """Elastic rounds keep their own grid from 0 (R82): fixed rounds would change nothing, and used to end in a
    TypeError inside the loop; refused when the run is built (R72). A lease start (R86a) delays every start and
    restart: a lone ncf job, which starts once and restarts as it grows, finishes later by more than one start."""
    cluster, job = ClusterSpec.load("1x4/8/64@t4"), [Job(0, 0.0, "ncf", 1, 1.0)]
    with pytest.raises(CompositionError, match="x fixed_rounds=True.*no stage of this run reads it"):
        simulate(job, cluster, "sia", fixed_rounds=True)
    plain = simulate(job, cluster, "sia").jobs_frame()["jct_s"][0]
    late = simulate(job, cluster, "sia", lease_start_s=5.0).jobs_frame()["jct_s"][0]
    assert late > plain + 5.0


def test_bad_workload_rows_name_the_row_and_what_works():
    apps = load_applications()
    cluster = ElasticCluster.parse("sia_hetero")
    with pytest.raises(HetschedError, match=r"row 2 \(x\): unknown application 'resnet'; known: bert"):
        jobs_from_frame(_frame([("a", 0, "bert", 1, 12), ("x", 0, "resnet", 1, 12)]), apps, cluster)
    with pytest.raises(HetschedError, match=r"batch size 99999 is outside cifar10's profiled range \[128, 4096\]"):
        jobs_from_frame(_frame([("a", 0, "cifar10", 1, 99999)]), apps, cluster)
    with pytest.raises(HetschedError, match="gpt_pmp has no measurements on t4"):
        jobs_from_frame(_frame([("a", 0, "gpt_pmp", 1, 48)]), apps, cluster)


def test_cli_refuses_an_unknown_workload_with_exit_2(tmp_path):
    run = subprocess.run([sys.executable, "-m", "hetsched", "elastic", "--policy", "sia", "--workload", "helios-99"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "helios-1..10" in run.stderr
    bad = tmp_path / "w.csv"
    bad.write_text("name,time,application,num_replicas,batch_size\nj,0,cifar10,1,64\n")
    run = subprocess.run([sys.executable, "-m", "hetsched", "elastic", "--policy", "gavel+tj", "--workload", str(bad),
                          "--jobs-out", str(tmp_path / "out.csv")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "batch size 64 is outside cifar10's profiled range" in run.stderr
    assert not (tmp_path / "out.csv").exists()


def test_cli_runs_a_short_workload_and_converts_a_sia_file(tmp_path):
    src = tmp_path / "w.csv"
    src.write_text("name,time,application,num_replicas,batch_size\na,0,cifar10,2,256\nb,100,bert,2,24\n")
    conv = subprocess.run([sys.executable, "-m", "hetsched", "convert", "trace", str(src), str(tmp_path / "o.csv"),
                           "--from", "sia"], capture_output=True, text=True, timeout=120)
    assert conv.returncode == 0, conv.stderr
    assert list(pd.read_csv(tmp_path / "o.csv")["app"]) == ["cifar10", "bert"]
    run = subprocess.run([sys.executable, "-m", "hetsched", "elastic", "--policy", "sia", "--workload",
                          str(tmp_path / "o.csv"), "--cluster", "2x4@t4", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert '"jobs": 2' in run.stdout


def test_committed_tables_equal_a_fresh_conversion(shared_dir, tmp_path):
    from hetsched.decide.elastic.convert import convert_all
    from hetsched.model.throughputs import data_dir

    convert_all(shared_dir / "data" / "sia", tmp_path)
    for name in ("step_times", "gradient_stats", "workloads"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / f"{name}.parquet"),
                                      pd.read_parquet(data_dir() / "sia" / f"{name}.parquet"))


def test_nsga2_rank_zero_is_the_pareto_front():
    from hetsched.decide.elastic.pollux_kernels import rank_crowding

    rng = np.random.default_rng(3)
    objs = np.round(rng.random((60, 2)), 1)                 # ties and duplicates on purpose
    rank, crowd = rank_crowding(objs)
    dominated = [any((objs[j] <= objs[i]).all() and (objs[j] < objs[i]).any() for j in range(60)) for i in range(60)]
    assert [r == 0 for r in rank] == [not d for d in dominated]
    for i in range(60):                                     # a state is ranked after every state that beats it
        for j in range(60):
            if (objs[j] <= objs[i]).all() and (objs[j] < objs[i]).any():
                assert rank[j] < rank[i]
    assert np.isinf(crowd[rank == 0]).any()


def test_pollux_repair_makes_every_state_feasible():
    from hetsched.decide.elastic.pollux_kernels import MAX_NODES, repair

    rng = np.random.default_rng(5)
    caps = np.array([4] * 10)
    max_r = np.array([1, 4, 16, 8, 2])
    states = rng.integers(0, 6, size=(200, 5, 10)) * (rng.random((200, 5, 10)) < 0.4)
    fixed = repair(states.copy(), max_r, caps, rng.permutation(5))
    assert (fixed >= 0).all() and (fixed.sum(axis=1) <= caps).all()
    assert (fixed.sum(axis=2) <= max_r).all()
    assert (np.count_nonzero(fixed, axis=2) <= MAX_NODES).all()
    spread = (np.count_nonzero(fixed, axis=2) > 1)[:, :, None] & (fixed > 0)
    assert (spread.sum(axis=1) <= 1).all()                  # one distributed job a node


def test_pollux_keeps_the_type_holding_most_gpus_and_is_reproducible_by_seed():
    from hetsched.decide.elastic.pollux import PolluxPolicy

    cluster = ElasticCluster.parse("1x4@t4+1x8@a100")
    policy = PolluxPolicy(cluster)
    assert list(policy.vnode_type) == ["t4", "a100", "a100"]
    job = ElasticJob("j", load_applications()["cifar10"], 0.0, 4, 1024)
    state = np.array([[1, 3, 2]])
    assert policy._allocations([job], state)["j"] == Allocation("a100", ((0, 5),))

    def run(seed):
        apps = load_applications()
        frame = _frame([(f"j{i}", 60.0 * i, app, 2, size) for i, (app, size) in
                        enumerate([("cifar10", 512), ("bert", 24), ("yolov3", 32), ("cifar10", 256)])])
        jobs = jobs_from_frame(frame, apps, cluster, unaware=True)
        result = simulate_elastic(jobs, cluster, PolluxPolicy(cluster, seed=seed, generations=20))
        return result.jobs["completion_s"].tolist()

    assert run(1) == run(1)


def test_themis_tj_allocates_within_capacity_and_recomputes_when_the_jobs_change():
    """docs/rules.md#themis-tj: the core's finish-time-fairness policy over the rigid jobs' rates; x in [0, 1], at
    most 1 per job, each type's GPUs respected; the same job set keeps its allocation, a new job recomputes it."""
    from hetsched.decide.elastic.policies import make_elastic_policy

    cluster = ElasticCluster.parse("sia_hetero")
    frame = pd.DataFrame({"name": ["a", "b", "c"], "submit_s": [0.0, 0.0, 0.0], "app": ["cifar10", "bert", "imagenet"],
                          "num_replicas": [4, 8, 16], "batch_size": [512, 96, 1024]})
    jobs = jobs_from_frame(frame, load_applications(), cluster, category="rigid")
    policy, category, round_s = make_elastic_policy("Themis+TJ", cluster)
    assert (category, round_s, policy.name) == ("rigid", 360.0, "themis+tj")
    chosen = policy.decide(jobs[:2], 0.0)
    x = policy._x
    capacity = np.array([cluster.gpus(t) for t in cluster.types])
    assert x.shape == (2, len(cluster.types)) and (x >= 0).all() and (x.sum(axis=1) <= 1 + 1e-6).all()
    assert (np.array([4, 8]) @ x <= capacity + 1e-6).all()
    assert set(chosen) == {"a", "b"} and all(count == j.target_replicas for j in jobs[:2]
                                             for (_, count) in [chosen[j.name]])
    policy.decide(jobs[:2], 360.0)
    assert policy._x is x
    policy.decide(jobs, 720.0)
    assert policy._x.shape == (3, len(cluster.types))
