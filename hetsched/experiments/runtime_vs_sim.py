"""One trace on the local runtime (emulated workers) and in the simulator, for each system (issue 25 item 4):
`benchmarks/runtime_vs_sim.py` and `notebooks/runtime_vs_simulation.ipynb` both run `compare`.

- gavel: LAS-perf (`max_min_fairness_perf`) on three GPU types; emulated jobs run at EMULATED_STEPS_PER_S /
  slowdown of their type, and the simulator gets exactly those rates (`emulated_throughputs`).
- shockwave: the planner on one GPU type with Accordion and GNS jobs that switch batch sizes on both sides
  (docs/rules.md#runtime-batch-sizes); no preemption penalty in the simulator: the runtime's restart cost is
  measured and reported beside the penalty Shockwave's rules model (20 s).
- sia: Sia's 60-s rounds on two GPU types, adaptive jobs of the short applications; the runtime and the simulator
  both run at a time scale of 60 s / the round (docs/rules.md#time-scale): an emulated elastic job runs each
  round at the rate the measured traces give its allocation, after its application's restore. Its rounds keep
  a grid (R82): the fixed-round simulation moves its origin to the runtime's, and the calibrated one adds the
  measured lease start to each new lease's restore.
- synergy: FIFO+tune on emulated servers with CPU cores and memory; an emulated profiled job runs at its
  profile's throughput at its share, one wall second standing for EMULATED_TIME_SCALE seconds of training, so the
  simulator runs at EMULATED_TIME_SCALE x the round and its JCTs are divided by it.

Three simulations per run: the runtime's round rules as the papers' simulators apply them (no reset gate, one plan
per round; no over-deadline completion, which the runtime does not have); the same on the runtime's wall-clock
round grid (docs/rules.md#fixed-rounds); and calibrated, with the run's measured lease start as well
(docs/rules.md#lease-start), which is what `hetsched calibrate` feeds `hetsched simulate --calibration`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time

import numpy as np
import pandas as pd

from hetsched.core.run_config import SimulationConfig
from hetsched.model.cluster import ClusterSpec
from hetsched.model.jobs import Job
from hetsched.model.throughputs import load_throughputs
from hetsched.rates.adaptation.schedules import iterations_per_epoch
from hetsched.runtime.replay import emulated_throughputs, job_types_of, run_on_local_cluster
from hetsched.runtime.state import RUNTIME_SETTINGS
from hetsched.runtime.worker import EMULATED_STEPS_PER_S, EMULATED_TIME_SCALE
from hetsched.sim.simulator import simulate
from hetsched.traces import GavelGenerator

log = logging.getLogger(__name__)

SYSTEMS = {"gavel": ("max_min_fairness_perf", "2:1:1"), "shockwave": ("shockwave", "4:0:0"),
           "synergy": ("FIFO+tune", "1x4/24/500@v100"), "sia": ("sia", "2x4/8/64@t4+1x4/8/64@a100")}
SIA_APPS = ("ncf", "cifar10", "ncf", "bert", "ncf", "cifar10")     # alone on 4 t4s: 6-45 Sia-minutes
SIA_ROUND_S = 60.0
ELASTIC_STEPS = 10_000              # an elastic job's steps: shares of its application's work
ADAPTIVE = (("ResNet-18 (batch size 64)", "gns"), ("Recommendation (batch size 512)", "accordion"),
            ("ResNet-18 (batch size 32)", "accordion"), ("LM (batch size 20)", "static"),
            ("ResNet-50 (batch size 64)", "static"))
SYNERGY_MODELS = ("res18", "res50", "alexnet", "mobilenet", "shufflenet", "transformer", "deepspeech")
SIMULATIONS = ("sim", "fixed", "calibrated")


def trace(system: str, num_jobs: int, round_s: float, gap_s: float, seed: int) -> list[Job]:
    """Each job needs 1-6 rounds of work on the fastest GPU; arrivals `gap_s` apart."""
    rng = np.random.default_rng(seed)
    if system == "sia":
        return [Job(i, i * gap_s, app, int(k), ELASTIC_STEPS, command="emulated")
                for i, (app, k) in enumerate(zip(np.resize(SIA_APPS, num_jobs), rng.choice([1, 2], num_jobs)))]
    rounds = rng.uniform(1.0, 6.0, num_jobs)
    if system == "synergy":
        from hetsched.model.profiles import load_sensitivity
        profiles = load_sensitivity(3)
        return [Job(i, i * gap_s, m, 1, float(int(r * round_s * EMULATED_TIME_SCALE / profiles[m].iteration_time_s)),
                    command="emulated")
                for i, (m, r) in enumerate(zip(rng.choice(SYNERGY_MODELS, num_jobs), rounds))]
    per_round = EMULATED_STEPS_PER_S * round_s
    if system == "shockwave":
        out = []
        for i, r in enumerate(rounds):
            job_type, mode = ADAPTIVE[i % len(ADAPTIVE)]
            model, bs = job_type.split(" (batch size ")
            epoch = iterations_per_epoch(model, int(bs[:-1]))
            out.append(Job(i, i * gap_s, job_type, 1, float(max(1, int(r * per_round / epoch)) * epoch), mode=mode))
        return out
    base = GavelGenerator(seed=seed, static=True, throughputs=load_throughputs()).jobs(num_jobs)
    return [j.with_(scale_factor=1, total_steps=float(int(r * per_round)), arrival_time_s=float(i * gap_s))
            for i, (j, r) in enumerate(zip(base, rounds))]


def simulated(system: str, jobs: list[Job], cluster: str, policy: str, round_s: float, lease_start_s: float = 0.0,
              fixed_rounds: bool = False, origin_s: float = 0.0) -> pd.Series | None:
    """Per-job JCTs (wall seconds) the simulator predicts under the runtime's round rules; calibrated with the
    runtime's lease start and its wall-clock rounds from `origin_s`, all in wall seconds. Sia at the runtime's
    time scale: its rounds keep a grid already (R82), so fixed rounds are that grid from the runtime's origin,
    and the lease start adds to each new lease's restore (R86a)."""
    if system == "sia":
        res = simulate(jobs, ClusterSpec.load(cluster), policy, round_s=round_s, time_scale=time_scale(round_s),
                       lease_start_s=lease_start_s, round_origin_s=origin_s % round_s if fixed_rounds else 0.0)
        return res.jobs_frame().set_index("job_id")["jct_s"]
    if system == "synergy":
        scale = EMULATED_TIME_SCALE
        scaled = [j.with_(arrival_time_s=j.arrival_time_s * scale) for j in jobs]
        res = simulate(scaled, ClusterSpec.load(cluster), policy, round_s=round_s * scale, macro_rounds=False,
                       lease_start_s=lease_start_s * scale, fixed_rounds=fixed_rounds,
                       round_origin_s=origin_s * scale % (round_s * scale) if fixed_rounds else 0.0)
        return res.jobs_frame().set_index("job_id")["jct_s"] / scale
    # The runtime's rules (runtime/state.py): the defaults and these, not Shockwave's simulator rules.
    kind = "planner" if system == "shockwave" else "allocation"
    res = simulate(jobs, ClusterSpec.load(cluster), policy, emulated_throughputs(job_types_of(jobs)),
                   SimulationConfig(), round_s=round_s, **RUNTIME_SETTINGS[kind], lease_start_s=lease_start_s,
                   fixed_rounds=fixed_rounds, over_deadline=system != "shockwave",
                   round_origin_s=origin_s % round_s if fixed_rounds else 0.0)
    return res.jobs_frame().set_index("job_id")["jct_s"]


