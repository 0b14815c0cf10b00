"""The one-stream comparison notebook (run through notebooks/_build.py). All logic lives in
hetsched.experiments.compare_systems."""

from __future__ import annotations

from _build import notebook

PARAMS = '''streams = None                # None: all three ("gavel", "shockwave", "openb")
openb_dir = None              # folder with openb's node and pod lists (None: ../shared/data/alibaba_openb)
shockwave_fairness = "solver" # the plan within the gap Shockwave's planner keeps: "solver" | "share" | "ftf"'''

RUN = '''from pathlib import Path
import pandas as pd
from hetsched.experiments import compare_systems as S
from hetsched.ui.plots import interval_dots, publish
out = Path(out_dir); out.mkdir(parents=True, exist_ok=True)
rows = S.compare(streams or tuple(S.STREAMS), preset, seeds=seeds, openb_dir=openb_dir, cache_dir=cache_dir,
                 dask_address=dask_address, use_dask=use_dask, shockwave_fairness=shockwave_fairness)
results, gains, refused = S.table(rows), S.gains(rows), S.refusals(rows)
results.to_csv(out / "results.csv", index=False)
gains.to_csv(out / "gains.csv", index=False)
refused.to_csv(out / "refused.csv", index=False)
rows.drop(columns=["jcts"], errors="ignore").to_csv(out / "rows.csv", index=False)
p = S.PRESETS[preset]
print(f"{len(rows)} runs: {rows['refused'].sum()} refused; {p.num_jobs} jobs a stream, seeds {list(p.seeds)}; "
      f"cluster {p.cluster} (Gavel and Shockwave streams), {p.openb_gpus} GPUs of openb servers (openb)")
show = ["avg_jct_h", "p99_jct_h", "makespan_h", "worst_rho", "unfair_fraction", "gpu_util", "cpu_util",
        "mem_util", "cost_usd"]
results.set_index(["stream", "label"])[[c for m in show for c in (m, f"{m}_ci")]].round(3)'''

CHART = '''panels = results.assign(stream=results["stream"] + ": " + results["stream"].map(S.STREAMS))
chart = interval_dots(panels, "label", "avg_jct_h", "avg_jct_h_ci", "stream",
                      "Average JCT on one stream and cluster, mean and 95 % interval over seeds", "average JCT (h)",
                      color="policy", subtitle=S.separation_note(results, preset))
publish(chart, out, preset, rows)'''

GAINS = '''jct = gains[gains["metric"] == "avg_jct_h"].assign(
    pair=lambda g: g["composition"] + " vs " + g["parent"], gain_pct=lambda g: 100 * g["gain"],
    gain_ci_pct=lambda g: 100 * g["gain_ci"])
publish(interval_dots(jct, "pair", "gain_pct", "gain_ci_pct", "stream", "Gain of each composition over each "
                      "parent (average JCT, paired by seed; > 0: the composition is faster)", "gain (%)", zero=0.0),
        out, preset, rows, name="gains")
gains.assign(gain=[S.gain_text(g, h) for g, h in zip(gains["gain"], gains["gain_ci"])]).drop(columns="gain_ci")'''

VERDICT = '''print("\\n".join(S.verdicts(results, gains)))
refused.set_index(["policy", "stream"])[["reason"]]'''

INTRO = ("# One stream, three systems\n\nThe same job stream on the same cluster under Gavel's, Synergy's and "
         "Shockwave's policies and their compositions, over seeds, with 95 % confidence intervals (Student's t "
         "over seeds). No paper could make this comparison: each artifact runs only its own policies, on its own "
         "traces and cluster model. Streams: Gavel's generator (multi-GPU jobs), Shockwave's adaptive trace "
         "generator (Accordion/GNS batch sizes), and a slice of Alibaba's openb pods on servers drawn from the "
         "openb node list. The Gavel and Shockwave streams run on servers of three GPU types with 3 CPU cores "
         "and 125 GB per GPU (Synergy's shape); each seed draws a new stream (openb: a new slice and new servers). "
         "A fourth stream, `sia`, is elastic jobs (the first jobs of one of Sia's Helios workloads a seed, on its "
         "64 GPUs): only Sia, Pollux and Gavel+TJ run there, and only there (docs/rules.md R75-R85). "
         "Every policy of a stream runs under the same round rules, so only the policy differs: Gavel's "
         "(360-s rounds) for the Gavel and openb streams, Shockwave's (120-s rounds, batch-size adaptation, "
         "20-s preemption penalty) for its own stream (docs/rules.md#compare).")

