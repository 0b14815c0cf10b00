"""Policies: registry, feasibility of every allocation, and optimality against independent formulations."""

import logging

import numpy as np
import pytest

from hetsched import ClusterSpec, HetschedError
from hetsched.core.registry import make_policy, policy_names
from hetsched.decide.gavel import view_from_jobs
from hetsched.decide.gavel.ftf import FinishTimeFairness
from hetsched.decide.gavel.las import las_coefficients
from hetsched.decide.gavel.makespan import reference_throughput
from hetsched.traces import GavelGenerator

import policy_reference as ref

GAVEL_NAMES = [
    "max_min_fairness", "max_min_fairness_perf", "max_min_fairness_packed",
    "max_min_fairness_water_filling", "max_min_fairness_water_filling_perf",
    "max_min_fairness_water_filling_packed", "finish_time_fairness", "finish_time_fairness_perf",
    "finish_time_fairness_packed", "min_total_duration", "min_total_duration_perf", "min_total_duration_packed",
    "gavel_fifo", "fifo_perf", "fifo_packed", "max_sum_throughput_perf", "max_sum_throughput_normalized_by_cost_perf",
    "max_sum_throughput_normalized_by_cost_perf_SLOs", "max_sum_throughput_normalized_by_cost_packed_SLOs",
    "isolated", "gandiva", "allox",
]
PRICES = {"v100": 0.74, "p100": 0.43, "k80": 0.135}


def instance(gavel_table, seed, m, multi_gpu=False, gpus=None, now=20_000.0, slos=False):
    jobs = GavelGenerator(seed=seed, mean_interarrival_s=300, multi_gpu=multi_gpu, slos=slos,
                          multi_priority=True, throughputs=gavel_table).jobs(m)
    rng = np.random.default_rng(seed)
    remaining = [j.total_steps * rng.uniform(0.2, 1.0) for j in jobs]
    cluster = ClusterSpec.parse(gpus or f"{max(1, m // 6)}:{max(1, m // 6)}:{max(1, m // 6)}",
                                prices_per_hour=PRICES)
    return view_from_jobs(jobs, cluster, gavel_table, now=now, remaining_steps=remaining)


def test_every_gavel_name_resolves():
    for name in GAVEL_NAMES:
        assert make_policy(name).name == name
    assert set(GAVEL_NAMES) <= set(policy_names())
    assert make_policy("allox_alpha=0.5").alpha == 0.5
    with pytest.raises(HetschedError, match="unknown policy"):
        make_policy("max_min_fairness_turbo")


def assert_feasible(view, alloc, tol=1e-6):
    assert alloc.x.shape == (view.num_jobs, view.num_types)
    assert np.all(alloc.x >= 0) and np.all(alloc.x_pairs >= 0)
    assert np.all(alloc.time_per_job() <= 1 + tol)
    assert np.all(alloc.gpus_used(view.scale_factor) <= view.capacity + tol)
    if len(alloc.pairs):
        i, k = alloc.pairs.T
        assert np.all(i < k)                                           # each pair once, no self-pairs
        assert np.all(view.scale_factor[i] == view.scale_factor[k])
        assert len(np.unique(alloc.pairs, axis=0)) == len(alloc.pairs)


@pytest.mark.parametrize("name", GAVEL_NAMES)
@pytest.mark.parametrize("seed, multi_gpu", [(0, False), (1, True)])
def test_allocations_are_feasible(gavel_table, name, seed, multi_gpu):
    view = instance(gavel_table, seed, 30, multi_gpu=multi_gpu, slos=True)
    policy = make_policy(name)
    for _ in range(2):   # stateful policies run twice
        alloc = policy.allocate(view)
        if name == "allox" and multi_gpu:
            # AlloX as the artifacts run it gives a gang 1 / s and lets it keep that share without holding a
            # worker, so a type can be over-subscribed; the round mechanism places gangs by priority.
            assert np.all((alloc.x == 0) | (alloc.x == 1 / view.scale_factor[:, None]))
            continue
        assert_feasible(view, alloc)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("aware, packing", [(True, False), (False, False), (True, True)])
