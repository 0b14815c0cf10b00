"""Compiled loops for the pair entries that follow each solution (`EntryTable.follow_pairs`, core/entries.py).

- `match_pairs`: the solution's job pairs matched with the pair entries (by a hash of their ids), the rows to drop
  and each pair's row afterwards;
- `append_pair_rows`: new pair entries' rows written in place into the row buffers;
- `compact_entry_rows`: the rows left after a drop moved up in all eight row arrays in one call.

With space sharing these run at every recompute, where the numpy code's dozens of small calls cost more than the
work itself. The numpy code in core/entries.py is the reference and the fallback (`HETSCHED_KERNELS=0`, ids of 2^31
and more); tests/test_entry_table.py runs both paths against a list-based reference and each other.
"""

from __future__ import annotations

import numpy as np

from hetsched.compiled.jit import compiled
from hetsched.compiled.kernels import finite

_ID_LIMIT = 2 ** 31              # two ids in one int64 code: a x 2^32 + b


@compiled
def _hash(code, size):
    """A slot in a table of `size` (a power of two) for a pair's code: a multiplicative hash, high bits folded in."""
    x = code * 0x5851F42D4C957F2D
    return (x ^ (x >> 32)) & (size - 1)


@compiled
def match_pairs(members, job_of_slot, want):
    """Match each wanted pair (job ids as the allocation names them) with the pair entry holding the same jobs in
    the same order. Returns `(ok, out, drop, fresh)`: the row of each wanted pair once the pair entries that no pair
    wants (`drop`, ascending) have left and the `fresh` ones have been appended in `want`'s order. `ok` is False
    (nothing else is valid) when an id is negative or not below 2^31; the caller then takes the numpy path."""
    num_entries, k = members.shape[0], want.shape[0]
    out = np.empty(k, np.int64)
    fresh = np.zeros(k, np.bool_)
    rows = np.empty(num_entries, np.int64)
    codes = np.empty(num_entries, np.int64)
    r = 0
    for e in range(num_entries):
        if members[e, 1] >= 0:
            a, b = job_of_slot[members[e, 0]], job_of_slot[members[e, 1]]
            if a < 0 or b < 0 or a >= _ID_LIMIT or b >= _ID_LIMIT:
                return False, out, rows[:0], fresh
            rows[r] = e
            codes[r] = (a << 32) | b
            r += 1
    size = 2
    while size < 2 * r:
        size *= 2
    slot_of = np.full(size, -1, np.int64)    # open addressing: the index into rows[:r] of each code's pair entry
    for i in range(r):
        h = _hash(codes[i], size)
        while slot_of[h] >= 0:
            h = (h + 1) & (size - 1)
        slot_of[h] = i
    match = np.full(k, -1, np.int64)          # index into rows[:r]
    kept = np.zeros(r, np.bool_)
    for w in range(k):
        a, b = want[w, 0], want[w, 1]
        if a < 0 or b < 0 or a >= _ID_LIMIT or b >= _ID_LIMIT:
            return False, out, rows[:0], fresh
        code = (a << 32) | b
        h = _hash(code, size)
        while slot_of[h] >= 0:
            if codes[slot_of[h]] == code:
                match[w] = slot_of[h]
                kept[slot_of[h]] = True
                break
            h = (h + 1) & (size - 1)
    new_row = np.empty(r, np.int64)           # a kept pair's row after the drops (rows keep their order)
    drop = np.empty(r, np.int64)
    dropped = 0
    for i in range(r):
        if kept[i]:
            new_row[i] = rows[i] - dropped
        else:
            drop[dropped] = rows[i]
            dropped += 1
    appended = num_entries - dropped
    for w in range(k):
        if match[w] >= 0:
            out[w] = new_row[match[w]]
        else:
            fresh[w] = True
            out[w] = appended
            appended += 1
    return True, out, drop[:dropped], fresh


@compiled
def append_pair_rows(members, t, deficit, alloc, in_alloc, ok, escale, etput, m, new, key_row, colocated, cols,
                     prior, scale):
    """Write the rows of pair entries (slots `new`, (k, 2)) at row m of each row buffer, as `_add_entries` builds
    them: no time yet (`prior`), the table's consolidated pair rates (zero when a job's type has none), runnable on
    a type where both members make progress."""
    for i in range(new.shape[0]):
        r = m + i
        sa, sb = new[i, 0], new[i, 1]
        a, b = key_row[sa], key_row[sb]
        members[r, 0], members[r, 1] = sa, sb
        in_alloc[r] = False
        escale[r] = scale[sa]
        for w in range(t.shape[1]):
            t[r, w] = prior
            deficit[r, w] = 0.0
            alloc[r, w] = 0.0
            for s in range(2):
                etput[r, w, s] = finite(colocated[a, b, cols[w], 0, s]) if a >= 0 and b >= 0 else 0.0
            ok[r, w] = etput[r, w, 0] > 0 and etput[r, w, 1] > 0


@compiled
def compact_entry_rows(members, t, deficit, alloc, in_alloc, ok, escale, etput, keep):
    """Move the rows that `keep` marks up to the front of every row array, in order, in place (`_drop_entries`:
    the same rows as `rows[keep]`). Element loops: they compile in a fraction of the time of row assignments."""
    w = 0
    n = t.shape[1]
    for i in range(len(keep)):
        if keep[i]:
            if w != i:
                members[w, 0], members[w, 1] = members[i, 0], members[i, 1]
                in_alloc[w], escale[w] = in_alloc[i], escale[i]
                for c in range(n):
                    t[w, c], deficit[w, c], alloc[w, c], ok[w, c] = t[i, c], deficit[i, c], alloc[i, c], ok[i, c]
                    etput[w, c, 0], etput[w, c, 1] = etput[i, c, 0], etput[i, c, 1]
            w += 1
    return w
