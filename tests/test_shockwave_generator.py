"""Shockwave's trace generator regenerates the five shipped traces from their names (spec/shockwave.md s.5)."""

import subprocess
import sys

import pytest

from hetsched.errors import SpecError
from hetsched.traces import read_trace
from hetsched.traces.generators.shockwave import ShockwaveGenerator

FIELDS = ("job_type", "scale_factor", "total_steps", "mode", "priority_weight", "slo_factor", "duration_s",
          "arrival_time_s")
NAMES = {"120_0.2_5_100_40_25": ("shockwave_120_40_25", "shockwave_tacc"),
         "220_0.2_5_100_25_4": ("shockwave_220_25_4", "shockwave_wisr"),
         "460_0.2_5_100_10_1": ("shockwave_460_10_1", "shockwave_wisr"),
         "900_0.2_5_1000_5_15": ("shockwave_900_5_15", "shockwave_wisr"),
         "900_0.2_5_100_5_15": ("shockwave_900_5_15_grid100", "shockwave_wisr")}
MIXES = "_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic"


def _fields(jobs):
    return [tuple(getattr(j, k) for k in FIELDS) for j in jobs]


@pytest.mark.parametrize("prefix", NAMES)
def test_regenerates_the_shipped_trace(prefix):
    table_name, throughputs = NAMES[prefix]
    want = read_trace(f"data/traces/{table_name}.csv")          # converted from the shipped .trace (test_traces)
    got = ShockwaveGenerator.from_name(prefix + MIXES + ".trace", throughputs).jobs(len(want))
    assert _fields(got) == _fields(want)


def test_cli_writes_the_artifacts_fields(tmp_path, shared_dir):
    name = "120_0.2_5_100_40_25" + MIXES
    out = tmp_path / "g.trace"
    subprocess.run([sys.executable, "-m", "hetsched", "generate", "shockwave", "--name", name, "--out", str(out)],
                   check=True, capture_output=True)
    shipped = (shared_dir / "data/shockwave/traces" / f"{name}.trace").read_text().splitlines()
    ours = out.read_text().splitlines()
    # Columns 6-12 (steps, GPUs, mode, priority, SLO, duration, arrival) are byte-identical; the commands are
    # hetsched's workloads.
    assert [line.split("\t")[5:] for line in ours] == [line.split("\t")[5:] for line in shipped]
    assert [line.split("\t")[0] for line in ours] == [line.split("\t")[0] for line in shipped]


def test_bad_names_and_mixes():
    with pytest.raises(SpecError, match="not a Shockwave trace name"):
        ShockwaveGenerator.from_name("jobs.trace")
    with pytest.raises(SpecError, match="mode_mix"):
        ShockwaveGenerator(mode_mix=(0.5, 0.5, 0.5))
