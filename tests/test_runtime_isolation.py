"""The trust boundary between workers and jobs (runtime/isolation.py): an adversarial job tries what a review
found possible (read the worker's and other jobs' environments, the token files, signal the worker, leave a
`setsid` process behind) and the credentials it holds are tried on every other role's RPC."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

import grpc
import pytest

from hetsched.model.jobs import Job
from hetsched.runtime.isolation import JobUids, job_env, kill_uid, prepare_job_dir
from hetsched.runtime.launch import DEFAULT_JOB_UIDS, UIDS_PER_WORKER, launch_local_cluster
from hetsched.runtime.stubs import pb2, pb2_grpc
from hetsched.runtime.auth import channel

RESNET = "ResNet-18 (batch size 16)"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching a job's uid needs root")

ADVERSARY = r"""
sleep 2
echo "uid=$(id -u)"
echo "own=$HETSCHED_LEASE_TOKEN"
for f in /proc/[0-9]*/environ; do
  { tr '\0' '\n' < "$f"; } 2>/dev/null | grep -E '_TOKEN=' | sed "s|^|env $f |"
done
for f in {state}/client.token {state}/worker.token {state}/scheduler.sqlite; do
  head -c 200 "$f" 2>/dev/null | sed "s|^|file $f |"
done
ls {state}/checkpoints {state}/work 2>/dev/null | sed 's|^|list |'
kill -0 $PPID 2>/dev/null && echo "signal=worker reachable" || echo "signal=denied"
setsid sleep 600 < /dev/null > /dev/null 2>&1 &
echo "orphan=$!"
sleep 2
"""


def _lines(tail: str, key: str) -> list[str]:
    return [line.split(key, 1)[1].strip() for line in tail.splitlines() if line.startswith(key)]


@root_only
def test_an_adversarial_job_reaches_nothing_but_its_own_lease(tmp_path):
    script = ADVERSARY.replace("{state}", str(tmp_path))
    with launch_local_cluster("2:0:0", tmp_path, round_s=3.0, gpus_per_worker=2, max_attempts=1,
                              isolate=True) as cluster:
        worker_pid = cluster.workers[0].pid
        cluster.submit([Job(i, 0.0, RESNET, 1, 100, command=f"bash -c {shlex.quote(script)}") for i in range(2)])
        final = cluster.wait(120)
        tails = dict(zip(final["job_id"], final["log_tail"]))
        own = {j: _lines(t, "own=") for j, t in tails.items()}
        assert all(len(tokens) == 1 and tokens[0] for tokens in own.values()), tails
        # Both ran at once on one worker, each under a uid of its own from that worker's range.
        uids = {j: int(_lines(t, "uid=")[0]) for j, t in tails.items()}
        assert len(set(uids.values())) == 2
        assert all(DEFAULT_JOB_UIDS[0] <= u < DEFAULT_JOB_UIDS[0] + UIDS_PER_WORKER for u in uids.values())
        for job, tail in tails.items():
            harvested = {line.split("=", 1)[1] for line in _lines(tail, "env ")}
            assert harvested <= set(own[job]), f"job {job} read another process's token: {tail}"
            assert not _lines(tail, "file ") and not _lines(tail, "list "), tail
            assert _lines(tail, "signal=") == ["denied"]
            other = own[1 - job][0]
            assert other not in tail and cluster.client_token not in tail and cluster.worker_token not in tail
        # What a job holds (its lease token) opens no other role's call, nor another job's lease.
        for job, (token,) in own.items():
            as_bearer = pb2_grpc.SchedulerStub(channel(cluster.address, token))
            as_lease = pb2_grpc.SchedulerStub(channel(cluster.address, token, scheme="Lease"))
            calls = [lambda s: s.SubmitJob(pb2.SubmitJobRequest(job_type=RESNET, scale_factor=1, total_steps=1,
                                                                command="true"), timeout=5),
                     lambda s: s.RegisterWorker(pb2.RegisterWorkerRequest(gpu_type="v100", num_gpus=8), timeout=5),
                     lambda s: s.GetStatus(pb2.StatusRequest(page_size=1), timeout=5),
                     lambda s: s.ReportExit(pb2.ExitReport(job_id=1 - job, exit_code=0), timeout=5)]
            for call in calls:
                for stub in (as_bearer, as_lease):
                    with pytest.raises(grpc.RpcError) as err:
                        call(stub)
                    assert err.value.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
            with pytest.raises(grpc.RpcError):     # its lease is over: even its own progress is refused
                as_lease.UpdateLease(pb2.UpdateLeaseRequest(job_id=1 - job, steps_done=1), timeout=5)
        # The `setsid` processes left the jobs' process groups; the worker killed them with the jobs' uids.
        orphans = [int(_lines(t, "orphan=")[0]) for t in tails.values()]
        deadline = time.monotonic() + 10
        while any(os.path.exists(f"/proc/{p}") for p in orphans) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(os.path.exists(f"/proc/{p}") for p in orphans)
        assert os.path.exists(f"/proc/{worker_pid}")


def test_scheduler_and_worker_are_not_dumpable():
    code = ("from hetsched.runtime.isolation import make_undumpable; import ctypes;"
            "assert make_undumpable(); print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"            # PR_GET_DUMPABLE: nobody but root reads its memory or environ


def test_a_job_environment_carries_no_credential(monkeypatch):
    monkeypatch.setenv("HETSCHED_WORKER_TOKEN", "w-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "cloud")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = job_env({"HETSCHED_LEASE_TOKEN": "lease"})
    assert "w-secret" not in env.values() and "cloud" not in env.values() and "SSH_AUTH_SOCK" not in env
    assert env["HETSCHED_LEASE_TOKEN"] == "lease" and env["LC_ALL"] == "C.UTF-8"


def test_job_uid_ranges_are_checked():
    with pytest.raises(Exception, match="START-END"):
        JobUids("12-oops")
    with pytest.raises(Exception, match="1000 <= START"):
        JobUids("0-10")
    assert not JobUids("same").isolated


@root_only
def test_a_job_directory_is_fresh_and_planted_links_are_not_followed(tmp_path):
    target = tmp_path / "worker-secret"
    target.write_text("s")
    os.chmod(target, 0o600)
    home = tmp_path / "jobs" / "job=0"
    prepare_job_dir(home, 61000, None)
    (home / "checkpoint" / "model.pt").write_text("old")
    os.symlink(target, home / "checkpoint" / "link")
    prepare_job_dir(home, 61001, None)              # the next lease: a fresh directory, nothing followed
    assert list((home / "checkpoint").iterdir()) == []
    assert os.stat(home).st_uid == 61001 and os.stat(home / "checkpoint").st_uid == 61001
    assert os.stat(target).st_uid == 0 and oct(os.stat(target).st_mode & 0o777) == "0o600"


def test_log_tail_reads_only_the_end(tmp_path):
    from hetsched.runtime.worker import log_tail
    path = tmp_path / "big.log"
    with path.open("wb") as f:
        f.seek(3 << 30)                        # a 3 GiB sparse log: a read of the whole file would take seconds
        f.write(b"the end\n")
    assert log_tail(path).endswith("the end\n") and len(log_tail(path)) == 2000
    assert "not readable" in log_tail(tmp_path / "missing.log")


@root_only
def test_killing_a_jobs_uid_does_not_wait_for_its_zombies():
    """A job's orphan, once killed, stays a zombie until PID 1 reaps it (about 2 s in this container). kill_uid
    waited for it, signalling it every 10 ms for up to 5 s, with the worker's loop and heartbeats stopped: under
    load the scheduler expired the worker and failed its other job ("its worker ... stopped answering")."""
    uid = 61990
    ids = {"user": uid, "group": uid, "extra_groups": []}
    dead = subprocess.Popen(["true"], **ids)                 # not waited for: a zombie of this uid
    live = subprocess.Popen(["sleep", "60"], **ids)
    try:
        deadline = time.monotonic() + 10
        while open(f"/proc/{dead.pid}/stat").read().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert kill_uid(uid) == 1                          # the live one; it was 934: 5 s of signals to the zombie
        assert live.wait(timeout=10) == -9
    finally:
        live.kill()
        live.wait()
        dead.wait()


def _isolated_worker(tmp_path, uids: str, monkeypatch):
    """A worker with its own uid range whose exit reports are kept in a list (no scheduler needed)."""
    from hetsched.runtime.worker import Worker
    worker = Worker("127.0.0.1:1", "worker-token", "v100", num_gpus=2, work_dir=str(tmp_path / "w"), job_uids=uids)
    reports = []
    monkeypatch.setattr(worker, "_report_exit", lambda lease, code, tail: reports.append((lease.job_id, code, tail)))
    return worker, reports


def _sleep_lease(job_id: int):
    return pb2.Lease(lease_id=f"l{job_id}", job_id=job_id, command="sleep 30", local_gpus=[job_id % 2])


@root_only
def test_a_launch_without_a_free_uid_fails_that_attempt_not_the_worker(tmp_path, monkeypatch):
    from hetsched.runtime.worker import LAUNCH_FAILED
    worker, reports = _isolated_worker(tmp_path, "61950-61950", monkeypatch)
    try:
        worker._launch(_sleep_lease(0))
        worker._launch(_sleep_lease(1))             # the range's one uid is taken: it raised out of the job loop
        assert list(worker.jobs) == [(0, 0)]
        assert [(j, code) for j, code, _ in reports] == [(1, LAUNCH_FAILED)]
        assert "no free job uid in 61950-61950" in reports[0][2]
    finally:
        worker._kill((0, 0))
    assert worker.uids.taken == {}


@root_only
def test_a_process_that_outlives_sigkill_stops_neither_the_worker_nor_frees_its_uid(tmp_path, monkeypatch):
    """A process in uninterruptible sleep (a hung file system) survives SIGKILL: the worker's wait for it raised
    out of the job loop, and its uid would have gone to the next job while the process still ran under it."""
    from hetsched.runtime import isolation
    worker, reports = _isolated_worker(tmp_path, "61951-61951", monkeypatch)
    worker._launch(_sleep_lease(0))
    proc = worker.jobs[(0, 0)].proc
    outlives = [proc.pid]                                      # what /proc shows under the uid
    monkeypatch.setattr(isolation, "kill_uid", lambda uid, timeout_s=5.0: 0)
    monkeypatch.setattr(isolation, "_pids_of", lambda uid: list(outlives))
    monkeypatch.setattr(proc, "wait", lambda timeout=None: (_ for _ in ()).throw(
        subprocess.TimeoutExpired(proc.args, timeout)))
    try:
        worker._kill((0, 0))
        assert worker.uids.taken == {(isolation.STUCK, 61951): 61951}
        worker._launch(_sleep_lease(1))                        # the uid is not handed out while the process lives
        assert (1, 0) not in worker.jobs and "no free job uid" in reports[-1][2]
        outlives.clear()                                       # it has ended: the uid is free again
        worker._launch(_sleep_lease(1))
        assert list(worker.jobs) == [(1, 0)] and worker.uids.taken == {(1, 0): 61951}
    finally:
        for key in list(worker.jobs):
            worker._kill(key)
        subprocess.Popen.wait(proc, timeout=10)
