"""Gavel Fig. 8's outlier points: their equally valid variants, the range they span and the rate shift."""

import math

import pandas as pd
import pytest

from hetsched.experiments import fig8_outliers as O


def test_each_point_varies_what_its_policy_leaves_to_chance():
    configs = O.configs("tiny", draws=2)
    by_point = {}
    for c in configs:
        labels = dict(c.labels)
        by_point.setdefault((c.policy, labels["paper_rate"]), []).append((labels["variant"], c))
    assert set(by_point) == set(O.OUTLIERS)
    allox = dict(by_point[("allox", 4.0)])
    assert set(allox) == {"ours", "tie seed 1", "tie seed 2"}
    assert dict(allox["tie seed 2"].policy_params) == {"tie_seed": 2} and allox["ours"].policy_params == ()
    las = dict(by_point[("max_min_fairness", 4.8)])
    assert set(las) == {"ours", "draw seed 1", "draw seed 2", "per-job LP"}
    assert las["draw seed 1"].draw_seed not in (None, las["ours"].seed)
    assert las["draw seed 1"].seed == las["ours"].seed              # the job stream stays the same
    assert dict(las["per-job LP"].policy_params) == {"aggregate": False}
    assert len({c.key() for c in configs}) == len(configs)


def test_same_jct_at_interpolates_the_segment_next_to_the_point():
    curve = pd.DataFrame({"paper_rate": [4.0, 4.4, 4.8, 5.2, 5.6], "avg_jct_h": [20, 24, 38, 68, math.inf]})
    assert O.same_jct_at(curve, 4.8, 31.0) == pytest.approx(4.6)
    assert O.same_jct_at(curve, 5.2, 53.0) == pytest.approx(5.0)
    assert math.isnan(O.same_jct_at(curve, 4.0, 10.0))             # below the whole curve


def test_spans_say_whether_the_stored_value_is_inside():
    rows = pd.DataFrame({"policy": ["gandiva"] * 3, "paper_rate": [4.4] * 3,
                         "variant": ["ours", "draw seed 1", "draw seed 2"], "avg_jct_h": [24.0, 26.0, 28.0],
                         "saturated": [False] * 3})
    stored = pd.DataFrame({"rate_jobs_per_h": [4.4], "policy": ["gandiva"], "avg_jct_h": [25.0]})
    (row,) = O.spans(rows, stored).to_dict("records")
    assert row["inside"] and row["low_h"] == 24.0 and row["high_h"] == 28.0
    assert row["spread"] == pytest.approx(4 / 26) and row["ours/stored"] == pytest.approx(24 / 25)
    stored["avg_jct_h"] = 30.0
    assert not O.spans(rows, stored).iloc[0]["inside"]
