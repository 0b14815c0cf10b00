"""Every figure notebook runs under papermill at the tiny preset and writes the files and rows it promises."""

import base64
import json
import re

import nbformat
import numpy as np
import pandas as pd
import pytest

from hetsched.experiments.continuous import PRESETS
from hetsched.experiments.fig8_outliers import OUTLIERS
from hetsched.ui.plots import VEGA_MIME
from hetsched.experiments.synergy import PRESETS as SYNERGY_PRESETS
from hetsched.experiments.reproduce import figure_notebooks

# One worker runs every notebook test (tests/conftest.py): they share the session's tiny-preset run (`runs`).

NOTEBOOKS = [p.stem for p in figure_notebooks()]
SINGLE = set(PRESETS["single"]["tiny"].rates)
MULTI = set(PRESETS["multi"]["tiny"].rates)
SYN = SYNERGY_PRESETS["tiny"]

# notebook -> (columns results.csv must have, {column: values it must contain})
EXPECTED = {
    "motivation": ({"model", "gpu_type", "relative_throughput", "relative_throughput_per_dollar"},
                   {"gpu_type": {"k80", "p100", "v100"}}),
    "fig08_las_single": ({"policy", "paper_rate", "avg_jct_h"},
                         {"policy": {"max_min_fairness", "max_min_fairness_perf", "max_min_fairness_packed",
                                     "gandiva", "allox", "gavel_fifo", "isolated"}, "paper_rate": SINGLE}),
    "fig09_las_multi": ({"policy", "paper_rate", "avg_jct_h"},
                        {"policy": {"max_min_fairness", "max_min_fairness_perf", "gandiva"}, "paper_rate": MULTI}),
    "fig10_ftf_multi": ({"policy", "paper_rate", "avg_jct_h"},
                        {"policy": {"finish_time_fairness", "finish_time_fairness_perf"}, "paper_rate": MULTI}),
    "makespan_static": ({"policy", "paper_num_jobs", "makespan_h"},
                        {"policy": {"gavel_fifo", "gandiva", "min_total_duration_perf", "min_total_duration_packed"}}),
    "cluster_sweep": ({"v100_fraction", "makespan_reduction"}, {}),
    "fig11_hierarchical": ({"timestep", "entity", "share"}, {"entity": {"e0", "e1", "e2"}}),
    "fig12_policy_runtime": ({"policy", "num_jobs", "seconds"}, {"num_jobs": {32, 64}}),
    "fig13_mechanism": ({"mechanism", "paper_rate", "avg_jct_h"},
                        {"mechanism": {"ideal", "rounds of 360 s", "rounds of 2880 s"}}),
    "throughput_estimation": ({"variant", "paper_rate", "avg_jct_h"},
                              {"variant": {"SS, oracle", "no SS", "SS, estimated (16 refs, 20 %)"}}),
    "runtime_vs_simulation": ({"system", "job_id", "jct_runtime_s", "jct_sim_s", "jct_calibrated_s", "ratio"},
                              {"system": {"gavel", "shockwave", "synergy", "sia"}}),
    "cost_slo": ({"policy", "total_cost", "slo_violations"},
                 {"policy": {"max_sum_throughput_normalized_by_cost_perf_SLOs", "max_min_fairness_perf"}}),
    "synergy_fig01_sensitivity": ({"model", "cpus_per_gpu", "mem_gb_per_gpu", "relative_throughput"},
                                  {"model": {"alexnet", "res18", "gnmt", "m5", "deepspeech"}}),
    "synergy_single_gpu": ({"policy", "paper_rate", "avg_jct_h", "avg_cpu_alloc_pct"},
                           {"policy": {"FIFO+fair", "FIFO+tune", "FIFO+opt", "LAS+tune", "FTF+opt", "SRTF+fair"},
                            "paper_rate": set(SYN.loads)}),
    "synergy_multi_gpu": ({"policy", "paper_rate", "avg_jct_h"},
                          {"policy": {"FIFO+fair", "LAS+tune"}, "paper_rate": set(SYN.multi_loads)}),
    "synergy_class_split": ({"policy", "split", "avg_jct_h"}, {"split": {"20:70:10", "33:33:33", "50:0:50"}}),
    "synergy_cpu_ratio": ({"policy", "cpus_per_gpu", "avg_jct_h"}, {"cpus_per_gpu": {3, 4, 5, 6}}),
    "synergy_drf_tetris": ({"policy", "avg_jct_h"}, {"policy": {"DRF", "DRF+tune", "TETRIS", "TETRIS+tune"}}),
    "synergy_deployment": ({"policy", "trace", "makespan_h", "avg_jct_h"},
                           {"trace": {"static_100", "dynamic_srtf"}}),
    "shockwave_canonical": ({"policy", "label", "makespan_s", "avg_jct_s", "worst_ftf_rho", "unfair_pct"},
                            {"label": {"Shockwave", "OSSP", "Themis", "LAS", "AlloX", "MST", "Gandiva-Fair"}}),
    "shockwave_scale": ({"setup", "policy", "makespan_s", "worst_ftf_rho"}, {"policy": {"shockwave"}}),
    "shockwave_adaptation": ({"job_id", "epoch", "batch_size", "source"},
                             {"source": {"planner profile", "actual (runtime)"}}),
    "shockwave_hetero": ({"policy", "label", "makespan_s", "worst_ftf_rho", "cluster_types"},
                         {"policy": {"shockwave", "shockwave_agnostic", "finish_time_fairness_perf"}}),
    "synergy_hetero_tune": ({"variant", "paper_rate", "avg_jct_h"},
                            {"policy": {"max_min_fairness", "max_min_fairness+tune", "max_min_fairness_perf",
                                        "max_min_fairness_perf+tune"}}),
    "own_cluster_profile": ({"cluster", "policy", "avg_jct_h"}, {"cluster": {"4:4:4", "4:4:4 + 4 cpu"}}),
    "compare_systems": ({"stream", "policy", "system", "seeds", "avg_jct_h", "avg_jct_h_ci", "worst_rho", "cpu_util",
                         "cost_usd"},
                        {"stream": {"gavel", "shockwave", "openb", "sia"},
                         "policy": {"gavel", "LAS+tune", "shockwave", "gavel+tune", "shockwave+tune", "sia"}}),
    "trace_checks": ({"family", "setup", "trace", "policy", "makespan_h", "avg_jct_h", "violations"},
                     {"family": {"shockwave", "synergy"}, "policy": {"allox", "max_sum_throughput_perf", "FIFO+opt",
                                                                     "LAS+tune", "FTF+fair"}}),
    "sia_table3": ({"policy", "workload", "trace", "avg_jct_h", "p99_jct_h", "makespan_h", "gpu_h_per_job"},
                   {"policy": {"sia", "gavel+tj"}, "trace": {"helios", "philly"}}),
    "openb_replay": ({"policy", "avg_jct_h", "num_jobs", "node_fraction"},
                     {"policy": {"max_min_fairness", "max_min_fairness_perf", "finish_time_fairness_perf",
                                 "max_min_fairness_perf+tune"}}),
}


