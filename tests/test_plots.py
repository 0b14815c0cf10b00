"""Chart helpers: saturated points drawn as such, the artifact's numbers beside ours, bounded data, offline output."""

import base64
import json

import numpy as np
import pandas as pd
import pytest

from hetsched.ui import html as page
from hetsched.ui.plots import CDF_POINTS, VEGA_MIME, cdf, lines, publish, seed_strip, with_note
from hetsched.ui.rendering import _offline_bundle


def _layers(chart) -> list[dict]:
    return chart.to_dict()["layer"]


def _frame():
    rows = [dict(policy=p, rate=r, seed=s, jct=r * k, saturated=False)
            for p, k in (("max_min_fairness", 3.0), ("max_min_fairness_perf", 1.0)) for r in (1, 2, 3) for s in (0, 1)]
    rows.append(dict(policy="max_min_fairness", rate=4, seed=0, jct=np.inf, saturated=True))
    rows.append(dict(policy="max_min_fairness", rate=4, seed=1, jct=20.0, saturated=False))
    return pd.DataFrame(rows)


def test_a_saturated_point_is_a_marker_not_a_value():
    chart = lines(_frame(), "rate", "jct", "policy", "t", "x", "y", y_max=50)
    line, flagged = _layers(chart)[0], _layers(chart)[-1]
    drawn = pd.DataFrame(chart.to_dict()["datasets"][line["data"]["name"]])
    assert set(drawn["policy"]) == {"LAS", "Gavel"}                   # the papers' names
    assert 4 not in set(drawn["rate"])                                  # one seed saturated: not on the line
    marks = pd.DataFrame(chart.to_dict()["datasets"][flagged["data"]["name"]])
    assert marks[["rate", "jct", "state"]].values.tolist() == [[4, 50, "saturated"]]
    assert drawn.loc[(drawn["rate"] == 2) & (drawn["policy"] == "LAS"), "jct"].item() == 6.0   # mean of seeds


def test_two_policies_with_one_papers_name_are_two_lines():
    frame = pd.DataFrame([dict(policy=p, rate=r, jct=r * k, saturated=False)
                          for p, k in (("gavel_las+fair", 1.0), ("LAS+fair", 2.0)) for r in (1, 2)])
    chart = lines(frame, "rate", "jct", "policy", "t", "x", "y")
    (data,) = chart.to_dict()["datasets"].values()                     # no saturated point: one dataset
    drawn = pd.DataFrame(data)
    assert drawn.groupby("policy")["jct"].sum().to_dict() == {"LAS (Proportional) [gavel_las+fair]": 3.0,
                                                               "LAS (Proportional) [LAS+fair]": 6.0}


def test_nan_costs_of_a_saturated_run_are_not_drawn_as_zero():
    frame = pd.DataFrame([dict(policy="max_min_fairness_perf", rate=1, cost=3.0, saturated=False),
                          dict(policy="max_min_fairness_perf", rate=2, cost=np.nan, saturated=True)])
    chart = lines(frame, "rate", "cost", "policy", "t", "x", "y")
    marks = pd.DataFrame(chart.to_dict()["datasets"][_layers(chart)[-1]["data"]["name"]])
    assert marks["state"].tolist() == ["saturated"] and marks["cost"].item() > 3.0     # at the top, flagged


def test_reference_numbers_are_drawn_only_for_the_policies_shown():
    ref = pd.DataFrame([dict(policy=p, rate=r, jct=1.5 * r)
                        for p in ("max_min_fairness_perf", "gavel_fifo") for r in (1, 2)])
    chart = lines(_frame(), "rate", "jct", "policy", "t", "x", "y", reference=ref)
    dashed = [l for l in _layers(chart) if isinstance(l["mark"], dict) and l["mark"].get("strokeDash")]
    assert len(dashed) == 1
    drawn = pd.DataFrame(chart.to_dict()["datasets"][dashed[0]["data"]["name"]])
    assert set(drawn["policy"]) == {"Gavel"}
    legend = _layers(chart)[0]["encoding"]["color"]["legend"]["values"]
    assert "FIFO" not in legend


def test_concatenated_charts_share_one_colour_scale():
    jobs = pd.DataFrame({"jct": [1.0, 2.0, 3.0], "policy": ["gavel_fifo", "gavel_fifo", "max_min_fairness"]})
    both = (lines(_frame(), "rate", "jct", "policy", "t", "x", "y") | cdf(jobs, "jct", "policy", "c", "x")).to_dict()
    scales = [both["hconcat"][0]["layer"][0]["encoding"]["color"]["scale"],
              both["hconcat"][1]["encoding"]["color"]["scale"]]
    assert scales[0] == scales[1]
    fifo = scales[0]["domain"].index("FIFO")
    assert scales[0]["range"][fifo] == "#bcbd22"


def test_cdf_of_many_jobs_stays_small():
    jobs = pd.DataFrame({"jct": np.random.default_rng(0).exponential(5.0, 50_000), "policy": "gavel_fifo"})
    data = pd.DataFrame(next(iter(cdf(jobs, "jct", "policy", "t", "x").to_dict()["datasets"].values())))
    assert len(data) == CDF_POINTS and data["cdf"].is_monotonic_increasing and data["cdf"].iloc[-1] == 1.0


