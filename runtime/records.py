"""What the scheduler server remembers about each worker and each lease."""

from __future__ import annotations

from dataclasses import dataclass, field

from hetsched.errors import HetschedError


class Denied(HetschedError):
    """The caller does not own what it reports on (PERMISSION_DENIED)."""


class NotFound(HetschedError):
    """No such job (NOT_FOUND)."""


@dataclass
class WorkerInfo:
    worker_id: str
    session: str
    gpu_type: str
    num_gpus: int
    slowdown: float
    last_seen: float
    cpu_cores: int = 0                               # 0: not reported
    mem_gb: float = 0.0
    to_start: list = field(default_factory=list)     # Lease messages to hand out at the next heartbeat
    to_stop: list = field(default_factory=list)      # job ids to kill at the next heartbeat
    running: dict = field(default_factory=dict)      # job id -> lease id, as the worker last reported
    orphans: dict = field(default_factory=dict)      # job id -> when it was first seen running without a lease
    vanished: dict = field(default_factory=dict)     # job id -> (lease id, since): started or listed, now unlisted


@dataclass
class LeaseInfo:
    lease_id: str
    job_id: int
    token: str
    parts: tuple[tuple[str, int], ...]                # (worker id, local GPU) of each rank
    gpu_type: str
    deadline: float
    partner: int = -1                                # a co-located pair's other member (-1: none)
    rate_from: tuple[int, float] | None = (0, 0.0)   # (steps run, seconds) its measured rate counts from; None:
                                                     # from its next update (it joined or left a pair)
    started_at: float | None = None                  # scheduler clock when its first process was handed out
    issued_at: float = 0.0                           # scheduler clock of the round's plan that issued it
    told_stop: bool = False
    failed: bool = False
    rendezvous: str = ""
    share: tuple[float, float] = (0.0, 0.0)          # per-rank CPU cores and GB (0: none given)
    speedup: float = 1.0                             # what its share adds to the table rate in the plan (TUNE)
    resumed: bool = False                            # the job had durable progress: this lease is a restart
    stepped: bool = False                            # it has reported steps run
    previous: "LeaseInfo | None" = None              # the job's lease before it that ran: it may still store its
                                                     # last checkpoint until this one starts

    @property
    def paired(self) -> bool:
        return self.partner >= 0

    @property
    def workers(self) -> set[str]:
        return {w for w, _ in self.parts}
