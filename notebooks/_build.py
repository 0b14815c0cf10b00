"""Writes the figure notebooks from the cell texts below (run: python notebooks/_build.py).

The notebooks are thin on purpose: every function they call lives in the library (hetsched.experiments,
hetsched.experiments.sweep, hetsched.ui.plots). Edit here, rebuild, commit the .ipynb files.
"""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

from hetsched.experiments.continuous import FIG8_HORIZON
from hetsched.ui.clean_save import KERNELSPEC, MARK

HERE = Path(__file__).resolve().parent

COMMON_PARAMS = '''preset = "quick"             # "tiny" (tests) | "quick" (CI, make reproduce) | "paper" (the artifact's parameters)
out_dir = "../outputs/{name}"
seeds = None                  # None: the preset's seeds
rates = None                  # None: the preset's (paper-equivalent) input rates, jobs/h
dask_address = None           # scheduler address of an existing Dask cluster; None: a LocalCluster
use_dask = True
cache_dir = "../outputs/.cache"'''

# Papermill parameters that re-point a sweep (hetsched.experiments.sweep.repoint); None keeps the preset's.
REPOINT_PARAMS = '''cluster = None                # e.g. "24:12:12" or "16x8/24/500"; continuous rates scale with its GPU count
window = None                 # measured jobs, e.g. "600:800"
throughputs = None            # a table in data/throughputs (e.g. "gavel_physical") or a .json/.parquet file
round_s = None                # round length in seconds (Gavel 360, Synergy 300, Shockwave 120 by default)'''
RUN_PLAIN = "run = lambda cfgs: sweep(cfgs, cache_dir"
RUN_REPOINTED = ("run = lambda cfgs: sweep(repoint(cfgs, cluster=cluster, window=window, throughputs=throughputs, "
                 "round_s=round_s),\n                          cache_dir")

SETUP = '''from pathlib import Path
import numpy as np, pandas as pd
from hetsched.experiments.sweep import sweep, repoint
from hetsched.ui.plots import lines, cdf, publish
from hetsched.experiments import continuous as C
from hetsched.experiments.compare import paper_table, side_by_side
out = Path(out_dir); out.mkdir(parents=True, exist_ok=True)
run = lambda cfgs: sweep(cfgs, cache_dir=cache_dir, dask_address=dask_address, use_dask=use_dask)'''


CHECK_PRESET = "from hetsched.experiments import check_preset\ncheck_preset(preset)\n"


def notebook(name: str, title: str, params: str, cells: list[tuple[str, str]], repoint: bool = True) -> None:
    """A figure notebook; `repoint`: its sweep takes the cluster/window/throughputs/round_s parameters."""
    nb = nbf.v4.new_notebook()
    head = COMMON_PARAMS.format(name=name) + ("\n" + REPOINT_PARAMS if repoint else "")
    p = nbf.v4.new_code_cell(head + ("\n" + params if params else ""))
    p.metadata["tags"] = ["parameters"]
    nb.cells = [nbf.v4.new_markdown_cell(title), p]
    first = next(i for i, (kind, _) in enumerate(cells) if kind == "code")
    cells = [*cells[:first], ("code", CHECK_PRESET + cells[first][1]), *cells[first + 1:]]
    for kind, text in cells:
        if kind == "code" and repoint:
            text = text.replace(RUN_PLAIN, RUN_REPOINTED)
        nb.cells.append(nbf.v4.new_markdown_cell(text) if kind == "md" else nbf.v4.new_code_cell(text))
    _write(nb, name)


def _write(nb, name: str) -> None:
    """Stable cell ids, so that rebuilding does not churn the committed files."""
    for i, cell in enumerate(nb.cells):
        cell.id = f"{name.replace('_', '-')}-{i}"
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["hetsched"] = dict(MARK)        # JupyterLab saves it as written here (hetsched/ui/clean_save.py)
    nbf.write(nb, HERE / f"{name}.ipynb")


def horizon_param(default: float | None) -> str:
    """The papermill parameter: a run still going at `horizon` x its window's expected last arrival is a saturated
    point (docs/rules.md#horizon)."""
    if default is None:
        return "horizon = None                # e.g. 5: saturated past 5 x the window's expected last arrival (R66)"
    return (f"horizon = {default!r}                 # saturated past {default:g} x the window's expected last "
            "arrival (R66); None: no horizon")


