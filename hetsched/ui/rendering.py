"""How a chart becomes a notebook's output and files: the `hetsched` theme and renderer, and `save_figure`.

Importing this module enables the `hetsched` renderer: a chart's output is compiled Vega (which JupyterLab
renders with its own bundled Vega, no network) plus a PNG for viewers without Vega (GitHub, nbviewer, email).
`save_figure` writes PNG, SVG, a self-contained HTML (Vega inlined) and the Vega-Lite spec. Every figure gets
room at the ends of its axes (`with_room`, docs/rules.md#figures).
"""

from __future__ import annotations

import base64
from pathlib import Path

import altair as alt
import numpy as np

VEGA_MIME = "application/vnd.vega.v5+json"                         # JupyterLab's built-in Vega renderer


def with_room(spec: dict) -> dict:
    """`spec` with every quantitative x/y scale that sets no domain left un-niced: the theme's padding gives a
    point at a domain's end room, and a niced domain would then reach the next round number (a '-50' tick on
    JCTs that start at 0). Every figure goes through this (docs/rules.md#figures)."""
    if isinstance(spec, list):
        return [with_room(v) for v in spec]
    if not isinstance(spec, dict):
        return spec
    out = {k: with_room(v) for k, v in spec.items() if k != "datasets"}
    if "datasets" in spec:
        out["datasets"] = spec["datasets"]
    for channel in ("x", "y"):
        enc = out.get("encoding", {}).get(channel)
        if isinstance(enc, dict) and enc.get("type") == "quantitative" and isinstance(enc.get("scale", {}), dict):
            scale = enc.setdefault("scale", {})
            if "domain" not in scale and scale.get("type") not in ("log", "symlog"):
                scale.setdefault("nice", False)
    return out


def _offline_bundle(spec: dict, **_metadata) -> tuple[dict, dict]:
    """Compiled Vega for JupyterLab (rendered offline, interactive, as SVG) and a PNG fallback for the rest."""
    import vl_convert as vlc

    spec = with_room(spec)
    vega = vlc.vegalite_to_vega(spec)
    vega["$schema"] = "https://vega.github.io/schema/vega/v5.json"   # what Lab's renderer declares it reads
    png = base64.b64encode(vlc.vegalite_to_png(spec, scale=1)).decode()
    bundle = {VEGA_MIME: vega, "image/png": png, "text/plain": "<hetsched chart: Vega, with a PNG fallback>"}
    return bundle, {VEGA_MIME: {"embed_options": {"renderer": "svg"}}}


@alt.theme.register("hetsched", enable=True)
def _theme() -> alt.theme.ThemeConfig:
    """Room at the ends of every continuous axis (a point at a domain's end is drawn whole, not cut in half at
    the border), and axis labels that would touch are thinned (docs/rules.md#figures)."""
    return {"config": {"scale": {"continuousPadding": 8}, "axis": {"labelOverlap": True, "labelSeparation": 4}}}


alt.renderers.register("hetsched", _offline_bundle)
if alt.renderers.active in ("default", "html"):
    alt.renderers.enable("hetsched")
alt.data_transformers.disable_max_rows()       # never raise on size; the helpers below aggregate first


def save_figure(chart: alt.TopLevelMixin, out_dir: str | Path, name: str = "figure") -> list[Path]:
    """Write `<name>.png`, `<name>.svg`, `<name>.html` (self-contained, interactive) and `<name>.vl.json` (the
    Vega-Lite spec, which the figure check reads: `hetsched/ui/figure_check.py`) into `out_dir`."""
    import json

    from hetsched.ui.html import vegalite_page

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg", out / f"{name}.html", out / f"{name}.vl.json"]
    import vl_convert as vlc

    spec = with_room(chart.to_dict())
    paths[0].write_bytes(vlc.vegalite_to_png(spec, scale=2))
    paths[1].write_text(vlc.vegalite_to_svg(spec), encoding="utf-8")
    paths[2].write_text(vegalite_page(spec), encoding="utf-8")
    paths[3].write_text(json.dumps(_finite(spec), allow_nan=False), encoding="utf-8")
    return paths


def _finite(value):
    """`value` with every non-finite float as None (JSON's null, as Vega reads a missing value)."""
    if isinstance(value, float):
        return value if np.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
