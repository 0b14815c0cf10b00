"""One job stream, one cluster, three systems: Gavel's, Synergy's and Shockwave's policies and their compositions
side by side, over seeds, with 95 % confidence intervals (docs/rules.md#compare).

A `Case` is one (stream, policy, seed) at a preset; `run_case` simulates it and returns one row of metrics, or
the refusal when the registry will not compose the policy with the stream's rules (e.g. Synergy's orderings
under Shockwave's batch-size adaptation). Every policy of a stream runs under the same round rules: Gavel's
(360-s rounds, credit per micro-task) for the Gavel and openb streams, Shockwave's (120-s rounds, preemption
penalty, batch-size adaptation) for Shockwave's adaptive stream, so that only the policy differs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
from dataclasses import asdict, dataclass
from itertools import islice

import numpy as np
import pandas as pd

from hetsched.core.pipeline import CompositionError
from hetsched.experiments import choose
from hetsched.experiments import compare_elastic as elastic
from hetsched.experiments.compare_elastic import ELASTIC, is_elastic
from hetsched.experiments.compare_reading import (gain_text, readable, separation, separation_note,  # noqa: F401
                                                  value_ci)
from hetsched.experiments.own_cluster import OPENB_GPU_MAP, shared_data_dir
from hetsched.decide.shockwave.config import FAIRNESS
from hetsched.errors import HetschedError
from hetsched.model.cluster import GAVEL_GCP_PRICES, ClusterSpec
from hetsched.sim.invariants import best_rates
from hetsched.solvers import clock
from hetsched.ui.names import display_name, distinct

#: The default selection: each system's policies and the compositions. Shockwave runs on the mixed GPU types of
#: every cluster below. Rows are labelled with the papers' names (hetsched.ui.names) and grouped by `system_of`.
POLICIES = ("gavel", "themis", "max_sum_throughput_perf", "gandiva_fair", "allox",
            *(f"{o}+{m}" for o in ("FIFO", "SRTF", "LAS") for m in ("fair", "tune", "opt")), "FTF+tune",
            "shockwave", "gavel+tune", "themis+tune", "shockwave+tune", *ELASTIC)
#: composition -> its parents: the decide stage alone (fair CPU/memory share), and Synergy's TUNE under the
#: closest ordering (Shockwave's planner has none; FIFO is Synergy's default).
COMPOSITIONS = {"gavel+tune": ("gavel", "LAS+tune"), "themis+tune": ("themis", "FTF+tune"),
                "shockwave+tune": ("shockwave", "FIFO+tune")}
#: metric -> (title, lower is better)
METRICS = {"avg_jct_h": ("average JCT (h)", True), "p99_jct_h": ("p99 JCT (h)", True),
           "makespan_h": ("makespan (h)", True), "worst_rho": ("worst FTF rho", True),
           "unfair_fraction": ("fraction of jobs with rho > 1.05", True), "gpu_util": ("GPU utilization", False),
           "cpu_util": ("CPU allocated", False), "mem_util": ("memory allocated", False),
           "cost_usd": ("cost (USD)", True), "waited_fraction": ("fraction of jobs that waited past a round", True)}
UNFAIR_RHO = 1.05


@dataclass(frozen=True)
class Preset:
    seeds: tuple[int, ...]
    num_jobs: int
    cluster: str                      # servers x GPUs/CPUs/GB @ type (Synergy's 3 CPUs per GPU)
    gavel_interarrival_s: float
    shockwave_interarrival_s: float
    openb_gpus: int                   # openb servers sampled per seed until they hold this many GPUs
    sia_jobs: int                     # the first jobs of a Helios workload (the sia stream)


PRESETS = {
    "tiny": Preset((0, 1), 10, "2x4/12/500@v100+2x4/12/500@p100+2x4/12/500@k80", 1800, 60, 8, 6),
    "quick": Preset((0, 1, 2, 3, 4), 24, "2x4/12/500@v100+2x4/12/500@p100+2x4/12/500@k80", 1200, 60, 12, 16),
    "paper": Preset((0, 1, 2, 3, 4), 120, "4x8/24/500@v100+4x8/24/500@p100+4x8/24/500@k80", 600, 30, 32, 48),
}
STREAMS = {"gavel": "Gavel's generator (multi-GPU jobs)", "shockwave": "Shockwave's adaptive trace generator",
           "openb": "Alibaba openb pods on a sample of the openb node list", elastic.STREAM: elastic.DESCRIPTION}


@dataclass(frozen=True)
class Case:
    stream: str
    policy: str
    seed: int
    preset: str
    openb_dir: str | None = None
    # Which plan within the solver's gap Shockwave's planner keeps (docs/rules.md#planner-fairness)
    shockwave_fairness: str = "solver"

    def key(self) -> str:
        from hetsched.experiments.sweep import code_fingerprint
        payload = json.dumps({"compare": 1, "code": code_fingerprint(), **asdict(self)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]


def cases(streams, preset: str, policies=POLICIES, seeds=None, openb_dir: str | None = None,
          shockwave_fairness: str = "solver") -> list[Case]:
    seeds = choose(PRESETS, preset, "preset").seeds if seeds is None else tuple(seeds)
    if not (streams and policies and seeds):
        raise HetschedError(f"compare: nothing to run with streams {list(streams)}, policies {list(policies)} "
                            f"and seeds {list(seeds)}; each needs at least one")
    systems = [system_of(policy) for policy in policies]   # an unknown name: one clear error here, not per worker
    fairness = dict.fromkeys(policies, "solver")
    if shockwave_fairness != "solver":
        choose(dict.fromkeys(FAIRNESS), shockwave_fairness, "Shockwave fairness")
        fairness.update((p, shockwave_fairness) for p in policies if _planner(p))
        if set(fairness.values()) == {"solver"}:
            raise HetschedError(f"compare: Shockwave fairness {shockwave_fairness!r} acts on Shockwave's planner "
                                f"only, and no policy of {list(policies)} ({', '.join(sorted(set(systems)))}) "
                                f"plans with it")
    return [Case(s, p, int(seed), preset, openb_dir, fairness[p]) for s in streams for p in policies for seed in seeds]


def _planner(policy: str) -> bool:
    """Whether a policy (or composition) decides with Shockwave's planner."""
    from hetsched.core.registry import decide_of, policy_for

    return not is_elastic(policy) and decide_of(policy_for(policy, 0)).kind == "planner"


