"""The worker's host: the CPU cores and memory it offers, and the cores each job process is pinned to."""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def cpu_count(share: float) -> int:
    """Cores for a CPU share: rounded, at least one."""
    return max(1, int(round(share)))


class CoreSet:
    """The cores this worker may use, handed to job processes as CPU affinity: each process gets the `n` cores
    running the fewest other processes (ties to the lowest id), so shares that fit the host never overlap."""

    def __init__(self):
        try:
            self.ids = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self.ids = list(range(os.cpu_count() or 1))
        self.load = {c: 0 for c in self.ids}
        self.held: dict[tuple[int, int], list[int]] = {}

    def pin(self, key: tuple[int, int], pid: int, n: int) -> list[int]:
        cores = sorted(sorted(self.ids, key=lambda c: (self.load[c], c))[:n])
        try:
            os.sched_setaffinity(pid, cores)
        except (AttributeError, OSError) as exc:     # the process already exited, or no affinity on this OS
            log.warning("cannot pin process %d to cores %s: %s", pid, cores, exc)
            return []
        for c in cores:
            self.load[c] += 1
        self.held[key] = cores
        return cores

    def release(self, key: tuple[int, int]) -> None:
        for c in self.held.pop(key, []):
            self.load[c] -= 1


def detect_resources() -> tuple[int, float]:
    """(CPU cores this process may run on, memory in GB) of this machine; 0 for what cannot be read."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    mem_gb = 0.0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_gb = round(int(line.split()[1]) / 1024**2, 2)     # kB -> GiB
                    break
    except OSError:
        pass
    return cores, mem_gb
