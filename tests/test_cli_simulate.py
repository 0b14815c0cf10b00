"""`hetsched simulate --json` for every registered policy, and the subprocess path once."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hetsched.cli.main import main
from hetsched.core.registry import policy_names

KEYS = {"avg_jct_s", "makespan_s", "utilization", "num_jobs", "jct_p50_s", "jct_p99_s", "cpu_s", "solver_cpu_s",
        "solver_calls"}


@pytest.mark.parametrize("policy", policy_names())
def test_simulate_json_for_every_policy(policy, capsys):
    code = main(["simulate", "--policy", policy, "--cluster", "3:3:3", "--generate", "gavel", "--seed", "1",
                 "--mean-interarrival", "1200", "--num-jobs", "25", "--json"])
    assert code == 0
    row = json.loads(capsys.readouterr().out)
    assert KEYS <= set(row)
    assert row["num_jobs"] == 25 and row["policy"] == policy
    assert row["avg_jct_s"] > 0 and 0 < row["utilization"] <= 1
    assert 0 <= row["solver_cpu_s"] <= row["cpu_s"] and "solver_cpu_h" not in row


def test_simulate_subprocess_with_window_and_trace(tmp_path, shared_dir):
    exe = Path(sys.executable).with_name("hetsched")
    out = subprocess.run([str(exe), "simulate", "--policy", "max_min_fairness_perf", "--cluster", "2:0:4",
                          "--throughputs", "gavel_physical", "--trace",
                          str(shared_dir / "data/gavel/traces/artifact_evaluation.trace"), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)
    assert row["avg_jct_s"] == pytest.approx(4060.78, rel=1e-4)     # the artifact's number (fidelity case)


@pytest.mark.parametrize("args, message", [
    (["--generate", "gavel", "--mean-interarrival", "100"], "--window"),
    (["--generate", "gavel", "--static"], "--num-jobs"),
    (["--generate", "gavel", "--mean-interarrival", "100", "--window", "9:3"], "START < END"),
])
def test_simulate_rejects_bad_input(args, message, capsys):
    assert main(["simulate", "--policy", "max_min_fairness_perf", *args]) == 2
    assert message in capsys.readouterr().err
