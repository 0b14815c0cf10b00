"""One vocabulary: the papers' display name and a fixed colour for every policy, used by every figure, the
explorer and the CLI.

Registry names stay the keys (`max_min_fairness_perf`); people read the papers' names ("Gavel"). A policy has
the same colour in every figure. The Shockwave paper calls the V100-only LAS baseline "Gavel": on one GPU type
LAS and Gavel coincide, so here it is "LAS" everywhere.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

#: registry name -> (display name, colour), in legend order. Gavel's heterogeneity-aware versions of other
#: objectives are "Gavel (objective)"; "w/ SS" marks space sharing (the `_packed` variants).
VOCABULARY: dict[str, tuple[str, str]] = {
    "shockwave": ("Shockwave", "#d62728"),
    "shockwave_agnostic": ("Shockwave (type-agnostic plan)", "#ff9896"),
    "max_min_fairness": ("LAS", "#7f7f7f"),
    "max_min_fairness_perf": ("Gavel", "#1f77b4"),
    "max_min_fairness_packed": ("Gavel w/ SS", "#17becf"),
    "gandiva": ("Gandiva", "#8c564b"),
    "allox": ("AlloX", "#e377c2"),
    "allox_alpha": ("AlloX (alpha)", "#f7b6d2"),
    "gavel_fifo": ("FIFO", "#bcbd22"),
    "fifo_perf": ("Gavel (FIFO)", "#dbdb8d"),
    "fifo_packed": ("Gavel (FIFO) w/ SS", "#9edae5"),
    "finish_time_fairness": ("Themis", "#9467bd"),
    "finish_time_fairness_perf": ("Gavel (FTF)", "#2ca02c"),
    "finish_time_fairness_packed": ("Gavel (FTF) w/ SS", "#98df8a"),
    "min_total_duration": ("OSSP", "#ff7f0e"),
    "min_total_duration_perf": ("Gavel (makespan)", "#393b79"),
    "min_total_duration_packed": ("Gavel (makespan) w/ SS", "#6b6ecf"),
    "max_sum_throughput_perf": ("MST", "#8c6d31"),
    "max_sum_throughput_normalized_by_cost_perf": ("Gavel (cost)", "#637939"),
    "max_sum_throughput_normalized_by_cost_perf_SLOs": ("Gavel (cost, SLOs)", "#b5cf6b"),
    "max_sum_throughput_normalized_by_cost_packed_SLOs": ("Gavel (cost, SLOs) w/ SS", "#cedb9c"),
    "max_min_fairness_water_filling": ("LAS (hierarchical)", "#843c39"),
    "max_min_fairness_water_filling_perf": ("Gavel (hierarchical)", "#ad494a"),
    "max_min_fairness_water_filling_packed": ("Gavel (hierarchical) w/ SS", "#d6616b"),
    "gandiva_fair": ("Gandiva-Fair", "#c49c94"),
    "sia": ("Sia", "#e6ab02"),
    "pollux": ("Pollux", "#66a61e"),
    "gavel+tj": ("Gavel+TJ", "#1b9e77"),
    "themis+tj": ("Themis+TJ", "#7570b3"),
    "shockwave+tj": ("Shockwave+TJ", "#a6761d"),
    "isolated": ("Isolated", "#c7c7c7"),
    "proportional": ("Proportional", "#a5a5a5"),
}

#: Synergy's mechanisms (the suffix of `ORDERING+mechanism`) in its paper's words.
MECHANISMS = {"fair": "Proportional", "tune": "Synergy-TUNE", "opt": "Synergy-OPT", "greedy": "Greedy"}
ORDERINGS = ("FIFO", "SRTF", "LAS", "FTF", "DRF", "TETRIS")
#: One hue per Synergy ordering; its mechanisms are shades of it.
_ORDERING_SHADES = {        # in MECHANISMS' order: fair, tune, opt, greedy
    "FIFO": ("#9ecae1", "#3182bd", "#08519c", "#c6dbef"), "SRTF": ("#fdae6b", "#e6550d", "#a63603", "#fdd0a2"),
    "LAS": ("#a1d99b", "#31a354", "#006d2c", "#c7e9c0"), "FTF": ("#bcbddc", "#756bb1", "#54278f", "#dadaeb"),
    "DRF": ("#fc9272", "#de2d26", "#a50f15", "#fcbba1"), "TETRIS": ("#bdbdbd", "#636363", "#252525", "#d9d9d9"),
}
_FALLBACK = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")


def display_name(policy: str) -> str:
    """The papers' name for a registry name or alias (`max_min_fairness_perf` -> "Gavel", `FIFO+tune` ->
    "FIFO (Synergy-TUNE)"); names outside the vocabulary pass unchanged."""
    from hetsched.core.registry import resolve_policy_name

    if policy.strip().lower() in VOCABULARY:         # the elastic systems' names are not the registry's
        return VOCABULARY[policy.strip().lower()][0]
    name = resolve_policy_name(policy)
    if name in VOCABULARY:
        return VOCABULARY[name][0]
    base, *mods = name.split("+")
    if base not in ORDERINGS and not (base in VOCABULARY and mods):
        return policy
    if any(m not in MECHANISMS and m != "place" for m in mods):
        return policy
    words = [MECHANISMS[m] for m in mods if m in MECHANISMS] or [MECHANISMS["greedy"]]   # an ordering alone
    words += ["+place"] if "place" in mods else []
    head = base if base in ORDERINGS else VOCABULARY[base][0]
    return f"{head} ({', '.join(words)})"


def distinct(labels: dict[str, str]) -> dict[str, str]:
    """`labels` (name -> label), with the name appended wherever two names share a label: a table or a legend
    never shows two rows as one ("LAS (Proportional) [gavel_las+fair]", Gavel's LAS allocation with the fair
    placement, beside "LAS (Proportional) [LAS+fair]", Synergy's LAS ordering with it)."""
    count = Counter(labels.values())
    return {name: f"{label} [{name}]" if count[label] > 1 else label for name, label in labels.items()}


def display_names(policies: Iterable[str]) -> dict[str, str]:
    """`display_name` of each policy, made distinct among them."""
    return distinct({p: display_name(p) for p in dict.fromkeys(policies)})


def color(policy: str) -> str:
    """The policy's fixed colour, by registry name (aliases and composed Synergy names too)."""
    from hetsched.core.registry import resolve_policy_name

    if policy.strip().lower() in VOCABULARY:
        return VOCABULARY[policy.strip().lower()][1]
    name = resolve_policy_name(policy)
    if name in VOCABULARY:
        return VOCABULARY[name][1]
    base, *mods = name.split("+")
    mech = next((m for m in mods if m in MECHANISMS), "greedy")
    if base in _ORDERING_SHADES:
        return _ORDERING_SHADES[base][tuple(MECHANISMS).index(mech)]
    if base in VOCABULARY:                      # <Gavel policy>+tune: a darker shade of the base policy's colour
        return _darker(VOCABULARY[base][1], 0.55 if mech == "tune" else 0.75)
    return _FALLBACK[sum(map(ord, policy)) % len(_FALLBACK)]


def vocabulary_frame():
    """The vocabulary as a table: registry name, display name, aliases, description (`hetsched policies`)."""
    import pandas as pd

    from hetsched.core.registry import policy_names
    from hetsched.decide.gavel.base import ALIASES, DESCRIPTIONS

    aliases: dict[str, list[str]] = {}
    for alias, name in ALIASES.items():
        aliases.setdefault(name, []).append(alias)
    names = sorted(policy_names(), key=lambda n: (list(VOCABULARY).index(n) if n in VOCABULARY else 99, n))
    rows = [{"policy": n, "name": display_name(n), "aliases": ", ".join(aliases.get(n, [])),
             "description": DESCRIPTIONS.get(n, "")} for n in names]
    rows += [{"policy": o + m, "name": display_name(o + m), "aliases": "",
              "description": "Synergy: ordering + mechanism (also +place)"}
             for o in ORDERINGS for m in ("", "+fair", "+tune", "+opt")]
    return pd.DataFrame(rows)


def _darker(hex_colour: str, factor: float) -> str:
    rgb = [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{int(c * factor):02x}" for c in rgb)


def legend_order(labels: Iterable[str]) -> list[str]:
    """Display names in the vocabulary's order; others after them in natural order (numbers by value)."""
    rank = {display: i for i, display in enumerate(_BY_DISPLAY)}
    unique = list(dict.fromkeys(labels))
    return sorted(unique, key=lambda s: (rank.get(s, len(rank)), natural_key(s)))


def natural_key(value) -> tuple:
    """Sort key that orders numbers inside strings by value: "rounds of 360 s" before "rounds of 1440 s"."""
    if isinstance(value, (int, float)):
        return ((0, float(value), ""),)
    parts = re.split(r"(\d+(?:\.\d+)?)", str(value))
    return tuple((0, float(p), "") if i % 2 else (1, 0.0, p.lower()) for i, p in enumerate(parts) if p)


def natural_sorted(values: Iterable) -> list:
    return sorted(dict.fromkeys(values), key=natural_key)


_BY_DISPLAY = {display: name for name, (display, _) in VOCABULARY.items()}
