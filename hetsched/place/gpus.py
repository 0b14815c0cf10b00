"""Placement of chosen combinations on GPUs and servers (docs/rules.md#place).

Per GPU type, larger jobs first: a combination keeps last round's GPUs when they are all still free (lease
extension); the rest take a single server with room when one exists (consolidated), otherwise free GPUs in
server order (unconsolidated, which can cost throughput when the scheduler is placement-aware).
"""

from __future__ import annotations

from typing import Iterator, Sequence

from hetsched.errors import HetschedError
from hetsched.model.cluster import ClusterSpec
from hetsched.model.servers import Servers


class Placer:
    """The servers of each GPU type (`Servers`, the one server model) and a round's placement on them."""

    def __init__(self, cluster: ClusterSpec, gpu_types: Sequence[str]):
        self.pools = [Servers.of(cluster, g) for g in gpu_types]

    def place(self, chosen: list[tuple[int, int, int, tuple[int, tuple[int, ...]] | None]],
              ) -> Iterator[tuple[int, int, tuple[int, ...], bool, bool]]:
        """For (entry, type, scale factor, last (type, gpus)) yield (entry, type, gpus, extended, spread)."""
        by_type: dict[int, list] = {}
        for item in chosen:
            by_type.setdefault(item[1], []).append(item)
        for w, items in by_type.items():
            pool = self.pools[w]
            pool.reset()
            items.sort(key=lambda it: -it[2])
            pending = []
            for entry, _, s, last in items:
                if last is not None and last[0] == w and len(last[1]) == s and pool.holds(last[1]):
                    pool.take(last[1])
                    yield entry, w, last[1], True, pool.spread(last[1])
                else:
                    pending.append((entry, s))
            # Servers with a free GPU, in order; full ones drop out, so a round is linear in servers, not
            # quadratic (1,000 one-GPU workers). Full servers never held a choice, so choices are unchanged.
            fg = pool.fg
            open_servers = [k for k in range(pool.num) if fg[k]] if pending else []
            for entry, s in pending:
                gpus = self._take(pool, open_servers, s)
                yield entry, w, gpus, False, pool.spread(gpus)

    @staticmethod
    def _take(pool: Servers, open_servers: list[int], s: int) -> tuple[int, ...]:
        """A single server with `s` free GPUs, the first in order; else the first free GPUs in server order."""
        for i, k in enumerate(open_servers):
            avail = pool.free_on(k)
            if len(avail) >= s:
                chosen = tuple(avail[:s])
                pool.take(chosen)
                if len(avail) == s:
                    del open_servers[i]
                return chosen
        chosen = tuple(g for k in open_servers for g in pool.free_on(k))[:s]
        if len(chosen) < s:
            raise HetschedError(f"placement: {s} GPUs requested but only {len(chosen)} free")
        pool.take(chosen)
        fg = pool.fg
        open_servers[:] = [k for k in open_servers if fg[k]]
        return chosen
