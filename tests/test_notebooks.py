"""Every figure notebook runs under papermill at the tiny preset and writes finite results."""

import numpy as np
import pandas as pd
import pytest

from hetsched.reproduce import figure_notebooks, reproduce

NOTEBOOKS = [p.stem for p in figure_notebooks()]

# What each notebook's results.csv must contain beyond "finite numbers".
EXPECTED_COLUMNS = {
    "motivation": {"model", "gpu_type", "relative_throughput", "relative_throughput_per_dollar"},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("outputs")
    return out, {r.name: r for r in reproduce("tiny", None, out)}


def test_index_lists_every_notebook(runs):
    out, by_name = runs
    index = (out / "index.html").read_text()
    assert set(by_name) == set(NOTEBOOKS)
    for name in NOTEBOOKS:
        assert f"{name}/figure.png" in index


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_outputs(runs, name):
    _, by_name = runs
    run = by_name[name]
    assert run.error is None, run.error
    for f in ("figure.png", "figure.svg", "results.csv", f"{name}.ipynb"):
        assert (run.out_dir / f).stat().st_size > 0, f
    assert (run.out_dir / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = pd.read_csv(run.out_dir / "results.csv")
    assert len(results) > 0
    assert EXPECTED_COLUMNS.get(name, set()) <= set(results.columns)
    numeric = results.select_dtypes("number").to_numpy()
    assert np.isfinite(numeric).all()
