"""Entry points of the scheduler and worker processes (`hetsched scheduler`, `hetsched worker`)."""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

DEFAULT_PORT = 50551      # fixed: workers reconnect to a restarted scheduler
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _secret(env: str, path: str | None, fallback: Path | None = None) -> str:
    """A token from $ENV, from a file, or (scheduler only) from STATE_DIR, created 0600 when missing."""
    from .auth import check_token, new_token, read_secret, write_secret

    if os.environ.get(env):
        return check_token(os.environ[env], f"${env}")
    if path:
        return read_secret(path)
    if fallback is None:
        from hetsched.errors import HetschedError
        raise HetschedError(f"no token: set ${env} or give --token-file")
    if not fallback.exists():
        write_secret(fallback, new_token())
        logging.getLogger(__name__).info("wrote a new token to %s (mode 0600)", fallback)
    return read_secret(fallback)


def scheduler_credentials(args):
    from .auth import Credentials

    state = Path(args.state_dir)
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    return Credentials(client=_secret("HETSCHED_CLIENT_TOKEN", args.client_token_file, state / "client.token"),
                       worker=_secret("HETSCHED_WORKER_TOKEN", args.worker_token_file, state / "worker.token"))


def add_scheduler_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", required=True, help="SQLite state and the bound port are kept here")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"fixed, so workers find a restarted scheduler (default {DEFAULT_PORT}; 0 = any free port, "
                        f"written to STATE_DIR/port)")
    p.add_argument("--policy", default="max_min_fairness_perf", help="any name `hetsched policies` lists")
    p.add_argument("--round", type=float, default=360.0, help="round length in seconds")
    p.add_argument("--throughputs", default="gavel_simulation",
                   help="the throughput table: a dataset name in data/ or a JSON/Parquet path")
    p.add_argument("--client-token-file", default=None,
                   help="token of clients (submit, status); default $HETSCHED_CLIENT_TOKEN or STATE_DIR/client.token")
    p.add_argument("--worker-token-file", default=None,
                   help="token of workers; default $HETSCHED_WORKER_TOKEN or STATE_DIR/worker.token")
    p.add_argument("--worker-timeout", type=float, default=5.0,
                   help="seconds without a heartbeat after which a worker is dropped and its jobs requeued")
    p.add_argument("--max-attempts", type=int, default=3,
                   help="attempts (failed launches, crashes, lost workers) before a job is marked failed")
    p.add_argument("--slowdowns", default="{}", help='JSON {"k80": 3.0, ...}: emulate GPU types on CPUs')
    p.add_argument("--seed", type=int, default=0, help="the policy's seed, as in the simulator")
    p.add_argument("--entity-weights", default=None, metavar="CSV",
                   help="hierarchical policies: 'entity,weight' per user/team/vc (others weigh 1)")
    p.add_argument("--shockwave-config", default=None, metavar="PRESET|JSON",
                   help="Shockwave's planner settings, as `hetsched simulate --shockwave-config` reads them")
    p.add_argument("--time-scale", type=float, default=1.0, metavar="K",
                   help="elastic policies on emulated workers: one second stands for K seconds of the applications' "
                        "training (docs/rules.md#time-scale; default 1)")
    p.add_argument("--tls-key", default=None, help="PEM private key: serve TLS")
    p.add_argument("--tls-cert", default=None, help="PEM certificate chain: serve TLS")
    p.add_argument("--insecure", action="store_true",
                   help="allow a non-loopback --host without TLS (credentials cross the network in clear)")
    p.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")


def _home() -> Path:
    """The user's home; the current directory for a uid without one (no passwd entry, no $HOME)."""
    try:
        return Path.home()
    except RuntimeError:
        return Path.cwd()


def add_worker_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheduler", required=True, help="host:port")
    p.add_argument("--gpu-type", required=True, help="this worker's GPU type, as the throughput table names it")
    p.add_argument("--num-gpus", type=int, default=1, help="GPUs this worker offers (one job process per GPU)")
    p.add_argument("--work-dir", default=str(_home() / ".hetsched" / "work"),
                   help="job directories and logs (default ~/.hetsched/work)")
    p.add_argument("--job-uids", default="auto",
                   help="uids jobs run under: START-END (root only), 'auto' (61000-61999 when root, else the "
                        "worker's uid) or 'none' (the worker's uid: as root, jobs run as root and can read the "
                        "worker's memory and token). A root worker that cannot give jobs a uid of their own refuses "
                        "to start unless 'none' is given")
    p.add_argument("--token-file", default=None, help="the worker token (or $HETSCHED_WORKER_TOKEN)")
    p.add_argument("--tls-ca", default=None, help="PEM CA certificate: talk TLS to the scheduler")
    p.add_argument("--tls-server-name", default=None, help="expected name in the scheduler's certificate")
    p.add_argument("--advertise-host", default="127.0.0.1",
                   help="address other machines reach this one at (multi-GPU jobs' rendezvous)")
    p.add_argument("--cpu-cores", type=int, default=None, help="CPU cores to report (default: detected)")
    p.add_argument("--mem-gb", type=float, default=None, help="memory in GB to report (default: detected)")
    p.add_argument("--emulate", action="store_true", help="protocol only: jobs progress without processes")
    p.add_argument("--wait-for-scheduler", type=float, default=60.0, metavar="SECONDS",
                   help="how long to retry a scheduler that is not reachable yet before exiting with status 2 "
                        "(default 60; once registered, a worker waits for a restarting scheduler as long as it takes)")
    p.add_argument("--name", default="", help="a name for logs and `hetsched status`")
    p.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")