def time_scale(round_s: float) -> float:
    """Sia's application seconds per second of the clock: its 60-s rounds last `round_s`."""
    return SIA_ROUND_S / round_s


def gaps(per_job: pd.DataFrame, column: str) -> dict:
    """Average-JCT and makespan gaps and per-job p90 |ratio - 1| of the runtime against one simulation (NaN where
    that simulation does not apply)."""
    both = per_job.dropna(subset=["jct_s", column])
    if both.empty:
        return {"avg_jct_gap": float("nan"), "makespan_gap": float("nan"), "p90_abs_ratio_minus_1": float("nan")}
    ratio = both["jct_s"] / both[column]
    run_span = (both["arrival_time_s"] + both["jct_s"]).max()
    sim_span = (both["arrival_time_s"] + both[column]).max()
    return {"avg_jct_gap": float(both["jct_s"].mean() / both[column].mean() - 1),
            "makespan_gap": float(run_span / sim_span - 1),
            "p90_abs_ratio_minus_1": float(np.percentile((ratio - 1).abs(), 90))}


def compare(system: str, num_jobs: int, round_s: float, gap_s: float | None = None, seed: int = 0,
            policy: str | None = None, cluster: str | None = None, timeout_s: float = 24 * 3600,
            state_parent: str | None = None) -> tuple[pd.DataFrame, dict]:
    """Run the trace on the runtime and in the three simulations. Returns the per-job frame (arrival, runtime
    JCT and one column per simulation) and a summary: the gaps against each simulation, the measured lease start
    and restart figures, the wall time."""
    policy = policy or SYSTEMS[system][0]
    cluster = cluster or SYSTEMS[system][1]
    gap_s = round_s / 2 if gap_s is None else gap_s
    jobs = trace(system, num_jobs, round_s, gap_s, seed)
    ClusterSpec.load(cluster)                       # a malformed cluster is named before anything starts
    start = time.time()
    state = tempfile.mkdtemp(prefix=f"{system}-", dir=state_parent)
    try:
        real = run_on_local_cluster(jobs, cluster, state, policy=policy, round_s=round_s, timeout_s=timeout_s,
                                    time_scale=time_scale(round_s) if system == "sia" else 1.0)
    except BaseException:               # the scheduler's and workers' logs say why: keep them
        log.warning("%s: the run on the local runtime failed; its state and logs are kept in %s", system, state)
        raise
    shutil.rmtree(state, ignore_errors=True)
    wall = time.time() - start
    info = real.attrs["info"]
    origin, lease_start = info["round_origin_s"], info["mean_lease_start_s"]
    per_job = simulations(real, jobs, system, policy, cluster, round_s, lease_start, origin)
    summary = {"system": system, "policy": policy, "cluster": cluster, "round_s": round_s, "jobs": len(jobs),
               "seed": seed, "gap_s": gap_s,
               "completed_on_runtime": len(real), "wall_s": round(wall, 1),
               "avg_jct_runtime_s": float(real["jct_s"].mean()),
               **{f"{name}_{k}": v for name in SIMULATIONS for k, v in gaps(per_job, name).items()},
               "lease_start_s": lease_start, "round_origin_s": origin, "lease_starts": info["lease_starts"],
               "restarts": info["restarts"], "mean_restart_s": info["mean_restart_s"],
               "batch_size_switches": info["batch_size_switches"],
               "modelled_preemption_penalty_s": SimulationConfig.for_system("shockwave").preemption_penalty_s}
    return per_job.reset_index(), summary


