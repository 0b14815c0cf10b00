"""The "ideal" mechanism (Gavel Fig. 13): allocations applied as exact fluid rates, no rounds.

Between events every job progresses at its allocation's effective throughput; the next event is the earlier of
the next arrival and the first completion, computed exactly (the artifact's version crashes at HEAD and only
advanced to arrival times, spec s.3.8 and s.10.3). The allocation is recomputed at every event.
"""

from __future__ import annotations

import numpy as np

from .core import Scheduler
from .result import Result, ResultBuilder

EPS_STEPS = 1e-6


def run_ideal(jobs, sched: Scheduler, config) -> Result:
    from .simulator import SimulationError, _Arrivals

    arrivals = _Arrivals(jobs)
    out = ResultBuilder(sched, config)
    window = config.window
    window_left = None if window is None else window[1] - window[0]
    now = 0.0
    for _ in range(config.max_rounds):
        for job in arrivals.pop_until(now):
            sched.add_job(job)
            out.arrived(job)
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
        gpus = allocation.gpus_used(view.scale_factor).sum()
        with np.errstate(divide="ignore"):
            to_finish = np.where(rate > 0, view.remaining_steps / rate, np.inf)
        dt = min(to_finish.min(), (nxt - now) if nxt is not None else np.inf)
        if not np.isfinite(dt):
            raise SimulationError(f"no job makes progress under {sched.policy.name} and none will arrive")
        out.busy += gpus * dt
        out.rounds += 1
        now += dt
        for i, job_id in enumerate(view.job_ids.tolist()):
            rec = out.records[job_id]
            if np.isnan(rec.start_time_s) and rate[i] > 0:
                rec.start_time_s = now - dt
            progress = rate[i] * dt
            rec.steps_done += progress
            sched.remaining[job_id] -= progress
            if sched.remaining[job_id] <= EPS_STEPS * max(1.0, rec.total_steps) or to_finish[i] <= dt:
                out.completed(job_id, now)
                sched.remove_job(job_id)
                if window is not None and window[0] <= job_id < window[1]:
                    window_left -= 1
    else:
        raise SimulationError(f"stopped after max_rounds={config.max_rounds}")
    return out.build(now)
