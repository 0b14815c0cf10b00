"""Sia's Tables 3 and 4 (docs/rules.md#elastic-metrics): Sia, Pollux and Gavel+TJ on the paper's Philly, Helios and
new traces, on its 64-GPU heterogeneous cluster (and, with Themis+TJ, on 16 T4 nodes), beside the paper draft's
numbers."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from hetsched.errors import HetschedError

METRICS = ("avg_jct_h", "p99_jct_h", "makespan_h", "gpu_h_per_job", "contention_mean", "contention_max")
METRIC_TITLES = {"avg_jct_h": "avg JCT (h)", "p99_jct_h": "p99 JCT (h)", "makespan_h": "makespan (h)",
                 "gpu_h_per_job": "GPU-hours per job", "contention_mean": "contention, mean (jobs)",
                 "contention_max": "contention, max (jobs)"}
TRACES = {"philly": 8, "helios": 10, "newtrace": 10}       # workloads per trace in the artifact


@dataclass(frozen=True)
class Preset:
    workloads: dict[str, tuple[int, ...]]     # trace -> workload numbers
    max_jobs: int | None                      # the first N jobs of each workload (None: all)
    seeds: tuple[int, ...] = (0,)             # Pollux's search seeds (the artifact sets none)
    pollux_workloads: int | None = None       # Pollux on the first N workloads of each trace (None: all) ...
    pollux_traces: tuple[str, ...] | None = None   # ... of these traces (None: all; Table 4's too)
    generations: int = 100                    # Pollux's generations a round (the artifact's 100)
    homogeneous: tuple[int, ...] = ()         # Philly workloads also run on 16 T4 nodes (Table 4), seed 0
    scales: tuple[int, ...] = (1, 2)          # policy runtime: the 64-GPU cluster and its jobs x K ...
    scale_rounds: int = 10                    # ... timed over this many rounds


PRESETS = {"tiny": Preset({"helios": (1,), "philly": (1,)}, 24, (0,), 1, ("helios",), generations=5),  # it runs
           "quick": Preset({"helios": (1, 2, 3), "philly": (1, 2, 3)}, None, (0, 1, 2), 1, ("helios",),
                           homogeneous=(1,), scales=(1, 4, 16), scale_rounds=120),
           "paper": Preset({t: tuple(range(1, n + 1)) for t, n in TRACES.items()}, None, (0, 1, 2),
                           homogeneous=tuple(range(1, TRACES["philly"] + 1)), scales=(1, 2, 4, 8, 16, 32),
                           scale_rounds=240)}
#: The draft's policy runtime (s. 5.6, Helios, 64 GPUs): median ms a round; Sia at 2,048 GPUs about 1 s.
PAPER_RUNTIME = pd.DataFrame({"policy": ["sia", "pollux", "gavel+tj", "sia"], "gpus": [64, 64, 64, 2048],
                              "decide_median_ms": [96.0, 2200.0, 13.0, 1000.0]})
SETTINGS = {"sia_hetero": "", "sia_homo": ", 16x4 T4"}       # how a figure names the paper's two clusters
#: Rows of Table 4 (16 T4 nodes) only, run beside Gavel+TJ: its rigid jobs under Themis (docs/rules.md#themis-tj).
TABLE4_ONLY = ("themis+tj", "shockwave+tj")


@dataclass(frozen=True)
class ElasticRun:
    policy: str
    workload: str
    cluster: str = "sia_hetero"
    max_jobs: int | None = None
    seed: int = 0                             # Pollux's search seed; the other policies draw nothing
    generations: int = 100                    # Pollux's generations a round

    def key(self) -> str:
        from hetsched.experiments.sweep import code_fingerprint
        payload = json.dumps({"elastic": 1, "code": code_fingerprint(), **asdict(self)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]


def run_one(run: ElasticRun) -> dict:
    """One workload under one policy: the artifact's summary metrics, the CPU time and the decide times."""
    from hetsched.decide.elastic.cluster import ElasticCluster
    from hetsched.decide.elastic.fairness import finish_time_fairness, summary as fairness_summary
    from hetsched.sim.elastic import prepare, simulate_elastic
    from hetsched.decide.elastic.workloads import load_workload

    spec = ElasticCluster.parse(run.cluster)
    frame = load_workload(run.workload)
    if run.max_jobs is not None:
        frame = frame.sort_values("submit_s", kind="stable").head(run.max_jobs)
    start = time.process_time()
    options = {"seed": run.seed, "generations": run.generations} if run.policy == "pollux" else {}
    if run.policy == "shockwave+tj":                  # the core's planner on the same rigid jobs (R83b)
        from hetsched.sim.elastic import run_shockwave_tj

        _, jobs, _ = prepare("gavel+tj", spec, frame)
        result = run_shockwave_tj(jobs, spec)
    else:
        policy, jobs, round_s = prepare(run.policy, spec, frame, **options)
        result = simulate_elastic(jobs, spec, policy, round_s)
    cpu_s = time.process_time() - start
    decide = pd.Series(result.decide_s)
    rho = finish_time_fairness(result, jobs, spec)["rho"]
    return {"key": run.key(), **asdict(run), "trace": run.workload.split("-")[0], "jobs": len(result.jobs),
            **result.metrics(), **fairness_summary(rho), "cpu_s": cpu_s,
            "decide_median_ms": float(decide.median() * 1e3), "decide_p95_ms": float(decide.quantile(0.95) * 1e3)}


