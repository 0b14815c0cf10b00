"""When one plan of the resource core may stand for several rounds, and when the order cannot matter.

A plan repeats while nothing that decides it can change: no job arrives or completes, no waiting job reaches
the starvation guard, and the order (or, under GPU-proportional shares, the running set) stays the same. When
every runnable job fits at its share in any order, no order or placement is needed at all. Merged plans give
the same JCTs as round-by-round planning (the tests compare both).
"""

from __future__ import annotations

import math

import numpy as np

from hetsched.stages.plans import RoundPlan
from hetsched.decide.synergy.ordering import OrderingView

STARVATION_S = 1000 * 3600.0       # a job not run for this long is sorted first (every policy's guard)


class RoundMerging:
    """Order-free rounds and merged rounds of a `ServerRounds` (`stage`), which holds it as `merging`."""

    def __init__(self, stage):
        self.stage = stage

    def everyone_fits(self, slots: np.ndarray) -> bool:
        """True when every runnable job gets its GPUs and its share (ideal, or fair under `fair`) in any order.

        A job fails only if every server is blocked: all its GPUs taken, or less left than the largest per-GPU
        share `b` in some resource. Measure each job by its largest fraction of a server's blocking amount,
        `max(gpus / G, cpus / (C - b_cpu), GB / (M - b_mem), MB/s / (S - b_mbps))`: a blocked server holds jobs
        whose measures sum to at least 1, so fewer servers than the sum over all jobs can be blocked. When that
        leaves as many free servers as the widest job has GPUs, no order can make a job fail.
        """
        stage = self.stage
        pool = stage.pool
        if stage._demand_gpus > pool.num_gpus:
            return False
        if stage._fair:
            return True
        if not pool.identical or (stage._k_penalized and stage._multi_gpu_jobs):
            return False                     # the bound assumes identical servers and no placement penalty
        present = stage._class_count > 0
        key = present.tobytes()
        cached = stage._measures.get(key)
        if cached is None:
            shares = stage._k_share[present]
            room = np.asarray(pool.size[1:], float) - shares.max(axis=0)
            if (room <= 0).any():
                cached = (None, 0)
            else:
                g = stage._k_gpus[present].astype(float)
                measure = np.zeros(len(present))
                measure[present] = np.maximum(g / pool.size[0], ((shares * g[:, None]) / room).max(axis=1))
                cached = (measure, int(stage._k_gpus[present].max()))
            if len(stage._measures) > 4096:
                stage._measures.clear()
            stage._measures[key] = cached
        measure, widest = cached
        if measure is None:
            return False
        blocked = int(float(stage._class_count @ measure) + 1e-9)
        return pool.num - blocked >= widest

    def repeatable_rounds(self, now: float, run: np.ndarray, credit: np.ndarray, order_free: bool,
                           order: np.ndarray | None = None) -> int:
        """How many identical rounds this plan stands for: until a job completes or the order may change.

        Order-free plans last until the next arrival. FIFO keeps its order; a new job only matters while GPUs
        are idle. Other orderings last while no job arrives, no waiting job reaches the starvation guard, and
        no two jobs swap places (`_rounds_until_reorder`).
        """
        stage = self.stage
        if not len(run):
            return 1
        rounds = int(np.ceil(stage.remaining[run] / credit).min())
        if rounds <= 1:
            return 1
        ordering = stage.policy.ordering
        arrival = self._pending_arrival_rounds(now)
        if order_free:
            limits = [arrival]
        elif ordering.name == "FIFO":
            limits = [arrival if stage.pool.num_gpus > stage.escale[run].sum() else None]
        else:
            limits = [arrival]
            mask = np.zeros(len(stage.remaining), bool)
            mask[run] = True
            active = stage.active_slots()
            limits.append(self._guard_rounds(active[~mask[active]], now))
            if not ordering.static and order is not None:
                limits.append(self._rounds_until_reorder(now, order, run, credit))
        for limit in limits:
            if limit is not None:
                rounds = min(rounds, limit)
        return max(rounds, 1)

    def _rounds_until_reorder(self, now: float, order: np.ndarray, run: np.ndarray, credit: np.ndarray) -> int:
        """Rounds during which a dynamic ordering keeps this order, if every round repeats this one.

        The keys (remaining time, attained service, time in system) change by a fixed amount per repeated round,
        so they are evaluated after one and two more rounds and extrapolated; the plan stops one round before
        the first pair of neighbours could meet (ties break by arrival, so meeting counts as a swap).
        """
        stage = self.stage
        if not stage.policy.ordering.linear:
            return 1
        per_round = np.zeros(len(stage.remaining))
        per_round[run] = credit
        step = per_round[order]
        ran = (step > 0).astype(float)

        view = OrderingView(stage, order, now)
        remaining, attained = stage.remaining[order], stage.attained[order]

        def keys(n: int) -> np.ndarray:
            view.now = now + n * stage.round_s
            view.remaining = np.maximum(remaining - n * step, 0.0)
            view.attained_s = attained + n * stage.round_s * ran
            view.__dict__.pop("executed", None)
            return stage.policy.ordering.key(view)

        k1, k2 = keys(1), keys(2)
        prio = stage.priority[order]
        if stage._fair and not stage._multi_gpu_jobs and not prio.any():
            return self._rounds_until_swap_in(k1, k2 - k1, step > 0)
        same = prio[1:] == prio[:-1]
        gap = (k1[1:] - k1[:-1])[same]
        if (gap < 0).any():
            return 1                                           # the order already changes next round
        closing = ((k2 - k1)[:-1] - (k2 - k1)[1:])[same]
        tol = 1e-9 * np.maximum(np.abs(k1[1:][same]), 1.0)
        meet = gap <= tol
        if (meet & (closing >= 0)).any():
            return 1
        ahead = closing > 0
        if not ahead.any():
            return 1 << 30
        m = np.ceil((gap[ahead] - tol[ahead]) / closing[ahead]).min()       # rounds after the next one
        return max(1, int(m))

    @staticmethod
    def _rounds_until_swap_in(k1: np.ndarray, delta: np.ndarray, running: np.ndarray) -> int:
        """Under GPU-proportional shares with single-GPU jobs only the running set matters, not its order: it
        stays while every running key stays below every waiting key. A safe bound from the extremes."""
        if running.all() or not running.any():
            return 1 << 30
        run_k, wait_k = k1[running], k1[~running]
        gap = wait_k.min() - run_k.max()
        if gap <= 1e-9 * max(abs(wait_k.min()), 1.0):
            return 1
        closing = delta[running].max() - delta[~running].min()
        if closing <= 0:
            return 1 << 30
        return max(1, int(np.ceil(gap / closing)) - 1)

    def _pending_arrival_rounds(self, now: float) -> int | None:
        """Rounds until the next arrival is admitted (set by the simulator; None = no arrival known)."""
        stage = self.stage
        nxt = stage.next_arrival_s
        if nxt is None:
            return None
        return max(1, math.ceil((nxt - now) / stage.round_s - 1e-12))

    def fair_set_round(self, slots: np.ndarray, now: float) -> RoundPlan | None:
        """GPU-proportional shares, single-GPU jobs, a dynamic order, no raised priorities: a round runs the
        G jobs with the smallest keys, in any order. Selected in linear time; merged while no waiting job can
        overtake a running one. None when this shortcut does not apply (ties at the boundary, ...)."""
        stage = self.stage
        ordering = stage.policy.ordering
        G = stage.pool.num_gpus
        if ordering.static or not ordering.linear or stage._multi_gpu_jobs or len(slots) <= G or stage._k_penalized:
            return None
        if stage.priority[slots].any():
            return None
        view = OrderingView(stage, slots, now)
        key = ordering.key(view)
        part = np.argpartition(key, G - 1)
        top, rest = part[:G], part[G:]
        kth = key[part[G - 1]]
        if (key[rest] <= kth).any():
            return None                                   # a tie at the boundary: the stable sort decides
        stage._raise_guard(slots, now)
        run = slots[top]
        credit = stage.credit_free[run]                      # the fair-share credit
        alloc = tuple((np.bincount(stage.cls[run], minlength=len(stage._class_count)) @ stage._k_alloc[:, 1]).tolist())
        rounds = int(np.ceil(stage.remaining[run] / credit).min()) if stage.macro_rounds else 1
        if rounds > 1:
            step = np.zeros(len(slots))
            step[top] = credit
            view.now = now + stage.round_s
            view.remaining = np.maximum(view.remaining - step, 0.0)
            view.attained_s = view.attained_s + stage.round_s * (step > 0)
            running = step > 0
            delta = ordering.key(view) - key
            gap = key[rest].min() - key[top].max()
            tol = 1e-9 * max(abs(float(key[rest].min())), 1.0)
            closing = delta[top].max() - delta[rest].min()
            if gap <= tol:
                rounds = 1
            elif closing > 0:                                  # round j keeps the set while j * closing < gap
                rounds = min(rounds, max(1, int(np.ceil((gap - tol) / closing))))
            for limit in (self._pending_arrival_rounds(now), self._guard_rounds(slots[~running], now)):
                if limit is not None:
                    rounds = min(rounds, limit)
        return stage._finish_plan(now, run, credit, max(rounds, 1), alloc)

    def _guard_rounds(self, waiting: np.ndarray, now: float) -> int | None:
        """Rounds until a waiting job reaches the starvation guard (None: nobody waits)."""
        stage = self.stage
        if not len(waiting):
            return None
        since = np.where(stage.last_run[waiting] >= 0, stage.last_run[waiting], stage.arrival[waiting])
        return int(np.floor((since.min() + stage.starvation_s - now) / stage.round_s))
