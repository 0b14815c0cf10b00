"""Shockwave's experiments, after the artifact's scripts and its stored canonical figure: the canonical 32-GPU
comparison, the 64/128/256-GPU scale runs, the adaptation itself, and Shockwave on a heterogeneous cluster.

Presets: `paper` runs the artifact's four setups; `quick` (CI) runs the canonical setup (it is a minute of
CPU in all) and the 64-GPU scale run; `tiny` (tests) the canonical setup's first 40 jobs on 12 GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from hetsched.rates.adaptation.profile import epoch_profile
from hetsched.ui.names import display_name
from hetsched.experiments import choose
from hetsched.experiments.sweep import RunConfig
from hetsched.model.throughputs import data_dir, load_throughputs

#: The seven policies of the canonical figure, with its labels (the artifact's canonical figure), in its order.
POLICIES = {p: display_name(p) for p in ("shockwave", "min_total_duration", "finish_time_fairness",
                                         "max_min_fairness", "allox", "max_sum_throughput_perf", "gandiva_fair")}
METRICS = {"makespan_s": "Makespan (s)", "avg_jct_s": "Average JCT (s)", "worst_ftf_rho": "Worst FTF (rho)",
           "unfair_pct": "Unfair job fraction (%)"}
#: The figures' panels: times in hours (docs/rules.md#figures), each metric's title and the divisor to get there.
PANELS = {"makespan_s": ("Makespan (h)", 3600.0), "avg_jct_s": ("Average JCT (h)", 3600.0),
          "worst_ftf_rho": ("Worst FTF (rho)", 1.0), "unfair_pct": ("Unfair job fraction (%)", 1.0)}


@dataclass(frozen=True)
class Setup:
    """One of the artifact's experiment scripts ."""

    trace: str
    gpus: int
    throughputs: str
    planner: str
    num_jobs: int | None = None


SETUPS = {
    "canonical": Setup("shockwave_120_40_25.csv", 32, "shockwave_tacc", "tacc_32gpus"),
    "scale_64": Setup("shockwave_220_25_4.csv", 64, "shockwave_wisr", "scale_64gpus"),
    "scale_128": Setup("shockwave_460_10_1.csv", 128, "shockwave_wisr", "scale_128gpus"),
    "scale_256": Setup("shockwave_900_5_15.csv", 256, "shockwave_wisr", "scale_256gpus"),
    "scale_256_grid100": Setup("shockwave_900_5_15_grid100.csv", 256, "shockwave_wisr", "scale_256gpus"),
    "tiny": Setup("shockwave_120_40_25.csv", 12, "shockwave_tacc", "tacc_32gpus", num_jobs=40),
}
PRESETS = {"paper": ("canonical", "scale_64", "scale_128", "scale_256"), "quick": ("canonical", "scale_64"),
           "tiny": ("tiny",)}


def trace_path(setup: Setup) -> str:
    return str(data_dir() / "traces" / setup.trace)


def configs(setup_name: str, policies=tuple(POLICIES), cluster: str | None = None, **labels) -> list[RunConfig]:
    """One run per policy on a setup, under Shockwave's round rules."""
    s = choose(SETUPS, setup_name, "Shockwave setup")
    return [RunConfig(policy=p, cluster=cluster or f"v100={s.gpus}", trace=trace_path(s), num_jobs=s.num_jobs,
                      throughputs=s.throughputs, rules="shockwave",
                      planner=s.planner if p == "shockwave" else None, max_rounds=100_000,
                      labels=(("setup", setup_name), ("label", POLICIES.get(p, p))) + tuple(labels.items()))
            for p in policies]


ARTIFACT_RUNS = {"canonical": "artifact, stored (Gurobi)", "canonical_highs": "artifact, HiGHS rerun",
                 "canonical_scip": "artifact, SCIP rerun"}


def seed_configs(setup_name: str, seeds) -> list[RunConfig]:
    """Shockwave on a setup once per MILP solver seed. Within the solver's gap the NSW term only breaks ties, so
    seeds give different near-optimal plans; their spread is the planner's own noise (README, quirks)."""
    (base,) = configs(setup_name, ["shockwave"])
    return [replace(base, seed=int(s)) for s in seeds]


def seed_spread(results: pd.DataFrame) -> pd.DataFrame:
    """Long table (metric, value, source, run) of Shockwave's runs over solver seeds, next to the artifact's
    three runs of the canonical setup (stored with Gurobi, rerun with HiGHS and with SCIP; data/README.md)."""
    rows = []
    for _, r in results[results["policy"] == "shockwave"].iterrows():
        rows += [{"metric": title, "value": r[m] / unit, "source": "hetsched", "run": f"seed {r['seed']}",
                  "setup": r["setup"]} for m, (title, unit) in PANELS.items()]
    if (results["setup"] == "canonical").any():           # the artifact ran only the canonical setup
        ref = reference()
        for _, r in ref[ref["figure"].isin(ARTIFACT_RUNS) & (ref["policy"] == "shockwave")].iterrows():
            rows += [{"metric": title, "value": r[m] / unit, "source": "artifact", "run": ARTIFACT_RUNS[r["figure"]],
                      "setup": "canonical"} for m, (title, unit) in PANELS.items() if pd.notna(r[m])]
    return pd.DataFrame(rows, columns=["setup", "metric", "source", "run", "value"])


