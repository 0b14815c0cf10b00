"""Elastic runs on a workload table (docs/rules.md#elastic-loop): every round, run each job for the round under its
allocation, admit the jobs that have arrived, ask the decide stage for (GPU type, GPU count) per job, place them on
nodes, and restart each job whose allocation changed. The loop is the simulator's one loop (`RoundSimulation`); the
elastic stage is `rounds.ElasticRounds`; this module reads the tables and reports the artifact's metrics.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hetsched.decide.elastic.apps import Application, load_applications
from hetsched.decide.elastic.cluster import ElasticCluster
from hetsched.decide.elastic.jobs import ADAPTIVE, CATEGORIES, ElasticJob
from hetsched.core.run_config import SimulationConfig
from hetsched.decide.elastic.names import ElasticDecide
from hetsched.decide.elastic.result import ElasticResult
from hetsched.decide.elastic.rounds import ApplicationKeys
from hetsched.errors import HetschedError
from hetsched.model.cluster import ClusterSpec, Server
from hetsched.model.jobs import Job
from hetsched.sim.simulator import RoundSimulation

MAX_ROUNDS = 2_000_000


def jobs_from_frame(frame: pd.DataFrame, apps: dict[str, Application], cluster: ElasticCluster,
                    category: str = ADAPTIVE, unaware: bool = False) -> list[ElasticJob]:
    """Elastic jobs from a workload table (name, submit_s, app, num_replicas, batch_size), checked row by row."""
    if category not in CATEGORIES:
        raise HetschedError(f"job category {category!r}: use one of {', '.join(CATEGORIES)}")
    jobs = []
    for row, rec in enumerate(frame.itertuples(index=False), start=1):
        app = apps.get(rec.app)
        if app is None:
            raise HetschedError(f"workload row {row} ({rec.name}): unknown application {rec.app!r}; known: "
                                f"{', '.join(sorted(apps))}")
        lacking = [t for t in cluster.types if t not in app.types]
        if lacking:
            raise HetschedError(f"workload row {row} ({rec.name}): {rec.app} has no measurements on "
                                f"{', '.join(lacking)}; it has {', '.join(sorted(app.types))}")
        if not app.init_batch_size <= rec.batch_size <= app.max_batch_size:
            raise HetschedError(f"workload row {row} ({rec.name}): batch size {rec.batch_size} is outside "
                                f"{rec.app}'s profiled range [{app.init_batch_size}, {app.max_batch_size}]")
        if rec.num_replicas < 1:
            raise HetschedError(f"workload row {row} ({rec.name}): num_replicas must be at least 1")
        jobs.append(ElasticJob(str(rec.name), app, float(rec.submit_s), int(rec.num_replicas),
                               int(rec.batch_size), category, unaware))
    return sorted(jobs, key=lambda j: j.submit_s)


def simulate_elastic(jobs: list[ElasticJob], cluster: ElasticCluster, policy, round_s: float = 60.0,
                     progress=None, max_rounds: int | None = None) -> ElasticResult:
    """Run `jobs` on `cluster` under `policy` (an object with `decide(active_jobs, now)`) until all finish. BLAS
    runs on one thread: its operations here are tiny, and a second thread doubled the CPU time (13 -> 25 CPU-s).
    `max_rounds` stops early (a benchmark of the decide stage): the result then holds the jobs done by then."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        return _simulate(jobs, cluster, policy, round_s, progress, max_rounds)


def _simulate(jobs, cluster, policy, round_s, progress, max_rounds) -> ElasticResult:
    """The one simulator loop (`RoundSimulation`) with the elastic stage (`rounds.ElasticRounds`) given this run's
    decide stage and jobs: each job a `Job` of its application and tuned GPU count, arriving at its submit time."""
    pending = sorted(jobs, key=lambda j: j.submit_s)
    spec = ClusterSpec.from_servers([Server(t, per_node, None, None) for t, (nodes, per_node) in cluster.types.items()
                                     for _ in range(nodes)])
    decide = ElasticDecide(policy.name, prepared=(policy, dict(enumerate(pending))))
    arrivals = [Job(i, j.submit_s, j.app.name, j.target_replicas, 1.0) for i, j in enumerate(pending)]
    sim = RoundSimulation(arrivals, spec, decide, ApplicationKeys({j.app.name: j.app for j in pending}),
                          SimulationConfig(round_s=round_s, record_timeline=False))
    stage = sim.sched.decide
    for count in range(MAX_ROUNDS):
        if count == max_rounds or not sim.step():
            break
        if progress is not None:
            progress(sim.now, len(stage.finished), len(pending))
    else:
        raise HetschedError(f"elastic simulation did not finish in {MAX_ROUNDS} rounds "
                            f"({len(stage.finished)} of {len(pending)} jobs done)")
    done = stage.finished
    frame = pd.DataFrame({"name": [j.name for j in done], "app": [j.app.name for j in done],
                          "submit_s": [j.submit_s for j in done], "completion_s": [j.completion_s for j in done],
                          "gpu_hours": [j.gpu_seconds / 3600 for j in done],
                          "restarts": [j.restarts or 0 for j in done]})
    frame["jct_s"] = frame["completion_s"] - frame["submit_s"]
    frame = frame.sort_values("submit_s", kind="stable").reset_index(drop=True)
    return ElasticResult(frame, np.array(stage.contention), round_s, policy.name, str(cluster), stage.decide_s)