METHOD = ("## What the metrics are\n\n- **rho** (finish-time fairness) is Shockwave's for every policy alike: a "
          "job's JCT over its time alone (after batch-size adaptation when the run adapts, else at its fastest "
          "rate on the cluster's types) times max(1, jobs / GPUs); *unfair* is rho > 1.05.\n"
          "- **CPU and memory** are what was *allocated* to running jobs over what the servers have: the share "
          "a CPU/memory placement gave each job, else the GPU-proportional share (so a GPU-only policy's CPU "
          "and memory follow its GPUs: a definition, not a measurement of use).\n"
          "- **waited** is the fraction of jobs that started more than one round after they arrived. openb's "
          "slices never queue (0 under every policy, at both presets), so there Synergy's orderings never choose "
          "and, with one placement, agree.\n"
          "- **cost** prices GPU-hours at Gavel's on-demand prices (openb's GPU models at the price of the type "
          "the GPU map puts them on).\n- **gains** pair runs by seed: gain = 1 - composition / parent, so a "
          "positive gain is a shorter JCT; it is significant when its interval excludes 0.\n\n"
          "Refused combinations are listed with the registry's reason, never run half-way: Synergy's orderings "
          "have no batch-size adaptation or preemption penalty (so they do not run on Shockwave's stream), and "
          "Synergy-OPT places one pool per round with per-round credit (so it does not run on mixed GPU types).")

PRESSURE = '''pressure = S.cpu_pressure(streams or tuple(S.STREAMS), preset, openb_dir)
pressure.to_csv(out / "cpu_pressure.csv", index=False)
pressure.round(2)'''

READ = ("## Reading it\n\nThe sentences above are computed from the tables; the table just above says what "
        "TUNE can act on: how many cores a GPU the servers give, and the share of jobs whose profiled ideal is "
        "more than that.\n\n"
        "- **TUNE helps where a GPU's fair CPU share is below what its job wants.** On the three-type cluster "
        "(3 cores per GPU) about a quarter of the jobs (the image and speech models) want more; TUNE gives it to "
        "them out of what the language models leave, which is where the composition gains over its "
        "fair-share parent come from. Where a gain's interval includes 0 (the `gains` table), TUNE did not "
        "measurably help that policy on that stream.\n"
        "- **Shockwave's planner is built for its own stream**: it plans with the batch-size schedules. On "
        "static streams it is one more fair-share policy; compare its row on each stream.\n"
        "- **On openb TUNE has little to act on.** openb's servers give 4-32 cores a GPU and few jobs want more "
        "than their share. The profiles TUNE credits are those of the share every GPU of a type holds, the "
        "smallest of the type's servers' cores per GPU (docs/rules.md#profiles and #unlike-servers; outside "
        "Synergy's stored 3-6 cores a GPU they are derived from its grids), at which a job runs at the table's "
        "rate; so most jobs at their share already run at or near their best rate, and TUNE gains only where "
        "it gives a job its ideal share on one of the type's larger servers (the `gains` table: on the quick "
        "preset, 2 % with an interval of 4.4 %). Before 2026-11-28 every ratio outside 3-6 took the 3-core "
        "profiles, and TUNE was credited 3-core speedups on openb: that gain came from the rate model, not the "
        "cluster.\n- The composition against its Synergy parent (`gavel+tune`, \"Gavel "
        "(Synergy-TUNE)\", against `LAS+tune`, \"LAS (Synergy-TUNE)\", Synergy's LAS ordering) compares Gavel's "
        "allocation with Synergy's ordering under the same placement: on these small clusters the ordering's "
        "whole-job placement often wins.\n- Rows carry the papers' names (`hetsched policies` lists them); where "
        "two policies would read the same, the registry name follows in brackets.")

def build_compare() -> None:
    notebook("compare_systems", INTRO, PARAMS,
             [("code", RUN), ("code", CHART), ("md", METHOD), ("code", GAINS),
              ("md", "## Which system wins where"), ("code", VERDICT), ("code", PRESSURE), ("md", READ)], repoint=False)
