"""The elastic systems' decide stages by name, with the job category and round length each runs with."""

from __future__ import annotations

from dataclasses import dataclass

from hetsched.elastic.cluster import ElasticCluster
from hetsched.elastic.jobs import ADAPTIVE, RIGID
from hetsched.errors import HetschedError

ELASTIC_POLICIES = {"sia": "Sia (SOSP'23): goodput ILP over GPU type x count, adaptive jobs, 60-s rounds",
                    "pollux": "Pollux (OSDI'21) as Sia's artifact runs it: type-unaware genetic search, 60-s rounds",
                    "gavel+tj": "Gavel max-sum-throughput with TunedJobs (rigid), 360-s rounds, as Sia's artifact"}


#: The round length each elastic system's artifact runs with (docs/rules.md#elastic-loop).
ELASTIC_ROUND_S = {"sia": 60.0, "pollux": 60.0, "gavel+tj": 360.0}


def elastic_name(name: str) -> str | None:
    """The elastic policy a name means (any case; `gavel_tj` is `gavel+tj`), or None."""
    key = name.strip().lower().replace("gavel_tj", "gavel+tj")
    return key if key in ELASTIC_POLICIES else None


@dataclass
class ElasticDecide:
    """The registry's decide-stage value for an elastic policy: the stage itself (`rounds.ElasticRounds`) is built
    on the run's cluster. Gavel's type-order shuffle (`heterogeneity_aware` False) is not theirs: the stage places."""

    name: str
    packing = False
    uses_entities = False
    heterogeneity_aware = True

    @property
    def default_round_s(self) -> float:
        return ELASTIC_ROUND_S[self.name]


def make_elastic_policy(name: str, cluster: ElasticCluster, round_s: float | None = None, **options):
    """(decide stage, job category, round length) for a policy name, any case."""
    key = name.strip().lower()
    if key == "sia":
        from hetsched.elastic.sia import SiaPolicy

        allowed = {"p", "lam", "mip_gap"}
        _check(key, options, allowed)
        policy = SiaPolicy(cluster, **options)
        policy.name = "sia"
        return policy, ADAPTIVE, round_s or 60.0
    if key in ("gavel+tj", "gavel_tj"):
        from hetsched.elastic.gavel_tj import GavelTunedJobs

        _check(key, options, set())
        round_s = round_s or 360.0
        return GavelTunedJobs(cluster, round_s=round_s), RIGID, round_s
    if key == "pollux":
        from hetsched.elastic.pollux import PolluxPolicy

        _check(key, options, {"seed", "p", "pop_size", "generations"})
        return PolluxPolicy(cluster, **options), ADAPTIVE, round_s or 60.0
    raise HetschedError(f"elastic policy {name!r}: use one of {', '.join(ELASTIC_POLICIES)}")


def _check(name: str, options: dict, allowed: set) -> None:
    extra = sorted(set(options) - allowed)
    if extra:
        raise HetschedError(f"{name} does not read {', '.join(extra)}; it reads "
                            f"{', '.join(sorted(allowed)) or 'no options'}")
