"""`hetsched simulate`: one policy on one cluster over a trace or a generated stream, checked before it runs.

Every option is checked against the run: one that the run cannot act on is refused, with where it applies
(docs/rules.md#compose), and names that select nothing (GPU-map rules, entity weights) are refused or named.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from hetsched.cli.generate import mean_interarrival, refuse_unused, synergy_generator
from hetsched.core.run_config import auto_system
from hetsched.errors import HetschedError
from hetsched.experiments.sweep import parse_window
from hetsched.ui.names import display_name


def _jobs_for_simulation(args: argparse.Namespace, table, cluster, window: tuple[int, int] | None):
    from itertools import islice

    from hetsched.traces import make_generator, read_trace

    refuse_unused(args, "simulate --trace" if args.trace else f"simulate --generate {args.generate}", args.generate)
    if args.generate and window and args.num_jobs is not None and window[1] > args.num_jobs:
        raise HetschedError(f"simulate: --window {args.window} ends past the stream's last job (--num-jobs "
                            f"{args.num_jobs} generates ids 0 to {args.num_jobs - 1})")
    if args.trace:
        from hetsched.cli.traces import import_options
        from hetsched.traces import infer_format

        fmt = args.from_ or infer_format(args.trace)
        jobs = read_trace(args.trace, fmt, **import_options(args, fmt, table, args.seed or 0))
        if not jobs:
            raise HetschedError(f"simulate: no jobs to simulate in {args.trace} (an empty file, or import filters "
                                f"such as --since-h, --until-h, --vc, --gpus or --status that keep none)")
        return jobs
    if args.generate == "synergy":
        if args.window is None and args.num_jobs is None:
            raise HetschedError("simulate: a continuous stream needs --window START:END or --num-jobs N")
        from hetsched.model.profiles import profiles_ratio_for
        stream = iter(synergy_generator(args, ratio=args.profiles_ratio or profiles_ratio_for(cluster)))
        return islice(stream, args.num_jobs) if args.num_jobs is not None else stream
    if args.seed is None:
        args.seed = 0
    if args.static:
        if args.num_jobs is None:
            raise HetschedError("simulate: a static stream needs --num-jobs")
        return make_generator(args.generate, seed=args.seed, static=True, multi_gpu=args.multi_gpu,
                              multi_priority=args.multi_priority, throughputs=table).jobs(args.num_jobs)
    interarrival = mean_interarrival(args)
    if interarrival is None:
        raise HetschedError("simulate: a continuous stream needs --mean-interarrival SECONDS or --jobs-per-hour R")
    if args.window is None and args.num_jobs is None:
        raise HetschedError("simulate: a continuous stream needs --window START:END or --num-jobs N")
    options = dict(seed=args.seed, mean_interarrival_s=interarrival, multi_gpu=args.multi_gpu)
    if args.generate == "gavel":
        options.update(multi_priority=args.multi_priority, throughputs=table)
    stream = iter(make_generator(args.generate, **options))   # shockwave: its own table, as `generate` draws it
    return islice(stream, args.num_jobs) if args.num_jobs is not None else stream


def _system_rules(args: argparse.Namespace, jobs, decide_kind: str) -> str:
    """`--rules auto`: the core's choice (Shockwave's round rules for streams with batch-size adaptation, else the
    rules of the artifact whose decide stage the policy is); Shockwave's generator draws adaptive jobs."""
    if args.rules != "auto":
        return args.rules
    return "shockwave" if args.generate == "shockwave" else auto_system(decide_kind, jobs)


