"""How the one-stream comparison is read (hetsched.experiments.compare_systems): numbers written as people write
them, a gain's interval in words, and which policies' intervals the seeds separate at all."""

from __future__ import annotations

import math
from itertools import combinations

import pandas as pd


def readable(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits, written out as people write numbers (190, 100, 0.0123, 12,300, 10), never
    in exponent form ("1e+02"); NaN and inf as they are."""
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    rounded = round(x, decimals)
    if rounded and math.floor(math.log10(abs(rounded))) > math.floor(math.log10(abs(x))):    # 99.96 -> 100
        decimals -= 1
    text = f"{rounded:,.{max(decimals, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def value_ci(row, m: str) -> str:
    """A summary row's mean of `m` and its 95 % half-width, written out ("190 ± 100"); the mean alone when one
    seed gives no interval."""
    half = row[f"{m}_ci"]
    return readable(row[m]) if math.isnan(half) else f"{readable(row[m])} ± {readable(half, 2)}"


def gain_text(gain: float, half: float) -> str:
    """A composition's gain for people: "+12.0 % ± 3.1 %", or "no significant difference" when the interval
    spans zero (then the numbers in brackets)."""
    if math.isnan(half):
        return f"{gain:+.1%} (one seed: no interval)".replace("%", " %")
    text = f"{gain:+.1%} ± {half:.1%}".replace("%", " %")
    return text if abs(gain) > half else f"no significant difference ({text})"


def separation(summary: pd.DataFrame, metric: str = "avg_jct_h") -> pd.DataFrame:
    """Per stream: how many pairs of policies (with a finite mean and an interval) the 95 % intervals of `metric`
    separate (|a - b| > half_a + half_b), of how many pairs."""
    out = []
    for stream, s in summary.groupby("stream", sort=False):
        s = s.dropna(subset=[metric, f"{metric}_ci"])
        pairs = list(combinations(zip(s[metric], s[f"{metric}_ci"]), 2))
        apart = sum(abs(a - b) > ha + hb for (a, ha), (b, hb) in pairs)
        out.append({"stream": stream, "pairs": len(pairs), "separated": int(apart)})
    return pd.DataFrame(out, columns=["stream", "pairs", "separated"])


def separation_note(summary: pd.DataFrame, preset: str, metric: str = "avg_jct_h") -> str:
    """One line for a chart: how many pairs the intervals separate, and, when fewer than half, that this preset's
    seeds cannot tell most of the policies apart (the paper preset's longer streams can)."""
    sep = separation(summary, metric)
    if not len(sep) or not sep["pairs"].sum():
        return ""
    apart, pairs = int(sep["separated"].sum()), int(sep["pairs"].sum())
    each = ", ".join(f"{r.stream} {r.separated}/{r.pairs}" for r in sep.itertuples() if r.pairs)
    text = f"the intervals separate {apart} of {pairs} pairs of policies ({each})"
    if apart * 2 < pairs:
        text += f": the {preset} preset cannot tell most of them apart; overlapping bars are not a ranking"
    return text
