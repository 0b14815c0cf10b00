"""`hetsched reproduce`: execute the figure notebooks with papermill and index their outputs."""

from __future__ import annotations

import html
import json
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from tqdm.auto import tqdm

from hetsched.errors import HetschedError
from hetsched.experiments import check_preset
from hetsched.io.atomic import replacing, write_text

log = logging.getLogger(__name__)
INTERACTIVE = {"explore"}  # notebooks that are not figures
#: How long one cell may run: an hour at the presets meant for minutes (a hung cell fails the figure, not CI's whole
#: budget); none at the paper preset, whose sweeps run for hours by design (Sia's Table 3: 2.4 h or more on two
#: workers, README). A caller may set its own (`timeout_s`).
CELL_TIMEOUT_S = {"tiny": 3600, "quick": 3600, "paper": None}


def notebook_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "notebooks"


def figure_notebooks(folder: Path | None = None) -> list[Path]:
    folder = folder or notebook_dir()
    return sorted(p for p in folder.glob("*.ipynb") if p.stem not in INTERACTIVE and not p.stem.startswith("_"))


@dataclass
class NotebookRun:
    name: str
    out_dir: Path
    seconds: float
    error: str | None = None
    preset: str = ""
    finished: str = ""            # UTC, ISO 8601
    version: str = ""

MANIFEST = "runs.json"           # every figure ever run into this folder; `--only` updates its own entries


def _quiet_kernel() -> list[str]:
    """Kernel arguments: its "TCP without encryption" warning (loopback only here) and the "KeyboardInterrupt caught
    in kernel" error that some kernels log while being shut down after their last cell (2 of 26 in one quick run,
    all notebooks ok) would break the progress bar. A failing cell still fails the notebook: papermill reports
    it, not the kernel's log."""
    return ["--IPKernelApp.log_level=CRITICAL"]


def run_notebook(path: Path, out_root: Path, preset: str, parameters: dict | None = None,
                 timeout_s: int | None | str = "preset", dask_address: str | None = None) -> NotebookRun:
    """Execute one notebook into `out_root/<name>/` (executed copy + its figure files); `dask_address`: the
    Dask scheduler its sweeps use, where it declares one (see `reproduce`). A cell that fails or runs past
    `timeout_s` (default: the preset's, `CELL_TIMEOUT_S`) fails this notebook only: the run records why."""
    import papermill as pm

    from hetsched import __version__

    out_dir = (out_root / path.stem).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    declared = pm.inspect_notebook(str(path))
    defaults = {"preset": preset, "out_dir": str(out_dir), "cache_dir": str((out_root / ".cache").resolve()),
                **({"dask_address": dask_address} if dask_address else {})}
    # reproduce's own settings go only where the notebook declares them (motivation has no sweep, no cache);
    # a caller's parameters always go, so papermill warns about a misspelt one.
    params = {**{k: v for k, v in defaults.items() if k in declared}, **(parameters or {})}
    if timeout_s == "preset":
        timeout_s = CELL_TIMEOUT_S.get(preset, 3600)
    start = time.perf_counter()
    error = None
    batch = os.environ.get("HETSCHED_BATCH")
    os.environ["HETSCHED_BATCH"] = "1"            # the kernel inherits it: text summaries, no widget bars
    try:
        pm.execute_notebook(str(path), str(out_dir / path.name), parameters=params, cwd=str(path.parent),
                            kernel_name="python3", progress_bar=False, execution_timeout=timeout_s,
                            extra_arguments=_quiet_kernel())
    except pm.PapermillExecutionError as exc:
        error = f"{exc.ename}: {exc.evalue}"
        log.error("%s failed: %s", path.name, error)
    except TimeoutError:                            # nbclient's CellTimeoutError: the kernel is shut down
        error = (f"a cell ran longer than {timeout_s} s (the {preset} preset's limit per cell); the sweep cache "
                 f"keeps the runs that finished")
        log.error("%s failed: %s", path.name, error)
    finally:
        if batch is None:
            os.environ.pop("HETSCHED_BATCH", None)
    return NotebookRun(path.stem, out_dir, time.perf_counter() - start, error, preset,
                       datetime.now(timezone.utc).isoformat(timespec="seconds"), __version__)


def _record(out_root: Path, runs: Sequence[NotebookRun]) -> list[NotebookRun]:
    """Merge `runs` into the folder's manifest; returns every recorded run, in notebook order."""
    path = out_root / MANIFEST
    known = json.loads(path.read_text()) if path.exists() else {}
    for run in runs:
        known[run.name] = {**asdict(run), "out_dir": str(run.out_dir.relative_to(out_root.resolve()))}
    write_text(path, json.dumps(known, indent=1, sort_keys=True))
    order = {p.stem: i for i, p in enumerate(figure_notebooks())}
    return [NotebookRun(**{**row, "out_dir": out_root.resolve() / row["out_dir"]})
            for row in sorted(known.values(), key=lambda r: (order.get(r["name"], len(order)), r["name"]))]


