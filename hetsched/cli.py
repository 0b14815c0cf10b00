"""hetsched: a workbench for heterogeneous GPU-cluster scheduling research."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .errors import HetschedError


def _cmd_generate(args: argparse.Namespace) -> int:
    from .traces import make_generator, write_trace

    options = dict(seed=args.seed, multi_gpu=args.multi_gpu, multi_priority=args.multi_priority,
                   slos=args.slos, static=args.static, throughputs=args.throughputs)
    if not args.static:
        if args.mean_interarrival is None:
            raise HetschedError("generate: give --mean-interarrival SECONDS (or --static)")
        options["mean_interarrival_s"] = args.mean_interarrival
    jobs = make_generator(args.family, **options).jobs(args.num_jobs)
    write_trace(jobs, args.out, args.to)
    print(f"wrote {len(jobs)} jobs to {args.out}", file=sys.stderr)
    return 0


def _cmd_convert_trace(args: argparse.Namespace) -> int:
    from .traces import read_trace, write_trace

    jobs = read_trace(args.input, args.from_)
    write_trace(jobs, args.output, args.to)
    print(f"converted {len(jobs)} jobs: {args.input} -> {args.output}", file=sys.stderr)
    return 0


def _cmd_convert_throughputs(args: argparse.Namespace) -> int:
    from .throughputs import ThroughputTable

    table = ThroughputTable.read(args.input)
    table.write(args.output)
    n_iso = int((~__import__("numpy").isnan(table.isolated)).sum())
    print(f"converted {len(table.keys)} job keys x {len(table.gpu_types)} GPU types "
          f"({n_iso} isolated measurements): {args.input} -> {args.output}", file=sys.stderr)
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from .reproduce import reproduce

    params = {"dask_address": args.dask_address} if args.dask_address else None
    runs = reproduce(args.preset, args.only, args.out, params)
    for run in runs:
        status = "FAILED " + run.error if run.error else "ok"
        print(f"{run.name:32s} {run.seconds:8.1f} s  {status}")
    print(f"index: {Path(args.out) / 'index.html'}")
    return 1 if any(r.error for r in runs) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hetsched", description=__doc__.splitlines()[0].split(": ", 1)[-1]
                                     if __doc__ else None)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from .traces import FORMATS, GENERATORS

    gen = sub.add_parser("generate", help="generate a job stream exactly as an artifact's generator does")
    gen.add_argument("family", choices=sorted(GENERATORS), help="generator family")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--mean-interarrival", type=float, metavar="SECONDS",
                     help="mean inter-arrival time in seconds (3600 / jobs per hour)")
    gen.add_argument("--num-jobs", type=int, required=True)
    gen.add_argument("--multi-gpu", action="store_true", help="draw scale factors 1/2/4/8")
    gen.add_argument("--multi-priority", action="store_true", help="20%% of jobs get priority weight 5")
    gen.add_argument("--slos", action="store_true", help="draw SLO factors (1.2/2/10 x duration)")
    gen.add_argument("--static", action="store_true", help="all jobs arrive at t=0")
    gen.add_argument("--throughputs", default=None, help="dataset name or path (default gavel_simulation)")
    gen.add_argument("--out", required=True, type=Path, help="output (.csv, .parquet or .trace)")
    gen.add_argument("--to", choices=sorted(FORMATS), default=None, help="output format (default: by extension)")
    gen.set_defaults(func=_cmd_generate)

    conv = sub.add_parser("convert", help="convert traces or throughput tables between formats")
    conv_sub = conv.add_subparsers(dest="what", required=True, metavar="WHAT")
    tr = conv_sub.add_parser("trace", help="convert a trace (.trace = Gavel TSV, .csv/.parquet = canonical)")
    tr.add_argument("input", type=Path)
    tr.add_argument("output", type=Path)
    tr.add_argument("--from", dest="from_", choices=sorted(FORMATS), default=None, help="input format")
    tr.add_argument("--to", choices=sorted(FORMATS), default=None, help="output format")
    tr.set_defaults(func=_cmd_convert_trace)
    tp = conv_sub.add_parser("throughputs", help="convert Gavel/Shockwave throughput JSON to a table")
    tp.add_argument("input", type=Path, help=".json (Gavel/Shockwave layout), .parquet or .csv")
    tp.add_argument("output", type=Path, help=".parquet or .csv")
    tp.set_defaults(func=_cmd_convert_throughputs)
    rep = sub.add_parser("reproduce", help="run the figure notebooks with papermill into an output folder")
    rep.add_argument("--preset", choices=("tiny", "quick", "paper"), default="quick")
    rep.add_argument("--only", nargs="+", metavar="NAME", help="notebook names (default: all)")
    rep.add_argument("--out", default="outputs", help="output folder (default outputs/)")
    rep.add_argument("--dask-address", default=None, help="scheduler address of an existing Dask cluster")
    rep.set_defaults(func=_cmd_reproduce)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except HetschedError as exc:
        print(f"hetsched: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
