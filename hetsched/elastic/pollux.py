"""Pollux's decide stage as Sia's artifact runs it (docs/rules.md#pollux): heterogeneity-unaware. The cluster is
virtual nodes of 4 GPUs, each job has one goodput model over every type it ran on, and a genetic search (NSGA-II,
100 states, 100 generations a round, seeded with the previous round's states) maximises the power mean (p = -1)
of the jobs' speedups over their fair share, restarts discounted. A job whose GPUs land on several types keeps the
type holding most of them. Seeded: the artifact sets no seed, so its runs vary; ours vary with `seed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hetsched.core.jit import compiled
from hetsched.elastic import goodput
from hetsched.elastic.cluster import ElasticCluster
from hetsched.elastic.jobs import Allocation, ElasticJob
from hetsched.elastic.sia import PROFILED_NODES

VNODE_GPUS = 4
MAX_NODES = 16
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

    # --- the search -----------------------------------------------------------------------------------------------
    def decide(self, jobs: list[ElasticJob], now: float) -> dict[str, Allocation]:
        if not jobs:
            self._population = None
            return {}
        J, V = len(jobs), len(self.vnodes)
        fair = int(np.ceil(self.cluster.total_gpus / J))
        tables = np.stack([self.table(j, fair) for j in jobs])
        max_r = np.array([np.flatnonzero(t.any(axis=0)).max(initial=0) for t in tables])
        base = self._current(jobs)
        factor = np.array([_restart_factor(j, now) for j in jobs])
        repair = _Repair(max_r, self.vnode_cap, self.rng)
        pop = self._seed_population(jobs, base)
        pop = repair(pop)
        objs = self._evaluate(pop, tables, base, factor)
        for _ in range(self.generations):
            rank, crowd = _rank_crowding(objs)
            a, b = _tournament(rank, crowd, self.pop_size // 2, self.rng)
            kids = _mutate(_crossover(pop[a], pop[b], self.rng), base, self.rng)
            kids = repair(kids)
            kids = _unique_new(kids, pop)
            if len(kids) == 0:
                continue
            pop = np.concatenate([pop, kids])
            objs = np.concatenate([objs, self._evaluate(kids, tables, base, factor)])
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

    def _evaluate(self, states, tables, base, factor):
        """(-utility, GPUs used / GPUs) per state: utility is the power mean of the speedups."""
        nodes = np.count_nonzero(states, axis=2)
        reps = states.sum(axis=2)
        J = states.shape[1]
        speed = tables[np.arange(J)[None, :], nodes, np.minimum(reps, tables.shape[2] - 1)]
        moved = (states != base[None]).any(axis=2) & (base.sum(axis=1) > 0)[None, :]   # a running job restarts
        speed = np.maximum(np.where(moved, speed * factor[None, :], speed), MIN_SPEEDUP)
        util = np.mean(speed ** self.p, axis=1) ** (1 / self.p)
        return np.column_stack([-util, reps.sum(axis=1) / self.cluster.total_gpus])

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


class _Repair:
    """Make states feasible: at most 4 GPUs of a job and of all jobs on a virtual node, a job's replica limit,
    at most 16 nodes a job, at most one distributed job on a node."""

    def __init__(self, max_r, caps, rng):
        self.max_r, self.caps, self.rng = max_r, caps, rng

    def __call__(self, s: np.ndarray) -> np.ndarray:
        s = np.clip(s, 0, self.caps[None, None, :])
        before = np.cumsum(s, axis=2) - s                          # a job's GPUs on earlier nodes
        s = np.minimum(s, np.maximum(self.max_r[None, :, None] - before, 0))
        s = np.where(np.cumsum(s > 0, axis=2) > MAX_NODES, 0, s)
        order = self.rng.permutation(s.shape[1])
        s = s[:, order]
        spread = (np.count_nonzero(s, axis=2) > 1)[:, :, None] & (s > 0)
        first = np.cumsum(spread, axis=1) > 1                      # a second distributed job on the node
        s = np.where(first, 0, s)
        taken = np.cumsum(s, axis=1) - s                           # earlier jobs' GPUs on the node
        s = np.minimum(s, np.maximum(self.caps[None, None, :] - taken, 0))
        out = np.empty_like(s)
        out[:, order] = s
        return out


def _crossover(a, b, rng):
    J = a.shape[1]
    if J < 2:
        return np.concatenate([a, b])
    cut = rng.integers(1, J, size=len(a))[:, None, None]
    rows = np.arange(J)[None, :, None]
    return np.concatenate([np.where(rows < cut, a, b), np.where(rows < cut, b, a)])


def _mutate(s, base, rng):
    s = s.copy()
    J, V = base.shape
    reset = rng.random((len(s), J)) < 1.0 / J
    s = np.where(reset[:, :, None], base[None], s)
    s = np.where(rng.random(s.shape) < 1.0 / (J * V), 0, s)
    return s + (rng.random(s.shape) < 1.0 / (J * V))


def _unique_new(kids, pop):
    """The children that are neither in the population nor repeats of an earlier child."""
    seen = {row.tobytes() for row in pop.reshape(len(pop), -1)}
    keep = []
    for i, row in enumerate(kids.reshape(len(kids), -1)):
        key = row.tobytes()
        if key not in seen:
            seen.add(key)
            keep.append(i)
    return kids[keep]


@compiled
def _rank_crowding(objs):
    """NSGA-II's non-dominated rank (0 = the Pareto front) and crowding distance of every state."""
    n, m = objs.shape
    count = np.zeros(n, dtype=np.int64)                            # how many states dominate each
    beats = np.zeros((n, n), dtype=np.bool_)
    for i in range(n):
        for j in range(n):
            no_worse, better = True, False
            for k in range(m):
                if objs[i, k] > objs[j, k]:
                    no_worse = False
                    break
                if objs[i, k] < objs[j, k]:
                    better = True
            if no_worse and better:
                beats[i, j] = True
                count[j] += 1
    rank = np.full(n, -1, dtype=np.int64)
    level, left = 0, n
    while left > 0:
        front = np.flatnonzero((count == 0) & (rank < 0))
        for i in front:
            rank[i] = level
        left -= len(front)
        for i in front:
            for j in range(n):
                if beats[i, j]:
                    count[j] -= 1
        level += 1
    crowd = np.zeros(n)
    for lv in range(level):
        members = np.flatnonzero(rank == lv)
        if len(members) <= 2:
            crowd[members] = np.inf
            continue
        for k in range(m):
            order = members[np.argsort(objs[members, k], kind="mergesort")]
            span = objs[order[-1], k] - objs[order[0], k]
            crowd[order[0]] = np.inf
            crowd[order[-1]] = np.inf
            if span > 0:
                for t in range(1, len(order) - 1):
                    crowd[order[t]] += (objs[order[t + 1], k] - objs[order[t - 1], k]) / span
    return rank, crowd


def _tournament(rank, crowd, n, rng):
    pick = rng.integers(len(rank), size=(2 * n, 2))
    a, b = pick[:, 0], pick[:, 1]
    win = np.where((rank[a] < rank[b]) | ((rank[a] == rank[b]) & (crowd[a] >= crowd[b])), a, b)
    return win[:n], win[n:]


def _survivors(objs, size):
    rank, crowd = _rank_crowding(objs)
    order = np.lexsort((-crowd, rank))
    return order[:size]
