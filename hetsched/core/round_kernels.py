"""The compiled round kernels the core calls: core/_rounds.c's loops where the project was built with them, else
numba's (core/kernels.py).

Both are the same loops with the same floating-point operations in the same order, so a run's results do not
depend on which one ran (tests/test_kernels.py runs the C, numba and numpy paths). The C loops spare a process
numba's once-per-process loading, about 0.4 CPU-s (numba's registries, and SciPy's BLAS that it imports with
the worker threads that library starts): a fifth of a paper-scale Gavel run. They take C-contiguous float64,
int64 and bool arrays and check every index; anything else is a TypeError or IndexError (never a second,
unchecked kernel). `HETSCHED_KERNELS=numba` runs numba's kernels instead, as does a build without C.
Callers still ask `kernels.ENABLED` whether to run compiled loops at all (`HETSCHED_KERNELS=0`: numpy's).
"""

from __future__ import annotations

import os

from hetsched.core import kernels

try:
    from hetsched.core import _rounds
except ImportError:                     # built without a C compiler: numba's kernels
    _rounds = None

C_ENABLED = _rounds is not None and os.environ.get("HETSCHED_KERNELS", "1") not in ("0", "numba")


def _prefer_c(jitted):
    """The C loop of numba kernel `jitted` where the project was built with it, else numba's. Arrays the C loop
    does not take (another dtype or layout, an index out of range) are a TypeError or IndexError raised before it
    writes anything, and are raised: never handed to a second kernel, which would not check them (numba does no
    bounds checks: an out-of-range entry that C refused crashed the process there)."""
    return getattr(_rounds, getattr(jitted, "py_func", jitted).__name__) if C_ENABLED else jitted


select_walk = _prefer_c(kernels.select_walk)
quiet_rounds = _prefer_c(kernels.quiet_rounds)
run_tasks = _prefer_c(kernels.run_tasks)
gpu_seconds = _prefer_c(kernels.gpu_seconds)
account_tasks = _prefer_c(kernels.account_tasks)
credit_tasks = _prefer_c(kernels.credit_tasks)
mark_started = _prefer_c(kernels.mark_started)
codes_of = _prefer_c(kernels.codes_of)
las_program = _prefer_c(kernels.las_program)
single_rows = _prefer_c(kernels.single_rows)
proportional_rates = _prefer_c(kernels.proportional_rates)
