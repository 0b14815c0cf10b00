"""Start `hetsched worker` on the machines of an existing Dask cluster, and stop them.

A researcher's GPU servers are often already a Dask cluster (`dask worker` on each, or dask-jobqueue on Slurm,
dask-kubernetes on Kubernetes). `DaskWorkers` asks each Dask worker's host to start one hetsched worker with
its GPU type and count (from a mapping, or the Dask worker's `GPU` resource), the worker token and, for TLS,
the CA certificate; the token and CA travel over Dask's own connection and are written as 0600 files on the
host, never into an environment or a command line. Each hetsched worker exits when the Dask worker that started
it exits (`--parent-pid`), and `stop()` (or leaving the `with` block) stops them all.

The functions that run on the Dask workers use the standard library only and are shipped by value, so a host
without the project installed answers with a clear error instead of a failed import inside Dask.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable, Mapping

from hetsched.errors import HetschedError


@dataclass(frozen=True)
class Placement:
    """What one hetsched worker runs with: the Dask worker that starts it, its GPU type and count."""

    dask_worker: str
    host: str
    gpu_type: str
    num_gpus: int


# ---- run on the Dask workers (standard library only; shipped by value) ----------------------------------------
def _probe() -> dict:
    import importlib.util
    import socket
    import sys as _sys
    return {"hetsched": importlib.util.find_spec("hetsched") is not None, "python": _sys.executable,
            "hostname": socket.gethostname()}


def _start(argv: list[str], work_dir: str, token: str, ca_pem: bytes | None) -> int:
    import os
    import subprocess
    import sys as _sys
    work_dir = os.path.expanduser(work_dir)
    os.makedirs(work_dir, mode=0o700, exist_ok=True)

    def secret(name: str, data: bytes) -> str:
        path = os.path.join(work_dir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return path

    argv = [_sys.executable, "-m", "hetsched.runtime.main", "worker", *argv, "--work-dir", work_dir,
            "--token-file", secret("worker.token", token.encode()), "--parent-pid", str(os.getpid())]
    if ca_pem is not None:
        argv += ["--tls-ca", secret("ca.pem", ca_pem)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HETSCHED_")}
    with open(os.path.join(work_dir, "worker.log"), "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    return proc.pid


def _stop(pids: list[int], timeout_s: float = 10.0) -> list[int]:
    """SIGTERM each process group, SIGKILL what is left after `timeout_s`; returns the pids that were running."""
    import os
    import signal
    import time
    alive = []
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGTERM)
            alive.append(pid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    for pid in alive:
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            time.sleep(0.05)
        else:
            try:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
    return alive


# ---- the launcher ---------------------------------------------------------------------------------------------
GpuSpec = Mapping[str, tuple[str, int]] | Callable[[str, dict], tuple[str, int]]


class DaskWorkers:
    """One hetsched worker per host of a Dask cluster (or per Dask worker with `per_host=False`).

    `gpus` gives each one its GPU type and count: a mapping from host (or Dask worker address) to
    `(gpu_type, count)`, with `"*"` as the default, or a function of (Dask worker address, its info). A count of
    None (or a missing entry with no default) reads the Dask worker's `GPU` resource (`dask worker --resources
    GPU=4`).
    """

    def __init__(self, dask_address: str, scheduler: str, worker_token: str, gpus: GpuSpec,
                 work_dir: str = "~/.hetsched/work", tls_ca: str | None = None, tls_server_name: str | None = None,
                 per_host: bool = True, emulate: bool = False, extra_args: tuple[str, ...] = (),
                 timeout_s: float = 60.0):
        from dask.distributed import Client

        self.client = Client(dask_address, timeout=timeout_s)
        self.scheduler, self.tls_server_name = scheduler, tls_server_name
        self.ca_pem = open(tls_ca, "rb").read() if tls_ca else None
        self.pids: dict[str, int] = {}
        try:
            self.placements = self._place(gpus, per_host)
            self._check_installed()
            self._start(worker_token, work_dir, emulate, extra_args)
        except BaseException:
            self.stop()
            raise

    def _place(self, gpus: GpuSpec, per_host: bool) -> list[Placement]:
        info = self.client.scheduler_info()["workers"]
        if not info:
            raise HetschedError("the Dask cluster has no workers")
        out, hosts = [], set()
        for address, w in sorted(info.items()):
            host = w["host"]
            if per_host and host in hosts:
                continue
            hosts.add(host)
            if callable(gpus):
                gpu_type, count = gpus(address, w)
            else:
                gpu_type, count = gpus.get(address) or gpus.get(host) or gpus.get("*") or (None, None)
            if count is None:
                count = int(w.get("resources", {}).get("GPU", 0))
            if not gpu_type or count < 1:
                raise HetschedError(f"Dask worker {address} (host {host}): no GPU type and count; give gpus="
                                    f"{{{host!r}: ('v100', 4)}} or start it with --resources GPU=N")
            out.append(Placement(address, host, str(gpu_type), int(count)))
        return out

    def _run(self, fn, *args, workers: list[str]):
        import cloudpickle
        module = sys.modules[__name__]
        cloudpickle.register_pickle_by_value(module)      # the hosts need not import this module
        try:
            return self.client.run(fn, *args, workers=workers)
        finally:
            cloudpickle.unregister_pickle_by_value(module)

    def _check_installed(self) -> None:
        answers = self._run(_probe, workers=[p.dask_worker for p in self.placements])
        missing = [f"{a} ({r['hostname']}, {r['python']})" for a, r in answers.items() if not r["hetsched"]]
        if missing:
            raise HetschedError(f"hetsched is not installed for the Python of Dask worker(s) {', '.join(missing)}; "
                                f"install the project there (pip install -e .) and start the Dask worker again")

    def _start(self, token: str, work_dir: str, emulate: bool, extra_args: tuple[str, ...]) -> None:
        for i, p in enumerate(self.placements):
            argv = ["--scheduler", self.scheduler, "--gpu-type", p.gpu_type, "--num-gpus", str(p.num_gpus),
                    "--name", f"{p.host}-{i}", "--advertise-host", p.host, *extra_args]
            if self.tls_server_name:
                argv += ["--tls-server-name", self.tls_server_name]
            if emulate:
                argv.append("--emulate")
            folder = f"{work_dir.rstrip('/')}/dask-{i}"
            pid = self._run(_start, argv, folder, token, self.ca_pem, workers=[p.dask_worker])
            self.pids[p.dask_worker] = pid[p.dask_worker]

    def stop(self) -> list[int]:
        """Stop every hetsched worker this launcher started (bounded); returns the pids that were still running."""
        stopped = []
        for address, pid in list(self.pids.items()):
            try:
                stopped += self._run(_stop, [pid], workers=[address]).get(address, [])
            except (OSError, KeyError, ValueError, TimeoutError) as exc:     # the Dask worker itself is gone
                print(f"warning: could not stop the worker on {address}: {exc}", file=sys.stderr)
            self.pids.pop(address)
        self.client.close()
        return stopped

    def __enter__(self) -> "DaskWorkers":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
