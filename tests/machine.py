"""How much slower than an idle machine this one runs right now: tests scale their waits and latency bounds by it.

A test asserts what must hold (order, completion, no loss), never how fast a busy machine is; but every wait must
be bounded. `slowness()` times a fixed piece of pure-Python work (the median of five) against what it takes on an
idle machine of this kind (`IDLE_S`, measured on 2026-11-29: 17-26 ms). Beside two busy processes on 2 cores it
reads about 2-3; it is never below 1. Measured afresh when older than `FRESH_S`, since a machine's load moves.
"""

from __future__ import annotations

import statistics
import time

IDLE_S = 0.020
FRESH_S = 10.0
_last: tuple[float, float] = (-1e9, 1.0)        # (when, value)


def _work() -> float:
    start, total = time.perf_counter(), 0
    for i in range(300_000):
        total += i * i % 7
    return time.perf_counter() - start


def slowness() -> float:
    """Wall time of the reference work over its idle time: >= 1 (capped at 30)."""
    global _last
    now = time.monotonic()
    if now - _last[0] > FRESH_S:
        _last = (now, min(30.0, max(1.0, statistics.median(_work() for _ in range(5)) / IDLE_S)))
    return _last[1]


def scaled(seconds: float) -> float:
    """A wait of `seconds` on an idle machine, as long as this machine needs now."""
    return seconds * slowness()
