"""What every policy sees (`PolicyView`), what it returns (`Allocation`), and the policy registry."""

from __future__ import annotations

import logging
from dataclasses import InitVar, dataclass, field
from typing import Callable, ClassVar

import numpy as np

from hetsched.errors import HetschedError

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class PolicyView:
    """A read-only snapshot of the active jobs as numpy arrays (rows = jobs in id order, cols = GPU types).

    `throughput[i, j]` is job i's aggregate steps/s on its `scale_factor[i]` GPUs of type j.
    `type_code[i]` indexes the distinct (job type, scale factor) keys of the active jobs; `colocated[a, b, j]`
    holds (own, partner) steps/s of key a sharing GPUs of type j with key b (NaN = not measured).
    """

    job_ids: np.ndarray
    gpu_types: tuple[str, ...]
    capacity: np.ndarray
    throughput: np.ndarray
    scale_factor: np.ndarray
    priority_weight: np.ndarray
    remaining_steps: np.ndarray
    time_since_arrival: np.ndarray
    type_code: np.ndarray | None = None
    colocated: np.ndarray | None = None
    unconsolidated: np.ndarray | None = None
    prices: np.ndarray | None = None
    deadline_s: np.ndarray | None = None
    entity: np.ndarray | None = None
    entity_weight: np.ndarray | None = None
    now: float = 0.0
    copy: InitVar[bool] = True    # False: the caller hands over new arrays that nothing else holds (the core)

    def __post_init__(self, copy: bool) -> None:
        for name in ("job_ids", "capacity", "throughput", "scale_factor", "priority_weight", "remaining_steps",
                     "time_since_arrival", "type_code", "colocated", "unconsolidated", "prices", "deadline_s",
                     "entity", "entity_weight"):
            value = getattr(self, name)
            if value is not None:
                if copy or not isinstance(value, np.ndarray):
                    value = np.array(value, copy=True)
                value.setflags(write=False)
                object.__setattr__(self, name, value)
        m, n = self.throughput.shape
        if self.capacity.shape != (n,) or len(self.gpu_types) != n:
            raise HetschedError(f"policy view: {n} throughput columns but {len(self.gpu_types)} GPU types "
                                f"and {self.capacity.shape} capacities")
        for name in ("job_ids", "scale_factor", "priority_weight", "remaining_steps", "time_since_arrival"):
            if getattr(self, name).shape != (m,):
                raise HetschedError(f"policy view: {name} must have one entry per job ({m})")

    @property
    def num_jobs(self) -> int:
        return self.throughput.shape[0]

    @property
    def num_types(self) -> int:
        return self.throughput.shape[1]

    def pair_throughput(self, i: int, k: int) -> np.ndarray:
        """(n, 2) steps/s of jobs i and k sharing GPUs of each type (0 where not measured)."""
        if self.colocated is None or self.type_code is None:
            raise HetschedError("policy view: this view carries no co-location throughputs")
        value = self.colocated[self.type_code[i], self.type_code[k]]
        return np.nan_to_num(value, nan=0.0)


@dataclass(eq=False)
class Allocation:
    """Time fractions: `x[i, j]` for job i alone on type j, `x_pairs[p, j]` for the pair `pairs[p]` sharing GPUs."""

    job_ids: np.ndarray
    gpu_types: tuple[str, ...]
    x: np.ndarray
    pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.intp))
    x_pairs: np.ndarray | None = None

    def __post_init__(self) -> None:
        # fmax maps NaN to 0; solvers return tiny negatives and 1 + eps, which are clipped.
        self.x = np.minimum(np.fmax(np.asarray(self.x, float), 0.0), 1.0)
        self.pairs = np.asarray(self.pairs, dtype=np.intp).reshape(-1, 2)
        if self.x_pairs is None:
            self.x_pairs = np.zeros((len(self.pairs), len(self.gpu_types)))
        self.x_pairs = np.minimum(np.fmax(np.asarray(self.x_pairs, float), 0.0), 1.0)

    def time_per_job(self) -> np.ndarray:
        """Total time fraction each job is scheduled (alone or in a pair)."""
        total = self.x.sum(axis=1)
        if len(self.pairs):
            pair_time = self.x_pairs.sum(axis=1)
            np.add.at(total, self.pairs[:, 0], pair_time)
            np.add.at(total, self.pairs[:, 1], pair_time)
        return total

    def gpus_used(self, scale_factor: np.ndarray) -> np.ndarray:
        """GPUs of each type in use on average (a pair occupies its GPUs once)."""
        used = scale_factor @ self.x
        if len(self.pairs):
            used = used + scale_factor[self.pairs[:, 0]] @ self.x_pairs
        return used

    def effective_throughput(self, view: PolicyView) -> np.ndarray:
        """Steps/s each job makes on average under this allocation."""
        eff = (view.throughput * self.x).sum(axis=1)
        for p, (i, k) in enumerate(self.pairs):
            tput = view.pair_throughput(i, k)
            eff[i] += tput[:, 0] @ self.x_pairs[p]
            eff[k] += tput[:, 1] @ self.x_pairs[p]
        return eff

    def as_dict(self) -> dict:
        """`{job_id or (id_a, id_b): {gpu_type: fraction}}` like Gavel's allocations."""
        out: dict = {int(j): dict(zip(self.gpu_types, map(float, row))) for j, row in zip(self.job_ids, self.x)}
        for (i, k), row in zip(self.pairs, self.x_pairs):
            out[(int(self.job_ids[i]), int(self.job_ids[k]))] = dict(zip(self.gpu_types, map(float, row)))
        return out


