"""The resumable placement stage (`mechanism.PlacementStage`) compiled, for its most common case: one-GPU jobs
placed first fit (fair, greedy, tune) on a homogeneous or unlike pool of servers.

A FIFO+tune round re-places the ~40 jobs queued after the first one that changed; in Python that is most of a
Synergy run. These loops do what `PlacementStage` and `ServerPool` do for one-GPU jobs, with the same float
operations in the same order (docs/rules.md#cpu-memory, docs/rules.md#tune-demotion, docs/rules.md#resource-slack), so
the placement, shares, demotions and servers' free resources are bit-identical; tests/test_placement_kernel.py
checks each round against the Python stage. The stage keeps its state in arrays:

- per server: free GPUs `fg`, free CPU/GB/MBps `fr`, and its jobs in placement order (`on`, `on_len`);
- per slot: the server `srv`, per-GPU share `sh` and status `st` (0: not placed, IDEAL, FAIR);
- the placed jobs in order (`placed`), the demoted ones (`demoted`), and the undo trail: one row per change
  with the position that caused it, as `PlacementStage` keeps it (kinds below).

Multi-GPU jobs, least-free placement and the runtime's heterogeneous pools use the Python stage.
"""

from __future__ import annotations

import numpy as np

from hetsched.core.kernels import _compiled
from hetsched.errors import SimulationError
from hetsched.resources.pool import FAIR, IDEAL, ServerPool

PLACE, DEMOTE, SORT, SELF = 0, 1, 2, 3      # trail kinds: a job on a server, a peer's demotion, a server's
#                                             job list sorted, a self-demotion recorded
MECHANISMS = {"fair": 0, "greedy": 1, "tune": 2}
# ints: [free GPUs, placed, demoted, trail rows, examined last run, clean, overflowed server]
FREE, PLACED, DEMOTED, TRAIL, PREV, CLEAN, BAD = range(7)


@_compiled
def _positive(x):
    """Python's max(0.0, x)."""
    return x if x > 0.0 else 0.0


@_compiled
def _first_fit(fg, fr, c, m, s, start):
    """The first server from `start` with a free GPU that holds the share (c, m, s); -1 if none."""
    for k in range(start, len(fg)):
        if fg[k] and fr[k, 0] >= c and fr[k, 1] >= m and fr[k, 2] >= s:
            return k
    return -1


@_compiled
def _record(t_i, t_f, ints, kind, pos, job, k, f0, f1, f2):
    r = ints[TRAIL]
    t_i[r, 0], t_i[r, 1], t_i[r, 2], t_i[r, 3], t_i[r, 4] = kind, pos, job, k, 0
    t_f[r, 0], t_f[r, 1], t_f[r, 2] = f0, f1, f2
    ints[TRAIL] = r + 1
    return r


@_compiled
def _commit(s, k, c, m, ss, status, ints, fg, fr, on, on_len, srv, sh, st, placed, t_i, t_f, pos):
    """One GPU of server k for job s at share (c, m, ss), recorded for undo."""
    _record(t_i, t_f, ints, PLACE, pos, s, k, fr[k, 0], fr[k, 1], fr[k, 2])
    fg[k] -= 1
    fr[k, 0] = fr[k, 0] - c
    fr[k, 1] = fr[k, 1] - m
    fr[k, 2] = fr[k, 2] - ss
    on[k, on_len[k]] = s
    on_len[k] += 1
    ints[FREE] -= 1
    srv[s] = k
    sh[s, 0], sh[s, 1], sh[s, 2] = c, m, ss
    st[s] = status
    placed[ints[PLACED]] = s
    ints[PLACED] += 1


@_compiled
def _undo_to(position, ints, fg, fr, on, on_len, srv, sh, st, t_i, t_f, t_saved):
    """Undo every change made while placing the jobs at `position` and after."""
    freed = 0
    r = ints[TRAIL]
    while r > 0 and t_i[r - 1, 1] >= position:
        r -= 1
        kind, job, k, aux = t_i[r, 0], t_i[r, 2], t_i[r, 3], t_i[r, 4]
        if kind == PLACE:
            fg[k] += 1
            fr[k, 0], fr[k, 1], fr[k, 2] = t_f[r, 0], t_f[r, 1], t_f[r, 2]
            on_len[k] -= 1
            ints[PLACED] -= 1
            st[job] = 0
            freed += 1
        elif kind == DEMOTE:
            fr[k, 0], fr[k, 1], fr[k, 2] = t_f[r, 0], t_f[r, 1], t_f[r, 2]
            sh[job, 0], sh[job, 1], sh[job, 2] = t_f[r, 3], t_f[r, 4], t_f[r, 5]
            st[job] = aux & 3
            if aux >> 2:
                ints[DEMOTED] -= 1
        elif kind == SORT:
            on[k, :aux] = t_saved[r, :aux]
        else:
            ints[DEMOTED] -= 1
    ints[TRAIL] = r
    ints[FREE] += freed


