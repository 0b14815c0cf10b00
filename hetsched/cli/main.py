"""hetsched: a workbench for heterogeneous GPU-cluster scheduling research."""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys
from pathlib import Path

from hetsched.cli import LOSSY_HELP, DefaultsHelp, changed, positive_int
from hetsched.errors import HetschedError
from hetsched.ui.names import vocabulary_frame
from hetsched.cli.generate import IMPORT_OPTIONS, add_generate_parser
from hetsched.cli.elastic import add_elastic_parser
from hetsched.cli.profile import add_profile_parser
from hetsched.cli.simulate import run_simulate
from hetsched.cli.traces import add_import_args


def _cmd_convert_trace(args: argparse.Namespace) -> int:
    from hetsched.cli.traces import import_options
    from hetsched.traces import FORMATS, infer_format, read_trace, write_trace

    if args.from_ == "sia":
        from hetsched.cli.elastic import convert_sia_workload

        count = convert_sia_workload(args.input, args.output)
        print(f"converted {count} elastic jobs: {args.input} -> {args.output}", file=sys.stderr)
        return 0
    fmt = args.from_ or infer_format(args.input)
    options = import_options(args, fmt, args.throughputs, args.seed)
    drawn = changed(args, args.table_options)
    if drawn and not options:
        raise HetschedError(f"convert trace: {', '.join(drawn)} {'act' if len(drawn) > 1 else 'acts'} only when job "
                            f"types are drawn from a throughput table (production traces; philly with --job-types "
                            f"table), and {fmt!r} keeps its own")
    reports: list = []
    kept = ""
    if options:
        options["report"] = reports.append
    to = args.to or infer_format(args.output, sniff=False)
    if options and to in ("csv", "parquet") and FORMATS[fmt].read_frame is not None:
        from hetsched.traces.canonical import write_canonical_frame

        args.output.parent.mkdir(parents=True, exist_ok=True)
        frame = FORMATS[fmt].read_frame(args.input, **options)      # columns all the way: no Job objects
        write_canonical_frame(frame, args.output)
        count = len(frame)
    else:
        jobs = read_trace(args.input, fmt, **options)
        kept = write_trace(jobs, args.output, to, lossy=args.lossy).summary()
        count = len(jobs)
    if reports:
        print(reports[0].summary(), file=sys.stderr)
    print(f"converted {count} jobs: {args.input} -> {args.output}", file=sys.stderr)
    if kept:
        print(kept, file=sys.stderr)
    return 0


