"""JupyterLab for tests: on 127.0.0.1, on a port the server picks itself, with a token, its settings and runtime
files in a temporary folder; stopped (its whole process group) when the block ends."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from hetsched.runtime.launch import stop_group


def get(url: str, timeout: float = 5.0, method: str = "GET", body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return json.loads(r.read())


@contextlib.contextmanager
def jupyter_lab(tmp_path: Path, root_dir: Path, lab_settings: dict[str, dict] | None = None, timeout_s: float = 90):
    """Yields (base URL, token). `lab_settings`: plugin id ("notebook-extension/tracker") -> its settings."""
    token = secrets.token_hex(16)
    for plugin, value in (lab_settings or {}).items():
        path = tmp_path / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    jupyter_bin = Path(sys.executable).with_name("jupyter")
    proc = subprocess.Popen([str(jupyter_bin), "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
                             "--port=0", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                             f"--ServerApp.root_dir={root_dir}", "--ServerApp.disable_check_xsrf=False"],
                            env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "jupyter.log", "wb"),
                            start_new_session=True)
    # The server binds a port of its own choosing and writes it to its runtime file: a port picked here and
    # released before the server binds it can be taken by another xdist worker's server in between (CI once read
    # a gRPC server's bytes as JupyterLab's status line).
    base = None
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if base is None:
                    info = json.loads(next((tmp_path / "rt").glob("jpserver-*.json")).read_text())
                    base = f"http://127.0.0.1:{info['port']}"
                get(f"{base}/api/status?token={token}")
                break
            except (OSError, StopIteration, ValueError, KeyError, http.client.HTTPException):
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "jupyter.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base, token
    finally:
        stop_group(proc, timeout=20)
