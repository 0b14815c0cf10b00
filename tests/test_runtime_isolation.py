"""The trust boundary between workers and jobs (runtime/isolation.py): an adversarial job tries what a review
found possible (read the worker's and other jobs' environments, the token files, signal the worker, leave a
`setsid` process behind) and the credentials it holds are tried on every other role's RPC."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from machine import scaled

from hetsched.model.jobs import Job
from hetsched.runtime.isolation import PASS_ENV, JobUids, Sandbox, job_env, kill_uid, prepare_job_dir
from hetsched.runtime.launch import DEFAULT_JOB_UIDS, UIDS_PER_WORKER, launch_local_cluster
from hetsched.runtime.stubs import pb2, pb2_grpc
from hetsched.runtime.auth import channel

RESNET = "ResNet-18 (batch size 16)"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching a job's uid needs root")
#: What a job's environment may hold: the variables it inherits and the lease's values (and what a shell adds).
ALLOWED_ENV = {*PASS_ENV, "HOME", "CUDA_VISIBLE_DEVICES", "HETSCHED_SCHEDULER", "HETSCHED_LEASE_TOKEN", "HETSCHED_JOB_ID",
               "HETSCHED_LEASE_ID", "HETSCHED_DEADLINE", "HETSCHED_TOTAL_STEPS", "HETSCHED_STEPS_DONE",
               "HETSCHED_CHECKPOINT_DIR", "HETSCHED_RANK", "HETSCHED_WORLD_SIZE", "HETSCHED_HOST", "HETSCHED_SLOWDOWN",
               "HETSCHED_GPUS", "HETSCHED_CPU_CORES", "HETSCHED_MEM_GB", "HETSCHED_BATCH_SIZE", "HETSCHED_TLS_CA",
               "HETSCHED_TLS_SERVER_NAME"}

ADVERSARY = r"""
sleep 2
echo "uid=$(id -u)"
echo "own=$HETSCHED_LEASE_TOKEN"
echo "secret-$HETSCHED_JOB_ID" > /tmp/left-by-$HETSCHED_JOB_ID; cp /tmp/left-by-$HETSCHED_JOB_ID /dev/shm/
for f in /proc/[0-9]*/environ; do
  { tr '\0' '\n' < "$f"; } 2>/dev/null | grep -E '_TOKEN=' | sed "s|^|env $f |"
done
for f in /proc/[0-9]*; do stat -c "procuid %u" "$f"; done 2>/dev/null | sort -u
cat /proc/$PPID/cmdline >/dev/null 2>&1 && echo "ppid=visible" || echo "ppid=hidden"
env | cut -d= -f1 | sed 's|^|var |'
grep NoNewPrivs /proc/self/status | tr -d '\t' | sed 's|^|status |'
for f in {state}/client.token {state}/worker.token {state}/scheduler.sqlite; do
  head -c 200 "$f" 2>/dev/null | sed "s|^|file $f |"
done
ls {state}/checkpoints {state}/work 2>/dev/null | sed 's|^|list |'
kill -0 $PPID 2>/dev/null && echo "signal=worker reachable" || echo "signal=denied"
setsid sleep 600 < /dev/null > /dev/null 2>&1 &
echo "orphan=$!"
sleep 2
ls -A /tmp /dev/shm | grep left-by | sed 's|^|shared |'
for d in {hidden}; do ls -A "$d" 2>/dev/null | sed "s|^|hidden $d |"; done
"""


def _lines(tail: str, key: str) -> list[str]:
    return [line.split(key, 1)[1].strip() for line in tail.splitlines() if line.startswith(key)]


def _passed_env(tail: str) -> set[str]:
    """The variables a job listed, but the locale's (passed on) and those its shell sets itself."""
    return {v for v in _lines(tail, "var ") if not v.startswith("LC_")} - {"PWD", "SHLVL", "_", "OLDPWD"}


