"""Servers with GPUs, CPU cores, DRAM and storage bandwidth, and the placement primitives of Synergy's
mechanisms (docs/rules.md#cpu-memory, docs/rules.md#tune-demotion): first-fit and least-free-GPU-first placement,
and the peer demotion of Synergy-TUNE.

A round starts with every server empty (all leases end before a round). Jobs are placed one by one; each
placement is a per-GPU share `(cpus, GB, MB/s)` on some GPUs of some servers. The per-round state is a few
Python lists (one entry per server): the hot loop does scalar work on them, which is faster than numpy for
one job at a time.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import Sequence

from hetsched.errors import SpecError
from hetsched.model.cluster import ClusterSpec, Server
from hetsched.model.servers import Servers

#: How a placed job is credited this round.
IDEAL, FAIR = 1, 2
#: A share fits when free >= share - SLACK (docs/rules.md#resource-slack): taking shares that are not binary
#: fractions (a pod's 20.83 GB) and giving them back leaves float residue of ~1e-13 on a server's free memory.
#: Every round starts each server's free CPU, memory and storage SLACK above its capacity, so that the exact
#: comparisons of the searches (and a demotion's need) carry the slack at no cost per job.
SLACK = 1e-9


class ServerPool(Servers):
    """The servers of one GPU type (or of a whole homogeneous cluster, `Servers`) and this round's placements:
    Synergy's searches work on the free counts, and `hand_out` names a placed job's GPU ids."""

    def __init__(self, servers: Sequence[Server], ids: Sequence[Sequence[int]] | None = None):
        if not servers:
            raise SpecError("server pool: no servers")
        missing = [s for s in servers if not s.has_resources]
        if missing:
            raise SpecError(f"server pool: CPU/memory-aware placement needs cpu_cores and dram_gb on every "
                            f"server; {len(missing)} server(s) lack them (build the cluster from a Synergy .ini "
                            f"or give Server(cpu_cores=..., dram_gb=...))")
        servers = [s if s.storage_mbps is not None else replace(s, storage_mbps=300.0) for s in servers]
        if ids is None:                                     # numbered from 0, server by server
            ids = ClusterSpec.from_servers(servers).gpu_ids()
        super().__init__(servers, ids, SLACK)
        # The artifact's per-server size (integer mean over servers) and GPU-proportional share per GPU.
        n = self.num
        self.size = (int(self.num_gpus / n), int(sum(self.cap_c) / n), int(sum(self.cap_m) / n),
                     int(sum(self.cap_s) / n))
        g = self.size[0]
        self.totals = (float(self.num_gpus), sum(self.cap_c), sum(self.cap_m))
        self.identical = all(len(set(v)) == 1 for v in (self.cap_g, self.cap_c, self.cap_m, self.cap_s))
        # Unlike servers (production node lists): the smallest server's share per GPU, which every GPU holds, so
        # that a job at the fair share fits wherever a GPU is free (docs/rules.md#unlike-servers).
        self.fair = (self.size[1] / g, self.size[2] / g, self.size[3] / g) if self.identical else tuple(
            min(cap[k] / self.cap_g[k] for k in range(n)) for cap in (self.cap_c, self.cap_m, self.cap_s))
        self.one_gpu = tuple(((k, 1),) for k in range(self.num))     # `where` of a one-GPU placement on server k

    def reset(self) -> None:
        """Every lease ended: all servers free, no placements."""
        super().reset()
        self.on: list[list[int]] = [[] for _ in range(self.num)]     # jobs placed on each server, in order
        self.where: dict[int, tuple[tuple[int, int], ...]] = {}      # job -> ((server, gpus), ...)
        self.share: dict[int, tuple[float, float, float]] = {}       # job -> per-GPU (cpus, GB, MB/s)

    # ---- search -----------------------------------------------------------------------------------
    def first_fit(self, c: float, m: float, s: float, g: int) -> tuple[tuple[int, int], ...] | None:
        """GPUs in id order on servers that hold one more per-GPU share each (SYNERGY_RANDOM)."""
        fg, fc, fm, fs = self.fg, self.fc, self.fm, self.fs
        if g == 1:
            for k in range(self.num):
                if fg[k] and fc[k] >= c and fm[k] >= m and fs[k] >= s:
                    return ((k, 1),)
            return None
        need, out = g, []
        for k in range(self.num):
            n = self._slices(k, c, m, s, min(fg[k], need))
            if n:
                out.append((k, n))
                need -= n
                if not need:
                    return tuple(out)
        return None

    def _slices(self, k: int, c: float, m: float, s: float, limit: int) -> int:
        """How many per-GPU shares server k holds, counted as the artifact holds them (one by one)."""
        hc = hm = hs = 0.0
        n = 0
        fc, fm, fs = self.fc[k], self.fm[k], self.fs[k]
        while n < limit and fc - hc >= c and fm - hm >= m and fs - hs >= s:
            hc += c
            hm += m
            hs += s
            n += 1
        return n

    def least_free_fit(self, c: float, m: float, s: float, g: int) -> tuple[tuple[int, int], ...] | None:
        """Placement-aware (SYNERGY_PLACEMENT): a multi-GPU job on the fullest server that holds it whole,
        else one GPU at a time from the server with the fewest free GPUs that holds a share."""
        fg = self.fg
        if g > 1:
            whole = [k for k in range(self.num) if fg[k] >= g and self.fc[k] >= c * g and self.fm[k] >= m * g
                     and self.fs[k] >= s * g]
            if whole:
                return ((min(whole, key=lambda k: (fg[k], k)), g),)
        heap = [(fg[k], k) for k in range(self.num) if fg[k]]
        heapq.heapify(heap)
        taken: dict[int, int] = {}
        held = {}
        need = g
        while need and heap:
            free, k = heapq.heappop(heap)
            hc, hm, hs = held.get(k, (0.0, 0.0, 0.0))
            if self.fc[k] - hc >= c and self.fm[k] - hm >= m and self.fs[k] - hs >= s:
                held[k] = (hc + c, hm + m, hs + s)
                taken[k] = taken.get(k, 0) + 1
                need -= 1
                if free > 1:
                    heapq.heappush(heap, (free - 1, k))
        if need:
            return None
        return tuple(sorted(taken.items()))

    # ---- commit -------------------------------------------------------------------------------------
    def commit(self, job: int, where: tuple[tuple[int, int], ...], c: float, m: float, s: float) -> None:
        """Place `job` on `where` with a per-GPU share (c, m, s): its GPUs taken by count (`Servers.commit_counts`,
        inline here: the hot path of Synergy's rounds), `hand_out` names them."""
        fg, fc, fm, fs, on = self.fg, self.fc, self.fm, self.fs, self.on
        for k, n in where:
            fg[k] -= n
            fc[k] -= c * n
            fm[k] -= m * n
            fs[k] -= s * n
            on[k].append(job)
            self.free -= n
        self.where[job] = where
        self.share[job] = (c, m, s)

    def snapshot(self, where: tuple[tuple[int, int], ...]) -> tuple[tuple[int, float, float, float], ...]:
        """The free CPU, memory and storage of the servers in `where`, for an exact undo: adding a share back
        leaves float residue (500 GB - 20.83 + 20.83 need not be 500), so undoing restores the values."""
        fc, fm, fs = self.fc, self.fm, self.fs
        return tuple((k, fc[k], fm[k], fs[k]) for k, _ in where)

    def restore(self, before: tuple[tuple[int, float, float, float], ...]) -> None:
        fc, fm, fs = self.fc, self.fm, self.fs
        for k, c, m, s in before:
            fc[k], fm[k], fs[k] = c, m, s

    def reshare(self, job: int, c: float, m: float, s: float) -> bool:
        """Re-place `job` on the same GPUs with another per-GPU share; False if a server would overflow."""
        old_c, old_m, old_s = self.share[job]
        ok = True
        fc, fm, fs = self.fc, self.fm, self.fs
        for k, n in self.where[job]:
            # Release the old share, then take the new one, as the artifact deallocates and re-places: adding
            # the difference instead leaves float residue (500 GB - 20.83 + (20.83 - 62.5) != 437.5) that can
            # make a fair share miss a server that holds it exactly.
            fc[k] += old_c * n
            fm[k] += old_m * n
            fs[k] += old_s * n
            fc[k] -= c * n
            fm[k] -= m * n
            fs[k] -= s * n
            ok = ok and fc[k] >= 0.0 and fm[k] >= 0.0 and fs[k] >= 0.0
        self.share[job] = (c, m, s)
        return ok

    # ---- TUNE's peer demotion -----------------------------------------------------------------------
    def underutilized(self, g: int) -> list[tuple[int, int]]:
        """Servers to free resources on for a g-GPU job (docs/rules.md#tune-demotion): the first server with g free
        GPUs for g > 1, else the servers with the fewest free GPUs (>= 1; ties to the lowest id) covering g."""
        fg = self.fg
        if g > 1:
            for k in range(self.num):
                if fg[k] >= g:
                    return [(k, g)]
        heap = [(fg[k], k) for k in range(self.num) if fg[k]]
        heapq.heapify(heap)
        out = []
        while g > 0 and heap:
            free, k = heapq.heappop(heap)
            if free >= g:
                out.append((k, g))
                return out
            out.append((k, free))
            g -= free
        return out

    def peers_to_demote(self, k: int, need: list[float]) -> list[int]:
        """Jobs on server k to bring back to the fair share so that `need` (cpu, GB, MB/s) frees up.

        The server's list is sorted in place (stable) by (servers spanned, -CPUs per GPU, -GB per GPU), as the
        artifact sorts it (docs/rules.md#tune-demotion); peers are taken until their excess over the fair share
        covers `need`.
        """
        lst = self.on[k]
        where, share = self.where, self.share
        lst.sort(key=lambda j: (len(where[j]), -share[j][0], -share[j][1]))
        fair = self.fair
        chosen = []
        for j in lst:
            n = next(n for kk, n in where[j] if kk == k)
            c, m, s = share[j]
            diff = [max(0.0, need[0] - max(0.0, c * n - fair[0] * n)),
                    max(0.0, need[1] - max(0.0, m * n - fair[1] * n)),
                    max(0.0, need[2] - max(0.0, s * n - fair[2] * n))]
            chosen.append(j)
            if diff[0] == 0 and diff[1] == 0 and diff[2] == 0:
                break
            need = diff
        return chosen
