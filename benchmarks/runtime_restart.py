"""How long a restarted scheduler takes to listen, with a deep queue of long commands.

    python benchmarks/runtime_restart.py --jobs 20001 --command-bytes 4000

Submits the queue through the scheduler's gRPC API (so rows are stored as a running scheduler stores them), stops
it, then starts a scheduler process on the same state directory and times it until its port file appears and a
GetStatus call is answered. Prints one JSON line. Goal (issue 72): under 10 s for 20,000 jobs of 4 KB commands
(the scheduler of 743c3c6 took 6 min 20 s: it split every stored command with shlex again).
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
from hetsched.runtime.launch import stop_group, wait_for_port
from hetsched.runtime.stubs import pb2, pb2_grpc

CLIENT, WORKER = "bench-client-token", "bench-worker-token"


def long_command(size: int) -> str:
    """A command of about `size` bytes with quoted words (the slow case for a shell splitter)."""
    words, n = ["python3", "-m", "workloads.train"], 0
    while sum(map(len, words)) + len(words) < size - 30:
        words.append(f"--option-{n} 'a quoted value {n}'")
        n += 1
    return " ".join(words)


def start(state: Path, env: dict) -> tuple[subprocess.Popen, str]:
    (state / "port").unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "hetsched.runtime.main", "scheduler", "--state-dir", str(state),
                             "--port", "0", "--round", "60"], env=env, stdout=subprocess.DEVNULL,
                            stderr=open(state / "scheduler.log", "ab"), start_new_session=True)
    return proc, wait_for_port(state, proc, timeout_s=3600)


def measure(jobs: int, command_bytes: int) -> dict:
    state = Path(tempfile.mkdtemp(prefix="hetsched-restart-"))
    env = {**os.environ, "HETSCHED_CLIENT_TOKEN": CLIENT, "HETSCHED_WORKER_TOKEN": WORKER}
    command = long_command(command_bytes)
    proc, address = start(state, env)
    try:
        client = pb2_grpc.SchedulerStub(channel(address, CLIENT))
        for i in range(jobs):
            client.SubmitJob(pb2.SubmitJobRequest(job_id=i, job_type="ResNet-18 (batch size 32)", scale_factor=1,
                                                  total_steps=1000, priority_weight=1, command=command), timeout=60)
    finally:
        stop_group(proc, timeout=60)
    began = time.monotonic()
    proc, address = start(state, env)
    try:
        listening = time.monotonic() - began
        client = pb2_grpc.SchedulerStub(channel(address, CLIENT))
        queued = client.GetStatus(pb2.StatusRequest(page_size=1), timeout=3600).counts.get("queued", 0)
        answered = time.monotonic() - began
    finally:
        stop_group(proc, timeout=60)
    return {"jobs": jobs, "command_bytes": len(command), "queued_after_restart": queued,
            "listening_s": round(listening, 2), "first_status_s": round(answered, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20001)
    parser.add_argument("--command-bytes", type=int, default=4000)
    args = parser.parse_args()
    print(json.dumps(measure(args.jobs, args.command_bytes)), flush=True)


if __name__ == "__main__":
    main()