def test_las_is_optimal(gavel_table, seed, aware, packing):
    view = instance(gavel_table, seed, 12, multi_gpu=seed % 2 == 1, gpus="2:2:2")
    name = "max_min_fairness" + ("_packed" if packing else "_perf" if aware else "")
    policy = make_policy(name)
    alloc = policy.allocate(view)
    T = view.throughput if aware else np.ones_like(view.throughput)
    coef = las_coefficients(policy.effective_view(view))
    expected, _ = ref.maximise_min(view, coef, packing, T)
    assert policy.objective(view, alloc) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("suffix", ["", "_perf", "_packed"])
def test_makespan_is_optimal(gavel_table, seed, suffix):
    view = instance(gavel_table, seed, 10, multi_gpu=seed == 1, gpus="2:2:2")
    policy = make_policy("min_total_duration" + suffix, **({"bisection": False} if suffix == "" else {}))
    alloc = policy.allocate(view)
    T = reference_throughput(view) if suffix == "" else view.throughput
    assert policy.objective(view, alloc) == pytest.approx(ref.max_theta(view, suffix == "_packed", T), rel=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_makespan_bisection_is_within_its_precision(gavel_table, seed):
    """The artifacts' agnostic makespan search: a feasible point within 5 % of the optimal makespan."""
    view = instance(gavel_table, seed, 10, multi_gpu=seed == 1, gpus="2:2:2")
    policy = make_policy("min_total_duration")
    assert policy.bisection
    best = ref.max_theta(view, False, reference_throughput(view))
    got = policy.objective(view, policy.allocate(view))
    assert best * (1 - 1e-6) <= got <= best * 1.05 * (1 + 1e-6)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("suffix", ["", "_perf", "_packed"])
def test_ftf_is_optimal(gavel_table, seed, suffix):
    view = instance(gavel_table, seed, 8, gpus="1:1:1")
    policy = make_policy("finish_time_fairness" + suffix)
    alloc = policy.allocate(view)
    D = FinishTimeFairness(heterogeneity_aware=suffix != "").rho_denominator(view)
    T = reference_throughput(view) if suffix == "" else view.throughput
    assert policy.objective(view, alloc) == pytest.approx(ref.ftf_rho(view, D, suffix == "_packed", T), rel=1e-6)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name, cost, packing", [
    ("max_sum_throughput_perf", False, False),
    ("max_sum_throughput_normalized_by_cost_perf", True, False),
    ("max_sum_throughput_normalized_by_cost_packed_SLOs", True, True),
])
def test_max_sum_throughput_is_optimal(gavel_table, seed, name, cost, packing):
    view = instance(gavel_table, seed, 10, gpus="2:2:2")   # no SLOs: the SLO rows are absent
    policy = make_policy(name)
    alloc = policy.allocate(view)
    w = 1 / np.array([PRICES[g] for g in view.gpu_types]) if cost else np.ones(view.num_types)
    assert policy.objective(view, alloc) == pytest.approx(ref.max_sum(view, w, packing), rel=1e-6)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("packing", [False, True])
