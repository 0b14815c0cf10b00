"""Cluster files in JSON: GPU counts or server shapes, with $/hour per GPU type, for `--cluster my.json`.

    {"gpus": {"v100": 36, "p100": 36, "k80": 36},                # or "servers" (below); one is required
     "gpus_per_server": {"v100": 4},                              # optional, with "gpus"
     "prices_per_hour": {"v100": 2.48, "p100": 1.46, "k80": 0.45}}  # optional: the cost policies' prices

    {"servers": [{"gpu_type": "v100", "gpus": 8, "cpus": 24, "dram_gb": 500, "count": 4}, ...], ...}

Explicit prices (`--prices`) override the file's. Errors name the file and the field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping

from hetsched.model.cluster import CLUSTER_FILE_READERS, ClusterSpec, Server
from hetsched.errors import SpecError

KEYS = {"gpus", "servers", "gpus_per_server", "prices_per_hour"}
SERVER_KEYS = {"gpu_type", "gpus", "cpus", "dram_gb", "storage_mbps", "count"}


def _number(value, where: str, integer: bool = False, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and integer:
        ok = float(value).is_integer()
    if not ok or value < 0 or (value == 0 and not allow_zero):
        kind = "a positive integer" if integer else "a non-negative number" if allow_zero else "a positive number"
        raise SpecError(f"{where}: expected {kind}, got {value!r}")
    return int(value) if integer else float(value)


def _mapping(data: dict, key: str, source: str) -> dict:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise SpecError(f"{source}: field {key!r}: expected an object of GPU type -> number, got {value!r}")
    return value


def parse_cluster_json(text: str, source: str = "<json>",
                       prices_per_hour: Mapping[str, float] | None = None) -> ClusterSpec:
    """A `ClusterSpec` from the text of a JSON cluster file."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{source}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a JSON object with 'gpus' or 'servers'")
    unknown = set(data) - KEYS
    if unknown:
        raise SpecError(f"{source}: unknown field(s) {sorted(unknown)}; allowed: {', '.join(sorted(KEYS))}")
    if ("gpus" in data) == ("servers" in data):
        raise SpecError(f"{source}: give exactly one of 'gpus' (counts per type) or 'servers' (shapes)")
    prices = {g: _number(p, f"{source}: field 'prices_per_hour.{g}'", allow_zero=True)
              for g, p in _mapping(data, "prices_per_hour", source).items()}
    prices.update(prices_per_hour or {})
    try:
        if "gpus" in data:
            counts = {g: _number(n, f"{source}: field 'gpus.{g}'", integer=True)
                      for g, n in _mapping(data, "gpus", source).items()}
            per = {g: _number(n, f"{source}: field 'gpus_per_server.{g}'", integer=True)
                   for g, n in _mapping(data, "gpus_per_server", source).items()}
            if set(per) - set(counts):
                raise SpecError(f"field 'gpus_per_server': types {sorted(set(per) - set(counts))} are not in 'gpus'")
            servers = []
            for g, n in counts.items() if per else ():
                full, rest = divmod(n, per.get(g, 1))
                servers += [Server(g, per.get(g, 1))] * full + ([Server(g, rest)] if rest else [])
            return ClusterSpec(tuple(counts), tuple(counts.values()), tuple(servers), prices)
        return ClusterSpec.from_servers(_servers(data["servers"], source), prices)
    except SpecError as exc:
        if str(exc).startswith(source):
            raise
        raise SpecError(f"{source}: {exc}") from None


def _servers(rows, source: str) -> list[Server]:
    if not isinstance(rows, list) or not rows:
        raise SpecError(f"{source}: field 'servers': expected a non-empty list of server objects")
    servers = []
    for i, row in enumerate(rows):
        where = f"{source}: field 'servers[{i}]"
        if not isinstance(row, dict) or not {"gpu_type", "gpus"} <= set(row) or set(row) - SERVER_KEYS:
            raise SpecError(f"{where}': expected an object with gpu_type and gpus (and optionally cpus, "
                            f"dram_gb, storage_mbps, count), got {row!r}")
        count = _number(row.get("count", 1), f"{where}.count'", integer=True)
        gpu_type = row["gpu_type"]
        if not isinstance(gpu_type, str) or not gpu_type.strip():
            raise SpecError(f"{where}.gpu_type': expected a GPU type name, got {gpu_type!r}")
        optional = {key: _number(row[key], f"{where}.{key}'") for key in ("cpus", "dram_gb", "storage_mbps")
                    if key in row}
        server = Server(gpu_type.strip(), _number(row["gpus"], f"{where}.gpus'", integer=True),
                        cpu_cores=int(optional["cpus"]) if "cpus" in optional else None,
                        dram_gb=optional.get("dram_gb"), storage_mbps=optional.get("storage_mbps"))
        servers += [server] * count
    return servers


def read_cluster_json(path: str | Path, prices_per_hour: Mapping[str, float] | None = None) -> ClusterSpec:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the cluster file ({exc.strerror})") from None
    return parse_cluster_json(text, str(path), prices_per_hour)


CLUSTER_FILE_READERS["json"] = read_cluster_json
