"""The runtime against stalled streams, stale leases and poisoned checkpoints (issue 24: findings 1, 3, 4, 5, 8 and
the `.part` left by a crash). In-process scheduler on 127.0.0.1; every wait is bounded."""

from __future__ import annotations

import io
import tarfile
import threading
import time

import grpc
import pytest
from machine import scaled, slowness
from runtime_helpers import CLIENT, WORKER, drive, rpc_code, scheduler, stub, submit

from hetsched.runtime.checkpoints import MAX_MEMBERS, CheckpointError, CheckpointStore, check_archive
from hetsched.runtime.server import CHECKPOINT_STREAMS, HANDLER_THREADS
from hetsched.runtime.stubs import pb2
from hetsched.runtime.worker import Worker


def _idle_stream(release: threading.Event, job_id: int = 0, lease_id: str = ""):
    """A checkpoint stream that sends one chunk only when released (a slowloris sends nothing)."""
    release.wait(60)
    yield pb2.CheckpointChunk(job_id=job_id, lease_id=lease_id, data=b"")


def _tar(members) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _leased(server, address, n_jobs=1):
    """A registered emulated worker holding a lease for each of `n_jobs` jobs; returns (worker, runs)."""
    client = stub(address, CLIENT)
    w = Worker(address, WORKER, "v100", num_gpus=n_jobs, emulate=True, heartbeat_s=0.05, report_s=10.0)
    w.register()
    for i in range(n_jobs):
        submit(client, job_id=i, total_steps=10_000, command="emulated")
    server.state.round(server.state.now() + 30)
    drive([w], lambda: len(w.jobs) == n_jobs, 10, "leases")
    return w, [run for _, run in sorted(w.jobs.items())]


@pytest.mark.parametrize("streams", [HANDLER_THREADS, 100])
def test_unauthenticated_streams_cannot_stall_the_scheduler(tmp_path, streams):
    """`Lease garbage` streams that never send: refused before anything is read; heartbeats answered within 1 s."""
    with scheduler(tmp_path, round_s=30.0) as (server, address):
        w, _ = _leased(server, address)
        release = threading.Event()
        attacker = stub(address, "garbage", scheme="Lease")
        calls = [attacker.PutCheckpoint.future(_idle_stream(release), timeout=30) for _ in range(streams)]
        try:
            worst = 0.0
            for _ in range(20):
                start = time.monotonic()
                known = w.stub.Heartbeat(pb2.HeartbeatRequest(worker_id=w.worker_id, session=w.session),
                                         timeout=5).known
                worst = max(worst, time.monotonic() - start)
                assert known
            assert worst < 1.0, f"a heartbeat took {worst:.2f} s"
            codes = {c.exception(timeout=10).code() for c in calls}
            assert codes == {grpc.StatusCode.UNAUTHENTICATED}
            assert server.state.workers[w.worker_id] is not None and len(w.jobs) == 1
        finally:
            release.set()


def _hoard(job, run, release: threading.Event, n: int):
    """`n` idle checkpoint streams of one job; returns their futures (those past its share fail at once)."""
    lease = dict(job_id=run.lease.job_id, lease_id=run.lease.lease_id)
    return [job.PutCheckpoint.future(_idle_stream(release, **lease), timeout=60) for _ in range(n)]


def _wait_held(server, job_id: int, n: int) -> None:
    deadline = time.monotonic() + scaled(30)
    while server._servicer._streams.in_use(job_id) < n:
        assert time.monotonic() < deadline, f"job {job_id}'s streams were not taken"
        time.sleep(0.02)


