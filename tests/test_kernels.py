"""The round kernels (compiled/_rounds.c, and their reference loops in compiled/kernels.py) give the numpy path's
results bit for bit; so do the numba kernels of the ranking, the type-order draws and the pairings."""

import numpy as np
import pandas as pd
import pytest

from hetsched import ClusterSpec
from hetsched.compiled import kernels, ranking, round_kernels
from hetsched.place import compiled_placement
from hetsched.model.cluster import GAVEL_GCP_PRICES
from hetsched.sim.simulator import simulate
from hetsched.traces import GavelGenerator

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="numba is not installed or HETSCHED_KERNELS=0")

#: The two ways to run a round kernel: compiled/_rounds.c's loop (where it was built) and its reference loop.
PATHS = [pytest.param("c", marks=pytest.mark.skipif(round_kernels._rounds is None, reason="built without C")),
         "python"]


def _path(name, path):
    return getattr(round_kernels._rounds, name) if path == "c" else getattr(kernels, name)


def _keys(rng, n):
    """Keys with ties, NaN, inf and signed zeros, as priorities, deficits and allocations can have."""
    pool = np.array([0.0, -0.0, 1.0, 2.5, -3.0, np.inf, -np.inf, np.nan, 1e-300, 7.0])
    return [np.where(rng.random(n) < 0.5, rng.choice(pool, n), rng.integers(-3, 4, n).astype(float))
            for _ in range(3)]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_rank_is_numpys_lexsort(compiled):
    rank = ranking._rank if compiled else ranking._rank.py_func
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 3, 7, 64, 301):
        for _ in range(20 if n < 100 else 3):
            k3, k2, k1 = _keys(rng, n)
            np.testing.assert_array_equal(rank(k3, k2, k1), np.lexsort((k1, k2, k3)))


def _walk_numpy(t, S, alloc, deficit, in_alloc, ok, need_priority, members, escale, scale, capacity, order):
    """The numpy select (select/priority.py) on the same arrays, through a stand-in scheduler."""
    from types import SimpleNamespace

    from hetsched.select.priority import PrioritySelect

    entry_table = SimpleNamespace(blocked=~ok | ~in_alloc[:, None],          # as core/entries.py derives them
                                  has_pairs=bool((members[:, 1] >= 0).any()), all_single_gpu=bool((escale == 1).all()))
    policy = SimpleNamespace(fills_idle_gpus=not need_priority, heterogeneity_aware=True, packing=False)
    sched = SimpleNamespace(t=t, S=S, alloc=alloc, deficit=deficit, ok=ok, in_alloc=in_alloc, members=members,
                            escale=escale, scale=scale, capacity=capacity, remaining=np.zeros(len(scale)),
                            entry_table=entry_table, policy=policy)
    s = PrioritySelect(sched)
    enabled, round_kernels.ENABLED = round_kernels.ENABLED, False
    try:
        return s.select(list(order))
    finally:
        round_kernels.ENABLED = enabled


@pytest.mark.parametrize("path", PATHS)
def test_select_walk_is_the_numpy_walk(path):
    """Random states: single jobs and pairs (a job alone and in pairs, partners of other scale factors),
    multi-GPU jobs, blocked and zero-allocation entries, exhausted types, FIFO's positive-priority rule."""
    walk = _path("select_walk", path)
    rng = np.random.default_rng(1)
    for trial in range(300):
        jobs, m = int(rng.integers(1, 30 if trial % 7 else 120)), int(rng.integers(1, 4))   # some lazy ranks
        slots = rng.permutation(jobs + 5)[:jobs]
        scale = np.zeros(jobs + 5, np.int64)
        scale[slots] = rng.choice([1, 1, 2, 4, 8], jobs) if trial % 2 else 1
        members = np.stack([slots, np.full(jobs, -1)], axis=1)
        if trial % 3:                                   # pairs after the single entries, as the core keeps them
            a, b = rng.choice(slots, (2, int(rng.integers(0, 2 * jobs))))
            members = np.concatenate([members, np.stack([a, b], axis=1)[a != b]])
        n = len(members)
        escale = scale[members[:, 0]]
        t = rng.choice([0.0, 360.0, 720.0, 1080.0], (n, m))
        S = rng.choice([0.0, 360.0, 3600.0], m)
        alloc = np.where(rng.random((n, m)) < 0.3, 0.0, rng.choice([0.25, 0.5, 1.0 / 3], (n, m)))
        deficit = rng.choice([0.0, -1.0, 5.0], (n, m))
        in_alloc = rng.random(n) < 0.9
        ok = rng.random((n, m)) < 0.9
        capacity = rng.integers(0, 12, m).astype(float)
        order = rng.permutation(m).astype(np.int64)
        args = (t, S, alloc, deficit, in_alloc, ok, bool(trial % 5 == 0), members, escale, scale, capacity, order)
        with np.errstate(divide="ignore", invalid="ignore"):
            want = _walk_numpy(*args)
            got = walk(*args)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def _run(policy, table, cluster="8:8:8", prices=None, **kw):
    spec = ClusterSpec.parse(cluster)
    if prices:
        spec = ClusterSpec.load(cluster, prices_per_hour={g: prices[g] for g in spec.gpu_types})
    jobs = GavelGenerator(seed=3, mean_interarrival_s=700, multi_gpu=True, throughputs=table).jobs(160)
    return simulate(jobs, spec, policy, table, record_timeline=False, **kw)


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "max_min_fairness", "gavel_fifo", "fifo_perf",
                                    "finish_time_fairness_perf", "allox", "max_min_fairness_packed", "gandiva"])
