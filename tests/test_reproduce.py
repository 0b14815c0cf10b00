"""`hetsched reproduce` housekeeping: the cache under --out, --only keeps the other figures in the index, and the
index records preset, date and version."""

from __future__ import annotations

import json

import pandas as pd

from hetsched import __version__
from hetsched.cli.main import main


def test_only_runs_keep_each_other_and_record_their_preset(tmp_path, capsys):
    out = tmp_path / "elsewhere"
    for name in ("makespan_static", "fig12_policy_runtime"):
        assert main(["reproduce", "--preset", "tiny", "--only", name, "--out", str(out)]) == 0
    index = (out / "index.html").read_text()
    assert "makespan_static/figure.png" in index and "fig12_policy_runtime/figure.png" in index
    assert index.count("preset <b>tiny</b>") == 2 and f"hetsched {__version__}" in index
    manifest = json.loads((out / "runs.json").read_text())
    assert set(manifest) == {"makespan_static", "fig12_policy_runtime"}
    assert all(r["preset"] == "tiny" and r["finished"].startswith("20") for r in manifest.values())
    assert list((out / ".cache").glob("*.json"))                  # the sweep cache lives under --out
    tidy = pd.read_parquet(out / "results.parquet")                 # one table of every figure's results
    assert set(tidy["figure"]) == set(manifest) and set(tidy["preset"]) == {"tiny"}
    assert len(tidy) == sum(len(pd.read_csv(out / name / "results.csv")) for name in manifest)
    assert "TCP without encryption" not in capsys.readouterr().err
