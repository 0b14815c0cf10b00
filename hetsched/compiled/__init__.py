"""Compiled loops every stage may call, below the core: the numba switch (`jit`), the round kernels' reference loops
(`kernels`, `ranking`) and their C implementations (`round_kernels`, `_rounds.c`). Nothing here imports a stage."""
