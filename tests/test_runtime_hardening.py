"""The runtime under bad input, bad commands and forged reports: every case names its failure mode from issue 13.
In-process scheduler and workers on 127.0.0.1; every loop is bounded."""

from __future__ import annotations

import math
import os
import shlex
import sqlite3
import stat
import subprocess
import sys
import time

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_helpers import CLIENT, WORKER, drive, job_states, rpc_code, scheduler, stub, submit

from hetsched.runtime.launch import wait_for_port
from hetsched.runtime.stubs import pb2
from hetsched.runtime.worker import Worker

INVALID, EXISTS, DENIED = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.ALREADY_EXISTS,
                           grpc.StatusCode.PERMISSION_DENIED)


@pytest.mark.parametrize("fields, field", [
    (dict(job_type=""), "job_type"),
    (dict(job_type="NoSuchModel (batch size 3)"), "job_type"),
    (dict(total_steps=-5), "total_steps"),
    (dict(total_steps=0), "total_steps"),
    (dict(priority_weight=-1.0), "priority_weight"),
    (dict(priority_weight=math.inf), "priority_weight"),
    (dict(priority_weight=math.nan), "priority_weight"),
    (dict(scale_factor=0), "scale_factor"),
    (dict(scale_factor=3), "scale_factor"),          # the cluster has 2 GPUs
    (dict(command="python3 -c 'unbalanced"), "command"),
    (dict(command="   "), "command"),
    (dict(command="x" * 5000), "command"),
    (dict(job_type="y" * 500), "job_type"),
    (dict(job_id=-7), "job_id"),
])
def test_bad_submissions_are_rejected_and_rounds_go_on(tmp_path, fields, field):
    with scheduler(tmp_path) as (server, address):
        client = stub(address, CLIENT)
        worker = Worker(address, WORKER, "v100", num_gpus=2, emulate=True, heartbeat_s=0.05, report_s=0.05)
        worker.register()
        code, details = rpc_code(lambda: submit(client, **fields))
        assert code == INVALID and details.startswith(field), (code, details)
        assert not any(ord(c) < 32 and c != "\n" for c in details)
        job = submit(client, total_steps=40, command="emulated").job_id       # the cluster still schedules
        drive([worker], lambda: job_states(client)[job].state == "completed", 30, "completion")
        assert set(job_states(client)) == {job}                                # nothing bad was stored


def test_duplicate_ids_unknown_types_and_bad_workers(tmp_path):
    with scheduler(tmp_path) as (server, address):
        client, workers = stub(address, CLIENT), stub(address, WORKER)
        assert submit(client, job_id=5).job_id == 5
        code, details = rpc_code(lambda: submit(client, job_id=5))
        assert code == EXISTS and "5" in details
        assert submit(client, job_type="MyModel (batch size 8)", allow_unknown_type=True).job_id == 6
        for gpu, n in (("a100", 1), ("v100", 0), ("v100", 65)):
            code, details = rpc_code(lambda: workers.RegisterWorker(
                pb2.RegisterWorkerRequest(gpu_type=gpu, num_gpus=n), timeout=10))
            assert code == INVALID and details.split(":")[0] in ("gpu_type", "num_gpus"), details
        assert server.state.workers == {}