def test_simulations_match_the_numpy_path(policy, gavel_table, monkeypatch):
    """Whole runs (multi-GPU jobs, priced GPUs, space-sharing pairs) agree exactly."""
    kw = {"prices": dict(GAVEL_GCP_PRICES), "window": (20, 120)}
    fast = _run(policy, gavel_table, **kw)
    monkeypatch.setattr(kernels, "ENABLED", False)
    monkeypatch.setattr(round_kernels, "ENABLED", False)
    slow = _run(policy, gavel_table, **kw)
    pd.testing.assert_frame_equal(fast.jobs_frame(), slow.jobs_frame(), check_exact=True)
    assert (fast.num_rounds, fast.num_recomputes) == (slow.num_rounds, slow.num_recomputes)
    assert (fast.busy_gpu_seconds, fast.makespan_s) == (slow.busy_gpu_seconds, slow.makespan_s)


def _through_the_reference_loops(monkeypatch) -> None:
    """The core calls compiled/kernels.py's loops instead of C's (quiet_rounds takes its state as one object)."""
    for name in ROUND_KERNELS:
        monkeypatch.setattr(round_kernels, name, getattr(kernels, name))
    monkeypatch.setattr(round_kernels, "quiet_rounds", lambda state: kernels.quiet_rounds(*state))


ROUND_KERNELS = ("select_walk", "quiet_rounds", "run_tasks", "gpu_seconds", "account_tasks", "credit_tasks",
                 "mark_started", "codes_of", "las_program", "single_rows", "proportional_rates")


@pytest.mark.skipif(not round_kernels.ENABLED, reason="built without C, or HETSCHED_KERNELS=0")
@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "gavel_fifo", "finish_time_fairness_perf", "gandiva",
                                    "max_min_fairness_packed"])
def test_the_c_loops_run_the_reference_loops_simulations(policy, gavel_table, monkeypatch):
    """Whole runs through compiled/_rounds.c's loops and through their reference loops agree exactly (quiet rounds,
    shuffled type orders, priced GPUs, multi-GPU jobs, space-sharing pairs)."""
    kw = {"prices": dict(GAVEL_GCP_PRICES), "window": (20, 120)}
    fast = _run(policy, gavel_table, **kw)
    _through_the_reference_loops(monkeypatch)
    jitted = _run(policy, gavel_table, **kw)
    pd.testing.assert_frame_equal(fast.jobs_frame(), jitted.jobs_frame(), check_exact=True)
    assert (fast.num_rounds, fast.num_recomputes, fast.busy_gpu_seconds, fast.makespan_s) == \
        (jitted.num_rounds, jitted.num_recomputes, jitted.busy_gpu_seconds, jitted.makespan_s)


@pytest.mark.skipif(not round_kernels.ENABLED, reason="built without C, or HETSCHED_KERNELS=0")
def test_the_c_loops_credit_and_account_shockwaves_rounds(monkeypatch):
    """Shockwave's rounds (a decide stage, the preemption penalty: no quiet rounds) credit and account through the
    C loops: the same run as through the reference loops."""
    from hetsched.experiments import shockwave as W
    from hetsched.experiments.sweep import run_one

    (config,) = W.configs("tiny", ["shockwave"])
    fast = run_one(config)
    _through_the_reference_loops(monkeypatch)
    jitted = run_one(config)
    keys = ("avg_jct_s", "makespan_s", "utilization", "worst_ftf_rho", "num_rounds")
    assert {k: fast[k] for k in keys} == {k: jitted[k] for k in keys}