def test_every_notebook_is_covered():
    assert set(NOTEBOOKS) == set(EXPECTED)


def test_a_misspelt_preset_is_named_before_any_work():
    """`papermill ... -p preset quik` ended in a bare KeyError in whichever lookup came first; every figure
    notebook now checks its preset in the first cell after the parameters."""
    from hetsched.errors import HetschedError
    from hetsched.experiments import check_preset

    with pytest.raises(HetschedError, match="preset 'quik': expected one of tiny, quick, paper"):
        check_preset("quik")
    for path in figure_notebooks():
        cells = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        assert "parameters" in cells[0].metadata.get("tags", []), path.name
        assert "check_preset(preset)" in cells[1].source, path.name


def test_the_continuous_figures_take_a_horizon():
    """`papermill fig09_las_multi.ipynb ... -p horizon 5` reaches every run of the sweep (docs/rules.md R66); Fig. 8
    has its own by default, the one `benchmarks/fig8_sweep.py` times, and Figs. 9-10 none."""
    import papermill as pm

    from hetsched.experiments.continuous import FIG8_HORIZON

    for name, default in (("fig08_las_single", FIG8_HORIZON), ("fig09_las_multi", None), ("fig10_ftf_multi", None)):
        path = next(p for p in figure_notebooks() if p.stem == name)
        assert pm.inspect_notebook(str(path))["horizon"]["default"] == repr(default), name
        sweep_cell = next(c.source for c in nbformat.read(path, as_version=4).cells if "C.configs(" in c.source)
        assert "horizon=horizon" in sweep_cell, name


