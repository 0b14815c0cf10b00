"""CPU/memory-aware scheduling (Synergy) on the shared core: profiles, server pools, mechanisms, Synergy-OPT."""

from __future__ import annotations

from hetsched.resources.profiles import JobResources, ModelProfile, SensitivityTable, load_sensitivity


def profiles_ratio_for(cluster) -> int:
    """The profile set of a cluster's CPU:GPU ratio (`servers_ratio` of its servers)."""
    return servers_ratio(cluster.server_shapes())


def servers_ratio(servers) -> int:
    """Servers' CPU:GPU ratio, rounded to whole cores per GPU (at least 1): the stored profile sets for 3-6, a
    derived one otherwise (docs/rules.md#profiles); 3 for servers without CPU counts. Of unlike servers, the
    smallest server's cores per GPU: the fair share every GPU holds (docs/rules.md#unlike-servers), at which a job
    runs at its profile's base rate."""
    if servers and all(s.cpu_cores for s in servers):
        return max(1, round(min(s.cpu_cores / s.num_gpus for s in servers)))
    return 3


__all__ = ["JobResources", "ModelProfile", "SensitivityTable", "load_sensitivity", "profiles_ratio_for",
           "servers_ratio"]