@pytest.mark.skipif(not round_kernels.ENABLED or compiled_placement._c_place_round is None,
                    reason="built without C, or HETSCHED_KERNELS=0")
def test_gavel_shockwave_and_synergy_runs_load_no_numba():
    """In a fresh process, a LAS-perf run, a Shockwave run and a Synergy FIFO+tune run never load numba's compiled
    code (whose first load imports numba's registries, among them numba.np.arraymath): every kernel of their rounds
    and Synergy's placement stage have a C loop."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from hetsched import ClusterSpec, load_throughputs\n"
        "from hetsched.experiments import shockwave as W\n"
        "from hetsched.experiments.sweep import run_one\n"
        "from hetsched.sim.simulator import simulate\n"
        "from hetsched.traces import GavelGenerator\n"
        "table = load_throughputs()\n"
        "jobs = GavelGenerator(seed=1, mean_interarrival_s=900, throughputs=table).jobs(60)\n"
        "simulate(jobs, ClusterSpec.parse('4:4:4'), 'max_min_fairness_perf', table, record_timeline=False)\n"
        "run_one(W.configs('tiny', ['shockwave'])[0])\n"
        "from hetsched.io.cluster_ini import synergy_cluster\n"
        "from hetsched.traces import make_generator\n"
        "synergy = make_generator('synergy', jobs_per_hour=9.0).jobs(300)\n"
        "simulate(synergy, synergy_cluster(servers=2), 'FIFO+tune', None, record_timeline=False)\n"
        "print('numba.np.arraymath' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "False"


@pytest.mark.parametrize("path", PATHS)
def test_busy_gpu_seconds_are_summed_left_to_right(path):
    """docs/rules.md#utilization: a plain left-to-right sum (np.cumsum's order), not a BLAS dot, whose order depends
    on the build; the simulator and the compiled quiet rounds both use it."""
    total = _path("gpu_seconds", path)
    rng = np.random.default_rng(1)
    differs = 0
    for n in (0, 1, 5, 33, 200):
        for _ in range(20):
            t, s = rng.random(n) * 360.0, rng.integers(1, 9, n).astype(float)
            ordered = float(np.cumsum(t * s)[-1]) if n else 0.0
            assert total(t, s) == ordered
            differs += n > 0 and float(np.sum(np.sort(t * s)[::-1])) != ordered
    assert differs          # the order matters on these inputs, so the test would see another one


@pytest.mark.parametrize("path", PATHS)
def test_codes_are_numpys_unique(path):
    codes = _path("codes_of", path)
    rng = np.random.default_rng(2)
    for n in (0, 1, 5, 40, 300):
        values = rng.integers(-2, 7, n)
        distinct, code = codes(values)
        want, inverse = np.unique(values, return_inverse=True)
        np.testing.assert_array_equal(distinct, want)
        np.testing.assert_array_equal(code, inverse.ravel())


@pytest.mark.parametrize("path", PATHS)
def test_las_program_is_the_numpy_program(path):
    """The per-job LAS program's data bit for bit, with zero and NaN proportional throughputs and weights."""
    from hetsched.decide.gavel.base import PolicyView
    from hetsched.decide.gavel.las import _cvxpy_layout, _program
    from hetsched.decide.gavel.shares import proportional_throughput

    program = _path("las_program", path)
    rng = np.random.default_rng(3)
    for m, n in ((1, 1), (3, 2), (40, 3), (97, 4)):
        tput = rng.random((m, n)) * rng.choice([0.0, 1.0, 7.3, 1e3], (m, n))
        view = PolicyView(job_ids=np.arange(m), gpu_types=tuple(f"g{j}" for j in range(n)),
                          capacity=rng.integers(1, 40, n).astype(float), throughput=tput,
                          scale_factor=rng.choice([1, 2, 4, 8], m), priority_weight=rng.choice([0.5, 1.0, 3.0], m),
                          remaining_steps=np.ones(m), time_since_arrival=np.zeros(m))
        prop = proportional_throughput(view)
        prop[::5] = np.nan
        indices, indptr, template, x_cols = _cvxpy_layout(m, n)
        want = _program(view, prop, m, n, template, x_cols)
        got = program(view.throughput, view.priority_weight, view.scale_factor, prop, view.capacity, template, x_cols)
        for a, b in zip(got, want):
            assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("interarrival", [900, 30000], ids=["busy", "idle-gaps"])
