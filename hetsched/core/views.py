"""What the core shows its policy: the `PolicyView` of the active jobs (the scheduler's `views`).

Throughputs come from the core's per-slot arrays; space-sharing pairs from the table (or the estimator, for
pairs never run; on the runtime, following measured rates: core/measured.py); entities and their weights only
for policies that share among entities (`uses_entities`).
"""

from __future__ import annotations

import numpy as np

from hetsched.compiled import round_kernels
from hetsched.decide.gavel.base import PolicyView


class PolicyViews:
    """`view(now)` over a `Scheduler`'s state (jobs, slots, rates, table, estimator, entity weights)."""

    def __init__(self, sched):
        self.sched = sched
        self.last_slots: np.ndarray | None = None     # the active slots by job id when the last view was built
        self._colocated_last: tuple[bytes, np.ndarray] | None = None
        self.pairs_run: set[tuple[int, int, int]] = set()     # (table row a, table row b, type): measured pairs
        self._estimates: dict[tuple[int, int], np.ndarray] = {}

    def view(self, now: float) -> PolicyView:
        sched = self.sched
        slots = self.last_slots = sched.job_slots.active_by_id()
        ids = sched.job_of_slot[slots]
        rows = sched.key_row[slots]
        keys, masks = sched.pins.keys(slots, rows) if sched.pins.masks else (rows, None)
        distinct, code = round_kernels.codes_of(keys) if round_kernels.ENABLED else np.unique(keys, return_inverse=True)
        colocated = None
        if sched.policy.packing and len(distinct):
            base = distinct if masks is None else distinct // len(masks) - 1      # each key's table row
            colocated = self._colocated_block(base)
            if sched.estimator is not None:
                colocated = self._estimated(base, colocated.copy())
            if masks is not None:
                colocated = sched.pins.pairs(colocated, distinct % len(masks), masks)
        if sched.measurements.rates_measured and colocated is not None:   # the runtime's (docs/rules.md#measured-rates)
            code, colocated = sched.measurements.measured_keys(slots, rows, colocated, code.ravel())
            if masks is not None:                          # a measured pair's efficiency knows no pins either
                first = np.unique(code, return_index=True)[1]      # a job of each key (its jobs share a pin)
                colocated = sched.pins.pairs(colocated, keys[first] % len(masks), masks)
        return PolicyView(                                # every array below is new: no copies (copy=False)
            job_ids=ids, gpu_types=sched.gpu_types, capacity=sched.capacity.copy(),
            throughput=sched.tput[slots], scale_factor=sched.scale[slots], unconsolidated=sched.tput_spread[slots],
            priority_weight=sched.weight[slots], remaining_steps=sched.remaining[slots],
            time_since_arrival=now - sched.arrival_s[slots], type_code=code.ravel(), colocated=colocated,
            prices=np.array([sched.cluster.price(g) for g in sched.gpu_types]), deadline_s=sched.deadline[slots],
            now=now, copy=False, **self._entities(ids))

    def _colocated_block(self, distinct: np.ndarray) -> np.ndarray:
        """The table's consolidated pair rates among the job keys present, (keys, keys, types, 2), read-only; the
        last one is kept, since the keys present rarely change between two views (the table does not change)."""
        key = distinct.tobytes()
        cached = self._colocated_last
        if cached is not None and cached[0] == key:
            return cached[1]
        sched = self.sched
        block = sched.table.colocated[distinct[:, None, None], distinct[None, :, None], sched._cols[None, None, :], 0]
        unknown = distinct < 0                            # job types without a table entry: no pairs
        block[unknown] = np.nan
        block[:, unknown] = np.nan
        block.setflags(write=False)
        self._colocated_last = (key, block)
        return block

    def _entities(self, ids: np.ndarray) -> dict:
        """Entity codes and weights for policies that share among entities; none when no job has one."""
        sched = self.sched
        if not sched.policy.uses_entities:
            return {}
        jobs = [sched.jobs[j] for j in ids.tolist()]
        if not any(j.entity for j in jobs):
            return {}
        names, code = np.unique([j.entity or "" for j in jobs], return_inverse=True)
        weights = np.array([sched.entity_weights.get(str(n), 1.0) for n in names], float)
        return {"entity": code.ravel(), "entity_weight": weights}

    def _estimated(self, rows: np.ndarray, colocated: np.ndarray) -> np.ndarray:
        """Replace unmeasured single-GPU pair throughputs by the estimator's (docs/rules.md#estimates)."""
        sched = self.sched
        keys = [sched.table.keys[r] for r in rows.tolist()]
        for i, (ra, ka) in enumerate(zip(rows.tolist(), keys)):
            for k, (rb, kb) in enumerate(zip(rows.tolist(), keys)):
                if ka.scale_factor != 1 or kb.scale_factor != 1:
                    continue
                est = self._estimates.get((ra, rb))
                if est is None:
                    est = np.array([sched.estimator.pair(ka.job_type, kb.job_type, g) for g in sched.gpu_types])
                    self._estimates[(ra, rb)] = est
                for w in range(sched.n):
                    if (ra, rb, w) not in self.pairs_run:
                        colocated[i, k, w] = est[w]
        return colocated
