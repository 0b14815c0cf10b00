"""`hetsched compare`: one job stream, one cluster, the three systems' policies and compositions over seeds."""

from __future__ import annotations

import argparse
from pathlib import Path

from hetsched.cli import positive_int
from hetsched.errors import HetschedError
from hetsched.io.atomic import replacing


def add_compare_parser(sub) -> None:
    from hetsched.decide.shockwave.config import FAIRNESS
    from hetsched.experiments.compare_systems import POLICIES, PRESETS, STREAMS

    cmp = sub.add_parser("compare", help="run Gavel's, Synergy's and Shockwave's policies and their compositions "
                                         "on the same stream and cluster over seeds (95 %% intervals)")
    cmp.add_argument("--streams", nargs="+", choices=tuple(STREAMS), default=list(STREAMS),
                     help="the job streams to compare on (default: all)")
    cmp.add_argument("--preset", choices=tuple(PRESETS), default="quick",
                     help="stream length, cluster and seeds (quick: 24 jobs, 24 GPUs, 5 seeds)")
    cmp.add_argument("--policies", nargs="+", metavar="NAME", default=list(POLICIES),
                     help="registry names (default: every system's and the compositions)")
    cmp.add_argument("--seeds", type=positive_int, default=None, help="number of seeds, seeds 0 to N-1 "
                     "(default: the preset's; intervals need 2 or more)")
    cmp.add_argument("--openb-dir", default=None, help="folder with openb's node and pod lists (default: "
                                                       "../shared/data/alibaba_openb, or $HETSCHED_SHARED)")
    cmp.add_argument("--shockwave-fairness", choices=FAIRNESS, default="solver",
                     help="which plan within the solver's gap Shockwave's planner keeps (docs/rules.md"
                          "#planner-fairness): solver (default, the artifact's: where HiGHS stops), or share / ftf, "
                          "one plan whatever the solver's path, at many times the planner's CPU on mixed GPU types")
    cmp.add_argument("--out", default="outputs/compare", help="folder for rows/summary/gains/refused CSVs")
    cmp.add_argument("--cache-dir", default="outputs/.cache", help="where finished runs are kept between calls")
    where = cmp.add_mutually_exclusive_group()
    where.add_argument("--dask-address", default=None, help="scheduler address of an existing Dask cluster")
    where.add_argument("--no-dask", action="store_true", help="run in this process")
    cmp.set_defaults(func=_cmd_compare)


def _cmd_compare(args: argparse.Namespace) -> int:
    import pandas as pd
    from hetsched.experiments import compare_systems as S

    if args.openb_dir is not None and "openb" not in args.streams:
        raise HetschedError(f"compare: --openb-dir is read by the openb stream only, and --streams is "
                            f"{' '.join(args.streams)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)          # before the runs: a folder that cannot be made loses nothing
    rows = S.compare(args.streams, args.preset, args.policies,
                     seeds=range(args.seeds) if args.seeds is not None else None, openb_dir=args.openb_dir,
                     shockwave_fairness=args.shockwave_fairness,
                     cache_dir=args.cache_dir, dask_address=args.dask_address, use_dask=not args.no_dask,
                     progress=True)                    # a bar on stderr: never silence
    summary, gains, refused = S.table(rows), S.gains(rows), S.refusals(rows)
    for name, frame in (("rows", rows.drop(columns=["jcts"], errors="ignore")), ("summary", summary),
                        ("gains", gains), ("refused", refused)):
        with replacing(out / f"{name}.csv") as tmp:
            frame.to_csv(tmp, index=False)
    with pd.option_context("display.width", 200, "display.max_rows", 500, "display.max_columns", 20):
        shown = summary.assign(**{m: [S.value_ci(row, m) for _, row in summary.iterrows()]
                                  for m in ("avg_jct_h", "p99_jct_h", "makespan_h", "worst_rho", "gpu_util",
                                            "cpu_util")})
        print(shown[["stream", "label", "seeds", "avg_jct_h", "p99_jct_h", "makespan_h", "worst_rho", "gpu_util",
                     "cpu_util"]].to_string(index=False))
        if len(gains):
            print("\nComposition gains (1 - composition / parent, mean ± 95 % interval over seeds):")
            print(gains.assign(gain=[S.gain_text(g, h) for g, h in zip(gains["gain"], gains["gain_ci"])])
                  [["stream", "composition", "parent", "metric", "gain", "seeds"]].to_string(index=False))
    if len(refused):
        print(f"\nRefused ({len(refused)}; also in {out / 'refused.csv'}):")
        for r in refused.itertuples():
            print(f"  {r.policy} on {r.stream}: {r.reason}")
    print("\n" + "\n".join(S.verdicts(summary, gains)))
    note = S.separation_note(summary, args.preset)
    if note:
        print(f"Average JCT: {note}.")
    if args.shockwave_fairness != "solver":
        print(f"Shockwave's planner kept the plan of fairness {args.shockwave_fairness!r} within the solver's gap "
              "(docs/rules.md#planner-fairness).")
    print(f"\nwrote {out}/rows.csv, summary.csv, gains.csv, refused.csv")
    return 0
