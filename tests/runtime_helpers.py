"""Shared pieces of the runtime tests: an in-process scheduler on loopback, stubs per role, a self-signed CA."""

from __future__ import annotations

import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import grpc
from machine import scaled

from hetsched.runtime.auth import Credentials, channel
from hetsched.runtime.server import SchedulerServer
from hetsched.runtime.stubs import pb2, pb2_grpc

CLIENT, WORKER = "client-token-for-tests", "worker-token-for-tests"
RESNET = "ResNet-18 (batch size 32)"


@contextmanager
def scheduler(state_dir: Path, **kwargs):
    """An in-process scheduler on 127.0.0.1; yields (server, address)."""
    server = SchedulerServer(str(state_dir), Credentials(CLIENT, WORKER), **{"round_s": 0.5, **kwargs})
    port = server.start()
    try:
        yield server, f"127.0.0.1:{port}"
    finally:
        server.stop()


def stub(address: str, token: str | None, scheme: str = "Bearer"):
    return pb2_grpc.SchedulerStub(channel(address, token, scheme=scheme))


def submit(client, job_id=-1, job_type=RESNET, scale_factor=1, total_steps=100, priority_weight=1.0,
           command="python3 -m workloads.train --model ResNet-18", **extra):
    return client.SubmitJob(pb2.SubmitJobRequest(job_id=job_id, job_type=job_type, scale_factor=scale_factor,
                                                 total_steps=total_steps, priority_weight=priority_weight,
                                                 command=command, **extra), timeout=10)


def rpc_code(fn) -> tuple[grpc.StatusCode, str]:
    try:
        fn()
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    return grpc.StatusCode.OK, ""


def drive(workers, until, timeout_s: float, what: str = "condition"):
    """Tick in-process workers until `until()` holds (bounded by `timeout_s` on an idle machine, scaled by this
    machine's measured slowness)."""
    timeout_s = scaled(timeout_s)
    deadline = time.monotonic() + timeout_s
    while not until():
        assert time.monotonic() < deadline, f"{what} not reached in {timeout_s} s"
        for w in workers:
            w.tick()
        time.sleep(0.02)


def job_states(client) -> dict[int, object]:
    return {j.job_id: j for j in client.GetStatus(pb2.StatusRequest(page_size=5000), timeout=10).jobs}


def self_signed_ca(directory: Path) -> tuple[str, str, str]:
    """A CA and a server certificate for localhost/127.0.0.1 made with the openssl CLI: (key, cert, ca)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    run = lambda *args: subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=hetsched test CA",
        "-keyout", "ca.key", "-out", "ca.pem")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
        "-out", "server.csr")
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
        "-extfile", "ext.cnf", "-out", "server.pem")
    return str(d / "server.key"), str(d / "server.pem"), str(d / "ca.pem")
