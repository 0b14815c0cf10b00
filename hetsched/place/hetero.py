"""Heterogeneity-aware TUNE: Gavel's allocation picks each job's GPU type, Synergy-TUNE shares CPU and memory on
the servers of that type (no peer system has both).

Rate model (documented assumption). Gavel's throughput table gives a job's steps/s on each GPU type at the
GPU-proportional CPU/memory share. Synergy's profile (measured on V100s) says how much faster the model runs
with more CPU and memory: up to `s` times at its ideal point. A job is bounded by the slower of data loading
(CPU) and compute (GPU): on a type whose throughput is `r` times the reference type's (V100, or the job's
fastest type), compute caps the rate at `s * r` of the reference fair rate. So on that type the speedup from
CPU/memory is `min(s, s*r) / min(1, s*r)` (1 when the GPU is the bottleneck even at the fair share, e.g.
ResNet-18 on a K80), and the ideal demand is the cheapest grid point that reaches `min(s, s*r)`; a job that
cannot use more than the fair share asks for less, which leaves CPU for others, as language jobs do.
Gavel job types map to Synergy's profiled models through `data/resources/gavel_models.csv`.
"""

from __future__ import annotations

import functools
from types import MappingProxyType

import numpy as np
import pandas as pd

from hetsched.model.cluster import ClusterSpec, Server
from hetsched.stages.plans import Assignment, RoundPlan
from hetsched.errors import HetschedError
from hetsched.model.throughputs import ThroughputTable, data_dir
from hetsched.model.profiles import profiles_ratio_for, servers_ratio
from hetsched.place.mechanism import PlacementStage
from hetsched.place.pool import IDEAL, ServerPool
from hetsched.model.profiles import CPU_LEVELS, MEM_LEVELS, SensitivityTable, load_sensitivity

REFERENCE_TYPE = "v100"          # the profiles were measured on V100s


def gavel_models() -> dict[str, str]:
    """Gavel model name (`ResNet-18`) -> Synergy profile (`res18`)."""
    return dict(_gavel_models())


@functools.lru_cache(maxsize=1)
def _gavel_models() -> MappingProxyType:                  # read once: emulated workers ask at every report
    frame = pd.read_csv(data_dir() / "resources" / "gavel_models.csv")
    return MappingProxyType(dict(zip(frame["gavel_model"], frame["synergy_model"])))


def type_demand(profile, ratio: float, gpus: int, server: tuple[int, float, float]) -> tuple[float, float, float]:
    """(CPUs per GPU, GB per GPU, speedup) of a job on a GPU type `ratio` times as fast as the reference.

    The demand is the profile's ideal on types at least as fast as the reference, else the cheapest grid point
    that reaches the compute-bound rate. A demand above one server's share per GPU is capped and the speedup
    read off the grid there."""
    s = profile.speedup
    fair_rate = min(1.0, s * ratio)
    best = min(s, s * ratio)
    if ratio >= 1.0:
        cpu, mem = profile.cpus_per_gpu, profile.mem_gb_per_gpu
    else:
        ok = np.argwhere(profile.grid >= best - 1e-12)
        i, j = min(((int(i), int(j)) for i, j in ok), key=lambda ij: (CPU_LEVELS[ij[0]], MEM_LEVELS[ij[1]]))
        cpu, mem = float(CPU_LEVELS[i]), float(MEM_LEVELS[j])
    per = min(gpus, server[0])
    cap_cpu, cap_mem = server[1] / per, server[2] / per
    if cpu > cap_cpu or mem > cap_mem:
        cpu, mem = min(cpu, cap_cpu), min(mem, cap_mem)
        best = min(best, max(profile.relative_throughput(cpu, mem), fair_rate))
    return cpu, mem, max(1.0, best / fair_rate)


def profile_name(job_type: str) -> str:
    """The Synergy profile a Gavel job type maps to (its model's, through gavel_models.csv; else the model)."""
    from hetsched.model.catalog import split_job_type

    model = split_job_type(job_type)[0]
    return _gavel_models().get(model, model)


