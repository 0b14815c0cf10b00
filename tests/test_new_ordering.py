"""docs/architecture.md's example: a new ordering (Tiresias' 2D-LAS) added through the registry, without touching
the core. The ordering's code is read from that page and run, so the page cannot drift from what works."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hetsched.io.cluster_ini import synergy_cluster
from hetsched.sim.metrics import summary
from hetsched.core.pipeline import CompositionError
from hetsched.decide.synergy.ordering import ORDERINGS
from hetsched.sim.simulator import simulate
from hetsched.traces import make_generator

PAGE = Path(__file__).parents[1] / "docs" / "architecture.md"


@pytest.fixture
def tiresias():
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    namespace: dict = {}
    exec(compile(blocks[0], str(PAGE), "exec"), namespace)     # the page's first code block defines it
    yield namespace["Tiresias"]
    ORDERINGS.pop("TIRESIAS", None)


def test_tiresias_runs_and_orders(tiresias):
    jobs = make_generator("synergy", jobs_per_hour=30.0).jobs(60)
    cluster = synergy_cluster(servers=1)
    tiresias_jct = summary(simulate(jobs, cluster, "TIRESIAS+tune"))["avg_jct_s"]
    fifo_jct = summary(simulate(jobs, cluster, "FIFO+tune"))["avg_jct_s"]
    assert tiresias_jct != fifo_jct


def test_tiresias_key_is_queues_then_arrival(tiresias):
    class View:
        attained_s = np.array([0.0, 5000.0, 100.0, 40000.0])
        gpus = np.array([1, 1, 8, 1])
    assert tiresias().key(View()).tolist() == [0.0, 1.0, 0.0, 2.0]     # 100 s x 8 GPUs is still queue 0


def test_tiresias_is_refused_where_every_ordering_is(tiresias):
    from hetsched import ClusterSpec
    with pytest.raises(CompositionError, match="decide 'TIRESIAS'"):
        simulate(make_generator("synergy").jobs(3), ClusterSpec.load("2x4/12/250@v100+2x4/12/250@k80"),
                 "TIRESIAS+tune")


def test_doc_test_matches_this_file():
    """The test shown on the page is this file's first test."""
    shown = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)[1].strip()
    assert shown in Path(__file__).read_text()
