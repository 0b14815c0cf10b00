"""`hetsched profile` on this machine's CPU with tiny step counts: schema, distributed and pair runs, resume,
the CPU/memory grid, and a merged table that simulate accepts."""

import json

import pandas as pd
import pytest

from hetsched.rates import profiler
from hetsched.cli.main import main
from hetsched.errors import HetschedError
from hetsched.rates.profiler import ProfileSpec, profile, profile_cpu_grid
from hetsched.model.throughputs import ThroughputTable, load_throughputs

RESNET = "ResNet-18 (batch size 16)"
A3C = "A3C"


def test_profile_writes_a_table_simulate_accepts_after_a_merge(tmp_path, capsys):
    out = tmp_path / "cpu.parquet"
    assert main(["profile", "--models", "ResNet-18,A3C", "--batch-sizes", "16", "--scale-factors", "1,2",
                 "--pairs", "--steps", "2", "--warmup", "1", "--out", str(out), "--no-progress"]) == 0
    table = ThroughputTable.read(out)
    assert table.gpu_types == ("cpu",)
    assert {k.job_type for k in table.keys} == {RESNET, "A3C (batch size 16)"}
    for job_type in (RESNET, "A3C (batch size 16)"):
        assert table.get(job_type, 1, "cpu") > 0 and table.get(job_type, 2, "cpu") > 0
    own, other = table.pair(RESNET, "A3C (batch size 16)", 1, "cpu")
    assert own > 0 and other > 0
    merged = tmp_path / "merged.parquet"
    assert main(["convert", "throughputs", "data/throughputs/gavel_simulation.parquet", str(out),
                 str(merged), "--mixed-workloads"]) == 0          # no GPU here to scale by (model/relative_speed.py)
    both = ThroughputTable.read(merged)
    assert both.gpu_types == ("cpu", "k80", "p100", "v100")
    gavel = load_throughputs("gavel_simulation")
    assert both.get("ResNet-50 (batch size 64)", 1, "v100") == gavel.get("ResNet-50 (batch size 64)", 1, "v100")
    capsys.readouterr()
    assert main(["simulate", "--policy", "max_min_fairness_perf", "--cluster", "v100=2,cpu=2", "--throughputs",
                 str(merged), "--generate", "gavel", "--jobs-per-hour", "4", "--num-jobs", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_jobs"] == 10


class Killed(Exception):
    pass


def test_an_interrupted_profile_resumes_where_it_stopped(tmp_path, monkeypatch):
    spec = ProfileSpec((RESNET, A3C, "LM (batch size 5)"), steps=1, warmup=0)
    out = tmp_path / "p.csv"
    calls, resumed = [], []
    real = profiler.measure_isolated

    def flaky(spec_, job_type):
        calls.append(job_type)
        if len(calls) == 2 and not resumed:
            raise Killed                                  # killed in the middle of the second measurement
        return real(spec_, job_type)

    monkeypatch.setattr(profiler, "measure_isolated", flaky)
    with pytest.raises(Killed):
        profile(spec, out, progress=False)
    assert pd.read_csv(out).job_type.tolist() == [RESNET]          # the finished one is on disk
    calls.clear()
    resumed.append(True)
    table = profile(spec, out, progress=False)
    assert calls == [A3C, "LM (batch size 5)"]                     # only what was missing
    assert table.job_type.tolist() == [RESNET, A3C, "LM (batch size 5)"]
    calls.clear()
    profile(spec, out, progress=False)
    assert calls == []


def test_cpu_grid_has_synergy_axes(tmp_path):
    spec = ProfileSpec((A3C,), steps=2, warmup=1)
    grid = profile_cpu_grid(spec, tmp_path / "p.parquet", progress=False, cpu_levels=[1, 2],
                            mem_levels=[20.83, 250])
    assert sorted(zip(grid.cpus_per_gpu, grid.mem_gb_per_gpu)) == [(1, 20.83), (1, 250), (2, 20.83), (2, 250)]
    assert (grid.steps_per_s > 0).all() and grid.relative_throughput.max() == 1.0
    assert (tmp_path / "p.cpu_grid.parquet").exists()


def test_bad_profile_requests_are_clear_errors(tmp_path, capsys):
    assert main(["profile", "--models", "GPT-5", "--out", str(tmp_path / "x.parquet")]) == 2
    assert "unknown model 'GPT-5'" in capsys.readouterr().err
    assert main(["profile", "--models", "A3C", "--out", str(tmp_path / "x.json")]) == 2
    assert "--out must end in .parquet or .csv" in capsys.readouterr().err
    for flags, message in ((["--batch-sizes", "0"], "batch sizes must be >= 1"),       # measured a batch of 0
                           (["--threads", "0"], "--width and --threads must be >= 1"),  # torch's RuntimeError
                           (["--width", "0"], "--width and --threads must be >= 1")):
        assert main(["profile", "--models", "A3C", *flags, "--out", str(tmp_path / "b.csv")]) == 2
        assert message in capsys.readouterr().err and not (tmp_path / "b.csv").exists()
    import torch

    if not torch.cuda.is_available():
        assert main(["profile", "--device", "cuda:0", "--gpu-type", "a100", "--models", "A3C", "--steps", "1",
                     "--out", str(tmp_path / "g.parquet")]) == 2
        assert "has no CUDA" in capsys.readouterr().err
    with pytest.raises(HetschedError, match="--device must be cpu"):
        profiler._device("tpu")


def test_a_profiled_column_schedules_workers_of_that_type_in_the_runtime(tmp_path):
    """The merged table (Gavel + a profiled `cpu` column) drives the runtime: a `cpu` worker gets the lease of a
    job type measured on it."""
    from hetsched.runtime.state import RuntimeState
    from hetsched.runtime.store import Store
    from hetsched.runtime.stubs import pb2

    out = tmp_path / "cpu.parquet"
    profile(ProfileSpec((RESNET,), steps=1, warmup=0), out, progress=False)
    merged = tmp_path / "merged.parquet"
    assert main(["convert", "throughputs", "data/throughputs/gavel_simulation.parquet", str(out), str(merged),
                 "--mixed-workloads"]) == 0
    state = RuntimeState(Store(tmp_path / "s.sqlite"), "max_min_fairness_perf", 10.0, load_throughputs(merged))
    worker, _ = state.register("cpu", 1, "this-machine")
    state.submit(pb2.SubmitJobRequest(job_id=0, job_type=RESNET, scale_factor=1, total_steps=100,
                                      priority_weight=1, command="emulated"))
    state.round(state.now() + 10)
    assert [lease.job_id for lease in state.workers[worker].to_start] == [0]
