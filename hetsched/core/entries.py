"""The scheduler's entries: the combinations a round can run (single jobs and, with space sharing, job pairs).

Rows are aligned across `entries` (job ids), `members` (slots, -1 = none), `t` (time received per type since the
last reset), `deficit`, `alloc`, `in_alloc`, `ok` (every member runs on the type), `escale` and `etput` (steps/s of
each member on each type); insertion order is the tie-break order (docs/rules.md#select).
"""

from __future__ import annotations

import numpy as np


class EntryTable:
    """Mixin of `Scheduler`: adds, drops and looks up entries."""

    def _add_entries(self, new: list[tuple[int, ...]]) -> None:
        if not new:
            return
        k = len(new)
        base = len(self.entries)
        members = np.full((k, 2), -1, np.int64)
        for r, ids in enumerate(new):
            self._entry_index[ids] = base + r
            members[r, : len(ids)] = [self.slot[j] for j in ids]
        etput = np.zeros((k, self.n, 2))
        single = members[:, 1] < 0
        etput[single, :, 0] = self.tput[members[single, 0]]
        rows = self.key_row[members[~single]]                    # (p, 2) table rows of the pairs' jobs
        known = (rows >= 0).all(axis=1)         # no co-location measurement for an unknown type: zero
        pair_rows = np.flatnonzero(~single)[known]
        if len(pair_rows):
            a, b = rows[known].T
            etput[pair_rows] = np.nan_to_num(self.table.colocated[a[:, None], b[:, None], self._cols[None, :], 0])
        self.entries.extend(new)
        ok = np.where(single[:, None], etput[:, :, 0] > 0, (etput > 0).all(axis=2))
        self.members = np.vstack([self.members, members])
        self.t = np.vstack([self.t, np.full((k, self.n), self.prior)])
        self.deficit = np.vstack([self.deficit, np.zeros((k, self.n))])
        self.alloc = np.vstack([self.alloc, np.zeros((k, self.n))])
        self.in_alloc = np.concatenate([self.in_alloc, np.zeros(k, bool)])
        self.ok = np.vstack([self.ok, ok])
        self.escale = np.concatenate([self.escale, self.scale[members[:, 0]]])
        self.etput = np.concatenate([self.etput, etput])
        self._entries_changed()

    def _drop_entries(self, rows) -> None:
        if len(rows) == 0:
            return
        keep = np.ones(len(self.entries), bool)
        keep[rows] = False
        self.entries = [e for e, k in zip(self.entries, keep) if k]
        self._entry_index = {e: i for i, e in enumerate(self.entries)}
        for name in ("members", "t", "deficit", "alloc", "in_alloc", "ok", "escale", "etput"):
            setattr(self, name, getattr(self, name)[keep])
        self._entries_changed()

    def _entries_changed(self) -> None:
        """Refresh masks that only change when entries or the allocation change."""
        self._blocked = ~self.ok | ~self.in_alloc[:, None]
        self._has_pairs = bool((self.members[:, 1] >= 0).any())
        self._all_single_gpu = bool((self.escale == 1).all())

    def entry_of(self, job_ids: tuple[int, ...]) -> int | None:
        """The row of a combination (a job, or a co-located pair) now, or None if it left."""
        return self._entry_index.get(tuple(job_ids))
