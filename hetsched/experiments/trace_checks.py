"""Every shipped trace under every baseline: the artifacts' stored numbers where they exist, and the invariants
(docs/rules.md#invariants) checked on every run where they do not.

Shockwave: its six baselines (and, at the paper preset, its planner: 13-53 CPU-s a trace) on the five shipped
traces (120 jobs on 32 GPUs, 220 on 64, 460 on 128, 900 on 256 with the 1,000- and the 100-point duration grids),
under Shockwave's rules.
Synergy: every ordering x mechanism at three loads of its generator, plus the artifact's stored cases.
"""

from __future__ import annotations

import pandas as pd

from hetsched.experiments import shockwave as W
from hetsched.experiments import synergy as Y
from hetsched.experiments.sweep import RunConfig

ALL_TRACES = ("canonical", "scale_64", "scale_128", "scale_256", "scale_256_grid100")
SHOCKWAVE_SETUPS = {"tiny": ("tiny",), "quick": ALL_TRACES, "paper": ALL_TRACES}
SYNERGY_LOADS = {"tiny": (1.0, 3.0, 6.0), "quick": (1.0, 5.0, 8.0), "paper": (2.0, 5.0, 8.0)}
BASELINES = tuple(p for p in W.POLICIES if p != "shockwave")
SYNERGY_POLICIES = tuple(f"{o}+{m}" for o in Y.ORDERINGS for m in Y.MECHANISMS)


def configs(preset: str) -> list[RunConfig]:
    """Every run of the table at a preset, each recording its timeline for the invariant checks."""
    shockwave = [c for setup in SHOCKWAVE_SETUPS[preset]
                 for c in W.configs(setup, W.POLICIES if preset == "paper" else BASELINES)]
    synergy = Y.single_gpu_configs(preset, list(SYNERGY_POLICIES), loads=SYNERGY_LOADS[preset])
    stored = Y.reference_configs()
    tagged = [c.with_(labels=c.labels + (("family", "shockwave"),)) for c in shockwave] + \
        [c.with_(labels=c.labels + (("family", "synergy"), ("setup", f"{dict(c.labels)['paper_rate']:g} jobs/h")))
         for c in synergy] + \
        [c.with_(labels=c.labels + (("family", "synergy"), ("setup", "stored case"))) for c in stored]
    return [c.with_(check_invariants=True) for c in tagged]


COLUMNS = ["family", "setup", "trace", "policy", "cluster", "num_jobs", "makespan_h", "avg_jct_h", "utilization",
           "num_rounds", "violations", "cpu_s"]


def results(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per run with the columns every family has (hours; `violations` = broken invariants)."""
    out = rows.copy()
    out["trace"] = out["trace"].fillna("synergy generator").map(lambda t: str(t).rsplit("/", 1)[-1])
    out["makespan_h"] = out["makespan_s"] / 3600
    out["avg_jct_h"] = out["avg_jct_s"] / 3600
    return out[COLUMNS + ["violation_examples"]]


def stored(rows: pd.DataFrame) -> pd.DataFrame:
    """Ours next to every stored artifact number: Shockwave's canonical figure and Synergy's stored cases."""
    shock = W.compare_reference(W.tidy(rows[rows["family"] == "shockwave"]))
    shock = shock.assign(family="shockwave", case="canonical")
    syn = Y.compare_reference(rows[rows["setup"] == "stored case"]).assign(family="synergy")
    return pd.concat([shock, syn], ignore_index=True)


def shockwave_fairness(rows: pd.DataFrame) -> pd.DataFrame:
    """Shockwave's four panels per trace and policy, times in hours (the scale traces have no stored numbers)."""
    s = W.tidy(rows[rows["family"] == "shockwave"])
    s = s.assign(makespan_h=s["makespan_s"] / 3600, avg_jct_h=s["avg_jct_s"] / 3600)
    return s[["setup", "policy", "label", "makespan_h", "avg_jct_h", "worst_ftf_rho", "unfair_pct"]]


def stored_shockwave() -> pd.DataFrame:
    """The artifact's stored canonical numbers on `shockwave_fairness`'s axes (setup, policy, hours)."""
    ref = W.reference()
    ref = ref[ref["figure"] == "canonical"]
    return pd.DataFrame({"setup": "canonical", "policy": ref["policy"].to_numpy(),
                         "makespan_h": ref["makespan_s"].to_numpy() / 3600,
                         "avg_jct_h": ref["avg_jct_s"].to_numpy() / 3600, "worst_ftf_rho": ref["worst_ftf_rho"].to_numpy()})
