"""The one switch for compiled loops: numba when it is installed and `HETSCHED_KERNELS` is not 0.

Every compiled kernel (compiled/kernels.py, compiled/ranking.py, core/pair_entries.py, decide/gavel/pair_kernels.py,
decide/gavel/polytope_kernel.py, decide/gavel/units.py, place/placement_kernel.py) is built with `compiled`; without
numba each stays the plain Python function it decorates.
"""

from __future__ import annotations

import os

try:                                    # the numpy path needs no compiler; numba is a dependency, not a must
    import numba
except ImportError:                     # pragma: no cover - numba is installed with the project
    numba = None

ENABLED = numba is not None and os.environ.get("HETSCHED_KERNELS", "1") != "0"


def compiled(func):
    """numba's no-python mode with numpy's float semantics (x / 0 gives inf or nan, as numpy does)."""
    return numba.njit(cache=True, error_model="numpy", nogil=True)(func) if ENABLED else func