def _slowdowns(text: str) -> dict[str, float]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"--slowdowns: not JSON ({exc}); e.g. '{{\"k80\": 4.0}}'") from None
    if not isinstance(value, dict) or not all(isinstance(v, (int, float)) and v > 0 for v in value.values()):
        raise ValueError(f"--slowdowns: a JSON object of GPU type -> factor > 0, got {text!r}")
    return {str(k): float(v) for k, v in value.items()}


def run_scheduler(args) -> int:
    from hetsched.errors import HetschedError

    from .isolation import make_undumpable
    from .server import SchedulerServer

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, force=True)   # the CLI may have set one
    make_undumpable()
    if bool(args.tls_key) != bool(args.tls_cert):
        print("error: TLS needs both --tls-key and --tls-cert", file=sys.stderr)
        return 2
    tls = (args.tls_key, args.tls_cert) if args.tls_key else None
    try:
        from hetsched.model.entities import read_entity_weights
        weights = read_entity_weights(args.entity_weights) if args.entity_weights else None
        server = SchedulerServer(args.state_dir, scheduler_credentials(args), args.policy, args.round, args.host,
                                 args.port, args.throughputs, seed=args.seed, worker_timeout_s=args.worker_timeout,
                                 max_attempts=args.max_attempts, slowdowns=_slowdowns(args.slowdowns), tls=tls,
                                 insecure=args.insecure, entity_weights=weights,
                                 shockwave_config=args.shockwave_config, time_scale=args.time_scale)
        port = server.start()
    except (HetschedError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:                   # the state directory: unwritable, a file, a full disk
        print(f"error: {exc.filename or args.state_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    from .auth import write_secret
    write_secret(Path(args.state_dir) / "port", str(port))       # atomic, 0600 like every state file
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(0.5):
        if args.parent_pid is not None and os.getppid() != args.parent_pid:
            break
    server.stop()
    return 0


def run_worker(args) -> int:
    from hetsched.errors import HetschedError

    from .isolation import make_undumpable
    from .worker import Worker

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, force=True)   # the CLI may have set one
    make_undumpable()
    try:
        worker = Worker(args.scheduler, _secret("HETSCHED_WORKER_TOKEN", args.token_file), args.gpu_type,
                        args.num_gpus, args.work_dir, emulate=args.emulate, name=args.name, tls_ca=args.tls_ca,
                        tls_server_name=args.tls_server_name, advertise_host=args.advertise_host,
                        job_uids=args.job_uids, cpu_cores=args.cpu_cores, mem_gb=args.mem_gb)
    except HetschedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:                   # the token file or the work directory
        print(f"error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    logging.getLogger(__name__).info("worker %s: %d %s GPU(s), %d CPU cores, %.1f GB, work dir %s; %s",
                                     args.name or "-", args.num_gpus, args.gpu_type, worker.cpu_cores,
                                     worker.mem_gb, worker.work_dir, worker.uids.describe())
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())      # run() kills its jobs on the way out
    import grpc

    hint = "" if args.tls_ca else "; if the scheduler serves TLS, give --tls-ca"
    give_up = time.monotonic() + args.wait_for_scheduler      # it may still be starting: retry for a while
    for attempt in itertools.count():
        if worker.stopped:
            return 0
        try:
            worker.register()
            break
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED,
                              grpc.StatusCode.PERMISSION_DENIED):
                print(f"error: the scheduler refused this worker: {exc.details()}", file=sys.stderr)
                return 2
            if time.monotonic() > give_up:
                print(f"error: scheduler {args.scheduler} not reachable in {args.wait_for_scheduler:g} s "
                      f"({exc.code().name}: {exc.details()}){hint}", file=sys.stderr)
                return 2
            if attempt % 50 == 0:
                logging.getLogger(__name__).warning("scheduler %s not reachable yet (%s: %s)%s; retrying",
                                                    args.scheduler, exc.code().name, exc.details(), hint)
            time.sleep(0.1)
    worker.run(parent_pid=args.parent_pid)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hetsched.runtime.main")
    sub = parser.add_subparsers(dest="what", required=True)
    add_scheduler_args(sub.add_parser("scheduler"))
    add_worker_args(sub.add_parser("worker"))
    args = parser.parse_args(argv)
    return run_scheduler(args) if args.what == "scheduler" else run_worker(args)


if __name__ == "__main__":
    sys.exit(main())
