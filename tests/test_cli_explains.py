"""The CLI explains itself (issue 15, item 5): defaults in --help, aliases and "did you mean", the configuration
echoed in the JSON with hours beside seconds, strictly valid JSON, clear errors, prices for the cost policies."""

from __future__ import annotations

import json
import logging

import pytest

from hetsched import __version__
from hetsched.cli.main import main
from hetsched.cli.simulate import json_ready

SMALL = ["--generate", "gavel", "--static", "--num-jobs", "12", "--cluster", "2:2:2", "--json"]


def _strict(text: str) -> dict:
    def reject(name):
        raise ValueError(f"invalid JSON constant {name}")
    return json.loads(text, parse_constant=reject)


def test_version_and_defaults_in_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"hetsched {__version__}"
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 36:36:36)" in text and "(default: gavel_simulation)" in text and "(default: auto)" in text
    # a default the help states itself is not repeated, and there is no "(default: None)" or "(default: False)"
    assert "(default: None)" not in text and "(default: False)" not in text
    assert text.count("(default: 20:70:10)") == 1 and "(default 1:1:1) (default" not in text
    import argparse
    from hetsched.cli import DefaultsHelp
    zero = argparse.ArgumentParser(formatter_class=DefaultsHelp)
    zero.add_argument("--warmup", type=int, default=0, help="untimed steps")
    assert "(default: 0)" in zero.format_help()                  # 0 == False: it was left out


def test_alias_runs_and_the_json_echoes_its_configuration(capsys):
    assert main(["simulate", "--policy", "gavel", *SMALL]) == 0
    row = _strict(capsys.readouterr().out)
    assert row["policy"] == "max_min_fairness_perf"
    assert row["config"] == {"policy": "gavel", "resolved_policy": "max_min_fairness_perf", "policy_name": "Gavel",
                             "cluster": "v100=2,p100=2,k80=2", "prices_per_hour": {},
                             "throughputs": "gavel_simulation", "round_s": 360.0, "seed": 0, "window": None,
                             "rules": "gavel", "trace": None, "generate": "gavel", "partitions": 1, "planner": None,
                             "stages": {"decide": "'max_min_fairness_perf' (allocation)", "select": "'priority'",
                                        "place": "'gpus'", "rates": "'table'",
                                        "rules": "'360 s rounds, credit per task'"}}
    assert row["avg_jct_h"] == pytest.approx(row["avg_jct_s"] / 3600)
    assert row["makespan_h"] == pytest.approx(row["makespan_s"] / 3600)


def test_aliases_do_not_shadow_synergys_orderings():
    from hetsched.core.registry import make_policy
    assert make_policy("gavel_las").name == "max_min_fairness"
    assert make_policy("LAS").name != "max_min_fairness"          # Synergy's LAS ordering


def test_typos_get_a_suggestion(capsys):
    assert main(["simulate", "--policy", "themsi", *SMALL]) == 2
    assert "did you mean 'themis'?" in capsys.readouterr().err


