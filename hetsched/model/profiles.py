"""Per-model CPU/memory sensitivity (Synergy's profiles, docs/rules.md#profiles) and a job's resource demands.

A profile gives a model's iteration time at the GPU-proportional share, its speedup at its ideal CPU/memory
point, the ideal per GPU, and the 9x5 grid of relative throughput over (CPUs per GPU, GB per GPU). The tables
are the project's own (`data/resources/`), typed in from the artifact's model files; see data/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Mapping

import numpy as np
import pandas as pd

from hetsched.errors import SpecError
from hetsched.model.throughputs import data_dir

#: The grid axes of every profile: CPU cores per GPU and GB of DRAM per GPU.
CPU_LEVELS: tuple[float, ...] = (1, 2, 3, 4, 5, 6, 9, 12, 24)
MEM_LEVELS: tuple[float, ...] = (20.83, 62.5, 125, 187.5, 250)
RATIOS = (3, 4, 5, 6)
TASKS = ("image", "language", "speech")


@dataclass(frozen=True, eq=False)
class ModelProfile:
    """One model's sensitivity to CPU and memory, per GPU."""

    model: str
    task: str
    batch_size: int
    iteration_time_s: float          # seconds per iteration at the GPU-proportional (fair) share
    speedup: float                   # throughput at the ideal point relative to the fair share
    cpus_per_gpu: float              # ideal
    mem_gb_per_gpu: float            # ideal
    storage_mbps_per_gpu: float
    placement_penalty: float         # throughput factor when spread over servers (1 = none)
    grid: np.ndarray                 # (len(CPU_LEVELS), len(MEM_LEVELS)) relative throughput

    def relative_throughput(self, cpus_per_gpu: float, mem_gb_per_gpu: float) -> float:
        """Grid value at the largest grid point not above the given per-GPU allocation (0 below the grid)."""
        i = np.searchsorted(CPU_LEVELS, cpus_per_gpu + 1e-9) - 1
        j = np.searchsorted(MEM_LEVELS, mem_gb_per_gpu + 1e-9) - 1
        return float(self.grid[i, j]) if i >= 0 and j >= 0 else 0.0


@dataclass(frozen=True)
class JobResources:
    """A job's ideal CPU/memory/storage demand on `gpus` GPUs and its speedup there (after capping)."""

    gpus: int
    cpus: float
    mem_gb: float
    storage_mbps: float
    speedup: float


class SensitivityTable:
    """The profiles of one CPU:GPU ratio (3 = Synergy's default cluster; 4/5/6 its ratio figures)."""

    def __init__(self, profiles: Mapping[str, ModelProfile], ratio: int = 3, name: str = "synergy"):
        self.profiles = MappingProxyType(dict(profiles))
        self.ratio = ratio
        self.name = name

    def __contains__(self, model: object) -> bool:
        return model in self.profiles

    def __getitem__(self, model: str) -> ModelProfile:
        try:
            return self.profiles[model]
        except KeyError:
            raise SpecError(f"sensitivity table {self.name!r} (CPU:GPU {self.ratio}): no model {model!r}; "
                            f"known: {', '.join(self.profiles)}") from None

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.profiles)

    def models_of(self, task: str) -> tuple[str, ...]:
        return tuple(m for m, p in self.profiles.items() if p.task == task)

    def demands(self, model: str, gpus: int, server: tuple[int, float, float, float]) -> JobResources:
        """Ideal demands of `model` on `gpus` GPUs, capped to one server (docs/rules.md#profiles), as the artifact does.

        `server` is the per-server size (GPUs, CPUs, GB, MB/s). Demands above a server's capacity are capped
        and the speedup re-interpolated linearly in CPU between the fair share and the ideal; a job larger than
        a server gets the GPU-proportional share and speedup 1.
        """
        p = self[model]
        g_s, c_s, m_s, s_s = server
        cpus, mem, sspeed = gpus * p.cpus_per_gpu, gpus * p.mem_gb_per_gpu, gpus * p.storage_mbps_per_gpu
        speedup = p.speedup
        update = False
        for name, cap in (("cpu", c_s), ("mem", m_s), ("sspeed", s_s)):
            value = {"cpu": cpus, "mem": mem, "sspeed": sspeed}[name]
            if value > cap:
                value = cap
                update = True
                if gpus > g_s:
                    value = gpus * (cap / g_s)
                    speedup = 1
                    update = False
                if name == "cpu":
                    cpus = value
                elif name == "mem":
                    mem = value
                else:
                    sspeed = value
        if update:
            ideal_cpu = gpus * p.cpus_per_gpu
            fair_cpu = gpus * (c_s / g_s)
            if ideal_cpu == fair_cpu:
                raise SpecError(f"model {model!r} on {gpus} GPUs: a capped demand with an ideal CPU equal to the "
                                f"fair share cannot be re-interpolated")
            slope = (speedup - 1) / (ideal_cpu - fair_cpu)
            speedup = 1 + slope * (cpus - fair_cpu)
        return JobResources(gpus, cpus, mem, sspeed, speedup)


