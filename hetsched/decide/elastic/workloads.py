"""The paper's elastic job traces by name (`helios-3`, `philly-1`, `newtrace-7`; data/sia/workloads.parquet), or a
workload file in Sia's format (name,time,application,num_replicas,batch_size) or ours."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pandas as pd

from hetsched.decide.elastic.convert import WORKLOAD_COLUMNS, read_sia_workload
from hetsched.errors import HetschedError


@lru_cache(maxsize=2)
def _table(path: str) -> pd.DataFrame:
    return pd.read_parquet(path)


def workload_names() -> list[str]:
    from hetsched.model.throughputs import data_dir

    return list(dict.fromkeys(_table(str(data_dir() / "sia" / "workloads.parquet"))["workload"]))


def load_workload(name: str) -> pd.DataFrame:
    """A named workload of the paper, or a CSV/Parquet file of one."""
    path = Path(name)
    if path.suffix in (".csv", ".parquet") and path.exists():
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
            missing = set(WORKLOAD_COLUMNS[2:]) - set(frame.columns)
            if missing:
                raise HetschedError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
            return frame
        head = path.read_text().split("\n", 1)[0]
        if "application" in head:
            return read_sia_workload(path)
        return pd.read_csv(path)
    from hetsched.model.throughputs import data_dir

    table = _table(str(data_dir() / "sia" / "workloads.parquet"))
    rows = table[table["workload"] == name.strip().lower()]
    if rows.empty:
        names = workload_names()
        raise HetschedError(f"workload {name!r}: not a file, and not one of the paper's {len(names)} workloads "
                            f"({names[0]} .. {names[-1]}; helios-1..10, philly-1..8, newtrace-1..10)")
    return rows.reset_index(drop=True)
