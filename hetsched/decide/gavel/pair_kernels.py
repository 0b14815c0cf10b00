"""Compiled job pairing of space-sharing solutions (`formulation.decompose_pairs`).

A packed LAS run decomposes ~3,500 solutions into a few hundred job pairs each; the numpy code is some eighty
small array operations per solution, so its cost is call overhead. These loops do the same arithmetic in the same
order as the numpy functions they stand in for (`_ends`, `_intervals`, `_cross`, `_folded` and the pairs'
fractions), so the pairs and fractions are bit-identical; tests/test_kernels.py runs both paths. The numpy code stays
the reference and the fallback (`HETSCHED_KERNELS=0`).
"""

from __future__ import annotations

import numpy as np

from hetsched.compiled.jit import compiled as _compiled


@_compiled
def _ends(combo, supply, num):
    """Each job's interval end within its combo (np.cumsum less the combos before), and each combo's total
    (np.bincount with weights): sums in element order, as numpy's."""
    k = len(supply)
    cs = np.empty(k)
    acc = 0.0
    for i in range(k):
        acc = acc + supply[i] if i else supply[i]
        cs[i] = acc
    totals = np.zeros(num)
    for i in range(k):
        totals[combo[i]] += supply[i]
    before = np.empty(num)
    acc = 0.0
    for c in range(num):
        acc = acc + totals[c] if c else totals[c]
        before[c] = acc - totals[c]
    ends = np.empty(k)
    for i in range(k):
        ends[i] = cs[i] - before[combo[i]]
    return ends, totals


@_compiled
def _intervals(points_combo, points, limit, shift):
    """Distinct breakpoints per combo in [0, limit[c]] -> consecutive intervals (combo, start, length)."""
    num = len(limit)
    vals = np.empty(len(points) + 2 * num)
    k = 0
    for i in range(len(points)):
        c = points_combo[i]
        if points[i] <= limit[c]:
            vals[k] = points[i] + c * shift
            k += 1
    for c in range(num):
        if 0.0 <= limit[c]:
            vals[k] = 0.0 + c * shift
            k += 1
    for c in range(num):
        if limit[c] <= limit[c]:
            vals[k] = limit[c] + c * shift
            k += 1
    vals = np.sort(vals[:k])
    key = np.empty(k)                                  # np.unique: the first of each run of equal values
    u = 0
    for i in range(k):
        if i == 0 or vals[i] != vals[i - 1]:
            key[u] = vals[i]
            u += 1
    return _spans(key[:u], shift)


@_compiled
def _spans(key, shift):
    """Sorted distinct breakpoints -> the intervals between neighbours of one combo (combo, start, length)."""
    u = len(key)
    combo = np.empty(u, np.int64)
    for i in range(u):
        combo[i] = np.int64(np.floor(key[i] / shift + 1e-12))
    out_c = np.empty(max(u - 1, 0), np.int64)
    out_s = np.empty(max(u - 1, 0))
    out_l = np.empty(max(u - 1, 0))
    r = 0
    for i in range(u - 1):
        if combo[i + 1] == combo[i]:
            out_c[r] = combo[i]
            out_s[r] = key[i] - combo[i] * shift
            out_l[r] = key[i + 1] - key[i]
            r += 1
    return out_c[:r], out_s[:r], out_l[:r]


@_compiled
def _ascending(x, strict):
    for i in range(1, len(x)):
        if not (x[i - 1] < x[i] if strict else x[i - 1] <= x[i]):
            return False
    return True


