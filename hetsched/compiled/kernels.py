"""The round kernels' loops: Gavel's per-round select and micro-task stages, as the C kernels run them.

A round of the Gavel core is a few dozen numpy operations on arrays of a few dozen entries, so its cost is call
overhead, not arithmetic. The eleven round kernels below are written once here, as plain Python loops, and once in
C (compiled/_rounds.c, line for line, called through compiled/round_kernels.py): the loops here are the reference each C
kernel is tested against on randomized states (tests/test_round_kernels.py), and do the same arithmetic in the same
order as the numpy code they stand in for, so every path gives the same bits (tests/test_kernels.py). A build
without C runs the numpy code, as `HETSCHED_KERNELS=0` does. The helpers this module compiles with numba
(`shuffled`, `finite`, `coo_to_csc`) serve other numba kernels and the shuffled type order.

- `select_walk`: priorities (docs/rules.md#priorities) and the greedy per-type walk (docs/rules.md#select).
- `run_tasks`: each entry's steps and finish time in a round (docs/rules.md#round).
- `credit_tasks`, `account_tasks`: time received, per-type totals, remaining steps; the result's per-job accounts.
- `mark_started`: a job's start time, the first time it is planned.
- `shuffled`: a shuffled GPU-type order, drawn as Python's `random.Random(seed).shuffle` draws it.
"""

from __future__ import annotations

import numpy as np

from hetsched.compiled.jit import ENABLED, compiled as _compiled
from hetsched.compiled.ranking import LAZY_RANK_ABOVE, _heap_of, _pop, _rank


def select_walk(t, S, alloc, deficit, in_alloc, ok, need_priority, members, escale, scale, capacity, order):
    """Entries and GPU types that run this round, in walk order (see `PrioritySelect.select`).

    pr = alloc / (t / S), alloc x 1e9 where t / S == 0, and 0 where alloc == 0 or the entry is blocked (a member
    cannot run on the type, `ok`, or the entry is not in the allocation, `in_alloc`). Per type in
    `order`, entries ranked by (priority, deficit, allocation) descending, ties by row, are taken while their GPUs
    fit, skipping any with a member already running this round and pairs whose partner has another scale factor;
    `need_priority`: only entries with priority > 0.
    """
    n, m = alloc.shape
    pr = np.empty((n, m))
    for e in range(n):
        for w in range(m):
            a = alloc[e, w]
            fraction = t[e, w] / S[w]
            p = a * 1e9 if fraction == 0 else a / fraction
            if a == 0 or not ok[e, w] or not in_alloc[e]:
                p = 0.0
            pr[e, w] = p
    free = capacity.copy()
    taken = np.zeros(len(scale), np.bool_)             # by slot: runs this round
    out_e = np.empty(n, np.int64)
    out_w = np.empty(n, np.int64)
    k = 0
    for i in range(len(order)):
        w = order[i]
        f = free[w]
        if f <= 0:
            continue
        cand = np.empty(n, np.int64)                   # only entries that could run are ranked (same order)
        c = 0
        for e in range(n):
            a, b = members[e, 0], members[e, 1]
            if not ok[e, w] or (need_priority and not pr[e, w] > 0) or taken[a] or escale[e] > f:
                continue
            if b >= 0 and (taken[b] or scale[b] != escale[e]):
                continue
            cand[c] = e
            c += 1
        cand = cand[:c]
        k3, k2, k1 = -pr[cand, w], -deficit[cand, w], -alloc[cand, w]
        lazy = c > LAZY_RANK_ABOVE              # many candidates, few GPUs: rank only as far as the walk goes
        if lazy:
            ranked, ka, kb, kc = _heap_of(k3, k2, k1)
        else:
            ranked = _rank(k3, k2, k1)
            ka = kb = kc = np.empty(0, np.uint64)
        for r in range(c):
            if f <= 0:
                break
            j = _pop(ranked, c - r, ka, kb, kc) if lazy else ranked[r]
            e = cand[j]
            a, b = members[e, 0], members[e, 1]
            if taken[a] or escale[e] > f or (b >= 0 and taken[b]):
                continue
            taken[a] = True
            if b >= 0:
                taken[b] = True
            out_e[k] = e
            out_w[k] = w
            k += 1
            f -= escale[e]
        free[w] = f
    return out_e[:k], out_w[:k]


def run_tasks(entry, gpu_type, members, etput, remaining, now, round_s):
    """Steps `min(floor(rate x round), remaining)` and finish `now + steps / rate` of each member, as (k, 2)
    arrays (an empty second member: 0 steps, finish -inf), and each entry's end (the later finish)."""
    k = len(entry)
    steps = np.zeros((k, 2))
    finish = np.full((k, 2), -np.inf)
    ends = np.empty(k)
    span = max(round_s, 0.0)
    for i in range(k):
        for col in range(2):
            slot = members[entry[i], col]
            if slot >= 0:
                r = etput[entry[i], gpu_type[i], col]
                s = min(np.floor(r * span), remaining[slot])
                steps[i, col] = s
                finish[i, col] = now + s / r
        f0, f1 = finish[i, 0], finish[i, 1]
        ends[i] = f0 if f0 >= f1 or f0 != f0 else f1        # np.max: NaN wins
    return steps, finish, ends


