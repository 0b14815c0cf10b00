"""Rates the runtime measures (a mixin of `Scheduler`; docs/rules.md#measured-rates).

A lease's steps per second move the rate in use by an exponential average: a job's isolated rate when it ran
alone, its rate beside its partner when it ran as a pair (both members, as Gavel's physical mode does). Until a
pair has run, each member's pair rate is the table's scaled by that member's measured isolated rate over the
rate it started from, so the table's co-location slowdown stays what policies weigh: measured isolated rates
and unscaled table pair rates would make every pair look slow to a policy once its members have run alone.
The simulator measures nothing, so none of this runs there.
"""

from __future__ import annotations

import numpy as np


class MeasuredRates:
    """`observe_rate`, `observe_pair_rate` and the per-job co-location block that the policy view uses once the
    runtime has measured anything."""

    RATE_CHANGE = 0.05      # a measured rate this far (relative) from the one in use triggers a recompute
    rates_measured = False  # set once a measurement moved a rate: from then on the view's pair rates are per job

    def _init_measured(self) -> None:
        self._pair_rate: dict[tuple[int, int], np.ndarray] = {}     # (job, partner) -> the job's steps/s per type

    def _moved(self, old: float, steps_per_s: float, weight: float, replace: bool = False) -> float | None:
        """The exponential average of `old` toward a measurement (the measurement itself when `old` is none or
        `replace`); None when that is within RATE_CHANGE of `old`."""
        new = steps_per_s if replace or not old > 0 else weight * steps_per_s + (1 - weight) * old
        return None if old > 0 and abs(new - old) <= self.RATE_CHANGE * old else new

    def _measurable(self, gpu_type: str, steps_per_s: float) -> bool:
        return gpu_type in self.gpu_types and bool(np.isfinite(steps_per_s)) and steps_per_s > 0

    def observe_rate(self, job_id: int, gpu_type: str, steps_per_s: float, weight: float = 0.5) -> None:
        """A measured isolated rate on `gpu_type` moves the job's throughput toward it (exponential average).
        The allocation is recomputed at the next plan when the rate moved by more than RATE_CHANGE: steady
        measurements do not re-solve the policy every round."""
        if not self._measurable(gpu_type, steps_per_s):
            return
        s, w = self.slot[job_id], self.gpu_types.index(gpu_type)
        old = self.tput[s, w]
        new = self._moved(old, steps_per_s, weight, replace=self.key_row[s] < 0 and old == 1.0)  # default rate
        if new is None:
            return
        self.rates_measured = True
        self.tput[s, w] = self.tput_spread[s, w] = new
        e = self._entry_index.get((job_id,))
        if e is not None:
            self.etput[e, w, 0] = new
            self.ok[e, w] = True
            self._entries_changed()
        self.need_update = True

    def observe_pair_rate(self, job_id: int, partner_id: int, gpu_type: str, steps_per_s: float,
                          weight: float = 0.5) -> None:
        """A measured rate of `job_id` co-located with `partner_id` on `gpu_type`: replaces the scaled table
        rate of that member of the pair (exponential average from it), recompute as `observe_rate`."""
        if not self._measurable(gpu_type, steps_per_s) or partner_id not in self.slot:
            return
        w = self.gpu_types.index(gpu_type)
        rates = self._pair_rate.setdefault((job_id, partner_id), np.full(self.n, np.nan))
        old = rates[w] if np.isfinite(rates[w]) else self._scaled_pair_rate(job_id, partner_id, w)
        new = self._moved(old, steps_per_s, weight)
        if new is not None:
            rates[w] = new
            self.rates_measured = self.need_update = True

    def _scaled_pair_rate(self, job_id: int, partner_id: int, w: int) -> float:
        a, b = self.slot[job_id], self.slot[partner_id]
        ra, rb = int(self.key_row[a]), int(self.key_row[b])
        if ra < 0 or rb < 0:
            return 0.0
        rate = float(np.nan_to_num(self.table.colocated[ra, rb, self._cols[w], 0, 0]))
        return rate * float(self._isolated_scale(np.array([a]))[0, w])

    def _isolated_scale(self, slots: np.ndarray) -> np.ndarray:
        """Per job and type: the rate in use over the table's (1 where the table has none)."""
        table = np.array([self._row_rates[r][0] if r >= 0 else np.zeros(self.n)
                          for r in self.key_row[slots].tolist()]).reshape(len(slots), self.n)
        pins = [self._pins.get(s) for s in slots.tolist()]
        table *= np.array([np.ones(self.n) if p is None else p for p in pins]).reshape(len(slots), self.n)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(table > 0, self.tput[slots] / table, 1.0)

    def measured_colocated(self, slots: np.ndarray, by_key: np.ndarray, code: np.ndarray) -> np.ndarray:
        """The pair rates per job (jobs, jobs, types, 2): the per-key block `by_key` expanded, each member's rate
        scaled by its isolated one (module docstring), then the pairs' own measurements."""
        block = by_key[code[:, None], code[None, :]].copy()
        scale = self._isolated_scale(slots)                       # (m, n)
        block[..., 0] *= scale[:, None, :]
        block[..., 1] *= scale[None, :, :]
        if self._pair_rate:
            ids = self.job_of_slot[slots].tolist()
            where = {j: i for i, j in enumerate(ids)}
            for (a, b), rates in self._pair_rate.items():
                i, k = where.get(a), where.get(b)
                if i is None or k is None:
                    continue
                seen = np.isfinite(rates)
                block[i, k, seen, 0] = rates[seen]             # a beside b
                block[k, i, seen, 1] = rates[seen]             # the same rate, seen from b's row
        return block

    def _forget_rates(self, job_id: int) -> None:
        """A job left: its pairs' measurements go with it."""
        for key in [k for k in self._pair_rate if job_id in k]:
            del self._pair_rate[key]