def runs(preset: str, policies=("sia", "pollux", "gavel+tj"), cluster: str = "sia_hetero") -> list[ElasticRun]:
    """The preset's workloads under each policy; Pollux once per seed, on the preset's first workloads."""
    if preset not in PRESETS:
        raise HetschedError(f"preset {preset!r}: use one of {', '.join(PRESETS)}")
    p = PRESETS[preset]
    out = []
    for trace, numbers in p.workloads.items():
        for i, n in enumerate(numbers):
            for policy in policies:
                if policy != "pollux":
                    out.append(ElasticRun(policy, f"{trace}-{n}", cluster, p.max_jobs))
                elif (p.pollux_workloads is None or i < p.pollux_workloads) and _pollux_on(p, trace):
                    out += [ElasticRun(policy, f"{trace}-{n}", cluster, p.max_jobs, seed, p.generations)
                            for seed in p.seeds]
    if cluster == "sia_hetero":
        table4 = [*policies, *(TABLE4_ONLY if "gavel+tj" in policies else ())]
        out += [ElasticRun(policy, f"philly-{n}", "sia_homo", p.max_jobs, 0, p.generations)
                for n in p.homogeneous for policy in table4 if policy != "pollux" or p.pollux_traces is None]
    return out


def _pollux_on(preset: Preset, trace: str) -> bool:
    """Pollux costs about 70 CPU-s a workload (its search, 100 generations every minute): presets choose where."""
    return preset.pollux_traces is None or trace in preset.pollux_traces


def scaled(scale: int, workload: str = "helios-1"):
    """(cluster, workload table): the paper's 64-GPU cluster with its nodes x `scale`, and every job of the
    workload `scale` times (as the artifact's scale_Kx workloads)."""
    from hetsched.decide.elastic.cluster import ElasticCluster
    from hetsched.decide.elastic.workloads import load_workload

    base = ElasticCluster.parse("sia_hetero")
    frame = load_workload(workload)
    frame = pd.concat([frame.assign(name=frame["name"] + f"-{k}") for k in range(scale)], ignore_index=True)
    return ElasticCluster({t: (n * scale, g) for t, (n, g) in base.types.items()}), frame


