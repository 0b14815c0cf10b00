"""The compiled builders of the LP policies' problems (units, the unit-pair polytope, the stacked CSC matrix and the
unit-pair decomposition) give the numpy code's arrays bit for bit, compiled and interpreted."""

import numpy as np
import pytest

from hetsched import ClusterSpec, Job
from hetsched.compiled import kernels
from hetsched.decide.gavel import formulation as F
from hetsched.decide.gavel import pair_kernels, polytope_kernel
from hetsched.decide.gavel.rows import Rows, stack
from hetsched.decide.gavel.units import _groups_by_first, identical_rows, make_units
from hetsched.decide.gavel.view import view_from_jobs

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="numba is not installed or HETSCHED_KERNELS=0")


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _views(table, trials, seed):
    """Views of 1-70 single-GPU jobs of a few types, some of them scaled (so not every pair may share a GPU)."""
    keys = sorted({(k.job_type, k.scale_factor) for k in table.keys if k.scale_factor in (1, 2)})
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        pick = rng.choice(len(keys), int(rng.integers(1, 8)), replace=False)
        m = int(rng.integers(1, 70))
        jobs = [Job(j, 0.0, keys[pick[i]][0], keys[pick[i]][1], float(rng.integers(1, 4)) * 1e5)
                for j, i in enumerate(rng.integers(0, len(pick), m))]
        yield view_from_jobs(jobs, ClusterSpec.parse("6:6:6"), table)


def test_unit_pair_polytope_is_the_numpy_polytope(gavel_table, monkeypatch):
    built = 0
    for view in _views(gavel_table, 40, 1):
        units = make_units(view, aggregate=True)
        got = F.build_polytope(view, units, packing=True, pair_form="unit")
        monkeypatch.setattr(kernels, "ENABLED", False)
        want = F.build_polytope(view, units, packing=True, pair_form="unit")
        monkeypatch.setattr(kernels, "ENABLED", True)
        assert (got.num_vars, got.num_aux, got.unit_pairs, len(got.eq)) == (want.num_vars, 0, True, 0)
        assert _same(got.pair_vars, want.pair_vars)
        for a, b in zip([*got.ineq, got.effective], [*want.ineq, want.effective], strict=True):
            assert all(_same(x, y) for x, y in zip((a.data, a.row, a.col, a.rhs), (b.data, b.row, b.col, b.rhs)))
        built += len(want.pair_vars) > 0
    assert built >= 30


