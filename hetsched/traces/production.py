"""Production traces to canonical jobs: the shared half of every public-trace reader.

A reader turns its file into *records*, a DataFrame with one row per job and the columns of `RECORD`:
`arrival_s` and `duration_s` (seconds; arrivals in the trace's own clock), `gpus`, `user`, `vc`, `status` and
`gpu_model` (the GPU models the job is pinned to, `|`-separated, empty = any). This module then

1. re-bases arrivals so that the trace's first job arrives at t = 0 (before filtering, so `--since` is trace time);
2. drops what cannot be a GPU training job, and counts each reason: no GPUs (CPU-only tasks), no duration
   (never ran, or still running with no end), a GPU count above the table's largest scale factor;
3. applies the filters (arrival range, virtual clusters, GPU counts, statuses);
4. maps each job to something the simulator can run, by a documented seeded rule (`JobMapping`): the GPU count
   becomes the table's scale factor (rounded up to the next one the table has: 3 -> 4); the job type is drawn
   uniformly from the table's job types measured at that scale factor (numpy `default_rng(seed)`, one draw
   per job in arrival order); `total_steps` = the trace's duration x the drawn type's throughput on the job's
   reference GPU type -- its first pinned type when the table has it, else `reference_gpu` -- so the job runs
   as long as it did in production on that type, alone and unshared;
5. keeps arrivals, durations (`duration_s`), users, virtual clusters and pinned models (`pinned_gpu_types`), and
   sets `entity` to the virtual cluster or the user (`entity="vc" | "user" | "none"`; `auto` = vc when the trace
   has any, else user).

Fractional GPUs (openb's `gpu_milli`, PAI's `plan_gpu` < 100) count as one whole GPU: the simulator shares GPUs
only by packing whole jobs. The conversion counts the jobs that asked for part of a GPU (`part_gpus`): 2,573 of
the 6,203 jobs kept from openb's `openb_pod_list_gpuspec33.csv`.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from hetsched.errors import TraceError
from hetsched.io.gpu_map import apply_gpu_map, gpu_type_name, parse_gpu_map
from hetsched.model.jobs import Job
from hetsched.traces.fields import decode

RECORD = ("arrival_s", "duration_s", "gpus", "user", "vc", "status", "gpu_model")
CHUNK_ROWS = 250_000


@dataclass(frozen=True)
class Filters:
    """Which jobs to keep. Times are seconds after the trace's first arrival; `statuses` match case-insensitively."""

    since_s: float | None = None
    until_s: float | None = None
    vcs: frozenset[str] | None = None
    gpus: frozenset[int] | None = None
    statuses: frozenset[str] | None = None
    max_jobs: int | None = None
    max_duration_s: float | None = None          # drop jobs that ran longer (a long tail sets the makespan)

    def apply(self, r: pd.DataFrame) -> pd.DataFrame:
        keep = np.ones(len(r), bool)
        if self.since_s is not None:
            keep &= r["arrival_s"].to_numpy() >= self.since_s
        if self.until_s is not None:
            keep &= r["arrival_s"].to_numpy() < self.until_s
        if self.vcs is not None:
            keep &= r["vc"].isin(self.vcs).to_numpy()
        if self.gpus is not None:
            keep &= r["gpus"].isin(self.gpus).to_numpy()
        if self.statuses is not None:
            keep &= r["status"].str.lower().isin({s.lower() for s in self.statuses}).to_numpy()
        if self.max_duration_s is not None:
            keep &= r["duration_s"].to_numpy(dtype=float) <= self.max_duration_s
        return r[keep]


@dataclass(frozen=True)
class JobMapping:
    """The seeded rule that gives each trace job a job type and a step count (module docstring, step 4)."""

    throughputs: object = "gavel_simulation"    # a dataset name, a path, or a ThroughputTable
    seed: int = 0
    reference_gpu: str | None = None          # default: v100 when the table has it, else its first type
    gpu_map: str | None = None                # `T4=p100x0.8,...`: columns for pinned models the table lacks
    entity: str = "auto"

    def table(self):
        from hetsched.model.throughputs import ThroughputTable, load_throughputs
        table = self.throughputs if isinstance(self.throughputs, ThroughputTable) else \
            load_throughputs(self.throughputs)
        return apply_gpu_map(table, parse_gpu_map(self.gpu_map))


