"""The elastic systems' decide stages by name, with the job category and round length each runs with."""

from __future__ import annotations

from hetsched.decide.elastic.cluster import ElasticCluster
from hetsched.decide.elastic.jobs import ADAPTIVE, RIGID
from hetsched.decide.elastic.names import ELASTIC_POLICIES, ELASTIC_ROUND_S, elastic_name
from hetsched.errors import HetschedError


def make_elastic_policy(name: str, cluster: ElasticCluster, round_s: float | None = None, **options):
    """(decide stage, job category, round length) for a policy name, any case."""
    key = elastic_name(name)
    if key is None:
        raise HetschedError(f"elastic policy {name!r}: use one of {', '.join(ELASTIC_POLICIES)}")
    round_s = round_s or ELASTIC_ROUND_S[key]
    if key == "sia":
        from hetsched.decide.elastic.sia import SiaPolicy

        allowed = {"p", "lam", "mip_gap"}
        _check(key, options, allowed)
        return SiaPolicy(cluster, **options), ADAPTIVE, round_s
    if key in ("gavel+tj", "themis+tj"):
        from hetsched.decide.elastic.gavel_tj import GavelTunedJobs

        _check(key, options, set())
        if key == "gavel+tj":
            return GavelTunedJobs(cluster, round_s=round_s), RIGID, round_s
        from hetsched.decide.gavel.ftf import FinishTimeFairness

        policy = FinishTimeFairness(heterogeneity_aware=True)
        return GavelTunedJobs(cluster, round_s=round_s, name=key, policy=policy), RIGID, round_s
    from hetsched.decide.elastic.pollux import PolluxPolicy

    _check(key, options, {"seed", "p", "pop_size", "generations"})
    return PolluxPolicy(cluster, **options), ADAPTIVE, round_s


def _check(name: str, options: dict, allowed: set) -> None:
    extra = sorted(set(options) - allowed)
    if extra:
        raise HetschedError(f"{name} does not read {', '.join(extra)}; it reads "
                            f"{', '.join(sorted(allowed)) or 'no options'}")
