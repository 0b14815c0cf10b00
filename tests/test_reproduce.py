"""`hetsched reproduce` housekeeping: the cache under --out, --only keeps the other figures in the index, and the
index records preset, date and version."""

from __future__ import annotations

import json
import logging

import pandas as pd

from hetsched import __version__
from hetsched.cli.main import main


def test_only_runs_keep_each_other_and_record_their_preset(tmp_path, capsys, caplog):
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
    # Each call's notebooks had one Dask cluster, on loopback, for their sweeps; it is gone once the call returns.
    for name in manifest:
        address = _injected(out / name / f"{name}.ipynb").get("dask_address", "")
        assert address.startswith("tcp://127.0.0.1:") and not _listens(address)
    assert not [r for r in caplog.records if r.name.startswith("distributed") and r.levelno < logging.WARNING]


def test_one_dask_cluster_serves_a_calls_notebooks_unless_the_caller_chose():
    from dask.distributed import Client

    from hetsched.experiments.reproduce import _one_dask_cluster

    for chosen in ({"use_dask": False}, {"dask_address": "tcp://127.0.0.1:8786"}, {"dask_address": None}):
        with _one_dask_cluster(chosen) as address:
            assert address is None
    with _one_dask_cluster(None) as address:
        with Client(address, timeout=30) as client:
            assert len(client.scheduler_info()["workers"]) == 2
            assert client.submit(sum, [1, 2]).result(timeout=30) == 3
    assert not _listens(address)


def _listens(address: str) -> bool:
    import socket

    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(5)
        return s.connect_ex((host, int(port))) == 0


def _injected(path):
    """The parameters that papermill injected into an executed notebook."""
    import ast

    cells = json.loads(path.read_text())["cells"]
    cell = next(c for c in cells if "injected-parameters" in c["metadata"].get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)}


def test_a_cell_past_its_time_fails_its_notebook_with_the_reason_and_the_paper_preset_sets_no_limit(tmp_path):
    """A paper-preset sweep ran past papermill's hour and the whole `reproduce` ended with an empty error: now the
    notebook is recorded as failed with why, and the paper preset has no per-cell limit."""
    import nbformat

    from hetsched.experiments.reproduce import CELL_TIMEOUT_S, run_notebook

    book = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("preset = 'tiny'")
    params.metadata["tags"] = ["parameters"]
    book.cells = [params, nbformat.v4.new_code_cell("import time\ntime.sleep(60)")]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "slow.ipynb"
    nbformat.write(book, str(path))
    run = run_notebook(path, tmp_path / "out", "tiny", timeout_s=2)
    assert run.error is not None and "longer than 2 s" in run.error
    assert CELL_TIMEOUT_S["paper"] is None and CELL_TIMEOUT_S["quick"] == 3600
