"""Shockwave's batch-size schedules: Accordion's critical regimes and the GNS doubling table
(docs/rules.md#accordion, docs/rules.md#gns, docs/rules.md#flag-guards).

A schedule is a list of batch sizes, one per epoch. The planner's oracle profile uses `accordion_pattern`
(with its 30 % rule) and `gns_pattern`; the simulator's runtime switching (`runtime.py`) re-uses the same
regimes with the differences the artifact has.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hetsched.model.catalog import split_job_type
from hetsched.errors import SpecError

#: Samples per epoch of each model's dataset (CIFAR-10, ImageNet subset, Multi30k, Wikitext-2, ML-20M).
DATASET_SIZE = {"ResNet-18": 50_000, "ResNet-50": 100_000, "Transformer": 10_000, "LM": 59_675,
                "Recommendation": 117_907}
#: The largest batch size a model scales to, and the smallest profiled one.
MAX_BATCH = {"ResNet-18": 256, "ResNet-50": 128, "Transformer": 128, "LM": 80, "Recommendation": 8192}
MIN_BATCH = {"ResNet-18": 16, "ResNet-50": 16, "Transformer": 16, "LM": 5, "Recommendation": 512}
#: Models whose change is refused when the initial batch size is already the cap (docs/rules.md#flag-guards).
CAP_GUARDED = frozenset({"LM", "ResNet-18", "ResNet-50", "Recommendation"})


def model_and_batch(job_type: str) -> tuple[str, int]:
    """`'LM (batch size 10)'` -> `('LM', 10)`; a type without a batch size cannot adapt."""
    model, bs = split_job_type(job_type)
    if bs is None:
        raise SpecError(f"job type {job_type!r} has no batch size; dynamic adaptation needs '<model> (batch size B)'")
    return model, bs


def job_type_of(model: str, batch_size: int) -> str:
    return f"{model} (batch size {batch_size})"


def iterations_per_epoch(model: str, batch_size: int) -> int:
    """The scheduler's steps per epoch: ceil(N / bs)."""
    n = DATASET_SIZE[model]
    return -(-n // batch_size)


def _recommendation_initial(bs0: int) -> int:
    return {512: 30, 1024: 30, 2048: 40}.get(bs0, 10)


def is_critical(model: str, bs0: int, epoch: int, runtime: bool = False) -> bool:
    """Accordion's critical regimes (small batch size). At runtime, Recommendation has only its initial one
    (docs/rules.md#accordion)."""
    if model == "ResNet-18":
        return epoch < (20 if bs0 == 256 else 10) or 150 <= epoch < 160 or 250 <= epoch < 260
    if model == "ResNet-50":
        return epoch % 30 < 10
    if model == "LM":
        return epoch < 10
    if model == "Recommendation":
        initial = epoch < _recommendation_initial(bs0)
        return initial if runtime else initial or 60 <= epoch < 70 or 80 <= epoch < 90
    return True                       # Transformer (and others): Accordion never changes them


def accordion_pattern(model: str, bs0: int, epochs: int) -> list[int]:
    """The profile's Accordion schedule: the first 30 % of epochs and the critical ones at bs0, else the cap."""
    if model not in MAX_BATCH or model == "Transformer":
        return [bs0] * epochs
    big = MAX_BATCH[model]
    return [bs0 if is_critical(model, bs0, e) or e <= 0.3 * epochs else big for e in range(epochs)]


@dataclass(frozen=True)
class GnsRule:
    """One GNS table row: (model, bs0, sf) doubles at epoch boundaries once the job has > `min_epochs` epochs."""

    min_epochs: int
    segments: tuple[tuple[int, int | None, int], ...]      # (first epoch, last epoch inclusive or None, multiplier)


def gns_pattern(model: str, bs0: int, epochs: int, scale_factor: int) -> list[int]:
    """GNS's schedule with the artifact's loop semantics (docs/rules.md#gns): in later segments the last epoch
    keeps bs0."""
    out = [bs0] * epochs
    rule = gns_rules().get((model, bs0, scale_factor))
    if rule is None or epochs <= rule.min_epochs:
        return out
    for i, (first, last, mult) in enumerate(rule.segments):
        stop = epochs if last is None else last + 1
        for e in range(first, stop):
            if i == 0:
                out[e] = bs0 * mult
                if e + 1 >= epochs:
                    return _capped(out, model)
            else:
                if e + 1 >= epochs:
                    return _capped(out, model)
                out[e] = bs0 * mult
    return _capped(out, model)


def _capped(pattern: list[int], model: str) -> list[int]:
    cap = MAX_BATCH.get(model)
    return pattern if cap is None else [min(b, cap) for b in pattern]


GNS_TABLE = Path(__file__).resolve().parents[3] / "data" / "shockwave" / "gns_schedule.csv"
GNS_FIELDS = ("model", "batch_size", "scale_factor", "min_epochs", "first_epoch", "last_epoch", "multiplier")


@lru_cache(maxsize=1)
def gns_rules(path: str | None = None) -> dict[tuple[str, int, int], GnsRule]:
    """The GNS table by (model, bs0, scale factor), from `data/shockwave/gns_schedule.csv`."""
    rows: dict[tuple[str, int, int], list] = {}
    with open(path or GNS_TABLE, newline="") as f:
        for r in csv.DictReader(f):
            key = (r["model"], int(r["batch_size"]), int(r["scale_factor"]))
            last = int(r["last_epoch"]) if r["last_epoch"] else None
            rows.setdefault(key, [int(r["min_epochs"])]).append((int(r["first_epoch"]), last, int(r["multiplier"])))
    return {k: GnsRule(v[0], tuple(sorted(v[1:]))) for k, v in rows.items()}


def convert_gns_json(src: str | Path, dst: str | Path) -> int:
    """Write the artifact's GNS table (JSON: model, bs, sf, min_epochs_gt, segs [start, end excl., x, first])
    as hetsched's CSV; returns the number of segments."""
    try:
        table = json.loads(Path(src).read_text())
        rows = [(e["model"], int(e["bs"]), int(e["sf"]), int(e["min_epochs_gt"]), int(s[0]),
                 "" if s[1] is None else int(s[1]) - 1, int(s[2])) for e in table for s in e["segs"]]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise SpecError(f"{src}: not a GNS table ({exc})") from None
    with open(dst, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(GNS_FIELDS)
        w.writerows(rows)
    return len(rows)


def gns_batch_at(model: str, bs0: int, scale_factor: int, epochs: int, epoch: int) -> int:
    """`gns_pattern(model, bs0, epochs, scale_factor)[epoch]` without building the list (runtime hot path)."""
    rule = gns_rules().get((model, bs0, scale_factor))
    if rule is None or epochs <= rule.min_epochs:
        return bs0
    for i, (first, last, mult) in enumerate(rule.segments):
        if first <= epoch and (last is None or epoch <= last):
            if i > 0 and epoch + 1 >= epochs:
                return bs0
            return min(bs0 * mult, MAX_BATCH.get(model, bs0 * mult))
    return bs0


def reachable_batch_sizes(model: str, bs0: int, mode: str) -> frozenset[int]:
    """Every batch size a job of `mode` can switch to at runtime (docs/rules.md#runtime-batch-sizes): Accordion
    moves between bs0 and the model's cap, GNS doubles bs0 up to the cap; a static job keeps bs0."""
    cap = MAX_BATCH.get(model, bs0)
    if mode == "accordion" and model in DATASET_SIZE:
        return frozenset({bs0, cap})
    if mode == "gns" and model in DATASET_SIZE:
        out, b = {bs0}, bs0
        while 2 * b <= cap:
            b *= 2
            out.add(b)
        return frozenset(out)
    return frozenset({bs0})


def steps_at(model: str, steps: int, from_bs: int, to_bs: int) -> int:
    """Steps counted at `from_bs` re-counted at `to_bs`: whole epochs, a partial one counting as full, as at a
    switch (docs/rules.md#batch-size)."""
    if from_bs == to_bs:
        return int(steps)
    return -(-int(steps) // iterations_per_epoch(model, from_bs)) * iterations_per_epoch(model, to_bs)
