"""The whole-window plan (docs/rules.md#whole-window-plan): on several GPU types, each job on one type for the
whole window, taken without the solver only where it is within the gap of the window program's optimum and runs
every job at (1 - slack) x its fastest rate or more."""

import numpy as np
import pytest

from hetsched.decide.shockwave.config import PlannerConfig, load_planner_config
from hetsched.decide.shockwave.milp import WindowInputs, window_program
from hetsched.decide.shockwave.whole_window import planned_objective, whole_window_plan
from hetsched.errors import SpecError

BASES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
WINDOW = dict(rounds=6, round_s=120.0, k=1e-3, bases=BASES, log_origin=1e-6)


def instance(seed: int, N: int, priority=(1.0,)) -> WindowInputs:
    """Jobs on three types: two alike and a third 10 % faster (as openb's A10 against its V100s)."""
    rng = np.random.default_rng(seed)
    epochs = rng.integers(5, 60, N)
    speed = rng.uniform(0.5, 2.0, N)[:, None] * np.array([1.0, 1.0, 1.1])[None, :]
    return WindowInputs(gpus=rng.choice([1, 1, 2], N), epochs=epochs,
                        progress=np.floor(rng.uniform(0, 0.8, N) * epochs), mean_epoch_s=rng.uniform(30, 400, N),
                        remaining_s=rng.uniform(5e3, 2e5, N), priority=rng.choice(priority, N), speed=speed)


def value(inp: WindowInputs, n: np.ndarray) -> float:
    return planned_objective(inp, n, **WINDOW)[0]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("priority", [(1.0,), (1.0, 30.0, 1e6)])
def test_a_whole_window_plan_is_within_the_gap_of_the_optimum_and_keeps_every_job_near_its_fastest_rate(seed,
                                                                                                        priority):
    inp = instance(seed, 8, priority)
    capacity = np.array([20, 20, 2])
    n = whole_window_plan(inp, capacity=capacity, gap=1e-3, slack=0.1, **WINDOW)
    if priority == (1.0,):
        assert n is not None      # equal weights and long jobs: the makespan term decides, and the plan is near it
    if n is None:
        return
    assert (n.sum(axis=1) == 6).all() and ((n > 0).sum(axis=1) == 1).all()
    assert (inp.gpus @ (n > 0) <= capacity).all()               # fits in every round
    rate = (inp.speed * n).sum(axis=1) / 6
    assert (rate >= 0.9 * inp.speed.max(axis=1) - 1e-12).all()
    best, status = window_program(inp, capacity=capacity, gap=1e-9, time_limit_s=30.0, **WINDOW)
    assert status == "optimal"
    ours, optimum = value(inp, n), value(inp, best)
    assert optimum <= ours <= optimum + 1e-3 * abs(ours)


def test_no_whole_window_plan_where_a_job_would_be_left_out_or_slowed_beyond_the_slack():
    inp = instance(1, 8)
    assert whole_window_plan(inp, capacity=np.array([20, 20, 2]), gap=1e-3, slack=0.1, **WINDOW) is not None
    # too few GPUs for every job at once: the gap could hide the one left out, so the solver decides
    assert whole_window_plan(inp, capacity=np.array([3, 3, 2]), gap=1e-3, slack=0.1, **WINDOW) is None
    # room only on a type at half the fastest rate
    inp.speed[:, 1] *= 0.5
    assert whole_window_plan(inp, capacity=np.array([0, 40, 2]), gap=1e-3, slack=0.1, **WINDOW) is None
    assert whole_window_plan(inp, capacity=np.array([0, 40, 2]), gap=1e-3, slack=0.6, **WINDOW) is not None


def test_a_whole_window_plan_meets_the_fair_finish_bounds_or_is_not_taken():
    inp = instance(2, 8)
    capacity = np.array([20, 20, 2])
    n = whole_window_plan(inp, capacity=capacity, gap=1e-3, slack=0.1, **WINDOW)
    P = planned_objective(inp, n, **WINDOW)[1]
    inp.ftf_slack_s = inp.remaining_s - inp.mean_epoch_s * P          # every job exactly on its bound
    assert (whole_window_plan(inp, capacity=capacity, gap=1e-3, slack=0.1, **WINDOW) == n).all()
    inp.ftf_slack_s[np.argmax(P)] -= 1.0                                 # one job needs more than this plan gives
    m = whole_window_plan(inp, capacity=capacity, gap=1e-3, slack=0.1, **WINDOW)
    assert m is None or (inp.remaining_s - inp.mean_epoch_s * planned_objective(inp, m, **WINDOW)[1]
                         <= inp.ftf_slack_s).all()


def test_the_whole_window_slack_is_read_checked_and_refused_where_it_cannot_act():
    assert load_planner_config({"whole_window_slack": 0.0}).whole_window_slack == 0.0
    assert PlannerConfig().whole_window_slack == 0.1
    for bad in (-0.1, 1.5, "0.1", True):
        with pytest.raises(SpecError, match="whole_window_slack"):
            PlannerConfig(whole_window_slack=bad)
    with pytest.raises(SpecError, match="fairness solver only"):
        load_planner_config({"fairness": "share", "whole_window_slack": 0.2})


@pytest.mark.parametrize("policy, whole, fair_plan", [("shockwave_agnostic", True, True), ("shockwave", False, True),
                                                      ("shockwave", False, False)])
def test_the_planner_takes_it_without_the_solver_only_where_no_job_is_slowed(monkeypatch, policy, whole, fair_plan):
    """Four one-GPU jobs on two V100s and two K80s. Type-agnostic, every type is as fast as any: each job on one
    type for the whole window is at the bound, and no window reaches the solver. Heterogeneity-aware, a K80 runs
    these jobs at a fraction of a V100's rate: the fair plan (docs/rules.md#fair-plan) plans every window the
    whole-window plan leaves, or, with `fair_plan` off, the solver."""
    import hetsched.decide.shockwave.core as core
    from hetsched.decide.shockwave.core import ShockwavePolicy
    from hetsched.model.cluster import ClusterSpec
    from hetsched.model.jobs import AdaptationMode, Job
    from hetsched.sim.simulator import RoundSimulation, SimulationConfig

    calls, solve = [], core.window_program
    monkeypatch.setattr(core, "window_program", lambda *a, **k: calls.append(1) or solve(*a, **k))
    jobs = [Job(i, 60.0 * i, "ResNet-18 (batch size 64)", 1, 20000.0, mode=AdaptationMode.STATIC) for i in range(4)]
    sim = RoundSimulation(jobs, ClusterSpec.load("v100=2,k80=2"),
                          ShockwavePolicy(heterogeneity_aware=policy == "shockwave", fair_plan=fair_plan),
                          "gavel_simulation",
                          SimulationConfig.for_system("shockwave"), record_timeline=False)
    while sim.step():
        pass
    statuses = {e["status"] for e in sim.sched.decide.solve_log}
    assert not sim.sched.jobs                                   # every job ran to its end
    if whole:
        assert "whole window" in statuses and not calls
    else:
        assert "whole window" not in statuses and ("fair plan" in statuses) == fair_plan and bool(calls) != fair_plan
