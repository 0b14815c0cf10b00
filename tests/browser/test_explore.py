"""The explorer in a real browser: JupyterLab on 127.0.0.1 with a token, driven by Playwright in Chromium.

Opens notebooks/explore.ipynb, runs four 300-job runs on 8:8:8 with different policies, overlays them, steps one
round after changing the policy, exports, and checks that every chart rendered and no error shows. Saves
outputs/explore.png.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import http.client
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from hetsched.runtime.launch import stop_group

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.browser


def _get(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


@pytest.fixture
def jupyter(tmp_path):
    token = secrets.token_hex(16)
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
                             "--port=0", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                             f"--ServerApp.root_dir={REPO}", "--ServerApp.disable_check_xsrf=False"],
                            env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "jupyter.log", "wb"),
                            start_new_session=True)
    # The server binds a port of its own choosing and writes it to its runtime file: a port picked here and
    # released before the server binds it can be taken by another xdist worker's server in between (CI once read
    # a gRPC server's bytes as JupyterLab's status line).
    base = None
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if base is None:
                    info = json.loads(next((tmp_path / "rt").glob("jpserver-*.json")).read_text())
                    base = f"http://127.0.0.1:{info['port']}"
                _get(f"{base}/api/status?token={token}")
                break
            except (OSError, StopIteration, ValueError, KeyError, http.client.HTTPException):
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "jupyter.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base, token
    finally:
        stop_group(proc, timeout=20)


def _wait_for_kernel(base: str, token: str, timeout: float = 90) -> None:
    """Sending keys before the kernel's websocket is up loses them: wait for a connected kernel."""
    deadline = time.monotonic() + timeout
    kernels = None
    while time.monotonic() < deadline:
        try:        # the kernels API answers 500 while a kernel is still starting on a loaded machine
            kernels = _get(f"{base}/api/kernels?token={token}")
        except OSError as exc:
            kernels = repr(exc)
        else:
            if kernels and all(k.get("connections", 0) > 0 and k.get("execution_state") == "idle" for k in kernels):
                return
        time.sleep(0.5)
    pytest.fail(f"no connected idle kernel after {timeout} s: {kernels}")


def _rendered_charts(page) -> int:
    """Charts that Vega drew (SVG with marks) in the explorer's chart area."""
    return page.evaluate("""() => [...document.querySelectorAll('.hetsched-charts .vega-embed svg')]
        .filter(s => s.querySelectorAll('path, line, rect').length > 5).length""")


def test_explorer_runs_in_the_browser(jupyter):
    """300 jobs on 8:8:8, four overlaid runs, stepping after a policy change, export; every chart renders."""
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
            page = browser.new_page(viewport={"width": 1500, "height": 1600})
            page.set_default_timeout(90_000)
            # expect() has its own 5 s default; the first widgets appear only after the kernel has imported
            # hetsched, which takes longer than that while the other xdist worker is busy.
            expect.set_options(timeout=90_000)
            requests = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(f"{base}/lab/tree/notebooks/explore.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell")
            _wait_for_kernel(base, token)
            page.locator(".jp-Notebook .jp-Cell").last.click()
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()

            def field(label: str):
                exact = re.compile(f"^{re.escape(label)}$")
                return page.locator(".widget-inline-hbox", has=page.locator("label", has_text=exact)).locator(
                    "input, select").first

            expect(field("v100")).to_be_visible()
            assert [field(t).input_value() for t in ("v100", "p100", "k80")] == ["8", "8", "8"]
            field("jobs").fill("300")
            field("jobs").press("Tab")
            run = page.locator("button.jupyter-button", has_text="Run").first
            summary = page.locator(".widget-html-content", has_text="average JCT")
            policy = field("policy")
            runs = [("max_min_fairness_perf", "Gavel"), ("max_min_fairness", "LAS"),
                    ("finish_time_fairness_perf", "Gavel (FTF)"), ("gandiva", "Gandiva")]
            for i, (name, shown) in enumerate(runs, start=1):
                policy.select_option(label=f"{shown} ({name})")
                run.click()
                expect(summary).to_contain_text(f"{i}: {shown} · gavel 2 jobs/h · 300 jobs · seed 0 · rules gavel",
                                                timeout=120_000)
                expect(summary).to_contain_text("300 jobs")
            charts = page.locator(".hetsched-charts")
            for i, (_, shown) in enumerate(runs, start=1):         # every run in the legend, never clipped
                expect(charts.locator("svg text", has_text=f"{i}: {shown} ·").first).to_be_visible()
            assert _rendered_charts(page) >= 1

            page.locator("button.jupyter-button", has_text="Step one round").click()
            view = page.locator(".jp-OutputArea-output", has_text="t = 0.00 h")
            expect(view.first).to_contain_text("Gandiva: t = 0.00 h")
            policy.select_option(label="Gavel w/ SS (max_min_fairness_packed)")
            expect(page.locator(".widget-html-content", has_text="stepping starts over")).to_have_count(1)
            page.locator("button.jupyter-button", has_text="Step one round").click()
            expect(page.locator(".jp-OutputArea-output", has_text="Gavel w/ SS: t = 0.00 h").first).to_be_visible()
            expect(page.locator(".widget-html-content", has_text="Stepping Gavel w/ SS")).to_have_count(1)

            page.locator("button.jupyter-button", has_text="Export").click()
            expect(page.locator(".widget-html-content", has_text="Exported:")).to_contain_text("runs.parquet")

            text = page.locator(".jp-Notebook").inner_text()
            for bad in ("Error", "Traceback", "Javascript Error", "MaxRowsError"):
                assert bad not in text, bad
            assert not page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count()
            (REPO / "outputs").mkdir(exist_ok=True)
            page.screenshot(path=str(REPO / "outputs" / "explore.png"), full_page=True)
            offsite = [u for u in requests if not u.startswith(base) and not u.startswith("data:")]
            assert not offsite, offsite[:5]                       # charts render with no network
        finally:
            browser.close()
    assert (REPO / "notebooks" / "explore.ipynb").read_bytes() == before
    exported = pd.read_parquet(REPO / "outputs" / "explore" / "runs.parquet")
    assert exported["run"].nunique() == 4 and len(exported) == 4 * 300
