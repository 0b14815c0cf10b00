"""Adaptive batch sizes on the runtime (docs/rules.md#runtime-batch-sizes). The core decides every switch, as in
the simulator; this side re-counts the job's steps at the new batch size, keeps them durable, and re-counts what a
job reports at another batch size of its schedule."""

from __future__ import annotations

from hetsched.model.catalog import split_job_type
from hetsched.rates.adaptation.schedules import DATASET_SIZE, reachable_batch_sizes, steps_at

from .validate import InvalidInput

MODES = ("accordion", "gns")


def adaptation_field(mode: str, job_type: str, adapts: bool) -> str:
    """A submission's adaptation mode ('' for static); raises InvalidInput for one this scheduler cannot run."""
    mode = mode.strip().lower()
    if mode in ("", "static"):
        return ""
    if mode not in MODES:
        raise InvalidInput(f"adaptation: static, accordion or gns, got {mode!r}")
    if not adapts:
        raise InvalidInput("adaptation: this scheduler's policy ranks jobs afresh every round (an ordering) and "
                           "does not adapt batch sizes; submit the job static, or run an allocation policy or "
                           "shockwave")
    model, batch_size = split_job_type(job_type)
    if batch_size is None or model not in DATASET_SIZE:
        raise InvalidInput(f"adaptation: {job_type!r} cannot adapt; a job type '<model> (batch size B)' with a "
                           f"model of {sorted(DATASET_SIZE)} can")
    return mode


class BatchSizes:
    """Mixin of `RuntimeState` (its `core`, `active`, `store`, `live_steps`, `credited`, `stored_steps`, `events`)."""

    def _init_batch_sizes(self) -> None:
        self.switches = 0

    @staticmethod
    def batch_size_of(row) -> int:
        """The batch size a job's steps are counted at now (0: the job does not adapt)."""
        if not row.adaptation:
            return 0
        return row.batch_size or split_job_type(row.job_type)[1]

    def counted_now(self, row, steps: int, batch_size: int) -> int:
        """`steps` reported at `batch_size` (0: the current one), counted at the job's current batch size."""
        now = self.batch_size_of(row)
        if not batch_size or batch_size == now:
            return int(steps)
        if not now:
            if batch_size == split_job_type(row.job_type)[1]:
                return int(steps)                 # a static job naming its own batch size
            raise InvalidInput(f"batch_size: job {row.job_id} does not adapt; report 0 (or its type's batch size)")
        model, bs0 = split_job_type(row.job_type)
        allowed = reachable_batch_sizes(model, bs0, row.adaptation)
        if batch_size not in allowed:
            raise InvalidInput(f"batch_size: {batch_size} is not in job {row.job_id}'s {row.adaptation} schedule "
                               f"{sorted(allowed)}")
        return min(steps_at(model, int(steps), batch_size, now), row.total_steps)

    def total_at(self, row, batch_size: int) -> int:
        """The job's total steps counted at `batch_size` (to bound a report made at it)."""
        now = self.batch_size_of(row)
        if not batch_size or not now or batch_size == now:
            return row.total_steps
        return steps_at(split_job_type(row.job_type)[0], row.total_steps, now, batch_size)

    def switch_batch_sizes(self, ran: list[int]) -> None:
        """Flagged jobs among those that ran in the ending round switch; then flags are set for the next one
        (after progress is credited, before arrivals join, as in the simulator)."""
        core = self.core
        if core.adaptation is None:
            return
        for sw in core.batch_sizes.switch(ran):
            row = self.active.get(sw.job_id)
            if row is None:
                continue
            model, total = split_job_type(row.job_type)[0], int(sw.total_steps)

            def recount(steps: int) -> int:
                return min(steps_at(model, steps, sw.old_batch_size, sw.new_batch_size), total)
            row.batch_size, row.total_steps, row.steps_done = sw.new_batch_size, total, recount(row.steps_done)
            for counts in (self.live_steps, self.credited, self.stored_steps):
                if sw.job_id in counts:
                    counts[sw.job_id] = recount(counts[sw.job_id])
            self.store.set_batch_size(sw.job_id, row.batch_size, total, row.steps_done)
            self.switches += 1
            if self.events.on:
                self.events.add(f"batch_size job={sw.job_id} old={sw.old_batch_size} new={sw.new_batch_size} "
                                f"epoch={sw.epoch} total_steps={total}")
        core.batch_sizes.flag()

    def resume_batch_size(self, row) -> None:
        """After a restart, an adaptive job that had switched continues at its batch size in the core."""
        bs0 = split_job_type(row.job_type)[1]
        if row.adaptation and row.batch_size and row.batch_size != bs0:
            done = max(self.live_steps.get(row.job_id, 0), row.steps_done)
            self.core.batch_sizes.resume(row.job_id, row.batch_size, row.total_steps,
                                        max(1.0, row.total_steps - done))