@pytest.mark.parametrize("build, args, message", [
    ("continuous.configs", ("singel", "paper", ["gavel_fifo"]), "figure kind 'singel': expected one of single, multi"),
    ("continuous.configs", ("single", "papr", ["gavel_fifo"]), "single preset 'papr': expected one of paper, quick, tiny"),
    ("shockwave.configs", ("canonicall",), "Shockwave setup 'canonicall': expected one of canonical, scale_64"),
    ("synergy.single_gpu_configs", ("quik", ["FIFO"]), "preset 'quik': expected one of paper, quick, tiny"),
    ("compare_systems.cases", (["gavel"], "quik"), "preset 'quik': expected one of tiny, quick, paper"),
])
def test_the_experiment_builders_name_a_misspelt_choice(build, args, message):
    """The builders that notebooks call with their arguments: each was a bare KeyError ('singel')."""
    import importlib

    from hetsched.errors import HetschedError

    module, name = build.split(".")
    with pytest.raises(HetschedError, match=re.escape(message)):
        getattr(importlib.import_module(f"hetsched.experiments.{module}"), name)(*args)


def test_index_lists_every_notebook(runs):
    out, by_name = runs
    index = (out / "index.html").read_text()
    assert set(by_name) == set(NOTEBOOKS)
    for name in NOTEBOOKS:
        assert f"{name}/figure.png" in index


def test_synergy_reference_cases_match_in_every_preset(runs):
    """The single-GPU notebook runs the artifact's stored cases at any preset; they must match."""
    _, by_name = runs
    cmp = pd.read_csv(by_name["synergy_single_gpu"].out_dir / "comparison.csv")
    assert len(cmp) == 11
    assert np.allclose(cmp["ratio"], 1.0, atol=1e-4)


def test_every_shipped_trace_run_keeps_every_invariant(runs):
    """The results table checks each run's timeline (docs/rules.md#invariants); at the tiny preset every run of
    every family holds them, and the stored Synergy cases still match."""
    _, by_name = runs
    out = by_name["trace_checks"].out_dir
    results = pd.read_csv(out / "results.csv")
    assert len(results) >= 40 and (results["violations"] == 0).all()
    cmp = pd.read_csv(out / "comparison.csv")
    assert np.allclose(cmp.loc[cmp["family"] == "synergy", "ratio"], 1.0, atol=1e-4)


