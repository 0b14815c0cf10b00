"""What a round's plan holds (docs/architecture.md#stages): the rows chosen, their GPU types and, once placed, the GPUs
and per-job rates of each; a whole-round stage adds its iterations and end."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Assignment:
    """One combination placed for a round: its jobs, GPU type (column), GPU ids and per-job steps/s."""

    entry: int
    job_ids: tuple[int, ...]
    gpu_type: int
    gpus: tuple[int, ...]
    throughputs: tuple[float, ...]
    scale_factor: int
    extended: bool = False
    cpus: float = 0.0       # per GPU: CPU cores and GB of memory (CPU/memory-aware placement; 0 = no share)
    mem_gb: float = 0.0


@dataclass
class RoundPlan:
    """What to run next: chosen entries `entry[k]` on type column `gpu_type[k]` (and, placed, `assignments`)."""

    now: float
    entry: np.ndarray
    gpu_type: np.ndarray
    recomputed: bool = False
    assignments: list[Assignment] = field(default_factory=list)
    # Set by a whole-round stage (`RoundStage`; then `entry` holds slots): iterations per job this plan, the
    # lease end, and how many identical rounds the plan stands for.
    steps: np.ndarray | None = None
    end: float = 0.0
    rounds: int = 1
    round_steps: np.ndarray | None = None     # a whole-round stage's iterations per job in one full round
