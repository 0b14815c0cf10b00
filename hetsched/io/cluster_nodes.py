"""Production node lists as clusters of real servers.

Two layouts, told apart by their header:
- Alibaba openb (2023): `sn, cpu_milli, memory_mib, gpu, model` -- one row per node; CPU-only nodes (gpu 0)
  are left out. CPU cores = cpu_milli / 1000 (rounded down), DRAM = memory_mib / 1024 GB.
- Alibaba spot GPU (2026): `node_name, gpu_model, gpu_capacity_num, cpu_num` (any column order); no memory.

GPU models become lower-case type names (`V100M16` -> `v100m16`); see hetsched.io.gpu_map for their throughputs.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from hetsched.model.cluster import CLUSTER_FILE_READERS, ClusterSpec, Server
from hetsched.errors import SpecError
from hetsched.io.gpu_map import gpu_type_name

OPENB = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
ALIBABA_2026 = ("node_name", "gpu_model", "gpu_capacity_num", "cpu_num")


def looks_like_node_list(path: str | Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            header = {c.strip() for c in f.readline().split(",")}
    except OSError:
        return False
    return set(OPENB) <= header or set(ALIBABA_2026) <= header


def read_node_list(path: str | Path, prices_per_hour=None) -> ClusterSpec:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{source}: cannot read the node list ({exc})") from None
    return parse_node_list(text, source, prices_per_hour)


def parse_node_list(text: str, source: str = "<nodes>", prices_per_hour=None) -> ClusterSpec:
    reader = csv.DictReader(io.StringIO(text))
    header = set(reader.fieldnames or ())
    if set(OPENB) <= header:
        gpu_col, model_col, cpu_col, cpu_scale = "gpu", "model", "cpu_milli", 1000
    elif set(ALIBABA_2026) <= header:
        gpu_col, model_col, cpu_col, cpu_scale = "gpu_capacity_num", "gpu_model", "cpu_num", 1
    else:
        raise SpecError(f"{source}:1: not a node list: expected the columns {', '.join(OPENB)} (openb) or "
                        f"{', '.join(ALIBABA_2026)} (2026), got {sorted(header)}")
    servers = []
    for row in reader:
        where = f"{source}:{reader.line_num}"
        gpus = _count(row.get(gpu_col), where, gpu_col)
        if gpus == 0:
            continue
        model = (row.get(model_col) or "").strip()
        if not model:
            raise SpecError(f"{where}: field '{model_col}': a node with {gpus} GPUs has no GPU model")
        cpus = _count(row.get(cpu_col), where, cpu_col) // cpu_scale
        memory = _count(row.get("memory_mib"), where, "memory_mib") / 1024 if "memory_mib" in row else None
        try:
            servers.append(Server(gpu_type_name(model), gpus, cpu_cores=cpus or None, dram_gb=memory or None))
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None
    if not servers:
        raise SpecError(f"{source}: the node list has no GPU node")
    try:
        return ClusterSpec.from_servers(servers, prices_per_hour)
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from None


def _count(value, where: str, field: str) -> int:
    text = (value or "").strip()
    try:
        number = float(text)
    except ValueError:
        raise SpecError(f"{where}: field '{field}': expected a non-negative integer, got {text!r}") from None
    if not (number >= 0 and number.is_integer()):
        raise SpecError(f"{where}: field '{field}': expected a non-negative integer, got {text!r}")
    return int(number)


CLUSTER_FILE_READERS["csv"] = read_node_list
