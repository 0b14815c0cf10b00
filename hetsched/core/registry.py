"""Policy names -> stages: the registry sits above every stage it registers (docs/architecture.md#registry).

A name is a decide stage, optionally composed with a placement: `max_min_fairness_perf`, the papers' aliases
(`gavel`, `gavel_las`, `themis`, `ossp`, ...), Synergy's `ORDERING[+fair|+tune|+opt][+place]` (`fifo+tune`), and
compositions of any allocation or the planner with a CPU/memory placement (`gavel+tune`, `gavel_las+fair`,
`themis+tune`, `shockwave+tune`). `pipeline_for` adds a run's rates and round rules and refuses a combination
whose stages cannot all act (`CompositionError`); every name an error suggests is one that runs.
"""

from __future__ import annotations

import difflib
from itertools import islice
from dataclasses import dataclass, replace

from hetsched.errors import HetschedError
from hetsched.core.pipeline import (CPU_MEMORY_PLACEMENTS, GAVEL_ANALOG, READ_BY, CompositionError, Decide, Pipeline,
                                    Place, Rates, RoundRules, Select, Try)
from hetsched.decide.shockwave.core import ShockwavePolicy
from hetsched.core.run_config import SYSTEM_RULES, SimulationConfig
from hetsched.decide.elastic.names import ElasticDecide, elastic_name
from hetsched.decide.gavel import catalog  # noqa: F401  (registers every allocation policy)
from hetsched.decide.gavel.base import ALIASES, FOLDED, KINDS, ORDERING_WORDS, POLICIES, Policy
from hetsched.decide.synergy.ordering import ORDERINGS, ResourcePolicy, parse_resource_policy

#: The round length each decide family's artifact uses when a run does not set one (docs/rules.md#round).
DEFAULT_ROUND_S = {"allocation": 360.0, "ordering": 300.0, "planner": 120.0}
SELECT_FOR = {"allocation": "priority", "planner": "planned", "ordering": "gpu_fill", "elastic": "planned"}
#: Policy parameters an artifact's driver passes (Shockwave runs AlloX with alpha = 0.2), and the per-job
#: problem its LP baselines solve at any number of jobs (docs/rules.md#per-job-solves).
_PER_JOB = {"aggregate": False}
SYSTEM_POLICY_PARAMS: dict[str, dict[str, dict]] = {"shockwave": {
    "allox": {"alpha": 0.2}, "max_min_fairness": _PER_JOB, "max_sum_throughput_perf": _PER_JOB,
    "finish_time_fairness": _PER_JOB, "min_total_duration": _PER_JOB}}


