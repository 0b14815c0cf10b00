"""The runtime's side of Synergy's server rounds (docs/rules.md#runtime-leases): servers join and leave, each
planned job gets GPU ids and a per-GPU CPU/memory share for its lease, and progress is credited as measured."""

from __future__ import annotations

import numpy as np

from hetsched.stages.plans import Assignment, RoundPlan
from hetsched.errors import HetschedError
from hetsched.place.pool import ServerPool
from hetsched.decide.synergy.stats import RoundStats


class ServerLeases:
    """Mixin of `ServerRounds` (its pool, classes, slots and last plan); first in its bases, so that these
    override `RoundStage`'s defaults."""

    def cluster_changed(self) -> None:
        """Servers joined or left (the runtime's workers): a new pool, and every job's class, demands and credits
        derived again on it (they depend on the per-server size). Time received and progress stay."""
        cluster = self.sched.cluster
        if len(cluster.gpu_types) != 1:
            raise HetschedError(f"{self.policy.name}: Synergy's mechanisms run on one GPU type; the servers have "
                                f"{list(cluster.gpu_types)}")
        self.cluster, self.gpu_type = cluster, cluster.gpu_types[0]
        self.pool = ServerPool(cluster.server_shapes(), cluster.gpu_ids())
        self.stats = RoundStats(self.pool.totals)
        self._scratch = None
        self._class.clear()
        for per_class in (self._c_share, self._c_adjust, self._c_credit, self._c_penalized, self._c_grid,
                          self._c_res):
            per_class.clear()                 # in place: the placement stage holds the share lists
        self._class_count = np.zeros(0, np.int64)
        self._measures.clear()
        self._k_count = -1
        self._new_stages()
        for job_id, s in self.slot.items():
            self._set_class(s, self.jobs[job_id])
        self._active = None

    def assign(self, plan: RoundPlan) -> None:
        """Give each planned job its GPUs (ids numbered server by server) and per-GPU CPU and memory share: the
        placement the mechanism made this round, or, where a shortcut skipped it, a first-fit packing at the
        share the job is credited with (docs/rules.md#runtime-leases). A job that packs nowhere is left out."""
        if self.policy.mechanism == "opt":
            raise HetschedError(f"{self.policy.name}: Synergy-OPT is an idealised bound (no server placement); "
                                f"it runs in the simulator only (use +tune, +fair or +greedy)")
        if not len(plan.entry):
            return                                      # no job to run: nothing to lease
        if not self._placed:
            pool = self._pack(plan.entry)
        elif self.compiled is not None:
            pool = self.compiled.export(self._scratch_pool())
        else:
            pool = self.pool
        pool.start_hand_out()
        column = self.sched.gpu_types.index(self.gpu_type)
        seconds = max(plan.end - plan.now, 1e-9)
        for s, steps in zip(plan.entry.tolist(), plan.steps.tolist()):
            if s not in pool.where:
                continue
            gpus = pool.hand_out(pool.where[s])
            c, m, _ = pool.share[s]
            plan.assignments.append(Assignment(s, (int(self.job_of_slot[s]),), column, gpus,
                                               (steps / seconds,), int(self.escale[s]), cpus=c, mem_gb=m))

    def _scratch_pool(self) -> ServerPool:
        if self._scratch is None:
            self._scratch = ServerPool(self.pool.servers, self.pool.ids)
        return self._scratch

    def _pack(self, run: np.ndarray) -> ServerPool:
        """First-fit in plan order on a scratch pool (the mechanism's own pool keeps its resumable state)."""
        pool = self._scratch_pool()
        pool.reset()
        fair = pool.fair
        for s in run.tolist():
            g = int(self.escale[s])
            share = self._c_share[int(self.cls[s])] if self._ideal_shares else fair
            for c, m, b in (share, fair):
                where = pool.first_fit(c, m, b, g)
                if where is not None:
                    pool.commit(s, where, c, m, b)
                    break
        return pool

    def credit_measured(self, slots: np.ndarray, steps: np.ndarray, seconds: np.ndarray) -> np.ndarray:
        """Credit iterations and time measured outside the stage (the runtime's leases) to the last plan's round;
        returns the slots of the jobs that completed."""
        self.remaining[slots] -= steps
        self.attained[slots] += seconds
        self.last_run[slots] = self._last_end
        return slots[self.remaining[slots] <= 0]

    def histories(self, credited: list[int]) -> list[tuple[int, dict]]:
        """The credited jobs' seconds run and end of their last run (the only jobs whose past moved)."""
        slot = self.slot
        return [(j, {"attained_s": float(self.attained[slot[j]]), "last_run_s": float(self.last_run[slot[j]])})
                for j in credited if j in slot]

    def restore(self, job_id: int, history: dict) -> None:
        s = self.slot[job_id]
        self.attained[s], self.last_run[s] = float(history["attained_s"]), float(history["last_run_s"])
