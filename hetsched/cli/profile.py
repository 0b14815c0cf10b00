"""`hetsched profile`: the CLI of hetsched.rates.profiler."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hetsched.cli import DefaultsHelp
from hetsched.errors import HetschedError


def _ints(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise HetschedError(f"{flag}: expected comma-separated integers, got {text!r}") from None


def add_profile_parser(sub) -> None:
    p = sub.add_parser("profile", help="measure a throughput table on this machine's CPU or GPUs",
                       formatter_class=DefaultsHelp)
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--gpu-type", default=None, help="name of the column (default: cpu, or the CUDA device name)")
    p.add_argument("--models", default=None, help="comma-separated models (default: every model of --like)")
    p.add_argument("--batch-sizes", default=None, help="comma-separated (default: those of --like per model)")
    p.add_argument("--like", default="gavel_simulation", help="table whose job types are profiled by default")
    p.add_argument("--scale-factors", default="1", help="comma-separated GPUs per job (>1: torch.distributed)")
    p.add_argument("--pairs", action="store_true", help="also measure co-located pairs (space sharing)")
    p.add_argument("--cpu-grid", action="store_true",
                   help="also measure Synergy-style CPU/memory sensitivity into OUT.cpu_grid.<ext>")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before each measurement")
    p.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    p.add_argument("--width", type=int, default=16, help="model width of the workloads")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--out", required=True, type=Path, help=".parquet or .csv (resumed when it exists)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_cmd_profile)


def _cmd_profile(args: argparse.Namespace) -> int:
    from hetsched.io.gpu_map import gpu_type_name
    from hetsched.rates.profiler import ProfileSpec, grid_path, job_types_for, profile, profile_cpu_grid

    models = [m.strip() for m in args.models.split(",")] if args.models else None
    job_types = job_types_for(models, _ints(args.batch_sizes, "--batch-sizes"), args.like)
    gpu_type = args.gpu_type or _default_type(args.device)
    spec = ProfileSpec(job_types, device=args.device, gpu_type=gpu_type_name(gpu_type),
                       scale_factors=tuple(_ints(args.scale_factors, "--scale-factors")), pairs=args.pairs,
                       warmup=args.warmup, steps=args.steps, width=args.width, threads=args.threads)
    table = profile(spec, args.out, progress=not args.no_progress)
    print(f"{len(table)} rows in {args.out} (column {spec.gpu_type!r})", file=sys.stderr)
    if args.cpu_grid:
        grid = profile_cpu_grid(spec, args.out, progress=not args.no_progress)
        print(f"{len(grid)} grid points in {grid_path(args.out)}", file=sys.stderr)
    return 0


def _default_type(device: str) -> str:
    if device == "cpu":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        raise HetschedError(f"profile: --device {device}: this torch build or machine has no CUDA")
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    return torch.cuda.get_device_name(index)