def continuous_notebook(name, title, kind, policies, extra, paper, what, ratios, ftf=False, more=(), horizon=None):
    paper_name = "gavel_fig8_las_single" if kind == "single" else "gavel_fig9_las_multi"
    cells = [
        ("code", SETUP),
        ("code", f'''runs = C.configs("{kind}", preset, policies + extra_policies, rates=rates, seeds=seeds,
                 horizon=horizon)
results = C.tidy(run(runs))
cols = ["policy", "paper_rate", "seed", "jobs_per_hour", "cluster", "avg_jct_h", "jct_p99_s", "utilization",
        "saturated", "timed_out"]
results[cols].to_csv(out / "results.csv", index=False)
if horizon is not None:       # how close a finished run came to the horizon (docs/rules.md#horizon)
    print(f"horizon {{horizon:g}} x: the latest finished run ended at {{C.finish_x(results).max():.2f}} x")
results.pivot_table(index="paper_rate", columns="policy", values="avg_jct_h").round(2)'''),
        ("code", f'''main = results[results["policy"].isin(policies)]
paper = paper_table("{paper_name}").rename(columns={{"rate_jobs_per_h": "paper_rate"}})
why = ("the notes below say why" if preset == "paper" else f"the {{preset}} preset runs a smaller "
       "cluster and window at paper-equivalent rates: near saturation a small shift in rate is a large one in JCT")
chart = lines(main, "paper_rate", "avg_jct_h", "policy", "Average JCT vs input rate",
              "input job rate (jobs/h, paper-equivalent)", "average JCT (hours)", y_max=100, reference=paper,
              differs=(0.05, why))
rate_cdf = sorted(main["paper_rate"].unique())[len(main["paper_rate"].unique()) * 2 // 3]
jobs = C.per_job_jcts(main[main["seed"] == main["seed"].min()], paper_rate=rate_cdf)
chart = chart | cdf(jobs, "jct_h", "policy", f"JCT CDF at {{rate_cdf}} jobs/h", "JCT (hours)")
publish(chart, out, preset, results)
'''),
    ]
    if ftf:
        cells.append(("code", '''fair = C.rho(results)
fair.to_csv(out / "rho.csv", index=False)
rho_chart = cdf(fair[fair["paper_rate"] == rate_cdf], "rho", "policy",
                f"Finish-time fairness rho at {rate_cdf} jobs/h", "rho = JCT / JCT under isolated")
publish(rho_chart, out, preset, results, "rho")
fair.groupby(["policy", "paper_rate"])["rho"].mean().unstack().round(2)'''))
    cells += [
        ("md", "## Next to the artifact's stored numbers\n\n" + paper),
        ("code", '''cmp = side_by_side(results[results["seed"] == 0].replace([np.inf], np.nan), paper, ["paper_rate", "policy"],
                   "avg_jct_h", "avg_jct_h")
cmp.to_csv(out / "comparison.csv", index=False)
cmp.round(3)'''),
        ("code", ratios),
        ("md", what),
        *more,
    ]
    notebook(name, title, f"policies = {policies!r}\nextra_policies = {extra!r}\n{horizon_param(horizon)}",
             cells)


RATIO_CELL = '''def at(policy, rate):
    sel = results[(results["policy"] == policy) & (results["paper_rate"] == rate)]["avg_jct_h"]
    return float(sel.mean()) if len(sel) else float("nan")
high = max(r for r in results["paper_rate"].unique()
           if np.isfinite(at("{las}", r)) and np.isfinite(at("{gavel}", r)))
headline = pd.DataFrame([{{"rate": high, "ratio": "{las} / {gavel}", "ours": at("{las}", high) / at("{gavel}", high)}}])
headline.to_csv(out / "headline.csv", index=False)
headline'''


