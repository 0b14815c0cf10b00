"""The resumable placement stage (`mechanism.PlacementStage`) compiled, for first-fit placement (fair, greedy,
tune) on a homogeneous or unlike pool of servers.

A FIFO+tune round re-places the ~40 jobs queued after the first one that changed; in Python that is most of a
Synergy run. These loops do what `PlacementStage` and `ServerPool` do, with the same float operations in the same
order (docs/rules.md#cpu-memory, docs/rules.md#tune-demotion, docs/rules.md#resource-slack), so the placement,
shares, demotions and servers' free resources are bit-identical; tests/test_placement_kernel.py checks each round
against the Python stage. The state is in arrays:

- per server: free GPUs `fg`, free CPU/GB/MBps `fr`, and its jobs in placement order (`on`, `on_len`);
- per slot: the servers and GPU counts it spans (`wk`, `wn`, `wlen`), its per-GPU share `sh` and status `st`
  (0: not placed, IDEAL, FAIR);
- the placed jobs in order (`placed`), the demoted ones (`demoted`), and the undo trail: one row per server a
  change touched, with the position that caused it, as `PlacementStage` keeps it (kinds below), and the server
  job lists that a demotion sorted (`saved`).

The stage object is `compiled_placement.CompiledPlacement`. Least-free-GPU-first placement (`+place`) and the
heterogeneous pools of `gavel+tune` use the Python stage.
"""

from __future__ import annotations

import numpy as np

from hetsched.compiled.jit import compiled as _compiled
from hetsched.place.pool import FAIR, IDEAL

# Trail kinds. A job placed on several servers, or a demoted peer that spans several, has one row per server:
# the first (PLACE, DEMOTE) also undoes the job's own state, the others (*_MORE) only their server's.
PLACE, PLACE_MORE, DEMOTE, DEMOTE_MORE, SORT, SELF = range(6)
MECHANISMS = {"fair": 0, "greedy": 1, "tune": 2}
# ints: free GPUs, placed jobs, demoted jobs, trail rows, saved lists, positions examined last run, clean, the
# server a demotion overflowed
FREE, PLACED, DEMOTED, TRAIL, SAVED, PREV, CLEAN, BAD = range(8)


@_compiled
def _positive(x):
    """Python's max(0.0, x)."""
    return x if x > 0.0 else 0.0


@_compiled
def _fit(fg, fr, c, m, s, g, start, out_k, out_n):
    """First fit (`ServerPool.first_fit`): GPUs in server order on servers that hold one more per-GPU share each,
    counted one by one as the artifact counts them; one GPU searches from server `start`. Returns how many servers
    (in out_k/out_n) the job spans, 0 if it does not fit."""
    if g == 1:
        for k in range(start, len(fg)):
            if fg[k] and fr[k, 0] >= c and fr[k, 1] >= m and fr[k, 2] >= s:
                out_k[0], out_n[0] = k, 1
                return 1
        return 0
    need, used = g, 0
    for k in range(len(fg)):
        limit = min(fg[k], need)
        hc = hm = hs = 0.0
        n = 0
        while n < limit and fr[k, 0] - hc >= c and fr[k, 1] - hm >= m and fr[k, 2] - hs >= s:
            hc += c
            hm += m
            hs += s
            n += 1
        if n:
            out_k[used], out_n[used] = k, n
            used += 1
            need -= n
            if not need:
                return used
    return 0


@_compiled
def _record(t_i, t_f, ints, kind, pos, job, k, aux, f0, f1, f2):
    r = ints[TRAIL]
    t_i[r, 0], t_i[r, 1], t_i[r, 2], t_i[r, 3], t_i[r, 4] = kind, pos, job, k, aux
    t_f[r, 0], t_f[r, 1], t_f[r, 2] = f0, f1, f2
    ints[TRAIL] = r + 1
    return r


@_compiled
def _commit(s, ks, ns, count, c, m, ss, status, ints, fg, fr, on, on_len, wk, wn, wlen, sh, st, placed, t_i, t_f,
            pos):
    """Job s on servers ks[:count] (ns GPUs each) at per-GPU share (c, m, ss), recorded for undo."""
    for i in range(count):
        k, n = ks[i], ns[i]
        _record(t_i, t_f, ints, PLACE if i == 0 else PLACE_MORE, pos, s, k, n, fr[k, 0], fr[k, 1], fr[k, 2])
        fg[k] -= n
        fr[k, 0] = fr[k, 0] - c * n
        fr[k, 1] = fr[k, 1] - m * n
        fr[k, 2] = fr[k, 2] - ss * n
        on[k, on_len[k]] = s
        on_len[k] += 1
        ints[FREE] -= n
        wk[s, i], wn[s, i] = k, n
    wlen[s] = count
    sh[s, 0], sh[s, 1], sh[s, 2] = c, m, ss
    st[s] = status
    placed[ints[PLACED]] = s
    ints[PLACED] += 1


