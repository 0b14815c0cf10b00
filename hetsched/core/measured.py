"""Rates the runtime measures (the `Scheduler`'s `measured` object; docs/rules.md#measured-rates).

A lease's steps per second move the rate in use by an exponential average: a job's isolated rate when it ran
alone, and, when it ran as a pair, its type's co-location efficiency beside the partner's type (its rate there
over its isolated rate in use; both members, as Gavel's physical mode measures both). Policies then see a pair
rate of efficiency x isolated rate in use, the efficiency being the table's until measured: measured isolated rates
beside the table's pair rates would make every pair look slow once its members had run alone. Pair rates stay per
key, as policies hold them: a key is a job type and a band of isolated rates 5 % wide (RATE_CHANGE), so jobs of one
type measured alike share one. The simulator measures nothing, so none of this runs there.
"""

from __future__ import annotations

import numpy as np


class MeasuredRates:
    """The scheduler's `measured` stage: `observe_rate`, `observe_pair_rate`, and the keys and pair rates the policy
    view shows once the runtime has moved a rate. It reads and moves the scheduler's rate arrays."""

    RATE_CHANGE = 0.05      # a measured rate this far (relative) from the one in use triggers a recompute
    rates_measured = False  # set once a measurement moved a rate: from then on the view's pair rates follow them

    def __init__(self, sched) -> None:
        self.sched = sched
        # (table row a, table row b) -> a's rate beside b over its isolated rate, per type column (NaN: unmeasured)
        self._pair_efficiency: dict[tuple[int, int], np.ndarray] = {}
        self._moved_rates: dict[int, dict[int, float]] = {}  # job id -> {type column: isolated rate in use}

    def forget(self, job_id: int) -> None:
        """The job left, or now runs at another batch size: its moved rates are not its any more."""
        self._moved_rates.pop(job_id, None)

    def _moved(self, old: float, value: float, weight: float, replace: bool = False) -> float | None:
        """The exponential average of `old` toward a measurement (the measurement itself when `old` is none or
        `replace`); None when that is within RATE_CHANGE of `old`."""
        new = value if replace or not old > 0 else weight * value + (1 - weight) * old
        return None if old > 0 and abs(new - old) <= self.RATE_CHANGE * old else new

    def _measurable(self, gpu_type: str, steps_per_s: float) -> bool:
        return gpu_type in self.sched.gpu_types and bool(np.isfinite(steps_per_s)) and steps_per_s > 0

    def observe_rate(self, job_id: int, gpu_type: str, steps_per_s: float, weight: float = 0.5) -> bool:
        """A measured isolated rate on `gpu_type` moves the job's throughput toward it (exponential average).
        The allocation is recomputed at the next plan when the rate moved by more than RATE_CHANGE: steady
        measurements do not re-solve the policy every round. True when the rate moved. A whole-round stage reads
        no table rate (it credits the iterations measured), so nothing moves there."""
        sched = self.sched
        if not sched.rounds.reads_table or not self._measurable(gpu_type, steps_per_s):
            return False
        s, w = sched.slot[job_id], sched.gpu_types.index(gpu_type)
        old = sched.tput[s, w]
        new = self._moved(old, steps_per_s, weight, replace=sched.key_row[s] < 0 and old == 1.0)  # default rate
        if new is not None:
            self._set_rate(job_id, s, w, new)
        return new is not None

    def _set_rate(self, job_id: int, s: int, w: int, rate: float) -> None:
        sched = self.sched
        self.rates_measured = True
        sched.tput[s, w] = sched.tput_spread[s, w] = rate
        self._moved_rates.setdefault(job_id, {})[w] = rate
        e = sched.entry_table.index.get((job_id,))
        if e is not None:
            sched.etput[e, w, 0] = rate
            sched.ok[e, w] = True
            sched.entry_table.changed()
        sched.need_update = True

    # ---- what a restart gives back (docs/rules.md#runtime-restart) --------------------------------------------
    def measured_rates(self, job_id: int) -> tuple[str, dict[str, float]]:
        """The job type (batch size included) whose rates these are, and the job's isolated rates in use where
        measurements moved them, by GPU type."""
        types = self.sched.gpu_types
        return self._rate_type(job_id), {types[w]: r for w, r in self._moved_rates.get(job_id, {}).items()}

    def restore_rates(self, job_id: int, job_type: str, rates: dict[str, float]) -> None:
        """Rates `measured_rates` gave before a restart, in use again if the job still runs as `job_type` (not at
        another batch size since); GPU types this core lacks are skipped."""
        sched = self.sched
        if job_type != self._rate_type(job_id):
            return
        s = sched.slot[job_id]
        for gpu_type, rate in rates.items():
            if self._measurable(gpu_type, rate):
                self._set_rate(job_id, s, sched.gpu_types.index(gpu_type), float(rate))

    def _rate_type(self, job_id: int) -> str:
        sched = self.sched
        row = int(sched.key_row[sched.slot[job_id]])
        return sched.table.keys[row].job_type if row >= 0 else sched.jobs[job_id].job_type

    def pair_efficiencies(self) -> list[tuple[str, int, str, str, float]]:
        """Measured co-location efficiencies: (job type, scale factor, partner's job type, GPU type, efficiency)."""
        sched = self.sched
        keys = sched.table.keys
        return [(keys[a].job_type, keys[a].scale_factor, keys[b].job_type, sched.gpu_types[w], float(eff[w]))
                for (a, b), eff in self._pair_efficiency.items() for w in np.flatnonzero(np.isfinite(eff))]

    def restore_pair_efficiencies(self, rows) -> None:
        """What `pair_efficiencies` gave before a restart (job types or GPU types this core lacks are skipped)."""
        sched = self.sched
        for job_type, scale_factor, partner, gpu_type, eff in rows:
            a, b = ((job_type, scale_factor) in sched.table, (partner, scale_factor) in sched.table)
            if a and b and gpu_type in sched.gpu_types and np.isfinite(eff):
                pair = (sched.table.index((job_type, scale_factor)), sched.table.index((partner, scale_factor)))
                self._pair_efficiency.setdefault(pair, np.full(sched.n, np.nan))[sched.gpu_types.index(gpu_type)] = eff
                self.rates_measured = sched.need_update = True

    def observe_pair_rate(self, job_id: int, partner_id: int, gpu_type: str, steps_per_s: float,
                          weight: float = 0.5) -> bool:
        """A measured rate of `job_id` co-located with `partner_id` on `gpu_type` moves its type's efficiency
        beside the partner's type (exponential average from the one in use); recompute as `observe_rate`. True
        when the efficiency moved."""
        sched = self.sched
        if not self._measurable(gpu_type, steps_per_s) or partner_id not in sched.slot:
            return False
        s, w = sched.slot[job_id], sched.gpu_types.index(gpu_type)
        a, b = int(sched.key_row[s]), int(sched.key_row[sched.slot[partner_id]])
        alone = sched.tput[s, w]
        if a < 0 or b < 0 or not alone > 0:      # a type the table does not know has no pair rates to follow
            return False
        efficiency = self._pair_efficiency.setdefault((a, b), np.full(sched.n, np.nan))
        old = efficiency[w] if np.isfinite(efficiency[w]) else self._table_efficiency(a, b, w)
        new = self._moved(old, steps_per_s / alone, weight)
        if new is not None:
            efficiency[w] = new
            self.rates_measured = sched.need_update = True
        return new is not None

    def _table_efficiency(self, a: int, b: int, w: int) -> float:
        sched = self.sched
        col = sched._cols[w]
        alone = sched.table.isolated[a, col, 0]
        return float(np.nan_to_num(sched.table.colocated[a, b, col, 0, 0] / alone)) if alone > 0 else 0.0

    def measured_keys(self, slots: np.ndarray, rows: np.ndarray, by_row: np.ndarray,
                      row_code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The view's key of each job in `slots` (table rows `rows`) and the pair rates among the keys, from
        `by_row`, the pair rates among the distinct rows that `row_code` gives each job (module docstring)."""
        sched = self.sched
        m, n = len(slots), sched.n
        tput = sched.tput[slots]
        table = np.zeros((m, n))
        known = rows >= 0
        table[known] = np.nan_to_num(sched.table.isolated[rows[known][:, None], sched._cols[None, :], 0])
        with np.errstate(divide="ignore"):
            band = np.where((table > 0) & (tput > 0), np.rint(np.log(tput / np.where(table > 0, table, 1.0))
                                                              / np.log1p(self.RATE_CHANGE)), -(2 ** 40))
        keys, first, code = np.unique(np.column_stack([rows, band]), axis=0, return_index=True, return_inverse=True)
        code = code.ravel()                                       # first: a job of each key
        k = len(keys)
        count = np.bincount(code, minlength=k).astype(float)
        alone = np.zeros((k, n))
        np.add.at(alone, code, tput)
        alone /= count[:, None]                                   # each key's isolated rates: its jobs' mean
        at = row_code[first]                                      # each key's row in `by_row`
        table_alone = table[first]
        with np.errstate(divide="ignore", invalid="ignore"):
            own = by_row[at[:, None], at[None, :], :, 0] / table_alone[:, None, :]
            other = by_row[at[:, None], at[None, :], :, 1] / table_alone[None, :, :]
        index = {}
        for i, r in enumerate(rows[first].tolist()):
            index.setdefault(r, []).append(i)
        for (a, b), eff in self._pair_efficiency.items():
            seen = np.isfinite(eff)
            for i in index.get(a, ()):
                for j in index.get(b, ()):
                    own[i, j, seen] = eff[seen]               # a's efficiency beside b
                    other[j, i, seen] = eff[seen]             # the same, as b's partner
        block = np.stack([own * alone[:, None, :], other * alone[None, :, :]], axis=-1)
        block[~np.isfinite(block)] = np.nan                       # no rate: as the table's NaN
        return code, block