FIG8_OUTLIERS = [
    ("md", "## The points that differ from the stored curve\n\n"
     "An earlier paper-preset sweep put nine stored seed-0 points more than 5 % from ours; four still are (AlloX "
     "at 4.0 jobs/h, Gandiva at 4.4, agnostic LAS at 4.8 and 5.2). Each of the nine is re-run "
     "with what the artifact leaves to chance or to its solver, everything else equal "
     "(`hetsched.experiments.fig8_outliers`): the run's own random draws from other seeds (Gandiva's pairings, "
     "agnostic LAS's shuffled GPU-type order), AlloX's other optimal matchings (tie seeds, docs/rules.md R42), "
     "and LAS's per-job LP instead of one variable per class of identical jobs (R62). `inside` says whether the "
     "stored value lies in the range these equally valid runs span; `same_jct_at` the input rate at which our "
     "own seed-0 curve reaches the stored value. Only the paper preset compares with stored numbers; the smaller "
     "presets show the spreads on their cluster."),
    ("code", '''from hetsched.experiments import fig8_outliers as O
draws = {"tiny": 1, "quick": 2}.get(preset, 4)
variants = C.tidy(run(O.configs(preset, draws)))
stored = paper_table("gavel_fig8_las_single") if preset == "paper" else None
spans = O.spans(variants, stored, results[results["seed"] == 0])
spans.to_csv(out / "outliers.csv", index=False)
spans.round(3)'''),
    ("md", "**Why each differs** (paper preset, 4 draws per point, measured 2026-11-25, AlloX again on 2026-11-26; "
     "the full 225-run sweep, `benchmarks/fig8_sweep.py`, has 67 of 71 finite stored points within 5 %, "
     "the other four being AlloX at 4.0, Gandiva at 4.4 and LAS at 4.8 and 5.2):\n\n"
     "- **AlloX at 4.0-5.2 jobs/h: arbitrary optimal matchings.** When the waiting jobs do not fill the GPUs' "
     "positions evenly, which of the jobs one position down starts now is the solver's pick, and the layout of "
     "the cost matrix steers it. With the artifact's layout (docs/rules.md R42) seed 0 is at 0.985 and 0.9996 "
     "of the stored value at 4.8 and 5.2 jobs/h (0.968 and 1.054 with our earlier, smaller matrix). Four tie "
     "seeds move these points by 2.6-9.1 %: the stored value is inside the range at 4.8 and 5.2 jobs/h, and "
     "2.4 % and 0.8 % below it at 4.0 and 4.4.\n"
     "- **Gandiva at 4.4 jobs/h: random pairings.** Other draw seeds span 24.1-27.8 h (15 %); the stored "
     "25.65 h is inside.\n"
     "- **Agnostic LAS at 4.8-5.2 jobs/h: saturation.** Its JCT grows 1.8x from 4.8 to 5.2 jobs/h and the run "
     "saturates before 5.6. Our curve reaches the stored values at 4.73 and 5.13 jobs/h, 1.5 % and 1.3 % below "
     "the rate. Draw seeds move it by 1 %. The per-job LP (the artifact's formulation) moves it 0.9 % and 3.3 % "
     "toward the stored values (ours/stored 1.062 and 1.043) at 1.3-2x the CPU, so the figures keep the class "
     "LP above 128 jobs; `policy_params=((\"aggregate\", False),)` on a RunConfig runs the per-job one. At "
     "5.6 jobs/h ours saturates (without the cap of 10 active jobs per GPU it had not finished the window after "
     "600 CPU-s) where the artifact's run finished at 96 h: the same shift, past the knee.\n"
     "- **LAS with space sharing at 1.2-1.6 jobs/h: a degenerate optimum.** Ours is now 3.6 % below the stored "
     "values. Pairing classes instead of jobs reaches the same optimum at another point of its face; the "
     "per-job pair LP (as the artifact) moves the points 1.4-2.2 % toward the stored values at 1.6-2.1x the "
     "CPU.\n\n"
     "None of these is a rule that we implement differently (AlloX's matrix now is the artifact's); LAS's "
     "per-job LP is the one formulation choice, and it is a switch."),
]


