"""`hetsched profile`: throughput tables measured on the user's own hardware with the project's workloads.

Each measurement trains a job type of `workloads/` (synthetic data) for `warmup` steps, then times `steps` steps,
and records steps/s in the project's long throughput schema (hetsched.model.throughputs), so `--throughputs` takes the
file and `hetsched convert throughputs` merges it with another table (e.g. the Gavel table plus a profiled `cpu`
or `a100` column).

- **Devices.** `cpu`, or `cuda` / `cuda:N`. On CUDA every timed window is bracketed by `torch.cuda.synchronize`, so
  the clock sees finished kernels, not queued ones. One "GPU" of a CPU device is one process with `threads` threads.
- **Scale factors above 1** run one process per GPU in a `torch.distributed` group (gloo on CPU, NCCL on CUDA
  when available) with DistributedDataParallel; the job's steps/s is that of its synchronised steps.
- **Pairs** (`--pairs`): two single-GPU jobs run at once on the same device; each one's rate is timed over its own
  `steps` while the other is still running (the faster one keeps running untimed until both are done).
- **CPU grid** (`--cpu-grid`): Synergy-style sensitivity. The input pipeline gets `c` data-loading worker
  processes (c over Synergy's CPU levels up to this machine's cores) and a cache of `m` GB per GPU over
  Synergy's memory levels. Memory is emulated: the cached fraction of a nominal dataset of the largest memory
  level skips decoding, the rest pays a CPU decode per sample. Written as `model, cpus_per_gpu, mem_gb_per_gpu,
  steps_per_s, relative_throughput` (relative to the grid's best), the layout of data/resources.
- **Resume.** The table is rewritten (atomically) after every measurement; a rerun with the same `--out` skips
  what the file already holds, if it measures the same workloads.
- **Workloads.** Every row says what it measured (`workloads`: these toy models at their width), so a
  profiled column is not taken for one of the artifacts' tables, whose rates are those of the full models:
  `hetsched convert throughputs --relative-to TYPE` scales it into such a table (model/relative_speed.py).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hetsched.model.catalog import split_job_type
from hetsched.errors import HetschedError
from hetsched.io.throughput_json import COLUMNS
from hetsched.model.throughputs import write_frame

DEFAULT_BATCH = 32          # job types without a batch size in their name (A3C, CycleGAN)
KEY = ["gpu_type", "placement", "job_type", "scale_factor", "partner_job_type"]


@dataclass(frozen=True)
class ProfileSpec:
    """What to measure. `job_types` are names as in the throughput tables, e.g. `ResNet-18 (batch size 64)`."""

    job_types: tuple[str, ...]
    device: str = "cpu"
    gpu_type: str = "cpu"
    scale_factors: tuple[int, ...] = (1,)
    pairs: bool = False
    warmup: int = 3
    steps: int = 20
    width: int = 16
    threads: int = 1

    def __post_init__(self) -> None:
        if not self.job_types:
            raise HetschedError("profile: no job types to measure")
        if self.steps < 1 or self.warmup < 0:
            raise HetschedError("profile: --steps must be >= 1 and --warmup >= 0")
        if any(s < 1 for s in self.scale_factors):
            raise HetschedError("profile: scale factors must be positive")
        if self.width < 1 or self.threads < 1:        # torch failed deep inside the first measurement
            raise HetschedError(f"profile: --width and --threads must be >= 1, got {self.width} and {self.threads}")

    @property
    def workloads(self) -> str:
        """What the rates are measured on (docs/rules.md#relative-speed). Threads are not part of it: they size a
        CPU "GPU" (the device measured), as the device does on CUDA."""
        return f"hetsched workloads, width {self.width}"


def job_types_for(models: list[str] | None, batch_sizes: list[int] | None, like: str = "gavel_simulation",
                  ) -> tuple[str, ...]:
    """Job types to profile: the given models at the given batch sizes, or each model at the batch sizes the
    reference table `like` has for it (all of its models when none are given)."""
    from workloads.models import build

    from hetsched.model.throughputs import load_throughputs

    known = load_throughputs(like).job_types
    if batch_sizes and min(batch_sizes) < 1:
        raise HetschedError(f"profile: batch sizes must be >= 1, got {batch_sizes}")
    if models is None:
        models = sorted({split_job_type(t)[0] for t in known})
    out = []
    for model in models:
        try:
            build(model)
        except ValueError as exc:
            raise HetschedError(f"profile: {exc}") from None
        sizes = batch_sizes or sorted({split_job_type(t)[1] for t in known if split_job_type(t)[0] == model},
                                      key=lambda b: -1 if b is None else b)
        for b in sizes or [None]:
            out.append(model if b is None else f"{model} (batch size {b})")
    return tuple(out)


# ---- one process's training loop ------------------------------------------------------------------------
def _device(name: str, rank: int = 0):
    import torch

    if name == "cpu":
        return torch.device("cpu")
    if not name.startswith("cuda"):
        raise HetschedError(f"profile: --device must be cpu, cuda or cuda:N, got {name!r}")
    if not torch.cuda.is_available():
        raise HetschedError(f"profile: --device {name}: this torch build or machine has no CUDA")
    base = int(name.split(":", 1)[1]) if ":" in name else 0
    index = base + rank
    if index >= torch.cuda.device_count():
        raise HetschedError(f"profile: needs cuda:{index}, but only {torch.cuda.device_count()} GPUs are visible")
    return torch.device("cuda", index)


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _Trainer:
    """A job type's model, optimiser and batches on one device."""

    def __init__(self, job_type: str, device, width: int, threads: int, seed: int = 0):
        import torch

        from workloads.models import build

        torch.set_num_threads(threads)
        torch.manual_seed(seed)
        model_name, batch = split_job_type(job_type)
        self.batch = batch or DEFAULT_BATCH
        model, self.make, self.loss = build(model_name, width)
        self.device = device
        self.model = model.to(device)
        self.optim = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.gen = torch.Generator().manual_seed(seed)

    def step(self, batch=None) -> None:
        x, y = batch if batch is not None else self.make(self.batch, self.gen)
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        self.optim.zero_grad(set_to_none=True)
        self.loss(self.model(x), y).backward()
        self.optim.step()

    def rate(self, warmup: int, steps: int, batches=None) -> float:
        """Steps/s over `steps` timed steps after `warmup` untimed ones."""
        for _ in range(warmup):
            self.step(next(batches) if batches is not None else None)
        _sync(self.device)
        start = time.perf_counter()
        for _ in range(steps):
            self.step(next(batches) if batches is not None else None)
        _sync(self.device)
        return steps / (time.perf_counter() - start)


# ---- measurements -----------------------------------------------------------------------------------------
def measure_isolated(spec: ProfileSpec, job_type: str) -> float:
    return _Trainer(job_type, _device(spec.device), spec.width, spec.threads).rate(spec.warmup, spec.steps)


def _rank(rank: int, world: int, rendezvous: str, spec: ProfileSpec, job_type: str, results) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    device = _device(spec.device, rank)
    backend = "nccl" if device.type == "cuda" and dist.is_nccl_available() else "gloo"
    dist.init_process_group(backend, init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    try:
        trainer = _Trainer(job_type, device, spec.width, spec.threads, seed=rank)
        trainer.model = torch.nn.parallel.DistributedDataParallel(
            trainer.model, device_ids=[device.index] if device.type == "cuda" else None)
        trainer.optim = torch.optim.SGD(trainer.model.parameters(), lr=0.01)
        rate = trainer.rate(spec.warmup, spec.steps)
        dist.barrier()
        results.put((rank, rate))
    finally:
        dist.destroy_process_group()


def _run_processes(target, args_per_process: list[tuple], timeout_s: float) -> list:
    """Start one spawned process per argument tuple (each gets a result queue last); bounded wait; clean up."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, results), daemon=True) for a in args_per_process]
    for p in procs:
        p.start()
    out = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < len(procs):
            left = deadline - time.monotonic()
            if left <= 0:
                raise HetschedError(f"profile: measurement processes did not finish within {timeout_s:.0f} s")
            try:
                out.append(results.get(timeout=min(left, 1.0)))
            except Exception:                                    # queue.Empty: check for crashed processes
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise HetschedError(f"profile: a measurement process exited with code {dead[0].exitcode}")
        for p in procs:
            p.join(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    return out


def measure_distributed(spec: ProfileSpec, job_type: str, scale_factor: int, timeout_s: float = 600.0) -> float:
    """The job's synchronised steps/s on `scale_factor` processes (rank 0's rate; every rank steps together)."""
    import tempfile

    # A file rendezvous, not a TCP port: a port picked free here can be taken by another process before rank 0
    # binds it.
    with tempfile.TemporaryDirectory(prefix="hetsched-profile-") as tmp:
        rendezvous = str(Path(tmp) / "rendezvous")
        rates = dict(_run_processes(_rank, [(r, scale_factor, rendezvous, spec, job_type)
                                            for r in range(scale_factor)], timeout_s))
    return float(rates[0])


def _pair_member(index: int, spec: ProfileSpec, job_type: str, barrier, done, results) -> None:
    trainer = _Trainer(job_type, _device(spec.device), spec.width, spec.threads, seed=index)
    for _ in range(spec.warmup):
        trainer.step()
    barrier.wait(timeout=120)
    rate = trainer.rate(0, spec.steps)
    results.put((index, rate))
    done[index].set()
    other = done[1 - index]
    for _ in range(50 * spec.steps):                       # keep the device shared until the partner is done
        if other.is_set():
            break
        trainer.step()


def measure_pair(spec: ProfileSpec, a: str, b: str, timeout_s: float = 600.0) -> tuple[float, float]:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, done = ctx.Barrier(2), [ctx.Event(), ctx.Event()]
    rates = dict(_run_processes(_pair_member, [(0, spec, a, barrier, done), (1, spec, b, barrier, done)],
                                timeout_s))
    return float(rates[0]), float(rates[1])


# ---- the CPU/memory grid (Synergy-style) ------------------------------------------------------------------
class _Pipeline:
    """An iterable dataset whose samples cost CPU to decode unless cached (the emulated page cache)."""

    def __init__(self, make, batch: int, cached_fraction: float, decode_work: int):
        self.make, self.batch, self.cached, self.work = make, batch, cached_fraction, decode_work

    def __iter__(self):
        import torch
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        gen = torch.Generator().manual_seed(0 if info is None else info.id)
        rng = np.random.default_rng(0 if info is None else info.id)
        scratch = torch.randn(64, 64, generator=gen)
        while True:
            uncached = int((rng.random(self.batch) >= self.cached).sum())
            for _ in range(uncached * self.work):              # decode: CPU work per uncached sample
                scratch = torch.tanh(scratch @ scratch.T * 1e-2)
            yield self.make(self.batch, gen)


def measure_cpu_grid(spec: ProfileSpec, job_type: str, cpu_levels, mem_levels, decode_work: int = 2,
                     ) -> list[dict]:
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    from hetsched.model.profiles import MEM_LEVELS

    nominal = max(MEM_LEVELS)
    trainer = _Trainer(job_type, _device(spec.device), spec.width, spec.threads)
    rows = []
    for c in cpu_levels:
        for m in mem_levels:
            pipe = _Pipeline(trainer.make, trainer.batch, min(1.0, m / nominal), decode_work)
            dataset = type("Samples", (IterableDataset,), {"__iter__": lambda self, p=pipe: iter(p)})()
            workers = max(0, int(c) - 1)                     # one core trains; the others load
            loader = DataLoader(dataset, batch_size=None, num_workers=workers,
                                persistent_workers=False, prefetch_factor=2 if workers else None)
            batches = iter(loader)
            rate = trainer.rate(spec.warmup, spec.steps, batches)
            del batches, loader
            rows.append({"model": job_type, "cpus_per_gpu": float(c), "mem_gb_per_gpu": float(m),
                         "steps_per_s": rate})
    best = max(r["steps_per_s"] for r in rows)
    for r in rows:
        r["relative_throughput"] = r["steps_per_s"] / best
    torch.set_num_threads(spec.threads)
    return rows


# ---- the table, with resume --------------------------------------------------------------------------------
def _read_existing(path: Path, workloads: str) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame(columns=[*COLUMNS, "workloads"])
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    missing = set(COLUMNS) - set(frame.columns)
    if missing:
        raise HetschedError(f"profile: {path} exists but is not a throughput table (lacks {sorted(missing)}); "
                            f"choose another --out")
    held = set(frame["workloads"].fillna("")) if "workloads" in frame else {""}
    if held - {workloads} and len(frame):        # resuming would put rates of two workloads in one column
        was = ", ".join(sorted(w or "workloads it does not record" for w in held))
        raise HetschedError(f"profile: {path} holds rates measured on {was}; this run measures {workloads}, "
                            f"whose rates would not be comparable with them: choose another --out")
    return frame


def tasks(spec: ProfileSpec) -> list[tuple]:
    scales = sorted(set(spec.scale_factors) | ({1} if spec.pairs else set()))   # a pair needs its members alone
    out = [("alone", t, s, None) for t in spec.job_types for s in scales]
    if spec.pairs:
        types = list(spec.job_types)
        out += [("pair", a, 1, b) for i, a in enumerate(types) for b in types[i:]]
    return out


def profile(spec: ProfileSpec, out: str | Path, progress: bool = True) -> pd.DataFrame:
    """Measure every task not already in `out`; rewrite `out` after each one. Returns the whole table."""
    from tqdm.auto import tqdm

    path = Path(out)
    if path.suffix not in (".parquet", ".csv"):
        raise HetschedError(f"profile: --out must end in .parquet or .csv, got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    table = _read_existing(path, spec.workloads)
    have = {(g, t, int(s), p if isinstance(p, str) else None)
            for g, t, s, p in zip(table["gpu_type"], table["job_type"], table["scale_factor"],
                                  table["partner_job_type"])}
    todo = [k for k in tasks(spec) if (spec.gpu_type, k[1], k[2], k[3]) not in have]
    for kind, a, s, b in tqdm(todo, desc=f"profiling {spec.gpu_type}", disable=not progress, unit="run"):
        if kind == "pair":
            ra, rb = measure_pair(spec, a, b)
            rows = [(a, b, ra, rb)] + ([(b, a, rb, ra)] if a != b else [])
        else:
            rate = measure_isolated(spec, a) if s == 1 else measure_distributed(spec, a, s)
            rows = [(a, None, rate, math.nan)]
        new = pd.DataFrame([{"gpu_type": spec.gpu_type, "placement": "consolidated", "job_type": j,
                             "scale_factor": s, "partner_job_type": p, "steps_per_s": r,
                             "partner_steps_per_s": pr, "workloads": spec.workloads} for j, p, r, pr in rows],
                           columns=[*COLUMNS, "workloads"])
        table = new if table.empty else pd.concat([table, new], ignore_index=True)
        write_frame(table, path)
    return table


def grid_path(out: str | Path) -> Path:
    path = Path(out)
    return path.with_name(f"{path.stem}.cpu_grid{path.suffix}")


def profile_cpu_grid(spec: ProfileSpec, out: str | Path, progress: bool = True, cpu_levels=None,
                     mem_levels=None) -> pd.DataFrame:
    """The CPU/memory grid of every job type into `<out>.cpu_grid.<ext>`, resuming by job type."""
    from tqdm.auto import tqdm

    from hetsched.model.profiles import CPU_LEVELS, MEM_LEVELS

    cores = os.cpu_count() or 1
    cpu_levels = cpu_levels or [c for c in CPU_LEVELS if c <= cores]
    mem_levels = mem_levels or list(MEM_LEVELS)
    path = grid_path(out)
    table = pd.read_parquet(path) if path.exists() and path.suffix == ".parquet" else \
        pd.read_csv(path) if path.exists() else pd.DataFrame()
    done = set(table["model"]) if len(table) else set()
    for job_type in tqdm([t for t in spec.job_types if t not in done], desc="CPU/memory grid",
                         disable=not progress, unit="model"):
        new = pd.DataFrame(measure_cpu_grid(spec, job_type, cpu_levels, mem_levels))
        table = new if table.empty else pd.concat([table, new], ignore_index=True)
        write_frame(table, path)
    return table