def test_water_filling_is_lexicographically_optimal(gavel_table, seed, packing):
    view = instance(gavel_table, seed, 8, gpus="1:1:1")
    policy = make_policy("max_min_fairness_water_filling" + ("_packed" if packing else "_perf"))
    alloc = policy.allocate(view)
    ours = np.sort(las_coefficients(view) * alloc.effective_throughput(view))
    expected = ref.water_filling_levels(view, las_coefficients(view), packing)
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-7)
    # Water filling dominates single-shot LAS at its minimum and is never worse in total.
    las = make_policy("max_min_fairness" + ("_packed" if packing else "_perf"))
    single = np.sort(las_coefficients(view) * las.allocate(view).effective_throughput(view))
    assert ours[0] == pytest.approx(single[0], rel=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_both_pair_forms_agree_and_decompose_exactly(gavel_table, seed):
    """Unit-pair and unit-key space sharing: same LAS optimum; job pairs reproduce each unit's throughput."""
    from hetsched.decide.gavel.formulation import build_polytope
    from hetsched.decide.gavel.units import make_units
    from hetsched.decide.gavel.lp import epigraph_objective, solve_on_polytope

    view = instance(gavel_table, seed, 60, gpus="4:4:4")
    units = make_units(view, aggregate=True)
    assert units.mult.max() >= 2                      # same-unit pairs are exercised
    coef = las_coefficients(view)[units.first]
    optima = {}
    for form in ("unit", "key"):
        poly = build_polytope(view, units, packing=True, pair_form=form)
        assert poly.unit_pairs == (form == "unit")
        epi = poly.effective.scaled(-coef).with_column(poly.num_vars, 1.0)
        sol = solve_on_polytope(poly, epigraph_objective(poly), [epi], extra_vars=1)
        assert sol.ok
        optima[form] = -sol.objective
        x = sol.x[:-1]
        alloc = poly.allocation(x)
        assert_feasible(view, alloc)
        assert len(alloc.pairs) > 0
        per_unit = poly.E @ x
        np.testing.assert_allclose(alloc.effective_throughput(view), per_unit[units.of_job], rtol=1e-3, atol=1e-3)
    assert optima["unit"] == pytest.approx(optima["key"], rel=1e-6)
    with pytest.raises(HetschedError, match="pair_form"):
        build_polytope(view, units, packing=True, pair_form="job")


@pytest.mark.parametrize("seed", range(3))
def test_unit_pairs_decompose_any_point(gavel_table, seed):
    """Any y >= 0 in the unit-pair form (same-unit pairs included) becomes job pairs with the same per-job
    time and throughput: the decomposition is exact, not just at LP optima."""
    from hetsched.decide.gavel.formulation import build_polytope
    from hetsched.decide.gavel.units import make_units

    view = instance(gavel_table, seed, 40, gpus="2:2:2")
    units = make_units(view, aggregate=True)
    poly = build_polytope(view, units, packing=True, pair_form="unit")
    same = poly.pair_vars[:, 0] == poly.pair_vars[:, 1]
    assert same.any() and (~same).any()
    rng = np.random.default_rng(seed)
    x = np.zeros(poly.num_vars)
    n = view.num_types
    x[: units.size * n] = rng.uniform(0, 0.1, units.size * n)
    x[units.size * n:] = rng.uniform(0.01, 0.2, len(poly.pair_vars))
    alloc = poly.allocation(x)
    np.testing.assert_allclose(alloc.time_per_job(), (poly.T @ x)[units.of_job], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(alloc.effective_throughput(view), (poly.E @ x)[units.of_job], rtol=1e-9)
    i, k = alloc.pairs.T
    assert np.all(i < k)


def test_hierarchical_entity_shares(gavel_table):
    """Fig. 11 setting: entities with weights 1:2:3 split a homogeneous cluster 1:2:3."""
    from dataclasses import replace
    jobs = GavelGenerator(seed=0, static=True, throughputs=gavel_table).jobs(12)
    jobs = [j.with_(job_type="ResNet-18 (batch size 64)") for j in jobs]
    view = view_from_jobs(jobs, ClusterSpec.parse("0:0:6"), gavel_table)
    view = replace(view, entity=np.arange(12) // 4, entity_weight=np.array([1.0, 2.0, 3.0]))
    for entity_policy in ("fairness", "fifo"):
        alloc = make_policy("max_min_fairness_water_filling_perf", entity_policy=entity_policy).allocate(view)
        per_entity = np.bincount(view.entity, weights=alloc.x.sum(axis=1))
        np.testing.assert_allclose(per_entity / per_entity.sum(), [1 / 6, 2 / 6, 3 / 6], atol=1e-6)
        if entity_policy == "fifo":
            # Each job uses at most one GPU: entity e runs its e+1 oldest jobs, nobody else.
            assert np.flatnonzero(alloc.x.sum(axis=1) > 1e-6).tolist() == [0, 4, 5, 8, 9, 10]


def test_fifo_perf_takes_fastest_type_in_order(gavel_table):
    view = instance(gavel_table, 0, 10, gpus="2:2:2")
    alloc = make_policy("fifo_perf").allocate(view)
    running = np.flatnonzero(alloc.x.sum(axis=1))
    assert running.tolist() == list(range(6))                      # strict arrival order, whole GPUs
    assert set(alloc.x[running].sum(axis=1)) == {1.0}


def test_agnostic_fifo_uses_every_type(gavel_table):
    """Unlike the artifact's buggy baseline (spec s.10.2), the random type choice is used."""
    jobs = GavelGenerator(seed=0, static=True, throughputs=gavel_table).jobs(12)
    view = view_from_jobs(jobs, ClusterSpec.parse("4:4:4"), gavel_table)
    alloc = make_policy("gavel_fifo", seed=0).allocate(view)
    assert (alloc.x.sum(axis=0) == 4).all()


def test_packed_policies_accept_mixed_scale_factors(gavel_table):
    """The artifact's packed LP breaks on mixed scale factors (spec s.10.1)."""
    view = instance(gavel_table, 1, 40, multi_gpu=True, gpus="4:4:4")
    assert len(set(view.scale_factor.tolist())) > 1
    for name in ("max_min_fairness_packed", "min_total_duration_packed", "finish_time_fairness_packed"):
        assert_feasible(view, make_policy(name).allocate(view))


def test_solver_failure_falls_back_to_isolated(gavel_table, caplog, monkeypatch):
    import hetsched.decide.gavel.lp as lp
    import hetsched.decide.gavel.las as las
    from hetsched.solvers import Solution

    def broken(*args, **kwargs):
        return Solution(None, "error", float("nan"), "broken")

    monkeypatch.setattr(las, "solve_lp_csc", broken)       # the per-job LAS path
    monkeypatch.setattr(lp, "solve", broken)                # every polytope-based problem
    view = instance(gavel_table, 0, 10)
    names = ("max_min_fairness_perf", "max_min_fairness_packed", "min_total_duration_perf",
             "finish_time_fairness_perf", "max_min_fairness_water_filling_perf", "max_sum_throughput_perf")
    with caplog.at_level(logging.WARNING):
        for name in names:
            alloc = make_policy(name).allocate(view)
            assert_feasible(view, alloc)
            assert alloc.x.sum() > 0
    fell_back = [r.getMessage() for r in caplog.records if "falling back to the isolated allocation" in r.getMessage()]
    assert sorted(m.split(":")[0] for m in fell_back) == sorted(f"policy {n}" for n in names)


@pytest.mark.parametrize("solver", ["clarabel", "highs"])
def test_other_solvers_agree(gavel_table, solver):
    view = instance(gavel_table, 2, 20)
    base = make_policy("max_min_fairness_perf")
    other = make_policy("max_min_fairness_perf", solver=solver)
    assert other.objective(view, other.allocate(view)) == pytest.approx(
        base.objective(view, base.allocate(view)), rel=1e-6)


def test_aggregation_does_not_change_the_optimum(gavel_table):
    view = instance(gavel_table, 3, 40)
    a = make_policy("max_min_fairness_perf", aggregate=True)
    b = make_policy("max_min_fairness_perf", aggregate=False)
    assert a.objective(view, a.allocate(view)) == pytest.approx(b.objective(view, b.allocate(view)), rel=1e-7)


def test_allox_starts_the_first_jobs_of_the_artifacts_matching(gavel_table):
    """The matrix as docs/rules.md#allox lays it out: workers type by type in name order, position-major columns
    [1 P, 2 P, ...], plus each job's time since arrival. That constant per row leaves the optimal cost alone;
    the jobs started are those first on a worker in the solver's matching of that matrix."""
    from scipy.optimize import linear_sum_assignment

    view = instance(gavel_table, 4, 9, gpus="2:1:2")
    alloc = make_policy("allox").allocate(view)
    assert np.count_nonzero(alloc.x.sum(axis=1)) == 5
    types = sorted(range(view.num_types), key=lambda t: view.gpu_types[t])
    workers = np.repeat(types, view.capacity.astype(int)[types])
    order = sorted(range(view.num_jobs), key=lambda i: -view.time_since_arrival[i])
    p = view.remaining_steps[order][:, None] / np.maximum(view.throughput[np.ix_(order, workers)], 1e-10)
    full = np.concatenate([(q + 1) * p for q in range(view.num_jobs)], axis=1)
    delayed = full + view.time_since_arrival[order][:, None]
    r, c = linear_sum_assignment(delayed)
    r0, c0 = linear_sum_assignment(full)
    assert full[r, c].sum() == pytest.approx(full[r0, c0].sum(), rel=1e-12)
    position, worker = np.divmod(c, len(workers))
    expected = set()
    for w in range(len(workers)):
        on_w = np.flatnonzero(worker == w)
        if len(on_w):
            expected.add((order[r[on_w[np.argmax(position[on_w])]]], int(workers[w])))
    started = {(int(i), int(np.argmax(alloc.x[i]))) for i in np.flatnonzero(alloc.x.sum(axis=1))}
    assert started == expected


def test_allox_keeps_the_optimal_cost_above_the_full_matrix_limit(gavel_table, monkeypatch):
    """Above FULL_MATRIX_MAX the matrix keeps ceil(m / F) positions on a type with F free workers: the optimum
    a full matrix would reach is still reachable (jobs of a type share its identical workers round-robin)."""
    from scipy.optimize import linear_sum_assignment

    from hetsched.decide.gavel import allox

    view = instance(gavel_table, 2, 40, gpus="4:4:4")
    policy, waiting = make_policy("allox"), list(range(view.num_jobs))
    workers = np.repeat(np.arange(view.num_types), view.capacity.astype(int))
    full = policy.costs(view, waiting, workers)
    monkeypatch.setattr(allox, "FULL_MATRIX_MAX", 0)
    cut = policy.costs(view, waiting, workers)
    assert full.shape == (40, 40 * 12) and cut.shape == (40, 10 * 12)      # 10 = ceil(40 / 4) positions
    best = [m[linear_sum_assignment(m)].sum() for m in (full, cut)]
    assert best[1] == pytest.approx(best[0], rel=1e-12)


def test_allox_gangs_get_one_over_scale_factor_and_are_matched_again():
    """A single-GPU job given its GPU holds it; a gang first on a worker gets 1 / s of its type, never holds a
    worker (its allocation does not sum to 1) and is matched again at the next call, keeping its share."""
    from hetsched.decide.gavel.allox import AlloX
    from hetsched.decide.gavel.base import PolicyView

    def view(ids, scale, remaining):
        k = len(ids)
        return PolicyView(job_ids=np.array(ids), gpu_types=("v100",), capacity=np.array([2.0]),
                          throughput=np.ones((k, 1)), scale_factor=np.array(scale, float), priority_weight=np.ones(k),
                          remaining_steps=np.array(remaining, float), time_since_arrival=np.arange(k, 0, -1.0))

    policy = AlloX()
    first = policy.allocate(view([0, 1], [4, 1], [100, 300]))
    assert first.x[:, 0].tolist() == [0.25, 1.0]
    # Job 1 holds one GPU; the gang and the new job 2 share the other: the shorter one (job 2) runs first there.
    second = policy.allocate(view([0, 1, 2], [4, 1, 1], [100, 300, 50]))
    assert second.x[:, 0].tolist() == [0.25, 1.0, 1.0]
    # Now jobs 1 and 2 hold both GPUs: nothing is free, and the gang keeps its share.
    third = policy.allocate(view([0, 1, 2], [4, 1, 1], [100, 300, 50]))
    assert third.x[:, 0].tolist() == [0.25, 1.0, 1.0]
    assert policy.allocate(view([0, 2], [4, 1], [100, 50])).x[:, 0].tolist() == [0.25, 1.0]


def test_allox_tie_seed_picks_among_optimal_matchings_only():
    """Three jobs, two identical GPUs: the shortest job runs first on one GPU and either longer job runs alone
    on the other -- an arbitrary pick the solver makes. Tie seeds must reach both picks, never a worse matching."""
    from hetsched.decide.gavel.allox import AlloX
    from hetsched.decide.gavel.base import PolicyView

    view = PolicyView(job_ids=np.array([0, 1, 2]), gpu_types=("v100",), capacity=np.array([2.0]),
                      throughput=np.ones((3, 1)), scale_factor=np.ones(3), priority_weight=np.ones(3),
                      remaining_steps=np.array([500.0, 100.0, 500.0]), time_since_arrival=np.array([3.0, 2.0, 1.0]))
    picks = set()
    for seed in range(20):
        started = np.flatnonzero(AlloX(tie_seed=seed).allocate(view).x[:, 0])
        assert 1 in started and len(started) == 2
        picks.add(tuple(started))
    assert picks == {(0, 1), (1, 2)}


def _scalar_pair_quality(view, i, k):
    """The rule as written (docs/rules.md#gandiva): per GPU type in order, stop at 0 if a part is not positive."""
    total, pair = 0.0, view.pair_throughput(i, k)
    for j in range(view.num_types):
        a, b = view.throughput[i, j], view.throughput[k, j]
        if a <= 0 or b <= 0 or pair[j, 0] <= 0 or pair[j, 1] <= 0:
            return 0.0
        total += pair[j, 0] / a + pair[j, 1] / b
    return total


@pytest.mark.parametrize("seed", range(3))
def test_gandiva_pair_quality_is_the_scalar_rule(gavel_table, seed):
    from dataclasses import replace

    from hetsched.decide.gavel.gandiva import Gandiva

    view = instance(gavel_table, seed, 40)
    rng = np.random.default_rng(seed)
    colocated = view.colocated * rng.uniform(0.02, 1.0, view.colocated.shape)   # good and bad pairs
    colocated[rng.random(colocated.shape) < 0.1] = np.nan          # unmeasured pair rates
    colocated[rng.random(colocated.shape) < 0.05] = 0.0
    tput = view.throughput.copy()
    tput[rng.random(tput.shape) < 0.1] = 0.0                       # a type a job cannot use
    view = replace(view, colocated=colocated, throughput=tput)
    first, second = np.triu_indices(view.num_jobs, 1)
    got = Gandiva.pair_quality(view, first, second)
    want = np.array([_scalar_pair_quality(view, i, k) for i, k in zip(first, second)])
    assert (got == want).all()                                       # the same sums, bit for bit
    assert (want == 0).any() and (want >= 1).any() and ((want > 0) & (want < 1)).any()
    # allocate keeps exactly the remembered pairs whose quality is at least 1 (all scale factors differ, so its
    # random pass forms no new pair)
    policy, ids = Gandiva(seed=seed), view.job_ids.tolist()
    remembered = {(ids[i], ids[k]): q for i, k, q in zip(first[::7], second[::7], want[::7])}
    policy._pairs = set(remembered)
    policy.allocate(replace(view, capacity=np.ones(view.num_types),
                            scale_factor=np.arange(1, view.num_jobs + 1).astype(view.scale_factor.dtype)))
    assert policy._pairs == {p for p, q in remembered.items() if q >= 1.0}
    assert 0 < len(policy._pairs) < len(remembered)
