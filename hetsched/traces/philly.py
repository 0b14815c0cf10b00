"""Microsoft Philly's `cluster_job_log` (JSON, docs/rules.md#trace-formats), read the way Synergy's parser reads it.

Each job: `jobid`, `user`, `vc`, `submitted_time` ("YYYY-mm-dd HH:MM:SS") and `attempts`, each with
`start_time`, `end_time` and `detail: [{"ip", "gpus": [...]}]`. Time 0 is the earliest submission. With
`sum_attempts` a job's duration is the sum of its valid attempts (GPU count from the attempts); jobs outside
(10^1.5, 10^4) minutes are dropped, as in Synergy. As jobs (`--from philly`), arrivals and durations are the
trace's and models follow Synergy's class split (the trace has no models): the artifact's
`--philly_arrival --no_exp` mode, optionally limited to its 2400-3000 h slice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from hetsched.errors import TraceError
from hetsched.model.jobs import Job
from hetsched.traces.fields import decode

MIN_S, MAX_S = 60 * 10 ** 1.5, 60 * 10 ** 4
POWERS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class PhillyRecord:
    """One usable job of the trace."""

    jobid: str
    user: str
    vc: str
    arrival_s: float
    duration_s: float
    gpus: int
    status: str = ""


def _time(value, where: str, field: str) -> datetime | None:
    if not isinstance(value, str):
        raise TraceError(f"expected a time string, got {value!r}", source=where, field=field)
    if "None" in value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        raise TraceError(f"expected 'YYYY-mm-dd HH:MM:SS', got {value!r}", source=where, field=field) from None


def parse_philly_records(data: bytes | str, source: str = "<cluster_job_log>", *, multi_gpu: bool = False,
                         exponential: bool = True) -> list[PhillyRecord]:
    """Usable jobs in trace order. `exponential=False` keeps GPU counts in {1,2,4,8,16} only (Synergy's
    `--no_exp`); with it, other counts become 1 under `multi_gpu`. Without `multi_gpu` every job has 1 GPU."""
    text = decode(data, source)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"not valid JSON ({exc.msg})", source=source, line=exc.lineno) from None
    if not isinstance(raw, list):
        raise TraceError("expected a JSON array of jobs", source=source, line=1)
    jobs = []
    for i, j in enumerate(raw):
        where = f"{source}: job #{i}"
        if not isinstance(j, dict):
            raise TraceError("expected an object", source=where)
        for key in ("jobid", "submitted_time", "attempts"):
            if key not in j:
                raise TraceError("missing", source=where, field=key)
        if not isinstance(j["attempts"], list):
            raise TraceError("expected a list", source=where, field="attempts")
        if j["attempts"]:
            jobs.append((where, j))
    if not jobs:
        return []
    submitted = [_time(j["submitted_time"], w, "submitted_time") for w, j in jobs]
    if any(t is None for t in submitted):
        raise TraceError("a job has no submission time", source=source, field="submitted_time")
    t0 = min(submitted)
    out = []
    for (where, j), sub in zip(jobs, submitted):
        total, gpus, attempts = 0.0, 0, j["attempts"]
        for k, a in enumerate(attempts):
            if not isinstance(a, dict) or "start_time" not in a or "end_time" not in a:
                raise TraceError("an attempt needs start_time and end_time", source=where,
                                 field=f"attempts[{k}]")
            start, end = _time(a["start_time"], where, "start_time"), _time(a["end_time"], where, "end_time")
            if start is None or end is None:
                continue
            detail = a.get("detail", [])
            if not isinstance(detail, list) or not all(isinstance(d, dict) for d in detail):
                raise TraceError("expected a list of {ip, gpus}", source=where, field=f"attempts[{k}].detail")
            count = sum(len(d.get("gpus", [])) for d in detail)
            if multi_gpu and count > 16:
                continue
            if multi_gpu and count not in POWERS:
                if not exponential:
                    continue
                count = 1
            seconds = (end - start).total_seconds()
            if seconds <= 0 or count <= 0:
                continue
            total += seconds
            gpus = count
            if k == len(attempts) - 1 and MIN_S < total < MAX_S:
                out.append(PhillyRecord(str(j["jobid"]), str(j.get("user", "")), str(j.get("vc", "")),
                                        (sub - t0).total_seconds(), total, gpus if multi_gpu else 1,
                                        str(j.get("status", ""))))
    return out


def read_philly_records(path: str | Path, **options) -> list[PhillyRecord]:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read ({exc.strerror})", source=str(path)) from None
    return parse_philly_records(data, str(path), **options)


def philly_records(data: bytes | str, source: str = "<cluster_job_log>"):
    """The usable jobs (as Synergy's parser defines them, GPU counts 1-16 powers of two) as production records
    (hetsched.traces.production), for `--job-types table`."""
    import pandas as pd

    from hetsched.traces.production import records_frame

    rs = parse_philly_records(data, source, multi_gpu=True, exponential=False)
    return records_frame(arrival_s=pd.Series([r.arrival_s for r in rs], dtype=float),
                         duration_s=[r.duration_s for r in rs], gpus=[r.gpus for r in rs],
                         user=[r.user for r in rs], vc=[r.vc for r in rs], status=[r.status for r in rs],
                         gpu_model=[""] * len(rs))


def parse_philly_trace(data: bytes | str, source: str = "<cluster_job_log>", *, multi_gpu: bool = True,
                       split: tuple[float, float, float] = (20, 70, 10), ratio: int = 3,
                       window_h: tuple[float, float] | None = None, max_jobs: int | None = None,
                       mapping=None, filters=None, report=None) -> list[Job]:
    """Jobs with the trace's arrivals, durations and GPU counts; models by Synergy's class split.

    `window_h=(2400, 3000), max_jobs=8000` is the artifact's Philly figure setting (arrivals re-based to 0).
    With a `mapping` (hetsched.traces.production.JobMapping) job types come from a throughput table instead,
    and `filters` apply, as for the other production traces.
    """
    if mapping is not None or filters is not None:
        from hetsched.traces.production import convert
        return convert(philly_records(data, source), mapping=mapping, filters=filters, report=report)
    from hetsched.model.profiles import load_sensitivity
    from hetsched.traces.generators.synergy import ClassSplit

    records = parse_philly_records(data, source, multi_gpu=multi_gpu, exponential=False)
    if window_h is not None:
        lo, hi = window_h[0] * 3600, window_h[1] * 3600
        records = [r for r in records if lo < r.arrival_s < hi]
    if max_jobs is not None:
        records = records[:max_jobs]
    records.sort(key=lambda r: r.arrival_s)
    if not records:
        return []
    base = records[0].arrival_s if window_h is not None else 0.0
    table = load_sensitivity(ratio)
    classes = ClassSplit(split, table)
    jobs = []
    for i, r in enumerate(records):
        model = classes.next()
        iterations = max(1, int(r.duration_s / table[model].iteration_time_s))
        jobs.append(Job(job_id=i, arrival_time_s=r.arrival_s - base, job_type=model, scale_factor=r.gpus,
                        total_steps=iterations, duration_s=r.duration_s, entity=r.vc or None,
                        user=r.user, vc=r.vc))
    return jobs