def test_empty_window_and_bad_round_are_errors(capsys):
    args = ["simulate", "--policy", "gavel_las", "--generate", "gavel", "--jobs-per-hour", "1", "--cluster", "2:2:2"]
    assert main([*args, "--num-jobs", "5", "--window", "10:12"]) == 2     # before the run, not after it
    assert "--window 10:12 ends past the stream's last job (--num-jobs 5 generates ids 0 to 4)" in \
        capsys.readouterr().err
    assert main([*args, "--num-jobs", "5", "--window", "3:6"]) == 2        # half of it measured, silently
    assert "--window 3:6 ends past" in capsys.readouterr().err
    assert main([*args, "--num-jobs", "5", "--round", "0"]) == 2
    assert "--round must be positive" in capsys.readouterr().err
    assert main([*args, "--num-jobs", "5", "--min-reset-interval", "-5"]) == 2      # it was read as 0
    assert "min_reset_interval_s=-5.0 (seconds >= 0)" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["generate", "gavel", "--num-jobs", "3", "--jobs-per-hour", "2", "--split", "1:2:3"],
     "generate gavel does not use --split (synergy generator only)"),
    (["generate", "synergy", "--num-jobs", "3", "--jobs-per-hour", "2", "--slos", "--throughputs", "x"],
     "does not use --slos (gavel generator only), --throughputs (gavel and shockwave generators)"),
    (["generate", "gavel", "--num-jobs", "3", "--static", "--mean-interarrival", "4"],
     "--mean-interarrival (a --static stream arrives at t = 0)"),
    (["generate", "shockwave", "--name", "120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic",
      "--seed", "3"], "generate shockwave does not use --seed (--name sets it)"),
    (["simulate", "--policy", "gavel_las", "--generate", "synergy", "--num-jobs", "3", "--mean-interarrival", "5"],
     "--mean-interarrival (gavel and shockwave generators)"),
    (["simulate", "--policy", "gavel_las", "--generate", "gavel", "--num-jobs", "3", "--jobs-per-hour", "2",
      "--max-jobs", "2"], "--max-jobs (production traces: --trace with --from)"),
    (["simulate", "--policy", "gavel_las", "--trace", "data/traces/synergy_static_100.csv", "--num-jobs", "3"],
     "simulate --trace does not use --num-jobs (gavel, synergy and shockwave generators)"),
])
def test_a_stream_option_the_stream_does_not_use_is_refused(args, message, tmp_path, capsys):
    """Each of these was ignored: the run or the file came out as if the option had not been given."""
    out = tmp_path / "jobs.csv"
    assert main([*args, "--out", str(out)] if args[0] == "generate" else args) == 2
    assert message in capsys.readouterr().err and not out.exists()


GAVEL = ["simulate", "--policy", "gavel", "--generate", "gavel", "--num-jobs", "6", "--jobs-per-hour", "2"]


@pytest.mark.parametrize("args, message", [
    ([*GAVEL, "--ideal", "--round", "100"], "rules 'ideal (fluid, no rounds)' x round_s=100.0: no stage of this "
                                            "run reads it"),
    ([*GAVEL, "--ideal", "--min-reset-interval", "60"], "x min_reset_interval_s=60.0: no stage of this run reads it"),
    ([*GAVEL, "--ideal", "--placement-aware"], "x placement_aware=True: no stage of this run reads it"),
    ([*GAVEL, "--cluster", "2x4/24/500@v100", "--gpus-per-server", "2:2:2"],
     "'2x4/24/500@v100' gives its servers, so GPUs per server ('2:2:2') have nothing to set"),
    ([*GAVEL, "--cluster", "v100=4,a100=4", "--gpus-per-server", "2:2:2", "--gpu-map", "a100=v100x2"],
     "are V:P:K counts for v100/p100/k80, and 'v100=4,a100=4' has a100"),
    ([*GAVEL[:2], "max_min_fairness_water_filling_perf", *GAVEL[3:], "--entity-weights", "WEIGHTS"],
     "--entity-weights needs jobs with entities (users, teams, vcs); --generate gavel streams have none"),
    (["compare", "--streams", "gavel", "--openb-dir", "x"], "--openb-dir is read by the openb stream only"),
    ([*GAVEL, "--gpu-map", "T4=p100x0.8"], "--gpu-map maps t4, none of them among the cluster's GPU types and the "
                                           "jobs' pins (k80, p100, v100): it would change nothing"),
    (["simulate", "--policy", "gavel", "--trace", "data/traces/shockwave_120_40_25.csv", "--window", "100:200"],
     "window 100:200 names 80 job ids that the 120 jobs lack (ids 0 to 119)"),
    (["convert", "trace", "data/traces/synergy_static_100.csv", "OUT", "--gpu-map", "T4=p100x0.8", "--seed", "2"],
     "convert trace: --seed, --gpu-map act only when job types are drawn from a throughput table"),
    (["convert", "trace", "data/traces/synergy_static_100.csv", "OUT", "--entity", "user"],
     "--entity applies to the production traces"),
])
def test_an_option_the_run_cannot_act_on_is_refused(args, message, tmp_path, capsys):
    """Each of these ran as if the option had not been given: same numbers, no word said."""
    weights = tmp_path / "weights.csv"
    weights.write_text("entity,weight\nteamA,2\n")
    out = tmp_path / "compare"
    args = [{"WEIGHTS": str(weights), "OUT": str(out)}.get(a, a) for a in args] + (
        ["--out", str(out)] if args[0] == "compare" else [])
    assert main(args) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_a_gpu_map_rule_that_no_gpu_reads_is_named(capsys):
    assert main([*GAVEL, "--cluster", "v100=2,t4=2", "--gpu-map", "T4=p100x0.8,A10=v100x1.1", "--json"]) == 0
    assert "warning: --gpu-map maps a10 (1 of 2), not among the cluster's GPU types and the jobs' pins" in \
        capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    ([*GAVEL, "--mean-interarrival", "100"], "argument --mean-interarrival: not allowed with argument --jobs-per-hour"),
    (["generate", "gavel", "--num-jobs", "3", "--jobs-per-hour", "2", "--mean-interarrival", "9", "--out", "OUT"],
     "argument --mean-interarrival: not allowed with argument --jobs-per-hour"),
    (["compare", "--no-dask", "--dask-address", "tcp://127.0.0.1:1"],
     "argument --dask-address: not allowed with argument --no-dask"),
])
def test_two_options_that_set_one_thing_are_refused(args, message, tmp_path, capsys):
    """--mean-interarrival won over --jobs-per-hour, and --dask-address over --no-dask, without a word."""
    out = tmp_path / "jobs.csv"
    with pytest.raises(SystemExit) as exc:
        main([str(out) if a == "OUT" else a for a in args])
    assert exc.value.code == 2 and message in capsys.readouterr().err and not out.exists()


