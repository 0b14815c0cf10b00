"""Shockwave's 12-field tab-separated trace with adaptation modes (docs/rules.md#trace-formats)."""

from __future__ import annotations

from typing import Iterable

from hetsched.model.catalog import GAVEL_JOB_TYPES
from hetsched.model.jobs import AdaptationMode, Job
from hetsched.traces.fields import Where, as_float, build, decode, numbered_lines, split_fields
from hetsched.traces.gavel_tsv import gavel_fields

FIELDS = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps",
          "scale_factor", "mode", "priority_weight", "SLO", "duration", "arrival_time")
_MODES = {m.value: m for m in AdaptationMode}


def parse_shockwave_trace(data: bytes | str, source: str = "<trace>",
                          known_job_types: frozenset[str] | None = GAVEL_JOB_TYPES) -> list[Job]:
    """Jobs of a Shockwave trace, with ids in line order."""
    jobs: list[Job] = []
    for number, line in numbered_lines(decode(data, source)):
        where = Where(source, number)
        f = split_fields(line, "\t", FIELDS, where)
        mode = f["mode"].strip()
        if mode not in _MODES:
            raise where.error("mode", f"expected one of {', '.join(_MODES)}, got {mode!r}")
        jobs.append(build(where, Job, job_id=len(jobs), mode=_MODES[mode],
                          duration_s=as_float(f["duration"], "duration", where),
                          **gavel_fields(f, where, known_job_types)))
    return jobs


def _number(value: float) -> str:
    """Integral values as integers (as the artifact writes durations and arrivals), others in full."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def format_shockwave_trace(jobs: Iterable[Job]) -> str:
    """Shockwave's layout: Gavel's ten fields with the mode after the scale factor, then duration and arrival."""
    lines = []
    for j in jobs:
        slo = -1.0 if j.slo_factor is None else j.slo_factor
        duration = j.duration_s if j.duration_s is not None else 0
        lines.append("\t".join([
            j.job_type, j.command, j.working_directory, j.num_steps_arg, "1" if j.needs_data_dir else "0",
            str(int(j.total_steps)), str(j.scale_factor), j.mode.value, _number(j.priority_weight), f"{slo:f}",
            _number(duration), _number(j.arrival_time_s),
        ]))
    return "".join(line + "\n" for line in lines)


def looks_like_shockwave_trace(first_line: str) -> bool:
    """A line with Shockwave's 12 tab-separated fields (Gavel's traces have 10)."""
    return len(first_line.rstrip("\r\n").split("\t")) == len(FIELDS)
