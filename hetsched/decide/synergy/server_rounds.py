"""Synergy's rounds as a stage of the one `Scheduler` (docs/rules.md#cpu-memory, docs/rules.md#server-credit).

Each round: (1) decide: an ordering ranks the runnable jobs; (2) select: jobs are taken in that order while
GPUs remain (LAS and OPT place only the GPU-count fill); (3) place: the mechanism gives each job GPUs, CPU
cores and memory on servers (fair, greedy, tune, opt); (4) run: a job credits `floor(round / iteration time)`
iterations, its iteration time divided by its speedup when it got its ideal share (and by the placement
penalty when spread over servers). Every lease ends with the round; JCTs end on the round grid.

The scheduler keeps the jobs' slots and remaining iterations and calls this stage to plan, credit and account
whole rounds (`RoundStage`); the stage keeps the rest per slot. A plan may cover several identical rounds when
nothing can change in between (`merging.py`); Synergy-OPT's round is in `opt_round.py`; the runtime's leases
(servers joining and leaving, GPU ids and shares, measured credit) in `leases.py`.
"""

from __future__ import annotations

import math

import numpy as np

from hetsched.model.cluster import ClusterSpec
from hetsched.stages.plans import RoundPlan
from hetsched.errors import HetschedError, SpecError
from hetsched.model.jobs import Job
from hetsched.stages.rounds import grid_start
from hetsched.stages.decide import RoundStage
from hetsched.compiled import kernels
from hetsched.model.arrays import grow_arrays
from hetsched.decide.synergy.ordering import OrderingView, ResourcePolicy
from hetsched.place.mechanism import PlacementStage
from hetsched.place.compiled_placement import CompiledPlacement
from hetsched.decide.synergy.merging import STARVATION_S, RoundMerging
from hetsched.decide.synergy.leases import ServerLeases
from hetsched.decide.synergy.opt_round import OptRound
from hetsched.place.pool import FAIR, ServerPool
from hetsched.decide.synergy.stats import RoundStats
from hetsched.model.profiles import CPU_LEVELS, MEM_LEVELS, SensitivityTable, load_sensitivity

