"""The trust boundary between a worker and the jobs it runs.

A job is untrusted code. It must reach its lease token, its job directory and the scheduler's address, nothing else.
A worker running as root **fails closed**: it runs jobs under uids of their own, or it does not start, unless the
operator says `--job-uids none` (jobs then run as root, and can read everything root can: the worker's memory and
token, the scheduler's state directory on this machine).
- **Its own uid.** Each job process runs under a uid of its own from `--job-uids` (default 61000-61999, in
  least-recently-used order, locked host-wide so that two workers on one machine never share one): jobs cannot read the worker's or each other's memory, environment
  (`/proc/PID/environ`) or files, and cannot signal them. When the job ends, every process left under its uid is
  killed (a `setsid` grandchild included), its job directory is handed back to root, and what it left in the
  machine's shared temporary directories is removed, before the uid is given to another job.
- **A sandbox of its own** (`sandbox.py`, where the machine allows mount namespaces): private /tmp, /var/tmp and
  /dev/shm; a /proc that shows only its own processes; the interpreter reachable even where it lives under a
  directory closed to other uids (a standard install as root: Python under a 0700 /root), with nothing else of
  that directory visible; `no_new_privs`. Without mount namespaces, a job's uid must be able to run this Python
  (else the worker refuses to start), and the shared temporary directories are cleaned when its uid is released.
- **A scrubbed environment.** Only the variables in `PASS_ENV` and the lease's `HETSCHED_*` values reach a job.
- **Paths relative to its job directory.** The job's working directory is `WORK_DIR/jobs/job=N` (0700, owned by
  the job's uid; `WORK_DIR/jobs` is 0711, so jobs cannot list each other's); its checkpoint directory and the CA
  certificate are inside it and named relative to it.
- **Scheduler and worker are not dumpable** (`PR_SET_DUMPABLE` 0): a process under the same uid cannot read
  their memory or environment either, and tokens are read from 0600 files, not passed in the environment.

A worker that is not root runs jobs under its own uid: they cannot read the worker's memory, but they can read your
files and each other's lease tokens. Run only your own jobs that way.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
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


#: Shared temporary directories: private to each job in its sandbox; without one, cleaned of a job's files when
#: its uid is released.
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")
NONE_SPELLINGS = ("none", "same")        # 'same' is the older spelling of 'none'
SANDBOX = Path(__file__).with_name("sandbox.py")
#: One lock file per job uid in use on this host, held by the worker that runs a job under it.
UID_LOCKS = Path("/run/hetsched/job-uids")
#: What a job's uid must be able to do at a worker's start: import the workloads and find hetsched's sources.
PROBE_IMPORTS = "import importlib.util, workloads; assert importlib.util.find_spec('hetsched')"


def python_paths() -> list[str]:
    """What a job needs of this Python, as real paths (nested ones dropped): the interpreter's prefixes, its
    module path, `PYTHONPATH`, and the project's own packages (an editable install maps them from elsewhere)."""
    import importlib.util

    packages = [importlib.util.find_spec(name) for name in ("hetsched", "workloads")]
    found = {sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(__file__),
             *(p for p in sys.path if p), *os.environ.get("PYTHONPATH", "").split(os.pathsep),
             *(os.path.dirname(spec.origin) for spec in packages if spec is not None and spec.origin)}
    real = sorted({os.path.realpath(p) for p in found if p and os.path.isdir(p)})
    return [p for p in real if not any(p.startswith(q.rstrip("/") + "/") for q in real if q != p)]


