"""The runtime's fixed costs as simulator rules (docs/rules.md#lease-start, docs/rules.md#fixed-rounds): worked
by hand on one GPU, refused where they cannot act, and read from the file `hetsched calibrate` writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hetsched import ClusterSpec, Job
from hetsched.cli.main import main
from hetsched.core.pipeline import CompositionError
from hetsched.core.run_config import SYSTEM_RULES, SimulationConfig
from hetsched.errors import HetschedError
from hetsched.io.calibration import calibrated_config, calibration_of, read_calibration, write_calibration
from hetsched.runtime.replay import emulated_throughputs
from hetsched.sim.simulator import RoundSimulation, simulate

RESNET = "ResNet-18 (batch size 64)"
TABLE = emulated_throughputs([RESNET])          # 200 steps/s on a v100
ONE_GPU = ClusterSpec.parse("1:0:0")


def _jcts(jobs, **rules):
    res = simulate(jobs, ONE_GPU, "max_min_fairness_perf", TABLE, round_s=100.0, min_reset_interval_s=0.0, **rules)
    return res.jobs_frame().set_index("job_id")["jct_s"].to_dict()


def test_a_new_lease_starts_late_and_a_continuing_one_loses_nothing():
    job = Job(0, 0.0, RESNET, 1, 50_000.0)       # 250 s alone
    assert _jcts([job]) == {0: 250.0}
    # Round 1 is a new lease: floor(200 x 90) = 18,000 steps; rounds 2 and 3 continue on the same GPU.
    assert _jcts([job], lease_start_s=10.0) == {0: 200.0 + 12_000 / 200.0}


def test_every_new_lease_pays_when_two_jobs_take_turns():
    jobs = [Job(0, 0.0, RESNET, 1, 18_000.0), Job(1, 0.0, RESNET, 1, 18_000.0)]
    plain, late = _jcts(jobs), _jcts(jobs, lease_start_s=10.0)
    # One round each (90 s of work) either way: the first round ends 10 s later, the second starts there and
    # its job starts 10 s late again.
    assert sorted(plain.values()) == [90.0, 180.0] and sorted(late.values()) == [100.0, 200.0]
    # A full round of work each (100 s): 18,000 steps in its first lease, the last 2,000 in a second one.
    jobs = [j.with_(total_steps=20_000.0) for j in jobs]
    assert sorted(_jcts(jobs).values()) == [100.0, 200.0]
    assert sorted(_jcts(jobs, lease_start_s=10.0).values()) == [200.0 + 20.0, 220.0 + 20.0]


def test_fixed_rounds_keep_the_grid():
    first, second = Job(0, 0.0, RESNET, 1, 5_000.0), Job(1, 10.0, RESNET, 1, 5_000.0)    # 25 s each
    # Gavel's rule: the round ends with its last micro-task (25 s); the next starts there.
    assert _jcts([first, second]) == {0: 25.0, 1: 25.0 - 10.0 + 25.0}
    # The runtime's: the round lasts 100 s; the arrival waits for the next plan.
    assert _jcts([first, second], fixed_rounds=True) == {0: 25.0, 1: 100.0 - 10.0 + 25.0}
    late = Job(0, 130.0, RESNET, 1, 5_000.0)
    assert _jcts([late], fixed_rounds=True) == {0: 70.0 + 25.0}                 # idle: next grid point, 200
    assert _jcts([late], fixed_rounds=True, round_origin_s=-0.5) == {0: 69.5 + 25.0}
    assert _jcts([late]) == {0: 25.0}                                             # Gavel's: at the arrival


def test_server_rounds_credit_a_new_lease_less_in_its_first_round():
    job = Job(0, 0.0, "res18", 1, 1.0)
    cluster = ClusterSpec.load("1x4/24/500@v100")
    sim = RoundSimulation([job], cluster, "FIFO+tune", round_s=300.0)
    sim.step()
    per_round = float(sim.plan.round_steps[0])                  # iterations of one full round
    job = job.with_(total_steps=2 * per_round)

    def jct(**rules):
        res = simulate([job], cluster, "FIFO+tune", round_s=300.0, **rules)
        return res.jobs_frame()["jct_s"].iloc[0]
    assert jct() == 600.0 and jct(lease_start_s=1.0) == 900.0      # the first round falls short: a third round
    # With the runtime's rounds a completing job ends at its last step, not at the round's end.
    job = job.with_(total_steps=2.5 * per_round)
    assert jct() == 900.0 and jct(fixed_rounds=True) == 750.0
    short = 2.5 * per_round - np.floor(per_round * 270.0 / 300.0) - per_round        # after a 30-s late start
    assert jct(fixed_rounds=True, lease_start_s=30.0) == pytest.approx(600.0 + short * 300.0 / per_round)


def test_artifact_presets_leave_both_rules_off():
    for system in SYSTEM_RULES:
        config = SimulationConfig.for_system(system)
        assert config.lease_start_s == 0.0 and not config.fixed_rounds


@pytest.mark.parametrize("policy, rules", [
    ("max_min_fairness_perf", {"lease_start_s": -1.0}),
    ("max_min_fairness_perf", {"lease_start_s": float("nan")}),
    ("max_min_fairness_perf", {"lease_start_s": 5.0, "ideal": True}),
    ("max_min_fairness_perf", {"fixed_rounds": True, "ideal": True}),
    ("max_min_fairness_perf", {"round_origin_s": 3.0}),
    ("max_min_fairness_perf", {"over_deadline": False}),            # no adaptive jobs: nothing to turn off
    ("FIFO+opt", {"lease_start_s": 5.0}),
])
def test_rules_that_cannot_act_are_refused(policy, rules):
    cluster = ClusterSpec.load("1x4/24/500@v100") if "+" in policy else ONE_GPU
    with pytest.raises(CompositionError):
        simulate([Job(0, 0.0, "res18" if "+" in policy else RESNET, 1, 100.0)], cluster, policy,
                 None if "+" in policy else TABLE, round_s=100.0, **rules)


def test_the_calibration_file_round_trips_and_bad_files_are_refused(tmp_path):
    figures = {"mean_lease_start_s": 0.4, "lease_starts": 12, "mean_restart_s": 3.5, "restarts": 4, "rounds": 30}
    path = tmp_path / "calibration.json"
    written = write_calibration(path, figures)
    assert read_calibration(path) == written and written["lease_start_s"] == 0.4 and written["fixed_rounds"]
    config = calibrated_config(SimulationConfig(), path)
    assert config.lease_start_s == 0.4 and config.fixed_rounds
    with pytest.raises(HetschedError, match="no lease has started"):
        calibration_of({**figures, "lease_starts": 0})
    for bad in ("not json", json.dumps([1]), json.dumps({"lease_start_s": 1.0}),
                json.dumps({**written, "lease_start_s": -2}), json.dumps({**written, "lease_start_s": "1"})):
        path.write_text(bad)
        with pytest.raises(HetschedError, match="calibration"):
            read_calibration(path)


def test_simulate_takes_a_calibration_file(tmp_path, capsys):
    path = tmp_path / "calibration.json"
    write_calibration(path, {"mean_lease_start_s": 30.0, "lease_starts": 5})
    args = ["simulate", "--policy", "max_min_fairness_perf", "--cluster", "2:1:1", "--generate", "gavel",
            "--num-jobs", "12", "--mean-interarrival", "600", "--round", "600", "--json"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(args + ["--calibration", str(path)]) == 0
    calibrated = json.loads(capsys.readouterr().out)
    assert calibrated["config"]["stages"]["rules"] == "'600 s rounds, credit per task, lease start 30 s, fixed rounds'"
    assert plain["config"]["stages"]["rules"] == "'600 s rounds, credit per task'"
    assert calibrated["avg_jct_s"] > plain["avg_jct_s"]
    path.write_text("{}")
    assert main(args + ["--calibration", str(path)]) == 2


def test_a_calibrated_run_lets_adaptive_jobs_run_every_step():
    """Shockwave's simulator completes an adaptive job once it has run 1.5 x its isolated duration (R14); the
    runtime runs every step (R55), and a calibrated run does too."""
    from hetsched.experiments.runtime_vs_sim import trace
    from hetsched.runtime.replay import job_types_of

    jobs = trace("shockwave", 5, 60.0, 30.0, 0)
    table = emulated_throughputs(job_types_of(jobs))

    def frame(**rules):
        res = simulate(jobs, ClusterSpec.parse("4:0:0"), "shockwave", table, round_s=60.0, dynamic_adaptation=True,
                       **rules)
        return res.jobs_frame().set_index("job_id")
    artifact, calibrated = frame(), frame(over_deadline=False)
    longer = calibrated["jct_s"] - artifact["jct_s"]
    assert (longer >= 0).all() and (longer > 0).sum() >= 1        # cut jobs now run their last steps
    assert (calibrated["steps_done"] >= artifact["steps_done"]).all()
    assert not calibrated_config(SimulationConfig(dynamic_adaptation=True), {"lease_start_s": 0.2}).over_deadline
    assert calibrated_config(SimulationConfig(), {"lease_start_s": 0.2}).over_deadline     # no adaptive jobs


def test_a_saved_run_is_compared_with_the_simulator_as_it_is_now():
    """`benchmarks/runtime_vs_sim.py --resimulate`: the trace is rebuilt from the saved summary and simulated
    again; a runtime twice as slow as the calibrated simulator shows a +100 % gap on every job."""
    from hetsched.experiments.runtime_vs_sim import resimulate, simulated, trace

    summary = {"system": "gavel", "policy": "max_min_fairness_perf", "cluster": "2:1:1", "jobs": 6, "round_s": 10.0,
               "gap_s": 5.0, "seed": 3, "lease_start_s": 0.3, "round_origin_s": -0.01}
    jobs = trace("gavel", 6, 10.0, 5.0, 3)
    calibrated = simulated("gavel", jobs, "2:1:1", "max_min_fairness_perf", 10.0, 0.3, True, -0.01)
    saved = calibrated.mul(2.0).rename("jct_s").reset_index()
    out = resimulate(saved, summary)
    assert out["calibrated_avg_jct_gap"] == pytest.approx(1.0)
    assert out["calibrated_p90_abs_ratio_minus_1"] == pytest.approx(1.0)
    assert out["sim_avg_jct_gap"] != pytest.approx(1.0)             # the papers' rules predict otherwise


def test_a_failed_runtime_run_keeps_its_state_and_logs(tmp_path, caplog):
    """A run on the local runtime that fails (here: not done within its 1-s budget) keeps its state directory,
    with the scheduler's and workers' logs, and says where; a malformed cluster is refused before anything starts."""
    from hetsched.errors import SpecError
    from hetsched.experiments.runtime_vs_sim import compare

    with pytest.raises(SpecError, match="no-such-cluster"):
        compare("gavel", 2, 2.0, cluster="no-such-cluster", state_parent=str(tmp_path))
    assert not any(tmp_path.iterdir())
    with caplog.at_level("WARNING", "hetsched.experiments.runtime_vs_sim"), pytest.raises(TimeoutError):
        compare("gavel", 2, 2.0, state_parent=str(tmp_path), timeout_s=1.0)
    kept = list(tmp_path.iterdir())
    assert len(kept) == 1 and kept[0].name.startswith("gavel-") and (kept[0] / "scheduler.log").exists()
    assert str(kept[0]) in caplog.text


def test_the_gavel_comparison_runs_tune_on_servers():
    """`benchmarks/runtime_vs_sim.py --policy max_min_fairness_perf+tune --cluster 1x2/12/250@v100+...`: the
    simulated side reads server groups (it read GPU counts only) and credits TUNE's speedups."""
    from hetsched.experiments.runtime_vs_sim import simulated, trace

    cluster = "1x2/12/250@v100+1x2/12/250@k80"
    jobs = trace("gavel", 10, 4.0, 2.0, 0)
    tuned = simulated("gavel", jobs, cluster, "max_min_fairness_perf+tune", 4.0)
    plain = simulated("gavel", jobs, cluster, "max_min_fairness_perf", 4.0)
    assert len(tuned) == len(jobs) and tuned.notna().all() and (tuned < plain - 1e-9).any()
