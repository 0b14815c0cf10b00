"""The gRPC runtime on loopback: auth, real training under leases, and the fault tests. Every test is bounded
and stops the processes it starts."""

from __future__ import annotations

import os
import subprocess
import sqlite3
import sys
import threading
import time

import grpc
import pytest

from machine import scaled

from hetsched import Job
from hetsched.runtime import launch_local_cluster
from hetsched.runtime.auth import Credentials, channel
from hetsched.runtime.launch import wait_for_port
from hetsched.runtime.server import SchedulerServer
from hetsched.runtime.stubs import pb2, pb2_grpc
from hetsched.runtime.worker import Worker

RESNET = "ResNet-18 (batch size 32)"


def test_unauthenticated_calls_are_rejected(tmp_path):
    server = SchedulerServer(str(tmp_path), Credentials("right-token", "worker-token"), round_s=1.0)
    port = server.start()
    try:
        for token in ("wrong-token", ""):
            stub = pb2_grpc.SchedulerStub(channel(f"127.0.0.1:{port}", token))
            with pytest.raises(grpc.RpcError) as info:
                stub.GetStatus(pb2.StatusRequest(), timeout=5)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        bare = pb2_grpc.SchedulerStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        with pytest.raises(grpc.RpcError) as info:
            bare.RegisterWorker(pb2.RegisterWorkerRequest(gpu_type="v100", num_gpus=1), timeout=5)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        ok = pb2_grpc.SchedulerStub(channel(f"127.0.0.1:{port}", "right-token"))
        assert ok.GetStatus(pb2.StatusRequest(), timeout=5).workers == 0
    finally:
        server.stop()


def test_real_training_under_leases(tmp_path):
    # A lease must outlast starting a PyTorch process (about 1.5-3 s on a busy 2-core machine): with 2-s rounds
    # a loaded machine makes no step in most leases and the test times out. Rounds and waits scale with the
    # machine's measured slowness (beside two busy processes, 5-s rounds failed every time).
    with launch_local_cluster("1:0:1", tmp_path, round_s=scaled(5.0)) as cluster:
        types = [RESNET, "LM (batch size 20)", "Recommendation (batch size 512)"]
        cluster.submit([Job(i, 0.0, t, 1, 100) for i, t in enumerate(types)])
        final = cluster.wait(scaled(240))
    assert (final["state"] == "completed").all(), final
    assert (final["steps_done"] == final["total_steps"]).all()
    assert len(list((tmp_path / "checkpoints").glob("job=*.tar"))) == 0          # dropped once completed
    # Each job trained and wrote its own checkpoint; a job that moved between the two workers has one on each.
    written = {p.parent.parent.name for p in (tmp_path / "work").glob("*/jobs/job=*/checkpoint/model.pt")}
    assert written == {"job=0", "job=1", "job=2"}


def test_shockwave_planner_drives_emulated_workers(tmp_path):
    """The same planner core on the wall clock: it plans rounds for the runtime's jobs until all complete."""
    with launch_local_cluster("2:0:0", tmp_path, policy="shockwave", round_s=1.0, emulate=True) as cluster:
        cluster.submit([Job(i, 0.0, t, 1, 40) for i, t in enumerate([RESNET, "LM (batch size 20)", "A3C"])])
        final = cluster.wait(scaled(120))
    assert (final["state"] == "completed").all(), final