@root_only
@pytest.mark.parametrize("isolate", [True, None], ids=["isolated", "default"])
def test_an_adversarial_job_reaches_nothing_but_its_own_lease(tmp_path, isolate):
    """Each sentence of the README's "What a job can reach" for a root worker, tried by a job (two at once on one
    worker): by default too, a root worker's jobs run isolated (they ran as root)."""
    sandbox = Sandbox() if not Sandbox.available() else None
    hidden = sandbox.hide if sandbox else []
    script = ADVERSARY.replace("{state}", str(tmp_path)).replace("{hidden}", " ".join(hidden))
    with launch_local_cluster("2:0:0", tmp_path, round_s=3.0, gpus_per_worker=2, max_attempts=1,
                              isolate=isolate) as cluster:
        worker_pid = cluster.workers[0].pid
        cluster.submit([Job(i, 0.0, RESNET, 1, 100, command=f"bash -c {shlex.quote(script)}") for i in range(2)])
        final = cluster.wait(scaled(120))
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
            assert _passed_env(tail) <= ALLOWED_ENV, tail
            other = own[1 - job][0]
            assert other not in tail and cluster.client_token not in tail and cluster.worker_token not in tail
            if sandbox is not None:         # its own processes only, private temporary directories, no setuid
                assert _lines(tail, "procuid ") == [str(uids[job])] and _lines(tail, "ppid=") == ["hidden"], tail
                assert sorted(_lines(tail, "shared ")) == [f"left-by-{job}"] * 2, tail
                assert _lines(tail, "status NoNewPrivs:") == ["1"], tail
                for d in hidden:            # of a closed directory, only the way to this Python
                    shown = set(_lines(tail, f"hidden {d} "))
                    assert shown <= {p[len(d):].strip("/").split("/")[0] for p in sandbox.expose}, tail
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
        deadline = time.monotonic() + scaled(10)
        while any(os.path.exists(f"/proc/{p}") for p in orphans) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(os.path.exists(f"/proc/{p}") for p in orphans)
        assert os.path.exists(f"/proc/{worker_pid}")
        assert not [p for p in Path("/tmp").iterdir() if p.name.startswith("left-by-")]     # nothing outside


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
        deadline = time.monotonic() + scaled(10)
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


@root_only
def test_a_root_worker_that_cannot_isolate_its_jobs_refuses_to_start(monkeypatch, caplog):
    """Issue 72, High 3: as root with Python under a 0700 /root, `--job-uids auto` fell back to uid 0 with one
    WARNING line; a job then read the worker's token from /proc/$PPID/environ. Now a root worker whose jobs cannot
    get a uid of their own (no mount namespace to reach this Python, Python closed to other uids) refuses to
    start, and only an explicit `--job-uids none` runs jobs as root, saying so."""
    from hetsched.errors import HetschedError
    from hetsched.runtime import isolation

    monkeypatch.setattr(isolation.Sandbox, "available", staticmethod(lambda: "unshare: Operation not permitted"))
    monkeypatch.setattr(isolation, "python_closed_to_jobs", lambda: Path("/root"))
    for spec in ("auto", "61000-61010"):
        with pytest.raises(HetschedError, match="--job-uids none") as err:
            JobUids(spec)
        assert "cannot run under a uid of their own" in str(err.value)
    with caplog.at_level("WARNING"):
        explicit = JobUids("none")
    assert not explicit.isolated and "jobs run as root (--job-uids none)" in caplog.text
    # Python open to other uids: jobs get uids of their own without a sandbox (and it is said).
    monkeypatch.setattr(isolation, "python_closed_to_jobs", lambda: None)
    assert JobUids("auto").isolated and JobUids("auto").sandbox is None


