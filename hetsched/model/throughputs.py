"""`ThroughputTable`: steps/s by (job type, scale factor, GPU type), alone or co-located, per placement."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, NamedTuple

import numpy as np
import pandas as pd

from hetsched.errors import ThroughputError
from hetsched.io.throughput_json import COLUMNS, normalise_frame, read_throughput_json

log = logging.getLogger(__name__)
PLACEMENTS = ("consolidated", "unconsolidated")
DEFAULT_DATASET = "gavel_simulation"


class JobKey(NamedTuple):
    """Typed throughput key: a job type running on `scale_factor` GPUs."""

    job_type: str
    scale_factor: int


def data_dir() -> Path:
    """The project's data folder (`HETSCHED_DATA` overrides)."""
    env = os.environ.get("HETSCHED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "data"


def available_datasets() -> list[str]:
    folder = data_dir() / "throughputs"
    return sorted(p.stem for p in folder.glob("*.parquet"))


@dataclass(frozen=True, eq=False)
class ThroughputTable:
    """Dense arrays indexed by key, GPU type and placement; NaN marks a missing measurement.

    `isolated[k, g, p]` is the aggregate steps/s of key k alone on its s GPUs of type g.
    `colocated[k, l, g, p]` is `(k's steps/s, l's steps/s)` while k and l share the same GPUs (same scale
    factor), as measured from k's side; a side that the source lacks mirrors the other side.
    """

    keys: tuple[JobKey, ...]
    gpu_types: tuple[str, ...]
    isolated: np.ndarray
    colocated: np.ndarray
    name: str = ""
    #: What each GPU type's rates were measured on, aligned with `gpu_types`: "" for the source's own models (the
    #: shipped tables), else `hetsched profile`'s workloads and settings; () when every type is "". Rates measured
    #: on different workloads are not comparable (docs/rules.md#relative-speed).
    workloads: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {k: i for i, k in enumerate(self.keys)})
        object.__setattr__(self, "_gpu_index", {g: i for i, g in enumerate(self.gpu_types)})
        self.isolated.setflags(write=False)
        self.colocated.setflags(write=False)

    # ---- lookups ------------------------------------------------------------------------------
    def index(self, key: JobKey | tuple[str, int]) -> int:
        try:
            return self._index[key]  # type: ignore[attr-defined]
        except KeyError:
            raise ThroughputError(f"throughputs {self.name!r}: no entry for job type {key[0]!r} "
                                  f"on {key[1]} GPU(s)") from None

    def gpu_index(self, gpu_type: str) -> int:
        try:
            return self._gpu_index[gpu_type]  # type: ignore[attr-defined]
        except KeyError:
            raise ThroughputError(f"throughputs {self.name!r}: no GPU type {gpu_type!r}; "
                                  f"known: {list(self.gpu_types)}") from None

    def basis(self, gpu_type: str) -> str:
        """What `gpu_type`'s rates were measured on ("": the source's own models)."""
        return self.workloads[self.gpu_index(gpu_type)] if self.workloads else ""

    def __contains__(self, key: object) -> bool:
        return key in self._index  # type: ignore[attr-defined]

    def get(self, job_type: str, scale_factor: int, gpu_type: str, *, consolidated: bool = True) -> float:
        """Isolated steps/s of `job_type` on `scale_factor` GPUs of `gpu_type`."""
        value = self.isolated[self.index(JobKey(job_type, scale_factor)), self.gpu_index(gpu_type),
                              0 if consolidated else 1]
        if np.isnan(value):
            where = "" if consolidated else " (unconsolidated)"
            raise ThroughputError(f"throughputs {self.name!r}: {job_type!r} x{scale_factor} was not measured "
                                  f"on {gpu_type}{where}")
        return float(value)

    def pair(self, a: str, b: str, scale_factor: int, gpu_type: str, *, consolidated: bool = True,
             ) -> tuple[float, float]:
        """Steps/s of `a` and of `b` while they share the same `scale_factor` GPUs of `gpu_type`."""
        i, j = self.index(JobKey(a, scale_factor)), self.index(JobKey(b, scale_factor))
        g, p = self.gpu_index(gpu_type), 0 if consolidated else 1
        ta, tb = self.colocated[i, j, g, p]
        if np.isnan(ta) or np.isnan(tb):
            raise ThroughputError(f"throughputs {self.name!r}: no co-location measurement for {a!r} with {b!r} "
                                  f"x{scale_factor} on {gpu_type}")
        return float(ta), float(tb)

    def matrix(self, keys: Iterable[JobKey | tuple[str, int]], gpu_types: Iterable[str], *,
               consolidated: bool = True) -> np.ndarray:
        """Isolated steps/s as a [len(keys) x len(gpu_types)] array (vectorised lookup)."""
        rows = np.fromiter((self.index(k) for k in keys), dtype=np.intp)
        cols = np.fromiter((self.gpu_index(g) for g in gpu_types), dtype=np.intp)
        return self.isolated[np.ix_(rows, cols)][:, :, 0 if consolidated else 1]

    @property
    def job_types(self) -> list[str]:
        return sorted({k.job_type for k in self.keys})

    def lacks(self, job_type: str, scale_factor: int) -> str:
        """Why (`job_type`, `scale_factor`) has no entry here, with what the table has instead."""
        scales = sorted(k.scale_factor for k in self.keys if k.job_type == job_type)
        if scales:
            return (f"{job_type!r} on {scale_factor} GPU(s) is not in the throughput table {self.name!r}, which "
                    f"measures it on {scales} GPU(s)")
        from hetsched.model.rate_sources import family, rate_sources

        data = data_dir()
        same = [t for t in self.job_types if family(t, data) == family(job_type, data)]
        if same:
            return (f"job type {job_type!r} is not in the throughput table {self.name!r}, which times its model as "
                    f"{', '.join(map(repr, same))}")
        sources = rate_sources(job_type, {n: load_throughputs(n).job_types for n in available_datasets()}, data)
        elsewhere = (f"; its rates exist in {' and in '.join(sources)}" if sources else
                     "; no shipped table or profile times it (give a table with --throughputs PATH)")
        return (f"job type {job_type!r} is not in the throughput table {self.name!r}; "
                f"{nearest(job_type, self.job_types)}{elsewhere}")

    # ---- conversion ---------------------------------------------------------------------------
    @classmethod
    def from_frame(cls, frame: pd.DataFrame, name: str = "") -> "ThroughputTable":
        missing = set(COLUMNS) - set(frame.columns)
        if missing:
            raise ThroughputError(f"throughputs {name!r}: table lacks columns {sorted(missing)}")
        bad = ~frame["placement"].isin(PLACEMENTS)
        if bad.any():
            raise ThroughputError(f"throughputs {name!r}: placement must be one of {PLACEMENTS}, got "
                                  f"{frame.loc[bad, 'placement'].iloc[0]!r}")
        job_type = frame["job_type"].astype(str).to_numpy()
        sf = frame["scale_factor"].to_numpy(dtype=np.int64)
        keys_frame = pd.DataFrame({"t": job_type, "s": sf}).drop_duplicates().sort_values(["t", "s"])
        keys = tuple(JobKey(t, int(s)) for t, s in zip(keys_frame["t"], keys_frame["s"]))
        key_codes = pd.MultiIndex.from_arrays([keys_frame["t"], keys_frame["s"]])
        k = key_codes.get_indexer(pd.MultiIndex.from_arrays([job_type, sf]))
        gpu_types = tuple(sorted(frame["gpu_type"].astype(str).unique()))
        g = pd.Index(gpu_types).get_indexer(frame["gpu_type"].astype(str))
        p = (frame["placement"].to_numpy() == "unconsolidated").astype(np.intp)
        alone = frame["partner_job_type"].isna().to_numpy()
        isolated = np.full((len(keys), len(gpu_types), 2), np.nan)
        isolated[k[alone], g[alone], p[alone]] = frame["steps_per_s"].to_numpy()[alone]
        colocated = np.full((len(keys), len(keys), len(gpu_types), 2, 2), np.nan)
        pairs = ~alone
        partner = key_codes.get_indexer(pd.MultiIndex.from_arrays(
            [frame["partner_job_type"].astype(str).to_numpy()[pairs], sf[pairs]]))
        if (partner < 0).any():
            raise ThroughputError(f"throughputs {name!r}: a pair names a partner job type without its own entry")
        kp, gp, pp = k[pairs], g[pairs], p[pairs]
        # The partner's view first, then each row's own view, so that a row's own measurement wins.
        own = frame["steps_per_s"].to_numpy()[pairs]
        other = frame["partner_steps_per_s"].to_numpy()[pairs]
        colocated[partner, kp, gp, pp] = np.stack([other, own], axis=1)
        colocated[kp, partner, gp, pp] = np.stack([own, other], axis=1)
        return cls(keys, gpu_types, isolated, colocated, name, _workloads(frame, gpu_types, name))

    def to_frame(self) -> pd.DataFrame:
        rows = []
        for ki, key in enumerate(self.keys):
            for gi, gpu in enumerate(self.gpu_types):
                for pi, placement in enumerate(PLACEMENTS):
                    value = self.isolated[ki, gi, pi]
                    if np.isnan(value):
                        continue
                    rows.append((gpu, placement, key.job_type, key.scale_factor, None, value, None))
                    for li in np.flatnonzero(~np.isnan(self.colocated[ki, :, gi, pi, 0])):
                        own, other = self.colocated[ki, li, gi, pi]
                        rows.append((gpu, placement, key.job_type, key.scale_factor, self.keys[li].job_type,
                                     own, other))
        frame = pd.DataFrame.from_records(rows, columns=list(COLUMNS))
        if self.workloads:
            frame["workloads"] = frame["gpu_type"].map(dict(zip(self.gpu_types, self.workloads)))
        return normalise_frame(frame)

    @classmethod
    def read(cls, path: str | Path) -> "ThroughputTable":
        """Load a table from .parquet, .csv or a Gavel/Shockwave .json file."""
        path = Path(path)
        if not path.exists():
            raise ThroughputError(f"{path}: no such throughput file")
        suffix = path.suffix.lower()
        if suffix == ".json":
            frame = read_throughput_json(path)
        elif suffix == ".parquet":
            frame = pd.read_parquet(path)
        elif suffix == ".csv":
            frame = pd.read_csv(path, dtype={"partner_job_type": "string"})
        else:
            raise ThroughputError(f"{path}: unknown throughput format {suffix!r} (use .parquet, .csv or .json)")
        return cls.from_frame(frame, name=path.stem)

    def write(self, path: str | Path) -> None:
        write_frame(self.to_frame(), path)


