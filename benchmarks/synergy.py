"""Synergy on the shared core: FIFO+tune at 9 jobs/h on 128 GPUs (default_cluster.ini), jobs 4000-4999 measured.

Prints one JSON line per run: our CPU seconds (best of --repeat), the artifact's 855 CPU-s on this kind of
machine (fidelity/README.md), the ratio, and the headline metrics. `--profile` prints the top cProfile entries.

Three CPU times, because they answer different questions: `startup_cpu_s` (the interpreter and the imports, before
the first run), `cpu_s_runs[0]` (the first run, with what it loads once per process: numba's cached kernels, the
profile tables) and `cpu_s` (the best of the runs after it, the simulation itself). A researcher's one `hetsched
simulate` costs about startup + first run; a sweep's later runs in one worker cost `cpu_s` each. Compare versions
on the same field, in pairs run alternately (README, "Speed claims").
The job stream is generated in-process (it equals the artifact's recorded stream, see tests).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np

from hetsched.io.cluster_ini import synergy_cluster
from hetsched.sim.metrics import summary
from hetsched.sim.simulator import simulate
from hetsched.traces import make_generator

ARTIFACT_CPU_S = {"FIFO+tune": 855.0, "FIFO+fair": 1420.0}


def run(policy: str, rate: float, servers: int, window: tuple[int, int], multi_gpu: bool, num_jobs: int | None):
    gen = make_generator("synergy", jobs_per_hour=rate, multi_gpu=multi_gpu)
    jobs = gen.jobs(num_jobs) if num_jobs else gen.jobs(int(window[1] * 1.6) + 500)
    cluster = synergy_cluster(servers=servers)
    start = time.process_time()
    result = simulate(jobs, cluster, policy, None, window=window if not num_jobs else None,
                      record_timeline=False)
    return time.process_time() - start, result


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    startup = _process_cpu_s()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", default="FIFO+tune")
    parser.add_argument("--rate", type=float, default=9.0, help="jobs per hour")
    parser.add_argument("--servers", type=int, default=16, help="8-GPU servers (16 = 128 GPUs, 64 = 512)")
    parser.add_argument("--window", default="4000:5000")
    parser.add_argument("--multi-gpu", action="store_true")
    parser.add_argument("--num-jobs", type=int, default=None, help="simulate exactly this many jobs to the end")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    window = tuple(int(v) for v in args.window.split(":"))
    if args.profile:
        import cProfile
        import pstats
        run(args.policy, args.rate, args.servers, window, args.multi_gpu, args.num_jobs)     # warm-up
        profiler = cProfile.Profile()
        profiler.runcall(run, args.policy, args.rate, args.servers, window, args.multi_gpu, args.num_jobs)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
        return
    times, result = [], None
    for _ in range(args.repeat):
        cpu, result = run(args.policy, args.rate, args.servers, window, args.multi_gpu, args.num_jobs)
        times.append(cpu)
    row = summary(result)
    best = min(times[1:] or times)
    artifact = ARTIFACT_CPU_S.get(args.policy) if args.rate == 9.0 and args.servers == 16 else None
    print(json.dumps({"policy": args.policy, "rate": args.rate, "gpus": args.servers * 8,
                      "multi_gpu": args.multi_gpu, "startup_cpu_s": round(startup, 3), "cpu_s": round(best, 3),
                      "cpu_s_runs": [round(t, 3) for t in times], "artifact_cpu_s": artifact,
                      "speedup": round(artifact / best, 1) if artifact else None,
                      "avg_jct_h": row["avg_jct_s"] / 3600, "p99_jct_h": row["jct_p99_s"] / 3600,
                      "rounds": result.num_rounds, "plans": result.num_recomputes,
                      "jobs_simulated": len(result.jobs)}))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
