"""An elastic run's result: per finished job its times, GPU-hours and restarts, and the jobs arrived and unfinished
at each round; the artifact's summary metrics (docs/rules.md#elastic-metrics)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass
class ElasticResult:
    jobs: pd.DataFrame
    contention: np.ndarray                 # jobs arrived and unfinished, per round
    round_s: float
    policy: str
    cluster: str
    decide_s: list = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        """The artifact's summary (docs/rules.md#elastic-metrics): hours, except contention (jobs)."""
        jct = np.sort(self.jobs["jct_s"].to_numpy())
        return {"avg_jct_h": float(jct.mean()) / 3600, "p99_jct_h": float(jct[int(0.99 * len(jct))]) / 3600,
                "makespan_h": float(self.jobs["completion_s"].max() - self.jobs["submit_s"].min()) / 3600,
                "gpu_h_per_job": float(self.jobs["gpu_hours"].mean()),
                "contention_mean": float(self.contention.mean()) if len(self.contention) else 0.0,
                "contention_max": int(self.contention.max()) if len(self.contention) else 0,
                "restarts_per_job": float(self.jobs["restarts"].mean())}