def build() -> None:
    continuous_notebook(
        "fig08_las_single", "# Fig. 8: LAS on continuous single-GPU traces\n\nAverage JCT vs input rate for "
        "heterogeneity-agnostic LAS, Gavel (heterogeneity-aware LAS), Gavel with space sharing, Gandiva and "
        "AlloX, plus the FIFO and FTF variants of the same notebook of the artifact. 36 V100 + 36 P100 + 36 K80 "
        "at the paper preset; the quick preset uses 12:12:12 with every rate scaled by 1/3 and jobs 600-799.",
        "single", ["max_min_fairness", "max_min_fairness_perf", "max_min_fairness_packed", "gandiva", "allox"],
        ["gavel_fifo", "fifo_perf", "finish_time_fairness", "finish_time_fairness_perf", "isolated"],
        "`data/paper/gavel_fig8_las_single.csv` (seed 0, spec s.8.1). `ratio` = ours / the artifact's, at the "
        "same paper-equivalent rate. At the quick preset the cluster is a third of the paper's, so expect the "
        "shape (LAS saturating first, Gavel later, space sharing last) rather than the digits.",
        "**What this shows.** Gavel (heterogeneity-aware LAS) keeps average JCT low up to higher rates than "
        "agnostic LAS; space sharing pushes saturation further. **Where ours differs:** `gavel_fifo` here is the "
        "*intended* random-type FIFO; the artifact's `fifo` ignores its random draw and crowds V100s "
        "(spec s.10.2), so its stored FIFO curve is worse than ours and FIFO-vs-Gavel gains shrink. Packed "
        "policies pair job classes instead of jobs (same optimum, a different point of a degenerate optimal face).",
        RATIO_CELL.format(las="max_min_fairness", gavel="max_min_fairness_perf"), ftf=True, more=FIG8_OUTLIERS,
        horizon=FIG8_HORIZON)
    continuous_notebook(
        "fig09_las_multi", "# Fig. 9: LAS on continuous multi-GPU traces\n\nAs Fig. 8 with scale factors "
        "1/2/4/8 (70/10/15/5 %). Quick preset: 12:12:12, rates scaled by 1/3, jobs 600-799.",
        "multi", ["max_min_fairness", "max_min_fairness_perf", "max_min_fairness_packed", "gandiva"],
        ["fifo_perf"],
        "`data/paper/gavel_fig9_las_multi.csv` (seed 0, spec s.8.2); the artifact's own re-run of HEAD "
        "differs from these stored logs by about 5 % (spec s.9).",
        "**What this shows.** With multi-GPU jobs the gap between agnostic and heterogeneity-aware LAS opens "
        "at lower rates (multi-GPU jobs amplify the throughput differences). **Differences:** multi-GPU pairs "
        "are all zero in the throughput table, so space sharing only packs single-GPU jobs, as in the artifact.",
        RATIO_CELL.format(las="max_min_fairness", gavel="max_min_fairness_perf"))
    continuous_notebook(
        "fig10_ftf_multi", "# Fig. 10: finish-time fairness on continuous multi-GPU traces\n\nThemis-style FTF, "
        "agnostic vs heterogeneity-aware, with the CDF of rho = JCT / JCT under `isolated` on the same stream.",
        "multi", ["finish_time_fairness", "finish_time_fairness_perf"], ["isolated"],
        "`data/paper/gavel_fig9_las_multi.csv` holds the FTF columns of the same stored sweep (spec s.8.2).",
        "**What this shows.** Heterogeneity-aware FTF lowers average JCT and keeps most jobs at rho < 1 "
        "(they finish sooner than with an isolated 1/n share). **Differences:** FTF here is one exact cone "
        "program per allocation (the artifact's cvxpy `inv_pos` program gives the same optimum).",
        RATIO_CELL.format(las="finish_time_fairness", gavel="finish_time_fairness_perf"), ftf=True)


