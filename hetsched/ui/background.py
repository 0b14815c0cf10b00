"""What the explorers share about their runs: one at a time in a daemon thread, cancelled at its next progress
report, waited for on reset."""

from __future__ import annotations

import threading
import traceback

ERROR = "<span style='color:#b00020'>{}</span>"


class Cancelled(Exception):
    """Raised inside a run's progress callback when the user pressed Cancel."""


class BackgroundRuns:
    status: object                  # an ipywidgets.HTML the explorer shows its state in
    cancel_button: object           # its Cancel button

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

    def launch(self, label: str, body, after) -> threading.Thread:
        """Run `body()` in a thread, saying so in the status: "Done: <label>." and what `body` returns after it,
        or that it was cancelled, or its error (shown, not lost in the thread); then `after()`, in any case."""
        def work():
            try:
                self.status.value = f"Running {label} ..."
                self.status.value = f"Done: {label}." + (body() or "")
            except Cancelled:
                self.status.value = "Cancelled; earlier runs are kept."
            except Exception as exc:
                self.status.value = ERROR.format(f"{type(exc).__name__}: {exc}")
                traceback.print_exc()
            finally:
                self.cancel_button.disabled = True
                self._thread = None
                after()

        self._cancel.clear()
        self.cancel_button.disabled = False
        self._thread = thread = threading.Thread(target=work, daemon=True)
        thread.start()
        return thread
