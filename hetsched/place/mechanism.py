"""The placement stage of a round for Synergy's mechanisms (docs/rules.md#cpu-memory, docs/rules.md#tune-demotion).

- `fair`: every job gets the GPU-proportional share of CPU, memory and storage (first fit).
- `greedy`: the job's ideal share, or it is skipped this round.
- `tune`: the ideal share; else the job itself drops to the fair share (if its ideal is above it); else CPU-rich
  peers on the least-free server(s) drop to the fair share until the job fits. Demoted jobs run at speedup 1.
- `placement=True` (`+place`) uses least-free-GPU-first placement instead of first fit.

The stage is resumable: every change to the pool is recorded in a trail, with a mark before each examined job.
When the next round examines the same jobs in the same order up to position r (the usual case under FIFO,
where only completed jobs leave and queued jobs join at the end), the trail is undone to mark r and placement
continues from there. The result is the same as placing from scratch; only the work differs.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from hetsched.errors import HetschedError, SimulationError
from hetsched.place.pool import FAIR, IDEAL, ServerPool


class PlacementStage:
    """Places an ordered list of jobs on a `ServerPool` with one mechanism, resuming from the last round."""

    def __init__(self, pool: ServerPool, mechanism: str, least_free: bool,
                 shares: Sequence[tuple[float, float, float]], adjust: Sequence[bool]):
        if mechanism not in ("fair", "greedy", "tune"):
            raise HetschedError(f"placement stage: unknown mechanism {mechanism!r}")
        self.pool = pool
        self.mechanism = mechanism
        self.fit = pool.least_free_fit if least_free else pool.first_fit
        self.shares = shares              # per job class: ideal per-GPU (cpus, GB, MB/s); grows with new classes
        self.adjust = adjust              # per job class: ideal above the fair share in some resource
        self.status: dict[int, int] = {}  # job -> IDEAL / FAIR
        self.demoted: list[int] = []      # jobs whose speedup drops to 1 this round
        self._prev = np.zeros(0, np.int64)
        self._trail: list[tuple] = []    # changes to undo; element 1 of each is the position that caused it
        self._codes_of: Sequence[int] = ()
        self._clean = False

    def reset(self) -> None:
        if self._clean:
            return
        self.pool.reset()
        self.status.clear()
        self.demoted.clear()
        self._prev, self._trail = np.zeros(0, np.int64), []
        self._clean = True

    # ---- undo ----------------------------------------------------------------------------------------
    def _undo_to(self, position: int) -> None:
        """Undo every change made while placing the jobs at `position` and after."""
        pool, trail, status = self.pool, self._trail, self.status
        fg, fc, fm, fs, on = pool.fg, pool.fc, pool.fm, pool.fs, pool.on
        freed = 0
        while trail and trail[-1][1] >= position:
            rec = trail.pop()
            kind = rec[0]
            if kind == 4:                   # one GPU on one server: (4, pos, job, server, free cpu/GB/MBps before)
                _, _, job, k, c, m, s = rec
                fg[k] += 1
                fc[k], fm[k], fs[k] = c, m, s
                on[k].pop()
                freed += 1
                del status[job]
            elif kind == 0:                                 # commit: (0, pos, job, where, servers before)
                _, _, job, where, before = rec
                for k, n in where:                          # (pool.where/share keep a stale entry: harmless)
                    fg[k] += n
                    on[k].pop()
                    freed += n
                pool.restore(before)
                del status[job]
            elif kind == 1:                                 # demotion of a placed peer
                _, _, job, share, before, old_status, was_demoted = rec
                pool.restore(before)
                pool.share[job] = share
                status[job] = old_status
                if was_demoted:
                    self.demoted.pop()
            elif kind == 2:                                 # a server's job list sorted in place
                on[rec[2]][:] = rec[3]
            else:                                           # self-demotion recorded
                self.demoted.pop()
        pool.free += freed

    # ---- the round -----------------------------------------------------------------------------------
    def run(self, order: np.ndarray, gpus: np.ndarray, codes: np.ndarray, ids: np.ndarray) -> dict[int, int]:
        """Place the jobs of `order` (slots) while GPUs remain; returns slot -> IDEAL/FAIR for the jobs that run.

        `gpus`, `codes` and `ids` are indexed by slot (GPU count, class code, job id). Slots are reused, so the
        resume point compares ids. Only the examined part of a (possibly long) queue is looked at.
        """
        prev = self._prev
        n = min(len(prev), len(order))
        differ = np.flatnonzero(prev[:n] != ids[order[:n]])
        r = int(differ[0]) if len(differ) else n
        if r == 0:
            self.reset()
        else:
            self._undo_to(r)
        self._codes_of = codes                             # peers' classes, for demotions
        self._clean = False
        examined = self._place(order, gpus, codes, r)
        self._prev = ids[order[:examined]]
        return self.status

    def _place(self, order: np.ndarray, gpus_of: np.ndarray, codes_of: np.ndarray, start: int) -> int:
        """Place from position `start`; returns how many positions were examined.

        Single-GPU first-fit placements (the common case) are inlined; everything else goes through the pool.
        """
        pool, trail, status = self.pool, self._trail, self.status
        shares, fit, commit = self.shares, self.fit, pool.commit
        fg, fc, fm, fs, on, where_of, share_of = pool.fg, pool.fc, pool.fm, pool.fs, pool.on, pool.where, pool.share
        inline = fit == pool.first_fit
        fair_mech = self.mechanism == "fair"
        tune = self.mechanism == "tune"
        placed = FAIR if fair_mech else IDEAL
        fair = pool.fair
        total = len(order)
        num = pool.num
        ptr = self._first = [0] * len(shares)          # per class: no server before this one holds its share
        one = pool.one_gpu
        i = start
        free = pool.free
        while i < total and free:
            stop = min(total, i + max(2 * free, 64))
            chunk = order[i:stop]
            jobs, gpus, codes = chunk.tolist(), gpus_of[chunk].tolist(), codes_of[chunk].tolist()
            for s, g, code in zip(jobs, gpus, codes):
                if not free:
                    pool.free = free
                    return i
                pos = i
                i += 1
                if g > free:
                    continue
                share = fair if fair_mech else shares[code]
                c, m, ss = share
                if inline and g == 1:
                    for k in range(ptr[code], num):
                        if fg[k] and fc[k] >= c and fm[k] >= m and fs[k] >= ss:
                            oc, om, os_ = fc[k], fm[k], fs[k]
                            fg[k] -= 1
                            fc[k] = oc - c
                            fm[k] = om - m
                            fs[k] = os_ - ss
                            on[k].append(s)
                            free -= 1
                            where_of[s] = one[k]
                            share_of[s] = share
                            trail.append((4, pos, s, k, oc, om, os_))
                            status[s] = placed
                            ptr[code] = k
                            break
                    else:
                        ptr[code] = num
                        if tune:
                            pool.free = free
                            self._tune_fallback(pos, s, g, code)
                            ptr, free = self._first, pool.free
                    continue
                pool.free = free
                where = fit(c, m, ss, g)
                if where is not None:
                    trail.append((0, pos, s, where, pool.snapshot(where)))
                    commit(s, where, c, m, ss)
                    status[s] = placed
                elif tune:
                    self._tune_fallback(pos, s, g, code)
                    ptr = self._first
                free = pool.free
                # greedy skips the job; fair fits whenever GPUs do
        pool.free = free
        return i

    def _tune_fallback(self, pos: int, s: int, g: int, code: int) -> None:
        """TUNE when the ideal share does not fit: self-demotion, then peer demotion (docs/rules.md#tune-demotion)."""
        pool = self.pool
        c, m, ss = self.shares[code]
        st = IDEAL
        if self.adjust[code]:                              # self-demotion (docs/rules.md#tune-demotion)
            c, m, ss = pool.fair
            st = FAIR
        where = self.fit(c, m, ss, g)
        if where is None:
            self._demote_peers(pos, c, m, ss, g)
            where = self.fit(c, m, ss, g)
            if where is None:
                raise SimulationError(f"Synergy-TUNE could not place a {g}-GPU job even after demoting peers "
                                    f"(the artifact exits here)")
        self._trail.append((0, pos, s, where, pool.snapshot(where)))
        pool.commit(s, where, c, m, ss)
        self.status[s] = st
        if st == FAIR:
            self.demoted.append(s)
            self._trail.append((3, pos))

    def _demote_peers(self, pos: int, c: float, m: float, ss: float, g: int) -> None:
        """Bring CPU-rich peers on the least-free server(s) back to the fair share (docs/rules.md#tune-demotion)."""
        pool, trail, status = self.pool, self._trail, self.status
        self._first = [0] * len(self.shares)            # demotions free resources: search from server 0 again
        fair = pool.fair
        for k, n in pool.underutilized(g):
            ratio = n / g
            need = [max(0.0, c * g * ratio - pool.fc[k]), max(0.0, m * g * ratio - pool.fm[k]),
                    max(0.0, ss * g * ratio - pool.fs[k])]
            if not any(need):
                continue
            trail.append((2, pos, k, list(pool.on[k])))
            for p in pool.peers_to_demote(k, need):
                code = int(self._codes_of[p])
                share = fair if self.adjust[code] else self.shares[code]
                old, before = pool.share[p], pool.snapshot(pool.where[p])
                if not pool.reshare(p, *share):
                    raise SimulationError(f"Synergy-TUNE: demoting a peer to its fair share overflows server {k} "
                                        f"(docs/rules.md#tune-demotion)")
                trail.append((1, pos, p, old, before, status[p], bool(self.adjust[code])))
                status[p] = FAIR                           # re-credited without speedup for the whole round
                if self.adjust[code]:
                    self.demoted.append(p)
