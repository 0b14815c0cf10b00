"""Throughputs for GPU types that a table does not measure, by an explicit rule the user gives.

`--gpu-map T4=p100x0.8,A10=v100x1.1` adds a column `t4` equal to the `p100` column times 0.8 (alone and in
pairs), and `a10` from `v100`. A source can be any column of the loaded table, including a profiled one merged
in with `hetsched convert throughputs`. Nothing is mapped silently: a cluster type with no column and no rule is
an error that names the types and the flag (`check_gpu_types`).

GPU type names are case-insensitive here and lower-case in hetsched (`V100M16` is `v100m16`), as the node lists
of production clusters spell models in capitals.
"""

from __future__ import annotations

import math
import re

import numpy as np

from hetsched.errors import HetschedError
from hetsched.model.throughputs import ThroughputTable

_RULE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_.-]*)\s*=\s*([A-Za-z][A-Za-z0-9_.-]*?)(?:\s*[x*]\s*([0-9.eE+-]+))?\s*$")


def gpu_type_name(model: str) -> str:
    """hetsched's name of a GPU model: lower case, spaces as '-' (`A100-SXM4-80GB` -> `a100-sxm4-80gb`)."""
    return "-".join(str(model).strip().lower().split())


def parse_gpu_map(text: str | None) -> dict[str, tuple[str, float]]:
    """`T4=p100x0.8,A10=v100` -> {'t4': ('p100', 0.8), 'a10': ('v100', 1.0)}."""
    if not text:
        return {}
    out: dict[str, tuple[str, float]] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        m = _RULE.match(part)
        if m is None:
            raise HetschedError(f"--gpu-map: expected NEW=SOURCExFACTOR (e.g. T4=p100x0.8), got {part.strip()!r}")
        factor = 1.0 if m.group(3) is None else _factor(m.group(3), part)
        out[gpu_type_name(m.group(1))] = (gpu_type_name(m.group(2)), factor)
    return out


def _factor(text: str, part: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise HetschedError(f"--gpu-map: the factor in {part.strip()!r} must be a positive number")
    return value


def apply_gpu_map(table: ThroughputTable, rules: dict[str, tuple[str, float]]) -> ThroughputTable:
    """A table with one more column per rule (a rule for a type the table already has replaces it)."""
    if not rules:
        return table
    types = list(table.gpu_types)
    iso, co = table.isolated, table.colocated
    new_iso, new_co = [], []
    for name, (source, factor) in rules.items():
        if source not in table.gpu_types:
            raise HetschedError(f"--gpu-map: {name}={source}: the table {table.name!r} has no GPU type "
                                f"{source!r}; it has {list(table.gpu_types)}")
        g = table.gpu_index(source)
        new_iso.append(iso[:, g] * factor)
        new_co.append(co[:, :, g] * factor)
    keep = [i for i, t in enumerate(types) if t not in rules]
    names = [types[i] for i in keep] + list(rules)
    isolated = np.concatenate([iso[:, keep]] + [a[:, None] for a in new_iso], axis=1)
    colocated = np.concatenate([co[:, :, keep]] + [a[:, :, None] for a in new_co], axis=2)
    order = np.argsort(names, kind="stable")
    suffix = ",".join(f"{n}={s}x{f:g}" for n, (s, f) in rules.items())
    basis = [table.basis(types[i]) for i in keep] + [table.basis(s) for s, _ in rules.values()]
    return ThroughputTable(table.keys, tuple(names[i] for i in order), np.ascontiguousarray(isolated[:, order]),
                           np.ascontiguousarray(colocated[:, :, order]), f"{table.name}+{suffix}",
                           tuple(basis[i] for i in order) if table.workloads else ())


def case_typos(names, known) -> dict[str, str]:
    """Each name that is not one of `known` but differs from one only in case -> that one ('V100' -> 'v100')."""
    by_case = {k.lower(): k for k in known}
    return {n: by_case[n.lower()] for n in names if n not in known and n.lower() in by_case}


def check_gpu_types(types, table: ThroughputTable, what: str = "the cluster") -> None:
    """A clear error when GPU types have no throughput column (instead of a KeyError deep in the core)."""
    missing = sorted(set(types) - set(table.gpu_types))
    if missing:
        cased = case_typos(missing, table.gpu_types)
        if cased:                               # 'V100' for 'v100': a typo, not a new GPU to map
            raise HetschedError(f"{what} has GPU types {missing}; GPU type names are case-sensitive: did you mean "
                                f"{', '.join(map(repr, cased.values()))}? (the throughput table {table.name!r} "
                                f"has {list(table.gpu_types)})")
        example = ",".join(f"{m}={table.gpu_types[0]}x1.0" for m in missing[:2])
        raise HetschedError(f"{what} has GPU types {missing} that the throughput table {table.name!r} does not "
                            f"measure (it has {list(table.gpu_types)}); map them explicitly, e.g. "
                            f"--gpu-map {example}, or merge a profiled table (hetsched profile)")
