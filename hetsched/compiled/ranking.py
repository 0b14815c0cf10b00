"""Compiled ranking of select's candidates in np.lexsort's order (docs/rules.md#select).

`_rank` sorts all candidates (a merge sort on the floats, for the few dozen of a Gavel round); `_heap_of` and
`_pop` take them one by one from a heap on integer keys, so that a walk over hundreds of candidates (space-sharing
pairs) that stops when the GPUs are taken pays only for the ones it reached. Both give numpy's order: NaN last,
-0.0 equal to 0.0, ties by row.
"""

from __future__ import annotations

import numpy as np

from hetsched.compiled.jit import compiled as _compiled


@_compiled
def _after(x, y):
    """numpy's sort order of floats: NaN after every number, NaNs equal."""
    return x > y or (x != x and y == y)


@_compiled
def _compare(x, y):
    """-1, 0 or 1 as x sorts before, with or after y."""
    return -1 if _after(y, x) else (1 if _after(x, y) else 0)


@_compiled
def _precedes(k3, k2, k1, i, j):
    """Row i ranks before row j: keys compared in turn (k3 first), then the row (np.lexsort's order)."""
    c = _compare(k3[i], k3[j]) or _compare(k2[i], k2[j]) or _compare(k1[i], k1[j])
    return c < 0 if c else i < j


@_compiled
def _rank(k3, k2, k1):
    """np.lexsort((k1, k2, k3)): a bottom-up merge sort of the rows under `_precedes`."""
    n = len(k3)
    idx = np.arange(n)
    buf = np.empty(n, np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            a, b, o = lo, mid, lo
            while a < mid and b < hi:
                if _precedes(k3, k2, k1, idx[b], idx[a]):
                    buf[o] = idx[b]
                    b += 1
                else:
                    buf[o] = idx[a]
                    a += 1
                o += 1
            while a < mid:
                buf[o] = idx[a]
                a += 1
                o += 1
            while b < hi:
                buf[o] = idx[b]
                b += 1
                o += 1
        idx, buf = buf, idx
        width *= 2
    return idx


#: Above this many candidates for a GPU type, `select_walk` pops them from a heap instead of sorting them all.
LAZY_RANK_ABOVE = 64


@_compiled
def _sort_keys(x):
    """Unsigned integers that order as numpy sorts the floats `x`: NaN last (all equal), -0.0 equal to 0.0."""
    bits = (x + 0.0).view(np.uint64)                 # + 0.0 turns -0.0 into 0.0
    out = np.empty(len(x), np.uint64)
    sign = np.uint64(1) << np.uint64(63)
    for i in range(len(x)):
        if x[i] != x[i]:
            out[i] = ~np.uint64(0)
        elif bits[i] & sign:
            out[i] = ~bits[i]
        else:
            out[i] = bits[i] | sign
    return out


@_compiled
def _first(a, b, c, i, j):
    """Row i ranks before row j under integer keys a, b, c compared in turn, then the row."""
    if a[i] != a[j]:
        return a[i] < a[j]
    if b[i] != b[j]:
        return b[i] < b[j]
    if c[i] != c[j]:
        return c[i] < c[j]
    return i < j


@_compiled
def _sift(heap, size, pos, a, b, c):
    """Restore the min-heap below `pos` (heap[:size] holds rows)."""
    item = heap[pos] if size else 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        if child + 1 < size and _first(a, b, c, heap[child + 1], heap[child]):
            child += 1
        if not _first(a, b, c, heap[child], item):
            break
        heap[pos] = heap[child]
        pos = child
    if size:
        heap[pos] = item


@_compiled
def _heap_of(k3, k2, k1):
    """A min-heap of the rows under np.lexsort((k1, k2, k3))'s order, and its integer keys: popping it row by
    row gives the lexsort's order, and a walk that stops early pays only for the rows it took."""
    a, b, c = _sort_keys(k3), _sort_keys(k2), _sort_keys(k1)
    n = len(a)
    heap = np.arange(n)
    for pos in range(n // 2 - 1, -1, -1):
        _sift(heap, n, pos, a, b, c)
    return heap, a, b, c


@_compiled
def _pop(heap, size, a, b, c):
    """The first row of a heap of `size` rows (`_heap_of`); the heap keeps the other size - 1."""
    top = heap[0]
    heap[0] = heap[size - 1]
    _sift(heap, size - 1, 0, a, b, c)
    return top