def test_quiet_rounds_keep_progress_reports_and_the_round_limit(interarrival, gavel_table, monkeypatch):
    """Steps that run further quiet rounds report progress after the same rounds, and stop at the same limit
    (also when the cluster idles between arrivals: an idle step runs no round)."""
    from hetsched.sim.simulator import RoundSimulation, SimulationError

    jobs = GavelGenerator(seed=4, mean_interarrival_s=interarrival, throughputs=gavel_table).jobs(120)
    sim = RoundSimulation(jobs, ClusterSpec.parse("4:4:4"), "max_min_fairness_perf", gavel_table,
                          record_timeline=False)
    steps = 1
    while sim.step():                                  # one round per step (budget 0): the reference count
        steps += 1
    reports = {}
    for enabled in (True, False):
        monkeypatch.setattr(round_kernels, "ENABLED", enabled)
        seen = reports[enabled] = []
        run = lambda **kw: simulate(jobs, ClusterSpec.parse("4:4:4"), "max_min_fairness_perf",  # noqa: E731
                                    gavel_table, record_timeline=False, **kw)
        assert run(max_rounds=steps, on_progress=lambda now, done: seen.append((now, done))).makespan_s == \
            sim.result().makespan_s
        for progress in (None, lambda now, done: None):
            with pytest.raises(SimulationError, match=f"max_rounds={steps - 1}"):
                run(max_rounds=steps - 1, on_progress=progress)
    assert len(reports[True]) == len(range(0, steps, 200)) > 3
    assert reports[True] == reports[False]


def test_a_step_runs_at_most_its_budget_of_quiet_rounds(gavel_table):
    from hetsched.sim.simulator import RoundSimulation

    jobs = GavelGenerator(seed=5, mean_interarrival_s=900, throughputs=gavel_table).jobs(80)
    runs = []
    for budget in (0, 5):
        sim = RoundSimulation(jobs, ClusterSpec.parse("4:4:4"), "max_min_fairness_perf", gavel_table,
                              record_timeline=False)
        sim.budget, rounds, extras = budget, 0, []
        while sim.step():
            rounds += 1 + sim.extra
            extras.append(sim.extra)
        runs.append((rounds, max(extras), sim.result().jobs_frame()))
    assert runs[0][0] == runs[1][0] and runs[0][1] == 0 and runs[1][1] == 5
    pd.testing.assert_frame_equal(runs[0][2], runs[1][2], check_exact=True)


@pytest.mark.parametrize("form", ["unit", "key"])
def test_job_pairs_are_the_numpy_decomposition(form, gavel_table, monkeypatch):
    """decompose_pairs with the compiled pairing gives the numpy code's pairs and fractions bit for bit, for both
    pair forms, with folded (same-group) and crossed groups, zero and tiny pair times."""
    from hetsched import ClusterSpec, Job
    from hetsched.decide.gavel.formulation import build_polytope, decompose_pairs
    from hetsched.decide.gavel.units import make_units
    from hetsched.decide.gavel.view import view_from_jobs

    types = sorted({k.job_type for k in gavel_table.keys if k.scale_factor == 1})[:9]
    rng = np.random.default_rng(11)
    checked = 0
    for trial in range(25):
        m = int(rng.integers(2, 60))
        jobs = [Job(j, 0.0, types[int(rng.integers(len(types)))], 1, float(rng.integers(1, 4)) * 1e5)
                for j in range(m)]
        view = view_from_jobs(jobs, ClusterSpec.parse("6:6:6"), gavel_table)
        units = make_units(view, aggregate=trial % 2 == 0)
        poly = build_polytope(view, units, packing=True, pair_form=form)
        z = rng.random(len(poly.pair_vars)) * (rng.random(len(poly.pair_vars)) < 0.5)
        z[rng.random(len(z)) < 0.1] = 1e-6                                  # below PAIR_EPS: dropped
        got = decompose_pairs(view, units, poly.pair_vars, z, unit_pairs=poly.unit_pairs)
        monkeypatch.setattr(kernels, "ENABLED", False)
        want = decompose_pairs(view, units, poly.pair_vars, z, unit_pairs=poly.unit_pairs)
        monkeypatch.setattr(kernels, "ENABLED", True)
        assert got[0].tolist() == want[0].tolist()
        assert got[1].tobytes() == want[1].tobytes() and got[1].shape == want[1].shape
        checked += len(want[0]) > 0
    assert checked >= 20


