"""Entry points of the scheduler and worker processes (`hetsched scheduler`, `hetsched worker`)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path


def _token(args) -> str:
    token = os.environ.get("HETSCHED_TOKEN") or (Path(args.token_file).read_text().strip() if args.token_file else "")
    if not token:
        from .auth import new_token
        token = new_token()
        print(f"generated token: {token}", file=sys.stderr)
    return token


def add_scheduler_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", required=True, help="SQLite state and the bound port are kept here")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    p.add_argument("--port", type=int, default=0, help="0 = any free port (written to STATE_DIR/port)")
    p.add_argument("--policy", default="max_min_fairness_perf")
    p.add_argument("--round", type=float, default=360.0, help="round length in seconds")
    p.add_argument("--throughputs", default="gavel_simulation")
    p.add_argument("--token-file", default=None, help="file holding the shared token (or $HETSCHED_TOKEN)")
    p.add_argument("--worker-timeout", type=float, default=5.0)
    p.add_argument("--max-attempts", type=int, default=3)
    p.add_argument("--slowdowns", default="{}", help='JSON {"k80": 3.0, ...}: emulate GPU types on CPUs')
    p.add_argument("--tls-key", default=None)
    p.add_argument("--tls-cert", default=None)
    p.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")


def add_worker_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheduler", required=True, help="host:port")
    p.add_argument("--gpu-type", required=True)
    p.add_argument("--num-gpus", type=int, default=1)
    p.add_argument("--work-dir", default=".")
    p.add_argument("--token-file", default=None)
    p.add_argument("--emulate", action="store_true", help="protocol only: jobs progress without processes")
    p.add_argument("--name", default="")
    p.add_argument("--parent-pid", type=int, default=None)


def run_scheduler(args) -> int:
    from .server import SchedulerServer

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    tls = (args.tls_key, args.tls_cert) if args.tls_key and args.tls_cert else None
    server = SchedulerServer(args.state_dir, _token(args), args.policy, args.round, args.host, args.port,
                             args.throughputs, worker_timeout_s=args.worker_timeout, max_attempts=args.max_attempts,
                             slowdowns=json.loads(args.slowdowns), tls=tls)
    port = server.start()
    tmp = Path(args.state_dir) / "port.tmp"
    tmp.write_text(str(port))
    tmp.replace(Path(args.state_dir) / "port")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(0.5):
        if args.parent_pid is not None and os.getppid() != args.parent_pid:
            break
    server.stop()
    return 0


def run_worker(args) -> int:
    from .worker import Worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker = Worker(args.scheduler, _token(args), args.gpu_type, args.num_gpus, args.work_dir,
                    emulate=args.emulate, name=args.name)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    for attempt in range(600):          # the scheduler may still be starting: retry for up to a minute
        try:
            worker.register()
            break
        except Exception:
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
