"""The explorer without a browser: overlaid runs with readable labels, bounded chart data, cancel, reset, export,
and a stepper that follows the current settings (the browser test drives the same in JupyterLab)."""

import pandas as pd
import pytest

from hetsched.ui.widgets import TIME_BINS, Explorer, charts


@pytest.fixture
def explorer(tmp_path):
    e = Explorer(export_dir=tmp_path / "export")
    e.workload.num_jobs.value = 200        # 200 jobs on 8:8:8 once raised MaxRowsError and drew no chart
    yield e
    e.reset()


def _run(e: Explorer, policy: str) -> None:
    e.policy.policy.value = policy
    e.start().join(120)
    assert e.status.value.startswith("Done: "), e.status.value
    assert not e.run_button.disabled


def test_overlaid_runs_are_labelled_and_the_charts_stay_small(explorer):
    for policy in ("max_min_fairness_perf", "max_min_fairness", "gandiva"):
        _run(explorer, policy)
    labels = [label for label, _ in explorer.runs]
    assert labels[0] == "1: Gavel · gavel 2 jobs/h · 200 jobs · seed 0 · rules gavel · v100=8,p100=8,k80=8"
    assert labels[2].startswith("3: Gandiva ·") and labels[2] in explorer.summary.value
    spec = charts(explorer.runs).to_dict()
    assert all(len(rows) <= len(labels) * TIME_BINS for rows in spec["datasets"].values())
    assert explorer.plots.outputs and "application/vnd.vega.v5+json" in explorer.plots.outputs[0]["data"]


def test_cancel_keeps_earlier_runs_and_reset_clears(explorer):
    _run(explorer, "max_min_fairness_perf")
    explorer.workload.num_jobs.value = 5000
    thread = explorer.start()
    explorer.cancel()
    thread.join(60)
    assert not thread.is_alive() and explorer.status.value.startswith("Cancelled")
    assert len(explorer.runs) == 1
    explorer.reset()
    assert explorer.runs == [] and not explorer.plots.outputs and explorer.summary.value == ""


def test_stepping_follows_the_current_policy(explorer):
    explorer.step()
    explorer.step()
    first = explorer._stepper
    assert first is not None and explorer.status.value.startswith("Stepping Gavel:")
    explorer.policy.policy.value = "max_min_fairness_packed"
    assert explorer._stepper is None and "starts over" in explorer.status.value
    explorer.step()
    assert explorer._stepper is not first and explorer._stepper.sched.policy.name == "max_min_fairness_packed"


def test_export_writes_every_run(explorer, tmp_path):
    assert explorer.export() == [] and "nothing to export" in explorer.status.value
    _run(explorer, "max_min_fairness_perf")
    _run(explorer, "gavel_fifo")
    paths = explorer.export()
    table = pd.read_parquet(paths[0])
    assert table.groupby("run").size().tolist() == [200, 200]
    assert pd.read_csv(paths[1]).shape[0] == 400
    assert {p.suffix for p in paths} == {".parquet", ".csv", ".png", ".svg", ".html", ".json"}


def _servers(e: Explorer, gpus: int, cpus: int, gb: float) -> None:
    for row in e.cluster.rows.values():
        row["per_server"].value, row["cpus"].value, row["dram"].value = gpus, cpus, gb


def test_stages_are_picked_separately_and_refusals_show_both_stages(explorer):
    """Decide, place and rules are separate pickers; the registry's refusal shows while the settings conflict,
    and the composition runs once they do not."""
    picker = explorer.policy
    picker.policy.value, picker.place.value = "FIFO", "+tune"
    assert picker.rules_name == "synergy" and picker.round_s.value == 300
    assert "refused: decide 'FIFO'" in picker.stages.value and "3 GPU types" in picker.stages.value
    picker.rules.value = "gavel"
    assert picker.round_s.value == 360
    assert "refused: place 'tune' x a cluster without CPU cores and memory" in picker.stages.value
    _servers(explorer, 4, 12, 250.0)
    assert "refused" not in picker.stages.value and "<b>place</b> 'tune'" in picker.stages.value
    explorer.workload.num_jobs.value = 40
    explorer.start().join(120)
    assert explorer.status.value.startswith("Done: "), explorer.status.value
    assert explorer.runs[-1][1].policy == "FIFO+tune"


def test_shockwave_with_tune_from_the_pickers(explorer):
    _servers(explorer, 4, 12, 250.0)
    picker = explorer.policy
    picker.policy.value, picker.place.value = "shockwave", "+tune"
    assert picker.rules_name == "shockwave" and picker.round_s.value == 120
    assert "refused" not in picker.stages.value
    explorer.workload.num_jobs.value = 20
    explorer.start().join(300)
    assert explorer.status.value.startswith("Done: "), explorer.status.value
    assert explorer.runs[-1][1].policy == "shockwave+tune"


def test_run_is_off_during_a_run_and_while_refused_and_a_press_meanwhile_is_said(explorer):
    explorer.workload.num_jobs.value = 2000
    thread = explorer.start()
    assert explorer.run_button.disabled
    assert explorer.start() is None and "starts nothing" in explorer.status.value
    thread.join(300)
    assert explorer.status.value.startswith("Done: ") and "press it again" in explorer.status.value
    assert not explorer.run_button.disabled
    explorer.policy.place.value = "+tune"                  # a placement on servers without CPU cores: refused
    assert explorer.policy.refused and explorer.run_button.disabled
    explorer.policy.place.value = ""
    assert not explorer.run_button.disabled


def test_every_run_is_in_the_summary_and_the_export_names_its_rules(explorer):
    _run(explorer, "max_min_fairness_perf")
    explorer.policy.rules.value = "shockwave"
    _run(explorer, "max_min_fairness_perf")
    assert all(label in explorer.summary.value for label, _ in explorer.runs)
    assert "rules shockwave" in explorer.runs[1][0]
    table = pd.read_parquet(explorer.export()[0])
    assert table.groupby("run")["rules"].first().tolist() == ["gavel", "shockwave"]


def test_the_cluster_offers_every_gpu_type_of_the_table_and_labels_the_server_shape(explorer):
    explorer.policy.throughputs.value = "shockwave_tacc"
    from hetsched import load_throughputs
    assert set(load_throughputs("shockwave_tacc").gpu_types) <= set(explorer.cluster.rows)
    _servers(explorer, 4, 24, 500.0)
    explorer.policy.place.value = "+tune"
    _run(explorer, "max_min_fairness_perf")
    assert "4 GPUs/24 CPUs/500 GB a server" in explorer.runs[-1][0]