class Policy:
    """A scheduling policy: `allocate(view)` returns time fractions. Stateless unless it says otherwise."""

    name: ClassVar[str] = "policy"
    packing: bool = False                 # may return pair rows
    heterogeneity_aware: bool = True      # False: the mechanism shuffles GPU-type order each round
    fills_idle_gpus: bool = True          # False (FIFO): zero-priority jobs are not back-filled
    stateful: bool = False                # keeps state between calls: one object per simulation
    uses_entities: bool = False           # sees each job's entity and the entities' weights (hierarchical)
    partitionable: bool = False           # one optimisation over jobs and GPUs that POP may split (decide/gavel/pop.py)
    composed_place: tuple[str, bool] | None = None   # a composed name's CPU/memory placement: (kind, least free)

    def allocate(self, view: PolicyView) -> Allocation:
        raise NotImplementedError

    def objective(self, view: PolicyView, allocation: Allocation) -> float:
        """The policy's own objective value of an allocation (for benchmarks and tests)."""
        return float("nan")

    def __repr__(self) -> str:
        return f"<policy {self.name}>"


POLICIES: dict[str, Callable[..., Policy]] = {}
FOLDED: dict[str, str] = {}         # casefolded name or alias -> registry name (core/registry.py `resolve`)
KINDS: dict[str, str] = {}          # registry name -> its decide stage's kind: "allocation" or "planner"
DESCRIPTIONS: dict[str, str] = {}


def register_policy(name: str, factory: Callable[..., Policy], description: str = "", *, kind: str = "allocation",
                    **defaults) -> None:
    """Make `name` resolve to `factory(**defaults, **params)`, a decide stage of `kind` ("allocation": an
    allocation the priorities follow; "planner": a stage that picks each round's jobs, Shockwave's)."""
    if FOLDED.get(name.casefold(), name) != name or name.upper() in ORDERING_WORDS:
        raise ValueError(f"policy name {name!r} is taken (names are case-insensitive; docs/rules.md#names)")

    def make(**params) -> Policy:
        policy = factory(**{**defaults, **params})
        policy.name = name
        return policy
    POLICIES[name] = make
    KINDS[name] = kind
    FOLDED[name.casefold()] = name
    DESCRIPTIONS[name] = description or (factory.__doc__ or "").strip().splitlines()[0]


#: The papers' names for the registry's policies. Names are case-insensitive (docs/rules.md#names): the words
#: of Synergy's orderings (`fifo`, `las`, `srtf`, `ftf`, `drf`, `tetris`) name the orderings; Gavel's policies
#: that share a word are spelled with the system (`gavel_fifo`, `gavel_las`).
ALIASES = {
    "gavel_las": "max_min_fairness",              # Gavel's heterogeneity-agnostic LAS baseline
    "gavel": "max_min_fairness_perf",             # Gavel's heterogeneity-aware LAS
    "gavel_ss": "max_min_fairness_packed",        # ... with space sharing
    "themis": "finish_time_fairness",
    "gavel_ftf": "finish_time_fairness_perf",
    "ossp": "min_total_duration",                 # Shockwave's name for the makespan baseline
    "makespan": "min_total_duration_perf",
    "mst": "max_sum_throughput_perf",
    "gandiva-fair": "gandiva_fair",
}
#: The upper-case words of Synergy's orderings (decide/synergy/ordering.py registers them; docs/rules.md#names).
ORDERING_WORDS: set[str] = set()


FOLDED.update({alias.casefold(): name for alias, name in ALIASES.items()})


def empty_allocation(view: PolicyView) -> Allocation:
    return Allocation(view.job_ids, view.gpu_types, np.zeros((view.num_jobs, view.num_types)))


class VariantPolicy(Policy):
    """A policy family with Gavel's three variants: agnostic (``name``), ``_perf`` and ``_packed``.

    The agnostic variant sees `agnostic_throughput(view)` instead of the measured throughputs.
    """

    partitionable = True

    def __init__(self, heterogeneity_aware: bool = True, packing: bool = False, solver: str = "ecos",
                 aggregate: bool | None = None):
        self.heterogeneity_aware = heterogeneity_aware or packing
        self.packing = packing
        self.solver = solver
        self.aggregate = aggregate

    def agnostic_throughput(self, view: PolicyView) -> np.ndarray:
        return np.ones_like(view.throughput)

    def effective_view(self, view: PolicyView) -> PolicyView:
        if self.heterogeneity_aware:
            return view
        from dataclasses import replace
        # The view's arrays are read-only already: only the new throughputs are taken over, uncopied.
        return replace(view, throughput=self.agnostic_throughput(view), copy=False)
