"""Gavel's select stage: priorities (allocation / fraction of time received) and the greedy walk over GPU
types (docs/rules.md#priorities, docs/rules.md#select)."""

from __future__ import annotations

import random

import numpy as np

from hetsched.compiled import kernels, round_kernels

_NO_DRAWS = np.zeros(0, np.int64)            # a fixed type order draws nothing


class PrioritySelect:
    """Gavel's select stage of a `Scheduler`: which entries run on which GPU type this round, from the allocation.
    It draws each round's GPU-type order: shuffled for policies that see neither types nor pairs (seeded)."""

    def __init__(self, sched, seed: int = 0):
        self.sched = sched
        policy = sched.policy
        self.shuffle = not policy.heterogeneity_aware and not policy.packing
        self._shuffler = random.Random(seed + 5)
        # The same generator as numbers for the compiled draws (kernels.shuffled), which quiet rounds make too.
        self.mt = np.array(self._shuffler.getstate()[1], np.int64) if self.shuffle and kernels.ENABLED else None

    def priorities(self) -> np.ndarray:
        """allocation / fraction of time received, per entry and type (docs/rules.md#priorities)."""
        sched = self.sched
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = sched.t / sched.S
            pr = sched.alloc / fraction
        zero_fraction = fraction == 0
        if zero_fraction.any():
            pr[zero_fraction] = sched.alloc[zero_fraction] * 1e9
        pr[(sched.alloc == 0) | sched.entry_table.blocked] = 0.0
        return pr

    def walk_state(self) -> tuple:
        """The arrays the compiled rounds read and write, in `round_kernels.QuietRounds`' order (members to mt): the
        entries, their rates and the time each received, the walk's rule, capacities, the type order and the
        shuffled order's generator state (empty when the order is fixed)."""
        sched = self.sched
        return (sched.members, sched.etput, sched.escale, sched.scale, sched.remaining, sched.t, sched.S, sched.alloc,
                sched.deficit, sched.in_alloc, sched.ok, not sched.policy.fills_idle_gpus, sched.capacity,
                sched.type_order_ids, _NO_DRAWS if self.mt is None else self.mt)

    def type_order_for_round(self) -> np.ndarray:
        sched = self.sched
        if self.mt is not None:                   # the generator's state as numbers (kernels.shuffled)
            return kernels.shuffled(sched.type_order_ids, self.mt)
        if not self.shuffle:
            return sched.type_order_ids
        order = list(sched.type_order)
        self._shuffler.shuffle(order)
        return np.array(order, np.int64)

    def select(self, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Greedy per-type walk over entries ranked by (priority, deficit, allocation, age) (docs/rules.md#select)."""
        sched = self.sched
        if round_kernels.ENABLED:                              # the same walk, compiled (compiled/_rounds.c)
            return round_kernels.select_walk(sched.t, sched.S, sched.alloc, sched.deficit, sched.in_alloc, sched.ok,
                                             not sched.policy.fills_idle_gpus, sched.members, sched.escale,
                                             sched.scale, sched.capacity, order)
        pr = self.priorities()
        free = sched.capacity.copy()
        taken = np.zeros(len(sched.remaining), bool)           # by slot
        out_e, out_w = [], []
        eligible = (sched.ok if sched.policy.fills_idle_gpus else sched.ok & (pr > 0)).T
        first = sched.members[:, 0]
        busy: set[int] = set()                                 # slots taken this round
        # Stable lexsorts: exact ties keep insertion order. Without pairs, one lexsort ranks all types at once;
        # with pairs (hundreds of entries), each type ranks only the entries still available.
        pairs = sched.entry_table.has_pairs
        rankings = None if pairs else np.lexsort((-sched.alloc.T, -sched.deficit.T, -pr.T))
        single_gpu = not pairs and sched.entry_table.all_single_gpu
        for w in order:
            if free[w] <= 0:
                continue
            if not pairs:
                ranking = rankings[w]
                cand = ranking[eligible[w][ranking] & ~taken[first[ranking]]]
                if single_gpu:
                    chosen = cand[: int(free[w])]              # everything fits one GPU: take the first ones
                    free[w] -= len(chosen)
                else:
                    chosen, free[w] = first_fit_in_order(cand, sched.escale[cand], int(free[w]))
                taken[first[chosen]] = True
                out_e.append(chosen)
                out_w.append(w)
                continue
            idx = np.flatnonzero(eligible[w] & ~taken[first])
            cand = idx[np.lexsort((-sched.alloc[idx, w], -sched.deficit[idx, w], -pr[idx, w]))]
            # Entries of other scale factors than their partner's never run; the walk itself is plain Python
            # over lists (numpy scalar access per candidate costs more than the walk).
            second = sched.members[cand, 1]
            fits = (second < 0) | (sched.scale[np.maximum(second, 0)] == sched.escale[cand])
            cand, second = cand[fits], second[fits]
            picked = []
            f = int(free[w])
            for e, a, b, s in zip(cand.tolist(), first[cand].tolist(), second.tolist(), sched.escale[cand].tolist()):
                if a in busy or (b >= 0 and b in busy) or s > f:
                    continue
                busy.add(a)
                if b >= 0:
                    busy.add(b)
                f -= s
                picked.append(e)
                if f <= 0:
                    break
            free[w] = f
            chosen = np.array(picked, np.int64)
            if len(chosen):
                taken[sched.members[chosen, 0]] = True
                second = sched.members[chosen, 1]
                taken[second[second >= 0]] = True
            out_e.append(chosen)
            out_w.append(w)
        if not out_e:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(out_e), np.repeat(np.array(out_w, np.int64), [len(e) for e in out_e])


def first_fit_in_order(cand: np.ndarray, gpus: np.ndarray, free: int) -> tuple[np.ndarray, int]:
    """The greedy walk of docs/rules.md#select without pairs: in rank order, take each candidate whose GPUs
    still fit in `free`, until none are left. Vectorised: the longest prefix that fits is taken, the candidate
    after it is skipped, and those that can no longer fit are dropped; each pass takes at least one.
    Returns the chosen candidates (in rank order) and the GPUs still free."""
    keep = gpus <= free
    cand, gpus = cand[keep], gpus[keep]
    out = []
    while len(cand) and free > 0:
        used = np.cumsum(gpus)
        n = int(np.searchsorted(used, free, side="right"))     # candidates [0, n) fit together
        if n:
            out.append(cand[:n])
            free -= int(used[n - 1])
        keep = gpus[n + 1:] <= free
        cand, gpus = cand[n + 1:][keep], gpus[n + 1:][keep]
    chosen = np.concatenate(out) if out else np.zeros(0, np.int64)
    return chosen, free
