"""The planner's oracle profile of a job: its batch size and isolated duration in every epoch
(docs/rules.md#profile). Its sum is T_iso, the denominator of finish-time fairness rho."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetsched.errors import SpecError
from hetsched.model.jobs import AdaptationMode, Job
from hetsched.model.throughputs import ThroughputTable
from hetsched.rates.adaptation.schedules import (DATASET_SIZE, accordion_pattern, gns_pattern, iterations_per_epoch,
                                                 job_type_of, model_and_batch)


MAX_EPOCHS = 20_000_000      # ~1 GB of per-epoch arrays; openb's longest pod is 1.4 million epochs


@dataclass(frozen=True)
class EpochProfile:
    """Per-epoch batch size and isolated seconds of one job (at its own scale factor, on one GPU type)."""

    model: str
    scale_factor: int
    batch_sizes: np.ndarray        # (E,) int
    durations: np.ndarray          # (E,) seconds: (N / bs) / steps_per_s, no ceiling on N / bs

    @property
    def epochs(self) -> int:
        return len(self.batch_sizes)

    @property
    def isolated_s(self) -> float:
        return float(self.durations.sum())


def profile_gpu_type(table: ThroughputTable) -> str:
    """The GPU type profiles are measured on: the artifact's V100 where the table has it."""
    return "v100" if "v100" in table.gpu_types else table.gpu_types[-1]


def epoch_profile(job: Job, table: ThroughputTable, gpu_type: str = "v100") -> EpochProfile | None:
    """The oracle profile of `job`, or None for job types that cannot adapt (no batch size / unknown model)."""
    try:
        model, bs0 = model_and_batch(job.job_type)
    except Exception:
        return None
    if model not in DATASET_SIZE:
        return None
    epochs = max(1, math.ceil(job.total_steps / iterations_per_epoch(model, bs0)))
    if epochs > MAX_EPOCHS:
        raise SpecError(f"job {job.job_id}: {job.total_steps:.4g} steps of {job.job_type} are {epochs:,} epochs; "
                        f"the planner keeps a profile entry per epoch (docs/rules.md#profile), at most "
                        f"{MAX_EPOCHS:,} a job")
    if job.mode is AdaptationMode.ACCORDION:
        bs = np.array(accordion_pattern(model, bs0, epochs), np.int64)
    elif job.mode is AdaptationMode.GNS:
        bs = np.array(gns_pattern(model, bs0, epochs, job.scale_factor), np.int64)
    else:
        bs = np.full(epochs, bs0, np.int64)
    sizes, code = np.unique(bs, return_inverse=True)
    rate = np.array([table.get(job_type_of(model, int(b)), job.scale_factor, gpu_type) for b in sizes])
    if not (rate > 0).all():
        raise SpecError(f"job {job.job_id}: {job.job_type} has no throughput on {gpu_type} at a batch size of its "
                        f"profile ({sizes[rate <= 0].tolist()}); the planner profiles jobs on {gpu_type}")
    per_bs = DATASET_SIZE[model] / sizes[code] / rate[code]     # the same two divisions per epoch as one at a time
    return EpochProfile(model, job.scale_factor, bs, per_bs)
