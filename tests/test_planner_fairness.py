"""Which plan within the gap the planner keeps (docs/rules.md#planner-fairness): the "ftf" and "share" stages and
the exact rank program give one plan whatever HiGHS's search path, and are refused where they cannot act."""

import numpy as np
import pytest

from hetsched.decide.shockwave.config import PlannerConfig, load_planner_config
from hetsched.decide.shockwave.fair_stages import type_tie_weights, tie_weights
from hetsched.decide.shockwave.milp import (WindowInputs, alike_in_order, rank_program, type_tiebreak,
                                           window_program)
from test_planner import BASES, SOLVE, instance, objective


def excess(inp: WindowInputs, n: np.ndarray, round_s: float) -> float:
    """The second stage's objective at round counts n: N max_j e_j + sum_j e_j, e_j = max(0, rho_j - rhomax)."""
    a, b, rhomax = inp.ftf_ratio
    P = np.minimum(round_s * n / inp.mean_epoch_s, inp.epochs - inp.progress)
    e = np.maximum(0.0, a - b * P - rhomax)
    return float(len(e) * e.max() + e.sum())


HIGHS_PATHS = [((), 0), ((), 1), ((("mip_heuristic_run_feasibility_jump", False),), 0), ((("presolve", "off"),), 2)]


def test_the_ftf_stages_keep_the_welfare_within_the_gap_and_give_one_plan_whatever_the_solvers_path():
    """docs/rules.md#planner-fairness: with priorities of 1 and 1e6 and a gap of 1e-3, the "ftf" plan is within the
    gap of the exact optimum on the planner's objective, exceeds rhomax no more than that optimum's plan, and is the
    same plan under HiGHS's defaults, other seeds, without feasibility jump and without presolve, where the plan
    HiGHS stops at moves on some instance."""
    moved = 0
    for seed in range(4):
        inp = instance(seed, N=30)
        rng = np.random.default_rng(100 + seed)
        inp.ftf_ratio = (rng.uniform(0.5, 4.0, 30), rng.uniform(0.0, 0.05, 30), 1.0)
        solve = {**SOLVE, "gap": 1e-3}
        exact, _ = window_program(inp, capacity=12, **SOLVE)
        best = objective(inp, exact, 6, 120.0, 1e-3)
        plans, stops = [], []
        for options, solver_seed in HIGHS_PATHS:
            inp.fairness = "solver"
            stops.append(window_program(inp, capacity=12, **solve, seed=solver_seed, options=options)[0])
            inp.fairness = "ftf"
            plan, status = window_program(inp, capacity=12, **solve, seed=solver_seed, options=options)
            assert status == "optimal"
            assert objective(inp, plan, 6, 120.0, 1e-3) >= best - 1e-3 * abs(best) - 1e-9
            assert excess(inp, plan, 120.0) <= excess(inp, exact, 120.0) + 1e-6
            assert (inp.gpus @ plan <= 12 * 6).all()
            plans.append(plan)
        assert all((p == plans[0]).all() for p in plans)
        moved += any((p != stops[0]).any() for p in stops)
    assert moved >= 1


def test_the_share_stage_keeps_the_welfare_within_the_gap_and_gives_the_worst_off_job_the_largest_share():
    """docs/rules.md#planner-fairness: with priorities of 1 and 1e6 and a gap of 1e-3, the "share" plan is within
    the gap of the exact optimum and, on one GPU type, has the largest N min_j n_j + sum_j n_j there: at least that
    of the plan HiGHS stops at, and the same value under HiGHS's defaults, other seeds, without feasibility jump and
    without presolve. Where HiGHS's plans leave a job without rounds, the share plan gives each job some."""
    raised = 0
    for seed in range(4):
        inp = instance(seed, N=30)
        solve = {**SOLVE, "gap": 1e-3}
        exact, _ = window_program(inp, capacity=24, **SOLVE)
        best = objective(inp, exact, 6, 120.0, 1e-3)
        values = []
        for options, solver_seed in HIGHS_PATHS:
            inp.fairness = "solver"
            stop, _ = window_program(inp, capacity=24, **solve, seed=solver_seed, options=options)
            inp.fairness = "share"
            plan, status = window_program(inp, capacity=24, **solve, seed=solver_seed, options=options)
            assert status == "optimal"
            assert objective(inp, plan, 6, 120.0, 1e-3) >= best - 1e-3 * abs(best) - 1e-9
            assert inp.gpus @ plan <= 24 * 6
            value = 30 * plan.min() + plan.sum()
            assert plan.min() >= stop.min() and value >= 30 * stop.min() + stop.sum()
            values.append(value)
            raised += plan.min() > stop.min()
        assert len(set(values)) == 1
    assert raised >= 1


