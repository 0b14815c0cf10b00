"""Altair charts for the figures, saved offline as PNG and SVG through vl-convert."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd


def save_figure(chart: alt.TopLevelMixin, out_dir: str | Path, name: str = "figure") -> list[Path]:
    """Write `<name>.png` and `<name>.svg` into `out_dir`; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    chart.save(str(paths[0]), scale_factor=2)
    chart.save(str(paths[1]))
    return paths


def grouped_bars(frame: pd.DataFrame, x: str, y: str, color: str, title: str, y_title: str) -> alt.Chart:
    """Bars of `y` per `x`, one bar per `color` value side by side."""
    return alt.Chart(frame, title=title).mark_bar().encode(
        x=alt.X(f"{x}:N", title=None),
        xOffset=alt.XOffset(f"{color}:N"),
        y=alt.Y(f"{y}:Q", title=y_title),
        color=alt.Color(f"{color}:N", title=color.replace("_", " ")),
        tooltip=[x, color, alt.Tooltip(f"{y}:Q", format=".2f")],
    ).properties(width=320, height=220)


def heatmap(frame: pd.DataFrame, x: str, y: str, value: str, title: str) -> alt.Chart:
    """A square heat map of `value` over (`x`, `y`), labelled with the values."""
    base = alt.Chart(frame, title=title).encode(
        x=alt.X(f"{x}:N", title=x.replace("_", " "), sort=None),
        y=alt.Y(f"{y}:N", title=y.replace("_", " "), sort=None))
    cells = base.mark_rect().encode(color=alt.Color(f"{value}:Q", scale=alt.Scale(scheme="viridis"),
                                                    title=value.replace("_", " ")))
    text = base.mark_text(fontSize=8).encode(text=alt.Text(f"{value}:Q", format=".2f"))
    return (cells + text).properties(width=380, height=380)


def lines(frame: pd.DataFrame, x: str, y: str, color: str, title: str, x_title: str, y_title: str,
          y_max: float | None = None, log: bool = False, dash: str | None = None) -> alt.Chart:
    """Mean of `y` per (`x`, `color`) with one line per `color` (points marked); optional y clip and log axes."""
    data = frame[[c for c in dict.fromkeys([x, y, color, dash]) if c]].copy()
    data = data[np.isfinite(data[y])] if y_max is None else data.replace([np.inf], y_max)
    if y_max is not None:
        data[y] = data[y].clip(upper=y_max)
    scale = alt.Scale(type="log", base=2) if log else alt.Scale(domain=[0, y_max] if y_max else alt.Undefined)
    enc = dict(x=alt.X(f"{x}:Q", title=x_title, scale=alt.Scale(type="log", base=2) if log else alt.Scale()),
               y=alt.Y(f"mean({y}):Q", title=y_title, scale=scale),
               color=alt.Color(f"{color}:N", title=color.replace("_", " ")))
    if dash:
        enc["strokeDash"] = alt.StrokeDash(f"{dash}:N")
    return alt.Chart(data, title=title).mark_line(point=True).encode(**enc).properties(width=360, height=240)


def cdf(frame: pd.DataFrame, value: str, color: str, title: str, x_title: str) -> alt.Chart:
    """Empirical CDFs of `value`, one per `color`."""
    data = frame[[value, color]].dropna().sort_values(value).copy()
    data["cdf"] = data.groupby(color).cumcount() + 1
    data["cdf"] = data["cdf"] / data.groupby(color)[value].transform("size")
    return alt.Chart(data, title=title).mark_line(interpolate="step-after").encode(
        x=alt.X(f"{value}:Q", title=x_title), y=alt.Y("cdf:Q", title="fraction of jobs"),
        color=alt.Color(f"{color}:N", title=color.replace("_", " "))).properties(width=360, height=240)


def relative_bars(frame: pd.DataFrame, title: str) -> alt.Chart:
    """The canonical Shockwave figure: one horizontal bar panel per metric (`metric`, `label`, `value`,
    `relative`), each bar labelled with its value relative to the reference policy; an optional `artifact`
    column draws the stored number as a black tick on the bar."""
    panels = []
    order = list(dict.fromkeys(frame["label"]))
    for metric, data in frame.groupby("metric", sort=False):
        base = alt.Chart(data, title=metric).encode(
            y=alt.Y("label:N", sort=order, title=None),
            x=alt.X("value:Q", title=None),
            tooltip=["label", alt.Tooltip("value:Q", format=",.3f"), alt.Tooltip("relative:Q", format=".2f")])
        bars = base.mark_bar().encode(color=alt.Color("label:N", sort=order, legend=None))
        text = base.mark_text(align="left", dx=3, fontSize=9).encode(text=alt.Text("relative:Q", format=".2f"))
        layer = bars + text
        if "artifact" in data and data["artifact"].notna().any():
            layer += alt.Chart(data.dropna(subset=["artifact"])).mark_tick(color="black", thickness=2).encode(
                y=alt.Y("label:N", sort=order), x="artifact:Q",
                tooltip=["label", alt.Tooltip("artifact:Q", title="artifact (stored)", format=",.3f")])
        panels.append(layer.properties(width=190, height=150))
    return alt.hconcat(*panels, title=title)
