"""Per-slot arrays that grow: the scheduler's and its stages' bookkeeping by slot."""

from __future__ import annotations

import numpy as np


def grow_arrays(owner, names, size: int) -> None:
    """Each array `owner.<name>` zero-padded to `size` rows (its values kept)."""
    for name in names:
        arr = getattr(owner, name)
        new = np.zeros((size,) + arr.shape[1:], arr.dtype)
        new[: len(arr)] = arr
        setattr(owner, name, new)