def _did_you_mean(name: str) -> str:
    close = difflib.get_close_matches(name.lower(), [*POLICIES, *ALIASES, *map(str.lower, ORDERINGS)], n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "."


@dataclass(frozen=True)
class PolicyName:
    """A policy name resolved once (docs/rules.md#names): its registry spelling, its decide stage's kind
    (`allocation`, `planner`, `ordering`, `elastic`) and, for `<decide>+<placement>`, the CPU/memory placement.
    `resolve` makes one; the registry's other calls take either."""

    text: str
    kind: str
    place: Place | None = None

    def __str__(self) -> str:
        return self.text


def resolve(name: "str | PolicyName") -> PolicyName:
    """The registry's spelling of a name or alias in any case, also as the head of a composed name (`Gavel+Tune`
    -> `max_min_fairness_perf+tune`, `fifo+tune` -> `FIFO+tune`, `GAVEL_TJ` -> `gavel+tj`), and its kind. An
    unknown name is refused, with the names it is close to."""
    if isinstance(name, PolicyName):
        return name
    key = elastic_name(name)
    if key is not None:
        return PolicyName(key, "elastic")
    head, *mods = map(str.strip, name.split("+"))
    head = FOLDED.get(head.casefold()) or (head.upper() if head.upper() in ORDERING_WORDS else head)
    text = "+".join([head] + [m.lower() for m in mods])
    base, _, arg = head.partition("=")
    if head in ORDERING_WORDS:
        return PolicyName(text, "ordering")
    if not (head in KINDS or (arg and base in KINDS and base.endswith("_alpha"))):
        raise _unknown(name)
    place = composed_place([m.lower() for m in mods]) if mods else None
    if mods and place is None:
        raise HetschedError(f"policy {name!r}: expected <policy>+tune|+fair|+greedy|+opt[+place]")
    return PolicyName(text, KINDS[base if arg else head], place)


def _unknown(name: str) -> HetschedError:
    return HetschedError(f"unknown policy {name!r}{_did_you_mean(name)} Known: {', '.join(sorted(POLICIES))}; "
                         f"aliases: {', '.join(sorted(ALIASES))}; Synergy's ORDERING[+fair|+tune|+opt][+place] "
                         f"(e.g. FIFO+tune); and any of them composed with a placement (e.g. gavel+tune)")


def resolve_policy_name(name: str) -> str:
    """`resolve(name).text`; an unknown name comes back unchanged."""
    try:
        return resolve(name).text
    except HetschedError:
        return name


def make_policy(name: "str | PolicyName", **params) -> Policy:
    """A new decide-stage object by name, e.g. `make_policy("max_min_fairness_perf")`, `make_policy("FIFO+tune")`;
    a composed name (`gavel+tune`) keeps its placement in the object's name, which `pipeline_for` reads.
    `partitions=k` (k > 1) solves the allocation as k partitions (POP, decide/gavel/pop.py; `partition_seed` picks
    another split). An elastic system's name (sia, pollux, gavel+tj) is its decide-stage value."""
    resolved = resolve(name)
    name = resolved.text
    if resolved.kind == "elastic":
        if params:
            raise HetschedError(f"{name} takes no parameters here (got {', '.join(sorted(params))})")
        return ElasticDecide(name)
    partitions, split_seed = params.pop("partitions", 1), params.pop("partition_seed", 0)
    if partitions != 1 or isinstance(partitions, bool):
        from hetsched.decide.gavel.pop import Partitioned
        return Partitioned(lambda: make_policy(resolved, **params), partitions, split_seed)
    if resolved.kind == "ordering":
        policy = parse_resource_policy(name, **params)
        if policy is None:                       # an empty part (`FIFO+`)
            raise _unknown(name)
        return policy
    base, _, arg = name.partition("=")
    if base in POLICIES and arg and base.endswith("_alpha"):
        params.setdefault("alpha", float(arg))
        name = base
    place = resolved.place
    if place is None:
        return POLICIES[name](**params)
    head = name.split("+")[0]
    policy = POLICIES[head](**params)
    policy.name = "+".join([head, place.kind] + (["place"] if place.least_free else []))
    policy.composed_place = (place.kind, place.least_free)
    return policy


def composed_place(mods: list[str]) -> Place | None:
    """The placement of a composed name's `+...` parts (`tune`, `fair`, `greedy`, `opt`, and `place`); None when
    they are not one placement and at most one `place`."""
    kinds = [m for m in mods if m in CPU_MEMORY_PLACEMENTS]
    if len(kinds) != 1 or any(m not in (*CPU_MEMORY_PLACEMENTS, "place") for m in mods) or len(set(mods)) != len(mods):
        return None
    return Place(kinds[0], "place" in mods)


def policy_names() -> list[str]:
    return sorted(POLICIES)


def policy_for(name: "str | PolicyName", seed: int, system: str | None = None, **params) -> Policy:
    """A fresh decide-stage object; seeded policies (FIFO, Gandiva, Shockwave's MILP solver) get the run's seed,
    and an artifact's policies its driver's parameters."""
    resolved = resolve(name)
    if resolved.kind == "elastic":
        return make_policy(resolved, **params)
    head = resolved.text.split("+")[0]
    seeded = head.removeprefix("gavel_").split("_")[0] in ("fifo", "shockwave") or head == "gandiva"
    params = {**SYSTEM_POLICY_PARAMS.get(system or "", {}).get(head, {}), **params}
    return make_policy(resolved, **({"seed": seed} if seeded else {}), **params)


def planner_params(kind: str, shockwave_config: str | None) -> dict:
    """`policy_for`'s parameters for a `--shockwave-config` (a preset or JSON file): only Shockwave's planner
    (`kind` "planner": shockwave, shockwave_agnostic and their compositions) takes one."""
    if not shockwave_config:
        return {}
    if kind != "planner":
        raise HetschedError("--shockwave-config applies to Shockwave's planner only (shockwave, shockwave_agnostic, "
                            "and their compositions, e.g. shockwave+tune)")
    return {"config": shockwave_config}


# ---- stages of a policy object ---------------------------------------------------------------------------
def decide_of(policy) -> Decide:
    if isinstance(policy, ElasticDecide):
        return Decide("elastic", policy)
    if isinstance(policy, ShockwavePolicy):
        return Decide("planner", policy)
    if isinstance(policy, ResourcePolicy):
        return Decide("ordering", policy)
    return Decide("allocation", policy, packing=bool(policy.packing))


def place_of(policy) -> Place:
    if isinstance(policy, ElasticDecide):
        return Place()
    if isinstance(policy, ResourcePolicy):
        return Place(policy.mechanism, policy.placement)
    composed = policy.composed_place                 # set by `make_policy` for `<decide>+<placement>`
    return Place(*composed) if composed else Place()


def pipeline_for(policy, config, cluster=None, *, suggest: bool = True) -> Pipeline:
    """The stages of `policy` (a name or a decide-stage object) under a `SimulationConfig`; refuses a
    combination that cannot act on the run (on `cluster`, when given), naming of the runs it suggests instead
    only those that run on the same cluster (`suggest`)."""
    if isinstance(policy, str):
        policy = policy_for(policy, config.seed, system=config.system)
    decide = decide_of(policy)
    rules = RoundRules(
        round_s=float(config.round_s if config.round_s is not None else default_round_s(decide)),
        credit=config.credit or ("round" if decide.kind in ("ordering", "elastic") else "task"),
        min_reset_interval_s=config.min_reset_interval_s, preemption_penalty_s=config.preemption_penalty_s,
        lease_start_s=config.lease_start_s, fixed_rounds=config.fixed_rounds,
        over_deadline=config.over_deadline, replay_reset=config.replay_reset, grid_origin_s=config.round_origin_s,
        macro_rounds=config.macro_rounds, ideal=config.ideal, time_scale=config.time_scale)
    rates = Rates(placement_aware=config.placement_aware, batch_size=config.dynamic_adaptation,
                  estimate_colocation=config.estimate_colocation, profiles_ratio=config.profiles_ratio)
    pipeline = Pipeline(policy.name, decide, Select(SELECT_FOR[decide.kind]), place_of(policy), rates, rules)
    try:
        validate(pipeline, cluster)
        refuse_unread(pipeline, given_settings(config, decide.kind))
    except CompositionError as exc:
        if not suggest or not exc.tries:
            raise
        runs = [t for t in exc.tries if runs_instead(t, config, cluster)]
        runs = runs or list(islice((t for t in nearby(pipeline, config) if runs_instead(t, config, cluster)), 2))
        raise CompositionError(*exc.stages, exc.why, exc.works, tuple(runs)) from None
    return pipeline


def nearby(pipeline: Pipeline, config):
    """Runs near a refused one, nearest first: its name under other rules or in rounds, then its decide stage
    with TUNE or GPUs only, then (for an ordering) Gavel's closest allocation; what a refusal suggests when none
    of its own suggestions runs (docs/rules.md#compose)."""
    systems = [None, *(s for s in SYSTEM_RULES if s != config.system)]
    heads = [pipeline.head] + ([GAVEL_ANALOG.get(pipeline.head, "gavel")] if pipeline.decide.kind == "ordering" else [])
    seen = {Try(pipeline.name)}
    for head in heads:
        for name in dict.fromkeys([pipeline.name if head == pipeline.head else head + "+tune", head + "+tune", head]):
            for system in systems:
                for ideal in ((None, False) if config.ideal else (None,)):
                    run = Try(name, system, ideal)
                    if run not in seen:
                        seen.add(run)
                        yield run


def runs_instead(suggested: Try, config, cluster=None) -> bool:
    """Whether a suggested run builds on `cluster`: under `config`, or the rules it names (with `config`'s seed)."""
    ideal = config.ideal if suggested.ideal is None else suggested.ideal
    if suggested.system:
        config = SimulationConfig.for_system(suggested.system, seed=config.seed, ideal=ideal)
    elif ideal != config.ideal:
        config = replace(config, ideal=ideal)
    try:
        pipeline_for(suggested.policy, config, cluster, suggest=False)
    except HetschedError:
        return False
    return True


def given_settings(config, kind: str) -> dict[str, object]:
    """The settings of `config` (`READ_BY`'s) given a value of their own: neither `SimulationConfig`'s default nor
    that of the artifact rules it names (`for_system`), nor, for the round length, the decide family's."""
    preset = SYSTEM_RULES.get(config.system or "", {})
    given = {}
    for name in READ_BY:
        value = getattr(config, name)
        unset = [SimulationConfig.__dataclass_fields__[name].default, preset.get(name)]
        if name == "round_s":
            unset.append(DEFAULT_ROUND_S.get(kind))
        if not any(value == u for u in unset):
            given[name] = value
    return given


def refuse_unread(pipeline: Pipeline, given: dict[str, object]) -> None:
    """Refuse the first given setting that no stage of `pipeline` reads (docs/rules.md#settings): each stage
    declares what it reads (`reads`), and a setting it does not read would change nothing."""
    reads = pipeline.reads()
    for name, value in given.items():
        if name not in reads:
            raise CompositionError(str(pipeline), f"{name}={value!r}", f"no stage of this run reads it ({name} is "
                                   f"read by {READ_BY[name]})", f"Drop {name}, or run stages that read it")

def validate(p: Pipeline, cluster=None) -> None:
    """Raise `CompositionError` for the first stage that cannot act with the others or on `cluster`: each stage
    checks what it accepts (`check`, in pipeline.py; docs/rules.md#compose)."""
    p.check(cluster)


def default_round_s(decide: Decide) -> float:
    """The round length of the decide stage's artifact (an elastic system's own)."""
    return decide.policy.default_round_s if decide.kind == "elastic" else DEFAULT_ROUND_S[decide.kind]


def whole_rounds(pipeline: Pipeline) -> bool:
    """A `RoundStage`: Synergy's server rounds (an ordering credited per round) or an elastic system's rounds."""
    kind = pipeline.decide.kind
    return kind == "elastic" or (kind == "ordering" and pipeline.rules.credit == "round")


def check_runtime(pipeline: Pipeline) -> None:
    """Refuse what the runtime cannot turn into leases (docs/rules.md#runtime-leases): every lease names its
    servers, GPUs and CPU/memory share, and Synergy-OPT names none."""
    if pipeline.place.kind == "opt":
        raise CompositionError(str(pipeline.place), "the runtime's leases", "Synergy-OPT is an idealised bound "
                               "that places no job on a server", "OPT runs in the simulator",
                               (Try(f"{pipeline.head}+tune"), Try(f"{pipeline.head}+fair")))


def job_catalog(pipeline: Pipeline, table):
    """What submitted jobs are checked against: the throughput table, or the profiles under server rounds."""
    if not whole_rounds(pipeline):
        return table
    if pipeline.decide.kind == "elastic":
        from hetsched.decide.elastic.apps import load_applications
        from hetsched.decide.elastic.rounds import ApplicationKeys
        return ApplicationKeys(load_applications())
    from hetsched.model.profiles import ProfileJobKeys, load_sensitivity
    return ProfileJobKeys(load_sensitivity(pipeline.rates.profiles_ratio or 3))


def build_scheduler(pipeline: Pipeline, cluster, table, *, seed: int = 0, entity_weights=None,
                    gpu_types: tuple[str, ...] | None = None):
    """The scheduler that runs `pipeline` on `cluster` (the simulator's and the runtime's)."""
    d, rates, rules = pipeline.decide, pipeline.rates, pipeline.rules
    from hetsched.core.scheduler import Scheduler
    if d.kind == "elastic":
        from hetsched.decide.elastic.rounds import ElasticRounds
        rounds = ElasticRounds(cluster, d.policy.name, rules.round_s, seed=seed, prepared=d.policy.prepared,
                               time_scale=rules.time_scale, lease_start_s=rules.lease_start_s,
                               round_origin_s=rules.grid_origin_s)
        return Scheduler(cluster, d.policy, table, round_s=rules.round_s, seed=seed, decide=rounds, gpu_types=gpu_types)
    if whole_rounds(pipeline):
        from hetsched.place import load_sensitivity, profiles_ratio_for
        from hetsched.decide.synergy.server_rounds import ServerRounds
        ratio = rates.profiles_ratio or profiles_ratio_for(cluster)
        rounds = ServerRounds(cluster, d.policy, load_sensitivity(ratio), round_s=rules.round_s,
                              macro_rounds=rules.macro_rounds and not rules.lease_start_s,     # one lease a round
                              round_origin_s=rules.grid_origin_s)
        return Scheduler(cluster, d.policy, table, round_s=rules.round_s, seed=seed, decide=rounds,
                         gpu_types=gpu_types)
    from hetsched.decide.gavel.view import sorted_gpu_types
    columns = tuple(sorted(gpu_types)) if gpu_types else sorted_gpu_types(cluster)
    estimator = resources = adaptation = None
    if rates.estimate_colocation is not None:
        from hetsched.rates.estimator import ThroughputEstimator
        refs, fraction = rates.estimate_colocation
        estimator = ThroughputEstimator(table, columns, num_reference=refs, profiling_fraction=fraction, seed=seed)
    if pipeline.place.cpu_memory:
        from hetsched.place import load_sensitivity
        from hetsched.place.hetero import TypeAwareResources
        resources = TypeAwareResources(cluster, columns, table, pipeline.place.kind,    # None: the servers' ratio
                                       load_sensitivity(rates.profiles_ratio) if rates.profiles_ratio else None,
                                       least_free=pipeline.place.least_free)
    if rates.batch_size:
        from hetsched.rates.adaptation.runtime import RuntimeAdaptation
        adaptation = RuntimeAdaptation(table)
    stage = round_rules = None
    if rules.ideal:                             # fluid rates between events, no rounds (docs/rules.md#ideal)
        from hetsched.rounds.ideal import IdealRounds
        round_rules = IdealRounds
    if d.kind == "planner":
        from hetsched.decide.shockwave.core import Planner
        stage = Planner(d.policy.config)
    elif d.kind == "ordering":
        from hetsched.decide.synergy.ordering_stage import OrderingStage
        stage = OrderingStage(d.policy.ordering, fair=pipeline.place.kind == "fair")
    return Scheduler(cluster, d.policy, table, round_s=rules.round_s,
                     min_reset_interval_s=rules.min_reset_interval_s, seed=seed, placement_aware=rates.placement_aware,
                     estimator=estimator, resources=resources, adaptation=adaptation, decide=stage,
                     gpu_types=gpu_types, entity_weights=entity_weights, round_rules=round_rules)


def composition_table() -> list[dict]:
    """Each decide family x placement x cluster shape: `runs`, or the refusal's reason (README, `hetsched
    policies`). Gavel's round rules; Shockwave's planner under its own."""
    from hetsched.model.cluster import ClusterSpec
    clusters = {"one type": ClusterSpec.load("4x4/12/250@v100"),
                "mixed types": ClusterSpec.load("2x4/12/250@v100+2x4/12/250@k80")}
    rows = []
    for family, head, system in (("allocation", "gavel", "gavel"), ("allocation, space sharing", "gavel_ss", "gavel"),
                                 ("planner", "shockwave", "shockwave"),
                                 ("ordering, Synergy's rules", "FIFO", "synergy"),
                                 ("ordering, Gavel's rules", "FIFO", "gavel")):
        config = SimulationConfig.for_system(system)
        for place in ("", "+fair", "+greedy", "+tune", "+opt"):
            row = {"decide": family, "name": head + place, "rules": system}
            for shape, cluster in clusters.items():
                try:
                    pipeline_for(policy_for(head + place, 0), config, cluster)
                    row[shape] = "runs"
                except CompositionError as exc:
                    row[shape] = "refused: " + str(exc).split(": ", 1)[1].split(". ")[0]
            rows.append(row)
    return rows


def composition_markdown() -> str:
    """`composition_table()` as the README's table: decide family x placement."""
    rows = composition_table()
    places = ["", "+fair", "+greedy", "+tune", "+opt"]
    lines = ["| decide (example) | " + " | ".join(p or "GPUs only" for p in places) + " |",
             "|---|" + "---|" * len(places)]
    for family in dict.fromkeys(r["decide"] for r in rows):
        cells = []
        for r in (r for r in rows if r["decide"] == family):
            ok = [r[k] == "runs" for k in ("one type", "mixed types")]
            cells.append("runs" if all(ok) else "one GPU type" if ok[0] else "refused")
        first = next(r for r in rows if r["decide"] == family)
        lines.append(f"| {family} (`{first['name']}`, `--rules {first['rules']}`) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


__all__ = ["ALIASES", "CompositionError", "ORDERINGS", "Pipeline", "decide_of", "make_policy", "pipeline_for",
           "place_of", "policy_for", "policy_names", "validate"]
