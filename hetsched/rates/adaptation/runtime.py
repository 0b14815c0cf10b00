"""The simulator's actual batch-size switching (docs/rules.md#batch-size, docs/rules.md#accordion,
docs/rules.md#flag-guards).

It differs from the planner's profile on purpose, as the artifact does: Accordion has no 30 % rule at runtime,
Recommendation keeps only its initial critical regime, GNS looks the doubling up with a 760-epoch horizon, and
a partial epoch is rounded up to a full one at every switch. Flags are evaluated after a round's completions
and before arrivals join; a flagged job switches at the end of its next micro-task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetsched.model.jobs import AdaptationMode, Job
from hetsched.model.throughputs import ThroughputTable
from hetsched.rates.adaptation.schedules import (CAP_GUARDED, DATASET_SIZE, MAX_BATCH, MIN_BATCH, gns_batch_at,
                                                 is_critical, iterations_per_epoch, job_type_of, model_and_batch)

GNS_HORIZON = 760         # epochs of the pattern the runtime consults (max(760, epoch + 2))


@dataclass
class AdaptiveJob:
    """Runtime batch-size state of one job."""

    job_id: int
    model: str
    mode: AdaptationMode
    bs0: int
    scale_factor: int
    batch_size: int
    total_steps: float
    flag: int = 0            # +1: switch up at the end of the next micro-task; -1: down


@dataclass(frozen=True)
class Switch:
    """One applied batch-size change: the job's new type and step counts."""

    job_id: int
    old_batch_size: int
    new_batch_size: int
    job_type: str
    total_steps: float
    remaining_steps: float
    epoch: int                   # the epoch (rounded up, at the old batch size) at which the switch happened


class RuntimeAdaptation:
    """Batch-size flags and switches of the active jobs; the step counts are the caller's (the core's)."""

    def __init__(self, table: ThroughputTable):
        self.table = table
        self.jobs: dict[int, AdaptiveJob] = {}
        self.logged = 0            # switches the artifact logs (including reverted ones and finished jobs)

    def add_job(self, job: Job) -> None:
        if job.mode is AdaptationMode.STATIC:
            return
        try:
            model, bs0 = model_and_batch(job.job_type)
        except Exception:
            return
        if model in DATASET_SIZE:
            self.jobs[job.job_id] = AdaptiveJob(job.job_id, model, job.mode, bs0, job.scale_factor, bs0,
                                                float(job.total_steps))

    def remove_job(self, job_id: int) -> None:
        self.jobs.pop(job_id, None)

    def evaluate(self, done_steps) -> None:
        """Set flags from each job's epoch; `done_steps(job_id)` is its steps run so far (at its batch size)."""
        for j in self.jobs.values():
            if j.flag:
                continue                         # flags are only set here; the switch clears them
            epoch = math.ceil(done_steps(j.job_id) / iterations_per_epoch(j.model, j.batch_size))
            cap = MAX_BATCH[j.model]
            if j.mode is AdaptationMode.ACCORDION:
                critical = is_critical(j.model, j.bs0, epoch, runtime=True)
                if j.batch_size == j.bs0 and not critical and j.batch_size != cap:
                    j.flag = 1
                elif j.batch_size > j.bs0 and critical and j.batch_size != MIN_BATCH[j.model]:
                    j.flag = -1
            elif j.batch_size != cap:
                horizon = max(GNS_HORIZON, epoch + 2)
                nxt = max(gns_batch_at(j.model, j.bs0, j.scale_factor, horizon, epoch),
                          gns_batch_at(j.model, j.bs0, j.scale_factor, horizon, epoch + 1))
                if nxt > j.batch_size:
                    j.flag = 1

    def flagged(self, job_id: int) -> bool:
        j = self.jobs.get(job_id)
        return j is not None and j.flag != 0

    def switch(self, job_id: int, done_steps: float) -> Switch | None:
        """Apply a flagged job's change after its micro-task; None when refused or reverted."""
        j = self.jobs[job_id]
        flag, j.flag = j.flag, 0
        if j.bs0 == MAX_BATCH[j.model] and j.model in CAP_GUARDED:
            return None                                           # refused silently (docs/rules.md#flag-guards)
        self.logged += 1
        if j.mode is AdaptationMode.GNS:
            new = 2 * j.batch_size
        else:
            new = MAX_BATCH[j.model] if flag > 0 else j.bs0
        new_type = job_type_of(j.model, new)
        if (new_type, j.scale_factor) not in self.table:
            return None                                           # logged, then reverted
        old_ipe, new_ipe = iterations_per_epoch(j.model, j.batch_size), iterations_per_epoch(j.model, new)
        epochs = math.ceil(j.total_steps / old_ipe)
        total = math.ceil(j.total_steps * j.batch_size / new)
        if math.ceil(total / new_ipe) != epochs:
            total = new_ipe * epochs
        done = math.ceil(done_steps / old_ipe) * new_ipe            # a partial epoch counts as a full one
        old, j.batch_size, j.total_steps = j.batch_size, new, float(total)
        return Switch(job_id, old, new, new_type, float(total), float(total - done), math.ceil(done_steps / old_ipe))
