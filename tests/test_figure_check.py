"""The figure check finds each defect it names, on charts made to have it, and passes a chart without them."""

from __future__ import annotations

import altair as alt
import pandas as pd

from hetsched.ui.figure_check import layout_problems, problems
from hetsched.ui.plots import heatmap
from hetsched.ui.names import color
from hetsched.ui.plots import lines


def _frame(**columns) -> pd.DataFrame:
    return pd.DataFrame(columns)


def test_a_chart_made_by_the_helpers_passes():
    frame = _frame(policy=["gavel", "gavel", "max_min_fairness", "max_min_fairness"], rate=[1, 2, 1, 2],
                   jct_h=[1.0, 2.0, 1.5, 3.0])
    assert problems(lines(frame, "rate", "jct_h", "policy", "t", "jobs/h", "JCT (h)").to_dict()) == []


def test_a_policy_in_another_colour_or_in_vegas_colours_is_found():
    data = _frame(policy=["Gavel", "AlloX"], v=[1.0, 2.0])
    wrong = alt.Chart(data).mark_bar().encode(x="policy:N", y="v:Q", color=alt.Color(
        "policy:N", title="policy", scale=alt.Scale(domain=["Gavel", "AlloX"], range=[color("gavel"), "#1f77b4"])))
    assert problems(wrong.to_dict()) == [f"color 'policy': 'AlloX' drawn #1f77b4, its colour is {color('allox')}"]
    default = alt.Chart(data).mark_bar().encode(x="policy:N", y="v:Q", color=alt.Color("policy:N", title="policy"))
    assert problems(default.to_dict()) == ["color 'policy': policies in Vega's default colours, not their own"]


def test_a_point_outside_the_domain_seconds_past_10000_and_a_column_as_legend_title_are_found():
    data = _frame(rate=[1.0, 6.0], makespan_s=[9_000.0, 40_000.0], paper_rate=["a", "b"])
    chart = alt.Chart(data).mark_point().encode(
        x=alt.X("rate:Q", scale=alt.Scale(domain=[0, 5])), y=alt.Y("makespan_s:Q", title="makespan (s)"),
        color="paper_rate:N")
    assert problems(chart.to_dict()) == [
        "x 'rate': 1 point(s) outside the domain [0, 5] (e.g. 6)",
        "y 'makespan_s' is in seconds up to 40,000: use hours",
        "color legend titled with the column name 'paper_rate'"]


def test_a_point_cut_at_the_border_colliding_labels_and_a_pinned_line_are_found():
    points = alt.Chart(_frame(rate=[1.0, 6.0], v=[1.0, 2.0])).mark_point().encode(x="rate:Q", y="v:Q")
    no_room = points.configure_scale(continuousPadding=0).to_dict()
    assert [p.split(" (")[0] for p in layout_problems(no_room)] == [
        "a point on or past the plot's right border, drawn in part"]
    assert layout_problems(points.to_dict()) == []                  # the project's theme leaves room
    long = _frame(x=[f"{i:,}" for i in range(10_000, 400_000, 10_000)], v=1.0)
    crowded = alt.Chart(long).mark_bar().encode(x=alt.X("x:N", axis=alt.Axis(labelAngle=0, labelOverlap=False)),
                                                y="v:Q").properties(width=200)
    assert any("collide" in p for p in layout_problems(crowded.to_dict()))
    pinned = alt.Chart(_frame(t=[0, 1, 2], v=[5.0, 9.0, 9.0])).mark_line().encode(
        x="t:Q", y=alt.Y("v:Q", scale=alt.Scale(domain=[0, 9], clamp=True))).configure_scale(continuousPadding=0)
    assert any("pinned to the top border" in p for p in layout_problems(pinned.to_dict()))


def test_a_large_heat_map_keeps_its_numbers_in_the_tooltip_and_keys_its_empty_cells():
    n = 25
    frame = _frame(a=[i for i in range(n) for _ in range(n)], b=[j for _ in range(n) for j in range(n)],
                   v=[0.0 if i == j else 1.0 + (i * j) % 7 / 10 for i in range(n) for j in range(n)])
    chart = heatmap(frame, "a", "b", "v", "t", missing="cannot be co-located").to_dict()
    assert layout_problems(chart) == []
    assert "cannot be co-located" in str(chart) and "tooltip" in str(chart["title"])
    small = heatmap(frame[(frame["a"] < 5) & (frame["b"] < 5)], "a", "b", "v", "t").to_dict()
    assert any(layer["mark"]["type"] == "text" for layer in small["layer"])


def test_a_panel_titled_in_seconds_is_found_and_shockwaves_panels_are_in_hours():
    from hetsched.experiments import shockwave as W
    from hetsched.ui.plots import relative_bars

    panel = alt.Chart(_frame(policy=["x"], value=[33_208.0]), title="Makespan (s)").mark_bar().encode(
        x=alt.X("value:Q", title=None), y="policy:N")
    assert problems(panel.to_dict()) == ["x 'value' is in seconds up to 33,208: use hours (Makespan (s))"]
    results = _frame(setup=["canonical"] * 2, policy=["shockwave", "allox"], label=["Shockwave", "AlloX"],
                     makespan_s=[24_000.0, 33_208.0], avg_jct_s=[9_865.5, 9_990.0], worst_ftf_rho=[1.5, 3.0],
                     unfair_pct=[5.0, 25.0])
    rel = W.relative(results)
    assert set(rel["metric"]) == {"Makespan (h)", "Average JCT (h)", "Worst FTF (rho)", "Unfair job fraction (%)"}
    assert problems(relative_bars(rel, "t").to_dict()) == []


def test_points_far_from_the_artifact_are_ringed_and_said_why():
    frame = _frame(policy=["gavel"] * 3, rate=[1, 2, 3], jct_h=[10.0, 20.0, 30.0])
    paper = _frame(policy=["gavel"] * 3, rate=[1, 2, 3], jct_h=[10.2, 20.0, 45.0])
    spec = lines(frame, "rate", "jct_h", "policy", "t", "x", "y", reference=paper,
                 differs=(0.05, "a reason")).to_dict()
    assert "ringed: 1 point(s) more than 5% from the artifact's; a reason" in " ".join(spec["title"]["subtitle"])
    ringed = [v for rows in spec["datasets"].values() for v in rows if "gap" in v]
    assert [(r["rate"], r["gap"]) for r in ringed] == [(3, "-33%")]


def test_every_figure_gets_room_at_its_ends_without_a_negative_tick():
    from hetsched.ui.rendering import with_room

    chart = alt.Chart(_frame(jct=[0.4, 280.0], f=[0.0, 1.0])).mark_line().encode(x="jct:Q", y="f:Q")
    spec = with_room(chart.to_dict())
    assert spec["encoding"]["x"]["scale"] == {"nice": False} and spec["encoding"]["y"]["scale"] == {"nice": False}
    import vl_convert as vlc
    svg = vlc.vegalite_to_svg(spec)
    assert "−50" not in svg and "-50" not in svg


def test_a_label_cut_short_is_found():
    data = _frame(case=["a fairly long case name · FIFO+tune · p99.9 JCT of the reference run"], v=[1.0])
    cut = alt.Chart(data).mark_bar().encode(y="case:N", x="v:Q")
    assert any("cut at 180 px" in p for p in layout_problems(cut.to_dict()))
    whole = alt.Chart(data).mark_bar().encode(y=alt.Y("case:N", axis=alt.Axis(labelLimit=0)), x="v:Q")
    assert layout_problems(whole.to_dict()) == []
