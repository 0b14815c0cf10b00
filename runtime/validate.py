"""Checks at the runtime's boundary: nothing that could stall a round is ever stored.

Each check raises `InvalidInput` naming the field and what is allowed; the server answers INVALID_ARGUMENT.
The same checks run on stored rows at recovery, so a row written by an older server is failed, not scheduled.
"""

from __future__ import annotations

import math
import re
import shlex

from hetsched.errors import HetschedError
from hetsched.model.throughputs import JobKey, ThroughputTable

MAX_GPUS_PER_WORKER = 64
MAX_CPU_CORES = 4096
MAX_MEM_GB = 65536.0
MAX_SCALE_FACTOR = 64            # when no worker has registered yet
MAX_STEPS = 10**12
MAX_JOB_ID = 2**31 - 1         # also what auto-assigned ids may reach: every id survives a restart
MAX_STATUS_BYTES = 8 << 20    # a GetStatus page stops before this (the channel carries 16 MiB)
STATES = ("queued", "running", "completed", "failed", "cancelled")
MAX_JOB_TYPE = 200
MAX_COMMAND = 4096
MAX_NAME = 128
MAX_JOBS_PER_HEARTBEAT = 4096


_QUOTING, _BLANKS = re.compile(r"[\\'\"]"), re.compile(r"[ \t\r\n]+")     # what shlex treats specially; its blanks


class InvalidInput(HetschedError):
    """A request field outside what is allowed."""


def _string(field: str, value: str, limit: int, empty_ok: bool = False) -> str:
    if not empty_ok and not value.strip():
        raise InvalidInput(f"{field}: must not be empty")
    if len(value) > limit:
        raise InvalidInput(f"{field}: at most {limit} characters, got {len(value)}")
    if "\x00" in value:
        raise InvalidInput(f"{field}: must not contain NUL characters")
    return value


def job_fields(table: ThroughputTable, *, job_id: int, job_type: str, scale_factor: int, total_steps: int,
               priority_weight: float, command: str, allow_unknown_type: bool, max_scale_factor: int,
               argv: list[str] | None = None) -> list[str]:
    """A submitted (or stored) job; raises InvalidInput for the first bad field. Returns the command's words:
    split here (shell quoting) unless `argv`, the words a row stored when it was submitted, is given."""
    if not -1 <= job_id <= MAX_JOB_ID:
        raise InvalidInput(f"job_id: -1 (assign one) or 0..{MAX_JOB_ID}, got {job_id}")
    _string("job_type", job_type, MAX_JOB_TYPE)
    if not 1 <= scale_factor <= max_scale_factor:
        raise InvalidInput(f"scale_factor: 1..{max_scale_factor} (GPUs in the cluster), got {scale_factor}")
    if not allow_unknown_type and JobKey(job_type, scale_factor) not in table:
        raise InvalidInput(f"job_type: {table.lacks(job_type, scale_factor)} (set allow_unknown_type to run it at a "
                           f"default rate until it is measured)")
    if not 0 < total_steps <= MAX_STEPS:
        raise InvalidInput(f"total_steps: 1..{MAX_STEPS}, got {total_steps}")
    if not (math.isfinite(priority_weight) and priority_weight > 0):
        raise InvalidInput(f"priority_weight: a finite number > 0, got {priority_weight}")
    _string("command", command, MAX_COMMAND)
    if argv is None:
        argv = split_command(command)
    elif not set(map(type, argv)) <= {str}:
        raise InvalidInput("command: its stored words are not strings")
    if not argv:
        raise InvalidInput("command: must name a program")
    return argv


def split_command(command: str) -> list[str]:
    """The command's words as a POSIX shell splits them (`shlex.split`), which takes about 6 ms for 4 KB: a
    command without quotes or backslashes is split on blanks directly, which is the same."""
    if not _QUOTING.search(command):
        return [word for word in _BLANKS.split(command) if word]
    try:
        return shlex.split(command)
    except ValueError as exc:
        raise InvalidInput(f"command: not a valid shell word list ({exc})") from None


def job_limits(table: ThroughputTable, *, pinned_gpu_types: str, slo_factor: float, duration_s: float) -> None:
    """A job's pins and SLO: pinned types the table measures, an SLO only with the duration its deadline needs."""
    _string("pinned_gpu_types", pinned_gpu_types, MAX_JOB_TYPE, empty_ok=True)
    unknown = [t for t in pinned_gpu_types.split("|") if t and t not in table.gpu_types]
    if unknown:
        raise InvalidInput(f"pinned_gpu_types: {unknown} not in the throughput table {table.name!r}; "
                           f"allowed: {list(table.gpu_types)}, '|'-separated")
    for name, value in (("slo_factor", slo_factor), ("duration_s", duration_s)):
        if not (math.isfinite(value) and value >= 0):
            raise InvalidInput(f"{name}: a finite number >= 0 (0: none), got {value}")
    if slo_factor and not duration_s:
        raise InvalidInput("slo_factor: needs duration_s, since its deadline is slo_factor x duration_s after "
                           "submission")


def worker_fields(table: ThroughputTable, *, gpu_type: str, num_gpus: int, name: str, cpu_cores: int = 0,
                  mem_gb: float = 0.0) -> None:
    worker_resources(num_gpus=num_gpus, name=name, cpu_cores=cpu_cores, mem_gb=mem_gb)
    if gpu_type not in table.gpu_types:
        raise InvalidInput(f"gpu_type: {gpu_type!r} is not in the throughput table {table.name!r}; "
                           f"allowed: {list(table.gpu_types)}")


def worker_resources(*, num_gpus: int, name: str, cpu_cores: int = 0, mem_gb: float = 0.0) -> None:
    """What a worker reports that no table decides: checked by the worker before it dials (a worker started
    with --num-gpus 0 retried for a minute against an unreachable scheduler) and by the scheduler."""
    _string("name", name, MAX_NAME, empty_ok=True)
    if not 0 <= cpu_cores <= MAX_CPU_CORES:
        raise InvalidInput(f"cpu_cores: 0 (not reported) .. {MAX_CPU_CORES}, got {cpu_cores}")
    if not (math.isfinite(mem_gb) and 0 <= mem_gb <= MAX_MEM_GB):
        raise InvalidInput(f"mem_gb: 0 (not reported) .. {MAX_MEM_GB}, got {mem_gb}")
    if not 1 <= num_gpus <= MAX_GPUS_PER_WORKER:
        raise InvalidInput(f"num_gpus: 1..{MAX_GPUS_PER_WORKER}, got {num_gpus}")


def progress_fields(*, steps_done: int, steps_checkpointed: int, seconds: float, steps_run: int,
                    total_steps: int) -> None:
    for field, value in (("steps_done", steps_done), ("steps_checkpointed", steps_checkpointed),
                         ("steps_run", steps_run)):
        if not 0 <= value <= total_steps:
            raise InvalidInput(f"{field}: 0..{total_steps} (the job's total steps), got {value}")
    if steps_checkpointed > steps_done:
        raise InvalidInput(f"steps_checkpointed: at most steps_done ({steps_done}), got {steps_checkpointed}")
    if not (math.isfinite(seconds) and seconds >= 0):
        raise InvalidInput(f"seconds: a finite number >= 0, got {seconds}")