@root_only
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux's setpriv to drop CAP_SYS_ADMIN")
def test_the_worker_command_fails_closed_as_root_without_mount_namespaces(tmp_path):
    """The same from the command line, on a root whose bounding set lacks CAP_SYS_ADMIN (as in a default Docker
    container): one `error:` line, exit 2, when this Python is closed to other uids."""
    from hetsched.runtime.isolation import python_closed_to_jobs

    token = tmp_path / "worker.token"
    token.write_text("t")
    argv = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", sys.executable, "-m", "hetsched",
            "worker", "--scheduler", "127.0.0.1:1", "--gpu-type", "v100", "--token-file", str(token),
            "--work-dir", str(tmp_path / "w")]
    if python_closed_to_jobs() is None:
        pytest.skip("this Python is open to other uids: such a worker isolates its jobs by uid alone")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(120))
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0].startswith("error: jobs cannot run under a uid of their own") and "--job-uids none" in lines[0]


def _run_to_exit(worker, reports, lease, timeout_s: float = 60) -> str:
    worker._launch(lease)
    deadline = time.monotonic() + scaled(timeout_s)
    while not [r for r in reports if r[0] == lease.job_id]:
        assert time.monotonic() < deadline, "the job did not end"
        worker._poll()
        time.sleep(0.05)
    return next(tail for job, _, tail in reports if job == lease.job_id)


@root_only
@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "uid-only"])
def test_a_reused_uid_reads_nothing_its_last_holder_left(tmp_path, monkeypatch, sandboxed):
    """Issue 72, Medium 5: job 2 received job 1's uid and read job 1's 0600 files, its lease token included, from
    /tmp and /dev/shm. Now a job's temporary files are private to it (sandbox) or removed when its uid is released
    (uid only), and its job directory is handed back to root: with one uid in the range, job 2 gets job 1's uid
    and reads nothing of it."""
    from hetsched.runtime import isolation

    if not sandboxed:
        monkeypatch.setattr(isolation.Sandbox, "available", staticmethod(lambda: "off for this test"))
        monkeypatch.setattr(isolation, "python_closed_to_jobs", lambda: None)
    uid_range = "61952-61952" if sandboxed else "61953-61953"   # xdist may run both at once: one uid each
    worker, reports = _isolated_worker(tmp_path, uid_range, monkeypatch)
    assert (worker.uids.sandbox is not None) == sandboxed
    leave = ("echo uid=$(id -u); echo $HETSCHED_LEASE_TOKEN > /tmp/job1-token; "
             "cp /tmp/job1-token /dev/shm/job1-token; echo job1-secret > checkpoint/model.pt")
    first = pb2.Lease(lease_id="l1", job_id=1, command=f"bash -c {shlex.quote(leave)}", local_gpus=[0],
                      lease_token="job1-lease-token")
    uid = _lines(_run_to_exit(worker, reports, first), "uid=")      # (a forked child may log a gRPC line first)
    look = ("echo uid=$(id -u); cat /tmp/job1-token /dev/shm/job1-token ../job=1/checkpoint/model.pt 2>&1; "
            "ls ../ 2>/dev/null | sed 's|^|listed |'")
    second = pb2.Lease(lease_id="l2", job_id=2, command=f"bash -c {shlex.quote(look)}", local_gpus=[0])
    tail = _run_to_exit(worker, reports, second)
    assert _lines(tail, "uid=") == uid == [uid_range.split("-")[0]], tail    # the same uid, reused
    assert "job1-lease-token" not in tail and "job1-secret" not in tail and not _lines(tail, "listed "), tail
    assert not Path("/tmp/job1-token").exists() and not Path("/dev/shm/job1-token").exists()
    home = worker.job_dir(1, 0)
    assert os.stat(home).st_uid == 0 and os.stat(home / "checkpoint" / "model.pt").st_uid == 0
    assert oct(os.stat(home.parent).st_mode & 0o777) == "0o711"          # jobs/: passable, not listable