def test_a_gpu_type_in_the_wrong_case_is_named_a_typo(capsys):
    """'V100=2' was answered with 'map them explicitly, e.g. --gpu-map V100=k80x1.0'."""
    assert main(["simulate", "--policy", "gavel_las", "--cluster", "V100=2", *SMALL[:5]]) == 2
    err = capsys.readouterr().err
    assert "GPU type names are case-sensitive: did you mean 'v100'?" in err and "--gpu-map" not in err


@pytest.mark.parametrize("command", ["simulate", "generate"])
def test_a_job_count_below_one_is_refused(command, tmp_path, capsys):
    """`simulate --num-jobs -4` ended in islice's ValueError (a traceback), `--num-jobs 0` in 'no job finished
    inside the measured window', and `generate --num-jobs 0` wrote an empty trace."""
    args = {"simulate": ["simulate", "--policy", "gavel_las", "--cluster", "4:4:4", "--generate", "gavel"],
            "generate": ["generate", "gavel", "--out", str(tmp_path / "never.csv")]}[command]
    for bad in ("0", "-4"):
        with pytest.raises(SystemExit) as exc:
            main([*args, "--jobs-per-hour", "2", "--num-jobs", bad])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and f"--num-jobs: expected a whole number >= 1, got '{bad}'" in err, err
    assert not (tmp_path / "never.csv").exists()


def test_a_trace_without_jobs_is_an_error_that_says_so(tmp_path, capsys):
    """An empty trace file, or filters that keep no job, used to end in "no job finished inside the measured
    window", as if the policy had failed."""
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert main(["simulate", "--policy", "gavel_las", "--trace", str(empty)]) == 2
    assert f"no jobs to simulate in {empty}" in capsys.readouterr().err


def test_an_output_path_that_cannot_be_written_is_an_error_before_the_work(tmp_path, capsys, monkeypatch):
    """Every command that writes ended in a traceback when its output folder could not be made, and `simulate
    --jobs-out` found out only after the simulation (its result lost)."""
    import hetsched.sim.simulator as simulator

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = blocker / "sub"
    commands = (["simulate", "--policy", "gavel_las", *SMALL, "--jobs-out", str(out / "jobs.csv")],
                ["generate", "gavel", "--static", "--num-jobs", "3", "--out", str(out / "jobs.csv")],
                ["compare", "--preset", "tiny", "--streams", "gavel", "--policies", "gavel_las", "--seeds", "1",
                 "--no-dask", "--out", str(out)],
                ["reproduce", "--preset", "tiny", "--only", "motivation", "--out", str(blocker)])
    monkeypatch.setattr(simulator, "simulate", lambda *a, **k: pytest.fail("simulated before the folder check"))
    for argv in commands:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"hetsched: error: {blocker}") and "Traceback" not in err, (argv, err)
    assert err == f"hetsched: error: {blocker}: exists and is not a folder"


