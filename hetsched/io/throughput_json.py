"""Read Gavel/Shockwave-format throughput JSON into hetsched's long table (one row per measurement)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from hetsched.errors import ThroughputError

#: Columns of the project's throughput table (data/throughputs/*.parquet).
COLUMNS = ("gpu_type", "placement", "job_type", "scale_factor", "partner_job_type",
           "steps_per_s", "partner_steps_per_s")

_KEY = re.compile(r"^\('(?P<type>.*)', (?P<sf>\d+)\)$")
_UNCONSOLIDATED = "_unconsolidated"


def _parse_key(key: str, where: str) -> tuple[str, int]:
    m = _KEY.match(key)
    if m:
        return m.group("type"), int(m.group("sf"))
    if key.startswith("(") or not key.strip():
        raise ThroughputError(f"{where}: cannot parse job key {key!r}; expected \"('<job type>', <scale factor>)\"")
    return key, 1  # the older oracle format has plain job types (single GPU)


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ThroughputError(f"{where}: throughput must be a finite non-negative number, got {value!r}")
    return float(value)


def read_throughput_json(path: str | Path) -> pd.DataFrame:
    """Parse a `{worker_type: {"('<type>', s)": {"null": t, "('<other>', s)": [t_self, t_other]}}}` file."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ThroughputError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(raw, dict) or not raw:
        raise ThroughputError(f"{path}: expected a JSON object keyed by worker type")
    rows: list[tuple] = []
    for worker_type, entries in raw.items():
        placement = "consolidated"
        gpu_type = worker_type
        if worker_type.endswith(_UNCONSOLIDATED):
            gpu_type, placement = worker_type[: -len(_UNCONSOLIDATED)], "unconsolidated"
        if not isinstance(entries, dict):
            raise ThroughputError(f"{path}: [{worker_type}] must map job keys to measurements")
        for key, measurements in entries.items():
            where = f"{path}: [{worker_type}][{key}]"
            job_type, sf = _parse_key(key, where)
            if not isinstance(measurements, dict) or "null" not in measurements:
                raise ThroughputError(f"{where}: expected an object with a 'null' (isolated) entry")
            for partner, value in measurements.items():
                if partner == "null":
                    rows.append((gpu_type, placement, job_type, sf, None, _number(value, where), None))
                    continue
                p_type, p_sf = _parse_key(partner, f"{where}[{partner}]")
                if p_sf != sf:
                    raise ThroughputError(f"{where}[{partner}]: a pair must have equal scale factors")
                if not (isinstance(value, list) and len(value) == 2):
                    raise ThroughputError(f"{where}[{partner}]: a pair entry must be [self, other]")
                rows.append((gpu_type, placement, job_type, sf, p_type,
                             _number(value[0], where), _number(value[1], where)))
    frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
    return normalise_frame(frame)


def normalise_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Fix dtypes and row order so that written tables are stable."""
    frame = frame.astype({"gpu_type": "string", "placement": "string", "job_type": "string",
                          "scale_factor": "int16", "partner_job_type": "string",
                          "steps_per_s": "float64", "partner_steps_per_s": "float64"}
                         | ({"workloads": "string"} if "workloads" in frame else {}))
    order = frame["partner_job_type"].isna().map({True: 0, False: 1})
    frame = frame.assign(_alone=order).sort_values(
        ["gpu_type", "placement", "job_type", "scale_factor", "_alone", "partner_job_type"], kind="stable")
    return frame.drop(columns="_alone").reset_index(drop=True)
