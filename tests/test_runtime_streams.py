"""The runtime against stalled streams, stale leases and poisoned checkpoints (issue 24: findings 1, 3, 4, 5, 8 and
the `.part` left by a crash). In-process scheduler on 127.0.0.1; every wait is bounded."""

from __future__ import annotations

import io
import tarfile
import threading
import time

import grpc
import pytest
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
    w = Worker(address, WORKER, "v100", emulate=True, heartbeat_s=0.05, report_s=10.0)
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


def test_a_job_holds_at_most_its_share_of_stream_threads(tmp_path):
    """A valid lease that opens many idle streams gets CHECKPOINT_STREAMS of them; the next is refused at once and
    heartbeats are still answered."""
    with scheduler(tmp_path, round_s=30.0) as (server, address):
        w, (run,) = _leased(server, address)
        release = threading.Event()
        job = stub(address, run.lease.lease_token, scheme="Lease")
        lease = dict(job_id=run.lease.job_id, lease_id=run.lease.lease_id)
        held = [job.PutCheckpoint.future(_idle_stream(release, **lease), timeout=30)
                for _ in range(CHECKPOINT_STREAMS)]
        try:
            time.sleep(0.5)
            code, _ = rpc_code(lambda: job.PutCheckpoint(_idle_stream(release, **lease), timeout=5))
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
            start = time.monotonic()
            w.stub.Heartbeat(pb2.HeartbeatRequest(worker_id=w.worker_id, session=w.session), timeout=5)
            assert time.monotonic() - start < 1.0
        finally:
            release.set()
            for c in held:
                c.exception(timeout=10)


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
