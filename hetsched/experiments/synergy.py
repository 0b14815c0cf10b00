"""Synergy's experiments (the artifact's figure list): grids of runs per figure and preset, and their tables.

Presets: `paper` is the artifact's setting (16 servers x (8 GPUs, 24 CPUs, 500 GB) = 128 GPUs, seed 42,
jobs 4000-4999, loads 0.5-8.0 jobs/h); `quick` uses 4 servers (32 GPUs) with every rate scaled by 1/4 and jobs
600-799; `tiny` (tests) 2 servers with rates scaled by 1/8 and jobs 20-59. Results carry `paper_rate`, the
paper-equivalent load, so the curves line up across presets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hetsched.model.profiles import CPU_LEVELS, MEM_LEVELS, load_sensitivity
from hetsched.experiments import choose
from hetsched.experiments.sweep import RunConfig
from hetsched.model.throughputs import data_dir


@dataclass(frozen=True)
class Preset:
    servers: int
    loads: tuple[float, ...]          # paper-equivalent jobs/h
    multi_loads: tuple[float, ...]
    window: tuple[int, int]
    scale: float                      # actual rate = paper rate x scale (the cluster's share of 16 servers)
    max_rounds: int = 400_000


PRESETS = {
    "paper": Preset(16, tuple(np.arange(0.5, 8.5, 0.5).round(1)), tuple(np.arange(0.5, 4.5, 0.5).round(1)),
                    (4000, 5000), 1.0),
    "quick": Preset(4, (1.0, 3.0, 5.0, 7.0, 8.0), (0.5, 1.5, 2.5, 3.5), (600, 800), 0.25),
    "tiny": Preset(2, (2.0, 6.0), (1.0, 3.0), (20, 60), 0.125, 50_000),
}
SEED = 42                               # the artifact's default seed
ORDERINGS = ("FIFO", "SRTF", "LAS", "FTF")
MECHANISMS = ("fair", "tune", "opt")


def cluster_string(servers: int, cpus: int = 24, gpus: int = 8, mem: int = 500, storage: int = 500) -> str:
    """A Synergy-shaped cluster for `ClusterSpec.load`: servers x (GPUs, CPUs, GB, MB/s)."""
    return f"{servers}x{gpus}/{cpus}/{mem}/{storage}"


def single_gpu_configs(preset: str, policies: list[str], *, loads: tuple[float, ...] | None = None,
                       split: tuple[float, float, float] = (20, 70, 10), multi_gpu: bool = False,
                       cpus: int = 24, **labels) -> list[RunConfig]:
    """One run per policy and load on the preset's cluster (multi-GPU: the synthetic 1/2/4/8 GPU mix)."""
    p = choose(PRESETS, preset, "preset")
    rates = loads or (p.multi_loads if multi_gpu else p.loads)
    tags = (("paper_rate", None), ("preset", preset), ("split", ":".join(f"{v:g}" for v in split)),
            ("cpus_per_gpu", cpus // 8)) + tuple(labels.items())
    out = []
    for policy in policies:
        for rate in rates:
            tagged = tuple((k, rate if k == "paper_rate" else v) for k, v in tags)
            out.append(RunConfig(policy=policy, cluster=cluster_string(p.servers, cpus), seed=SEED,
                                 generator="synergy", jobs_per_hour=round(rate * p.scale, 6), window=p.window,
                                 multi_gpu=multi_gpu, split=tuple(split), max_rounds=p.max_rounds,
                                 max_active_per_gpu=40.0, labels=tagged))
    return out


def reference_configs() -> list[RunConfig]:
    """The artifact's stored runs that any preset can afford: 9 jobs/h on 128 GPUs (about 1 s each) and the
    32-GPU smoke test at 1.5 jobs/h (jobs 0-39)."""
    runs = [RunConfig(policy=p, cluster=cluster_string(16), seed=SEED, generator="synergy", jobs_per_hour=9.0,
                      window=(4000, 5000), labels=(("reference", "ae_9jph_128gpu"),))
            for p in ("FIFO+tune", "FIFO+fair")]
    runs += [RunConfig(policy=p, cluster=cluster_string(4), seed=SEED, generator="synergy", jobs_per_hour=1.5,
                       window=(0, 40), labels=(("reference", "smoke_1.5jph_32gpu"),))
             for p in ("FIFO+fair", "FIFO+tune", "FIFO+opt")]
    return runs


def class_split_configs(preset: str, policies: list[str], splits, *, loads=None) -> list[RunConfig]:
    """Synergy Fig. 9: the same sweep for several image:language:speech splits."""
    return [c for split in splits for c in single_gpu_configs(preset, policies, loads=loads, split=split)]


def ratio_configs(preset: str, policies: list[str], ratios=(3, 4, 5, 6), *, loads=None) -> list[RunConfig]:
    """The CPU:GPU ratio figures: servers with 8 GPUs and 24/32/40/48 CPUs, each with its own profiles (the
    artifact swaps in `models-4/5/6` with `cluster_4/5/6.ini`); other ratios get derived profiles (R26)."""
    return [c.with_(profiles_ratio=r) for r in ratios
            for c in single_gpu_configs(preset, policies, loads=loads, cpus=8 * r)]


def deployment_configs(policies: list[str]) -> list[RunConfig]:
    """The physical-cluster traces simulated on the testbed's 4 x (8 GPUs, 24 CPUs, 500 GB): the static trace
    (all jobs at t ~ 0, rounds from t = 1 s, makespan) and the dynamic one (average JCT)."""
    out = []
    for name, origin in (("static_100", 1.0), ("dynamic_srtf", 0.0)):
        out += [RunConfig(policy=p, cluster=cluster_string(4), trace=deployment_trace(name), round_origin_s=origin,
                          labels=(("trace", name),)) for p in policies]
    return out


def reference_table() -> pd.DataFrame:
    return pd.read_csv(data_dir() / "paper" / "synergy_reference.csv")


def stored_points(policies) -> pd.DataFrame:
    """The artifact's stored average JCTs on the load curve's axes (paper_rate, ordering, mechanism, avg_jct_h):
    its 128-GPU runs at 9 jobs/h (the AE check and the reference run), for the policies a figure draws."""
    ref = reference_table()
    ref = ref[(ref["gpus"] == 128) & (ref["metric"] == "avg_jct_h") & ref["policy"].isin(list(policies))]
    parts = ref["policy"].str.split("+", n=1)
    return pd.DataFrame({"paper_rate": ref["jobs_per_hour"].to_numpy(), "ordering": parts.str[0].to_numpy(),
                         "mechanism": parts.str[1].to_numpy(), "policy": ref["policy"].to_numpy(),
                         "avg_jct_h": ref["value"].to_numpy()})


def _metric(row, metric: str) -> float:
    jct = np.array(sorted((row["jcts"] or {}).values()), float) / 3600.0
    if metric == "avg_jct_h":
        return float(row["avg_jct_s"]) / 3600.0
    q = {"p50_jct_h": 50, "p99_jct_h": 99, "p999_jct_h": 99.9}[metric]
    return float(np.percentile(jct, q)) if len(jct) else float("nan")


def compare_reference(results: pd.DataFrame) -> pd.DataFrame:
    """The artifact's stored numbers next to ours from the `reference_configs` runs."""
    ref = reference_table()
    runs = results[results.get("reference").notna()] if "reference" in results else results.iloc[0:0]
    rows = []
    for r in ref.itertuples(index=False):
        tag = "ae_9jph_128gpu" if r.gpus == 128 else "smoke_1.5jph_32gpu"
        match = runs[(runs["reference"] == tag) & (runs["policy"] == r.policy)]
        ours = _metric(match.iloc[0], r.metric) if len(match) else float("nan")
        rows.append({"case": r.case, "policy": r.policy, "metric": r.metric, "artifact": r.value, "ours": ours,
                     "ratio": ours / r.value})
    return pd.DataFrame(rows)


def tidy(results: pd.DataFrame) -> pd.DataFrame:
    """Hours, the ordering and mechanism of each policy name; saturated runs keep JCT = inf."""
    frame = results.copy()
    frame["avg_jct_h"] = frame["avg_jct_s"] / 3600.0
    frame["jct_p99_h"] = frame["jct_p99_s"] / 3600.0
    parts = frame["policy"].str.split("+")
    frame["ordering"] = parts.str[0]
    frame["mechanism"] = parts.str[1].fillna("greedy")
    return frame


def per_job_jcts(results: pd.DataFrame, **match) -> pd.DataFrame:
    """Long table (policy, paper_rate, job_id, jct_h) of the window jobs' JCTs."""
    rows = []
    for _, r in results.iterrows():
        if any(r.get(k) != v for k, v in match.items()):
            continue
        for job, jct in (r["jcts"] or {}).items():
            rows.append({"policy": r["policy"], "paper_rate": r.get("paper_rate"), "job_id": int(job),
                         "jct_h": float(jct) / 3600.0})
    return pd.DataFrame(rows)


def gain(results: pd.DataFrame, better: str, base: str, by: str = "paper_rate") -> pd.DataFrame:
    """Average-JCT ratio base / better per `by` value (how many times faster `better` is)."""
    table = results.pivot_table(index=by, columns="policy", values="avg_jct_h", aggfunc="mean")
    out = pd.DataFrame({by: table.index, "speedup": (table[base] / table[better]).to_numpy()})
    out["comparison"] = f"{base} / {better}"
    return out


def sensitivity_frame(ratio: int = 3) -> pd.DataFrame:
    """Synergy Fig. 1's data: relative throughput per model over CPUs and GB per GPU."""
    table = load_sensitivity(ratio)
    rows = []
    for model, p in table.profiles.items():
        for i, c in enumerate(CPU_LEVELS):
            for j, m in enumerate(MEM_LEVELS):
                rows.append({"model": model, "task": p.task, "cpus_per_gpu": c, "mem_gb_per_gpu": m,
                             "relative_throughput": float(p.grid[i, j]), "ideal_cpus": p.cpus_per_gpu,
                             "ideal_mem_gb": p.mem_gb_per_gpu, "speedup": p.speedup})
    return pd.DataFrame(rows)


def deployment_trace(name: str) -> str:
    """Path of the project's copy of a physical-cluster trace (`static_100` or `dynamic_srtf`)."""
    return str(data_dir() / "traces" / f"synergy_{name}.csv")


#: Beyond the artifacts: a heterogeneous cluster of 8-GPU servers (24 CPUs, 500 GB each) per GPU type.
HETERO = {"paper": (4, (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0), (4000, 5000), (0, 1, 2)),
          "quick": (2, (1.0, 2.0, 3.0, 4.0, 5.0), (600, 800), (0,)),
          "tiny": (1, (1.5, 4.0), (15, 40), (0,))}
HETERO_POLICIES = {"max_min_fairness": "LAS, type-agnostic, fair share",
                   "max_min_fairness+tune": "Synergy-TUNE alone (type-agnostic LAS)",
                   "max_min_fairness_perf": "Gavel alone (type-aware LAS, fair share)",
                   "max_min_fairness_perf+tune": "Gavel + TUNE (heterogeneity-aware TUNE)"}


def hetero_configs(preset: str, policies=tuple(HETERO_POLICIES), *, loads=None, seeds=None) -> list[RunConfig]:
    """Gavel's job stream on V100/P100/K80 servers; `paper_rate` is jobs/h scaled to Gavel's 108-GPU cluster."""
    servers, rates, window, default_seeds = HETERO[preset]
    cluster = "+".join(f"{servers}x8/24/500@{t}" for t in ("v100", "p100", "k80"))
    scale = servers * 24 / 108
    return [RunConfig(policy=p, cluster=cluster, seed=seed, jobs_per_hour=round(rate * scale, 6), window=window,
                      max_rounds=400_000, labels=(("paper_rate", rate), ("preset", preset),
                                                  ("variant", HETERO_POLICIES.get(p, p))))
            for p in policies for rate in (loads or rates) for seed in (seeds or default_seeds)]
