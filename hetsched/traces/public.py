"""Readers of public GPU-cluster traces: each turns its file into records (hetsched.traces.production).

Schemas, from each trace's published README:
- `helios` -- SenseTime Helios `cluster_log.csv` (one per cluster): `job_id, user, vc, jobname, gpu_num, cpu_num,
  node_num, state, submit_time, start_time, end_time, duration, queue`; times `YYYY-mm-dd HH:MM:SS`.
- `acme` -- Shanghai AI Lab Acme `trace_seren.csv` / `trace_kalos.csv`: `job_id, user, node_num, gpu_num, cpu_num,
  mem_per_pod_GB, shared_mem_per_pod, type, state, submit_time, start_time, end_time, fail_time, stop_time,
  duration, queue, gpu_time`. No virtual clusters.
- `openb` -- Alibaba GPU 2023 pod list: `name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase,
  creation_time, deletion_time, scheduled_time` (seconds). Arrival = creation; duration = deletion - scheduled
  (pods never scheduled, the `Pending` ones, have none; every phase has a deletion time, so `Running` pods
  ran to their deletion too, median 0.2 h in the public file; those `Running` at the list's last deletion time
  were cut off by the snapshot, their durations lower bounds: 32 GPU pods of `openb_pod_list_gpuspec33.csv`, up to
  145 days long, counted as `censored`);
  `gpu_spec` = the allowed GPU models. No users or virtual clusters.
- `alibaba2026` -- Alibaba spot GPU 2026 `job_info_df.csv`: `job_name, organization, gpu_model, cpu_request,
  gpu_request, worker_num, submit_time, duration, job_type`. GPUs = gpu_request x worker_num; vc = organization;
  status = job_type (`HP` or `Spot`); the job is pinned to its `gpu_model`.
- `pai2020` -- Alibaba PAI 2020 `pai_task_table.csv` (no header): `job_name, task_name, inst_num, status,
  start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type`; a job is its tasks: GPUs = sum of inst_num x
  plan_gpu / 100 (rounded up), arrival = first task start, duration = last task end - arrival, pinned to the
  tasks' gpu_type unless `MISC`. Users come from `pai_job_table.csv` (`job_name, inst_id, user, status,
  start_time, end_time`) beside it, when present.
Every time column accepts seconds or `YYYY-mm-dd HH:MM:SS`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hetsched.errors import TraceError
from hetsched.traces.production import RECORD, csv_chunks, numbers, pinned, records_frame, require_columns, text, times

PAI_TASK = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem",
            "plan_gpu", "gpu_type")
PAI_JOB = ("job_name", "inst_id", "user", "status", "start_time", "end_time")


_MAX_COUNT = 2 ** 31 - 1


def _counts(chunk, column, first, source) -> np.ndarray:
    values = numbers(chunk, column, first, source, minimum=0)
    bad = (values != np.floor(values)) | (values > _MAX_COUNT)      # a count past int64 cast to garbage
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceError(f"expected a whole number of GPUs up to {_MAX_COUNT}, got {chunk[column].iloc[i]!r}",
                         source=source, line=first + i, field=column)
    return values.astype(np.int64)


def _duration(chunk, first, source, start: str = "start_time", end: str = "end_time") -> np.ndarray:
    """The `duration` column when present (seconds), else end - start; NaN when unknown."""
    if "duration" in chunk.columns:
        d = numbers(chunk, "duration", first, source, empty_ok=True, minimum=0)
        if not np.isnan(d).all() or start not in chunk.columns:
            return d
    if start in chunk.columns and end in chunk.columns:
        return times(chunk, end, first, source) - times(chunk, start, first, source)
    return np.full(len(chunk), np.nan)


def _slurm_like(data, source: str, what: str, vc_column: str | None) -> pd.DataFrame:
    frames = []
    for first, c in csv_chunks(data, source):
        require_columns(c, ("gpu_num", "submit_time"), source, what)
        if "duration" not in c.columns and not {"start_time", "end_time"} <= set(c.columns):
            raise TraceError(f"not a {what} file: it has neither 'duration' nor 'start_time' and 'end_time'",
                             source=source, line=1)
        frames.append(records_frame(
            arrival_s=times(c, "submit_time", first, source, empty_ok=False),
            duration_s=_duration(c, first, source), gpus=_counts(c, "gpu_num", first, source),
            user=text(c, "user"), vc=text(c, vc_column) if vc_column else "", status=text(c, "state"),
            gpu_model=""))
    return _gather(frames)


def helios_records(data, source: str = "<cluster_log.csv>") -> pd.DataFrame:
    return _slurm_like(data, source, "Helios cluster_log.csv", "vc")


def acme_records(data, source: str = "<trace_seren.csv>") -> pd.DataFrame:
    return _slurm_like(data, source, "Acme trace", None)


def openb_records(data, source: str = "<openb_pod_list.csv>") -> pd.DataFrame:
    frames = []
    for first, c in csv_chunks(data, source):
        require_columns(c, ("name", "num_gpu"), source, "openb pod list")
        lacking = [k for k in ("creation_time", "deletion_time", "scheduled_time") if k not in c.columns]
        if lacking:
            raise TraceError(f"this openb pod list has no {', '.join(lacking)}: it lists resources only (as "
                             f"openb_pod_list_multigpu50.csv does), so it cannot be replayed as a trace",
                             source=source, line=1)
        scheduled = times(c, "scheduled_time", first, source)
        deleted = times(c, "deletion_time", first, source)
        gpus = _counts(c, "num_gpu", first, source)
        status = text(c, "pod_phase")
        frames.append(records_frame(
            arrival_s=times(c, "creation_time", first, source, empty_ok=False), duration_s=deleted - scheduled,
            gpus=gpus, user="", vc="", status=status, gpu_model=pinned(text(c, "gpu_spec")),
            part_gpu=_part_gpu(c, gpus, first, source), censored=(status == "Running").to_numpy()
        ).assign(deleted=deleted))
    frame = _gather(frames)
    if "deleted" in frame:          # still Running at the list's last deletion time: cut off by the snapshot
        deleted = frame.pop("deleted").to_numpy(dtype=float)
        frame["censored"] &= deleted == (np.nanmax(deleted) if np.isfinite(deleted).any() else np.inf)
    return frame


def _part_gpu(chunk, gpus: np.ndarray, first: int, source: str) -> np.ndarray:
    """openb pods with GPUs that asked for less than 1000 milli-GPUs each (only cells other than "1000" are
    parsed: a million-row list is mostly whole GPUs)."""
    if "gpu_milli" not in chunk.columns:
        return np.zeros(len(chunk), bool)
    cells = chunk["gpu_milli"].str.strip()
    ask = ((cells != "1000") & (gpus > 0)).to_numpy()
    out = np.zeros(len(chunk), bool)
    if ask.any():
        rows = np.flatnonzero(ask)
        out[rows] = numbers(chunk, "gpu_milli", first, source, minimum=0, rows=rows) < 1000
    return out


def alibaba2026_records(data, source: str = "<job_info_df.csv>") -> pd.DataFrame:
    frames = []
    for first, c in csv_chunks(data, source):
        require_columns(c, ("job_name", "gpu_request", "worker_num", "submit_time", "duration"), source,
                        "Alibaba 2026 job_info_df.csv")
        gpus = numbers(c, "gpu_request", first, source, minimum=0) * numbers(c, "worker_num", first, source,
                                                                            minimum=0)
        frames.append(records_frame(
            arrival_s=times(c, "submit_time", first, source, empty_ok=False),
            duration_s=numbers(c, "duration", first, source, empty_ok=True, minimum=0),
            gpus=np.ceil(gpus).astype(np.int64), user="", vc=text(c, "organization"), status=text(c, "job_type"),
            gpu_model=pinned(text(c, "gpu_model")), part_gpu=gpus < np.ceil(gpus)))
    return _gather(frames)


def _headerless(data, source: str, names: tuple[str, ...]):
    """Chunks of a PAI table, which ships without a header (a header line, if present, is skipped)."""
    for first, c in csv_chunks(data, source, names=names):
        if first == 1 and len(c) and c.iloc[0, 0].strip() == names[0]:
            c, first = c.iloc[1:], 2
        yield first, c


def pai2020_records(data, source: str = "<pai_task_table.csv>", job_table: Path | None = None) -> pd.DataFrame:
    parts = []
    for first, c in _headerless(data, source, PAI_TASK):
        plan = numbers(c, "plan_gpu", first, source, empty_ok=True, minimum=0)
        parts.append(pd.DataFrame({
            "job_name": text(c, "job_name").to_numpy(),
            "gpu": _counts(c, "inst_num", first, source) * np.nan_to_num(plan) / 100.0,
            "start": times(c, "start_time", first, source), "end": times(c, "end_time", first, source),
            "status": text(c, "status").to_numpy(), "model": pinned(text(c, "gpu_type"), ignore=("MISC",)).to_numpy()}))
    if not parts:
        return _gather([])
    tasks = pd.concat(parts, ignore_index=True)
    if (tasks["job_name"] == "").any():
        raise TraceError("a task has an empty job_name", source=source, field="job_name")
    jobs = tasks.groupby("job_name", sort=False).agg(
        gpu=("gpu", "sum"), start=("start", "min"), end=("end", "max"), status=("status", "first"),
        model=("model", lambda m: "|".join(dict.fromkeys(x for v in m for x in v.split("|") if x))))
    users = _pai_users(job_table, jobs.index) if job_table is not None else ""
    return records_frame(arrival_s=jobs["start"].to_numpy(), duration_s=(jobs["end"] - jobs["start"]).to_numpy(),
                         gpus=np.ceil(jobs["gpu"].to_numpy() - 1e-9).astype(np.int64), user=users, vc="",
                         status=jobs["status"].to_numpy(), gpu_model=jobs["model"].to_numpy(),
                         part_gpu=jobs["gpu"].to_numpy() < np.ceil(jobs["gpu"].to_numpy() - 1e-9) - 1e-9)


def _pai_users(path: Path, names: pd.Index) -> np.ndarray:
    source = str(path)
    frames = [pd.DataFrame({"job_name": text(c, "job_name").to_numpy(), "user": text(c, "user").to_numpy()})
              for _, c in _headerless(Path(path), source, PAI_JOB)]
    if not frames:
        return np.full(len(names), "", object)
    users = pd.concat(frames).drop_duplicates("job_name").set_index("job_name")["user"]
    return users.reindex(names).fillna("").to_numpy()


def _gather(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return records_frame(**{c: np.array([], dtype=float if c.endswith("_s") else object) for c in RECORD}
                             | {"gpus": np.array([], np.int64)})
    return pd.concat(frames, ignore_index=True)


READERS = {"helios": helios_records, "acme": acme_records, "openb": openb_records,
           "alibaba2026": alibaba2026_records, "pai2020": pai2020_records}
