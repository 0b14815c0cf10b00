"""Shockwave's runtime batch sizes on the scheduler: flag, then switch a job's rate and rescale its steps
(docs/rules.md#batch-size)."""

from __future__ import annotations

from hetsched.model.throughputs import JobKey
from hetsched.rates.adaptation.schedules import job_type_of


class BatchSizeSwitching:
    """The scheduler's `batch_sizes` object; it acts only when the pipeline's rates include the batch size (the
    scheduler's `adaptation`), and moves the scheduler's rates and remaining steps when a job switches."""

    def __init__(self, sched) -> None:
        self.sched = sched

    def steps_done(self, job_id: int) -> float:
        """Steps a job has run, counted at its current batch size (the total is rescaled at each switch)."""
        sched = self.sched
        state = sched.adaptation.jobs.get(job_id) if sched.adaptation is not None else None
        total = state.total_steps if state is not None else float(sched.jobs[job_id].total_steps)
        return total - float(sched.remaining[sched.slot[job_id]])

    def flag(self) -> None:
        """Evaluate every adaptive job's batch-size flag (after completions, before arrivals;
        docs/rules.md#batch-size)."""
        if self.sched.adaptation is not None:
            self.sched.adaptation.evaluate(self.steps_done)

    def switch(self, job_ids) -> list:
        """Flagged jobs among `job_ids` (which just ran a micro-task) change batch size: new rate, rescaled steps.
        A batch-size change does not trigger a reallocation (docs/rules.md#reset)."""
        adaptation, out = self.sched.adaptation, []
        for job_id in job_ids:
            if not adaptation.flagged(job_id):
                continue
            sw = adaptation.switch(job_id, self.steps_done(job_id))
            if sw is None:
                continue
            self._retype(job_id, sw.job_type, sw.remaining_steps)
            out.append(sw)
        if out:
            self.sched.entry_table.changed()
        return out

    def resume(self, job_id: int, batch_size: int, total_steps: float, remaining_steps: float) -> None:
        """An adaptive job that had switched before the runtime restarted continues at that batch size."""
        sched = self.sched
        state = sched.adaptation.jobs.get(job_id) if sched.adaptation is not None else None
        if state is None or batch_size == state.batch_size:
            return
        state.batch_size, state.total_steps = int(batch_size), float(total_steps)
        self._retype(job_id, job_type_of(state.model, batch_size), remaining_steps)
        sched.entry_table.changed()

    def _retype(self, job_id: int, job_type: str, remaining_steps: float) -> None:
        """The job runs as `job_type` (another batch size) from now on, with `remaining_steps` left."""
        sched = self.sched
        s = sched.slot[job_id]
        sched._set_rates(s, sched.table.index(JobKey(job_type, int(sched.scale[s]))))
        if sched.resources is not None:              # the new batch size has its own CPU/memory class
            sched.resources.add_job(s, job_type, int(sched.scale[s]), sched.tput[s])
        sched.remaining[s] = max(remaining_steps, 0.0)
        e = sched.entry_table.index[(job_id,)]
        sched.etput[e, :, 0] = sched.tput[s]
        sched.ok[e] = sched.tput[s] > 0
