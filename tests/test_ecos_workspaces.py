"""ECOS workspaces reused per sparsity pattern (hetsched/ecos_workspaces.py) against `_ecos.csolve`, bit for bit."""

import threading

import numpy as np
import pytest
import scipy.sparse as sp

from hetsched.solvers import ecos_workspaces as ew
from hetsched.decide.gavel.las import _cvxpy_layout, _program
from hetsched.decide.gavel.shares import proportional_throughput
from hetsched.solvers import solve_lp_csc

_ecos = pytest.importorskip("_ecos")
pytestmark = pytest.mark.skipif(ew._library() is None, reason="ECOS workspaces are off for this ECOS build")


def _fresh(c, data, indices, indptr, num_rows, h, tol=1e-8):
    sol = _ecos.csolve((num_rows, len(c), 0), c, data.copy(), indices, indptr, h.copy(),
                       {"l": num_rows, "q": [], "e": 0}, verbose=False, feastol=tol, abstol=tol, reltol=tol,
                       max_iters=200)
    return sol["info"]["exitFlag"], sol["x"], sol["z"]


def _same(a, b):
    assert a[0] == b[0] and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])


def _las_lp(gavel_table, m, seed):
    """A per-job LAS program of m jobs in las.py's layout, from a random view."""
    from test_policies import instance

    view = instance(gavel_table, seed, m)
    indices, indptr, template, x_cols = _cvxpy_layout(view.num_jobs, view.num_types)
    data, h, c = _program(view, proportional_throughput(view), view.num_jobs, view.num_types, template, x_cols)
    return c, data, indices, indptr, 2 * view.num_jobs + view.num_jobs * view.num_types + view.num_types, h


def _box_lp(rng, pattern, kind):
    """min c'x s.t. A x <= b, 0 <= x <= u on a fixed pattern; `kind` makes it feasible, infeasible or unbounded."""
    A, u = pattern
    n = A.shape[1]
    rows = [A, -sp.identity(n)] + ([sp.identity(n)] if kind != "unbounded" else [])
    G = sp.vstack(rows).tocsc()
    G = sp.csc_matrix((rng.uniform(0.5, 2.0, G.nnz) * np.sign(G.data), G.indices, G.indptr), shape=G.shape)
    b = rng.uniform(1.0, 3.0, A.shape[0]) if kind != "infeasible" else -rng.uniform(1.0, 3.0, A.shape[0])
    h = np.concatenate([b, np.zeros(n)] + ([u] if kind != "unbounded" else []))
    c = -rng.uniform(0.1, 1.0, n)
    if kind == "infeasible":                          # A >= 0 and b < 0: no x >= 0 satisfies A x <= b
        lower = (G.indices >= A.shape[0]) & (G.indices < A.shape[0] + n)          # the rows of -x <= 0
        G.data = np.abs(G.data) * np.where(lower, -1.0, 1.0)
    if kind == "unbounded":                           # a free direction: no row of A touches the last column
        keep = G.indices[G.indptr[n - 1]:G.indptr[n]] >= A.shape[0]
        assert keep.all()
    return c, G.data, G.indices.astype(np.int64), G.indptr.astype(np.int64), G.shape[0], h


def test_las_programs_match_a_fresh_setup_bit_for_bit(gavel_table):
    ew.clear()
    for m in (6, 12, 6, 30, 12, 6):                    # patterns come back after others
        for seed in range(3):
            lp = _las_lp(gavel_table, m, seed + m)
            _same(ew.solve(*lp, 1e-8), _fresh(*lp))
    assert len(ew._local.workspaces) == 3


