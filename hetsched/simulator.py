"""Drive the scheduling core on a virtual clock (spec/gavel.md s.3.7, s.4.2 and amendments 6, 8).

A round's combinations run `min(int(T * round), R)` steps each and finish at `now + steps / T`; the round ends
at the latest finish. Arrivals are admitted at round boundaries. With a measurement window the run ends when
every window job has finished while later jobs keep arriving. The round loop is numpy over the round's
combinations; per-job Python work happens only on arrivals and completions.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np

from .cluster import ClusterSpec
from .core import Scheduler
from .errors import HetschedError, SimulationError  # noqa: F401  (re-exported)
from .jobs import Job
from .policies.base import Policy, make_policy
from .result import Result, ResultBuilder
from .throughputs import ThroughputTable, load_throughputs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimulationConfig:
    """Mechanism parameters of a run."""

    round_s: float | None = None              # None: the policy family's round (Gavel 360 s, Synergy 300 s)
    min_reset_interval_s: float = 1920.0
    seed: int = 0
    window: tuple[int, int] | None = None     # job ids [start, end); None = every job
    ideal: bool = False
    placement_aware: bool = False
    record_timeline: bool = True
    max_rounds: int = 10_000_000
    # Throughput estimation for space sharing (spec s.5): (number of reference job types, profiling fraction).
    estimate_colocation: tuple[int, float] | None = None
    # Stop (SimulationError) once this many jobs are active: the queue only grows, i.e. the rate is saturated.
    max_active_jobs: int | None = None
    # CPU/memory-aware policies: the CPU:GPU ratio of the sensitivity profiles (3-6); None = from the cluster.
    profiles_ratio: int | None = None
    # Hierarchical policies: weight per entity (a job's `entity`); entities not listed weigh 1.
    entity_weights: Mapping[str, float] | None = None
    # Resource core: let one plan stand for several identical rounds (same JCTs, fewer steps).
    macro_rounds: bool = True
    # Resource core: rounds start at origin + k x round (Synergy's `--static` replays start at t = 1 s).
    round_origin_s: float = 0.0
    # Shockwave's round rules (spec/shockwave.md s.3, A1, A7): a job that did not run in the previous round
    # loses this many seconds of a full micro-task; batch sizes adapt at runtime (s.2.4); Gavel's trace-replay
    # rule (recompute at once when nothing runs and nothing will arrive) is absent.
    preemption_penalty_s: float = 0.0
    dynamic_adaptation: bool = False
    replay_reset: bool = True

    @classmethod
    def for_system(cls, system: str, **overrides) -> "SimulationConfig":
        """The round rules of an artifact: `gavel` (360 s), `synergy` (300 s) or `shockwave` (120 s)."""
        try:
            preset = SYSTEM_RULES[system]
        except KeyError:
            raise HetschedError(f"unknown system {system!r}; known: {', '.join(SYSTEM_RULES)}") from None
        return cls(**{**preset, **overrides})

    def round_for(self, policy: Policy) -> float:
        if self.round_s is not None:
            return float(self.round_s)
        if getattr(policy, "core_class", None) is not None:
            return 120.0
        return 300.0 if getattr(policy, "resource_aware", False) else 360.0


SYSTEM_RULES: dict[str, dict] = {
    "gavel": {"round_s": 360.0, "min_reset_interval_s": 1920.0},
    "synergy": {"round_s": 300.0},
    "shockwave": {"round_s": 120.0, "min_reset_interval_s": 1000.0, "preemption_penalty_s": 20.0,
                  "dynamic_adaptation": True, "replay_reset": False},
}


class Arrivals:
    """A lazily consumed, arrival-ordered job stream."""

    def __init__(self, jobs: Iterable[Job]):
        self._it: Iterator[Job] = iter(jobs)
        self._next: Job | None = next(self._it, None)
        self._last = -math.inf

    def peek_time(self) -> float | None:
        return None if self._next is None else self._next.arrival_time_s

    def pop_until(self, now: float) -> list[Job]:
        out = []
        while self._next is not None and self._next.arrival_time_s <= now:
            if self._next.arrival_time_s < self._last:
                raise SimulationError(f"job {self._next.job_id} arrives before the job before it")
            self._last = self._next.arrival_time_s
            out.append(self._next)
            self._next = next(self._it, None)
        return out


#: Policy parameters an artifact's driver passes (Shockwave runs AlloX with alpha = 0.2).
SYSTEM_POLICY_PARAMS: dict[str, dict[str, dict]] = {"shockwave": {"allox": {"alpha": 0.2}}}


def policy_for(name: str, seed: int, system: str | None = None, **params) -> Policy:
    """A fresh policy object; seeded policies (FIFO, Gandiva, Shockwave's MILP solver) get the run's seed, and
    an artifact's policies its driver's parameters."""
    from .policies.base import resolve_policy_name

    name = resolve_policy_name(name)
    seeded = name.split("_")[0] in ("fifo", "shockwave") or name == "gandiva"
    params = {**SYSTEM_POLICY_PARAMS.get(system or "", {}).get(name, {}), **params}
    return make_policy(name, **({"seed": seed} if seeded else {}), **params)


def simulate(jobs: Iterable[Job], cluster: ClusterSpec, policy: Policy | str,
             throughputs: ThroughputTable | str | None = None, config: SimulationConfig | None = None,
             on_progress: Callable[[float, int], None] | None = None, **overrides) -> Result:
    """Run `policy` on `cluster` over the (arrival-ordered) job stream and return the `Result`.

    `on_progress(now, finished_jobs)` is called every few hundred rounds (for progress bars).
    """
    sim = RoundSimulation(jobs, cluster, policy, throughputs, config, **overrides)
    if sim.config.ideal:
        from .ideal import run_ideal
        return run_ideal(sim.arrivals, sim.sched, sim.config)
    for rounds in range(sim.config.max_rounds):
        if not sim.step():
            return sim.result()
        if on_progress is not None and rounds % 200 == 0:
            on_progress(sim.now, sim.finished)
    raise SimulationError(f"stopped after max_rounds={sim.config.max_rounds}")


class RoundSimulation:
    """The round loop as an object: `step()` runs one iteration (credit, arrivals, plan), `result()` at the end."""

    def __init__(self, jobs: Iterable[Job], cluster: ClusterSpec, policy: Policy | str,
                 throughputs: ThroughputTable | str | None = None, config: SimulationConfig | None = None,
                 **overrides):
        self.config = config = replace(config or SimulationConfig(), **overrides)
        table = throughputs if isinstance(throughputs, ThroughputTable) else load_throughputs(
            throughputs or "gavel_simulation")
        if isinstance(policy, str):
            policy = policy_for(policy, config.seed)
        self.config = config = replace(config, round_s=config.round_for(policy))
        if getattr(policy, "resource_aware", False):
            from .resources import resource_core
            self.sched = resource_core(cluster, policy, config)
            self._init_loop(jobs)
            return
        estimator = None
        if config.estimate_colocation is not None:
            from .estimator import ThroughputEstimator
            from .policies.view import sorted_gpu_types
            refs, fraction = config.estimate_colocation
            estimator = ThroughputEstimator(table, sorted_gpu_types(cluster), num_reference=refs,
                                            profiling_fraction=fraction, seed=config.seed)
        resources = None
        if getattr(policy, "resource_mechanism", None):
            from .policies.view import sorted_gpu_types
            from .resources import load_sensitivity, profiles_ratio_for
            from .resources.hetero import TypeAwareResources
            resources = TypeAwareResources(cluster, sorted_gpu_types(cluster), table, policy.resource_mechanism,
                                           load_sensitivity(config.profiles_ratio or profiles_ratio_for(cluster)),
                                           least_free=getattr(policy, "resource_least_free", False))
        adaptation = None
        if config.dynamic_adaptation:
            from .adaptation.runtime import RuntimeAdaptation
            adaptation = RuntimeAdaptation(table)
        core = getattr(policy, "core_class", None) or Scheduler
        self.sched = core(cluster, policy, table, round_s=config.round_s,
                          min_reset_interval_s=config.min_reset_interval_s, seed=config.seed,
                          placement_aware=config.placement_aware, estimator=estimator, resources=resources,
                          adaptation=adaptation, entity_weights=config.entity_weights)
        self._init_loop(jobs)
        if config.dynamic_adaptation:
            from .adaptation.tracking import AdaptationTracker
            self.tracker = AdaptationTracker(self, table)

    def _init_loop(self, jobs: Iterable[Job]) -> None:
        config = self.config
        self.arrivals = Arrivals(jobs)
        self.out = ResultBuilder(self.sched, config)
        if getattr(self.sched, "leases_end_with_rounds", False):
            self.step = self._step_leases          # type: ignore[method-assign]
        self.window_left = None if config.window is None else config.window[1] - config.window[0]
        self.place = config.record_timeline or config.placement_aware
        self.now = self.round_start = 0.0
        self.plan = None
        self.finished = 0
        self._stalled = 0
        self._steps = self._finish = self._ends = None
        self.tracker = None

    def step(self) -> bool:
        """One iteration of the event loop; False once the run is over."""
        sched, config, out, arrivals = self.sched, self.config, self.out, self.arrivals
        plan = self.plan
        running = plan is not None and len(plan.entry) > 0
        if self.window_left == 0 or (self.window_left is None and not sched.jobs and arrivals.peek_time() is None):
            return False
        tracker = self.tracker
        if running:
            now = self.now = float(self._ends.max())
            steps, exec_time = self._steps, self._ends - self.round_start
            if tracker is not None:
                steps, exec_time = tracker.penalize(plan, steps, exec_time)
            out.round_done(plan, steps, self.round_start, self._ends, None if tracker is None else exec_time)
            completed = sched.credit(plan.entry, plan.gpu_type, steps, exec_time)
            members = sched.members[plan.entry]
            if tracker is not None:
                completed = tracker.after_round(plan, completed, exec_time)
            for slot in completed.tolist():
                k, col = np.argwhere(members == slot)[0]
                self._retire(slot, float(self._finish[k, col]))
        elif not self._idle(lambda t: t):
            return False
        if tracker is not None:
            sched.flag_batch_sizes()
        now = self.now
        if not self._admit(now):
            return False
        exhausted = arrivals.peek_time() is None
        self.round_start = now                   # after an idle gap the round starts now, not at the last end
        # With nothing running and nothing left to arrive, waiting cannot help: recompute now.
        replay = config.replay_reset and not running and exhausted and bool(sched.jobs)
        plan = self.plan = sched.plan(now, force_recompute=replay, place=self.place)
        out.planned(plan)
        if len(plan.entry):
            members = sched.members[plan.entry]
            tput = sched.etput[plan.entry, plan.gpu_type]                     # (k, 2) steps/s per member
            steps = np.zeros_like(tput)
            finish = np.full_like(tput, -np.inf)
            for col in ((0,) if not sched._has_pairs else (0, 1)):
                v = members[:, col] >= 0
                t = tput[v, col]
                steps[v, col] = np.minimum(np.floor(t * config.round_s), sched.remaining[members[v, col]])
                finish[v, col] = now + steps[v, col] / t
            self._steps, self._finish, self._ends = steps, finish, finish.max(axis=1)
            self._stalled = 0
        elif exhausted:
            self._stalled += 1
            if self._stalled > 2:
                raise SimulationError(f"no job can run and none will arrive; stuck jobs {sorted(sched.jobs)[:5]} "
                                      f"(does each fit on some GPU type with non-zero throughput?)")
        return True

    def _retire(self, slot: int, finish: float) -> None:
        """A job completed at `finish`: record it and free its slot."""
        job_id = int(self.sched.job_of_slot[slot])
        self.out.completed(job_id, slot, finish)
        self.sched.remove_job(job_id)
        self.finished += 1
        window = self.config.window
        if window is not None and window[0] <= job_id < window[1]:
            self.window_left -= 1

    def _idle(self, align) -> bool:
        """Nothing ran: wait for the next arrival (`align` maps it to a round start); False if none is left."""
        nxt = self.arrivals.peek_time()
        if nxt is not None:
            self.now = max(self.now, align(nxt))
            return True
        return bool(self.sched.jobs)

    def _admit(self, now: float) -> bool:
        """Jobs that arrived by `now` join (too many active jobs: the rate is saturated); False once the
        measurement window is complete."""
        sched = self.sched
        for job in self.arrivals.pop_until(now):
            sched.add_job(job)
            self.out.arrived(job, sched.slot[job.job_id])
            if self.tracker is not None:
                self.tracker.arrived(job)
        limit = self.config.max_active_jobs
        if limit is not None and len(sched.jobs) > limit:
            raise SimulationError(f"saturated: {len(sched.jobs)} active jobs at t={now:.0f} s (max_active_jobs={limit})")
        return self.window_left != 0

    def _step_leases(self) -> bool:
        """`step` for cores whose leases all end with the round (the resource core): a plan covers
        `plan.rounds` identical rounds from `plan.now` to `plan.end`; arrivals wait for the next round."""
        sched, out, arrivals = self.sched, self.out, self.arrivals
        plan = self.plan
        if self.window_left == 0 or (self.window_left is None and not sched.jobs and arrivals.peek_time() is None):
            return False
        if plan is not None and len(plan.entry):
            now = self.now = plan.end
            if out.record_timeline:
                k = len(plan.entry)
                out.round_done(plan, np.stack([plan.steps, np.zeros(k)], axis=1), plan.now, np.full(k, now))
            for slot in sched.credit_plan(plan).tolist():
                self._retire(slot, now)
        elif not self._idle(sched.next_round_time):
            return False
        now = self.now
        if not self._admit(now):
            return False
        sched.next_arrival_s = nxt = arrivals.peek_time()
        plan = self.plan = sched.plan(now)
        if len(plan.entry):
            out.rounds += plan.rounds
            self._stalled = 0
        elif nxt is None:
            self._stalled += 1
            if self._stalled > 2:
                raise SimulationError(f"no job can run and none will arrive; stuck jobs {sorted(sched.jobs)[:5]} "
                                      f"(does each fit on some server?)")
        return True

    def result(self) -> Result:
        result = self.out.build(self.now)
        if self.tracker is not None:
            self.tracker.annotate(result)
        return result
