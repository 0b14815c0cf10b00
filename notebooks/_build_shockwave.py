"""Shockwave's figure notebooks (run through notebooks/_build.py). All logic lives in hetsched.experiments.shockwave."""

from __future__ import annotations

from _build import notebook

SETUP = '''from pathlib import Path
import numpy as np, pandas as pd
from hetsched.experiments.sweep import sweep, repoint
from hetsched.ui.plots import relative_bars, lines, publish, seed_strip
from hetsched.experiments import shockwave as W
out = Path(out_dir); out.mkdir(parents=True, exist_ok=True)
run = lambda cfgs: sweep(cfgs, cache_dir=cache_dir, dask_address=dask_address, use_dask=use_dask)
preset_note = {"paper": "paper preset", "quick": "quick preset", "tiny": "tiny preset: 40 jobs, 12 GPUs"}[preset]
COLS = ["setup", "policy", "label", "makespan_s", "avg_jct_s", "worst_ftf_rho", "unfair_pct", "unfair_pct_1_1",
        "utilization", "num_rounds", "cpu_s"]'''

CANONICAL = '''setup = "tiny" if preset == "tiny" else "canonical"
results = W.tidy(run(W.configs(setup)))
results[COLS].to_csv(out / "results.csv", index=False)
rel = W.relative(results)
chart = relative_bars(rel, f"Shockwave's canonical comparison: {W.SETUPS[setup].gpus} V100s, "
                           f"bar labels relative to Shockwave ({preset_note})")
publish(chart, out, preset, results)
results.set_index("label")[COLS[3:]].round(3)'''

SEEDS = '''seeds = {"paper": range(10), "quick": range(5), "tiny": range(3)}[preset]
seed_runs = W.tidy(run(W.seed_configs(setup, seeds)))
spread = W.seed_spread(seed_runs)
spread.to_csv(out / "seeds.csv", index=False)
publish(seed_strip(spread, f"Shockwave over MILP solver seeds ({preset_note})"), out, preset, seed_runs, name="seeds")
spread.groupby(["metric", "source"], sort=False)["value"].describe()[["count", "min", "50%", "max"]].round(3)'''

COMPARE = '''cmp = W.compare_reference(results)
cmp.to_csv(out / "comparison.csv", index=False)
cmp if cmp.empty else cmp.pivot_table(index="label", columns="metric", values=["artifact", "ours"]).round(3)'''


