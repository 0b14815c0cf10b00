"""The job model shared by Gavel, Shockwave and Synergy."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from enum import Enum

from hetsched.model.catalog import split_job_type
from hetsched.errors import SpecError


class AdaptationMode(str, Enum):
    """Shockwave's dynamic batch-size adaptation modes."""

    STATIC = "static"
    ACCORDION = "accordion"
    GNS = "gns"


@dataclass(frozen=True, slots=True)
class Job:
    """One training job as the schedulers see it.

    `total_steps` is a float when generated (duration x throughput) and integral when read from a trace.
    `slo_factor` is Gavel's SLO: the job must finish within `slo_factor x duration_s` of its arrival.
    `cpu_demand`/`mem_demand_gb` are a job's own CPU cores and GB, kept from a trace; no placement reads them (demands
    come from the job type's profile, docs/rules.md#profiles), so runs that place CPU and memory refuse jobs that set
    them.
    `entity` is the user, team or virtual cluster that hierarchical policies share among (None = no entity);
    `user` and `vc` keep a production trace's own fields. `pinned_gpu_types` is a `|`-separated list of the
    GPU types the job may run on (empty = any), as production traces record GPU-model constraints; the core
    gives the job zero throughput elsewhere, also in space-sharing pairs (docs/rules.md#pins).
    """

    job_id: int
    arrival_time_s: float
    job_type: str
    scale_factor: int
    total_steps: float
    priority_weight: float = 1.0
    slo_factor: float | None = None
    duration_s: float | None = None
    mode: AdaptationMode = AdaptationMode.STATIC
    cpu_demand: float | None = None
    mem_demand_gb: float | None = None
    entity: str | None = None
    user: str = ""
    vc: str = ""
    pinned_gpu_types: str = ""
    command: str = ""
    working_directory: str = ""
    num_steps_arg: str = ""
    needs_data_dir: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.job_id, bool) or not isinstance(self.job_id, int) or self.job_id < 0:
            raise SpecError(f"job: job_id must be a non-negative integer, got {self.job_id!r}")
        where = f"job {self.job_id}"
        if not isinstance(self.job_type, str) or not self.job_type.strip():
            raise SpecError(f"{where}: job_type must be a non-empty string")
        if isinstance(self.scale_factor, bool) or not isinstance(self.scale_factor, int) or self.scale_factor < 1:
            raise SpecError(f"{where}: scale_factor must be a positive integer, got {self.scale_factor!r}")
        _check_number(where, "arrival_time_s", self.arrival_time_s, minimum=0.0)
        _check_number(where, "total_steps", self.total_steps, minimum=0.0)
        _check_number(where, "priority_weight", self.priority_weight, minimum=0.0, strict=True)
        for name in ("slo_factor", "duration_s", "cpu_demand", "mem_demand_gb"):
            value = getattr(self, name)
            if value is not None:
                _check_number(where, name, value, minimum=0.0)
        if not isinstance(self.mode, AdaptationMode):
            try:
                object.__setattr__(self, "mode", AdaptationMode(self.mode))
            except ValueError:
                raise SpecError(f"{where}: mode must be one of static/accordion/gns, got {self.mode!r}") from None

    @property
    def allowed_gpu_types(self) -> tuple[str, ...]:
        """The pinned GPU types as a tuple (empty = any type)."""
        return tuple(t for t in self.pinned_gpu_types.split("|") if t)

    @property
    def model(self) -> str:
        """Model name without the batch size, e.g. `ResNet-50`."""
        return split_job_type(self.job_type)[0]

    @property
    def batch_size(self) -> int | None:
        return split_job_type(self.job_type)[1]

    @property
    def deadline_s(self) -> float | None:
        """Absolute SLO deadline (seconds since t=0), when both an SLO and a duration are known."""
        if self.slo_factor is None or self.duration_s is None:
            return None
        return self.slo_factor * self.duration_s + self.arrival_time_s

    @property
    def key(self) -> tuple[str, int]:
        """The throughput-table key `(job_type, scale_factor)`."""
        return (self.job_type, self.scale_factor)

    def with_(self, **changes) -> "Job":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


JOB_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Job))


def _check_number(where: str, name: str, value, *, minimum: float, strict: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
        raise SpecError(f"{where}: {name} must be a finite number, got {value!r}")
    if value < minimum or (strict and value == minimum):
        bound = f"> {minimum}" if strict else f">= {minimum}"
        raise SpecError(f"{where}: {name} must be {bound}, got {value!r}")
