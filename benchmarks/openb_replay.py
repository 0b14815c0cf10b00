"""A policy on a production trace: openb's GPU pods on the openb node list (1,213 servers, the README's GPU map).

    python benchmarks/openb_replay.py                                   # Shockwave, this checkout
    python benchmarks/openb_replay.py --policy gavel_las --slice 2900:3100    # another policy, pods of hours 2900-3100
    python benchmarks/openb_replay.py --against ../ref --repeat 2       # alternate with another checkout: ratio

Each run is a fresh `python -m hetsched simulate ... --json` started in the checkout's folder (so it imports that
checkout's package). Prints one JSON line per run (the simulator's CPU seconds and how many of them the solvers
took, wall seconds, peak RSS, average JCT) and, with --against, a last line with both medians and their ratio.
The runs alternate, back to back, because these machines differ in speed from day to day.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hetsched.experiments.own_cluster import OPENB_GPU_MAP, shared_data_dir

CHILD = """import resource, runpy, sys
sys.argv = ["hetsched"] + sys.argv[1:]
try:
    runpy.run_module("hetsched", run_name="__main__")
except SystemExit as exc:
    if exc.code:
        raise
print("PEAK_RSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def run_once(checkout: Path, args: list[str], timeout_s: float) -> dict:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, *args], cwd=checkout, capture_output=True, text=True,
                         timeout=timeout_s)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{checkout}: simulate failed ({out.returncode}):\n{out.stderr[-3000:]}")
    row = json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])
    rss = [line.split()[1] for line in out.stderr.splitlines() if line.startswith("PEAK_RSS_KB")]
    solver = row.get("solver_cpu_s")                    # None from a checkout that does not report it
    return {"checkout": str(checkout), "policy": row["policy"], "cpu_s": round(row["cpu_s"], 2),
            "solver_cpu_s": None if solver is None else round(solver, 2), "solver_calls": row.get("solver_calls"),
            "wall_s": round(wall, 2), "peak_rss_mb": round(int(rss[-1]) / 1024, 1) if rss else None,
            "avg_jct_s": row["avg_jct_s"], "num_jobs": row["num_jobs"], "num_rounds": row["num_rounds"],
            "num_recomputes": row["num_recomputes"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="shockwave")
    parser.add_argument("--data", help="folder with openb_node_list_gpu_node.csv and openb_pod_list_gpuspec33.csv "
                                       "(default: the shared data folder's alibaba_openb)")
    parser.add_argument("--slice", help="SINCE:UNTIL hours of pod creation (default: every pod)")
    parser.add_argument("--against", help="another checkout (e.g. a clone at the reference commit)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per checkout")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    args = parser.parse_args()
    data = Path(args.data) if args.data else shared_data_dir() / "alibaba_openb"
    for name in ("openb_node_list_gpu_node.csv", "openb_pod_list_gpuspec33.csv"):
        if not (data / name).is_file():
            raise SystemExit(f"{data / name} not found: pass --data or set HETSCHED_SHARED")
    sim = ["simulate", "--policy", args.policy, "--cluster", str((data / "openb_node_list_gpu_node.csv").resolve()),
           "--trace", str((data / "openb_pod_list_gpuspec33.csv").resolve()), "--from", "openb",
           "--gpu-map", OPENB_GPU_MAP, "--json"]
    if args.slice:
        since, until = args.slice.split(":")
        sim += ["--since-h", since, "--until-h", until]
    here = Path(__file__).resolve().parents[1]
    checkouts = [here] + ([Path(args.against).resolve()] if args.against else [])
    cpu: dict[Path, list[float]] = {c: [] for c in checkouts}
    for _ in range(args.repeat):
        for checkout in checkouts:
            row = run_once(checkout, sim, args.timeout)
            cpu[checkout].append(row["cpu_s"])
            print(json.dumps(row), flush=True)
    if args.against:
        ours, theirs = (statistics.median(cpu[c]) for c in checkouts)
        print(json.dumps({"ours_cpu_s": ours, "against_cpu_s": theirs, "ratio": round(ours / theirs, 3)}))


if __name__ == "__main__":
    main()