def test_a_worker_checks_what_it_reports_before_it_dials(tmp_path):
    """`hetsched worker --num-gpus 0` against a scheduler that is not up yet retried for a minute before the
    scheduler could refuse it; now it stops at once, naming the field, and makes no work directory."""
    from hetsched.runtime.validate import InvalidInput

    token = tmp_path / "worker.token"
    token.write_text("t")
    out = subprocess.run([sys.executable, "-m", "hetsched", "worker", "--scheduler", "127.0.0.1:1", "--gpu-type",
                          "v100", "--token-file", str(token), "--work-dir", str(tmp_path / "work"), "--num-gpus",
                          "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip() == "error: num_gpus: 1..64, got 0"
    assert not (tmp_path / "work").exists()
    for kwargs, field in ((dict(num_gpus=65), "num_gpus"), (dict(cpu_cores=-2), "cpu_cores"),
                          (dict(mem_gb=math.nan), "mem_gb"), (dict(name="x" * 500), "name")):
        with pytest.raises(InvalidInput, match=f"^{field}"):
            Worker("127.0.0.1:1", WORKER, "v100", work_dir=str(tmp_path / "w"), emulate=True, **kwargs)
    from hetsched.errors import HetschedError
    with pytest.raises(HetschedError, match="an emulated worker runs no job process"):     # the uids were dropped
        Worker("127.0.0.1:1", WORKER, "v100", work_dir=str(tmp_path / "w"), emulate=True, job_uids="61000-61999")
    assert not (tmp_path / "w").exists()


def test_invalid_stored_row_is_failed_at_recovery_not_scheduled(tmp_path):
    with scheduler(tmp_path) as (server, address):
        submit(stub(address, CLIENT), job_id=0, total_steps=30, command="emulated")
    db = sqlite3.connect(tmp_path / "scheduler.sqlite")
    db.execute("INSERT INTO jobs (job_id, job_type, scale_factor, total_steps, priority_weight, command, state, "
               "submitted_s) VALUES (1, '', 1, -5, -1, 'x', 'queued', 0)")
    db.commit()
    db.close()
    with scheduler(tmp_path) as (server, address):
        client = stub(address, CLIENT)
        worker = Worker(address, WORKER, "v100", emulate=True, heartbeat_s=0.05, report_s=0.05)
        drive([worker], lambda: job_states(client)[0].state == "completed", 30, "completion")
        bad = job_states(client)[1]
        assert bad.state == "failed" and "invalid job: job_type" in bad.log_tail


def test_recovery_reads_stored_words_and_splits_no_command_again(tmp_path, monkeypatch):
    """Issue 72, Medium 6: with 20,001 queued jobs of 4 KB commands a restarted scheduler listened after 6 min
    20 s: recovery split every stored command with shlex again (107 of 109 s for 5,000 rows). A row now keeps
    its command's words from its submission; a row of an older server (no words) is split once, at the first
    recovery, and its words stored. `benchmarks/runtime_restart.py` times the whole restart."""
    from hetsched.runtime import validate

    command = "python3 -m workloads.train " + " ".join(f"--x{i} 'quoted value {i}'" for i in range(100))
    with scheduler(tmp_path) as (server, address):
        client = stub(address, CLIENT)
        for i in range(50):
            submit(client, job_id=i, command=command)
    db = sqlite3.connect(tmp_path / "scheduler.sqlite")
    db.execute("UPDATE jobs SET argv = '' WHERE job_id >= 40")          # as an older server stored them
    db.commit()
    splits = []
    monkeypatch.setattr(validate.shlex, "split", lambda text, *a, **k: splits.append(text) or text.split())
    with scheduler(tmp_path) as (server, address):
        assert len(server.state.active) == 50 and len(splits) == 10       # the older rows only, once
    assert db.execute("SELECT COUNT(*) FROM jobs WHERE argv = ''").fetchone()[0] == 0
    splits.clear()
    with scheduler(tmp_path) as (server, address):
        assert len(server.state.active) == 50 and splits == []
    db.execute("UPDATE jobs SET argv = '[3]' WHERE job_id = 0")          # a hand edit: failed, not scheduled
    db.commit()
    db.close()
    with scheduler(tmp_path) as (server, address):
        bad = job_states(stub(address, CLIENT))[0]
        assert bad.state == "failed" and "stored words are not strings" in bad.log_tail


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=" \t\n\r\x0b\xa0ab'\"\\#;=-", max_size=30))
def test_commands_split_as_a_posix_shell_splits_them(command):
    from hetsched.runtime.validate import InvalidInput, split_command
    try:
        expected = shlex.split(command)
    except ValueError:
        with pytest.raises(InvalidInput):
            split_command(command)
        return
    assert split_command(command) == expected


def test_launch_errors_and_early_exits_fail_the_attempt_not_the_worker(tmp_path):
    with scheduler(tmp_path, max_attempts=2) as (server, address):
        client = stub(address, CLIENT)
        worker = Worker(address, WORKER, "v100", work_dir=str(tmp_path / "w"), heartbeat_s=0.05)
        missing = submit(client, job_id=0, command="/nonexistent/hetsched-binary --x").job_id
        early = submit(client, job_id=1, command=f"{sys.executable} -c pass").job_id
        drive([worker], lambda: all(j.state == "failed" for j in job_states(client).values()), 60, "failures")
        jobs = job_states(client)
        assert jobs[missing].attempts == 2 and "launch failed: FileNotFoundError" in jobs[missing].log_tail
        assert jobs[early].attempts == 2 and "exited with code 0 after 0 of 100 steps" in jobs[early].log_tail
        # The same worker still runs jobs; an unbalanced quote reaching it (an older row) fails that attempt only.
        lease = pb2.Lease(lease_id="x", job_id=9, command="python3 -c 'unbalanced", local_gpus=[0])
        worker._launch(lease)
        assert worker.unsent == [] and (9, 0) not in worker.jobs
        ok = submit(client, job_id=2, total_steps=30, command="emulated").job_id
        worker.emulate = True
        drive([worker], lambda: job_states(client)[ok].state == "completed", 30, "completion")