def test_offline_bundle_and_published_files(tmp_path):
    chart = lines(_frame(), "rate", "jct", "policy", "t", "x", "y")
    bundle, metadata = _offline_bundle(chart.to_dict())
    assert metadata[VEGA_MIME]["embed_options"]["renderer"] == "svg"
    assert set(bundle) == {VEGA_MIME, "image/png", "text/plain"}
    assert base64.b64decode(bundle["image/png"])[:4] == b"\x89PNG"
    assert bundle[VEGA_MIME]["$schema"].endswith("vega/v5.json") and bundle[VEGA_MIME]["marks"]
    published = publish(chart, tmp_path, "quick", _frame().assign(cluster="12:12:12"))
    assert published.to_dict()["title"]["subtitle"].startswith("quick preset · cluster 12:12:12 · seeds 0, 1")
    html = (tmp_path / "figure.html").read_text()
    assert "<script src=\"http" not in html and "vega" in html
    assert (tmp_path / "figure.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("rows", [6_000, 60_000])
def test_large_frames_never_raise(rows):
    import altair as alt
    frame = pd.DataFrame({"x": np.arange(rows), "y": np.arange(rows) % 7})
    alt.Chart(frame).mark_point().encode(x="x", y="y").to_dict()     # altair's 5,000-row limit is off


def test_cdf_of_no_jobs_is_an_empty_chart():
    """A saturated window finishes no job: its CDF panel is empty, not a KeyError."""
    chart = cdf(pd.DataFrame(), "jct_h", "policy", "t", "x")
    assert not next(iter(chart.to_dict()["datasets"].values()), [])


def test_seed_strip_keeps_its_key_under_the_preset_note():
    frame = pd.DataFrame({"metric": ["Worst FTF (rho)"] * 4, "source": ["hetsched"] * 3 + ["artifact"],
                          "run": ["seed 0", "seed 1", "seed 2", "stored"], "value": [1.5, 1.6, 1.7, 1.78]})
    spec = with_note(seed_strip(frame, "t"), "quick preset").to_dict()
    assert spec["title"]["subtitle"][0] == "quick preset" and "median" in spec["title"]["subtitle"][1]
    marks = [layer["mark"]["type"] for layer in spec["hconcat"][0]["layer"]]
    assert marks == ["circle", "tick", "tick"]


def _spec_of(text: str) -> tuple[str, dict, str]:
    """A figure page cut around its spec: (before, the spec, after)."""
    start = text.index("const spec = ") + len("const spec = ")
    end = text.index(";\n", start)
    return text[:start], json.loads(text[start:end].replace("<\\/", "</")), text[end:]


def test_figure_pages_are_vl_converts_and_build_its_shell_once(tmp_path, monkeypatch):
    import vl_convert as vlc

    monkeypatch.setenv("HETSCHED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(page, "_shell", None)
    chart = lines(_frame(), "rate", "jct", "policy", "t", "x", "y").properties(title="JCT é ✓ (h) </script>")
    spec = chart.to_dict()
    ours, theirs = _spec_of(page.vegalite_page(spec)), _spec_of(vlc.vegalite_to_html(spec, bundle=True))
    assert ours[0] == theirs[0] and ours[2] == theirs[2] and ours[1] == spec == theirs[1]
    assert len(list((tmp_path / "cache").glob("vega-page-*.html"))) == 1
    # A new process reads the shell from the file: vl-convert's bundler is not called again.
    monkeypatch.setattr(page, "_shell", None)
    monkeypatch.setattr(vlc, "vegalite_to_html", lambda *a, **k: pytest.fail("bundled again"))
    text = page.vegalite_page(spec)
    assert _spec_of(text)[0] == theirs[0] and text.count("</script>") == theirs[0].count("</script>") + 1


def test_a_foreign_or_unwritable_cache_still_gives_the_page(tmp_path, monkeypatch):
    import vl_convert as vlc

    spec = {"mark": "point", "description": "x"}
    expected = vlc.vegalite_to_html(spec, bundle=True)
    cache = tmp_path / "cache"
    monkeypatch.setenv("HETSCHED_CACHE_DIR", str(cache))
    monkeypatch.setattr(page, "_shell", None)
    page.vegalite_page(spec)
    (shell_file,) = cache.glob("vega-page-*.html")
    header = shell_file.read_text().split("\n", 1)[0]
    for stale in ("<!-- another version -->\n<html>", f"{header}\n<html>truncated"):
        shell_file.write_text(stale)
        monkeypatch.setattr(page, "_shell", None)
        assert page.vegalite_page(spec) == expected                  # rebuilt, and written again
        assert shell_file.read_text().startswith(header) and len(shell_file.read_text()) > len(expected) // 2
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("HETSCHED_CACHE_DIR", str(blocked / "cache"))   # a folder that cannot be made
    monkeypatch.setattr(page, "_shell", None)
    assert page.vegalite_page(spec) == expected