# ---- streams and clusters ----------------------------------------------------------------------------------
def workload(case: Case):
    """(jobs, cluster with prices, throughput table, round-rule system) of a case's stream and seed."""
    from hetsched.model.throughputs import load_throughputs
    from hetsched.traces.generators.gavel import GavelGenerator
    from hetsched.traces.generators.shockwave import ShockwaveGenerator

    p = PRESETS[case.preset]
    if case.stream == "openb":
        return _openb(case, p)
    cluster = ClusterSpec.load(p.cluster, prices_per_hour=dict(GAVEL_GCP_PRICES))
    table = load_throughputs("gavel_simulation")
    if case.stream == "gavel":
        jobs = GavelGenerator(seed=case.seed, mean_interarrival_s=p.gavel_interarrival_s, multi_gpu=True,
                              throughputs=table).jobs(p.num_jobs)
        return jobs, cluster, table, "gavel"
    if case.stream == "shockwave":
        gen = ShockwaveGenerator(seed=case.seed, mean_interarrival_s=p.shockwave_interarrival_s)
        return list(islice(iter(gen), p.num_jobs)), cluster, table, "shockwave"
    raise HetschedError(f"unknown stream {case.stream!r}; known: {', '.join(STREAMS)}")


def _openb(case: Case, p: Preset):
    """A seeded slice of openb's GPU pods (consecutive arrivals from a seeded start, re-based to t = 0) on
    servers drawn from its node list in a seeded order until they hold `openb_gpus` GPUs (the whole list carries
    about 10 busy GPUs on average over 6,212: a small sample is what makes its jobs contend). GPU models are
    priced as the Gavel type the map puts them on."""
    from hetsched.io.gpu_map import parse_gpu_map

    folder = _openb_folder(case.openb_dir)
    table, jobs = _openb_jobs(str(folder))
    rules = parse_gpu_map(OPENB_GPU_MAP)
    servers = list(ClusterSpec.load(str(folder / "openb_node_list_gpu_node.csv")).servers)
    random.Random(case.seed).shuffle(servers)
    gpus = np.cumsum([s.num_gpus for s in servers])
    cluster = ClusterSpec.from_servers(servers[: int(np.searchsorted(gpus, p.openb_gpus)) + 1])
    prices = {g: GAVEL_GCP_PRICES[rules[g][0]] if g in rules else GAVEL_GCP_PRICES.get(g, 0.0)
              for g in cluster.gpu_types}
    cluster = ClusterSpec.from_servers(list(cluster.servers), prices_per_hour=prices)
    types = set(cluster.gpu_types)
    runnable = [j for j in jobs if (not j.allowed_gpu_types or set(j.allowed_gpu_types) & types)
                and j.scale_factor <= cluster.num_gpus]
    start = random.Random(case.seed).randrange(max(len(runnable) - p.num_jobs, 1))
    picked = runnable[start:start + p.num_jobs]
    t0 = picked[0].arrival_time_s
    picked = [j.with_(job_id=i, arrival_time_s=j.arrival_time_s - t0) for i, j in enumerate(picked)]
    return picked, cluster, table, "gavel"


