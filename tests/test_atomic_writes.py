"""Outputs are written whole or not at all (hetsched/io/atomic.py): a trace, table or result cut off by a killed
process read as a shorter one."""

from __future__ import annotations

import os
import stat

import pandas as pd
import pytest

from hetsched.io.atomic import replacing
from hetsched.traces import GavelGenerator, read_trace
from hetsched.traces.canonical import write_canonical_frame


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_beside_it(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with replacing(path) as tmp:
            tmp.write_text("half of the ne")
            raise KeyboardInterrupt
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["out.csv"]
    with replacing(path) as tmp:
        assert tmp.name.endswith(".out.csv") and tmp.parent == path.parent     # pandas reads the extension
        tmp.write_text("new\n")
    assert path.read_text() == "new\n" and os.listdir(tmp_path) == ["out.csv"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask                 # not mkstemp's 0600


def test_a_trace_whose_write_dies_midway_is_not_replaced_by_its_first_rows(tmp_path, gavel_table, monkeypatch):
    jobs = GavelGenerator(seed=0, mean_interarrival_s=900, throughputs=gavel_table).jobs(50)
    path = tmp_path / "jobs.csv"
    frame = pd.DataFrame({"job_id": [j.job_id for j in jobs], "arrival_time_s": [j.arrival_time_s for j in jobs],
                          "job_type": [j.job_type for j in jobs], "scale_factor": 1,
                          "total_steps": [j.total_steps for j in jobs]})
    write_canonical_frame(frame, path)
    assert len(read_trace(path)) == 50
    real = pd.DataFrame.to_csv

    def dies_midway(self, target, **kw):
        real(self.head(20), target, **kw)                   # the first 20 rows reach the disk, then the process dies
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        write_canonical_frame(frame.iloc[::-1].reset_index(drop=True).assign(job_id=range(50)), path)
    assert len(read_trace(path)) == 50 and os.listdir(tmp_path) == ["jobs.csv"]
