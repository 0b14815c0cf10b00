"""Every case of ../shared/fidelity/gavel/expected.csv: our simulator on the artifact's job stream vs its number.

Continuous cases draw the stream from our generator (it reproduces the artifact's trace exactly, see
test_generator.py) and keep its float steps and arrival times, as the artifact's own run did. Static and
physical-cluster cases replay the trace file. Tolerances are the file's; nothing here is tuned.
"""

import csv

import pytest

from hetsched import ClusterSpec
from hetsched.sim.metrics import summary
from hetsched.sim.simulator import simulate
from hetsched.traces import GavelGenerator, read_trace

from conftest import _shared

TABLES = {"gavel/simulation_throughputs.json": "gavel_simulation",
          "gavel/physical_cluster_throughputs.json": "gavel_physical"}


def _cases():
    path = _shared() / "fidelity" / "gavel" / "expected.csv"
    if not path.exists():
        return [pytest.param(None, id="missing-shared")]
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return [pytest.param(r, id=r["case"], marks=[pytest.mark.slow] if "w4000" in r["case"] else [])
            for r in rows]


def _jobs(case, shared_dir, table):
    trace = case["trace"]
    if trace.startswith("continuous_seed0_lam1500"):
        return iter(GavelGenerator(seed=0, mean_interarrival_s=1500, throughputs=table))
    path = shared_dir / "fidelity" / "gavel" / trace
    if not path.exists():
        path = shared_dir / "data" / trace
    return read_trace(path)


def fluid_makespan_bound(jobs, cluster, table) -> float:
    """An independent lower bound on the makespan of jobs that all arrive at 0: the LP over seconds t[j, w] that
    job j runs on GPU type w, with no rounds, no placement and free preemption:
    min T  s.t.  sum_w t[j,w] rate[j,w] >= steps_j,  sum_w t[j,w] <= T,  sum_j k_j t[j,w] <= GPUs_w T."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, hstack, vstack

    assert all(j.arrival_time_s == 0 for j in jobs)
    types = list(cluster.gpu_types)
    n, m = len(jobs), len(types)
    rate = np.array([[table.get(j.job_type, j.scale_factor, g) for g in types] for j in jobs])
    steps = np.array([j.total_steps for j in jobs])
    k = np.array([j.scale_factor for j in jobs], float)
    var = np.arange(n * m).reshape(n, m)
    rows = np.repeat(np.arange(n), m)
    work = coo_matrix((-rate.ravel(), (rows, var.ravel())), shape=(n, n * m))
    busy = coo_matrix((np.ones(n * m), (rows, var.ravel())), shape=(n, n * m))
    cap = coo_matrix((np.repeat(k, m), (np.tile(np.arange(m), n), var.ravel())), shape=(m, n * m))
    a = vstack([hstack([work, coo_matrix((n, 1))]),
                hstack([busy, coo_matrix(-np.ones((n, 1)))]),
                hstack([cap, coo_matrix(-np.array(cluster.counts, float)[:, None])])]).tocsr()
    b = np.concatenate([-steps, np.zeros(n + m)])
    c = np.zeros(n * m + 1)
    c[-1] = 1.0
    out = linprog(c, A_ub=a, b_ub=b, bounds=(0, None), method="highs")
    assert out.status == 0, out.message
    return float(out.x[-1])


@pytest.mark.parametrize("case", _cases())
def test_fidelity_case(case, shared_dir):
    from hetsched import load_throughputs

    assert case is not None
    table = load_throughputs(TABLES[case["throughputs"]])
    window = None if case["window_job_ids"] == "all" else tuple(int(v) + (i == 1)
                                                                 for i, v in enumerate(
                                                                     case["window_job_ids"].split("-")))
    jobs = _jobs(case, shared_dir, table)
    jobs = list(jobs) if case["metric"] == "makespan_s" else jobs        # the bound below reads them again
    result = simulate(jobs, ClusterSpec.parse(case["cluster_v100_p100_k80"]),
                      case["policy"], table, round_s=float(case["round_s"]), window=window, record_timeline=False)
    ours = summary(result)[case["metric"]]
    theirs = float(case["value"])
    tol = float(case["tolerance_rel"])
    print(f"\n[fidelity] {case['case']}: ours {ours:.6g} artifact {theirs:.6g} ({ours / theirs - 1:+.4%})")
    if case["metric"] == "makespan_s" and "lower is fine" in case["note"]:
        # Below the artifact is allowed (it bisects to 5 %), but never below what any schedule can reach.
        bound = fluid_makespan_bound(jobs, ClusterSpec.parse(case["cluster_v100_p100_k80"]), table)
        print(f"[fidelity] {case['case']}: fluid lower bound {bound:.6g} ({ours / bound - 1:+.2%} above it)")
        assert bound <= ours <= theirs * (1 + tol)
    else:
        assert ours == pytest.approx(theirs, rel=tol)
