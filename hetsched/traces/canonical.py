"""hetsched's canonical job table: one row per job, CSV (exact float round trip) or Parquet."""

from __future__ import annotations

import csv
import difflib
import io
import logging
import math
from pathlib import Path
from typing import Iterable, Iterator

from hetsched.errors import TraceError
from hetsched.model.jobs import JOB_FIELDS, AdaptationMode, Job
from hetsched.traces.fields import Where, as_flag, as_float, as_int, as_job_type, build, decode

REQUIRED = ("job_id", "arrival_time_s", "job_type", "scale_factor", "total_steps")
_FLOATS = ("arrival_time_s", "total_steps", "priority_weight", "slo_factor", "duration_s", "cpu_demand",
           "mem_demand_gb")
_MODES = {m.value: m for m in AdaptationMode}
log = logging.getLogger(__name__)


def _row_to_job(row: dict[str, str], where: Where, known: frozenset[str] | None) -> Job:
    kwargs: dict = {}
    for name, raw in row.items():
        if name not in JOB_FIELDS or raw is None:
            continue
        raw = raw.strip() if name not in ("command",) else raw
        if raw == "":
            if name in REQUIRED:
                raise where.error(name, "is required but empty")
            continue
        if name == "job_id":
            kwargs[name] = as_int(raw, name, where)
        elif name == "scale_factor":
            kwargs[name] = as_int(raw, name, where, minimum=1)
        elif name == "job_type":
            kwargs[name] = as_job_type(raw, name, where, known)
        elif name == "needs_data_dir":
            kwargs[name] = as_flag({"True": "1", "False": "0"}.get(raw, raw), name, where)
        elif name == "mode":
            if raw not in _MODES:
                raise where.error(name, f"expected one of {', '.join(_MODES)}, got {raw!r}")
            kwargs[name] = _MODES[raw]
        elif name in _FLOATS:
            kwargs[name] = as_float(raw, name, where)
        else:
            kwargs[name] = raw
    return build(where, Job, **kwargs)


def _close(column: str) -> list[str]:
    """The job field a column name probably meant: one it begins, else the nearest spelling."""
    name = column.strip().lower()
    starts = [f for f in JOB_FIELDS if name and f.startswith(name)]
    return starts or difflib.get_close_matches(name, JOB_FIELDS, 1, 0.6)


def _check_header(header: Iterable[str], source: str) -> None:
    header = list(header)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise TraceError(f"header lacks required columns {missing} (required: {', '.join(REQUIRED)})",
                         source=source, line=1)
    unknown = [c for c in header if c not in JOB_FIELDS]
    if unknown:                             # a misspelt field ('slo', 'priority') would otherwise vanish unseen
        hints = [f"{c!r} (did you mean {close[0]!r}?)" if (close := _close(c)) else repr(c) for c in unknown]
        log.warning("%s: ignoring columns that are not job fields: %s", source, ", ".join(hints))


def _check_unique(jobs: list[Job], source: str) -> list[Job]:
    seen: set[int] = set()
    for i, j in enumerate(jobs):
        if j.job_id in seen:
            raise TraceError(f"duplicate job id {j.job_id}", source=source, line=i + 2, field="job_id")
        seen.add(j.job_id)
    return jobs


def parse_canonical_csv(data: bytes | str, source: str = "<trace>",
                        known_job_types: frozenset[str] | None = None) -> list[Job]:
    """Jobs of a canonical CSV (header required; unknown extra columns are ignored, with a warning)."""
    text = decode(data, source)
    if not text.strip():
        return []
    try:
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        header = next(reader)
        _check_header(header, source)
        jobs = []
        for row in reader:
            where = Where(source, reader.line_num)
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise where.error(None, f"expected {len(header)} comma-separated fields, got {len(row)}")
            jobs.append(_row_to_job(dict(zip(header, row)), where, known_job_types))
    except csv.Error as exc:
        raise TraceError(f"malformed CSV ({exc})", source=source, line=reader.line_num) from None
    return _check_unique(jobs, source)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, AdaptationMode):
        return value.value
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


def _rows(jobs: Iterable[Job]) -> Iterator[list[str]]:
    for j in jobs:
        yield [_cell(getattr(j, name)) for name in JOB_FIELDS]


def format_canonical_csv(jobs: Iterable[Job]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(JOB_FIELDS)
    writer.writerows(_rows(jobs))
    return buffer.getvalue()


def read_canonical_parquet(path: str | Path, known_job_types: frozenset[str] | None = None) -> list[Job]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = str(path)
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"not a readable Parquet file ({exc})", source=source) from None
    _check_header(table.column_names, source)
    jobs = []
    for i, row in enumerate(table.to_pylist()):
        cells = {k: _cell(v) for k, v in row.items()}
        jobs.append(_row_to_job(cells, Where(source, i + 2), known_job_types))
    return _check_unique(jobs, source)


def write_canonical_parquet(jobs: Iterable[Job], path: str | Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    jobs = list(jobs)
    columns = {}
    for name in JOB_FIELDS:
        values = [getattr(j, name) for j in jobs]
        if name == "mode":
            values = [v.value for v in values]
        if name in _FLOATS:
            values = [None if v is None else float(v) for v in values]
        columns[name] = values
    pq.write_table(pa.table(columns), path, compression="zstd")


def write_canonical_frame(frame, path: str | Path) -> None:
    """Jobs given as columns (a subset of the canonical ones; the rest take the `Job` defaults) to `.parquet`
    or `.csv`, without building `Job` objects: how large production traces are written."""
    from dataclasses import MISSING, fields

    from hetsched.model.jobs import Job

    path = Path(path)
    out = frame.copy()
    for f in fields(Job):
        if f.name not in out.columns:
            if f.default is MISSING:
                raise TraceError(f"cannot write jobs without the column {f.name!r}", source=str(path))
            default = f.default.value if isinstance(f.default, AdaptationMode) else f.default
            out[f.name] = [default] * len(out)
    out = out[list(JOB_FIELDS)]
    if path.suffix.lower() not in (".parquet", ".csv"):
        raise TraceError("columns can be written as .parquet or .csv only", source=str(path))
    from hetsched.io.atomic import replacing

    with replacing(path) as tmp:
        if path.suffix.lower() == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pandas(out, preserve_index=False), tmp, compression="zstd")
        else:
            out["needs_data_dir"] = out["needs_data_dir"].map({True: "1", False: "0"})
            out.to_csv(tmp, index=False, lineterminator="\n")
