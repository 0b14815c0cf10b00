"""Job-stream generators by family. Each reproduces its artifact's RNG draw order exactly.

A generator is a class registered under a family name, constructed from keyword options, whose
`jobs(num_jobs)` returns the first `num_jobs` jobs of its stream: Gavel's, Synergy's and Shockwave's.
"""

from __future__ import annotations

from hetsched.traces.generators.base import GENERATORS, Generator, make_generator, register_generator
from hetsched.traces.generators.gavel import GavelGenerator  # each family registers itself
from hetsched.traces.generators.synergy import SynergyGenerator
from hetsched.traces.generators.shockwave import ShockwaveGenerator

__all__ = ["GENERATORS", "Generator", "GavelGenerator", "ShockwaveGenerator", "SynergyGenerator", "make_generator",
           "register_generator"]