def _openb_folder(openb_dir: str | None):
    from pathlib import Path
    folder = Path(openb_dir) if openb_dir else shared_data_dir() / "alibaba_openb"
    if not (folder / "openb_node_list_gpu_node.csv").exists():
        raise HetschedError(f"openb stream: no openb_node_list_gpu_node.csv in {folder} (pass openb_dir, or "
                                f"set HETSCHED_SHARED to the folder holding data/alibaba_openb)")
    return folder


@functools.lru_cache(maxsize=2)
def _openb_jobs(folder: str):
    from pathlib import Path
    from hetsched.io.gpu_map import apply_gpu_map, parse_gpu_map
    from hetsched.model.throughputs import load_throughputs
    from hetsched.traces import read_trace
    from hetsched.traces.production import Filters, JobMapping

    table = apply_gpu_map(load_throughputs("gavel_simulation"), parse_gpu_map(OPENB_GPU_MAP))
    jobs = read_trace(Path(folder) / "openb_pod_list_gpuspec33.csv", "openb",
                      mapping=JobMapping(throughputs=table, seed=0), filters=Filters(max_duration_s=72 * 3600))
    return table, jobs


# ---- one run -----------------------------------------------------------------------------------------------
def run_case(case: Case) -> dict:
    """Simulate a case; the row holds its metrics (hours, fractions, USD), or `refused` and the reason."""
    from hetsched.core.registry import policy_for
    from hetsched.core.run_config import SimulationConfig
    from hetsched.sim.simulator import simulate

    row = {**asdict(case), "system": system_of(case.policy), "label": display_name(case.policy), "key": case.key(),
           "refused": False, "reason": ""}
    why = elastic.refusal(case.stream, case.policy)
    if why or case.stream == elastic.STREAM:                # elastic jobs run on their own loop
        return {**row, "refused": True, "reason": why} if why else {**row, **elastic.run(case, PRESETS[case.preset])}
    jobs, cluster, table, rules = workload(case)
    mark = clock.reading()
    try:
        config = SimulationConfig.for_system(rules)
        policy = case.policy if case.shockwave_fairness == "solver" else \
            policy_for(case.policy, case.seed, system=rules, fairness=case.shockwave_fairness)
        result = simulate(jobs, cluster, policy, table, config, seed=case.seed, record_timeline=True,
                          max_rounds=2_000_000)
    except CompositionError as exc:
        return {**row, "refused": True, "reason": str(exc)}
    row.update(metrics(result, cluster, table, config.round_s))
    row.update(clock.since(mark))
    return row