def write_index(out_root: Path, runs: Sequence[NotebookRun]) -> Path:
    """`index.html` showing every figure with a link to its executed notebook."""
    parts = ["<!doctype html><meta charset='utf-8'><title>hetsched figures</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}figure{margin:2em 0}"
             "img{max-width:100%;border:1px solid #ddd}.err{color:#b00}</style><h1>hetsched figures</h1>"]
    for run in runs:
        rel = run.out_dir.relative_to(out_root.resolve())
        parts.append(f"<figure><h2>{html.escape(run.name)}</h2>")
        parts.append(f"<p><a href='{rel}/{run.name}.ipynb'>executed notebook</a> · "
                     f"<a href='{rel}/results.csv'>results.csv</a> · {run.seconds:.1f} s · "
                     f"preset <b>{html.escape(run.preset or '?')}</b> · {html.escape(run.finished or '?')} · "
                     f"hetsched {html.escape(run.version or '?')}</p>")
        if run.error:
            parts.append(f"<p class='err'>failed: {html.escape(run.error)}</p>")
        for png in sorted(run.out_dir.glob("*.png")):
            parts.append(f"<img src='{rel}/{png.name}' alt='{html.escape(run.name)}'>")
            if png.with_suffix(".html").exists():      # the same chart, interactive, with Vega inlined (offline)
                parts.append(f"<p><a href='{rel}/{png.stem}.html'>{png.stem}: interactive</a></p>")
        parts.append("</figure>")
    index = out_root / "index.html"
    index.write_text("\n".join(parts))
    return index


def reproduce(preset: str = "quick", only: Sequence[str] | None = None, out: str | Path = "outputs",
              parameters: dict | None = None) -> list[NotebookRun]:
    """Run the figure notebooks (all, or those named in `only`) and write `out/index.html`."""
    check_preset(preset)
    notebooks = figure_notebooks()
    if only:
        known = {p.stem: p for p in notebooks}
        missing = [n for n in only if n not in known]
        if missing:
            raise HetschedError(f"reproduce: no notebook {missing}; available: {', '.join(known)}")
        notebooks = [known[n] for n in only]
    out_root = Path(out)
    out_root.mkdir(parents=True, exist_ok=True)
    runs = []
    with _one_dask_cluster(parameters) as address:
        for path in tqdm(notebooks, desc=f"notebooks ({preset})", unit="nb"):
            runs.append(run_notebook(path, out_root, preset, parameters, dask_address=address))
    recorded = _record(out_root, runs)
    write_index(out_root, recorded)                       # figures of earlier calls stay in the index
    write_results_table(out_root, recorded)
    return runs


@contextmanager
def _one_dask_cluster(parameters: dict | None):
    """One LocalCluster for every notebook of a call: its address goes to their sweeps, each of which otherwise
    started two Dask workers of its own and stopped them (5-6 s a sweep). None where the caller chose: a
    `dask_address` of theirs, or `use_dask=False`."""
    chosen = parameters or {}
    if "dask_address" in chosen or chosen.get("use_dask") is False:
        yield None
        return
    from hetsched.experiments.local_dask import close_quietly, local_cluster

    # Its scheduler runs in this process: Dask's own handler prints its warnings, and its INFO lines do not reach
    # the caller's handlers (the CLI's) among the figures' progress.
    dask_log = logging.getLogger("distributed")
    propagate, dask_log.propagate = dask_log.propagate, False
    cluster = local_cluster()
    try:
        yield cluster.scheduler_address
    finally:
        close_quietly(cluster)
        dask_log.propagate = propagate


def write_results_table(out_root: Path, runs: Sequence[NotebookRun]) -> Path | None:
    """`results.parquet`: every figure's `results.csv` in one tidy table, with `figure` and `preset` columns."""
    import pandas as pd

    frames = [pd.read_csv(run.out_dir / "results.csv").assign(figure=run.name, preset=run.preset)
              for run in runs if (run.out_dir / "results.csv").exists()]
    if not frames:
        return None
    table = pd.concat(frames, ignore_index=True, sort=False)
    for col in table.columns[table.dtypes == object]:
        table[col] = table[col].astype("string")            # columns that mix numbers and labels across figures
    path = out_root / "results.parquet"
    with replacing(path) as tmp:
        table.to_parquet(tmp, index=False)
    return path
