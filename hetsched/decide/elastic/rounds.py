"""Elastic jobs on the one `Scheduler` (docs/rules.md#elastic-runtime): Sia, Pollux or Gavel+TJ as a whole-round
stage. Each round the elastic decide stage picks a (GPU type, GPU count) per job, the elastic placement puts it on
nodes (docs/rules.md#elastic-place) and this stage names its GPUs; a job whose allocation changed gets new GPUs and
restarts from its checkpoint with the new world size. Progress is what the runtime measured: the iterations each
job reported (the scheduler's `remaining`), from which its epoch, and so its gradient statistics, follow.
"""

from __future__ import annotations

from collections import Counter

import math
import time

import numpy as np

from hetsched.stages.plans import Assignment, RoundPlan
from hetsched.stages.decide import RoundStage
from hetsched.decide.elastic.apps import Application, load_applications
from hetsched.decide.elastic.cluster import ElasticCluster, place
from hetsched.decide.elastic.jobs import ADAPTIVE, Allocation, ElasticJob
from hetsched.decide.elastic.policies import make_elastic_policy
from hetsched.errors import HetschedError
from hetsched.model.catalog import split_job_type
from hetsched.model.cluster import Server
from hetsched.model.servers import Servers


class ApplicationKeys:
    """The job types elastic runs accept: the measured applications, at any GPU count, on the GPU types they were
    measured on (what `ThroughputTable` answers for the other pipelines: `in`, `job_types`, `gpu_types`, `name`,
    `lacks`)."""

    name = "elastic applications"

    def __init__(self, apps: dict[str, Application]):
        self.apps, self.job_types = apps, sorted(apps)
        self.gpu_types = tuple(sorted({t for a in apps.values() for t in a.types}))

    def why_not(self, job_type: str) -> str | None:
        """Why `job_type` (an application, optionally `app (batch size B)`) cannot run; None when it can."""
        app_name, batch = split_job_type(job_type)
        app = self.apps.get(app_name)
        if app is None:
            return f"job type {job_type!r} is not a measured application; elastic jobs run {', '.join(self.job_types)}"
        if batch is not None and not app.init_batch_size <= batch <= app.max_batch_size:
            return (f"batch size {batch} is outside {app.name}'s profiled range [{app.init_batch_size}, "
                    f"{app.max_batch_size}]")
        return None

    def __contains__(self, key) -> bool:
        return self.why_not(key.job_type) is None

    def lacks(self, job_type: str, scale_factor: int) -> str:
        return self.why_not(job_type) or f"job type {job_type!r} runs"


