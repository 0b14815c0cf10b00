"""Sia's artifact on its own traces (docs/rules.md#elastic-metrics): our simulator on the paper's Helios workloads
against the paper draft's Table 3 (data/paper/sia_tables.csv), the heterogeneous 64-GPU cluster.

Gavel+TJ runs all 10 Helios workloads, the ones the paper averaged: within 5 % of the paper's mean plus half its
printed unit. Sia runs 3 of them (a full run is about 130 CPU-s): its mean must lie within two standard errors of
the difference of two means (ours over 3 workloads, the paper's over 10, with the paper's spread over traces) plus
half the printed unit. The full table is the notebook sia_table3 at the paper preset.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from hetsched.experiments.elastic import ElasticRun, paper_tables, run_one

pytestmark = pytest.mark.slow

HALF_UNIT = 0.05                    # the paper prints hours to one decimal


def _paper(policy: str) -> pd.Series:
    table = paper_tables()
    rows = table[(table["trace"] == "helios") & (table["cluster"] == "sia_hetero") & (table["policy"] == policy)]
    return rows.iloc[0]


def _mean(policy: str, numbers) -> pd.Series:
    rows = pd.DataFrame([run_one(ElasticRun(policy, f"helios-{n}")) for n in numbers])
    assert (rows["jobs"] == 160).all()
    return rows[["avg_jct_h", "p99_jct_h", "makespan_h", "gpu_h_per_job"]].mean()


def test_gavel_tj_matches_table3_on_every_helios_workload():
    ours, paper = _mean("gavel+tj", range(1, 11)), _paper("gavel+tj")
    for metric in ("avg_jct_h", "p99_jct_h", "makespan_h", "gpu_h_per_job"):
        assert abs(ours[metric] - paper[metric]) <= 0.05 * paper[metric] + HALF_UNIT, (metric, ours[metric])


def test_sia_matches_table3_within_the_papers_spread():
    k = 3
    ours, paper = _mean("sia", range(1, k + 1)), _paper("sia")
    for metric, spread in (("avg_jct_h", "avg_jct_pm"), ("makespan_h", "makespan_pm"),
                           ("gpu_h_per_job", "gpu_h_per_job_pm")):
        band = 2 * paper[spread] * math.sqrt(1 / k + 1 / 10) + HALF_UNIT
        assert abs(ours[metric] - paper[metric]) <= band, (metric, ours[metric], paper[metric], band)


def test_themis_tj_is_fairer_and_slower_than_gavel_tj_as_in_table4():
    """Table 4 (16 T4 nodes, Philly): Themis+TJ's average JCT is above Gavel+TJ's (the draft: 5.4 against 4.3 h over
    its traces). Both run the same rigid jobs and rounds (docs/rules.md#themis-tj), so what differs is the
    allocation: Themis's minimises the worst finish-time ratio, and on philly-1 its worst rho is the lower."""
    themis = run_one(ElasticRun("themis+tj", "philly-1", "sia_homo"))
    gavel = run_one(ElasticRun("gavel+tj", "philly-1", "sia_homo"))
    assert themis["jobs"] == gavel["jobs"] == 160
    assert themis["avg_jct_h"] > gavel["avg_jct_h"]
    assert themis["ftf_worst"] < gavel["ftf_worst"]