def test_fig8_notebook_reruns_each_outlier_point(runs):
    """Fig. 8's notebook re-runs every stored point that ours missed, with its variants, and says their range."""
    _, by_name = runs
    spans = pd.read_csv(by_name["fig08_las_single"].out_dir / "outliers.csv")
    assert set(zip(spans["policy"], spans["paper_rate"])) == set(OUTLIERS)
    assert (spans["runs"] >= 2).all() and (spans["low_h"] <= spans["ours_h"]).all()
    assert (spans["ours_h"] <= spans["high_h"]).all()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_outputs(runs, name):
    _, by_name = runs
    run = by_name[name]
    assert run.error is None, run.error
    for f in ("figure.png", "figure.svg", "results.csv", f"{name}.ipynb"):
        assert (run.out_dir / f).stat().st_size > 0, f
    assert (run.out_dir / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = pd.read_csv(run.out_dir / "results.csv")
    columns, contains = EXPECTED[name]
    assert len(results) > 0
    assert columns <= set(results.columns)
    for col, values in contains.items():
        assert values <= set(results[col].dropna().tolist()), (col, set(results[col]))
    if name == "compare_systems":               # metrics elastic jobs do not define are NaN on their stream
        from hetsched.experiments.compare_elastic import NOT_DEFINED, STREAM
        elastic = results["stream"] == STREAM
        undefined = [c for c in results if c in NOT_DEFINED or c.removesuffix("_ci") in NOT_DEFINED]
        assert elastic.any() and len(undefined) > 5 and results.loc[elastic, undefined].isna().all().all()
        results = results[~elastic]
    numeric = results.select_dtypes("number").drop(columns=[c for c in results if c.startswith("avg_jct")
                                                             or c.startswith("jct_p")], errors="ignore")
    assert np.isfinite(numeric.to_numpy()).all()
    jct = [c for c in results if c.startswith("avg_jct")]
    assert (results[jct].to_numpy() > 0).all()       # inf marks a saturated point; never NaN or <= 0


def test_runtime_notebook_leaves_no_state_behind(runs):
    out, _ = runs
    assert not [p.name for p in (out / "runtime_vs_simulation").iterdir() if p.is_dir()]


NETWORK = re.compile(r"<script[^>]*\bsrc=[\"']?https?:|cdn\.jsdelivr|unpkg\.com|cdnjs|requirejs\.config", re.I)


def _chart_outputs(nb) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if o.get("output_type") in ("display_data", "execute_result") and VEGA_MIME in o.get("data", {})]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_charts_render_offline(runs, name):
    """Each executed notebook shows its charts as compiled Vega (JupyterLab renders it with its own Vega) and a
    PNG (for every other viewer); the Vega renders with no network; nothing loads from a CDN; no saved widget
    progress bar (which would read 0/N when opened)."""
    import vl_convert as vlc

    _, by_name = runs
    nb = nbformat.read(by_name[name].out_dir / f"{name}.ipynb", as_version=4)
    charts = _chart_outputs(nb)
    assert charts, "the notebook displays no chart"
    for out in charts:
        assert base64.b64decode(out["data"]["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
        svg = vlc.vega_to_svg(out["data"][VEGA_MIME])
        assert svg.count("<path") + svg.count("<line") + svg.count("<rect") > 5, "the chart draws nothing"
    text = json.dumps(nb)
    assert not NETWORK.search(text), NETWORK.search(text).group(0)
    assert "application/vnd.jupyter.widget-view+json" not in text


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_figures_pass_the_figure_check(runs, name):
    """docs/rules.md#figures: own colours, no clipped point, hours past 10,000 s, no column name as a legend title,
    no colliding labels, no point half cut at a border, no line pinned to one."""
    from hetsched.ui.figure_check import layout_problems, problems

    _, by_name = runs
    specs = sorted(by_name[name].out_dir.glob("*.vl.json"))
    assert specs, "the notebook saves no figure"
    found = [f"{p.name}: {line}" for p in specs for spec in [json.loads(p.read_text())]
             for line in problems(spec) + layout_problems(spec)]
    assert not found, "\n".join(found)


def test_the_committed_notebooks_are_what_the_builders_write(tmp_path):
    """notebooks/_build*.py are the notebooks' source: cells edited in a notebook alone were lost at the next
    rebuild (openb_replay's pod requests and synergy_cpu_ratio's note, found on 2026-11-28)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parents[1] / "notebooks"
    for builder in here.glob("_build*.py"):
        shutil.copy(builder, tmp_path / builder.name)
    subprocess.run([sys.executable, str(tmp_path / "_build.py")], check=True, timeout=120, cwd=tmp_path)
    built = sorted(p.name for p in tmp_path.glob("*.ipynb"))
    assert sorted([*built, "motivation.ipynb"]) == sorted(p.name for p in here.glob("*.ipynb"))   # one by hand
    stale = [name for name in built if (tmp_path / name).read_text() != (here / name).read_text()]
    assert not stale, f"rebuild with `python notebooks/_build.py`, or move the edits into the builders: {stale}"