def test_infeasible_and_unbounded_programs_in_between(gavel_table):
    ew.clear()
    rng = np.random.default_rng(0)
    n = 8
    A = sp.random(5, n - 1, density=0.5, random_state=1, format="csc")
    A = sp.hstack([A + sp.csc_matrix((np.ones(n - 1), (np.zeros(n - 1, int), np.arange(n - 1))), shape=(5, n - 1)),
                   sp.csc_matrix((5, 1))]).tocsc()
    pattern = (A, rng.uniform(1, 2, n))
    cached = {}
    flags = set()
    for kind in ["feasible", "infeasible", "feasible", "unbounded", "feasible", "infeasible", "unbounded"] * 2:
        c, data, indices, indptr, rows, h = _box_lp(rng, pattern, kind)
        indices, indptr = cached.setdefault((kind == "unbounded", "i"), indices), \
            cached.setdefault((kind == "unbounded", "p"), indptr)
        got, want = ew.solve(c, data, indices, indptr, rows, h, 1e-8), _fresh(c, data, indices, indptr, rows, h)
        _same(got, want)
        flags.add(got[0])
    assert {0, 1, 2} <= flags                         # optimal, primal infeasible, dual infeasible all seen


def test_solve_lp_csc_uses_workspaces_and_keeps_its_answers(gavel_table, monkeypatch):
    lp = _las_lp(gavel_table, 10, 3)
    reused = solve_lp_csc(*lp)
    monkeypatch.setattr(ew, "_enabled", False)
    assert ew.solve(*lp, 1e-8) is None
    fresh = solve_lp_csc(*lp)
    assert reused.status == fresh.status == "optimal"
    assert np.array_equal(reused.x, fresh.x) and np.array_equal(reused.z, fresh.z)


def test_workspaces_are_bounded_and_freed(gavel_table, monkeypatch):
    ew.clear()
    monkeypatch.setattr(ew, "MAX_WORKSPACES", 3)
    lps = [_las_lp(gavel_table, m, 1) for m in (6, 7, 8, 9, 10)]
    for lp in lps + lps[:2]:
        _same(ew.solve(*lp, 1e-8), _fresh(*lp))
        assert len(ew._local.workspaces) <= 3
    freed = list(ew._local.workspaces.values())
    ew.clear()
    assert all(ws.work is None for ws in freed) and not ew._local.workspaces


def test_other_index_arrays_with_the_same_content_get_their_own_workspace(gavel_table):
    ew.clear()
    c, data, indices, indptr, rows, h = _las_lp(gavel_table, 8, 2)
    _same(ew.solve(c, data, indices, indptr, rows, h, 1e-8), _fresh(c, data, indices, indptr, rows, h))
    copy_i, copy_p = indices.copy(), indptr.copy()    # same pattern, other arrays: a workspace of their own
    _same(ew.solve(c, data, copy_i, copy_p, rows, h, 1e-8), _fresh(c, data, copy_i, copy_p, rows, h))
    assert sum(ws.indices is copy_i for ws in ew._local.workspaces.values()) == 1
    assert ew.solve(c, data, indices.astype(np.int32), indptr, rows, h, 1e-8) is None   # not ECOS's index type


def test_threads_keep_their_own_workspaces(gavel_table):
    lps = [_las_lp(gavel_table, 9, s) for s in range(6)]
    want = [_fresh(*lp) for lp in lps]
    failures = []

    def run():
        try:
            for _ in range(3):
                for lp, w in zip(lps, want):
                    _same(ew.solve(*lp, 1e-8), w)
        except AssertionError as exc:                 # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and not failures


def test_another_layout_switches_reuse_off(monkeypatch):
    monkeypatch.setattr(ew, "_lib", None)
    monkeypatch.setattr(ew, "_enabled", True)
    monkeypatch.setattr(ew, "VERSION", b"9.9.9")
    assert ew._library() is None and ew._enabled is False


def test_malformed_programs_are_left_to_csolve(gavel_table):
    ew.clear()
    c, data, indices, indptr, rows, h = _las_lp(gavel_table, 7, 4)
    assert ew.solve(c, data[:-1], indices, indptr, rows, h, 1e-8) is None               # data shorter than G
    assert ew.solve(c, data, indices, indptr, rows - 1, h[:-1], 1e-8) is None           # a row index out of range
    assert not ew._local.workspaces
    _same(ew.solve(c, data, indices, indptr, rows, h, 1e-8), _fresh(c, data, indices, indptr, rows, h))
    assert ew.solve(c, data[:1], indices, indptr, rows, h, 1e-8) is None                # no broadcasting
    assert ew.solve(c[:-1], data, indices, indptr, rows, h, 1e-8) is None