def test_scheduler_restart_recovers_from_sqlite(tmp_path):
    with launch_local_cluster("2:1:1", tmp_path, round_s=1.0, emulate=True) as cluster:
        cluster.submit([Job(i, 0.0, RESNET, 1, 800 + 150 * i) for i in range(6)])
        deadline = time.monotonic() + scaled(60)
        while cluster.status()["steps_done"].sum() < 1000:
            assert time.monotonic() < deadline
            time.sleep(0.3)
        # Durable progress is what the store holds (status also shows live steps, which a restart may lose).
        with sqlite3.connect(f"file:{cluster.state_dir / 'scheduler.sqlite'}?mode=ro", uri=True) as db:
            durable = dict(db.execute("SELECT job_id, steps_done FROM jobs").fetchall())
        assert sum(durable.values()) > 0
        cluster.restart_scheduler()
        after = cluster.status().set_index("job_id")["steps_done"]
        assert len(after) == 6                                        # nothing lost
        assert all(after[j] >= durable[j] for j in durable), (durable, after.to_dict())
        # Calls while the scheduler is down ride out its restart (they were UNAVAILABLE at once).
        for call in (cluster.info, lambda: cluster.submit(Job(6, 0.0, RESNET, 1, 200)) == [6]):
            cluster.kill_scheduler()
            restart = threading.Timer(1.0, cluster.start_scheduler)
            restart.start()
            try:
                assert call()
            finally:
                restart.join(60)
        # An attempt that was stored but whose answer was lost: the retry's ALREADY_EXISTS means it landed.
        real, lost = cluster.stub, []

        class LostAnswer:
            def __getattr__(self, name):
                return getattr(real, name)

            def SubmitJob(self, request, timeout):
                answer = real.SubmitJob(request, timeout=timeout)
                if not lost:
                    lost.append(request.job_id)
                    raise _Lost()
                return answer
        cluster.stub = LostAnswer()
        try:
            assert cluster.submit(Job(7, 0.0, RESNET, 1, 200)) == [7] and lost == [7]
            with pytest.raises(grpc.RpcError) as info:                # a true duplicate is still refused
                cluster.submit(Job(7, 0.0, RESNET, 1, 200))
            assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS
        finally:
            cluster.stub = real
        final = cluster.wait(scaled(120))
    assert (final["state"] == "completed").all() and len(final) == 8, final


class _Lost(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.DEADLINE_EXCEEDED

    def details(self):
        return "the answer was lost"


def test_crashing_job_is_retried_then_failed(tmp_path):
    with launch_local_cluster("1:0:0", tmp_path, round_s=1.0, max_attempts=3) as cluster:
        stub = cluster.stub
        stub.SubmitJob(pb2.SubmitJobRequest(job_id=0, job_type="A3C", scale_factor=1, total_steps=50,
                                            priority_weight=1, command="python3 -m workloads.train --model A3C --fail"))
        cluster.submit([Job(1, 0.0, "A3C", 1, 60)])
        final = cluster.wait(scaled(180)).set_index("job_id")
    assert final.loc[0, "state"] == "failed" and final.loc[0, "attempts"] == 3
    assert "failing on purpose" in final.loc[0, "log_tail"]
    assert final.loc[1, "state"] == "completed"


@pytest.mark.slow
def test_load_200_emulated_workers_2000_jobs(tmp_path):
    env = {**os.environ, "HETSCHED_CLIENT_TOKEN": "load-client", "HETSCHED_WORKER_TOKEN": "load-worker"}
    proc = subprocess.Popen([sys.executable, "-m", "hetsched.runtime.main", "scheduler", "--state-dir", str(tmp_path),
                             "--port", "0", "--round", "1.0", "--worker-timeout", "10"], env=env,
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "scheduler.log", "wb"))
    try:
        address = wait_for_port(tmp_path, proc)
        types = ["v100", "p100", "k80"]
        workers = [Worker(address, "load-worker", types[i % 3], emulate=True, heartbeat_s=1.0, report_s=0.5,
                          name=f"w{i}") for i in range(200)]
        for w in workers:
            w.register()
        stub = pb2_grpc.SchedulerStub(channel(address, "load-client"))
        for i in range(2000):
            stub.SubmitJob(pb2.SubmitJobRequest(job_id=i, job_type=RESNET, scale_factor=1, total_steps=60,
                                                priority_weight=1, command="emulated"), timeout=10)
        deadline = time.monotonic() + scaled(300)
        next_check = 0.0
        while True:
            for w in workers:
                w.tick()
            if time.monotonic() < next_check:
                continue
            next_check = time.monotonic() + 2.0
            status = stub.GetStatus(pb2.StatusRequest(page_size=1), timeout=10)
            if status.counts.get("completed", 0) == 2000:
                break
            assert time.monotonic() < deadline, f"only {dict(status.counts)} of 2000 jobs finished"
        assert "failed" not in status.counts
        print(f"\n[load] 200 workers, 2000 jobs: {status.rounds} rounds, mean per-round scheduler overhead "
              f"{status.mean_round_overhead_s * 1000:.1f} ms")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
