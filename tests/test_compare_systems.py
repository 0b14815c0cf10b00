"""The one-stream comparison (hetsched.experiments.compare_systems): its statistics, its metrics on real runs, its
refusals, and `hetsched compare` end to end on the tiny preset."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from hetsched import ClusterSpec, load_throughputs
from hetsched.cli.main import main
from hetsched.errors import HetschedError
from hetsched.experiments import compare_systems as S
from hetsched.sim.simulator import simulate
from hetsched.traces.generators.gavel import GavelGenerator


def test_interval_is_the_student_t_interval():
    mean, half, n = S.interval([1.0, 2.0, 3.0, float("nan")])
    assert (mean, n) == (2.0, 3)
    assert half == pytest.approx(4.302652729911275 * 1.0 / math.sqrt(3))     # t(0.975, 2) x sd / sqrt(n)
    assert math.isnan(S.interval([5.0])[1])


def test_gains_pair_runs_by_seed():
    rows = pd.DataFrame([
        {"stream": "s", "policy": p, "seed": k, "refused": False, "avg_jct_h": v, "p99_jct_h": v, "makespan_h": v,
         "worst_rho": v} for p, vals in (("gavel", (10.0, 20.0, 40.0)), ("gavel+tune", (9.0, 18.0, 36.0)))
        for k, v in enumerate(vals)])
    g = S.gains(rows)
    jct = g[(g["metric"] == "avg_jct_h") & (g["parent"] == "gavel")].iloc[0]
    # 10 % better on every seed although the seeds' JCTs differ 4x: paired, the interval is 0 wide
    assert jct["gain"] == pytest.approx(0.1) and jct["gain_ci"] == pytest.approx(0.0, abs=1e-12)
    assert jct["significant"]
    assert set(g["parent"]) == {"gavel"}                 # LAS+tune did not run: no row for it


def _rows(values: dict[str, tuple[float, ...]]) -> pd.DataFrame:
    metrics = {m: 1.0 for m in S.METRICS}
    return pd.DataFrame([{"stream": "s", "policy": p, "system": "Gavel", "label": p, "seed": k, "refused": False,
                          **metrics, "avg_jct_h": v} for p, vals in values.items() for k, v in enumerate(vals)])


def test_verdicts_with_one_seed_or_one_policy_claim_no_interval():
    """One seed gives no interval, so no verdict may call the runner-up behind or tied; one policy has no
    runner-up; a selection without a composition and its parent has no gains (these raised before)."""
    one_seed = _rows({"gavel": (10.0,), "themis": (12.0,)})
    g = S.gains(one_seed)
    assert g.empty and "significant" in g.columns
    (line, *_) = S.verdicts(S.table(one_seed), g)
    assert line == "s: lowest average JCT (h) is gavel (10); themis is not compared: no interval from one seed (12)."
    (line, *_) = S.verdicts(S.table(_rows({"gavel": (10.0, 11.0)})), g)
    assert line == "s: only gavel has a finite average JCT (h) (10.5 ± 6.4)."
    two = S.verdicts(S.table(_rows({"gavel": (10.0, 10.2), "themis": (20.0, 20.2)})), g)
    assert "themis is clearly behind (20.1 ± 1.3)" in two[0]


def test_cli_compare_refuses_fewer_than_one_seed(capsys):
    for bad in ("0", "-2", "x"):
        with pytest.raises(SystemExit) as exc:
            main(["compare", "--seeds", bad, "--no-dask"])
        assert exc.value.code == 2 and "whole number >= 1" in capsys.readouterr().err
    with pytest.raises(HetschedError, match="at least one"):
        S.cases(["gavel"], "tiny", ["gavel"], seeds=[])


def test_metrics_of_a_real_run():
    """rho >= 1 / contention for every job (no job beats running alone), the fair-share run allocates CPU
    exactly as it allocates GPUs, and TUNE allocates differently."""
    cluster = ClusterSpec.load(S.PRESETS["quick"].cluster)
    table = load_throughputs("gavel_simulation")
    jobs = GavelGenerator(seed=3, mean_interarrival_s=1200, multi_gpu=True, throughputs=table).jobs(16)
    fair = simulate(jobs, cluster, "gavel", table, record_timeline=True)
    m = S.metrics(fair, cluster, table, 360.0)
    contention = max(1.0, len(jobs) / cluster.num_gpus)
    assert S.ftf_rho(fair, cluster, table).min() * contention >= 1 - 1e-9
    assert m["cpu_util"] == pytest.approx(m["gpu_util"], rel=1e-9)
    assert m["mem_util"] == pytest.approx(m["gpu_util"], rel=1e-9)
    tuned = S.metrics(simulate(jobs, cluster, "gavel+tune", table, record_timeline=True), cluster, table,
                      360.0)
    assert tuned["cpu_util"] != pytest.approx(tuned["gpu_util"], rel=1e-3)
    assert 0 < tuned["cpu_util"] <= 1 and 0 < tuned["mem_util"] <= 1


def test_a_refused_case_says_why():
    row = S.run_case(S.Case("shockwave", "FIFO+tune", 0, "tiny"))
    assert row["refused"] and "ordering" in row["reason"]
    assert "avg_jct_h" not in row


def test_unlike_servers_of_one_type_run_tune():
    """Production node lists mix server shapes within a GPU type. The fair share is the smallest server's per
    GPU, so a job demoted to it fits wherever a GPU is free (Synergy's mean-sized share did not fit on the
    smaller server, and TUNE gave up)."""
    cluster = ClusterSpec.load("1x2/64/256@p100+1x2/16/120@p100")
    table = load_throughputs("gavel_simulation")
    jobs = [j.with_(scale_factor=1) for j in GavelGenerator(seed=1, mean_interarrival_s=60, throughputs=table)
            .jobs(12)]
    result = simulate(jobs, cluster, "gavel+tune", table, record_timeline=True)
    assert all(np.isfinite(r.finish_time_s) for r in result.jobs.values())
    tl = result.timeline_frame()
    assert (tl["cpus_per_gpu"] > 0).all()


def test_cli_compare_tiny(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", "--preset", "tiny", "--streams", "gavel", "--policies", "gavel", "gavel+tune",
                 "LAS+tune", "FIFO+opt", "--no-dask", "--out", str(out), "--cache-dir", str(tmp_path / "cache")])
    assert code == 0
    printed = capsys.readouterr().out
    assert "Composition gains" in printed and "FIFO+opt on gavel" in printed
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["policy"]) == {"gavel", "gavel+tune", "LAS+tune"}
    assert (summary["seeds"] == len(S.PRESETS["tiny"].seeds)).all()
    assert set(pd.read_csv(out / "gains.csv")["parent"]) == {"gavel", "LAS+tune"}


def test_cli_compare_rejects_a_missing_openb_folder(tmp_path, capsys):
    assert main(["compare", "--streams", "openb", "--openb-dir", str(tmp_path), "--no-dask", "--out",
                 str(tmp_path / "o")]) == 2
    assert "openb_node_list_gpu_node.csv" in capsys.readouterr().err


def test_each_policy_names_its_system_and_an_unknown_one_is_refused_before_any_run(tmp_path, capsys):
    systems = {p: S.system_of(p) for p in ("gavel", "gavel_las", "allox", "LAS+fair", "FIFO", "shockwave",
                                            "gavel_las+fair", "gavel+tune", "shockwave+tune")}
    assert systems == {"gavel": "Gavel", "gavel_las": "Gavel", "allox": "Gavel", "LAS+fair": "Synergy",
                       "FIFO": "Synergy",
                       "shockwave": "Shockwave", "gavel_las+fair": "composition", "gavel+tune": "composition",
                       "shockwave+tune": "composition"}
    assert set(map(S.system_of, S.POLICIES)) == {"Gavel", "Synergy", "Shockwave", "composition", "elastic"}
    cache = tmp_path / "cache"
    assert main(["compare", "--preset", "tiny", "--streams", "gavel", "--policies", "gavel", "gavle", "--no-dask",
                 "--out", str(tmp_path / "o"), "--cache-dir", str(cache)]) == 2
    assert "unknown policy 'gavle'; did you mean" in capsys.readouterr().err
    assert not cache.exists()                      # refused before the first run


def test_summary_labels_are_the_papers_names_and_never_repeat():
    """Gavel's LAS allocation and Synergy's LAS ordering read the same with the fair placement; the summary
    and its verdicts name each one apart (two rows were both "LAS", and so were the verdict's two names)."""
    rows = pd.DataFrame([S.run_case(S.Case("gavel", p, 0, "tiny")) for p in ("gavel", "gavel_las+fair", "LAS+fair")])
    summary = S.table(rows)
    assert summary.set_index("policy")["label"].to_dict() == {
        "gavel": "Gavel", "gavel_las+fair": "LAS (Proportional) [gavel_las+fair]",
        "LAS+fair": "LAS (Proportional) [LAS+fair]"}
    assert summary.set_index("policy")["system"].to_dict() == {"gavel": "Gavel", "gavel_las+fair": "composition",
                                                                "LAS+fair": "Synergy"}
    assert all("[" in line for line in S.verdicts(summary, S.gains(rows)) if "LAS" in line)


def test_cli_compare_on_dask_prints_its_table_and_no_dask_chatter(tmp_path):
    """`hetsched compare` on a LocalCluster: the runs happen in worker processes, and without -v the scheduler's
    and nannies' INFO lines stay out of the output (they were 33 lines for a 6-row table)."""
    out = subprocess.run([sys.executable, "-m", "hetsched", "compare", "--preset", "tiny", "--streams", "gavel",
                          "--policies", "gavel", "--seeds", "1", "--out", str(tmp_path / "o"), "--cache-dir",
                          str(tmp_path / "cache")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "INFO" not in out.stderr and "distributed" not in out.stderr, out.stderr
    assert pd.read_csv(tmp_path / "o" / "summary.csv")["label"].tolist() == ["Gavel"]
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1


@pytest.mark.parametrize("x,digits,text", [(190.4, 3, "190"), (100.2, 2, "100"), (99.96, 3, "100"), (10.0, 3, "10"),
                                           (0.01234, 3, "0.0123"), (12345.6, 3, "12,300"), (-3.94, 2, "-3.9"),
                                           (6.4, 2, "6.4"), (float("nan"), 3, "nan")])
def test_numbers_are_written_as_people_write_them(x, digits, text):
    assert S.readable(x, digits) == text                       # "190 ± 1e+02" was the summary's interval


def test_a_gain_whose_interval_spans_zero_is_no_significant_difference():
    assert S.gain_text(0.12, 0.03) == "+12.0 % ± 3.0 %"
    assert S.gain_text(-3.94, 2.228) == "-394.0 % ± 222.8 %"
    assert S.gain_text(-0.394, 2.228) == "no significant difference (-39.4 % ± 222.8 %)"
    assert S.gain_text(0.1, float("nan")) == "+10.0 % (one seed: no interval)"


def test_a_stream_where_no_job_waits_says_the_orderings_never_chose():
    """openb's slices never queue (24 pods on 12 GPUs at the quick preset, 120 on 32-36 at the paper one): every
    Synergy ordering gave the same JCTs there, and the verdicts say why."""
    rows = _rows({"FIFO+tune": (1.0, 1.1), "LAS+tune": (1.0, 1.1)}).assign(system="Synergy", waited_fraction=0.0)
    assert any("orderings never had to choose" in line for line in S.verdicts(S.table(rows), S.gains(rows)))
    busy = rows.assign(waited_fraction=[0.0, 0.2, 0.0, 0.1])
    assert not any("never had to choose" in line for line in S.verdicts(S.table(busy), S.gains(busy)))


def test_elastic_policies_run_on_the_sia_stream_alone_and_others_are_refused_there():
    rows = S.compare(("gavel", "sia"), "tiny", policies=("gavel", "sia", "gavel+tj"), seeds=(0,), use_dask=False,
                     cache_dir=None, progress=False)
    ran = {(r.stream, r.policy) for r in rows.itertuples() if not r.refused}
    assert ran == {("gavel", "gavel"), ("sia", "sia"), ("sia", "gavel+tj")}
    reasons = dict(zip(zip(rows["stream"], rows["policy"]), rows["reason"]))
    assert "Runs instead: sia on the 'sia' stream" in reasons[("gavel", "sia")]
    assert "Runs instead: sia, pollux, gavel+tj, themis+tj on this stream" in reasons[("sia", "gavel")]
    sia = rows[(rows["stream"] == "sia") & ~rows["refused"]]
    assert (sia["avg_jct_h"] > 0).all() and (sia["num_jobs"] == S.PRESETS["tiny"].sia_jobs).all()
    assert sia["worst_rho"].isna().all()                   # no FTF for elastic jobs: not a made-up number


def test_the_note_says_when_the_intervals_cannot_tell_policies_apart():
    """Pairs are separated when their intervals do not touch; fewer than half separated: the preset says it."""
    apart = S.table(_rows({"gavel": (10.0, 10.2), "themis": (20.0, 20.2), "allox": (30.0, 30.1)}))
    assert S.separation(apart).to_dict("records") == [{"stream": "s", "pairs": 3, "separated": 3}]
    assert S.separation_note(apart, "quick") == "the intervals separate 3 of 3 pairs of policies (s 3/3)"
    one_apart = S.table(_rows({"gavel": (10.0, 10.2), "themis": (10.1, 10.3), "allox": (30.0, 30.1)}))
    assert S.separation(one_apart)["separated"].tolist() == [2]
    mixed = S.table(_rows({"gavel": (10.0, 14.0), "themis": (11.0, 15.0), "allox": (12.0, 13.0)}))
    note = S.separation_note(mixed, "quick")
    assert note.startswith("the intervals separate 0 of 3 pairs") and "quick preset cannot tell" in note


def test_the_comparison_runs_shockwaves_planner_with_the_fairness_asked_for(tmp_path, capsys, monkeypatch):
    """`--shockwave-fairness share` reaches the planner of Shockwave's runs and compositions (its share stage
    plans their contended windows, docs/rules.md#planner-fairness), and only theirs; without a Shockwave policy it
    is refused before any run, as is a misspelt value."""
    from hetsched.decide.shockwave import milp

    calls = []
    share = milp.share_within_gap
    monkeypatch.setattr(milp, "share_within_gap", lambda *a, **k: calls.append(1) or share(*a, **k))
    for fairness in ("solver", "share"):
        calls.clear()
        row = S.run_case(S.Case("gavel", "shockwave+tune", 0, "tiny", shockwave_fairness=fairness))
        assert row["finished"] == row["num_jobs"] and (len(calls) > 0) == (fairness == "share"), fairness
    out, cache = tmp_path / "cmp", tmp_path / "cache"
    assert main(["compare", "--preset", "tiny", "--streams", "gavel", "--policies", "gavel", "shockwave",
                 "--seeds", "1", "--shockwave-fairness", "share", "--no-dask", "--out", str(out), "--cache-dir",
                 str(cache)]) == 0
    assert "kept the plan of fairness 'share'" in capsys.readouterr().out
    rows = pd.read_csv(out / "rows.csv").set_index("policy")
    assert rows["shockwave_fairness"].to_dict() == {"gavel": "solver", "shockwave": "share"}
    with pytest.raises(HetschedError, match="acts on Shockwave's planner only, and no policy of"):
        S.cases(["gavel"], "tiny", ["gavel", "LAS+tune"], shockwave_fairness="share")
    with pytest.raises(HetschedError, match="Shockwave fairness 'shares': expected one of solver, ftf, share"):
        S.cases(["gavel"], "tiny", ["shockwave"], shockwave_fairness="shares")
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--policies", "shockwave", "--shockwave-fairness", "fair", "--no-dask"])
    assert exc.value.code == 2 and "invalid choice: 'fair'" in capsys.readouterr().err