def system_of(policy: str) -> str:
    """Whose policy a name is: Gavel's allocation, Shockwave's planner or Synergy's ordering on its own, or a
    composition (an allocation or the planner with a CPU/memory placement). Raises for an unknown name."""
    from hetsched.core.registry import decide_of, place_of, policy_for

    if is_elastic(policy):
        return "elastic"
    decide = policy_for(policy, 0)
    kind = decide_of(decide).kind
    if kind == "ordering":
        return "Synergy"
    if place_of(decide).kind != "gpus":
        return "composition"
    return "Shockwave" if kind == "planner" else "Gavel"


def metrics(result, cluster: ClusterSpec, table, round_s: float) -> dict:
    """A run's metrics (docs/rules.md#compare); `waited_fraction` counts the jobs that started more than one
    round after they arrived: where it is 0 for every policy, no ordering ever had to choose."""
    recs = list(result.jobs.values())
    jct = np.array([r.jct_s for r in recs], float)
    span = max(r.finish_time_s for r in recs) - min(r.arrival_time_s for r in recs)
    rho = ftf_rho(result, cluster, table)
    cpu, mem = cpu_memory_allocated(result, cluster)
    return {"num_jobs": len(recs), "finished": int(np.isfinite(jct).sum()), "avg_jct_h": float(jct.mean()) / 3600,
            "p99_jct_h": float(np.percentile(jct, 99)) / 3600, "makespan_h": float(result.makespan_s) / 3600,
            "worst_rho": float(rho.max()), "unfair_fraction": float((rho > UNFAIR_RHO).mean()),
            "gpu_util": float(result.utilization), "cpu_util": cpu / span if span > 0 else 0.0,
            "mem_util": mem / span if span > 0 else 0.0, "cost_usd": float(sum(r.cost for r in recs)),
            "num_rounds": int(result.num_rounds),
            "waited_fraction": float(np.mean([r.start_time_s - r.arrival_time_s > round_s for r in recs]))}


def ftf_rho(result, cluster: ClusterSpec, table) -> np.ndarray:
    """Shockwave's finish-time fairness for every policy alike: rho_j = JCT_j / (T_j max(1, N / G)), T_j the
    job's time alone (after batch-size adaptation when the run adapts, else at its fastest isolated rate on the
    cluster's types), N the stream's jobs, G the GPUs (docs/rules.md#compare)."""
    best = best_rates(result, cluster, table)
    contention = max(1.0, len(result.jobs) / cluster.num_gpus)
    out = []
    for job_id, r in result.jobs.items():
        alone = r.isolated_s if r.isolated_s and math.isfinite(r.isolated_s) else r.total_steps / best[job_id]
        out.append(r.jct_s / (alone * contention))
    return np.array(out, float)


def cpu_memory_allocated(result, cluster: ClusterSpec) -> tuple[float, float]:
    """CPU core-seconds and GB-seconds allocated to running jobs, over the cluster's cores and GB: each job-round
    at the per-GPU share its CPU/memory placement gave it, else at its servers' GPU-proportional share."""
    tl = result.timeline_frame()
    tl = tl[(tl["partner_id"] < 0) | (tl["job_id"] < tl["partner_id"])]      # a pair shares its GPUs' share
    fair = {}
    for g in cluster.gpu_types:
        servers = [s for s in cluster.servers if s.gpu_type == g]
        gpus = sum(s.num_gpus for s in servers)
        fair[g] = (sum(s.cpu_cores for s in servers) / gpus, sum(s.dram_gb for s in servers) / gpus)
    types = tl["gpu_type"].to_numpy()
    cpu = tl["cpus_per_gpu"].to_numpy().copy()
    mem = tl["mem_gb_per_gpu"].to_numpy().copy()
    for g, (c, m) in fair.items():
        unplaced = (types == g) & np.isnan(cpu)
        cpu[unplaced], mem[unplaced] = c, m
    gpu_s = tl["num_gpus"].to_numpy() * (tl["end_s"] - tl["start_s"]).to_numpy()
    total_cpu = sum(s.cpu_cores for s in cluster.servers)
    total_mem = sum(s.dram_gb for s in cluster.servers)
    return float(cpu @ gpu_s) / total_cpu, float(mem @ gpu_s) / total_mem


