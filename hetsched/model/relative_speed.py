"""Profiled columns in a measured table's units (docs/rules.md#relative-speed).

`hetsched profile` trains the project's toy workloads (`workloads/`), so its steps/s are not the artifacts' steps/s
of the full models: a profiled `a100` column beside the Gavel table's `v100` would make an A100 many times faster
than it is. What carries over is the *relative* speed of two types measured with the same tool. Profile a type
the table measures too (the reference) and every other profiled type is scaled, per job type, scale factor and
placement, by the table's rate over the profiled rate on the reference:

    rate(a100) = profiled(a100) x table(v100) / profiled(v100)

A co-located pair's rates are each scaled by their own job type's factor, so the profiled co-location efficiency
(pair rate over rate alone) is kept.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hetsched.errors import ThroughputError

_KEY = ["job_type", "scale_factor", "placement"]


def _alone_on(frame: pd.DataFrame, gpu_type: str) -> pd.Series:
    rows = frame[(frame["gpu_type"] == gpu_type) & frame["partner_job_type"].isna()]
    return rows.set_index(_KEY)["steps_per_s"].astype(float)


def scaled_columns(base: pd.DataFrame, profiled: pd.DataFrame, reference: str,
                   base_name: str = "the table") -> tuple[pd.DataFrame, int]:
    """The profiled rows of every type but `reference`, in `base`'s units; and how many rows had no factor (a
    job type, scale factor or placement that `base` or the profile lacks on the reference, or a rate of 0 there)."""
    for frame, name in ((base, base_name), (profiled, "the profiled tables")):
        if not (frame["gpu_type"] == reference).any():
            raise ThroughputError(f"relative speed: {name} has no {reference!r} column; profile a GPU type that "
                                  f"{base_name} measures with the same tool and name it as the reference")
    measured = set(profiled["workloads"].fillna("")) if "workloads" in profiled else {""}
    if len(measured) > 1:                    # the factor would carry one workload's units into another's
        raise ThroughputError(f"relative speed: the profiled tables measured different workloads "
                              f"({', '.join(sorted(repr(w) for w in measured))}); profile the reference and the "
                              f"other types the same way")
    factor = _alone_on(base, reference) / _alone_on(profiled, reference)
    factor = factor[np.isfinite(factor) & (factor > 0)]
    rows = profiled[profiled["gpu_type"] != reference].reset_index(drop=True)
    own = factor.reindex(pd.MultiIndex.from_frame(rows[_KEY])).to_numpy()
    pair = rows["partner_job_type"].notna().to_numpy()
    partner_key = rows[_KEY].assign(job_type=rows["partner_job_type"].fillna(rows["job_type"]))
    other = np.where(pair, factor.reindex(pd.MultiIndex.from_frame(partner_key)).to_numpy(), 1.0)
    ok = ~np.isnan(own) & ~np.isnan(other)
    out = rows[ok].assign(steps_per_s=rows["steps_per_s"].to_numpy()[ok] * own[ok],
                          partner_steps_per_s=rows["partner_steps_per_s"].to_numpy()[ok] * other[ok])
    if "workloads" in out or "workloads" in base:       # now measured as the reference column of `base` was
        basis = base.loc[base["gpu_type"] == reference, "workloads"].iloc[0] if "workloads" in base else pd.NA
        out = out.assign(workloads=basis)
    return out, int((~ok).sum())
