"""Gavel's Philly-like job generator, draw for draw (docs/rules.md#gavel-stream)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Iterator

from hetsched.model.catalog import GAVEL_JOB_TEMPLATES
from hetsched.errors import SpecError
from hetsched.model.jobs import Job
from hetsched.model.throughputs import ThroughputTable, load_throughputs
from hetsched.traces.generators.base import register_generator

REFERENCE_GPU = "v100"  # durations are exclusive run times on s V100s


@register_generator("gavel")
@dataclass
class GavelGenerator:
    """Continuous (Poisson) or static (all at t=0) Gavel job stream.

    RNGs as in Gavel's scheduler: jobs `Random(seed+2)`, inter-arrivals `Random(seed+3)`,
    SLOs `Random(seed+6)`. The first job arrives at t=0.
    """

    seed: int = 0
    mean_interarrival_s: float = 0.0
    multi_gpu: bool = False
    multi_priority: bool = False
    slos: bool = False
    static: bool = False
    fixed_duration_s: float | None = None
    throughputs: ThroughputTable | str | None = None

    def __post_init__(self) -> None:
        if not self.static and not self.mean_interarrival_s > 0:
            raise SpecError("gavel generator: a continuous stream needs mean_interarrival_s > 0 (or static=True)")
        if self.fixed_duration_s is not None and not self.fixed_duration_s > 0:
            raise SpecError("gavel generator: fixed_duration_s must be positive")
        if not isinstance(self.throughputs, ThroughputTable):
            self.throughputs = load_throughputs(self.throughputs or "gavel_simulation")

    def __iter__(self) -> Iterator[Job]:
        job_rng = random.Random(self.seed + 2)
        arrival_rng = random.Random(self.seed + 3)
        slo_rng = random.Random(self.seed + 6)
        arrival = 0.0
        job_id = 0
        rates: dict[tuple[str, int], float] = {}     # the reference rate of each (job type, GPUs) drawn so far
        while True:
            yield self._job(job_id, arrival, job_rng, slo_rng, rates)
            job_id += 1
            if not self.static:
                arrival += -math.log(1.0 - arrival_rng.random()) * self.mean_interarrival_s

    def jobs(self, num_jobs: int) -> list[Job]:
        """The first `num_jobs` jobs of the stream."""
        if num_jobs < 0:
            raise SpecError("gavel generator: num_jobs must be >= 0")
        it = iter(self)
        return [next(it) for _ in range(num_jobs)]

    def _job(self, job_id: int, arrival: float, rng: random.Random, slo_rng: random.Random,
             rates: dict[tuple[str, int], float]) -> Job:
        r = rng.uniform(0, 1)  # drawn even for single-GPU streams to keep the stream aligned
        if 0.7 <= r <= 0.8:
            scale_factor = 2
        elif 0.8 < r <= 0.95:
            scale_factor = 4
        elif r >= 0.95:
            scale_factor = 8
        else:
            scale_factor = 1
        if rng.random() >= 0.8:
            duration = 60 * (10 ** rng.uniform(3, 4))
        else:
            duration = 60 * (10 ** rng.uniform(1.5, 3))
        if self.fixed_duration_s is not None:
            duration = self.fixed_duration_s
        if not self.multi_gpu:
            scale_factor = 1
        while True:
            template = rng.choice(GAVEL_JOB_TEMPLATES)
            if scale_factor == 1 or template.distributed:
                break
        throughput = rates.get((template.job_type, scale_factor))
        if throughput is None:
            throughput = rates[template.job_type, scale_factor] = self.throughputs.get(
                template.job_type, scale_factor, REFERENCE_GPU)
        priority = 1.0
        if self.multi_priority:
            priority = 5.0 if rng.uniform(0, 1) <= 0.2 else 1.0
        slo_factor = None
        if self.slos:
            u = slo_rng.uniform(0, 1)
            slo_factor = 1.2 if u < 0.33 else 2.0 if u < 0.67 else 10.0
        return Job(job_id=job_id, arrival_time_s=arrival, job_type=template.job_type, scale_factor=scale_factor,
                   total_steps=duration * throughput, priority_weight=priority, slo_factor=slo_factor,
                   duration_s=duration, command=template.command, working_directory=template.working_directory,
                   num_steps_arg=template.num_steps_arg, needs_data_dir=template.needs_data_dir)
