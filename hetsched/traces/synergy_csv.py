"""Synergy's replay CSV `job_id,model_name,arrival_time_s,total_iterations,gpu_demand` (no header)."""

from __future__ import annotations

import re
from typing import Iterable

from hetsched.model.catalog import SYNERGY_MODELS
from hetsched.model.jobs import Job
from hetsched.traces.fields import Where, as_float, as_int, as_job_type, build, decode, numbered_lines, split_fields

FIELDS = ("job_id", "model_name", "arrival_time_s", "total_iterations", "gpu_demand")
SYNERGY_JOB_TYPES = frozenset(SYNERGY_MODELS)


def parse_synergy_csv(data: bytes | str, source: str = "<trace>",
                      known_job_types: frozenset[str] | None = SYNERGY_JOB_TYPES) -> list[Job]:
    """Jobs of a Synergy replay file; ids come from the file and must be unique."""
    jobs: list[Job] = []
    seen: set[int] = set()
    for number, line in numbered_lines(decode(data, source)):
        where = Where(source, number)
        f = split_fields(line, ",", FIELDS, where)
        job_id = as_int(f["job_id"], "job_id", where)
        if job_id in seen:
            raise where.error("job_id", f"duplicate job id {job_id}")
        seen.add(job_id)
        jobs.append(build(
            where, Job,
            job_id=job_id,
            job_type=as_job_type(f["model_name"], "model_name", where, known_job_types),
            arrival_time_s=as_float(f["arrival_time_s"], "arrival_time_s", where),
            total_steps=as_float(f["total_iterations"], "total_iterations", where),
            scale_factor=as_int(f["gpu_demand"], "gpu_demand", where, minimum=1),
        ))
    return jobs


def format_synergy_csv(jobs: Iterable[Job]) -> str:
    """The artifact's record format: whole-second arrivals print as integers, iterations as integers."""
    lines = []
    for j in jobs:
        arrival = j.arrival_time_s
        text = str(int(arrival)) if float(arrival).is_integer() else repr(float(arrival))
        lines.append(f"{j.job_id},{j.job_type},{text},{int(j.total_steps)},{j.scale_factor}")
    return "\n".join(lines) + ("\n" if lines else "")


_ROW = re.compile(r"^\s*\d+\s*,[^,]+,[^,]+,[^,]+,\s*\d+\s*$")


def looks_like_synergy_csv(first_line: str) -> bool:
    """True for a header-less five-field line starting with an integer id (the replay format)."""
    return bool(_ROW.match(first_line.rstrip("\r\n")))
