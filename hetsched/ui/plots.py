"""Altair charts for the figures: the papers' names and colours, interactive in JupyterLab, rendered offline
(`hetsched/ui/rendering.py`, enabled on import). The helpers aggregate before plotting, so no chart carries more
rows than it draws.
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from hetsched.ui.names import ORDERINGS, VOCABULARY
from hetsched.ui.names import color as policy_color
from hetsched.ui.names import display_names, legend_order, natural_sorted
from hetsched.ui.rendering import VEGA_MIME, save_figure  # noqa: F401  (re-exported; enables the renderer)

FLAGS = {"saturated": "saturated", "timed_out": "timed out"}     # result columns that mark a point unfinished
#: How a point off the line is drawn at the top of the axis: unfinished, or finished above `y_max`.
OFF_LINE = {"saturated": "cross", "timed out": "triangle-up", "above the axis": "arrow",
            "artifact, above the axis": "diamond"}
_PARAM_IDS = itertools.count()                                      # unique selection names per chart
CDF_POINTS = 300                                                   # at most this many points per CDF line


def publish(chart: alt.TopLevelMixin, out_dir: str | Path, preset: str, results: pd.DataFrame | None = None,
            name: str = "figure", **facts) -> alt.TopLevelMixin:
    """A notebook's figure: subtitle it with what it was made from (`figure_note`), save it, and show it in
    the notebook (Vega for JupyterLab, PNG for other viewers). Returns the subtitled chart."""
    chart = with_note(chart, figure_note(preset, results, **facts))
    save_figure(chart, out_dir, name)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return chart
    if get_ipython() is not None:
        display(chart)
    return chart


def figure_note(preset: str, results: pd.DataFrame | None = None, **facts) -> str:
    """"quick preset · cluster 12:12:12 · seeds 0, 1": what a figure was made from, for its subtitle."""
    parts = [f"{preset} preset"]
    for column, word in (("cluster", "cluster"), ("seed", "seeds"), ("throughputs", "throughputs")):
        if results is not None and column in results and column not in facts:
            values = natural_sorted(str(v) for v in results[column].dropna().unique())
            if values:
                parts.append(f"{word} {', '.join(values)}")
    parts += [f"{k.replace('_', ' ')} {v}" for k, v in facts.items()]
    return " · ".join(parts)


def with_note(chart: alt.TopLevelMixin, note: str) -> alt.TopLevelMixin:
    """Add `note` as the chart's subtitle, under a subtitle it already has (or as its title, for a
    concatenation without one)."""
    title = chart.title if chart.title is not alt.Undefined else None
    text = getattr(title, "text", title) if title is not None else ""
    if not text:
        return chart.properties(title=alt.TitleParams(text=note, anchor="start", subtitleColor="#555"))
    old = getattr(title, "subtitle", alt.Undefined)
    old = [] if old is alt.Undefined else [old] if isinstance(old, str) else list(old)
    return chart.properties(title=alt.TitleParams(text=text, subtitle=[note, *old] if old else note,
                                                  anchor="start", subtitleColor="#555"))


def _color(data: pd.DataFrame, column: str) -> tuple[pd.DataFrame, alt.Color, list]:
    """Display names and fixed colours for a `policy` column; natural (numeric) order for anything else."""
    legend = alt.Legend(labelLimit=0, symbolLimit=0, title=column.replace("_", " "))
    if column == "policy":
        # The scale spans the whole vocabulary, so that charts concatenated with other policies share one
        # consistent scale; the legend lists only the policies drawn.
        names = display_names(data[column].unique())
        data = data.assign(policy=data[column].map(names))
        order = legend_order(names.values())
        everything = {**{d: p for p, (d, _) in VOCABULARY.items()}, **{d: p for p, d in names.items()}}
        domain = legend_order(everything)
        legend = alt.Legend(labelLimit=0, symbolLimit=0, title="policy", values=order)
        scale = alt.Scale(domain=domain, range=[policy_color(everything[d]) for d in domain])
    elif column == "ordering" and set(data[column]) <= set(ORDERINGS):    # Synergy's orderings: their hues
        order = [o for o in ORDERINGS if o in set(data[column])]
        scale = alt.Scale(domain=list(ORDERINGS), range=[policy_color(f"{o}+tune") for o in ORDERINGS])
        legend = alt.Legend(labelLimit=0, symbolLimit=0, title=column, values=order)
    else:
        order = natural_sorted(data[column].tolist())
        scale = alt.Scale(domain=order)
    return data, alt.Color(f"{column}:N", sort=order, scale=scale, legend=legend), order


def _interactions(color: str) -> tuple:
    """Legend selection (click a legend entry to highlight it) and zoom/pan, named uniquely per chart."""
    n = next(_PARAM_IDS)
    return (alt.selection_point(name=f"pick{n}", fields=[color], bind="legend"),
            alt.selection_interval(name=f"zoom{n}", bind="scales"))


def _flagged(data: pd.DataFrame, y: str) -> pd.Series:
    """Rows whose value is not a finished measurement (saturated, timed out, or not finite)."""
    state = pd.Series("", index=data.index, dtype=object)
    for column, word in FLAGS.items():
        if column in data:
            state[data[column].fillna(False).astype(bool) & (state == "")] = word
    values = pd.to_numeric(data[y], errors="coerce")
    state[~np.isfinite(values) & (state == "")] = "saturated"
    return state


def lines(frame: pd.DataFrame, x: str, y: str, color: str, title: str, x_title: str, y_title: str,
          y_max: float | None = None, log: bool = False, dash: str | None = None,
          reference: pd.DataFrame | None = None, reference_label: str = "artifact",
          differs: tuple[float, str] | None = None) -> alt.LayerChart:
    """Mean of `y` per (`x`, `color`) over seeds, one line per `color`. A point with any saturated or timed-out
    seed is not on the line: it is a cross at the top of the axis; so is a point above `y_max` (an arrow, its
    value in the tooltip: nothing is clipped or pinned to the border). `reference` (same columns) draws an
    artifact's numbers as dashed lines with open markers (a diamond at the top where above `y_max`);
    `differs=(tolerance, why)` rings our points more than `tolerance` from the artifact's and says why in the
    subtitle. Zoom, tooltips and legend selection in JupyterLab."""
    keys = [x, color] + ([dash] if dash and dash not in (x, color) else [])
    data = frame[list(dict.fromkeys(keys + [y] + [c for c in FLAGS if c in frame]))].copy()
    data["state"] = _flagged(data, y)
    data["seeds"] = 1
    agg = data.groupby(keys, as_index=False, sort=False).agg(
        **{y: (y, lambda s: float(pd.to_numeric(s, errors="coerce").mean())),
           "state": ("state", lambda s: next((v for v in s if v), "")), "seeds": ("seeds", "sum")})
    agg[y] = pd.to_numeric(agg[y], errors="coerce")
    ref = pd.DataFrame(columns=keys[:2] + [y])
    if reference is not None:
        ref = reference[reference[color].isin(frame[color].unique())][keys[:2] + [y]].dropna()
    if y_max is not None:
        agg.loc[(agg["state"] == "") & (agg[y] > y_max), "state"] = "above the axis"
        ref = ref.assign(state=np.where(ref[y] > y_max, "artifact, above the axis", ""))
    done, flagged = agg[agg["state"] == ""], agg[agg["state"] != ""]
    if "state" in ref:
        flagged = pd.concat([flagged, ref[ref["state"] != ""]], ignore_index=True)
        ref = ref[ref["state"] == ""].drop(columns="state")
    top = y_max if y_max is not None else (float(done[y].max()) * (1.5 if log else 1.08) if len(done) else 1.0)
    done = done.assign(layer="done")
    flagged = flagged.assign(value=flagged[y], **{y: top}, layer="flagged")
    parts = [done, flagged, ref.assign(layer="reference")]
    everything, enc_color, _ = _color(pd.concat(parts, ignore_index=True), color)   # one scale for all layers
    done, flagged, ref = (everything[everything["layer"] == k].drop(columns="layer")
                          for k in ("done", "flagged", "reference"))

    ys = alt.Scale(type="log", base=2) if log else alt.Scale(domain=[0, y_max] if y_max else alt.Undefined)
    xs = alt.Scale(type="log", base=2) if log else alt.Scale()
    x_enc, y_enc = alt.X(f"{x}:Q", title=x_title, scale=xs), alt.Y(f"{y}:Q", title=y_title, scale=ys)
    pick, zoom = _interactions(color)
    opacity = alt.condition(pick, alt.value(1.0), alt.value(0.15))
    tips = [alt.Tooltip(f"{color}:N"), alt.Tooltip(f"{x}:Q"), alt.Tooltip(f"{y}:Q", format=",.3f"), "seeds:Q"]
    enc = dict(x=x_enc, y=y_enc, color=enc_color, opacity=opacity, tooltip=tips + ([f"{dash}:N"] if dash else []))
    if dash:
        enc["strokeDash"] = alt.StrokeDash(f"{dash}:N", sort=natural_sorted(done[dash].tolist()),
                                           legend=alt.Legend(labelLimit=0))
    layers = [alt.Chart(done).mark_line(point=True).encode(**enc).add_params(pick, zoom)]
    if len(ref):
        layers.append(alt.Chart(ref).mark_line(strokeDash=[5, 3], point=alt.OverlayMarkDef(filled=False, size=40))
                      .encode(x=x_enc, y=y_enc, color=enc_color, opacity=opacity,
                              tooltip=[alt.Tooltip(f"{color}:N"), alt.Tooltip(f"{x}:Q"),
                                       alt.Tooltip(f"{y}:Q", format=",.3f", title=reference_label)]))
    if len(flagged):
        layers.append(alt.Chart(flagged).mark_point(size=90, filled=True).encode(
            x=x_enc, y=y_enc, color=enc_color, opacity=opacity,
            shape=alt.Shape("state:N", scale=alt.Scale(domain=list(OFF_LINE), range=list(OFF_LINE.values())),
                            title="off the line"),
            tooltip=[alt.Tooltip(f"{color}:N"), alt.Tooltip(f"{x}:Q"), alt.Tooltip("state:N"),
                     alt.Tooltip("value:Q", format=",.3f")]))
    said = "the artifact's stored numbers" if reference_label == "artifact" else f"the {reference_label}'s numbers"
    # Where dashes tell a `dash` column's values apart, the artifact's points are told by their open markers.
    subtitle = [f"{'open markers' if dash else 'dashed'}: {said}"] if len(ref) else []
    off = _differing(done, reference, x, y, color, differs[0]) if differs and reference is not None else done[:0]
    if len(off):
        layers.append(alt.Chart(off).mark_point(size=260, shape="circle", filled=False, color="black",
                                               strokeWidth=1.5).encode(
            x=x_enc, y=y_enc, tooltip=[alt.Tooltip(f"{color}:N"), alt.Tooltip(f"{x}:Q"),
                                       alt.Tooltip(f"{y}:Q", format=",.2f", title="ours"),
                                       alt.Tooltip("artifact:Q", format=",.2f"), alt.Tooltip("gap:N")]))
        subtitle += textwrap.wrap(f"ringed: {len(off)} point(s) more than {differs[0]:.0%} from the artifact's; "
                                  f"{differs[1]}", 64)            # a long subtitle would widen the panel
    return alt.layer(*layers, title=alt.TitleParams(title, subtitle=subtitle or alt.Undefined)).properties(
        width=360, height=240)


def _differing(done: pd.DataFrame, reference: pd.DataFrame, x: str, y: str, color: str,
               tolerance: float) -> pd.DataFrame:
    """Our drawn points (display names in `color`) more than `tolerance` from the reference's (registry names),
    with the artifact's value and the gap in words."""
    ref = reference[[x, color, y]].rename(columns={y: "artifact"})
    ref[color] = ref[color].map(display_names(ref[color].unique()))
    both = done.merge(ref, on=[x, color])
    gap = both[y] / both["artifact"] - 1
    return both[gap.abs() > tolerance].assign(gap=[f"{g:+.0%}" for g in gap[gap.abs() > tolerance]])


