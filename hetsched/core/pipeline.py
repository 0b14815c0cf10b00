"""A run as stages: decide, select, place, rates and round rules (docs/architecture.md#stages).

Each stage is a typed value. The registry (`hetsched.core.registry`) turns a policy name and a run's settings into a
`Pipeline` and refuses, when it is built, any combination whose stages cannot all act on the run
(`CompositionError` names the two stages and what would work). The simulator and the runtime build their
scheduler from the pipeline; no stage is chosen by a flag on a policy object. Each stage checks what it accepts of
the others (`check`) and declares the run settings it reads (`reads`): a setting no stage reads is refused
(docs/rules.md#settings). The interfaces the scheduler calls on a decide stage are in `stages.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from hetsched.errors import HetschedError

DecideKind = Literal["allocation", "planner", "ordering", "elastic"]
SelectKind = Literal["priority", "planned", "gpu_fill"]
PlaceKind = Literal["gpus", "fair", "greedy", "tune", "opt"]
Credit = Literal["task", "round"]

CPU_MEMORY_PLACEMENTS: tuple[str, ...] = ("fair", "greedy", "tune", "opt")


@dataclass(frozen=True)
class Try:
    """A run a refusal suggests instead: a policy name, under other artifact rules (`system`) and fluid or in
    rounds (`ideal`) where given; the registry names only those that run (docs/rules.md#compose)."""

    policy: str
    system: str | None = None
    ideal: bool | None = None

    def __str__(self) -> str:
        return " ".join([repr(self.policy)] + ([f"--rules {self.system}"] if self.system else []) +
                        (["--ideal"] if self.ideal else ["in rounds"] if self.ideal is False else []))


class CompositionError(HetschedError):
    """Two stages that cannot act together in one run: names both, says why, and what would work: `works` in
    words and `tries`, the runs suggested instead (`Try`)."""

    def __init__(self, first: str, second: str, why: str, works: str = "", tries: tuple[Try, ...] = ()):
        self.stages, self.why, self.works, self.tries = (first, second), why, works, tuple(tries)
        instead = f"Runs instead: {'; '.join(map(str, self.tries))}" if self.tries else ""
        super().__init__(f"{first} x {second}: {why}. " + ". ".join(t for t in (works, instead) if t))


@dataclass(frozen=True)
class Decide:
    """Step 1 (docs/rules.md#decide): Gavel's allocation (time fractions -> priorities), Shockwave's planner
    (the job sets of the next rounds) or Synergy's ordering (a rank of the runnable jobs)."""

    kind: DecideKind
    policy: object                 # the policy object: `Policy`, `ShockwavePolicy` or `ResourcePolicy`
    packing: bool = False          # space sharing: the allocation has pair rows

    def __str__(self) -> str:
        return f"decide {self.policy.name.split('+')[0]!r} ({self.kind})"

    def check(self, p: "Pipeline", cluster) -> None:
        """What a decide stage accepts: an ordering neither Shockwave's round rules nor fluid rates, under Synergy's
        server rounds one GPU type, under Gavel's rules servers with CPU cores and memory; the planner rounds."""
        rules, place = p.rules, p.place
        if self.kind == "planner" and rules.ideal:
            raise CompositionError(str(self), str(rules), "the planner decides whole rounds",
                                   tries=(Try(p.name, ideal=False), Try("gavel", ideal=True)))
        if self.kind == "elastic":
            self._check_elastic(p)
        if self.kind != "ordering":
            return
        ordering = f"{self} (Synergy's server rounds)" if rules.credit == "round" else str(self)
        if rules.credit == "round" and cluster is not None and len(cluster.gpu_types) > 1:
            raise CompositionError(ordering, f"a cluster of {len(cluster.gpu_types)} GPU types",
                                   "Synergy's server rounds run one pool of servers of one GPU type",
                                   "On mixed GPU types an ordering runs under Gavel's rules (credit per micro-task)",
                                   (Try(p.name, "gavel"), Try(f"{p.head}+tune", "gavel"), gavel_analog(p, "gavel")))
        if place.kind == "opt" and rules.credit == "task":
            raise CompositionError(ordering, str(rules), "Synergy-OPT's program places one pool per round with "
                                   "per-round credit", tries=(Try(f"{p.head}+tune"), Try(p.name, "synergy")))
        for bad, stage in ((rules.preemption_penalty_s > 0, rules), (p.rates.batch_size, p.rates),
                           (rules.ideal, rules)):
            if bad:
                raise CompositionError(ordering, str(stage), "an ordering ranks jobs afresh every round at their "
                                       "CPU/memory speedup and has no such rule", "These act with Gavel's "
                                       "allocations and Shockwave's planner",
                                       (gavel_analog(p), Try(p.name, "gavel", ideal=False if rules.ideal else None)))

    def _check_elastic(self, p: "Pipeline") -> None:
        """An elastic stage (docs/rules.md#elastic-runtime) places and credits whole rounds of measured progress,
        and chooses each job's batch size itself."""
        for bad, stage, why in ((p.rules.ideal, p.rules, "it decides whole rounds"),
                                (p.rules.credit != "round", p.rules, "every allocation lasts one round"),
                                (p.rules.preemption_penalty_s > 0, p.rules, "a move pays its application's restore "
                                 "time, not a penalty"),
                                (p.rates.batch_size, p.rates, "its goodput model chooses each job's batch size"),
                                (p.place.cpu_memory, p.place, "it places GPUs on nodes, not CPU and memory")):
            if bad:
                raise CompositionError(str(self), str(stage), why, "Elastic jobs run with their own rules")

    def reads(self, p: "Pipeline") -> frozenset[str]:
        """Settings this stage reads (docs/rules.md#settings): an allocation its recompute gate and the trace-replay
        reset, and with space sharing the co-location estimates; allocations and the planner, in rounds, the
        runtime batch sizes. An ordering ranks jobs afresh every round and reads none of them."""
        if p.rules.ideal:
            return frozenset()
        reads = {"dynamic_adaptation"} if self.kind in ("allocation", "planner") else set()
        if self.kind == "allocation":
            reads |= {"min_reset_interval_s", "replay_reset"} | ({"estimate_colocation"} if self.packing else set())
        return frozenset(reads)


@dataclass(frozen=True)
class Select:
    """Step 2 (docs/rules.md#select): by priority per GPU type (Gavel), the planned set (Shockwave) or the
    greedy GPU-count fill in rank order (Synergy)."""

    kind: SelectKind

    def __str__(self) -> str:
        return f"select {self.kind!r}"


@dataclass(frozen=True)
class Place:
    """Step 3 (docs/rules.md#place): GPUs only, with consolidation and lease extension (`gpus`), or GPUs, CPU
    cores and memory per server (Synergy's `fair`, `greedy`, `tune`, `opt`); `least_free` is Synergy's `+place`
    (the fullest server that fits first)."""

    kind: PlaceKind = "gpus"
    least_free: bool = False

    @property
    def cpu_memory(self) -> bool:
        return self.kind in CPU_MEMORY_PLACEMENTS

    def __str__(self) -> str:
        return f"place {self.kind + ('+place' if self.least_free else '')!r}"

    def check(self, p: "Pipeline", cluster) -> None:
        """What a placement accepts: Synergy-OPT an ordering's pool on servers whose share per GPU is on the
        profiles' grid; a CPU/memory placement one job per GPU, rounds, and servers with CPU cores and memory."""
        d, rules = p.decide, p.rules
        if self.kind == "opt" and d.kind != "ordering":
            raise CompositionError(str(d), str(self), "Synergy-OPT solves one pool's CPU/memory program over an "
                                   "ordering's jobs", tries=(Try(f"{p.head}+tune"), Try("FIFO+opt", "synergy")))
        if self.kind == "opt" and cluster is not None and cluster.has_resources:
            from hetsched.model.profiles import CPU_LEVELS, MEM_LEVELS
            for server in cluster.server_shapes():
                share = (server.cpu_cores / server.num_gpus, server.dram_gb / server.num_gpus)
                if share[0] not in CPU_LEVELS or share[1] not in MEM_LEVELS:
                    raise CompositionError(str(self), f"servers of {server.num_gpus} GPUs, {server.cpu_cores:g} "
                                           f"CPUs, {server.dram_gb:g} GB", f"Synergy-OPT reads the fair share "
                                           f"({share[0]:g} CPUs, {share[1]:g} GB per GPU) off the profiles' grid "
                                           f"(CPUs {CPU_LEVELS}, GB {MEM_LEVELS}) and it is not on it",
                                           "Or give servers whose share per GPU is a grid point",
                                           (Try(f"{p.head}+tune"),))
        if not self.cpu_memory:
            return
        if d.packing:
            raise CompositionError(str(d), str(self), "space sharing puts two jobs on one GPU, and CPU/memory "
                                   "placement gives each job its own share",
                                   tries=(Try(f"{p.head.replace('_packed', '_perf')}+{self.kind}"), Try(p.head)))
        if rules.ideal and d.kind != "ordering":
            raise CompositionError(str(self), str(rules), "fluid rates place nothing on servers",
                                   tries=(Try(p.head, ideal=True), Try(p.name, ideal=False)))
        server_rounds = d.kind == "ordering" and rules.credit == "round"
        if cluster is not None and not cluster.has_resources and not server_rounds:
            raise CompositionError(str(self), "a cluster without CPU cores and memory per server",
                                   "the placement shares CPU and memory", "Give servers shapes, e.g. "
                                   "'4x8/24/500@v100+4x8/24/500@k80', or a Synergy .ini file", (Try(p.head),))

    def reads(self, p: "Pipeline") -> frozenset[str]:
        """GPU placement in rounds reads whether a spread gang runs at the unconsolidated rate; a CPU/memory
        placement reads the profiles' CPU:GPU ratio (and sets each job's rate itself)."""
        if self.cpu_memory:
            return frozenset({"profiles_ratio"})
        return frozenset() if p.rules.ideal or p.decide.kind == "elastic" else frozenset({"placement_aware"})


@dataclass(frozen=True)
class Rates:
    """Step 4 (docs/rules.md#rates): the table's rate x placement x CPU/memory speedup x current batch size."""

    placement_aware: bool = False                         # a spread gang runs at the unconsolidated rate
    batch_size: bool = False                              # Shockwave's runtime batch-size switching
    estimate_colocation: tuple[int, float] | None = None  # pair rates estimated by matrix completion
    profiles_ratio: int | None = None                     # CPU:GPU ratio of the CPU/memory sensitivity profiles

    def __str__(self) -> str:
        parts = [name for name, on in (("placement-aware", self.placement_aware), ("batch size", self.batch_size),
                                       ("estimated co-location", self.estimate_colocation is not None),
                                       (f"profiles {self.profiles_ratio}", self.profiles_ratio is not None)) if on]
        return f"rates {' + '.join(['table'] + parts)!r}"

    def check(self, p: "Pipeline", cluster) -> None:
        """Fluid rates take no micro-task rules (Shockwave's batch sizes and penalty, as its rules set them)."""
        if p.rules.ideal and (self.batch_size or p.rules.preemption_penalty_s):
            raise CompositionError(str(p.rules), str(self), "fluid rates have no micro-tasks to penalise or switch",
                                   tries=(Try(p.name, ideal=False),))

    def reads(self, p: "Pipeline") -> frozenset[str]:
        """Runtime batch sizes come with Shockwave's preemption penalty and over-deadline completion."""
        return frozenset({"preemption_penalty_s", "over_deadline"}) if self.batch_size and not p.rules.ideal \
            else frozenset()


@dataclass(frozen=True)
class RoundRules:
    """The mechanism's rules (docs/rules.md#round): round length, when progress is credited (`task`: at each
    micro-task's own finish, Gavel and Shockwave; `round`: every lease ends with the round, Synergy), the grid
    origin, the preemption penalty, the runtime's lease start and fixed rounds, Shockwave's over-deadline completion,
    the reset gate and the trace-replay reset; `ideal`: fluid rates, no rounds."""

    round_s: float
    credit: Credit = "task"
    min_reset_interval_s: float = 1920.0
    preemption_penalty_s: float = 0.0
    lease_start_s: float = 0.0
    fixed_rounds: bool = False
    over_deadline: bool = True
    replay_reset: bool = True
    grid_origin_s: float = 0.0
    macro_rounds: bool = True
    ideal: bool = False
    time_scale: float = 1.0         # elastic rounds: application seconds per second of the clock

    def __post_init__(self):
        """Values no run can mean (a zero or NaN round ran until its round budget; an unknown credit failed deep
        inside the round loop)."""
        bad = []
        if not (math.isfinite(self.round_s) and self.round_s > 0):
            bad.append(f"round_s={self.round_s!r} (a positive number of seconds)")
        if self.credit not in ("task", "round"):
            bad.append(f"credit={self.credit!r} ('task' or 'round')")
        for name in ("min_reset_interval_s", "preemption_penalty_s"):
            if not getattr(self, name) >= 0:
                bad.append(f"{name}={getattr(self, name)!r} (seconds >= 0)")
        if not math.isfinite(self.grid_origin_s):
            bad.append(f"grid origin (round_origin_s) {self.grid_origin_s!r} (finite seconds)")
        if bad:
            raise HetschedError(f"round rules: {', '.join(bad)}")

    def __str__(self) -> str:
        parts = [f"{self.round_s:g} s rounds", f"credit per {self.credit}"]
        if self.preemption_penalty_s:
            parts.append(f"preemption penalty {self.preemption_penalty_s:g} s")
        if self.lease_start_s:
            parts.append(f"lease start {self.lease_start_s:g} s")
        if self.fixed_rounds:
            parts.append("fixed rounds")
        if not self.over_deadline:
            parts.append("no over-deadline completion")
        if self.grid_origin_s:
            parts.append(f"grid origin {self.grid_origin_s:g} s")
        if self.time_scale != 1.0:
            parts.append(f"time scale {self.time_scale:g}")
        if self.ideal:
            parts = ["ideal (fluid, no rounds)"]
        return f"rules {', '.join(parts)!r}"

    def check(self, p: "Pipeline", cluster) -> None:
        """A lease start is a delay in seconds; per-round credit is Synergy's server rounds, over an ordering."""
        if self.lease_start_s < 0 or not math.isfinite(self.lease_start_s):
            raise CompositionError(str(self), "a lease start outside [0, inf)", "it is a delay in seconds",
                                   "Give the runtime's measured mean (`hetsched calibrate`), or 0")
        if self.credit == "round" and p.decide.kind not in ("ordering", "elastic"):
            raise CompositionError(str(p.decide), str(self), "per-round credit is Synergy's server rounds, which run "
                                   "an ordering", "Gavel's rules take Synergy's round length with --round 300",
                                   (Try(p.name, "gavel"), Try("FIFO+tune")))

    def reads(self, p: "Pipeline") -> frozenset[str]:
        """Rounds read their length, whether they are fixed, and the lease start where they place leases (not
        Synergy-OPT's bound); the grid origin where rounds keep a grid (fixed rounds, Synergy's server rounds);
        server rounds whether one plan may stand for several rounds. Elastic rounds read their length alone; a fluid
        run reads none of them."""
        if self.ideal:
            return frozenset()
        if p.decide.kind == "elastic":          # whole rounds on its own grid from 0 (R82, R86a)
            return frozenset({"round_s", "time_scale", "lease_start_s", "round_origin_s"})
        reads = {"round_s", "fixed_rounds"}
        if p.place.kind != "opt":
            reads.add("lease_start_s")
        if self.credit == "round" and p.decide.kind == "ordering":
            reads |= {"macro_rounds", "round_origin_s"}
        elif self.fixed_rounds:
            reads.add("round_origin_s")
        return frozenset(reads)


@dataclass(frozen=True)
class Pipeline:
    """One of each stage: what the registry returns for `FIFO+tune`, `gavel+tune`, `shockwave`, ..."""

    name: str
    decide: Decide
    select: Select
    place: Place
    rates: Rates
    rules: RoundRules

    @property
    def policy(self):
        return self.decide.policy

    @property
    def head(self) -> str:
        """The decide stage's name, without the placement (`gavel+tune` -> `max_min_fairness_perf`)."""
        return self.name.split("+")[0]

    def check(self, cluster=None) -> None:
        """Raise `CompositionError` for the first stage that does not accept the others (or `cluster`)."""
        for stage in (self.rules, self.decide, self.place, self.rates):
            stage.check(self, cluster)

    def stages(self) -> dict[str, str]:
        """Each stage in words (the CLI's `--json` config and `hetsched policies`)."""
        return {k: str(getattr(self, k)).split(" ", 1)[1]
                for k in ("decide", "select", "place", "rates", "rules")}

    def reads(self) -> frozenset[str]:
        """The run settings some stage of this pipeline reads; a setting given otherwise is refused."""
        return frozenset().union(*(getattr(self, k).reads(self) for k in ("decide", "place", "rates", "rules")))

    def __str__(self) -> str:
        return ", ".join(str(getattr(self, k)) for k in ("decide", "select", "place", "rates", "rules"))


#: Gavel's allocation closest to each Synergy ordering (what runs on more than one GPU type).
GAVEL_ANALOG = {"FIFO": "fifo_perf", "LAS": "gavel", "FTF": "gavel_ftf"}


def gavel_analog(p: "Pipeline", system: str | None = None) -> Try:
    """A run instead of an ordering that cannot act on this run: Gavel's closest allocation, with the ordering's
    CPU/memory placement."""
    place = p.place.kind if p.place.kind in ("fair", "greedy", "tune") else "tune"
    return Try(f"{GAVEL_ANALOG.get(p.head, 'gavel')}+{place}", system)


#: The run settings (`SimulationConfig` fields) a stage may read, and which stages read each: a setting given with a
#: value of its own that no stage of the run reads is refused (docs/rules.md#settings), never silently ignored.
READ_BY: dict[str, str] = {
    "round_s": "the round rules, in rounds (ideal=False)",
    "fixed_rounds": "the round rules, in rounds (ideal=False)",
    "lease_start_s": "the round rules, where rounds place leases (in rounds, not Synergy-OPT)",
    "round_origin_s": "the round rules, where rounds keep a grid (fixed_rounds=True, or Synergy's server rounds)",
    "macro_rounds": "Synergy's server rounds (an ordering under Synergy's rules, e.g. 'FIFO+tune' --rules synergy)",
    "min_reset_interval_s": "an allocation's recompute gate, in rounds (e.g. 'gavel')",
    "replay_reset": "an allocation's recompute when nothing runs or will arrive, in rounds (e.g. 'gavel')",
    "estimate_colocation": "a space-sharing allocation (e.g. 'gavel_ss')",
    "dynamic_adaptation": "an allocation or Shockwave's planner, in rounds (e.g. 'gavel', 'shockwave')",
    "preemption_penalty_s": "runtime batch sizes (dynamic_adaptation=True, as Shockwave's rules set it)",
    "over_deadline": "runtime batch sizes (dynamic_adaptation=True, as Shockwave's rules set it)",
    "placement_aware": "GPU-only placement in rounds (e.g. 'gavel', not 'gavel+tune')",
    "profiles_ratio": "a CPU/memory placement (e.g. 'gavel+tune', 'FIFO+tune')",
    "time_scale": "elastic rounds (sia, pollux, gavel+tj, themis+tj)",
}
