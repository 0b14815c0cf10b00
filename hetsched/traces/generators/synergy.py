"""Synergy's Philly-derived job stream, draw for draw (docs/rules.md#synergy-stream).

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

from hetsched.errors import SpecError
from hetsched.model.jobs import Job
from hetsched.model.profiles import TASKS, SensitivityTable, load_sensitivity
from hetsched.traces.generators.base import register_generator


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
        draws = _draws(self.seed, tuple(self.split), self.multi_gpu, self.table,
                       None if self.philly_gpus is None else tuple(self.philly_gpus))
        jph = self.jobs_per_hour
        arrival = 0
        job_id = 0
        while True:
            if job_id >= len(draws.u):
                draws.extend(job_id + 256)
            hours = -math.log(1.0 - draws.u[job_id]) / jph
            arrival += math.ceil(hours * 60 * 60)
            yield Job(job_id=job_id, arrival_time_s=float(arrival), job_type=draws.model[job_id],
                      scale_factor=draws.gpus[job_id], total_steps=draws.iterations[job_id],
                      duration_s=draws.duration[job_id])
            job_id += 1

    def jobs(self, num_jobs: int) -> list[Job]:
        """The first `num_jobs` jobs of the stream."""
        if num_jobs < 0:
            raise SpecError("synergy generator: num_jobs must be >= 0")
        it = iter(self)
        return [next(it) for _ in range(num_jobs)]


class _Draws:
    """The rate-independent part of a stream, drawn in the artifact's order: per job the uniform behind its
    Poisson gap, its model, iterations, duration and GPU count. The gaps scale with the rate; nothing else does,
    so a sweep over rates draws once per process."""

    def __init__(self, seed: int, split: tuple, multi_gpu: bool, table: SensitivityTable,
                 philly_gpus: tuple[int, ...] | None):
        self.split = ClassSplit(split, table)
        self.table = table
        self.arrival_rng = random.Random(seed)
        self.synthetic = multi_gpu and philly_gpus is None
        self.duration_rng = self.arrival_rng if self.synthetic else random.Random(seed)
        self.multi_gpu = multi_gpu
        self.philly_gpus = philly_gpus
        self.num_models = len(table.models)
        self.drawn: list[float] = []
        self.u: list[float] = []
        self.model: list[str] = []
        self.iterations: list[int] = []
        self.duration: list[float] = []
        self.gpus: list[int] = []

    def extend(self, n: int) -> None:
        rng, records = self.arrival_rng, None if self.philly_gpus is None else len(self.philly_gpus)
        while len(self.u) < n:
            job_id = len(self.u)
            self.u.append(rng.random())
            gpus = 1
            if self.synthetic:
                duration = gavel_like_duration(rng)
                gpus = synthetic_gpu_demand(rng)
            else:
                k = job_id if records is None else job_id % records
                while len(self.drawn) <= k:          # the parse draws one duration per record, in record order
                    self.drawn.append(gavel_like_duration(self.duration_rng))
                duration = self.drawn[k]
                if self.multi_gpu:
                    gpus = int(self.philly_gpus[k])
            rng.randint(0, self.num_models - 1)       # the artifact's discarded class draw
            model = self.split.next()
            self.model.append(model)
            self.iterations.append(int(duration / self.table[model].iteration_time_s))
            self.duration.append(duration)
            self.gpus.append(gpus)


_DRAWS: dict[tuple, _Draws] = {}


def _draws(seed: int, split: tuple, multi_gpu: bool, table: SensitivityTable, philly_gpus) -> _Draws:
    key = (seed, split, multi_gpu, id(table), table.name, philly_gpus)
    if key not in _DRAWS:
        if len(_DRAWS) >= 32:
            _DRAWS.clear()
        _DRAWS[key] = _Draws(seed, split, multi_gpu, table, philly_gpus)
    return _DRAWS[key]
