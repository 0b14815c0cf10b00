"""The CLI for Synergy: simulate every ordering x mechanism, the documented command, generate, clear errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hetsched.cli.main import main
from hetsched.decide.synergy.ordering import ORDERINGS

KEYS = {"avg_jct_s", "jct_p50_s", "jct_p99_s", "makespan_s", "cpu_s", "avg_gpu_alloc_pct", "avg_cpu_alloc_pct",
        "avg_mem_alloc_pct", "avg_cpu_used_pct"}


@pytest.fixture(scope="module")
def ini(shared_dir):
    return str(shared_dir / "data" / "synergy" / "configs" / "deployment.ini")


@pytest.mark.parametrize("ordering", sorted(ORDERINGS))
@pytest.mark.parametrize("mechanism", ["", "+fair", "+tune", "+opt", "+tune+place"])
def test_every_ordering_and_mechanism(ordering, mechanism, ini, capsys):
    policy = ordering + mechanism
    code = main(["simulate", "--policy", policy, "--cluster", ini, "--generate", "synergy", "--jobs-per-hour", "1",
                 "--multi-gpu", "--window", "10:40", "--json"])
    assert code == 0
    row = json.loads(capsys.readouterr().out)
    assert KEYS <= set(row)
    assert row["num_jobs"] == 30 and row["avg_jct_s"] > 0
    assert 0 < row["avg_gpu_alloc_pct"] <= 100


def test_the_documented_command(shared_dir):
    exe = Path(sys.executable).with_name("hetsched")
    out = subprocess.run([str(exe), "simulate", "--policy", "FIFO+tune", "--cluster",
                          str(shared_dir / "data" / "synergy" / "configs" / "default_cluster.ini"), "--generate",
                          "synergy", "--jobs-per-hour", "9", "--seed", "42", "--window", "4000:5000", "--round", "300",
                          "--json"], capture_output=True, text=True, timeout=300, check=True)
    row = json.loads(out.stdout)
    assert row["avg_jct_s"] / 3600 == pytest.approx(21.8766, rel=1e-4)
    assert row["jct_p99_s"] / 3600 == pytest.approx(156.933, rel=1e-4)
    assert row["avg_cpu_alloc_pct"] == pytest.approx(63.75, abs=0.05)


def test_generate_writes_the_artifacts_stream(tmp_path, shared_dir):
    out = tmp_path / "s.csv"
    assert main(["generate", "synergy", "--jobs-per-hour", "9", "--seed", "42", "--num-jobs", "7023",
                 "--out", str(out), "--to", "synergy"]) == 0                 # the artifact's format, when asked
    assert out.read_bytes() == (shared_dir / "fidelity/synergy/philly_derived_single_9.0jph_seed42.csv").read_bytes()
    assert main(["convert", "trace", str(out), str(tmp_path / "s.parquet")]) == 0
    assert main(["generate", "synergy", "--jobs-per-hour", "2", "--num-jobs", "10", "--split", "50:0:50",
                 "--multi-gpu", "--out", str(tmp_path / "m.csv")]) == 0
    assert (tmp_path / "m.csv").read_text().startswith("job_id,arrival_time_s,job_type,")   # the project's CSV


@pytest.mark.parametrize("args,message", [
    (["--cluster", "{bad}", "--generate", "synergy", "--jobs-per-hour", "3", "--num-jobs", "5"],
     r"bad\.ini:2: cpus_per_server must be an integer"),
    (["--cluster", "{ini}", "--trace", "{trace}"], r"bad\.csv:2: field 'arrival_time_s': expected a number"),
    (["--cluster", "{ini}", "--generate", "synergy", "--num-jobs", "5"], "--jobs-per-hour"),
    (["--cluster", "{ini}", "--generate", "synergy", "--jobs-per-hour", "3", "--num-jobs", "5", "--split", "1:2"],
     "--split must be"),
    (["--cluster", "{ini}", "--generate", "synergy", "--jobs-per-hour", "3", "--num-jobs", "5", "--round", "0"],
     "--round must be positive"),
])
def test_bad_input_is_a_clear_error(args, message, tmp_path, ini, capsys):
    bad = tmp_path / "bad.ini"
    bad.write_text("[CLUSTER]\ncpus_per_server = many\n")
    trace = tmp_path / "bad.csv"
    trace.write_text("0,alexnet,0,100,1\n1,res18,soon,100,1\n")
    args = [a.format(bad=bad, ini=ini, trace=trace) for a in args]
    assert main(["simulate", "--policy", "FIFO+tune", *args]) == 2
    err = capsys.readouterr().err
    assert "hetsched: error:" in err
    import re
    assert re.search(message, err), err