class ElasticRounds(RoundStage):
    """An elastic decide stage (`name`: sia, pollux, gavel+tj) over the scheduler's servers, grouped as nodes per
    GPU type; jobs keep their GPU ids while their allocation stands (their leases are extended)."""

    own_lease_start = True                # a new lease's start adds to the job's restore (R86a)

    def __init__(self, cluster, name: str, round_s: float, seed: int = 0, apps: dict | None = None,
                 prepared: tuple | None = None, time_scale: float = 1.0, lease_start_s: float = 0.0,
                 round_origin_s: float = 0.0):
        self.name, self.round_s, self.seed = name, float(round_s), seed
        self.k = float(time_scale)        # application seconds per second of the clock (R86a)
        self.lease_start_s = float(lease_start_s)     # a new lease's start on the runtime, added to its restore
        self.origin = float(round_origin_s) % self.round_s     # decisions at origin + k x round, after 0
        self._emulation: dict[tuple, tuple[float, float]] = {}   # (job id, new lease) -> (steps/s, restore s)
        self.apps = apps if apps is not None else load_applications()
        self.keys = ApplicationKeys(self.apps)
        self.elastic: dict[int, ElasticJob] = {}          # job id -> its elastic state, in arrival order
        self.total: dict[int, float] = {}                 # job id -> its steps in all
        self.named: dict[int, tuple[Allocation, tuple[int, ...]]] = {}   # job id -> (allocation, its GPU ids)
        # The simulator's accounts: per slot, the first start and the GPU-seconds per type; all GPU-seconds; the
        # jobs arrived and unfinished at each round's decision and the decision's CPU seconds (docs/rules.md R84).
        self.started: dict[int, float] = {}
        self.gpu_s: dict[int, dict[str, float]] = {}
        self.busy_gpu_s, self.stats = 0.0, None
        self.contention: list[int] = []
        self.decide_s: list[float] = []
        self._decided_at = 0.0
        self.finished: list[ElasticJob] = []              # in the order they completed
        self._layout(cluster)
        self.given: dict[int, ElasticJob] = {}
        if prepared is not None:                          # a workload table's decide stage and jobs (R82)
            self.policy, self.given = prepared[0], dict(prepared[1])
            self.category = next(iter(self.given.values())).category if self.given else ADAPTIVE
        else:
            self._new_policy()

    # ---- the cluster --------------------------------------------------------------------------------
    def _layout(self, cluster) -> None:
        """Each GPU type's nodes as `Servers` (docs/rules.md#servers), in the cluster's server order and numbering
        (`ClusterSpec.gpu_ids`); one node per type where the cluster names no servers."""
        nodes: dict[str, list[tuple[int, ...]]] = {}
        for server, ids in zip(cluster.server_shapes(), cluster.gpu_ids()):
            group = nodes.setdefault(server.gpu_type, [])
            if cluster.servers or not group:
                group.append(ids)
            else:                                          # single-GPU shapes of one type: one node
                group[0] += ids
        unmeasured = sorted(t for t in nodes if t not in self.keys.gpu_types)
        if unmeasured:
            raise HetschedError(f"elastic jobs: no measurements on GPU type(s) {', '.join(unmeasured)}; measured: "
                                f"{', '.join(self.keys.gpu_types)}")
        uneven = sorted(t for t, group in nodes.items() if len({len(ids) for ids in group}) > 1)
        if uneven:
            raise HetschedError(f"elastic jobs: the {', '.join(uneven)} servers differ in GPU count; an elastic "
                                "cluster has identical nodes per GPU type (e.g. 6x4@t4+3x8@rtx)")
        self.nodes = {t: Servers([Server(t, len(ids)) for ids in group], group) for t, group in nodes.items()}
        self.ecluster = ElasticCluster({t: (len(group), len(group[0])) for t, group in nodes.items()})

    def _new_policy(self) -> None:
        options = {"seed": self.seed} if self.name == "pollux" else {}
        self.policy, self.category, _ = make_elastic_policy(self.name, self.ecluster, self.round_s * self.k, **options)

    def cluster_changed(self) -> None:
        """Workers joined or left: the new nodes and a decide stage built on them (Pollux's search starts afresh); a
        job keeps its allocation where all its GPUs are still there."""
        before, self.named = self.named, {}
        self._layout(self.sched.cluster)
        self._new_policy()
        where = {g: (t, k) for t, servers in self.nodes.items() for g, k in servers.server_of.items()}
        for job_id, (alloc, gpus) in before.items():
            job = self.elastic.get(job_id)
            places = [where.get(g) for g in gpus]
            if job is None or job.alloc != alloc:
                continue
            if all(p is not None and p[0] == alloc.gpu_type for p in places):
                job.alloc = Allocation(alloc.gpu_type, tuple(sorted(Counter(node for _, node in places).items())))
                self.named[job_id] = (job.alloc, gpus)
            else:
                job.reallocate(None)          # its GPUs left: placed again at the next plan

    # ---- jobs ---------------------------------------------------------------------------------------
    @property
    def pool_types(self) -> tuple[str, ...]:
        return tuple(self.nodes)

    def job_added(self, job) -> None:
        s = self.sched.slot[job.job_id]
        self.gpu_s[s] = {}
        self.started.pop(s, None)
        self.total[job.job_id] = float(job.total_steps)
        given = self.given.pop(job.job_id, None)
        if given is not None:                           # checked row by row when its table was read
            self.elastic[job.job_id] = given
            return
        why = self.keys.why_not(job.job_type)
        if why is not None:
            raise HetschedError(f"job {job.job_id}: {why}")
        app = self.apps[job.model]
        lacking = [t for t in self.nodes if t not in app.types]
        if lacking:
            raise HetschedError(f"job {job.job_id}: {app.name} has no measurements on {', '.join(lacking)}, which this "
                                f"cluster has; it has {', '.join(sorted(app.types))}")
        if job.pinned_gpu_types:
            raise HetschedError(f"job {job.job_id}: pinned to {job.pinned_gpu_types}, and {self.name} chooses each "
                                "job's GPU type itself; submit it without a pin")
        batch = job.batch_size or min(app.init_batch_size * job.scale_factor, app.max_batch_size)
        self.elastic[job.job_id] = ElasticJob(str(job.job_id), app, job.arrival_time_s * self.k, job.scale_factor,
                                              batch, self.category, getattr(self.policy, "unaware", False))

    def job_removed(self, job_id: int) -> None:
        self.elastic.pop(job_id, None)
        self.total.pop(job_id, None)
        self.named.pop(job_id, None)

    # ---- rounds -------------------------------------------------------------------------------------
    def next_round_time(self, t: float) -> float:
        """The first decision at or after `t`: rounds keep a grid from the origin (0: the first decision one round
        in, R82), each decision after 0."""
        if not self.origin:
            return max(1.0, math.ceil(t / self.round_s)) * self.round_s
        at = self.origin + math.ceil((t - self.origin) / self.round_s) * self.round_s
        return at if at > 0 else at + self.round_s

    def idle_plan_s(self, now: float) -> float | None:
        """A round with jobs arrived and unfinished is decided even when the last one ran nothing (R82)."""
        return now + self.round_s if self.elastic else None

    def waiting_helps(self, now: float) -> bool:
        """Some job that holds no GPUs reaches the age at which it starts with nothing else running (Sia's restart
        factor, R80) within two rounds of now."""
        for job in self.elastic.values():
            if job.alloc is None:
                age = self.policy.start_age(job)
                if age is not None and now * self.k <= job.submit_s + age + 2 * self.round_s * self.k:
                    return True
        return False

    def plan(self, now: float, next_arrival_s: float | None):
        """One round: the decide stage's (type, count) per job, placed on nodes; a changed allocation restarts."""
        jobs = list(self.elastic.values())
        skipped = round((now - self._decided_at) / self.round_s) - 1     # idle rounds the loop did not visit
        self.contention += [0] * max(skipped, 0) + [len(jobs)]
        self.decide_s += [float("nan")] * max(skipped, 0)                    # no decision there: none timed
        self._decided_at = now
        start = time.process_time()
        wanted = self.policy.decide(jobs, now * self.k)
        self.decide_s.append(time.process_time() - start)
        allocs = place(self.ecluster, {j.name: j.alloc for j in jobs}, wanted)
        for job in jobs:
            new = allocs.get(job.name)
            if new != job.alloc:
                job.reallocate(new)
                if new is not None:
                    job.rescale_left += self.lease_start_s * self.k
        self._emulation = {}
        running = [(job_id, job) for job_id, job in self.elastic.items() if job.alloc is not None]
        columns = {t: i for i, t in enumerate(self.sched.gpu_types)}
        slot = self.sched.slot
        return RoundPlan(now, np.array([slot[j] for j, _ in running], np.int64),
                         np.array([columns[job.alloc.gpu_type] for _, job in running], np.int64), True,
                         steps=np.zeros(len(running)), end=now + self.round_s)   # progress is epochs (R77)

    def assign(self, plan) -> None:
        """Each running job's GPU ids: the ones it holds while its allocation stands, else free GPUs of the nodes
        its allocation names (jobs that keep theirs first)."""
        jobs = [int(self.sched.job_of_slot[s]) for s in plan.entry.tolist()]
        kept = {j: self.named[j][1] for j in jobs if j in self.named and self.named[j][0] == self.elastic[j].alloc}
        for servers in self.nodes.values():
            servers.reset()
        self.named = {}
        for j, gpus in kept.items():
            self.nodes[self.elastic[j].alloc.gpu_type].take(gpus)
            self.named[j] = (self.elastic[j].alloc, gpus)
        for j in jobs:
            if j in kept:
                continue
            alloc, servers = self.elastic[j].alloc, self.nodes[self.elastic[j].alloc.gpu_type]
            try:
                gpus = sum((servers.take_lowest(node, count) for node, count in alloc.nodes), ())
            except ValueError as err:
                raise HetschedError(f"elastic placement of {alloc.gpu_type}: {err} (a placement defect)") from None
            self.named[j] = (alloc, gpus)
        plan.assignments = [Assignment(s, (j,), w, self.named[j][1], (1.0,), len(self.named[j][1]))
                            for s, w, j in zip(plan.entry.tolist(), plan.gpu_type.tolist(), jobs)]

    def credit_measured(self, slots: np.ndarray, steps: np.ndarray, seconds: np.ndarray) -> np.ndarray:
        remaining, done = self.sched.remaining, []
        for s, ran, secs in zip(slots.tolist(), np.asarray(steps, float).tolist(), np.asarray(seconds).tolist()):
            remaining[s] -= ran
            job_id = int(self.sched.job_of_slot[s])
            self.elastic[job_id].run_measured(secs * self.k, 1.0 - remaining[s] / self.total[job_id])
            if remaining[s] <= 0:
                done.append(s)
        return np.array(done, np.int64)

    def credit_plan(self, plan) -> np.ndarray:
        """The simulator's round (R82): every job runs the round under its allocation, its progress the measured
        traces' (restore first); the slots of the jobs that completed in it."""
        done, slot = [], self.sched.slot
        for job_id, job in self.elastic.items():
            if job.alloc is None:
                continue
            s, seconds = slot[job_id], self.round_s * job.alloc.gpus
            self.started.setdefault(s, plan.now)
            self.gpu_s[s][job.alloc.gpu_type] = self.gpu_s[s].get(job.alloc.gpu_type, 0.0) + seconds
            self.busy_gpu_s += seconds
            job.step(self.round_s * self.k, plan.now * self.k)
            if job.completion_s is not None:
                job.alloc = None
                self.sched.remaining[s] = 0.0
                self.finished.append(job)
                done.append(s)
        return np.array(done, np.int64)

    def finish_s(self, slot: int, end: float) -> float:
        """A job completes inside the round, on the second its last epoch ends (R77)."""
        return float(self.elastic[int(self.sched.job_of_slot[slot])].completion_s) / self.k

    def account(self, slot: int) -> tuple[float, float, float, dict[str, float]]:
        """(first start, epochs done, cost (no prices), GPU-seconds per type) of the job in `slot`."""
        job = self.elastic[int(self.sched.job_of_slot[slot])]
        return self.started.get(slot, float("nan")), float(job.epoch), 0.0, dict(self.gpu_s[slot])

    def emulation(self, job_id: int, done_steps: float, new_lease: bool) -> tuple[float, float]:
        """What an emulated process of a job runs at (R86a): steps per second of the clock from `done_steps` on, by
        the measured traces on its allocation (its progress, batch and epoch as the simulator steps them) over the
        round of progress after the restore it has left; for a new lease that restore too (seconds of the clock:
        the process waits it out first, however many rounds it spans). Never 0 for a job that holds GPUs (0 tells
        a worker to use its own rate); (0, 0) for one that holds none."""
        hit = self._emulation.get((job_id, new_lease))
        if hit is not None:
            return hit
        job, total = self.elastic[job_id], self.total[job_id]
        if job.alloc is None or total <= 0:
            return 0.0, 0.0
        app, twin = job.app, job.twin()
        twin.progress = min(max(done_steps / total, 0.0), 1.0) * app.target_progress
        twin.epoch = min(int(np.searchsorted(app.epoch_progress[:app.max_epochs], twin.progress, side="right")),
                         app.max_epochs - 1)
        start, before, restore = self._decided_at * self.k, twin.progress, twin.rescale_left
        twin.step(restore + self.round_s * self.k, start)
        end = twin.completion_s if twin.completion_s is not None else start + restore + self.round_s * self.k
        steps = (twin.progress - before) / app.target_progress * total
        rate = steps / max(end - start - restore, 1e-9) * self.k
        hit = self._emulation[job_id, new_lease] = (max(rate, 1e-6), restore / self.k if new_lease else 0.0)
        return hit

    # ---- a restarted runtime ------------------------------------------------------------------------
    def histories(self, credited: list[int]) -> list[tuple[int, dict]]:
        """What a job's model learnt (its measured configurations per GPU type, its restarts): a restarted runtime
        gives it back, so that the decide stage does not profile the job from one GPU again."""
        out = []
        for job_id in credited:
            job = self.elastic.get(job_id)
            if job is not None:
                out.append((job_id, {"restarts": job.restarts, "grad": list(job.grad), "profiles": {
                    t: [[*k, *v] for k, v in seen.items()] for t, seen in job.profiles.items()}}))
        return out

    def restore(self, job_id: int, history: dict) -> None:
        job = self.elastic.get(job_id)
        if job is None:
            return
        job.restarts = history.get("restarts")
        grad = tuple(history.get("grad", (0.0, 0.0)))
        for gpu_type, rows in history.get("profiles", {}).items():
            job.alloc = Allocation(gpu_type, ())              # `_observe` learns into the allocation's model
            for nodes, replicas, atomic, step_s, sync_s in rows:
                job.atomic_bsz = int(atomic)
                job._observe(int(nodes), int(replicas), float(step_s), float(sync_s), grad)
        job.alloc, job.atomic_bsz = None, 0
