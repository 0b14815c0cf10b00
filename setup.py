"""The one thing pyproject.toml cannot say without setuptools' experimental table: the optional C extensions.

Gavel's round kernels (hetsched/compiled/_rounds.c) and Synergy's placement stage (hetsched/place/_placement.c) in
C. Optional, so that a machine without a C compiler installs the project and runs the numpy path of the rounds and
numba's placement loop instead (hetsched/compiled/round_kernels.py, hetsched/place/compiled_placement.py). No fused
multiply-adds: the same doubles as the reference loops.
"""

from setuptools import Extension, setup

FLAGS = dict(extra_compile_args=["-O2", "-ffp-contract=off"], include_dirs=["hetsched/compiled"],
             depends=["hetsched/compiled/_arrays.h"], optional=True)

setup(ext_modules=[Extension("hetsched.compiled._rounds", ["hetsched/compiled/_rounds.c"], **FLAGS),
                   Extension("hetsched.place._placement", ["hetsched/place/_placement.c"], **FLAGS)])
