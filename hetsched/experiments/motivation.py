"""Motivation figures (Gavel Fig. 1-style): heterogeneous throughput, per dollar, and co-location gains."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from hetsched.model.throughputs import ThroughputTable

#: GCP on-demand $/h used by Gavel's motivation notebook (docs/rules.md#catalogues).
GCP_ON_DEMAND: Mapping[str, float] = {"k80": 0.52, "p100": 1.68, "v100": 2.85}


def largest_batch_per_model(table: ThroughputTable) -> list[str]:
    """One job type per model: its largest batch size (the motivation figure's choice)."""
    best: dict[str, tuple[int, str]] = {}
    for key in table.keys:
        if key.scale_factor != 1:
            continue
        model, _, rest = key.job_type.partition(" (batch size ")
        bs = int(rest.rstrip(")")) if rest else 0
        if model not in best or bs > best[model][0]:
            best[model] = (bs, key.job_type)
    return [best[m][1] for m in sorted(best)]


def throughput_by_gpu(table: ThroughputTable, job_types: Sequence[str], gpu_types: Sequence[str],
                      prices: Mapping[str, float], reference: str = "k80") -> pd.DataFrame:
    """Isolated throughput and throughput per dollar, each relative to `reference`, in tidy rows."""
    tput = table.matrix([(t, 1) for t in job_types], gpu_types)
    ref = tput[:, list(gpu_types).index(reference)][:, None]
    price = np.array([prices[g] for g in gpu_types])
    per_dollar = (tput / price) / (ref / prices[reference])
    rows = []
    for i, job_type in enumerate(job_types):
        for j, gpu in enumerate(gpu_types):
            rows.append({"job_type": job_type, "model": job_type.split(" (")[0], "gpu_type": gpu,
                         "steps_per_s": tput[i, j], "relative_throughput": tput[i, j] / ref[i, 0],
                         "relative_throughput_per_dollar": per_dollar[i, j]})
    return pd.DataFrame(rows)


def colocation_gain(table: ThroughputTable, job_types: Sequence[str], gpu_type: str) -> pd.DataFrame:
    """Normalised combined throughput `T_a^pair/T_a + T_b^pair/T_b` of every pair on `gpu_type` (0 = OOM)."""
    rows = []
    for a in job_types:
        ta = table.get(a, 1, gpu_type)
        for b in job_types:
            pa, pb = table.pair(a, b, 1, gpu_type)
            tb = table.get(b, 1, gpu_type)
            gain = (pa / ta if ta else 0.0) + (pb / tb if tb else 0.0)
            rows.append({"job_type": a, "partner_job_type": b, "gpu_type": gpu_type,
                         "normalized_combined_throughput": gain})
    return pd.DataFrame(rows)
