"""Synergy's Philly-derived job stream, draw for draw (spec/synergy.md s.3.2 and s.7).

Durations are Gavel-like draws (20 % `60*10^U(3,4)` s, else `60*10^U(1.5,3)` s at the fair share), made by
the artifact while it parses the Philly trace after `seed(42)`: job i takes the i-th draw. The run then
re-seeds and draws, per job, a Poisson gap (`ceil` to whole seconds) and a discarded class number; the model
comes from the class split (the task furthest below its target share, round-robin inside the task) and
the iteration count is `int(duration / iteration time at the fair share)`.

With `multi_gpu`, GPU counts come from a Philly `cluster_job_log` when one is given (as the artifact's
`--multigpu`); without one, the stream is the artifact's synthetic workload (one RNG: gap, duration, GPU count
1/2/4/8 w.p. .70/.10/.15/.05, class number), because the public trace is not available here.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from ...errors import SpecError
from ...jobs import Job
from ...resources.profiles import TASKS, SensitivityTable, load_sensitivity
from . import register_generator


def gavel_like_duration(rng: random.Random) -> float:
    """Seconds at the fair share: 20 % long (10^3-10^4 min), 80 % short (10^1.5-10^3 min)."""
    if rng.random() >= 0.8:
        return 60 * (10 ** rng.uniform(3, 4))
    return 60 * (10 ** rng.uniform(1.5, 3))


def poisson_gap_s(rng: random.Random, jobs_per_hour: float) -> int:
    hours = -math.log(1.0 - rng.random()) / jobs_per_hour
    return math.ceil(hours * 60 * 60)


def synthetic_gpu_demand(rng: random.Random) -> int:
    r = rng.uniform(0, 1)
    if r >= 0.95:
        return 8
    if 0.8 <= r < 0.95:
        return 4
    if 0.7 <= r < 0.8:
        return 2
    return 1


class ClassSplit:
    """Synergy's OVERALL model assignment: the task furthest below its target share, round-robin inside it."""

    def __init__(self, split: Sequence[float], table: SensitivityTable):
        if len(split) != 3 or any(s < 0 for s in split) or sum(split) <= 0:
            raise SpecError(f"class split must be three non-negative percentages (image:language:speech), "
                            f"got {tuple(split)}")
        self.percent = tuple(split)
        self.models = [table.models_of(t) for t in TASKS]
        for task, models in zip(TASKS, self.models):
            if not models:
                raise SpecError(f"class split: the sensitivity table has no {task} model")
        self.count = [0, 0, 0]
        self.next_model = [0, 0, 0]

    def next(self) -> str:
        total = sum(self.count)
        if total > 0:
            priority = [p / 100 - c / total for p, c in zip(self.percent, self.count)]
        else:
            priority = [0.0, 0.0, 0.0]
        task = max(range(3), key=lambda t: (priority[t], -t))        # ties: image, language, speech
        models = self.models[task]
        model = models[self.next_model[task] % len(models)]
        self.next_model[task] += 1
        self.count[task] += 1
        return model


@register_generator("synergy")
@dataclass
class SynergyGenerator:
    """Synergy's job stream at `jobs_per_hour` (Poisson), seed 42 by default, class split image:language:speech."""

    seed: int = 42
    jobs_per_hour: float = 9.0
    split: tuple[float, float, float] = (20, 70, 10)
    multi_gpu: bool = False
    ratio: int = 3                                      # CPU:GPU ratio of the profiles (iteration times)
    philly_gpus: Sequence[int] | None = None            # per-record GPU counts of a parsed cluster_job_log
    table: SensitivityTable | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.jobs_per_hour, (int, float)) and self.jobs_per_hour > 0):
            raise SpecError(f"synergy generator: jobs_per_hour must be positive, got {self.jobs_per_hour!r}")
        if self.table is None:
            self.table = load_sensitivity(self.ratio)
        if self.philly_gpus is not None and not len(self.philly_gpus):
            raise SpecError("synergy generator: the Philly trace has no usable job")

    def __iter__(self) -> Iterator[Job]:
        split = ClassSplit(self.split, self.table)
        arrival_rng = random.Random(self.seed)
        synthetic = self.multi_gpu and self.philly_gpus is None
        duration_rng = arrival_rng if synthetic else random.Random(self.seed)
        records = len(self.philly_gpus) if self.philly_gpus is not None else None
        drawn: list[float] = []
        arrival = 0
        job_id = 0
        while True:
            arrival += poisson_gap_s(arrival_rng, self.jobs_per_hour)
            gpus = 1
            if synthetic:
                duration = gavel_like_duration(arrival_rng)
                gpus = synthetic_gpu_demand(arrival_rng)
            else:
                k = job_id if records is None else job_id % records
                while len(drawn) <= k:        # the parse draws one duration per record, in record order
                    drawn.append(gavel_like_duration(duration_rng))
                duration = drawn[k]
                if self.multi_gpu:
                    gpus = int(self.philly_gpus[k])
            arrival_rng.randint(0, len(self.table.models) - 1)    # the artifact's discarded class draw
            model = split.next()
            iterations = int(duration / self.table[model].iteration_time_s)
            yield Job(job_id=job_id, arrival_time_s=float(arrival), job_type=model, scale_factor=gpus,
                      total_steps=iterations, duration_s=duration)
            job_id += 1

    def jobs(self, num_jobs: int) -> list[Job]:
        """The first `num_jobs` jobs of the stream."""
        if num_jobs < 0:
            raise SpecError("synergy generator: num_jobs must be >= 0")
        it = iter(self)
        return [next(it) for _ in range(num_jobs)]