@dataclass
class Conversion:
    """What happened to the trace's rows (printed by `hetsched convert trace`)."""

    rows: int = 0
    no_gpus: int = 0
    no_duration: int = 0
    too_large: int = 0
    filtered: int = 0
    rounded_up: int = 0
    part_gpus: int = 0                 # kept jobs that asked for part of a GPU (or a fractional count)
    censored: int = 0                  # kept jobs still running when the trace ends (durations are lower bounds)
    jobs: list[Job] = field(default_factory=list)
    frame: pd.DataFrame | None = None

    def summary(self) -> str:
        kept = len(self.frame) if self.frame is not None else len(self.jobs)
        return (f"{self.rows} rows: {kept} jobs kept; dropped {self.no_gpus} without GPUs, "
                f"{self.no_duration} without a duration, {self.too_large} above the table's largest scale "
                f"factor, {self.filtered} by the filters; {self.rounded_up} GPU counts rounded up to a "
                f"scale factor; {self.part_gpus} asked for part of a GPU and take whole GPUs"
                + (f"; {self.censored} still running when the trace ends (their durations are lower bounds)"
                   if self.censored else ""))


# ---- reading CSV in chunks, with errors that name the line and the field --------------------------------
def csv_chunks(data: bytes | str | Path, source: str, *, names: tuple[str, ...] | None = None,
               ) -> Iterator[tuple[int, pd.DataFrame]]:
    """(first line number, chunk of string columns) of a CSV given as bytes/str or a path (streamed).

    `names` for header-less files (PAI 2020). Every cell is read as a string; the readers convert and check."""
    if isinstance(data, Path):
        handle = data
    else:
        handle = io.StringIO(decode(data, source))
    first = 1 if names else 2
    try:
        reader = pd.read_csv(handle, dtype=str, keep_default_na=False, na_filter=False, chunksize=CHUNK_ROWS,
                             header=None if names else 0, names=list(names) if names else None,
                             skipinitialspace=True, engine="c", encoding="utf-8", on_bad_lines="error",
                             index_col=False)
        chunks = iter(reader)
        while True:
            with warnings.catch_warnings():      # short rows are padded with empty cells, reported at their line
                warnings.simplefilter("ignore", pd.errors.ParserWarning)
                chunk = next(chunks, None)
            if chunk is None:
                return
            yield first, chunk
            first += len(chunk)
    except pd.errors.EmptyDataError:
        return
    except (pd.errors.ParserError, ValueError, UnicodeDecodeError, OverflowError) as exc:
        raise TraceError(f"malformed CSV ({_short(exc)})", source=source) from None
    except OSError as exc:
        raise TraceError(f"cannot read ({exc.strerror or exc})", source=source) from None


def _short(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]


def require_columns(chunk: pd.DataFrame, columns: Iterable[str], source: str, what: str) -> None:
    missing = [c for c in columns if c not in chunk.columns]
    if missing:
        raise TraceError(f"not a {what} file: it lacks the columns {missing} (has {list(chunk.columns)[:12]})",
                         source=source, line=1)


def numbers(chunk: pd.DataFrame, column: str, first_line: int, source: str, *, empty_ok: bool = False,
            minimum: float | None = None, rows: np.ndarray | None = None) -> np.ndarray:
    """A column as floats (only the chunk's `rows`, if given); an unparsable cell (or an empty one unless
    `empty_ok`, which gives NaN) is an error at its line."""
    raw = (chunk[column] if rows is None else chunk[column].iloc[rows]).str.strip()
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    empty = (raw == "").to_numpy()
    bad = (np.isnan(values) & ~(empty & empty_ok)) | np.isinf(values)
    if minimum is not None:
        bad |= values < minimum
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        cell = raw.iloc[i]
        need = "a number" if minimum is None else f"a number >= {minimum:g}"
        line = first_line + (i if rows is None else int(rows[i]))
        raise TraceError(f"expected {need}, got {cell!r}", source=source, line=line, field=column)
    return values


def times(chunk: pd.DataFrame, column: str, first_line: int, source: str, *, empty_ok: bool = True,
          ) -> np.ndarray:
    """Seconds from a column of seconds or of `YYYY-mm-dd HH:MM:SS` date-times (Helios, Acme); NaN = empty."""
    raw = chunk[column].str.strip()
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float, copy=True)
    empty = (raw == "").to_numpy()
    todo = np.flatnonzero(np.isnan(values) & ~empty)
    if len(todo):
        stamps = pd.to_datetime(raw.iloc[todo], format="%Y-%m-%d %H:%M:%S", errors="coerce").to_numpy(
            dtype="datetime64[ns]")
        unparsed = np.isnat(stamps)
        if unparsed.any():
            i = int(todo[np.flatnonzero(unparsed)[0]])
            raise TraceError(f"expected seconds or 'YYYY-mm-dd HH:MM:SS', got {raw.iloc[i]!r}", source=source,
                             line=first_line + i, field=column)
        values[todo] = stamps.astype(np.int64) / 1e9
    bad = np.isinf(values) | (empty if not empty_ok else False)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise TraceError(f"expected a time, got {raw.iloc[i]!r}", source=source, line=first_line + i,
                         field=column)
    return values


