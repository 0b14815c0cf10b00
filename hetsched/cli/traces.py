"""CLI options shared by `convert trace` and `simulate` for production traces, GPU maps and entity weights."""

from __future__ import annotations

import argparse

from hetsched.errors import HetschedError


def add_import_args(parser: argparse.ArgumentParser, *, with_table: bool) -> None:
    """Options of the production-trace readers (hetsched.traces.production)."""
    g = parser.add_argument_group("production traces (philly, helios, acme, pai2020, openb, alibaba2026)")
    if with_table:
        g.add_argument("--throughputs", default="gavel_simulation",
                       help="table the job types are drawn from (dataset name in data/ or a file)")
        g.add_argument("--seed", type=int, default=0, help="seed of the job-type draw")
    g.add_argument("--gpu-map", default=None, metavar="MODEL=TYPExF,...",
                   help="throughputs for GPU models the table lacks, e.g. T4=p100x0.8,A10=v100x1.1 (explicit; an "
                        "unmapped model is an error)")
    g.add_argument("--reference-gpu", default=None,
                   help="GPU type whose throughput turns a trace duration into steps (default: the job's pinned "
                        "type when the table has it, else v100)")
    g.add_argument("--entity", choices=("auto", "vc", "user", "none"), default="auto",
                   help="what a job's entity is (auto: the virtual cluster when the trace has them, else the user)")
    g.add_argument("--job-types", choices=("table", "synergy"), default=None,
                   help="philly only: 'synergy' (default) draws models by Synergy's class split, 'table' as the "
                        "other traces do")
    g.add_argument("--since-h", type=float, default=None, help="keep jobs arriving at or after this hour")
    g.add_argument("--until-h", type=float, default=None, help="keep jobs arriving before this hour")
    g.add_argument("--vc", default=None, metavar="VC,...", help="keep these virtual clusters")
    g.add_argument("--gpus", default=None, metavar="N,...", help="keep jobs with these GPU counts (trace counts)")
    g.add_argument("--status", default=None, metavar="S,...",
                   help="keep these statuses (e.g. COMPLETED, Succeeded; alibaba2026: HP or Spot)")
    g.add_argument("--max-jobs", type=int, default=None, help="keep the first N jobs by arrival")
    g.add_argument("--max-duration-h", type=float, default=None, help="drop jobs that ran longer than this")


def _set(text: str | None, cast=str, flag: str = "") -> frozenset | None:
    if text is None:
        return None
    try:
        return frozenset(cast(p.strip()) for p in text.split(",") if p.strip())
    except ValueError:
        raise HetschedError(f"{flag}: expected a comma-separated list, got {text!r}") from None


def import_options(args: argparse.Namespace, fmt: str, throughputs: str, seed: int) -> dict:
    """`read_trace` keyword arguments for a production format (none for the others)."""
    from hetsched.traces.formats import PRODUCTION_FORMATS
    from hetsched.traces.production import Filters, JobMapping

    chosen = [f for f in ("since_h", "until_h", "vc", "gpus", "status", "max_jobs", "max_duration_h",
                          "reference_gpu")
              if getattr(args, f, None) is not None] + (["entity"] if args.entity != "auto" else [])
    if fmt not in PRODUCTION_FORMATS:
        if chosen or getattr(args, "job_types", None):
            raise HetschedError(f"--{chosen[0].replace('_', '-') if chosen else 'job-types'} applies to the "
                                f"production traces ({', '.join(PRODUCTION_FORMATS)}), not {fmt!r}")
        return {}
    if args.job_types == "synergy" and fmt != "philly":
        raise HetschedError("--job-types synergy applies to --from philly only")
    if fmt == "philly" and args.job_types != "table":
        if chosen:          # they switched job types to the table's draw, unannounced
            raise HetschedError(f"--{chosen[0].replace('_', '-')} applies to a Philly log read as the other "
                                f"production traces are: add --job-types table (Synergy's class split, the "
                                f"default, reads the whole log)")
        return {}
    hours = [None if h is None else h * 3600.0 for h in (args.since_h, args.until_h)]
    filters = Filters(since_s=hours[0], until_s=hours[1], vcs=_set(args.vc, flag="--vc"),
                      gpus=_set(args.gpus, int, "--gpus"), statuses=_set(args.status, flag="--status"),
                      max_jobs=args.max_jobs,
                      max_duration_s=None if args.max_duration_h is None else args.max_duration_h * 3600.0)
    mapping = JobMapping(throughputs=throughputs, seed=seed, reference_gpu=args.reference_gpu,
                         gpu_map=args.gpu_map, entity=args.entity)
    return {"mapping": mapping, "filters": filters}
