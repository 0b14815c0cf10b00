"""What an artifact's trace format keeps of a job (docs/rules.md#trace-formats).

Gavel's, Shockwave's and Synergy's formats have fewer columns than a job has fields, and write steps as whole
numbers. `write_trace` reads its own text back and compares every job field by field: a field that the format
rounds is reported, one that it cannot carry is refused unless the caller accepts the loss (`lossy`). Our
canonical CSV and Parquet keep every field and are not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from hetsched.errors import HetschedError, TraceError
from hetsched.model.jobs import JOB_FIELDS, Job

# The formats' precision: steps as whole numbers (rounded down), times and SLO factors to six decimals.
ROUNDED = {"total_steps": ("rounded down to whole steps", 1.0), "arrival_time_s": ("to the microsecond", 1e-6),
           "slo_factor": ("to six decimals", 1e-6)}


@dataclass
class Kept:
    """Per field, how many jobs lost it (`lost`), had it rounded (`rounded`), or lost a duration that none of
    their fields needs (`unread`: without an SLO, a duration sets no deadline)."""

    fmt: str
    lost: dict[str, int] = field(default_factory=dict)
    rounded: dict[str, int] = field(default_factory=dict)
    unread: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """One line for the command line; empty when every field came back as it was."""
        parts = [f"{name} {ROUNDED[name][0]} ({n} jobs)" for name, n in self.rounded.items()]
        parts += [f"no {name} ({n} jobs without an SLO)" for name, n in self.unread.items()]
        parts += [f"dropped {lost}" for lost in self.lost_fields()]
        return f"{self.fmt}'s format: {', '.join(parts)}" if parts else ""

    def lost_fields(self) -> list[str]:
        return [f"{name} ({n} jobs{' with an SLO, whose deadline needs it' if name == 'duration_s' else ''})"
                for name, n in self.lost.items()]


def _count(counts: dict[str, int], name: str) -> None:
    counts[name] = counts.get(name, 0) + 1


def compare(jobs: Sequence[Job], back: Sequence[Job], fmt: str) -> Kept:
    """What `back` (the jobs read back from `fmt`'s text) kept of `jobs`."""
    kept = Kept(fmt)
    if len(back) != len(jobs):
        kept.lost["jobs"] = abs(len(jobs) - len(back))
    for a, b in zip(jobs, back):
        for name in JOB_FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            if x == y:
                continue
            if name in ROUNDED and x is not None and y is not None and abs(x - y) < ROUNDED[name][1] + 1e-9 * abs(x):
                _count(kept.rounded, name)
            elif name == "duration_s" and a.slo_factor is None:
                _count(kept.unread, name)
            else:
                _count(kept.lost, name)
    return kept


def check_write(jobs: Sequence[Job], fmt: str, text: str, parse: Callable[..., list[Job]], source: str,
                lossy: bool) -> Kept:
    """Refuse `text` (jobs in `fmt`) when it loses a field of a job, unless `lossy`."""
    try:
        back = parse(text, source=source, known_job_types=None)
    except HetschedError as exc:
        raise TraceError(f"these jobs cannot be written in {fmt}'s format ({exc}); write .csv or .parquet",
                         source=source) from None
    kept = compare(jobs, back, fmt)
    if kept.lost and not lossy:
        what = ", ".join(kept.lost_fields())
        ids = " (its ids are the line numbers)" if "job_id" in kept.lost else ""
        raise TraceError(f"{fmt}'s format cannot carry {what}{ids}; write .csv or .parquet, which keep every field, "
                         "or accept the loss (--lossy, or lossy=True)", source=source)
    return kept
