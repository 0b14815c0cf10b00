"""The figure check (docs/rules.md#figures): what a reviewer sends back, found in a figure's Vega-Lite spec.

`problems(spec)` walks every view of a saved figure (`<name>.vl.json`, written by `plots.save_figure`) and names:
a policy drawn in a colour other than its fixed one (`hetsched/ui/names.py`), or in Vega's default colours; a
data point outside an axis's set domain (Vega clips it, silently); an axis in seconds whose values pass 10,000
(hours read better); a legend titled with a column name (`paper_rate`).
"""

from __future__ import annotations

import functools
import math
from typing import Iterator

SECONDS_LIMIT = 10_000.0
_VIEWS = ("layer", "hconcat", "vconcat", "concat")


@functools.lru_cache(maxsize=1)
def _policy_of_label() -> dict[str, str]:
    """Every display name (and bracketed name) of the vocabulary and Synergy's compositions -> registry name."""
    from hetsched.ui.names import MECHANISMS, ORDERINGS, VOCABULARY, display_name

    # Gavel's policies with a placement first: where one reads like a Synergy ordering's ("FIFO (Synergy-TUNE)"),
    # a figure without brackets shows Synergy's (names.distinct brackets both when both are drawn).
    names = [f"{p}+{m}" for p in VOCABULARY for m in ("tune", "fair", "greedy")]
    names += [*VOCABULARY, *(o + m for o in ORDERINGS for m in ("", *(f"+{k}" for k in MECHANISMS if k != "greedy")))]
    return {display_name(n): n for n in names}


def _policy(label: object, field: str) -> str | None:
    if not isinstance(label, str):
        return None
    if field == "ordering":                                     # Synergy's orderings: the hue of their TUNE
        from hetsched.ui.names import ORDERINGS

        return f"{label}+tune" if label in ORDERINGS else None
    if label.endswith("]") and " [" in label:                 # "LAS (Proportional) [LAS+fair]"
        return label[label.rindex(" [") + 2:-1]
    return _policy_of_label().get(label)


def _views(spec: dict, data=None) -> Iterator[tuple[dict, object]]:
    """Every unit view with the data it draws (inherited from its parents when it names none)."""
    data = spec.get("data", data)
    if "spec" in spec:                                          # facet or repeat
        yield from _views(spec["spec"], data)
    for key in _VIEWS:
        for child in spec.get(key, []):
            yield from _views(child, data)
    if "mark" in spec:
        yield spec, data


def _rows(data, datasets: dict) -> list[dict]:
    if not isinstance(data, dict):
        return []
    if "values" in data:
        return data["values"] if isinstance(data["values"], list) else []
    return datasets.get(data.get("name"), [])


def _numbers(rows: list[dict], field: str) -> list[float]:
    out = []
    for r in rows:
        v = r.get(field)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
    return out


def _where(view: dict) -> str:
    title = view.get("title")
    return f" ({title if isinstance(title, str) else title.get('text', '')})" if title else ""


def problems(spec: dict) -> list[str]:
    """What is wrong with a figure, one line per problem (empty: nothing found)."""
    from hetsched.ui.names import color as policy_color

    datasets = spec.get("datasets", {})
    found: list[str] = []
    for view, data in _views(spec):
        rows, enc = _rows(data, datasets), view.get("encoding", {})
        for channel in ("x", "y", "x2", "y2"):
            e = enc.get(channel, {})
            field = e.get("field")
            if not field:
                continue
            values = _numbers(rows, field)
            domain = (e.get("scale") or {}).get("domain")
            if values and isinstance(domain, list) and len(domain) == 2 and all(
                    isinstance(d, (int, float)) for d in domain):
                lo, hi = min(domain), max(domain)
                out = [v for v in values if v < lo - 1e-9 * abs(lo) or v > hi + 1e-9 * abs(hi)]
                if out:
                    found.append(f"{channel} '{field}': {len(out)} point(s) outside the domain [{lo:g}, {hi:g}] "
                                 f"(e.g. {out[0]:g}){_where(view)}")
            title = str(e.get("title") or "")
            view_title = view.get("title")
            view_title = str(view_title if isinstance(view_title, str) else (view_title or {}).get("text", ""))
            in_seconds = field.endswith("_s") or "(s)" in title or title.endswith(" s") or (
                e.get("title", "") is None and view_title.endswith("(s)"))
            if in_seconds and values and max(map(abs, values)) > SECONDS_LIMIT:
                found.append(f"{channel} '{field}' is in seconds up to {max(values):,.0f}: use hours{_where(view)}")
        for channel in ("color", "fill", "stroke", "shape", "strokeDash", "size"):
            e = enc.get(channel, {})
            field = e.get("field")
            if not field or e.get("legend", {}) is None:
                continue
            title = e.get("title", (e.get("legend") or {}).get("title"))
            if title is None and "_" in field or isinstance(title, str) and "_" in title:
                found.append(f"{channel} legend titled with the column name {title or field!r}{_where(view)}")
            if channel not in ("color", "fill", "stroke"):
                continue
            scale = e.get("scale") or {}
            labels = {r.get(field) for r in rows} | set(scale.get("domain") or [])
            drawn = {lab: p for lab in labels if (p := _policy(lab, field)) is not None}
            if not drawn:
                continue
            domain, colours = scale.get("domain"), scale.get("range")
            if not isinstance(colours, list) or not isinstance(domain, list):
                found.append(f"{channel} '{field}': policies in Vega's default colours, not their own"
                             f"{_where(view)}")
                continue
            for label, colour in zip(domain, colours):
                p = drawn.get(label)
                if p is not None and str(colour).lower() != policy_color(p).lower():
                    found.append(f"{channel} '{field}': {label!r} drawn {colour}, its colour is "
                                 f"{policy_color(p)}{_where(view)}")
    return list(dict.fromkeys(found))