def nearest(job_type: str, job_types: list[str]) -> str:
    """'did you mean ...?' with the closest known types, by name or by model whatever the batch size ('ResNet-19'
    -> 'ResNet-18 (batch size ...)'); else a few of them."""
    import difflib

    close = difflib.get_close_matches(job_type, job_types, n=3, cutoff=0.6)
    if not close:
        models = {t.split(" (")[0] for t in job_types}
        close = [t for m in difflib.get_close_matches(job_type.split(" (")[0], sorted(models), n=3, cutoff=0.6)
                 for t in job_types if t.split(" (")[0] == m][:3]
    return (f"did you mean {' or '.join(map(repr, close))}?" if close
            else f"it has {len(job_types)} types, e.g. {job_types[:3]}")


def merge_tables(paths, relative_to: str | None = None, mixed_workloads: bool = False) -> ThroughputTable:
    """One table from several files (JSON, Parquet or CSV): rows of later files win where the same
    (GPU type, placement, job type, scale factor, partner) appears twice.

    `relative_to`: the later files are `hetsched profile` tables that measured this GPU type of the first file as
    well; their other types join the first file's in its units (relative speed, docs/rules.md#relative-speed).
    Without it, types measured on different workloads (the Gavel table's full models beside a profile's toy
    models) are refused unless `mixed_workloads` says to keep their rates as measured."""
    from hetsched.model.relative_speed import scaled_columns

    paths = [Path(p) for p in paths]
    if relative_to is not None and len(paths) < 2:
        raise ThroughputError("relative speed needs a measured table and at least one profiled table after it")
    if len(paths) == 1:
        return ThroughputTable.read(paths[0])
    frames = [ThroughputTable.read(p).to_frame() for p in paths]
    name = "+".join(p.stem for p in paths)
    if relative_to is not None:
        scaled, lacking = scaled_columns(frames[0], _stacked(frames[1:]), relative_to, paths[0].name)
        if lacking:
            log.warning("relative speed: %d profiled rows left out: their job type has no rate on %r in %s or in "
                        "the profile", lacking, relative_to, paths[0].name)
        frames, name = [frames[0], scaled], f"{name}@{relative_to}"
    table = ThroughputTable.from_frame(_stacked(frames), name=name)
    kinds = {}
    for gpu, basis in zip(table.gpu_types, table.workloads or [""] * len(table.gpu_types)):
        kinds.setdefault(basis or "the source's own models", []).append(gpu)
    if len(kinds) > 1 and not mixed_workloads:
        raise ThroughputError(
            "the GPU types were measured on different workloads, so their rates are not comparable: "
            + "; ".join(f"{', '.join(g)} on {b}" for b, g in kinds.items()) + ". Profile a type the first table "
            "measures with the same tool and merge relative to it (--relative-to TYPE), or keep the rates as "
            "measured (--mixed-workloads); docs/rules.md#relative-speed")
    return table