def credit_tasks(entry, gpu_type, members, steps, exec_time, t, S, remaining):
    """Time received per entry and type, per-type totals in plan order, each member's remaining steps; returns
    the slots of the jobs that completed (members in plan order)."""
    k = len(entry)
    done = np.empty(2 * k, np.int64)
    n = 0
    for i in range(k):
        t[entry[i], gpu_type[i]] += exec_time[i]
        S[gpu_type[i]] += exec_time[i]
    for i in range(k):                                # a job is a member of one planned entry at most
        for col in range(2):
            slot = members[entry[i], col]
            if slot >= 0:
                remaining[slot] -= steps[i, col]
                if remaining[slot] <= 0:
                    done[n] = slot
                    n += 1
    return done[:n]


def gpu_seconds(exec_time, scale):
    """A round's busy GPU-seconds, sum of exec_time x GPUs summed left to right (docs/rules.md#utilization)."""
    total = 0.0
    for i in range(len(exec_time)):
        total += exec_time[i] * scale[i]
    return total


def account_tasks(entry, gpu_type, members, steps, exec_time, scale, prices, priced, acc):
    """The result's per-job accounts: steps, GPU-seconds per type and (with prices) cost, a pair's paid once."""
    for i in range(len(entry)):
        w = gpu_type[i]
        pair = members[entry[i], 1] >= 0
        for col in range(2):
            slot = members[entry[i], col]
            if slot < 0:
                continue
            acc[slot, 1] += steps[i, col]
            acc[slot, 3 + w] += exec_time[i] * scale[i]
            if priced:
                acc[slot, 2] += prices[w] * exec_time[i] / 3600.0 * scale[i] / (2.0 if pair else 1.0)


#: `np.nan_to_num`'s stand-in for +inf (and its negative for -inf).
_BIG = np.finfo(np.float64).max


@_compiled
def finite(v):
    """`np.nan_to_num` of one float: NaN -> 0, +-inf -> the largest finite float of that sign (the pair rates'
    reading in decide/gavel/polytope_kernel.py and core/pair_entries.py)."""
    if v != v:
        return 0.0
    if v == np.inf:
        return _BIG
    if v == -np.inf:
        return -_BIG
    return v


@_compiled
def coo_to_csc(data, row, col, indptr, indices, out):
    """CSC of COO entries without duplicates, into `indptr` (zeros, one more than the columns), `indices` and `out`
    (the data): column by column, rows ascending, as scipy's canonical `csc_matrix((data, (row, col)))`. False if
    two entries share a position (scipy then sums them, in an order of its own:
    decide/gavel/rows.py falls back to it)."""
    num_cols = len(indptr) - 1
    for k in range(len(data)):
        indptr[col[k] + 1] += 1
    for c in range(num_cols):
        indptr[c + 1] += indptr[c]
    fill = indptr[:-1].copy()
    for k in range(len(data)):                  # input order within a column, then insertion-sorted by row
        at = fill[col[k]]
        fill[col[k]] += 1
        start = indptr[col[k]]
        while at > start and indices[at - 1] > row[k]:
            indices[at], out[at] = indices[at - 1], out[at - 1]
            at -= 1
        if at > start and indices[at - 1] == row[k]:
            return False
        indices[at], out[at] = row[k], data[k]
    return True


def mark_started(entry, members, acc, now):
    """Jobs planned for the first time start at `now` (the result's start column is NaN until then)."""
    for i in range(len(entry)):
        for col in range(2):
            slot = members[entry[i], col]
            if slot >= 0 and np.isnan(acc[slot, 0]):
                acc[slot, 0] = now


def codes_of(values):
    """`np.unique(values, return_inverse=True)` of integers: the distinct values (ascending) and each one's code."""
    n = len(values)
    order = np.argsort(values, kind="mergesort")
    code = np.empty(n, np.int64)
    distinct = np.empty(n, values.dtype)
    k = -1
    for i in range(n):
        v = values[order[i]]
        if k < 0 or v != distinct[k]:
            k += 1
            distinct[k] = v
        code[order[i]] = k
    return distinct[: k + 1], code


def proportional_rates(throughput, row):
    """`(throughput * row).sum(axis=1)` (decide/gavel/shares.py `proportional_throughput`), summed left to right as
    numpy sums fewer than 8 columns."""
    m, n = throughput.shape
    out = np.empty(m)
    for i in range(m):
        acc = throughput[i, 0] * row[0]
        for j in range(1, n):
            acc = acc + throughput[i, j] * row[j]
        out[i] = acc
    return out


