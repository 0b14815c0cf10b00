"""Per-round scheduler overhead of the gRPC runtime on loopback: emulated workers, a deep queue.

    python benchmarks/runtime.py --workers 200,500,1000 --jobs 10000 --rounds 10

The scheduler runs as its own process (as in production); the workers are emulated in this process and talk to
it over gRPC (heartbeats and lease updates). The figure is the scheduler's own time per round (credit, admit,
plan, leases), excluding the first round, which admits the whole queue and solves the first allocation.
Goal (issue 13): <= 50 ms at 1,000 workers and 10,000 jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hetsched.runtime.auth import channel
from hetsched.runtime.launch import wait_for_port
from hetsched.runtime.replay import emulated_throughputs
from hetsched.runtime.stubs import pb2, pb2_grpc
from hetsched.runtime.worker import Worker

CLIENT, WORKER = "bench-client-token", "bench-worker-token"
JOB_TYPE = "ResNet-18 (batch size 32)"


def measure(workers: int, jobs: int, rounds: int, round_s: float, throughputs: str = "emulated") -> dict:
    state = Path(tempfile.mkdtemp(prefix="hetsched-bench-"))
    env = {**os.environ, "HETSCHED_CLIENT_TOKEN": CLIENT, "HETSCHED_WORKER_TOKEN": WORKER}
    # A calibrated cluster: the table holds the rates the emulated workers run at (as replay.py does), so the
    # measured rates confirm the table instead of re-solving the policy every round.
    table = throughputs
    if throughputs == "emulated":
        table = state / "emulated_throughputs.parquet"
        emulated_throughputs([JOB_TYPE]).write(table)
    proc = subprocess.Popen([sys.executable, "-m", "hetsched.runtime.main", "scheduler", "--state-dir", str(state),
                             "--port", "0", "--round", repr(round_s), "--worker-timeout", "60",
                             "--throughputs", str(table)], env=env,
                            stdout=subprocess.DEVNULL, stderr=open(state / "scheduler.log", "wb"))
    try:
        address = wait_for_port(state, proc)
        types = ["v100", "p100", "k80"]
        fleet = [Worker(address, WORKER, types[i % 3], emulate=True, heartbeat_s=1.0, report_s=1.0, name=f"w{i}")
                 for i in range(workers)]
        for w in fleet:
            w.register()
        client = pb2_grpc.SchedulerStub(channel(address, CLIENT))
        for i in range(jobs):
            client.SubmitJob(pb2.SubmitJobRequest(job_id=i, job_type=JOB_TYPE, scale_factor=1,
                                                  total_steps=10**9, priority_weight=1, command="emulated"),
                             timeout=10)
        status = lambda: client.GetStatus(pb2.StatusRequest(page_size=1), timeout=30)  # noqa: E731
        first = status().rounds
        while status().rounds < first + 2:             # the round that admits the queue, then one more
            for w in fleet:
                w.tick()
        start = status()
        end_at = time.monotonic() + rounds * round_s * 3
        while time.monotonic() < end_at:
            for w in fleet:
                w.tick()
            if status().rounds >= start.rounds + rounds:
                break
        end = status()
        running = end.counts.get("running", 0)
        n = end.rounds - start.rounds
        # mean_round_overhead_s averages the last 200 rounds; recover the mean of the measured ones.
        total = end.mean_round_overhead_s * min(end.rounds, 200) - start.mean_round_overhead_s * min(start.rounds, 200)
        return {"workers": workers, "jobs": jobs, "throughputs": throughputs, "rounds": n, "running_jobs": running,
                "mean_round_ms": round(1000 * total / max(n, 1), 1)}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="200,500,1000")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--round", type=float, default=2.0)
    parser.add_argument("--throughputs", default="emulated",
                        help="'emulated' (the workers' own rates: a calibrated cluster) or a table name; with "
                             "gavel_simulation every first measurement of a job moves its rate and re-solves")
    args = parser.parse_args()
    for w in (int(x) for x in args.workers.split(",")):
        row = measure(w, args.jobs, args.rounds, args.round, args.throughputs)
        row["goal_ms"], row["ratio_to_goal"] = 50.0, round(row["mean_round_ms"] / 50.0, 2)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
