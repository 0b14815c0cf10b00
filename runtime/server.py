"""The scheduler server: gRPC handlers around `RuntimeState`, the round loop, TLS and the state-directory lock.

Every handler checks who calls (`auth.require`) and what it sends (`validate`) before anything is stored, and
answers bad input with INVALID_ARGUMENT, a taken job id with ALREADY_EXISTS and a report on someone else's lease
with PERMISSION_DENIED; no input makes it answer UNKNOWN.
"""

from __future__ import annotations

import fcntl
import functools
import ipaddress
import logging
import os
import ssl
import threading
import time
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc

from hetsched.errors import HetschedError
from hetsched.model.throughputs import load_throughputs

from .auth import CLIENT, JOB, WORKER, Credentials, require
from .checkpoints import CheckpointError, CheckpointStorageError, CheckpointStore
from .health import SERVING, Health
from .logs import limit
from .records import Denied, NotFound
from .slots import IdleTransfers, Slots
from .state import RuntimeState
from .store import DuplicateJob, Store
from .stubs import pb2, pb2_grpc
from .validate import InvalidInput

log = logging.getLogger(__name__)

HANDLER_THREADS = 32
#: Checkpoint streams served at once, and per job (whichever of its lease tokens it uses). The rest of the handler
#: pool stays free for heartbeats, exit reports and clients, whatever jobs upload; one more stream is answered
#: RESOURCE_EXHAUSTED at once and the job retries. A stream that moves nothing for STREAM_IDLE_S is cancelled.
CHECKPOINT_STREAMS, STREAMS_PER_JOB, STREAM_IDLE_S = 8, 2, 30.0
#: Concurrent unary calls each untrusted role may hold, and each job of them. With the streams, at most
#: 6 + 12 + 8 = 26 handler threads serve clients and jobs, so 6 are always free for workers' heartbeats and exit
#: reports: no client or job traffic starves a worker, and no job takes the share every other job reports in.
ROLE_CALLS, CALLS_PER_JOB = {CLIENT: 6, JOB: 12}, 3
#: A connection lives at most this long, then gets this much grace to finish its calls: no stream, however slow
#: its sender, holds a handler thread for longer.
CONNECTION_AGE_S, CONNECTION_GRACE_S = 300, 90


class StateDirLocked(HetschedError):
    """Another scheduler already serves this state directory."""


def _answer(context, fn):
    """Run a handler body; map the runtime's errors to gRPC status codes."""
    try:
        return fn()
    except InvalidInput as exc:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    except DuplicateJob as exc:
        context.abort(grpc.StatusCode.ALREADY_EXISTS, str(exc))
    except NotFound as exc:
        context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
    except (Denied, PermissionError) as exc:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
    except CheckpointError as exc:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    except grpc.RpcError:               # the caller cancelled, or an idle transfer was cancelled: nobody to answer
        context.abort(grpc.StatusCode.CANCELLED, "the call was cancelled")
    except CheckpointStorageError as exc:     # our disk, not the caller: logged here, no path in the answer
        log.error("checkpoint storage failed: %s", exc)
        context.abort(grpc.StatusCode.INTERNAL, "the scheduler could not store the checkpoint")
    except Exception:                   # a bug, not the caller's input: say so, and keep the traceback in our log
        log.exception("internal error in %s", getattr(fn, "__qualname__", "handler"))
        context.abort(grpc.StatusCode.INTERNAL, "internal error; see the scheduler's log")


def counted(method):
    """Count the handler's answer by status code (`hetsched status --metrics`)."""
    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        finally:
            code = context.code()
            if code is not None and code != grpc.StatusCode.OK:
                self.state.rpc_errors[code.name] += 1
    return wrapper