def text(chunk: pd.DataFrame, column: str) -> pd.Series:
    if column not in chunk.columns:
        return pd.Series([""] * len(chunk), index=chunk.index, dtype=object)
    return chunk[column].str.strip()


def pinned(models: pd.Series, ignore: Iterable[str] = ()) -> pd.Series:
    """`V100M16|V100M32` -> `v100m16|v100m32`; placeholder values (PAI's `MISC`) mean any model."""
    skip = {gpu_type_name(m) for m in ignore}

    def one(value: str) -> str:
        names = [gpu_type_name(m) for m in value.replace(",", "|").split("|") if m.strip()]
        names = [n for n in dict.fromkeys(names) if n not in skip]
        return "|".join(names)

    return models.map(one, na_action="ignore").fillna("") if len(models) else models


def records_frame(**columns) -> pd.DataFrame:
    """The records of `RECORD`'s columns; `part_gpu` (optional, default False) marks a job that asked for part of
    a GPU (openb's milli-GPUs, PAI's percentages) and was given whole GPUs, `censored` (optional) one still running
    when the trace was taken, whose duration is a lower bound."""
    frame = pd.DataFrame({c: columns[c] for c in RECORD})
    frame["gpus"] = frame["gpus"].astype(np.int64)
    frame["part_gpu"] = np.asarray(columns.get("part_gpu", False), bool) & np.ones(len(frame), bool)
    frame["censored"] = np.asarray(columns.get("censored", False), bool) & np.ones(len(frame), bool)
    return frame


# ---- records -> jobs -------------------------------------------------------------------------------------
def to_jobs(records: pd.DataFrame, mapping: JobMapping | None = None, filters: Filters | None = None,
            materialize: bool = True) -> Conversion:
    """Records -> mapped jobs (`Conversion.frame`, canonical columns) and, with `materialize`, `Job` objects."""
    mapping, filters = mapping or JobMapping(), filters or Filters()
    out = Conversion(rows=len(records))
    if not len(records):
        return out
    r = records.copy()
    arrivals = r["arrival_s"].to_numpy(dtype=float)
    known = np.isfinite(arrivals)
    r["arrival_s"] = arrivals - (arrivals[known].min() if known.any() else 0.0)
    no_gpus = r["gpus"].to_numpy() <= 0
    out.no_gpus = int(no_gpus.sum())
    duration = r["duration_s"].to_numpy(dtype=float)
    no_duration = ~no_gpus & ~(np.isfinite(duration) & (duration > 0) & np.isfinite(r["arrival_s"].to_numpy()))
    out.no_duration = int(no_duration.sum())
    r = r[~no_gpus & ~no_duration]
    table = mapping.table()
    scales = np.array(sorted({k.scale_factor for k in table.keys}))
    gpus = r["gpus"].to_numpy()
    pos = np.searchsorted(scales, gpus)
    too_large = pos >= len(scales)
    out.too_large = int(too_large.sum())
    r = r[~too_large].assign(scale_factor=scales[pos[~too_large]])
    before = len(r)
    r = filters.apply(r)
    out.filtered = before - len(r)
    r = r.sort_values("arrival_s", kind="stable")
    if filters.max_jobs is not None:
        r = r.iloc[:filters.max_jobs]
    out.rounded_up = int((r["scale_factor"].to_numpy() != r["gpus"].to_numpy()).sum())
    out.part_gpus = int(r["part_gpu"].to_numpy().sum())
    out.censored = int(r["censored"].to_numpy().sum())
    out.frame = _map_frame(r, table, mapping)
    if materialize:
        out.jobs = frame_to_jobs(out.frame)
    return out


