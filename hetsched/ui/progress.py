"""Progress of a long command on stderr: tqdm's bar in a terminal or a notebook, and in a log or a pipe a line at
most every 10 s (a carriage-return bar there is one unreadable line). Never silence (issue 71)."""

from __future__ import annotations

import sys
import time


def terminal() -> bool:
    return sys.stderr.isatty() or "ipykernel" in sys.modules      # a notebook draws tqdm's widget


class ProgressLines:
    """tqdm's `update`/`close` as a line on stderr at most every `every_s` seconds and at the end: a log or a pipe
    gets readable progress, not a carriage-return bar."""

    def __init__(self, total: int, what: str, every_s: float = 10.0):
        self.total, self.what, self.every_s = total, what, every_s
        self.done, self.started = 0, time.perf_counter()
        self._next = self.started + every_s

    def update(self, n: int = 1) -> None:
        self.done += n
        if time.perf_counter() >= self._next:
            self._say()
            self._next = time.perf_counter() + self.every_s

    def close(self) -> None:
        self._say()

    def _say(self) -> None:
        print(f"{self.what}: {self.done} of {self.total} done, {time.perf_counter() - self.started:.0f} s",
              file=sys.stderr, flush=True)


def progress_bar(total: int, what: str, shown: bool = True):
    """An object with tqdm's `update` and `close`: a bar, lines, or (not `shown`) nothing."""
    from tqdm.auto import tqdm

    if not shown or terminal():
        return tqdm(total=total, desc=what, disable=not shown)
    return ProgressLines(total, what)