def share_speedup(job_type: str, ratio: float, gpus: int, server: tuple[int, float, float], cpus: float,
                  mem_gb: float) -> float:
    """The speedup the placement stage credits a Gavel job with at a per-GPU share of `cpus` and `mem_gb` on a
    type `ratio` times as fast as the reference, on servers of shape `server` (GPUs, cores, GB) and with the
    profiles of their CPU:GPU ratio: its class's speedup when the share holds its demand, else 1 (the table's
    rate). 1 for a model without a profile. Emulated workers run at it (runtime/worker.py)."""
    shape = Server("gpu", int(server[0]), int(server[1]), float(server[2]))
    name, profiles = profile_name(job_type), load_sensitivity(servers_ratio([shape]))
    if name not in profiles:
        return 1.0
    cpu, mem, speedup = type_demand(profiles[name], ratio, gpus, server)
    return speedup if cpus + 1e-9 >= cpu and mem_gb + 1e-9 >= mem else 1.0


class TypeAwareResources:
    """The placement stage of Gavel's core when a policy is `<gavel policy>+tune|+fair|+greedy`. On the runtime,
    servers join and leave (`cluster_changed`); a GPU type without servers has no pool until one joins."""

    def __init__(self, cluster: ClusterSpec, gpu_types: tuple[str, ...], table: ThroughputTable, mechanism: str,
                 sensitivity: SensitivityTable | None = None, least_free: bool = False):
        self.table = table
        self.gpu_types = gpu_types
        self.fixed_sensitivity = sensitivity              # None: the profiles of the servers' CPU:GPU ratio
        self.models = gavel_models()
        self.mechanism, self.least_free = mechanism, least_free
        self._jobs: dict[int, tuple[str, int, np.ndarray]] = {}   # slot -> (job type, GPUs, throughput row)
        self._code: dict[int, list[int]] = {}            # slot -> class code per type (-1: the type has no servers)
        self.cluster_changed(cluster)

    def cluster_changed(self, cluster: ClusterSpec) -> None:
        """New servers (docs/rules.md#runtime-leases): a pool per GPU type, and every job's class on each type
        derived again (its demand depends on the type's per-server size). Raises, changing nothing, when a server
        lacks CPU cores or memory."""
        if not cluster.has_resources:
            raise HetschedError(f"'+{self.mechanism}' needs servers with CPU cores and memory, e.g. a cluster "
                                f"'4x8/24/500@v100+4x8/24/500@k80' or a Synergy .ini file")
        self.sensitivity = self.fixed_sensitivity or load_sensitivity(profiles_ratio_for(cluster))
        pools, self.type_sensitivity = [], []
        ids = cluster.gpu_ids()                               # the one numbering
        for w in self.gpu_types:
            mine = [k for k, s in enumerate(cluster.servers) if s.gpu_type == w]
            pools.append(ServerPool([cluster.servers[k] for k in mine], [ids[k] for k in mine]) if mine else None)
            # Each type's servers credit the profiles of their own CPU:GPU ratio (docs/rules.md#profiles).
            self.type_sensitivity.append(self.fixed_sensitivity or (
                load_sensitivity(servers_ratio([cluster.servers[k] for k in mine])) if mine else self.sensitivity))
        self.pools, self.stages, self.classes = pools, [], []
        for pool in pools:
            shares: list[tuple[float, float, float]] = []
            adjust: list[bool] = []
            self.stages.append(PlacementStage(pool, self.mechanism, self.least_free, shares, adjust)
                               if pool is not None else None)
            self.classes.append({"index": {}, "shares": shares, "adjust": adjust, "speedup": []})
        for slot in self._jobs:
            self._register(slot)

    def profile_of(self, job_type: str):
        name = profile_name(job_type)
        if name not in self.sensitivity:
            raise HetschedError(f"no CPU/memory profile for job type {job_type!r}; map its model in "
                                f"data/resources/gavel_models.csv (known models: {', '.join(self.models)})")
        return self.sensitivity[name]

    def add_job(self, slot: int, job_type: str, gpus: int, tput: np.ndarray) -> None:
        """Register a job: its class (demand and speedup) on every GPU type, from its throughput row."""
        self.profile_of(job_type)                          # an unknown model is refused now, whatever the servers
        self._jobs[slot] = (job_type, gpus, np.array(tput, float))
        self._register(slot)

    def _register(self, slot: int) -> None:
        job_type, gpus, tput = self._jobs[slot]
        name = profile_name(job_type)
        ref = self.gpu_types.index(REFERENCE_TYPE) if REFERENCE_TYPE in self.gpu_types else int(np.argmax(tput))
        codes = []
        for w, (pool, cls) in enumerate(zip(self.pools, self.classes)):
            if pool is None:
                codes.append(-1)
                continue
            # A type the job cannot use (unmeasured, or pinned elsewhere) never places it: any class will do.
            ratio = float(tput[w] / tput[ref]) if tput[ref] > 0 and tput[w] > 0 else 1.0
            key = (job_type, gpus, round(ratio, 9))
            code = cls["index"].get(key)
            if code is None:
                p = self.type_sensitivity[w][name]
                cpu, mem, speedup = type_demand(p, ratio, gpus, pool.size[:3])
                code = len(cls["shares"])
                cls["index"][key] = code
                cls["shares"].append((cpu, mem, p.storage_mbps_per_gpu))
                fair = pool.fair
                cls["adjust"].append(cpu > fair[0] or mem > fair[1] or p.storage_mbps_per_gpu > fair[2])
                cls["speedup"].append(speedup)
            codes.append(code)
        self._code[slot] = codes

    def place(self, sched, plan: RoundPlan) -> None:
        """Place each type's chosen jobs with the mechanism and set this round's steps/s (x speedup if IDEAL)."""
        plan.assignments = []
        entries, types = plan.entry, plan.gpu_type
        for w in np.unique(types).tolist():
            sel = entries[types == w]
            slots = sched.members[sel, 0]
            codes = np.zeros(len(sched.job_of_slot), np.int64)
            codes[slots] = [self._code[s][w] for s in slots.tolist()]
            status = self.stages[w].run(slots, sched.scale, codes, sched.job_of_slot)
            speedups = self.classes[w]["speedup"]
            pool = self.pools[w]
            pool.start_hand_out()
            for e, s, code in zip(sel.tolist(), slots.tolist(), codes[slots].tolist()):
                st = status.get(s)
                mult = speedups[code] if st == IDEAL and self.mechanism != "fair" else 1.0
                sched.etput[e, w, 0] = sched.tput[s, w] * mult if st is not None else 0.0
                gpus = pool.hand_out(pool.where[s]) if st else ()
                cpus, mem = pool.share[s][:2] if st else (0.0, 0.0)
                plan.assignments.append(Assignment(e, (int(sched.job_of_slot[s]),), w, gpus,
                                                   (float(sched.etput[e, w, 0]),), int(sched.escale[e]),
                                                   cpus=float(cpus), mem_gb=float(mem)))
        order = {a.entry: a for a in plan.assignments}
        plan.assignments = [order[e] for e in plan.entry.tolist()]
        keep = np.array([bool(a.gpus) for a in plan.assignments], bool)
        if not keep.all():                      # greedy may leave a chosen job without CPU/memory: it waits
            plan.entry, plan.gpu_type = plan.entry[keep], plan.gpu_type[keep]
            plan.assignments = [a for a, k in zip(plan.assignments, keep) if k]

    def demands(self, slots: np.ndarray) -> np.ndarray:
        """(n, 2) CPU cores and GB each job asks for on the reference type (V100, else the first type; on the
        runtime, the first type with servers when the reference type has none)."""
        w = self.gpu_types.index(REFERENCE_TYPE) if REFERENCE_TYPE in self.gpu_types else 0
        if self.pools[w] is None:
            w = next(k for k, pool in enumerate(self.pools) if pool is not None)
        shares = self.classes[w]["shares"]
        gpus = np.array([self._jobs[s][1] for s in slots.tolist()], float)
        per_gpu = np.array([shares[self._code[s][w]][:2] for s in slots.tolist()], float).reshape(-1, 2)
        return per_gpu * gpus[:, None]

    def remove_job(self, slot: int) -> None:
        self._code.pop(slot, None)
        self._jobs.pop(slot, None)