def build_more() -> None:
    notebook("makespan_static", "# Makespan on static multi-GPU traces\n\nAll jobs arrive at t=0; makespan vs number "
             "of jobs for FIFO, Gandiva, Gavel's makespan policy (agnostic, heterogeneity-aware, with space "
             "sharing). Paper preset: 36:36:36, 100-700 jobs, seeds 0-2. Quick: 12:12:12 with a third of the jobs.",
             'policies = ["gavel_fifo", "gandiva", "min_total_duration", "min_total_duration_perf", "min_total_duration_packed"]',
             [("code", SETUP + "\nfrom hetsched.experiments import static as St"),
              ("code", """results = run(St.makespan_configs(preset, policies, seeds=seeds))
results["makespan_h"] = results["makespan_s"] / 3600
results[["policy", "paper_num_jobs", "num_jobs", "seed", "cluster", "makespan_h", "utilization"]].to_csv(
    out / "results.csv", index=False)
paper = paper_table("gavel_makespan_static").rename(columns={"num_jobs": "paper_num_jobs"})
chart = lines(results, "paper_num_jobs", "makespan_h", "policy", "Makespan of static traces",
              "number of jobs (paper-equivalent)", "makespan (hours)", reference=paper)
publish(chart, out, preset, results)
"""),
              ("code", """cmp = side_by_side(results, paper, ["paper_num_jobs", "policy"], "makespan_h", "makespan_h")
cmp.to_csv(out / "comparison.csv", index=False)
big = results["paper_num_jobs"].max()
m = results[results["paper_num_jobs"] == big].groupby("policy")["makespan_h"].mean()
pd.DataFrame([{"jobs": big, "fifo / gavel": m["gavel_fifo"] / m["min_total_duration_perf"],
               "gandiva / gavel": m["gandiva"] / m["min_total_duration_perf"], "paper fifo / gavel (700)": 2.54,
               "paper gandiva / gavel (700)": 1.42}]).round(2)"""),
              ("md", "**What this shows.** Gavel's heterogeneity-aware makespan policy finishes the same work much "
                     "sooner than FIFO and Gandiva, and for small traces reaches the lower bound (the longest job's "
                     "V100 time). **Differences:** our makespan policy is an exact LP (the artifact bisects to 5 %), "
                     "so it can only be better; `gavel_fifo` is the intended random-type baseline (spec s.10.2), which "
                     "changes the FIFO/Gavel ratio relative to the paper's 2.5x.")])

    notebook("cluster_sweep", "# Cluster composition: what heterogeneity-awareness buys as V100s get scarce\n\n100 GPUs "
             "split between V100 and K80. Makespan of static multi-GPU traces under the agnostic vs the "
             "heterogeneity-aware makespan policy (the artifact's `cluster_sweep.ipynb`, static half). Quick "
             "preset: 6 fractions, 60 jobs, seed 0.",
             'policies = ["min_total_duration", "min_total_duration_perf"]',
             [("code", SETUP + "\nfrom hetsched.experiments import static as St"),
              ("code", """results = run(St.composition_configs(preset, policies, seeds=seeds))
wide = results.pivot_table(index=["v100_fraction", "seed"], columns="policy", values="makespan_s").reset_index()
wide["makespan_reduction"] = wide["min_total_duration"] / wide["min_total_duration_perf"]
wide.to_csv(out / "results.csv", index=False)
chart = lines(wide.assign(series="agnostic / aware"), "v100_fraction", "makespan_reduction", "series",
              "Makespan reduction from heterogeneity awareness", "fraction of V100s", "agnostic / aware makespan")
import altair as alt
stated = pd.DataFrame({"x0": [0.1], "x1": [0.5], "lo": [1.4], "hi": [1.7],
                       "stated": ["the artifact's 1.4-1.7x at 10-50 % V100s (spec s.8.5)"]})
band = alt.Chart(stated).mark_rect(color="#888", opacity=0.2).encode(x="x0:Q", x2="x1:Q", y="lo:Q", y2="hi:Q",
                                                                     tooltip=["stated"])
chart = alt.layer(band, chart).properties(title=alt.TitleParams(
    "Makespan reduction from heterogeneity awareness",
    subtitle="grey box: the artifact's stated 1.4-1.7x at 10-50 % V100s"))
publish(chart, out, preset, results)
wide.round(3)"""),
              ("md", "**What this shows.** With only V100s there is nothing to gain (ratio 1.0); the gain is "
                     "largest when a minority of the GPUs are fast (the artifact: 1.4-1.7x at 10-50 % V100s, "
                     "spec s.8.5, the grey box). **Differences:** the artifact's job counts for this sweep are not recorded; we "
                     "use the preset's count (stated above).")], repoint=False)

    notebook("fig11_hierarchical", "# Fig. 11: hierarchical (multi-level) fairness, from a trace\n\nThe jobs come "
             "from a trace with entities (any format hetsched reads: canonical CSV/Parquet, or a production trace "
             "such as Helios with its virtual clusters) and the entities' weights from an `entity,weight` CSV. "
             "The default trace is the paper's setting, written out first: 3 K80 + 3 P100 + 3 V100; three "
             "entities with weights 1:2:3; a job arrives every 4 timesteps (18 jobs); job weights alternate 1 "
             "and 2. At each timestep the core hands the arrived jobs, their entities and the weights to water "
             "filling, heterogeneity-aware vs agnostic (no simulator, as in the artifact). All presets are equal.",
             """trace = None                  # a trace with an entity column (or a production trace with trace_format)
trace_format = None           # e.g. "helios": its virtual clusters become entities
entity_weights = None         # a CSV of entity,weight rows; None: weights 1, 2, 3 for e0, e1, e2
cluster = "3:3:3\"""",
             [("code", SETUP + "\nfrom hetsched import load_throughputs\nfrom hetsched.experiments import microbench as M"
                       "\nfrom hetsched.traces import read_trace, write_trace\nfrom hetsched.model.entities import read_entity_weights"),
              ("code", """table = load_throughputs()
if trace is None:                       # the paper's stream, as a trace file
    trace = out / "fig11_trace.csv"
    write_trace(M.fig11_jobs(table), trace)
if entity_weights is None:
    entity_weights = out / "teams.csv"
    entity_weights.write_text("entity,weight\\ne0,1\\ne1,2\\ne2,3\\n")
jobs = read_trace(trace, trace_format)
weights = read_entity_weights(entity_weights)
frames = [M.hierarchical_timeline(table, jobs, weights, cluster, policy=p) for p in
          ("max_min_fairness_water_filling_perf", "max_min_fairness_water_filling")]
results = pd.concat(frames, ignore_index=True)
results.to_csv(out / "results.csv", index=False)
totals = results.groupby(["policy", "timestep"], as_index=False)["normalized_throughput"].sum()
shares = results[results["policy"] == "max_min_fairness_water_filling_perf"].groupby(
    ["timestep", "entity"], as_index=False)["share"].sum()
chart = (lines(totals, "timestep", "normalized_throughput", "policy", "Total normalised effective throughput",
               "timestep", "sum of normalised throughput")
         | lines(shares, "timestep", "share", "entity", "Share per entity (heterogeneity-aware)", "timestep",
                 "fraction of total"))
publish(chart, out, preset, results, trace=Path(trace).name, cluster=cluster)
end = totals[totals["timestep"] == totals["timestep"].max()].set_index("policy")["normalized_throughput"]
last = shares[shares["timestep"] == shares["timestep"].max()].set_index("entity")["share"]
display(pd.DataFrame({"entity": last.index, "weight": [weights.get(e, 1.0) for e in last.index],
                      "final share": last.values}).round(3))
pd.DataFrame([{"aware": end["max_min_fairness_water_filling_perf"], "agnostic": end["max_min_fairness_water_filling"],
               "ratio": end["max_min_fairness_water_filling_perf"] / end["max_min_fairness_water_filling"],
               "paper ratio": 10.5 / 9.0}]).round(3)"""),
              ("md", "**What this shows.** Once all entities have jobs, the heterogeneity-aware policy keeps the "
                     "1:2:3 split between entities and reaches a higher total effective throughput than the "
                     "agnostic one (the artifact: about 10.5 vs 9.0, 1.16x). Point `trace` at your own trace "
                     "(and `entity_weights` at your teams) to see the same for your users. **Differences:** job "
                     "types are drawn from our seeded RNG (the artifact's draw is not recorded), so totals differ; "
                     "the bottleneck test uses LP duals instead of the artifact's MILP (same lexicographic "
                     "optimum).")], repoint=False)

    notebook("fig12_policy_runtime", "# Fig. 12: policy solve time vs number of jobs\n\nN single-GPU jobs on N/4 GPUs of "
             "each type; CPU seconds of one allocation (median of trials). Quick: up to 1024 jobs, 1 trial.",
             'policies = ["max_min_fairness_perf", "max_min_fairness_packed", "max_min_fairness_water_filling_perf", '
             '"max_min_fairness_water_filling_packed"]',
             [("code", SETUP + "\nfrom hetsched import load_throughputs\nfrom hetsched.experiments import microbench as M"),
              ("code", """sizes = {"tiny": [32, 64], "quick": [32, 128, 512, 1024], "paper": [32, 64, 128, 256, 512, 1024, 2048]}[preset]
trials = 3 if preset == "paper" else 1
results = M.policy_runtimes(load_throughputs(), policies, sizes, trials)
results.to_csv(out / "results.csv", index=False)
paper = paper_table("gavel_fig12_runtime")
chart = lines(results, "num_jobs", "seconds", "policy", "Policy runtime", "number of jobs", "seconds", log=True,
              reference=paper[paper["num_jobs"] <= max(sizes)])
publish(chart, out, preset, results)
cmp = side_by_side(results, paper, ["num_jobs", "policy"], "seconds", "seconds")
cmp["speedup"] = 1 / cmp["ratio"]
cmp.to_csv(out / "comparison.csv", index=False)
cmp.round(4)"""),
              ("md", "**What this shows.** Solve time grows slowly with the number of jobs: the LPs are built "
                     "vectorised over classes of identical jobs, and space sharing is modelled per pair of job "
                     "types, so the packed problem no longer grows with the square of the jobs (the artifact's "
                     "cannot be built at 1024). The artifact's times are read off its plots (+-1.5x).")], repoint=False)

    mech = """base = C.configs("single", preset, policies, rates=rates, seeds=seeds)
variants = [c.with_(ideal=True, labels=c.labels + (("mechanism", "ideal"),)) for c in base]
for r in round_lengths:
    variants += [c.with_(round_s=float(r), labels=c.labels + (("mechanism", f"rounds of {r} s"),)) for c in base]
results = C.tidy(run(variants))
results[["policy", "mechanism", "paper_rate", "seed", "avg_jct_h", "saturated"]].to_csv(out / "results.csv", index=False)
from hetsched.ui.names import display_name
chart = lines(results, "paper_rate", "avg_jct_h", "mechanism",
              f"{', '.join(map(display_name, policies))}: round-based mechanism vs ideal",
              "input job rate (jobs/h, paper-equivalent)", "average JCT (hours)", y_max=100)
publish(chart, out, preset, results)
results.pivot_table(index="paper_rate", columns="mechanism", values="avg_jct_h").round(2)"""
    notebook("fig13_mechanism", "# Fig. 13: the round-based mechanism vs an ideal fluid allocation, and round length"
             "\n\n`max_min_fairness_perf` on continuous single-GPU traces with 360/720/1440/2880-s rounds and the "
             "ideal (exact fluid) mechanism. Quick preset: 12:12:12, rates scaled by 1/3.",
             'policies = ["max_min_fairness_perf"]\nround_lengths = [360, 720, 1440, 2880]',
             [("code", SETUP), ("code", mech),
              ("md", "**What this shows.** The round-based mechanism tracks the ideal allocation closely below "
                     "saturation, and round length hardly matters until the highest rates, where long rounds "
                     "hurt (spec s.8.8). **Differences:** the artifact's `--ideal` crashes at HEAD; ours is an "
                     "exact fluid model that recomputes the allocation at every arrival and completion.")])

    est = """base = C.configs("small_cluster", preset, ["max_min_fairness_packed", "max_min_fairness_perf"], rates=rates, seeds=seeds)
est = [c.with_(estimate_colocation=(16, 0.2), labels=c.labels + (("variant", "SS, estimated (16 refs, 20 %)"),))
       for c in base if c.policy == "max_min_fairness_packed"]
base = [c.with_(labels=c.labels + (("variant", "SS, oracle" if c.policy.endswith("packed") else "no SS"),)) for c in base]
results = C.tidy(run(base + est))
results[["variant", "paper_rate", "seed", "avg_jct_h", "saturated"]].to_csv(out / "results.csv", index=False)
chart = lines(results, "paper_rate", "avg_jct_h", "variant", "Space sharing with estimated throughputs (4:4:4)",
              "input job rate (jobs/h)", "average JCT (hours)", y_max=100)
publish(chart, out, preset, results)
results.pivot_table(index="paper_rate", columns="variant", values="avg_jct_h").round(2)"""
    notebook("throughput_estimation", "# Throughput estimation for space sharing\n\nGavel with space sharing using oracle "
             "co-location throughputs, using estimates (16 reference job types, 20 % of cells profiled, matrix "
             "completion), and without space sharing, on a 4:4:4 cluster.", "",
             [("code", SETUP), ("code", est),
              ("md", "**What this shows.** Estimated co-location throughputs keep most of the benefit of space "
                     "sharing (the artifact: saturation at about 0.65 vs 0.7 jobs/h with the oracle and 0.55 "
                     "without packing, spec s.8.8). **Differences:** the artifact's estimator reveals wrong cells "
                     "when fewer than 26 reference types are used (the paper's setting); ours reveals the right ones.")])

    cost = """runs = C.configs("single", preset, policies, rates=rates, seeds=seeds)
runs = [c.with_(slos=True, prices="gcp") for c in runs]
results = C.tidy(run(runs))
results[["policy", "paper_rate", "seed", "avg_jct_h", "total_cost", "slo_violations", "saturated"]].to_csv(
    out / "results.csv", index=False)
chart = (lines(results, "paper_rate", "total_cost", "policy", "Total cost ($, GCP on-demand)",
               "input job rate (jobs/h, paper-equivalent)", "dollars")
         | lines(results, "paper_rate", "slo_violations", "policy", "SLO violations (window jobs)",
                 "input job rate (jobs/h, paper-equivalent)", "jobs"))
publish(chart, out, preset, results)
results.pivot_table(index="paper_rate", columns="policy", values=["total_cost", "slo_violations"]).round(1)"""
    notebook("cost_slo", "# Cost and SLO policies\n\nMaximum total throughput, throughput per dollar, and throughput "
             "per dollar subject to SLOs, next to Gavel's LAS, on continuous single-GPU traces with Gavel's "
             "SLO generator (1.2x/2x/10x the job's duration) and GCP on-demand prices (V100 0.74, P100 0.43, K80 "
             "0.135 $/h, hard-coded in the artifact).",
             'policies = ["max_min_fairness_perf", "max_sum_throughput_perf", '
             '"max_sum_throughput_normalized_by_cost_perf", "max_sum_throughput_normalized_by_cost_perf_SLOs"]',
             [("code", SETUP), ("code", cost),
              ("md", "**What this shows.** The per-dollar objective cuts cost by moving work to cheaper GPU types, "
                     "and the SLO variant trades some of that back to meet deadlines. **Differences:** the paper's "
                     "1.4x cost result used spot-price logs that the artifact does not ship, so it cannot be "
                     "reproduced; this notebook uses the artifact's hard-coded GCP prices instead.")])