@_compiled
def _merged_breakpoints(ca, ends_a, sh_a, cb, ends_b, sh_b, limit, shift):
    """`_intervals`' distinct breakpoints of two sides whose shifted ends ascend, merged combo by combo (0, both
    sides' ends up to the limit, the limit) instead of sorted; empty if they do not come out strictly ascending,
    and the caller sorts."""
    num = len(limit)
    out = np.empty(len(sh_a) + len(sh_b) + 2 * num)
    u, i, j = 0, 0, 0
    for c in range(num):
        lim = limit[c]
        if 0.0 <= lim:
            out[u] = 0.0 + c * shift
            u += 1
        while True:
            in_a, in_b = i < len(ca) and ca[i] == c, j < len(cb) and cb[j] == c
            if not (in_a or in_b):
                break
            if in_a and not (in_b and sh_b[j] < sh_a[i]):
                v, keep = sh_a[i], ends_a[i] <= lim
                i += 1
            else:
                v, keep = sh_b[j], ends_b[j] <= lim
                j += 1
            if keep and (u == 0 or v != out[u - 1]):
                out[u] = v
                u += 1
        top = lim + c * shift
        if lim <= lim and (u == 0 or top != out[u - 1]):
            out[u] = top
            u += 1
    ok = i == len(ca) and j == len(cb) and _ascending(out[:u], True)
    return out[:u] if ok else out[:0]


