"""`launch_local_cluster(...)`: a scheduler and its workers as local subprocesses, with a handle to drive them."""

from __future__ import annotations

import atexit
import csv
import json
import os
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Iterable

import pandas as pd

from hetsched.model.catalog import template_for
from hetsched.model.cluster import ClusterSpec
from hetsched.model.jobs import Job

import grpc

from .auth import channel, new_token, write_secret
from .isolation import DEFAULT_JOB_UIDS
from .status_view import STATUS_COLUMNS, status_view
from .stubs import pb2, pb2_grpc

#: Codes that mean "the scheduler is restarting or busy"; `wait()` and `submit()` ride them out (bounded), any other
#: error is raised.
TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED)

#: Default emulated speed of each GPU type relative to a V100 (roughly Gavel's ResNet-18 ratios).
DEFAULT_SLOWDOWNS = {"v100": 1.0, "p100": 1.5, "k80": 4.0}
#: Job uids per worker of a local cluster (as root): workers on one host never share a uid between their jobs.
UIDS_PER_WORKER = 128


def _spawn(argv: list[str], env: dict, log_path: Path) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for_port(state_dir: Path, proc: subprocess.Popen, timeout_s: float = 60.0) -> str:
    """The loopback address a scheduler process wrote to STATE_DIR/port (bounded; its log if it died)."""
    port_file = Path(state_dir) / "port"
    deadline = time.monotonic() + timeout_s
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            log = Path(state_dir) / "scheduler.log"
            raise RuntimeError("scheduler did not start:\n" + (log.read_text()[-3000:] if log.exists() else ""))
        time.sleep(0.05)
    return f"127.0.0.1:{port_file.read_text().strip()}"


def stop_group(proc: subprocess.Popen | None, sig=signal.SIGTERM, timeout: float = 10) -> None:
    """Signal a process started with start_new_session=True and its group; SIGKILL after `timeout` (bounded)."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)


def submit_request(job: Job, job_id: int):
    """The SubmitJob request for `job` under `job_id` (-1: the scheduler assigns one); without a command of its own
    the job runs its type's template (workloads/train.py), on synthetic data."""
    command = (job.command or template_for(job.job_type).command).replace("--data-dir %s", "").strip()
    return pb2.SubmitJobRequest(job_id=job_id, job_type=job.job_type, scale_factor=job.scale_factor,
                                total_steps=int(job.total_steps), priority_weight=job.priority_weight,
                                command=command, entity=job.entity or "",
                                adaptation="" if job.mode.value == "static" else job.mode.value,
                                pinned_gpu_types=job.pinned_gpu_types, slo_factor=job.slo_factor or 0.0,
                                duration_s=job.duration_s or 0.0)