@dataclass(frozen=True)
class RuntimeRun:
    policy: str
    scale: int
    rounds: int

    def key(self) -> str:
        from hetsched.experiments.sweep import code_fingerprint
        payload = json.dumps({"elastic_runtime": 1, "code": code_fingerprint(), **asdict(self)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]


def time_decide(run: RuntimeRun) -> dict:
    """The decide stage's CPU time a round over the first `rounds` rounds of helios-1 x scale, counting the rounds
    with at least one job to decide for."""
    import numpy as np

    from hetsched.sim.elastic import prepare, simulate_elastic

    cluster, frame = scaled(run.scale)
    policy, jobs, round_s = prepare(run.policy, cluster, frame)
    result = simulate_elastic(jobs, cluster, policy, round_s, max_rounds=run.rounds)
    decide = np.array(result.decide_s)[result.contention > 0]
    return {"key": run.key(), **asdict(run), "gpus": cluster.total_gpus,
            "max_active_jobs": int(result.contention.max()),
            "decide_median_ms": float(np.median(decide)) * 1e3, "decide_p95_ms": float(np.quantile(decide, 0.95)) * 1e3}


def runtime_runs(preset: str, policies=("sia", "gavel+tj")) -> list[RuntimeRun]:
    p = PRESETS[preset]
    return [RuntimeRun(policy, k, p.scale_rounds) for policy in policies for k in p.scales]


def sweep_elastic(configs: list, **options) -> pd.DataFrame:
    """ElasticRun or RuntimeRun configs through the sweep's cache and workers."""
    from hetsched.experiments.sweep import sweep

    runner = time_decide if configs and isinstance(configs[0], RuntimeRun) else run_one
    return sweep(configs, run=runner, **options)


def paper_tables() -> pd.DataFrame:
    return pd.read_csv(_paper_dir() / "sia_tables.csv")


def fairness_table(results: pd.DataFrame, trace: str = "helios", cluster: str = "sia_hetero") -> pd.DataFrame:
    """The draft's Fig. 8 (docs/rules.md#elastic-ftf): per policy, the worst rho over the trace's workloads and the
    mean fraction of jobs with rho > 1, beside the draft's."""
    runs = results[(results["trace"] == trace) & (results["cluster"] == cluster)]
    group = runs.groupby("policy", sort=False)
    ours = pd.DataFrame({"workloads": group["workload"].nunique(), "runs": group.size(),
                         "ftf_worst": group["ftf_worst"].max(), "ftf_unfair": group["ftf_unfair"].mean()})
    paper = pd.read_csv(_paper_dir() / "sia_ftf.csv").set_index("policy")[["ftf_worst", "ftf_unfair"]]
    return ours.join(paper.add_suffix("_paper")).reset_index()


def _paper_dir() -> Path:
    from hetsched.model.throughputs import data_dir

    return data_dir() / "paper"


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over workloads per (trace, cluster, policy), beside the paper's number."""
    group = results.groupby(["trace", "cluster", "policy"], sort=False)
    ours = group[list(METRICS)].mean()
    spread = group[list(METRICS)].std().add_suffix("_sd")
    table = ours.join(spread).join(group.size().rename("runs")).join(group["workload"].nunique().rename("workloads"))
    table = table.reset_index()
    paper = paper_tables().set_index(["trace", "cluster", "policy"])[list(METRICS)].add_suffix("_paper")
    return table.join(paper, on=["trace", "cluster", "policy"])


def seed_spread(results: pd.DataFrame) -> pd.DataFrame:
    """Per workload and policy run with several seeds: the mean, lowest and highest of each JCT metric."""
    group = results.groupby(["trace", "workload", "policy"], sort=False)
    several = group["seed"].transform("nunique") > 1
    if not several.any():
        return pd.DataFrame(columns=["trace", "workload", "policy", "seeds"])
    stats = results[several].groupby(["trace", "workload", "policy"], sort=False)
    table = stats[["avg_jct_h", "makespan_h"]].agg(["mean", "min", "max"])
    table.columns = [f"{m}_{s}" for m, s in table.columns]
    return table.join(stats["seed"].nunique().rename("seeds")).reset_index()


def long_form(results: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ours, paper) as rows of (setting, policy, metric, value) for the figure: ours averaged over workloads;
    the setting is the trace, and the cluster where it is not the heterogeneous 64 GPUs."""
    table = summary(results)
    table["setting"] = table["trace"] + table["cluster"].map(SETTINGS).fillna(", " + table["cluster"])
    ours = table.melt(id_vars=["setting", "policy"], value_vars=list(METRICS), var_name="metric")
    paper = table.rename(columns={f"{m}_paper": f"_{m}" for m in METRICS})
    paper = paper.melt(id_vars=["setting", "policy"], value_vars=[f"_{m}" for m in METRICS], var_name="metric")
    paper["metric"] = paper["metric"].str[1:]
    for frame in (ours, paper):
        frame["metric"] = frame["metric"].map(METRIC_TITLES)
    return ours, paper.dropna(subset=["value"])


def save(results: pd.DataFrame, out_dir: str | Path) -> Path:
    path = Path(out_dir) / "table3.csv"
    summary(results).to_csv(path, index=False)
    return path
