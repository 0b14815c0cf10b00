"""The scheduling core with CPU/memory-aware stages (Synergy, spec/synergy.md s.2 with the amendments of s.8).

Each round: (1) decide: an ordering ranks the runnable jobs; (2) select: jobs are taken in that order while
GPUs remain (LAS and OPT place only the GPU-count fill); (3) place: the mechanism gives each job GPUs, CPU
cores and memory on servers (fair, greedy, tune, opt); (4) run: a job credits `floor(round / iteration time)`
iterations, its iteration time divided by its speedup when it got its ideal share (and by the placement
penalty when spread over servers). Every lease ends with the round; JCTs end on the round grid.

It drives the same simulator loop and `Result` as Gavel's mechanism: it exposes the core interface
(`add_job`, `remove_job`, `plan`, `credit`, slot arrays). A plan may cover several identical rounds when
nothing can change in between (a static order and no completion, or every runnable job fitting at its
ideal share whatever the order); the JCTs are the same as round by round.
"""

from __future__ import annotations

import math

import numpy as np

from ..cluster import ClusterSpec
from ..core import Assignment, RoundPlan
from ..errors import HetschedError
from ..jobs import Job
from ..slots import JobSlots
from ..policies.ordering import OrderingView, ResourcePolicy
from .mechanism import PlacementStage
from .pool import FAIR, ServerPool
from .stats import RoundStats
from .profiles import CPU_LEVELS, MEM_LEVELS, SensitivityTable, load_sensitivity

STARVATION_S = 1000 * 3600.0       # a job not run for this long is sorted first (every policy's guard)


