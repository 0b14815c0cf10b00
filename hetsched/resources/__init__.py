"""CPU/memory-aware scheduling (Synergy) on the shared core: profiles, server pools, mechanisms, Synergy-OPT."""

from __future__ import annotations

from hetsched.model.profiles import (JobResources, ModelProfile, SensitivityTable, load_sensitivity,
                                     profiles_ratio_for, servers_ratio)


__all__ = ["JobResources", "ModelProfile", "SensitivityTable", "load_sensitivity", "profiles_ratio_for",
           "servers_ratio"]
