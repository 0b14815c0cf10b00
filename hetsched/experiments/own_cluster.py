"""Your own cluster: profile this machine as a GPU type, and replay a production trace on its production cluster."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pandas as pd

from hetsched.model.cluster import ClusterSpec
from hetsched.io.gpu_map import apply_gpu_map, parse_gpu_map
from hetsched.sim.metrics import summary, with_hours
from hetsched.sim.simulator import simulate
from hetsched.model.throughputs import ThroughputTable, load_throughputs, merge_tables
from hetsched.traces import GavelGenerator, read_trace
from hetsched.traces.production import Filters, JobMapping

#: Job types profiled per preset (the `workloads/` models at the Gavel table's batch sizes).
PROFILED = {
    "tiny": ("ResNet-18 (batch size 16)", "A3C"),
    "quick": ("ResNet-18 (batch size 16)", "ResNet-18 (batch size 64)", "ResNet-50 (batch size 16)",
              "Transformer (batch size 16)", "LM (batch size 5)", "LM (batch size 20)",
              "Recommendation (batch size 512)", "A3C", "CycleGAN"),
}
STEPS = {"tiny": (1, 2), "quick": (3, 20), "paper": (5, 100)}       # (warm-up, timed) steps

#: GPU models of Alibaba's openb cluster mapped onto Gavel's measured types (explicit, and stated in figures).
OPENB_GPU_MAP = "T4=p100x0.8,V100M16=v100,V100M32=v100,A10=v100x1.1,G1=k80,G2=p100,G3=v100"


def shared_data_dir() -> Path:
    """The artifacts' public files: $HETSCHED_SHARED/data, else ../shared/data beside the repository."""
    root = os.environ.get("HETSCHED_SHARED")
    return Path(root) / "data" if root else Path(__file__).resolve().parents[3] / "shared" / "data"


# ---- profile this machine ---------------------------------------------------------------------------------
def profile_this_machine(out_dir: str | Path, preset: str, gpu_type: str = "cpu", job_types=None,
                         base: str = "gavel_simulation") -> tuple[ThroughputTable, ThroughputTable]:
    """Profile `job_types` on this machine's CPU as `gpu_type` (resumable file in out_dir) and merge the
    column into `base`. Returns (profiled table, merged table)."""
    from hetsched.rates.profiler import ProfileSpec, profile

    warmup, steps = STEPS[preset]
    spec = ProfileSpec(tuple(job_types or PROFILED["tiny" if preset == "tiny" else "quick"]), gpu_type=gpu_type,
                       warmup=warmup, steps=steps)
    path = Path(out_dir) / f"profile_{gpu_type}.parquet"
    profile(spec, path, progress=False)
    merged = merge_tables([_dataset_path(base), path], mixed_workloads=True)    # no reference GPU on a CPU box
    return ThroughputTable.read(path), merged


def _dataset_path(name: str) -> Path:
    from hetsched.model.throughputs import data_dir

    candidate = data_dir() / "throughputs" / f"{name}.parquet"
    return candidate if candidate.exists() else Path(name)


def _rate(table: ThroughputTable, job_type: str, gpu_type: str) -> float:
    """Single-GPU steps/s, NaN when not measured."""
    return float(table.isolated[table.index((job_type, 1)), table.gpu_index(gpu_type), 0])


def ratios(profiled: ThroughputTable, merged: ThroughputTable, gpu_type: str = "cpu") -> pd.DataFrame:
    """Per profiled job type: steps/s on each type, and the profiled type relative to each measured GPU."""
    rows = []
    for key in profiled.keys:
        if key.scale_factor != 1:
            continue
        row = {"job_type": key.job_type, **{g: _rate(merged, key.job_type, g) for g in merged.gpu_types}}
        for g in merged.gpu_types:
            if g != gpu_type and row[g] == row[g] and row[g] > 0:
                row[f"{gpu_type}/{g}"] = row[gpu_type] / row[g]
        rows.append(row)
    return pd.DataFrame(rows)


def restricted(table: ThroughputTable, gpu_type: str) -> ThroughputTable:
    """The keys measured on `gpu_type` (single GPU), all their columns: a stream drawn from it can run anywhere."""
    frame = table.to_frame()
    keys = {k.job_type for k in table.keys if k.scale_factor == 1 and _rate(table, k.job_type, gpu_type) > 0
            and all(_rate(table, k.job_type, g) > 0 for g in table.gpu_types)}
    keep = frame["job_type"].isin(keys) & (frame["scale_factor"] == 1) & (
        frame["partner_job_type"].isna() | frame["partner_job_type"].isin(keys))
    return ThroughputTable.from_frame(frame[keep], name=f"{table.name}[{gpu_type}]")