@root_only
def test_uids_are_reused_least_recently_released_first_and_never_shared_on_a_host(monkeypatch):
    """Workers of several clusters on one host (`make test` runs three at once) drew from the same range: one
    releasing a uid killed the other's job under it (exit code -9). A uid in use is now locked host-wide."""
    from hetsched.runtime import isolation

    monkeypatch.setattr(isolation.Sandbox, "available", staticmethod(lambda: "off for this test"))
    monkeypatch.setattr(isolation, "python_closed_to_jobs", lambda: None)
    first, second = JobUids("61970-61972"), JobUids("61970-61972")     # two workers on one host
    order = []
    for key in range(5):
        order.append(first.acquire((key, 0)))
        first.release((key, 0))
    assert order == [61970, 61971, 61972, 61970, 61971]
    held = first.acquire((9, 0))                        # 61972: released longest ago
    assert held == 61972 and second.acquire((1, 0)) == 61970 and second.acquire((2, 0)) == 61971
    with pytest.raises(Exception, match="no free job uid"):
        second.acquire((3, 0))
    first.release((9, 0))
    assert second.acquire((3, 0)) == 61972
    for key in (1, 2, 3):
        second.release((key, 0))


NON_ROOT_JOB = r"""
echo "uid=$(id -u)"
{ tr '\0' '\n' < /proc/$PPID/environ; } 2>/dev/null | grep -q TOKEN && echo "worker-env=read" || echo "worker-env=denied"
env | cut -d= -f1 | sed 's|^|var |'
kill -0 $PPID 2>/dev/null && echo "signal=worker reachable" || echo "signal=denied"
echo "$HETSCHED_LEASE_TOKEN" > token
sleep 2
cat ../job=OTHER/token 2>/dev/null | sed 's|^|other |'
sleep 1
"""


@root_only
def test_what_a_job_of_a_non_root_worker_can_reach(tmp_path):
    """The README's sentences for a worker that is not root, tried by two jobs of a worker run under uid 61985
    (started through the sandbox, so that it can run this Python here): the jobs run under the worker's uid, get
    the scrubbed environment, cannot read the worker's environment (it is not dumpable), but can signal the
    worker and read each other's files and lease tokens."""
    if Sandbox.available():
        pytest.skip("needs mount namespaces to run this Python under another uid here")
    from runtime_helpers import CLIENT, WORKER, scheduler, stub, submit

    uid, home = 61985, tmp_path / "worker-home"
    home.mkdir()
    os.chown(home, uid, uid)
    with scheduler(tmp_path / "state", round_s=2.0) as (server, address):
        argv = Sandbox().argv([sys.executable, "-m", "hetsched", "worker", "--scheduler", address, "--gpu-type",
                               "v100", "--num-gpus", "2", "--work-dir", str(home / "work")], uid, home)
        proc = subprocess.Popen(argv, env={"PATH": os.environ["PATH"], "HETSCHED_WORKER_TOKEN": WORKER},
                                stdout=subprocess.DEVNULL, stderr=open(tmp_path / "worker.log", "wb"),
                                start_new_session=True)
        try:
            client = stub(address, CLIENT)
            for job in (0, 1):
                script = NON_ROOT_JOB.replace("OTHER", str(1 - job))
                submit(client, job_id=job, total_steps=100, command=f"bash -c {shlex.quote(script)}")
            deadline = time.monotonic() + scaled(120)
            while {j.state for j in client.GetStatus(pb2.StatusRequest(), timeout=30).jobs} != {"failed"}:
                assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "worker.log").read_text()
                time.sleep(0.2)
            tails = {j.job_id: j.log_tail for j in client.GetStatus(pb2.StatusRequest(), timeout=30).jobs}
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert len(tails) == 2 and all(_lines(t, "uid=") == [str(uid)] for t in tails.values()), tails
    for job, tail in tails.items():
        assert _lines(tail, "worker-env=") == ["denied"], tail
        assert _passed_env(tail) <= ALLOWED_ENV, tail
        assert _lines(tail, "signal=") == ["worker reachable"], tail
    # Both ran at once; the later one read the other's lease token from its job directory.
    assert any(_lines(tail, "other ") for tail in tails.values()), tails