def build_runtime() -> None:
    code = """from concurrent.futures import ThreadPoolExecutor
from hetsched.experiments.runtime_vs_sim import compare

jobs_per_system = {"tiny": 4, "quick": 10, "paper": 40}[preset] if num_jobs is None else num_jobs
round_len = {"tiny": 2.0, "quick": 4.0, "paper": 60.0}[preset] if round_s is None else round_s
with ThreadPoolExecutor(len(systems)) as pool:      # one local cluster per system, side by side
    runs = list(pool.map(lambda s: compare(s, jobs_per_system, round_len, seed=seed, state_parent=str(out),
                                           timeout_s=3600),
                         systems))
results = pd.concat([per_job.assign(system=summary["system"]) for per_job, summary in runs], ignore_index=True)
results = results.rename(columns={"jct_s": "jct_runtime_s", "sim": "jct_sim_s", "fixed": "jct_fixed_s",
                                  "calibrated": "jct_calibrated_s"})
results["ratio"] = results["jct_runtime_s"] / results["jct_calibrated_s"]
results["ratio_uncalibrated"] = results["jct_runtime_s"] / results["jct_sim_s"]
results.to_csv(out / "results.csv", index=False)
summary = pd.DataFrame([summary for _, summary in runs]).set_index("system")
summary.to_csv(out / "summary.csv")
import altair as alt
both = pd.concat([results.assign(simulator="calibrated", jct_ratio=results["ratio"]),
                  results.assign(simulator="plain", jct_ratio=results["ratio_uncalibrated"])], ignore_index=True)
both["series"] = both["system"] + " · " + both["simulator"]
band = alt.Chart(pd.DataFrame({"lo": [0.8], "hi": [1.25], "range": ["the paper's: Gavel, 98 % of jobs"]})).mark_rect(
    color="#888", opacity=0.15).encode(x="lo:Q", x2="hi:Q", tooltip=["range"])
chart = alt.layer(band, cdf(both, "jct_ratio", "series", "", "JCT on the local runtime / JCT in the simulator")
                  ).properties(title=alt.TitleParams("Runtime vs simulation: per-job JCT ratio, plain and calibrated "
                                                     "with the run's lease start", subtitle="grey band: the paper's "
                                                     "range, [0.8, 1.25] for 98 % of Gavel's jobs"))
publish(chart, out, preset, results)
summary[[c for c in summary if c.endswith("gap") or c.endswith("minus_1")] + ["lease_start_s", "wall_s"]].round(3)"""
    notebook("runtime_vs_simulation", "# Runtime vs simulation\n\nThe same trace runs on a local emulated "
             "cluster (the gRPC scheduler and one worker process per GPU; GPU types are emulated by slowdown "
             "factors, jobs by protocol-only workers) and in the simulator, for each system: Gavel's LAS-perf on "
             "three GPU types, Shockwave's planner with Accordion and GNS jobs, Synergy's FIFO+tune on a server "
             "with CPU cores and memory, Sia's 60-s rounds on T4 and A100 servers with adaptive jobs whose GPU "
             "count and type change, at a time scale of 60 s / the round (docs/rules.md#time-scale; "
             "`hetsched.experiments.runtime_vs_sim`). The simulator runs three ways: "
             "the papers' round rules, the runtime's fixed wall-clock rounds (docs/rules.md#fixed-rounds), and "
             "calibrated with the lease start the run measured (docs/rules.md#lease-start, what `hetsched "
             "calibrate` writes). Like the papers' physical-vs-simulation figures, the CDF shows per-job JCT "
             "ratios.",
             'systems = ["gavel", "shockwave", "synergy", "sia"]\nnum_jobs = None              # None: the preset\'s '
             '(tiny 4, quick 10, paper 40)\nround_s = None               # None: the preset\'s (tiny 2 s, quick '
             '4 s, paper 60 s)\nseed = 0',
             [("code", SETUP), ("code", code),
              ("md", "**What this shows.** How far the round-based core on the wall clock drifts from the "
                     "virtual clock on the same jobs, and how much of it the simulator predicts once it knows the "
                     "runtime's two fixed costs: rounds that last their length on the wall clock, and a new "
                     "lease's start (the hand-out at a heartbeat, the previous process's exit, launch). At the "
                     "paper preset (60-s rounds, 40 jobs a system, about an hour) these weigh little; at the "
                     "quick preset's seconds-long rounds they dominate the uncalibrated gap "
                     "(`summary.csv`: `sim_*` against `calibrated_*`). The paper: Gavel within about "
                     "[0.8, 1.25] for 98 % of jobs with 6-minute rounds; Shockwave's Table 3 0.02-9.92 %.")],
             repoint=False)


if __name__ == "__main__":
    from _build_compare import build_compare
    from _build_explore import build_explore
    from _build_traces import build_traces
    from _build_shockwave import build_shockwave, build_shockwave_hetero
    from _build_own import build_own
    from _build_sia import build_sia
    from _build_synergy import build_hetero, build_synergy

    build()
    build_more()
    build_explore()
    build_runtime()
    build_synergy()
    build_hetero()
    build_shockwave()
    build_shockwave_hetero()
    build_own()
    build_compare()
    build_traces()
    build_sia()
