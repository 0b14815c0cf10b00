"""Pollux's decide stage as Sia's artifact runs it (docs/rules.md#pollux): heterogeneity-unaware. The cluster is
virtual nodes of 4 GPUs, each job has one goodput model over every type it ran on, and a genetic search (NSGA-II,
100 states, 100 generations a round, seeded with the previous round's states) maximises the power mean (p = -1)
of the jobs' speedups over their fair share, restarts discounted. A job whose GPUs land on several types keeps the
type holding most of them. Seeded: the artifact sets no seed, so its runs vary; ours vary with `seed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hetsched.decide.elastic import goodput
from hetsched.decide.elastic.cluster import ElasticCluster
from hetsched.decide.elastic.jobs import Allocation, ElasticJob
from hetsched.decide.elastic.pollux_kernels import MAX_NODES, fitness, new_rows, rank_crowding, repair
from hetsched.decide.elastic.sia import PROFILED_NODES

VNODE_GPUS = 4
RESTART_S = 30.0
MIN_SPEEDUP = 1e-2      # a job without GPUs: the power mean stays defined and still ranks states (docs/rules.md#pollux)
# A job spread over types keeps the type holding most of its GPUs; ties in this order (the artifact's).
TYPE_RANK = {"a100": 0, "v100": 1, "quadro": 2, "rtx": 3, "t4": 4}


@dataclass
class PolluxPolicy:
    cluster: ElasticCluster
    seed: int = 0
    p: float = -1.0
    pop_size: int = 100
    generations: int = 100
    name: str = "pollux"
    unaware: bool = True                            # its jobs keep one goodput model over every type
    _tables: dict = field(default_factory=dict)
    _population: dict | None = None

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)
        vnodes = []                                 # (type, physical node, first GPU offset)
        for gpu_type, (nodes, per_node) in self.cluster.types.items():
            for node in range(nodes):
                vnodes += [(gpu_type, node) for _ in range(max(per_node // VNODE_GPUS, 1))]
        self.vnodes = vnodes
        self.vnode_type = np.array([t for t, _ in vnodes])
        self.vnode_cap = np.array([min(VNODE_GPUS, self.cluster.types[t][1]) for t, _ in vnodes])
        self._index = {vn: [k for k, other in enumerate(vnodes) if other == vn] for vn in set(vnodes)}
        caps = [min(n, PROFILED_NODES.get(t, n)) * g for t, (n, g) in self.cluster.types.items()]
        self.max_gpus = min(min(caps), MAX_NODES * VNODE_GPUS)

    # --- the speedup model -------------------------------------------------------------------------------------
    def table(self, job: ElasticJob, fair: int) -> np.ndarray:
        """Speedup over the fair share (`fair` GPUs on one node) for every (nodes, replicas), 0 where invalid."""
        key = (job.version, fair, tuple(sorted(job.max_profiled.items())))
        hit = self._tables.get(job.name)
        if hit is not None and hit[0] == key:
            return hit[1]
        v = len(self.vnodes)
        out = np.zeros((v + 1, self.max_gpus + 1))
        seen = max(job.max_profiled.values(), default=0)
        app = job.app
        lo = max(p.min_local_bsz for t, p in app.types.items() if t in self.cluster.types)
        hi = min(p.max_local_bsz for t, p in app.types.items() if t in self.cluster.types)
        max_r = min(max(2 * seen, 1), 64, app.max_batch_size // lo, self.max_gpus)
        nodes, reps = np.meshgrid(np.arange(1, min(v, MAX_NODES) + 1), np.arange(1, max_r + 1), indexing="ij")
        ok = (reps >= nodes) & (reps <= nodes * VNODE_GPUS)
        nodes, reps = nodes[ok], reps[ok]
        params = job.params.get("*")
        if params is None:                          # no model yet: linear speedup (docs/rules.md#pollux)
            out[nodes, reps] = reps / fair
        else:
            good = goodput.best_goodput(params, *job.grad, app.init_batch_size, app.max_batch_size,
                                        np.append(nodes, 1), np.append(reps, fair), (lo, hi))[0]
            out[nodes, reps] = good[:-1] / good[-1] if good[-1] > 0 else 0.0
        self._tables[job.name] = (key, out)
        return out

    def start_age(self, job: ElasticJob) -> float | None:
        """A job the search leaves out with nothing else running does not start by waiting alone."""
        return None

    # --- the search -----------------------------------------------------------------------------------------------
    def decide(self, jobs: list[ElasticJob], now: float) -> dict[str, Allocation]:
        if not jobs:
            self._population = None
            return {}
        J = len(jobs)
        fair = int(np.ceil(self.cluster.total_gpus / J))
        tables = np.stack([self.table(j, fair) for j in jobs])
        max_r = np.array([np.flatnonzero(t.any(axis=0)).max(initial=0) for t in tables])
        base = self._current(jobs)
        factor = np.array([_restart_factor(j, now) for j in jobs])
        fit = (tables, base, factor, self.p, MIN_SPEEDUP, float(self.cluster.total_gpus))
        pop = repair(self._seed_population(jobs, base), max_r, self.vnode_cap, self.rng.permutation(J))
        objs = fitness(pop, *fit)
        for _ in range(self.generations):
            rank, crowd = rank_crowding(objs)
            a, b = _tournament(rank, crowd, self.pop_size // 2, self.rng)
            kids = _mutate(_crossover(pop[a], pop[b], self.rng), base, self.rng)
            kids = repair(kids, max_r, self.vnode_cap, self.rng.permutation(J))
            kids = kids[new_rows(kids.reshape(len(kids), -1), pop.reshape(len(pop), -1))]
            if len(kids) == 0:
                continue
            pop = np.concatenate([pop, kids])
            objs = np.concatenate([objs, fitness(kids, *fit)])
            keep = _survivors(objs, self.pop_size)
            pop, objs = pop[keep], objs[keep]
        self._population = {"names": [j.name for j in jobs], "states": pop}
        best = pop[np.argmin(objs[:, 0])]
        return self._allocations(jobs, best)

    def _current(self, jobs) -> np.ndarray:
        """The jobs' allocations as a state: each physical node's GPUs on its virtual nodes with room left."""
        base = np.zeros((len(jobs), len(self.vnodes)), dtype=np.int64)
        room = self.vnode_cap.copy()
        for i, job in enumerate(jobs):
            if job.alloc is None:
                continue
            for node, count in job.alloc.nodes:
                for k in self._index[(job.alloc.gpu_type, node)]:
                    take = min(count, room[k])
                    base[i, k] += take
                    room[k] -= take
                    count -= take
        return base

    def _seed_population(self, jobs, base):
        """The previous round's states (rows matched by job; new jobs at none), the current allocation, and
        mutations of it up to the population's size."""
        states = [base]
        if self._population is not None:
            old = {n: i for i, n in enumerate(self._population["names"])}
            rows = [old.get(j.name, -1) for j in jobs]
            prev = self._population["states"]
            carried = np.zeros((len(prev), *base.shape), dtype=np.int64)
            for i, r in enumerate(rows):
                if r >= 0:
                    carried[:, i] = prev[:, r]
            states += list(carried)
        pop = np.stack(states)
        while len(pop) < self.pop_size:
            pop = np.concatenate([pop, _mutate(pop[self.rng.integers(len(pop), size=self.pop_size - len(pop))],
                                               base, self.rng)])
        return pop[: self.pop_size]

    def _allocations(self, jobs, state) -> dict[str, Allocation]:
        out = {}
        for i, job in enumerate(jobs):
            cols = np.flatnonzero(state[i])
            if len(cols) == 0:
                continue
            per_type: dict[str, int] = {}
            for k in cols:
                per_type[self.vnode_type[k]] = per_type.get(self.vnode_type[k], 0) + int(state[i, k])
            keep = min(per_type, key=lambda t: (-per_type[t], TYPE_RANK.get(t, 99), t))
            nodes: dict[int, int] = {}
            for k in cols:
                t, node = self.vnodes[k]
                if t == keep:
                    nodes[node] = nodes.get(node, 0) + int(state[i, k])
            out[job.name] = Allocation(keep, tuple(sorted(nodes.items())))
        return out


