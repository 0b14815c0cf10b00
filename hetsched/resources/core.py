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
from ..policies.ordering import OrderingView, ResourcePolicy
from .mechanism import PlacementStage
from .pool import FAIR, ServerPool
from .profiles import CPU_LEVELS, MEM_LEVELS, SensitivityTable, load_sensitivity

STARVATION_S = 1000 * 3600.0       # a job not run for this long is sorted first (every policy's guard)


class RoundStats:
    """Round-weighted sums of what was allocated (GPUs, CPUs, GB) and used (CPUs, GB capped at demand)."""

    FIELDS = ("gpu_alloc", "cpu_alloc", "mem_alloc", "cpu_used", "mem_used")

    def __init__(self, totals: tuple[float, float, float]):
        self.totals = totals
        self.sums = dict.fromkeys(self.FIELDS, 0.0)
        self.first_round_s: float | None = None
        self.end_s = 0.0

    def add(self, start: float, rounds: int, round_s: float, values: tuple[float, ...]) -> None:
        if self.first_round_s is None:
            self.first_round_s = start
        for name, v in zip(self.FIELDS, values):
            self.sums[name] += v * rounds
        self.end_s = start + rounds * round_s

    def averages(self, round_s: float) -> dict[str, float]:
        """Mean percentages over every round from the first non-empty one (idle rounds count as 0 %)."""
        if self.first_round_s is None:
            return {f"avg_{n}_pct": 0.0 for n in self.FIELDS}
        rounds = max((self.end_s - self.first_round_s) / round_s, 1.0)
        g, c, m = self.totals
        scale = {"gpu_alloc": g, "cpu_alloc": c, "mem_alloc": m, "cpu_used": c, "mem_used": m}
        return {f"avg_{n}_pct": 100.0 * self.sums[n] / (rounds * scale[n]) for n in self.FIELDS}