def _reference_columns(r: pd.DataFrame, table, mapping: JobMapping) -> np.ndarray:
    """Each job's reference GPU column: its first pinned type the table has, else the default type."""
    default = mapping.reference_gpu or ("v100" if "v100" in table.gpu_types else table.gpu_types[0])
    default = gpu_type_name(default)
    if default not in table.gpu_types:
        raise TraceError(f"--reference-gpu {default!r} is not a GPU type of the table {table.name!r} "
                         f"({list(table.gpu_types)})")
    index = {g: i for i, g in enumerate(table.gpu_types)}
    first = r["gpu_model"].str.split("|").str[0].fillna("")
    return np.array([index.get(g, index[default]) for g in first], np.int64)


def _map_frame(r: pd.DataFrame, table, mapping: JobMapping) -> pd.DataFrame:
    """The mapped jobs as canonical columns (job_id, arrival_time_s, job_type, scale_factor, total_steps,
    duration_s, entity, user, vc, pinned_gpu_types), one row per job in arrival order."""
    n = len(r)
    rng = np.random.default_rng(mapping.seed)
    draws = rng.random(n)
    sf = r["scale_factor"].to_numpy(dtype=np.int64)
    cols = _reference_columns(r, table, mapping) if n else np.zeros(0, np.int64)
    iso = table.isolated[:, :, 0]
    row = np.empty(n, np.int64)
    for s in np.unique(sf):
        at = np.flatnonzero(sf == s)
        candidates = np.array([i for i, k in enumerate(table.keys) if k.scale_factor == s])
        pick = candidates[(draws[at] * len(candidates)).astype(np.int64)]
        # A drawn type unmeasured on the job's reference type is redrawn (same uniform) among those measured there.
        ok = iso[pick, cols[at]] > 0
        if not ok.all():
            for j in np.flatnonzero(~ok):
                measured = candidates[iso[candidates, cols[at[j]]] > 0]
                if not len(measured):
                    raise TraceError(f"the table {table.name!r} measures no job type at scale factor {s} on "
                                     f"{table.gpu_types[cols[at[j]]]}")
                pick[j] = measured[int(draws[at[j]] * len(measured))]
        row[at] = pick
    duration = r["duration_s"].to_numpy(dtype=float)
    names = np.array([k.job_type for k in table.keys], dtype=object)
    return pd.DataFrame({
        "job_id": np.arange(n, dtype=np.int64), "arrival_time_s": r["arrival_s"].to_numpy(dtype=float),
        "job_type": names[row], "scale_factor": sf, "total_steps": duration * iso[row, cols],
        "duration_s": duration, "entity": np.array(_entities(r, mapping.entity), dtype=object),
        "user": r["user"].to_numpy(dtype=object), "vc": r["vc"].to_numpy(dtype=object),
        "pinned_gpu_types": r["gpu_model"].to_numpy(dtype=object)})


def frame_to_jobs(frame: pd.DataFrame) -> list[Job]:
    return [Job(job_id=int(i), arrival_time_s=float(a), job_type=t, scale_factor=int(s), total_steps=float(st),
                duration_s=float(d), entity=e, user=u, vc=v, pinned_gpu_types=p)
            for i, a, t, s, st, d, e, u, v, p in zip(*(frame[c].tolist() for c in MAPPED))]


MAPPED = ("job_id", "arrival_time_s", "job_type", "scale_factor", "total_steps", "duration_s", "entity", "user",
          "vc", "pinned_gpu_types")


def _entities(r: pd.DataFrame, rule: str) -> list[str | None]:
    if rule not in ("auto", "vc", "user", "none"):
        raise TraceError(f"--entity must be vc, user, none or auto, got {rule!r}")
    if rule == "auto":
        rule = "vc" if (r["vc"] != "").any() else "user"
    if rule == "none":
        return [None] * len(r)
    return [v or None for v in r[rule].tolist()]


# ---- the formats' shared entry points --------------------------------------------------------------------
def convert(records: pd.DataFrame, *, mapping: JobMapping | None = None, filters: Filters | None = None,
            report: Callable[[Conversion], None] | None = None) -> list[Job]:
    result = to_jobs(records, mapping, filters)
    if report is not None:
        report(result)
    return result.jobs


def convert_frame(records: pd.DataFrame, *, mapping: JobMapping | None = None, filters: Filters | None = None,
                  report: Callable[[Conversion], None] | None = None) -> pd.DataFrame:
    """As `convert`, but the jobs stay columns (no `Job` objects): for writing large traces."""
    result = to_jobs(records, mapping, filters, materialize=False)
    if report is not None:
        report(result)
    return result.frame if result.frame is not None else pd.DataFrame({c: [] for c in MAPPED})
