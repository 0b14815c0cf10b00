"""The core's entry table under arrivals, completions and recomputes: the row index, the row arrays and the masks
derived from them stay what a rebuild from scratch gives (they are kept incrementally, docs/rules.md#select)."""

import numpy as np
import pytest

from hetsched import ClusterSpec, Job, load_throughputs
from hetsched.compiled import kernels
from hetsched.core.entries import ROW_ARRAYS
from hetsched.core.registry import policy_for
from hetsched.core.scheduler import Scheduler

TYPES = ["ResNet-18 (batch size 32)", "Transformer (batch size 64)", "A3C", "LM (batch size 20)"]


def check(core: Scheduler) -> None:
    m = len(core.entries)
    assert core.entry_table.index == {e: i for i, e in enumerate(core.entries)}
    for name in ROW_ARRAYS:
        assert len(getattr(core, name)) == m, name
    slots = [[core.slot[j] for j in e] + [-1] * (2 - len(e)) for e in core.entries]
    assert core.members.tolist() == (slots or [])
    blocked, pairs, single = core.entry_table.masks()
    assert np.array_equal(blocked, ~core.ok | ~core.in_alloc[:, None])
    assert pairs == bool((core.members[:, 1] >= 0).any())
    assert single == bool((core.escale == 1).all())
    for e, ids in enumerate(core.entries):
        if len(ids) == 1:
            assert np.array_equal(core.etput[e, :, 0], core.tput[core.slot[ids[0]]])


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "max_min_fairness_packed"])
def test_entries_stay_consistent_under_churn(policy):
    table = load_throughputs("gavel_simulation")
    core = Scheduler(ClusterSpec.parse("3:3:3"), policy_for(policy, 0), table)
    rng = np.random.default_rng(1)
    live, next_id, now, pairs = [], 0, 0.0, 0
    for step in range(150):                        # past the buffers' first growth (64 rows)
        if not live or rng.random() < 0.6:
            core.add_job(Job(next_id, now, TYPES[next_id % len(TYPES)], 1, 1e6))
            live.append(next_id)
            next_id += 1
        else:
            core.remove_job(live.pop(int(rng.integers(len(live)))))
        if step % 7 == 0 and live:
            core._reset_and_recompute(now)         # pairs appear and disappear with the allocation
        now += 360.0
        check(core)
        pairs = max(pairs, sum(len(e) == 2 for e in core.entries))
    assert (pairs > 0) == ("packed" in policy)


def walk(cand, gpus, free):
    """docs/rules.md#select's walk, one candidate at a time."""
    chosen = []
    for c, g in zip(cand, gpus):
        if g <= free:
            chosen.append(c)
            free -= g
            if free <= 0:
                break
    return chosen, free


def test_the_vectorised_first_fit_takes_what_the_walk_takes():
    from hetsched.select.priority import first_fit_in_order
    rng = np.random.default_rng(0)
    for _ in range(2000):
        n = int(rng.integers(0, 40))
        cand = rng.permutation(100)[:n].astype(np.int64)
        gpus = rng.choice([1, 2, 4, 8], n).astype(np.int64)
        free = int(rng.integers(0, 30))
        chosen, left = first_fit_in_order(cand, gpus, free)
        expect, expect_left = walk(cand.tolist(), gpus.tolist(), free)
        assert chosen.tolist() == expect and left == expect_left


def test_identical_rows_groups_as_numpy_unique_does():
    from hetsched.decide.gavel.units import identical_rows
    rng = np.random.default_rng(2)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        rows = rng.choice([0.0, -0.0, 0.5, 1.0, 3.25], size=(n, int(rng.integers(1, 5))))
        if rng.random() < 0.2:
            rows[rng.integers(n), 0] = np.nan
        first, of_job, counts = identical_rows(rows)
        _, f2, o2, c2 = np.unique(rows, axis=0, return_index=True, return_inverse=True, return_counts=True)
        # the same groups, named in another order: compare the partitions through each group's first row
        assert sorted(first.tolist()) == sorted(f2.tolist())
        assert np.array_equal(first[of_job], f2[o2.ravel()])
        assert dict(zip(first.tolist(), counts.tolist())) == dict(zip(f2.tolist(), c2.tolist()))


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("first_id", [0, 10**15], ids=["small-ids", "huge-ids"])
def test_pair_entries_follow_the_allocation_in_its_order(first_id, compiled, monkeypatch):
    """Pairs without time leave, the others keep their rows in order, new pairs are appended in the allocation's
    order, and the rows returned are each wanted pair's (compared with a list-based reference), for any job ids,
    on the compiled path (core/pair_entries.py; huge ids fall back to numpy) and on the numpy path."""
    from hetsched.decide.gavel.base import Allocation
    monkeypatch.setattr(kernels, "ENABLED", compiled and kernels.ENABLED)
    table = load_throughputs("gavel_simulation")
    core = Scheduler(ClusterSpec.parse("3:3:3"), policy_for("max_min_fairness_packed", 0), table)
    for j in range(12):
        core.add_job(Job(first_id + j, 0.0, TYPES[j % len(TYPES)], 1, 1e6))
    view = core.view(0.0)
    rng = np.random.default_rng(4)
    all_pairs = [(a, b) for a in range(12) for b in range(a + 1, 12)]
    for _ in range(40):
        picked = rng.permutation(len(all_pairs))[: int(rng.integers(0, 15))]
        pairs = np.array([all_pairs[p] for p in picked], np.intp).reshape(-1, 2)
        x_pairs = rng.random((len(pairs), 3)) * (rng.random((len(pairs), 1)) < 0.8)     # some pairs get no time
        alloc = Allocation(view.job_ids, view.gpu_types, np.zeros((12, 3)), pairs, x_pairs)
        wanted = [tuple(int(view.job_ids[i]) for i in p) for p, x in zip(pairs, x_pairs) if x.sum() > 0]
        expect = [e for e in core.entries if len(e) == 1 or e in wanted]
        expect += [p for p in wanted if p not in expect]
        rows, x = core.entry_table.follow_pairs(alloc)
        assert core.entries == expect
        assert list(rows) == [expect.index(p) for p in wanted]
        assert np.array_equal(x, x_pairs[x_pairs.sum(axis=1) > 0])
        check(core)