def _cmd_convert_throughputs(args: argparse.Namespace) -> int:
    from hetsched.model.throughputs import merge_tables

    table = merge_tables(args.inputs, relative_to=args.relative_to, mixed_workloads=args.mixed_workloads)
    table.write(args.output)
    n_iso = int((~__import__("numpy").isnan(table.isolated)).sum())
    print(f"converted {len(table.keys)} job keys x {len(table.gpu_types)} GPU types "
          f"({n_iso} isolated measurements): {' + '.join(map(str, args.inputs))} -> {args.output}", file=sys.stderr)
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from hetsched.experiments.reproduce import reproduce

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
    from hetsched import __version__
    parser.add_argument("--version", action="version", version=f"hetsched {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from hetsched.traces import FORMATS, GENERATORS

    add_generate_parser(sub)

    conv = sub.add_parser("convert", help="convert traces or throughput tables between formats")
    conv_sub = conv.add_subparsers(dest="what", required=True, metavar="WHAT")
    tr = conv_sub.add_parser("trace", help="convert a trace (.trace = Gavel TSV, .csv/.parquet = canonical)")
    tr.add_argument("input", type=Path)
    tr.add_argument("output", type=Path)
    tr.add_argument("--from", dest="from_", choices=sorted([*FORMATS, "sia"]), default=None,
                    help="input format (sia: a Sia workload of elastic jobs, written as the project's workload table)")
    tr.add_argument("--to", choices=sorted(FORMATS), default=None, help="output format")
    tr.add_argument("--lossy", action="store_true", help=LOSSY_HELP)
    add_import_args(tr, with_table=True)
    tr.set_defaults(func=_cmd_convert_trace,        # what only a table's draw of job types reads
                    table_options={d: tr.get_default(d) for d in ("throughputs", "seed", "gpu_map")})
    tp = conv_sub.add_parser("throughputs", help="convert Gavel/Shockwave throughput JSON to a table, or merge "
                                                 "tables (later inputs win where they overlap)")
    tp.add_argument("inputs", type=Path, nargs="+", help=".json (Gavel/Shockwave layout), .parquet or .csv")
    tp.add_argument("output", type=Path, help=".parquet or .csv")
    tp.add_argument("--relative-to", metavar="TYPE", default=None,
                    help="the later inputs are `hetsched profile` tables that measured TYPE as well: their other "
                         "types join the first input in its units, scaled by its TYPE rate over theirs")
    tp.add_argument("--mixed-workloads", action="store_true",
                    help="keep the rates of types measured on different workloads as measured (not comparable)")
    tp.set_defaults(func=_cmd_convert_throughputs)
    sim = sub.add_parser("simulate", help="simulate a policy on a cluster over a trace or generated stream",
                         formatter_class=DefaultsHelp)
    sim.add_argument("--policy", required=True,
                     help="policy name, any case: Gavel's (max_min_fairness_perf, ...), Synergy's (fifo+tune, "
                          "las+fair, ...) or an alias (gavel, gavel_las, themis, ossp, mst, ...)")
    sim.add_argument("--prices", default=None, metavar="TYPE=USD,...",
                     help="$/h per GPU for the cost policies, e.g. v100=2.48,p100=1.46,k80=0.45")
    sim.add_argument("--cluster", default="36:36:36",
                     help="V100:P100:K80 counts, 'type=n,...', server shapes 16x8/24/500[@type], a Synergy .ini "
                          "file, or a JSON cluster file with prices (hetsched.io.cluster_json)")
    sim.add_argument("--gpus-per-server", default=None, help="V:P:K GPUs per server (default 1:1:1)")
    sim.add_argument("--throughputs", default="gavel_simulation", help="dataset name in data/ or a JSON path")
    source = sim.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", type=Path, help="trace file (.trace, .csv, .parquet, or a production trace with "
                                                   "--from)")
    sim.add_argument("--from", dest="from_", choices=sorted(FORMATS), default=None,
                     help="format of --trace (default: by extension)")
    sim.add_argument("--entity-weights", type=Path, default=None, metavar="CSV",
                     help="hierarchical policies: 'entity,weight' per user/team/vc (others weigh 1)")
    source.add_argument("--generate", choices=sorted(GENERATORS), help="generate the stream")
    sim.add_argument("--seed", type=int, default=None,
                     help="RNG seed: trace generators, FIFO/Gandiva tie-breaks, Shockwave's MILP solver "
                          "(default: 0; the synergy generator 42)")
    rate = sim.add_mutually_exclusive_group()             # one arrival rate: neither silently wins
    rate.add_argument("--mean-interarrival", type=float, metavar="SECONDS",
                      help="generated streams: mean seconds between arrivals (Poisson)")
    rate.add_argument("--jobs-per-hour", type=float, metavar="R", help="arrival rate instead of --mean-interarrival")
    sim.add_argument("--split", default="20:70:10", help="synergy: image:language:speech class split (%%)")
    sim.add_argument("--philly-trace", type=Path, help="synergy: Philly cluster_job_log for --multi-gpu GPU counts")
    sim.add_argument("--profiles-ratio", type=positive_int, default=None, metavar="CORES",
                     help="CPU:GPU ratio of Synergy's profiles: 3-6 are stored, others derived from the grids "
                          "(default: the cluster's, rounded)")
    sim.add_argument("--num-jobs", type=positive_int, help="generated streams: how many jobs to draw")
    sim.add_argument("--static", action="store_true", help="generated streams: all jobs arrive at t=0 (makespan)")
    sim.add_argument("--multi-gpu", action="store_true", help="generated streams: draw scale factors 1/2/4/8")
    sim.add_argument("--multi-priority", action="store_true",
                     help="generated streams: 20%% of jobs get priority weight 5")
    sim.add_argument("--window", help="measure job ids START:END (END exclusive), e.g. 4000:5000")
    sim.add_argument("--round", type=float, default=None,
                     help="round length in seconds (default: 360 for Gavel's policies, 300 for Synergy's)")
    sim.add_argument("--min-reset-interval", type=float, default=None,
                     help="minimum seconds between allocation recomputes (default: Gavel's 1920, Shockwave's 1000)")
    sim.add_argument("--rules", choices=("auto", "gavel", "synergy", "shockwave"), default="auto",
                     help="round rules of an artifact (auto: shockwave for traces with accordion/gns jobs: 120-s "
                          "rounds, 20-s preemption penalty, batch-size adaptation; else the policy's own artifact's: "
                          "gavel for an allocation, synergy for an ordering, shockwave for its planner)")
    sim.add_argument("--shockwave-config", metavar="PRESET|JSON",
                     help="shockwave planner hyper-parameters: tacc_32gpus (default), scale_64gpus, "
                          "scale_128gpus, scale_256gpus, or the artifact's JSON file")
    sim.add_argument("--calibration", type=Path, default=None, metavar="JSON",
                     help="a runtime's measured lease start (`hetsched calibrate`): new leases start that late "
                          "(docs/rules.md#lease-start)")
    sim.add_argument("--ideal", action="store_true", help="fluid allocation, no rounds (Fig. 13)")
    sim.add_argument("--partitions", type=int, default=1, metavar="K",
                     help="POP: solve an LP policy's allocation as K partitions of the jobs and GPUs "
                          "(docs/rules.md#pop)")
    sim.add_argument("--placement-aware", action="store_true",
                     help="use unconsolidated throughputs for jobs spread over servers")
    add_import_args(sim, with_table=False)
    sim.add_argument("--jobs-out", type=Path, help="write per-job records (CSV)")
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    stream = IMPORT_OPTIONS | {"mean_interarrival", "jobs_per_hour", "split", "philly_trace", "num_jobs", "static",
                               "multi_gpu", "multi_priority"}      # --seed and --throughputs act on every run
    sim.set_defaults(func=run_simulate, stream_defaults={d: sim.get_default(d) for d in sorted(stream)})

    from hetsched.runtime.main import add_scheduler_args, add_worker_args, run_scheduler, run_worker

    sch = sub.add_parser("scheduler", help="run the gRPC scheduler server (real cluster)")
    add_scheduler_args(sch)
    sch.set_defaults(func=run_scheduler)
    wrk = sub.add_parser("worker", help="run a worker that executes leased jobs")
    add_worker_args(wrk)
    wrk.set_defaults(func=run_worker)
    from hetsched.runtime.client import add_client_commands
    add_client_commands(sub)             # submit, status, cancel: the operator's side of a running scheduler

    add_profile_parser(sub)
    add_elastic_parser(sub)
    from hetsched.cli.compare import add_compare_parser
    add_compare_parser(sub)
    pol = sub.add_parser("policies", help="list every policy: registry name, the papers' name, aliases")
    pol.set_defaults(func=_cmd_policies)
    rep = sub.add_parser("reproduce", help="run the figure notebooks with papermill into an output folder")
    rep.add_argument("--preset", choices=("tiny", "quick", "paper"), default="quick",
                     help="tiny (the tests'), quick (minutes, CI) or paper (the artifacts' full scale)")
    rep.add_argument("--only", nargs="+", metavar="NAME", help="notebook names (default: all)")
    rep.add_argument("--out", default="outputs", help="output folder (default outputs/)")
    rep.add_argument("--dask-address", default=None, help="scheduler address of an existing Dask cluster")
    rep.set_defaults(func=_cmd_reproduce)
    return parser


def _cmd_policies(_args) -> int:
    from hetsched.core.registry import composition_markdown

    frame = vocabulary_frame()
    widths = {c: max(len(c), int(frame[c].str.len().max())) for c in ("policy", "name", "aliases")}
    for row in [{c: c for c in frame.columns}] + frame.to_dict("records"):
        print("  ".join(str(row[c]).ljust(w) for c, w in widths.items()) + "  " + row["description"])
    print("\nStages (docs/architecture.md): decide (allocation | planner | ordering) -> select -> place "
          "(gpus | fair | greedy | tune | opt, +place) -> rates -> round rules (--rules gavel | synergy | shockwave).\n"
          "A name is a decide stage, optionally +placement: gavel+tune, gavel_las+fair, themis+tune, shockwave+tune.\n"
          "Names are case-insensitive; fifo, las, srtf, ftf, drf and tetris are Synergy's orderings, Gavel's FIFO "
          "and LAS are gavel_fifo and gavel_las (docs/rules.md#names).\n"
          "Elastic jobs (GPU count, type and batch size change): sia, pollux, gavel+tj, themis+tj, simulated on Sia's "
          "traces by "
          "`hetsched elastic` and run on the runtime (`--policy sia`; docs/rules.md#elastic-runtime).\n")
    print(composition_markdown())
    return 0


def _unknown_option(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """A mistyped option is one line with a did-you-mean, not the command's whole usage and an unrelated error
    (`--polcy gavel` said that --policy was missing). Unique prefixes stay accepted, as argparse accepts them."""
    words, rest = [], list(argv)
    while True:                                         # down the commands: `convert trace ...`
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        command = next((t for t in rest if not t.startswith("-")), None)
        if not subparsers or command not in subparsers[0].choices:
            break
        words.append(command)
        parser, rest = subparsers[0].choices[command], rest[rest.index(command) + 1:]
    if not words:
        return
    known = [o for o in parser._option_string_actions if o.startswith("--")]
    for token in rest:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if not name.startswith("--") or name in known or sum(o.startswith(name) for o in known) == 1:
            continue
        close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
        command = " ".join(words)
        hint = f"; did you mean {' or '.join(close)}?" if close else f" (see hetsched {command} --help)"
        parser.exit(2, f"hetsched {command}: error: unknown option {name}{hint}\n")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    _unknown_option(parser, argv)
    args = parser.parse_args(argv)
    # The level is the handler's too: libraries that set their own loggers' levels (Dask's scheduler and nannies
    # log at INFO) stay quiet without -v.
    level = logging.INFO if args.verbose else logging.WARNING
    handler = logging.StreamHandler()
    handler.setLevel(level)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", handlers=[handler])
    try:
        return args.func(args)
    except BrokenPipeError:         # `hetsched policies | head`: the reader left; end quietly, as `cat` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except HetschedError as exc:
        print(f"hetsched: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:          # an output folder that cannot be made, a file that cannot be written
        reason = "exists and is not a folder" if isinstance(exc, FileExistsError) else exc.strerror
        where = f"{exc.filename}: {reason}" if exc.filename else str(exc)
        print(f"hetsched: error: {where}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