class ResourceScheduler:
    """Synergy's round on one homogeneous pool of servers (single GPU type)."""

    def __init__(self, cluster: ClusterSpec, policy: ResourcePolicy, sensitivity: SensitivityTable | None = None,
                 *, round_s: float = 300.0, seed: int = 0, macro_rounds: bool = True):
        if len(cluster.gpu_types) != 1:
            raise HetschedError(f"{policy.name}: Synergy's mechanisms run on one GPU type; the cluster has "
                                f"{list(cluster.gpu_types)} (use a heterogeneity-aware policy, e.g. 'gavel+tune')")
        self.cluster = cluster
        self.policy = policy
        self.table = sensitivity or load_sensitivity(3)
        self.round_s = float(round_s)
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
        self._plan_end = 0.0
        # Jobs by slot.
        self.jobs: dict[int, Job] = {}
        self.slot: dict[int, int] = {}
        size = 64
        self._free_slots = list(range(size - 1, -1, -1))
        self.job_of_slot = np.full(size, -1, np.int64)
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
        self.members = np.stack([np.arange(size), np.full(size, -1)], axis=1)
        self.etput = np.zeros((size, 1, 2))
        self._active: np.ndarray | None = None
        self._demand_gpus = 0
        self._multi_gpu_jobs = 0
        self._unordered = False                 # a job was added out of arrival order: sort explicitly
        self._last_admitted = (-math.inf, -1)

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
        return code

    def _grow(self) -> None:
        old = len(self.remaining)
        for name in ("job_of_slot", "remaining", "total", "arrival", "attained", "last_run", "priority", "escale",
                     "cls", "cpu_demand", "mem_demand", "iter_time", "speedup", "speedup_now", "etput"):
            arr = getattr(self, name)
            new = np.zeros((old * 2,) + arr.shape[1:], arr.dtype)
            new[:old] = arr
            setattr(self, name, new)
        self.job_of_slot[old:] = -1
        self.members = np.stack([np.arange(old * 2), np.full(old * 2, -1)], axis=1)
        self._free_slots.extend(range(old * 2 - 1, old - 1, -1))

    def add_job(self, job: Job, remaining_steps: float | None = None) -> None:
        if job.job_id in self.jobs:
            raise HetschedError(f"job {job.job_id} is already active")
        if job.scale_factor > self.pool.num_gpus:
            raise HetschedError(f"job {job.job_id} needs {job.scale_factor} GPUs; the cluster has "
                                f"{self.pool.num_gpus}")
        code = self._class_of(job.job_type, job.scale_factor)
        if not self._free_slots:
            self._grow()
        s = self._free_slots.pop()
        self.jobs[job.job_id] = job
        self.slot[job.job_id] = s
        self.job_of_slot[s] = job.job_id
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
        self._active = None
        self._unordered |= (job.arrival_time_s, job.job_id) < self._last_admitted
        self._last_admitted = max(self._last_admitted, (job.arrival_time_s, job.job_id))
        self._demand_gpus += job.scale_factor
        self._multi_gpu_jobs += job.scale_factor > 1

    def remove_job(self, job_id: int) -> None:
        s = self.slot.pop(job_id)
        self._demand_gpus -= int(self.escale[s])
        self._multi_gpu_jobs -= int(self.escale[s]) > 1
        self.jobs.pop(job_id)
        self.job_of_slot[s] = -1
        self._free_slots.append(s)
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
        """Rounds start on the grid of the round length from t = 0."""
        return math.ceil(t / self.round_s - 1e-12) * self.round_s

    # ---- decide and select ---------------------------------------------------------------------------
    def _order(self, slots: np.ndarray, now: float) -> np.ndarray:
        """Step 1: the runnable jobs (given in arrival order) in the policy's order."""
        ordering = self.policy.ordering
        if ordering.name == "FIFO":
            return slots                          # FIFO's key ignores the starvation guard (amendment 8)
        order = slots[ordering.rank(OrderingView(self, slots, now))]
        # The starvation guard is raised after sorting, so it reorders from the next round on.
        last = self.last_run[slots]
        since = now - np.where(last >= 0, last, self.arrival[slots])
        self.priority[slots[since > STARVATION_S]] = 1.0
        return order

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
        if mech == "opt" and not order_free:
            run_list, credit = self._opt_round(self._order(slots, now).tolist())
            return self._finish_plan(now, np.array(run_list, np.int64), credit, 1, self._opt_alloc)
        demoted: list[int] = []
        if order_free:
            if self.stage is not None:
                self.stage.reset()
            run = slots
            fair_run = np.full(len(run), self._fair)
            spread = np.zeros(len(run), bool)
        elif self._fair and not (self.policy.placement and self._k_penalized):
            run = self._gpu_fill(self._order(slots, now))     # fair shares fit wherever the GPUs do
            fair_run = np.ones(len(run), bool)
            spread = np.zeros(len(run), bool)
        else:
            status = self._place_round(self._order(slots, now))
            run = np.fromiter(status.keys(), np.int64, len(status))
            fair_run = np.fromiter(status.values(), np.int64, len(status)) == FAIR
            spread = self._spread(run)
            demoted = self.stage.demoted
        code = self.cls[run]
        credit = self._k_credit[code, fair_run + 2 * spread]
        alloc = self._allocation(code, fair_run)
        self.speedup_now[slots] = self.speedup[slots]
        if demoted:
            self.speedup_now[demoted] = 1.0
        rounds = self._repeatable_rounds(now, run, credit, order_free) if self.macro_rounds else 1
        return self._finish_plan(now, run, credit, rounds, alloc)

    def _refresh_class_arrays(self) -> None:
        if getattr(self, "_k_count", -1) != len(self._c_share):
            self._k_count = len(self._c_share)
            self._k_credit = np.array(self._c_credit, float).reshape(-1, 4)
            self._k_share = np.array(self._c_share, float).reshape(-1, 3)
            self._k_adjust = np.array(self._c_adjust, bool)
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
        k = len(run)
        end = now + rounds * self.round_s
        plan = RoundPlan(now, run, np.zeros(k, np.int64))
        plan.steps = np.zeros((k, 2))
        np.minimum(credit * rounds, self.remaining[run], out=plan.steps[:, 0])
        plan.finish = np.full((k, 2), -np.inf)
        plan.finish[:, 0] = end
        plan.rounds = rounds
        self._plan_end = end
        self.stats.add(now, rounds, self.round_s, alloc)
        return plan

    def _place_round(self, order: np.ndarray) -> dict[int, int]:
        """Steps 2-3 for fair, greedy and tune: place in order while GPUs remain (resumable, see mechanism)."""
        jobs = order
        if not self.policy.ordering.all_jobs:
            jobs = self._gpu_fill(order)
            if self.policy.mechanism == "tune":      # LAS+tune packs larger GPU demands first (stable)
                jobs = jobs[np.argsort(-self.escale[jobs], kind="stable")]
        return self.stage.run(jobs, self.escale[jobs], self.cls[jobs], self.job_of_slot[jobs])

    # ---- order-free rounds and repetition --------------------------------------------------------------
    def _everyone_fits(self, slots: np.ndarray) -> bool:
        """True when every runnable job gets its GPUs and its share (ideal, or fair under `fair`) in any order.

        A job can fail only if every server is blocked: out of GPUs, or with less left than the largest
        per-GPU share in some resource. Counting how many servers the other jobs' demands can block gives a
        bound; when it leaves room for the largest job's GPUs on distinct servers, no order can fail.
        """
        pool = self.pool
        if self._demand_gpus > pool.num_gpus:
            return False
        if self._fair:
            return True
        if not pool.identical:
            return False                                     # the bound assumes identical servers
        code = self.cls[slots]
        g = self.escale[slots]
        if self._k_penalized and (g > 1).any():
            return False
        share = self._k_share[code]
        biggest = share.max(axis=0)
        used = (share * g[:, None]).sum(axis=0)
        blocked = self._demand_gpus // pool.size[0]
        for u, cap, b in zip(used.tolist(), pool.size[1:], biggest.tolist()):
            room = cap - b
            if room <= 0:
                return False
            blocked += int(u // room)
        return pool.num - blocked >= int(g.max())

    def _repeatable_rounds(self, now: float, run: np.ndarray, credit: np.ndarray, order_free: bool) -> int:
        """How many identical rounds this plan stands for: until a job completes or the inputs may change."""
        if not len(run):
            return 1
        rounds = int(np.ceil(self.remaining[run] / credit).min())
        if rounds <= 1:
            return 1
        ordering = self.policy.ordering
        if order_free:
            limit = self._pending_arrival_rounds(now)
        elif ordering.static and ordering.all_jobs:
            limit = None
            if ordering.name != "FIFO" or self.pool.num_gpus > self.escale[run].sum():
                limit = self._pending_arrival_rounds(now)        # a new job may sort before a running one
            waiting = () if ordering.name == "FIFO" else np.setdiff1d(self.active_slots(), run, assume_unique=True)
            if len(waiting):
                since = np.where(self.last_run[waiting] >= 0, self.last_run[waiting], self.arrival[waiting])
                guard = int(np.floor((since.min() + STARVATION_S - now) / self.round_s))
                limit = guard if limit is None else min(limit, guard)
        else:
            return 1
        if limit is not None:
            rounds = min(rounds, limit)
        return max(rounds, 1)

    def _pending_arrival_rounds(self, now: float) -> int | None:
        """Rounds until the next arrival is admitted (set by the simulator; None = no arrival known)."""
        nxt = self.next_arrival_s
        if nxt is None:
            return None
        return max(1, math.ceil((nxt - now) / self.round_s - 1e-12))

    # ---- Synergy-OPT ---------------------------------------------------------------------------------
    def _opt_round(self, order: list[int]) -> tuple[list[int], np.ndarray]:
        jobs = self._gpu_fill(np.asarray(order, np.int64)).tolist()
        if not jobs:
            self._opt_alloc = (0.0,) * 5
            return [], np.zeros(0)
        codes = self.cls[jobs].tolist()
        distinct = sorted(set(codes))
        index = {c: i for i, c in enumerate(distinct)}
        counts = [0] * len(distinct)
        for c in codes:
            counts[index[c]] += 1
        pool = self.pool
        total_g = float(pool.num_gpus)
        if self.policy.opt_artifact_budget and self.policy.ordering.name not in ("FIFO", "SRTF"):
            cpu_budget = mem_budget = float(pool.size[0] * pool.num)
        else:
            cpu_budget, mem_budget = pool.totals[1], pool.totals[2]
        gpus = [self._c_res[c].gpus for c in distinct]
        from .opt import choose_points         # scipy's MILP: imported only when OPT runs

        points = choose_points([self._c_grid[c].ravel() for c in distinct], gpus, counts,
                                           cpu_budget, mem_budget, cpu_budget / total_g, mem_budget / total_g)
        queues = [[p for p, n in pts for _ in range(n)] for pts in points]
        taken = [0] * len(distinct)
        credit = np.zeros(len(jobs))
        used_c = used_m = used_cu = used_mu = 0.0
        nm = len(MEM_LEVELS)
        for i, (s, c) in enumerate(zip(jobs, codes)):
            k = index[c]
            p = queues[k][taken[k]]
            taken[k] += 1
            tput = float(self._c_grid[c].ravel()[p])
            it = float(self.iter_time[s])
            credit[i] = math.floor(self.round_s / (it / tput))
            g = float(self.escale[s])
            cpu, mem = CPU_LEVELS[p // nm] * g, MEM_LEVELS[p % nm] * g
            used_c += cpu
            used_m += mem
            used_cu += min(cpu, self.cpu_demand[s])
            used_mu += min(mem, self.mem_demand[s])
        self._opt_alloc = (float(self.escale[jobs].sum()), used_c, used_m, used_cu, used_mu)
        self.speedup_now[self.active_slots()] = self.speedup[self.active_slots()]
        return jobs, credit

    # ---- progress ------------------------------------------------------------------------------------
    def credit(self, entry: np.ndarray, gpu_type: np.ndarray, steps: np.ndarray, exec_time: np.ndarray,
               ) -> np.ndarray:
        """Credit a finished plan (iterations per job, (k, 2)); returns the slots of jobs that completed."""
        self.remaining[entry] -= steps[:, 0]
        self.attained[entry] += exec_time
        self.last_run[entry] = self._plan_end
        return entry[self.remaining[entry] <= 0]

    def assignments(self, plan: RoundPlan) -> list[Assignment]:
        """Per-job GPUs of the last placed round (for timelines and the runtime)."""
        out = []
        base = np.cumsum([0] + self.pool.cap_g[:-1])
        for s in plan.entry.tolist():
            gpus = tuple(int(base[k]) + i for k, n in self.pool.where.get(s, ()) for i in range(n))
            out.append(Assignment(s, (int(self.job_of_slot[s]),), 0, gpus, (0.0,), int(self.escale[s])))
        return out