def test_roles_and_forged_reports(tmp_path):
    with scheduler(tmp_path, round_s=30.0) as (server, address):
        client, anon = stub(address, CLIENT), stub(address, "not-a-token")
        wstub = stub(address, WORKER)
        assert rpc_code(lambda: anon.GetStatus(pb2.StatusRequest(), timeout=5))[0] == \
            grpc.StatusCode.UNAUTHENTICATED
        # Each role may call only its own RPCs.
        assert rpc_code(lambda: client.RegisterWorker(pb2.RegisterWorkerRequest(gpu_type="v100", num_gpus=1),
                                                      timeout=5))[0] == DENIED
        assert rpc_code(lambda: submit(wstub))[0] == DENIED
        assert rpc_code(lambda: wstub.UpdateLease(pb2.UpdateLeaseRequest(job_id=0), timeout=5))[0] == DENIED
        a = Worker(address, WORKER, "v100", emulate=True, heartbeat_s=0.05, report_s=10.0)
        b = Worker(address, WORKER, "v100", emulate=True, heartbeat_s=0.05, report_s=10.0)
        a.register()
        b.register()
        for i in range(2):
            submit(client, job_id=i, total_steps=10_000, command="emulated")
        server.state.round(server.state.now() + 30)
        drive([a, b], lambda: len(a.jobs) == 1 and len(b.jobs) == 1, 10, "leases")
        (job_a, _), run_a = next(iter(a.jobs.items()))
        (job_b, _), run_b = next(iter(b.jobs.items()))
        as_job_a = stub(address, run_a.lease.lease_token, scheme="Lease")
        # A job cannot report on another job's lease, submit jobs, or read the status.
        forged = pb2.UpdateLeaseRequest(job_id=job_b, lease_id=run_b.lease.lease_id, steps_done=9999,
                                        steps_checkpointed=9999, finished=True)
        assert rpc_code(lambda: as_job_a.UpdateLease(forged, timeout=5))[0] == DENIED
        assert rpc_code(lambda: submit(as_job_a))[0] == DENIED
        assert rpc_code(lambda: as_job_a.GetStatus(pb2.StatusRequest(), timeout=5))[0] == DENIED
        # Its own lease, but more steps than the job has: rejected, not stored.
        own = pb2.UpdateLeaseRequest(job_id=job_a, lease_id=run_a.lease.lease_id, steps_done=99_999)
        assert rpc_code(lambda: as_job_a.UpdateLease(own, timeout=5))[0] == INVALID
        # A worker cannot report exits for another worker's lease, nor with another worker's id.
        exit_b = pb2.ExitReport(worker_id=a.worker_id, session=a.session, job_id=job_b,
                                lease_id=run_b.lease.lease_id, exit_code=1)
        assert rpc_code(lambda: a.stub.ReportExit(exit_b, timeout=5))[0] == DENIED
        impersonate = pb2.ExitReport(worker_id=b.worker_id, session=a.session, job_id=job_b,
                                     lease_id=run_b.lease.lease_id, exit_code=1)
        assert rpc_code(lambda: a.stub.ReportExit(impersonate, timeout=5))[0] == DENIED
        unknown = pb2.ExitReport(worker_id=a.worker_id, session=a.session, job_id=job_b, lease_id="nope",
                                 exit_code=1)
        a.stub.ReportExit(unknown, timeout=5)          # an unknown lease (a finished job's rank): no effect
        jobs = job_states(client)
        assert {j.state for j in jobs.values()} == {"running"} and all(j.steps_done < 9999 for j in jobs.values())
        assert all(j.attempts == 0 for j in jobs.values())
        # What a job process would see: its lease token, never the worker's or a client's.
        env = a._env(run_a.lease, a.job_dir(job_a, 0))
        assert env["HETSCHED_LEASE_TOKEN"] == run_a.lease.lease_token
        assert WORKER not in env.values() and CLIENT not in env.values()
        assert not any(k.endswith("_TOKEN") and k != "HETSCHED_LEASE_TOKEN" for k in env)
        assert b.stub.Heartbeat(pb2.HeartbeatRequest(worker_id=b.worker_id, session=b.session), timeout=5).known
        assert rpc_code(lambda: b.stub.Heartbeat(pb2.HeartbeatRequest(worker_id=b.worker_id, session="guess"),
                                                 timeout=5))[0] == DENIED
    assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "scheduler.sqlite").st_mode) == 0o600


