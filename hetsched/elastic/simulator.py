"""The elastic round loop (docs/rules.md#elastic-loop): every round, run each job for the round under its
allocation, admit the jobs that have arrived, ask the decide stage for (GPU type, GPU count) per job, place them on
nodes, and restart each job whose allocation changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hetsched.elastic.apps import Application, load_applications
from hetsched.elastic.cluster import ElasticCluster, place
from hetsched.elastic.jobs import ADAPTIVE, CATEGORIES, ElasticJob
from hetsched.errors import HetschedError

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


@dataclass
class ElasticResult:
    jobs: pd.DataFrame
    contention: np.ndarray                 # jobs arrived and unfinished, per round
    round_s: float
    policy: str
    cluster: str
    decide_s: list = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        """The artifact's summary (docs/rules.md#elastic-metrics): hours, except contention (jobs)."""
        jct = np.sort(self.jobs["jct_s"].to_numpy())
        return {"avg_jct_h": float(jct.mean()) / 3600, "p99_jct_h": float(jct[int(0.99 * len(jct))]) / 3600,
                "makespan_h": float(self.jobs["completion_s"].max() - self.jobs["submit_s"].min()) / 3600,
                "gpu_h_per_job": float(self.jobs["gpu_hours"].mean()),
                "contention_mean": float(self.contention.mean()) if len(self.contention) else 0.0,
                "contention_max": int(self.contention.max()) if len(self.contention) else 0,
                "restarts_per_job": float(self.jobs["restarts"].mean())}


def simulate_elastic(jobs: list[ElasticJob], cluster: ElasticCluster, policy, round_s: float = 60.0,
                     progress=None, max_rounds: int | None = None) -> ElasticResult:
    """Run `jobs` on `cluster` under `policy` (an object with `decide(active_jobs, now)`) until all finish. BLAS
    runs on one thread: its operations here are tiny, and a second thread doubled the CPU time (13 -> 25 CPU-s).
    `max_rounds` stops early (a benchmark of the decide stage): the result then holds the jobs done by then."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        return _simulate(jobs, cluster, policy, round_s, progress, max_rounds)


def _simulate(jobs, cluster, policy, round_s, progress, max_rounds) -> ElasticResult:
    import time

    pending = sorted(jobs, key=lambda j: j.submit_s)
    active: list[ElasticJob] = []
    done: list[ElasticJob] = []
    contention, decide_s = [], []
    now, nxt = 0.0, 0
    for count in range(MAX_ROUNDS):
        if (nxt == len(pending) and not active) or count == max_rounds:
            break
        for job in active:
            job.step(round_s, now)
        now += round_s
        finished = [j for j in active if j.completion_s is not None]
        if finished:
            done += finished
            active = [j for j in active if j.completion_s is None]
            for job in finished:
                job.alloc = None
        while nxt < len(pending) and pending[nxt].submit_s <= now:
            active.append(pending[nxt])
            nxt += 1
        contention.append(len(active))
        start = time.process_time()
        wanted = policy.decide(active, now)
        decide_s.append(time.process_time() - start)
        allocs = place(cluster, {j.name: j.alloc for j in active}, wanted)
        for job in active:
            new = allocs.get(job.name)
            if new != job.alloc:
                job.reallocate(new)
        if progress is not None:
            progress(now, len(done), len(pending))
    else:
        raise HetschedError(f"elastic simulation did not finish in {MAX_ROUNDS} rounds "
                            f"({len(done)} of {len(pending)} jobs done)")
    frame = pd.DataFrame({"name": [j.name for j in done], "app": [j.app.name for j in done],
                          "submit_s": [j.submit_s for j in done], "completion_s": [j.completion_s for j in done],
                          "gpu_hours": [j.gpu_seconds / 3600 for j in done],
                          "restarts": [j.restarts or 0 for j in done]})
    frame["jct_s"] = frame["completion_s"] - frame["submit_s"]
    frame = frame.sort_values("submit_s", kind="stable").reset_index(drop=True)
    return ElasticResult(frame, np.array(contention), round_s, getattr(policy, "name", type(policy).__name__),
                         str(cluster), decide_s)


def prepare(policy_name: str, cluster: ElasticCluster, frame: pd.DataFrame, round_s: float | None = None,
            **options):
    """(decide stage, jobs, round length) for a policy on a workload table: the jobs in the category the policy
    runs them as, with one goodput model over every type where the policy is heterogeneity-unaware."""
    from hetsched.elastic.policies import make_elastic_policy

    policy, category, round_s = make_elastic_policy(policy_name, cluster, round_s, **options)
    jobs = jobs_from_frame(frame, load_applications(), cluster, category, getattr(policy, "unaware", False))
    return policy, jobs, round_s


def run_workload(workload: str, policy_name: str = "sia", cluster: str = "sia_hetero", round_s: float | None = None,
                 progress=None, **options) -> ElasticResult:
    """One of the paper's workloads (e.g. 'helios-1') under a policy, on a named or written cluster."""
    from hetsched.elastic.workloads import load_workload

    spec = ElasticCluster.parse(cluster, {t for a in load_applications().values() for t in a.types})
    policy, jobs, round_s = prepare(policy_name, spec, load_workload(workload), round_s, **options)
    return simulate_elastic(jobs, spec, policy, round_s, progress)
