"""The operator's commands: `hetsched submit`, `hetsched status`, `hetsched cancel`, `hetsched calibrate`.

Each talks to a running scheduler with the client token: `--token-file`, $HETSCHED_CLIENT_TOKEN, or
`--state-dir DIR` (DIR/client.token, on the scheduler's machine). Errors are one `error:` line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from hetsched.cli import changed, positive_int

from .main import DEFAULT_PORT

STATUS_COLUMNS = ("job_id", "state", "steps_done", "total_steps", "attempts")


def add_connection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheduler", default=f"127.0.0.1:{DEFAULT_PORT}", help="host:port of the scheduler")
    p.add_argument("--token-file", default=None, help="the client token (or $HETSCHED_CLIENT_TOKEN)")
    p.add_argument("--state-dir", default=None, help="the scheduler's state directory: its port and client.token")
    p.add_argument("--tls-ca", default=None, help="PEM CA certificate: talk TLS to the scheduler")
    p.add_argument("--tls-server-name", default=None, help="expected name in the scheduler's certificate")


#: `submit`'s options that describe its one job (argparse dests); a trace gives its jobs, so they are refused there.
ONE_JOB = ("job_type", "steps", "scale_factor", "command", "job_id", "priority", "entity", "adaptation",
           "pinned_gpu_types", "slo", "duration")


def add_client_commands(sub) -> None:
    submit = sub.add_parser("submit", help="submit a trace file or one job to a running scheduler")
    add_connection_args(submit)
    submit.add_argument("trace", nargs="?", help="a trace (.csv/.parquet/.trace); or give --job-type/--steps")
    submit.add_argument("--job-type", help='one job: e.g. "ResNet-18 (batch size 16)"')
    submit.add_argument("--steps", type=int, help="one job: total steps")
    submit.add_argument("--scale-factor", type=int, default=1, help="one job: GPUs")
    submit.add_argument("--command", default=None, help="one job: the command (default: the job type's workload)")
    submit.add_argument("--job-id", type=int, default=-1, help="one job: its id (default: the next free one)")
    submit.add_argument("--priority", type=float, default=1.0, help="one job: its priority weight (> 0)")
    submit.add_argument("--entity", default="", help="user/team/vc for hierarchical policies")
    submit.add_argument("--adaptation", default="static", choices=("static", "accordion", "gns"),
                        help="batch-size adaptation of the job (Shockwave's; needs a batch size in its type)")
    submit.add_argument("--pinned-gpu-types", default="", help="one job: the GPU types it may run on, e.g. v100|p100")
    submit.add_argument("--slo", type=float, default=None,
                        help="one job: finish within SLO x --duration seconds of submission (Gavel's SLO policies)")
    submit.add_argument("--duration", type=float, default=None, help="one job: its duration in seconds (with --slo)")
    submit.add_argument("--skip", type=int, default=0,
                        help="a trace: leave out its first N rows (to resume a submission that stopped)")
    submit.add_argument("--timeout", type=float, default=120.0,
                        help="seconds per job to wait for a scheduler that is busy or restarting")
    submit.set_defaults(func=run_submit, one_job={d: submit.get_default(d) for d in ONE_JOB})
    status = sub.add_parser("status", help="jobs of a running scheduler, page by page; --metrics for its figures")
    add_connection_args(status)
    status.add_argument("--state", action="append", default=[], help="only jobs in this state (repeatable)")
    status.add_argument("--json", action="store_true", help="one JSON object per job")
    status.add_argument("--metrics", action="store_true", help="round time, queue, leases, workers, RPC errors")
    status.add_argument("--page-size", type=positive_int, default=1000, help="jobs per call (the scheduler sends "
                        "at most 5000)")
    status.add_argument("--limit", type=positive_int, default=None, help="at most this many jobs")
    status.set_defaults(func=run_status, listing={d: status.get_default(d) for d in ("state", "limit", "page_size")})
    cancel = sub.add_parser("cancel", help="stop queued or running jobs for good (state: cancelled)")
    add_connection_args(cancel)
    cancel.add_argument("job_ids", type=int, nargs="+")
    cancel.set_defaults(func=run_cancel)
    calibrate = sub.add_parser("calibrate", help="write a running scheduler's measured lease start and restart "
                                                 "costs for `hetsched simulate --calibration`")
    add_connection_args(calibrate)
    calibrate.add_argument("--out", default="calibration.json", help="the JSON file to write")
    calibrate.set_defaults(func=run_calibrate)


def _stub(args):
    from .auth import channel, check_token, read_secret
    from .stubs import pb2_grpc

    address, state = args.scheduler, Path(args.state_dir) if args.state_dir else None
    if os.environ.get("HETSCHED_CLIENT_TOKEN"):
        token = check_token(os.environ["HETSCHED_CLIENT_TOKEN"], "$HETSCHED_CLIENT_TOKEN")
    elif args.token_file or state:
        token = read_secret(args.token_file or state / "client.token")
    else:
        raise ValueError("no client token: give --token-file, --state-dir or $HETSCHED_CLIENT_TOKEN")
    if state is not None and (state / "port").exists() and args.scheduler == f"127.0.0.1:{DEFAULT_PORT}":
        address = f"127.0.0.1:{(state / 'port').read_text().strip()}"
    return pb2_grpc.SchedulerStub(channel(address, token, args.tls_ca, server_name=args.tls_server_name))


def _run(body, args) -> int:
    import grpc

    try:
        return body(_stub(args), args)
    except grpc.RpcError as exc:
        print(f"error: {exc.code().name}: {exc.details()}", file=sys.stderr)
    except (ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
    return 2


def _jobs(args):
    """The jobs to submit: a trace's, read a chunk at a time (hetsched/traces/stream.py), or the one job."""
    from hetsched.model.catalog import template_for
    from hetsched.model.jobs import Job

    if args.trace:
        one_job = changed(args, args.one_job)
        if one_job:
            raise ValueError(f"{', '.join(one_job)} describe one job, and {args.trace} gives its jobs: submit the "
                             f"trace, or one job without it")
        from hetsched.traces.stream import stream_trace
        return stream_trace(args.trace)
    if not args.job_type or not args.steps:
        raise ValueError("give a trace file, or --job-type and --steps for one job")
    command = args.command or template_for(args.job_type).command
    return iter([Job(max(args.job_id, 0), 0.0, args.job_type, args.scale_factor, args.steps,
                     priority_weight=args.priority, command=command, entity=args.entity or None,
                     mode=args.adaptation, pinned_gpu_types=args.pinned_gpu_types, slo_factor=args.slo,
                     duration_s=args.duration)])