class ResourceScheduler(JobSlots):
    """Synergy's round on one homogeneous pool of servers (single GPU type)."""

    SLOT_ARRAYS = ("remaining", "total", "arrival", "attained", "last_run", "priority", "escale", "cls",
                   "cpu_demand", "mem_demand", "iter_time", "speedup", "speedup_now", "etput", "start_time",
                   "credit_free")

    def __init__(self, cluster: ClusterSpec, policy: ResourcePolicy, sensitivity: SensitivityTable | None = None,
                 *, round_s: float = 300.0, seed: int = 0, macro_rounds: bool = True, round_origin_s: float = 0.0):
        if len(cluster.gpu_types) != 1:
            raise HetschedError(f"{policy.name}: Synergy's mechanisms run on one GPU type; the cluster has "
                                f"{list(cluster.gpu_types)} (use a heterogeneity-aware policy, e.g. 'gavel+tune')")
        self.cluster = cluster
        self.policy = policy
        self.table = sensitivity or load_sensitivity(3)
        self.round_s = float(round_s)
        self.round_origin_s = float(round_origin_s)
        self.macro_rounds = macro_rounds
        self.pool = ServerPool(cluster.server_shapes())
        self.gpu_types = tuple(cluster.gpu_types)
        self.n = 1
        self.capacity = np.array([float(self.pool.num_gpus)])
        self.placement_aware = False
        self.num_recomputes = 0
        self._has_pairs = False
        self.stats = RoundStats(self.pool.totals)
        self._fair = policy.mechanism == "fair"
        # Job classes (model, GPUs): demands, speedup and per-round credits, in Python lists for the hot loop.
        self._class: dict[tuple[str, int], int] = {}
        self._c_share: list[tuple[float, float, float]] = []      # ideal per-GPU share
        self._c_adjust: list[bool] = []                            # ideal above the fair share somewhere
        self._c_credit: list[tuple[int, int, int, int]] = []      # ideal, fair, ideal spread, fair spread
        self._c_penalized: list[bool] = []
        self._c_grid: list[np.ndarray] = []
        self._c_res: list = []
        self.stage = None
        if policy.mechanism != "opt":
            self.stage = PlacementStage(self.pool, policy.mechanism, policy.placement, self._c_share, self._c_adjust)
            self.stage.code_of = lambda slot: int(self.cls[slot])
        self.next_arrival_s: float | None = None     # set by the simulator before each plan
        # Jobs by slot.
        size = 64
        self._init_slots(size)
        self.remaining = np.zeros(size)
        self.total = np.zeros(size)
        self.arrival = np.zeros(size)
        self.attained = np.zeros(size)
        self.last_run = np.full(size, -1.0)
        self.priority = np.zeros(size)
        self.escale = np.zeros(size, np.int64)
        self.cls = np.zeros(size, np.int64)
        self.cpu_demand = np.zeros(size)
        self.mem_demand = np.zeros(size)
        self.iter_time = np.zeros(size)
        self.speedup = np.zeros(size)
        self.speedup_now = np.zeros(size)          # last round's speedup (1 after a demotion), for SRTF/FTF/TETRIS
        self.start_time = np.full(size, np.nan)
        self.credit_free = np.zeros(size)          # iterations per round when every job gets its class's share
        self.members = np.stack([np.arange(size), np.full(size, -1)], axis=1)
        self.etput = np.zeros((size, 1, 2))
        self._active: np.ndarray | None = None
        self._demand_gpus = 0
        self._multi_gpu_jobs = 0
        self._unordered = False                 # a job was added out of arrival order: sort explicitly
        self._last_admitted = (-math.inf, -1)
        self._measures: dict[bytes, tuple] = {}   # present-class mask -> per-class blocking measure, widest job
        self._class_count = np.zeros(0, np.int64)
        self.busy_gpu_s = 0.0

    # ---- jobs -------------------------------------------------------------------------------------
    def _class_of(self, model: str, g: int) -> int:
        key = (model, g)
        code = self._class.get(key)
        if code is not None:
            return code
        p = self.table[model]
        res = self.table.demands(model, g, self.pool.size)
        share = (res.cpus / g, res.mem_gb / g, res.storage_mbps / g)
        fair = self.pool.fair
        adjust = res.cpus > fair[0] * g or res.mem_gb > fair[1] * g or res.storage_mbps > fair[2] * g
        it, r = p.iteration_time_s, self.round_s
        spread = it / p.placement_penalty
        credit = (math.floor(r / (it / res.speedup)), math.floor(r / it), math.floor(r / (spread / res.speedup)),
                  math.floor(r / spread))
        if credit[1] < 1 or credit[3] < 1:
            raise HetschedError(f"model {model!r}: one iteration ({it:g} s) is longer than a round ({r:g} s)")
        code = len(self._c_share)
        self._class[key] = code
        self._c_share.append(share)
        self._c_adjust.append(adjust)
        self._c_credit.append(credit)
        self._c_penalized.append(p.placement_penalty != 1)
        self._c_grid.append(p.grid)
        self._c_res.append(res)
        self._class_count = np.append(self._class_count, 0)
        return code

    def _grow(self) -> None:
        super()._grow()
        size = len(self.job_of_slot)
        self.members = np.stack([np.arange(size), np.full(size, -1)], axis=1)

    def add_job(self, job: Job, remaining_steps: float | None = None) -> None:
        if job.scale_factor > self.pool.num_gpus:
            raise HetschedError(f"job {job.job_id} needs {job.scale_factor} GPUs; the cluster has "
                                f"{self.pool.num_gpus}")
        code = self._class_of(job.job_type, job.scale_factor)
        s = self._take_slot(job)
        res = self._c_res[code]
        p = self.table[job.job_type]
        self.total[s] = float(job.total_steps)
        self.remaining[s] = float(job.total_steps if remaining_steps is None else remaining_steps)
        self.arrival[s] = job.arrival_time_s
        self.attained[s] = 0.0
        self.last_run[s] = -1.0
        self.priority[s] = 0.0
        self.escale[s] = job.scale_factor
        self.cls[s] = code
        self.cpu_demand[s] = res.cpus          # demands come from the sensitivity table (per model and GPUs)
        self.mem_demand[s] = res.mem_gb
        self.iter_time[s] = p.iteration_time_s
        self.speedup[s] = self.speedup_now[s] = res.speedup
        self.start_time[s] = np.nan
        self.credit_free[s] = self._c_credit[code][1 if self._fair else 0]
        self._class_count[code] += 1
        self._active = None
        self._unordered |= (job.arrival_time_s, job.job_id) < self._last_admitted
        self._last_admitted = max(self._last_admitted, (job.arrival_time_s, job.job_id))
        self._demand_gpus += job.scale_factor
        self._multi_gpu_jobs += job.scale_factor > 1

    def remove_job(self, job_id: int) -> None:
        s = self._release_slot(job_id)
        self._demand_gpus -= int(self.escale[s])
        code = int(self.cls[s])
        self._class_count[code] -= 1
        self._multi_gpu_jobs -= int(self.escale[s]) > 1
        self._active = None

    def active_slots(self) -> np.ndarray:
        """The runnable jobs in arrival order (ties by id): the order the simulator admits them in."""
        if self._active is None:
            active = np.fromiter(self.slot.values(), np.int64, len(self.slot))
            if self._unordered:
                active = active[np.lexsort((self.job_of_slot[active], self.arrival[active]))]
            self._active = active
        return self._active

    def next_round_time(self, t: float) -> float:
        """Rounds start on the grid of the round length from the origin (t = 0 unless a replay says otherwise)."""
        o = self.round_origin_s
        return o + max(0, math.ceil((t - o) / self.round_s - 1e-12)) * self.round_s

    # ---- decide and select ---------------------------------------------------------------------------
    def _order(self, slots: np.ndarray, now: float) -> np.ndarray:
        """Step 1: the runnable jobs (given in arrival order) in the policy's order."""
        ordering = self.policy.ordering
        if ordering.name == "FIFO":
            return slots                          # FIFO's key ignores the starvation guard (amendment 8)
        order = slots[ordering.rank(OrderingView(self, slots, now))]
        self._raise_guard(slots, now)        # raised after sorting: it reorders from the next round on
        return order

    def _fair_set_round(self, slots: np.ndarray, now: float) -> RoundPlan | None:
        """GPU-proportional shares, single-GPU jobs, a dynamic order, no raised priorities: a round runs the
        G jobs with the smallest keys, in any order. Selected in linear time; merged while no waiting job can
        overtake a running one. None when this shortcut does not apply (ties at the boundary, ...)."""
        ordering = self.policy.ordering
        G = self.pool.num_gpus
        if ordering.static or self._multi_gpu_jobs or len(slots) <= G or self._k_penalized:
            return None
        if self.priority[slots].any():
            return None
        view = OrderingView(self, slots, now)
        key = ordering.key(view)
        part = np.argpartition(key, G - 1)
        top, rest = part[:G], part[G:]
        kth = key[part[G - 1]]
        if (key[rest] <= kth).any():
            return None                                   # a tie at the boundary: the stable sort decides
        self._raise_guard(slots, now)
        run = slots[top]
        credit = self.credit_free[run]                      # the fair-share credit
        alloc = tuple((np.bincount(self.cls[run], minlength=len(self._class_count)) @ self._k_alloc[:, 1]).tolist())
        rounds = int(np.ceil(self.remaining[run] / credit).min()) if self.macro_rounds else 1
        if rounds > 1:
            step = np.zeros(len(slots))
            step[top] = credit
            view.now = now + self.round_s
            view.remaining = np.maximum(view.remaining - step, 0.0)
            view.attained_s = view.attained_s + self.round_s * (step > 0)
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
        return self._finish_plan(now, run, credit, max(rounds, 1), alloc)

    def _raise_guard(self, slots: np.ndarray, now: float) -> None:
        """The starvation guard: a job not run for 1000 h is sorted first from the next round on."""
        last = self.last_run[slots]
        since = now - np.where(last >= 0, last, self.arrival[slots])
        self.priority[slots[since > STARVATION_S]] = 1.0

    def _guard_rounds(self, waiting: np.ndarray, now: float) -> int | None:
        """Rounds until a waiting job reaches the starvation guard (None: nobody waits)."""
        if not len(waiting):
            return None
        since = np.where(self.last_run[waiting] >= 0, self.last_run[waiting], self.arrival[waiting])
        return int(np.floor((since.min() + STARVATION_S - now) / self.round_s))

    def _gpu_fill(self, order: np.ndarray) -> np.ndarray:
        """The ordered jobs that fit by GPU count alone (later smaller jobs may fill in)."""
        free = self.pool.num_gpus
        if not self._multi_gpu_jobs:
            return order[:free]
        out = []
        for s, g in zip(order.tolist(), self.escale[order].tolist()):
            if g <= free:
                out.append(s)
                free -= g
                if not free:
                    break
        return np.array(out, np.int64)

    # ---- the round ------------------------------------------------------------------------------------
    def plan(self, now: float, force_recompute: bool = False, place: bool = True) -> RoundPlan:
        slots = self.active_slots()
        if not len(slots):
            return RoundPlan(now, np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.num_recomputes += 1
        self._refresh_class_arrays()
        mech = self.policy.mechanism
        order_free = mech != "opt" and self._everyone_fits(slots)
        if mech == "opt":
            self.speedup_now[slots] = self.speedup[slots]
            if self._opt_everyone_best(slots):            # every job at its best point: no order, no program
                code = self.cls[slots]
                credit = np.floor(self.round_s / (self.iter_time[slots] / self._k_best[code, 0]))
                self._opt_alloc = tuple(self._k_best[code, 1:].sum(axis=0).tolist())
                rounds = self._repeatable_rounds(now, slots, credit, True) if self.macro_rounds else 1
                return self._finish_plan(now, slots, credit, rounds, self._opt_alloc)
            order = self._order(slots, now)
            run, credit, order_free = self._opt_round(order)
            rounds = self._repeatable_rounds(now, run, credit, order_free, order) if self.macro_rounds else 1
            return self._finish_plan(now, run, credit, rounds, self._opt_alloc)
        if order_free:                   # every job runs at its class's share: no order, no placement
            if self.stage is not None:
                self.stage.reset()
            credit = self.credit_free[slots]
            alloc = tuple((self._class_count @ self._k_alloc[:, int(self._fair)]).tolist())
            if self.policy.ordering.uses_speedup:
                self.speedup_now[slots] = self.speedup[slots]
            rounds = self._repeatable_rounds(now, slots, credit, True) if self.macro_rounds else 1
            return self._finish_plan(now, slots, credit, rounds, alloc)
        demoted: list[int] = []
        order = None
        fast = self._fair_set_round(slots, now) if self._fair else None
        if fast is not None:
            return fast
        if self._fair and not (self.policy.placement and self._k_penalized):
            order = self._order(slots, now)
            run = self._gpu_fill(order)                       # fair shares fit wherever the GPUs do
            fair_run = np.ones(len(run), bool)
            spread = np.zeros(len(run), bool)
        else:
            order = self._order(slots, now)
            status = self._place_round(order)
            run = np.fromiter(status.keys(), np.int64, len(status))
            fair_run = np.fromiter(status.values(), np.int64, len(status)) == FAIR
            spread = self._spread(run)
            demoted = self.stage.demoted
        code = self.cls[run]
        credit = self._k_credit[code, fair_run + 2 * spread]
        alloc = self._allocation(code, fair_run)
        if self.policy.ordering.uses_speedup:
            self.speedup_now[slots] = self.speedup[slots]
            if demoted:
                self.speedup_now[demoted] = 1.0
        rounds = self._repeatable_rounds(now, run, credit, order_free, order) if self.macro_rounds else 1
        return self._finish_plan(now, run, credit, rounds, alloc)

    def _best_points(self) -> np.ndarray:
        """Per class, Synergy-OPT's best point: (throughput, GPUs, CPUs, GB, CPUs, GB) - allocation twice, as
        allocated and as used (capped at the ideal demand)."""
        from .opt import CPU, MEM, fair_index, pareto_points

        cpu, mem = self._opt_budgets()
        gpus = self.pool.num_gpus
        fair_p = fair_index(CPU_LEVELS, cpu / gpus) * len(MEM_LEVELS) + fair_index(MEM_LEVELS, mem / gpus)
        rows = []
        for grid, res in zip(self._c_grid, self._c_res):
            flat = grid.ravel()
            pts = pareto_points(flat, flat[fair_p]) or [fair_p]
            p = max(pts, key=lambda q: (flat[q], -q))
            g = res.gpus
            rows.append((flat[p], g, CPU[p] * g, MEM[p] * g, min(CPU[p] * g, res.cpus), min(MEM[p] * g, res.mem_gb)))
        return np.array(rows, float).reshape(-1, 6)

    def _refresh_class_arrays(self) -> None:
        if getattr(self, "_k_count", -1) != len(self._c_share):
            self._k_count = len(self._c_share)
            self._k_credit = np.array(self._c_credit, float).reshape(-1, 4)
            self._k_share = np.array(self._c_share, float).reshape(-1, 3)
            self._k_adjust = np.array(self._c_adjust, bool)
            self._k_gpus = np.array([r.gpus for r in self._c_res], np.int64)
            self._k_best = self._best_points() if self.policy.mechanism == "opt" else None
            self._k_grid = np.array([g.ravel() for g in self._c_grid], float).reshape(-1, len(CPU_LEVELS) * len(MEM_LEVELS))
            self._k_penalized = bool(any(self._c_penalized))
            # Per class and share (ideal, fair): GPUs, CPUs, GB allocated and CPUs, GB used (capped at demand).
            fair = np.asarray(self.pool.fair)
            rows = []
            for res, share in zip(self._c_res, self._c_share):
                row = []
                for sh in (np.asarray(share), fair):
                    cpu, mem = sh[0] * res.gpus, sh[1] * res.gpus
                    row.append((res.gpus, cpu, mem, min(cpu, res.cpus), min(mem, res.mem_gb)))
                rows.append(row)
            self._k_alloc = np.array(rows, float).reshape(-1, 2, 5)

    def _spread(self, run: np.ndarray) -> np.ndarray:
        """Jobs placed over several servers (only matters for models with a placement penalty)."""
        if not self._k_penalized:
            return np.zeros(len(run), bool)
        where = self.pool.where
        return np.array([len(where[s]) > 1 for s in run.tolist()], bool)

    def _allocation(self, code: np.ndarray, fair_run: np.ndarray) -> tuple[float, ...]:
        """GPUs, CPUs and GB allocated, and CPUs and GB used (allocation capped at the demand)."""
        fair_share = fair_run & self._k_adjust[code] if not self._fair else np.ones(len(code), bool)
        return tuple(self._k_alloc[code, fair_share.astype(np.intp)].sum(axis=0).tolist())

    def _finish_plan(self, now: float, run: np.ndarray, credit: np.ndarray, rounds: int, alloc) -> RoundPlan:
        end = now + rounds * self.round_s
        plan = RoundPlan(now, run, np.zeros(len(run), np.int64), steps=np.minimum(credit * rounds, self.remaining[run]),
                         end=end, rounds=rounds)
        fresh = run[np.isnan(self.start_time[run])]
        self.start_time[fresh] = now
        self.busy_gpu_s += float(self.escale[run].sum()) * rounds * self.round_s
        self.stats.add(now, rounds, self.round_s, alloc)
        return plan

    def _place_round(self, order: np.ndarray) -> dict[int, int]:
        """Steps 2-3 for fair, greedy and tune: place in order while GPUs remain (resumable, see mechanism)."""
        jobs = order
        if not self.policy.ordering.all_jobs:
            jobs = self._gpu_fill(order)
            if self.policy.mechanism == "tune":      # LAS+tune packs larger GPU demands first (stable)
                jobs = jobs[np.argsort(-self.escale[jobs], kind="stable")]
        return self.stage.run(jobs, self.escale, self.cls, self.job_of_slot)

    # ---- order-free rounds and repetition --------------------------------------------------------------
    def _everyone_fits(self, slots: np.ndarray) -> bool:
        """True when every runnable job gets its GPUs and its share (ideal, or fair under `fair`) in any order.

        A job fails only if every server is blocked: all its GPUs taken, or less left than the largest per-GPU
        share `b` in some resource. Measure each job by its largest fraction of a server's blocking amount,
        `max(gpus / G, cpus / (C - b_cpu), GB / (M - b_mem), MB/s / (S - b_mbps))`: a blocked server holds jobs
        whose measures sum to at least 1, so fewer servers than the sum over all jobs can be blocked. When that
        leaves as many free servers as the widest job has GPUs, no order can make a job fail.
        """
        pool = self.pool
        if self._demand_gpus > pool.num_gpus:
            return False
        if self._fair:
            return True
        if not pool.identical or (self._k_penalized and self._multi_gpu_jobs):
            return False                     # the bound assumes identical servers and no placement penalty
        present = self._class_count > 0
        key = present.tobytes()
        cached = self._measures.get(key)
        if cached is None:
            shares = self._k_share[present]
            room = np.asarray(pool.size[1:], float) - shares.max(axis=0)
            if (room <= 0).any():
                cached = (None, 0)
            else:
                g = self._k_gpus[present].astype(float)
                measure = np.zeros(len(present))
                measure[present] = np.maximum(g / pool.size[0], ((shares * g[:, None]) / room).max(axis=1))
                cached = (measure, int(self._k_gpus[present].max()))
            if len(self._measures) > 4096:
                self._measures.clear()
            self._measures[key] = cached
        measure, widest = cached
        if measure is None:
            return False
        blocked = int(float(self._class_count @ measure) + 1e-9)
        return pool.num - blocked >= widest

    def _repeatable_rounds(self, now: float, run: np.ndarray, credit: np.ndarray, order_free: bool,
                           order: np.ndarray | None = None) -> int:
        """How many identical rounds this plan stands for: until a job completes or the order may change.

        Order-free plans last until the next arrival. FIFO keeps its order; a new job only matters while GPUs
        are idle. Other orderings last while no job arrives, no waiting job reaches the starvation guard, and
        no two jobs swap places (`_rounds_until_reorder`).
        """
        if not len(run):
            return 1
        rounds = int(np.ceil(self.remaining[run] / credit).min())
        if rounds <= 1:
            return 1
        ordering = self.policy.ordering
        arrival = self._pending_arrival_rounds(now)
        if order_free:
            limits = [arrival]
        elif ordering.name == "FIFO":
            limits = [arrival if self.pool.num_gpus > self.escale[run].sum() else None]
        else:
            limits = [arrival]
            mask = np.zeros(len(self.remaining), bool)
            mask[run] = True
            active = self.active_slots()
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
        per_round = np.zeros(len(self.remaining))
        per_round[run] = credit
        step = per_round[order]
        ran = (step > 0).astype(float)

        view = OrderingView(self, order, now)
        remaining, attained = self.remaining[order], self.attained[order]

        def keys(n: int) -> np.ndarray:
            view.now = now + n * self.round_s
            view.remaining = np.maximum(remaining - n * step, 0.0)
            view.attained_s = attained + n * self.round_s * ran
            view.__dict__.pop("executed", None)
            return self.policy.ordering.key(view)

        k1, k2 = keys(1), keys(2)
        prio = self.priority[order]
        if self._fair and not self._multi_gpu_jobs and not prio.any():
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
        nxt = self.next_arrival_s
        if nxt is None:
            return None
        return max(1, math.ceil((nxt - now) / self.round_s - 1e-12))

    # ---- Synergy-OPT ---------------------------------------------------------------------------------
    def _opt_budgets(self) -> tuple[float, float]:
        pool = self.pool
        if self.policy.opt_artifact_budget and self.policy.ordering.name not in ("FIFO", "SRTF"):
            return float(pool.size[0] * pool.num), float(pool.size[0] * pool.num)   # the artifact's bug
        return pool.totals[1], pool.totals[2]

    def _opt_everyone_best(self, slots: np.ndarray) -> bool:
        """All runnable jobs fit by GPUs and every one at its best grid point fits the CPU/memory budgets."""
        if self._demand_gpus > self.pool.num_gpus:
            return False
        cpu, mem = self._opt_budgets()
        need = self._class_count @ self._k_best[:, 2:4]
        return bool(need[0] <= cpu and need[1] <= mem)

    def _opt_round(self, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Synergy-OPT on the GPU-count fill: every job runs at the grid point program 1 gives it (no GPUs
        are reserved: an idealised upper bound, spec s.2.4). Returns the jobs, their credits and whether the
        solution is every job at its best point (then the order does not matter)."""
        from .opt import choose_points

        jobs = self._gpu_fill(order)
        if not len(jobs):
            self._opt_alloc = (0.0,) * 5
            return jobs, np.zeros(0), False
        codes = self.cls[jobs]
        counts = np.bincount(codes, minlength=len(self._c_grid))
        pool = self.pool
        cpu_budget, mem_budget = self._opt_budgets()
        grids = self._k_grid
        points = choose_points(list(grids), [r.gpus for r in self._c_res], counts.tolist(), cpu_budget,
                               mem_budget, cpu_budget / pool.num_gpus, mem_budget / pool.num_gpus)
        # Jobs of a class take its points best first, in the policy's order.
        flat = np.array([p for pts in points for p, n in pts for _ in range(n)], np.int64)
        offset = np.concatenate([[0], np.cumsum(counts)[:-1]])
        by_class = np.argsort(codes, kind="stable")
        rank = np.empty(len(jobs), np.int64)
        rank[by_class] = np.arange(len(jobs)) - offset[codes[by_class]]
        point = flat[offset[codes] + rank]
        tput = grids[codes, point]
        credit = np.floor(self.round_s / (self.iter_time[jobs] / tput))
        g = self.escale[jobs].astype(float)
        nm = len(MEM_LEVELS)
        cpu = np.asarray(CPU_LEVELS)[point // nm] * g
        mem = np.asarray(MEM_LEVELS)[point % nm] * g
        self._opt_alloc = (float(g.sum()), float(cpu.sum()), float(mem.sum()),
                           float(np.minimum(cpu, self.cpu_demand[jobs]).sum()),
                           float(np.minimum(mem, self.mem_demand[jobs]).sum()))
        everyone_best = all(len(pts) <= 1 for pts in points) and \
            all(not pts or grids[k, pts[0][0]] == grids[k].max() for k, pts in enumerate(points))
        return jobs, credit, everyone_best and len(jobs) == len(self.active_slots())

    # ---- progress ------------------------------------------------------------------------------------
    leases_end_with_rounds = True   # the simulator drives this core with `_step_leases`

    def credit_plan(self, plan: RoundPlan) -> np.ndarray:
        """Credit a finished plan; returns the slots of the jobs that completed."""
        entry = plan.entry
        self.remaining[entry] -= plan.steps
        self.attained[entry] += plan.end - plan.now
        self.last_run[entry] = plan.end
        return entry[self.remaining[entry] <= 0]

    accounts_progress = True        # the ResultBuilder asks `account` instead of mirroring every round

    def account(self, slot: int) -> tuple[float, float, float, dict[str, float]]:
        """(start time, iterations done, cost, GPU-seconds per type) of the job in `slot`."""
        seconds = float(self.attained[slot] * self.escale[slot])
        price = self.cluster.price(self.gpu_types[0])
        return (float(self.start_time[slot]), float(self.total[slot] - self.remaining[slot]),
                seconds / 3600.0 * price, {self.gpu_types[0]: seconds} if seconds else {})

    def assignments(self, plan: RoundPlan) -> list[Assignment]:
        """Per-job GPUs of the last placed round (for timelines and the runtime)."""
        out = []
        base = np.cumsum([0] + self.pool.cap_g[:-1])
        for s in plan.entry.tolist():
            gpus = tuple(int(base[k]) + i for k, n in self.pool.where.get(s, ()) for i in range(n))
            out.append(Assignment(s, (int(self.job_of_slot[s]),), 0, gpus, (0.0,), int(self.escale[s])))
        return out
