"""An elastic cluster: groups of identical nodes per GPU type (`6x4@t4+3x8@rtx+2x8@a100`), and the placement of
(GPU type, GPU count) allocations onto nodes (docs/rules.md#elastic-place).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from hetsched.decide.elastic.jobs import Allocation
from hetsched.errors import SpecError
from hetsched.model.cluster import ClusterSpec, Server
from hetsched.model.servers import Servers

NAMED = {"sia_hetero": "6x4@t4+3x8@rtx+2x8@a100", "sia_homo": "16x4@t4"}
_GROUP = re.compile(r"^(\d+)x(\d+)@([a-z0-9_]+)$")


@dataclass(frozen=True)
class ElasticCluster:
    types: dict[str, tuple[int, int]]       # gpu type -> (nodes, GPUs per node), in the order given

    @classmethod
    def parse(cls, text: str, known_types=None) -> "ElasticCluster":
        text = NAMED.get(text.strip().lower(), text.strip().lower())
        types: dict[str, tuple[int, int]] = {}
        for group in text.split("+"):
            match = _GROUP.match(group.strip())
            if not match:
                raise SpecError(f"cluster: {group!r} in {text!r} is not NODESxGPUS@TYPE (e.g. "
                                f"'6x4@t4+3x8@rtx+2x8@a100', or one of {', '.join(NAMED)})")
            nodes, per_node, gpu_type = int(match[1]), int(match[2]), match[3]
            if nodes < 1 or per_node < 1:
                raise SpecError(f"cluster: {group!r} needs at least one node of at least one GPU")
            if known_types is not None and gpu_type not in known_types:
                raise SpecError(f"cluster: no measurements for GPU type {gpu_type!r}; measured types: "
                                f"{', '.join(sorted(known_types))}")
            if gpu_type in types:
                raise SpecError(f"cluster: GPU type {gpu_type!r} appears twice in {text!r}")
            types[gpu_type] = (nodes, per_node)
        return cls(types)

    def gpus(self, gpu_type: str) -> int:
        nodes, per_node = self.types[gpu_type]
        return nodes * per_node

    @property
    def total_gpus(self) -> int:
        return sum(self.gpus(t) for t in self.types)

    @cached_property
    def spec(self) -> ClusterSpec:
        """The cluster in the one server model: its nodes as servers, type by type."""
        return ClusterSpec.from_servers([Server(t, per_node) for t, (nodes, per_node) in self.types.items()
                                         for _ in range(nodes)])

    def __str__(self) -> str:
        return "+".join(f"{n}x{g}@{t}" for t, (n, g) in self.types.items())


def place(cluster: ElasticCluster, current: dict[str, Allocation | None],
          wanted: dict[str, tuple[str, int] | Allocation]) -> dict[str, Allocation]:
    """Nodes for each job's (GPU type, GPU count). A job whose type and count are unchanged keeps its GPUs; the
    others are placed largest first: a job of whole nodes takes free whole nodes, a job within one node the fullest
    node it fits on, and what cannot go whole is spread over the nodes with the most free GPUs. An `Allocation`
    asked for (a stage that places itself) is taken as it is."""
    free = {t: Servers.of(cluster.spec, t) for t in cluster.types}
    out: dict[str, Allocation] = {}
    for name, want in wanted.items():
        if isinstance(want, Allocation):
            out[name] = want
            free[want.gpu_type].commit_counts(want.nodes)
            continue
        gpu_type, gpus = want
        alloc = current.get(name)
        if alloc is not None and alloc.gpu_type == gpu_type and alloc.gpus == gpus:
            out[name] = alloc
            free[gpu_type].commit_counts(alloc.nodes)
    if any(f < 0 for servers in free.values() for f in servers.fg):
        raise ValueError("placement: the allocations asked for hold more GPUs than a node has")
    pending = sorted((n for n in wanted if n not in out), key=lambda n: -wanted[n][1])
    for name in pending:
        gpu_type, gpus = wanted[name]
        servers = free[gpu_type]
        nodes = _where(servers.fg, gpus, cluster.types[gpu_type][1])
        servers.commit_counts(nodes)
        out[name] = Allocation(gpu_type, nodes)
    return out


def _where(free: list[int], gpus: int, per_node: int) -> tuple[tuple[int, int], ...]:
    """(node, GPUs) for `gpus` GPUs given each node's free count: whole free nodes, else the fullest node that
    holds them, else the nodes with the most free GPUs."""
    if gpus > per_node and gpus % per_node == 0:
        whole = [i for i, f in enumerate(free) if f == per_node][: gpus // per_node]
        if len(whole) == gpus // per_node:
            return tuple((i, per_node) for i in whole)
    if gpus <= per_node:
        fits = [i for i, f in enumerate(free) if f >= gpus]
        if fits:
            return ((min(fits, key=lambda i: (free[i], i)), gpus),)
    taken = []
    for i in sorted(range(len(free)), key=lambda i: (-free[i], i)):
        if gpus == 0:
            break
        count = min(free[i], gpus)
        if count:
            gpus -= count
            taken.append((i, count))
    if gpus:
        raise ValueError("placement asked for more GPUs than the type has free")
    return tuple(sorted(taken))
