"""Placement of chosen combinations on GPUs and servers (docs/rules.md#place).

Per GPU type, larger jobs first: a combination keeps last round's GPUs when they are all still free (lease
extension); the rest take a single server with room when one exists (consolidated), otherwise free GPUs in
server order (unconsolidated, which can cost throughput when the scheduler is placement-aware).
"""

from __future__ import annotations

from typing import Iterator, Sequence

from hetsched.model.cluster import ClusterSpec
from hetsched.errors import HetschedError


class Placer:
    """GPU ids per type, grouped by server."""

    def __init__(self, cluster: ClusterSpec, gpu_types: Sequence[str]):
        self.servers: list[list[list[int]]] = [[] for _ in gpu_types]    # type -> servers -> GPU ids
        column = {g: i for i, g in enumerate(gpu_types)}
        for server, ids in zip(cluster.server_shapes(), cluster.gpu_ids()):
            if server.gpu_type in column:
                self.servers[column[server.gpu_type]].append(list(ids))
        self.server_of = {g: s for t in self.servers for s, ids in enumerate(t) for g in ids}

    def place(self, chosen: list[tuple[int, int, int, tuple[int, tuple[int, ...]] | None]],
              ) -> Iterator[tuple[int, int, tuple[int, ...], bool, bool]]:
        """For (entry, type, scale factor, last (type, gpus)) yield (entry, type, gpus, extended, spread)."""
        by_type: dict[int, list] = {}
        for item in chosen:
            by_type.setdefault(item[1], []).append(item)
        for w, items in by_type.items():
            free = {g for ids in self.servers[w] for g in ids}
            items.sort(key=lambda it: -it[2])
            pending = []
            for entry, _, s, last in items:
                if last is not None and last[0] == w and len(last[1]) == s and free.issuperset(last[1]):
                    free.difference_update(last[1])
                    yield entry, w, last[1], True, self._spread(last[1])
                else:
                    pending.append((entry, s))
            # Servers with a free GPU, in order; full ones drop out, so a round is linear in servers, not
            # quadratic (1,000 one-GPU workers). Full servers never held a choice, so choices are unchanged.
            open_servers = [ids for ids in self.servers[w] if not free.isdisjoint(ids)] if pending else []
            for entry, s in pending:
                gpus = self._take(open_servers, free, s)
                yield entry, w, gpus, False, self._spread(gpus)

    @staticmethod
    def _take(open_servers: list[list[int]], free: set[int], s: int) -> tuple[int, ...]:
        for i, ids in enumerate(open_servers):
            avail = [g for g in ids if g in free]
            if len(avail) >= s:
                chosen = tuple(avail[:s])
                free.difference_update(chosen)
                if len(avail) == s:
                    del open_servers[i]
                return chosen
        chosen = tuple(g for ids in open_servers for g in ids if g in free)[:s]
        if len(chosen) < s:
            raise HetschedError(f"placement: {s} GPUs requested but only {len(chosen)} free")
        free.difference_update(chosen)
        open_servers[:] = [ids for ids in open_servers if not free.isdisjoint(ids)]
        return chosen

    def _spread(self, gpus: tuple[int, ...]) -> bool:
        return len({self.server_of[g] for g in gpus}) > 1