class LocalCluster:
    """Handle to a local scheduler + workers. Submit jobs, watch, kill/restart parts, shut down.

    Each worker has its own work directory (as on separate machines): checkpoints travel through the scheduler.
    `tls=(key.pem, cert.pem, ca.pem)` runs every connection over TLS. `gpus_per_worker` > 1 gives workers
    several GPUs (multi-GPU jobs then run one rank per GPU on one or more workers). The tokens are kept in
    STATE_DIR (0600 files), never in a process's environment. `isolate` runs each worker's jobs under uids of its
    own (root only; default: when root, where a worker that cannot isolate its jobs refuses to start: pass
    `isolate=False` to run them as root knowingly).
    """

    def __init__(self, cluster: ClusterSpec | str, state_dir: str | Path, policy: str = "max_min_fairness_perf",
                 round_s: float = 5.0, emulate: bool = False, slowdowns: dict[str, float] | None = None,
                 throughputs: str = "gavel_simulation", worker_timeout_s: float = 4.0, max_attempts: int = 3,
                 tls: tuple[str, str, str] | None = None, gpus_per_worker: int = 1, seed: int = 0,
                 ready_timeout_s: float = 60.0, entity_weights: dict[str, float] | None = None,
                 isolate: bool | None = None, time_scale: float = 1.0):
        self.spec = ClusterSpec.load(cluster) if isinstance(cluster, str) else cluster
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.client_token, self.worker_token = new_token(), new_token()
        self.token_files = {"client": self.state_dir / "client.token", "worker": self.state_dir / "worker.token"}
        write_secret(self.token_files["client"], self.client_token)
        write_secret(self.token_files["worker"], self.worker_token)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HETSCHED_")}
        self.tls, self.gpus_per_worker, self.seed = tls, gpus_per_worker, seed
        self.policy, self.round_s, self.emulate, self.time_scale = policy, round_s, emulate, time_scale
        self.slowdowns = {**DEFAULT_SLOWDOWNS, **(slowdowns or {})}
        self.throughputs, self.worker_timeout_s, self.max_attempts = throughputs, worker_timeout_s, max_attempts
        self.entity_weights = dict(entity_weights or {})
        if isolate is None:
            isolate = os.geteuid() == 0 and not emulate
        self.isolate = isolate
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        # (GPU type, GPUs, name, CPU cores, GB): one worker per server when the spec gives server shapes with
        # CPU cores and memory (e.g. '2x4/24/500@v100'), else `gpus_per_worker` GPUs each (host's CPUs and memory).
        self.worker_args: list[tuple[str, int, str, int | None, float | None]] = []
        self.address = ""
        self.start_scheduler()
        if self.spec.has_resources:
            for i, server in enumerate(self.spec.servers):
                self.worker_args.append((server.gpu_type, server.num_gpus, f"{server.gpu_type}-{i}",
                                         int(server.cpu_cores), float(server.dram_gb)))
        for gpu, n in zip(self.spec.gpu_types, self.spec.counts) if not self.spec.has_resources else ():
            for i in range(0, n, gpus_per_worker):
                self.worker_args.append((gpu, min(gpus_per_worker, n - i), f"{gpu}-{i // gpus_per_worker}", None,
                                         None))
        self.workers = [self._start_worker(*a) for a in self.worker_args]
        self._finalizer = weakref.finalize(self, LocalCluster._cleanup, [self.scheduler], self.workers)
        atexit.register(self.shutdown)
        self._wait_ready(ready_timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        """Return once every worker has registered (bounded): jobs submitted next see the whole cluster."""
        deadline = time.monotonic() + timeout_s
        while self.info()["workers"] < len(self.workers):
            dead = [a[2] for a, w in zip(self.worker_args, self.workers) if w.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.shutdown()
                log = self.state_dir / f"worker-{dead[0]}.log" if dead else None
                raise RuntimeError(f"workers {dead or 'not all'} did not register" +
                                   (":\n" + log.read_text()[-3000:] if log else ""))
            time.sleep(0.1)

    def _channel(self, token: str):
        ca = self.tls[2] if self.tls else None
        return channel(self.address, token, ca, server_name="localhost" if ca else None)

    # ---- processes ------------------------------------------------------------------------------------
    def start_scheduler(self) -> None:
        port_file = self.state_dir / "port"
        port_file.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "hetsched.runtime.main", "scheduler", "--state-dir", str(self.state_dir),
                "--policy", self.policy, "--round", repr(self.round_s), "--throughputs", self.throughputs,
                "--worker-timeout", repr(self.worker_timeout_s), "--max-attempts", str(self.max_attempts),
                "--slowdowns", json.dumps(self.slowdowns), "--parent-pid", str(os.getpid()),
                "--seed", str(self.seed), "--client-token-file", str(self.token_files["client"]),
                "--worker-token-file", str(self.token_files["worker"])]
        if self.tls:
            argv += ["--tls-key", str(self.tls[0]), "--tls-cert", str(self.tls[1])]
        if self.time_scale != 1.0:
            argv += ["--time-scale", repr(self.time_scale)]
        if self.entity_weights:
            weights = self.state_dir / "entity_weights.csv"
            with open(weights, "w", newline="") as f:
                csv.writer(f).writerows([("entity", "weight"), *self.entity_weights.items()])
            argv += ["--entity-weights", str(weights)]
        # The first start takes any free port; a restart keeps it, so workers find the scheduler again.
        argv += ["--port", self.address.rsplit(":", 1)[1] if self.address else "0"]
        self.scheduler = _spawn(argv, self.env, self.state_dir / "scheduler.log")
        self.address = wait_for_port(self.state_dir, self.scheduler)
        self.stub = pb2_grpc.SchedulerStub(self._channel(self.client_token))
        if hasattr(self, "_finalizer"):
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, LocalCluster._cleanup, [self.scheduler], self.workers)

    def _start_worker(self, gpu: str, num_gpus: int, name: str, cpu_cores: int | None = None,
                      mem_gb: float | None = None) -> subprocess.Popen:
        work = self.state_dir / "work" / name             # no directory shared between workers
        work.mkdir(mode=0o700, parents=True, exist_ok=True)
        index = next(i for i, a in enumerate(self.worker_args) if a[2] == name)
        first = DEFAULT_JOB_UIDS[0] + index * UIDS_PER_WORKER
        uids = f"{first}-{first + UIDS_PER_WORKER - 1}" if self.isolate else "none"
        argv = [sys.executable, "-m", "hetsched.runtime.main", "worker", "--scheduler", self.address,
                "--gpu-type", gpu, "--num-gpus", str(num_gpus), "--work-dir", str(work), "--name", name,
                "--parent-pid", str(os.getpid()), "--token-file", str(self.token_files["worker"]),
                "--job-uids", uids] + (["--emulate"] if self.emulate else [])
        if self.tls:
            argv += ["--tls-ca", str(self.tls[2]), "--tls-server-name", "localhost"]
        if cpu_cores is not None:
            argv += ["--cpu-cores", str(cpu_cores), "--mem-gb", repr(mem_gb)]
        return _spawn(argv, self.env, self.state_dir / f"worker-{name}.log")

    def restart_worker(self, index: int) -> None:
        """Start a killed worker again (same name and work directory, a new registration)."""
        stop_group(self.workers[index], signal.SIGKILL)
        self.workers[index] = self._start_worker(*self.worker_args[index])

    def worker_children(self, index: int) -> list[int]:
        """PIDs of the job processes a worker runs (each in its own process group)."""
        out = subprocess.run(["pgrep", "-P", str(self.workers[index].pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def kill_worker(self, index: int) -> None:
        """SIGKILL one worker and the jobs it runs (a machine failure)."""
        children = self.worker_children(index)
        stop_group(self.workers[index], signal.SIGKILL)
        for pid in children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def kill_scheduler(self) -> None:
        stop_group(self.scheduler, signal.SIGKILL)

    def restart_scheduler(self) -> None:
        self.kill_scheduler()
        self.start_scheduler()

    # ---- jobs -------------------------------------------------------------------------------------------
    def submit(self, jobs: Iterable[Job] | Job, timeout_s: float = 120.0) -> list[int]:
        """Submit jobs now (their arrival times are ignored; use `replay` to honour them). A scheduler that is
        restarting or busy is waited for, up to `timeout_s` per job (`_ride_out`)."""
        jobs = [jobs] if isinstance(jobs, Job) else jobs
        return [self._submit_one(job, timeout_s) for job in jobs]

    def _submit_one(self, job: Job, timeout_s: float) -> int:
        """After an attempt whose answer was lost (DEADLINE_EXCEEDED, UNAVAILABLE: it may have been stored),
        ALREADY_EXISTS for the job's id (a Job always has one) means that attempt landed."""
        request, lost = submit_request(job, job.job_id), []

        def call(stub, timeout):
            try:
                return stub.SubmitJob(request, timeout=timeout).job_id
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.ALREADY_EXISTS and lost:
                    return job.job_id
                if exc.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
                    lost.append(exc.code())
                raise
        return self._ride_out(call, timeout_s)

    def _ride_out(self, call, timeout_s: float = 60.0):
        """`call(stub, timeout)`, retried on TRANSIENT codes until `timeout_s`; each attempt waits at most 10 s.
        The stub is looked up on every attempt: a restarted scheduler has a new one."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return call(self.stub, min(10.0, max(0.1, deadline - time.monotonic())))
            except grpc.RpcError as exc:
                if exc.code() not in TRANSIENT or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    def status(self, states: Iterable[str] = (), page_size: int = 1000) -> pd.DataFrame:
        """Every job (or those in `states`), fetched page by page."""
        rows, token = [], 0
        for _ in range(1_000_000):
            request = pb2.StatusRequest(page_size=page_size, page_token=token, states=list(states))
            resp = self._ride_out(lambda stub, timeout: stub.GetStatus(request, timeout=timeout))
            rows += [{"job_id": j.job_id, "state": j.state, "steps_done": j.steps_done,
                      "durable_steps": j.durable_steps, "total_steps": j.total_steps, "attempts": j.attempts,
                      "submitted_s": j.submitted_s, "finished_s": j.finished_s or None, "log_tail": j.log_tail,
                      "batch_size": j.batch_size, "gpu_type": j.gpu_type, "workers": j.workers}
                     for j in resp.jobs]
            token = resp.next_page_token
            if token < 0:
                break
        return pd.DataFrame(rows, columns=STATUS_COLUMNS)

    def _summary(self, timeout_s: float = 60.0):
        return self._ride_out(lambda stub, timeout: stub.GetStatus(pb2.StatusRequest(page_size=1), timeout=timeout),
                              timeout_s)

    def counts(self) -> dict[str, int]:
        """Jobs per state (one small call, however many jobs)."""
        return dict(self._summary().counts)

    def info(self) -> dict:
        return status_figures(self._summary())

    def wait(self, timeout_s: float, poll_s: float = 0.5) -> pd.DataFrame:
        """Block until every job is completed or failed (bounded); returns the final status."""
        deadline = time.monotonic() + timeout_s
        last_error = None
        while True:
            try:
                counts = dict(self._summary(max(0.1, deadline - time.monotonic())).counts)
                if counts and counts.keys() <= {"completed", "failed"}:
                    return self.status()
                last_error = None
            except grpc.RpcError as exc:
                if exc.code() not in TRANSIENT:   # a wrong token, a bug: say so now, not after the timeout
                    raise
                last_error = f"{exc.code().name}: {exc.details()}"    # the scheduler may be restarting
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs not finished after {timeout_s} s" +
                                   (f" (last error {last_error})" if last_error else ""))
            time.sleep(poll_s)

    def widget(self, refresh_s: float = 1.0):
        """A live table of jobs: state, GPU type, workers, % done, elapsed time (updates in a background thread
        until everything is done; `runtime/status_view.py`)."""
        import threading

        import ipywidgets as W
        out, last = W.HTML(), {}

        def loop():
            while self.scheduler is not None and self.scheduler.poll() is None:
                frame = self.status()
                out.value = status_view(frame, last).to_html(index=False)
                if len(frame) and frame["state"].isin(["completed", "failed"]).all():
                    break
                time.sleep(refresh_s)
        threading.Thread(target=loop, daemon=True).start()
        return out

    # ---- teardown ---------------------------------------------------------------------------------------
    @staticmethod
    def _cleanup(schedulers, workers) -> None:
        for w in workers:
            stop_group(w)
        for s in schedulers:
            stop_group(s)

    def shutdown(self) -> None:
        """Stop workers (and their jobs) and the scheduler. Safe to call twice."""
        LocalCluster._cleanup([self.scheduler], self.workers)

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


def launch_local_cluster(cluster: ClusterSpec | str, state_dir: str | Path, **kwargs) -> LocalCluster:
    """Start a scheduler and one single-GPU worker per GPU of `cluster` (e.g. "2:1:1") on this machine."""
    return LocalCluster(cluster, state_dir, **kwargs)


def status_figures(resp) -> dict:
    """A `StatusResponse`'s scheduler figures (rounds, overhead, restarts, lease starts, switches) as a dict."""
    return {"workers": resp.workers, "rounds": resp.rounds, "now_s": resp.now_s,
            "mean_round_overhead_s": resp.mean_round_overhead_s, "mean_restart_s": resp.mean_restart_s,
            "restarts": resp.restarts, "batch_size_switches": resp.batch_size_switches,
            "mean_lease_start_s": resp.mean_lease_start_s, "lease_starts": resp.lease_starts}