def cpu_pressure(streams, preset: str, openb_dir: str | None = None) -> pd.DataFrame:
    """Per stream (its first seed): the servers' CPU cores per GPU, the fair share (per GPU type the smallest
    server's cores per GPU, docs/rules.md#unlike-servers, averaged over the GPUs), and the share of jobs whose
    profile's ideal cores per GPU exceed it (what TUNE can act on). The elastic stream has no CPU model: skipped."""
    from hetsched.place.hetero import gavel_models
    from hetsched.model.profiles import load_sensitivity
    from hetsched.model.catalog import split_job_type

    profiles, models = load_sensitivity(3), gavel_models()
    out = []
    for stream in (s for s in streams if s != elastic.STREAM):
        jobs, cluster, _, _ = workload(Case(stream, "gavel", PRESETS[preset].seeds[0], preset, openb_dir))
        per_gpu = [s.cpu_cores / s.num_gpus for s in cluster.servers]
        smallest = {}
        for s in cluster.servers:
            smallest[s.gpu_type] = min(smallest.get(s.gpu_type, np.inf), s.cpu_cores / s.num_gpus)
        fair = sum(smallest[s.gpu_type] * s.num_gpus for s in cluster.servers) / cluster.num_gpus
        want = [profiles[models.get(m, m)].cpus_per_gpu for m in (split_job_type(j.job_type)[0] for j in jobs)]
        out.append({"stream": stream, "cores_per_gpu_min": min(per_gpu), "cores_per_gpu_max": max(per_gpu),
                    "cores_per_gpu_fair": fair, "jobs_wanting_more_pct": 100 * float(np.mean(np.array(want) > fair)),
                    "ideal_cores_per_gpu_median": float(np.median(want))})
    return pd.DataFrame(out)


# ---- over seeds --------------------------------------------------------------------------------------------
def interval(values) -> tuple[float, float, int]:
    """(mean, half-width of the 95 % t confidence interval, n) of finite values."""
    from scipy import stats
    v = np.asarray([x for x in values if np.isfinite(x)], float)
    if len(v) < 2:
        return (float(v.mean()) if len(v) else math.nan), math.nan, len(v)
    return float(v.mean()), float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))), len(v)


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (stream, policy): each metric's mean over seeds and its 95 % half-width (`<metric>_ci`)."""
    ran = rows[~rows["refused"]]
    out = []
    for (stream, policy), g in ran.groupby(["stream", "policy"], sort=False):
        row = {"stream": stream, "policy": policy, "system": g["system"].iloc[0], "label": g["label"].iloc[0],
               "seeds": len(g)}
        for m in METRICS:
            row[m], row[f"{m}_ci"], _ = interval(g[m])
        out.append(row)
    out = pd.DataFrame(out)
    if len(out):                                   # two policies that read the same get their names appended
        out["label"] = out["policy"].map(distinct(dict(zip(out["policy"], out["label"]))))
    return out


def refusals(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["refused"]].drop_duplicates(["stream", "policy"])[["stream", "policy", "system", "reason"]]