class Sandbox:
    """How job processes are started on this machine (`sandbox.py`): the directories its tmpfs mounts cover and
    the paths of this Python bound back below them."""

    def __init__(self):
        self.expose = [p for p in python_paths() if closed_to_others(p) is not None]
        self.hide = sorted({str(closed_to_others(p)) for p in self.expose})
        self.private = [d for d in SHARED_TMP if os.path.isdir(d) and not os.path.islink(d)]

    @staticmethod
    def available() -> str:
        """'' when this machine allows the sandbox's mount namespace, else why not."""
        try:
            out = subprocess.run([sys.executable, "-I", "-S", str(SANDBOX), "--probe"], capture_output=True,
                                 text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        return "" if out.returncode == 0 else (out.stderr.strip() or f"exit code {out.returncode}")

    def check(self, uid: int) -> str:
        """'' when a job under `uid` can run this Python in the sandbox (a real start), else what it said."""
        import tempfile

        home = Path(tempfile.mkdtemp(prefix="hetsched-probe-"))
        try:
            os.chown(home, uid, uid)
            out = subprocess.run(self.argv([sys.executable, "-c", PROBE_IMPORTS], uid,
                                           home), capture_output=True, text=True, timeout=120, cwd=home,
                                 env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        finally:
            shutil.rmtree(home, ignore_errors=True)
        return "" if out.returncode == 0 else (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]

    def argv(self, command: list[str], uid: int, home: Path) -> list[str]:
        spec = {"uid": uid, "home": os.path.realpath(home), "private": self.private, "hide": self.hide,
                "expose": self.expose}
        return [sys.executable, "-I", "-S", str(SANDBOX), json.dumps(spec), "--", *command]


class JobUids:
    """Which uid each running job gets, and how its process starts. `spec`: "START-END" (needs root), "none"
    (the worker's own uid; "same" is its older spelling) or "auto": 61000-61999 when root, else the worker's uid.
    A root worker that cannot give jobs a uid of their own raises `HetschedError` (fail closed) unless `none`."""

    def __init__(self, spec: str = "auto", quiet: bool = False):
        root = os.geteuid() == 0
        self.range, self.why_same, self.sandbox = None, "", None
        self.taken: dict[tuple, int] = {}
        self._released: dict[int, int] = {}          # uid -> when it was last released (a counter)
        self._locks: dict[int, int] = {}             # uid -> the open file whose lock holds it on this host
        self._clock = 0
        if spec in NONE_SPELLINGS:
            self.why_same = f"--job-uids {spec}"
            if root and not quiet:
                log.warning("jobs run as root (--job-uids %s): a job can read the worker's memory and token, and "
                            "everything else root can on this machine", spec)
            return
        if spec == "auto" and not root:
            self.why_same = "the worker is not root"
            log.warning("jobs run under the worker's uid %d: %s", os.geteuid(), self.why_same)
            return
        if spec == "auto":
            self.range = DEFAULT_JOB_UIDS
        else:
            self.range = _parse_range(spec)
            if not root:
                raise HetschedError(f"--job-uids {spec}: switching a job to another uid needs root; run the worker "
                                    f"as root, or give --job-uids none (jobs then run under your uid)")
        self.sandbox = self._sandbox()

    def _sandbox(self) -> Sandbox | None:
        """The sandbox when the machine allows it; without it, this Python must be open to the jobs' uids."""
        why = Sandbox.available()
        closed = python_closed_to_jobs()
        if not why:
            sandbox = Sandbox()
            probe = ("probe", os.getpid())
            uid = self.acquire(probe)                  # held on this host while the probe runs under it
            try:
                failed = sandbox.check(uid)
            finally:
                self.release(probe)
            if not failed:
                return sandbox
            raise HetschedError(f"a job under uid {uid} cannot run this Python ({sys.executable}) in its "
                                f"sandbox: {failed}. Install Python where other uids can read it, or give "
                                f"--job-uids none to run jobs as root (they can then read the worker's memory and "
                                f"token)")
        if closed is not None:
            raise HetschedError(
                f"jobs cannot run under a uid of their own here: Python is under {closed} (mode "
                f"{os.stat(closed).st_mode & 0o777:04o}), which other uids cannot enter, and no mount namespace "
                f"can be made to reach it ({why}). Open it (chmod o+x {closed}), install Python elsewhere (e.g. a "
                f"venv under /opt), or give --job-uids none to run jobs as root (they can then read the worker's "
                f"memory and token)")
        log.warning("no mount namespace for jobs (%s): they run under uids of their own, with /tmp shared (cleaned "
                    "of a job's files when its uid is released) and every process's command line visible", why)
        return None

    @property
    def isolated(self) -> bool:
        return self.range is not None

    def describe(self) -> str:
        if self.range is None:
            return f"jobs run under the worker's uid {os.geteuid()} (no isolation between jobs; {self.why_same})"
        where = "in a sandbox each" if self.sandbox else "without a sandbox"
        return f"jobs run under uids {self.range[0]}-{self.range[1]}, one per running job, {where}"

    def command(self, argv: list[str], uid: int | None, home: Path) -> tuple[list[str], dict]:
        """The argv to start and Popen's uid arguments for a job process under `uid`."""
        if uid is None:
            return argv, {}
        if self.sandbox is not None:
            return self.sandbox.argv(argv, uid, home), {}
        return argv, {"user": uid, "group": uid, "extra_groups": []}

    def acquire(self, key: tuple) -> int | None:
        """A free uid, the one released longest ago first (never used ones before all). Free on this host: no
        other worker holds its lock (UID_LOCKS: workers of several clusters share a machine, and one releasing
        a uid kills every process under it) and no process runs under it (a dead worker's orphans)."""
        if self.range is None:
            return None
        for held in [k for k, uid in self.taken.items() if k[0] == STUCK and not _pids_of(uid)]:
            self._unlock(self.taken.pop(held))     # its last process has ended: the uid is free again
        used, running = set(self.taken.values()), _live_uids()
        free = sorted((uid for uid in range(self.range[0], self.range[1] + 1) if uid not in used | running),
                      key=lambda u: self._released.get(u, -1))
        for uid in free:
            if self._lock(uid):
                self.taken[key] = uid
                return uid
        raise HetschedError(f"no free job uid in {self.range[0]}-{self.range[1]}")

    def _lock(self, uid: int) -> bool:
        fd = os.open(_lock_dir() / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._locks[uid] = fd
        return True

    def _unlock(self, uid: int) -> None:
        fd = self._locks.pop(uid, None)
        if fd is not None:
            os.close(fd)                           # the lock goes with it (and with the process, if it dies)

    def release(self, key: tuple, home: Path | None = None) -> None:
        """Kill whatever still runs under the job's uid, hand its job directory back to root and remove what it
        left in the shared temporary directories, then free the uid. A process that SIGKILL cannot end yet
        (uninterruptible sleep on a hung file system) keeps its uid out of use until it has ended."""
        uid = self.taken.pop(key, None)
        if uid is None:
            return
        kill_uid(uid)
        if home is not None:
            disown(home, uid)
        remove_files_of(uid, SHARED_TMP)
        self._clock += 1
        self._released[uid] = self._clock
        if _pids_of(uid):
            log.warning("uid %d: a process outlived SIGKILL; the uid is not reused until it ends", uid)
            self.taken[(STUCK, uid)] = uid
        else:
            self._unlock(uid)


def _lock_dir() -> Path:
    """Root's directory of job-uid locks on this host (0700): a job cannot take or hold a lock itself."""
    UID_LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.stat(UID_LOCKS)
    if info.st_uid != 0 or info.st_mode & 0o077:
        raise HetschedError(f"{UID_LOCKS} must be root's, mode 0700 (it is uid {info.st_uid}, mode "
                            f"{info.st_mode & 0o777:04o}): jobs could hold its locks")
    return UID_LOCKS


def _live_uids() -> set[int]:
    """The uids of every live process on this host (one pass over /proc)."""
    uids = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                uids.add(entry.stat().st_uid)
            except (FileNotFoundError, ProcessLookupError):
                pass
    return uids


def disown(home: Path, uid: int) -> None:
    """Give everything under `home` that `uid` owns to root (links not followed), so that the uid's next holder
    cannot read it; the job's next lease starts from a fresh directory anyway."""
    try:
        if os.lstat(home).st_uid != uid:
            return
    except FileNotFoundError:
        return
    for root, dirs, files in os.walk(home, followlinks=False):
        for name in [*dirs, *files]:
            _chown_if(os.path.join(root, name), uid)
    _chown_if(str(home), uid)


def _chown_if(path: str, uid: int) -> None:
    try:
        if os.lstat(path).st_uid == uid:
            os.chown(path, 0, 0, follow_symlinks=False)
    except FileNotFoundError:
        pass


def remove_files_of(uid: int, directories=SHARED_TMP) -> int:
    """Remove the entries `uid` owns directly in the shared temporary `directories` (a directory with all below
    it); returns how many. Never follows a link."""
    removed = 0
    for directory in directories:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
                removed += 1
            except OSError:
                pass
    return removed


def _parse_range(spec: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in spec.split("-"))
    except ValueError:
        raise HetschedError(f"--job-uids: 'auto', 'none' or START-END, got {spec!r}") from None
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
    """SIGKILL every process of `uid` until none is left (bounded); returns how many processes were killed. A
    killed process may still be listed a round later, before it has exited (under load): it counts once."""
    killed, deadline = set(), time.monotonic() + timeout_s
    while (pids := _pids_of(uid)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
    return len(killed)


def prepare_job_dir(path: Path, uid: int | None, ca: str | None) -> None:
    """A fresh working directory for a lease: 0700, with `checkpoint/` (and `ca.pem`), owned by the job's uid.

    What an earlier lease left is removed first (its weights come back from the scheduler), so nothing a job
    could have planted there (a symlink into the worker's files) is ever followed by the worker."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(mode=0o711, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o711)                # jobs reach their own directory, and list no other
    path.mkdir(mode=0o700)
    made = [path / "checkpoint"]
    made[0].mkdir(mode=0o700)
    if ca:
        shutil.copyfile(ca, path / "ca.pem")
        made.append(path / "ca.pem")
    if uid is not None:
        for p in [*made, path]:
            os.chown(p, uid, uid, follow_symlinks=False)