def _restart_factor(job: ElasticJob, now: float) -> float:
    age = now - job.submit_s
    return max(age - (job.restarts or 0) * RESTART_S, 0.0) / (age + RESTART_S) if age > 0 else 0.0


def _crossover(a, b, rng):
    J = a.shape[1]
    if J < 2:
        return np.concatenate([a, b])
    cut = rng.integers(1, J, size=len(a))[:, None, None]
    rows = np.arange(J)[None, :, None]
    return np.concatenate([np.where(rows < cut, a, b), np.where(rows < cut, b, a)])


def _mutate(s, base, rng):
    """A job's row back to its current allocation (probability 1/jobs); entries zeroed and entries incremented
    (each with probability 1/entries a state: as many as a binomial draw says, at uniform positions)."""
    s = s.copy()
    K, J, V = s.shape
    which, job = np.nonzero(rng.random((K, J)) < 1.0 / J)
    s[which, job] = base[job]
    flat = s.reshape(-1)
    flat[rng.integers(flat.size, size=rng.binomial(flat.size, 1.0 / (J * V)))] = 0
    np.add.at(flat, rng.integers(flat.size, size=rng.binomial(flat.size, 1.0 / (J * V))), 1)
    return s


def _tournament(rank, crowd, n, rng):
    pick = rng.integers(len(rank), size=(2 * n, 2))
    a, b = pick[:, 0], pick[:, 1]
    win = np.where((rank[a] < rank[b]) | ((rank[a] == rank[b]) & (crowd[a] >= crowd[b])), a, b)
    return win[:n], win[n:]


def _survivors(objs, size):
    rank, crowd = rank_crowding(objs)
    order = np.lexsort((-crowd, rank))
    return order[:size]
