"""`hetsched elastic`: Sia, Pollux and Gavel+TJ on elastic jobs (the paper's traces or a workload file)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hetsched.cli import DefaultsHelp
from hetsched.errors import HetschedError

LABELS = {"avg_jct_h": "avg JCT (h)", "p99_jct_h": "p99 JCT (h)", "makespan_h": "makespan (h)",
          "gpu_h_per_job": "GPU-hours per job", "contention_mean": "contention, mean (jobs)",
          "contention_max": "contention, max (jobs)", "restarts_per_job": "restarts per job"}


def add_elastic_parser(sub) -> None:
    from hetsched.decide.elastic.cluster import NAMED
    from hetsched.decide.elastic.names import CORE_ON_TUNED_JOBS, ELASTIC_POLICIES

    el = sub.add_parser("elastic", formatter_class=DefaultsHelp,
                        help="simulate elastic jobs (GPU count, type and batch size that change) under Sia, "
                             "Pollux or Gavel+TJ")
    el.add_argument("--policy", required=True,
                    help="; ".join(f"{k}: {v}" for k, v in {**ELASTIC_POLICIES, **CORE_ON_TUNED_JOBS}.items()))
    el.add_argument("--workload", required=True,
                    help="a paper workload (helios-1..10, philly-1..8, newtrace-1..10) or a workload file "
                         "(Sia's name,time,application,num_replicas,batch_size CSV, or ours)")
    el.add_argument("--cluster", default="sia_hetero",
                    help=f"NODESxGPUS@TYPE groups joined by '+', or a name: "
                         f"{', '.join(f'{k} = {v}' for k, v in NAMED.items())}")
    el.add_argument("--round", type=float, default=None, metavar="SECONDS",
                    help="round length (default: the policy's, 60 s for Sia, 360 s for Gavel+TJ)")
    el.add_argument("--p", type=float, default=None, help="Sia's fairness power (default -0.5)")
    el.add_argument("--lam", type=float, default=None, help="Sia's reward for running a job (default 1.1)")
    el.add_argument("--seed", type=int, default=None, help="Pollux's search seed (default 0; the artifact sets none)")
    el.add_argument("--jobs-out", type=Path, default=None, help="write per-job results (CSV)")
    el.add_argument("--json", action="store_true", help="print one JSON object")
    el.set_defaults(func=run_elastic)


def run_elastic(args: argparse.Namespace) -> int:
    from hetsched.sim.elastic import run_workload

    options = {k: v for k, v in (("p", args.p), ("lam", args.lam), ("seed", args.seed)) if v is not None}
    if args.round is not None and args.round <= 0:
        raise HetschedError(f"--round must be positive, got {args.round}")
    if args.jobs_out is not None and not args.jobs_out.parent.is_dir():
        raise HetschedError(f"--jobs-out: folder {args.jobs_out.parent} does not exist")
    start = time.process_time()
    result = run_workload(args.workload, args.policy, args.cluster, round_s=args.round, **options,
                          progress=_progress())
    cpu = time.process_time() - start
    metrics = result.metrics()
    if args.jobs_out is not None:
        from hetsched.io.atomic import replacing

        with replacing(args.jobs_out) as tmp:
            result.jobs.to_csv(tmp, index=False)
    if args.json:
        print(json.dumps({"policy": result.policy, "workload": args.workload, "cluster": result.cluster,
                          "round_s": result.round_s, "jobs": len(result.jobs), "cpu_s": round(cpu, 2),
                          **metrics}))
        return 0
    print(f"{result.policy} on {args.workload}: {len(result.jobs)} jobs, cluster {result.cluster}, "
          f"{result.round_s:g}-s rounds, {cpu:.1f} CPU-s")
    for key, label in LABELS.items():
        value = metrics[key]
        print(f"  {label:24s} {value:10.2f}" if isinstance(value, float) else f"  {label:24s} {value:10d}")
    return 0


def _progress():
    """Periodic lines on stderr (every 30 s of wall time) so a long run is never silent."""
    last = [time.monotonic()]

    def report(now_s: float, done: int, total: int) -> None:
        if time.monotonic() - last[0] >= 30:
            last[0] = time.monotonic()
            print(f"  simulated {now_s / 3600:.1f} h, {done}/{total} jobs done", file=sys.stderr)
    return report


def convert_sia_workload(source: Path, target: Path) -> int:
    """`hetsched convert trace IN.csv OUT.csv --from sia`: a Sia workload as the project's workload table."""
    from hetsched.decide.elastic.convert import read_sia_workload
    from hetsched.io.atomic import replacing

    if not target.parent.is_dir():
        raise HetschedError(f"convert trace: folder {target.parent} does not exist")
    frame = read_sia_workload(source, "", source.stem)
    with replacing(target) as tmp:
        frame.to_parquet(tmp, index=False) if target.suffix == ".parquet" else frame.to_csv(tmp, index=False)
    return len(frame)