def test_the_exact_rank_program_gives_one_order_whatever_the_solvers_path():
    """Equally ranked jobs (the same priority per round) of mixed gang sizes: the rounds depend on the search unless
    the program is solved exactly with its tie-break."""
    n, gpus, prio = np.array([3, 3, 2, 2, 4, 1]), np.array([2, 1, 2, 1, 1, 4]), np.array([6.0, 6.0, 4.0, 4.0, 8.0, 2.0])
    ranks = [rank_program(n, gpus, prio, capacity=4, rounds=6, gap=1e-3, time_limit_s=30.0, seed=seed, options=options,
                          exact=True) for options, seed in HIGHS_PATHS]
    assert all((r == ranks[0]).all() for r in ranks)
    assert (gpus @ ranks[0] <= 4).all() and (ranks[0].sum(axis=1) <= n).all()


def test_the_exact_rank_program_separates_nearly_equal_ranks_whatever_the_solvers_path():
    """Rank costs 1e-5 apart (as the priorities of a long run become): with HiGHS's default MIP feasibility
    tolerance the plans' costs moved with the path; the exact program closes it (fair_stages.exact_options)."""
    gpus, n = np.array([4, 1, 1, 2, 4, 4, 2, 4, 4, 4]), np.array([6, 5, 3, 6, 1, 1, 4, 1, 3, 1])
    a = np.array([1.0000006515419737, 1.5000000843907602, 1.5000124593215542, 1.5000147495336644, 1.0000078460985267,
                  1.5000047340523497, 1.000007053337046, 1.500004487716098, 1.5000111112272432, 1.5000041962082962])
    ranks = [rank_program(n, gpus, a * n, capacity=8, rounds=12, gap=1e-3, time_limit_s=30.0, seed=seed,
                          options=options, exact=True) for options, seed in HIGHS_PATHS]
    assert all((r == ranks[0]).all() for r in ranks)
    assert (gpus @ ranks[0] <= 8).all() and (ranks[0].sum(axis=1) == n).all()


def test_alike_jobs_take_their_round_sets_in_one_order_whatever_order_the_solver_gave():
    """Jobs of equal rank cost, rounds and gang size can swap their round sets at no cost (the exact program's
    tie-break between them is below HiGHS's tolerances): the earliest set goes to the last of them."""
    n, gpus, a = np.array([2, 2, 2, 1, 0]), np.array([1, 1, 1, 1, 2]), np.array([0.5, 0.5, 0.5, 0.5, 0.0])
    sets = [[0, 3], [1, 2], [0, 1]]                  # sums 3, 3, 1: [0, 1], then [0, 3] before [1, 2]
    plans = []
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        y = np.zeros((5, 4), bool)
        for job, k in enumerate(order):
            y[job, sets[k]] = True
        y[3, 2] = True
        plans.append(alike_in_order(y.copy(), n, gpus, a))
    assert all((p == plans[0]).all() for p in plans)
    assert [np.flatnonzero(r).tolist() for r in plans[0]] == [[1, 2], [0, 3], [0, 1], [2], []]