@_compiled
def _undo_to(position, ints, fg, fr, on, on_len, sh, st, t_i, t_f, saved):
    """Undo every change made while placing the jobs at `position` and after."""
    freed = 0
    r = ints[TRAIL]
    while r > 0 and t_i[r - 1, 1] >= position:
        r -= 1
        kind, job, k, aux = t_i[r, 0], t_i[r, 2], t_i[r, 3], t_i[r, 4]
        if kind == PLACE or kind == PLACE_MORE:
            fg[k] += aux
            fr[k, 0], fr[k, 1], fr[k, 2] = t_f[r, 0], t_f[r, 1], t_f[r, 2]
            on_len[k] -= 1
            freed += aux
            if kind == PLACE:
                ints[PLACED] -= 1
                st[job] = 0
        elif kind == DEMOTE or kind == DEMOTE_MORE:
            fr[k, 0], fr[k, 1], fr[k, 2] = t_f[r, 0], t_f[r, 1], t_f[r, 2]
            if kind == DEMOTE:
                sh[job, 0], sh[job, 1], sh[job, 2] = t_f[r, 3], t_f[r, 4], t_f[r, 5]
                st[job] = aux & 3
                if aux >> 2:
                    ints[DEMOTED] -= 1
        elif kind == SORT:
            ints[SAVED] -= 1
            on[k, :aux] = saved[ints[SAVED], :aux]
        else:
            ints[DEMOTED] -= 1
    ints[TRAIL] = r
    ints[FREE] += freed


@_compiled
def _underutilized(fg, g, out_k, out_n):
    """`ServerPool.underutilized`: the first server with g free GPUs for g > 1, else the servers with the fewest
    free GPUs (>= 1; ties to the lowest id) covering g. Returns how many (in out_k/out_n)."""
    if g > 1:
        for k in range(len(fg)):
            if fg[k] >= g:
                out_k[0], out_n[0] = k, g
                return 1
    count = 0
    for k in np.argsort(fg, kind="mergesort"):      # (free GPUs, id) ascending, as the heap pops them
        if g <= 0:
            break
        if not fg[k]:
            continue
        out_k[count] = k
        out_n[count] = g if fg[k] >= g else fg[k]
        g -= out_n[count]
        count += 1
    return count


@_compiled
def _sort_key_before(x, y, wlen, sh):
    """(servers spanned, -CPUs per GPU, -GB per GPU) of x sorts before y's."""
    if wlen[x] != wlen[y]:
        return wlen[x] < wlen[y]
    if -sh[x, 0] != -sh[y, 0]:
        return -sh[x, 0] < -sh[y, 0]
    return -sh[x, 1] < -sh[y, 1]


@_compiled
def _gpus_on(p, k, wk, wn, wlen):
    for i in range(wlen[p]):
        if wk[p, i] == k:
            return wn[p, i]
    return 0


@_compiled
def _demote_peers(pos, c, m, ss, g, codes, shares, adjust, fair, ints, fg, fr, on, on_len, wk, wn, wlen, sh, st,
                  demoted, t_i, t_f, saved, buf_k, buf_n):
    """TUNE's peer demotion (`PlacementStage._demote_peers`): on the under-utilised servers, CPU-rich peers drop
    to the fair share until a g-GPU job's share fits. False when a demotion overflows a server (ints[BAD])."""
    for t in range(_underutilized(fg, g, buf_k, buf_n)):
        k, n = buf_k[t], buf_n[t]
        ratio = n / g
        need0 = _positive(c * g * ratio - fr[k, 0])
        need1 = _positive(m * g * ratio - fr[k, 1])
        need2 = _positive(ss * g * ratio - fr[k, 2])
        if not (need0 != 0 or need1 != 0 or need2 != 0):
            continue
        size = on_len[k]
        saved[ints[SAVED], :size] = on[k, :size]
        ints[SAVED] += 1
        _record(t_i, t_f, ints, SORT, pos, -1, k, size, 0.0, 0.0, 0.0)
        for i in range(1, size):                    # stable insertion sort, as list.sort
            x = on[k, i]
            j = i - 1
            while j >= 0 and _sort_key_before(x, on[k, j], wlen, sh):
                on[k, j + 1] = on[k, j]
                j -= 1
            on[k, j + 1] = x
        chosen = 0
        for i in range(size):                       # peers until their excess over the fair share covers the need
            p = on[k, i]
            chosen += 1
            q = _gpus_on(p, k, wk, wn, wlen)
            d0 = _positive(need0 - _positive(sh[p, 0] * q - fair[0] * q))
            d1 = _positive(need1 - _positive(sh[p, 1] * q - fair[1] * q))
            d2 = _positive(need2 - _positive(sh[p, 2] * q - fair[2] * q))
            if d0 == 0 and d1 == 0 and d2 == 0:
                break
            need0, need1, need2 = d0, d1, d2
        for i in range(chosen):
            p = on[k, i]
            code = codes[p]
            if adjust[code]:
                c1, m1, s1 = fair[0], fair[1], fair[2]
            else:
                c1, m1, s1 = shares[code, 0], shares[code, 1], shares[code, 2]
            o0, o1, o2 = sh[p, 0], sh[p, 1], sh[p, 2]
            first = ints[TRAIL]
            ok = True
            for w in range(wlen[p]):                # release the old share, then take the new one (reshare)
                q, n = wk[p, w], wn[p, w]
                _record(t_i, t_f, ints, DEMOTE if w == 0 else DEMOTE_MORE, pos, p, q, 0, fr[q, 0], fr[q, 1],
                        fr[q, 2])
                fr[q, 0] = fr[q, 0] + o0 * n
                fr[q, 1] = fr[q, 1] + o1 * n
                fr[q, 2] = fr[q, 2] + o2 * n
                fr[q, 0] = fr[q, 0] - c1 * n
                fr[q, 1] = fr[q, 1] - m1 * n
                fr[q, 2] = fr[q, 2] - s1 * n
                ok = ok and fr[q, 0] >= 0.0 and fr[q, 1] >= 0.0 and fr[q, 2] >= 0.0
            sh[p, 0], sh[p, 1], sh[p, 2] = c1, m1, s1
            if not ok:
                ints[BAD] = k
                return False
            t_f[first, 3], t_f[first, 4], t_f[first, 5] = o0, o1, o2
            t_i[first, 4] = st[p] | (4 if adjust[code] else 0)
            st[p] = FAIR
            if adjust[code]:
                demoted[ints[DEMOTED]] = p
                ints[DEMOTED] += 1
    return True