def test_one_scheduler_per_state_directory(tmp_path):
    env = {**os.environ, "HETSCHED_CLIENT_TOKEN": CLIENT, "HETSCHED_WORKER_TOKEN": WORKER}
    argv = [sys.executable, "-m", "hetsched.runtime.main", "scheduler", "--state-dir", str(tmp_path), "--port", "0"]
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(tmp_path, first)
        assert stat.S_IMODE(os.stat(tmp_path / "port").st_mode) == 0o600
        second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert f"another scheduler (pid {first.pid}) is serving" in second.stderr
        assert first.poll() is None
    finally:
        first.terminate()
        first.wait(timeout=20)
    # Tokens the scheduler made itself are owner-only files, and never printed.
    env.pop("HETSCHED_CLIENT_TOKEN")
    out = subprocess.run(argv[:-2] + ["--port", "0", "--round", "0"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "round length" in out.stderr
    token = (tmp_path / "client.token").read_text()
    assert stat.S_IMODE(os.stat(tmp_path / "client.token").st_mode) == 0o600 and token not in out.stderr


def test_non_loopback_without_tls_needs_insecure(tmp_path):
    from hetsched.errors import HetschedError
    from hetsched.runtime.auth import Credentials
    from hetsched.runtime.server import SchedulerServer
    with pytest.raises(HetschedError, match="--insecure"):
        SchedulerServer(str(tmp_path), Credentials(CLIENT, WORKER), host="0.0.0.0")
    with pytest.raises(HetschedError):
        SchedulerServer(str(tmp_path), Credentials(CLIENT, WORKER), policy="no_such_policy")
    for bad, message in ((dict(port=99999), "port must be 0"), (dict(port=-1), "port must be 0"),   # 99999: 34463
                         (dict(round_s=math.nan), "round length"), (dict(worker_timeout_s=0.0), "worker timeout"),
                         (dict(max_attempts=0), "max attempts")):
        with pytest.raises(HetschedError, match=message):
            SchedulerServer(str(tmp_path), Credentials(CLIENT, WORKER), **bad)
    SchedulerServer(str(tmp_path), Credentials(CLIENT, WORKER)).stop()      # the failed one left no lock behind


def test_a_port_out_of_range_is_refused_not_wrapped():
    """gRPC takes ports modulo 2^16: a scheduler asked for 99999 listened on 34463, and a client dialing
    host:99999 sent its token to whatever listened on 34463."""
    from hetsched.errors import HetschedError
    from hetsched.runtime.auth import channel
    for address in ("127.0.0.1:99999", "127.0.0.1:0", "[::1]:70000"):
        with pytest.raises(HetschedError, match="the port must be 1..65535"):
            channel(address, CLIENT)
    channel("127.0.0.1:65535", CLIENT).close()


def test_status_pages_and_filters(tmp_path):
    with scheduler(tmp_path, round_s=60.0) as (server, address):
        client = stub(address, CLIENT)
        for i in range(25):
            submit(client, job_id=i, command="emulated")
        server.state.store.set_state(3, "failed")
        seen, token, pages = [], 0, 0
        while token >= 0:
            resp = client.GetStatus(pb2.StatusRequest(page_size=10, page_token=token), timeout=5)
            seen += [j.job_id for j in resp.jobs]
            token, pages = resp.next_page_token, pages + 1
        assert seen == list(range(25)) and pages == 3
        assert dict(resp.counts) == {"queued": 24, "failed": 1}
        failed = client.GetStatus(pb2.StatusRequest(states=["failed"]), timeout=5)
        assert [j.job_id for j in failed.jobs] == [3]
        code, details = rpc_code(lambda: client.GetStatus(pb2.StatusRequest(states=["lost"]), timeout=5))
        assert code == INVALID and "states" in details


def test_wait_raises_rpc_errors_at_once(tmp_path):
    from hetsched.runtime.launch import LocalCluster
    with scheduler(tmp_path) as (server, address):
        handle = object.__new__(LocalCluster)             # a handle on a running scheduler, with the wrong token
        handle.stub = stub(address, "a-wrong-token")
        start = time.monotonic()
        with pytest.raises(grpc.RpcError) as info:
            LocalCluster.wait(handle, timeout_s=60, poll_s=0.1)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED and time.monotonic() - start < 10
