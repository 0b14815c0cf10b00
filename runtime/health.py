"""The standard health service (`grpc.health.v1`), open to callers without a credential, and so built so that
none of them can hold the scheduler up.

gRPC's reference servicer holds its lock while it sends a watcher's first answer; the send waits on gRPC's event
loop, and that loop, closing another cancelled watcher, waits for the same lock. About 900 `Watch` calls cancelled
after their first answer froze a scheduler that way (heartbeats, status and SIGTERM included). Here:
- **No lock is held across a call into gRPC.** The lock guards two small dicts; sends happen after it is released.
- **Bounded state.** At most `MAX_WATCHERS` open watches (one more is answered RESOURCE_EXHAUSTED), service names
  of at most `MAX_SERVICE_NAME` characters (INVALID_ARGUMENT), and nothing kept for a name once its watch ends:
  only the scheduler's own services have a status.
- **Its own threads.** Health calls run on a small pool of their own, so a flood of them queues there, never in
  front of a worker's heartbeat in the scheduler's handler pool. A watch holds no thread while it waits.
"""

from __future__ import annotations

import itertools
import threading
from concurrent import futures

import grpc
from grpc_health.v1 import health_pb2

SERVICE = "grpc.health.v1.Health"
MAX_WATCHERS = 64
MAX_SERVICE_NAME = 256
THREADS = 2
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class _Watch:
    """One open watch. Its own lock orders its sends, each the service's status at the time (never an older one
    after a newer); the health lock is only taken inside it, briefly, so the two cannot wait on each other."""

    def __init__(self, health: "Health", service: str, send):
        self.health, self.service, self._send = health, service, send
        self._lock = threading.Lock()
        self._sent = None

    def tell(self, end: bool = False) -> None:
        with self._lock:
            status = self.health.status_of(self.service)
            if status != self._sent:
                self._sent = status
                self._send(health_pb2.HealthCheckResponse(status=status))
            if end:
                self._send(None)


class Health:
    """`services`: the names that have a status ("" is the server as a whole); they start NOT_SERVING."""

    def __init__(self, services: tuple[str, ...]):
        self._lock = threading.Lock()
        self._status = {name: NOT_SERVING for name in services}
        self._watchers: dict[int, _Watch] = {}              # open watches only
        self._keys = itertools.count()
        self._closing = False
        self._pool = futures.ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="health")

    # ---- the server's side --------------------------------------------------------------------------
    def set(self, service: str, status) -> None:
        """Set a known service's status and tell its watchers (outside the lock)."""
        with self._lock:
            if self._closing:
                return
            self._status[service] = status
            watchers = [w for w in self._watchers.values() if w.service == service]
        for watcher in watchers:
            watcher.tell()

    def shut_down(self) -> None:
        """Every service NOT_SERVING for good; open watches get that answer and end."""
        with self._lock:
            self._closing = True
            for name in self._status:
                self._status[name] = NOT_SERVING
            watchers, self._watchers = list(self._watchers.values()), {}
        for watcher in watchers:
            watcher.tell(end=True)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def status_of(self, service: str):
        with self._lock:
            return self._status.get(service, UNKNOWN)

    @property
    def watching(self) -> int:
        with self._lock:
            return len(self._watchers)

    # ---- the calls ----------------------------------------------------------------------------------
    def check(self, request, context):
        if len(request.service) > MAX_SERVICE_NAME:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"service name longer than {MAX_SERVICE_NAME}")
        with self._lock:
            status = self._status.get(request.service)
        if status is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return health_pb2.HealthCheckResponse(status=status)

    def watch(self, request, context, send_response_callback=None):
        """Non-blocking: the first answer now, later ones from `set`; the watch is forgotten when it ends."""
        send = send_response_callback
        if len(request.service) > MAX_SERVICE_NAME:
            return _end(context, send, grpc.StatusCode.INVALID_ARGUMENT,
                        f"service name longer than {MAX_SERVICE_NAME}")
        watcher = _Watch(self, request.service, send)
        with self._lock:
            full = len(self._watchers) >= MAX_WATCHERS
            key = None if full else next(self._keys)
            if not full:
                self._watchers[key] = watcher
        if full:
            return _end(context, send, grpc.StatusCode.RESOURCE_EXHAUSTED, f"{MAX_WATCHERS} watches are open")
        if not context.add_callback(lambda: self._forget(key)):     # it ended already
            self._forget(key)
            return None
        watcher.tell()
        return None

    def _forget(self, key: int) -> None:
        with self._lock:
            self._watchers.pop(key, None)

    def handler(self) -> grpc.GenericRpcHandler:
        """The service's handlers, on the health pool, `Watch` non-blocking."""
        def check(request, context):
            return self.check(request, context)

        def watch(request, context, send_response_callback=None):
            return self.watch(request, context, send_response_callback)
        check.experimental_thread_pool = watch.experimental_thread_pool = self._pool
        watch.experimental_non_blocking = True
        request, response = health_pb2.HealthCheckRequest.FromString, health_pb2.HealthCheckResponse.SerializeToString
        return grpc.method_handlers_generic_handler(SERVICE, {
            "Check": grpc.unary_unary_rpc_method_handler(check, request, response),
            "Watch": grpc.unary_stream_rpc_method_handler(watch, request, response)})


def _end(context, send, code: grpc.StatusCode, details: str) -> None:
    context.set_code(code)
    context.set_details(details)
    send(None)