@_compiled
def place_round(order, gpus, codes, ids, shares, adjust, fair, mechanism, ints, fg, fr, cap_g, start, on, on_len,
                wk, wn, wlen, sh, st, placed, demoted, prev, t_i, t_f, saved):
    """`PlacementStage.run` with first-fit placement: resume from the first position whose job differs from last
    run's, place while GPUs remain, and return the positions examined; -1 when TUNE cannot place a job even after
    demoting peers (its GPUs in ints[BAD]), -2 when a demotion overflows a server (ints[BAD]), -3 (before any
    change) when a job has more GPUs than the per-slot arrays can record (its GPUs in ints[BAD])."""
    for q in range(len(order)):
        if gpus[order[q]] > wk.shape[1]:
            ints[BAD] = gpus[order[q]]
            return -3
    n = min(ints[PREV], len(order))
    r = 0
    while r < n and prev[r] == ids[order[r]]:
        r += 1
    if r == 0:
        if not ints[CLEAN]:                         # every lease ended: all servers free, nothing placed
            fg[:] = cap_g
            fr[:] = start
            on_len[:] = 0
            ints[FREE] = cap_g.sum()
            ints[PLACED] = ints[DEMOTED] = ints[TRAIL] = ints[SAVED] = ints[PREV] = 0
    else:
        _undo_to(r, ints, fg, fr, on, on_len, sh, st, t_i, t_f, saved)
    ints[CLEAN] = 0
    num = len(fg)
    ptr = np.zeros(len(shares), np.int64)           # per class: no one-GPU search before this server succeeds
    ks, ns = np.empty(num, np.int64), np.empty(num, np.int64)
    buf_k, buf_n = np.empty(num, np.int64), np.empty(num, np.int64)
    placed_status = FAIR if mechanism == 0 else IDEAL
    i = r
    while i < len(order) and ints[FREE]:
        s = order[i]
        pos = i
        i += 1
        g = gpus[s]
        if g > ints[FREE]:
            continue
        code = codes[s]
        if mechanism == 0:
            c, m, ss = fair[0], fair[1], fair[2]
        else:
            c, m, ss = shares[code, 0], shares[code, 1], shares[code, 2]
        count = _fit(fg, fr, c, m, ss, g, ptr[code] if g == 1 else 0, ks, ns)
        if count:
            _commit(s, ks, ns, count, c, m, ss, placed_status, ints, fg, fr, on, on_len, wk, wn, wlen, sh, st,
                    placed, t_i, t_f, pos)
            if g == 1:
                ptr[code] = ks[0]
            continue
        if g == 1:
            ptr[code] = num
        if mechanism != 2:
            continue                                # greedy skips the job (fair fits whenever the GPUs do)
        status = IDEAL
        if adjust[code]:                            # self-demotion to the fair share
            c, m, ss = fair[0], fair[1], fair[2]
            status = FAIR
        count = _fit(fg, fr, c, m, ss, g, 0, ks, ns)
        if not count:
            ptr[:] = 0                              # demotions free resources: search from server 0 again
            if not _demote_peers(pos, c, m, ss, g, codes, shares, adjust, fair, ints, fg, fr, on, on_len, wk, wn,
                                 wlen, sh, st, demoted, t_i, t_f, saved, buf_k, buf_n):
                return -2
            count = _fit(fg, fr, c, m, ss, g, 0, ks, ns)
            if not count:
                ints[BAD] = g
                return -1
        _commit(s, ks, ns, count, c, m, ss, status, ints, fg, fr, on, on_len, wk, wn, wlen, sh, st, placed,
                t_i, t_f, pos)
        if status == FAIR:
            demoted[ints[DEMOTED]] = s
            ints[DEMOTED] += 1
            _record(t_i, t_f, ints, SELF, pos, s, -1, 0, 0.0, 0.0, 0.0)
    for q in range(r, i):
        prev[q] = ids[order[q]]
    ints[PREV] = i
    return i
