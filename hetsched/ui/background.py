"""What the explorers share about their runs: one at a time in a daemon thread, cancelled at its next progress
report, waited for on reset."""

from __future__ import annotations

import threading


class Cancelled(Exception):
    """Raised inside a run's progress callback when the user pressed Cancel."""


class BackgroundRuns:
    status: object                  # an ipywidgets.HTML the explorer shows its state in

    def __init__(self):
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def check_cancel(self) -> None:
        """Called from a run's progress report: ends the run if Cancel was pressed."""
        if self._cancel.is_set():
            raise Cancelled

    def cancel(self) -> None:
        """Stop the run in progress at its next progress report."""
        if self.running():
            self._cancel.set()
            self.status.value = "Cancelling..."

    def stop(self, timeout: float) -> None:
        """Cancel the run in progress and wait for its thread (reset)."""
        self.cancel()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def launch(self, work) -> threading.Thread:
        self._cancel.clear()
        self._thread = thread = threading.Thread(target=work, daemon=True)
        thread.start()
        return thread
