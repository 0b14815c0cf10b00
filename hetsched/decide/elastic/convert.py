"""Convert Sia's artifact files (per-application trace folders, workload CSVs) into the project's own tables.

The artifact keeps one folder per application with a file per GPU type (`placements-<type>.csv`,
`scalability-<type>.csv`) and a file per batch size (`validation-<B>.csv`). The project keeps two tidy tables:
`step_times` (one row per measured configuration) and `gradient_stats` (one row per epoch and batch size), and one
`workloads` table of the paper's job traces. GPU types take the names of docs/rules.md#elastic-types.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from hetsched.errors import HetschedError

# The artifact names GPU types by the cloud or machine it measured them on (docs/rules.md#elastic-types).
GPU_TYPES = {"aws": "t4", "azure": "v100", "dgx-ext": "a100", "dgx": "a100_small", "quad": "quadro", "rtx": "rtx"}
STEP_COLUMNS = ["app", "gpu_type", "source", "placement", "num_nodes", "num_replicas", "local_bsz",
                "step_s", "sync_s"]
STAT_COLUMNS = ["app", "batch_size", "epoch", "progress", "iteration", "grad_sqr", "grad_var"]
WORKLOAD_COLUMNS = ["trace", "workload", "name", "submit_s", "app", "num_replicas", "batch_size"]
TRACES = {"saturn": "helios", "philly": "philly", "newtrace": "newtrace"}
_SUFFIX = re.compile(r"^(placements|scalability)-(.+)\.csv$")


def convert_step_times(trace_root: Path) -> pd.DataFrame:
    """Every `placements-<type>.csv` and `scalability-<type>.csv` under `trace_root/<app>/` as one table."""
    frames = []
    for path in sorted(Path(trace_root).glob("*/*.csv")):
        match = _SUFFIX.match(path.name)
        if not match:
            continue
        kind, machine = match.groups()
        if machine not in GPU_TYPES:
            raise HetschedError(f"{path}: unknown machine {machine!r}; known: {', '.join(GPU_TYPES)}")
        raw = pd.read_csv(path)
        frame = pd.DataFrame({"app": path.parent.name, "gpu_type": GPU_TYPES[machine], "source": kind},
                             index=raw.index)
        if kind == "placements":
            digits = raw["placement"].astype(str)
            frame["placement"] = digits
            frame["num_nodes"] = digits.str.len()
            frame["num_replicas"] = digits.map(lambda p: sum(map(int, p)))
        else:
            frame["placement"] = ""
            frame["num_nodes"] = raw["num_nodes"]
            frame["num_replicas"] = raw["num_replicas"]
        frame["local_bsz"] = raw["local_bsz"]
        frame["step_s"] = raw["step_time"].astype(float)
        frame["sync_s"] = raw["sync_time"].astype(float)
        frames.append(frame[STEP_COLUMNS])
    if not frames:
        raise HetschedError(f"{trace_root}: no placements-<type>.csv or scalability-<type>.csv files")
    out = pd.concat(frames, ignore_index=True)
    out = out.astype({"num_nodes": np.int16, "num_replicas": np.int16, "local_bsz": np.int32})
    return out.sort_values(["app", "gpu_type", "source", "num_nodes", "num_replicas", "placement", "local_bsz"],
                           kind="stable").reset_index(drop=True)


def convert_gradient_stats(trace_root: Path) -> pd.DataFrame:
    """Every `validation-<B>.csv` as rows (app, batch size, epoch 0.., progress, iteration, grad_sqr, grad_var)."""
    frames = []
    for path in sorted(Path(trace_root).glob("*/validation-*.csv")):
        raw = pd.read_csv(path)
        frame = pd.DataFrame({"app": path.parent.name, "batch_size": int(path.stem.split("-")[1]),
                              "epoch": np.arange(len(raw), dtype=np.int16)}, index=raw.index)
        for col in STAT_COLUMNS[3:]:
            frame[col] = raw[col].astype(float)
        frames.append(frame)
    if not frames:
        raise HetschedError(f"{trace_root}: no validation-<B>.csv files")
    return pd.concat(frames, ignore_index=True).sort_values(["app", "batch_size", "epoch"]).reset_index(drop=True)


def read_sia_workload(path: Path, trace: str = "", workload: str = "") -> pd.DataFrame:
    """One of the artifact's workload CSVs (name,time,application,num_replicas,batch_size) as our columns."""
    raw = pd.read_csv(path)
    missing = {"name", "time", "application", "num_replicas", "batch_size"} - set(raw.columns)
    if missing:
        raise HetschedError(f"{path}: not a Sia workload: missing column(s) {', '.join(sorted(missing))}")
    return pd.DataFrame({"trace": trace, "workload": workload or Path(path).stem, "name": raw["name"].astype(str),
                         "submit_s": raw["time"].astype(float), "app": raw["application"].astype(str),
                         "num_replicas": raw["num_replicas"].astype(np.int16),
                         "batch_size": raw["batch_size"].astype(np.int32)})[WORKLOAD_COLUMNS]


def convert_workloads(workload_root: Path) -> pd.DataFrame:
    """The paper's three traces (Helios = the artifact's `saturn`, Philly, the new trace) as one table."""
    frames = []
    for folder, trace in TRACES.items():
        paths = sorted(Path(workload_root, folder).glob("workload-*.csv"), key=lambda p: int(p.stem.split("-")[1]))
        frames += [read_sia_workload(p, trace, p.stem.replace("workload", trace)) for p in paths]
    if not frames:
        raise HetschedError(f"{workload_root}: none of {', '.join(TRACES)} holds workload-<n>.csv files")
    return pd.concat(frames, ignore_index=True)


def convert_all(sia_root: Path, out_dir: Path) -> dict[str, int]:
    """Write data/sia/{step_times,gradient_stats,workloads}.parquet from the artifact's `traces/` and `workloads/`."""
    from hetsched.io.atomic import replacing

    tables = {"step_times": convert_step_times(Path(sia_root) / "traces"),
              "gradient_stats": convert_gradient_stats(Path(sia_root) / "traces"),
              "workloads": convert_workloads(Path(sia_root) / "workloads")}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        with replacing(out_dir / f"{name}.parquet") as tmp:
            frame.to_parquet(tmp, index=False, compression="zstd")
    return {name: len(frame) for name, frame in tables.items()}
