"""Checkpoints that travel: a job's checkpoint directory is streamed to the scheduler's state directory after
each save and streamed back before a resume, so a job moved to a worker that shares no disk resumes with its
weights, not only its step count.

On the scheduler: `CheckpointStore` keeps one archive per job (`STATE_DIR/checkpoints/job=N.tar`, 0600, replaced
atomically). In the job: `upload(stub, ...)` and `download(stub, ...)`, used by `LeaseIterator`.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Iterable, Iterator

CHUNK = 1 << 20                      # 1 MiB messages, far below gRPC's 4 MB default
MAX_CHECKPOINT = 8 << 30


class CheckpointError(ValueError):
    """A checkpoint stream or archive that cannot be accepted."""


def pack(directory: Path) -> bytes:
    """The regular files directly in `directory`, as an uncompressed tar (names only, no paths)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(directory.iterdir()):
            if path.is_file() and not path.name.endswith(".tmp"):
                tar.add(path, arcname=path.name, recursive=False)
    return buf.getvalue()


def unpack(data: bytes, directory: Path) -> list[str]:
    """Write the archive's files into `directory`; refuses anything but plain files with plain names."""
    directory.mkdir(parents=True, exist_ok=True)
    names = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for member in tar.getmembers():
            if not member.isfile() or Path(member.name).name != member.name or member.name in ("", ".", ".."):
                raise CheckpointError(f"checkpoint archive holds {member.name!r}: only plain files are allowed")
            src = tar.extractfile(member)
            tmp = directory / (member.name + ".tmp")
            tmp.write_bytes(src.read())
            os.replace(tmp, directory / member.name)
            names.append(member.name)
    return names


class CheckpointStore:
    """The scheduler's copy of every job's latest checkpoint."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _path(self, job_id: int) -> Path:
        return self.root / f"job={int(job_id)}.tar"

    def put(self, job_id: int, chunks: Iterable[bytes]) -> int:
        """Store a streamed archive atomically; returns its size. A broken stream leaves the old one."""
        path = self._path(job_id)
        tmp = path.with_suffix(".part")
        size = 0
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                for data in chunks:
                    size += len(data)
                    if size > MAX_CHECKPOINT:
                        raise CheckpointError(f"checkpoint larger than {MAX_CHECKPOINT} bytes")
                    out.write(data)
                out.flush()
                os.fsync(out.fileno())
            with tarfile.open(tmp, mode="r"):          # a torn upload is not a checkpoint
                pass
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return size

    def get(self, job_id: int) -> Iterator[bytes]:
        path = self._path(job_id)
        if not path.exists():
            return
        with path.open("rb") as src:
            while data := src.read(CHUNK):
                yield data

    def drop(self, job_id: int) -> None:
        self._path(job_id).unlink(missing_ok=True)


def upload(stub, pb2, job_id: int, lease_id: str, steps: int, directory: Path) -> None:
    """Stream `directory` to the scheduler as the job's checkpoint at `steps`."""
    data = pack(directory)

    def chunks():
        for i in range(0, max(len(data), 1), CHUNK):
            yield pb2.CheckpointChunk(job_id=job_id, lease_id=lease_id, steps=steps, data=data[i:i + CHUNK])
    stub.PutCheckpoint(chunks(), timeout=60)


def download(stub, pb2, job_id: int, lease_id: str, directory: Path) -> list[str]:
    """Fetch the job's latest checkpoint into `directory` (nothing when it has none yet)."""
    data = b"".join(c.data for c in stub.GetCheckpoint(pb2.CheckpointRequest(job_id=job_id, lease_id=lease_id),
                                                       timeout=60))
    return unpack(data, directory) if data else []