def gains(rows: pd.DataFrame, metrics=("avg_jct_h", "p99_jct_h", "makespan_h", "worst_rho")) -> pd.DataFrame:
    """Each composition against each parent, paired by seed: gain = 1 - composition / parent (> 0: the
    composition is better on a lower-is-better metric), mean and 95 % interval over seeds."""
    ran = rows[~rows["refused"]]
    out = []
    for stream, s in ran.groupby("stream", sort=False):
        by = s.set_index(["policy", "seed"])
        for comp, parents in COMPOSITIONS.items():
            for parent in parents:
                if comp not in by.index.get_level_values(0) or parent not in by.index.get_level_values(0):
                    continue
                seeds = sorted(set(by.loc[comp].index) & set(by.loc[parent].index))
                for m in metrics:
                    per_seed = [1 - by.loc[(comp, k), m] / by.loc[(parent, k), m] for k in seeds]
                    mean, half, n = interval(per_seed)
                    out.append({"stream": stream, "composition": comp, "parent": parent, "metric": m,
                                "gain": mean, "gain_ci": half, "seeds": n,
                                "significant": bool(n >= 2 and abs(mean) > half)})
    return pd.DataFrame(out, columns=["stream", "composition", "parent", "metric", "gain", "gain_ci", "seeds",
                                      "significant"])


def verdicts(summary: pd.DataFrame, gain_rows: pd.DataFrame) -> list[str]:
    """Plain sentences computed from the numbers: who wins each stream on each headline metric (and whether
    the runner-up is within the interval), and which composition gains are outside their intervals."""
    lines = []
    for stream, s in summary.groupby("stream", sort=False):
        for m in ("avg_jct_h", "makespan_h", "worst_rho"):
            title, lower = METRICS[m]
            ranked = s.dropna(subset=[m]).sort_values(m, ascending=lower)
            if len(ranked) == 0:
                continue
            best = ranked.iloc[0]
            if len(ranked) == 1:
                lines.append(f"{stream}: only {best['label']} has a finite {title} ({value_ci(best, m)}).")
                continue
            second = ranked.iloc[1]
            half = best[f"{m}_ci"] + second[f"{m}_ci"]
            standing = ("not compared: no interval from one seed" if math.isnan(half) else "within the intervals"
                        if abs(best[m] - second[m]) <= half else "clearly behind")
            lines.append(f"{stream}: lowest {title} is {best['label']} ({value_ci(best, m)}); {second['label']} is "
                         f"{standing} ({value_ci(second, m)}).")
        orderings = s[s["system"] == "Synergy"]
        if len(orderings) > 1 and (s["waited_fraction"] == 0).all():
            lines.append(f"{stream}: no job waited past one round under any policy, so Synergy's {len(orderings)} "
                         f"orderings never had to choose (with one placement they give the same JCTs).")
    for _, g in gain_rows[gain_rows["significant"] & (gain_rows["metric"] == "avg_jct_h")].iterrows():
        word = "shortens" if g["gain"] > 0 else "lengthens"
        lines.append(f"{g['stream']}: {g['composition']} {word} average JCT by {abs(g['gain']):.0%} "
                     f"(± {g['gain_ci']:.0%}) against {g['parent']}.")
    return lines


def compare(streams=tuple(STREAMS), preset: str = "quick", policies=POLICIES, seeds=None,
            openb_dir: str | None = None, shockwave_fairness: str = "solver", **sweep_kwargs) -> pd.DataFrame:
    """Every case on Dask (or in-process with `use_dask=False`), cached like any sweep: one row per case.
    `shockwave_fairness`: the plan within the gap that Shockwave's planner keeps (docs/rules.md#planner-fairness),
    for its runs and compositions."""
    from hetsched.experiments.sweep import sweep
    unknown = [s for s in streams if s not in STREAMS]
    if unknown or preset not in PRESETS:
        raise HetschedError(f"compare: unknown stream(s) {unknown} or preset {preset!r}; streams: "
                         f"{', '.join(STREAMS)}; presets: {', '.join(PRESETS)}")
    if "openb" in streams:
        _openb_folder(openb_dir)                   # a clear error here, not one per worker
    rows = sweep(cases(streams, preset, policies, seeds, openb_dir, shockwave_fairness), run=run_case,
                 **sweep_kwargs)
    return rows.assign(refused=rows["refused"].astype(bool))
