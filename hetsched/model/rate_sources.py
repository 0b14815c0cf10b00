"""Where a job type's rates exist (docs/rules.md#catalogues): the papers' names of one model are aliases of each
other (`ResNet-18`, `resnet18`, `res18`), so a refusal for a type one table lacks names the tables and profiles
that have it, under any of its names."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Iterable, Mapping

from hetsched.model.catalog import SYNERGY_MODELS, split_job_type


@functools.lru_cache(maxsize=4)
def model_aliases(data: Path) -> dict[str, str]:
    """Every spelling of a model, casefolded and without '-'/'_' -> its family name: Gavel's models and those
    Synergy's profiles hold under another name where `data/resources/gavel_models.csv` says they are the same
    network (`res18` -> `ResNet-18`); other models are their own family."""
    import pandas as pd

    pairs = pd.read_csv(data / "resources" / "gavel_models.csv")
    same = pairs[pairs["why"].str.startswith("the same")]
    aliases = {_fold(m): m for m in SYNERGY_MODELS}
    aliases.update({_fold(s): g for g, s in zip(same["gavel_model"], same["synergy_model"])})
    aliases.update({_fold(g): g for g in same["gavel_model"]})
    return aliases


def _fold(name: str) -> str:
    return name.casefold().replace("-", "").replace("_", "")


def family(job_type: str, data: Path) -> str:
    """The model family of a job type in any catalogue's spelling (`'ResNet-18 (batch size 32)'`, `'res18'` ->
    `'ResNet-18'`); `data` is the project's data folder."""
    model = split_job_type(job_type)[0]
    return model_aliases(data).get(_fold(model), model)


def rate_sources(job_type: str, tables: Mapping[str, Iterable[str]], data: Path) -> list[str]:
    """The rate sources that time `job_type`'s family, of the throughput tables `tables` (name -> job types;
    `--throughputs NAME`) and Synergy's profiles (its server rounds), in words a refusal can print."""
    want = family(job_type, data)
    have = [name for name, types in tables.items() if any(family(t, data) == want for t in types)]
    sources = [f"the throughput tables {', '.join(have)} (--throughputs NAME)"] if have else []
    if any(family(m, data) == want for m in SYNERGY_MODELS):
        sources.append("Synergy's profiles (an ordering under Synergy's rules, e.g. 'fifo+tune' --rules synergy)")
    return sources
