"""POP (Narayanan et al., SOSP'21): an allocation problem split into k smaller ones (docs/rules.md#pop).

Each job goes to one of k partitions by a hash of its id, so a job stays in its partition from one recompute to the
next; every partition gets 1/k of each GPU type and is solved alone by its own copy of the policy (a stateful
policy keeps each partition's state apart). The allocations are laid side by side: together they use at most the
cluster's GPUs, and space-sharing pairs form within a partition only. POP pays when a solve costs more than
linearly in the number of jobs; the price is the optimality gap. `benchmarks/pop.py` measures both on a run's own
views: our LPs already solve over classes of identical jobs, so there it did not pay (docs/rules.md#pop), and it
is off unless asked for.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from hetsched.errors import HetschedError
from hetsched.decide.gavel.base import Allocation, Policy, PolicyView

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)       # Fibonacci hashing: consecutive ids spread over the partitions


def partition_of(job_ids: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Each job's partition in [0, k): the top bits of a multiplicative hash of (id + seed)."""
    with np.errstate(over="ignore"):
        h = (np.asarray(job_ids, np.int64).astype(np.uint64) + np.uint64(seed)) * _GOLDEN
    return ((h >> np.uint64(32)) % np.uint64(k)).astype(np.int64)


def sub_view(view: PolicyView, idx: np.ndarray, share: float) -> PolicyView:
    """The jobs `idx` of `view` with `share` of every GPU type; job-type codes renumbered over the keys present."""
    code, colocated = view.type_code, view.colocated
    if code is not None:
        keys, code = np.unique(code[idx], return_inverse=True)
        code = code.ravel()
        if colocated is not None:
            colocated = colocated[np.ix_(keys, keys)]

    def take(a):
        return None if a is None else a[idx]

    return PolicyView(job_ids=view.job_ids[idx], gpu_types=view.gpu_types, capacity=view.capacity * share,
                      throughput=view.throughput[idx], scale_factor=view.scale_factor[idx],
                      priority_weight=view.priority_weight[idx], remaining_steps=view.remaining_steps[idx],
                      time_since_arrival=view.time_since_arrival[idx], type_code=code, colocated=colocated,
                      unconsolidated=take(view.unconsolidated), prices=view.prices, deadline_s=take(view.deadline_s),
                      entity=take(view.entity), entity_weight=view.entity_weight, now=view.now, copy=False)


class Partitioned(Policy):
    """POP around an allocation policy: `make()` builds one copy per partition."""

    def __init__(self, make: Callable[[], Policy], k: int, seed: int = 0):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise HetschedError(f"partitions must be a positive integer, got {k!r}")
        self.parts = [make() for _ in range(k)]
        inner = self.parts[0]
        if not inner.partitionable:
            raise HetschedError(f"policy {inner.name!r} cannot be partitioned: POP splits an allocation problem "
                                f"over jobs and GPUs (the LP policies: LAS, FTF, makespan, max-sum throughput)")
        self.k, self.seed = k, seed
        self.name, self.composed_place = inner.name, inner.composed_place
        self.packing, self.heterogeneity_aware = inner.packing, inner.heterogeneity_aware
        self.fills_idle_gpus, self.stateful, self.uses_entities = (inner.fills_idle_gpus, inner.stateful,
                                                                    inner.uses_entities)

    def allocate(self, view: PolicyView) -> Allocation:
        part = partition_of(view.job_ids, self.k, self.seed)
        x = np.zeros((view.num_jobs, view.num_types))
        pairs, x_pairs = [np.zeros((0, 2), np.intp)], [np.zeros((0, view.num_types))]
        for p, policy in enumerate(self.parts):
            idx = np.flatnonzero(part == p)
            if not len(idx):
                continue
            a = policy.allocate(sub_view(view, idx, 1.0 / self.k))
            x[idx] = a.x
            if len(a.pairs):
                pairs.append(idx[a.pairs])
                x_pairs.append(a.x_pairs)
        return Allocation(view.job_ids, view.gpu_types, x, np.concatenate(pairs), np.concatenate(x_pairs))

    def objective(self, view: PolicyView, allocation: Allocation) -> float:
        """The policy's own objective on the whole view; NaN for a stateful policy, whose state is per partition."""
        return float("nan") if self.stateful else self.parts[0].objective(view, allocation)

    def __repr__(self) -> str:
        return f"<policy {self.name}, POP k={self.k}>"
