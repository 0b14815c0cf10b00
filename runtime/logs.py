"""The scheduler's log. Lines a client can provoke are rate-limited: a flood of undecodable requests (or a full
disk) writes a few tracebacks and then one line per window saying how many were suppressed, never one per
request. The frequent job events are written a batch at a time (`EventLog`)."""

from __future__ import annotations

import logging
import sys
import threading
import time

BURST, WINDOW_S = 5, 60.0


class RateLimit(logging.Filter):
    """At most `burst` records per (logger, message template) every `window_s` seconds; the first record after a
    window with suppressions says how many were dropped."""

    def __init__(self, burst: int = BURST, window_s: float = WINDOW_S, clock=time.monotonic):
        super().__init__()
        self.burst, self.window_s, self.clock = burst, window_s, clock
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], list] = {}      # key -> [window start, passed, suppressed]

    def filter(self, record: logging.LogRecord) -> bool:
        key, now = (record.name, str(record.msg)), self.clock()
        with self._lock:
            state = self._seen.setdefault(key, [now, 0, 0])
            if now - state[0] >= self.window_s:
                if state[2]:
                    record.msg = f"{record.msg} [{state[2]} more like this suppressed in the last window]"
                state[:] = [now, 0, 0]
            if state[1] >= self.burst:
                state[2] += 1
                return False
            state[1] += 1
            return True


def limit(*loggers: str, burst: int = BURST, window_s: float = WINDOW_S) -> RateLimit:
    """Attach one RateLimit to each named logger (gRPC's own server logger logs every undecodable request)."""
    rate = RateLimit(burst, window_s)
    for name in loggers:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RateLimit) for f in logger.filters):
            logger.addFilter(rate)
    return rate



class EventLog:
    """The frequent job events (a lease, a start) as lines in the log's own format, `<time> INFO
    hetsched.runtime.events: lease job=3 ...`, written in one call per batch (a round, a heartbeat) with the
    batch's time: a round that issues a thousand leases spends about a millisecond on them (through `logging`,
    about 25 ms: benchmarks/runtime.py). `on` is whether the events logger takes INFO (as `hetsched scheduler`
    configures it); callers skip building a line when it is off."""

    NAME = "hetsched.runtime.events"

    def __init__(self, stream=None):
        self.stream, self.lines = stream, []
        self.on = logging.getLogger(self.NAME).isEnabledFor(logging.INFO)

    def add(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        if not self.lines:
            return
        lines, self.lines = self.lines, []
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        head = f"{stamp},{int(now % 1 * 1000):03d} INFO {self.NAME}: "
        stream = self.stream or sys.stderr
        stream.write("".join(f"{head}{line}\n" for line in lines))
        stream.flush()
