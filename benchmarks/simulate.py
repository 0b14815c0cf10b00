"""The artifact's speed baseline: LAS-perf, 2.4 jobs/h, window 4000-4999, 36:36:36 (fidelity/README.md).

Prints one JSON line with our CPU seconds, the artifact's 91 CPU-s on this kind of machine, and the ratio, and how
many of those seconds went to loading the compiled kernels from numba's cache: once per process, in the first run
(`kernel_load_s`, the seconds numba held its compiler lock, which covers loading and compiling; 0 with --warm).
"""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack

from hetsched import ClusterSpec, load_throughputs
from hetsched.compiled import kernels
from hetsched.sim.metrics import average_jct
from hetsched.sim.simulator import simulate
from hetsched.solvers import clock
from hetsched.traces import GavelGenerator

ARTIFACT_CPU_S = 91.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument("--window", default="4000:5000")
    parser.add_argument("--profile", action="store_true", help="print the top cProfile entries")
    parser.add_argument("--warm", action="store_true",
                        help="first an untimed 50-job run, so that the once-per-process loading of the compiled "
                             "kernels (hetsched/compiled/kernels.py) is not in the time")
    args = parser.parse_args()
    start_id, end_id = map(int, args.window.split(":"))
    table = load_throughputs()
    jobs = iter(GavelGenerator(seed=0, mean_interarrival_s=1500, throughputs=table))
    run = lambda: simulate(jobs, ClusterSpec.parse("36:36:36"), args.policy, table,  # noqa: E731
                           window=(start_id, end_id), record_timeline=False)
    if args.warm:
        small = GavelGenerator(seed=1, mean_interarrival_s=1500, throughputs=table).jobs(50)
        simulate(small, ClusterSpec.parse("36:36:36"), args.policy, table, record_timeline=False)
    loading: list[float] = []
    with ExitStack() as scope:
        if kernels.ENABLED:
            from numba.core import event              # numba's documented event API
            scope.enter_context(event.install_timer("numba:compiler_lock", loading.append))
        mark = clock.reading()
        result = _timed(run, args.profile)
        spent = clock.since(mark)
    cpu = spent["cpu_s"]
    print(json.dumps({"policy": args.policy, "window": args.window, "warm": args.warm, "cpu_s": round(cpu, 3),
                      "artifact_cpu_s": ARTIFACT_CPU_S, "speedup": round(ARTIFACT_CPU_S / cpu, 1),
                      "avg_jct_s": average_jct(result), "rounds": result.num_rounds,
                      "recomputes": result.num_recomputes,
                      "solver_cpu_s": round(spent["solver_cpu_s"], 3), "kernel_load_s": round(sum(loading), 3)}))


def _timed(run, profile: bool):
    if profile:
        import cProfile
        import pstats
        profiler = cProfile.Profile()
        result = profiler.runcall(run)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return result
    return run()


if __name__ == "__main__":
    main()