class ServerRounds(ServerLeases, RoundStage):
    """Synergy's round on one homogeneous pool of servers (single GPU type): decide (the ordering), select (the
    GPU-count fill, or placement order), place (fair, greedy, tune, opt) and credit per round."""

    starvation_s = STARVATION_S       # the guard (a class attribute, so an experiment can shorten it)
    SLOT_ARRAYS = ("total", "arrival", "attained", "last_run", "priority", "escale", "cls", "cpu_demand",
                   "mem_demand", "iter_time", "speedup", "speedup_now", "start_time", "credit_free")

    def __init__(self, cluster: ClusterSpec, policy: ResourcePolicy, sensitivity: SensitivityTable | None = None,
                 *, round_s: float = 300.0, macro_rounds: bool = True, round_origin_s: float = 0.0):
        if len(cluster.gpu_types) != 1:
            raise HetschedError(f"{policy.name}: Synergy's mechanisms run on one GPU type; the cluster has "
                                f"{list(cluster.gpu_types)} (use a heterogeneity-aware policy, e.g. 'gavel+tune')")
        self.cluster = cluster
        self.policy = policy
        self.table = sensitivity or load_sensitivity(3)
        self.round_s = float(round_s)
        self.round_origin_s = float(round_origin_s)
        self.macro_rounds = macro_rounds
        self.pool = ServerPool(cluster.server_shapes(), cluster.gpu_ids())
        self.gpu_type = cluster.gpu_types[0]
        self.stats = RoundStats(self.pool.totals)
        self.merging = RoundMerging(self)     # merged and order-free rounds (decide/synergy/merging.py)
        self.opt = OptRound(self)             # the +opt mechanism's rounds (decide/synergy/opt_round.py)
        self._fair = policy.mechanism == "fair"
        # Job classes (model, GPUs): demands, speedup and per-round credits, in Python lists for the hot loop.
        self._class: dict[tuple[str, int], int] = {}
        self._c_share: list[tuple[float, float, float]] = []      # ideal per-GPU share
        self._c_adjust: list[bool] = []                            # ideal above the fair share somewhere
        self._c_credit: list[tuple[int, int, int, int]] = []      # ideal, fair, ideal spread, fair spread
        self._c_penalized: list[bool] = []
        self._c_grid: list[np.ndarray] = []
        self._c_res: list = []
        self._new_stages()
        self.next_arrival_s: float | None = None     # given with each plan
        # Per slot (the scheduler's slots; every field is set when a job takes one). `speedup_now` is last
        # round's speedup (1 after a demotion), for SRTF/FTF/TETRIS; `credit_free` the iterations per round
        # when every job gets its class's share.
        for name in self.SLOT_ARRAYS:
            setattr(self, name, np.zeros(0, np.int64 if name in ("escale", "cls") else float))
        self._active: np.ndarray | None = None
        self._joined: list[int] = []            # slots admitted / left since `_active` was built
        self._left: list[int] = []
        self._demand_gpus = 0
        self._multi_gpu_jobs = 0
        self._unordered = False                 # a job was added out of arrival order: sort explicitly
        self._last_admitted = (-math.inf, -1)
        self._measures: dict[bytes, tuple] = {}   # present-class mask -> per-class blocking measure, widest job
        self._class_count = np.zeros(0, np.int64)
        self.busy_gpu_s = 0.0
        # How the last plan placed its jobs (for `assign`): on the pool by the mechanism, or not at all by a
        # shortcut (then at the class's ideal share when every job fits, else at the fair share).
        self._placed = False
        self._ideal_shares = False
        self._last_end = 0.0
        self._scratch: ServerPool | None = None

    # ---- the scheduler's slots -----------------------------------------------------------------------
    def attach(self, sched) -> None:
        super().attach(sched)
        self.slots_grown(len(sched.job_of_slot))

    def slots_grown(self, size: int) -> None:
        grow_arrays(self, self.SLOT_ARRAYS, size)

    @property
    def pool_types(self) -> tuple[str, ...]:
        return (self.gpu_type,)

    @property
    def jobs(self) -> dict[int, Job]:
        return self.sched.jobs

    @property
    def slot(self) -> dict[int, int]:
        return self.sched.slot

    @property
    def job_of_slot(self) -> np.ndarray:
        return self.sched.job_of_slot

    @property
    def remaining(self) -> np.ndarray:
        return self.sched.remaining

    # ---- jobs -------------------------------------------------------------------------------------
    def _class_of(self, model: str, g: int) -> int:
        key = (model, g)
        code = self._class.get(key)
        if code is not None:
            return code
        try:
            p = self.table[model]
        except SpecError as e:
            raise SpecError(f"{e}. Synergy's server rounds time a job by its model's profile; a job type of a "
                            "throughput table (Gavel's generator, a Gavel or Shockwave trace) runs an ordering "
                            "under Gavel's round rules, where '+tune' and '+fair' map it through "
                            "data/resources/gavel_models.csv: SimulationConfig.for_system('gavel'), or "
                            "--rules gavel") from None
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

    def job_added(self, job: Job) -> None:
        if job.scale_factor > self.pool.num_gpus:
            raise HetschedError(f"job {job.job_id} needs {job.scale_factor} GPUs; the cluster has "
                                f"{self.pool.num_gpus}")
        s = self.slot[job.job_id]
        self._set_class(s, job)
        self.total[s] = float(job.total_steps)
        self.arrival[s] = job.arrival_time_s
        self.attained[s] = 0.0
        self.last_run[s] = -1.0
        self.priority[s] = 0.0
        self.escale[s] = job.scale_factor
        self.iter_time[s] = self.table[job.job_type].iteration_time_s
        self.speedup_now[s] = self.speedup[s]
        self.start_time[s] = np.nan
        self._joined.append(s)
        self._unordered |= (job.arrival_time_s, job.job_id) < self._last_admitted
        self._last_admitted = max(self._last_admitted, (job.arrival_time_s, job.job_id))
        self._demand_gpus += job.scale_factor
        self._multi_gpu_jobs += job.scale_factor > 1

    def _set_class(self, s: int, job: Job) -> None:
        """Slot `s` runs `job`: its class, demands (from the sensitivity table, per model and GPUs on this
        pool's servers), speedup and per-round credit at the class's share."""
        code = self._class_of(job.job_type, job.scale_factor)
        res = self._c_res[code]
        self.cls[s] = code
        self.cpu_demand[s] = res.cpus
        self.mem_demand[s] = res.mem_gb
        self.speedup[s] = res.speedup
        self.credit_free[s] = self._c_credit[code][1 if self._fair else 0]
        self._class_count[code] += 1

    def job_removed(self, job_id: int) -> None:
        s = self.slot[job_id]
        self._demand_gpus -= int(self.escale[s])
        code = int(self.cls[s])
        self._class_count[code] -= 1
        self._multi_gpu_jobs -= int(self.escale[s]) > 1
        if s in self._joined:                   # joined since the last build: not in `_active`
            self._joined.remove(s)
        else:
            self._left.append(s)

    def active_slots(self) -> np.ndarray:
        """The runnable jobs in arrival order (ties by id): the order the simulator admits them in. In a long queue
        jobs admitted in order are appended to the last list and jobs that left are masked out of it (a slot may
        be reused); a short list (under 256 jobs) is cheaper to rebuild from the slot table."""
        active = self._active
        changed = self._left or self._joined
        if active is None or self._unordered or (changed and len(self.slot) < 256):
            active = np.fromiter(self.slot.values(), np.int64, len(self.slot))
            if self._unordered:
                active = active[np.lexsort((self.job_of_slot[active], self.arrival[active]))]
        elif changed:
            if self._left:
                keep = np.ones(len(self.job_of_slot), bool)
                keep[self._left] = False
                active = active[keep[active]]
            if self._joined:
                active = np.concatenate([active, np.array(self._joined, np.int64)])
        self._joined.clear()
        self._left.clear()
        self._active = active
        return active

    def next_round_time(self, t: float) -> float:
        """Rounds start on the grid of the round length from the origin (t = 0 unless a replay says otherwise)."""
        return grid_start(t, self.round_origin_s, self.round_s)

    # ---- decide and select ---------------------------------------------------------------------------
    def _order(self, slots: np.ndarray, now: float) -> np.ndarray:
        """Step 1: the runnable jobs (given in arrival order) in the policy's order."""
        ordering = self.policy.ordering
        if ordering.name == "FIFO":
            return slots                    # FIFO's key ignores the starvation guard (docs/rules.md#starvation-guard)
        order = slots[ordering.rank(OrderingView(self, slots, now))]
        self._raise_guard(slots, now)        # raised after sorting: it reorders from the next round on
        return order

    def _raise_guard(self, slots: np.ndarray, now: float) -> None:
        """The starvation guard: a job not run for 1000 h is sorted first from the next round on."""
        last = self.last_run[slots]
        since = now - np.where(last >= 0, last, self.arrival[slots])
        self.priority[slots[since > self.starvation_s]] = 1.0

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
    def plan(self, now: float, next_arrival_s: float | None) -> RoundPlan:
        """One ordered, placed round, or several identical ones (`plan.rounds`) until `plan.end`; every round
        recomputes the order; `next_arrival_s` bounds merged rounds."""
        self.next_arrival_s = next_arrival_s
        slots = self.active_slots()
        if not len(slots):
            return RoundPlan(now, np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.sched.num_recomputes += 1
        self._refresh_class_arrays()
        mech = self.policy.mechanism
        order_free = mech != "opt" and self.merging.everyone_fits(slots)
        self._placed, self._ideal_shares = False, order_free and not self._fair
        if mech == "opt":
            self.speedup_now[slots] = self.speedup[slots]
            if self.opt.everyone_best(slots):            # every job at its best point: no order, no program
                code = self.cls[slots]
                credit = np.floor(self.round_s / (self.iter_time[slots] / self._k_best[code, 0]))
                self._opt_alloc = tuple(self._k_best[code, 1:].sum(axis=0).tolist())
                rounds = self.merging.repeatable_rounds(now, slots, credit, True) if self.macro_rounds else 1
                return self._finish_plan(now, slots, credit, rounds, self._opt_alloc)
            order = self._order(slots, now)
            run, credit, order_free = self.opt.plan(order)
            rounds = self.merging.repeatable_rounds(now, run, credit, order_free, order) if self.macro_rounds else 1
            return self._finish_plan(now, run, credit, rounds, self._opt_alloc)
        if order_free:                   # every job runs at its class's share: no order, no placement
            stage = self.compiled or self.stage
            if stage is not None:
                stage.reset()
            credit = self.credit_free[slots]
            alloc = tuple((self._class_count @ self._k_alloc[:, int(self._fair)]).tolist())
            if self.policy.ordering.uses_speedup:
                self.speedup_now[slots] = self.speedup[slots]
            rounds = self.merging.repeatable_rounds(now, slots, credit, True) if self.macro_rounds else 1
            return self._finish_plan(now, slots, credit, rounds, alloc)
        demoted: list[int] = []
        order = None
        fast = self.merging.fair_set_round(slots, now) if self._fair else None
        if fast is not None:
            return fast
        if self._fair and not (self.policy.placement and self._k_penalized):
            order = self._order(slots, now)
            run = self._gpu_fill(order)                       # fair shares fit wherever the GPUs do
            fair_run = np.ones(len(run), bool)
            spread = np.zeros(len(run), bool)
        else:
            order = self._order(slots, now)
            run, fair_run, demoted = self._place_round(order)
            self._placed = True
            spread = self._spread(run)
        code = self.cls[run]
        credit = self._k_credit[code, fair_run + 2 * spread]
        alloc = self._allocation(code, fair_run)
        if self.policy.ordering.uses_speedup:
            self.speedup_now[slots] = self.speedup[slots]
            if len(demoted):
                self.speedup_now[demoted] = 1.0
        rounds = self.merging.repeatable_rounds(now, run, credit, order_free, order) if self.macro_rounds else 1
        return self._finish_plan(now, run, credit, rounds, alloc)

    def _refresh_class_arrays(self) -> None:
        if getattr(self, "_k_count", -1) != len(self._c_share):
            self._k_count = len(self._c_share)
            self._k_credit = np.array(self._c_credit, float).reshape(-1, 4)
            self._k_share = np.array(self._c_share, float).reshape(-1, 3)
            self._k_adjust = np.array(self._c_adjust, bool)
            self._k_gpus = np.array([r.gpus for r in self._c_res], np.int64)
            self._k_best = self.opt.best_points() if self.policy.mechanism == "opt" else None
            self._k_grid = np.array([g.ravel() for g in self._c_grid], float).reshape(
                -1, len(CPU_LEVELS) * len(MEM_LEVELS))
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
        if self.compiled is not None:
            return self.compiled.spread(run)
        where = self.pool.where
        return np.array([len(where[s]) > 1 for s in run.tolist()], bool)

    def _allocation(self, code: np.ndarray, fair_run: np.ndarray) -> tuple[float, ...]:
        """GPUs, CPUs and GB allocated, and CPUs and GB used (allocation capped at the demand)."""
        fair_share = fair_run & self._k_adjust[code] if not self._fair else np.ones(len(code), bool)
        return tuple(self._k_alloc[code, fair_share.astype(np.intp)].sum(axis=0).tolist())

    def _finish_plan(self, now: float, run: np.ndarray, credit: np.ndarray, rounds: int, alloc) -> RoundPlan:
        end = now + rounds * self.round_s
        plan = RoundPlan(now, run, np.zeros(len(run), np.int64), steps=np.minimum(credit * rounds, self.remaining[run]),
                         end=end, rounds=rounds, round_steps=credit)
        fresh = run[np.isnan(self.start_time[run])]
        self.start_time[fresh] = now
        self.busy_gpu_s += float(self.escale[run].sum()) * rounds * self.round_s
        self.stats.add(now, rounds, self.round_s, alloc)
        self._last_end = end
        return plan

    def _new_stages(self) -> None:
        """The resumable placement stage: compiled for first-fit placement, else in Python (`+place`)."""
        mech = self.policy.mechanism
        self.stage = self.compiled = None
        if mech != "opt" and not self.policy.placement and kernels.ENABLED:
            self.compiled = CompiledPlacement(self.pool, mech)
        elif mech != "opt":
            self.stage = PlacementStage(self.pool, mech, self.policy.placement, self._c_share, self._c_adjust)

    def _place_round(self, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int] | np.ndarray]:
        """Steps 2-3 for fair, greedy and tune: place in order while GPUs remain (resumable, see mechanism);
        returns the placed slots in placement order, whether each has the fair share, and the demoted slots."""
        jobs = order
        if not self.policy.ordering.all_jobs:
            jobs = self._gpu_fill(order)
            if self.policy.mechanism == "tune":      # LAS+tune packs larger GPU demands first (stable)
                jobs = jobs[np.argsort(-self.escale[jobs], kind="stable")]
        if self.compiled is not None:
            return self.compiled.run(jobs, self.escale, self.cls, self.job_of_slot, self._k_share, self._k_adjust)
        status = self.stage.run(jobs, self.escale, self.cls, self.job_of_slot)
        run = np.fromiter(status.keys(), np.int64, len(status))
        return run, np.fromiter(status.values(), np.int64, len(status)) == FAIR, self.stage.demoted

    # ---- progress ------------------------------------------------------------------------------------
    def credit_plan(self, plan: RoundPlan) -> np.ndarray:
        """Credit a finished plan; returns the slots of the jobs that completed."""
        entry = plan.entry
        self.remaining[entry] -= plan.steps
        self.attained[entry] += plan.end - plan.now
        self.last_run[entry] = plan.end
        return entry[self.remaining[entry] <= 0]

    def account(self, slot: int) -> tuple[float, float, float, dict[str, float]]:
        """(start time, iterations done, cost, GPU-seconds per type) of the job in `slot`."""
        seconds = float(self.attained[slot] * self.escale[slot])
        price = self.cluster.price(self.gpu_type)
        return (float(self.start_time[slot]), float(self.total[slot] - self.remaining[slot]),
                seconds / 3600.0 * price, {self.gpu_type: seconds} if seconds else {})
