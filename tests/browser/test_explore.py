"""The explorer in a real browser: JupyterLab on 127.0.0.1 with a token, driven by Playwright in Chromium.

Opens notebooks/explore.ipynb, runs it, presses Run, changes the V100 count, presses Run again and checks the
summary text and that the chart SVG changed. Saves outputs/explore.png.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


@pytest.fixture
def jupyter(tmp_path):
    port, token = _free_port(), secrets.token_hex(16)
    settings = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"autoStartDefaultKernel": True}))
    # Never write the test's outputs into the repository's notebook; no news pop-up over the page.
    for plugin, value in (("docmanager-extension/plugin", {"autosave": False}),
                          ("apputils-extension/notification", {"fetchNews": "false"})):
        path = tmp_path / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    jupyter_bin = Path(sys.executable).with_name("jupyter")
    proc = subprocess.Popen([str(jupyter_bin), "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
                             f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={REPO}",
                             "--ServerApp.disable_check_xsrf=False"],
                            env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "jupyter.log", "wb"),
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _get(f"{base}/api/status?token={token}")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "jupyter.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base, token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _wait_for_kernel(base: str, token: str, timeout: float = 90) -> None:
    """Sending keys before the kernel's websocket is up loses them: wait for a connected kernel."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kernels = _get(f"{base}/api/kernels?token={token}")
        if kernels and all(k.get("connections", 0) > 0 and k.get("execution_state") == "idle" for k in kernels):
            return
        time.sleep(0.5)
    pytest.fail(f"no connected idle kernel after {timeout} s: {kernels}")


def test_explorer_runs_in_the_browser(jupyter):
    from playwright.sync_api import expect, sync_playwright

    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: `make test` installs it with apt-get (needs root)")
        pytest.skip("chromium is not installed (the Makefile installs it)")
    before = (REPO / "notebooks" / "explore.ipynb").read_bytes()
    base, token = jupyter
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1300})
            page.set_default_timeout(90_000)
            page.goto(f"{base}/lab/tree/notebooks/explore.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell")
            _wait_for_kernel(base, token)
            page.locator(".jp-Notebook .jp-Cell").last.click()
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()

            v100 = page.locator(".widget-inline-hbox", has=page.locator("label", has_text="v100")).locator("input")
            expect(v100).to_be_visible()
            run = page.locator("button.jupyter-button", has_text="Run").first
            summary = page.locator(".widget-html-content", has_text="average JCT")

            run.click()
            expect(summary).to_contain_text("1: max_min_fairness_perf", timeout=120_000)
            chart = page.locator(".hetsched-charts svg").first
            expect(chart).to_be_visible()
            first_svg = chart.inner_html()

            v100.fill("16")
            v100.press("Tab")
            run.click()
            expect(summary).to_contain_text("v100=16", timeout=120_000)
            expect(summary).to_contain_text("2: max_min_fairness_perf")
            page.wait_for_function("(old) => { const s = document.querySelector('.hetsched-charts svg');"
                                   " return s && s.innerHTML !== old; }", arg=first_svg)
            assert chart.inner_html() != first_svg
            (REPO / "outputs").mkdir(exist_ok=True)
            page.screenshot(path=str(REPO / "outputs" / "explore.png"), full_page=True)
        finally:
            browser.close()
    assert (REPO / "notebooks" / "explore.ipynb").read_bytes() == before
