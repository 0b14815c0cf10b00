"""An elastic job (docs/rules.md#elastic-jobs): its GPU type, GPU count and batch size may change between rounds,
each change paying the application's checkpoint-restore delay. Its true progress comes from the measured traces;
what it has run is the profile its own goodput model is fitted to, one model per GPU type.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np

from hetsched.decide.elastic import goodput
from hetsched.decide.elastic.apps import Application

ADAPTIVE, SCALE_GPUS, RIGID = "adaptive", "scale-gpus", "rigid"
CATEGORIES = (ADAPTIVE, SCALE_GPUS, RIGID)


@dataclass
class Allocation:
    """Where a job runs: a GPU type and the GPUs it holds on each node of that type (node index -> count)."""

    gpu_type: str
    nodes: tuple[tuple[int, int], ...]

    @property
    def gpus(self) -> int:
        return sum(c for _, c in self.nodes)

    @property
    def placement(self) -> tuple[int, ...]:
        return tuple(c for _, c in self.nodes)


@dataclass
class ElasticJob:
    name: str
    app: Application
    submit_s: float
    target_replicas: int          # the trace's tuned GPU count (TunedJobs) and, for rigid jobs, the count it runs
    target_batch: int             # the trace's tuned total batch size
    category: str = ADAPTIVE
    unaware: bool = False         # one goodput model over every GPU type (Pollux), else one per type (Sia)
    alloc: Allocation | None = None
    atomic_bsz: int = 0
    accum_steps: int = 0
    epoch: int = 0
    progress: float = 0.0
    rescale_left: float = 0.0
    restarts: int | None = None   # None until first placed; the first placement is a start, not a restart
    completion_s: float | None = None
    gpu_seconds: float = 0.0      # GPUs held x time, restore time included
    grad: tuple[float, float] = (0.0, 0.0)
    profiles: dict = field(default_factory=dict)       # gpu type -> {(nodes, replicas, atomic): (step, sync)}
    params: dict = field(default_factory=dict)         # gpu type -> fitted throughput parameters
    max_profiled: dict = field(default_factory=dict)   # gpu type -> most replicas run there
    version: int = 0              # bumped when the model or the gradient statistics change
    _batch_key: tuple = ()

    @property
    def fixed_batch(self) -> int | None:
        return None if self.category == ADAPTIVE else self.target_batch

    def step(self, seconds: float, now: float) -> None:
        """Run `seconds` from `now` under the current allocation: restore first, then progress epoch by epoch."""
        if self.alloc is None or self.completion_s is not None:
            return
        gpus = self.alloc.gpus
        self.gpu_seconds += seconds * gpus
        delay = min(self.rescale_left, seconds)
        self.rescale_left -= delay
        now += delay
        seconds -= delay
        app, profile = self.app, self.app.types[self.alloc.gpu_type]
        placement = self.alloc.placement
        while seconds > 0 and self.completion_s is None:
            replicas = gpus
            batch = replicas * self.atomic_bsz * (self.accum_steps + 1)
            step_s, sync_s = profile.step_time(placement, self.atomic_bsz)
            grad_sqr, grad_var = app.grad_stats(batch, self.epoch)
            scale = batch / app.init_batch_size
            gain = (grad_var + grad_sqr) / (grad_var / scale + grad_sqr)
            self._observe(len(placement), replicas, step_s, sync_s, (grad_sqr, grad_var))
            rate = gain / (step_s + (step_s - sync_s) * self.accum_steps) * app.calibration
            target = app.progress_at(self.epoch + 1)
            if self.progress + rate * seconds < target:
                self.progress += rate * seconds
                seconds = 0.0
            else:        # an epoch ends inside the interval, on a whole second (docs/rules.md#elastic-jobs)
                delta = round((target - self.progress) / rate)
                self.epoch += 1
                self.progress = target
                now += delta
                seconds -= delta
                if self.epoch >= app.max_epochs:
                    self.completion_s = now
                    return
            self.choose_batch()                     # re-optimised with what this interval taught the model

    def run_measured(self, seconds: float, done_fraction: float) -> None:
        """A round on the runtime (docs/rules.md#elastic-runtime): the job ran `seconds` under its allocation and has
        done `done_fraction` of its steps, as its processes reported. Its restore is over once it has run; its epoch
        follows the measured progress; its model learns the traces' step time for its placement (a GPU type on
        the runtime is a label), and its batch is chosen again with what it learnt. Its restore is what is left of
        the application's after the seconds it has held its GPUs (the artifact's pin while restoring, R80)."""
        if self.alloc is None or seconds <= 0:
            return
        self.gpu_seconds += seconds * self.alloc.gpus
        self.rescale_left = max(self.rescale_left - seconds, 0.0)
        app, placement = self.app, self.alloc.placement
        self.epoch = min(app.max_epochs - 1, int(min(max(done_fraction, 0.0), 1.0) * app.max_epochs))
        step_s, sync_s = app.types[self.alloc.gpu_type].step_time(placement, self.atomic_bsz)
        self._observe(len(placement), self.alloc.gpus, step_s, sync_s, app.grad_stats(self.batch_size, self.epoch))
        self.choose_batch()

    def twin(self) -> "ElasticJob":
        """A copy that can run on (the emulated truth of a round) without teaching this job's model."""
        twin = copy.copy(self)
        twin.profiles = {t: dict(seen) for t, seen in self.profiles.items()}
        twin.params, twin.max_profiled = dict(self.params), dict(self.max_profiled)
        return twin

    @property
    def batch_size(self) -> int:
        """The total batch of the current allocation (0 when suspended)."""
        return self.alloc.gpus * self.atomic_bsz * (self.accum_steps + 1) if self.alloc is not None else 0

    def _observe(self, nodes: int, replicas: int, step_s: float, sync_s: float, grad) -> None:
        if grad != self.grad:
            self.grad = grad
            self.version += 1
        gpu_type = self.model_key
        seen = self.profiles.setdefault(gpu_type, {})
        key = (nodes, replicas, self.atomic_bsz)
        if key in seen:
            return
        seen[key] = (step_s, sync_s)
        self.max_profiled[gpu_type] = max(self.max_profiled.get(gpu_type, 0), replicas)
        rows = np.array([(*k, *v) for k, v in seen.items()])
        self.params[gpu_type] = goodput.fit_params(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3], rows[:, 4])
        self.version += 1

    @property
    def model_key(self) -> str:
        """The model the current allocation teaches: its type's, or the one shared model ('*')."""
        return "*" if self.unaware else self.alloc.gpu_type

    def choose_batch(self) -> None:
        """The atomic batch and accumulation steps on the current allocation: the fixed batch if the job has one,
        else the best goodput of its model on this GPU type, else the smallest batch the GPUs take."""
        app, profile = self.app, self.app.types[self.alloc.gpu_type]
        nodes, replicas = len(self.alloc.nodes), self.alloc.gpus
        params = self.params.get(self.model_key)
        batch = self.fixed_batch
        if batch is None and params is None:
            batch = max(app.init_batch_size, profile.min_local_bsz * replicas)
        if batch is None:
            key = (self.version, self.alloc.gpu_type, nodes, replicas)
            if key == self._batch_key:              # nothing the choice reads has changed
                return
            self._batch_key = key
            _, atomic, steps = goodput.best_goodput(params, *self.grad, app.init_batch_size, app.max_batch_size,
                                                    nodes, replicas, (profile.min_local_bsz, profile.max_local_bsz))
            self.atomic_bsz, self.accum_steps = int(atomic[0]), int(steps[0])
        else:
            local = math.ceil(batch / replicas - 1e-8)
            atomic, steps = goodput.split_batch(local, replicas, profile.max_local_bsz, app.init_batch_size)
            self.atomic_bsz, self.accum_steps = int(atomic), int(steps)
        self.atomic_bsz = min(self.atomic_bsz, int(app.max_batch_size / (replicas * (self.accum_steps + 1))))

    def reallocate(self, alloc: Allocation | None) -> None:
        """Move to `alloc` (None: suspend), paying the checkpoint-restore delay on every start and move."""
        self.alloc = alloc
        self._batch_key = ()
        if alloc is None:
            self.atomic_bsz = 0
            return
        self.choose_batch()
        self.rescale_left = self.app.rescale_s
        self.restarts = 0 if self.restarts is None else self.restarts + 1