def test_the_ftf_stages_are_a_planner_setting_refused_where_they_cannot_act():
    assert load_planner_config({"fairness": "ftf"}).fairness == "ftf"
    assert load_planner_config({"fairness": "share"}).fairness == "share"
    with pytest.raises(Exception, match="aggregate"):
        PlannerConfig(fairness="share", formulation="artifact")
    with pytest.raises(Exception, match="fairness"):
        load_planner_config({"fairness": "nsw"})
    with pytest.raises(Exception, match="aggregate"):
        PlannerConfig(fairness="ftf", formulation="artifact")


@pytest.mark.parametrize("seed", range(3))
def test_the_share_stage_on_one_type_is_the_lexicographic_best_plan_within_the_gap_by_enumeration(seed):
    """docs/rules.md#planner-fairness: on one GPU type the share stage's objective is in whole numbers, so HiGHS
    resolves its tie-break exactly. Every count vector of 5 jobs over 6 rounds is enumerated: among those that fit
    and are within the gap of the best welfare, the plan is the one with the largest N min_j n_j + sum_j n_j, then
    the smallest sum_j w_j n_j (w by remaining time), on every HiGHS path."""
    N, R, cap = 5, 6, 3
    inp = instance(10 + seed, N=N)
    grid = np.array(np.meshgrid(*[np.arange(R + 1)] * N, indexing="ij")).reshape(N, -1).T
    grid = grid[grid @ inp.gpus <= cap * R]
    welfare = np.array([objective(inp, n, R, 120.0, 1e-3) for n in grid])
    best = welfare.max()
    within = grid[welfare >= best - 1e-3 * abs(best)]
    share = N * within.min(axis=1) + within.sum(axis=1)
    top = within[share == share.max()]
    tie = top @ tie_weights(inp.remaining_s)
    assert (tie == tie.min()).sum() == 1                        # one best plan
    expected = top[np.argmin(tie)]
    inp.fairness = "share"
    for options, solver_seed in HIGHS_PATHS:
        plan, status = window_program(inp, capacity=cap, **{**SOLVE, "gap": 1e-3}, seed=solver_seed, options=options)
        assert status == "optimal"
        assert plan.tolist() == expected.tolist()


def typed_welfare(inp: WindowInputs, n: np.ndarray, rounds: int, round_s: float, k: float) -> np.ndarray:
    """The planner's objective at (plans, N, W) round counts on several types, its type tie-break included."""
    P = np.minimum(round_s * (n * inp.speed).sum(axis=2) / inp.mean_epoch_s, inp.epochs - inp.progress)
    U = np.interp((inp.progress + P) / inp.epochs, BASES, np.log(np.maximum(BASES, 1e-6)))
    rem = np.maximum(0.0, inp.remaining_s - inp.mean_epoch_s * P)
    N = n.shape[1]
    return ((inp.priority * U).sum(axis=1) / (N * rounds) - k * rem.max(axis=1)
            - (n * type_tiebreak(inp.speed, rounds)).sum(axis=(1, 2)))


