"""Drive the scheduling core on a virtual clock (docs/rules.md#round, docs/rules.md#credit).

A round's combinations run `min(int(T * round), R)` steps each and finish at `now + steps / T`; the round ends
at the latest finish. Arrivals are admitted at round boundaries. With a measurement window the run ends when
every window job has finished while later jobs keep arriving. The round loop is numpy over the round's
combinations; per-job Python work happens only on arrivals and completions.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import replace
from typing import Callable, Iterable, Iterator

import numpy as np

from hetsched.model.cluster import ClusterSpec
from hetsched.errors import HetschedError, SimulationError  # noqa: F401  (SimulationError re-exported)
from hetsched.model.jobs import Job
from hetsched.compiled import kernels, round_kernels
from hetsched.compiled.round_kernels import QuietRounds
from hetsched.core.pipeline import Pipeline
from hetsched.stages.rounds import grid_start
from hetsched.select.priority import PrioritySelect
from hetsched.rounds.tasks import TaskRounds
from hetsched.core.registry import build_scheduler, decide_of, pipeline_for, policy_for  # noqa: F401  (re-exported)
from hetsched.sim.result import Result, ResultBuilder
from hetsched.core.run_config import SYSTEM_RULES, SimulationConfig, auto_system  # noqa: F401  (re-exported)
from hetsched.model.throughputs import ThroughputTable, load_throughputs

log = logging.getLogger(__name__)


class Arrivals:
    """A lazily consumed, arrival-ordered job stream."""

    def __init__(self, jobs: Iterable[Job]):
        self._it: Iterator[Job] = iter(jobs)
        self._next: Job | None = next(self._it, None)
        self._last = -math.inf
        self._last_id = None

    def peek_time(self) -> float | None:
        return None if self._next is None else self._next.arrival_time_s

    def pop_until(self, now: float) -> list[Job]:
        out = []
        while self._next is not None and self._next.arrival_time_s <= now:
            if self._next.arrival_time_s < self._last:
                raise SimulationError(f"job {self._next.job_id} arrives at {self._next.arrival_time_s:g} s, before "
                                      f"job {self._last_id} at {self._last:g} s: a stream is in arrival order")
            self._last, self._last_id = self._next.arrival_time_s, self._next.job_id
            out.append(self._next)
            self._next = next(self._it, None)
        return out


def simulate(jobs: Iterable[Job], cluster: ClusterSpec, policy: Pipeline | object | str,
             throughputs: ThroughputTable | str | None = None, config: SimulationConfig | None = None,
             on_progress: Callable[[float, int], None] | None = None, **overrides) -> Result:
    """Run `policy` (a name, a decide-stage object or a `Pipeline`) on `cluster` over the (arrival-ordered) job
    stream and return the `Result`. Without a `config`, the rules are those `hetsched simulate --rules auto`
    picks (Shockwave's for its planner and for a job list with batch-size adaptation, else the defaults); a
    policy named by string gets the named rules' driver parameters (docs/rules.md#auto-rules).

    `on_progress(now, finished_jobs)` is called every 200 rounds (events, in the fluid model: progress bars and
    a sweep's bounds).
    """
    sim = RoundSimulation(jobs, cluster, policy, throughputs, config, **overrides)
    rounds, limit = 0, sim.config.max_rounds
    while rounds < limit:
        # A step may run further rounds in which nothing happens (`quiet_rounds`), never past the next progress
        # report or the round limit, so both come after the same rounds as one step at a time.
        sim.budget = min(limit - 1 - rounds, -rounds % 200 if on_progress is not None else limit)
        if not sim.step():
            return sim.result()
        rounds += sim.extra
        if on_progress is not None and rounds % 200 == 0:
            on_progress(sim.now, sim.finished)
        rounds += 1
    raise SimulationError(f"stopped after max_rounds={sim.config.max_rounds}")


def _check_window(window: tuple[int, int], jobs) -> None:
    """A window with job ids the list lacks measured fewer jobs than it names (or none, after the whole run)."""
    ids = {j.job_id for j in jobs}
    lacking = sum(i not in ids for i in range(*window))
    if lacking:
        span = f"ids {min(ids)} to {max(ids)}" if ids else "no jobs"
        raise HetschedError(f"window {window[0]}:{window[1]} names {lacking} job ids that the {len(jobs)} jobs "
                            f"lack ({span})")      # not a SimulationError: a sweep would read it as saturation


class RoundSimulation:
    """The one round loop as an object: `step()` runs one iteration (credit, arrivals, plan, run) of any
    pipeline's scheduler; `result()` at the end (docs/rules.md#round)."""

    def __init__(self, jobs: Iterable[Job], cluster: ClusterSpec, policy: Pipeline | object | str,
                 throughputs: ThroughputTable | str | None = None, config: SimulationConfig | None = None,
                 **overrides):
        if config is None and not isinstance(policy, Pipeline):     # the rules `--rules auto` picks
            system = auto_system(decide_of(policy_for(policy, 0) if isinstance(policy, str) else policy).kind, jobs)
            config = SimulationConfig.for_system(system) if system else SimulationConfig()
        config = replace(config or SimulationConfig(), **overrides)
        # A name or path is read (once per process); a table object, or what answers for one (the elastic stage's
        # applications, `rounds.ApplicationKeys`), is taken as it is.
        table = load_throughputs(throughputs or "gavel_simulation") if throughputs is None or isinstance(
            throughputs, (str, os.PathLike)) else throughputs
        if isinstance(policy, str):
            policy = policy_for(policy, config.seed, system=config.system)
        pipeline = policy if isinstance(policy, Pipeline) else pipeline_for(policy, config, cluster)
        self.pipeline, self.rules = pipeline, pipeline.rules
        self.config = config = replace(config, round_s=pipeline.rules.round_s)
        self.sched = build_scheduler(pipeline, cluster, table, seed=config.seed,
                                     entity_weights=config.entity_weights)
        if config.window is not None and isinstance(jobs, (list, tuple)):
            _check_window(config.window, jobs)
        self.arrivals = Arrivals(jobs)
        # Progress is credited per micro-task, or with the whole plan: a round (docs/rules.md#credit) or, in the ideal
        # mechanism, the fluid rates' interval up to the next event (docs/rules.md#ideal).
        whole = self.rules.credit == "round" or self.rules.ideal
        self.out = ResultBuilder(self.sched, config, core_accounts=whole)
        self.window_left = None if config.window is None else config.window[1] - config.window[0]
        self.place = config.record_timeline or config.placement_aware or bool(self.rules.lease_start_s)
        self._leases: dict[tuple[int, ...], tuple] = {}     # each running lease's GPUs and share (lease start)
        self.now = self.round_start = 0.0
        self.plan = None
        self.finished = 0
        self._stalled = 0
        self._steps = self._finish = self._ends = None
        self._delay = None                                   # server rounds: each planned job's lease start
        self.tracker = None
        if pipeline.rates.batch_size:
            from hetsched.rates.adaptation.tracking import AdaptationTracker
            self.tracker = AdaptationTracker(self, table)
        # When progress is credited (docs/rules.md#credit): at each micro-task's own finish, or with the round.
        self._credit, self._run = (self._credit_tasks, self._run_tasks) if not whole else \
            (self._credit_round, self._run_round)
        # Compiled credit that may go on with quiet rounds (compiled/kernels.py): per-entry micro-tasks, no stage that
        # acts between rounds (decide, CPU/memory placement, batch sizes, estimates, leases); a shuffled type order
        # is drawn in the kernel from the scheduler's generator state.
        sched = self.sched
        self._quiet = round_kernels.ENABLED and not whole and not self.rules.fixed_rounds and not (
            self.place or sched.placement_aware or self.out.record_timeline) and (
            not sched.selector.shuffle or sched.selector.mt is not None) and (
            self.tracker is None and sched.decide is None and sched.resources is None and sched.estimator is None)
        self.budget = self.extra = 0         # quiet rounds allowed in the next step / run in the last one
        self._fits: set[tuple] = set()       # (job type, GPUs, pins) that some GPU type holds

    def step(self) -> bool:
        """One iteration of the event loop; False once the run is over."""
        sched, arrivals = self.sched, self.arrivals
        plan = self.plan
        self.extra = 0                           # quiet rounds this step ran after the credited one
        running = plan is not None and len(plan.entry) > 0
        if self.window_left == 0 or (self.window_left is None and not sched.jobs and arrivals.peek_time() is None):
            return False
        if running:
            self._credit(plan)
        elif not self._idle():
            return False
        if self.tracker is not None:
            sched.batch_sizes.flag()
        now = self.now
        if not self._admit(now):
            return False
        nxt = arrivals.peek_time()
        self.round_start = now                   # after an idle gap the round starts now, not at the last end
        # With nothing running and nothing left to arrive, waiting cannot help: recompute now (docs/rules.md#reset).
        replay = self.rules.replay_reset and not running and nxt is None and bool(sched.jobs)
        plan = self.plan = sched.rounds.plan_round(now, replay, self.place, nxt, False)    # the round rules' plan
        self.out.planned(plan)
        if len(plan.entry):
            self._run(plan)
            self._stalled = 0
        elif nxt is None:
            self._stalled += 1
            if self._stalled > 2 and not sched.rounds.waiting_helps(now):
                raise SimulationError(f"no job can run and none will arrive; stuck jobs {sorted(sched.jobs)[:5]} "
                                      f"(does each fit on some GPU type with non-zero throughput, and on some "
                                      f"server?)")
        return True

    # ---- run and credit: per micro-task (Gavel, Shockwave) ---------------------------------------------------
    def _run_tasks(self, plan) -> None:
        """Each combination runs `min(floor(rate x round), remaining)` steps and ends at `now + steps / rate`."""
        sched, now = self.sched, self.now
        if round_kernels.ENABLED and not self.rules.lease_start_s:   # compiled, the same arithmetic as below
            self._steps, self._finish, self._ends = round_kernels.run_tasks(
                plan.entry, plan.gpu_type, sched.members, sched.etput, sched.remaining, now, self.config.round_s)
            return
        members = sched.members[plan.entry]
        tput = sched.etput[plan.entry, plan.gpu_type]                     # (k, 2) steps/s per member
        steps = np.zeros_like(tput)
        finish = np.full_like(tput, -np.inf)
        delays = self._lease_delays(plan)            # docs/rules.md#lease-start: a new lease starts late
        for col in ((0,) if not sched.entry_table.has_pairs else (0, 1)):
            v = members[:, col] >= 0
            t = tput[v, col]
            delay = 0.0 if delays is None else delays[v]
            span = np.maximum(self.config.round_s - delay, 0.0)
            steps[v, col] = np.minimum(np.floor(t * span), sched.remaining[members[v, col]])
            finish[v, col] = now + delay + steps[v, col] / t
        self._steps, self._finish, self._ends = steps, finish, finish.max(axis=1)

    def _lease_delays(self, plan) -> np.ndarray | None:
        """docs/rules.md#lease-start: per planned row, `lease_start_s` where its jobs did not run in the previous
        round on the same GPUs with the same CPU/memory share (the runtime gives them a new lease), else 0; None
        when the rule is off."""
        d = self.rules.lease_start_s
        if not d:
            return None
        now = {a.entry: (a.job_ids, (a.gpu_type, a.gpus, a.cpus, a.mem_gb)) for a in plan.assignments}
        prev, self._leases = self._leases, dict(now.values())
        return np.array([d if e not in now or prev.get(now[e][0]) != now[e][1] else 0.0
                         for e in plan.entry.tolist()])

    def _credit_tasks(self, plan) -> None:
        """The round ends at its latest micro-task; each job completes at its own finish time."""
        sched, tracker = self.sched, self.tracker
        # The quiet rounds run Gavel's select and micro-task credit compiled: a swapped stage turns them off.
        if self._quiet and type(sched.selector) is PrioritySelect and type(sched.rounds) is TaskRounds:
            return self._credit_quiet(plan)
        # docs/rules.md#fixed-rounds: the runtime's round lasts its length whenever its micro-tasks end
        self.now = self.round_start + self.config.round_s if self.rules.fixed_rounds else float(self._ends.max())
        steps, exec_time = self._steps, self._ends - self.round_start
        if tracker is not None:
            steps, exec_time = tracker.penalize(plan, steps, exec_time)
        self.out.round_done(plan, steps, self.round_start, self._ends, None if tracker is None else exec_time)
        completed = sched.rounds.credit(plan.entry, plan.gpu_type, steps, exec_time)
        if tracker is None and not len(completed):
            return
        members = sched.members[plan.entry].ravel()                       # (k, 2) -> aligned with finish
        if tracker is not None:
            completed = tracker.after_round(plan, completed, exec_time)
        finish = self._finish.ravel()
        for slot in completed.tolist():
            self._retire(slot, float(finish[np.flatnonzero(members == slot)[0]]))

    def _credit_quiet(self, plan) -> None:
        """`_credit_tasks` compiled, with up to `budget` further rounds while nothing happens between them."""
        sched, out, nxt = self.sched, self.out, self.arrivals.peek_time()
        now, self.round_start, self.extra, done, finish, out.busy = round_kernels.quiet_rounds(QuietRounds(
            plan.entry, plan.gpu_type, self._steps, self._finish, self._ends, self.round_start, self.budget,
            *sched.selector.walk_state(), *out.accounts(), self.config.round_s, math.inf if nxt is None else nxt,
            *sched.reset_state(), out.busy))
        self.now = float(now)
        out.rounds += self.extra
        for slot, end in zip(done.tolist(), finish.tolist()):
            self._retire(slot, end)

    # ---- run and credit: every lease ends with the round (Synergy) ----------------------------------------
    def _run_round(self, plan) -> None:
        """The plan already holds each job's iterations and covers `plan.rounds` identical rounds; a new lease
        runs its round from `lease_start_s` on (docs/rules.md#lease-start; one plan per round then)."""
        self._delay = None
        if self.rules.lease_start_s and not self.sched.rounds.own_lease_start:
            self.sched.rounds.assign(plan)
            self._delay = self._lease_delays(plan)
            share = np.maximum(self.config.round_s - self._delay, 0.0) / self.config.round_s
            plan.steps = np.minimum(plan.steps, np.floor(plan.round_steps * share))

    def _credit_round(self, plan) -> None:
        now = self.now = plan.end
        if self.out.record_timeline and not self.rules.ideal:      # fluid shares hold no GPUs to show
            k = len(plan.entry)
            self.out.round_done(plan, np.stack([plan.steps, np.zeros(k)], axis=1), plan.now, np.full(k, now))
        done = self.sched.rounds.credit_plan(plan)
        if self.rules.fixed_rounds and len(done):       # docs/rules.md#fixed-rounds: done at its last step
            row = {s: i for i, s in enumerate(plan.entry.tolist())}
            k = np.array([row[s] for s in done.tolist()], np.int64)
            per_round = np.maximum(plan.round_steps[k], 1.0)
            last = plan.steps[k] - per_round * (plan.rounds - 1)             # its steps in the plan's last round
            delay = 0.0 if self._delay is None else self._delay[k]
            ends = now - self.config.round_s + np.minimum(delay + last * self.config.round_s / per_round,
                                                          self.config.round_s)
            for slot, end in zip(done.tolist(), ends.tolist()):
                self._retire(slot, end)
            return
        for slot in done.tolist():
            self._retire(slot, self.sched.rounds.finish_s(slot, now))

    def _retire(self, slot: int, finish: float) -> None:
        """A job completed at `finish`: record it and free its slot."""
        job_id = int(self.sched.job_of_slot[slot])
        self.out.completed(job_id, slot, finish)
        self.sched.remove_job(job_id)
        self.finished += 1
        window = self.config.window
        if window is not None and window[0] <= job_id < window[1]:
            self.window_left -= 1

    def _idle(self) -> bool:
        """Nothing ran: wait for the round that holds the next arrival, or the round rules' next plan if that is
        sooner (an elastic stage decides every round while jobs wait, docs/rules.md#elastic-loop); False if
        neither is left and no job waits."""
        nxt = self.arrivals.peek_time()
        sched = self.sched
        wake = sched.rounds.idle_plan_s(self.now) if sched.jobs else None
        if nxt is not None:
            rules = self.rules
            start = grid_start(nxt, rules.grid_origin_s, rules.round_s) if rules.fixed_rounds else \
                sched.rounds.next_round_time(nxt)
            self.now = max(self.now, start if wake is None else min(start, wake))
            return True
        if wake is not None:
            self.now = max(self.now, wake)
        return bool(sched.jobs)

    def _admit(self, now: float) -> bool:
        """Jobs that arrived by `now` join (too many active jobs: the rate is saturated); False once the
        measurement window is complete."""
        sched = self.sched
        for job in self.arrivals.pop_until(now):
            sched.add_job(job)
            self._check_fits(job)
            self.out.arrived(job, sched.slot[job.job_id])
            if self.tracker is not None:
                self.tracker.arrived(job)
        limit = self.config.max_active_jobs
        if limit is not None and len(sched.jobs) > limit:
            raise SimulationError.saturated(len(sched.jobs), now, limit)
        return self.window_left != 0

    def _check_fits(self, job: Job) -> None:
        """A job no GPU type can hold (its GPUs on one type, at a rate above 0) would wait until the whole stream
        has run and then stop the run as stuck: refused when it arrives. Server rounds check their pool's size."""
        sched = self.sched
        key = (job.job_type, job.scale_factor, job.pinned_gpu_types)     # what the answer depends on
        if not sched.rounds.reads_table or key in self._fits:     # a whole-round stage checks its own
            return
        s = sched.slot[job.job_id]
        runs = sched.tput[s] > 0
        if (runs & (sched.capacity >= job.scale_factor)).any():
            self._fits.add(key)
        else:
            where = ", ".join(f"{g}={int(c)}" for g, c, ok in zip(sched.gpu_types, sched.capacity, runs) if ok)
            raise SimulationError(f"job {job.job_id} ({job.job_type}) needs {job.scale_factor} GPUs of one type; the "
                                  f"types it can run on have {where or 'none'}")

    def result(self) -> Result:
        result = self.out.build(self.now)
        if self.tracker is not None:
            self.tracker.annotate(result)
        return result