def test_one_job_hoarding_its_streams_leaves_every_other_job_its_checkpoints(tmp_path):
    """Issue 72, High 2: with only its own lease token, a job opened 8 idle `PutCheckpoint` streams; the cap was
    global, so every other job's upload was RESOURCE_EXHAUSTED and a new job's first restore failed. Now a job
    holds at most its share (STREAMS_PER_JOB), whatever it opens, and every other job uploads and restores."""
    from hetsched.runtime.checkpoints import download, upload
    from hetsched.runtime.server import STREAMS_PER_JOB

    with scheduler(tmp_path, round_s=30.0) as (server, address):
        w, runs = _leased(server, address, n_jobs=3)
        release = threading.Event()
        hoarder = stub(address, runs[0].lease.lease_token, scheme="Lease")
        held = _hoard(hoarder, runs[0], release, CHECKPOINT_STREAMS + 4)
        try:
            _wait_held(server, runs[0].lease.job_id, STREAMS_PER_JOB)
            deadline = time.monotonic() + scaled(30)
            while sum(c.done() for c in held) < len(held) - STREAMS_PER_JOB:     # the others are answered
                assert time.monotonic() < deadline, "the streams past the job's share were not refused"
                time.sleep(0.02)
            refused = [c for c in held if c.done()]
            assert len(refused) == len(held) - STREAMS_PER_JOB
            assert {c.exception().code() for c in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
            assert "this caller already has" in refused[0].exception().details()
            for run in runs[1:]:                  # every other job checkpoints and restores
                job = stub(address, run.lease.lease_token, scheme="Lease")
                ckpt = tmp_path / f"ckpt{run.lease.job_id}"
                ckpt.mkdir()
                (ckpt / "model.pt").write_bytes(f"weights of {run.lease.job_id}".encode())
                upload(job, pb2, run.lease.job_id, run.lease.lease_id, 100, ckpt)
                back = tmp_path / f"back{run.lease.job_id}"
                assert download(job, pb2, run.lease.job_id, run.lease.lease_id, back) == ["model.pt"]
                assert (back / "model.pt").read_bytes() == (ckpt / "model.pt").read_bytes()
                assert server.state.active[run.lease.job_id].steps_done == 100
            start = time.monotonic()
            w.stub.Heartbeat(pb2.HeartbeatRequest(worker_id=w.worker_id, session=w.session), timeout=5)
            assert time.monotonic() - start < slowness()
        finally:
            release.set()
            for c in held:
                c.exception(timeout=30)


def test_idle_transfers_are_cancelled(tmp_path, monkeypatch):
    """Jobs acting together could still fill the transfer slots between them: a stream that moves nothing for
    STREAM_IDLE_S is cancelled, and its slot freed."""
    from hetsched.runtime import server as server_module

    monkeypatch.setattr(server_module, "STREAM_IDLE_S", 0.5)
    with scheduler(tmp_path, round_s=30.0) as (server, address):
        w, (run,) = _leased(server, address)
        release = threading.Event()
        held = _hoard(stub(address, run.lease.lease_token, scheme="Lease"), run, release, 2)
        try:
            codes = {c.exception(timeout=scaled(30)).code() for c in held}
            assert codes == {grpc.StatusCode.CANCELLED}
            deadline = time.monotonic() + scaled(10)          # the handlers free their slots as they return
            while server._servicer._streams.in_use():
                assert time.monotonic() < deadline, "the cancelled transfers kept their slots"
                time.sleep(0.02)
        finally:
            release.set()


def test_a_first_restore_rides_out_a_busy_scheduler(tmp_path, monkeypatch):
    """`LeaseIterator.__init__` fetched the checkpoint once, without a retry: a restore refused with
    RESOURCE_EXHAUSTED failed the attempt. Now it retries with backoff and restores the stored weights."""
    from hetsched.runtime import LeaseIterator
    from hetsched.runtime.checkpoints import upload
    from hetsched.runtime.server import STREAMS_PER_JOB

    with scheduler(tmp_path, round_s=30.0) as (server, address):
        w, (run,) = _leased(server, address)
        job = stub(address, run.lease.lease_token, scheme="Lease")
        ckpt = tmp_path / "ckpt"
        ckpt.mkdir()
        (ckpt / "model.pt").write_bytes(b"stored weights")
        upload(job, pb2, run.lease.job_id, run.lease.lease_id, 40, ckpt)
        release = threading.Event()
        held = _hoard(job, run, release, STREAMS_PER_JOB)     # its own share, taken: the restore is refused
        _wait_held(server, run.lease.job_id, STREAMS_PER_JOB)
        threading.Timer(1.0, release.set).start()
        lease = run.lease
        for key, value in {"HETSCHED_SCHEDULER": address, "HETSCHED_LEASE_TOKEN": lease.lease_token,
                           "HETSCHED_JOB_ID": str(lease.job_id), "HETSCHED_LEASE_ID": lease.lease_id,
                           "HETSCHED_DEADLINE": repr(lease.deadline_s), "HETSCHED_TOTAL_STEPS": "10000"}.items():
            monkeypatch.setenv(key, value)
        restored = tmp_path / "restored"
        it = LeaseIterator(range(5), total_steps=10_000, checkpoint_dir=str(restored), restore=lambda: 40)
        assert (restored / "model.pt").read_bytes() == b"stored weights" and it.steps == 40
        for c in held:
            c.exception(timeout=30)


def _put(job_stub, run, steps: int, data: bytes, gate: threading.Event | None = None):
    def chunks():
        yield pb2.CheckpointChunk(job_id=run.lease.job_id, lease_id=run.lease.lease_id, steps=steps, data=data[:10])
        if gate is not None:
            gate.wait(30)
        yield pb2.CheckpointChunk(job_id=run.lease.job_id, lease_id=run.lease.lease_id, steps=steps, data=data[10:])
    return job_stub.PutCheckpoint(chunks(), timeout=30)


def test_only_the_current_lease_stores_and_interleaved_uploads_do_not_mix(tmp_path):
    with scheduler(tmp_path, round_s=30.0) as (server, address):
        w, (run,) = _leased(server, address)
        state = server.state
        old = stub(address, run.lease.lease_token, scheme="Lease")
        _put(old, run, 100, _tar([_file("model.pt", b"step-100")]))
        # The scheduler gives the job a new lease (as after a preemption); the old token is still remembered.
        with state.lock:
            row = state.active[run.lease.job_id]
            state._lease(row, state.leases[row.job_id].parts, "v100", state.now() + 30, state.now(), False)
            new_lease = state.leases[row.job_id]
        assert run.lease.lease_token in state.tokens
        # Until the new lease starts, the old one, on its way out, stores its last checkpoint (a later step only).
        code, details = rpc_code(lambda: _put(old, run, 50, _tar([_file("model.pt", b"step-50")])))
        assert code == grpc.StatusCode.PERMISSION_DENIED and "already stored a checkpoint at step 100" in details
        _put(old, run, 150, _tar([_file("model.pt", b"step-150")]))
        with state.lock:
            new_lease.started_at = state.now()
        code, details = rpc_code(lambda: _put(old, run, 200, _tar([_file("model.pt", b"step-200")])))
        assert code == grpc.StatusCode.PERMISSION_DENIED and "current lease" in details

        class Run:       # the new lease, as its job sees it
            lease = pb2.Lease(job_id=row.job_id, lease_id=new_lease.lease_id, lease_token=new_lease.token)
        new = stub(address, new_lease.token, scheme="Lease")
        # Two uploads of the new lease interleave: the later step is stored, with its own bytes.
        gate = threading.Event()
        result = {}
        t = threading.Thread(target=lambda: result.update(a=rpc_code(
            lambda: _put(new, Run, 300, _tar([_file("model.pt", b"step-300")]), gate))))
        t.start()
        time.sleep(0.3)
        _put(new, Run, 500, _tar([_file("model.pt", b"step-500")]))
        gate.set()
        t.join(30)
        assert result["a"][0] == grpc.StatusCode.PERMISSION_DENIED   # older than the stored one
        stored = b"".join(state.checkpoints.get(row.job_id))
        with tarfile.open(fileobj=io.BytesIO(stored)) as tar:
            assert tar.extractfile("model.pt").read() == b"step-500"
        assert state.active[row.job_id].steps_done == 500
        assert not list((tmp_path / "checkpoints").glob("*.part"))


def _poisoned() -> dict[str, bytes]:
    link = tarfile.TarInfo("model.pt")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    hard = tarfile.TarInfo("model.pt")
    hard.type, hard.linkname = tarfile.LNKTYPE, "other"
    folder = tarfile.TarInfo("sub")
    folder.type = tarfile.DIRTYPE
    whole = _tar([_file("model.pt", b"y" * 5000)])
    sparse = bytearray(_tar([_file("model.pt", b"z")]))
    sparse[156:157] = tarfile.GNUTYPE_SPARSE           # the type flag of the first header
    sparse[148:156] = b"        "                        # recompute the header checksum
    sparse[148:156] = f"{sum(sparse[:512]):06o}\0 ".encode()
    return {"parent": _tar([_file("../escape")]), "absolute": _tar([_file("/tmp/escape")]),
            "nested": _tar([_file("dir/model.pt")]), "symlink": _tar([(link, None)]),
            "hardlink": _tar([(hard, None)]), "directory": _tar([(folder, None)]),
            "truncated": whole[:1024], "sparse": bytes(sparse), "not a tar": b"hello" * 300,
            "too many files": _tar([_file(f"f{i}") for i in range(MAX_MEMBERS + 1)])}


@pytest.mark.parametrize("kind", sorted(_poisoned()))
def test_poisoned_archives_are_refused_at_upload(tmp_path, kind):
    path = tmp_path / "upload.tar"
    path.write_bytes(_poisoned()[kind])
    with pytest.raises(CheckpointError):
        check_archive(path)
    store = CheckpointStore(tmp_path / "store")
    with pytest.raises(CheckpointError):
        store.put(7, [_poisoned()[kind]])
    assert not list((tmp_path / "store").iterdir())


def test_a_plain_archive_is_accepted_and_crash_leftovers_are_removed(tmp_path):
    good = tmp_path / "good.tar"
    good.write_bytes(_tar([_file("model.pt", b"w" * 3000), _file("optimizer.pt", b"o")]))
    assert check_archive(good) == 2
    root = tmp_path / "store"
    root.mkdir()
    (root / "job=3.abcd.part").write_bytes(b"half")
    CheckpointStore(root)
    assert not list(root.glob("*.part"))


def test_storage_failures_are_logged_and_answered_as_server_errors(tmp_path, caplog):
    """The checkpoint directory is gone (a file stands in its place, which even root cannot write into): the
    upload is answered INTERNAL without the server's path, the scheduler logs it, and nothing is recorded."""
    with scheduler(tmp_path, round_s=30.0) as (server, address):
        w, (run,) = _leased(server, address)
        root = tmp_path / "checkpoints"
        root.rmdir()
        root.write_text("not a directory")
        job = stub(address, run.lease.lease_token, scheme="Lease")
        with caplog.at_level("ERROR"):
            code, details = rpc_code(lambda: _put(job, run, 10, _tar([_file("model.pt")])))
        assert code == grpc.StatusCode.INTERNAL and str(tmp_path) not in details
        assert any("checkpoint storage failed" in r.getMessage() for r in caplog.records)
        assert server.state.active[run.lease.job_id].steps_done == 0
