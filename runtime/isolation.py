"""The trust boundary between a worker and the jobs it runs.

A job is untrusted code. It must reach its lease token, its job directory and the scheduler's address, nothing else:
- **Its own uid.** A worker running as root starts each job process under a uid of its own from `--job-uids`
  (default 61000-61999): jobs cannot read the worker's or each other's memory, environment (`/proc/PID/environ`)
  or files, and cannot signal them. When the job ends, every process left under its uid is killed (a `setsid`
  grandchild included) before the uid is given to another job.
- **A scrubbed environment.** Only the variables in `PASS_ENV` and the lease's `HETSCHED_*` values reach a job.
- **Paths relative to its job directory.** The job's working directory is `WORK_DIR/jobs/job=N` (0700, owned by
  the job's uid); its checkpoint directory and the CA certificate are inside it and named relative to it, so no
  directory above it needs to be open to the job's uid.
- **Scheduler and worker are not dumpable** (`PR_SET_DUMPABLE` 0): a process under the same uid cannot read
  their memory or environment either, and tokens are read from 0600 files, not passed in the environment.

Without root (`same` mode, or `auto` as a normal user) jobs run under the worker's uid: they cannot read the
worker's memory, but they can read your files and each other's lease tokens. Run only your own jobs that way.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import stat
import sys
import time
from pathlib import Path

from hetsched.errors import HetschedError

log = logging.getLogger(__name__)

DEFAULT_JOB_UIDS = (61000, 61999)
STUCK = "stuck"          # JobUids.taken's key for a uid whose last process has not ended yet
#: Variables a job inherits from the worker; everything else (tokens, cloud keys, SSH agents) stays behind.
PASS_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "PYTHONPATH", "VIRTUAL_ENV", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "TORCH_NUM_THREADS", "LD_LIBRARY_PATH")
PASS_PREFIXES = ("LC_",)
_PR_SET_DUMPABLE = 4


def make_undumpable() -> bool:
    """Forbid reading this process's memory and /proc files to anyone but root (Linux; False elsewhere)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def job_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in PASS_ENV or k.startswith(PASS_PREFIXES)}
    env.update(extra)
    return env


def closed_to_others(path: str | Path) -> Path | None:
    """The first directory on the way to `path` (or `path` itself) that other uids cannot enter; None if open."""
    p = Path(os.path.realpath(path))
    for d in [*reversed(p.parents), p]:
        if not os.stat(d).st_mode & stat.S_IXOTH:
            return d
    return None


def python_closed_to_jobs() -> Path | None:
    """Where this interpreter (binary, standard library, hetsched) is closed to a job's uid, if anywhere."""
    import hetsched
    for path in (sys.executable, sys.base_prefix, Path(hetsched.__file__).parent):
        closed = closed_to_others(path)
        if closed is not None:
            return closed
    return None


class JobUids:
    """Which uid each running job gets. `spec`: "START-END" (needs root), "same" (the worker's uid), or "auto":
    61000-61999 when the worker is root and a job's uid can run this Python, else the worker's uid (logged)."""

    def __init__(self, spec: str = "auto"):
        root = os.geteuid() == 0
        self.range, self.why_same = None, ""
        if spec == "auto":
            closed = python_closed_to_jobs() if root else None
            if root and closed is None:
                self.range = DEFAULT_JOB_UIDS
            else:
                self.why_same = ("the worker is not root" if not root else
                                 f"Python is under {closed} (mode {os.stat(closed).st_mode & 0o777:04o}), which other "
                                 f"uids cannot enter; open it (chmod o+x) or install Python elsewhere")
                log.warning("jobs run under the worker's uid %d: %s", os.geteuid(), self.why_same)
        elif spec != "same":
            lo, hi = _parse_range(spec)
            if not root:
                raise HetschedError(f"--job-uids {spec}: switching a job to another uid needs root; run the worker "
                                    f"as root, or give --job-uids same (jobs then run under your uid)")
            self.range = (lo, hi)
        self.taken: dict[tuple, int] = {}

    @property
    def isolated(self) -> bool:
        return self.range is not None

    def describe(self) -> str:
        if self.range is None:
            return f"jobs run under the worker's uid {os.geteuid()} (no isolation between jobs)"
        return f"jobs run under uids {self.range[0]}-{self.range[1]}, one per running job"

    def acquire(self, key: tuple) -> int | None:
        if self.range is None:
            return None
        for held in [k for k, uid in self.taken.items() if k[0] == STUCK and not _pids_of(uid)]:
            del self.taken[held]                   # its last process has ended: the uid is free again
        used = set(self.taken.values())
        for uid in range(self.range[0], self.range[1] + 1):
            if uid not in used:
                self.taken[key] = uid
                return uid
        raise HetschedError(f"no free job uid in {self.range[0]}-{self.range[1]}")

    def release(self, key: tuple) -> None:
        """Kill whatever still runs under the job's uid, then free the uid. A process that SIGKILL cannot end yet
        (uninterruptible sleep on a hung file system) keeps its uid out of use until it has ended."""
        uid = self.taken.pop(key, None)
        if uid is not None:
            kill_uid(uid)
            if _pids_of(uid):
                log.warning("uid %d: a process outlived SIGKILL; the uid is not reused until it ends", uid)
                self.taken[(STUCK, uid)] = uid


def _parse_range(spec: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in spec.split("-"))
    except ValueError:
        raise HetschedError(f"--job-uids: 'auto', 'same' or START-END, got {spec!r}") from None
    if not 1000 <= lo <= hi < 2**31:
        raise HetschedError(f"--job-uids: START-END with 1000 <= START <= END, got {spec!r}")
    return lo, hi


def _pids_of(uid: int) -> list[int]:
    """The live processes of `uid`. A zombie is left out: it runs nothing and a signal cannot reach it, and the
    orphan a job left behind stays one until PID 1 reaps it (about 2 s in a container), which kept the worker's
    loop waiting, and its heartbeats with it."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid and not _zombie(entry.path):
                    pids.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError):     # it ended while we looked
                pass
    return pids


def _zombie(proc_dir: str) -> bool:
    with open(f"{proc_dir}/stat", "rb") as f:              # "pid (comm) STATE ...": comm may hold spaces
        return f.read().rpartition(b")")[2].split()[0] == b"Z"


def kill_uid(uid: int, timeout_s: float = 5.0) -> int:
    """SIGKILL every process of `uid` until none is left (bounded); returns how many were killed."""
    killed, deadline = 0, time.monotonic() + timeout_s
    while (pids := _pids_of(uid)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.01)
    return killed


def prepare_job_dir(path: Path, uid: int | None, ca: str | None) -> None:
    """A fresh working directory for a lease: 0700, with `checkpoint/` (and `ca.pem`), owned by the job's uid.

    What an earlier lease left is removed first (its weights come back from the scheduler), so nothing a job
    could have planted there (a symlink into the worker's files) is ever followed by the worker."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(mode=0o700, parents=True)
    made = [path / "checkpoint"]
    made[0].mkdir(mode=0o700)
    if ca:
        shutil.copyfile(ca, path / "ca.pem")
        made.append(path / "ca.pem")
    if uid is not None:
        for p in [*made, path]:
            os.chown(p, uid, uid, follow_symlinks=False)
