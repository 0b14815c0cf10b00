"""Checkpoints that travel: a job's checkpoint directory is streamed to the scheduler's state directory after
each save and streamed back before a resume, so a job moved to a worker that shares no disk resumes with its
weights, not only its step count.

On the scheduler: `CheckpointStore` keeps one archive per job (`STATE_DIR/checkpoints/job=N.tar`, 0600). Each
upload goes to its own temporary file, is checked member by member (`check_archive`) and only then replaces the
stored one, so interleaved or broken uploads never mix. In the job: `upload(stub, ...)` and `download(stub, ...)`,
used by `LeaseIterator`.
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

CHUNK = 1 << 20                      # 1 MiB messages, far below gRPC's 4 MB default
MAX_CHECKPOINT = 8 << 30             # bytes, as uploaded and as unpacked
MAX_MEMBERS = 1000                   # files in one checkpoint


class CheckpointError(ValueError):
    """A checkpoint stream or archive that cannot be accepted (the caller's fault)."""


class CheckpointStorageError(RuntimeError):
    """The scheduler could not store or read a checkpoint (its disk, not the caller's input)."""


def check_archive(path: Path) -> int:
    """Raise `CheckpointError` unless `path` is a complete, uncompressed tar of at most MAX_MEMBERS plain regular
    files with plain names (no directories, links, devices or sparse files) and at most MAX_CHECKPOINT bytes in
    all; returns the number of files. Every member is read to the end, so a truncated tail is found here."""
    count = total = 0
    try:
        with tarfile.open(path, mode="r:") as tar:
            for member in tar:
                count += 1
                if count > MAX_MEMBERS:
                    raise CheckpointError(f"checkpoint archive holds more than {MAX_MEMBERS} files")
                name = member.name
                if not member.isreg() or member.issparse():
                    raise CheckpointError(f"checkpoint archive holds {name!r}, which is not a regular file")
                if name in ("", ".", "..") or Path(name).name != name or "\\" in name:
                    raise CheckpointError(f"checkpoint archive holds {name!r}: only plain file names are allowed")
                total += member.size
                if total > MAX_CHECKPOINT:
                    raise CheckpointError(f"checkpoint archive unpacks to more than {MAX_CHECKPOINT} bytes")
                src = tar.extractfile(member)
                left = member.size
                while left > 0:
                    data = src.read(min(CHUNK, left))
                    if not data:
                        raise CheckpointError(f"checkpoint archive is truncated in {name!r}")
                    left -= len(data)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CheckpointError(f"checkpoint is not a complete tar archive ({exc})") from None
    return count


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
        for stale in self.root.glob("*.part"):          # uploads cut short by a crash of the scheduler
            stale.unlink(missing_ok=True)

    def _path(self, job_id: int) -> Path:
        return self.root / f"job={int(job_id)}.tar"

    def receive(self, job_id: int, chunks: Iterable[bytes]) -> Path:
        """Write a streamed archive to a temporary file of its own and check it; returns the file, which
        `commit` stores or `discard` removes. A broken or invalid stream leaves nothing behind."""
        try:
            fd, name = tempfile.mkstemp(prefix=f"job={int(job_id)}.", suffix=".part", dir=self.root)
        except OSError as exc:
            raise CheckpointStorageError(f"cannot create a checkpoint file: {exc.strerror}") from None
        tmp, size = Path(name), 0
        try:
            with os.fdopen(fd, "wb") as out:
                for data in chunks:
                    size += len(data)
                    if size > MAX_CHECKPOINT:
                        raise CheckpointError(f"checkpoint larger than {MAX_CHECKPOINT} bytes")
                    out.write(data)
                out.flush()
                os.fsync(out.fileno())
            if not size:
                raise CheckpointError("checkpoint: empty archive")
            check_archive(tmp)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise CheckpointStorageError(f"cannot write a checkpoint: {exc.strerror}") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp

    def commit(self, job_id: int, tmp: Path) -> None:
        """Make a received archive the job's checkpoint (atomically)."""
        try:
            os.replace(tmp, self._path(job_id))
        except OSError as exc:
            raise CheckpointStorageError(f"cannot store a checkpoint: {exc.strerror}") from None

    @staticmethod
    def discard(tmp: Path) -> None:
        tmp.unlink(missing_ok=True)

    def put(self, job_id: int, chunks: Iterable[bytes]) -> None:
        """Receive and store in one step."""
        self.commit(job_id, self.receive(job_id, chunks))

    def get(self, job_id: int) -> Iterator[bytes]:
        path = self._path(job_id)
        if not path.exists():
            return
        with path.open("rb") as src:
            while data := src.read(CHUNK):
                yield data

    def drop(self, job_id: int) -> None:
        self._path(job_id).unlink(missing_ok=True)


def upload(stub, pb2, job_id: int, lease_id: str, steps: int, directory: Path, batch_size: int = 0) -> None:
    """Stream `directory` to the scheduler as the job's checkpoint at `steps` (counted at `batch_size`)."""
    data = pack(directory)

    def chunks():
        for i in range(0, max(len(data), 1), CHUNK):
            yield pb2.CheckpointChunk(job_id=job_id, lease_id=lease_id, steps=steps, data=data[i:i + CHUNK],
                                      batch_size=batch_size)
    stub.PutCheckpoint(chunks(), timeout=60)


def download(stub, pb2, job_id: int, lease_id: str, directory: Path) -> list[str]:
    """Fetch the job's latest checkpoint into `directory` (nothing when it has none yet)."""
    data = b"".join(c.data for c in stub.GetCheckpoint(pb2.CheckpointRequest(job_id=job_id, lease_id=lease_id),
                                                       timeout=60))
    return unpack(data, directory) if data else []
