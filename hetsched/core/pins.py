"""Jobs pinned to GPU types (docs/rules.md#pins), the `Scheduler`'s `pins` object: such a job has rate 0 on every other
type, in its own throughput row, in the pair entries it belongs to, and in the pair rates its policy sees (the
table's co-location rates know no pins)."""

from __future__ import annotations

import numpy as np

from hetsched.errors import HetschedError
from hetsched.io.gpu_map import case_typos
from hetsched.model.jobs import Job


class PinnedJobs:
    """`masks` (slot -> 1/0 mask over the columns, pinned jobs only), the scheduler's `pin_off` (slot x column:
    pinned away) and what follows from them."""

    def __init__(self, sched) -> None:
        self.sched = sched
        self.masks: dict[int, np.ndarray] = {}             # slot -> allowed GPU types (pinned jobs only)

    def mask_of(self, job: Job, gpu_types: tuple[str, ...] | None = None) -> np.ndarray | None:
        """1/0 per column (or per type of `gpu_types`) for a job pinned to some GPU types; None when it may run
        anywhere. Refused when none of them is there."""
        if not job.pinned_gpu_types:                        # the common case: no pin
            return None
        allowed = job.allowed_gpu_types
        if not allowed:
            return None
        types = self.sched.gpu_types if gpu_types is None else gpu_types
        cased = case_typos(allowed, types)
        if cased:                       # 'V100' for 'v100' is a typo, not a type the cluster lacks: never dropped
            raise HetschedError(f"job {job.job_id}: pinned to GPU types {list(cased)}; GPU type names are "
                                f"case-sensitive: did you mean {list(cased.values())}? (this cluster has "
                                f"{list(types)})")
        mask = np.array([g in allowed for g in types], float)
        if not mask.any():
            raise HetschedError(f"job {job.job_id}: pinned to GPU types {list(allowed)}, none of which this "
                                f"cluster has ({list(types)})")
        return mask

    def apply(self, s: int) -> None:
        pin = self.masks.get(s)
        if pin is not None:
            self.sched.tput[s] *= pin
            self.sched.tput_spread[s] *= pin

    def mask_pairs(self, start: int) -> None:
        """Pair rows from `start` on run at rate 0 on a GPU type that either member is pinned away from
        (docs/rules.md#pins): the table's pair rates know no pins."""
        if not self.masks:
            return
        sched = self.sched
        members = sched.members[start:]
        rows = np.flatnonzero(members[:, 1] >= 0)
        off = sched.pin_off[members[rows, 0]] | sched.pin_off[members[rows, 1]]      # (pair rows, types)
        hit = off.any(axis=1)
        rows, off = rows[hit] + start, off[hit]
        sched.etput[rows] *= ~off[:, :, None]
        sched.ok[rows] &= ~off

    def keys(self, slots: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Keys that tell pinned jobs apart (docs/rules.md#pins): (row + 1) x P + the job's pin (0: none, else
        1 + its index among the P - 1 distinct pins), and those pins' 1/0 masks over the GPU types."""
        index: dict[bytes, int] = {}
        masks = [np.ones(self.sched.n)]
        pin = np.zeros(len(slots), np.int64)
        for i, s in enumerate(slots.tolist()):
            mask = self.masks.get(s)
            if mask is not None:
                pin[i] = index.setdefault(mask.tobytes(), len(index) + 1)
                if pin[i] == len(masks):
                    masks.append(mask)
        return (rows.astype(np.int64) + 1) * len(masks) + pin, masks

    @staticmethod
    def pairs(colocated: np.ndarray, pins: np.ndarray, masks: list[np.ndarray]) -> np.ndarray:
        """No pair rate on a GPU type that either member is pinned away from."""
        off = np.array(masks)[pins] == 0                                   # (keys, types)
        out = colocated.copy()
        out[off[:, None, :] | off[None, :, :]] = 0.0
        return out