class ProfileJobKeys:
    """The job types a whole-round stage accepts: the sensitivity profiles' models, at any GPU count (what
    `ThroughputTable` answers for the other pipelines: `in`, `job_types`, `name`, `lacks`)."""

    def __init__(self, profiles: SensitivityTable):
        self.name, self.job_types = profiles.name, profiles.models

    def __contains__(self, key) -> bool:
        return key.job_type in self.job_types

    def lacks(self, job_type: str, scale_factor: int) -> str:
        from hetsched.model.throughputs import nearest

        return f"job type {job_type!r} is not a profiled model of {self.name!r}; {nearest(job_type, self.job_types)}"


#: The fair memory per GPU of every stored profile set (500 GB servers of 8 GPUs), and the fair CPU of the base set.
FAIR_MEM_GB_PER_GPU, BASE_RATIO = 62.5, 3


@lru_cache(maxsize=16)
def load_sensitivity(ratio: int = 3) -> SensitivityTable:
    """Synergy's profiles for a CPU:GPU ratio: the stored sets of 3 (default), 4, 5 and 6, and for any other whole
    ratio a set derived from the base set's grids (docs/rules.md#profiles)."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, np.integer)) or ratio < 1:
        raise SpecError(f"sensitivity: CPU:GPU ratio must be a whole number of cores per GPU >= 1, got {ratio!r}")
    if ratio not in RATIOS:
        return derived_sensitivity(load_sensitivity(BASE_RATIO), int(ratio))
    folder = data_dir() / "resources"
    profiles = pd.read_csv(folder / "synergy_profiles.csv")
    grid = pd.read_csv(folder / "synergy_sensitivity.csv")
    out = {}
    for row in profiles[profiles["cpus_per_gpu_ratio"] == ratio].itertuples(index=False):
        g = grid[grid["model"] == row.model].pivot(index="cpus_per_gpu", columns="mem_gb_per_gpu",
                                                    values="relative_throughput")
        g = g.reindex(index=list(CPU_LEVELS), columns=list(MEM_LEVELS)).to_numpy(float)
        if np.isnan(g).any():
            raise SpecError(f"sensitivity: the grid of {row.model!r} is incomplete")
        g.setflags(write=False)
        out[row.model] = ModelProfile(row.model, row.task, int(row.batch_size), float(row.iteration_time_s),
                                      float(row.speedup), float(row.ideal_cpus_per_gpu),
                                      float(row.ideal_mem_gb_per_gpu), float(row.storage_mbps_per_gpu),
                                      float(row.placement_penalty), g)
    return SensitivityTable(out, ratio, f"synergy-{ratio}")


def derived_sensitivity(base: SensitivityTable, ratio: int) -> SensitivityTable:
    """The profiles of servers with `ratio` cores per GPU, from the base set's grids: a job's fair share is `ratio`
    cores and 62.5 GB per GPU, its iteration time there the base's scaled by the grid's throughput at the two fair
    shares, its ideal point the base's (every grid saturates there; the language models' 20 GB reads the grid's
    20.83-GB row) and its speedup the grid's ideal over fair. The stored sets of ratios 4 and 5 are this derivation
    to their printed digits (tests/test_profiles.py)."""
    out = {}
    for name, p in base.profiles.items():
        base_fair = p.relative_throughput(base.ratio, FAIR_MEM_GB_PER_GPU)
        fair = p.relative_throughput(ratio, FAIR_MEM_GB_PER_GPU)
        ideal = p.relative_throughput(max(p.cpus_per_gpu, CPU_LEVELS[0]), max(p.mem_gb_per_gpu, MEM_LEVELS[0]))
        out[name] = replace(p, iteration_time_s=p.iteration_time_s * base_fair / fair, speedup=ideal / fair)
    return SensitivityTable(out, ratio, f"synergy-{ratio} (derived)")


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
