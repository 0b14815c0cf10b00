"""The project's notebooks saved from Jupyter stay as committed (hetsched/ui/clean_save.py): outputs, execution
counts, widget state and the kernel's display name are not written; papermill's executed copies and other notebooks
keep everything."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat

from hetsched.ui import clean_save
from jupyter_lab import get, jupyter_lab

REPO = Path(__file__).resolve().parents[1]


def _run(notebook: dict) -> dict:
    """The notebook as a kernel and JupyterLab leave it: outputs, counts, widget state, cell and kernel metadata."""
    ran = copy.deepcopy(notebook)
    ran["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    ran["metadata"]["kernelspec"]["display_name"] = "Python 3 (ipykernel)"
    ran["metadata"]["language_info"] = {"name": "python", "version": "3.11.7"}
    for i, cell in enumerate(ran["cells"]):
        cell["metadata"]["scrolled"] = True
        if cell["cell_type"] == "code":
            cell["execution_count"] = i + 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": f"cell {i}\n"}]
    return ran


def _model(notebook: dict) -> dict:
    return {"type": "notebook", "format": "json", "content": notebook}


def test_a_marked_notebook_is_saved_as_built():
    built = json.loads((REPO / "notebooks" / "explore.ipynb").read_text())
    model = _model(_run(built))
    clean_save.strip_outputs(model=model, path="notebooks/explore.ipynb")
    assert model["content"] == built


def test_papermills_copies_and_other_notebooks_keep_their_outputs():
    built = json.loads((REPO / "notebooks" / "explore.ipynb").read_text())
    executed = _run(built)
    executed["metadata"]["papermill"] = {"parameters": {}}
    unmarked = _run(built)
    del unmarked["metadata"]["hetsched"]
    for notebook in (executed, unmarked):
        model = _model(copy.deepcopy(notebook))
        clean_save.strip_outputs(model=model, path="x.ipynb")
        assert model["content"] == notebook
    text = {"type": "file", "format": "text", "content": "outputs"}
    clean_save.strip_outputs(model=text, path="a.txt")
    assert text["content"] == "outputs"


def test_install_enables_the_extension(tmp_path):
    path = clean_save.install(str(tmp_path))
    assert path == tmp_path / "etc" / "jupyter" / "jupyter_server_config.d" / "hetsched.json"
    assert json.loads(path.read_text()) == {"ServerApp": {"jpserver_extensions": {"hetsched.ui.clean_save": True}}}


def test_jupyter_server_saves_a_run_notebook_as_built(tmp_path):
    """Through Jupyter Server's contents API, as JupyterLab saves: the file on disk is the builder's, byte for byte.
    Needs the extension enabled in this environment (`make install` runs `python -m hetsched.ui.clean_save`)."""
    root = tmp_path / "root"
    root.mkdir()
    source = REPO / "notebooks" / "explore.ipynb"
    (root / "explore.ipynb").write_bytes(source.read_bytes())
    built = json.loads(source.read_text())
    with jupyter_lab(tmp_path, root) as (base, token):
        get(f"{base}/api/contents/explore.ipynb?token={token}", method="PUT", body=_model(_run(built)))
        get(f"{base}/api/contents/other.ipynb?token={token}", method="PUT",
            body=_model({**_run(built), "metadata": {"kernelspec": built["metadata"]["kernelspec"]}}))
    assert (root / "explore.ipynb").read_bytes() == source.read_bytes(), (
        "the save kept the run's outputs: is the extension enabled (`python -m hetsched.ui.clean_save`)?")
    other = nbformat.read(root / "other.ipynb", as_version=4)
    assert [c.get("execution_count") for c in other.cells if c.cell_type == "code"][0] is not None