def test_the_polytope_kernel_runs_as_python_too(gavel_table):
    for view in _views(gavel_table, 10, 2):
        units = make_units(view, aggregate=True)
        args = (view.throughput[units.first], view.scale_factor[units.first].astype(float), units.mult,
                view.type_code[units.first], np.array(view.colocated))
        args[4][0, 0, 0, 0] = np.inf                    # nan_to_num's stand-in for inf counts as a positive rate
        got, want = polytope_kernel.unit_pair_polytope(*args), polytope_kernel.unit_pair_polytope.py_func(*args)
        assert _same(got[0], want[0]) and _same(got[3], want[3])
        assert all(_same(x, y) for x, y in zip([*got[1], *got[2]], [*want[1], *want[2]]))


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_units_group_rows_as_numpy_does(compiled):
    """Groups in order of their first rows, as make_units orders numpy's groups; signed zeros are equal, inf is a
    value, and a NaN leaves the rows to numpy (empty result)."""
    groups = _groups_by_first if compiled else _groups_by_first.py_func
    pool = np.array([0.0, -0.0, 1.0, 2.5, np.inf, -np.inf, 7.0, 1e300])
    rng = np.random.default_rng(3)
    for trial in range(400):
        rows = rng.choice(pool, (int(rng.integers(1, 80)), int(rng.integers(1, 6))))
        if trial % 10 == 0:
            rows[rng.integers(len(rows)), rng.integers(rows.shape[1])] = np.nan
        of_job, first, counts = groups(rows)
        if np.isnan(rows).any():
            assert len(of_job) == len(first) == len(counts) == 0
            continue
        f, o, c = identical_rows(rows)
        order = np.argsort(f, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        assert _same(of_job, rank[o]) and _same(first, f[order]) and _same(counts, c[order].astype(float))


def test_make_units_is_the_numpy_grouping(gavel_table, monkeypatch):
    for view in _views(gavel_table, 30, 4):
        extra = [np.where(np.arange(view.num_jobs) % 3 == 0, np.nan, 1.0)]
        for args in (((), {"aggregate": True}), ((extra,), {"aggregate": True})):   # NaN rows: numpy's path
            got = make_units(view, *args[0], **args[1])
            monkeypatch.setattr(kernels, "ENABLED", False)
            want = make_units(view, *args[0], **args[1])
            monkeypatch.setattr(kernels, "ENABLED", True)
            assert _same(got.of_job, want.of_job) and _same(got.first, want.first) and _same(got.mult, want.mult)


def test_stack_is_scipys_csc(monkeypatch):
    """Random blocks (empty rows and columns, explicit zeros): scipy's matrix bit for bit; a repeated position falls
    back to scipy, which sums the entries."""
    rng = np.random.default_rng(5)
    for trial in range(200):
        cols = int(rng.integers(1, 40))
        blocks = []
        for _ in range(int(rng.integers(1, 4))):
            rows = int(rng.integers(1, 30))
            cells = rng.choice(rows * cols, int(rng.integers(0, rows * cols + 1)), replace=False)
            if trial % 7 == 0 and len(cells):
                cells = np.r_[cells, cells[:1]]
            data = rng.standard_normal(len(cells)) * (rng.random(len(cells)) < 0.9)
            blocks.append(Rows.of(data, cells // cols, cells % cols, rng.random(rows)))
        got = stack(blocks, cols)
        monkeypatch.setattr(kernels, "ENABLED", False)
        want = stack(blocks, cols)
        monkeypatch.setattr(kernels, "ENABLED", True)
        assert got[0].shape == want[0].shape and _same(got[1], want[1])
        assert all(_same(getattr(got[0], a), getattr(want[0], a)) for a in ("data", "indices", "indptr"))


def test_the_csc_kernel_reports_a_repeated_position():
    indptr, indices, out = np.zeros(3, np.int32), np.empty(3, np.int32), np.empty(3)
    assert not kernels.coo_to_csc(np.ones(3), np.array([0, 1, 0]), np.array([1, 0, 1]), indptr, indices, out)
    indptr[:] = 0
    assert kernels.coo_to_csc.py_func(np.array([1.0, 2, 3]), np.array([2, 0, 1]), np.array([1, 1, 0]), indptr,
                                      indices, out)
    assert indptr.tolist() == [0, 1, 3] and indices.tolist() == [1, 0, 2] and out.tolist() == [3.0, 2.0, 1.0]


def test_the_unit_pair_decomposition_runs_as_python_too(gavel_table):
    """pair_kernels.unit_pairs, interpreted, gives what it gives compiled (tests/test_kernels.py compares the
    compiled path with the numpy decomposition)."""
    rng = np.random.default_rng(6)
    for view in _views(gavel_table, 15, 7):
        units = make_units(view, aggregate=True)
        poly = F.build_polytope(view, units, packing=True, pair_form="unit")
        z = rng.random(len(poly.pair_vars)) * (rng.random(len(poly.pair_vars)) < 0.5)
        args = (units.of_job, units.mult, poly.pair_vars, z, view.num_jobs + 2.0, np.int64(view.num_jobs),
                view.num_types, F.PAIR_EPS)
        got, want = pair_kernels.unit_pairs(*args), pair_kernels.unit_pairs.py_func(*args)
        assert _same(got[0], want[0]) and _same(got[1], want[1])
