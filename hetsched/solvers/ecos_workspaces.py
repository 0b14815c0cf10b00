"""ECOS workspaces kept per sparsity pattern and refilled with ECOS's `ECOS_updateData` (docs/rules.md#ecos-reuse).

`_ecos.csolve` sets up a workspace for every LP: it equilibrates the data, builds the KKT matrix, orders it (AMD)
and factors its pattern, solves, and frees it all. About a fifth of ECOS's time on Gavel's per-job LPs was that
setup, although their pattern depends only on the number of jobs and GPU types (decide/gavel/las.py's cvxpy layout).
Here one workspace per pattern is set up once; each later LP with that pattern copies its numbers into the
workspace's buffers and calls ECOS's expert interface `ECOS_updateData` (re-equilibrate, refill the KKT entries),
then `ECOS_solve`, which starts every solve from scratch (its own initialisation, right-hand sides and scalings).
The ordering is a function of the pattern alone, so the arithmetic is that of a fresh setup:
tests/test_ecos_workspaces.py checks x, z and the exit flag bit for bit against `_ecos.csolve`.

The workspace is ECOS's C struct, read through ctypes. Its layout is checked against the one version read here
(ECOS 2.0.10, as the `ecos` wheels ship it): the dimensions, the data pointers and every default setting must be
where that layout puts them, or the module switches itself off and `solve_lp_csc` (solvers/__init__.py) keeps
`_ecos.csolve`. `HETSCHED_ECOS_REUSE=0` switches it off too. Malformed input is left to `_ecos.csolve` to report.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections import OrderedDict

import numpy as np

log = logging.getLogger(__name__)

VERSION = b"2.0.10"          # the ECOS whose pwork/settings layout the offsets below follow
MAX_WORKSPACES = 32          # per thread; the least recently used one is freed beyond this
_N, _M, _P = 0, 1, 2         # 8-byte words of pwork: dimensions,
_X, _Z = 4, 6                # the primal variables and the conic multipliers (pointers),
_A, _C, _H = 28, 30, 32      # the data (pointers),
_STGS = 58                   # the settings struct (pointer)
_DEFAULTS = (0.99, 2e-7, 1e-13, 1e-8, 1e-8, 1e-8, 1e-4, 5e-5, 5e-5)   # gamma ... reltol_inacc (doubles)
_FEASTOL, _ABSTOL, _RELTOL = 3, 4, 5
_MAXIT, _VERBOSE = 1, 2      # idxint settings after the doubles: nitref (9), maxit (100), verbose (1)
_SIGINT = -4                 # ECOS_SIGINT: interrupted by Ctrl-C

_lib = None
_enabled = os.environ.get("HETSCHED_ECOS_REUSE", "1") != "0"
_local = threading.local()


def _words(address: int, count: int, ctype=ctypes.c_int64) -> np.ndarray:
    return np.ctypeslib.as_array((ctype * count).from_address(address))


def _library():
    """ECOS's entry points in the `_ecos` extension, or None (another version, or symbols not exported)."""
    global _lib, _enabled
    if _lib is None and _enabled:
        try:
            import _ecos

            lib = ctypes.CDLL(_ecos.__file__)
            lib.ECOS_ver.restype = ctypes.c_char_p
            if lib.ECOS_ver() != VERSION:
                raise OSError(f"ECOS {lib.ECOS_ver()!r}, not {VERSION!r}")
            i64, ptr = ctypes.c_int64, ctypes.c_void_p
            lib.ECOS_setup.restype = ptr
            lib.ECOS_setup.argtypes = [i64, i64, i64, i64, i64, ptr, i64] + [ptr] * 9
            lib.ECOS_updateData.restype = None
            lib.ECOS_updateData.argtypes = [ptr] * 6
            lib.ECOS_solve.restype = i64
            lib.ECOS_solve.argtypes = [ptr]
            lib.ECOS_cleanup.restype = None
            lib.ECOS_cleanup.argtypes = [ptr, i64]
            _lib = lib
        except (ImportError, OSError, AttributeError) as exc:
            log.info("ECOS workspaces are off (%s); every LP sets up its own", exc)
            _enabled = False
    return _lib if _enabled else None


