"""Compiled build of the unit-pair allocation polytope (`formulation.build_polytope` with space sharing).

Packed LAS poses one LP per reset event, thousands per run, over a few dozen units; numpy's version of this
build is some forty small array operations, so its cost is call overhead. This loop yields the same candidate
pairs in the same (C) order and the same coefficients, computed by the same float operations, as the numpy code,
which stays the reference and the fallback (`HETSCHED_KERNELS=0`); tests/test_kernels.py compares the two bit
for bit.
"""

from __future__ import annotations

import numpy as np

from hetsched.compiled.jit import compiled
from hetsched.compiled.kernels import finite


@compiled
def unit_pair_polytope(tput, s, mult, key, colocated):
    """Candidate pairs and the COO parts of the capacity, time and effective-throughput rows.

    `tput` (u, n) and `s`, `mult`, `key` (u) describe the units by their first jobs; `colocated` (keys, keys, n, 2)
    the pair rates. Returns `pv` (p, 3) = (unit k, unit l >= k, type j) where both rates are positive, the scale
    factors agree and, for k == l, the unit has two jobs or more; then (data, row, col) of each block, laid out as
    `build_polytope` concatenates them: alone variables first, then per pair k's entries, then l's (k != l).
    """
    u, n = tput.shape
    pv = np.empty((u * (u + 1) // 2 * n, 3), np.int64)
    c0 = np.empty(len(pv))
    c1 = np.empty(len(pv))
    p = off = 0                         # candidates, of which crossed (k != l)
    for k in range(u):
        for l in range(k, u):
            if s[k] != s[l] or (k == l and not mult[k] >= 2):
                continue
            for j in range(n):
                a = finite(colocated[key[k], key[l], j, 0])
                b = finite(colocated[key[k], key[l], j, 1])
                if a > 0 and b > 0:
                    pv[p, 0], pv[p, 1], pv[p, 2] = k, l, j
                    c0[p], c1[p] = a, b
                    p += 1
                    off += k != l
    pv = pv[:p]
    alone = u * n
    cap_d, cap_r, cap_c = np.empty(alone + p), np.empty(alone + p, np.int64), np.empty(alone + p, np.int64)
    size = alone + p + off
    time_d, time_r, time_c = np.empty(size), np.empty(size, np.int64), np.empty(size, np.int64)
    eff_d = np.empty(size)
    for k in range(u):
        for j in range(n):
            i = k * n + j
            cap_d[i], cap_r[i], cap_c[i] = mult[k] * s[k], j, i
            time_d[i], time_r[i], time_c[i] = 1.0, k, i
            eff_d[i] = tput[k, j]
    e = alone + p                       # next entry of l's side
    for q in range(p):
        k, l, j = pv[q, 0], pv[q, 1], pv[q, 2]
        i = alone + q                   # the pair's variable, and its entries' index in the k side
        cap_d[i], cap_r[i], cap_c[i] = s[k], j, i
        share_k = (2.0 if k == l else 1.0) / mult[k]
        time_d[i], time_r[i], time_c[i] = share_k, k, i
        eff_d[i] = share_k * c0[q]
        if k != l:
            share_l = 1.0 / mult[l]
            time_d[e], time_r[e], time_c[e] = share_l, l, i
            eff_d[e] = share_l * c1[q]
            e += 1
    return pv, (cap_d, cap_r, cap_c), (time_d, time_r, time_c), eff_d
