"""A worker: registers its GPUs, polls the scheduler for leases, runs each job as a subprocess, reports exits.

`emulate=True` runs no process: a leased job "trains" at a fixed rate inside the worker (protocol load tests).
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from .auth import channel
from .stubs import pb2, pb2_grpc

log = logging.getLogger(__name__)
EMULATED_STEPS_PER_S = 200.0


@dataclass
class Running:
    lease: object
    proc: subprocess.Popen | None
    log_path: Path | None
    started: float
    reported: float = 0.0
    steps: int = 0


class Worker:
    def __init__(self, address: str, token: str, gpu_type: str, num_gpus: int = 1, work_dir: str = ".",
                 heartbeat_s: float = 0.3, emulate: bool = False, name: str = "", report_s: float = 0.2):
        self.address, self.token, self.gpu_type, self.num_gpus = address, token, gpu_type, num_gpus
        self.work_dir = Path(work_dir)
        self.heartbeat_s, self.emulate, self.name, self.report_s = heartbeat_s, emulate, name, report_s
        self.stub = pb2_grpc.SchedulerStub(channel(address, token))
        self.worker_id: str | None = None
        self.jobs: dict[int, Running] = {}
        self._next_beat = 0.0

    # ---- protocol -----------------------------------------------------------------------------------
    def register(self) -> None:
        resp = self.stub.RegisterWorker(pb2.RegisterWorkerRequest(gpu_type=self.gpu_type, num_gpus=self.num_gpus,
                                                                  name=self.name), timeout=10)
        self.worker_id = resp.worker_id

    def tick(self) -> None:
        """One pass: heartbeat when due, start/stop what the scheduler says, report exited jobs."""
        now = time.monotonic()
        if now >= self._next_beat:
            self._next_beat = now + self.heartbeat_s
            try:
                self._beat()
            except grpc.RpcError as exc:
                log.info("worker %s: scheduler unreachable (%s)", self.name, exc.code())
        self._poll()

    def _beat(self) -> None:
        if self.worker_id is None:
            self.register()
        states = [pb2.JobState(job_id=j, lease_id=r.lease.lease_id, running=True) for j, r in self.jobs.items()]
        resp = self.stub.Heartbeat(pb2.HeartbeatRequest(worker_id=self.worker_id, jobs=states), timeout=10)
        if not resp.known:          # the scheduler restarted: drop everything, jobs resume from checkpoints
            for job_id in list(self.jobs):
                self._kill(job_id)
            self.jobs.clear()
            self.worker_id = None
            self.register()
            return
        for job_id in resp.stop:
            self._kill(job_id)
            self.jobs.pop(job_id, None)
        for lease in resp.start:
            self._launch(lease)

    def _env(self, lease) -> dict[str, str]:
        ckpt = self.work_dir / "checkpoints" / f"job={lease.job_id}"
        ckpt.mkdir(parents=True, exist_ok=True)
        return {**os.environ, "HETSCHED_SCHEDULER": self.address, "HETSCHED_TOKEN": self.token,
                "HETSCHED_JOB_ID": str(lease.job_id), "HETSCHED_LEASE_ID": lease.lease_id,
                "HETSCHED_DEADLINE": repr(lease.deadline_s), "HETSCHED_TOTAL_STEPS": str(lease.total_steps),
                "HETSCHED_STEPS_DONE": str(lease.steps_done), "HETSCHED_CHECKPOINT_DIR": str(ckpt),
                "HETSCHED_RANK": str(lease.rank), "HETSCHED_WORLD_SIZE": str(lease.world_size),
                "HETSCHED_SLOWDOWN": repr(lease.slowdown), "HETSCHED_GPUS": ",".join(map(str, lease.local_gpus)),
                "CUDA_VISIBLE_DEVICES": ",".join(map(str, lease.local_gpus))}

    def _launch(self, lease) -> None:
        if lease.job_id in self.jobs:
            self._kill(lease.job_id)
        if self.emulate:
            self.jobs[lease.job_id] = Running(lease, None, None, time.monotonic(), time.monotonic(),
                                              int(lease.steps_done))
            return
        argv = shlex.split(lease.command)
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        log_path = self.work_dir / "logs" / f"job={lease.job_id}.lease={lease.lease_id}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("wb") as out:
            proc = subprocess.Popen(argv, env=self._env(lease), stdout=out, stderr=subprocess.STDOUT,
                                    cwd=self.work_dir, start_new_session=True)
        self.jobs[lease.job_id] = Running(lease, proc, log_path, time.monotonic())

    def _kill(self, job_id: int) -> None:
        run = self.jobs.get(job_id)
        if run is None or run.proc is None:
            return
        try:
            os.killpg(run.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        run.proc.wait(timeout=10)

    def _poll(self) -> None:
        for job_id, run in list(self.jobs.items()):
            if run.proc is None:
                code = self._emulated(run)
                if code is None:
                    continue
                tail = ""
            else:
                code = run.proc.poll()
                if code is None:
                    continue
                tail = run.log_path.read_bytes()[-2000:].decode("utf-8", "replace")
            self.jobs.pop(job_id)
            try:
                self.stub.ReportExit(pb2.ExitReport(worker_id=self.worker_id or "", job_id=job_id,
                                                    lease_id=run.lease.lease_id, exit_code=code, log_tail=tail),
                                     timeout=10)
            except grpc.RpcError:
                pass

    def _emulated(self, run: Running) -> int | None:
        """Advance a protocol-only job; report like a LeaseIterator would. Returns an exit code when it ends."""
        now = time.monotonic()
        if now - run.reported < self.report_s:
            return None
        rate = EMULATED_STEPS_PER_S / max(run.lease.slowdown, 1e-9)
        steps = min(int(run.lease.total_steps), int(run.lease.steps_done + rate * (now - run.started)))
        finished = steps >= run.lease.total_steps
        run.reported = now
        try:
            resp = self.stub.UpdateLease(pb2.UpdateLeaseRequest(
                job_id=run.lease.job_id, lease_id=run.lease.lease_id, steps_done=steps, steps_checkpointed=steps,
                seconds=now - run.started, finished=finished), timeout=10)
        except grpc.RpcError:
            return 1
        return 0 if finished or not resp.keep_running else None

    def run(self, stop_after_s: float | None = None, parent_pid: int | None = None) -> None:
        """Serve until killed (or `stop_after_s`, or the parent process exits)."""
        end = time.monotonic() + stop_after_s if stop_after_s else None
        try:
            while end is None or time.monotonic() < end:
                if parent_pid is not None and os.getppid() != parent_pid:
                    break
                self.tick()
                time.sleep(0.05)
        finally:
            for job_id in list(self.jobs):
                self._kill(job_id)
