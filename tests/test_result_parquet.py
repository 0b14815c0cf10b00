"""`Result.to_parquet` / `Result.read_parquet`: a run saved and read back gives the same metrics and tables."""

from __future__ import annotations

import pandas as pd
import pytest

from hetsched import ClusterSpec
from hetsched.errors import HetschedError
from hetsched.sim.metrics import summary
from hetsched.sim.result import Result
from hetsched.sim.simulator import simulate
from hetsched.traces import GavelGenerator


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(x == y or (x != x and y != y) for x, y in zip(a.values(), b.values()))


@pytest.mark.parametrize("record_timeline", [False, True])
def test_round_trip(tmp_path, record_timeline):
    jobs = GavelGenerator(seed=3, mean_interarrival_s=900.0).jobs(30)
    result = simulate(jobs, ClusterSpec.parse("2:2:2"), "max_min_fairness_perf", window=(5, 25),
                      record_timeline=record_timeline)
    path = result.to_parquet(tmp_path / "run.parquet")
    back = Result.read_parquet(path)
    assert _equal(summary(back), summary(result))
    pd.testing.assert_frame_equal(back.jobs_frame(), result.jobs_frame())
    assert (tmp_path / "run.timeline.parquet").exists() == record_timeline
    if record_timeline:
        pd.testing.assert_frame_equal(back.timeline_frame(), result.timeline_frame())


def test_a_foreign_parquet_file_is_refused(tmp_path):
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "x.parquet")
    with pytest.raises(HetschedError, match="not a hetsched Result"):
        Result.read_parquet(tmp_path / "x.parquet")


def test_a_run_without_jobs_has_empty_tables_with_their_columns(tmp_path):
    cluster = ClusterSpec.parse("2:2:2")
    full = simulate(GavelGenerator(seed=3, mean_interarrival_s=900.0).jobs(3), cluster, "max_min_fairness_perf")
    empty = simulate([], cluster, "max_min_fairness_perf")
    assert empty.jobs_frame().empty and list(empty.jobs_frame().columns) == list(full.jobs_frame().columns)
    timeline = empty.timeline_frame()
    assert timeline.empty and dict(timeline.dtypes) == dict(full.timeline_frame().dtypes)
    back = Result.read_parquet(empty.to_parquet(tmp_path / "run.parquet"))
    assert back.jobs == {} and back.timeline_frame().empty
    assert summary(back)["num_jobs"] == 0
