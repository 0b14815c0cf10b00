"""Job-stream generators by family. Each reproduces its artifact's RNG draw order exactly.

A generator is a class registered under a family name, constructed from keyword options, whose
`jobs(num_jobs)` returns the first `num_jobs` jobs of its stream: Gavel's, Synergy's and Shockwave's.
"""

from __future__ import annotations

from typing import Callable, Protocol

from ...errors import HetschedError
from ...jobs import Job


class Generator(Protocol):
    def jobs(self, num_jobs: int) -> list[Job]: ...


GENERATORS: dict[str, Callable[..., Generator]] = {}


def register_generator(name: str):
    """Class decorator: make a generator available by family name (CLI `hetsched generate NAME`)."""
    def wrap(cls):
        GENERATORS[name] = cls
        return cls
    return wrap


def make_generator(name: str, **options) -> Generator:
    try:
        factory = GENERATORS[name]
    except KeyError:
        raise HetschedError(f"no generator {name!r}; available: {', '.join(sorted(GENERATORS))}") from None
    return factory(**options)


from .gavel import GavelGenerator  # noqa: E402  (registers itself)
from .synergy import SynergyGenerator  # noqa: E402
from .shockwave import ShockwaveGenerator  # noqa: E402

__all__ = ["GENERATORS", "GavelGenerator", "ShockwaveGenerator", "SynergyGenerator", "Generator", "make_generator", "register_generator"]
