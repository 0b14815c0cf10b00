"""The cluster model: GPU types, their counts, optional server shapes and prices."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping

from hetsched.errors import SpecError

#: Gavel's `-c V:P:K` order.
GAVEL_GPU_ORDER: tuple[str, ...] = ("v100", "p100", "k80")

#: Cluster file readers by file suffix (`ini`, `json`, `csv`); each reader module registers itself on import
#: (hetsched/__init__.py imports them), so this model module imports none of its readers.
CLUSTER_FILE_READERS: dict[str, Callable[..., "ClusterSpec"]] = {}

#: On-demand GCP prices ($/h) that Gavel hard-codes for its cost policies (docs/rules.md#catalogues).
GAVEL_GCP_PRICES: Mapping[str, float] = MappingProxyType({"v100": 0.74, "p100": 0.43, "k80": 0.135})

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
#: What `ClusterSpec.load` reads, for error messages.
FORMS = ("V100:P100:K80 ('36:36:36'), TYPE=COUNT,... ('v100=36,k80=4'), server groups "
         "SERVERSxGPUS/CPUS/GB[/MBps][@TYPE] joined by '+' ('16x8/24/500', '2x8/24/500@v100+4x4/32/256@k80'), "
         "or a .ini, .json or .csv (node list) cluster file")


@dataclass(frozen=True, slots=True)
class Server:
    """One machine: `num_gpus` GPUs of one type plus CPU cores, DRAM and storage bandwidth (Synergy's model)."""

    gpu_type: str
    num_gpus: int
    cpu_cores: int | None = None
    dram_gb: float | None = None
    storage_mbps: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.num_gpus, int) or self.num_gpus < 1:
            raise SpecError(f"server: num_gpus must be a positive integer, got {self.num_gpus!r}")
        if self.cpu_cores is not None and (not isinstance(self.cpu_cores, int) or self.cpu_cores < 1):
            raise SpecError(f"server: cpu_cores must be a positive integer, got {self.cpu_cores!r}")
        if self.dram_gb is not None and not self.dram_gb > 0:
            raise SpecError(f"server: dram_gb must be positive, got {self.dram_gb!r}")
        if self.storage_mbps is not None and not self.storage_mbps > 0:
            raise SpecError(f"server: storage_mbps must be positive, got {self.storage_mbps!r}")

    @property
    def has_resources(self) -> bool:
        """True when CPU cores and DRAM are known (what CPU/memory-aware placement needs)."""
        return self.cpu_cores is not None and self.dram_gb is not None


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """GPU types (ordered) with counts; optional servers and $/h per GPU of each type.

    Without explicit servers every GPU is its own server (Gavel's default `--num_gpus_per_server 1:1:1`).
    """

    gpu_types: tuple[str, ...]
    counts: tuple[int, ...]
    servers: tuple[Server, ...] = ()
    prices_per_hour: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_types", tuple(self.gpu_types))
        object.__setattr__(self, "counts", tuple(self.counts))
        object.__setattr__(self, "servers", tuple(self.servers))
        if len(self.gpu_types) != len(self.counts):
            raise SpecError(f"cluster: {len(self.gpu_types)} GPU types but {len(self.counts)} counts")
        if not self.gpu_types:
            raise SpecError("cluster: at least one GPU type is required")
        if len(set(self.gpu_types)) != len(self.gpu_types):
            raise SpecError(f"cluster: GPU type names must be unique, got {list(self.gpu_types)}")
        for name, n in zip(self.gpu_types, self.counts):
            if not isinstance(name, str) or not _NAME.match(name):
                raise SpecError(f"cluster: invalid GPU type name {name!r} (letters, digits, _ . - allowed)")
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise SpecError(f"cluster: count of {name} must be a non-negative integer, got {n!r}")
        if sum(self.counts) == 0:
            raise SpecError("cluster: the cluster has no GPUs")
        if self.servers:
            per_type = dict.fromkeys(self.gpu_types, 0)
            for s in self.servers:
                if s.gpu_type not in per_type:
                    raise SpecError(f"cluster: server has unknown GPU type {s.gpu_type!r}; "
                                    f"known: {list(self.gpu_types)}")
                per_type[s.gpu_type] += s.num_gpus
            for name, n in zip(self.gpu_types, self.counts):
                if per_type[name] != n:
                    raise SpecError(f"cluster: servers hold {per_type[name]} {name} GPUs but the count is {n}")
        prices = dict(self.prices_per_hour)
        for name, p in prices.items():
            if name not in self.gpu_types:
                raise SpecError(f"cluster: price given for unknown GPU type {name!r}")
            if not (isinstance(p, (int, float)) and p >= 0):
                raise SpecError(f"cluster: price of {name} must be a non-negative number, got {p!r}")
        object.__setattr__(self, "prices_per_hour", MappingProxyType(prices))

    # ---- constructors -------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str, gpus_per_server: str | None = None,
              prices_per_hour: Mapping[str, float] | None = None) -> "ClusterSpec":
        """Parse Gavel's `"36:36:36"` (v100:p100:k80) or `"v100=36,k80=4"`; optional `"4:4:4"` GPUs per server."""
        text = text.strip()
        if "=" in text:
            types, counts = [], []
            for part in text.split(","):
                name, _, num = part.partition("=")
                types.append(name.strip())
                counts.append(_parse_count(num, name.strip(), text))
        else:
            parts = text.split(":")
            if len(parts) != len(GAVEL_GPU_ORDER):
                if _SHAPES.match(text) or _file_reader(text):
                    raise SpecError(f"cluster: parse reads GPU counts only; ClusterSpec.load reads {text!r}")
                raise SpecError(f"cluster: {text!r} is none of the forms {FORMS}")
            types = list(GAVEL_GPU_ORDER)
            counts = [_parse_count(p, t, text) for p, t in zip(parts, types)]
        keep = [i for i, c in enumerate(counts) if c > 0] or list(range(len(counts)))
        types = [types[i] for i in keep]
        counts = [counts[i] for i in keep]
        servers: list[Server] = []
        if gpus_per_server:
            per = gpus_per_server.split(":")
            if len(per) != len(GAVEL_GPU_ORDER):
                raise SpecError(f"cluster: GPUs per server {gpus_per_server!r} must have the form V:P:K")
            per_type = {t: _parse_count(p, t, gpus_per_server) for t, p in zip(GAVEL_GPU_ORDER, per)}
            other = [t for t in types if t not in per_type]
            if other:
                raise SpecError(f"cluster: GPUs per server {gpus_per_server!r} are V:P:K counts for "
                                f"{'/'.join(GAVEL_GPU_ORDER)}, and {text!r} has {', '.join(other)}; give servers "
                                f"as shapes instead (servers x GPUs/CPUs/GB@type, e.g. '2x8/24/500@{other[0]}')")
            for t, n in zip(types, counts):
                size = per_type.get(t, 1)
                if size == 0:
                    if n:
                        raise SpecError(f"cluster: {n} {t} GPUs cannot sit on servers of 0 GPUs "
                                        f"({gpus_per_server!r})")
                    continue
                full, rest = divmod(n, size)
                servers += [Server(t, size)] * full + ([Server(t, rest)] if rest else [])
        return cls(tuple(types), tuple(counts), tuple(servers), dict(prices_per_hour or {}))

    @classmethod
    def load(cls, text: str, gpus_per_server: str | None = None,
             prices_per_hour: Mapping[str, float] | None = None) -> "ClusterSpec":
        """A spec from a Synergy `.ini` file (any path ending in `.ini`), a JSON cluster file (`.json`, with
        prices: hetsched.io.cluster_json), from server shapes
        `"16x8/24/500"` (servers x GPUs/CPUs/GB, optional `/MBps` and `@type`, `+` joins groups), or from the
        string forms of `parse`."""
        text = text.strip()
        reader = _file_reader(text)
        if (reader is not None or _SHAPES.match(text)) and gpus_per_server:
            raise SpecError(f"cluster: {text!r} gives its servers, so GPUs per server ({gpus_per_server!r}) have "
                            f"nothing to set; drop them, or give GPU counts such as '36:36:36'")
        if reader is not None:
            return reader(text, prices_per_hour=prices_per_hour)
        if _SHAPES.match(text):
            return cls.from_servers(_parse_shapes(text), prices_per_hour)
        return cls.parse(text, gpus_per_server, prices_per_hour)

    @classmethod
    def from_servers(cls, servers: list[Server], prices_per_hour: Mapping[str, float] | None = None,
                     ) -> "ClusterSpec":
        """Build a spec from server shapes (Synergy-style); types keep first-appearance order."""
        counts: dict[str, int] = {}
        for s in servers:
            counts[s.gpu_type] = counts.get(s.gpu_type, 0) + s.num_gpus
        return cls(tuple(counts), tuple(counts.values()), tuple(servers), dict(prices_per_hour or {}))

    # ---- queries ------------------------------------------------------------------------------
    @property
    def num_gpus(self) -> int:
        return sum(self.counts)

    def count(self, gpu_type: str) -> int:
        try:
            return self.counts[self.gpu_types.index(gpu_type)]
        except ValueError:
            raise SpecError(f"cluster: no GPU type {gpu_type!r}; known: {list(self.gpu_types)}") from None

    def as_dict(self) -> dict[str, int]:
        return dict(zip(self.gpu_types, self.counts))

    def server_shapes(self) -> tuple[Server, ...]:
        """Servers as given, or one single-GPU server per GPU."""
        if self.servers:
            return self.servers
        return tuple(Server(t, 1) for t, n in zip(self.gpu_types, self.counts) for _ in range(n))

    def gpu_ids(self) -> tuple[tuple[int, ...], ...]:
        """The GPU ids of each of `server_shapes()`, numbered server by server: the one numbering every placement
        and every lease uses."""
        out, first = [], 0
        for server in self.server_shapes():
            out.append(tuple(range(first, first + server.num_gpus)))
            first += server.num_gpus
        return tuple(out)

    @property
    def has_resources(self) -> bool:
        """True when every server carries CPU cores and DRAM (Synergy's resource-aware policies need them)."""
        return bool(self.servers) and all(s.has_resources for s in self.servers)

    def price(self, gpu_type: str) -> float:
        """$/h of one GPU of this type (0 when no price is known)."""
        return float(self.prices_per_hour.get(gpu_type, 0.0))

    def __str__(self) -> str:
        return ",".join(f"{t}={n}" for t, n in zip(self.gpu_types, self.counts))


