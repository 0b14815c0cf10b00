"""The one server model with its free state (docs/rules.md#servers): some servers of a cluster, each with its GPU
type, its GPU ids in the cluster's one numbering (`ClusterSpec.gpu_ids`), CPU cores, DRAM and storage bandwidth,
and what of each is free this round.

Every place stage and the runtime hold their servers as `Servers`: Gavel's GPU placement, Synergy's CPU/memory
placement (`ServerPool` adds its searches), the elastic systems' node placement and the runtime's leases. A
placement takes GPUs in one of two ways. By id (`take`, `take_lowest`): the ids and the counts move together. By
count (`commit_counts`, Synergy's searches, which need no ids until the round is placed): the counts move, and
`hand_out` then names the ids of what was taken, each server's lowest free ones.
"""

from __future__ import annotations

from typing import Sequence

from hetsched.model.cluster import ClusterSpec, Server


class Servers:
    """Servers with capacities (`cap_g`, `cap_c`, `cap_m`, `cap_s`; CPU, memory and storage are None where the
    cluster does not give them) and free state: per server the free GPU count `fg`, CPU `fc`, memory `fm`,
    storage `fs`, and the set of free GPU ids. `reset` frees everything (every lease ends before a round)."""

    def __init__(self, servers: Sequence[Server], ids: Sequence[Sequence[int]], slack: float = 0.0):
        if len(servers) != len(ids) or any(s.num_gpus != len(i) for s, i in zip(servers, ids)):
            raise ValueError("servers: each server needs one GPU id per GPU")
        self.servers = tuple(servers)
        self.ids = tuple(tuple(i) for i in ids)
        self.num = len(self.servers)
        self.server_of = {g: k for k, server_ids in enumerate(self.ids) for g in server_ids}
        self.cap_g = [s.num_gpus for s in self.servers]
        self.cap_c = [None if s.cpu_cores is None else float(s.cpu_cores) for s in self.servers]
        self.cap_m = [None if s.dram_gb is None else float(s.dram_gb) for s in self.servers]
        self.cap_s = [None if s.storage_mbps is None else float(s.storage_mbps) for s in self.servers]
        self.num_gpus = sum(self.cap_g)
        self.slack = slack
        self._start = [[None if v is None else v + slack for v in cap] for cap in (self.cap_c, self.cap_m, self.cap_s)]
        self.reset()

    @classmethod
    def of(cls, cluster: ClusterSpec, gpu_type: str | None = None, slack: float = 0.0) -> "Servers":
        """The cluster's servers (those of `gpu_type` only, when given), in its order and numbering."""
        pairs = [(s, i) for s, i in zip(cluster.server_shapes(), cluster.gpu_ids())
                 if gpu_type is None or s.gpu_type == gpu_type]
        return cls([s for s, _ in pairs], [i for _, i in pairs], slack)

    def reset(self) -> None:
        """Every lease ended: all GPUs, cores, memory and storage free (CPU, memory and storage `slack` above
        their capacity, docs/rules.md#resource-slack)."""
        self.fg = list(self.cap_g)
        self.fc, self.fm, self.fs = (list(start) for start in self._start)
        self.free = self.num_gpus
        self._free_ids: set[int] | None = None          # built on the first call by id
        self._handed: list[int] | None = None           # ids handed out per server, on the first `hand_out`

    # ---- by id -------------------------------------------------------------------------------------
    @property
    def free_ids(self) -> set[int]:
        """The free GPU ids (a GPU taken by count is its server's lowest id not taken yet)."""
        if self._free_ids is None:
            cap, fg = self.cap_g, self.fg
            self._free_ids = {g for k, server_ids in enumerate(self.ids) for g in server_ids[cap[k] - fg[k]:]}
        return self._free_ids

    def holds(self, gpus: Sequence[int]) -> bool:
        """True when all of `gpus` are free."""
        return self.free_ids.issuperset(gpus)

    def free_on(self, k: int) -> list[int]:
        """Server k's free GPU ids, lowest first."""
        free = self.free_ids
        return [g for g in self.ids[k] if g in free]

    def take(self, gpus: Sequence[int]) -> None:
        """Take these free GPUs (ids and counts)."""
        self.free_ids.difference_update(gpus)
        fg, server_of = self.fg, self.server_of
        for g in gpus:
            fg[server_of[g]] -= 1
        self.free -= len(gpus)

    def take_lowest(self, k: int, n: int) -> tuple[int, ...]:
        """Server k's n lowest free GPUs, taken; ValueError when it has fewer."""
        gpus = tuple(self.free_on(k)[:n])
        if len(gpus) < n:
            raise ValueError(f"servers: server {k} has {len(gpus)} free GPUs, {n} asked for")
        self.take(gpus)
        return gpus

    def spread(self, gpus: Sequence[int]) -> bool:
        """True when `gpus` sit on more than one server."""
        server_of = self.server_of
        return len({server_of[g] for g in gpus}) > 1

    # ---- by count ----------------------------------------------------------------------------------
    def commit_counts(self, where: Sequence[tuple[int, int]]) -> None:
        """Take `n` GPUs on each server `k` of `where` ((k, n), ...) by count; `hand_out` names them later."""
        if self._free_ids is not None:
            raise ValueError("servers: GPUs taken by count after GPUs taken by id in one round")
        fg = self.fg
        for k, n in where:
            fg[k] -= n
            self.free -= n

    def start_hand_out(self) -> None:
        """Name a round's placements from each server's first id again (a round is named once, in job order)."""
        self._handed = [0] * self.num

    def hand_out(self, where: Sequence[tuple[int, int]]) -> tuple[int, ...]:
        """The ids of GPUs taken by count: on each server of `where`, its lowest ids not handed out yet."""
        if self._handed is None:
            self.start_hand_out()
        handed, ids, gpus = self._handed, self.ids, ()
        for k, n in where:
            if handed[k] + n > self.cap_g[k]:
                raise ValueError(f"servers: {handed[k] + n} GPUs handed out on server {k} of {self.cap_g[k]}")
            gpus += ids[k][handed[k]:handed[k] + n]
            handed[k] += n
        return gpus
