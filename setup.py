"""The one thing pyproject.toml cannot say without setuptools' experimental table: the optional C extension.

Gavel's round kernels in C (hetsched/core/_rounds.c). Optional, so that a machine without a C compiler installs the
project and runs numba's kernels instead (hetsched/core/round_kernels.py). No fused multiply-adds: the same doubles
as numba's loops.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("hetsched.core._rounds", ["hetsched/core/_rounds.c"],
                             extra_compile_args=["-O2", "-ffp-contract=off"], optional=True)])