def with_new_type(table: ThroughputTable, clusters: dict[str, str], policies, num_jobs: int, jobs_per_hour: float,
                  seed: int = 0) -> pd.DataFrame:
    """The same stream on each cluster under each policy: Gavel's arrivals and durations, single-GPU job types
    drawn uniformly from `table` (seeded), steps = duration x the type's v100 rate (Gavel's rule)."""
    base = GavelGenerator(seed=seed, mean_interarrival_s=3600.0 / jobs_per_hour).jobs(num_jobs)
    types = sorted(k.job_type for k in table.keys if k.scale_factor == 1)
    ref = "v100" if "v100" in table.gpu_types else table.gpu_types[0]
    drawn = np.random.default_rng(seed).choice(types, len(base))
    jobs = [j.with_(job_type=str(t), scale_factor=1, total_steps=(j.duration_s or 3600.0) * _rate(table, t, ref))
            for j, t in zip(base, drawn)]
    rows = []
    for label, text in clusters.items():
        for policy in policies:
            r = summary(simulate(jobs, ClusterSpec.load(text), policy, table, record_timeline=False, seed=seed))
            rows.append({"cluster": label, "cluster_spec": text, "policy": policy, **with_hours(r)})
    return pd.DataFrame(rows)


# ---- replay a production trace on its cluster --------------------------------------------------------------
def sample_servers(cluster: ClusterSpec, fraction: float, seed: int = 0) -> ClusterSpec:
    """A seeded sample of the cluster's servers (each kept with probability `fraction`; 1 = the whole cluster)."""
    if fraction >= 1:
        return cluster
    rng = random.Random(seed)
    kept = [s for s in cluster.servers if rng.random() < fraction]
    if not kept:
        raise ValueError(f"no server kept at fraction {fraction}")
    return ClusterSpec.from_servers(kept)


def replay(trace: str | Path, fmt: str, cluster: ClusterSpec, policies, gpu_map: str, seed: int = 0,
           filters: Filters | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Simulate a production trace on a production cluster under each policy. Jobs pinned only to GPU models
    the (sampled) cluster lacks are left out and counted. Returns (summary per policy, jobs per policy, facts)."""
    table = apply_gpu_map(load_throughputs("gavel_simulation"), parse_gpu_map(gpu_map))
    reports = []
    jobs = read_trace(trace, fmt, mapping=JobMapping(throughputs=table, seed=seed), filters=filters,
                      report=reports.append)
    types = set(cluster.gpu_types)
    runnable = [j for j in jobs if not j.allowed_gpu_types or set(j.allowed_gpu_types) & types]
    runnable = [j.with_(job_id=i) for i, j in enumerate(runnable)]
    rows, frames = [], []
    for policy in policies:
        result = simulate(runnable, cluster, policy, table, record_timeline=False, seed=seed)
        rows.append({"policy": policy, **with_hours(summary(result))})
        frames.append(result.jobs_frame().assign(policy=policy))
    facts = {"rows": reports[0].rows, "jobs": len(jobs), "runnable": len(runnable),
             "pinned": sum(bool(j.pinned_gpu_types) for j in runnable), "conversion": reports[0].summary()}
    return pd.DataFrame(rows), pd.concat(frames, ignore_index=True), facts



def pod_requests(pods: str | Path, cluster: ClusterSpec) -> pd.DataFrame:
    """What openb's GPU pods ask for against what the cluster's servers give a GPU: per resource (CPU cores, GB of
    memory), the pods' requests per GPU (median, 90th percentile) next to the cluster's GPU-proportional share
    (its total over its GPUs), and the percentage of GPU pods whose request per GPU exceeds that share, the jobs
    Synergy's TUNE could give more than the fair share to (docs/rules.md#profiles)."""
    p = pd.read_csv(pods, usecols=["cpu_milli", "memory_mib", "num_gpu"])
    p = p[p["num_gpu"] > 0]
    servers = cluster.server_shapes()
    if not servers or not all(s.cpu_cores and s.dram_gb for s in servers):
        raise ValueError("pod_requests: the cluster's servers need CPU cores and memory")
    gpus = sum(s.num_gpus for s in servers)
    rows = []
    for resource, column, scale, total in (("cpu_cores", "cpu_milli", 1000, sum(s.cpu_cores for s in servers)),
                                           ("mem_gb", "memory_mib", 1024, sum(s.dram_gb for s in servers))):
        per_gpu = p[column].to_numpy(float) / scale / p["num_gpu"].to_numpy(float)
        fair = total / gpus
        rows.append({"resource": resource, "gpu_pods": len(per_gpu), "request_per_gpu_median": np.median(per_gpu),
                     "request_per_gpu_p90": np.quantile(per_gpu, 0.9), "fair_share_per_gpu": fair,
                     "pods_above_fair_pct": 100 * float(np.mean(per_gpu > fair))})
    return pd.DataFrame(rows)
