"""The health service is open to callers without a credential: none of them may freeze the scheduler or grow its
memory (issue 72: High 1 and Medium 4). The scheduler runs as a process of its own, so that a deadlock fails the
test instead of hanging it."""

from __future__ import annotations

import os
import signal
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from machine import scaled, slowness
from runtime_helpers import CLIENT, scheduler, self_signed_ca, stub

from hetsched.runtime.auth import channel
from hetsched.runtime.health import MAX_SERVICE_NAME, MAX_WATCHERS
from hetsched.runtime.launch import launch_local_cluster
from hetsched.runtime.stubs import pb2, pb2_grpc

WATCH_CALLS, FLOODERS = 2000, 8


def _health_channel(cluster) -> grpc.Channel:
    if cluster.tls:
        creds = grpc.ssl_channel_credentials(open(cluster.tls[2], "rb").read())
        return grpc.secure_channel(cluster.address, creds, options=[("grpc.ssl_target_name_override", "localhost")])
    return grpc.insecure_channel(cluster.address)


def _flood(cluster, calls: int, answers: list) -> None:
    """`calls` Watch calls, each cancelled after its first answer, on a channel of its own (no credential)."""
    with _health_channel(cluster) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        for i in range(calls):
            watch = health.Watch(health_pb2.HealthCheckRequest(service=("", "hetsched.runtime.Scheduler", "x")[i % 3]),
                                 timeout=scaled(30))
            try:
                answers.append(next(watch).status)
            except grpc.RpcError as exc:
                answers.append(exc.code())
            watch.cancel()


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_cancelled_watches_cannot_freeze_the_scheduler(tmp_path, tls):
    """About 900 `Watch` calls, each cancelled after its first answer, deadlocked the scheduler: gRPC's reference
    servicer sent under its lock, and the event loop closing another watch waited for that lock. GetStatus,
    health checks and heartbeats timed out and SIGTERM was ignored. Here 2,000 such calls run while a worker
    heartbeats: every heartbeat is answered within 1 s (scaled by the machine's load), and SIGTERM still stops
    the scheduler."""
    certs = self_signed_ca(tmp_path / "tls") if tls else None
    with launch_local_cluster("1:0:0", tmp_path / "state", round_s=1.0, emulate=True, tls=certs) as cluster:
        workers = pb2_grpc.SchedulerStub(cluster._channel(cluster.worker_token))
        me = workers.RegisterWorker(pb2.RegisterWorkerRequest(gpu_type="v100", num_gpus=1, name="probe"), timeout=30)
        answers: list = []
        flooders = [threading.Thread(target=_flood, args=(cluster, WATCH_CALLS // FLOODERS, answers))
                    for _ in range(FLOODERS)]
        for t in flooders:
            t.start()
        beats, worst = 0, 0.0
        while any(t.is_alive() for t in flooders) or beats < 10:
            start = time.monotonic()
            assert workers.Heartbeat(pb2.HeartbeatRequest(worker_id=me.worker_id, session=me.session),
                                     timeout=scaled(10)).known
            worst, beats = max(worst, time.monotonic() - start), beats + 1
            time.sleep(0.05)
        for t in flooders:
            t.join(scaled(60))
        assert len(answers) == WATCH_CALLS
        serving, unknown = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        assert set(answers) == {serving, unknown}, set(answers)
        assert worst < slowness(), f"a heartbeat took {worst:.2f} s during the flood"
        assert cluster.info()["workers"] >= 1                          # the client's calls are answered too
        health = health_pb2_grpc.HealthStub(_health_channel(cluster))
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=scaled(10)).status == serving
        proc = cluster.scheduler
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=scaled(20))                                  # raises if SIGTERM went unheard


def test_watches_are_bounded_in_number_and_name_and_forgotten_when_they_end(tmp_path):
    """Each new service name a watch asked for was kept for good (120 watches of 8 MiB names: 285 -> 1,329 MB).
    Now a name is at most MAX_SERVICE_NAME characters, at most MAX_WATCHERS watches are open, and a watch that
    ends leaves nothing behind."""
    with scheduler(tmp_path) as (server, address):
        health = health_pb2_grpc.HealthStub(grpc.insecure_channel(address))
        open_watches = [health.Watch(health_pb2.HealthCheckRequest(service=f"name-{i}"), timeout=scaled(60))
                        for i in range(MAX_WATCHERS)]
        assert [next(w).status for w in open_watches] == [health_pb2.HealthCheckResponse.SERVICE_UNKNOWN] * MAX_WATCHERS
        assert server.health.watching == MAX_WATCHERS
        extra = health.Watch(health_pb2.HealthCheckRequest(service="one-more"), timeout=scaled(10))
        with pytest.raises(grpc.RpcError) as err:
            next(extra)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        for w in open_watches:
            w.cancel()
        deadline = time.monotonic() + scaled(10)
        while server.health.watching:
            assert time.monotonic() < deadline, f"{server.health.watching} ended watches are still kept"
            time.sleep(0.02)
        long_name = "n" * (MAX_SERVICE_NAME + 1)
        for call in (lambda: next(health.Watch(health_pb2.HealthCheckRequest(service=long_name), timeout=10)),
                     lambda: health.Check(health_pb2.HealthCheckRequest(service=long_name), timeout=10)):
            with pytest.raises(grpc.RpcError) as err:
                call()
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert set(server.health._status) == {"", "hetsched.runtime.Scheduler"}


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def test_huge_service_names_do_not_grow_the_scheduler(tmp_path):
    """120 watches with 8 MiB names (the attack of Medium 4) leave the scheduler's memory where it was."""
    with launch_local_cluster("1:0:0", tmp_path, round_s=1.0, emulate=True) as cluster:
        health = health_pb2_grpc.HealthStub(grpc.insecure_channel(
            cluster.address, options=[("grpc.max_send_message_length", 16 << 20)]))
        before = _rss_mb(cluster.scheduler.pid)
        for i in range(120):
            watch = health.Watch(health_pb2.HealthCheckRequest(service=f"{i}" + "x" * (8 << 20)), timeout=scaled(30))
            with pytest.raises(grpc.RpcError) as err:
                next(watch)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        grown = _rss_mb(cluster.scheduler.pid) - before
        # It received 960 MiB of names and kept them all before (it grew by 1,044 MB); the receive buffers of
        # 8 MiB messages and the allocator's fragmentation leave 60-105 MB on a busy machine: a bound of a quarter.
        assert grown < 240, f"the scheduler grew by {grown:.0f} MB"
        assert cluster.info()["workers"] == 1


def test_health_needs_no_credential_and_the_scheduler_still_checks_its_own(tmp_path):
    """The health service stays open, as load balancers expect; the scheduler's own calls still need a token."""
    with scheduler(tmp_path) as (server, address):
        health = health_pb2_grpc.HealthStub(grpc.insecure_channel(address))
        assert health.Check(health_pb2.HealthCheckRequest(service="hetsched.runtime.Scheduler"),
                            timeout=10).status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as err:
            health.Check(health_pb2.HealthCheckRequest(service="no-such-service"), timeout=10)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as err:
            pb2_grpc.SchedulerStub(channel(address, None)).GetStatus(pb2.StatusRequest(), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert stub(address, CLIENT).GetStatus(pb2.StatusRequest(), timeout=10) is not None
