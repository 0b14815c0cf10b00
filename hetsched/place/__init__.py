"""Stage 3, place (docs/architecture.md#folders): GPUs on servers (`gpus`, Gavel's), and GPU x CPU x memory on
server pools (Synergy's mechanisms: `pool`, `mechanism`, `hetero` for typed pools, `opt` for Synergy-OPT)."""

from __future__ import annotations

from hetsched.model.profiles import (JobResources, ModelProfile, SensitivityTable, load_sensitivity,
                                     profiles_ratio_for, servers_ratio)


__all__ = ["JobResources", "ModelProfile", "SensitivityTable", "load_sensitivity", "profiles_ratio_for",
           "servers_ratio"]
