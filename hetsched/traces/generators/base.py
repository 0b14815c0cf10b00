"""The generator protocol and registry (the families register themselves here)."""

from __future__ import annotations

from typing import Callable, Protocol

from hetsched.errors import HetschedError
from hetsched.model.jobs import Job


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