class Servicer(pb2_grpc.SchedulerServicer):
    def __init__(self, state: RuntimeState, credentials: Credentials):
        self.state, self.credentials = state, credentials
        self._streams = Slots("checkpoint transfers", CHECKPOINT_STREAMS, STREAMS_PER_JOB)
        self._calls = {CLIENT: Slots("client calls", ROLE_CALLS[CLIENT], ROLE_CALLS[CLIENT]),
                       JOB: Slots("job calls", ROLE_CALLS[JOB], CALLS_PER_JOB)}
        self.idle = IdleTransfers(STREAM_IDLE_S)

    def _lease_holder(self, context) -> tuple[object, int]:
        """A job's caller and its job id, once its lease token is known: nothing of a stream is read before this."""
        caller = require(context, self.credentials, JOB)
        job_id = self.state.job_of(caller.lease_token)
        if job_id is None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown or expired lease credential")
        return caller, job_id

    @contextmanager
    def _transfer(self, context, job_id: int):
        """One of the job's stream slots, watched for idling, for the block."""
        with self._streams.held(job_id, context), self.idle.watched(context) as transfer:
            yield transfer

    def _call(self, context, role: str, fn, key=None):
        """Run a client's or job's call within its role's share of the handler threads (a job's: within its own)."""
        with self._calls[role].held(role if key is None else key, context):
            return _answer(context, fn)

    @counted
    def RegisterWorker(self, request, context):
        require(context, self.credentials, WORKER)

        def body():
            worker_id, session = self.state.register(request.gpu_type, request.num_gpus, request.name,
                                                     request.cpu_cores, request.mem_gb)
            return pb2.RegisterWorkerResponse(worker_id=worker_id, round_s=self.state.round_s, session=session)
        return _answer(context, body)

    @counted
    def Heartbeat(self, request, context):
        require(context, self.credentials, WORKER)
        return _answer(context, lambda: self.state.heartbeat(request))

    @counted
    def ReportExit(self, request, context):
        require(context, self.credentials, WORKER)
        return _answer(context, lambda: self.state.report_exit(request) or pb2.Ack())

    @counted
    def UpdateLease(self, request, context):
        caller, job_id = self._lease_holder(context)
        return self._call(context, JOB, lambda: self.state.update_lease(request, caller.lease_token), job_id)

    @counted
    def SubmitJob(self, request, context):
        require(context, self.credentials, CLIENT)
        return self._call(context, CLIENT, lambda: pb2.SubmitJobResponse(job_id=self.state.submit(request)))

    @counted
    def GetStatus(self, request, context):
        require(context, self.credentials, CLIENT)
        return self._call(context, CLIENT, lambda: self.state.status(request))

    @counted
    def Cancel(self, request, context):
        require(context, self.credentials, CLIENT)
        return self._call(context, CLIENT,
                          lambda: pb2.CancelResponse(previous_state=self.state.cancel(request.job_id)))

    @counted
    def PutCheckpoint(self, request_iterator, context):
        caller, job_id = self._lease_holder(context)
        with self._transfer(context, job_id) as transfer:
            first = next(request_iterator, None)
            if first is None:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "checkpoint: empty stream")

            def chunks():
                yield first.data
                for chunk in request_iterator:
                    transfer.moved()
                    if chunk.job_id != first.job_id or chunk.lease_id != first.lease_id:
                        raise CheckpointError("checkpoint: every chunk must name the same job and lease")
                    yield chunk.data
            return _answer(context, lambda: self.state.checkpoint_put(caller.lease_token, first.job_id,
                                                                      first.lease_id, first.steps, chunks(),
                                                                      first.batch_size)
                           or pb2.Ack())

    def GetCheckpoint(self, request, context):
        caller, job_id = self._lease_holder(context)
        with self._transfer(context, job_id) as transfer:
            chunks = _answer(context, lambda: self.state.checkpoint_get(caller.lease_token, request.job_id,
                                                                        request.lease_id))
            for data in chunks:
                yield pb2.CheckpointChunk(job_id=request.job_id, lease_id=request.lease_id, data=data)
                transfer.moved()

    @counted
    def Rendezvous(self, request, context):
        caller, job_id = self._lease_holder(context)
        return self._call(context, JOB, lambda: pb2.RendezvousResponse(
            address=self.state.rendezvous(request, caller.lease_token)), job_id)