@_compiled
def _right_of(sorted_values, x):
    """np.searchsorted(sorted_values, x, side="right") for one value."""
    lo, hi = 0, len(sorted_values)
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if x < sorted_values[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@_compiled
def _shifted(ends, combo, shift):
    out = np.empty(len(ends))
    for i in range(len(ends)):
        out[i] = ends[i] + combo[i] * shift
    return out


@_compiled
def cross(ca, ja, sa, cb, jb, sb, num, shift):
    """`formulation._cross`: two sides laid end to end per combo; (job of a, job of b, combo, length) per overlap.
    Both sides' shifted ends ascend (combos in order, positive supplies): their breakpoints are merged and each
    overlap's owners found by walking along, which gives the sort's and the binary search's results in linear
    time; `_intervals` and `_right_of` stay for inputs that do not ascend."""
    ends_a, tot_a = _ends(ca, sa, num)
    ends_b, tot_b = _ends(cb, sb, num)
    limit = np.empty(num)
    for c in range(num):
        limit[c] = tot_a[c] if tot_a[c] <= tot_b[c] or tot_a[c] != tot_a[c] else tot_b[c]    # np.minimum
    sh_a, sh_b = _shifted(ends_a, ca, shift), _shifted(ends_b, cb, shift)
    walk = _ascending(sh_a, False) and _ascending(sh_b, False)
    key = _merged_breakpoints(ca, ends_a, sh_a, cb, ends_b, sh_b, limit, shift) if walk else np.empty(0)
    if len(key):
        combo, start, length = _spans(key, shift)
    else:
        walk = False
        combo, start, length = _intervals(np.concatenate((ca, cb)), np.concatenate((ends_a, ends_b)), limit, shift)
    k = len(combo)
    out_a, out_b = np.empty(k, ja.dtype), np.empty(k, jb.dtype)
    pa, pb, last = 0, 0, -np.inf
    for r in range(k):
        mid = start[r] + length[r] / 2 + combo[r] * shift
        if walk and mid >= last:                       # np.searchsorted(side="right"), walking on from the last
            last = mid
            while pa < len(sh_a) and not mid < sh_a[pa]:
                pa += 1
            while pb < len(sh_b) and not mid < sh_b[pb]:
                pb += 1
            ia, ib = pa, pb
        else:
            ia, ib = _right_of(sh_a, mid), _right_of(sh_b, mid)
        out_a[r] = ja[min(ia, len(ja) - 1)]
        out_b[r] = jb[min(ib, len(jb) - 1)]
    return out_a, out_b, combo, length


@_compiled
def folded(ca, ja, sa, num, shift):
    """`formulation._folded`: one side folded in half per combo; (job, job, combo, length) per overlap."""
    ends, tot = _ends(ca, sa, num)
    half = tot / 2
    fold = np.empty(len(ends))
    for i in range(len(ends)):
        h = half[ca[i]]
        fold[i] = ends[i] if ends[i] < h else ends[i] - h
    combo, start, length = _intervals(ca, fold, half, shift)
    shifted = _shifted(ends, ca, shift)
    k = len(combo)
    lo, hi = np.empty(k, ja.dtype), np.empty(k, ja.dtype)
    for r in range(k):
        mid = start[r] + length[r] / 2
        c = combo[r]
        lo[r] = ja[min(_right_of(shifted, mid + c * shift), len(ja) - 1)]
        hi[r] = ja[min(_right_of(shifted, mid + half[c] + c * shift), len(ja) - 1)]
    return lo, hi, combo, length


@_compiled
def pair_fractions(i, k, gpu, v, m, n, eps):
    """Overlaps -> distinct job pairs (lower row first, ascending codes) and their time per type, summed in order."""
    keep = np.flatnonzero((v > eps) & (i != k))
    codes = np.empty(len(keep), np.int64)
    for r in range(len(keep)):
        a, b = i[keep[r]], k[keep[r]]
        codes[r] = (a if a < b else b) * m + (b if a < b else a)
    distinct = np.unique(codes)
    x = np.zeros((len(distinct), n))
    for r in range(len(keep)):
        x[np.searchsorted(distinct, codes[r]), gpu[keep[r]]] += v[keep[r]]
    pairs = np.empty((len(distinct), 2), np.int64)
    for r in range(len(distinct)):
        pairs[r, 0] = distinct[r] // m
        pairs[r, 1] = distinct[r] % m
    return pairs, x


@_compiled
def _flatten(groups, size, start, order):
    """`formulation._flatten`: for combo c the jobs `order[start[groups[c]] : ... + size[groups[c]]]`."""
    total = 0
    for c in range(len(groups)):
        total += size[groups[c]]
    combo, jobs = np.empty(total, np.int64), np.empty(total, order.dtype)
    r = 0
    for c in range(len(groups)):
        g = groups[c]
        for w in range(size[g]):
            combo[r], jobs[r] = c, order[start[g] + w]
            r += 1
    return combo, jobs


@_compiled
def _unit_pair_side(same, order, size, start, mult, pv, y, shift):
    """One half of `formulation._unit_pair_parts`: the crossed (k != l) or the folded (k == l) pair variables.
    Loops rather than array expressions: no temporary arrays."""
    count = 0
    for q in range(len(pv)):
        count += (pv[q, 0] == pv[q, 1]) == same
    k, l, j = np.empty(count, np.int64), np.empty(count, np.int64), np.empty(count, np.int64)
    own, other = np.empty(count), np.empty(count)
    r = 0
    for q in range(len(pv)):
        if (pv[q, 0] == pv[q, 1]) == same:
            k[r], l[r], j[r] = pv[q, 0], pv[q, 1], pv[q, 2]
            own[r] = y[q] * (2.0 if same else 1.0) / mult[k[r]]
            other[r] = y[q] / mult[l[r]]
            r += 1
    ca, ja = _flatten(k, size, start, order)
    sa = np.empty(len(ca))
    for i in range(len(ca)):
        sa[i] = own[ca[i]]
    if same:
        i1, i2, combo, length = folded(ca, ja, sa, count, shift)
    else:
        cb, jb = _flatten(l, size, start, order)
        sb = np.empty(len(cb))
        for i in range(len(cb)):
            sb[i] = other[cb[i]]
        i1, i2, combo, length = cross(ca, ja, sa, cb, jb, sb, count, shift)
    gpu = np.empty(len(combo), np.int64)
    for i in range(len(combo)):
        gpu[i] = j[combo[i]]
    return i1, i2, gpu, length


@_compiled
def unit_pairs(of_job, mult, pv, y, shift, m, n, eps):
    """`formulation.decompose_pairs` in the unit-pair form, kept pair variables `pv` with times `y`: the crossed
    unit pairs, then the folded ones (`_unit_pair_parts`), then `pair_fractions`; the same arrays throughout."""
    order = np.argsort(of_job, kind="mergesort")                 # jobs by unit, then id
    size, start = np.empty(len(mult), np.int64), np.empty(len(mult), np.int64)
    total = 0
    for g in range(len(mult)):
        size[g] = np.int64(mult[g])
        start[g] = total
        total += size[g]
    a1, a2, aj, av = _unit_pair_side(False, order, size, start, mult, pv, y, shift)
    b1, b2, bj, bv = _unit_pair_side(True, order, size, start, mult, pv, y, shift)
    return pair_fractions(np.concatenate((a1, b1)), np.concatenate((a2, b2)), np.concatenate((aj, bj)),
                          np.concatenate((av, bv)), m, n, eps)
