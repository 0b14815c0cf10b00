"""Entity weights for hierarchical policies: a CSV `entity,weight` (users, teams or virtual clusters).

A job belongs to the entity named by its `entity` field (a trace's vc or user, hetsched.traces.production).
Entities missing from the file weigh 1. Hierarchical policies (`max_min_fairness_water_filling_perf`, ...)
first share the cluster among entities by weight, then among each entity's jobs.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from hetsched.errors import HetschedError


def read_entity_weights(path: str | Path) -> dict[str, float]:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HetschedError(f"{source}: cannot read the entity weights ({exc})") from None
    return parse_entity_weights(text, source)


def parse_entity_weights(text: str, source: str = "<weights>") -> dict[str, float]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or not {"entity", "weight"} <= {f.strip() for f in reader.fieldnames}:
        raise HetschedError(f"{source}:1: expected a header 'entity,weight', got {reader.fieldnames}")
    out: dict[str, float] = {}
    for row in reader:
        where = f"{source}:{reader.line_num}"
        row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
        name = row.get("entity", "")
        if not name:
            raise HetschedError(f"{where}: field 'entity': empty entity name")
        try:
            weight = float(row.get("weight", ""))
        except ValueError:
            weight = math.nan
        if not (math.isfinite(weight) and weight > 0):
            raise HetschedError(f"{where}: field 'weight': expected a positive number, got {row.get('weight')!r}")
        if name in out:
            raise HetschedError(f"{where}: field 'entity': {name!r} is listed twice")
        out[name] = weight
    return out
