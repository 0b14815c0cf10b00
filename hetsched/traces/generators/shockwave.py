"""Shockwave's dynamic-adaptation trace generator, draw for draw (docs/rules.md#shockwave-stream).

One RNG per quantity, seeded from `seed`: job types `Random(seed)`, inter-arrivals `Random(seed + 1)`, duration
classes `Random(seed + 2)`, scale factors `Random(seed + 3)`, modes `Random(seed + 4)`, and numpy's global RNG
seeded with `seed` for the duration within a class (the artifact's `generate_pollux_duration`). The first job
arrives at 0 and arrivals are the floor of the running sum of exponential gaps. With these, the five shipped
traces come back job for job from their names (`ShockwaveGenerator.from_name`). The artifact's generator crashes
unless patched (it pops from a lambda when `--pollux-duration` is absent); fixing that changes no stream, so
there is no compatibility switch. Commands are hetsched's workloads, not the artifact's scripts.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from hetsched.model.catalog import GAVEL_JOB_TEMPLATES
from hetsched.errors import SpecError
from hetsched.model.jobs import AdaptationMode, Job
from hetsched.model.throughputs import ThroughputTable, load_throughputs
from hetsched.traces.generators.base import register_generator

#: Shockwave's job table: Gavel's templates without ResNet-18 bs16, ResNet-50 bs128, Transformer bs256, A3C and
#: CycleGAN, in Gavel's order (docs/rules.md#catalogues).
_DROPPED = {"ResNet-18 (batch size 16)", "ResNet-50 (batch size 128)", "Transformer (batch size 256)", "A3C",
            "CycleGAN"}
SHOCKWAVE_TEMPLATES = tuple(t for t in GAVEL_JOB_TEMPLATES if t.job_type not in _DROPPED)
DURATION_CLASSES = ((0.0, 0.2, 0.72), (0.2, 0.5, 0.20), (0.5, 0.9, 0.05), (0.9, 1.0, 0.03))   # grid slice, p
SCALE_FACTORS = (1, 2, 4, 8)
ACCORDION_MIN_S = 1000           # shorter accordion jobs are demoted to static

_NAME = re.compile(r"^(?P<n>\d+)_(?P<a>[\d.]+)_(?P<b>[\d.]+)_(?P<k>\d+)_(?P<lam>[\d.]+)_(?P<seed>\d+)_"
                   r"(?P<modes>[\d.,]+)_(?P<sfs>[\d.,]+)(?P<multi>_multigpu)?(?P<dyn>_dynamic)?$")


def _pick(r: float, weights) -> int:
    """Index of the first cumulative weight above r."""
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if r < acc:
            return i
    return len(weights) - 1


@register_generator("shockwave")
@dataclass
class ShockwaveGenerator:
    """Shockwave's generator (`scripts/utils/generate_trace.py` with its one-line fix,
    docs/rules.md#shockwave-stream)."""

    seed: int = 0
    mean_interarrival_s: float = 40.0
    min_duration_h: float = 0.2
    max_duration_h: float = 5.0
    num_durations: int = 100
    mode_mix: tuple[float, float, float] = (0.0, 0.5, 0.5)            # P(static), P(accordion), P(gns)
    scale_factor_mix: tuple[float, ...] = (0.6, 0.3, 0.09, 0.01)     # P(1), P(2), P(4), P(8) GPUs
    multi_gpu: bool = True
    dynamic: bool = True
    throughputs: ThroughputTable | str | None = None

    def __post_init__(self) -> None:
        if not self.mean_interarrival_s >= 0:
            raise SpecError("shockwave generator: mean_interarrival_s must be >= 0")
        if not 0 < self.min_duration_h <= self.max_duration_h or self.num_durations < 1:
            raise SpecError("shockwave generator: need 0 < min_duration_h <= max_duration_h and num_durations >= 1")
        for name, mix, size in (("mode_mix", self.mode_mix, 3), ("scale_factor_mix", self.scale_factor_mix, 4)):
            if len(mix) != size or any(p < 0 for p in mix) or not math.isclose(sum(mix), 1.0, abs_tol=1e-6):
                raise SpecError(f"shockwave generator: {name} needs {size} probabilities summing to 1, got {mix}")
        if not isinstance(self.throughputs, ThroughputTable):
            self.throughputs = load_throughputs(self.throughputs or "shockwave_tacc")

    @classmethod
    def from_name(cls, name: str | Path, throughputs: ThroughputTable | str | None = None) -> "ShockwaveGenerator":
        """The generator of a trace named like the artifact's (`120_0.2_5_100_40_25_0,0.5,0.5_..._dynamic.trace`)."""
        stem = Path(name).name.removesuffix(".trace")
        m = _NAME.match(stem)
        if m is None:
            raise SpecError(f"{name}: not a Shockwave trace name "
                            "(NUMJOBS_MINH_MAXH_NUMDUR_LAM_SEED_MODEMIX_SFMIX[_multigpu][_dynamic])")
        return cls(seed=int(m["seed"]), mean_interarrival_s=float(m["lam"]), min_duration_h=float(m["a"]),
                   max_duration_h=float(m["b"]), num_durations=int(m["k"]),
                   mode_mix=tuple(float(v) for v in m["modes"].split(",")),
                   scale_factor_mix=tuple(float(v) for v in m["sfs"].split(",")),
                   multi_gpu=bool(m["multi"]), dynamic=bool(m["dyn"]), throughputs=throughputs)

    def __iter__(self) -> Iterator[Job]:
        job_rng, gap_rng = random.Random(self.seed), random.Random(self.seed + 1)
        class_rng = random.Random(self.seed + 2)
        sf_rng, mode_rng = random.Random(self.seed + 3), random.Random(self.seed + 4)
        pick_rng = np.random.RandomState(self.seed)           # the artifact's np.random.seed(seed)
        grid = np.linspace(self.min_duration_h, self.max_duration_h, self.num_durations)
        n = len(grid)
        slices = [(int(a * n), int(b * n)) for a, b, _ in DURATION_CLASSES]
        weights = [p for _, _, p in DURATION_CLASSES]
        elapsed = 0.0
        job_id = 0
        while True:
            template = job_rng.choice(SHOCKWAVE_TEMPLATES)
            scale_factor = 1
            if self.multi_gpu and template.distributed:
                scale_factor = SCALE_FACTORS[_pick(sf_rng.random(), self.scale_factor_mix)]
            lo, hi = slices[_pick(class_rng.random(), weights)]
            duration = round(3600 * float(pick_rng.choice(grid[lo:hi])))
            mode = AdaptationMode.STATIC
            if self.dynamic:
                mode = (AdaptationMode.STATIC, AdaptationMode.ACCORDION, AdaptationMode.GNS)[
                    _pick(mode_rng.random(), self.mode_mix)]
                if mode is AdaptationMode.ACCORDION and duration < ACCORDION_MIN_S:
                    mode = AdaptationMode.STATIC
            if job_id > 0:
                elapsed += -math.log(1.0 - gap_rng.random()) * self.mean_interarrival_s
            rate = self.throughputs.get(template.job_type, scale_factor, "v100")
            yield Job(job_id=job_id, arrival_time_s=float(math.floor(elapsed)), job_type=template.job_type,
                      scale_factor=scale_factor, total_steps=float(int(duration * rate)), duration_s=float(duration),
                      mode=mode, command=template.command, working_directory=template.working_directory,
                      num_steps_arg=template.num_steps_arg, needs_data_dir=template.needs_data_dir)
            job_id += 1

    def jobs(self, num_jobs: int) -> list[Job]:
        if num_jobs < 0:
            raise SpecError("shockwave generator: num_jobs must be >= 0")
        it = iter(self)
        return [next(it) for _ in range(num_jobs)]
