"""A run's settings: the mechanism's round rules and the rates' options (the registry turns them into stages)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral
from typing import Mapping

from hetsched.errors import HetschedError


@dataclass(frozen=True)
class SimulationConfig:
    """Mechanism parameters of a run."""

    round_s: float | None = None              # None: the policy family's round (Gavel 360 s, Synergy 300 s)
    min_reset_interval_s: float = 1920.0
    seed: int = 0
    window: tuple[int, int] | None = None     # job ids [start, end); None = every job
    ideal: bool = False
    placement_aware: bool = False
    record_timeline: bool = True
    max_rounds: int = 10_000_000
    # Throughput estimation for space sharing (docs/rules.md#estimates): (number of reference job types,
    # profiling fraction).
    estimate_colocation: tuple[int, float] | None = None
    # Stop (SimulationError) once this many jobs are active: the queue only grows, i.e. the rate is saturated.
    max_active_jobs: int | None = None
    # CPU/memory-aware policies: the CPU:GPU ratio of the sensitivity profiles (3-6); None = from the cluster.
    profiles_ratio: int | None = None
    # Hierarchical policies: weight per entity (a job's `entity`); entities not listed weigh 1.
    entity_weights: Mapping[str, float] | None = None
    # Resource core: let one plan stand for several identical rounds (same JCTs, fewer steps).
    macro_rounds: bool = True
    # Resource core: rounds start at origin + k x round (Synergy's `--static` replays start at t = 1 s).
    round_origin_s: float = 0.0
    # Shockwave's round rules (docs/rules.md#preemption-penalty, docs/rules.md#replay-reset): a job that did not run
    # in the previous round loses this many seconds of a full micro-task; batch sizes adapt at runtime
    # (docs/rules.md#batch-size); Gavel's trace-replay rule (recompute at once when nothing runs and nothing will
    # arrive) is absent.
    preemption_penalty_s: float = 0.0
    # The runtime's cost of a new lease (docs/rules.md#lease-start, `hetsched calibrate`): an assignment that does
    # not continue the previous round's on the same GPUs starts this many seconds into its round. 0: off.
    lease_start_s: float = 0.0
    # The runtime's wall-clock rounds (docs/rules.md#fixed-rounds): every round lasts round_s on the grid
    # round_origin_s + k x round_s, also when its micro-tasks end sooner or nothing runs.
    fixed_rounds: bool = False
    # Shockwave's simulator completes an adaptive job once it has run 1.5 x its isolated duration (R14); the
    # runtime runs every step (R55), so a calibrated run turns this off.
    over_deadline: bool = True
    dynamic_adaptation: bool = False
    replay_reset: bool = True
    # Elastic rounds (docs/rules.md#time-scale): one second of the run's clock stands for this many seconds of the
    # applications' training (an emulated runtime's compressed time); 1: the applications' own time.
    time_scale: float = 1.0
    # When progress is credited (docs/rules.md#credit): "task" (each micro-task, Gavel and Shockwave), "round"
    # (every lease ends with the round, Synergy's server rounds); None: the decide stage's own (round for orderings).
    credit: str | None = None
    # The artifact whose round rules these are (`for_system` sets it): a policy named by string gets that
    # artifact's driver parameters with them (docs/rules.md#auto-rules), as `hetsched simulate --rules` gives.
    system: str | None = None

    def __post_init__(self):
        """Values no run can mean, refused where they enter: a window that no stream completes (reversed, empty
        or starting below 0) ran until the round budget, 10 million rounds by default."""
        bad = []
        if self.window is not None:
            if whole_numbers(self.window, 2) and 0 <= self.window[0] < self.window[1]:
                object.__setattr__(self, "window", (int(self.window[0]), int(self.window[1])))
            else:
                bad.append(f"window={self.window!r} (job ids (START, END) with 0 <= START < END)")
        if not (whole_numbers((self.max_rounds,), 1) and self.max_rounds >= 1):
            bad.append(f"max_rounds={self.max_rounds!r} (a whole number >= 1)")
        if self.max_active_jobs is not None and not (whole_numbers((self.max_active_jobs,), 1)
                                                     and self.max_active_jobs >= 1):
            bad.append(f"max_active_jobs={self.max_active_jobs!r} (None or a whole number >= 1)")
        if self.profiles_ratio is not None and not (whole_numbers((self.profiles_ratio,), 1)
                                                    and self.profiles_ratio >= 1):
            bad.append(f"profiles_ratio={self.profiles_ratio!r} (None or whole cores per GPU >= 1)")
        if not (isinstance(self.time_scale, (int, float)) and math.isfinite(self.time_scale) and self.time_scale > 0):
            bad.append(f"time_scale={self.time_scale!r} (a positive number)")
        if self.system is not None and self.system not in SYSTEM_RULES:
            bad.append(f"system={self.system!r} (None or one of {', '.join(SYSTEM_RULES)})")
        if bad:
            raise HetschedError(f"simulation config: {', '.join(bad)}")

    @classmethod
    def for_system(cls, system: str, **overrides) -> "SimulationConfig":
        """The round rules of an artifact: `gavel` (360 s), `synergy` (300 s) or `shockwave` (120 s)."""
        try:
            preset = SYSTEM_RULES[system]
        except KeyError:
            raise HetschedError(f"unknown system {system!r}; known: {', '.join(SYSTEM_RULES)}") from None
        return cls(**{**preset, "system": system, **overrides})


OWN_SYSTEM = {"allocation": "gavel", "ordering": "synergy", "planner": "shockwave"}   # whose decide stage it is


def auto_system(decide_kind: str, jobs=None) -> str | None:
    """The artifact rules a run gets when none are named (`hetsched simulate --rules auto`, `simulate()` without a
    config): Shockwave's for a job list with batch-size adaptation, which other rules refuse; else those of the
    artifact whose decide stage it is (docs/rules.md#auto-rules); none for an elastic system (its own rules)."""
    adaptive = isinstance(jobs, (list, tuple)) and any(j.mode.value != "static" for j in jobs)
    return "shockwave" if adaptive else OWN_SYSTEM.get(decide_kind)


def whole_numbers(values, length: int) -> bool:
    """`values` is a sequence of `length` integers (numpy's too; not bools, not floats such as 600.0)."""
    try:
        return len(values) == length and all(isinstance(v, Integral) and not isinstance(v, bool) for v in values)
    except TypeError:
        return False


SYSTEM_RULES: dict[str, dict] = {
    "gavel": {"round_s": 360.0, "min_reset_interval_s": 1920.0, "credit": "task"},
    "synergy": {"round_s": 300.0, "credit": "round"},
    "shockwave": {"round_s": 120.0, "min_reset_interval_s": 1000.0, "preemption_penalty_s": 20.0,
                  "dynamic_adaptation": True, "replay_reset": False, "credit": "task"},
}
