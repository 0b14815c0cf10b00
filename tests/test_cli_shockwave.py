"""`hetsched simulate` on Shockwave's traces: the seven policies of its figure, every shipped trace, bad input."""

import json

import pytest

from hetsched.cli.main import main
from hetsched.experiments.shockwave import POLICIES, SETUPS

CANONICAL = "data/traces/shockwave_120_40_25.csv"
KEYS = {"makespan_s", "avg_jct_s", "worst_ftf_rho", "unfair_fraction", "utilization", "num_rounds", "cpu_s"}


def _simulate(capsys, *args) -> dict:
    assert main(["simulate", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_of_the_canonical_figure(policy, capsys):
    row = _simulate(capsys, "--policy", policy, "--cluster", "v100=32", "--throughputs", "shockwave_tacc",
                    "--trace", CANONICAL, "--round", "120")
    assert KEYS <= set(row) and row["num_jobs"] == 120
    assert 0 <= row["unfair_fraction"] <= 1 and row["worst_ftf_rho"] > 0 and 0 < row["utilization"] <= 1
    assert 150 < row["num_rounds"] < 400                    # 120-s rounds (Gavel's 360 s would give about 95)


@pytest.mark.parametrize("setup", ["scale_64", "scale_128", "scale_256"])
def test_every_shipped_trace_runs_under_shockwaves_rules(setup, capsys):
    s = SETUPS[setup]
    row = _simulate(capsys, "--policy", "gandiva_fair", "--cluster", f"v100={s.gpus}", "--throughputs",
                    s.throughputs, "--trace", f"data/traces/{s.trace}")
    assert row["batch_size_switches"] > 0 and row["num_rounds"] > 150


@pytest.mark.parametrize("config, message", [
    ('{"k": "big"}', "k must be a number"),
    ('{"future_rounds": 0}', "future_rounds must be a positive integer"),
    ('{"lambda": 12, "surprise": 1}', "unknown key"),
    ("{not json", "not valid JSON"),
])
def test_bad_shockwave_config_is_a_clear_error(tmp_path, config, message, capsys):
    path = tmp_path / "c.json"
    path.write_text(config)
    code = main(["simulate", "--policy", "shockwave", "--cluster", "v100=4", "--throughputs", "shockwave_tacc",
                 "--trace", CANONICAL, "--shockwave-config", str(path), "--json"])
    assert code == 2
    assert message in capsys.readouterr().err


def test_missing_config_and_misplaced_flag(capsys):
    assert main(["simulate", "--policy", "shockwave", "--cluster", "v100=4", "--throughputs", "shockwave_tacc",
                 "--trace", CANONICAL, "--shockwave-config", "no_such_preset"]) == 2
    assert "presets: tacc_32gpus" in capsys.readouterr().err
    assert main(["simulate", "--policy", "gandiva_fair", "--cluster", "v100=4", "--trace", CANONICAL,
                 "--throughputs", "shockwave_tacc", "--shockwave-config", "tacc_32gpus"]) == 2
    assert "applies to Shockwave's planner only" in capsys.readouterr().err


def test_every_planner_gets_shockwaves_rules_and_its_config(capsys):
    """`shockwave_agnostic` is the planner too: `--rules auto` gave it Gavel's rules (no preemption penalty) and
    --shockwave-config was refused for it, both read off the name's first word. Two GPUs of each type, so that the
    jobs contend and `k` matters (with room for all, each job on one type for the whole window is the optimum
    under either config: docs/rules.md#whole-window-plan)."""
    args = ["simulate", "--policy", "shockwave_agnostic", "--cluster", "v100=2,k80=2", "--generate", "gavel",
            "--num-jobs", "8", "--jobs-per-hour", "3", "--json"]
    runs = []
    for extra in ([], ["--shockwave-config", "scale_64gpus"]):
        assert main([*args, *extra]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert all(r["config"]["rules"] == "shockwave" and "preemption penalty 20 s" in r["config"]["stages"]["rules"]
               for r in runs)
    assert runs[0]["avg_jct_s"] != runs[1]["avg_jct_s"]          # the config reached the planner
    assert [(r["config"]["planner"]["k"], r["config"]["planner"]["lam"]) for r in runs] == [(1e-3, 12.0), (10.0, 5.0)]
    assert runs[1]["config"]["planner"]["ftf_ratio"] == "times"   # the JSON says every setting the run used


def test_bad_trace_line_names_file_line_and_field(tmp_path, capsys):
    bad = tmp_path / "bad.trace"
    fields = ["LM (batch size 10)", "cmd", "lm", "--steps", "1", "134583", "1", "elastic", "1", "-1.000000", "1418", "0"]
    bad.write_text("\t".join(fields) + "\n")
    assert main(["simulate", "--policy", "shockwave", "--cluster", "v100=4", "--throughputs", "shockwave_tacc",
                 "--trace", str(bad), "--json"]) == 2
    err = capsys.readouterr().err
    assert "bad.trace:1" in err and "mode" in err


def test_simulate_generates_shockwaves_stream_as_generate_writes_it(tmp_path, capsys):
    """`simulate --generate shockwave` ended in a TypeError (the Gavel generator's options); it now draws the
    stream `generate shockwave` writes, job for job, and runs it under Shockwave's round rules."""
    stream = ["--num-jobs", "8", "--mean-interarrival", "600", "--seed", "3", "--multi-gpu"]
    assert main(["generate", "shockwave", *stream, "--out", str(tmp_path / "s.csv")]) == 0
    capsys.readouterr()
    run = ["--policy", "gavel_las", "--cluster", "v100=4,k80=4"]
    drawn = _simulate(capsys, *run, "--generate", "shockwave", *stream)
    replayed = _simulate(capsys, *run, "--trace", str(tmp_path / "s.csv"), "--seed", "3")
    assert drawn["num_jobs"] == 8 and drawn["config"]["rules"] == "shockwave"
    assert {k: drawn[k] for k in KEYS - {"cpu_s"}} == {k: replayed[k] for k in KEYS - {"cpu_s"}}