def simulations(real: pd.DataFrame, jobs: list[Job], system: str, policy: str, cluster: str, round_s: float,
                lease_start_s: float, origin_s: float) -> pd.DataFrame:
    """The runtime's per-job frame (`job_id`, `jct_s`, ...) with the arrival and the three simulations' JCTs."""
    per_job = real.set_index("job_id")
    per_job.insert(0, "arrival_time_s", [jobs[j].arrival_time_s for j in per_job.index])
    per_job["sim"] = simulated(system, jobs, cluster, policy, round_s)
    per_job["fixed"] = simulated(system, jobs, cluster, policy, round_s, 0.0, True, origin_s)
    per_job["calibrated"] = simulated(system, jobs, cluster, policy, round_s, lease_start_s, True, origin_s)
    return per_job


def resimulate(per_job: pd.DataFrame, summary: dict) -> dict:
    """The gaps of a saved run (its per-job CSV and summary) against the simulator as it is now: the runtime side
    is what was measured, the simulated side is computed again (after a change to the simulator's rules)."""
    s = summary
    jobs = trace(s["system"], s["jobs"], s["round_s"], s["gap_s"], s["seed"])
    real = per_job[["job_id", "jct_s"]]
    frame = simulations(real, jobs, s["system"], s["policy"], s["cluster"], s["round_s"], s["lease_start_s"],
                        s["round_origin_s"])
    return {f"{name}_{k}": v for name in SIMULATIONS for k, v in gaps(frame, name).items()}
