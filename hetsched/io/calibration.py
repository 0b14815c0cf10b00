"""A runtime's measured fixed costs as simulator parameters (docs/rules.md#lease-start).

`hetsched calibrate` writes the file from a running scheduler's figures; `hetsched simulate --calibration FILE`
(or `calibrated_config`) reads it. The file is JSON:

    {"format": "hetsched-calibration/1", "lease_start_s": 0.61, "lease_starts": 212, "fixed_rounds": true,
     "over_deadline": false, "restart_s": 0.02, "restarts": 140, "rounds": 95}

The simulator takes `lease_start_s` (a new lease's mean wall time from its round's plan to its first step, R57),
`fixed_rounds` (the runtime's wall-clock rounds, R58) and `over_deadline` (off: the runtime runs every step of an
adaptive job, R55); the rest is kept for the record.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from hetsched.errors import HetschedError
from hetsched.io.atomic import write_text

FORMAT = "hetsched-calibration/1"


def calibration_of(figures: dict) -> dict:
    """The file's content from a scheduler's figures (`runtime.launch.status_figures`)."""
    if not figures.get("lease_starts"):
        raise HetschedError("calibrate: no lease has started a job yet; calibrate after a run (leases that "
                            "reported steps)")
    return {"format": FORMAT, "lease_start_s": float(figures["mean_lease_start_s"]),
            "lease_starts": int(figures["lease_starts"]), "fixed_rounds": True, "over_deadline": False,
            "restart_s": float(figures.get("mean_restart_s", 0.0)), "restarts": int(figures.get("restarts", 0)),
            "rounds": int(figures.get("rounds", 0))}


def write_calibration(path: str | Path, figures: dict) -> dict:
    out = calibration_of(figures)
    write_text(path, json.dumps(out, indent=1) + "\n")
    return out


def read_calibration(path: str | Path) -> dict:
    """The file's content; a clear error for a file that is not one."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise HetschedError(f"calibration {path}: cannot read it ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise HetschedError(f"calibration {path}: not a {FORMAT} file (write one with `hetsched calibrate`)")
    value = data.get("lease_start_s")
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise HetschedError(f"calibration {path}: lease_start_s must be a non-negative number, got {value!r}")
    return data


def calibrated_config(config, calibration: dict | str | Path):
    """`config` (a SimulationConfig) with the runtime's measured lease start and, unless the file says
    otherwise, its fixed rounds and, for adaptive jobs, no over-deadline completion (the runtime runs every
    step)."""
    data = read_calibration(calibration) if isinstance(calibration, (str, Path)) else calibration
    over_deadline = bool(data.get("over_deadline", False)) or not config.dynamic_adaptation
    return replace(config, lease_start_s=float(data["lease_start_s"]),
                   fixed_rounds=bool(data.get("fixed_rounds", True)), over_deadline=over_deadline)
