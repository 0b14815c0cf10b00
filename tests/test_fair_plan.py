"""The fair plan (docs/rules.md#fair-plan): on several GPU types, a window the whole-window plan does not take is
planned without the solver's search, within the gap of the window program's LP bound; the plan depends on no HiGHS
setting, and no job is left without a round it could use."""

import numpy as np
import pytest

from hetsched.decide.shockwave.config import load_planner_config
from hetsched.decide.shockwave.fair_plan import fair_plan
from hetsched.decide.shockwave.milp import WindowInputs, type_tiebreak, window_lp_bound, window_program
from hetsched.decide.shockwave.whole_window import planned_objective
from hetsched.errors import SpecError

BASES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
WINDOW = dict(rounds=8, round_s=120.0, k=1e-3, bases=BASES, log_origin=1e-6)
SETTINGS = [(), (("mip_heuristic_run_feasibility_jump", False),), (("presolve", "off"),)]


def instance(seed: int, N: int, priority=(1.0,)) -> WindowInputs:
    """Jobs on three types (a V100, a P100 at about 0.6 of it, a K80 at about 0.3), one or two GPUs each."""
    rng = np.random.default_rng(seed)
    epochs = rng.integers(5, 60, N)
    speed = rng.uniform(0.5, 2.0, N)[:, None] * np.array([1.0, 0.6, 0.3])[None, :] * rng.uniform(0.9, 1.1, (N, 3))
    return WindowInputs(gpus=rng.choice([1, 1, 2], N), epochs=epochs,
                        progress=np.floor(rng.uniform(0, 0.8, N) * epochs), mean_epoch_s=rng.uniform(30, 400, N),
                        remaining_s=rng.uniform(5e3, 2e5, N), priority=rng.choice(priority, N), speed=speed)


def objective(inp: WindowInputs, n: np.ndarray) -> float:
    """The window program's c'x at round counts n, its type tie-break included."""
    return planned_objective(inp, n, **WINDOW)[0] + float((type_tiebreak(inp.speed, WINDOW["rounds"]) * n).sum())


def plan(inp: WindowInputs, capacity: np.ndarray, options=()) -> np.ndarray | None:
    lower = window_lp_bound(inp, capacity=capacity, time_limit_s=30.0, options=options, **WINDOW)
    return fair_plan(inp, lower, capacity=capacity, gap=1e-3, **WINDOW)


@pytest.mark.parametrize("seed, priority", [(s, (1.0,)) for s in range(4)] + [(s, (1.0, 30.0)) for s in range(4)]
                         + [(s, (1.0, 30.0, 1e6)) for s in (3, 4, 7, 9)])
def test_the_plan_is_within_the_gap_of_the_optimum_fits_and_leaves_no_usable_round_idle(seed, priority):
    inp = instance(seed, 10, priority)
    capacity = np.array([3, 3, 2])                              # 10 jobs contend for 8 GPUs
    R = WINDOW["rounds"]
    n = plan(inp, capacity)
    assert n is not None
    assert (n >= 0).all() and (n.sum(axis=1) <= R).all() and (inp.gpus @ n <= capacity * R).all()
    best, status = window_program(inp, capacity=capacity, gap=1e-9, time_limit_s=60.0, **WINDOW)
    assert status == "optimal"
    ours, optimum = objective(inp, n), objective(inp, best)
    assert ours - optimum <= max(1e-3 * abs(ours), 1e-6)
    # step 3: a job short of its epochs left and of R rounds has no type with room for its gang
    left = capacity * R - inp.gpus @ n
    P = planned_objective(inp, n, **WINDOW)[1]
    short = (P < inp.epochs - inp.progress) & (n.sum(axis=1) < R)
    assert not (short[:, None] & (inp.speed > 0) & (left[None, :] >= inp.gpus[:, None])).any()


@pytest.mark.parametrize("seed", (3, 4, 7, 9))
def test_the_plan_is_the_same_under_every_highs_setting(seed):
    inp = instance(seed, 12, (1.0, 30.0, 1e6))
    capacity = np.array([3, 3, 2])
    plans = [plan(inp, capacity, options) for options in SETTINGS]
    assert plans[0] is not None and all((p == plans[0]).all() for p in plans[1:])