def las_program(throughput, priority_weight, scale_factor, prop, capacity, template, x_cols):
    """The per-job LAS program's ECOS data (decide/gavel/las.py `_allocate_per_job`): epigraph coefficients
    -(T_ij x w_i) x s_i with w_i = (1 / weight_i) x (1 / prop_i, or 0 where prop_i <= 0), capacity coefficients s_i,
    right-hand sides (capacities, then 1 per job) and the objective (minimise t')."""
    m, n = throughput.shape
    data = template.copy()
    for i in range(m):
        p = prop[i]
        w = (1.0 / priority_weight[i]) * (1.0 / p if p > 0 else 0.0)
        s = float(scale_factor[i])
        for j in range(n):
            k = x_cols[j * m + i]
            data[k] = -((throughput[i, j] * w) * s)
            data[k + 2] = s
    h = np.zeros(2 * m + m * n + n)
    h[m + m * n: m + m * n + n] = capacity
    h[m + m * n + n:] = 1.0
    c = np.zeros(m * n + 1)
    c[0] = 1.0
    return data, h, c


@_compiled
def _latest(ends):
    """`ends.max()` (NaN wins)."""
    m = ends[0]
    for v in ends[1:]:
        if v > m or v != v:
            m = v
        if m != m:
            break
    return m


@_compiled
def _mt_next(mt):
    """The next 32-bit output of Python's `random` (MT19937): `mt` holds its 624 words and then its position, as
    `random.getstate()[1]` lists them."""
    n = 624
    if mt[n] >= n:                                  # the next 624 words, in place (CPython's genrand_uint32)
        for k in range(n):
            y = (mt[k] & 0x80000000) | (mt[(k + 1) % n] & 0x7fffffff)
            mt[k] = mt[(k + 397) % n] ^ (y >> 1) ^ (0x9908b0df if y & 1 else 0)
        mt[n] = 0
    y = mt[mt[n]]
    mt[n] += 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9d2c5680
    y ^= (y << 15) & 0xefc60000
    return y ^ (y >> 18)


@_compiled
def shuffled(order, mt):
    """`random.Random.shuffle` of a copy of `order` (Fisher-Yates from the end; each index drawn as `_randbelow`
    draws it: the top bits of a 32-bit output, redrawn while out of range), from the generator state `mt`."""
    out = order.copy()
    for i in range(len(out) - 1, 0, -1):
        bits, v = 0, i + 1
        while v:
            bits += 1
            v >>= 1
        j = _mt_next(mt) >> (32 - bits)
        while j > i:
            j = _mt_next(mt) >> (32 - bits)
        out[i], out[j] = out[j], out[i]
    return out


def quiet_rounds(entry, gpu_type, steps, finish, ends, round_start, budget, members, etput, escale, scale, remaining,
                 t, S, alloc, deficit, in_alloc, ok, need_priority, capacity, order, mt, acc, prices, priced, round_s,
                 next_arrival, need_update, last_reset, min_reset, busy):
    """Credit the running round, then run up to `budget` more rounds while nothing happens between them (no job
    completes, none arrives, no recompute is due, the walk selects someone), exactly as the simulator's step
    would (sim/simulator.py `_credit_tasks`, docs/rules.md#round). Returns the clock, the last round's start,
    the rounds run after the first, the completed jobs (slots, finish times) of the last credited round, and
    `busy` plus each credited round's busy GPU-seconds (`gpu_seconds`, round by round, docs/rules.md#utilization).
    A non-empty `mt` (the generator state of a shuffled type order) draws each round's order as `plan` would."""
    rounds = 0
    while True:
        now = _latest(ends)
        exec_time = ends - round_start
        scl = escale[entry].astype(np.float64)
        busy += gpu_seconds(exec_time, scl)
        account_tasks(entry, gpu_type, members, steps, exec_time, scl, prices, priced, acc)
        done = credit_tasks(entry, gpu_type, members, steps, exec_time, t, S, remaining)
        if len(done) or rounds == budget or next_arrival <= now or (
                need_update and (now - last_reset >= min_reset or last_reset == 0)):
            break
        saved = mt.copy()
        e, w = select_walk(t, S, alloc, deficit, in_alloc, ok, need_priority, members, escale, scale, capacity,
                           shuffled(order, mt) if len(mt) else order)
        keep = in_alloc[e]
        if not keep.any():
            mt[:] = saved                             # the step that follows draws this round's order again
            break
        entry, gpu_type = e[keep], w[keep]
        mark_started(entry, members, acc, now)
        steps, finish, ends = run_tasks(entry, gpu_type, members, etput, remaining, now, round_s)
        round_start = now
        rounds += 1
    done_finish = np.empty(len(done))
    for j in range(len(done)):                        # the member's own finish (the first match, row-major)
        for i in range(len(entry)):
            if members[entry[i], 0] == done[j]:
                done_finish[j] = finish[i, 0]
                break
            if members[entry[i], 1] == done[j]:
                done_finish[j] = finish[i, 1]
                break
    return now, round_start, rounds, done, done_finish, busy


def single_rows(members, slots, num_slots):
    """The row of each slot's single entry (entries.py `rows_of_jobs`)."""
    row_of_slot = np.full(num_slots, -1, np.int64)
    for r in range(len(members)):
        if members[r, 1] < 0:
            row_of_slot[members[r, 0]] = r
    return row_of_slot[slots]
