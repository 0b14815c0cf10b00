"""Field parsers shared by the trace readers: each failure becomes a `TraceError` naming file, line, field."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator

from hetsched.errors import SpecError, TraceError


@dataclass(frozen=True, slots=True)
class Where:
    """A position in a trace file."""

    source: str
    line: int

    def error(self, field: str | None, message: str) -> TraceError:
        return TraceError(message, source=self.source, line=self.line, field=field)


def decode(data: bytes | str, source: str) -> str:
    """UTF-8 text of a trace; undecodable bytes raise a `TraceError` on the right line."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(f"not UTF-8 text (byte {exc.start})", source=source, line=line) from None


def numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its end) for every non-blank line."""
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if line.strip():
            yield number, line


def split_fields(line: str, sep: str, names: tuple[str, ...], where: Where) -> dict[str, str]:
    parts = line.split(sep)
    if len(parts) != len(names):
        kind = "tab" if sep == "\t" else repr(sep)
        raise where.error(None, f"expected {len(names)} {kind}-separated fields ({', '.join(names)}), "
                                f"got {len(parts)}")
    return dict(zip(names, parts))


def as_float(text: str, field: str, where: Where, *, minimum: float | None = 0.0) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise where.error(field, f"expected a number, got {text.strip()!r}") from None
    if not math.isfinite(value):
        raise where.error(field, f"expected a finite number, got {text.strip()!r}")
    if minimum is not None and value < minimum:
        raise where.error(field, f"must be >= {minimum:g}, got {text.strip()!r}")
    return value


def as_int(text: str, field: str, where: Where, *, minimum: int = 0) -> int:
    raw = text.strip()
    try:
        value = int(raw)
    except ValueError:
        try:
            as_float_value = float(raw)
        except ValueError:
            raise where.error(field, f"expected an integer, got {raw!r}") from None
        if not (math.isfinite(as_float_value) and as_float_value.is_integer()):
            raise where.error(field, f"expected an integer, got {raw!r}") from None
        value = int(as_float_value)
    if value < minimum:
        raise where.error(field, f"must be an integer >= {minimum}, got {raw!r}")
    return value


def as_flag(text: str, field: str, where: Where) -> bool:
    raw = text.strip()
    if raw not in ("0", "1"):
        raise where.error(field, f"expected 0 or 1, got {raw!r}")
    return raw == "1"


def as_job_type(text: str, field: str, where: Where, known: frozenset[str] | None) -> str:
    value = text.strip()
    if not value:
        raise where.error(field, "job type is empty")
    if known is not None and value not in known:
        examples = ", ".join(sorted(known)[:3])
        raise where.error(field, f"unknown job type {value!r} (known types include {examples}, ...)")
    return value


def build(where: Where, factory: Callable, **kwargs):
    """Construct a model object; its validation errors become `TraceError`s at this line."""
    try:
        return factory(**kwargs)
    except SpecError as exc:
        raise where.error(None, str(exc)) from None
