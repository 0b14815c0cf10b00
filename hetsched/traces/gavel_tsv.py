"""Gavel's 10-field tab-separated trace (docs/rules.md#trace-formats)."""

from __future__ import annotations

from typing import Iterable

from hetsched.model.catalog import GAVEL_JOB_TYPES
from hetsched.model.jobs import Job
from hetsched.traces.fields import (Where, as_flag, as_float, as_int, as_job_type, build, decode, numbered_lines,
                                    split_fields)

FIELDS = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps",
          "scale_factor", "priority_weight", "SLO", "arrival_time")


def parse_gavel_trace(data: bytes | str, source: str = "<trace>",
                      known_job_types: frozenset[str] | None = GAVEL_JOB_TYPES) -> list[Job]:
    """Jobs of a Gavel trace, with ids in line order."""
    jobs: list[Job] = []
    for number, line in numbered_lines(decode(data, source)):
        where = Where(source, number)
        f = split_fields(line, "\t", FIELDS, where)
        jobs.append(build(where, Job, job_id=len(jobs), **gavel_fields(f, where, known_job_types)))
    return jobs


def gavel_fields(f: dict[str, str], where: Where, known_job_types: frozenset[str] | None) -> dict:
    """Job fields from Gavel's ten columns, checked (Shockwave's layout repeats them)."""
    slo = as_float(f["SLO"], "SLO", where, minimum=None)
    if slo < 0 and slo != -1:
        raise where.error("SLO", f"must be -1 (none) or positive, got {f['SLO'].strip()!r}")
    return dict(
        job_type=as_job_type(f["job_type"], "job_type", where, known_job_types),
        command=f["command"], working_directory=f["working_directory"], num_steps_arg=f["num_steps_arg"],
        needs_data_dir=as_flag(f["needs_data_dir"], "needs_data_dir", where),
        total_steps=as_float(f["total_steps"], "total_steps", where),
        scale_factor=as_int(f["scale_factor"], "scale_factor", where, minimum=1),
        priority_weight=as_float(f["priority_weight"], "priority_weight", where),
        slo_factor=None if slo == -1 else slo,
        arrival_time_s=as_float(f["arrival_time"], "arrival_time", where),
    )


def format_gavel_trace(jobs: Iterable[Job]) -> str:
    """Gavel's format: integral steps and weight, SLO and arrival with six decimals."""
    lines = []
    for j in jobs:
        slo = -1.0 if j.slo_factor is None else j.slo_factor
        lines.append("\t".join([
            j.job_type, j.command, j.working_directory, j.num_steps_arg, "1" if j.needs_data_dir else "0",
            str(int(j.total_steps)), str(j.scale_factor), f"{j.priority_weight:.0f}"
            if float(j.priority_weight).is_integer() else repr(float(j.priority_weight)),
            f"{slo:f}", f"{j.arrival_time_s:f}",
        ]))
    return "".join(line + "\n" for line in lines)
