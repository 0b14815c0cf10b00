"""`simulate()` without a config runs the rules `hetsched simulate --rules auto` picks, and named rules bring their
artifact's driver parameters to a policy named by string (docs/rules.md#auto-rules)."""

from __future__ import annotations

import json

import pytest

from hetsched import ClusterSpec
from hetsched.core.registry import policy_for
from hetsched.errors import HetschedError
from hetsched.sim.metrics import summary
from hetsched.sim.simulator import SimulationConfig, simulate
from hetsched.traces import GavelGenerator, read_trace

SHOCKWAVE_TRACE = "data/traces/shockwave_120_40_25.csv"


def _jcts(result):
    return result.jobs_frame().set_index("job_id")["jct_s"].to_dict()


def test_shockwaves_planner_without_a_config_runs_under_shockwaves_rules():
    jobs = GavelGenerator(seed=1, mean_interarrival_s=1500.0).jobs(14)
    cluster = ClusterSpec.parse("1:1:1")
    bare = simulate(jobs, cluster, "shockwave", record_timeline=False)
    named = simulate(jobs, cluster, "shockwave", config=SimulationConfig.for_system("shockwave"), record_timeline=False)
    defaults = simulate(jobs, cluster, "shockwave", config=SimulationConfig(), record_timeline=False)
    assert _jcts(bare) == _jcts(named)
    assert _jcts(bare) != _jcts(defaults)        # the preemption penalty and reset interval act on this stream


def test_named_rules_bring_their_drivers_policy_parameters():
    jobs = read_trace(SHOCKWAVE_TRACE)[:60]
    cluster, rules = ClusterSpec.load("v100=8"), SimulationConfig.for_system("shockwave", record_timeline=False)
    by_name = simulate(jobs, cluster, "allox", "shockwave_tacc", rules)
    driver = simulate(jobs, cluster, policy_for("allox", 0, system="shockwave"), "shockwave_tacc", rules)
    plain = simulate(jobs, cluster, policy_for("allox", 0), "shockwave_tacc", rules)
    assert _jcts(by_name) == _jcts(driver)       # AlloX with Shockwave's alpha = 0.2, as the CLI runs it
    assert summary(by_name)["avg_jct_s"] != summary(plain)["avg_jct_s"]


def test_an_adaptive_job_list_without_a_config_gets_the_rules_that_can_run_it():
    jobs = read_trace(SHOCKWAVE_TRACE)[:12]
    bare = simulate(jobs, ClusterSpec.load("v100=4"), "max_min_fairness", "shockwave_tacc", record_timeline=False)
    named = simulate(jobs, ClusterSpec.load("v100=4"), "max_min_fairness", "shockwave_tacc",
                     SimulationConfig.for_system("shockwave"), record_timeline=False)
    assert _jcts(bare) == _jcts(named) and len(bare.jobs) == 12


def test_a_config_names_known_rules_only():
    with pytest.raises(HetschedError, match="system='tiresias'"):
        SimulationConfig(system="tiresias")


@pytest.mark.parametrize("policy, cluster, rules", [("FIFO+tune", "2x8/24/500@v100", "synergy"),
                                                    ("gavel_las", "2:2:2", "gavel")])
def test_the_cli_reports_the_rules_its_run_had(policy, cluster, rules, capsys):
    from hetsched.cli.main import main

    trace = "data/traces/synergy_static_100.csv" if rules == "synergy" else None
    args = ["--trace", trace] if trace else ["--generate", "gavel", "--num-jobs", "6", "--jobs-per-hour", "4"]
    assert main(["simulate", "--policy", policy, "--cluster", cluster, *args, "--json"]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert config["rules"] == rules and config["round_s"] == {"synergy": 300.0, "gavel": 360.0}[rules]


def test_a_fluid_run_refuses_shockwave_for_what_it_is_not_for_its_rules_presets():
    jobs = GavelGenerator(seed=1, mean_interarrival_s=900.0).jobs(6)
    with pytest.raises(HetschedError, match="the planner decides whole rounds"):   # not "min_reset_interval_s=1000"
        simulate(jobs, ClusterSpec.parse("1:1:1"), "shockwave", ideal=True)
    with pytest.raises(HetschedError, match="fluid rates have no micro-tasks to penalise"):
        simulate(jobs, ClusterSpec.parse("1:1:1"), "gavel", config=SimulationConfig.for_system("shockwave"),
                 ideal=True)
    with pytest.raises(HetschedError, match="round_s=60"):                         # a setting given by hand
        simulate(jobs, ClusterSpec.parse("1:1:1"), "gavel", ideal=True, round_s=60.0)