def _submit(stub, args) -> int:
    """Submit the trace's rows (from --skip on) or the one job, each as it is read. When a row fails, says which
    rows are stored and how to resume: a trace's jobs get ids from the scheduler, so submitting it again would
    store them twice."""
    import grpc

    from .launch import submit_request

    if args.skip < 0 or (args.skip and not args.trace):
        raise ValueError(f"--skip {args.skip}: a number of rows >= 0 of a trace file")
    if not args.timeout > 0:
        raise ValueError(f"--timeout {args.timeout}: seconds > 0 (inf: wait as long as it takes)")
    row, jobs = -1, _jobs(args)
    while True:
        try:
            job = next(jobs, None)
        except ValueError as exc:        # a bad row further down a trace, after some rows went in
            if row < args.skip:
                raise
            print(f"error: {exc}: rows {args.skip}-{row} are stored; after fixing the trace, submit the rest with "
                  f"--skip {row + 1}", file=sys.stderr)
            return 2
        if job is None:
            break
        row += 1
        if row < args.skip:
            continue
        request = submit_request(job, -1 if args.trace else args.job_id)
        try:
            job_id = _submit_one(stub, request, args.timeout, restarting=row > args.skip)
        except grpc.RpcError as exc:
            if not args.trace:
                raise
            done = f"rows {args.skip}-{row - 1} are stored" if row > args.skip else "no row of this call is stored"
            if exc.code().name in LOST:
                then = (f"row {row} may be too (its answer was lost: see `hetsched status`); submit the rest with "
                        f"--skip {row} or --skip {row + 1}")
            else:
                then = f"row {row} is not; submit the rest with --skip {row}"
            print(f"error: {exc.code().name}: {exc.details()} (trace row {row}): {done}, {then}", file=sys.stderr)
            return 2
        print(f"submitted job {job_id}", flush=True)
    if row < 0:
        raise ValueError(f"{args.trace} holds no jobs: nothing to submit")
    if row < args.skip:
        raise ValueError(f"--skip {args.skip}: {args.trace} has {row + 1} rows, so none is left to submit")
    return 0


#: Status codes after which a call may have run although its answer never came back.
LOST = ("DEADLINE_EXCEEDED", "UNAVAILABLE")