@pytest.mark.parametrize("seed, share", [(2, 0.5), (5, 0.5), (1, 0.7), (3, 0.7)])
def test_in_a_fair_finish_attempt_every_job_meets_its_bound_or_the_solver_decides(seed, share):
    """Each job's bound: `share` of the epochs its fastest type alone would give it in the window."""
    inp = instance(seed, 8)
    capacity = np.array([4, 4, 2])
    R = WINDOW["rounds"]
    alone = np.minimum(inp.epochs - inp.progress, WINDOW["round_s"] * R * inp.speed.max(axis=1) / inp.mean_epoch_s)
    inp.ftf_slack_s = inp.remaining_s - inp.mean_epoch_s * alone * share
    n = plan(inp, capacity)
    assert (n is not None) == (share == 0.5)                  # 0.7: not every job's bound fits the GPUs
    if n is not None:
        P = planned_objective(inp, n, **WINDOW)[1]
        assert (inp.remaining_s - inp.mean_epoch_s * P <= inp.ftf_slack_s).all()


def test_where_the_plan_cannot_reach_the_gap_the_solver_decides():
    """Capped priorities (1e6) on contended gangs: where no plan is within the gap of the LP bound (the optimum is
    further from it), or the plan built does not reach it, there is no fair plan, and HiGHS plans the window."""
    capacity = np.array([3, 3, 2])
    for seed in (1, 2):                                         # the LP bound is more than the gap below the optimum
        inp = instance(seed, 10, (1.0, 30.0, 1e6))
        lower = window_lp_bound(inp, capacity=capacity, time_limit_s=30.0, **WINDOW)
        optimum = objective(inp, window_program(inp, capacity=capacity, gap=1e-9, time_limit_s=60.0, **WINDOW)[0])
        assert optimum - lower > 1e-3 * abs(optimum)
        assert fair_plan(inp, lower, capacity=capacity, gap=1e-3, **WINDOW) is None
    inp = instance(3, 10, (1.0, 30.0, 1e6))
    lower = window_lp_bound(inp, capacity=capacity, time_limit_s=30.0, **WINDOW)
    assert fair_plan(inp, lower, capacity=capacity, gap=1e-3, **WINDOW) is not None
    assert fair_plan(inp, lower - 0.01 * abs(lower), capacity=capacity, gap=1e-3, **WINDOW) is None


def test_a_comparison_stream_is_planned_alike_under_every_highs_setting_and_never_by_the_solver(monkeypatch):
    """The comparison's tiny Gavel stream on three types: every contended window is the fair plan's, so each
    HiGHS setting gives the same run; with `fair_plan` off, HiGHS plans them."""
    import hetsched.decide.shockwave.core as core
    from hetsched.core.registry import policy_for
    from hetsched.core.run_config import SimulationConfig
    from hetsched.experiments import compare_systems as S
    from hetsched.sim.simulator import RoundSimulation

    calls, solve = [], core.window_program
    monkeypatch.setattr(core, "window_program", lambda *a, **k: calls.append(1) or solve(*a, **k))
    jobs, cluster, table, rules = S.workload(S.Case("gavel", "shockwave", 0, "tiny"))
    runs = []
    for options, fair in [(o, True) for o in SETTINGS] + [((), False)]:
        calls.clear()
        sim = RoundSimulation(jobs, cluster, policy_for("shockwave", 0, system=rules, solver_options=options,
                                                        fair_plan=fair), table, SimulationConfig.for_system(rules))
        while sim.step():
            pass
        statuses = [e["status"] for e in sim.sched.decide.solve_log]
        assert ("fair plan" in statuses) == fair and bool(calls) != fair
        runs.append(sorted((j, r.finish_time_s) for j, r in sim.result().jobs.items()))
    assert runs[0] == runs[1] == runs[2]


def test_fair_plan_is_read_checked_and_refused_where_it_cannot_act():
    assert load_planner_config({"fair_plan": False}).fair_plan is False
    assert load_planner_config(None).fair_plan is True
    with pytest.raises(SpecError, match="fair_plan must be true or false"):
        load_planner_config({"fair_plan": "yes"})
    with pytest.raises(SpecError, match="fair_plan applies to fairness solver only"):
        load_planner_config({"fairness": "share", "fair_plan": False})
