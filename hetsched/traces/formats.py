"""Trace formats by name and extension, and `read_trace`/`write_trace` over them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    import pandas as pd

from hetsched.errors import TraceError
from hetsched.io.atomic import replacing, write_text
from hetsched.model.jobs import Job
from hetsched.traces.canonical import (format_canonical_csv, parse_canonical_csv, read_canonical_parquet,
                        write_canonical_parquet)
from hetsched.traces.gavel_tsv import format_gavel_trace, parse_gavel_trace
from hetsched.traces.keeps import Kept, check_write
from hetsched.traces.shockwave_tsv import format_shockwave_trace, looks_like_shockwave_trace, parse_shockwave_trace
from hetsched.traces.philly import parse_philly_trace
from hetsched.traces.production import convert, convert_frame
from hetsched.traces.public import READERS
from hetsched.traces.synergy_csv import format_synergy_csv, looks_like_synergy_csv, parse_synergy_csv


@dataclass(frozen=True)
class TraceFormat:
    """A named trace format with its reader and (optional) writer."""

    name: str
    extensions: tuple[str, ...]
    parse: Callable[..., list[Job]] | None = None      # bytes/str -> jobs
    format: Callable[[Iterable[Job]], str] | None = None
    read_file: Callable[..., list[Job]] | None = None  # binary formats read a path
    write_file: Callable[[Iterable[Job], Path], None] | None = None
    read_frame: Callable[..., "pd.DataFrame"] | None = None   # production traces: jobs as canonical columns


def _production(name: str) -> TraceFormat:
    """A public production trace (hetsched.traces.public): records, then the seeded mapping to jobs.
    Options: `mapping` (JobMapping), `filters` (Filters), `report` (called with the Conversion)."""
    reader = READERS[name]

    def parse(data, source: str = f"<{name}>", mapping=None, filters=None, report=None, **options):
        return convert(reader(data, source, **options), mapping=mapping, filters=filters, report=report)

    def records(path, options):
        path = Path(path)
        if name == "pai2020" and "job_table" not in options and (path.parent / "pai_job_table.csv").exists():
            options["job_table"] = path.parent / "pai_job_table.csv"
        return reader(path, str(path), **options)

    def read_file(path, mapping=None, filters=None, report=None, **options):
        return convert(records(path, options), mapping=mapping, filters=filters, report=report)

    def read_frame(path, mapping=None, filters=None, report=None, **options):
        return convert_frame(records(path, options), mapping=mapping, filters=filters, report=report)

    return TraceFormat(name, (), parse, read_file=read_file, read_frame=read_frame)


PRODUCTION_FORMATS = ("philly", *READERS)

FORMATS: dict[str, TraceFormat] = {f.name: f for f in (
    TraceFormat("gavel", (".trace",), parse_gavel_trace, format_gavel_trace),
    TraceFormat("shockwave", (), parse_shockwave_trace, format_shockwave_trace),
    TraceFormat("synergy", (), parse_synergy_csv, format_synergy_csv),
    TraceFormat("philly", (), parse_philly_trace),
    TraceFormat("csv", (".csv",), parse_canonical_csv, format_canonical_csv),
    TraceFormat("parquet", (".parquet",), read_file=read_canonical_parquet, write_file=write_canonical_parquet),
    *(_production(name) for name in READERS),
)}


def infer_format(path: str | Path, sniff: bool = True) -> str:
    """Format by extension; with `sniff`, a header-less `.csv` or extension-less file in Synergy's layout is
    `synergy` (the artifact's replay files have no extension or a numeric one), and a `.trace` whose lines have
    Shockwave's 12 fields is `shockwave`."""
    suffix = Path(path).suffix.lower()
    if sniff and (suffix in ("", ".csv", ".log", ".trace") or suffix[1:].isdigit()):
        try:
            with open(path, "rb") as f:
                first = f.readline(4096).decode("utf-8", "replace")
        except OSError:
            first = ""
        if looks_like_synergy_csv(first):
            return "synergy"
        if looks_like_shockwave_trace(first):
            return "shockwave"
    for f in FORMATS.values():
        if suffix in f.extensions:
            return f.name
    raise TraceError(f"cannot tell the trace format from the extension {suffix!r}; use .trace (Gavel), "
                     f".csv or .parquet (canonical), or pass a format ({', '.join(FORMATS)})", source=str(path))


def _get(name: str, source: str) -> TraceFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise TraceError(f"unknown trace format {name!r}; known: {', '.join(FORMATS)}", source=source) from None


def read_trace(path: str | Path, fmt: str | None = None, **kwargs) -> list[Job]:
    """Read jobs from a trace file; the format comes from the extension unless `fmt` is given."""
    source = str(path)
    spec = _get(fmt or infer_format(path), source)
    if spec.read_file is not None:
        return spec.read_file(path, **kwargs)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read ({exc.strerror})", source=source) from None
    return spec.parse(data, source=source, **kwargs)


def write_trace(jobs: Iterable[Job], path: str | Path, fmt: str | None = None, *, lossy: bool = False) -> Kept:
    """Write jobs in a writable format (gavel, shockwave, synergy, csv, parquet). The artifacts' formats are read
    back: a field they cannot carry is refused unless `lossy` (hetsched/traces/keeps.py); what they round or drop
    is in the returned `Kept` (its `summary()`)."""
    source = str(path)
    spec = _get(fmt or infer_format(path, sniff=False), source)
    if spec.write_file is not None:
        with replacing(path) as tmp:
            spec.write_file(jobs, tmp)
        return Kept(spec.name)
    if spec.format is not None:
        jobs = list(jobs)
        text = spec.format(jobs)
        kept = Kept(spec.name) if spec.name == "csv" else check_write(jobs, spec.name, text, spec.parse, source, lossy)
        write_text(path, text)
        return kept
    raise TraceError(f"format {spec.name!r} is read-only; write gavel, shockwave, synergy, csv or parquet",
                     source=source)