# 7-21: instances where HiGHS's own plan is another one; 8, 45: where steps of 1/10 would give another plan
@pytest.mark.parametrize("seed", [7, 8, 11, 15, 21, 45])
def test_the_share_stage_on_several_types_is_the_lexicographic_best_plan_within_the_gap_by_enumeration(seed):
    """docs/rules.md#planner-fairness: on several types a round on type w counts q_jw / 20 of a round at
    the job's fastest rate and the stage is in whole numbers. Every plan of 3 jobs on 2 types over 4 rounds is
    enumerated: among those that fit and are within the gap of the best welfare, the plan is the one with the
    largest N min_j S_j + sum_j S_j (S_j = sum_w q_jw n_jw), then the smallest sum w_jw n_jw, on every HiGHS path."""
    N, R, cap = 3, 4, np.array([2, 2])                          # 3 jobs, 2 types of 2 GPUs
    rng = np.random.default_rng(30 + seed)
    inp = instance(30 + seed, N=N)
    inp.gpus = rng.choice([1, 2], N)
    inp.speed = np.c_[np.ones(N), rng.uniform(0.3, 1.6, N)]
    per_job = np.array([(a, b) for a in range(R + 1) for b in range(R + 1 - a)])
    grid = per_job[np.array(np.meshgrid(*[np.arange(len(per_job))] * N, indexing="ij")).reshape(N, -1).T]
    grid = grid[((grid * inp.gpus[None, :, None]).sum(axis=1) <= cap * R).all(axis=1)]
    welfare = typed_welfare(inp, grid, R, 120.0, 1e-3)
    best = welfare.max()
    edge = best - 1e-3 * abs(best)
    assert not (np.abs(welfare - edge) < 1e-6 * abs(best)).any()       # no plan on the bound's edge
    within = grid[welfare >= edge]
    q = np.rint(20 * inp.speed / inp.speed.max(axis=1, keepdims=True))     # the rule's steps of 1/20
    S = (within * q).sum(axis=2)
    share = N * S.min(axis=1) + S.sum(axis=1)
    top = within[share == share.max()]
    tie = (top * type_tie_weights(inp.speed, inp.remaining_s)).sum(axis=(1, 2))
    assert (tie == tie.min()).sum() == 1                        # one best plan
    expected = top[np.argmin(tie)]
    inp.fairness = "share"
    for options, solver_seed in HIGHS_PATHS:
        plan, status = window_program(inp, capacity=cap, **{**SOLVE, "rounds": R, "gap": 1e-3}, seed=solver_seed,
                                      options=options)
        assert status == "optimal"
        assert plan.tolist() == expected.tolist()


def test_the_several_type_tie_break_orders_jobs_then_types_and_no_trade_between_two_jobs_is_a_tie():
    """docs/rules.md#planner-fairness: among plans of equal share, rounds go to the jobs with more time left and to
    a job's faster types; two jobs trading a round between the same two types, or one job moving a round
    off its middle type to each side, changes the tie-break."""
    rng = np.random.default_rng(5)
    speed, remaining = rng.uniform(0.2, 2.0, (7, 3)), rng.uniform(100, 1e4, 7)
    w = type_tie_weights(speed, remaining)
    by_time = np.sort(w, axis=1)[np.argsort(-remaining)]          # each job's weights, fastest type first
    assert (by_time[:-1] < by_time[1:]).all()
    assert all((np.argsort(w[j]) == np.argsort(-speed[j], kind="stable")).all() for j in range(7))
    for j in range(7):                  # a round off the middle type to each side: not a tie at evenly spaced shares
        fast, middle, slow = np.argsort(-speed[j], kind="stable")
        assert w[j, fast] - 2 * w[j, middle] + w[j, slow] != 0
    trade = (w[:, :, None] - w[:, None, :])                       # j moves a round from type b to type a
    for j in range(7):
        for k in range(j + 1, 7):
            off = ~np.eye(3, dtype=bool)
            assert (trade[j][off] != trade[k][off]).all()


def test_the_several_type_share_stage_refuses_a_window_too_large_for_its_whole_numbers():
    """docs/rules.md#planner-fairness: past 2^53 a double holds no whole numbers, so the stage refuses the window
    before solving anything (5,000 jobs on 3 types over 20 rounds)."""
    from hetsched.decide.shockwave.fair_stages import share_within_gap

    N, W, R = 5000, 3, 20
    with pytest.raises(ValueError, match="5000 jobs on 3 GPU types are too many"):
        share_within_gap(None, np.zeros(N * W), None, None, None, None, np.full(N * W, float(R)), None,
                         np.ones((N, W)), R, np.arange(N, dtype=float), gap=1e-3, time_limit_s=1.0)


def stopped_stages(monkeypatch, answer: bool = True) -> list:
    """Every lexicographic stage stops as at its time limit: with its incumbent (`answer`) or with none."""
    from dataclasses import replace

    from hetsched.decide.shockwave import fair_stages

    calls, solve = [], fair_stages.solve_milp

    def stopped(*args, **kwargs):
        res = solve(*args, **kwargs)
        calls.append(res.status)
        return replace(res, status="feasible") if answer else replace(res, x=None, status="infeasible")

    monkeypatch.setattr(fair_stages, "solve_milp", stopped)
    return calls