def tidy(rows: pd.DataFrame) -> pd.DataFrame:
    """Sweep rows with the figure's columns: label, unfair % (rho > 1.05 and > 1.1)."""
    out = rows.copy()
    out["unfair_pct"] = 100 * out["unfair_fraction"]
    out["unfair_pct_1_1"] = 100 * out["unfair_fraction_1_1"]
    return out


def relative(results: pd.DataFrame, reference_policy: str = "shockwave") -> pd.DataFrame:
    """Long table: each metric's value (times in hours) and its ratio to Shockwave's, per setup and policy (the
    bar labels), and the artifact's stored value where the setup is the canonical one."""
    ref = reference()
    ref = ref[ref["figure"] == "canonical"].set_index("policy")
    rows = []
    for setup, group in results.groupby("setup", sort=False):
        base = group[group["policy"] == reference_policy].iloc[0]
        for _, r in group.iterrows():
            for m, (title, unit) in PANELS.items():
                stored = ref.loc[r["policy"], m] if setup == "canonical" and r["policy"] in ref.index else np.nan
                rows.append({"setup": setup, "policy": r["policy"], "label": r["label"], "metric": title,
                             "value": r[m] / unit, "relative": r[m] / base[m] if base[m] else np.nan,
                             "artifact": stored / unit})
    return pd.DataFrame(rows)


def reference() -> pd.DataFrame:
    """The artifact's stored numbers (`data/paper/shockwave_reference.csv`)."""
    return pd.read_csv(data_dir() / "paper" / "shockwave_reference.csv")


def compare_reference(results: pd.DataFrame) -> pd.DataFrame:
    """Ours next to the stored canonical figure, per policy and metric."""
    ref = reference()
    ref = ref[ref["figure"] == "canonical"].set_index("policy")
    ours = results[results["setup"] == "canonical"].set_index("policy")
    rows = []
    for policy in ref.index.intersection(ours.index):
        for m in METRICS:
            theirs = ref.loc[policy, m]
            rows.append({"policy": policy, "label": ref.loc[policy, "label"], "metric": METRICS[m],
                         "artifact": theirs, "ours": ours.loc[policy, m],
                         "ratio": ours.loc[policy, m] / theirs if theirs else np.nan})
    return pd.DataFrame(rows, columns=["policy", "label", "metric", "artifact", "ours", "ratio"])


def adaptation_frame(result, job_ids, throughputs: str = "shockwave_tacc") -> pd.DataFrame:
    """Batch size per epoch of some jobs: the planner's oracle profile and what the run actually did."""
    from hetsched.traces import read_trace

    table = load_throughputs(throughputs)
    jobs = {j.job_id: j for j in read_trace(trace_path(SETUPS["canonical"]))}
    events = result.adaptations
    rows = []
    for job_id in job_ids:
        job = jobs[job_id]
        profile = epoch_profile(job, table)
        for e, b in enumerate(profile.batch_sizes.tolist()):
            rows.append({"job_id": job_id, "epoch": e, "batch_size": b, "source": "planner profile"})
        bs = int(profile.batch_sizes[0])
        switches = events[events["job_id"] == job_id].sort_values("time_s")
        marks = list(zip(switches["epoch"].tolist(), switches["new_batch_size"].tolist()))
        # The runtime rounds partial epochs up at each switch, so a job can run (and switch) past the profile.
        epochs = max([profile.epochs] + [e + 1 for e, _ in marks])
        for e in range(epochs):
            while marks and marks[0][0] <= e:
                bs = marks.pop(0)[1]
            rows.append({"job_id": job_id, "epoch": e, "batch_size": bs, "source": "actual (runtime)"})
    frame = pd.DataFrame(rows)
    frame["job"] = frame["job_id"].map(lambda j: f"job {j}: {jobs[j].job_type}, {jobs[j].mode.value}")
    return frame


#: Beyond the artifact (V100s only): the same dynamic-adaptation streams on Gavel's V100/P100/K80 cluster.
HETERO_POLICIES = {p: display_name(p) for p in ("shockwave", "shockwave_agnostic", "finish_time_fairness_perf",
                                                "max_min_fairness_perf", "max_min_fairness")}
HETERO = {"paper": (Setup("shockwave_460_10_1.csv", 108, "gavel_simulation", "tacc_32gpus"), "36:36:36"),
          "quick": (Setup("shockwave_120_40_25.csv", 36, "gavel_simulation", "tacc_32gpus"), "12:12:12"),
          "tiny": (Setup("shockwave_120_40_25.csv", 12, "gavel_simulation", "tacc_32gpus", num_jobs=40), "4:4:4")}


def hetero_configs(preset: str, policies=tuple(HETERO_POLICIES)) -> list[RunConfig]:
    """Shockwave and Gavel's heterogeneity-aware policies on V100/P100/K80 under Shockwave's rules."""
    s, cluster = HETERO[preset]
    return [RunConfig(policy=p, cluster=cluster, trace=trace_path(s), num_jobs=s.num_jobs, throughputs=s.throughputs,
                      rules="shockwave", planner=s.planner if p.startswith("shockwave") else None,
                      max_rounds=100_000, labels=(("setup", f"hetero_{preset}"), ("label", HETERO_POLICIES[p]),
                                                  ("cluster_types", cluster)))
            for p in policies]
