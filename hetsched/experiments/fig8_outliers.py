"""Gavel Fig. 8's points where ours and the artifact's stored seed-0 curve differ by more than 5 %, and why.

Each such point is re-run with what the artifact leaves to chance or to its solver, everything else equal:
- `draw seed k`: the run's own random draws (Gandiva's pairings, agnostic LAS's shuffled GPU-type order) from
  another seed, the job stream unchanged: the artifact's draws come from a different generator than ours;
- `tie seed k`: AlloX picks another of its optimal matchings (docs/rules.md#allox);
- `per-job LP`: LAS solves per job instead of per class of identical jobs (docs/rules.md#per-job-solves), which
  picks another point of a degenerate optimal face.
A point is explained when the stored value lies inside the range these equally valid runs span; the `spread` is
that range over its median. Near saturation a curve is steep, and `same_jct_at` says at which input rate our own
curve reaches the stored value: a small shift in rate is a large one in JCT.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hetsched.experiments import continuous as C
from hetsched.experiments.sweep import RunConfig

#: (policy, paper rate) of the stored curve's points that ours missed by more than 5 % (paper preset, seed 0).
OUTLIERS = (("allox", 4.0), ("allox", 4.4), ("allox", 4.8), ("allox", 5.2), ("gandiva", 4.4),
            ("max_min_fairness", 4.8), ("max_min_fairness", 5.2),
            ("max_min_fairness_packed", 1.2), ("max_min_fairness_packed", 1.6))
#: What each policy leaves to chance or to its solver.
VARIANTS = {"allox": ("tie",), "gandiva": ("draw",), "max_min_fairness": ("draw", "per_job"),
            "max_min_fairness_packed": ("per_job",)}


def variants(config: RunConfig, kinds: tuple[str, ...], draws: int) -> list[RunConfig]:
    """The run itself and its equally valid variants, labelled `variant`."""
    def tag(c: RunConfig, label: str) -> RunConfig:
        return c.with_(labels=(*c.labels, ("variant", label)))

    out = [tag(config, "ours")]
    for k in range(1, draws + 1):
        if "draw" in kinds:
            out.append(tag(config.with_(draw_seed=config.seed + 1000 * k), f"draw seed {k}"))
        if "tie" in kinds:
            out.append(tag(config.with_(policy_params=(("tie_seed", k),)), f"tie seed {k}"))
    if "per_job" in kinds:
        out.append(tag(config.with_(policy_params=(("aggregate", False),)), "per-job LP"))
    return out


def configs(preset: str, draws: int = 4, points=OUTLIERS) -> list[RunConfig]:
    """Every outlier point at seed 0 with its variants, on the Fig. 8 preset's cluster and window."""
    out = []
    for policy, rate in points:
        (base,) = C.configs("single", preset, [policy], rates=(rate,), seeds=(0,))
        out += variants(base, VARIANTS[policy], draws)
    return out


def same_jct_at(curve: pd.DataFrame, rate: float, value: float) -> float:
    """The input rate nearest `rate` at which the piecewise-linear curve (paper_rate, avg_jct_h) equals `value`;
    NaN when no segment next to `rate` crosses it."""
    pts = curve.replace([np.inf], np.nan).dropna(subset=["avg_jct_h"]).sort_values("paper_rate")
    r, y = pts["paper_rate"].to_numpy(float), pts["avg_jct_h"].to_numpy(float)
    best = np.nan
    if not len(r):
        return best
    j = int(np.argmin(np.abs(r - rate)))                   # the curve's point at `rate`: its two segments
    for i in (j - 1, j):
        if not 0 <= i < len(r) - 1:
            continue
        lo, hi = sorted((y[i], y[i + 1]))
        if lo <= value <= hi and y[i + 1] != y[i]:
            at = r[i] + (value - y[i]) * (r[i + 1] - r[i]) / (y[i + 1] - y[i])
            if np.isnan(best) or abs(at - rate) < abs(best - rate):
                best = float(at)
    return best


def spans(results: pd.DataFrame, stored: pd.DataFrame | None = None, curve: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per point: ours, the variants' range and spread, and (with `stored`) the stored value and whether the
    range holds it. `results` holds the runs of `configs` (labels as columns); `stored` is the paper table;
    `curve` our seed-0 sweep (policy, paper_rate, avg_jct_h), for the rate at which it reaches the stored value."""
    rows = []
    for (policy, rate), g in results.groupby(["policy", "paper_rate"], sort=False):
        jct = g["avg_jct_h"]
        ours = float(g.loc[g["variant"] == "ours", "avg_jct_h"].iloc[0])
        row = {"policy": policy, "paper_rate": rate, "ours_h": ours, "low_h": float(jct.min()),
               "high_h": float(jct.max()), "spread": float((jct.max() - jct.min()) / jct.median()),
               "runs": len(g), "saturated": int(g["saturated"].sum())}
        if stored is not None:
            match = stored[(stored["policy"] == policy) & (stored["rate_jobs_per_h"] == rate)]["avg_jct_h"]
            value = float(match.iloc[0]) if len(match) else float("nan")
            row |= {"stored_h": value, "ours/stored": ours / value,
                    "inside": bool(row["low_h"] <= value <= row["high_h"])}
            if curve is not None:
                row["same_jct_at"] = same_jct_at(curve[curve["policy"] == policy], rate, value)
        rows.append(row)
    return pd.DataFrame(rows)