def _submit_one(stub, request, timeout_s: float, restarting: bool = False) -> int:
    """SubmitJob within `timeout_s`. A busy scheduler's RESOURCE_EXHAUSTED comes before the call runs, so it is
    retried. Once the scheduler has answered this command (`restarting`), one that stopped listening is waited for
    (gRPC's wait_for_ready: nothing is sent until it listens again); before that, a wrong address fails at once.
    A lost answer (DEADLINE_EXCEEDED) is retried only for a job with its own id, whose ALREADY_EXISTS then means
    that the lost attempt was stored; a job whose id the scheduler assigns could be stored twice, so its lost
    answer is the caller's to report."""
    import math

    import grpc

    deadline, lost = time.monotonic() + timeout_s, False           # inf: no deadline (gRPC takes None)
    while True:
        left = max(0.1, deadline - time.monotonic())
        try:
            return stub.SubmitJob(request, timeout=min(10.0, left) if request.job_id >= 0 else
                                  (left if math.isfinite(left) else None), wait_for_ready=restarting).job_id
        except grpc.RpcError as exc:
            code = exc.code().name
            if code == "ALREADY_EXISTS" and lost:
                return request.job_id
            lost = lost or code in LOST
            again = code == "RESOURCE_EXHAUSTED" or (code == "DEADLINE_EXCEEDED" and request.job_id >= 0)
            if not again or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)


def _status(stub, args) -> int:
    from .stubs import pb2

    listing = changed(args, args.listing)
    if args.metrics and listing:
        raise ValueError(f"--metrics prints the scheduler's figures, not jobs to choose from: drop "
                         f"{', '.join(listing)}")
    first = stub.GetStatus(pb2.StatusRequest(page_size=1), timeout=10)
    if args.metrics:
        metrics = {"workers": first.workers, "gpus": first.gpus, "cpu_cores": first.cpu_cores,
                   "mem_gb": first.mem_gb, "leases": first.leases, "rounds": first.rounds,
                   "round_overhead_mean_s": first.mean_round_overhead_s,
                   "round_overhead_last_s": first.last_round_overhead_s,
                   "restarts": first.restarts, "restart_mean_s": first.mean_restart_s,
                   "lease_starts": first.lease_starts, "lease_start_mean_s": first.mean_lease_start_s,
                   "batch_size_switches": first.batch_size_switches,
                   **{f"jobs_{k}": v for k, v in sorted(first.counts.items())},
                   **{f"rpc_errors_{k}": v for k, v in sorted(first.rpc_errors.items())}}
        print(json.dumps(metrics) if args.json else
              "\n".join(f"hetsched_{key} {value}" for key, value in metrics.items()))    # Prometheus text
        return 0
    token, shown = 0, 0
    if not args.json:
        print("  ".join(f"{c:>11}" for c in STATUS_COLUMNS))
    while token >= 0 and (args.limit is None or shown < args.limit):
        page = stub.GetStatus(pb2.StatusRequest(page_size=args.page_size, page_token=token, states=args.state),
                              timeout=30)
        for job in page.jobs[:None if args.limit is None else args.limit - shown]:
            row = {c: getattr(job, c) for c in STATUS_COLUMNS}
            print(json.dumps({**row, "log_tail": job.log_tail}) if args.json else
                  "  ".join(f"{row[c]:>11}" for c in STATUS_COLUMNS))
            shown += 1
        token = page.next_page_token
    if not args.json:
        print(f"{shown} job(s); " + ", ".join(f"{k} {v}" for k, v in sorted(first.counts.items())))
    return 0


def _cancel(stub, args) -> int:
    from .stubs import pb2

    for job_id in args.job_ids:
        before = stub.Cancel(pb2.CancelRequest(job_id=job_id), timeout=10).previous_state
        print(f"job {job_id}: cancelled (was {before})" if before in ("queued", "running") else
              f"job {job_id}: already {before}, unchanged")
    return 0


def _calibrate(stub, args) -> int:
    from hetsched.io.calibration import write_calibration

    from .launch import status_figures
    from .stubs import pb2

    out = write_calibration(args.out, status_figures(stub.GetStatus(pb2.StatusRequest(page_size=1), timeout=10)))
    print(f"{args.out}: lease start {out['lease_start_s']:.3f} s (mean of {out['lease_starts']} leases), "
          f"restart {out['restart_s']:.3f} s ({out['restarts']} restarts)")
    return 0


def run_submit(args) -> int:
    return _run(_submit, args)


def run_status(args) -> int:
    return _run(_status, args)


def run_cancel(args) -> int:
    return _run(_cancel, args)


def run_calibrate(args) -> int:
    return _run(_calibrate, args)
