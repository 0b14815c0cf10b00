"""Shockwave's runtime batch sizes on the scheduler: flag, then switch a job's rate and rescale its steps
(docs/rules.md#batch-size)."""

from __future__ import annotations

from hetsched.model.throughputs import JobKey
from hetsched.rates.adaptation.schedules import job_type_of


class BatchSizeSwitching:
    """Mixin of `Scheduler`; acts only when the pipeline's rates include the batch size (`adaptation`)."""

    def steps_done(self, job_id: int) -> float:
        """Steps a job has run, counted at its current batch size (the total is rescaled at each switch)."""
        state = self.adaptation.jobs.get(job_id) if self.adaptation is not None else None
        total = state.total_steps if state is not None else float(self.jobs[job_id].total_steps)
        return total - float(self.remaining[self.slot[job_id]])

    def flag_batch_sizes(self) -> None:
        """Evaluate every adaptive job's batch-size flag (after completions, before arrivals;
        docs/rules.md#batch-size)."""
        if self.adaptation is not None:
            self.adaptation.evaluate(self.steps_done)

    def switch_batch_sizes(self, job_ids) -> list:
        """Flagged jobs among `job_ids` (which just ran a micro-task) change batch size: new rate, rescaled steps.
        A batch-size change does not trigger a reallocation (docs/rules.md#reset)."""
        out = []
        for job_id in job_ids:
            if not self.adaptation.flagged(job_id):
                continue
            sw = self.adaptation.switch(job_id, self.steps_done(job_id))
            if sw is None:
                continue
            self._retype(job_id, sw.job_type, sw.remaining_steps)
            out.append(sw)
        if out:
            self._entries_changed()
        return out

    def resume_batch_size(self, job_id: int, batch_size: int, total_steps: float, remaining_steps: float) -> None:
        """An adaptive job that had switched before the runtime restarted continues at that batch size."""
        state = self.adaptation.jobs.get(job_id) if self.adaptation is not None else None
        if state is None or batch_size == state.batch_size:
            return
        state.batch_size, state.total_steps = int(batch_size), float(total_steps)
        self._retype(job_id, job_type_of(state.model, batch_size), remaining_steps)
        self._entries_changed()

    def _retype(self, job_id: int, job_type: str, remaining_steps: float) -> None:
        """The job runs as `job_type` (another batch size) from now on, with `remaining_steps` left."""
        s = self.slot[job_id]
        self._set_rates(s, self.table.index(JobKey(job_type, int(self.scale[s]))))
        if self.resources is not None:              # the new batch size has its own CPU/memory class
            self.resources.add_job(s, job_type, int(self.scale[s]), self.tput[s])
        self.remaining[s] = max(remaining_steps, 0.0)
        e = self._entry_index[(job_id,)]
        self.etput[e, :, 0] = self.tput[s]
        self.ok[e] = self.tput[s] > 0