def prepare(policy_name: str, cluster: ElasticCluster, frame: pd.DataFrame, round_s: float | None = None,
            **options):
    """(decide stage, jobs, round length) for a policy on a workload table: the jobs in the category the policy
    runs them as, with one goodput model over every type where the policy is heterogeneity-unaware."""
    from hetsched.decide.elastic.policies import make_elastic_policy

    policy, category, round_s = make_elastic_policy(policy_name, cluster, round_s, **options)
    jobs = jobs_from_frame(frame, load_applications(), cluster, category, getattr(policy, "unaware", False))
    return policy, jobs, round_s


def run_workload(workload: str, policy_name: str = "sia", cluster: str = "sia_hetero", round_s: float | None = None,
                 progress=None, **options) -> ElasticResult:
    """One of the paper's workloads (e.g. 'helios-1') under a policy, on a named or written cluster."""
    from hetsched.decide.elastic.names import CORE_ON_TUNED_JOBS
    from hetsched.decide.elastic.workloads import load_workload

    spec = ElasticCluster.parse(cluster, {t for a in load_applications().values() for t in a.types})
    if policy_name.strip().lower() in CORE_ON_TUNED_JOBS:
        if round_s is not None or options:
            raise HetschedError(f"{policy_name.strip().lower()} runs Shockwave's own rules: it takes no round length or "
                                f"options (got {', '.join(['round'] * (round_s is not None) + sorted(options))})")
        _, jobs, _ = prepare("gavel+tj", spec, load_workload(workload))          # the same rigid jobs
        return run_shockwave_tj(jobs, spec)
    policy, jobs, round_s = prepare(policy_name, spec, load_workload(workload), round_s, **options)
    return simulate_elastic(jobs, spec, policy, round_s, progress)


def run_shockwave_tj(jobs: list[ElasticJob], cluster: ElasticCluster, seed: int = 0) -> ElasticResult:
    """Shockwave+TJ (docs/rules.md#shockwave-tj): the core's Shockwave (its 120-s rounds, its preemption penalty) on
    the rigid jobs; an `ElasticResult` whose contention is the jobs arrived and unfinished at each of its rounds."""
    from hetsched.decide.elastic.shockwave_tj import NAME, core_stream
    from hetsched.sim.simulator import simulate

    stream, table = core_stream(jobs, cluster)
    spec = ClusterSpec.from_servers([Server(t, per_node, None, None) for t, (nodes, per_node) in cluster.types.items()
                                     for _ in range(nodes)])
    config = SimulationConfig.for_system("shockwave", seed=seed, record_timeline=False)
    frame = simulate(stream, spec, "shockwave", table, config).jobs_frame().sort_values("job_id", kind="stable")
    ordered = sorted(jobs, key=lambda j: j.submit_s)
    gpu_s = frame[[c for c in frame if c.startswith("seconds_on_")]].sum(axis=1).to_numpy()
    out = pd.DataFrame({"name": [j.name for j in ordered], "app": [j.app.name for j in ordered],
                        "submit_s": frame["arrival_time_s"].to_numpy(),
                        "completion_s": frame["finish_time_s"].to_numpy(),
                        "gpu_hours": gpu_s / 3600, "restarts": np.nan})
    out["jct_s"] = out["completion_s"] - out["submit_s"]
    round_s = config.round_s
    times = np.arange(1, int(np.ceil(out["completion_s"].max() / round_s)) + 1) * round_s
    contention = ((out["submit_s"].to_numpy()[None, :] <= times[:, None])
                  & (out["completion_s"].to_numpy()[None, :] > times[:, None])).sum(axis=1)
    return ElasticResult(out, contention, round_s, NAME, str(cluster))