def test_the_views_pair_rates_are_the_tables_while_the_keys_present_change():
    """The view's co-location block (kept while the job keys present stay the same) is always the table's."""
    table = load_throughputs("gavel_simulation")
    core = Scheduler(ClusterSpec.parse("3:3:3"), policy_for("max_min_fairness_packed", 0), table)
    rng = np.random.default_rng(5)
    live, reused = [], 0
    for j in range(120):
        if live and rng.random() < 0.4:
            core.remove_job(live.pop(int(rng.integers(len(live)))))
        core.add_job(Job(j, 0.0, TYPES[int(rng.integers(len(TYPES)))] if j % 9 else "unknown-type", 1, 1e6))
        live.append(j)
        before = core.views._colocated_last
        view = core.view(0.0)
        reused += core.views._colocated_last is before
        rows = core.key_row[core.job_slots.active_by_id()]
        keys = np.unique(rows)
        want = table.colocated[np.ix_(keys, keys, core._cols)][:, :, :, 0, :].copy()
        want[keys < 0] = np.nan
        want[:, keys < 0] = np.nan
        np.testing.assert_array_equal(view.colocated, want)
        assert not view.colocated.flags.writeable
    assert 0 < reused < 120


def test_compiled_pair_entries_are_the_numpy_rows(monkeypatch):
    """core/pair_entries.py builds, keeps and compacts the same rows as the numpy code: two cores follow the same
    allocations, one on each path, with every row holding its own values (time, deficits, allocation) and a job
    type the table does not know (its pairs have no rates)."""
    from hetsched.decide.gavel.base import Allocation
    if not kernels.ENABLED:
        pytest.skip("numba is off")
    table = load_throughputs("gavel_simulation")
    cores = [Scheduler(ClusterSpec.parse("3:3:3"), policy_for("max_min_fairness_packed", 0), table) for _ in "ab"]
    for core in cores:
        for j in range(12):
            core.add_job(Job(j, 0.0, TYPES[j % len(TYPES)] if j != 5 else "unknown-type", 1, 1e6))
    view = cores[0].view(0.0)
    rng = np.random.default_rng(6)
    all_pairs = [(a, b) for a in range(12) for b in range(a + 1, 12)]
    for _ in range(60):
        picked = rng.permutation(len(all_pairs))[: int(rng.integers(0, 30))]
        pairs = np.array([all_pairs[p] for p in picked], np.intp).reshape(-1, 2)
        x_pairs = rng.random((len(pairs), 3)) * (rng.random((len(pairs), 1)) < 0.7)
        alloc = Allocation(view.job_ids, view.gpu_types, np.zeros((12, 3)), pairs, x_pairs)
        values = rng.random((3, len(cores[0].entries), 3))
        out = []
        for core, compiled in zip(cores, (True, False)):
            monkeypatch.setattr(kernels, "ENABLED", compiled)
            core.t[:], core.deficit[:], core.alloc[:] = values
            out.append(core.entry_table.follow_pairs(alloc)[0])
        assert np.array_equal(out[0], out[1])
        assert cores[0].entries == cores[1].entries
        for name in ROW_ARRAYS:
            assert np.array_equal(getattr(cores[0], name), getattr(cores[1], name), equal_nan=True), name
        check(cores[0])


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_pair_rows_are_built_as_add_entries_builds_them(compiled):
    """`append_pair_rows` on its own, against `_add_entries`'s numpy expressions: NaN and inf rates, and job types
    without a table row (-1) on either side of a pair, which get no rates."""
    from hetsched.core.pair_entries import append_pair_rows
    build = append_pair_rows if compiled else append_pair_rows.py_func
    rng = np.random.default_rng(7)
    colocated = rng.choice([0.0, 1.5, 2.25, np.nan, np.inf, -np.inf], size=(4, 4, 5, 2, 2))
    key_row = np.array([0, 1, 2, 3, -1, 2])
    scale = np.array([1.0, 2.0, 4.0, 1.0, 8.0, 1.0])
    cols = np.array([4, 0, 2])
    new = np.array([[0, 1], [4, 2], [3, 4], [5, 5], [2, 0]])
    k, n, m = len(new), len(cols), 3
    bufs = [np.full((8, 2), 9), np.full((8, n), 9.0), np.full((8, n), 9.0), np.full((8, n), 9.0),
            np.ones(8, bool), np.ones((8, n), bool), np.full(8, 9.0), np.full((8, n, 2), 9.0)]
    before = [buf.copy() for buf in bufs]
    build(*bufs, m, new, key_row, colocated, cols, 0.25, scale)
    rows = key_row[new]
    etput = np.zeros((k, n, 2))
    known = (rows >= 0).all(axis=1)
    a, b = rows[known].T
    etput[known] = np.nan_to_num(colocated[a[:, None], b[:, None], cols[None, :], 0])
    want = [new, np.full((k, n), 0.25), np.zeros((k, n)), np.zeros((k, n)), np.zeros(k, bool),
            (etput > 0).all(axis=2), scale[new[:, 0]], etput]
    for buf, expect, old in zip(bufs, want, before):
        assert np.array_equal(buf[m:m + k], expect)
        assert np.array_equal(buf[:m], old[:m]) and np.array_equal(buf[m + k:], old[m + k:])    # nothing else