def check_tls_pair(key_path: str, cert_path: str) -> tuple[bytes, bytes]:
    """The PEM key and certificate, read and checked to belong together (a clear error, not "cannot bind")."""
    try:
        key, cert = Path(key_path).read_bytes(), Path(cert_path).read_bytes()
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert_path, key_path)
    except ssl.SSLError as exc:               # (an OSError too: first)
        raise HetschedError(f"TLS: the key {key_path} does not match the certificate {cert_path}, or one is not "
                            f"PEM ({exc.reason or exc})") from None
    except OSError as exc:
        raise HetschedError(f"TLS: cannot read {exc.filename or key_path}: {exc.strerror or exc}") from None
    return key, cert


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def lock_state_dir(state_dir: Path):
    """Hold an exclusive OS lock on STATE_DIR/scheduler.lock for the life of the process (released on exit,
    even on kill -9). Raises StateDirLocked when another scheduler holds it."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(state_dir / "scheduler.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StateDirLocked(f"another scheduler (pid {holder}) is serving {state_dir}; stop it first, or use "
                             f"another --state-dir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


class SchedulerServer:
    """gRPC server + round loop. `start()` returns the bound port; `stop()` ends both.

    `tls=(key.pem, cert.pem)` serves TLS. Binding a non-loopback host without TLS needs `insecure=True`: tokens
    and commands would cross the network in clear.
    """

    def __init__(self, state_dir: str, credentials: Credentials, policy: str = "max_min_fairness_perf",
                 round_s: float = 360.0, host: str = "127.0.0.1", port: int = 0,
                 throughputs: str = "gavel_simulation", seed: int = 0, worker_timeout_s: float = 5.0,
                 max_attempts: int = 3, slowdowns: dict[str, float] | None = None,
                 tls: tuple[str, str] | None = None, insecure: bool = False,
                 entity_weights: dict[str, float] | None = None, shockwave_config: str | None = None,
                 time_scale: float = 1.0):
        if not tls and not is_loopback(host):
            if not insecure:
                raise HetschedError(f"binding {host} without TLS sends tokens, commands and checkpoints in clear: "
                                    f"give --tls-key/--tls-cert, or --insecure on a trusted network")
            log.warning("serving %s without TLS (--insecure): credentials cross the network in clear", host)
        if not round_s > 0:
            raise HetschedError(f"round length must be > 0 s, got {round_s}")
        if not 0 <= port <= 65535:             # gRPC bound 99999 as 34463 (mod 2^16) without a word
            raise HetschedError(f"port must be 0 (any free port) .. 65535, got {port}")
        if not (worker_timeout_s > 0 and max_attempts >= 1):
            raise HetschedError(f"worker timeout must be > 0 s and max attempts >= 1, got {worker_timeout_s} and "
                                f"{max_attempts}")
        self.state_dir = Path(state_dir)
        self._lock_fd = lock_state_dir(self.state_dir)
        try:
            self.store = Store(self.state_dir / "scheduler.sqlite")
            self.state = RuntimeState(self.store, policy, round_s, load_throughputs(throughputs), seed,
                                      worker_timeout_s, max_attempts, slowdowns,
                                      CheckpointStore(self.state_dir / "checkpoints"), entity_weights,
                                      shockwave_config, time_scale)
        except BaseException:
            os.close(self._lock_fd)         # a bad policy or table must not keep the directory locked
            raise
        self.host, self.port, self.credentials, self.tls = host, port, credentials, tls
        self._stop = threading.Event()
        self._grpc = None
        self._servicer: Servicer | None = None
        self._loop = None
        self.health = Health(("", "hetsched.runtime.Scheduler"))
        limit("grpc._common", "grpc._server", __name__)     # what a client can make us log, bounded

    def start(self) -> int:
        # so_reuseport off: a second server on the same port must fail, not share it.
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=HANDLER_THREADS),
                                 options=[("grpc.so_reuseport", 0),
                                          ("grpc.max_receive_message_length", 16 << 20),
                                          ("grpc.max_connection_age_ms", CONNECTION_AGE_S * 1000),
                                          ("grpc.max_connection_age_grace_ms", CONNECTION_GRACE_S * 1000)])
        self._servicer = Servicer(self.state, self.credentials)
        pb2_grpc.add_SchedulerServicer_to_server(self._servicer, self._grpc)
        self._grpc.add_generic_rpc_handlers((self.health.handler(),))     # unauthenticated, as usual
        address = f"{self.host}:{self.port}"
        try:
            if self.tls:
                key, cert = check_tls_pair(*self.tls)
                self.port = self._grpc.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
            else:
                self.port = self._grpc.add_insecure_port(address)
        except RuntimeError as exc:
            raise HetschedError(f"cannot bind {address}: {exc}") from None
        if not self.port:
            raise HetschedError(f"cannot bind {address} (in use?)")
        self._grpc.start()
        self._loop = threading.Thread(target=self._rounds, name="rounds", daemon=True)
        self._loop.start()
        for service in ("", "hetsched.runtime.Scheduler"):
            self.health.set(service, SERVING)
        log.info("listening on %s:%d (%s), state %s, policy %s, round %.0f s", self.host, self.port,
                 "TLS" if self.tls else "plaintext", self.state_dir, self.state.policy_name, self.state.round_s)
        return self.port

    def _rounds(self) -> None:
        round_s = self.state.round_s
        lead = min(0.5, round_s / 4)             # plan the next round a little before this one ends
        boundary = self._round(time.time() - self.state.epoch + round_s)
        while not self._stop.wait(max(0.0, boundary + self.state.epoch - lead - time.time())):
            boundary = self._round(boundary + round_s)

    def _round(self, boundary: float) -> float:
        """Plans the round that ends at `boundary` (scheduler time); returns the boundary it ends at, later when
        the plan outlasted the round."""
        try:
            planned = self.state.round(boundary)
        except Exception:
            log.exception("round failed; the next round retries")
            return boundary
        if planned != boundary:
            log.warning("a round took %.2f s to plan, past its boundary: its leases run %d round(s) of %g s longer "
                        "(a longer --round fits the plan)", self.state.overheads[-1],
                        round((planned - boundary) / self.state.round_s), self.state.round_s)
        return planned

    def stop(self) -> None:
        self.health.shut_down()
        self._stop.set()
        if self._grpc is not None:
            self._grpc.stop(grace=1).wait(5)
        if self._loop is not None:
            self._loop.join(timeout=5)
        if self._servicer is not None:
            self._servicer.idle.stop()
        self.store.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