def build_shockwave() -> None:
    notebook("shockwave_canonical", "# Shockwave: the canonical comparison (NSDI'23, `canonical.png`)\n\n"
             "Seven policies on the artifact's 120-job dynamic-adaptation trace (mean inter-arrival 40 s, seed 25; "
             "Accordion and GNS batch-size scaling), 32 V100s, 120-s rounds with the 20-s preemption penalty, "
             "Shockwave's planner with the `tacc_32gpus` hyper-parameters on HiGHS. Four panels as in the paper: "
             "makespan, average JCT, worst finish-time fairness rho and the fraction of jobs with rho > 1.05; each "
             "bar is labelled with its value relative to Shockwave. The canonical setup runs at every preset "
             "but `tiny` (40 jobs on 12 GPUs).", "",
             [("code", SETUP), ("code", CANONICAL),
              ("md", "## Next to the artifact's stored numbers\n\nThe stored `tacc_32gpus` result pickles "
                     "(`data/paper/shockwave_reference.csv`). Gavel (LAS), OSSP, MST and Gandiva-Fair are "
                     "deterministic and match; AlloX matches makespan and the unfair fraction to the printed digits and "
                     "average JCT within 0.3 %, Themis within 2 % on makespan and JCT; "
                     "Shockwave's planner is a MILP under a time limit and gap, so its numbers depend on the solver "
                     "(the artifact itself gave 24,197 / 24,498 / 24,457 s with Gurobi / HiGHS / SCIP)."),
              ("code", COMPARE),
              ("md", "## Shockwave over solver seeds\n\nAt k = 1e-3 the makespan regulariser is worth about 14 "
                     "in the planner's objective and the MILP gap 1e-3 of that is about 0.014, while one round of "
                     "progress for one job adds about 0.003 of Nash social welfare. Within the gap the solver "
                     "returns one of many near-optimal plans, so which short job waits, and the worst rho, move "
                     "with the solver's random seed (the run's `seed`). The artifact's own runs show the same "
                     "spread: Gurobi (stored), HiGHS and SCIP gave worst rho 1.784, 1.733 and 1.874. The fidelity "
                     "test compares the median of seeds 0-4 with the stored run."),
              ("code", SEEDS),
              ("md", "The Shockwave paper's \"Gavel\" bar is Gavel's LAS policy; on V100s only, LAS and Gavel coincide, so "
                     "hetsched's one vocabulary calls it LAS.\n\n**What this shows.** Shockwave finishes the trace about 1.3x sooner than the fair "
                     "schedulers (Themis, Gavel, Gandiva-Fair, AlloX) while keeping almost every job within 5 % of "
                     "its fair finish time; OSSP matches its makespan but leaves most jobs unfair.")])

    notebook("shockwave_scale", "# Shockwave at scale: 64, 128 and 256 GPUs (Fig. 9)\n\n"
             "The artifact's scale runs: 220 jobs on 64 GPUs, 460 on 128, 900 on 256 (mean inter-arrival 25 / 10 "
             "/ 5 s, `wisr` throughputs, the `scale_*gpus` hyper-parameters). The quick preset runs the 64-GPU "
             "setup; the paper preset all three.", "",
             [("code", SETUP),
              ("code", '''setups = {"paper": ["scale_64", "scale_128", "scale_256"], "quick": ["scale_64"], "tiny": ["tiny"]}[preset]
results = W.tidy(run([c for s in setups for c in W.configs(s)]))
results[COLS].to_csv(out / "results.csv", index=False)
rel = W.relative(results)
rel["setup"] = rel["setup"].map(lambda s: f"{W.SETUPS[s].gpus} GPUs")
import altair as alt
chart = alt.vconcat(*[relative_bars(g, f"{s}, bar labels relative to Shockwave ({preset_note})")
                      for s, g in rel.groupby("setup", sort=False)])
publish(chart, out, preset, results)
results.pivot_table(index="label", columns="setup", values=["makespan_s", "avg_jct_s", "worst_ftf_rho",
                                                            "unfair_pct"]).round(2)'''),
              ("md", "**What this shows.** The gap between Shockwave and the fair schedulers persists as the "
                     "cluster and the load grow; the planner's solve stays small because it plans rounds per job, "
                     "not per job and round (see the issue note for its time per solve).")], repoint=False)

    notebook("shockwave_adaptation", "# Dynamic adaptation: batch size per epoch, planned vs actual\n\n"
             "Shockwave's planner predicts each job's batch-size schedule from an oracle profile (Accordion: "
             "the first 30 % of epochs and the critical regimes at the initial batch size; GNS: a doubling table). "
             "The simulator switches batch sizes by the artifact's runtime rules, which differ: Accordion has no "
             "30 % rule at runtime, GNS looks 760 epochs ahead, and a partial epoch counts as a full one at each "
             "switch. Here, for a few jobs of the canonical trace under Shockwave, both schedules.",
             "jobs = [0, 1, 3, 12]          # job ids of the canonical trace",
             [("code", SETUP),
              ("code", '''from hetsched.sim.simulator import SimulationConfig, simulate
from hetsched.model.cluster import ClusterSpec
from hetsched.traces import read_trace
s = W.SETUPS["tiny" if preset == "tiny" else "canonical"]
stream = read_trace(W.trace_path(s))[: s.num_jobs]
result = simulate(stream, ClusterSpec.load(f"v100={s.gpus}"), "shockwave", s.throughputs,
                  SimulationConfig.for_system("shockwave"), record_timeline=False)
frame = W.adaptation_frame(result, [j for j in jobs if j < len(stream)], s.throughputs)
frame.to_csv(out / "results.csv", index=False)
import altair as alt
chart = alt.Chart(frame).mark_line(interpolate="step-after").encode(
    x=alt.X("epoch:Q"), y=alt.Y("batch_size:Q", scale=alt.Scale(type="log", base=2), title="batch size"),
    color=alt.Color("source:N"), strokeDash="source:N").properties(width=260, height=160).facet(
    facet=alt.Facet("job:N", title=None), columns=2).resolve_scale(x="independent")
publish(chart, out, preset, None, cluster=f"v100={s.gpus}", trace=s.trace)
(result.adaptations.groupby("job_id").size().describe(), len(result.adaptations))'''),
              ("md", "**What this shows.** Accordion jobs switch to the large batch size earlier than the "
                     "profile assumes (no 30 % rule at runtime), so the planner's remaining-time prediction is "
                     "pessimistic for them; its calibration (epoch times rescaled when measured and predicted "
                     "samples differ by more than 40 %) absorbs part of that.")], repoint=False)


def build_shockwave_hetero() -> None:
    notebook("shockwave_hetero", "# Beyond the artifact: Shockwave on V100s, P100s and K80s\n\n"
             "The artifact runs on V100s only. Here its planner chooses the GPU type per job and round from each "
             "job's throughput on every type (Gavel's table, at the job's current batch size), on the same "
             "dynamic-adaptation stream as Gavel's heterogeneity-aware FTF and LAS, under Shockwave's round rules. "
             "`Shockwave, type-agnostic plan` is the same planner treating every type as a V100 (the artifact's "
             "view). Paper preset: the 460-job trace on 36:36:36; quick: the 120-job trace on 12:12:12.", "",
             [("code", SETUP),
              ("code", '''results = W.tidy(run(W.hetero_configs(preset)))
results[COLS + ["cluster_types"]].to_csv(out / "results.csv", index=False)
rel = W.relative(results)
chart = relative_bars(rel, f"Dynamic adaptation on {W.HETERO[preset][1]} (V100:P100:K80), bar labels relative "
                           f"to Shockwave ({preset_note})")
publish(chart, out, preset, results)
headline = results.set_index("label")[["makespan_s", "avg_jct_s", "worst_ftf_rho", "unfair_pct", "cpu_s"]]
headline.to_csv(out / "headline.csv")
headline.round(3)'''),
              ("md", "**What this shows.** Planning with per-type throughputs lets Shockwave put each job where "
                     "it runs fastest relative to the others, which the type-agnostic plan cannot; against Gavel's "
                     "heterogeneity-aware policies it keeps Shockwave's makespan and fairness advantage.")])