# ---- drawn geometry (the rendered scene graph) ------------------------------------------------------------------
#: Character advances of a sans-serif font, in font sizes (Helvetica's); anything else counts as a letter.
_ADVANCE = {**dict.fromkeys("0123456789", 0.556), **dict.fromkeys(".,:;' ", 0.278), "-": 0.333, "\u2212": 0.584,
            "%": 0.889, "(": 0.333, ")": 0.333}


def _text_span(item: dict, x0: float) -> tuple[float, float] | None:
    """The horizontal extent of a shown, horizontal text item (its width estimated from its characters)."""
    if item.get("angle", 0) or not item.get("text") or item.get("opacity", 1) == 0:
        return None
    width = float(item.get("fontSize", 11)) * sum(_ADVANCE.get(c, 0.6) for c in str(item["text"]))
    x = x0 + float(item.get("x", 0))
    align = item.get("align", "left")
    left = x - width / 2 if align == "center" else x - width if align == "right" else x
    return left, left + width


def _scene_problems(node: dict, ox: float, oy: float, bounds: tuple[float, float] | None, found: list[str]) -> None:
    if not isinstance(node, dict):
        return
    mark, role, items = node.get("marktype"), node.get("role"), node.get("items", [])
    if mark == "text" and role in ("axis-label", "legend-label", "legend-title", "axis-title"):
        for item in items:
            span, limit = _text_span({**item, "angle": 0}, 0.0), float(item.get("limit") or 0)
            if span is not None and limit and span[1] - span[0] > limit + 1.0:
                found.append(f"{role.replace('-', ' ')} {str(item['text'])[:40]!r} cut at {limit:g} px")
    if mark == "text" and role in ("axis-label", "mark"):
        rows: dict[float, list[tuple[float, float, str]]] = {}
        for item in items:
            span = _text_span(item, ox)
            if span is not None:
                rows.setdefault(round(oy + float(item.get("y", 0)), 1), []).append((*span, str(item["text"])))
        for row in rows.values():
            row.sort()
            for (a0, a1, a), (b0, _, b) in zip(row, row[1:]):
                if b0 < a1 + 1.0:
                    what = "axis labels" if role == "axis-label" else "labels"
                    found.append(f"{what} {a!r} and {b!r} collide")
                    break
    if mark == "symbol" and role == "mark" and bounds is not None:
        w, h = bounds
        for item in items:
            x, y = float(item.get("x", 0)), float(item.get("y", 0))
            if x > w - 1.0 or y < 1.0 or x < -1.0 or y > h + 1.0:
                found.append(f"a point on or past the plot's {'right' if x > w - 1 else 'top' if y < 1 else 'edge'}"
                             f" border, drawn in part ({str(item.get('description', ''))[:80]})")
                break
    if mark == "line" and role == "mark" and bounds is not None:
        top = [i for i in items if float(i.get("y", 1)) <= 0.5]
        if len(top) >= 2:
            found.append(f"a line pinned to the top border ({str(top[0].get('description', ''))[:80]})")
    for item in items:
        if isinstance(item, dict) and "items" in item:
            size = (float(item["width"]), float(item["height"])) if "width" in item and "height" in item else bounds
            for child in item["items"]:
                _scene_problems(child, ox + float(item.get("x", 0)), oy + float(item.get("y", 0)), size, found)


def layout_problems(spec: dict) -> list[str]:
    """What the drawn figure shows wrong: colliding axis or cell labels, a point on the top or right border (half
    of it cut: the domain ends at it), a line pinned to the top border. Reads Vega's scene graph."""
    import vl_convert as vlc

    found: list[str] = []
    scene = vlc.vegalite_to_scenegraph(spec)
    _scene_problems(scene.get("scenegraph", {}), 0.0, 0.0, None, found)
    return list(dict.fromkeys(found))
