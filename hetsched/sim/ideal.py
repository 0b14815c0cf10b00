"""The "ideal" mechanism (Gavel Fig. 13): allocations applied as exact fluid rates, no rounds.

Between events every job progresses at its allocation's effective throughput; the next event is the earlier of
the next arrival and the first completion, computed exactly (the artifact's version crashes at HEAD and only
advanced to arrival times, docs/rules.md#ideal). The allocation is recomputed at every event. A sweep's bounds
apply as in the round loop, with events for rounds: the active-job cap after each arrival, and `on_progress`
(the horizon and the CPU budget, docs/rules.md#horizon) every 200 events.
"""

from __future__ import annotations

import numpy as np

from hetsched.core.scheduler import Scheduler
from hetsched.errors import SimulationError
from hetsched.sim.result import Result, ResultBuilder

EPS_STEPS = 1e-6


def run_ideal(arrivals, sched: Scheduler, config, on_progress=None) -> Result:
    out = ResultBuilder(sched, config)
    window = config.window
    window_left = None if window is None else window[1] - window[0]
    now, finished, limit = 0.0, 0, config.max_active_jobs
    for event in range(config.max_rounds):
        for job in arrivals.pop_until(now):
            sched.add_job(job)
            out.arrived(job, sched.slot[job.job_id])
        if limit is not None and len(sched.jobs) > limit:
            raise SimulationError.saturated(len(sched.jobs), now, limit)
        if on_progress is not None and event and event % 200 == 0:
            on_progress(now, finished)
        if window_left == 0:
            break
        nxt = arrivals.peek_time()
        if not sched.jobs:
            if nxt is None:
                break
            now = nxt
            continue
        view = sched.view(now)
        allocation = sched.policy.allocate(view)
        sched.num_recomputes += 1
        rate = allocation.effective_throughput(view)
        with np.errstate(divide="ignore"):
            to_finish = np.where(rate > 0, view.remaining_steps / rate, np.inf)
        dt = min(to_finish.min(), (nxt - now) if nxt is not None else np.inf)
        if not np.isfinite(dt):
            raise SimulationError(f"no job makes progress under {sched.policy.name} and none will arrive")
        out.busy += float(allocation.gpus_used(view.scale_factor).sum()) * dt
        out.rounds += 1
        slots = np.array([sched.slot[j] for j in view.job_ids.tolist()])
        acc = out._acc
        started = np.isnan(acc[slots, 0]) & (rate > 0)
        acc[slots[started], 0] = now
        acc[slots, 1] += rate * dt
        sched.remaining[slots] -= rate * dt
        now += dt
        total = np.array([sched.jobs[j].total_steps for j in view.job_ids.tolist()])
        done = (sched.remaining[slots] <= EPS_STEPS * np.maximum(1.0, total)) | (to_finish <= dt)
        for job_id, slot in zip(view.job_ids[done].tolist(), slots[done].tolist()):
            out.completed(job_id, slot, now)
            sched.remove_job(job_id)
            finished += 1
            if window is not None and window[0] <= job_id < window[1]:
                window_left -= 1
    else:
        raise SimulationError(f"stopped after max_rounds={config.max_rounds}")
    return out.build(now)
