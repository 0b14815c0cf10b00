"""The runtime's status for people (`LocalCluster.widget`): per job its GPU type and workers, % done, elapsed time,
and submission as a clock time; a job whose steps fell since the last look says it went back to its checkpoint."""

from __future__ import annotations

import time

import pandas as pd

STATUS_COLUMNS = ["job_id", "state", "steps_done", "durable_steps", "total_steps", "attempts", "submitted_s",
                  "finished_s", "log_tail", "batch_size", "gpu_type", "workers"]


def _clock(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def status_view(frame: pd.DataFrame, last_steps: dict[int, int], now_s: float | None = None) -> pd.DataFrame:
    """`LocalCluster.status()` as the widget shows it; `last_steps` (job id -> steps at the previous look) is
    updated in place, so a fall in steps (a lease that failed: the job resumes from its checkpoint) is named."""
    now_s = time.time() if now_s is None else now_s
    rows = []
    for r in frame.itertuples():
        end = r.finished_s if pd.notna(r.finished_s) and r.finished_s else now_s
        note = ""
        if r.steps_done < last_steps.get(r.job_id, 0):
            note = f"back to its checkpoint ({last_steps[r.job_id]:,} -> {r.steps_done:,} steps)"
        last_steps[r.job_id] = int(r.steps_done)
        saved = f" ({r.durable_steps:,} saved)" if r.durable_steps != r.steps_done else ""
        rows.append({"job": r.job_id, "state": r.state, "GPU type": r.gpu_type or "-", "workers": r.workers or "-",
                     "done": f"{100 * r.steps_done / max(r.total_steps, 1):.0f} %",
                     "steps": f"{r.steps_done:,} of {r.total_steps:,}{saved}",
                     "elapsed": _clock(end - r.submitted_s),
                     "submitted": time.strftime("%H:%M:%S", time.localtime(r.submitted_s)), "note": note})
    return pd.DataFrame(rows, columns=["job", "state", "GPU type", "workers", "done", "steps", "elapsed",
                                       "submitted", "note"])
