"""Every case of ../shared/fidelity/gavel/expected.csv: our simulator on the artifact's job stream vs its number.

Continuous cases draw the stream from our generator (it reproduces the artifact's trace exactly, see
test_generator.py) and keep its float steps and arrival times, as the artifact's own run did. Static and
physical-cluster cases replay the trace file. Tolerances are the file's; nothing here is tuned.
"""

import csv

import pytest

from hetsched import ClusterSpec
from hetsched.metrics import summary
from hetsched.simulator import simulate
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


@pytest.mark.parametrize("case", _cases())
def test_fidelity_case(case, shared_dir):
    from hetsched import load_throughputs

    assert case is not None
    table = load_throughputs(TABLES[case["throughputs"]])
    window = None if case["window_job_ids"] == "all" else tuple(int(v) + (i == 1)
                                                                 for i, v in enumerate(
                                                                     case["window_job_ids"].split("-")))
    result = simulate(_jobs(case, shared_dir, table), ClusterSpec.parse(case["cluster_v100_p100_k80"]),
                      case["policy"], table, round_s=float(case["round_s"]), window=window, record_timeline=False)
    ours = summary(result)[case["metric"]]
    theirs = float(case["value"])
    tol = float(case["tolerance_rel"])
    print(f"\n[fidelity] {case['case']}: ours {ours:.6g} artifact {theirs:.6g} ({ours / theirs - 1:+.4%})")
    if case["metric"] == "makespan_s" and "lower is fine" in case["note"]:
        assert ours <= theirs * (1 + tol)
    else:
        assert ours == pytest.approx(theirs, rel=tol)
