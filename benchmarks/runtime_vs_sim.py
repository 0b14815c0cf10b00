"""The same trace on the local runtime (emulated workers, one process per GPU) and in the simulator, at a
realistic round length; prints the headline gaps as one JSON line and writes the per-job CSV.

    python benchmarks/runtime_vs_sim.py --system gavel --round 60 --jobs 40
    python benchmarks/runtime_vs_sim.py --system shockwave --round 60 --jobs 40
    python benchmarks/runtime_vs_sim.py --system synergy --round 60 --jobs 40
    python benchmarks/runtime_vs_sim.py --system sia --round 60 --jobs 20        # Sia's own time: about an hour
    python benchmarks/runtime_vs_sim.py --system gavel --policy max_min_fairness_perf+tune \
        --cluster 1x2/12/250@v100+1x2/12/250@k80 --round 60 --jobs 40      # TUNE on two GPU types

What each system runs, and the three simulations the runtime is compared with (the papers' rules, the runtime's
fixed rounds, calibrated with the measured lease start): `hetsched.experiments.runtime_vs_sim`. Wall time is
about (jobs x mean rounds per job / GPUs) x round: 40 jobs at 60-s rounds take 35-70 minutes. Sia runs at a time
scale of 60 s / the round (docs/rules.md#time-scale): at 60-s rounds its jobs take their applications' own time
(20 jobs: about 62 minutes; 40: about 110). `--resimulate
CSV` compares a saved run with the simulator as it is now (after a change to its rules), in seconds.
Goal (issue 25): average JCT and makespan within 5 %, per-job p90 |ratio - 1| within 15 %.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from hetsched.experiments.runtime_vs_sim import SYSTEMS, compare, resimulate


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--system", choices=sorted(SYSTEMS), default="gavel")
    p.add_argument("--policy", default=None, help="default: the system's (gavel: max_min_fairness_perf)")
    p.add_argument("--cluster", default=None, help="default: the system's (gavel 2:1:1, shockwave 4:0:0, "
                                                   "synergy 1x4/24/500@v100)")
    p.add_argument("--round", type=float, default=60.0, help="round length in seconds (wall and simulated)")
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--gap", type=float, default=None, help="seconds between arrivals (default: round / 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="outputs/runtime_vs_sim", help="per-job CSV and summary JSON go here")
    p.add_argument("--resimulate", metavar="CSV", default=None,
                   help="a saved run's per-job CSV (its .json beside it): compare with the simulator as it is now, "
                        "without running the runtime again")
    args = p.parse_args(argv)
    if args.resimulate:
        csv = Path(args.resimulate)
        summary = json.loads(csv.with_suffix(".json").read_text())
        print(json.dumps({k: round(v, 4) for k, v in resimulate(pd.read_csv(csv), summary).items()}))
        return 0
    per_job, summary = compare(args.system, args.jobs, args.round, args.gap, args.seed, args.policy, args.cluster)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = out / f"{summary['system']}_{summary['policy']}_round{args.round:g}_seed{args.seed}"
    per_job.to_csv(name.with_suffix(".csv"), index=False)
    name.with_suffix(".json").write_text(json.dumps(summary))
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in summary.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
