"""Synergy's cluster `.ini` files (docs/rules.md#trace-formats) as a `ClusterSpec`.

`[CLUSTER]` holds `racks`, `servers_per_rack`, `gpus_per_server`, `cpus_per_server`, `dram_per_server` (GB) and
`sspeed_per_server` (MB/s), all integers as the artifact reads them; missing keys take the artifact's
defaults (8 GPUs, 24 CPUs, 500 GB, 300 MB/s, one rack). Other sections (`[SCHEDULER]`) are ignored, as the
artifact ignores them. hetsched adds two optional keys: `gpu_type` (default `v100`, the paper's testbed) and
`price_per_gpu_hour`. Errors name the file and the line.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path
from typing import Mapping

from hetsched.model.cluster import CLUSTER_FILE_READERS, ClusterSpec, Server
from hetsched.errors import SpecError

DEFAULTS = {"racks": 1, "servers_per_rack": 4, "gpus_per_server": 8, "cpus_per_server": 24,
            "dram_per_server": 500, "sspeed_per_server": 300, "net_per_server": 40}
KNOWN = set(DEFAULTS) | {"gpu_type", "price_per_gpu_hour"}


def _line_of(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*[=:]", re.IGNORECASE)
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None


def parse_cluster_ini(text: str, source: str = "<ini>",
                      prices_per_hour: Mapping[str, float] | None = None) -> ClusterSpec:
    """Parse the text of a Synergy cluster file."""
    parser = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    try:
        parser.read_string(text, source=source)
    except configparser.Error as exc:
        line = getattr(exc, "lineno", None) or (exc.errors[0][0] if getattr(exc, "errors", None) else None)
        where = f"{source}:{line}" if line else source
        raise SpecError(f"{where}: not a valid .ini file ({exc.message.splitlines()[0]})") from None
    if not parser.has_section("CLUSTER"):
        raise SpecError(f"{source}: no [CLUSTER] section (expected racks, servers_per_rack, gpus_per_server, "
                        f"cpus_per_server, dram_per_server, sspeed_per_server)")
    values: dict[str, object] = dict(DEFAULTS)
    for key, raw in parser.items("CLUSTER"):
        line = _line_of(text, key)
        where = f"{source}:{line}" if line else source
        if key not in KNOWN:
            raise SpecError(f"{where}: unknown key {key!r} in [CLUSTER]; allowed: {', '.join(sorted(KNOWN))}")
        if key == "gpu_type":
            values[key] = raw.strip()
            continue
        try:
            number = float(raw) if key == "price_per_gpu_hour" else int(raw)
        except ValueError:
            kind = "a number" if key == "price_per_gpu_hour" else "an integer"
            raise SpecError(f"{where}: {key} must be {kind}, got {raw.strip()!r}") from None
        if number < 0 or (number == 0 and key != "price_per_gpu_hour"):
            raise SpecError(f"{where}: {key} must be positive, got {raw.strip()!r}")
        values[key] = number
    gpu_type = str(values.get("gpu_type", "v100"))
    server = Server(gpu_type, int(values["gpus_per_server"]), cpu_cores=int(values["cpus_per_server"]),
                    dram_gb=float(values["dram_per_server"]), storage_mbps=float(values["sspeed_per_server"]))
    count = int(values["racks"]) * int(values["servers_per_rack"])
    prices = dict(prices_per_hour or {})
    if "price_per_gpu_hour" in values:
        prices.setdefault(gpu_type, float(values["price_per_gpu_hour"]))
    try:
        return ClusterSpec.from_servers([server] * count, prices)
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from None


def read_cluster_ini(path: str | Path, prices_per_hour: Mapping[str, float] | None = None) -> ClusterSpec:
    """Read a Synergy cluster file, e.g. `default_cluster.ini` (16 x (8 GPU, 24 CPU, 500 GB) = 128 GPUs)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the cluster file ({exc.strerror})") from None
    return parse_cluster_ini(text, str(path), prices_per_hour)


def synergy_cluster(servers: int = 16, gpus: int = 8, cpus: int = 24, dram_gb: float = 500,
                    storage_mbps: float = 500, gpu_type: str = "v100") -> ClusterSpec:
    """A homogeneous Synergy-style cluster (the default is `default_cluster.ini`: 128 GPUs)."""
    return ClusterSpec.from_servers([Server(gpu_type, gpus, cpu_cores=cpus, dram_gb=dram_gb,
                                            storage_mbps=storage_mbps)] * servers)


CLUSTER_FILE_READERS["ini"] = read_cluster_ini