def run_simulate(args: argparse.Namespace) -> int:
    import json

    from hetsched.model.cluster import ClusterSpec
    from hetsched.sim.metrics import summary, with_hours
    from hetsched.core.registry import pipeline_for, planner_params, resolve
    from hetsched.sim.simulator import SimulationConfig, policy_for, simulate
    from hetsched.model.throughputs import load_throughputs

    from hetsched.io.gpu_map import apply_gpu_map, check_gpu_types, parse_gpu_map
    from hetsched.solvers import clock

    name = resolve(args.policy)       # once: every later call takes the resolved name and its kind
    if name.kind == "elastic":        # elastic jobs come from Sia's workload tables, not Gavel's or Synergy's streams
        raise HetschedError(f"{name} schedules elastic jobs: simulate them on Sia's workloads with `hetsched elastic`, "
                            "or give simulate() jobs of its applications (docs/rules.md R86)")
    if args.jobs_out:               # before the run, not after it: a folder that cannot be made loses nothing
        Path(args.jobs_out).parent.mkdir(parents=True, exist_ok=True)
    mark = clock.reading()
    gpu_map = parse_gpu_map(args.gpu_map)
    table = apply_gpu_map(load_throughputs(args.throughputs), gpu_map)
    cluster = ClusterSpec.load(args.cluster, gpus_per_server=args.gpus_per_server,
                               prices_per_hour=_parse_prices(args.prices))
    check_gpu_types(cluster.gpu_types, table, f"the cluster {args.cluster!r}")
    if args.round is not None and not args.round > 0:
        raise HetschedError(f"simulate: --round must be positive seconds, got {args.round}")
    window = parse_window(args.window, "simulate: --window")
    jobs = _jobs_for_simulation(args, table, cluster, window)
    if gpu_map:
        pins = {t for j in jobs for t in j.allowed_gpu_types} if isinstance(jobs, list) else set()
        _names_used(set(gpu_map), set(cluster.gpu_types) | pins, "--gpu-map maps", "the cluster's GPU types and the "
                    "jobs' pins")
    kind = name.kind
    planner = kind == "planner"                                     # shockwave, shockwave_agnostic, +tune
    system = _system_rules(args, jobs, kind)
    params = planner_params(kind, args.shockwave_config)
    if args.partitions != 1:
        params["partitions"] = args.partitions
    policy = policy_for(name, args.seed or 0, system=system, **params)
    overrides_entities = {"entity_weights": _entity_weights(args, jobs)} if args.entity_weights is not None else {}
    overrides = dict(seed=args.seed or 0, window=window, ideal=args.ideal,
                     **overrides_entities,
                     placement_aware=args.placement_aware, record_timeline=False, profiles_ratio=args.profiles_ratio)
    if args.round is not None:
        overrides["round_s"] = args.round
    if args.min_reset_interval is not None:
        overrides["min_reset_interval_s"] = args.min_reset_interval
    config = SimulationConfig.for_system(system, **overrides)
    if args.calibration is not None:
        from hetsched.io.calibration import calibrated_config
        config = calibrated_config(config, args.calibration)
    pipeline = pipeline_for(policy, config, cluster)
    result = simulate(jobs, cluster, pipeline, table, config)
    if args.jobs_out:
        from hetsched.io.atomic import replacing

        with replacing(args.jobs_out) as tmp:
            result.jobs_frame().to_csv(tmp, index=False)
    row = summary(result)
    if not row["num_jobs"]:
        raise HetschedError(f"simulate: no job finished inside the measured window "
                            f"({args.window or 'all jobs'}); nothing to report")
    row.update(clock.since(mark))
    row = with_hours(row)
    row["config"] = {"policy": args.policy, "resolved_policy": result.policy,
                     "policy_name": display_name(result.policy), "cluster": str(cluster),
                     "prices_per_hour": dict(cluster.prices_per_hour), "throughputs": args.throughputs,
                     "round_s": pipeline.rules.round_s, "stages": pipeline.stages(), "seed": config.seed,
                     "window": args.window, "rules": system,
                     "trace": str(args.trace) if args.trace else None, "generate": args.generate,
                     "partitions": args.partitions,
                     "planner": dataclasses.asdict(policy.config) if planner else None}   # every setting, as run
    if args.json:
        print(json.dumps(json_ready(row), allow_nan=False))
    else:
        for key, value in row.items():        # the config as JSON, as --json gives it
            text = f"{value:.6g}" if isinstance(value, float) else \
                json.dumps(json_ready(value), allow_nan=False) if isinstance(value, dict) else value
            print(f"{key:>16}: {text}")
    return 0


def _entity_weights(args: argparse.Namespace, jobs) -> dict[str, float]:
    """`--entity-weights`, checked against the stream: weights that name no job's entity would change nothing."""
    from hetsched.model.entities import read_entity_weights

    weights = read_entity_weights(args.entity_weights)
    if not isinstance(jobs, list):
        raise HetschedError(f"simulate: --entity-weights needs jobs with entities (users, teams, vcs); "
                            f"--generate {args.generate} streams have none")
    _names_used(set(weights), {j.entity for j in jobs if j.entity}, f"{args.entity_weights} weighs",
                f"the entities of {args.trace}")
    return weights


def _names_used(given: set[str], present: set[str], what: str, where: str) -> None:
    """Refuse names of which none is `present` (the option would change nothing); warn about the others."""
    missing = sorted(given - present)
    if not missing:
        return

    def listed(names) -> str:
        return ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "") if names else "none"
    if len(missing) == len(given):
        raise HetschedError(f"simulate: {what} {listed(missing)}, none of them among {where} ({listed(present)}): "
                            f"it would change nothing")
    print(f"warning: {what} {listed(missing)} ({len(missing)} of {len(given)}), not among {where}: that part "
          f"changes nothing", file=sys.stderr)


def _parse_prices(text: str | None) -> dict[str, float]:
    """`v100=2.48,p100=1.46,k80=0.45` ($/h per GPU)."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise HetschedError(f"--prices: expected TYPE=DOLLARS_PER_HOUR[,...], got {part!r}") from None
    return out


def json_ready(value):
    """Valid JSON: NaN and infinities (undefined metrics, saturated runs) become null."""
    import math

    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
