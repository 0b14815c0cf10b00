"""Drive the scheduling core on a virtual clock (spec/gavel.md s.3.7, s.4.2 and amendments 6, 8).

A round's combinations run `min(int(T * round), R)` steps each and finish at `now + steps / T`; the round ends
at the latest finish. Arrivals are admitted at round boundaries. With a measurement window the run ends when
every window job has finished while later jobs keep arriving.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from .cluster import ClusterSpec
from .core import Scheduler
from .errors import HetschedError
from .jobs import Job
from .policies.base import Policy, make_policy
from .result import Result, ResultBuilder
from .throughputs import ThroughputTable, load_throughputs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimulationConfig:
    """Mechanism parameters of a run."""

    round_s: float = 360.0
    min_reset_interval_s: float = 1920.0
    seed: int = 0
    window: tuple[int, int] | None = None     # job ids [start, end); None = every job
    ideal: bool = False
    placement_aware: bool = False
    record_timeline: bool = True
    max_rounds: int = 10_000_000



class SimulationError(HetschedError, RuntimeError):
    """The simulation cannot make progress (e.g. a job that fits on no GPU type)."""


class _Arrivals:
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


def simulate(jobs: Iterable[Job], cluster: ClusterSpec, policy: Policy | str,
             throughputs: ThroughputTable | str | None = None, config: SimulationConfig | None = None,
             **overrides) -> Result:
    """Run `policy` on `cluster` over the (arrival-ordered) job stream and return the `Result`."""
    config = config or SimulationConfig()
    if overrides:
        from dataclasses import replace
        config = replace(config, **overrides)
    table = throughputs if isinstance(throughputs, ThroughputTable) else load_throughputs(
        throughputs or "gavel_simulation")
    if isinstance(policy, str):
        policy = make_policy(policy, **({"seed": config.seed} if policy.split("_")[0] in ("fifo", "gandiva")
                                        else {}))
    scheduler = Scheduler(cluster, policy, table, round_s=config.round_s,
                          min_reset_interval_s=config.min_reset_interval_s, seed=config.seed,
                          placement_aware=config.placement_aware)
    if config.ideal:
        from .ideal import run_ideal
        return run_ideal(jobs, scheduler, config)
    return _run_rounds(_Arrivals(jobs), scheduler, config)


def _run_rounds(arrivals: _Arrivals, sched: Scheduler, config: SimulationConfig) -> Result:
    out = ResultBuilder(sched, config)
    window = config.window
    window_left = None if window is None else window[1] - window[0]
    now = 0.0
    round_start = 0.0
    running: list = []           # (assignment, steps per job, finish per job, combination finish)
    stalled = 0
    for _ in range(config.max_rounds):
        if window_left == 0 or (window_left is None and not sched.jobs and arrivals.peek_time() is None
                                and not running):
            break
        if running:
            now = max(r[3] for r in running)
        else:
            nxt = arrivals.peek_time()
            if nxt is None:
                if not sched.jobs:
                    break
            else:
                now = max(now, nxt)
        for assignment, steps, finishes, end in running:
            exec_time = end - round_start
            out.micro_task(assignment, steps, round_start, end, exec_time)
            for job_id in sched.credit(assignment, steps, exec_time):
                finish = finishes[assignment.job_ids.index(job_id)]
                out.completed(job_id, finish)
                sched.remove_job(job_id)
                if window is not None and window[0] <= job_id < window[1]:
                    window_left -= 1
        if running:
            round_start = now
        for job in arrivals.pop_until(now):
            sched.add_job(job)
            out.arrived(job)
        if window_left == 0:
            break
        exhausted = arrivals.peek_time() is None
        # With nothing running and nothing left to arrive, waiting cannot help: recompute now.
        plan = sched.plan(now, force_recompute=not running and exhausted and bool(sched.jobs))
        out.planned(plan)
        running = []
        for a in plan.assignments:
            steps, finishes = [], []
            for job_id, tput in zip(a.job_ids, a.throughputs):
                n = min(int(tput * config.round_s), sched.remaining[job_id])
                steps.append(n)
                finishes.append(now + n / tput)
            running.append((a, tuple(steps), tuple(finishes), max(finishes)))
        if running or arrivals.peek_time() is not None:
            stalled = 0
        else:
            stalled += 1
            if stalled > 2:
                stuck = sorted(sched.jobs)[:5]
                raise SimulationError(f"no job can run and none will arrive; stuck jobs {stuck} "
                                      f"(does each fit on some GPU type with non-zero throughput?)")
    else:
        raise SimulationError(f"stopped after max_rounds={config.max_rounds}")
    return out.build(now)
