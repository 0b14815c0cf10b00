"""A trace read a chunk of rows at a time (`hetsched submit`): memory bounded by the chunk whatever the file's
size, and the first jobs on their way while the rest is read.

The text formats are cut between rows (a canonical CSV never inside a quoted field) and each chunk goes through
the format's own parser, so a bad row is reported at its line in the file, as `read_trace` reports it. Jobs
numbered by their row (Gavel's and Shockwave's traces) keep their numbers across chunks; explicit ids (canonical
CSV, Synergy's CSV) are checked unique within each chunk only (a set of every id would grow with the file). Other
formats (Parquet, the production traces) are read
whole by their readers. A path that is not a regular file (a FIFO, /dev/zero) is refused before it is read.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path
from typing import Iterator

from hetsched.errors import TraceError
from hetsched.model.jobs import Job
from hetsched.traces.formats import _get, infer_format, read_trace

CHUNK_ROWS = 2000
NUMBERED = ("gavel", "shockwave")        # job ids are row numbers
EXPLICIT_IDS = ("csv", "synergy")
HEADER = ("csv",)


def regular_file(path: str | Path) -> Path:
    """`path`, if it names a regular file (links followed); else a `TraceError` saying what it is."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise TraceError(f"cannot read ({exc.strerror})", source=str(path)) from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
        raise TraceError(f"is {kind}, not a trace file", source=str(path))
    return Path(path)


def _row_chunks(f, header: bool, quoted: bool, rows: int) -> Iterator[tuple[bytes, int]]:
    """(chunk, line number of its first row) with at most `rows` rows each; the header line, if any, opens every
    chunk. With `quoted`, a chunk ends only where no double-quoted field is open."""
    head = f.readline() if header else b""
    first = 2 if header else 1
    lines, number, open_quote = [], first, False
    for line in f:
        lines.append(line)
        number += 1
        if quoted and line.count(b'"') % 2:
            open_quote = not open_quote
        if len(lines) >= rows and not open_quote:
            yield head + b"".join(lines), first
            first, lines = number, []
    if lines or (head and first == 2):
        yield head + b"".join(lines), first


def stream_trace(path: str | Path, fmt: str | None = None, rows: int = CHUNK_ROWS) -> Iterator[Job]:
    """The jobs of a trace file, in order, read `rows` rows at a time (see the module)."""
    source = str(path)
    name = fmt or infer_format(regular_file(path))
    spec = _get(name, source)
    if spec.read_file is not None or name not in (*NUMBERED, *EXPLICIT_IDS):
        yield from read_trace(path, name)
        return
    header = name in HEADER
    count = 0
    with open(path, "rb") as f:
        for chunk, first in _row_chunks(f, header, quoted=header, rows=rows):
            shift = first - (2 if header else 1)
            try:
                jobs = spec.parse(chunk, source=source)
            except TraceError as exc:
                raise exc.shifted(shift) from None
            for job in jobs:
                yield dataclasses.replace(job, job_id=job.job_id + count) if name in NUMBERED else job
            count += len(jobs)