_GROUP = r"\d+x\d+/\d+/\d+(?:\.\d+)?(?:/\d+(?:\.\d+)?)?(?:@[A-Za-z][A-Za-z0-9_.-]*)?"
_SHAPES = re.compile(rf"^{_GROUP}(?:\+{_GROUP})*$")


def _parse_shapes(text: str) -> list[Server]:
    """`16x8/24/500@v100+4x4/32/256@k80` -> servers (storage defaults to 62.5 MB/s per GPU: never binding)."""
    servers: list[Server] = []
    for group in text.split("+"):
        shape, _, gpu_type = group.partition("@")
        count, _, rest = shape.partition("x")
        parts = rest.split("/")
        gpus, cpus, mem = int(parts[0]), int(parts[1]), float(parts[2])
        storage = float(parts[3]) if len(parts) > 3 else 62.5 * gpus
        servers += [Server(gpu_type or "v100", gpus, cpu_cores=cpus, dram_gb=mem, storage_mbps=storage)] * int(count)
    if not servers:
        raise SpecError(f"cluster: {text!r} has no servers")
    return servers


def _file_reader(text: str) -> Callable[..., "ClusterSpec"] | None:
    """The reader of a cluster file's extension (`.ini`, `.json`, `.csv`), None for other strings."""
    return CLUSTER_FILE_READERS.get(text.lower().rpartition(".")[2]) if "." in text else None


def _parse_count(text: str, name: str, whole: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise SpecError(f"cluster: count of {name} in {whole!r} is not an integer: {text.strip()!r}") from None
    if value < 0:
        raise SpecError(f"cluster: count of {name} in {whole!r} is negative")
    return value
