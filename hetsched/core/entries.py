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
    """Adds, drops and looks up a `Scheduler`'s entries (its rows: `entries`, `members`, `t`, ...).

    Per-job work stays proportional to the change: the row index (`index`) and the masks derived from
    the rows (`blocked`, `has_pairs`, `all_single_gpu`) are rebuilt on first use after a change, so a round
    that admits or retires many jobs rebuilds them once, not once per job.
    """

    def __init__(self, sched):
        self.sched = sched
        self._index: dict[tuple[int, ...], int] | None = {}     # rebuilt after drops
        self._masks: tuple[np.ndarray, bool, bool] | None = None
        self._row_buffers: dict[str, np.ndarray] = {}     # what the scheduler's row arrays are views of

    @property
    def index(self) -> dict[tuple[int, ...], int]:
        """Combination (job ids) -> row."""
        if self._index is None:
            self._index = {e: i for i, e in enumerate(self.sched.entries)}
        return self._index

    def add(self, new: list[tuple[int, ...]], members: np.ndarray | None = None) -> None:
        """Append entries (tuples of job ids); `members`, when given, holds their slots (k, 2), -1 = none."""
        sched = self.sched
        if not new:
            return
        k = len(new)
        base = len(sched.entries)
        m, bufs = len(sched.members), self._row_buffers
        if k == 1 and len(new[0]) == 1 and bufs and len(bufs["members"]) > m:
            # An arrival (the common case) while the buffers have room: its row written in place.
            s = sched.slot[new[0][0]]
            if self._index is not None:
                self._index[new[0]] = base
            sched.entries.append(new[0])
            tput = sched.tput[s]
            bufs["members"][m] = (s, -1)
            bufs["t"][m] = sched.prior
            bufs["deficit"][m] = bufs["alloc"][m] = 0.0
            bufs["in_alloc"][m] = False
            bufs["ok"][m] = tput > 0
            bufs["escale"][m] = sched.scale[s]
            bufs["etput"][m] = 0.0
            bufs["etput"][m, :, 0] = tput
            for name in ROW_ARRAYS:
                setattr(sched, name, bufs[name][:m + 1])
            self.changed()
            return
        if self._index is not None:
            self._index.update(zip(new, range(base, base + k)))
        if members is not None and kernels.ENABLED and self._room_for_pairs(members, m + k):
            # New pair entries (the allocation's, at a recompute): written in place, compiled (core/pair_entries.py).
            sched.entries.extend(new)
            append_pair_rows(*(bufs[name] for name in ROW_ARRAYS), m, members, sched.key_row, sched.table.colocated,
                             sched._cols, sched.prior, sched.scale)
            for name in ROW_ARRAYS:
                setattr(sched, name, bufs[name][:m + k])
            sched.pins.mask_pairs(m)
            self.changed()
            return
        if members is None:
            members = np.full((k, 2), -1, np.int64)
            for r, ids in enumerate(new):
                members[r, : len(ids)] = [sched.slot[j] for j in ids]
        etput = np.zeros((k, sched.n, 2))
        single = members[:, 1] < 0
        etput[single, :, 0] = sched.tput[members[single, 0]]
        rows = sched.key_row[members[~single]]                    # (p, 2) table rows of the pairs' jobs
        known = (rows >= 0).all(axis=1)         # no co-location measurement for an unknown type: zero
        pair_rows = np.flatnonzero(~single)[known]
        if len(pair_rows):
            a, b = rows[known].T
            etput[pair_rows] = np.nan_to_num(sched.table.colocated[a[:, None], b[:, None], sched._cols[None, :], 0])
        sched.entries.extend(new)
        ok = np.where(single[:, None], etput[:, :, 0] > 0, (etput > 0).all(axis=2))
        self._append_rows(members=members, t=np.full((k, sched.n), sched.prior), deficit=np.zeros((k, sched.n)),
                          alloc=np.zeros((k, sched.n)), in_alloc=np.zeros(k, bool), ok=ok,
                          escale=sched.scale[members[:, 0]], etput=etput)
        sched.pins.mask_pairs(m)
        self.changed()

    def _room_for_pairs(self, members: np.ndarray, end: int) -> bool:
        """Whether `append_pair_rows` can write these entries: pairs only, and the row buffers reach `end`."""
        sched = self.sched
        bufs = self._row_buffers
        return (bool(bufs) and len(bufs["members"]) >= end and len(sched._cols) == sched.n
                and bool((members[:, 1] >= 0).all()))

    def drop(self, rows) -> None:
        sched = self.sched
        if len(rows) == 0:
            return
        if len(rows) == 1:                         # a job left: shift the rows after it up (no copy of the rest)
            r = int(rows[0])
            del sched.entries[r]
            self._index = None
            for name in ROW_ARRAYS:
                rows_now = getattr(sched, name)
                rows_now[r:-1] = rows_now[r + 1:]
                setattr(sched, name, rows_now[:-1])
            self.changed()
            return
        keep = np.ones(len(sched.entries), bool)
        keep[rows] = False
        sched.entries = list(compress(sched.entries, keep.tolist()))
        self._index = None
        m = len(sched.entries)
        bufs, arrays = self._row_buffers, [getattr(sched, name) for name in ROW_ARRAYS]
        if kernels.ENABLED and all(a.base is bufs[name] for name, a in zip(ROW_ARRAYS, arrays)):
            compact_entry_rows(*arrays, keep)      # every array compacted in place, in the buffer it views
            for name in ROW_ARRAYS:
                setattr(sched, name, bufs[name][:m])
            self.changed()
            return
        for name, rows_now in zip(ROW_ARRAYS, arrays):     # rows exist, so their buffers do (`_append_rows`)
            bufs[name][:m] = rows_now[keep]
            setattr(sched, name, bufs[name][:m])
        self.changed()

    def _append_rows(self, **rows: np.ndarray) -> None:
        """Append rows to each row-aligned array. The arrays are views of buffers that double when full, so an
        arrival costs the new rows, not a copy of every active job's (a view is valid until the next change)."""
        sched = self.sched
        bufs = self._row_buffers
        m = len(sched.members)
        for name in ROW_ARRAYS:
            new, buf = rows[name], bufs.get(name)
            end = m + len(new)
            if buf is None or len(buf) < end:
                grown = np.empty((max(64, 2 * end),) + new.shape[1:], new.dtype)
                grown[:m] = getattr(sched, name)
                bufs[name] = buf = grown
            buf[m:end] = new
            setattr(sched, name, buf[:end])

    def changed(self) -> None:
        """Entries, their rates or the allocation changed: the masks below are rebuilt when next read."""
        self._masks = None

    def masks(self) -> tuple[np.ndarray, bool, bool]:
        sched = self.sched
        if self._masks is None:
            self._masks = (~sched.ok | ~sched.in_alloc[:, None], bool((sched.members[:, 1] >= 0).any()),
                           bool((sched.escale == 1).all()))
        return self._masks

    @property
    def blocked(self) -> np.ndarray:
        """Per entry and type: cannot run (a member has no rate there, or the entry is not in the allocation)."""
        return (self._masks or self.masks())[0]

    @property
    def has_pairs(self) -> bool:
        return (self._masks or self.masks())[1]

    @property
    def all_single_gpu(self) -> bool:
        return (self._masks or self.masks())[2]

    def follow_pairs(self, allocation) -> tuple[np.ndarray, np.ndarray | None]:
        """Pair entries follow the allocation: new pairs appear (appended in the allocation's order), pairs with no
        time disappear, the others keep their rows. Returns the rows of the pairs with time and their time
        fractions (none without pairs before or after). Pairs are matched by codes `a x M + b` of their jobs'
        ranks among the ids involved (a pair's entry names its jobs as the allocation does: lower id first)."""
        sched = self.sched
        has_pairs = bool((sched.members[:, 1] >= 0).any())        # (the masks are stale after arrivals)
        if not len(allocation.pairs) and not has_pairs:
            return np.zeros(0, np.int64), None
        used = allocation.x_pairs.sum(axis=1) > 0
        pairs = allocation.pairs[used]
        want = allocation.job_ids[pairs].astype(np.int64).reshape(-1, 2)
        if kernels.ENABLED:
            ok, out, drop, fresh = match_pairs(sched.members, sched.job_of_slot, want)
            if ok:
                self.drop(drop)
                if fresh.any():
                    slots = self.slots_of_rows(allocation.job_ids)
                    self.add(list(map(tuple, want[fresh].tolist())), slots[pairs[fresh]])
                return out, allocation.x_pairs[used]
        rows = np.flatnonzero(sched.members[:, 1] >= 0) if has_pairs else np.zeros(0, np.int64)
        have = sched.job_of_slot[sched.members[rows]]
        want_code, have_code = _pair_codes(want, have)
        by_code = np.argsort(have_code)
        at = np.minimum(np.searchsorted(have_code, want_code, sorter=by_code), max(len(rows) - 1, 0))
        found = have_code[by_code[at]] == want_code if len(rows) else np.zeros(len(want), bool)
        kept = np.zeros(len(rows), bool)
        kept[by_code[at[found]]] = True
        if not kept.all():
            self.drop(rows[~kept])
        fresh = ~found
        base = len(sched.entries)
        if fresh.any():
            slots = self.slots_of_rows(allocation.job_ids)
            self.add(list(map(tuple, want[fresh].tolist())), slots[pairs[fresh]])
        # Rows now: the kept pairs in their old order (shifted up by the drops), then the new ones in want's order.
        rows_now = np.concatenate([np.flatnonzero(sched.members[:base, 1] >= 0),
                                   np.arange(base, len(sched.entries), dtype=np.int64)])
        out = np.empty(len(want), np.int64)
        out[found] = rows_now[(np.cumsum(kept) - 1)[by_code[at[found]]]]
        out[fresh] = rows_now[int(kept.sum()) + np.arange(int(fresh.sum()))]
        return out, allocation.x_pairs[used]

    def slots_of_rows(self, job_ids: np.ndarray) -> np.ndarray:
        """The slot of each job of an allocation's rows: usually the last view's (all active jobs, in id order)."""
        sched = self.sched
        slots = sched.views.last_slots
        if slots is None or not np.array_equal(sched.job_of_slot[slots], job_ids):
            slots = sched.job_slots.slots_of(job_ids)
        return slots

    def rows_of_jobs(self, job_ids: np.ndarray) -> np.ndarray:
        """The row of each job's single entry (every active job has one)."""
        sched = self.sched
        slots = self.slots_of_rows(job_ids)
        if round_kernels.ENABLED:
            return round_kernels.single_rows(sched.members, slots, len(sched.job_of_slot))
        single = np.flatnonzero(sched.members[:, 1] < 0)
        row_of_slot = np.full(len(sched.job_of_slot), -1, np.int64)
        row_of_slot[sched.members[single, 0]] = single
        return row_of_slot[slots]

    def entry_of(self, job_ids: tuple[int, ...]) -> int | None:
        """The row of a combination (a job, or a co-located pair) now, or None if it left."""
        return self.index.get(tuple(job_ids))