class _Workspace:
    """One ECOS workspace for `min c'x s.t. G x <= h` with G's pattern (indices, indptr) fixed."""

    def __init__(self, lib, indices: np.ndarray, indptr: np.ndarray, num_rows: int, data, c, h):
        self.lib, self.indices, self.indptr = lib, indices, indptr     # ECOS keeps pointers into these arrays
        self.G, self.c, self.h = (np.array(a, dtype=np.float64, copy=True) for a in (data, c, h))
        n = len(self.c)
        nnz = len(indices)
        if (len(indptr) != n + 1 or indptr[0] != 0 or indptr[-1] != nnz or (np.diff(indptr) < 0).any()
                or len(self.G) != nnz or len(self.h) != num_rows or nnz and not 0 <= indices.min() <= indices.max()
                < num_rows):
            raise ValueError("not a CSC matrix of these dimensions")           # _ecos.csolve reports it
        self.work = lib.ECOS_setup(n, num_rows, 0, num_rows, 0, None, 0, self.G.ctypes.data, indptr.ctypes.data,
                                   indices.ctypes.data, None, None, None, self.c.ctypes.data, self.h.ctypes.data,
                                   None)
        if not self.work:
            raise ValueError("ECOS_setup failed")
        words = _words(self.work, _STGS + 1)
        stgs = int(words[_STGS])
        self.floats, self.ints = _words(stgs, 9, ctypes.c_double), _words(stgs + 9 * 8, 3)   # 9 doubles, then idxints
        if (tuple(words[[_N, _M, _P, _A, _C, _H]]) != (n, num_rows, 0, 0, self.c.ctypes.data, self.h.ctypes.data)
                or tuple(self.floats) != _DEFAULTS or tuple(self.ints) != (9, 100, 1)):
            self.free()
            raise OSError("ECOS's workspace is not laid out as version 2.0.10's")
        self.ints[_MAXIT], self.ints[_VERBOSE] = 200, 0          # as solvers.solve_lp_csc asks _ecos.csolve
        self.x, self.z = _words(int(words[_X]), n, ctypes.c_double), _words(int(words[_Z]), num_rows, ctypes.c_double)
        self.fresh = True                                         # set up on this LP's data: no update needed

    def solve(self, data, c, h, tol: float) -> tuple[int, np.ndarray, np.ndarray]:
        if (len(data), len(c), len(h)) != (len(self.G), len(self.c), len(self.h)):
            raise ValueError("the LP's sizes differ from its pattern's")
        if not self.fresh:
            # The same buffers each time: ECOS then skips undoing the last equilibration, which these numbers
            # never had, and equilibrates them afresh. (New buffers would make it undo it, and without equality
            # rows ECOS 2.0.10 reads the missing A to decide that: never pass other buffers here.)
            self.G[:], self.c[:], self.h[:] = data, c, h
            self.lib.ECOS_updateData(self.work, self.G.ctypes.data, None, self.c.ctypes.data, self.h.ctypes.data,
                                     None)
        self.fresh = False
        self.floats[_FEASTOL] = self.floats[_ABSTOL] = self.floats[_RELTOL] = tol
        flag = self.lib.ECOS_solve(self.work)
        return int(flag), self.x.copy(), self.z.copy()

    def free(self) -> None:
        if self.work:
            self.lib.ECOS_cleanup(self.work, 0)
            self.work = None

    def __del__(self):                  # a thread's cache dropped with its workspaces still set up
        try:
            self.free()
        except Exception:               # pragma: no cover - interpreter shutdown
            pass


def solve(c: np.ndarray, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, num_rows: int, h: np.ndarray,
          tol: float) -> tuple[int, np.ndarray, np.ndarray] | None:
    """ECOS's exit flag, x and z for `min c'x s.t. G x <= h` (G in CSC arrays; `indices` and `indptr` int64), as
    `_ecos.csolve` would return them; None when workspaces are off. A pattern is recognised by the identity of
    its index arrays (pass the same arrays for the same pattern, as las.py's cached layout does)."""
    global _enabled
    lib = _library()
    if lib is None or indices.dtype != np.int64 or indptr.dtype != np.int64 or not (
            indices.flags.c_contiguous and indptr.flags.c_contiguous):
        return None
    cache = getattr(_local, "workspaces", None)
    if cache is None:
        cache = _local.workspaces = OrderedDict()
    key = (id(indices), id(indptr), num_rows, len(c))     # a cached workspace holds its arrays: ids stay unique
    ws = cache.get(key)
    if ws is None:
        try:
            ws = _Workspace(lib, indices, indptr, num_rows, data, c, h)
        except OSError as exc:
            log.warning("ECOS workspaces are off: %s", exc)
            _enabled = False
            return None
        except ValueError:                    # bad input: let _ecos.csolve report it as it always did
            return None
        cache[key] = ws
        while len(cache) > MAX_WORKSPACES:
            cache.popitem(last=False)[1].free()
    cache.move_to_end(key)
    try:
        flag, x, z = ws.solve(data, c, h, tol)
    except ValueError:
        return None
    if flag == _SIGINT:
        cache.pop(key).free()
        raise KeyboardInterrupt
    return flag, x, z


def clear() -> None:
    """Free this thread's workspaces."""
    for ws in getattr(_local, "workspaces", {}).values():
        ws.free()
    _local.workspaces = OrderedDict()