def cdf_points(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of the finite `values` as (value, fraction) points, at most CDF_POINTS of them."""
    v = np.sort(values[np.isfinite(values)])
    probs = np.arange(1, len(v) + 1) / max(len(v), 1)
    if len(v) > CDF_POINTS:
        probs = np.linspace(1 / len(v), 1.0, CDF_POINTS)
        v = np.quantile(v, probs, method="inverted_cdf")
    return v, probs


def cdf(frame: pd.DataFrame, value: str, color: str, title: str, x_title: str) -> alt.Chart:
    """Empirical CDFs of `value`, one per `color` (at most CDF_POINTS points each)."""
    rows = []
    present = frame[[value, color]] if {value, color} <= set(frame.columns) else pd.DataFrame(columns=[value, color])
    for key, group in present.dropna().groupby(color, sort=False):
        v, probs = cdf_points(group[value].to_numpy(dtype=float))
        if len(v):
            rows.append(pd.DataFrame({value: v, "cdf": probs, color: key}))
    data = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=[value, "cdf", color])
    data, enc_color, _ = _color(data, color)
    pick, zoom = _interactions(color)
    return alt.Chart(data, title=title).mark_line(interpolate="step-after").encode(
        x=alt.X(f"{value}:Q", title=x_title), y=alt.Y("cdf:Q", title="fraction of jobs"), color=enc_color,
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
        tooltip=[alt.Tooltip(f"{color}:N"), alt.Tooltip(f"{value}:Q", format=",.3f"),
                 alt.Tooltip("cdf:Q", format=".2f")]).add_params(pick, zoom).properties(width=360, height=240)


def grouped_bars(frame: pd.DataFrame, x: str, y: str, color: str, title: str, y_title: str,
                 reference: pd.DataFrame | None = None, source: str = "the artifact") -> alt.Chart | alt.LayerChart:
    """Bars of `y` per `x`, one bar per `color` value side by side; `reference` (same columns) draws the numbers
    of `source` (an artifact, a paper) as black ticks on the bars."""
    data, enc_color, order = _color(frame, color)
    xs = alt.X(f"{x}:N", title=None, sort=natural_sorted(data[x].tolist()))
    offset = alt.XOffset(f"{color}:N", sort=order, scale=alt.Scale(domain=order))
    bars = alt.Chart(data, title=title).mark_bar().encode(
        x=xs, xOffset=offset, y=alt.Y(f"{y}:Q", title=y_title), color=enc_color,
        tooltip=[x, color, alt.Tooltip(f"{y}:Q", format=".2f")])
    if reference is None or not len(reference):
        return bars.properties(width=320, height=220)
    ref, _, _ = _color(reference[reference[color].isin(frame[color].unique())][[x, color, y]].dropna(), color)
    ticks = alt.Chart(ref).mark_tick(color="black", thickness=2).encode(
        x=xs, xOffset=offset, y=alt.Y(f"{y}:Q"),
        tooltip=[x, color, alt.Tooltip(f"{y}:Q", format=".2f", title=source)])
    return alt.layer(bars, ticks, title=alt.TitleParams(title, subtitle=f"black ticks: {source}'s numbers")
                     ).properties(width=320, height=220)


#: Above this many rows or columns a heat map's cells are too small for their numbers: values in the tooltip.
HEATMAP_LABELS_UP_TO = 12


def heatmap(frame: pd.DataFrame, x: str, y: str, value: str, title: str, missing: str = "no value") -> alt.LayerChart:
    """A square heat map of `value` over (`x`, `y`), labelled with the values where the cells have room for them
    (else in the tooltip); a cell whose value is 0 or missing is grey, with `missing` as its key (e.g. "cannot be
    co-located"). Numbers in labels sort by value."""
    shown = frame[pd.to_numeric(frame[value], errors="coerce").fillna(0) > 0]
    base = alt.Chart(shown).encode(
        x=alt.X(f"{x}:N", title=x.replace("_", " "), sort=natural_sorted(frame[x].tolist())),
        y=alt.Y(f"{y}:N", title=y.replace("_", " "), sort=natural_sorted(frame[y].tolist())),
        tooltip=[x, y, alt.Tooltip(f"{value}:Q", format=".3f")])
    layers = [base.mark_rect().encode(color=alt.Color(f"{value}:Q", scale=alt.Scale(scheme="viridis"),
                                                      title=value.replace("_", " "), legend=alt.Legend(titleLimit=0)))]
    empty = frame.drop(shown.index).assign(cell=missing)
    if len(empty):
        layers.append(alt.Chart(empty).mark_rect().encode(
            x=f"{x}:N", y=f"{y}:N", tooltip=[x, y, "cell:N"],
            fill=alt.Fill("cell:N", scale=alt.Scale(domain=[missing], range=["#d9d9d9"]), title=None,
                          legend=alt.Legend(labelLimit=0))))
    labelled = max(frame[x].nunique(), frame[y].nunique()) <= HEATMAP_LABELS_UP_TO
    if labelled:
        layers.append(base.mark_text(fontSize=8).encode(text=alt.Text(f"{value}:Q", format=".2f")))
    subtitle = alt.Undefined if labelled else "each cell's value in its tooltip"
    return alt.layer(*layers, title=alt.TitleParams(title, subtitle=subtitle)).properties(width=380, height=380)


def relative_bars(frame: pd.DataFrame, title: str) -> alt.HConcatChart:
    """The canonical Shockwave figure: one horizontal bar panel per metric (`metric`, `policy`, `value`,
    `relative`), each bar labelled with its value relative to the reference policy; an optional `artifact`
    column draws the stored number as a black tick on the bar."""
    data, enc_color, order = _color(frame, "policy")
    enc_color = enc_color.legend(None)
    panels = []
    for metric, part in data.groupby("metric", sort=False):
        base = alt.Chart(part, title=metric).encode(
            y=alt.Y("policy:N", sort=order, title=None), x=alt.X("value:Q", title=None),
            tooltip=["policy", alt.Tooltip("value:Q", format=",.3f"), alt.Tooltip("relative:Q", format=".2f")])
        layer = base.mark_bar().encode(color=enc_color) + base.mark_text(align="left", dx=3, fontSize=9).encode(
            text=alt.Text("relative:Q", format=".2f"))
        if "artifact" in part and part["artifact"].notna().any():
            layer += alt.Chart(part.dropna(subset=["artifact"])).mark_tick(color="black", thickness=2).encode(
                y=alt.Y("policy:N", sort=order), x="artifact:Q",
                tooltip=["policy", alt.Tooltip("artifact:Q", title="artifact (stored)", format=",.3f")])
        panels.append(layer.properties(width=190, height=150))
    return alt.hconcat(*panels, title=alt.TitleParams(title, subtitle="black ticks: the artifact's stored numbers"
                                                      if "artifact" in data and data["artifact"].notna().any()
                                                      else alt.Undefined))


def seed_strip(frame: pd.DataFrame, title: str) -> alt.HConcatChart:
    """One panel per metric: our runs (`source` hetsched, e.g. one per solver seed) as points with their median
    as a thick tick, an artifact's runs (`source` artifact) as black ticks; `run` names each in the tooltip."""
    panels = []
    for metric, part in frame.groupby("metric", sort=False):
        y = alt.Y("source:N", title=None, sort=["hetsched", "artifact"])
        tooltip = ["run", alt.Tooltip("value:Q", format=",.3f")]
        ours = part[part["source"] == "hetsched"]
        layer = alt.Chart(ours).mark_circle(size=60, opacity=0.7, color=policy_color("shockwave")).encode(
            x=alt.X("value:Q", title=None, scale=alt.Scale(zero=False)), y=y, tooltip=tooltip)
        layer += alt.Chart(ours).mark_tick(thickness=3, size=22, color=policy_color("shockwave")).encode(
            x="median(value):Q", y=y, tooltip=[alt.Tooltip("median(value):Q", title="median", format=",.3f")])
        if (part["source"] == "artifact").any():
            layer += alt.Chart(part[part["source"] == "artifact"]).mark_tick(color="black", thickness=2).encode(
                x="value:Q", y=y, tooltip=tooltip)
        panels.append(layer.properties(title=metric, width=190, height=70))
    return alt.hconcat(*panels, title=alt.TitleParams(
        title, subtitle="points: one run per solver seed, thick tick: their median; black ticks: the artifact's runs"))


def interval_dots(frame: pd.DataFrame, y: str, x: str, ci: str, facet: str, title: str, x_title: str,
                  color: str | None = None, zero: float | None = None, subtitle: str = "") -> alt.FacetChart:
    """One panel per `facet` value: a dot at `x` for each `y` row and a bar of +/- `ci` (a 95 % interval);
    `zero` draws a rule (e.g. no gain). `color="policy"` draws each policy in its own colour (the rows name
    them, so without a legend). `subtitle`: a line under the title (wrapped)."""
    data = frame.assign(_lo=frame[x] - frame[ci].fillna(0), _hi=frame[x] + frame[ci].fillna(0))
    enc = {"color": alt.Color(f"{color}:N")} if color else {}
    if color == "policy":
        data, by_policy, _ = _color(data, "policy")
        enc = {"color": by_policy.legend(None)}
    base = alt.Chart().encode(y=alt.Y(f"{y}:N", title=None, sort=None))
    layers = [base.mark_rule().encode(x=alt.X("_lo:Q", title=x_title), x2="_hi:Q", **enc),
              base.mark_point(filled=True, size=50).encode(
                  x=f"{x}:Q", tooltip=[y, alt.Tooltip(f"{x}:Q", format=".3g"), alt.Tooltip(f"{ci}:Q", format=".2g")],
                  **enc)]
    if zero is not None:
        layers.append(alt.Chart().mark_rule(color="#888", strokeDash=[4, 4]).encode(x=alt.datum(zero)))
    return alt.layer(*layers, data=data).properties(width=260).facet(
        column=alt.Column(f"{facet}:N", title=None, sort=None),
        title=alt.TitleParams(title, subtitle=textwrap.wrap(subtitle, 110) or alt.Undefined)).resolve_scale(
        x="independent")