@_compiled
def _demote_peers(pos, c, m, ss, codes, shares, adjust, fair, ints, fg, fr, on, on_len, srv, sh, st, demoted,
                  t_i, t_f, t_saved):
    """TUNE's peer demotion for a one-GPU job (`PlacementStage._demote_peers`): on the server with the fewest
    free GPUs (>= 1, ties to the lowest id), CPU-rich peers drop to the fair share until the share fits.
    Returns False when a demotion would overflow the server (its id in ints[BAD])."""
    k = -1
    for q in range(len(fg)):                        # underutilized(1): min (free GPUs, id) with a free GPU
        if fg[q] and (k < 0 or fg[q] < fg[k]):
            k = q
    if k < 0:
        return True
    need0 = _positive(c * 1 * 1.0 - fr[k, 0])
    need1 = _positive(m * 1 * 1.0 - fr[k, 1])
    need2 = _positive(ss * 1 * 1.0 - fr[k, 2])
    if not (need0 != 0 or need1 != 0 or need2 != 0):
        return True
    n = on_len[k]
    r = _record(t_i, t_f, ints, SORT, pos, -1, k, 0.0, 0.0, 0.0)
    t_i[r, 4] = n
    t_saved[r, :n] = on[k, :n]
    for i in range(1, n):                           # stable sort by (-CPUs, -GB) per GPU
        x = on[k, i]
        j = i - 1
        while j >= 0 and (-sh[x, 0] < -sh[on[k, j], 0]
                          or (-sh[x, 0] == -sh[on[k, j], 0] and -sh[x, 1] < -sh[on[k, j], 1])):
            on[k, j + 1] = on[k, j]
            j -= 1
        on[k, j + 1] = x
    chosen = 0
    for i in range(n):                              # peers until their excess over the fair share covers the need
        p = on[k, i]
        chosen += 1
        d0 = _positive(need0 - _positive(sh[p, 0] * 1 - fair[0] * 1))
        d1 = _positive(need1 - _positive(sh[p, 1] * 1 - fair[1] * 1))
        d2 = _positive(need2 - _positive(sh[p, 2] * 1 - fair[2] * 1))
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
        q = srv[p]
        b0, b1, b2 = fr[q, 0], fr[q, 1], fr[q, 2]
        o0, o1, o2 = sh[p, 0], sh[p, 1], sh[p, 2]
        fr[q, 0] = fr[q, 0] + o0 * 1                 # release the old share, then take the new one (reshare)
        fr[q, 1] = fr[q, 1] + o1 * 1
        fr[q, 2] = fr[q, 2] + o2 * 1
        fr[q, 0] = fr[q, 0] - c1 * 1
        fr[q, 1] = fr[q, 1] - m1 * 1
        fr[q, 2] = fr[q, 2] - s1 * 1
        sh[p, 0], sh[p, 1], sh[p, 2] = c1, m1, s1
        if not (fr[q, 0] >= 0.0 and fr[q, 1] >= 0.0 and fr[q, 2] >= 0.0):
            ints[BAD] = q
            return False
        r = _record(t_i, t_f, ints, DEMOTE, pos, p, q, b0, b1, b2)
        t_f[r, 3], t_f[r, 4], t_f[r, 5] = o0, o1, o2
        t_i[r, 4] = st[p] | (4 if adjust[code] else 0)
        st[p] = FAIR
        if adjust[code]:
            demoted[ints[DEMOTED]] = p
            ints[DEMOTED] += 1
    return True


@_compiled
def place_round(order, codes, ids, shares, adjust, fair, mechanism, ints, fg, fr, cap_g, start, on, on_len, srv,
                sh, st, placed, demoted, prev, t_i, t_f, t_saved):
    """`PlacementStage.run` for one-GPU jobs placed first fit: resume from the first position whose job differs
    from last run's, place while GPUs remain, and return the positions examined; -1 when TUNE cannot place a job
    even after demoting peers, -2 when a demotion overflows a server (ints[BAD])."""
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
            ints[PLACED] = ints[DEMOTED] = ints[TRAIL] = ints[PREV] = 0
    else:
        _undo_to(r, ints, fg, fr, on, on_len, srv, sh, st, t_i, t_f, t_saved)
    ints[CLEAN] = 0
    num = len(fg)
    ptr = np.zeros(len(shares), np.int64)           # per class: no server before this one holds its share
    placed_status = FAIR if mechanism == 0 else IDEAL
    i = r
    while i < len(order) and ints[FREE]:
        s = order[i]
        pos = i
        i += 1
        code = codes[s]
        if mechanism == 0:
            c, m, ss = fair[0], fair[1], fair[2]
        else:
            c, m, ss = shares[code, 0], shares[code, 1], shares[code, 2]
        k = _first_fit(fg, fr, c, m, ss, ptr[code])
        if k >= 0:
            _commit(s, k, c, m, ss, placed_status, ints, fg, fr, on, on_len, srv, sh, st, placed, t_i, t_f, pos)
            ptr[code] = k
            continue
        ptr[code] = num
        if mechanism != 2:
            continue                                # greedy skips the job (fair fits whenever a GPU is free)
        status = IDEAL
        if adjust[code]:                            # self-demotion to the fair share
            c, m, ss = fair[0], fair[1], fair[2]
            status = FAIR
        k = _first_fit(fg, fr, c, m, ss, 0)
        if k < 0:
            ptr[:] = 0                              # demotions free resources: search from server 0 again
            if not _demote_peers(pos, c, m, ss, codes, shares, adjust, fair, ints, fg, fr, on, on_len, srv, sh,
                                 st, demoted, t_i, t_f, t_saved):
                return -2
            k = _first_fit(fg, fr, c, m, ss, 0)
            if k < 0:
                return -1
        _commit(s, k, c, m, ss, status, ints, fg, fr, on, on_len, srv, sh, st, placed, t_i, t_f, pos)
        if status == FAIR:
            demoted[ints[DEMOTED]] = s
            ints[DEMOTED] += 1
            _record(t_i, t_f, ints, SELF, pos, s, -1, 0.0, 0.0, 0.0)
    for q in range(r, i):
        prev[q] = ids[order[q]]
    ints[PREV] = i
    return i


