"""Heterogeneity-aware TUNE: Gavel's type choice plus Synergy's CPU/memory placement on that type's servers."""

import pytest

from hetsched import ClusterSpec, HetschedError
from hetsched.core.registry import make_policy
from hetsched.place.hetero import gavel_models, type_demand
from hetsched.model.profiles import load_sensitivity
from hetsched.sim.simulator import simulate
from hetsched.traces import GavelGenerator

CLUSTER = "1x8/24/500@v100+1x8/24/500@p100+1x8/24/500@k80"


@pytest.fixture(scope="module")
def stream(gavel_table):
    return GavelGenerator(seed=2, mean_interarrival_s=1800, throughputs=gavel_table).jobs(80)


def jcts(result):
    return {j: r.jct_s for j, r in result.jobs.items()}


def test_type_demand_follows_the_bottleneck():
    res18 = load_sensitivity(3)["res18"]
    # On the reference type: the profile's ideal and speedup.
    assert type_demand(res18, 1.0, 1, (8, 24, 500)) == (9.0, 62.5, pytest.approx(2.4))
    # On a GPU a quarter as fast, compute caps the rate at 0.6 of the reference fair rate: no gain, 2 CPUs do.
    cpu, mem, speedup = type_demand(res18, 0.25, 1, (8, 24, 500))
    assert speedup == 1.0 and cpu == 2
    # Half as fast: 1.2x at most, reached with 4 CPUs.
    cpu, mem, speedup = type_demand(res18, 0.5, 1, (8, 24, 500))
    assert speedup == pytest.approx(1.2) and cpu == 4


def test_fair_share_placement_changes_nothing(stream, gavel_table):
    """`+fair` places on servers with GPU-proportional shares: every rate is the table's, as without it."""
    cluster = ClusterSpec.load(CLUSTER)
    plain = simulate(stream, cluster, "max_min_fairness_perf", gavel_table, record_timeline=False)
    fair = simulate(stream, cluster, "max_min_fairness_perf+fair", gavel_table, record_timeline=False)
    assert jcts(fair) == pytest.approx(jcts(plain))


def test_tune_helps_both_allocations(stream, gavel_table):
    cluster = ClusterSpec.load(CLUSTER)
    mean = lambda p: sum(jcts(simulate(stream, cluster, p, gavel_table)).values())  # noqa: E731
    assert mean("max_min_fairness_perf+tune") < mean("max_min_fairness_perf")
    assert mean("max_min_fairness+tune") < mean("max_min_fairness")


def test_names_and_errors():
    from hetsched.core.pipeline import Place
    from hetsched.core.registry import pipeline_for
    from hetsched.sim.simulator import SimulationConfig

    p = make_policy("gavel+tune+place")            # the papers' alias composes like the registry name
    assert p.name == "max_min_fairness_perf+tune+place" and p.heterogeneity_aware
    assert pipeline_for(p, SimulationConfig()).place == Place("tune", least_free=True)
    with pytest.raises(HetschedError, match="space sharing"):
        pipeline_for("max_min_fairness_packed+tune", SimulationConfig())
    with pytest.raises(HetschedError, match="place 'opt'"):
        pipeline_for("max_min_fairness_perf+opt", SimulationConfig())
    with pytest.raises(HetschedError, match="expected"):
        make_policy("max_min_fairness_perf+tune+fair")


def test_needs_servers_with_resources(stream, gavel_table):
    with pytest.raises(HetschedError, match="CPU cores and memory"):
        simulate(stream[:5], ClusterSpec.parse("8:8:8"), "max_min_fairness_perf+tune", gavel_table)


def test_every_gavel_model_has_a_profile(gavel_table):
    from hetsched.model.catalog import split_job_type
    models = {split_job_type(k.job_type)[0] for k in gavel_table.keys}
    mapping = gavel_models()
    assert models <= set(mapping)
    assert set(mapping.values()) <= set(load_sensitivity(3).models)