def test_undefined_metrics_are_null_not_nan():
    row = json_ready({"a": float("nan"), "b": float("inf"), "c": {"d": -float("inf")}, "e": 1.5})
    assert json.dumps(row, allow_nan=False) == '{"a": null, "b": null, "c": {"d": null}, "e": 1.5}'


def test_prices_reach_the_cost_policies_with_one_warning(capsys, caplog):
    policy = ["--policy", "max_sum_throughput_normalized_by_cost_perf"]
    with caplog.at_level(logging.WARNING):
        assert main(["simulate", *policy, *SMALL]) == 0
    unpriced = _strict(capsys.readouterr().out)
    assert unpriced["total_cost"] == 0.0
    assert sum("no price" in r.getMessage() for r in caplog.records) == 1
    assert main(["simulate", *policy, *SMALL, "--prices", "v100=2.48,p100=1.46,k80=0.45"]) == 0
    priced = _strict(capsys.readouterr().out)
    assert priced["total_cost"] > 0 and priced["config"]["prices_per_hour"]["k80"] == 0.45
    assert main(["simulate", *policy, *SMALL, "--prices", "v100=cheap"]) == 2
    assert "--prices: expected TYPE=DOLLARS_PER_HOUR" in capsys.readouterr().err


def test_policies_lists_the_papers_names(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "Gavel w/ SS" in lines["max_min_fairness_packed"] and "gavel_ss" in lines["max_min_fairness_packed"]
    assert "Themis" in lines["finish_time_fairness"] and "Synergy-TUNE" in lines["FIFO+tune"]
    from hetsched.core.registry import composition_markdown
    assert "decide (allocation | planner | ordering)" in out and composition_markdown() in out


def test_cli_mistakes_are_one_line_and_a_closed_pipe_is_quiet(tmp_path, capsys):
    """Issue 71: a mistyped option printed 25 lines of usage and a wrong error (--policy missing), `hetsched
    policies | head` ended in "[Errno 32] Broken pipe" with status 2, generate made missing folders, and the human
    summary printed its config as a Python dict."""
    import subprocess
    import sys

    for args, line in ((["simulate", "--polcy", "gavel"], "unknown option --polcy; did you mean --policy?"),
                       (["simulate", "--policy", "gavel", "--xyz", "3"],
                        "unknown option --xyz (see hetsched simulate --help)")):
        out = subprocess.run([sys.executable, "-m", "hetsched", *args], capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and out.stderr.strip() == f"hetsched {args[0]}: error: {line}", out.stderr
    assert main(["generate", "gavel", "--num-job", "3", "--jobs-per-hour", "2", "--out",     # a unique prefix
                 str(tmp_path / "prefix.csv")]) == 0
    shell = subprocess.run(f"{sys.executable} -m hetsched policies | head -1", shell=True, capture_output=True,
                           text=True, timeout=120)
    assert shell.stdout.startswith("policy") and shell.stderr == "", shell.stderr
    assert main(["generate", "gavel", "--num-jobs", "3", "--jobs-per-hour", "2", "--out",
                 str(tmp_path / "missing" / "x.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "missing").exists()
    assert main(["simulate", "--policy", "gavel", "--generate", "gavel", "--num-jobs", "3", "--jobs-per-hour", "2",
                 "--cluster", "1:0:0"]) == 0
    config = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("config:"))
    assert json.loads(config.split(":", 1)[1])["resolved_policy"] == "max_min_fairness_perf"


def test_every_option_has_help():
    """Issue 71: `--num-jobs`, `--static`, `--multi-gpu`, `--multi-priority`, `--mean-interarrival` and a dozen more
    showed in --help without a word."""
    import argparse

    from hetsched.cli.main import build_parser

    bare = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif action.option_strings and not (action.help or "").strip():
                bare.append(f"{' '.join(path)} {action.option_strings[-1]}")
    walk(build_parser(), ["hetsched"])
    assert not bare, bare
