"""The scheduler's entries: the combinations a round can run (single jobs and, with space sharing, job pairs).

Rows are aligned across `entries` (job ids), `members` (slots, -1 = none), `t` (time received per type since the
last reset), `deficit`, `alloc`, `in_alloc`, `ok` (every member runs on the type), `escale` and `etput` (steps/s of
each member on each type); insertion order is the tie-break order (docs/rules.md#select).
"""

from __future__ import annotations

from itertools import compress

import numpy as np

from hetsched.compiled import kernels, round_kernels
from hetsched.core.pair_entries import append_pair_rows, compact_entry_rows, match_pairs

#: The arrays with one row per entry, kept aligned.
ROW_ARRAYS = ("members", "t", "deficit", "alloc", "in_alloc", "ok", "escale", "etput")


def _pair_codes(want: np.ndarray, have: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One integer per pair of job ids (k, 2), equal for equal pairs: `a x 2^32 + b` for ids below 2^31, else
    `a x M + b` over the ids' ranks (M distinct ids, so the codes stay small for any ids)."""
    both = np.concatenate([want.ravel(), have.ravel()])
    if not len(both) or (both.min() >= 0 and both.max() < 2 ** 31):
        return (want[:, 0] << 32) | want[:, 1], (have[:, 0] << 32) | have[:, 1]
    ids, rank = np.unique(both, return_inverse=True)
    code = rank.reshape(-1, 2) @ np.array([len(ids), 1], np.int64)
    return code[:len(want)], code[len(want):]


class EntryTable:
    """Mixin of `Scheduler`: adds, drops and looks up entries.

    Per-job work stays proportional to the change: the row index (`_entry_index`) and the masks derived from
    the rows (`_blocked`, `_has_pairs`, `_all_single_gpu`) are rebuilt on first use after a change, so a round
    that admits or retires many jobs rebuilds them once, not once per job.
    """

    _index: dict[tuple[int, ...], int] | None = None
    _masks: tuple[np.ndarray, bool, bool] | None = None
    _view_slots: np.ndarray | None = None       # the active slots by job id when the policy view was last built

    @property
    def _entry_index(self) -> dict[tuple[int, ...], int]:
        """Combination (job ids) -> row."""
        if self._index is None:
            self._index = {e: i for i, e in enumerate(self.entries)}
        return self._index

    def _add_entries(self, new: list[tuple[int, ...]], members: np.ndarray | None = None) -> None:
        """Append entries (tuples of job ids); `members`, when given, holds their slots (k, 2), -1 = none."""
        if not new:
            return
        k = len(new)
        base = len(self.entries)
        m, bufs = len(self.members), self._row_buffers
        if k == 1 and len(new[0]) == 1 and bufs and len(bufs["members"]) > m:
            # An arrival (the common case) while the buffers have room: its row written in place.
            s = self.slot[new[0][0]]
            if self._index is not None:
                self._index[new[0]] = base
            self.entries.append(new[0])
            tput = self.tput[s]
            bufs["members"][m] = (s, -1)
            bufs["t"][m] = self.prior
            bufs["deficit"][m] = bufs["alloc"][m] = 0.0
            bufs["in_alloc"][m] = False
            bufs["ok"][m] = tput > 0
            bufs["escale"][m] = self.scale[s]
            bufs["etput"][m] = 0.0
            bufs["etput"][m, :, 0] = tput
            for name in ROW_ARRAYS:
                setattr(self, name, bufs[name][:m + 1])
            self._entries_changed()
            return
        if self._index is not None:
            self._index.update(zip(new, range(base, base + k)))
        if members is not None and kernels.ENABLED and self._room_for_pairs(members, m + k):
            # New pair entries (the allocation's, at a recompute): written in place, compiled (core/pair_entries.py).
            self.entries.extend(new)
            append_pair_rows(*(bufs[name] for name in ROW_ARRAYS), m, members, self.key_row, self.table.colocated,
                             self._cols, self.prior, self.scale)
            for name in ROW_ARRAYS:
                setattr(self, name, bufs[name][:m + k])
            self.pins.mask_pairs(m)
            self._entries_changed()
            return
        if members is None:
            members = np.full((k, 2), -1, np.int64)
            for r, ids in enumerate(new):
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
        self._append_rows(members=members, t=np.full((k, self.n), self.prior), deficit=np.zeros((k, self.n)),
                          alloc=np.zeros((k, self.n)), in_alloc=np.zeros(k, bool), ok=ok,
                          escale=self.scale[members[:, 0]], etput=etput)
        self.pins.mask_pairs(m)
        self._entries_changed()

    def _room_for_pairs(self, members: np.ndarray, end: int) -> bool:
        """Whether `append_pair_rows` can write these entries: pairs only, and the row buffers reach `end`."""
        bufs = self._row_buffers
        return (bool(bufs) and len(bufs["members"]) >= end and len(self._cols) == self.n
                and bool((members[:, 1] >= 0).all()))

    def _drop_entries(self, rows) -> None:
        if len(rows) == 0:
            return
        if len(rows) == 1:                         # a job left: shift the rows after it up (no copy of the rest)
            r = int(rows[0])
            del self.entries[r]
            self._index = None
            for name in ROW_ARRAYS:
                rows_now = getattr(self, name)
                rows_now[r:-1] = rows_now[r + 1:]
                setattr(self, name, rows_now[:-1])
            self._entries_changed()
            return
        keep = np.ones(len(self.entries), bool)
        keep[rows] = False
        self.entries = list(compress(self.entries, keep.tolist()))
        self._index = None
        m = len(self.entries)
        bufs, arrays = self._row_buffers, [getattr(self, name) for name in ROW_ARRAYS]
        if kernels.ENABLED and all(a.base is bufs[name] for name, a in zip(ROW_ARRAYS, arrays)):
            compact_entry_rows(*arrays, keep)      # every array compacted in place, in the buffer it views
            for name in ROW_ARRAYS:
                setattr(self, name, bufs[name][:m])
            self._entries_changed()
            return
        for name, rows_now in zip(ROW_ARRAYS, arrays):     # rows exist, so their buffers do (`_append_rows`)
            bufs[name][:m] = rows_now[keep]
            setattr(self, name, bufs[name][:m])
        self._entries_changed()

    def _append_rows(self, **rows: np.ndarray) -> None:
        """Append rows to each row-aligned array. The arrays are views of buffers that double when full, so an
        arrival costs the new rows, not a copy of every active job's (a view is valid until the next change)."""
        bufs = self._row_buffers
        m = len(self.members)
        for name in ROW_ARRAYS:
            new, buf = rows[name], bufs.get(name)
            end = m + len(new)
            if buf is None or len(buf) < end:
                grown = np.empty((max(64, 2 * end),) + new.shape[1:], new.dtype)
                grown[:m] = getattr(self, name)
                bufs[name] = buf = grown
            buf[m:end] = new
            setattr(self, name, buf[:end])

    def _entries_changed(self) -> None:
        """Entries, their rates or the allocation changed: the masks below are rebuilt when next read."""
        self._masks = None

    def _entry_masks(self) -> tuple[np.ndarray, bool, bool]:
        if self._masks is None:
            self._masks = (~self.ok | ~self.in_alloc[:, None], bool((self.members[:, 1] >= 0).any()),
                           bool((self.escale == 1).all()))
        return self._masks

    @property
    def _blocked(self) -> np.ndarray:
        """Per entry and type: cannot run (a member has no rate there, or the entry is not in the allocation)."""
        return (self._masks or self._entry_masks())[0]

    @property
    def _has_pairs(self) -> bool:
        return (self._masks or self._entry_masks())[1]

    @property
    def _all_single_gpu(self) -> bool:
        return (self._masks or self._entry_masks())[2]

    def _follow_pairs(self, allocation) -> tuple[np.ndarray, np.ndarray | None]:
        """Pair entries follow the allocation: new pairs appear (appended in the allocation's order), pairs with no
        time disappear, the others keep their rows. Returns the rows of the pairs with time and their time
        fractions (none without pairs before or after). Pairs are matched by codes `a x M + b` of their jobs'
        ranks among the ids involved (a pair's entry names its jobs as the allocation does: lower id first)."""
        has_pairs = bool((self.members[:, 1] >= 0).any())        # (the masks are stale after arrivals)
        if not len(allocation.pairs) and not has_pairs:
            return np.zeros(0, np.int64), None
        used = allocation.x_pairs.sum(axis=1) > 0
        pairs = allocation.pairs[used]
        want = allocation.job_ids[pairs].astype(np.int64).reshape(-1, 2)
        if kernels.ENABLED:
            ok, out, drop, fresh = match_pairs(self.members, self.job_of_slot, want)
            if ok:
                self._drop_entries(drop)
                if fresh.any():
                    slots = self._slots_of_rows(allocation.job_ids)
                    self._add_entries(list(map(tuple, want[fresh].tolist())), slots[pairs[fresh]])
                return out, allocation.x_pairs[used]
        rows = np.flatnonzero(self.members[:, 1] >= 0) if has_pairs else np.zeros(0, np.int64)
        have = self.job_of_slot[self.members[rows]]
        want_code, have_code = _pair_codes(want, have)
        by_code = np.argsort(have_code)
        at = np.minimum(np.searchsorted(have_code, want_code, sorter=by_code), max(len(rows) - 1, 0))
        found = have_code[by_code[at]] == want_code if len(rows) else np.zeros(len(want), bool)
        kept = np.zeros(len(rows), bool)
        kept[by_code[at[found]]] = True
        if not kept.all():
            self._drop_entries(rows[~kept])
        fresh = ~found
        base = len(self.entries)
        if fresh.any():
            slots = self._slots_of_rows(allocation.job_ids)
            self._add_entries(list(map(tuple, want[fresh].tolist())), slots[pairs[fresh]])
        # Rows now: the kept pairs in their old order (shifted up by the drops), then the new ones in want's order.
        rows_now = np.concatenate([np.flatnonzero(self.members[:base, 1] >= 0),
                                   np.arange(base, len(self.entries), dtype=np.int64)])
        out = np.empty(len(want), np.int64)
        out[found] = rows_now[(np.cumsum(kept) - 1)[by_code[at[found]]]]
        out[fresh] = rows_now[int(kept.sum()) + np.arange(int(fresh.sum()))]
        return out, allocation.x_pairs[used]

    def _slots_of_rows(self, job_ids: np.ndarray) -> np.ndarray:
        """The slot of each job of an allocation's rows: usually the last view's (all active jobs, in id order)."""
        slots = self._view_slots
        if slots is None or not np.array_equal(self.job_of_slot[slots], job_ids):
            slots = self.slots_of(job_ids)
        return slots

    def rows_of_jobs(self, job_ids: np.ndarray) -> np.ndarray:
        """The row of each job's single entry (every active job has one)."""
        slots = self._slots_of_rows(job_ids)
        if round_kernels.ENABLED:
            return round_kernels.single_rows(self.members, slots, len(self.job_of_slot))
        single = np.flatnonzero(self.members[:, 1] < 0)
        row_of_slot = np.full(len(self.job_of_slot), -1, np.int64)
        row_of_slot[self.members[single, 0]] = single
        return row_of_slot[slots]

    def entry_of(self, job_ids: tuple[int, ...]) -> int | None:
        """The row of a combination (a job, or a co-located pair) now, or None if it left."""
        return self._entry_index.get(tuple(job_ids))
