"""The elastic systems' names and the registry's value for them: no import beyond the standard library, so that
the registry, which every run imports, pays nothing for elastic jobs until one runs."""

from __future__ import annotations

from dataclasses import dataclass, field

ELASTIC_POLICIES = {"sia": "Sia (SOSP'23): goodput ILP over GPU type x count, adaptive jobs, 60-s rounds",
                    "pollux": "Pollux (OSDI'21) as Sia's artifact runs it: type-unaware genetic search, 60-s rounds",
                    "gavel+tj": "Gavel max-sum-throughput with TunedJobs (rigid), 360-s rounds, as Sia's artifact",
                    "themis+tj": "Themis's finish-time fairness (the core's policy) with TunedJobs, Gavel's 360-s "
                                 "rounds (Sia's Table 4)"}


#: Systems of the core run on a workload table's rigid TunedJobs (not elastic rounds; docs/rules.md#shockwave-tj).
CORE_ON_TUNED_JOBS = {"shockwave+tj": "Shockwave's planner (the core's, its 120-s rounds and preemption penalty) on "
                                      "the TunedJobs of one GPU type (Sia's Table 4)"}


#: The round length each elastic system's artifact runs with (docs/rules.md#elastic-loop).
ELASTIC_ROUND_S = {"sia": 60.0, "pollux": 60.0, "gavel+tj": 360.0, "themis+tj": 360.0}


def elastic_name(name: str) -> str | None:
    """The elastic policy a name means (any case; `gavel_tj` is `gavel+tj`, `themis_tj` is `themis+tj`), or None."""
    key = name.strip().lower().replace("gavel_tj", "gavel+tj").replace("themis_tj", "themis+tj")
    return key if key in ELASTIC_POLICIES else None


@dataclass
class ElasticDecide:
    """The registry's decide-stage value for an elastic policy: the stage itself (`rounds.ElasticRounds`) is built
    on the run's cluster. Gavel's type-order shuffle (`heterogeneity_aware` False) is not theirs: the stage places."""

    name: str
    #: A run's own (decide-stage object, {job id: ElasticJob}) from a workload table (`simulate_elastic`); None: the
    #: stage makes its decide stage by name and its jobs from the `Job`s it is given.
    prepared: tuple | None = field(default=None, compare=False, repr=False)
    packing = False
    uses_entities = False
    heterogeneity_aware = True

    @property
    def default_round_s(self) -> float:
        return ELASTIC_ROUND_S[self.name]
