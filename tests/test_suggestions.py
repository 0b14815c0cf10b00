"""Suggestions that run (docs/rules.md#compose): every refused composition, on every cluster shape, names at least
one run instead, and every run it names builds on the same cluster (a refusal once pointed from `--rules synergy`
to `--rules gavel` and back)."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import pytest

from hetsched.core.pipeline import CompositionError
from hetsched.core.registry import pipeline_for, policy_for
from hetsched.core.run_config import SimulationConfig
from hetsched import ClusterSpec

DECIDES = ["gavel", "gavel_las", "gavel_ss", "themis", "allox", "shockwave", "fifo", "las", "srtf", "tetris"]
PLACES = ["", "+fair", "+greedy", "+tune", "+opt", "+tune+place"]
RULES = ["gavel", "synergy", "shockwave"]
CLUSTERS = {"one type": "4x4/12/250@v100", "mixed": "2x4/12/250@v100+2x4/12/250@k80",
            "one type, GPUs only": "v100=16", "mixed, GPUs only": "v100=8,k80=8"}


@lru_cache(maxsize=None)
def cluster(shape: str) -> ClusterSpec:
    return ClusterSpec.load(CLUSTERS[shape])


def config(rules: str, ideal: bool) -> SimulationConfig:
    return SimulationConfig.for_system(rules, record_timeline=False, ideal=ideal)


def refusals():
    for d in DECIDES:
        for p in PLACES:
            for rules in RULES:
                for shape in CLUSTERS:
                    for ideal in (False, True):
                        try:
                            pipeline_for(policy_for(d + p, 0, system=rules), config(rules, ideal), cluster(shape))
                        except CompositionError as exc:
                            yield (d + p, rules, shape, ideal), exc


def test_every_refusal_names_a_run_that_builds():
    seen = 0
    for (name, rules, shape, ideal), exc in refusals():
        seen += 1
        assert exc.tries, f"{name} --rules {rules} on {shape} (ideal={ideal}) suggests no run: {exc}"
        for run in exc.tries:
            assert str(run) in str(exc)
            base = config(run.system or rules, ideal)
            pipeline_for(run.policy, replace(base, ideal=ideal if run.ideal is None else run.ideal), cluster(shape))
    assert seen > 100                          # the enumeration reaches refusals of every kind


def test_the_synergy_opt_loop_is_gone():
    """SRTF+opt on mixed types suggested --rules gavel, which pointed back to --rules synergy."""
    with pytest.raises(CompositionError) as refused:
        pipeline_for(policy_for("SRTF+opt", 0, system="synergy"), config("synergy", False), cluster("mixed"))
    tries = {(t.policy, t.system) for t in refused.value.tries}
    assert ("SRTF+opt", "gavel") not in tries and ("SRTF+tune", "gavel") in tries
