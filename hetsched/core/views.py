"""What the core shows its policy: the `PolicyView` of the active jobs (a mixin of `Scheduler`).

Throughputs come from the core's per-slot arrays; space-sharing pairs from the table (or the estimator, for
pairs never run; on the runtime, following measured rates: core/measured.py); entities and their weights only
for policies that share among entities (`uses_entities`).
"""

from __future__ import annotations

import numpy as np

from hetsched.compiled import round_kernels
from hetsched.policies.base import PolicyView


class PolicyViews:
    """`view(now)` over the `Scheduler`'s state (jobs, slots, rates, table, estimator, entity weights)."""

    _colocated_last: tuple[bytes, np.ndarray] | None = None

    def view(self, now: float) -> PolicyView:
        slots = self._view_slots = self.active_slots_by_id()
        ids = self.job_of_slot[slots]
        rows = self.key_row[slots]
        keys, masks = self.pins.keys(slots, rows) if self.pins.masks else (rows, None)
        distinct, code = round_kernels.codes_of(keys) if round_kernels.ENABLED else np.unique(keys, return_inverse=True)
        colocated = None
        if self.policy.packing and len(distinct):
            base = distinct if masks is None else distinct // len(masks) - 1      # each key's table row
            colocated = self._colocated_block(base)
            if self.estimator is not None:
                colocated = self._estimated(base, colocated.copy())
            if masks is not None:
                colocated = self.pins.pairs(colocated, distinct % len(masks), masks)
        if self.measurements.rates_measured and colocated is not None:   # the runtime's (docs/rules.md#measured-rates)
            code, colocated = self.measurements.measured_keys(slots, rows, colocated, code.ravel())
            if masks is not None:                          # a measured pair's efficiency knows no pins either
                first = np.unique(code, return_index=True)[1]      # a job of each key (its jobs share a pin)
                colocated = self.pins.pairs(colocated, keys[first] % len(masks), masks)
        return PolicyView(                                # every array below is new: no copies (copy=False)
            job_ids=ids, gpu_types=self.gpu_types, capacity=self.capacity.copy(),
            throughput=self.tput[slots], scale_factor=self.scale[slots], unconsolidated=self.tput_spread[slots],
            priority_weight=self.weight[slots], remaining_steps=self.remaining[slots],
            time_since_arrival=now - self.arrival_s[slots], type_code=code.ravel(), colocated=colocated,
            prices=np.array([self.cluster.price(g) for g in self.gpu_types]), deadline_s=self.deadline[slots],
            now=now, copy=False, **self._entities(ids))

    def _colocated_block(self, distinct: np.ndarray) -> np.ndarray:
        """The table's consolidated pair rates among the job keys present, (keys, keys, types, 2), read-only; the
        last one is kept, since the keys present rarely change between two views (the table does not change)."""
        key = distinct.tobytes()
        cached = self._colocated_last
        if cached is not None and cached[0] == key:
            return cached[1]
        block = self.table.colocated[distinct[:, None, None], distinct[None, :, None], self._cols[None, None, :], 0]
        unknown = distinct < 0                            # job types without a table entry: no pairs
        block[unknown] = np.nan
        block[:, unknown] = np.nan
        block.setflags(write=False)
        self._colocated_last = (key, block)
        return block

    def _entities(self, ids: np.ndarray) -> dict:
        """Entity codes and weights for policies that share among entities; none when no job has one."""
        if not self.policy.uses_entities:
            return {}
        jobs = [self.jobs[j] for j in ids.tolist()]
        if not any(j.entity for j in jobs):
            return {}
        names, code = np.unique([j.entity or "" for j in jobs], return_inverse=True)
        weights = np.array([self.entity_weights.get(str(n), 1.0) for n in names], float)
        return {"entity": code.ravel(), "entity_weight": weights}

    def _estimated(self, rows: np.ndarray, colocated: np.ndarray) -> np.ndarray:
        """Replace unmeasured single-GPU pair throughputs by the estimator's (docs/rules.md#estimates)."""
        keys = [self.table.keys[r] for r in rows.tolist()]
        for i, (ra, ka) in enumerate(zip(rows.tolist(), keys)):
            for k, (rb, kb) in enumerate(zip(rows.tolist(), keys)):
                if ka.scale_factor != 1 or kb.scale_factor != 1:
                    continue
                est = self._estimates.get((ra, rb))
                if est is None:
                    est = np.array([self.estimator.pair(ka.job_type, kb.job_type, g) for g in self.gpu_types])
                    self._estimates[(ra, rb)] = est
                for w in range(self.n):
                    if (ra, rb, w) not in self._measured:
                        colocated[i, k, w] = est[w]
        return colocated