@pytest.mark.parametrize("fairness", ["ftf", "share"])
@pytest.mark.parametrize("answer", [True, False])
def test_a_stage_that_stops_at_its_time_limit_is_reported_not_passed_off_as_the_one_plan(monkeypatch, fairness,
                                                                                           answer):
    """docs/rules.md#planner-fairness: a stage's plan is the one plan only when it proved its optimum. Stopped
    early (with its incumbent, or with none, which keeps the first stage's plan) the window's status says so."""
    from hetsched.decide.shockwave.fair_stages import STAGE_STOPPED

    inp = instance(1, N=30)
    rng = np.random.default_rng(101)
    inp.ftf_ratio = (rng.uniform(0.5, 4.0, 30), rng.uniform(0.0, 0.05, 30), 1.0)
    inp.fairness = fairness
    solve = {**SOLVE, "gap": 1e-3}
    assert window_program(inp, capacity=24, **solve)[1] == "optimal"
    calls = stopped_stages(monkeypatch, answer)
    plan, status = window_program(inp, capacity=24, **solve)
    assert calls == ["optimal"] and status == STAGE_STOPPED
    assert inp.gpus @ plan <= 24 * 6 and (plan >= 0).all()


def test_a_run_whose_stages_stop_warns_once_and_marks_each_window(monkeypatch, caplog):
    from hetsched.decide.shockwave.core import ShockwavePolicy
    from hetsched.decide.shockwave.fair_stages import STAGE_STOPPED
    from hetsched.model.cluster import ClusterSpec
    from hetsched.model.jobs import AdaptationMode, Job
    from hetsched.sim.simulator import RoundSimulation, SimulationConfig

    calls = stopped_stages(monkeypatch)
    jobs = [Job(i, 60.0 * i, "LM (batch size 20)", 1 + (i % 2), 3000.0 * (i + 1), mode=AdaptationMode.GNS)
            for i in range(8)]
    sim = RoundSimulation(jobs, ClusterSpec.load("v100=2"), ShockwavePolicy(fairness="share"), "shockwave_tacc",
                          SimulationConfig.for_system("shockwave"), record_timeline=False)
    while sim.step():
        pass
    log = sim.sched.decide.solve_log
    stopped = [e for e in log if e["status"] == STAGE_STOPPED]
    assert calls and len(stopped) == len(calls)
    assert caplog.text.count("stage stopped at its time limit") == 1
    assert all(np.isfinite(r.finish_time_s) for r in sim.result().jobs.values())


def test_the_share_setting_plans_the_fair_finish_attempt_with_its_stage_too(monkeypatch):
    """docs/rules.md#planner-fairness: under "share" every window the program solves, the fair-finish attempt's
    included, keeps the stage's one plan, not the plan where HiGHS stopped."""
    from hetsched.decide.shockwave import core
    from hetsched.decide.shockwave.core import ShockwavePolicy
    from hetsched.model.cluster import ClusterSpec
    from hetsched.model.jobs import AdaptationMode, Job
    from hetsched.sim.simulator import RoundSimulation, SimulationConfig

    seen, program = [], core.window_program

    def recorded(inp, **kwargs):
        seen.append((inp.ftf_slack_s is not None, inp.fairness))
        return program(inp, **kwargs)

    monkeypatch.setattr(core, "window_program", recorded)
    jobs = [Job(i, 60.0 * i, "LM (batch size 20)", 1 + (i % 2), 3000.0 * (i + 1), mode=AdaptationMode.GNS)
            for i in range(8)]
    policy = ShockwavePolicy(fairness="share", rhomax=10.0)       # fair finishes within reach: attempts succeed
    sim = RoundSimulation(jobs, ClusterSpec.load("v100=2"), policy, "shockwave_tacc",
                          SimulationConfig.for_system("shockwave"), record_timeline=False)
    while sim.step():
        pass
    attempts = [fairness for attempt, fairness in seen if attempt]
    assert attempts and set(attempts) == {"share"}
    assert {fairness for _, fairness in seen} == {"share"}
