"""Synergy's job orderings (docs/rules.md#decide): FIFO, SRTF, LAS, FTF, DRF and Tetris.

An ordering ranks the runnable jobs each round; a resource mechanism (fair, greedy, tune, opt) then places
them in that order. Keys are computed over numpy arrays of the runnable jobs and ranked with one stable
lexsort; ties fall back to the arrival time, then the job id. A `ResourcePolicy` pairs an ordering with a
mechanism under Synergy's names (`FIFO+tune`, `SRTF+fair`, `LAS+opt`, `DRF`, `TETRIS+tune+place`, ...).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from hetsched.errors import HetschedError
from hetsched.decide.gavel.base import FOLDED, ORDERING_WORDS, Policy

MECHANISMS = ("greedy", "fair", "tune", "opt")


class OrderingView:
    """What an ordering sees of the runnable jobs, as arrays aligned with `slots` (computed on first use).

    `slots` come in arrival order (ties by job id), so a stable sort on a key breaks ties by arrival, then id.
    """

    def __init__(self, core, slots: np.ndarray, now: float):
        self._core, self.slots, self.now = core, slots, now
        self.totals: tuple[float, float, float] = core.pool.totals
        self.fair: bool = core._fair           # GPU-proportional mechanism: durations without speedup

    def _take(self, name: str) -> np.ndarray:
        value = getattr(self._core, name)[self.slots]
        setattr(self, name, value)
        return value

    def __getattr__(self, name: str) -> np.ndarray:
        aliases = {"gpus": "escale", "cpus": "cpu_demand", "mem": "mem_demand", "iteration_time": "iter_time",
                   "attained_s": "attained", "speedup": "speedup_now"}
        if name.startswith("_"):
            raise AttributeError(name)
        if name == "executed":
            value = self.total - self.remaining
            self.executed = value
            return value
        return self._take(aliases.get(name, name))

    def remaining_s(self) -> np.ndarray:
        """Remaining time at the fair share, or at the current speedup unless GPU-proportional."""
        rem = self.iteration_time * self.remaining
        return rem if self.fair else rem / self.speedup


class Ordering:
    """A job order. `static`: keys do not change while jobs run (FIFO, DRF), so a round can repeat."""

    name: ClassVar[str] = "ordering"
    static: ClassVar[bool] = False
    # Keys move by a fixed amount per repeated round (remaining time, attained service, time in system), so
    # identical rounds can be merged up to the first swap; False (a step-shaped key) merges no dynamic round.
    linear: ClassVar[bool] = True
    all_jobs: ClassVar[bool] = True      # place every runnable job in order (False: only the GPU-count fill)
    uses_speedup: ClassVar[bool] = False # the key reads last round's speedup (remaining time)

    def key(self, v: OrderingView) -> np.ndarray:
        raise NotImplementedError

    def rank(self, v: OrderingView) -> np.ndarray:
        """Positions of the runnable jobs in placement order (the guard's priority first, then the key)."""
        key = self.key(v)
        priority = v.priority
        if priority.any():
            return np.lexsort((key, -priority))
        return np.argsort(key, kind="stable")


class FIFO(Ordering):
    """First in, first out (the key is the arrival time only; docs/rules.md#starvation-guard)."""

    name = "FIFO"
    static = True

    def key(self, v):
        return v.arrival

    def rank(self, v):
        return np.arange(len(v.slots))            # the slots already come in arrival order


class SRTF(Ordering):
    """Shortest remaining time first (remaining time at the current speedup unless GPU-proportional)."""

    name = "SRTF"
    uses_speedup = True

    def key(self, v):
        return v.remaining_s()


class LAS(Ordering):
    """Least attained service (GPU-seconds); only the jobs that fit by GPU count are placed."""

    name = "LAS"
    all_jobs = False

    def key(self, v):
        return v.attained_s * v.gpus.astype(float)


class FTF(Ordering):
    """Finish-time fairness (Themis-like): (time in system + remaining) / ideal duration at the fair share."""

    name = "FTF"
    uses_speedup = True

    def key(self, v):
        return (v.now - v.arrival + v.remaining_s()) / (v.iteration_time * v.total)


class DRF(Ordering):
    """Dominant resource fairness over GPUs, CPUs and memory (ideal demands)."""

    name = "DRF"
    static = True

    def key(self, v):
        g, c, m = v.totals
        return np.maximum(np.maximum(v.gpus.astype(float) / g, v.cpus / c), v.mem / m)


class Tetris(Ordering):
    """Tetris: remaining time times the demand normalised by the cluster size, summed over resources."""

    name = "TETRIS"
    uses_speedup = True

    def key(self, v):
        g, c, m = v.totals
        d = v.remaining_s()
        return (v.gpus.astype(float) / g) * d + (v.cpus / c) * d + (v.mem / m) * d


ORDERINGS: dict[str, type[Ordering]] = {o.name: o for o in (FIFO, SRTF, LAS, FTF, DRF, Tetris)}
ORDERING_WORDS.update(ORDERINGS)


def register_ordering(cls: type[Ordering]) -> type[Ordering]:
    """Class decorator: make an ordering available by its upper-case `name`, with every mechanism
    (`NAME+tune`, `NAME+fair`, ...); docs/architecture.md#new-ordering shows one."""
    if not cls.name.isupper() or "+" in cls.name:
        raise HetschedError(f"ordering name {cls.name!r}: upper case, without '+'")
    if cls.name.casefold() in FOLDED:
        raise HetschedError(f"ordering name {cls.name!r} is already a policy's name (names are case-insensitive)")
    ORDERINGS[cls.name] = cls
    ORDERING_WORDS.add(cls.name)
    return cls


class ResourcePolicy(Policy):
    """An ordering with a CPU/memory-aware mechanism; runs on the resource core, not through `allocate`."""

    heterogeneity_aware = False

    def __init__(self, ordering: str = "FIFO", mechanism: str = "tune", placement: bool = False,
                 opt_artifact_budget: bool = False):
        if ordering.upper() not in ORDERINGS:
            raise HetschedError(f"unknown ordering {ordering!r}; known: {', '.join(ORDERINGS)}")
        if mechanism not in MECHANISMS:
            raise HetschedError(f"unknown mechanism {mechanism!r}; known: {', '.join(MECHANISMS)}")
        self.ordering = ORDERINGS[ordering.upper()]()
        self.mechanism = mechanism
        self.placement = placement
        # The artifact's LAS/FTF/DRF/TETRIS build Synergy-OPT with the per-server GPU count as CPU and memory
        # budget (docs/rules.md#opt); True reproduces that (it makes the program infeasible). Off by default.
        self.opt_artifact_budget = opt_artifact_budget

    def allocate(self, view):
        raise HetschedError(f"{self.name} orders jobs and places CPU/memory per server: it runs on the resource "
                            f"core (hetsched.place), not as a time-fraction allocation")


def parse_resource_policy(name: str, **params) -> ResourcePolicy | None:
    """`FIFO+tune`, `SRTF+fair`, `LAS+opt`, `DRF` (greedy; `DRF+greedy` too), `TETRIS+tune+place`, ...; None if
    not such a name."""
    parts = [p.strip() for p in name.split("+")]
    if parts[0].upper() not in ORDERINGS or not all(parts):
        return None
    mods = [p.lower() for p in parts[1:]]
    unknown = [m for m in mods if m not in (*MECHANISMS, "place")]
    mechs = [m for m in mods if m in MECHANISMS]
    if unknown or len(mechs) > 1 or len(set(mods)) != len(mods):
        raise HetschedError(f"policy {name!r}: expected ORDERING[+fair|+tune|+opt|+greedy][+place] with ORDERING "
                            f"one of {', '.join(ORDERINGS)}")
    policy = ResourcePolicy(parts[0], mechs[0] if mechs else "greedy", "place" in mods, **params)
    policy.name = "+".join([parts[0].upper()] + [m for m in mods if m != "greedy"])   # Synergy's name for greedy
    return policy
