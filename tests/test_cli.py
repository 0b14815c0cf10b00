"""The `hetsched` console script, run as a user runs it."""

import subprocess
import sys
from pathlib import Path

import pytest

from hetsched.traces import read_trace
from hetsched.traces.canonical import parse_canonical_csv

SCRIPT = Path(sys.executable).with_name("hetsched")


def run(*args, check=True):
    proc = subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_help_lists_subcommands():
    out = run("--help").stdout
    assert "generate" in out and "convert" in out


def test_generate_gavel_matches_the_artifact(tmp_path, shared_dir):
    out = tmp_path / "jobs.csv"
    run("generate", "gavel", "--seed", 0, "--mean-interarrival", 1500, "--num-jobs", 6000, "--out", out)
    header = out.read_text().splitlines()[0].split(",")
    assert header[:5] == ["job_id", "arrival_time_s", "job_type", "scale_factor", "total_steps"]
    assert "priority_weight" in header
    ours = read_trace(out)
    theirs = parse_canonical_csv((shared_dir / "fidelity/gavel/continuous_seed0_lam1500.jobs.csv").read_bytes())
    assert [(j.job_type, j.scale_factor) for j in ours] == [(j.job_type, j.scale_factor) for j in theirs]
    assert max(abs(a.total_steps / b.total_steps - 1) for a, b in zip(ours, theirs)) < 1e-6


def test_generate_static_multi_gpu_trace(tmp_path):
    out = tmp_path / "static.trace"
    run("generate", "gavel", "--seed", 1, "--static", "--multi-gpu", "--num-jobs", 50, "--out", out)
    jobs = read_trace(out)
    assert len(jobs) == 50 and {j.arrival_time_s for j in jobs} == {0.0}
    assert max(j.scale_factor for j in jobs) > 1


def test_convert_trace_and_throughputs(tmp_path, shared_dir):
    src = shared_dir / "fidelity/gavel/static_seed0_n100.trace"
    run("convert", "trace", src, tmp_path / "s.parquet")
    run("convert", "trace", tmp_path / "s.parquet", tmp_path / "s.txt", "--to", "gavel")
    assert read_trace(tmp_path / "s.txt", "gavel") == read_trace(src)
    run("convert", "throughputs", shared_dir / "data/gavel/physical_cluster_throughputs.json", tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().startswith("gpu_type,placement,job_type")


def test_artifact_formats_refuse_what_they_cannot_carry_unless_lossy(tmp_path, capsys):
    """`generate gavel --slos --out x.trace` wrote SLOs without the durations their deadlines need, and a Shockwave
    trace converted to Gavel's format turned its adaptive jobs static, without a word."""
    from hetsched.cli.main import main

    def run_here(*args):
        code = main([str(a) for a in args])
        return code, capsys.readouterr().err

    out = tmp_path / "slo.trace"
    gen = ("generate", "gavel", "--seed", 0, "--slos", "--num-jobs", 20, "--mean-interarrival", 900, "--out", out)
    code, err = run_here(*gen)
    assert code == 2 and "cannot carry duration_s (20 jobs with an SLO" in err and not out.exists()
    code, err = run_here(*gen, "--lossy")
    assert code == 0 and "dropped duration_s (20 jobs with an SLO" in err
    adaptive = tmp_path / "a.trace"
    assert run_here("generate", "shockwave", "--seed", 1, "--num-jobs", 12, "--mean-interarrival", 300,
                    "--out", adaptive)[0] == 0
    code, err = run_here("convert", "trace", adaptive, tmp_path / "b.trace", "--to", "gavel")
    assert code == 2 and "gavel's format cannot carry mode (" in err
    code, err = run_here("convert", "trace", adaptive, tmp_path / "b.trace", "--to", "gavel", "--lossy")
    assert code == 0 and "converted 12 jobs" in err and "dropped mode (" in err


def test_malformed_trace_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.trace"
    bad.write_text("A3C\tc\tw\t--s\t1\tlots\t1\t1\t-1\t0\n")
    proc = run("convert", "trace", bad, tmp_path / "out.csv", check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{bad}:1: field 'total_steps'" in proc.stderr


@pytest.mark.parametrize("args", [
    ("generate", "gavel", "--num-jobs", "5", "--out", "x.csv"),  # continuous stream needs a rate
    ("convert", "throughputs", "missing.json", "out.parquet"),
])
def test_user_errors_exit_2(tmp_path, args):
    proc = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and "hetsched: error:" in proc.stderr and "Traceback" not in proc.stderr
