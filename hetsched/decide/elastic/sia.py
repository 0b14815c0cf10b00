"""Sia's decide stage (docs/rules.md#sia): every job's goodput on every configuration (nodes x GPUs of one type),
normalised per job, discounted for restarts, raised to the fairness power p, and one integer program that picks at
most one configuration per job within each type's GPUs. Solved with HiGHS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import highspy
from scipy import sparse
from scipy.sparse import csr_matrix

from hetsched.decide.elastic import goodput
from hetsched.decide.elastic.cluster import ElasticCluster
from hetsched.decide.elastic.jobs import ElasticJob

# Nodes of each type that were profiled: a configuration never spans more (docs/rules.md#sia).
PROFILED_NODES = {"t4": 16, "v100": 5, "a100_small": 2, "a100": 2, "quadro": 1, "rtx": 3}
ZERO_GAIN = 1e-4
MAX_REPLICAS = 64
A_CAP = 3000.0


def configurations(cluster: ElasticCluster) -> list[tuple[str, int, int]]:
    """(type, nodes, GPUs): powers of two within one node, then whole nodes, up to the profiled node count."""
    out = []
    for gpu_type, (nodes, per_node) in cluster.types.items():
        within = [g for g in (1 << k for k in range(per_node.bit_length())) if g <= per_node]
        if per_node not in within:
            within.append(per_node)
        out += [(gpu_type, 1, g) for g in within]
        out += [(gpu_type, k, k * per_node) for k in range(2, min(nodes, PROFILED_NODES.get(gpu_type, nodes)) + 1)]
    return out


@dataclass
class SiaPolicy:
    cluster: ElasticCluster
    p: float = -0.5
    lam: float = 1.1
    mip_gap: float = 1e-4
    time_limit: float = 60.0
    name: str = "sia"

    def __post_init__(self):
        self.configs = configurations(self.cluster)
        self.cfg_type = np.array([c[0] for c in self.configs])
        self.cfg_nodes = np.array([c[1] for c in self.configs])
        self.cfg_gpus = np.array([c[2] for c in self.configs])
        self.index = {(t, g): i for i, (t, _, g) in enumerate(self.configs)}
        types = list(self.cluster.types)
        rows = [[1 if c[0] == t else 0 for c in self.configs] for t in types]
        self.type_rows = np.array(rows) * self.cfg_gpus
        self.capacity = np.array([self.cluster.gpus(t) for t in types], dtype=float)
        self._cache: dict = {}
        self.type_cols = {t: np.flatnonzero(self.cfg_type == t) for t in self.cluster.types}
        self._min_local: dict = {}
        self._solver = None

    def min_local(self, app) -> np.ndarray:
        """Each configuration's smallest per-GPU batch for `app` (its type's), for the replica limit."""
        if app.name not in self._min_local:
            self._min_local[app.name] = np.array([app.types[t].min_local_bsz for t in self.cfg_type])
        return self._min_local[app.name]

    def goodput_row(self, job: ElasticJob) -> np.ndarray:
        """The job's estimated goodput on every configuration; ZERO_GAIN where it cannot run."""
        key = (job.version, tuple(sorted(job.max_profiled.items())))
        hit = self._cache.get(job.name)
        if hit is not None and hit[0] == key:
            return hit[1]
        app = job.app
        seen = max(job.max_profiled.values(), default=0)
        gpus = self.cfg_gpus
        if not job.params:                          # never run: one GPU of any type (docs/rules.md#bootstrap)
            row = np.where(gpus == 1, 1.0, 0.0)
        else:
            ref = max(job.params, key=lambda t: (len(job.profiles[t]), t))
            params = np.empty((7, len(self.configs)))
            nodes = self.cfg_nodes.copy()
            lo, hi, ratio = np.empty(len(gpus)), np.empty(len(gpus)), np.ones(len(gpus))
            for gpu_type, cols in self.type_cols.items():
                own = gpu_type in job.params
                source = gpu_type if own else ref      # bootstrapped from the one-GPU profile ratio
                profile = app.types[source]
                params[:, cols] = job.params[source][:, None]
                lo[cols], hi[cols] = profile.min_local_bsz, profile.max_local_bsz
                if not own:
                    per_node = self.cluster.types[ref][1] if ref in self.cluster.types else 1
                    nodes[cols] = -(-gpus[cols] // per_node)
                    ratio[cols] = app.types[gpu_type].one_gpu_rate / profile.one_gpu_rate
            row = goodput.best_goodput(params, *job.grad, app.init_batch_size, app.max_batch_size, nodes, gpus,
                                       (lo, hi))[0] * ratio
        max_r = np.minimum(max(2 * seen, 1), np.minimum(MAX_REPLICAS, app.max_batch_size // self.min_local(app)))
        row = np.where((gpus <= max_r) & (row > 0), row, 0.0)
        self._cache[job.name] = (key, row)
        return row

    def restart_factor(self, job: ElasticJob, now: float) -> float:
        age, penalty = now - job.submit_s, job.app.restart_penalty_s
        if age < penalty:
            return 1.0
        return max(age - (job.restarts or 0) * penalty, 0.0) / (age + penalty)

    def start_age(self, job: ElasticJob) -> float | None:
        """The age by which a job that holds no GPUs pays somewhere with nothing else running: its restart factor r
        rises with its age, and a configuration pays once r x its best normalised goodput exceeds lambda^(1/p)
        (R80); None if none ever will."""
        row = self.goodput_row(job)
        valid = row > 0
        if not valid.any():
            return None
        reach = self.lam ** (1.0 / self.p) / (row[valid].max() / row[valid].min())
        if reach >= 1.0:
            return None
        return job.app.restart_penalty_s * (reach + (job.restarts or 0)) / (1.0 - reach)

    def decide(self, jobs: list[ElasticJob], now: float) -> dict[str, tuple[str, int]]:
        """(GPU type, GPU count) per job that runs in the next round."""
        if not jobs:
            return {}
        n, m = len(jobs), len(self.configs)
        goodputs = np.empty((n, m))
        lower = np.zeros((n, m))
        held = np.full(n, -1)                   # each job's configuration now (-1: none): the solver's start
        for i, job in enumerate(jobs):
            row = self.goodput_row(job)
            valid = row > 0
            smallest = row[valid].min() if valid.any() else 1.0
            row = np.where(valid, row, ZERO_GAIN) / smallest
            current = self.index.get((job.alloc.gpu_type, job.alloc.gpus)) if job.alloc is not None else None
            factor = self.restart_factor(job, now)
            if factor != 1.0:
                keep = row[current] if current is not None else None
                row = row * factor
                if current is not None:
                    row[current] = keep
            goodputs[i] = row
            if current is not None:
                held[i] = current
            if current is not None and job.rescale_left > 0:    # restoring: keep its configuration
                lower[i, current] = 1.0
        picks = self.choose(goodputs, lower, held)
        return {job.name: (self.configs[k][0], int(self.configs[k][2])) for job, k in zip(jobs, picks) if k >= 0}

    def choose(self, goodputs: np.ndarray, pinned: np.ndarray, held: np.ndarray | None = None) -> np.ndarray:
        """The configuration index per job (-1: none) for a normalised goodput matrix (jobs x configurations),
        with `pinned` 1 where a job must keep its configuration; `held`, each job's configuration now (-1: none),
        is the solver's start."""
        weights = np.minimum(np.round(goodputs ** self.p, 2), A_CAP)
        cost = (weights - self.lam) if self.p < 0 else (self.lam - weights)
        x = self._solve(cost, pinned, held) > 0.5
        return np.where(x.any(axis=1), x.argmax(axis=1), -1)

    def _solve(self, cost: np.ndarray, lower: np.ndarray, held: np.ndarray | None = None) -> np.ndarray:
        """The integer program over the variables that can pay: a configuration whose cost is not negative never
        improves the objective and is left out unless pinned (the optimum is the same; docs/rules.md#sia)."""
        n, m = cost.shape
        keep = np.flatnonzero(((cost < 0) | (lower > 0)).ravel())
        x = np.zeros(n * m)
        if len(keep) == 0:
            return x.reshape(n, m)
        job_of, cfg_of = np.divmod(keep, m)
        k = len(keep)
        rows = sparse.vstack([csr_matrix((np.ones(k), (job_of, np.arange(k))), shape=(n, k)),
                              csr_matrix(self.type_rows[:, cfg_of])]).tocsc()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = k, rows.shape[0]
        lp.col_cost_ = cost.ravel()[keep]
        lp.col_lower_, lp.col_upper_ = lower.ravel()[keep], np.ones(k)
        lp.row_lower_ = np.zeros(rows.shape[0])
        lp.row_upper_ = np.concatenate([np.ones(n), self.capacity])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = rows.indptr, rows.indices, rows.data
        lp.integrality_ = [highspy.HighsVarType.kInteger] * k
        solver = self._highs()
        solver.passModel(lp)
        if held is not None:                    # the allocations that stand, where they can pay (R80)
            start = highspy.HighsSolution()
            start.col_value = (held[job_of] == cfg_of).astype(float).tolist()
            start.value_valid = True
            solver.setSolution(start)
        solver.run()
        if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"Sia's integer program: {solver.modelStatusToString(solver.getModelStatus())}")
        x[keep] = np.asarray(solver.getSolution().col_value)
        return x.reshape(n, m)

    def _highs(self):
        if self._solver is None:
            from hetsched.solvers import new_highs

            self._solver = new_highs()
            for option, value in (("mip_rel_gap", self.mip_gap), ("time_limit", self.time_limit), ("random_seed", 0),
                                  ("presolve", "off")):
                self._solver.setOptionValue(option, value)
        self._solver.clearModel()
        return self._solver
