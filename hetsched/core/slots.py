"""Jobs in slots of preallocated numpy arrays: the scheduler's bookkeeping, which its stages index by slot."""

from __future__ import annotations

import numpy as np

from hetsched.errors import HetschedError
from hetsched.model.jobs import Job


class JobSlots:
    """`jobs`/`slot` dicts, `job_of_slot`, and per-slot arrays named in `SLOT_ARRAYS` that double when full."""

    SLOT_ARRAYS: tuple[str, ...] = ()

    def _init_slots(self, size: int = 64) -> None:
        self.jobs: dict[int, Job] = {}
        self.slot: dict[int, int] = {}
        self._free_slots = list(range(size - 1, -1, -1))
        self.job_of_slot = np.full(size, -1, np.int64)

    def _grow(self) -> None:
        old = len(self.job_of_slot)
        grow_arrays(self, ("job_of_slot",) + self.SLOT_ARRAYS, old * 2)
        self.job_of_slot[old:] = -1
        self._free_slots.extend(range(old * 2 - 1, old - 1, -1))

    def active_slots_by_id(self) -> np.ndarray:
        """The slots of the active jobs in ascending job id (the order of `sorted(self.jobs)`)."""
        slots = np.flatnonzero(self.job_of_slot >= 0)
        return slots[np.argsort(self.job_of_slot[slots], kind="stable")]

    def slots_of(self, job_ids: np.ndarray) -> np.ndarray:
        """The slot of each active job in `job_ids`."""
        return np.fromiter((self.slot[j] for j in np.asarray(job_ids).tolist()), np.int64, len(job_ids))

    def _take_slot(self, job: Job) -> int:
        """A free slot for a new active job."""
        if job.job_id in self.jobs:
            raise HetschedError(f"job {job.job_id} is already active")
        if not self._free_slots:
            self._grow()
        s = self._free_slots.pop()
        self.jobs[job.job_id] = job
        self.slot[job.job_id] = s
        self.job_of_slot[s] = job.job_id
        return s

    def _release_slot(self, job_id: int) -> int:
        """Forget an active job; returns its slot (free for reuse)."""
        s = self.slot.pop(job_id)
        self.jobs.pop(job_id)
        self.job_of_slot[s] = -1
        self._free_slots.append(s)
        return s


def grow_arrays(owner, names, size: int) -> None:
    """Each array `owner.<name>` zero-padded to `size` rows (its values kept)."""
    for name in names:
        arr = getattr(owner, name)
        new = np.zeros((size,) + arr.shape[1:], arr.dtype)
        new[: len(arr)] = arr
        setattr(owner, name, new)
