"""Saving one of the project's notebooks from JupyterLab leaves it as committed: no outputs, no execution counts,
no widget state, no metadata the notebook builder does not write.

This module is a Jupyter Server extension that registers `strip_outputs` as a pre-save hook. `make install` runs
`python -m hetsched.ui.clean_save`, which enables it in the environment
(`etc/jupyter/jupyter_server_config.d/hetsched.json`; an editable install cannot place that file itself; conda
users run the command once). Only notebooks that `notebooks/_build.py` wrote are touched: they carry
`metadata.hetsched.clean_on_save`. Papermill's executed copies (in `outputs/`) keep that mark but also carry
`metadata.papermill`, and keep their outputs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: The builder's notebook metadata, which a save restores (JupyterLab writes its kernel's display name), and the
#: cell metadata a save keeps (papermill's parameters tag).
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
MARK = {"clean_on_save": True}
CELL_KEYS = ("tags",)


def is_clean_on_save(notebook: dict) -> bool:
    meta = notebook.get("metadata") or {}
    return bool((meta.get("hetsched") or {}).get("clean_on_save")) and "papermill" not in meta


def strip_outputs(model: dict, path: str = "", contents_manager=None, **_) -> None:
    """Jupyter Server's pre-save hook: strip `model`'s notebook in place if the builder marked it."""
    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    notebook = model["content"]
    if not is_clean_on_save(notebook):
        return
    notebook["metadata"] = {"hetsched": dict(MARK), "kernelspec": dict(KERNELSPEC)}
    for cell in notebook.get("cells", []):
        cell["metadata"] = {k: v for k, v in (cell.get("metadata") or {}).items() if k in CELL_KEYS}
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None


def _jupyter_server_extension_points() -> list[dict]:
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp) -> None:
    serverapp.contents_manager.register_pre_save_hook(strip_outputs)


def install(prefix: str | None = None) -> Path:
    """Enable this extension in the environment's `etc/jupyter` (where Jupyter Server finds extensions). Returns the
    file written."""
    path = Path(prefix or sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d" / "hetsched.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"ServerApp": {"jpserver_extensions": {"hetsched.ui.clean_save": True}}}, indent=2)
                    + "\n")
    return path


if __name__ == "__main__":
    print(f"Jupyter saves hetsched's notebooks without outputs: {install()}")
