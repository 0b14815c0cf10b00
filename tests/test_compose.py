"""Every combination of stages either runs with every stage acting, or is refused when it is built.

The names cover each decide family (allocations, space sharing, the planner, Synergy's orderings) x each
placement x each artifact's round rules, on a mixed-type and a one-type cluster with CPU cores and memory. A
refusal must name two stages and suggest a name that runs; a run must finish every job, and the stages must
change the result where they should (TUNE where CPU is scarce, Shockwave's rules against Gavel's).
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

import pytest

from hetsched import ClusterSpec, load_throughputs
from hetsched.errors import HetschedError
from hetsched.sim.metrics import summary
from hetsched.core.pipeline import CompositionError
from hetsched.core.registry import pipeline_for, policy_for
from hetsched.sim.simulator import SYSTEM_RULES, SimulationConfig, simulate
from hetsched.traces import make_generator

DECIDES = ["gavel", "gavel_las", "gavel_ss", "themis", "allox", "shockwave", "FIFO", "LAS", "SRTF"]
PLACES = ["", "+fair", "+greedy", "+tune", "+opt", "+tune+place"]
RULES = ["gavel", "synergy", "shockwave"]
# 3 CPU cores and 62.5 GB per GPU (a point of the profiles' grid, which Synergy-OPT needs): CPU-sensitive jobs
# run faster when TUNE gives them more.
CLUSTERS = {"mixed": "2x4/12/250@v100+2x4/12/250@k80", "one type": "4x4/12/250@v100"}
SYNERGY_ORDERINGS = {"FIFO", "LAS", "SRTF"}


@lru_cache(maxsize=None)
def table():
    return load_throughputs("gavel_simulation")


@lru_cache(maxsize=None)
def jobs(synergy: bool) -> tuple:
    """A small stream: Synergy's models for its orderings (its profiles give their rates), Gavel's job types
    (about an hour each on a V100) for the allocations and the planner."""
    if synergy:
        return tuple(make_generator("synergy", jobs_per_hour=12.0).jobs(14))
    out = []
    for job in make_generator("gavel", seed=1, mean_interarrival_s=300.0).jobs(14):
        key = table().isolated[table().index(job.key), table().gpu_index("v100"), 0] if job.key in table() else 0
        out.append(replace(job, total_steps=max(100, int(key * 3600)) if key > 0 else 3600))
    return tuple(out)


def config_for(rules: str) -> SimulationConfig:
    return SimulationConfig.for_system(rules, record_timeline=False)


def server_rounds(name: str, rules: str) -> bool:
    """Synergy's orderings under Synergy's rules run its server rounds on its own models."""
    return name.split("+")[0] in SYNERGY_ORDERINGS and rules == "synergy"


def run(name: str, rules: str, cluster: str, **overrides):
    spec = ClusterSpec.load(CLUSTERS[cluster])
    return simulate(list(jobs(server_rounds(name, rules))), spec, policy_for(name, 0, system=rules), table(),
                    config_for(rules), **overrides)


def build(name: str, rules: str, cluster: str):
    spec = ClusterSpec.load(CLUSTERS.get(cluster, "4x4/12/120@v100"))
    return pipeline_for(policy_for(name, 0, system=rules), config_for(rules), spec)


COMBINATIONS = [(d + p, r, c) for d in DECIDES for p in PLACES for r in RULES for c in CLUSTERS]


def _names_in(message: str) -> list[str]:
    return re.findall(r"'([A-Za-z_]+(?:\+[a-z]+)+|[a-z_]+)'", message)


@pytest.mark.parametrize("name,rules,cluster", COMBINATIONS, ids=["-".join(c) for c in COMBINATIONS])
def test_combination_runs_or_is_refused(name, rules, cluster):
    try:
        pipeline = build(name, rules, cluster)
    except CompositionError as exc:
        first, second = exc.stages
        assert first.split(" ")[0] in ("decide", "select", "place", "rates", "rules"), exc
        assert first in str(exc) and second in str(exc)
        suggested = [n for n in _names_in(str(exc).split(". ", 1)[1]) if n not in ("place",)]
        for other in suggested:
            try:                       # every name a refusal suggests resolves (on another cluster or rules, maybe)
                policy_for(other, 0)
            except HetschedError as again:
                pytest.fail(f"{name}: suggested {other!r}, which does not resolve: {again}")
        return
    result = run(name, rules, cluster)
    assert summary(result)["num_jobs"] == len(jobs(pipeline.rules.credit == "round"))
    assert pipeline.rules.round_s == {"gavel": 360.0, "synergy": 300.0, "shockwave": 120.0}[rules]


#: Compositions that must run (the papers' own and the ones no artifact has); guards against refusing too much.
MUST_RUN = [("gavel+tune", "gavel", "mixed"), ("themis+tune", "gavel", "mixed"), ("gavel_las+fair", "gavel", "mixed"),
            ("shockwave+tune", "shockwave", "mixed"), ("shockwave+tune", "shockwave", "one type"),
            ("FIFO+tune", "synergy", "one type"), ("gavel+tune", "shockwave", "mixed"),
            ("LAS+opt", "synergy", "one type"), ("gavel_ss", "gavel", "mixed"), ("FIFO+tune", "gavel", "mixed"),
            ("SRTF+fair", "gavel", "mixed"), ("TETRIS+tune+place", "gavel", "one type")]


@pytest.mark.parametrize("name,rules,cluster", MUST_RUN)
def test_composition_is_accepted(name, rules, cluster):
    build(name, rules, cluster)


@pytest.mark.parametrize("decide,rules", [("gavel", "gavel"), ("themis", "gavel"), ("shockwave", "shockwave"),
                                          ("gavel", "shockwave")])
@pytest.mark.parametrize("cluster", list(CLUSTERS))
def test_tune_acts_where_cpu_is_scarce(decide, rules, cluster):
    """TUNE gives CPU-sensitive jobs more CPU and memory: the JCT moves; '+fair' (the table's own share per GPU)
    places CPU and memory and keeps the table's rates."""
    plain = summary(run(decide, rules, cluster))["avg_jct_s"]
    tuned = summary(run(decide + "+tune", rules, cluster))["avg_jct_s"]
    assert tuned != pytest.approx(plain, rel=1e-6)
    assert tuned < plain


def test_shockwave_rules_act_on_a_composition():
    """The preemption penalty and batch-size rules change gavel+tune's result (they were dropped before)."""
    gavel = summary(run("gavel+tune", "gavel", "mixed"))
    shockwave = summary(run("gavel+tune", "shockwave", "mixed"))
    assert gavel["avg_jct_s"] != shockwave["avg_jct_s"]


@pytest.mark.parametrize("name,rules,cluster,stages", [
    ("FIFO+opt", "synergy", "off grid", ("place 'opt'", "servers of 4 GPUs, 12 CPUs, 120 GB")),
    ("FIFO+tune", "synergy", "mixed", ("decide 'FIFO'", "a cluster of 2 GPU types")),
    ("FIFO+tune", "shockwave", "one type", ("decide 'FIFO'", "rules")),
    ("FIFO+opt", "gavel", "mixed", ("decide 'FIFO'", "credit per task")),
    ("gavel+opt", "gavel", "mixed", ("decide 'max_min_fairness_perf'", "place 'opt'")),
    ("gavel_ss+tune", "gavel", "mixed", ("decide 'max_min_fairness_packed'", "place 'tune'")),
])
def test_refusals_name_both_stages(name, rules, cluster, stages):
    with pytest.raises(CompositionError) as info:
        build(name, rules, cluster)
    for stage in stages:
        assert stage in str(info.value)


def test_refusal_suggestions_run_on_the_same_cluster():
    """The new user's path on a mixed cluster: the name the refusal suggests runs there."""
    with pytest.raises(CompositionError) as info:
        build("FIFO+tune", "synergy", "mixed")
    assert "'FIFO+tune' --rules gavel" in str(info.value)
    suggested = [t for t in info.value.tries if t.policy == "fifo_perf+tune"]
    assert [t.system for t in suggested] == ["gavel"]
    assert summary(run("fifo_perf+tune", "gavel", "mixed"))["num_jobs"] == 14


def test_estimates_and_profiles_need_the_stage_they_change():
    spec = ClusterSpec.load(CLUSTERS["mixed"])
    with pytest.raises(CompositionError, match="rates 'table \\+ estimated co-location'"):
        pipeline_for(policy_for("gavel", 0), SimulationConfig(estimate_colocation=(4, 0.1)), spec)
    with pytest.raises(CompositionError, match="place 'gpus'"):
        pipeline_for(policy_for("gavel", 0), SimulationConfig(profiles_ratio=4), spec)
    with pytest.raises(CompositionError, match="decide 'shockwave'"):
        pipeline_for(policy_for("shockwave", 0), SimulationConfig(ideal=True), spec)


def test_a_fluid_run_refuses_round_settings_it_has_no_rounds_for():
    """SimulationConfig(ideal=True, round_s=60) ran as if the round length had not been given."""
    spec = ClusterSpec.parse("4:4:4")
    for config, named in ((SimulationConfig(ideal=True, round_s=60.0), "round_s=60.0"),
                          (SimulationConfig(ideal=True, min_reset_interval_s=0.0), "min_reset_interval_s=0.0"),
                          (SimulationConfig(ideal=True, placement_aware=True), "placement-aware")):
        with pytest.raises(CompositionError, match=named):
            pipeline_for(policy_for("gavel", 0), config, spec)
    assert pipeline_for(policy_for("gavel", 0), SimulationConfig.for_system("gavel", ideal=True), spec).rules.ideal


def test_readme_shows_the_registry_table():
    from pathlib import Path

    from hetsched.core.registry import composition_markdown
    assert composition_markdown() in (Path(__file__).parents[1] / "README.md").read_text()


@pytest.mark.parametrize("ordering", ["FIFO", "LAS", "SRTF", "FTF", "DRF", "TETRIS"])
def test_orderings_run_on_mixed_types_with_per_type_placement(ordering):
    """Under Gavel's rules an ordering is the decide stage of the one scheduler: its jobs take their fastest
    type with room, TUNE places CPU and memory on that type's servers, and Gavel's job types get their demands
    from the one demand model."""
    result = run(ordering + "+tune", "gavel", "mixed", record_timeline=True)
    assert summary(result)["num_jobs"] == 14
    assert set(result.timeline_frame()["gpu_type"]) == {"v100", "k80"}
    fair = summary(run(ordering + "+fair", "gavel", "mixed"))["avg_jct_s"]
    assert summary(result)["avg_jct_s"] < fair


def test_orderings_differ_on_the_one_scheduler():
    jcts = {o: summary(run(o + "+tune", "gavel", "mixed"))["avg_jct_s"] for o in ("FIFO", "LAS", "SRTF")}
    assert len(set(jcts.values())) == 3, jcts


def test_an_ordering_refuses_job_types_the_table_lacks():
    spec = ClusterSpec.load(CLUSTERS["mixed"])
    with pytest.raises(HetschedError, match="has no rate in the throughput table"):
        simulate(list(jobs(True))[:3], spec, "FIFO+tune", table(), config_for("gavel"))


@pytest.mark.parametrize("bad, named", [({"round_s": 0.0}, "round_s=0.0"), ({"round_s": float("nan")}, "round_s=nan"),
                                        ({"min_reset_interval_s": -5.0}, "min_reset_interval_s=-5.0"),
                                        ({"preemption_penalty_s": -1.0}, "preemption_penalty_s=-1.0"),
                                        ({"credit": "step"}, "credit='step'"),
                                        ({"round_origin_s": float("inf")}, "round_origin_s")])
def test_round_rules_refuse_values_no_run_can_mean(bad, named):
    """A zero or NaN round ran until the round budget (10 million rounds by default), a negative reset interval
    was read as 0 and an unknown credit failed inside the round loop: each is refused when the rules are built,
    by name. (A negative grid origin is a real grid, tests/test_calibration.py.)"""
    with pytest.raises(HetschedError, match=re.escape(named)):
        pipeline_for("gavel", SimulationConfig(**bad))


@pytest.mark.parametrize("bad, named", [({"window": (4, 2)}, "window=(4, 2)"),
                                        ({"window": (-5, 10)}, "window=(-5, 10)"),
                                        ({"window": (3, 3)}, "window=(3, 3)"),
                                        ({"window": (0.5, 10.2)}, "window=(0.5, 10.2)"),
                                        ({"max_rounds": 0}, "max_rounds=0"),
                                        ({"max_active_jobs": 0}, "max_active_jobs=0")])
def test_a_simulation_config_refuses_windows_no_stream_completes(bad, named):
    """A reversed, empty or negative window never counts down to its end, so simulate() on a continuous stream
    ran until the round budget (10 million rounds by default): refused with the value named, before any round.
    (On the old code this stops at the 2,000-round budget given here, a SimulationError without the name.)"""
    stream = iter(make_generator("gavel", mean_interarrival_s=3600.0))
    with pytest.raises(HetschedError, match=re.escape(named)):
        simulate(stream, ClusterSpec.load("4:4:4"), "max_min_fairness_perf", record_timeline=False,
                 **{"max_rounds": 2000, **bad})
    assert SimulationConfig(window=[600, 800]).window == (600, 800)          # a JSON list is the same window


@pytest.mark.parametrize("field", ["cpu_demand", "mem_demand_gb"])
def test_runs_that_place_cpu_and_memory_refuse_a_jobs_own_demands(field):
    """A job's own CPU or memory demand (a trace's column) is read by no placement: the runs that place CPU and
    memory refuse it by name instead of placing the job by its profile; a GPU-only run has nothing to ignore."""
    table = load_throughputs()
    gavel = make_generator("gavel", seed=0, mean_interarrival_s=900.0).jobs(6)
    synergy = make_generator("synergy", jobs_per_hour=12.0).jobs(6)
    cluster = ClusterSpec.load("2x4/24/500@v100+1x4/24/500@k80")
    for jobs, policy, config in ((gavel, "gavel+tune", None), (gavel, "gavel_las+fair", None),
                                 (synergy, "FIFO+tune", SimulationConfig.for_system("synergy"))):
        jobs = [replace(j, **{field: 4.0}) if i == 2 else j for i, j in enumerate(jobs)]
        with pytest.raises(HetschedError, match=f"job {jobs[2].job_id}: sets its own cpu_demand/mem_demand_gb"):
            simulate(jobs, cluster if config is None else ClusterSpec.load("1x8/24/500"), policy, table, config=config)
    jobs = [replace(j, **{field: 4.0}) for j in gavel]
    assert summary(simulate(jobs, cluster, "gavel", table))["num_jobs"] == 6


#: For each setting: a run whose stages read it, and one whose stages do not (name, rules, value).
SETTINGS = {
    "round_s": (("gavel", "gavel", 60.0), ("gavel", "gavel-ideal", 60.0)),
    "fixed_rounds": (("gavel", "gavel", True), ("gavel", "gavel-ideal", True)),
    "lease_start_s": (("gavel", "gavel", 2.0), ("FIFO+opt", "synergy", 2.0)),
    "round_origin_s": (("FIFO+tune", "synergy", 1.0), ("gavel", "gavel", 1.0)),
    "macro_rounds": (("FIFO+tune", "synergy", False), ("gavel", "gavel", False)),
    "min_reset_interval_s": (("gavel", "gavel", 100.0), ("shockwave", "shockwave", 100.0)),
    "replay_reset": (("gavel", "gavel", False), ("FIFO+tune", "synergy", False)),
    "estimate_colocation": (("gavel_ss", "gavel", (4, 0.1)), ("gavel", "gavel", (4, 0.1))),
    "dynamic_adaptation": (("gavel", "gavel", True), ("gavel", "gavel-ideal", True),
                           "x rates 'table + batch size': fluid rates have no micro-tasks"),     # checked first
    "preemption_penalty_s": (("gavel", "shockwave", 5.0), ("gavel", "gavel", 5.0)),
    "over_deadline": (("shockwave", "shockwave", False), ("gavel", "gavel", False)),
    "placement_aware": (("gavel", "gavel", True), ("gavel+tune", "gavel", True)),
    "profiles_ratio": (("gavel+tune", "gavel", 4), ("gavel", "gavel", 4)),
    "time_scale": (("sia", "", 15.0), ("gavel", "gavel", 15.0)),
}


def _with(rules: str, **setting) -> SimulationConfig:
    system, _, ideal = rules.partition("-")
    if not system:                   # an elastic system's own rules
        return SimulationConfig(ideal=bool(ideal), **setting)
    return SimulationConfig.for_system(system, ideal=bool(ideal), **setting)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_a_setting_runs_where_a_stage_reads_it_and_is_refused_where_none_does(setting):
    """Issue 68: `--min-reset-interval 100` with `shockwave` or `FIFO+tune` gave exactly the numbers without it.
    Each stage declares the settings it reads (`reads`, docs/rules.md#settings); a setting given a value of its
    own that no stage of the run reads is refused, naming the stages."""
    from hetsched.core.pipeline import READ_BY

    (name, rules, value), (other, other_rules, _), *expected = SETTINGS[setting]
    assert set(SETTINGS) == set(READ_BY)
    spec = ClusterSpec.load(CLUSTERS["one type"])
    pipeline = pipeline_for(policy_for(name, 0, system=rules.split("-")[0]), _with(rules, **{setting: value}), spec)
    assert setting in pipeline.reads()
    with pytest.raises(CompositionError) as info:
        pipeline_for(policy_for(other, 0, system=other_rules.split("-")[0]), _with(other_rules, **{setting: value}),
                     spec)
    assert (expected or [f"x {setting}={value!r}: no stage of this run reads it"])[0] in str(info.value)
    assert str(info.value).startswith(("decide ", "rules "))


@pytest.mark.parametrize("policy, source", [("shockwave", ["--generate", "gavel", "--num-jobs", "6", "--jobs-per-hour", "2"]),
                                            ("FIFO+tune", ["--trace", "data/traces/synergy_static_100.csv"])])
def test_min_reset_interval_that_no_stage_reads_exits_2_naming_the_stages(policy, source, capsys):
    from hetsched.cli.main import main

    assert main(["simulate", "--policy", policy, "--cluster", "1x8/24/500@v100", *source,
                 "--min-reset-interval", "100"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "x min_reset_interval_s=100.0: no stage of this run reads it" in lines[0], lines
    assert f"decide '{policy.split('+')[0]}'" in lines[0] and "rules '" in lines[0]
