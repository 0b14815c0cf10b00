"""Profiled columns join a measured table in its units, or not at all (docs/rules.md#relative-speed)."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from hetsched.errors import HetschedError, ThroughputError
from hetsched.io.gpu_map import apply_gpu_map
from hetsched.model.throughputs import ThroughputTable, merge_tables
from hetsched.rates.profiler import ProfileSpec, profile

A, B, C = "ResNet-18 (batch size 16)", "LM (batch size 5)", "A3C"
TOY = "hetsched workloads, width 16"


def _rows(gpu, rates, workloads=None, pairs=()):
    rows = [dict(gpu_type=gpu, placement="consolidated", job_type=j, scale_factor=1, partner_job_type=None,
                 steps_per_s=r, partner_steps_per_s=np.nan) for j, r in rates.items()]
    rows += [dict(gpu_type=gpu, placement="consolidated", job_type=a, scale_factor=1, partner_job_type=b,
                  steps_per_s=ra, partner_steps_per_s=rb) for a, b, ra, rb in pairs]
    frame = pd.DataFrame(rows)
    return frame.assign(workloads=workloads) if workloads else frame


def _write(tmp_path, name, *frames):
    path = tmp_path / name
    ThroughputTable.from_frame(pd.concat(frames, ignore_index=True), name=path.stem).write(path)
    return path


@pytest.fixture
def tables(tmp_path):
    base = _write(tmp_path, "base.parquet", _rows("v100", {A: 30.0, B: 4.0}), _rows("k80", {A: 7.0, B: 1.0}))
    prof = _write(tmp_path, "prof.csv", _rows("v100", {A: 300.0, B: 80.0, C: 50.0}, TOY),
                  _rows("a100", {A: 900.0, B: 120.0, C: 75.0}, TOY, pairs=[(A, B, 450.0, 100.0)]))
    return base, prof


def test_a_profiled_type_joins_in_the_tables_units_by_its_speed_relative_to_a_type_both_measure(tables, caplog):
    base, prof = tables
    with caplog.at_level(logging.WARNING):
        table = merge_tables([base, prof], relative_to="v100")
    assert table.gpu_types == ("a100", "k80", "v100") and table.workloads == ()    # all in the table's units
    assert table.get(A, 1, "a100") == pytest.approx(900.0 * 30.0 / 300.0)       # 3x a V100, not 30x
    assert table.get(B, 1, "a100") == pytest.approx(120.0 * 4.0 / 80.0)
    assert table.get(A, 1, "v100") == 30.0 and table.get(A, 1, "k80") == 7.0     # the table's own rates stay
    ka, kb, g = table.index((A, 1)), table.index((B, 1)), table.gpu_index("a100")
    # Each member of a pair by its own factor: the profiled co-location efficiency (0.5 and 0.833) is kept.
    assert tuple(table.colocated[ka, kb, g, 0]) == pytest.approx((450.0 * 0.1, 100.0 * 0.05))
    assert (C, 1) not in table                         # no V100 rate in the table to scale A3C by: left out, said
    assert "1 profiled rows left out" in caplog.text


def test_types_measured_on_different_workloads_are_not_merged_as_if_comparable(tables):
    base, prof = tables
    # As measured, the profile's toy V100 rates would also replace the table's own (later files win).
    blind = r"a100, v100 on hetsched workloads, width 16; k80 on the source's own models"
    with pytest.raises(ThroughputError, match=blind):
        merge_tables([base, prof])
    mixed = merge_tables([base, prof], mixed_workloads=True)
    assert mixed.basis("a100") == TOY and mixed.basis("k80") == "" and mixed.get(A, 1, "a100") == 900.0
    with pytest.raises(ThroughputError, match="no 'p100' column"):
        merge_tables([base, prof], relative_to="p100")
    wide = _write(base.parent, "wide.csv", _rows("h100", {A: 10.0}, TOY.replace("16", "64")))
    with pytest.raises(ThroughputError, match="profiled tables measured different workloads"):
        merge_tables([base, prof, wide], relative_to="v100")


def test_what_a_column_measured_survives_files_and_gpu_maps_and_one_type_cannot_hold_two(tmp_path, tables):
    _, prof = tables
    table = ThroughputTable.read(prof)
    assert table.basis("a100") == table.basis("v100") == TOY
    again = tmp_path / "again.parquet"
    table.write(again)
    assert ThroughputTable.read(again).workloads == table.workloads
    assert apply_gpu_map(table, {"h100": ("a100", 2.0)}).basis("h100") == TOY
    two = pd.concat([_rows("v100", {A: 1.0}, TOY), _rows("v100", {B: 1.0}, "hetsched workloads, width 64")])
    with pytest.raises(ThroughputError, match="GPU type 'v100' were measured on different workloads"):
        ThroughputTable.from_frame(two, name="two")


def test_a_profile_does_not_resume_a_file_of_other_workloads(tmp_path):
    path = tmp_path / "cpu.csv"
    _rows("cpu", {A: 100.0}, TOY).to_csv(path, index=False)
    with pytest.raises(HetschedError, match="width 16; this run measures hetsched workloads, width 32"):
        profile(ProfileSpec((A, B), width=32), path, progress=False)
    _rows("cpu", {A: 100.0}).to_csv(path, index=False)          # written before profiles recorded their workloads
    with pytest.raises(HetschedError, match="workloads it does not record"):
        profile(ProfileSpec((A, B)), path, progress=False)


def test_the_cli_merges_relative_to_a_type_and_refuses_a_blind_merge(tables, tmp_path):
    base, prof = tables
    out = tmp_path / "merged.parquet"
    cli = [sys.executable, "-m", "hetsched", "convert", "throughputs", str(base), str(prof), str(out)]
    blind = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert blind.returncode != 0 and "--relative-to TYPE" in blind.stderr and not out.exists()
    done = subprocess.run(cli + ["--relative-to", "v100"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ThroughputTable.read(out).get(A, 1, "a100") == pytest.approx(90.0)
