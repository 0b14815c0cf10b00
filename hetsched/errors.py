"""One exception hierarchy for the whole library."""

from __future__ import annotations


class HetschedError(Exception):
    """Base class of every error that hetsched raises on purpose."""


class SpecError(HetschedError, ValueError):
    """A cluster spec, job or other model object is invalid."""


class ThroughputError(HetschedError, ValueError):
    """A throughput table is malformed or lacks an entry that was asked for."""


class TraceError(HetschedError, ValueError):
    """A trace file is malformed. The message names the file, the line and the field."""

    def __init__(self, message: str, *, source: str = "<trace>", line: int | None = None,
                 field: str | None = None):
        where = source if line is None else f"{source}:{line}"
        what = f"field '{field}': " if field else ""
        super().__init__(f"{where}: {what}{message}")
        self.message = message
        self.source = source
        self.line = line
        self.field = field

    def shifted(self, lines: int) -> "TraceError":
        """The same error, `lines` further down its file (a chunk of a file parsed on its own)."""
        return TraceError(self.message, source=self.source, line=None if self.line is None else self.line + lines,
                          field=self.field)


class SolverError(HetschedError, RuntimeError):
    """A policy's optimisation problem could not be solved."""


class SimulationError(HetschedError, RuntimeError):
    """The simulation cannot make progress (e.g. a job that fits nowhere, or a saturated run)."""

    @classmethod
    def saturated(cls, active: int, now: float, limit: int) -> "SimulationError":
        """More active jobs than `max_active_jobs` (docs/rules.md#horizon): the queue only grows."""
        return cls(f"saturated: {active} active jobs at t={now:.0f} s (max_active_jobs={limit})")
