"""Rates the runtime measures (a mixin of `Scheduler`; docs/rules.md#measured-rates).

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
    """`observe_rate`, `observe_pair_rate`, and the keys and pair rates the policy view shows once the runtime
    has moved a rate."""

    RATE_CHANGE = 0.05      # a measured rate this far (relative) from the one in use triggers a recompute
    rates_measured = False  # set once a measurement moved a rate: from then on the view's pair rates follow them

    def _init_measured(self) -> None:
        # (table row a, table row b) -> a's rate beside b over its isolated rate, per type column (NaN: unmeasured)
        self._pair_efficiency: dict[tuple[int, int], np.ndarray] = {}

    def _moved(self, old: float, value: float, weight: float, replace: bool = False) -> float | None:
        """The exponential average of `old` toward a measurement (the measurement itself when `old` is none or
        `replace`); None when that is within RATE_CHANGE of `old`."""
        new = value if replace or not old > 0 else weight * value + (1 - weight) * old
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
        """A measured rate of `job_id` co-located with `partner_id` on `gpu_type` moves its type's efficiency
        beside the partner's type (exponential average from the one in use); recompute as `observe_rate`."""
        if not self._measurable(gpu_type, steps_per_s) or partner_id not in self.slot:
            return
        s, w = self.slot[job_id], self.gpu_types.index(gpu_type)
        a, b = int(self.key_row[s]), int(self.key_row[self.slot[partner_id]])
        alone = self.tput[s, w]
        if a < 0 or b < 0 or not alone > 0:      # a type the table does not know has no pair rates to follow
            return
        efficiency = self._pair_efficiency.setdefault((a, b), np.full(self.n, np.nan))
        old = efficiency[w] if np.isfinite(efficiency[w]) else self._table_efficiency(a, b, w)
        new = self._moved(old, steps_per_s / alone, weight)
        if new is not None:
            efficiency[w] = new
            self.rates_measured = self.need_update = True

    def _table_efficiency(self, a: int, b: int, w: int) -> float:
        col = self._cols[w]
        alone = self.table.isolated[a, col, 0]
        return float(np.nan_to_num(self.table.colocated[a, b, col, 0, 0] / alone)) if alone > 0 else 0.0

    def measured_keys(self, slots: np.ndarray, rows: np.ndarray, by_row: np.ndarray,
                      row_code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The view's key of each job in `slots` (table rows `rows`) and the pair rates among the keys, from
        `by_row`, the pair rates among the distinct rows that `row_code` gives each job (module docstring)."""
        m, n = len(slots), self.n
        tput = self.tput[slots]
        table = np.zeros((m, n))
        known = rows >= 0
        table[known] = np.nan_to_num(self.table.isolated[rows[known][:, None], self._cols[None, :], 0])
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
