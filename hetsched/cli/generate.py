"""`hetsched generate`: job streams exactly as the artifacts' generators draw them (Gavel, Synergy, Shockwave)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hetsched.cli import LOSSY_HELP, positive_int
from hetsched.errors import HetschedError


_ARRIVALS = frozenset({"mean_interarrival", "jobs_per_hour"})
#: The stream options (argparse dests) each generator family acts on, in `generate` and `simulate --generate`.
#: Any other stream option given is refused with one line, never ignored.
GENERATOR_OPTIONS = {
    "gavel": {"seed", "num_jobs", "multi_gpu", "multi_priority", "slos", "static", "throughputs", *_ARRIVALS},
    "synergy": {"seed", "num_jobs", "multi_gpu", "split", "philly_trace", "jobs_per_hour"},
    "shockwave": {"seed", "num_jobs", "multi_gpu", "name", "min_duration_h", "max_duration_h", "num_durations",
                  "mode_mix", "scale_factor_mix", "static_modes", "throughputs", *_ARRIVALS},
}
#: The production-trace readers' options (hetsched.cli.traces.add_import_args), for `simulate --trace`.
IMPORT_OPTIONS = {"from_", "reference_gpu", "entity", "job_types", "since_h", "until_h", "vc", "gpus", "status",
                  "max_jobs", "max_duration_h"}


def generator_options(family: str, args: argparse.Namespace) -> tuple[set[str], str]:
    """What `family` acts on with these arguments, and why it leaves out options that it acts on elsewhere: a
    static Gavel stream has no arrival rate, and a Shockwave artifact name fixes all but the job count and table."""
    if family == "shockwave" and getattr(args, "name", None):
        return {"name", "num_jobs", "throughputs"}, "--name sets it"
    if family == "gavel" and args.static:
        return GENERATOR_OPTIONS[family] - _ARRIVALS, "a --static stream arrives at t = 0"
    return GENERATOR_OPTIONS[family], ""


def refuse_unused(args: argparse.Namespace, what: str, family: str | None = None) -> None:
    """Refuse the stream options given (different from the parser's default, `args.stream_defaults`) that
    `family`'s generator (None: a trace file) does not act on, each with where it applies."""
    used, because = generator_options(family, args) if family else (IMPORT_OPTIONS, "")
    given = [d for d, default in args.stream_defaults.items() if d not in used and getattr(args, d) != default]
    if not given:
        return

    def where(dest: str) -> str:
        families = [f for f, options in GENERATOR_OPTIONS.items() if dest in options]
        if family in families:
            return because
        if not families:
            return "production traces: --trace with --from"
        return f"{', '.join(families[:-1])} and {families[-1]} generators" if len(families) > 1 else \
            f"{families[0]} generator only"
    flags = ", ".join(f"--{d.rstrip('_').replace('_', '-')} ({where(d)})" for d in given)
    raise HetschedError(f"{what} does not use {flags}")


def _parse_split(text: str) -> tuple[float, float, float]:
    try:
        parts = tuple(float(v) for v in text.split(":"))
    except ValueError:
        parts = ()
    if len(parts) != 3:
        raise HetschedError(f"--split must be IMAGE:LANGUAGE:SPEECH percentages, e.g. 20:70:10, got {text!r}")
    return parts  # type: ignore[return-value]


def synergy_generator(args: argparse.Namespace, ratio: int = 3):
    from hetsched.traces import make_generator

    if args.jobs_per_hour is None:
        raise HetschedError("synergy streams need --jobs-per-hour R")
    gpus = None
    if getattr(args, "philly_trace", None):
        from hetsched.traces.philly import read_philly_records
        gpus = [r.gpus for r in read_philly_records(args.philly_trace, multi_gpu=True)]
    return make_generator("synergy", seed=42 if args.seed is None else args.seed, jobs_per_hour=args.jobs_per_hour,
                          split=_parse_split(args.split), multi_gpu=args.multi_gpu, ratio=ratio, philly_gpus=gpus)


def mean_interarrival(args: argparse.Namespace) -> float | None:
    if args.mean_interarrival is not None:
        return args.mean_interarrival
    if args.jobs_per_hour is not None:
        if not args.jobs_per_hour > 0:
            raise HetschedError(f"--jobs-per-hour must be positive, got {args.jobs_per_hour}")
        return 3600.0 / args.jobs_per_hour
    return None


def _cmd_generate(args: argparse.Namespace) -> int:
    from hetsched.traces import make_generator

    refuse_unused(args, f"generate {args.family}", args.family)
    if args.family == "shockwave":
        return _generate_shockwave(args)
    if args.num_jobs is None:
        raise HetschedError(f"generate {args.family}: --num-jobs is required")
    if args.family == "synergy":
        jobs = synergy_generator(args).jobs(args.num_jobs)       # Synergy's header-less CSV only when asked,
        return _write(jobs, args, args.to or (None if Path(args.out).suffix else "synergy"))   # or without suffix
    options = dict(seed=args.seed or 0, multi_gpu=args.multi_gpu, multi_priority=args.multi_priority,
                   slos=args.slos, static=args.static, throughputs=args.throughputs)
    if not args.static:
        interarrival = mean_interarrival(args)
        if interarrival is None:
            raise HetschedError("generate: give --mean-interarrival SECONDS or --jobs-per-hour R (or --static)")
        options["mean_interarrival_s"] = interarrival
    return _write(make_generator(args.family, **options).jobs(args.num_jobs), args, args.to)


def _write(jobs: list, args: argparse.Namespace, fmt: str | None) -> int:
    from hetsched.traces import write_trace

    folder = Path(args.out).parent
    blocker = next((p for p in [*reversed(folder.parents), folder] if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise HetschedError(f"{blocker}: exists and is not a folder")
    if not folder.is_dir():                                # a typo in the folder is not a new folder
        raise HetschedError(f"generate: the folder {folder} does not exist; make it first")
    kept = write_trace(jobs, args.out, fmt, lossy=args.lossy).summary()
    print(f"wrote {len(jobs)} jobs to {args.out}" + (f"; {kept}" if kept else ""), file=sys.stderr)
    return 0


def _mix(text: str, size: int, flag: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise HetschedError(f"generate: {flag} must be {size} comma-separated probabilities, got {text!r}") from None
    if len(values) != size:
        raise HetschedError(f"generate: {flag} must be {size} comma-separated probabilities, got {text!r}")
    return values


def _generate_shockwave(args: argparse.Namespace) -> int:
    """Shockwave's generator from an artifact-style name (`--name`) or from the flags."""
    from hetsched.traces.generators.shockwave import ShockwaveGenerator

    table = args.throughputs or "shockwave_tacc"
    if args.name:
        gen = ShockwaveGenerator.from_name(args.name, table)
        num = args.num_jobs if args.num_jobs is not None else int(Path(args.name).name.split("_")[0])
    else:
        interarrival = mean_interarrival(args)
        if interarrival is None or args.num_jobs is None:
            raise HetschedError("generate shockwave: give --name ARTIFACT_TRACE_NAME, or --num-jobs with "
                                "--mean-interarrival SECONDS (or --jobs-per-hour R)")
        gen = ShockwaveGenerator(seed=args.seed or 0, mean_interarrival_s=interarrival,
                                 min_duration_h=args.min_duration_h, max_duration_h=args.max_duration_h,
                                 num_durations=args.num_durations,
                                 mode_mix=_mix(args.mode_mix, 3, "--mode-mix"),
                                 scale_factor_mix=_mix(args.scale_factor_mix, 4, "--scale-factor-mix"),
                                 multi_gpu=args.multi_gpu, dynamic=not args.static_modes, throughputs=table)
        num = args.num_jobs
    return _write(gen.jobs(num), args, args.to or ("shockwave" if args.out.suffix == ".trace" else None))


def add_generate_parser(sub) -> None:
    """The `generate` subcommand."""
    from hetsched.traces import FORMATS, GENERATORS

    gen = sub.add_parser("generate", help="generate a job stream exactly as an artifact's generator does")
    gen.add_argument("family", choices=sorted(GENERATORS), help="generator family")
    gen.add_argument("--seed", type=int, default=None, help="RNG seed (default: 0 for gavel, 42 for synergy)")
    rate = gen.add_mutually_exclusive_group()             # one arrival rate: neither silently wins
    rate.add_argument("--mean-interarrival", type=float, metavar="SECONDS",
                      help="mean inter-arrival time in seconds (3600 / jobs per hour)")
    rate.add_argument("--jobs-per-hour", type=float, metavar="R", help="Poisson arrival rate (jobs per hour)")
    gen.add_argument("--num-jobs", type=positive_int, default=None,
                     help="jobs to generate (shockwave --name: from the name)")
    gen.add_argument("--multi-gpu", action="store_true", help="draw scale factors 1/2/4/8")
    gen.add_argument("--split", default="20:70:10", help="synergy: image:language:speech class split (%%)")
    gen.add_argument("--philly-trace", type=Path, help="synergy: Philly cluster_job_log for --multi-gpu GPU counts")
    gen.add_argument("--multi-priority", action="store_true", help="20%% of jobs get priority weight 5")
    gen.add_argument("--slos", action="store_true", help="draw SLO factors (1.2/2/10 x duration)")
    gen.add_argument("--static", action="store_true", help="all jobs arrive at t=0")
    gen.add_argument("--name", help="shockwave: an artifact trace name, e.g. "
                                    "120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic")
    gen.add_argument("--min-duration-h", type=float, default=0.2, help="shockwave: shortest duration (hours)")
    gen.add_argument("--max-duration-h", type=float, default=5.0, help="shockwave: longest duration (hours)")
    gen.add_argument("--num-durations", type=int, default=100, help="shockwave: points of the duration grid")
    gen.add_argument("--mode-mix", default="0,0.5,0.5", help="shockwave: P(static),P(accordion),P(gns)")
    gen.add_argument("--scale-factor-mix", default="0.6,0.3,0.09,0.01", help="shockwave: P(1),P(2),P(4),P(8) GPUs")
    gen.add_argument("--static-modes", action="store_true", help="shockwave: no adaptation (every job static)")
    gen.add_argument("--throughputs", default=None,
                     help="dataset name or path (default gavel_simulation; shockwave: shockwave_tacc)")
    gen.add_argument("--out", required=True, type=Path,
                     help="output (.csv, .parquet or .trace; synergy writes its replay format unless --to)")
    gen.add_argument("--to", choices=sorted(FORMATS), default=None, help="output format (default: by extension)")
    gen.add_argument("--lossy", action="store_true", help=LOSSY_HELP)
    gen.set_defaults(func=_cmd_generate, stream_defaults={d: gen.get_default(d)
                                                          for d in sorted(set().union(*GENERATOR_OPTIONS.values()))})
