"""A worker: registers its GPUs, polls the scheduler for leases, runs each leased rank as a subprocess, reports
exits.

A job gets only its lease's credential (never the worker's token), the scheduler's address and CA, and a fresh
job directory; as root it runs under a uid of its own (`isolation.py` states the boundary). A command that cannot
start (bad quoting, missing binary, no free job uid) fails that attempt with the error text; the worker goes on.
`emulate=True` runs no process: a leased job "trains" at a fixed rate inside the worker (protocol and load tests).

`run()` heartbeats on a thread of its own, so nothing the job loop waits for (a large job directory to clear, a
process slow to die, a slow scheduler call) silences the worker: the scheduler expires a silent worker and fails
the attempts of every job on it. A lease handed out is listed as running from then on, while the job loop launches
it. `tick()` does one pass of both on the caller's thread (tests drive workers this way).
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import grpc

from hetsched.errors import HetschedError

from .auth import HEADER, channel
from .host import CoreSet, cpu_count, detect_resources
from .isolation import NONE_SPELLINGS, JobUids, job_env, prepare_job_dir
from .lease import busy
from .stubs import pb2, pb2_grpc
from .validate import worker_resources

log = logging.getLogger(__name__)
EMULATED_STEPS_PER_S = 200.0
EMULATED_TIME_SCALE = 100.0         # emulated profiled jobs: seconds of iterations per wall second
EMULATED_CHECKPOINT_EVERY = 50      # steps between an emulated job's checkpoints
LAUNCH_FAILED = 127
#: An exit report is retried on these codes with backoff (0.1 s doubling to 5 s, 20 tries: about a minute); the
#: scheduler also ends a lease whose process the worker stops listing, so a report that never arrives strands nothing.
RETRY_EXIT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED,
              grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
EXIT_RETRIES = 20
LOG_TAIL_BYTES = 2000


@dataclass
class Running:
    lease: object
    proc: subprocess.Popen | None
    log_path: Path | None
    started: float
    reported: float = 0.0
    # An emulated job's progress: `base` steps at `since` (monotonic), then `rate` steps/s (docs/rules.md#time-scale).
    base: float = 0.0
    since: float = 0.0
    rate: float = 0.0


class Worker:
    def __init__(self, address: str, token: str, gpu_type: str, num_gpus: int = 1, work_dir: str = ".",
                 heartbeat_s: float = 0.3, emulate: bool = False, name: str = "", report_s: float = 0.2,
                 tls_ca: str | None = None, tls_server_name: str | None = None, advertise_host: str = "127.0.0.1",
                 job_uids: str = "auto", cpu_cores: int | None = None, mem_gb: float | None = None):
        if emulate and job_uids not in ("auto", *NONE_SPELLINGS):
            raise HetschedError(f"job uids {job_uids!r}: an emulated worker runs no job process to give them to")
        self.address, self.gpu_type, self.num_gpus = address, gpu_type, num_gpus
        detected = detect_resources()
        self.cpu_cores = detected[0] if cpu_cores is None else cpu_cores
        self.mem_gb = detected[1] if mem_gb is None else mem_gb
        worker_resources(num_gpus=num_gpus, name=name, cpu_cores=self.cpu_cores, mem_gb=self.mem_gb)
        self.work_dir = Path(work_dir).resolve()
        self.work_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.uids = JobUids("none", quiet=True) if emulate else JobUids(job_uids)
        self.heartbeat_s, self.emulate, self.name, self.report_s = heartbeat_s, emulate, name, report_s
        self.tls_ca = str(Path(tls_ca).resolve()) if tls_ca else None
        self.tls_server_name, self.advertise_host = tls_server_name, advertise_host
        self.stub = pb2_grpc.SchedulerStub(channel(address, token, self.tls_ca, server_name=tls_server_name))
        self._lease_stub = None               # emulated jobs report with their lease tokens
        self.worker_id: str | None = None
        self.session = ""
        self.jobs: dict[tuple[int, int], Running] = {}        # (job id, rank) -> process
        self.accepted: dict[tuple[int, int], object] = {}     # leases handed out and not launched yet
        self.lock = threading.Lock()                          # jobs and accepted: the heartbeat thread lists them
        self.answers: deque = deque()                         # heartbeat answers for the job loop; None: restart
        self._resetting = threading.Event()                   # the job loop is dropping a lost session's jobs
        self._stopped = threading.Event()
        self.cores = CoreSet()                                # CPU shares: which cores each process may run on
        self.unsent: list[tuple[object, int, float]] = []     # (exit report, tries, next try): not acknowledged
        self._next_beat = 0.0

    # ---- protocol -----------------------------------------------------------------------------------
    def register(self) -> None:
        resp = self.stub.RegisterWorker(pb2.RegisterWorkerRequest(
            gpu_type=self.gpu_type, num_gpus=self.num_gpus, name=self.name, cpu_cores=self.cpu_cores,
            mem_gb=self.mem_gb), timeout=10)
        self.worker_id, self.session = resp.worker_id, resp.session

    def tick(self) -> None:
        """One pass on the caller's thread: heartbeat when due, start/stop what the scheduler says, report exits."""
        now = time.monotonic()
        if now >= self._next_beat:
            self._next_beat = now + self.heartbeat_s
            self._beat()
        self._jobs_pass()

    def _jobs_pass(self) -> None:
        self._apply_answers()
        self._poll()
        self._send_exits()

    def _beat(self) -> None:
        """One heartbeat; its answer is queued for the job loop. Never waits for the job loop."""
        if self._resetting.is_set():
            return
        try:
            if self.worker_id is None:
                self.register()
            with self.lock:
                listed = {**{key: run.lease for key, run in self.jobs.items()}, **self.accepted}
            states = [pb2.JobState(job_id=j, lease_id=lease.lease_id, running=True) for (j, _), lease in listed.items()]
            resp = self.stub.Heartbeat(pb2.HeartbeatRequest(worker_id=self.worker_id, jobs=states,
                                                            session=self.session), timeout=10)
        except grpc.RpcError as exc:
            log.warning("worker %s: scheduler call failed (%s: %s)", self.name, exc.code().name, exc.details())
            return
        if not resp.known:          # the scheduler restarted: the job loop drops everything, then we register
            self._resetting.set()
            self.answers.append(None)
            return
        with self.lock:
            self.accepted.update(((lease.job_id, lease.rank), lease) for lease in resp.start)
        self.answers.append(resp)

    def _apply_answers(self) -> None:
        while self.answers:
            resp = self.answers.popleft()
            if resp is None:        # jobs resume from their checkpoints under the new session
                self._kill_all()
                self.unsent.clear()
                with self.lock:
                    self.accepted.clear()
                self.worker_id = None
                self._resetting.clear()
                continue
            for job_id in resp.stop:
                for key in [k for k in self.jobs if k[0] == job_id]:
                    self._kill(key)
            for lease in resp.start:
                self._launch(lease)
                with self.lock:
                    if self.accepted.get((lease.job_id, lease.rank)) is lease:
                        del self.accepted[(lease.job_id, lease.rank)]

    def job_dir(self, job_id: int, rank: int) -> Path:
        """A lease's working directory (ranks on one worker never share files)."""
        return self.work_dir / "jobs" / (f"job={job_id}.rank={rank}" if rank else f"job={job_id}")

    def _env(self, lease, home: Path) -> dict[str, str]:
        """Paths are relative to the job directory, so no directory above it needs to be open to the job."""
        gpus = ",".join(map(str, lease.local_gpus))
        env = job_env({
            "HOME": str(home), "HETSCHED_SCHEDULER": self.address, "HETSCHED_LEASE_TOKEN": lease.lease_token,
            "HETSCHED_JOB_ID": str(lease.job_id), "HETSCHED_LEASE_ID": lease.lease_id,
            "HETSCHED_DEADLINE": repr(lease.deadline_s), "HETSCHED_TOTAL_STEPS": str(lease.total_steps),
            "HETSCHED_STEPS_DONE": str(lease.steps_done), "HETSCHED_CHECKPOINT_DIR": "checkpoint",
            "HETSCHED_RANK": str(lease.rank), "HETSCHED_WORLD_SIZE": str(lease.world_size),
            "HETSCHED_HOST": self.advertise_host, "HETSCHED_SLOWDOWN": repr(lease.slowdown),
            "HETSCHED_GPUS": gpus, "CUDA_VISIBLE_DEVICES": gpus})
        if lease.cpu_cores > 0:                  # the CPU share: thread counts (affinity is set at launch)
            n = str(cpu_count(lease.cpu_cores))
            env.update({"HETSCHED_CPU_CORES": n, "OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n})
        if lease.batch_size > 0:                 # an adaptive job: its steps are counted at this batch size
            env["HETSCHED_BATCH_SIZE"] = str(lease.batch_size)
        if lease.mem_gb > 0:                     # the memory share: the job's data-cache budget
            env["HETSCHED_MEM_GB"] = repr(lease.mem_gb)
        if self.tls_ca:
            env["HETSCHED_TLS_CA"] = "ca.pem"
        if self.tls_server_name:
            env["HETSCHED_TLS_SERVER_NAME"] = self.tls_server_name
        return env

    def _launch(self, lease) -> None:
        key = (lease.job_id, lease.rank)
        if key in self.jobs:
            self._kill(key)
        if self.emulate:
            now = time.monotonic()
            rate = lease.emulated_steps_per_s or emulated_rate(lease, (self.num_gpus, float(self.cpu_cores),
                                                                       float(self.mem_gb)))
            self._add(key, Running(lease, None, None, now, now, float(lease.steps_done),
                                   now + lease.emulated_delay_s, rate))
            return
        log_path = self.work_dir / "logs" / f"job={lease.job_id}.lease={lease.lease_id}.rank={lease.rank}.log"
        home = self.job_dir(lease.job_id, lease.rank)
        try:
            argv = shlex.split(lease.command)
            if not argv:
                raise ValueError("empty command")
            if argv[0] in ("python", "python3"):
                argv[0] = sys.executable
            env = self._env(lease, home)
            if (os.path.isabs(argv[0]) or "/" not in argv[0]) and not shutil.which(argv[0], path=env.get("PATH")):
                raise FileNotFoundError(f"no program {argv[0]!r} on the job's PATH")   # said before a uid is taken
            uid = self.uids.acquire(key)
            prepare_job_dir(home, uid, self.tls_ca)
            argv, ids = self.uids.command(argv, uid, home)
            log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)    # the worker's file
            with os.fdopen(fd, "wb") as out:
                proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, cwd=home, start_new_session=True, umask=0o077,
                                        **ids)
        except (ValueError, OSError, HetschedError) as exc:    # this attempt fails; the worker and its jobs go on
            self.uids.release(key, home)
            log.warning("job %d: cannot launch %r: %s", lease.job_id, lease.command, exc)
            self._report_exit(lease, LAUNCH_FAILED, f"launch failed: {type(exc).__name__}: {exc}")
            return
        if lease.cpu_cores > 0:
            self.cores.pin(key, proc.pid, cpu_count(lease.cpu_cores))
        self._add(key, Running(lease, proc, log_path, time.monotonic()))

    def _add(self, key: tuple[int, int], run: Running) -> None:
        with self.lock:
            self.jobs[key] = run

    def _drop(self, key: tuple[int, int]) -> Running | None:
        with self.lock:
            return self.jobs.pop(key, None)

    def _kill(self, key: tuple[int, int]) -> None:
        run = self._drop(key)
        self.cores.release(key)
        if run is None or run.proc is None:
            return
        try:
            os.killpg(run.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            run.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:          # uninterruptible (a hung file system): reaped when it ends
            log.warning("job %d: process %d has not ended 10 s after SIGKILL", key[0], run.proc.pid)
        self.uids.release(key, self.job_dir(*key))   # and whatever left the process group under the job's uid

    def _kill_all(self) -> None:
        for key in list(self.jobs):
            self._kill(key)

    def _poll(self) -> None:
        for key, run in list(self.jobs.items()):
            if run.proc is None:
                code = self._emulated(run)
                if code is None:
                    continue
                tail = ""
            else:
                code = run.proc.poll()
                if code is None:
                    continue
                tail = log_tail(run.log_path)
                self.uids.release(key, self.job_dir(*key))
                self.cores.release(key)
            self._drop(key)
            self._report_exit(run.lease, code, tail)

    def _report_exit(self, lease, code: int, tail: str) -> None:
        self.unsent.append((pb2.ExitReport(worker_id=self.worker_id or "", job_id=lease.job_id,
                                           lease_id=lease.lease_id, exit_code=code, log_tail=tail,
                                           session=self.session, rank=lease.rank), 0, 0.0))
        self._send_exits()

    def _send_exits(self) -> None:
        """Deliver exit reports; a transient failure is retried with backoff (bounded)."""
        keep, now = [], time.monotonic()
        for report, tries, due in self.unsent:
            if due > now:
                keep.append((report, tries, due))
                continue
            try:
                self.stub.ReportExit(report, timeout=10)
            except grpc.RpcError as exc:
                if exc.code() in RETRY_EXIT and tries < EXIT_RETRIES:
                    keep.append((report, tries + 1, now + min(5.0, 0.1 * 2 ** tries)))
                else:
                    log.warning("exit of job %d not reported after %d tries: %s", report.job_id, tries + 1,
                                exc.code().name)
        self.unsent = keep

    def _lease_call(self, run: Running, request):
        if self._lease_stub is None:
            self._lease_stub = pb2_grpc.SchedulerStub(channel(self.address, None, self.tls_ca,
                                                              server_name=self.tls_server_name))
        return self._lease_stub.UpdateLease(request, timeout=10,
                                            metadata=((HEADER, f"Lease {run.lease.lease_token}"),))

    def _emulated(self, run: Running) -> int | None:
        """Advance a protocol-only job; report like a LeaseIterator would. Returns an exit code when it ends."""
        now = time.monotonic()
        if now - run.reported < self.report_s:
            return None
        lease = run.lease
        start = int(lease.steps_done)
        done = run.base + run.rate * max(0.0, now - run.since)
        steps = start if lease.rank else min(int(lease.total_steps), int(done))
        finished = steps >= lease.total_steps
        durable = steps if finished else max(start, steps // EMULATED_CHECKPOINT_EVERY * EMULATED_CHECKPOINT_EVERY)
        run.reported = now
        try:
            resp = self._lease_call(run, pb2.UpdateLeaseRequest(
                job_id=lease.job_id, lease_id=lease.lease_id, steps_done=steps, steps_checkpointed=durable,
                seconds=now - run.started, steps_run=steps - start, finished=finished, batch_size=lease.batch_size))
        except grpc.RpcError as exc:
            if busy(exc):
                return None     # report at the next tick
            return 0            # as a LeaseIterator does: stop; the job resumes from its checkpoint
        if resp.batch_size and resp.batch_size != lease.batch_size and not finished:
            # A batch-size switch: go on from the re-counted steps (checkpointed at once, as a LeaseIterator does).
            lease.batch_size, lease.total_steps, lease.steps_done = resp.batch_size, resp.total_steps, resp.steps_done
            run.started = run.since = now
            run.base = float(resp.steps_done)
        elif resp.emulated_steps_per_s and resp.emulated_steps_per_s != run.rate:   # a new round's rate, from now
            run.base, run.since, run.rate = done, max(now, run.since), resp.emulated_steps_per_s
        return 0 if finished or not resp.keep_running else None

    def run(self, stop_after_s: float | None = None, parent_pid: int | None = None) -> None:
        """Serve until killed (or `stop()`, `stop_after_s`, or the parent process exits)."""
        end = time.monotonic() + stop_after_s if stop_after_s else None
        done = threading.Event()
        beats = threading.Thread(target=self._beat_loop, args=(done,), name=f"heartbeat {self.name}", daemon=True)
        beats.start()
        try:
            while not self._stopped.is_set() and (end is None or time.monotonic() < end):
                if parent_pid is not None and os.getppid() != parent_pid:
                    break
                self._jobs_pass()
                self._stopped.wait(0.05)
        finally:
            done.set()
            self._kill_all()              # first: a heartbeat in flight may wait out its 10-s call timeout
            beats.join(timeout=1.0)

    def _beat_loop(self, done: threading.Event) -> None:
        while not done.is_set():
            self._beat()
            done.wait(self.heartbeat_s)

    def stop(self) -> None:
        """Ends `run()` (from another thread or a signal handler); its jobs are killed on the way out."""
        self._stopped.set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()


def emulated_rate(lease, server: tuple[int, float, float] | None = None) -> float:
    """Steps per second of an emulated rank: EMULATED_STEPS_PER_S divided by the GPU type's slowdown; with a CPU
    and memory share, a profiled model instead runs at its profile's throughput at that share (one wall second
    standing for EMULATED_TIME_SCALE seconds of its iterations), as the simulator's server rounds predict, and a
    Gavel job type at the speedup heterogeneity-aware TUNE credits at that share on this worker (`server`: its
    GPUs, cores and GB), the type's speed relative to a V100 being 1 / slowdown."""
    if lease.cpu_cores > 0:
        from hetsched.place.hetero import share_speedup
        from hetsched.model.profiles import load_sensitivity
        profiles = load_sensitivity(3)
        if lease.job_type not in profiles and server is not None:
            speed = share_speedup(lease.job_type, 1.0 / max(lease.slowdown, 1e-9), lease.world_size, server,
                                  lease.cpu_cores, lease.mem_gb)
            return EMULATED_STEPS_PER_S * speed / max(lease.slowdown, 1e-9)
        if lease.job_type in profiles:
            p = profiles[lease.job_type]
            ideal = lease.cpu_cores + 1e-9 >= p.cpus_per_gpu and lease.mem_gb + 1e-9 >= p.mem_gb_per_gpu
            # At its ideal demand a job runs at the profile's speedup (the grid may not reach that point, e.g.
            # 20 GB under a grid that starts at 20.83 GB); below it, at the grid point under its share.
            speed = p.speedup if ideal else p.relative_throughput(lease.cpu_cores, lease.mem_gb)
            return EMULATED_TIME_SCALE * speed / p.iteration_time_s / max(lease.slowdown, 1e-9)
    return EMULATED_STEPS_PER_S / max(lease.slowdown, 1e-9)


def log_tail(path: Path, size: int = LOG_TAIL_BYTES) -> str:
    """The last `size` bytes of a job's log, read with a seek however large the log grew."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - size))
            return f.read(size).decode("utf-8", "replace")
    except OSError as exc:
        return f"[hetsched] log not readable: {exc}"