class CompiledPlacement:
    """`PlacementStage` for one-GPU jobs placed first fit (fair, greedy, tune), with the same results."""

    def __init__(self, pool: ServerPool, mechanism: str):
        self.mechanism = MECHANISMS[mechanism]
        num, width = pool.num, max(pool.cap_g)
        self.cap_g = np.array(pool.cap_g, np.int64)
        self.start = np.array([pool._start_c, pool._start_m, pool._start_s], float).T.copy()
        self.fair = np.array(pool.fair, float)
        self.ints = np.zeros(7, np.int64)
        self.fg, self.fr = self.cap_g.copy(), self.start.copy()
        self.on, self.on_len = np.zeros((num, width), np.int64), np.zeros(num, np.int64)
        gpus = int(self.cap_g.sum())
        self.placed = np.zeros(gpus, np.int64)
        # Each placement adds at most 3 + width trail rows (itself, a self-demotion, a sort and the server's peers)
        # and at most 1 + width demotions; a run places at most one job per GPU.
        self.demoted = np.zeros(gpus * (1 + width), np.int64)
        rows = gpus * (3 + width)
        self.t_i, self.t_f, self.t_saved = np.zeros((rows, 5), np.int64), np.zeros((rows, 6)), np.zeros(
            (rows, width), np.int64)
        self.prev = np.zeros(64, np.int64)
        self.srv, self.sh, self.st = np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros(0, np.int64)

    def reset(self) -> None:
        """The next round places from scratch."""
        self.ints[PREV] = 0

    def run(self, order: np.ndarray, codes: np.ndarray, ids: np.ndarray, shares: np.ndarray,
            adjust: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Place the one-GPU jobs of `order` (slots); returns the placed slots in placement order, whether each
        runs at the fair share, and the demoted slots. `codes`/`ids` by slot; `shares`/`adjust` by class."""
        if len(ids) > len(self.srv):
            size = len(ids)
            self.srv = np.r_[self.srv, np.zeros(size - len(self.srv), np.int64)]
            self.sh = np.r_[self.sh, np.zeros((size - len(self.sh), 3))]
            self.st = np.r_[self.st, np.zeros(size - len(self.st), np.int64)]
        if len(order) > len(self.prev):
            self.prev = np.r_[self.prev, np.zeros(max(len(order), 2 * len(self.prev)) - len(self.prev), np.int64)]
        ints = self.ints
        got = place_round(order, codes, ids, shares, adjust, self.fair, self.mechanism, ints, self.fg, self.fr,
                          self.cap_g, self.start, self.on, self.on_len, self.srv, self.sh, self.st, self.placed,
                          self.demoted, self.prev, self.t_i, self.t_f, self.t_saved)
        if got == -1:
            self.reset()
            raise SimulationError("Synergy-TUNE could not place a 1-GPU job even after demoting peers "
                                  "(the artifact exits here)")
        if got == -2:
            self.reset()
            raise SimulationError(f"Synergy-TUNE: demoting a peer to its fair share overflows server "
                                  f"{int(ints[BAD])} (docs/rules.md#tune-demotion)")
        run = self.placed[:ints[PLACED]].copy()
        return run, self.st[run] == FAIR, self.demoted[:ints[DEMOTED]].copy()

    def export(self, pool: ServerPool) -> ServerPool:
        """`pool` holding this round's placement (servers' free resources, jobs' servers and shares), for leases."""
        pool.reset()
        pool.fg, pool.free = self.fg.tolist(), int(self.ints[FREE])
        pool.fc, pool.fm, pool.fs = (self.fr[:, i].tolist() for i in range(3))
        pool.on = [self.on[k, :n].tolist() for k, n in enumerate(self.on_len.tolist())]
        for s in self.placed[:self.ints[PLACED]].tolist():
            pool.where[s] = pool.one_gpu[int(self.srv[s])]
            pool.share[s] = tuple(self.sh[s].tolist())
        return pool