def test_the_pairing_kernels_run_as_python_too():
    """The kernels' own code, interpreted, agrees with the compiled code (a guard on the loops themselves)."""
    from hetsched.decide.gavel import pair_kernels as P

    rng = np.random.default_rng(12)
    for _ in range(30):
        num = int(rng.integers(1, 6))
        ca, cb = np.sort(rng.integers(0, num, 40)), np.sort(rng.integers(0, num, 35))
        ja, jb = rng.permutation(40).astype(np.int64), rng.permutation(35).astype(np.int64) + 40
        sa, sb = rng.random(40) * (rng.random(40) < 0.8), rng.random(35)
        for f, args in ((P.cross, (ca, ja, sa, cb, jb, sb, num, 77.0)), (P.folded, (ca, ja, sa, num, 77.0))):
            for a, b in zip(f(*args), f.py_func(*args)):
                assert a.tobytes() == b.tobytes()


def test_crossing_merges_what_numpy_sorts(monkeypatch):
    """pair_kernels.cross merges the two sides' breakpoints and walks to each overlap's owners (the sides come in
    combo order with positive supplies): formulation._cross's numpy results bit for bit, with zero supplies too
    (repeated breakpoints) and combos that one side lacks."""
    from hetsched.decide.gavel import formulation as F
    from hetsched.decide.gavel import pair_kernels as P

    rng = np.random.default_rng(13)
    for trial in range(200):
        num = int(rng.integers(1, 8))
        na, nb = int(rng.integers(1, 60)), int(rng.integers(1, 60))
        ca, cb = np.sort(rng.integers(0, num, na)), np.sort(rng.integers(0, num, nb))
        ja, jb = rng.permutation(na).astype(np.int64), rng.permutation(nb).astype(np.int64) + na
        sa = np.round(rng.random(na), 2) * (rng.random(na) < 0.8)
        sb = np.round(rng.random(nb), 2) * (rng.random(nb) < 0.9)
        got = P.cross(ca, ja, sa, cb, jb, sb, num, 101.0)
        monkeypatch.setattr(kernels, "ENABLED", False)
        want = F._cross((ca, ja, sa), (cb, jb, sb), num, 101.0)
        monkeypatch.setattr(kernels, "ENABLED", True)
        for a, b in zip(got, want):
            assert a.tobytes() == np.asarray(b, a.dtype).tobytes() and len(a) == len(b)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_shuffled_draws_as_pythons_random(compiled):
    """kernels.shuffled from random.getstate() gives random.shuffle's orders and leaves the same generator state,
    across the generator's refills of 624 words and for 1 to 9 GPU types."""
    import random

    shuffled = kernels.shuffled if compiled else kernels.shuffled.py_func
    for seed in (0, 5, 123):
        rng = random.Random(seed)
        mt = np.array(rng.getstate()[1], np.int64)
        for draw in range(1500):
            n = 1 + draw % 9
            want = list(range(n))
            rng.shuffle(want)
            assert shuffled(np.arange(n, dtype=np.int64), mt).tolist() == want
        assert tuple(mt.tolist()) == rng.getstate()[1]


@pytest.mark.parametrize("path", PATHS)
def test_proportional_rates_are_numpys_row_sums(path):
    """(T * row).sum(axis=1) bit for bit for 1-7 columns (numpy sums so few columns left to right)."""
    rates = _path("proportional_rates", path)
    rng = np.random.default_rng(13)
    for n in range(1, 8):
        for m in (1, 2, 5, 64, 301):
            T = rng.standard_normal((m, n)) * 10.0 ** rng.integers(-8, 8, (m, n))
            T[rng.random((m, n)) < 0.05] = np.nan
            row = rng.random(n)
            assert rates(T, row).tobytes() == (T * row).sum(axis=1).tobytes()


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_the_lazy_rank_pops_in_numpys_lexsort_order(compiled):
    """select_walk pops many candidates from a heap (kernels.LAZY_RANK_ABOVE): row by row, numpy's order."""
    heap_of, pop = (ranking._heap_of, ranking._pop) if compiled else (ranking._heap_of.py_func,
                                                                      ranking._pop.py_func)
    rng = np.random.default_rng(2)
    for n in (0, 1, 2, 3, 7, 64, 65, 301):
        for _ in range(20 if n < 100 else 3):
            k3, k2, k1 = _keys(rng, n)
            heap, a, b, c = heap_of(k3, k2, k1)
            popped = [int(pop(heap, size, a, b, c)) for size in range(n, 0, -1)]
            np.testing.assert_array_equal(popped, np.lexsort((k1, k2, k3)))
