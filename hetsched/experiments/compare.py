"""Put the artifacts' stored numbers (data/paper/*.csv) next to ours."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hetsched.model.throughputs import data_dir


def paper_table(name: str) -> pd.DataFrame:
    return pd.read_csv(data_dir() / "paper" / f"{name}.csv")


def side_by_side(ours: pd.DataFrame, paper: pd.DataFrame, on: list[str], ours_col: str, paper_col: str,
                 ours_scale: float = 1.0) -> pd.DataFrame:
    """Join on `on` into columns `paper`, `ours`, `ratio` = ours / paper (ours scaled by `ours_scale`)."""
    mine = ours.groupby(on, as_index=False)[ours_col].mean().rename(columns={ours_col: "ours"})
    mine["ours"] = mine["ours"] * ours_scale
    table = paper[on + [paper_col]].rename(columns={paper_col: "paper"}).merge(mine, on=on, how="inner")
    table["ratio"] = table["ours"] / table["paper"]
    table.loc[~np.isfinite(table["ratio"]), "ratio"] = np.nan
    return table
