"""Start one job process in a sandbox of its own: run by a root worker as
`python -I -S sandbox.py SPEC -- COMMAND...`, it sets the job's view up and then becomes the job.

It runs as a fresh single-threaded process (the worker has threads: setting a process up between fork and exec
there is not safe), with the standard library only (`-I -S`: nothing of the job's or the worker's environment
is imported). In a mount namespace of its own (nothing it mounts is seen outside, and it all goes when the job's
last process ends), it
1. mounts an empty tmpfs on each `private` directory (/tmp, /var/tmp, /dev/shm): a job sees no other job's
   temporary files, and leaves none behind for the next holder of its uid;
2. mounts an empty tmpfs on each `hide` directory (one the job's uid cannot enter, e.g. a 0700 /root that holds
   the interpreter) and binds back, read-only, only the `expose` paths below it (the interpreter, its standard
   library, the project's packages): the job can run this Python and reads nothing else that was there;
3. binds the job's directory back where it was, if a tmpfs above covered it (what is bound back is first bound
   into a staging tmpfs on a private directory, since the mounts above cover the original paths);
4. mounts a /proc of its own with `hidepid=2`: the job sees its own processes only (no other command lines);
5. drops to the job's uid and gid (no supplementary groups), sets `no_new_privs` (no setuid program gives it
   root back) and execs the job in its directory.
Any step that fails ends the process with exit code 127 and one line on stderr (the job's log): the worker
reports a failed launch, and the job never runs with less isolation than was asked for.

`python -I -S sandbox.py --probe` exits 0 when this machine allows mount namespaces (the worker asks once).
"""

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_NO_NEW_PRIVS = 38
LAUNCH_FAILED = 127
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source, target: str, fstype, flags: int, data=None) -> None:
    enc = lambda s: None if s is None else s.encode()       # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _bind(source: str, target: str, read_only: bool) -> None:
    path = ""
    for part in target.strip("/").split("/"):             # each made here passable, not listable
        path += "/" + part
        if not os.path.isdir(path):
            os.mkdir(path, 0o711)
    _mount(source, target, None, MS_BIND | MS_REC)
    if read_only:                   # keep the flags the file system is mounted with: a remount may not drop them
        have = os.statvfs(target).f_flag
        kept = sum(ms for st, ms in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC))
                   if have & st)
        _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)


def _unmount(target: str) -> None:
    _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def _under(path: str, directories) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in directories)


def enter(spec: dict) -> None:
    """Set the sandbox up as `spec` says, in this process (as root)."""
    home, private, hide = spec["home"], list(spec["private"]), list(spec["hide"])
    keep = [(path, path != home) for path in [*spec["expose"], home] if _under(path, private + hide)]
    umask = os.umask(0o022)              # the directories made in a tmpfs must be open to the job's uid
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)              # nothing below propagates to the host
    # What a tmpfs will cover and must stay reachable is first bound into a staging tmpfs, then back in place.
    stage = next((d for d in private if not any(_under(p, [d]) for p, _ in keep)), None) if keep else None
    if keep and stage is None:
        raise OSError(22, "no shared temporary directory is free to stage the job's paths in")
    if stage is not None:
        _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700")
        for i, (path, _) in enumerate(keep):
            _bind(path, f"{stage}/{i}", read_only=False)
    for directory in private:
        if directory != stage:
            _mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for directory in hide:
        _mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for i, (path, read_only) in enumerate(keep):
        _bind(f"{stage}/{i}", path, read_only)
        _unmount(f"{stage}/{i}")
    if stage is not None:
        _unmount(stage)
        _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    if spec.get("proc", True):
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
    os.umask(umask)
    os.chdir(home)
    uid = int(spec["uid"])
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def probe() -> int:
    """0 when a mount namespace with a tmpfs and a hidepid /proc can be made here (in a child, so that this
    process's view is untouched)."""
    pid = os.fork()
    if pid == 0:
        try:
            _check(_libc.unshare(CLONE_NEWNS), "unshare")
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
            os._exit(0)
        except OSError as exc:
            print(f"hetsched sandbox: {exc}", file=sys.stderr)
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def main(argv: list) -> int:
    if argv[1:] == ["--probe"]:
        return probe()
    if len(argv) < 4 or argv[2] != "--":
        print("usage: sandbox.py SPEC -- COMMAND...", file=sys.stderr)
        return LAUNCH_FAILED
    command = argv[3:]
    try:
        enter(json.loads(argv[1]))
        os.execvpe(command[0], command, os.environ)
    except (OSError, ValueError, KeyError) as exc:
        print(f"hetsched sandbox: cannot start {command[0]!r}: {exc}", file=sys.stderr, flush=True)
    return LAUNCH_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv))
