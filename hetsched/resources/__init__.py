"""CPU/memory-aware scheduling (Synergy) on the shared core: profiles, server pools, mechanisms, Synergy-OPT."""

from __future__ import annotations

from hetsched.resources.profiles import JobResources, ModelProfile, SensitivityTable, load_sensitivity


def profiles_ratio_for(cluster) -> int:
    """The profile set that matches a cluster's CPU:GPU ratio (3, 4, 5 or 6; 3 otherwise)."""
    servers = cluster.server_shapes()
    if servers and all(s.cpu_cores for s in servers):
        ratio = round(sum(s.cpu_cores for s in servers) / sum(s.num_gpus for s in servers))
        if ratio in (3, 4, 5, 6):
            return ratio
    return 3


__all__ = ["JobResources", "ModelProfile", "SensitivityTable", "load_sensitivity", "profiles_ratio_for"]
