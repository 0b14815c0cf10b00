"""Gavel with TunedJobs as Sia's artifact sets it up (docs/rules.md#gavel-tj): rigid jobs at the trace's tuned GPU
count and batch size, the heterogeneity-aware max-sum-throughput LP (ECOS, as the artifact), and Gavel's round
mechanism: per type, jobs in order of priority (allocation over the share of time received), then deficit, then
allocation, each taking its GPUs on one type. Themis+TJ (Table 4) is the same with the core's finish-time-fairness
policy for the allocation (docs/rules.md#themis-tj).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hetsched.decide.elastic.cluster import ElasticCluster
from hetsched.decide.elastic.jobs import ElasticJob

NO_FIT_RATE = 0.1           # the artifact's rate for a job on a type that cannot hold it
NEW_JOB_BOOST = 1e9


def packed(gpus: int, per_node: int) -> tuple[int, ...]:
    """GPUs filled node by node: 12 GPUs on 8-GPU nodes -> (8, 4)."""
    return tuple([per_node] * (gpus // per_node) + ([gpus % per_node] if gpus % per_node else []))


@dataclass
class GavelTunedJobs:
    cluster: ElasticCluster
    round_s: float = 360.0
    solver: str = "ECOS"
    name: str = "gavel+tj"
    #: A core allocation policy (`hetsched.decide.gavel`) in place of the max-sum-throughput LP: Themis+TJ's
    #: finish-time fairness. None: Gavel+TJ's own LP, as the artifact.
    policy: object = None
    _rates: dict = field(default_factory=dict)
    received: dict = field(default_factory=dict)     # job -> {gpu type: seconds run}
    admitted: dict = field(default_factory=dict)     # job -> time first seen
    _last: tuple = ()
    _x: np.ndarray | None = None

    def rate(self, job: ElasticJob, gpu_type: str) -> float:
        """Steps per second of the rigid job on `gpu_type`, at its GPU count packed onto nodes."""
        key = (job.name, gpu_type)
        if key not in self._rates:
            nodes, per_node = self.cluster.types[gpu_type]
            if job.target_replicas > nodes * per_node:
                self._rates[key] = NO_FIT_RATE
            else:
                profile, app = job.app.types[gpu_type], job.app
                from hetsched.decide.elastic.goodput import split_batch
                local = -(-job.target_batch // job.target_replicas)
                atomic, accum = split_batch(local, job.target_replicas, profile.max_local_bsz, app.init_batch_size)
                step, sync = profile.step_time(packed(job.target_replicas, per_node), int(atomic))
                self._rates[key] = app.calibration / (step + int(accum) * (step - sync))
        return self._rates[key]

    def allocation(self, jobs: list[ElasticJob], now: float) -> np.ndarray:
        """The LP's time fractions x[job, type]: maximise the summed rate within each job's time and each type's
        GPUs (or the core policy's, `policy`), recomputed when the job set changes."""
        import cvxpy as cp

        names = tuple(j.name for j in jobs)
        if names == self._last and self._x is not None:
            return self._x
        types = list(self.cluster.types)
        rates = np.array([[self.rate(j, t) for t in types] for j in jobs])
        scale = np.array([j.target_replicas for j in jobs], dtype=float)
        if self.policy is not None:
            x = self._policy_allocation(jobs, types, rates, scale, now)
        else:
            x = cp.Variable(rates.shape)
            capacity = np.array([self.cluster.gpus(t) for t in types], dtype=float)
            problem = cp.Problem(cp.Maximize(cp.sum(cp.multiply(rates, x))),
                                 [x >= 0, x <= 1, cp.sum(x, axis=1) <= 1, scale @ x <= capacity])
            problem.solve(solver=self.solver)
            x = np.clip(np.asarray(x.value), 0.0, 1.0)
        self._x, self._last = x, names
        return x

    def _policy_allocation(self, jobs: list[ElasticJob], types: list[str], rates: np.ndarray, scale: np.ndarray,
                           now: float) -> np.ndarray:
        """The core policy's time fractions over a view of the rigid jobs: their rates per type at the tuned GPU
        count, and their remaining progress in the same units (docs/rules.md#themis-tj)."""
        from hetsched.decide.gavel.base import PolicyView

        view = PolicyView(np.arange(len(jobs)), tuple(types),
                          np.array([self.cluster.gpus(t) for t in types], dtype=float), rates, scale.astype(np.int64),
                          np.ones(len(jobs)),
                          np.array([max(j.app.target_progress - j.progress, 1e-9) for j in jobs]),
                          np.array([now - self.admitted[j.name] for j in jobs]), now=now)
        return np.clip(np.asarray(self.policy.allocate(view).x, float), 0.0, 1.0)

    def start_age(self, job: ElasticJob) -> float | None:
        """A job left out with nothing else running does not start by waiting alone."""
        return None

    def decide(self, jobs: list[ElasticJob], now: float) -> dict[str, tuple[str, int]]:
        for job in jobs:
            self.admitted.setdefault(job.name, now)
            if job.alloc is not None:                # credit the round that just ran
                got = self.received.setdefault(job.name, {})
                got[job.alloc.gpu_type] = got.get(job.alloc.gpu_type, 0.0) + self.round_s
        if not jobs:
            return {}
        x = self.allocation(jobs, now)
        types = list(self.cluster.types)
        entries = []
        for i, job in enumerate(jobs):
            age = now - self.admitted[job.name]
            got = self.received.get(job.name, {})
            for k, t in enumerate(types):
                share = x[i, k]
                if share <= 0:
                    continue
                run = got.get(t, 0.0)
                priority = share * NEW_JOB_BOOST if run == 0 or age <= 0 else share / (run / age)
                deficit = share * age - run
                entries.append((-priority, -deficit, -share, i, t))
        entries.sort()
        free = {t: self.cluster.gpus(t) for t in types}
        chosen: dict[str, tuple[str, int]] = {}
        for *_, i, t in entries:
            job = jobs[i]
            if job.name in chosen or free[t] < job.target_replicas:
                continue
            free[t] -= job.target_replicas
            chosen[job.name] = (t, job.target_replicas)
        return chosen
