"""Shares of the scheduler's handler threads: calls in progress, counted per caller within a total.

A job (keyed by its id, whichever of its lease tokens it uses) holds at most `per_key` calls of a kind at once, so
no job can take the slots every other job needs to checkpoint, restore or report; the total bounds the threads
all of them hold together. A call past either bound is answered RESOURCE_EXHAUSTED at once (callers retry with
backoff). Transfers (checkpoint streams) that move nothing for `idle_s` are cancelled, so that even jobs acting
together cannot hold the transfer slots for longer than that without sending.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import contextmanager

import grpc


class Slots:
    def __init__(self, what: str, total: int, per_key: int):
        if not (total >= 1 and per_key >= 1):
            raise ValueError(f"{what}: need at least one slot in all and per key, got {total} and {per_key}")
        self.what, self.total, self.per_key = what, total, min(per_key, total)
        self._lock = threading.Lock()
        self._held: Counter = Counter()
        self._in_use = 0

    def _take(self, key) -> str:
        """'' when a slot was taken for `key`, else why not."""
        with self._lock:
            if self._held[key] >= self.per_key:
                return f"this caller already has {self.per_key} {self.what} in progress"
            if self._in_use >= self.total:
                return f"{self.total} {self.what} are in progress"
            self._held[key] += 1
            self._in_use += 1
            return ""

    def _give(self, key) -> None:
        with self._lock:
            self._in_use -= 1
            self._held[key] -= 1
            if not self._held[key]:
                del self._held[key]

    @contextmanager
    def held(self, key, context):
        """Hold one slot for `key` while the block runs; aborts RESOURCE_EXHAUSTED when none is free."""
        refused = self._take(key)
        if refused:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{refused}; retry shortly")
        try:
            yield
        finally:
            self._give(key)

    def in_use(self, key=None) -> int:
        with self._lock:
            return self._in_use if key is None else self._held[key]


class Transfer:
    """A stream's last sign of life; `moved()` on every chunk."""

    __slots__ = ("context", "last")

    def __init__(self, context):
        self.context, self.last = context, time.monotonic()

    def moved(self) -> None:
        self.last = time.monotonic()


class IdleTransfers:
    """Cancels transfers that moved nothing for `idle_s` (checked every `idle_s / 4` on a thread of its own)."""

    def __init__(self, idle_s: float):
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._open: set[Transfer] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="idle transfers", daemon=True)
        self._thread.start()

    @contextmanager
    def watched(self, context):
        transfer = Transfer(context)
        with self._lock:
            self._open.add(transfer)
        try:
            yield transfer
        finally:
            with self._lock:
                self._open.discard(transfer)

    def _watch(self) -> None:
        while not self._stop.wait(self.idle_s / 4):
            now = time.monotonic()
            with self._lock:
                idle = [t for t in self._open if now - t.last > self.idle_s]
            for transfer in idle:
                transfer.context.cancel()

    def stop(self) -> None:
        self._stop.set()