def _stacked(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Later frames' rows win where the same (GPU type, placement, job type, scale factor, partner) repeats."""
    key = ["gpu_type", "placement", "job_type", "scale_factor", "partner_job_type"]
    return pd.concat(frames, ignore_index=True).drop_duplicates(subset=key, keep="last")


def _workloads(frame: pd.DataFrame, gpu_types: tuple[str, ...], name: str) -> tuple[str, ...]:
    """Each GPU type's workloads (the frame's optional `workloads` column); refused when one type has two."""
    if "workloads" not in frame:
        return ()
    basis = frame["workloads"].astype("string").fillna("")
    per_type = basis.groupby(frame["gpu_type"].astype(str).to_numpy()).unique()
    for gpu, values in per_type.items():
        if len(values) > 1:
            raise ThroughputError(f"throughputs {name!r}: the rates of GPU type {gpu!r} were measured on different "
                                  f"workloads ({', '.join(repr(v or 'the source models') for v in values)}); they "
                                  f"are not comparable (docs/rules.md#relative-speed)")
    out = tuple(str(per_type[g][0]) for g in gpu_types)
    return out if any(out) else ()


def write_frame(frame: pd.DataFrame, path: str | Path) -> None:
    """Write the long table as Parquet or CSV by extension."""
    from hetsched.io.atomic import replacing

    path = Path(path)
    if path.suffix.lower() not in (".parquet", ".csv"):
        raise ThroughputError(f"{path}: write .parquet or .csv")
    with replacing(path) as tmp:
        if path.suffix.lower() == ".parquet":
            frame.to_parquet(tmp, index=False, compression="zstd")
        else:
            frame.to_csv(tmp, index=False)


_CACHE: dict[tuple[str, int, int], ThroughputTable] = {}


def _read_cached(path: Path) -> ThroughputTable:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    table = _CACHE.get(key)
    if table is None:
        if len(_CACHE) >= 16:
            _CACHE.clear()
        table = _CACHE[key] = ThroughputTable.read(path)
    return table


def load_throughputs(name_or_path: str | Path = DEFAULT_DATASET) -> ThroughputTable:
    """A dataset name from `data/throughputs/` (e.g. `gavel_simulation`) or a path to a table or JSON file.

    Tables are immutable, so a file already read (same path, size and modification time) is not read again."""
    candidate = data_dir() / "throughputs" / f"{name_or_path}.parquet"
    if isinstance(name_or_path, str) and "/" not in name_or_path and candidate.exists():
        return _read_cached(candidate)
    path = Path(name_or_path)
    if path.exists():
        return _read_cached(path)
    raise ThroughputError(f"no throughput dataset or file {str(name_or_path)!r}; datasets: "
                          f"{', '.join(available_datasets()) or '(none found in ' + str(data_dir()) + ')'}")
