"""Closed-form shares used as baselines and normalisers (docs/rules.md#proportional)."""

from __future__ import annotations

import numpy as np

from hetsched.compiled import round_kernels
from hetsched.decide.gavel.base import Allocation, Policy, PolicyView


def _proportional_row(view: PolicyView) -> np.ndarray:
    m = max(view.num_jobs, 1)
    share = view.capacity / m
    total = share.sum()
    return share / total if total > 0 else share


def proportional_fractions(view: PolicyView) -> np.ndarray:
    """`N_j / sum_k N_k` for every job: time spread over types in proportion to their GPU counts."""
    return np.broadcast_to(_proportional_row(view), (view.num_jobs, view.num_types))


def proportional_throughput(view: PolicyView) -> np.ndarray:
    """prop_i = sum_j T_ij x_prop_ij, summed in column order (fixes ECOS's last digits, docs/rules.md#proportional)."""
    if round_kernels.ENABLED and 0 < view.num_types < 8 and view.num_jobs:    # the same sums, compiled
        return round_kernels.proportional_rates(view.throughput, _proportional_row(view))
    return (view.throughput * _proportional_row(view)).sum(axis=1)


def isolated_fractions(view: PolicyView, throughput: np.ndarray | None = None) -> np.ndarray:
    """1/m of every GPU type, in time fractions of s GPUs, each row capped at 1."""
    m = max(view.num_jobs, 1)
    x = (view.capacity / m)[None, :] / view.scale_factor[:, None]
    return x / np.maximum(1.0, x.sum(axis=1))[:, None]


def isolated_throughput(view: PolicyView, throughput: np.ndarray | None = None) -> np.ndarray:
    t = view.throughput if throughput is None else throughput
    return (t * isolated_fractions(view)).sum(axis=1)


class Isolated(Policy):
    """Isolated: every job gets 1/m of each GPU type (no optimisation)."""

    heterogeneity_aware = False   # Gavel shuffles the type order for it (its name lacks Perf/Packing)

    def allocate(self, view: PolicyView) -> Allocation:
        return Allocation(view.job_ids, view.gpu_types, isolated_fractions(view))


class Proportional(Policy):
    """Proportional: every job spreads its time over types in proportion to their GPU counts."""

    heterogeneity_aware = False

    def allocate(self, view: PolicyView) -> Allocation:
        x = proportional_fractions(view).copy()
        # Scale down uniformly if the cluster cannot hold every job at that rate.
        used = view.scale_factor @ x
        over = np.max(np.divide(used, view.capacity, out=np.zeros_like(used), where=view.capacity > 0))
        return Allocation(view.job_ids, view.gpu_types, x / max(1.0, over))


class GandivaFair(Policy):
    """Gandiva-Fair as Shockwave evaluates it: an equal split, G/m of every GPU type per job, with no
    scale-factor normalisation (docs/rules.md#proportional); each row is capped at 1."""

    heterogeneity_aware = False

    def allocate(self, view: PolicyView) -> Allocation:
        m = max(view.num_jobs, 1)
        x = np.broadcast_to((view.capacity / m)[None, :], (view.num_jobs, view.num_types))
        return Allocation(view.job_ids, view.gpu_types, x / np.maximum(1.0, x.sum(axis=1))[:, None])
